// `pagoda bench structured --jsonschemabench DIR`: coverage of real-world schemas. Each schema of
// each category is compiled (timed); a compiled one gets one generation of random tokens among
// those the mask allows (each mask timed), which python3-jsonschema then validates
// (tests/structured/validate_outputs.py): the mask, not a model, decides validity.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <vector>

#include "bench/structured_bench.h"
#include "core/error.h"
#include "structured/compile.h"
#include "tokenizer/tokenizer.h"
#include "core/build_paths.h"

namespace pagoda::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct Category {
  int total = 0, compiled = 0, finished = 0, valid = 0;
  int walk_errors = 0;  // walks stopped by the matcher's own budget (the request would get an error)
  std::vector<double> compile_us, mask_us;
  std::map<std::string, int> errors;
};

// (checked, failed) from the validator's last line "checked N, failed M".
std::pair<int, int> validate(const std::string& path) {
  const std::string cmd = "python3 " + std::string(PAGODA_SOURCE_DIR) + "/tests/structured/validate_outputs.py " + path;
  FILE* p = popen(cmd.c_str(), "r");
  check(p != nullptr, "bench structured: cannot run " + cmd);
  char line[4096];
  int checked = 0, failed = 0;
  while (std::fgets(line, sizeof line, p)) std::sscanf(line, "checked %d, failed %d", &checked, &failed);
  pclose(p);
  return {checked, failed};
}

}  // namespace

void run_jsonschemabench(const StructuredBenchArgs& a) {
  fs::path data = fs::path(a.jsonschemabench_dir) / "data";
  if (!fs::is_directory(data)) data = a.jsonschemabench_dir;
  check(fs::is_directory(data), "bench structured: " + a.jsonschemabench_dir + " has no data/ folder of categories");
  const std::string tok_dir = a.tokenizer_dir.empty() ? std::string(PAGODA_SOURCE_DIR) + "/models/default" : a.tokenizer_dir;
  auto tok = Tokenizer::load_dir(tok_dir);
  std::vector<int32_t> eos;
  for (const char* t : {"<|im_end|>", "<|endoftext|>", "</s>", "<eos>"})
    if (auto id = tok->token_to_id(t)) eos.push_back(*id);
  check(!eos.empty(), "bench structured: the tokenizer has no end-of-sequence token pagoda knows");
  auto trie = std::make_shared<structured::TokenTrie>(structured::vocabulary_bytes(*tok, eos));
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(data))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  std::mt19937_64 rng(a.seed);
  structured::TokenMask mask;
  std::vector<int32_t> allowed;
  std::map<std::string, Category> cats;
  const int max_steps = std::max(a.max_steps, 1);
  for (const fs::path& dir : dirs) {
    Category& cat = cats[dir.filename().string()];
    const std::string out_path = (fs::temp_directory_path() / ("jsonschemabench_" + dir.filename().string() + ".jsonl")).string();
    std::ofstream out(out_path);
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      std::ifstream f(file);
      std::stringstream ss;
      ss << f.rdbuf();
      const std::string text = ss.str();
      ++cat.total;
      std::shared_ptr<structured::GrammarRuntime> rt;
      auto t0 = Clock::now();
      try {
        rt = std::make_shared<structured::GrammarRuntime>(
            structured::compile_constraint({structured::ConstraintKind::kJsonSchema, text, {}}), trie, eos);
        structured::Matcher probe(rt);
      } catch (const Error& e) {
        std::string m = e.what();
        cat.errors[m.substr(0, std::min<size_t>(m.size(), 100))]++;
        continue;
      }
      cat.compile_us.push_back(us_since(t0));
      ++cat.compiled;
      structured::Matcher m(rt);
      std::string output;
      bool done = false;
      try {
        for (int step = 0; step < max_steps && !done; ++step) {
          t0 = Clock::now();
          m.fill_mask(mask, max_steps - step);
          cat.mask_us.push_back(us_since(t0));
          structured::allowed_ids(mask, allowed);
          if (allowed.empty()) break;
          int32_t t = allowed[rng() % allowed.size()];
          if (m.accepting() && rng() % 2 == 0) t = eos[0];
          if (!m.accept(t)) break;
          if (std::find(eos.begin(), eos.end(), t) != eos.end()) done = true;
          else output += trie->bytes(t);
        }
      } catch (const Error& e) {
        ++cat.walk_errors;
        std::string msg = e.what();
        cat.errors["(walk) " + msg.substr(0, std::min<size_t>(msg.size(), 93))]++;
        continue;
      }
      if (!done) continue;
      ++cat.finished;
      nlohmann::json rec{{"kind", "schema"}, {"output", output}};
      rec["spec"] = nlohmann::json::parse(text);
      out << rec.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
    out.close();
    std::fprintf(stderr, "%s: %d schemas, %d compiled, %d walks finished, %d stopped by the matcher's budget\n",
                 dir.filename().c_str(), cat.total, cat.compiled, cat.finished, cat.walk_errors);
    const auto [checked, failed] = validate(out_path);
    cat.valid = checked - failed;
  }
  std::printf("%-18s %7s %9s %9s %9s %12s %12s %10s\n", "category", "schemas", "compiled", "finished", "valid",
              "compile p50", "compile p99", "mask p99");
  Category all;
  for (auto& [name, c] : cats) {
    std::printf("%-18s %7d %8.1f%% %8.1f%% %8.1f%% %10.0fus %10.0fus %8.0fus\n", name.c_str(), c.total,
                100.0 * c.compiled / std::max(c.total, 1), 100.0 * c.finished / std::max(c.total, 1),
                100.0 * c.valid / std::max(c.total, 1), percentile(c.compile_us, 0.5), percentile(c.compile_us, 0.99),
                percentile(c.mask_us, 0.99));
    all.total += c.total, all.compiled += c.compiled, all.finished += c.finished, all.valid += c.valid;
    all.compile_us.insert(all.compile_us.end(), c.compile_us.begin(), c.compile_us.end());
    all.mask_us.insert(all.mask_us.end(), c.mask_us.begin(), c.mask_us.end());
    for (auto& [e, n] : c.errors) all.errors[e] += n;
  }
  std::printf("%-18s %7d %8.1f%% %8.1f%% %8.1f%% %10.0fus %10.0fus %8.0fus\n", "all", all.total,
              100.0 * all.compiled / std::max(all.total, 1), 100.0 * all.finished / std::max(all.total, 1),
              100.0 * all.valid / std::max(all.total, 1), percentile(all.compile_us, 0.5),
              percentile(all.compile_us, 0.99), percentile(all.mask_us, 0.99));
  std::vector<std::pair<int, std::string>> errs;
  for (auto& [e, n] : all.errors) errs.emplace_back(n, e);
  std::sort(errs.rbegin(), errs.rend());
  std::printf("\nmost common refusals:\n");
  for (size_t i = 0; i < errs.size() && i < 15; ++i) std::printf("%6d  %s\n", errs[i].first, errs[i].second.c_str());
}

}  // namespace pagoda::bench

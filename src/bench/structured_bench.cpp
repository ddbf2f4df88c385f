#include "bench/structured_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "structured/compile.h"
#include "tokenizer/tokenizer.h"
#include "core/build_paths.h"

namespace pagoda::bench {
namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

void run_structured_bench(const StructuredBenchArgs& a) {
  const std::string src = PAGODA_SOURCE_DIR;
  const std::string tok_dir = a.tokenizer_dir.empty() ? src + "/tests/data/qwen3-tokenizer" : a.tokenizer_dir;
  const std::string schemas_file = a.schemas_file.empty() ? src + "/tests/structured/schemas.json" : a.schemas_file;
  auto tok = Tokenizer::load_dir(tok_dir);
  std::ifstream f(schemas_file);
  check(f.good(), "bench structured: cannot read " + schemas_file);
  const nlohmann::json schemas = nlohmann::json::parse(f);
  std::vector<int32_t> eos;
  for (const char* t : {"<|im_end|>", "<|endoftext|>"})
    if (auto id = tok->token_to_id(t)) eos.push_back(*id);
  auto t0 = Clock::now();
  auto trie = std::make_shared<structured::TokenTrie>(structured::vocabulary_bytes(*tok, eos));
  std::printf("vocabulary %d tokens, trie %zu nodes, built in %.1f ms\n", tok->vocab_size(), trie->nodes().size(),
              us_since(t0) / 1000);
  // The same walks (same seeds, so the same tokens: the masks are equal) twice: token classes off
  // (each state's first mask the plain walk of the whole trie, as before them), then on.
  for (const bool classes : {false, true}) {
    std::vector<double> compile_us, mask_us, first_mask_us;
    std::mt19937_64 rng(a.seed);
    structured::TokenMask mask;
    std::vector<int32_t> allowed;
    // A fresh vocabulary (and with it a fresh cache of classes shared across grammars) per mode.
    auto trie_now = classes ? std::make_shared<structured::TokenTrie>(structured::vocabulary_bytes(*tok, eos)) : trie;
    for (const auto& schema : schemas) {
      t0 = Clock::now();
      auto rt = std::make_shared<structured::GrammarRuntime>(
          structured::compile_constraint({structured::ConstraintKind::kJsonSchema, schema.dump(), {}, {}, true}), trie_now, eos);
      rt->set_token_classes(classes);
      structured::Matcher probe(rt);
      compile_us.push_back(us_since(t0));
      for (int w = 0; w < a.walks_per_schema; ++w) {
        structured::Matcher m(rt);
        for (int step = 0; step < a.max_steps; ++step) {
          t0 = Clock::now();
          m.fill_mask(mask);
          const double us = us_since(t0);
          (step == 0 && w == 0 ? first_mask_us : mask_us).push_back(us);
          structured::allowed_ids(mask, allowed);
          if (allowed.empty()) break;
          int32_t t = allowed[rng() % allowed.size()];
          if (m.accepting() && rng() % 2 == 0) t = eos[0];
          if (!m.accept(t) || m.finished()) break;
        }
      }
    }
    std::printf("\n%s\n", classes ? "token classes (context-independent tokens decided once per grammar position)"
                                    : "baseline: plain trie walk for each state's first mask (token classes off)");
    std::printf("schemas %zu, walks %d each, mask steps %zu\n", schemas.size(), a.walks_per_schema, mask_us.size());
    std::printf("compile (schema -> grammar -> automaton + first expansion): median %.0f us, p99 %.0f us, max %.0f us\n",
                percentile(compile_us, 0.5), percentile(compile_us, 0.99), percentile(compile_us, 1.0));
    std::printf("first mask of a fresh grammar (cold): median %.0f us, p99 %.0f us\n", percentile(first_mask_us, 0.5),
                percentile(first_mask_us, 0.99));
    std::printf("mask per token (after the first): median %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us, total %.1f ms\n",
                percentile(mask_us, 0.5), percentile(mask_us, 0.9), percentile(mask_us, 0.99), percentile(mask_us, 1.0),
                std::accumulate(mask_us.begin(), mask_us.end(), 0.0) / 1000);
  }
}

}  // namespace pagoda::bench

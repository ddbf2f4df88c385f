// `pagoda perplexity MODEL_DIR --file TEXT`: perplexity over a text with a sliding window, as
// Hugging Face's perplexity guide computes it (window --ctx, step --stride, each token scored once
// with up to ctx - stride tokens of context). `--token-ids-file` scores given sequences whole, and
// `--logits-out` dumps every position's fp32 logits (for parity checks against transformers).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_source.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/scorer.h"

namespace pagoda::cli {
namespace {

struct PerplexityArgs {
  std::string model_dir, text_file, ids_file, logits_out;
  ModelSourceFlags source;
  int32_t ctx = 512, stride = 256;
  std::string device = "cpu", kv_cache_dtype = "auto", quantization;
  int32_t threads = 0;
  std::string dtype = "auto";
};

// -log p(target) from one logits row, in double precision.
double nll(std::span<const float> row, int32_t target) {
  double mx = row[0];
  for (float v : row) mx = std::max(mx, static_cast<double>(v));
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - mx);
  return std::log(sum) + mx - static_cast<double>(row[static_cast<size_t>(target)]);
}

std::vector<std::vector<int32_t>> read_ids_file(const std::string& path) {
  std::ifstream in(path);
  check(static_cast<bool>(in), "cannot open --token-ids-file '" + path + "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": " + e.what());
  }
  check(j.is_array() && !j.empty(), path + ": expected a JSON array of token ids, or of arrays of them");
  if (j[0].is_number()) return {j.get<std::vector<int32_t>>()};
  return j.get<std::vector<std::vector<int32_t>>>();
}

void run_perplexity(const PerplexityArgs& a) {
  check(a.text_file.empty() != a.ids_file.empty(), "give exactly one of --file TEXT or --token-ids-file F");
  check(a.ctx >= 2 && a.stride >= 1 && a.stride <= a.ctx, "need --ctx >= 2 and 1 <= --stride <= --ctx");
  const std::string dir = resolve_model(a.model_dir, a.source);
  EngineConfig flags;
  flags.device = a.device;
  flags.num_threads = a.threads;
  flags.dtype = a.dtype;
  flags.kv_cache_dtype = a.kv_cache_dtype;
  ModelConfig config = load_model_config(dir);
  apply_quantization_flag(a.quantization, config.quantization);
  const ResolvedEngineConfig rc = resolve_engine_config(flags, config);
  std::fprintf(stderr, "[pagoda] %s\n", rc.describe().c_str());
  if (config.quantization.method != WeightQuantization::Method::None) std::fprintf(stderr, "[pagoda] weights: %s\n", config.quantization.describe().c_str());
  auto backend = make_backend(rc.device, rc.num_threads, rc.dtype_flag);
  auto model = load_model(config, Checkpoint::open_dir(dir), *backend);

  std::vector<std::vector<int32_t>> windows;  // each scored from a fresh sequence
  std::vector<int32_t> first_target;           // per window: first position whose target counts
  if (!a.ids_file.empty()) {
    for (auto& ids : read_ids_file(a.ids_file)) {
      windows.push_back(std::move(ids));
      first_target.push_back(0);
    }
  } else {
    auto tok = Tokenizer::load_dir(dir);
    std::ifstream in(a.text_file);
    check(static_cast<bool>(in), "cannot open --file '" + a.text_file + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::vector<int32_t> ids = tok->encode(ss.str());
    check(ids.size() >= 2, a.text_file + " has fewer than 2 tokens");
    const int32_t n = static_cast<int32_t>(ids.size());
    // HF's sliding window: window [begin, end) scores the targets not scored by the previous one.
    for (int32_t begin = 0, prev_end = 0; begin < n; begin += a.stride) {
      const int32_t end = std::min(begin + a.ctx, n);
      const int32_t trg_len = end - prev_end;
      windows.emplace_back(ids.begin() + begin, ids.begin() + end);
      first_target.push_back(std::max(0, (end - begin) - trg_len - 1));
      prev_end = end;
      if (end == n) break;
    }
    std::fprintf(stderr, "[pagoda] %d tokens, %zu windows of up to %d (stride %d)\n", n,
                 windows.size(), a.ctx, a.stride);
  }
  int32_t max_len = 0;
  for (const auto& w : windows) max_len = std::max(max_len, static_cast<int32_t>(w.size()));
  Scorer scorer(*backend, *model, max_len, std::min(max_len, 512),
                rc.kv_cache_dtype);

  std::ofstream logits_out;
  if (!a.logits_out.empty()) {
    logits_out.open(a.logits_out, std::ios::binary);
    check(static_cast<bool>(logits_out), "cannot write --logits-out '" + a.logits_out + "'");
  }
  double total = 0;
  int64_t count = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    const auto& ids = windows[w];
    scorer.score(ids, [&](int32_t p, std::span<const float> row) {
      if (logits_out.is_open())
        logits_out.write(reinterpret_cast<const char*>(row.data()),
                         static_cast<std::streamsize>(row.size() * sizeof(float)));
      if (p + 1 < static_cast<int32_t>(ids.size()) && p >= first_target[w]) {
        total += nll(row, ids[static_cast<size_t>(p) + 1]);
        ++count;
      }
    });
    std::fprintf(stderr, "\r[pagoda] window %zu/%zu, running perplexity %.4f", w + 1,
                 windows.size(), count ? std::exp(total / count) : 0.0);
  }
  std::fprintf(stderr, "\n");
  check(count > 0, "nothing to score: every sequence has a single token");
  std::printf("perplexity %.6f over %lld tokens (mean nll %.6f)\n", std::exp(total / count),
              static_cast<long long>(count), total / count);
}

}  // namespace

void add_perplexity_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a text (sliding window, like HF)");
  auto args = std::make_shared<PerplexityArgs>();
  cmd->add_option("model_dir", args->model_dir,
                  "Checkpoint directory, or a Hugging Face model id org/name (default: models/default)");
  cmd->add_option("--model", args->model_dir, "Same as MODEL_DIR");
  add_model_source_flags(cmd, args->source);
  cmd->add_option("--file", args->text_file, "Text file to score");
  cmd->add_option("--token-ids-file", args->ids_file,
                  "JSON token ids (an array, or an array of arrays) to score whole");
  cmd->add_option("--ctx", args->ctx, "Window length in tokens")->capture_default_str();
  cmd->add_option("--stride", args->stride, "Window step in tokens")->capture_default_str();
  cmd->add_option("--logits-out", args->logits_out, "Write every position's fp32 logits here");
  cmd->add_option("--device", args->device, "cpu, cuda or vulkan[:N]")->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)");
  cmd->add_option("--dtype", args->dtype, "Activation dtype: auto, bfloat16 (cuda) or float32")
      ->capture_default_str();
  cmd->add_option("--kv-cache-dtype", args->kv_cache_dtype, "auto, bf16, fp16, fp32 or fp8 (cpu, cuda)");
  cmd->add_option("--quantization,-q", args->quantization, "fp8: the projections quantized to FP8 at load");
  cmd->callback([args, exit_code] {
    run_perplexity(*args);
    *exit_code = 0;
  });
}

}  // namespace pagoda::cli

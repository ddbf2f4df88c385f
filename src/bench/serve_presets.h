// Named workloads for `pagoda bench serve --preset NAME`: the profiles that decide a GPU's cost,
// exactly as published, so that anyone can rerun them by name against any OpenAI-compatible server.
// The first three are gpustack's performance-lab profiles (docs/performance.md, where vLLM's figures
// for them are); sharegpt-like is ours (the real ShareGPT set cannot be fetched by the tests).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/serve_bench.h"

namespace pagoda::bench {

struct ServePreset {
  const char* name;
  const char* what;  // one line, for --help and the report
  const char* dataset;
  int32_t num_prompts;
  int32_t input_len, output_len;  // random only
  double request_rate;            // requests/s; infinity: all at once
  int32_t max_concurrency;        // 0: no limit
};

const std::vector<ServePreset>& serve_presets();
// "throughput | long-context | …", for --help and errors.
std::string serve_preset_names();

// Sets what preset `name` defines in `opt`, except the settings for which `set_by_flag(flag)` says
// the command line gave a value (an explicit flag wins). Throws pagoda::Error for an unknown name,
// listing the known ones.
void apply_serve_preset(const std::string& name, ServeBenchOptions& opt,
                        const std::function<bool(const std::string& flag)>& set_by_flag);

}  // namespace pagoda::bench

#include "bench/serve_presets.h"

#include <limits>

#include "core/error.h"

namespace pagoda::bench {

namespace {
constexpr double kAllAtOnce = std::numeric_limits<double>::infinity();
}  // namespace

const std::vector<ServePreset>& serve_presets() {
  static const std::vector<ServePreset> presets = {
      {"throughput", "random 1,024 in / 128 out, 1,000 requests at once (gpustack)", "random", 1000, 1024, 128,
       kAllAtOnce, 0},
      {"long-context", "random 32,000 in / 100 out, 100 requests at 1 request/s (gpustack)", "random", 100, 32000,
       100, 1.0, 0},
      {"generation-heavy", "random 1,000 in / 2,000 out, 200 requests at 1 request/s (gpustack)", "random", 200,
       1000, 2000, 1.0, 0},
      {"sharegpt-like", "ShareGPT-like lengths, 1,000 requests, concurrency 512", "sharegpt-like", 1000, 0, 0,
       kAllAtOnce, 512},
  };
  return presets;
}

std::string serve_preset_names() {
  std::string names;
  for (const ServePreset& p : serve_presets()) names += (names.empty() ? "" : " | ") + std::string(p.name);
  return names;
}

void apply_serve_preset(const std::string& name, ServeBenchOptions& opt,
                        const std::function<bool(const std::string& flag)>& set_by_flag) {
  const ServePreset* preset = nullptr;
  for (const ServePreset& p : serve_presets())
    if (name == p.name) preset = &p;
  if (!preset) throw Error("bench serve: unknown --preset '" + name + "' (known: " + serve_preset_names() + ")");
  auto keep = [&](const char* flag) { return set_by_flag(flag); };
  if (!keep("--dataset-name")) opt.dataset.name = preset->dataset;
  if (!keep("--num-prompts")) opt.dataset.num_prompts = preset->num_prompts;
  if (std::string(preset->dataset) == "random") {
    if (!keep("--random-input-len")) opt.dataset.input_len = preset->input_len;
    if (!keep("--random-output-len")) opt.dataset.output_len = preset->output_len;
    if (!keep("--random-range-ratio")) opt.dataset.range_ratio = 0.0;  // fixed lengths, as published
  }
  if (!keep("--request-rate")) opt.request_rate = preset->request_rate;
  if (!keep("--max-concurrency")) opt.max_concurrency = preset->max_concurrency;
  if (opt.label.empty()) opt.label = preset->name;
}

}  // namespace pagoda::bench

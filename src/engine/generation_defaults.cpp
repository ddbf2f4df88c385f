#include "engine/generation_defaults.h"

namespace pagoda {

SamplingParams with_generation_defaults(SamplingParams p, const ModelConfig& config) {
  const ModelConfig::GenerationDefaults& d = config.generation_defaults;
  if (d.temperature) p.temperature = *d.temperature;
  if (d.top_p) p.top_p = *d.top_p;
  if (d.top_k) p.top_k = static_cast<int32_t>(*d.top_k);
  if (d.min_p) p.min_p = *d.min_p;
  if (d.repetition_penalty) p.repetition_penalty = *d.repetition_penalty;
  return p;
}

}  // namespace pagoda

// The checkpoint's recommended sampling values (generation_config.json) as request defaults.
#pragma once

#include "engine/sampling_params.h"
#include "io/model_config.h"

namespace pagoda {

// `base` with every value the checkpoint recommends in place of the built-in default.
SamplingParams with_generation_defaults(SamplingParams base, const ModelConfig& config);

}  // namespace pagoda

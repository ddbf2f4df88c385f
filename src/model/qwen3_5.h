// Qwen3.5 (hybrid): Gated DeltaNet layers mixed with output-gated full attention (partial RoPE),
// SwiGLU MLP, zero-centred (1 + w) RMSNorm (MODELS.md). Text decoder only.
#pragma once

#include <memory>

#include "model/model.h"

namespace pagoda {

std::unique_ptr<Model> make_qwen3_5(const ModelConfig& config, const Checkpoint& ckpt,
                                    Backend& backend);

}  // namespace pagoda

// Qwen3 (dense): MODELS.md "Qwen3 attention" with SwiGLU MLP and plain-w RMSNorm.
#pragma once

#include <memory>

#include "model/model.h"

namespace pagoda {

std::unique_ptr<Model> make_qwen3(const ModelConfig& config, const Checkpoint& ckpt,
                                  Backend& backend);

}  // namespace pagoda

// A decoder of identical dense layers: RMSNorm -> attention -> residual, RMSNorm -> SwiGLU MLP ->
// residual, then the final norm and the lm_head. Qwen3 and Llama are this block with different
// options; a family that has it builds one from its config instead of writing its own loop.
#pragma once

#include <memory>

#include "model/layers.h"
#include "model/model.h"

namespace pagoda {

struct DenseDecoderOptions {
  AttentionOptions attention;
  bool zero_centered_norm = false;  // input, post-attention and final norms scale by 1 + w
};

std::unique_ptr<Model> make_dense_decoder(const ModelConfig& config, const Checkpoint& ckpt,
                                          Backend& backend, const DenseDecoderOptions& options);

}  // namespace pagoda

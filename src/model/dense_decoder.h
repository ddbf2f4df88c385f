// A decoder of identical dense layers: RMSNorm -> attention -> residual, RMSNorm -> GLU MLP ->
// residual, then the final norm and the lm_head. Qwen3, Llama, Qwen2, Mistral and Gemma 3 are this
// block with different options; a family that has it builds one from its config instead of writing
// its own loop. A config with MoeFields (moe_block.h: Qwen3-MoE) gets the mixture of experts in
// place of the MLP in its sparse layers.
#pragma once

#include <memory>
#include <vector>

#include "model/layers.h"
#include "model/model.h"

namespace pagoda {

struct DenseDecoderOptions {
  AttentionOptions attention;       // every layer's, unless layer_attention is given
  // Per-layer attention options (num_layers entries; e.g. Gemma 3's RoPE per layer kind); empty:
  // `attention` everywhere.
  std::vector<AttentionOptions> layer_attention;
  bool zero_centered_norm = false;  // every RMSNorm of the layers and the final norm scales by 1 + w
  GluActivation activation = GluActivation::Silu;
  // Gemma's four norms a layer: post_attention_layernorm normalises the attention output before
  // the residual add, pre_feedforward_layernorm is the MLP's input norm, post_feedforward_layernorm
  // normalises the MLP output before the residual add. Otherwise (Llama) post_attention_layernorm
  // is the MLP's input norm.
  bool sandwich_norms = false;
  double embedding_scale = 1.0;     // embeddings × this, rounded to the activation dtype (Gemma: √hidden)
  float final_logit_softcap = 0.0f;  // logits = cap·tanh(logits/cap); 0: none
};

std::unique_ptr<Model> make_dense_decoder(const ModelConfig& config, const Checkpoint& ckpt, Backend& backend,
                                          const ShardSpec& shard, const DenseDecoderOptions& options);

}  // namespace pagoda

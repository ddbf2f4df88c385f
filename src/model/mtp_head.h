// A multi-token-prediction head (Qwen3.5's `mtp.*`, mtp_num_hidden_layers = 1; docs/models.md), run as a
// model of its own by the speculative-decoding proposer. For a token at position t it reads the
// main model's final-norm hidden state h_t and the token t + 1:
//   x = fc([norm_e(embed(token t+1)); norm_h(h_t)])        fc: 2H → H, zero-centred norms
//   one full-attention decoder layer of the main model's kind at position t (its own KV pool)
//   logits(t + 2) = lm_head(mtp.norm(x))                   the main model's lm_head
// as vLLM's qwen3_next_mtp / qwen3_5_mtp compute it (the hidden state is the main model's output
// after its final norm). Applied again to its own output hidden state for further drafts.
#pragma once

#include <memory>

#include "io/safetensors.h"
#include "model/decoder_base.h"
#include "model/layers.h"

namespace pagoda {

// Throws pagoda::Error naming what is missing when the checkpoint has no usable head.
std::unique_ptr<Model> load_mtp_head(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend,
                                     const Tensor& embed, const Tensor& lm_head, const AttentionOptions& attention,
                                     bool zero_centered_norms);

}  // namespace pagoda

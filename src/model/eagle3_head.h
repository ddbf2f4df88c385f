// An EAGLE-3 draft head (vLLM's llama_eagle3.py: LlamaForCausalLMEagle3 checkpoints as published,
// e.g. the Llama-3.1-8B and Qwen3-8B heads), run as a model of its own by the speculative-decoding
// proposer (engine/draft_model_proposer.h). It reads the target's residual stream at three layers
// (Model::set_aux_hidden_layers; default ids (2, L / 2, L - 3) for L target layers, or the head
// config's eagle_aux_hidden_state_layer_ids), concatenated in ascending layer order as vLLM
// collects them. For a token at position t, fed token t + 1:
//   h0       = fc(cat(aux states of t))         first draft pass; later passes: the pre-norm output
//                                               of the pass before (draft_hidden_rows)
//   e        = input_layernorm(embed(token t+1))  (the head's embed_tokens, or the target's)
//   residual = h0, h = hidden_norm(h0)            (norm_before_residual: residual = h = hidden_norm(h0))
//   a        = o_proj(attention(q/k/v_proj([e; h])))   one Llama attention layer, q/k/v over 2H
//                                                      inputs, its own KV pool, RoPE at position t
//   residual += a;  prenorm = mlp(post_attention_layernorm(residual)) + residual
//   logits   = lm_head(norm(prenorm))            over the draft vocabulary; draft id d is target
//                                               token d + d2t[d]
// docs/speculative_decoding.md has the rules and what is not supported.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"

namespace pagoda {

struct Eagle3Head {
  std::unique_ptr<Model> model;          // logits over the draft vocabulary (config().vocab_size)
  std::vector<int> aux_layers;           // the target layers it reads, ascending
  std::vector<int32_t> draft_to_target;  // target token of each draft id (identity when d2t is absent)
};

// Loads the head in `dir` (config.json + safetensors) for `target` onto `backend`. Throws
// pagoda::Error naming the file, the tensor or the field, and what to do, when it is not an EAGLE-3
// head (an EAGLE-1 one is refused by name), when a tensor is missing or of another shape (fc.weight
// must be [H, 3 × the target's hidden size]), when it was made for another vocabulary or d2t maps
// outside it, or when its aux layers are not in the target.
Eagle3Head load_eagle3_head(const std::string& dir, const Model& target, Backend& backend);

}  // namespace pagoda

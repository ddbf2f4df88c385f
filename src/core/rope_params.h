// How a model rotates its queries and keys (RoPE): the pairing style, the base and the frequency
// scaling, as config.json describes them. Shared vocabulary of the config reader (io/), the models
// and the backends; the frequencies themselves are rope_inv_freq() in backend/backend.h.
#pragma once

#include <cstdint>

namespace pagoda {

// Which elements of a head rotate together. NeoX (transformers' rotate_half; Llama, Qwen, Mistral,
// Gemma): pair (i, i + rotary_dim/2). Interleaved (GPT-J): pair (2i, 2i + 1). Pair j uses inv_freq[j].
enum class RopeStyle : int32_t { NeoX, Interleaved };

// RoPE frequency scaling, as transformers' rope_type names it (docs/models.md, "RoPE scaling").
// None: inv_freq_j = theta^(-2j/rot). Linear: inv_freq / factor. Llama3 (Llama 3.1+): long
// wavelengths divided by `factor`, short ones kept, a smooth blend between. Yarn: a ramp between
// inv_freq / factor and inv_freq over the pairs, and cos/sin multiplied by attention_factor.
enum class RopeScaling : int32_t { None, Llama3, Linear, Yarn };

struct RopeParams {
  int32_t rotary_dim = 0;  // leading dims rotated (0 = head_dim, even); the rest pass through
  float theta = 10000.0f;
  RopeScaling scaling = RopeScaling::None;
  // Llama3 scaling: factor, low_freq_factor, high_freq_factor, original_max_position_embeddings.
  double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  double original_max_positions = 8192.0;
  // Yarn: the ramp's rotation bounds and whether its ends are rounded outwards to whole pairs.
  double beta_fast = 32.0, beta_slow = 1.0;
  bool truncate = true;
  // cos and sin are multiplied by this (transformers' attention_scaling; 1 except for Yarn).
  float attention_factor = 1.0f;
  RopeStyle style = RopeStyle::NeoX;  // last: brace-initialised {rotary_dim, theta} stays valid
};

}  // namespace pagoda

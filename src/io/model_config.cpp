// Sizes derived from the common core of a model config.
#include "io/model_config.h"

#include <algorithm>

namespace pagoda {

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::FullAttention: return "full_attention";
    case LayerKind::LinearAttention: return "linear_attention";
  }
  return "?";
}

int64_t ModelConfig::num_layers_of(LayerKind kind) const {
  return static_cast<int64_t>(std::count(layer_types.begin(), layer_types.end(), kind));
}

int64_t ModelConfig::kv_bytes_per_token(DType kv) const {
  // K and V for each full-attention layer.
  return num_layers_of(LayerKind::FullAttention) * 2 * num_kv_heads * head_dim *
         static_cast<int64_t>(dtype_size(kv));
}

int64_t ModelConfig::conv_dim() const {
  return 2 * linear_num_key_heads * linear_key_head_dim +
         linear_num_value_heads * linear_value_head_dim;
}

int64_t ModelConfig::state_bytes_per_sequence(DType conv_state_dtype, DType recurrent_state_dtype) const {
  if (linear_conv_kernel_dim < 1) return 0;  // Qwen3: no GDN layers
  const int64_t conv = conv_dim() * (linear_conv_kernel_dim - 1) *
                       static_cast<int64_t>(dtype_size(conv_state_dtype));
  const int64_t recurrent = linear_num_value_heads * linear_key_head_dim *
                            linear_value_head_dim * static_cast<int64_t>(dtype_size(recurrent_state_dtype));
  return num_layers_of(LayerKind::LinearAttention) * (conv + recurrent);
}

}  // namespace pagoda

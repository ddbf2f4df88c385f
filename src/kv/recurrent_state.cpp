#include "kv/recurrent_state.h"

#include <string>

#include "core/error.h"

namespace pagoda {

RecurrentStateShape RecurrentStateShape::for_model(const ModelConfig& cfg, int32_t num_slots,
                                                   DType conv_dtype, DType state_dtype) {
  RecurrentStateShape s;
  s.num_layers = static_cast<int32_t>(cfg.num_layers_of(LayerKind::LinearAttention));
  s.num_slots = num_slots;
  s.conv_dim = cfg.conv_dim();
  s.conv_width = cfg.linear_conv_kernel_dim - 1;
  s.num_v_heads = cfg.linear_num_value_heads;
  s.key_dim = cfg.linear_key_head_dim;
  s.value_dim = cfg.linear_value_head_dim;
  s.conv_dtype = conv_dtype;
  s.state_dtype = state_dtype;
  return s;
}

RecurrentState::RecurrentState(Backend& backend, const RecurrentStateShape& shape)
    : backend_(&backend), shape_(shape) {
  check_invariant(shape.num_slots >= 0 && shape.conv_width >= 0, "bad recurrent state shape");
  for (int l = 0; l < shape.num_layers; ++l) {
    Buffer conv = backend.alloc(shape.conv_bytes_per_layer());
    backend.fill_zero(conv.data(), conv.bytes());
    conv_.push_back(conv.tensor(shape.conv_dtype, {shape.num_slots, shape.conv_dim, shape.conv_width}));
    buffers_.push_back(std::move(conv));
    Buffer rec = backend.alloc(shape.recurrent_bytes_per_layer());
    backend.fill_zero(rec.data(), rec.bytes());
    recurrent_.push_back(rec.tensor(shape.state_dtype, {shape.num_slots, shape.num_v_heads, shape.key_dim,
                                                 shape.value_dim}));
    buffers_.push_back(std::move(rec));
  }
}

void RecurrentState::copy_slot(int32_t from, int32_t to) {
  check_invariant(from >= 0 && from < shape_.num_slots && to >= 0 && to < shape_.num_slots,
                  "recurrent state: slot copy " + std::to_string(from) + " -> " + std::to_string(to) +
                      " outside [0, " + std::to_string(shape_.num_slots) + ")");
  if (from == to) return;
  const size_t conv_row = static_cast<size_t>(shape_.conv_dim * shape_.conv_width) * dtype_size(shape_.conv_dtype);
  const size_t rec_row = static_cast<size_t>(shape_.num_v_heads * shape_.key_dim * shape_.value_dim) * dtype_size(shape_.state_dtype);
  for (size_t l = 0; l < conv_.size(); ++l) {
    auto* conv = conv_[l].ptr<char>();
    auto* rec = recurrent_[l].ptr<char>();
    backend_->copy_on_device(conv + conv_row * static_cast<size_t>(to), conv + conv_row * static_cast<size_t>(from), conv_row);
    backend_->copy_on_device(rec + rec_row * static_cast<size_t>(to), rec + rec_row * static_cast<size_t>(from), rec_row);
  }
}

size_t RecurrentState::bytes() const {
  size_t n = 0;
  for (const Buffer& b : buffers_) n += b.bytes();
  return n;
}

}  // namespace pagoda

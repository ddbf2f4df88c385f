// The memory of the recurrent-state slots of a hybrid model (docs/design.md §5): for every Gated
// DeltaNet layer a conv state [slots, conv_dim, kernel-1] in the activation dtype and a recurrent
// state [slots, Hv, dk, dv] in fp32 (or bf16: --mamba-ssm-cache-dtype). One slot per live sequence; slot bookkeeping lives in the
// scheduler (StateSlotPool), this class only owns the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"

namespace pagoda {

struct RecurrentStateShape {
  int32_t num_layers = 0;  // Gated DeltaNet layers only
  int32_t num_slots = 0;
  int64_t conv_dim = 0;    // C = 2·Hk·dk + Hv·dv
  int64_t conv_width = 0;  // kernel - 1 inputs kept per channel
  int64_t num_v_heads = 0, key_dim = 0, value_dim = 0;
  DType conv_dtype = DType::F32;   // the backend's activation dtype
  DType state_dtype = DType::F32;  // --mamba-ssm-cache-dtype

  static RecurrentStateShape for_model(const ModelConfig& cfg, int32_t num_slots, DType conv_dtype,
                                       DType state_dtype = DType::F32);
  size_t conv_bytes_per_layer() const {
    return static_cast<size_t>(num_slots) * conv_dim * conv_width * dtype_size(conv_dtype);
  }
  size_t recurrent_bytes_per_layer() const {
    return static_cast<size_t>(num_slots) * num_v_heads * key_dim * value_dim * dtype_size(state_dtype);
  }
  // Equals ModelConfig::state_bytes_per_sequence(conv_dtype, state_dtype) × num_slots.
  size_t total_bytes() const {
    return static_cast<size_t>(num_layers) * (conv_bytes_per_layer() + recurrent_bytes_per_layer());
  }
};

class RecurrentState {
 public:
  // Allocates and zeroes every layer's states.
  RecurrentState(Backend& backend, const RecurrentStateShape& shape);

  const RecurrentStateShape& shape() const { return shape_; }
  // `gdn_layer` counts Gated DeltaNet layers only (0 = the model's first GDN layer).
  Tensor& conv(int gdn_layer) { return conv_.at(static_cast<size_t>(gdn_layer)); }
  Tensor& recurrent(int gdn_layer) { return recurrent_.at(static_cast<size_t>(gdn_layer)); }
  size_t bytes() const;  // what was actually allocated
  // Copies every layer's conv and recurrent state of slot `from` into slot `to`, on the device, in
  // stream order (prefix-cache snapshots: take one after a step, restore one before a step).
  void copy_slot(int32_t from, int32_t to);

 private:
  Backend* backend_;
  RecurrentStateShape shape_;
  std::vector<Buffer> buffers_;
  std::vector<Tensor> conv_, recurrent_;
};

}  // namespace pagoda

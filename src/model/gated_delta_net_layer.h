// The Gated DeltaNet mixer of Qwen3.5's linear-attention layers (docs/models.md "Gated DeltaNet"): one
// fused input projection, causal conv + SiLU, the gated delta rule over the layer's recurrent
// state, the gated RMSNorm and the output projection.
#pragma once

#include "backend/backend.h"
#include "io/model_config.h"
#include "model/linear.h"
#include "model/weight_store.h"

namespace pagoda {

struct GatedDeltaNetWeights {
  Linear in_proj;  // [C + Hv·dv + 2·Hv, H]: in_proj_qkv | in_proj_z | in_proj_b | in_proj_a
  Tensor conv;     // [C, K] (checkpoint [C, 1, K])
  Tensor A_log;    // [Hv] fp32
  Tensor dt_bias;  // [Hv] fp32
  Tensor norm;     // [dv] fp32, plain w
  Linear out;      // [H, Hv·dv]
};

// Scratch for one step, sized at reserve() for the largest step.
struct GatedDeltaNetScratch {
  Tensor proj;      // [T, gated_delta_net_proj_cols(cfg)]
  Tensor conv_out;  // [T, C]
  Tensor core;      // [T, Hv·dv]
};

// Columns of the fused input projection's output: C + Hv·dv + 2·Hv.
int64_t gated_delta_net_proj_cols(const ModelConfig& cfg);

// Loads layer `layer`'s `linear_attn.*` weights (`cfg` the whole model's) for `shard`'s rank: its
// heads of every projection, conv channel and per-head vector; projections in `wdtype`, the small
// per-head vectors and the norm weight in fp32 (released checkpoints mix dtypes here).
GatedDeltaNetWeights load_gated_delta_net(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype,
                                          const ShardSpec& shard = {});

// x [T, H] (normed input) -> out [T, H]. Reads and updates this layer's conv state
// [slots, C, K-1] and recurrent state [slots, Hv, dk, dv] at meta.state_slots. Over several ranks
// out is this rank's partial sum (out_proj is row-parallel; DecoderBase::add_norm sums it).
// Appends the primitives gated_delta_net_forward uses to `ops`.
void add_gated_delta_net_ops(DType act, DType wdtype, std::vector<OpUse>& ops);

void gated_delta_net_forward(Backend& be, const ModelConfig& cfg, const GatedDeltaNetWeights& w,
                             const StepMeta& meta, Tensor& conv_state, Tensor& recurrent_state,
                             const Tensor& x, GatedDeltaNetScratch& s, Tensor& out);

}  // namespace pagoda

// The layer kinds both model families are built from: attention (plain or output-gated), SwiGLU
// MLP. Each layer reads its input from and writes its output to caller-owned activations.
#pragma once

#include "backend/backend.h"
#include "io/model_config.h"
#include "kv/paged_kv_cache.h"
#include "model/weight_store.h"

namespace pagoda {

struct AttentionWeights {
  Tensor qkv;     // [(Hq*(gated ? 2 : 1) + 2*Hkv) * D, H]: q | gate (if gated) | k | v
  Tensor o;       // [H, Hq*D]
  Tensor q_norm;  // [D]
  Tensor k_norm;  // [D]
};

struct MlpWeights {
  Tensor gate_up;  // [2I, H]: gate rows then up rows
  Tensor down;     // [H, I]
};

// Scratch for one step, sized at reserve() for the largest step.
struct LayerScratch {
  Tensor qkv;       // [T, qkv rows]
  Tensor attn;      // [T, Hq*D]
  Tensor gate_up;   // [T, 2I]
  Tensor mlp_act;   // [T, I]
};

// Loads layer `i`'s attention. `gated` (Qwen3.5): q_proj holds per head D query rows then D gate rows.
AttentionWeights load_attention(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype,
                                bool gated);
MlpWeights load_mlp(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype);

// x [T, H] (normed input) -> out [T, H]. Appends this step's K/V to the layer's pools.
void attention_forward(Backend& be, const ModelConfig& cfg, const AttentionWeights& w, bool gated,
                       const StepMeta& meta, Tensor& k_cache, Tensor& v_cache, const Tensor& x,
                       LayerScratch& s, Tensor& out);
void mlp_forward(Backend& be, const MlpWeights& w, const Tensor& x, LayerScratch& s, Tensor& out);

}  // namespace pagoda

// Layer building blocks the families are assembled from: attention (options below) and the SwiGLU
// MLP. Each layer reads its input from and writes its output to caller-owned activations. What
// differs between families is an option here, never a test of which family it is.
#pragma once

#include "backend/backend.h"
#include "io/model_config.h"
#include "kv/paged_kv_cache.h"
#include "model/weight_store.h"

namespace pagoda {

struct AttentionOptions {
  bool gated = false;              // q_proj holds an output gate per head (sigmoid(gate) * attn)
  bool qk_norm = true;             // per-head RMSNorm of q and k (self_attn.q_norm / k_norm)
  bool zero_centered_qk_norm = false;  // those norms scale by 1 + w instead of w
  bool bias = false;               // q/k/v/o_proj carry biases (Llama's attention_bias)
  // RoPE frequency scaling. Only its scaling fields are read: rotary_dim and theta are the config's.
  RopeParams rope_scaling;
};

struct AttentionWeights {
  Tensor qkv;     // [(Hq*(gated ? 2 : 1) + 2*Hkv) * D, H]: q | gate (if gated) | k | v
  Tensor o;       // [H, Hq*D]
  Tensor q_norm;  // [D]; empty without q/k norm
  Tensor k_norm;  // [D]; empty without q/k norm
  Tensor q_bias, k_bias, v_bias, o_bias;  // [Hq*D], [Hkv*D], [Hkv*D], [H] fp32; empty without bias
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

// Loads layer `i`'s attention. Gated: q_proj holds per head D query rows then D gate rows.
AttentionWeights load_attention(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype,
                                const AttentionOptions& opt);
MlpWeights load_mlp(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype);

// x [T, H] (normed input) -> out [T, H]. Appends this step's K/V to the layer's pools.
void attention_forward(Backend& be, const ModelConfig& cfg, const AttentionWeights& w,
                       const AttentionOptions& opt,
                       const StepMeta& meta, Tensor& k_cache, Tensor& v_cache, const Tensor& x,
                       LayerScratch& s, Tensor& out);
void mlp_forward(Backend& be, const MlpWeights& w, const Tensor& x, LayerScratch& s, Tensor& out);

// Appends the primitives attention_forward / mlp_forward use with these options to `ops`
// (activations `act`, projection weights `wdtype`).
void add_attention_ops(const AttentionOptions& opt, DType act, DType wdtype, std::vector<OpUse>& ops);
void add_mlp_ops(DType act, DType wdtype, std::vector<OpUse>& ops);

}  // namespace pagoda

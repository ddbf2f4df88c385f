// Layer building blocks the families are assembled from: attention (options below) and the GLU
// MLP (SiLU or GELU-tanh). Each layer reads its input from and writes its output to caller-owned activations. What
// differs between families is an option here, never a test of which family it is.
#pragma once

#include <optional>

#include "backend/backend.h"
#include "io/model_config.h"
#include "kv/paged_kv_cache.h"
#include "model/linear.h"
#include "model/weight_store.h"

namespace pagoda {

// rope_axes' pair table for multimodal positions (Qwen3.5 with images; docs/vision.md): which of the
// temporal / height / width rows each rotary pair turns by, and its inv_freq.
struct MropeTables {
  Buffer buffer;
  Tensor axes, inv_freq;
};
// The table of cfg.vision.mrope_section (interleaved or in runs) over cfg's rotary pairs.
MropeTables make_mrope_tables(Backend& be, const ModelConfig& cfg);

struct AttentionOptions {
  bool gated = false;              // q_proj holds an output gate per head (sigmoid(gate) * attn)
  bool qk_norm = true;             // per-head RMSNorm of q and k (self_attn.q_norm / k_norm)
  bool zero_centered_qk_norm = false;  // those norms scale by 1 + w instead of w
  bool qkv_bias = false;           // q/k/v_proj carry biases (Llama's attention_bias, Qwen2)
  bool o_bias = false;             // o_proj carries a bias (Llama's attention_bias; not Qwen2)
  float scale = 0.0f;              // softmax scale; 0: 1/sqrt(head_dim) (Gemma: query_pre_attn_scalar^-1/2)
  float softcap = 0.0f;            // scores = softcap·tanh(scores/softcap); 0: none
  // This layer's RoPE theta and scaling when they are not the config's (rope_theta, rope_scaling);
  // rotary_dim is always the config's.
  std::optional<RopeParams> rope;
  // Multimodal RoPE: when set and a step carries meta.mrope_positions, q and k turn by those rows.
  const MropeTables* mrope = nullptr;
};

// The RoPE of the config's full-attention layers: rotary_dim, rope_theta and rope_scaling.
RopeParams config_rope(const ModelConfig& cfg);

struct AttentionWeights {
  Linear qkv;     // [(Hq*(gated ? 2 : 1) + 2*Hkv) * D, H]: q | gate (if gated) | k | v, their biases
  Linear o;       // [H, Hq*D] (and its bias)
  Tensor q_norm;  // [D]; empty without q/k norm
  Tensor k_norm;  // [D]; empty without q/k norm
  int32_t sliding_window = 0;  // the config's window when this is a sliding layer, else 0
};

// The GLU activation of the MLP: act(gate) * up.
enum class GluActivation { Silu, GeluTanh };

struct MlpWeights {
  Linear gate_up;  // [2I, H]: gate rows then up rows
  Linear down;     // [H, I]
};

// Scratch for one step, sized at reserve() for the largest step.
struct LayerScratch {
  Tensor qkv;       // [T, qkv rows]
  Tensor attn;      // [T, Hq*D]
  Tensor gate_up;   // [T, 2I]
  Tensor mlp_act;   // [T, I]
};

// Loads layer `i`'s attention (its sliding window from cfg.sliding_layers), this rank's shard of
// it (q/k/v column-parallel, o row-parallel). Gated: q_proj holds per head D query rows then D
// gate rows. `cfg` is the whole model's config (the checkpoint's shapes).
AttentionWeights load_attention(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype,
                                const AttentionOptions& opt, const ShardSpec& shard = {});
MlpWeights load_mlp(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype, const ShardSpec& shard = {});
// The same, of a layer whose tensors are named `prefix` + "self_attn." / "mlp." (e.g. the MTP
// head's "mtp.layers.0."); no sliding window.
AttentionWeights load_attention_at(WeightStore& ws, const ModelConfig& cfg, const std::string& prefix, DType wdtype,
                                   const AttentionOptions& opt, const ShardSpec& shard = {});
// A GLU MLP of `intermediate` columns whose projections are `prefix` + gate_proj / up_proj /
// down_proj (the dense MLP's "model.layers.N.mlp.", a shared expert's ".mlp.shared_expert.").
// sum_outside: the down projection's row shards leave their partial outputs for the caller to sum.
MlpWeights load_mlp_at(WeightStore& ws, const ModelConfig& cfg, const std::string& prefix, int64_t intermediate,
                       DType wdtype, const ShardSpec& shard = {}, bool sum_outside = false);

// x [T, H] (normed input) -> out [T, H]. Appends this step's K/V to the layer's pools. `cfg` is
// this rank's view (rank_view(): its local head counts). Over several ranks the output projections
// (o_proj here, down_proj in mlp_forward) are row-parallel and out is this rank's partial sum: the
// decoder sums the ranks' fused with the norm that follows (DecoderBase::add_norm).
void attention_forward(Backend& be, const ModelConfig& cfg, const AttentionWeights& w,
                       const AttentionOptions& opt,
                       const StepMeta& meta, Tensor& k_cache, Tensor& v_cache, const Tensor& x,
                       LayerScratch& s, Tensor& out);
// attention_forward after its q/k/v projection: `qkv` [T, qkv rows] (T = meta.num_tokens) holds this
// step's projected q | gate | k | v with their biases, as w.qkv would have written them into s.qkv (a
// layer whose input is not one tensor, e.g. an EAGLE-3 head's [embedding; hidden], projects it
// itself). RoPE and q/k norms are applied in place; w.qkv is not used.
void attention_from_qkv(Backend& be, const ModelConfig& cfg, const AttentionWeights& w, const AttentionOptions& opt,
                        const StepMeta& meta, Tensor& k_cache, Tensor& v_cache, Tensor& qkv, LayerScratch& s,
                        Tensor& out);
void mlp_forward(Backend& be, const MlpWeights& w, const Tensor& x, LayerScratch& s, Tensor& out,
                 GluActivation activation = GluActivation::Silu);
// The MLP's projections alone, with caller-given scratch: gate_up [T, 2I] and act [T, I].
void glu_forward(Backend& be, const MlpWeights& w, const Tensor& x, Tensor& gate_up, Tensor& act, Tensor& out,
                 GluActivation activation = GluActivation::Silu);

// Appends the primitives attention_forward / mlp_forward use with these options to `ops`
// (activations `act`, projection weights `wdtype`).
void add_attention_ops(const AttentionOptions& opt, DType act, DType wdtype, std::vector<OpUse>& ops);
void add_mlp_ops(GluActivation activation, DType act, DType wdtype, std::vector<OpUse>& ops);

}  // namespace pagoda

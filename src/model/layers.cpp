#include "model/layers.h"

#include <cmath>

#include "core/error.h"

namespace pagoda {
namespace {

std::string layer_prefix(int layer) { return "model.layers." + std::to_string(layer) + "."; }

}  // namespace

RopeParams config_rope(const ModelConfig& cfg) {
  RopeParams rope = cfg.rope_scaling;
  rope.rotary_dim = static_cast<int32_t>(cfg.rotary_dim);
  rope.theta = static_cast<float>(cfg.rope_theta);
  return rope;
}

AttentionWeights load_attention(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype,
                                const AttentionOptions& opt) {
  AttentionWeights w = load_attention_at(ws, cfg, layer_prefix(layer), wdtype, opt);
  const auto l = static_cast<size_t>(layer);
  if (l < cfg.sliding_layers.size() && cfg.sliding_layers[l])
    w.sliding_window = static_cast<int32_t>(cfg.sliding_window);
  return w;
}

AttentionWeights load_attention_at(WeightStore& ws, const ModelConfig& cfg, const std::string& prefix, DType wdtype,
                                   const AttentionOptions& opt) {
  const bool gated = opt.gated;
  check_invariant(!(gated && opt.qkv_bias), "gated attention with biases is not implemented");
  const std::string p = prefix + "self_attn.";
  const int64_t H = cfg.hidden_size, D = cfg.head_dim, Hq = cfg.num_heads, Hkv = cfg.num_kv_heads;
  const int64_t q_rows = Hq * D * (gated ? 2 : 1);
  AttentionWeights w;
  // Gated q_proj interleaves per head [query D rows | gate D rows]; regroup at load to all queries
  // then all gates, so q and gate are plain column ranges of the fused output.
  std::vector<int64_t> q_order;
  if (gated) {
    for (int64_t part = 0; part < 2; ++part)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t d = 0; d < D; ++d) q_order.push_back(h * 2 * D + part * D + d);
  }
  w.qkv = ws.load_rows({p + "q_proj.weight", p + "k_proj.weight", p + "v_proj.weight"}, wdtype,
                       {{q_rows, H}, {Hkv * D, H}, {Hkv * D, H}}, {q_order, {}, {}});
  w.o = ws.load(p + "o_proj.weight", wdtype, {H, Hq * D});
  if (opt.qk_norm) {
    w.q_norm = ws.load(p + "q_norm.weight", DType::F32, {D});
    w.k_norm = ws.load(p + "k_norm.weight", DType::F32, {D});
  }
  if (opt.qkv_bias) {
    w.q_bias = ws.load(p + "q_proj.bias", DType::F32, {Hq * D});
    w.k_bias = ws.load(p + "k_proj.bias", DType::F32, {Hkv * D});
    w.v_bias = ws.load(p + "v_proj.bias", DType::F32, {Hkv * D});
  }
  if (opt.o_bias) w.o_bias = ws.load(p + "o_proj.bias", DType::F32, {H});
  return w;
}

MlpWeights load_mlp(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype) {
  return load_mlp_at(ws, cfg, layer_prefix(layer), wdtype);
}

MlpWeights load_mlp_at(WeightStore& ws, const ModelConfig& cfg, const std::string& prefix, DType wdtype) {
  const std::string p = prefix + "mlp.";
  const int64_t H = cfg.hidden_size, I = cfg.intermediate_size;
  MlpWeights w;
  w.gate_up = ws.load_rows({p + "gate_proj.weight", p + "up_proj.weight"}, wdtype, {{I, H}, {I, H}});
  w.down = ws.load(p + "down_proj.weight", wdtype, {H, I});
  return w;
}

void attention_forward(Backend& be, const ModelConfig& cfg, const AttentionWeights& w,
                       const AttentionOptions& opt, const StepMeta& meta, Tensor& k_cache,
                       Tensor& v_cache, const Tensor& x, LayerScratch& s, Tensor& out) {
  const bool gated = opt.gated;
  const int64_t T = meta.num_tokens, D = cfg.head_dim, Hq = cfg.num_heads, Hkv = cfg.num_kv_heads;
  const int64_t q_cols = Hq * D * (gated ? 2 : 1);
  Tensor qkv = s.qkv.rows(0, T);
  be.linear(x, w.qkv, qkv);
  if (opt.qkv_bias) {
    Tensor q_part = qkv.cols(0, Hq * D), k_part = qkv.cols(q_cols, q_cols + Hkv * D);
    Tensor v_part = qkv.cols(q_cols + Hkv * D, q_cols + 2 * Hkv * D);
    be.add_bias(q_part, w.q_bias);
    be.add_bias(k_part, w.k_bias);
    be.add_bias(v_part, w.v_bias);
  }

  Tensor qv = qkv.cols(0, Hq * D).reshape({T, Hq, D});
  Tensor k = qkv.cols(q_cols, q_cols + Hkv * D).reshape({T, Hkv, D});
  Tensor v = qkv.cols(q_cols + Hkv * D, q_cols + 2 * Hkv * D).reshape({T, Hkv, D});

  RopeParams rope = opt.rope ? *opt.rope : config_rope(cfg);
  rope.rotary_dim = static_cast<int32_t>(cfg.rotary_dim);
  // Without q/k norm the weights are empty tensors: the backend ropes and caches only.
  be.qk_norm_rope_and_cache(qv, k, v, w.q_norm, w.k_norm, static_cast<float>(cfg.rms_norm_eps),
                            opt.zero_centered_qk_norm, rope, meta, k_cache, v_cache);
  Tensor attn = s.attn.rows(0, T).reshape({T, Hq, D});
  AttentionParams ap;
  ap.scale = opt.scale > 0.0f ? opt.scale : 1.0f / std::sqrt(static_cast<float>(D));
  ap.sliding_window = w.sliding_window;
  ap.softcap = opt.softcap;
  be.paged_attention(qv, k_cache, v_cache, meta, ap, attn);
  Tensor attn2d = attn.reshape({T, Hq * D});
  if (gated) be.sigmoid_gate(attn2d, qkv.cols(Hq * D, 2 * Hq * D), attn2d);
  be.linear(attn2d, w.o, out);
  if (opt.o_bias) be.add_bias(out, w.o_bias);
}

void add_attention_ops(const AttentionOptions& opt, DType act, DType wdtype, std::vector<OpUse>& ops) {
  ops.insert(ops.end(), {{Op::Linear, wdtype}, {Op::Rope, act}, {Op::ReshapeAndCache, act},
                         {Op::PagedAttention, act}});
  if (opt.qk_norm) ops.push_back({Op::RmsNorm, act});
  if (opt.qkv_bias || opt.o_bias) ops.push_back({Op::AddBias, act});
  if (opt.gated) ops.push_back({Op::SigmoidGate, act});
}

void add_mlp_ops(GluActivation activation, DType act, DType wdtype, std::vector<OpUse>& ops) {
  ops.insert(ops.end(), {{Op::Linear, wdtype},
                         {activation == GluActivation::GeluTanh ? Op::GeluTanhMul : Op::SiluMul, act}});
}

void mlp_forward(Backend& be, const MlpWeights& w, const Tensor& x, LayerScratch& s, Tensor& out,
                 GluActivation activation) {
  const int64_t T = x.size(0);
  Tensor gu = s.gate_up.rows(0, T);
  be.linear(x, w.gate_up, gu);
  Tensor act = s.mlp_act.rows(0, T);
  switch (activation) {
    case GluActivation::Silu:
      be.linear_silu_mul(gu, w.down, act, out);  // a backend may fuse the activation
      break;
    case GluActivation::GeluTanh:
      be.gelu_tanh_mul(gu, act);
      be.linear(act, w.down, out);
      break;
  }
}

}  // namespace pagoda

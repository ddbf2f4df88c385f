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
                                const AttentionOptions& opt, const ShardSpec& shard) {
  AttentionWeights w = load_attention_at(ws, cfg, layer_prefix(layer), wdtype, opt, shard);
  const auto l = static_cast<size_t>(layer);
  if (l < cfg.sliding_layers.size() && cfg.sliding_layers[l])
    w.sliding_window = static_cast<int32_t>(cfg.sliding_window);
  return w;
}

AttentionWeights load_attention_at(WeightStore& ws, const ModelConfig& cfg, const std::string& prefix, DType wdtype,
                                   const AttentionOptions& opt, const ShardSpec& shard) {
  const bool gated = opt.gated;
  check_invariant(!(gated && opt.qkv_bias), "gated attention with biases is not implemented");
  const std::string p = prefix + "self_attn.";
  const int64_t H = cfg.hidden_size, D = cfg.head_dim, Hq = cfg.num_heads, Hkv = cfg.num_kv_heads;
  const auto bias = [&](const char* proj) { return opt.qkv_bias ? p + proj + ".bias" : std::string(); };
  LinearSpec qkv{.in_features = H, .dtype = wdtype, .shard = ShardKind::Column};
  if (const std::string fused = p + "qkv_proj.weight"; ws.has(fused)) {
    // A checkpoint that stores q | k | v as one tensor (Phi-3): the same three parts, as its rows.
    check(!gated && !opt.qkv_bias, "a fused qkv_proj with an output gate or biases is not supported (" + fused + ")");
    const int64_t rows = (Hq + 2 * Hkv) * D;
    qkv.parts = {{.weight = fused, .rows = rows, .begin = 0, .end = Hq * D},
                 {.weight = fused, .rows = rows, .begin = Hq * D, .end = (Hq + Hkv) * D, .units = Hkv},
                 {.weight = fused, .rows = rows, .begin = (Hq + Hkv) * D, .end = rows, .units = Hkv}};
  } else if (gated) {
    // q_proj interleaves per head [query D rows | gate D rows]; as two parts (all queries, then
    // all gates) q and gate are plain column ranges of the fused output, and shard by head alike.
    for (int64_t part = 0; part < 2; ++part) {
      LinearPart rows{.weight = p + "q_proj.weight", .rows = 2 * Hq * D};
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t d = 0; d < D; ++d) rows.order.push_back(h * 2 * D + part * D + d);
      qkv.parts.push_back(std::move(rows));
    }
  } else {
    qkv.parts.push_back({.weight = p + "q_proj.weight", .rows = Hq * D, .bias = bias("q_proj")});
  }
  if (qkv.parts.size() < 3) {
    // Fewer KV heads than ranks: each is held by world / Hkv ranks (units).
    qkv.parts.push_back({.weight = p + "k_proj.weight", .rows = Hkv * D, .bias = bias("k_proj"), .units = Hkv});
    qkv.parts.push_back({.weight = p + "v_proj.weight", .rows = Hkv * D, .bias = bias("v_proj"), .units = Hkv});
  }
  AttentionWeights w;
  w.qkv = Linear::load(ws, qkv, shard);
  w.o = Linear::load(ws,
                     {.parts = {{.weight = p + "o_proj.weight", .rows = H, .bias = opt.o_bias ? p + "o_proj.bias" : ""}},
                      .in_features = Hq * D, .dtype = wdtype, .shard = ShardKind::Row, .sum_outside = true},
                     shard);
  if (opt.qk_norm) {
    w.q_norm = ws.load(p + "q_norm.weight", DType::F32, {D});
    w.k_norm = ws.load(p + "k_norm.weight", DType::F32, {D});
  }
  return w;
}

MlpWeights load_mlp(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype, const ShardSpec& shard) {
  return load_mlp_at(ws, cfg, layer_prefix(layer) + "mlp.", cfg.intermediate_size, wdtype, shard, /*sum_outside=*/true);
}

MlpWeights load_mlp_at(WeightStore& ws, const ModelConfig& cfg, const std::string& p, int64_t I, DType wdtype,
                       const ShardSpec& shard, bool sum_outside) {
  const int64_t H = cfg.hidden_size;
  MlpWeights w;
  LinearSpec gate_up{.parts = {{.weight = p + "gate_proj.weight", .rows = I}, {.weight = p + "up_proj.weight", .rows = I}},
                     .in_features = H, .dtype = wdtype, .shard = ShardKind::Column};
  if (const std::string fused = p + "gate_up_proj.weight"; ws.has(fused))  // Phi-3, GLM-4: gate rows then up rows
    gate_up.parts = {{.weight = fused, .rows = 2 * I, .begin = 0, .end = I}, {.weight = fused, .rows = 2 * I, .begin = I, .end = 2 * I}};
  w.gate_up = Linear::load(ws, gate_up, shard);
  w.down = Linear::load(ws, {.parts = {{.weight = p + "down_proj.weight", .rows = H}}, .in_features = I, .dtype = wdtype,
                             .shard = ShardKind::Row, .sum_outside = sum_outside},
                        shard);
  return w;
}

void attention_forward(Backend& be, const ModelConfig& cfg, const AttentionWeights& w,
                       const AttentionOptions& opt, const StepMeta& meta, Tensor& k_cache,
                       Tensor& v_cache, const Tensor& x, LayerScratch& s, Tensor& out) {
  Tensor qkv = s.qkv.rows(0, meta.num_tokens);
  w.qkv.forward(be, x, qkv);  // with the q/k/v biases
  attention_from_qkv(be, cfg, w, opt, meta, k_cache, v_cache, qkv, s, out);
}

void attention_from_qkv(Backend& be, const ModelConfig& cfg, const AttentionWeights& w, const AttentionOptions& opt,
                        const StepMeta& meta, Tensor& k_cache, Tensor& v_cache, Tensor& qkv, LayerScratch& s,
                        Tensor& out) {
  const bool gated = opt.gated;
  const int64_t T = meta.num_tokens, D = cfg.head_dim, Hq = cfg.num_heads, Hkv = cfg.num_kv_heads;
  const int64_t q_cols = Hq * D * (gated ? 2 : 1);
  Tensor qv = qkv.cols(0, Hq * D).reshape({T, Hq, D});
  Tensor k = qkv.cols(q_cols, q_cols + Hkv * D).reshape({T, Hkv, D});
  Tensor v = qkv.cols(q_cols + Hkv * D, q_cols + 2 * Hkv * D).reshape({T, Hkv, D});

  RopeParams rope = opt.rope ? *opt.rope : config_rope(cfg);
  rope.rotary_dim = static_cast<int32_t>(cfg.rotary_dim);
  if (opt.mrope != nullptr && !meta.mrope_positions.empty()) {
    // A step with image tokens: every row turns by its own (temporal, height, width) positions.
    const auto eps = static_cast<float>(cfg.rms_norm_eps);
    if (!w.q_norm.empty()) be.rms_norm(qv, w.q_norm, qv, eps, opt.zero_centered_qk_norm);
    if (!w.k_norm.empty()) be.rms_norm(k, w.k_norm, k, eps, opt.zero_centered_qk_norm);
    be.rope_axes(qv, meta.mrope_positions, opt.mrope->axes, opt.mrope->inv_freq);
    be.rope_axes(k, meta.mrope_positions, opt.mrope->axes, opt.mrope->inv_freq);
    be.reshape_and_cache(k, v, meta.slot_mapping, k_cache, v_cache);
  } else {
    // Without q/k norm the weights are empty tensors: the backend ropes and caches only.
    be.qk_norm_rope_and_cache(qv, k, v, w.q_norm, w.k_norm, static_cast<float>(cfg.rms_norm_eps),
                              opt.zero_centered_qk_norm, rope, meta, k_cache, v_cache);
  }
  Tensor attn = s.attn.rows(0, T).reshape({T, Hq, D});
  AttentionParams ap;
  ap.scale = opt.scale > 0.0f ? opt.scale : 1.0f / std::sqrt(static_cast<float>(D));
  ap.sliding_window = w.sliding_window;
  ap.softcap = opt.softcap;
  be.paged_attention(qv, k_cache, v_cache, meta, ap, attn);
  Tensor attn2d = attn.reshape({T, Hq * D});
  if (gated) be.sigmoid_gate(attn2d, qkv.cols(Hq * D, 2 * Hq * D), attn2d);
  w.o.forward(be, attn2d, out);
}

MropeTables make_mrope_tables(Backend& be, const ModelConfig& cfg) {
  RopeParams rope = config_rope(cfg);
  rope.rotary_dim = static_cast<int32_t>(cfg.rotary_dim);
  const std::vector<float> inv = rope_inv_freq(rope, cfg.head_dim);
  const auto n = static_cast<int64_t>(inv.size());
  const std::vector<int64_t>& sec = cfg.vision.mrope_section;
  check(sec.size() == 3 && sec[0] + sec[1] + sec[2] == n,
        "config.json: rope_parameters.mrope_section must be three counts adding up to the rotary pairs (" +
            std::to_string(n) + ")");
  std::vector<int32_t> axes(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; ++j) {
    if (cfg.vision.mrope_interleaved) {  // t h w t h w ...: transformers' recomposition
      if (j % 3 == 1 && j < 3 * sec[1]) axes[static_cast<size_t>(j)] = 1;
      else if (j % 3 == 2 && j < 3 * sec[2]) axes[static_cast<size_t>(j)] = 2;
    } else {
      axes[static_cast<size_t>(j)] = j < sec[0] ? 0 : j < sec[0] + sec[1] ? 1 : 2;
    }
  }
  MropeTables t;
  t.buffer = be.alloc(static_cast<size_t>(n) * (sizeof(int32_t) + sizeof(float)));
  t.axes = Tensor(t.buffer.data(), DType::I32, be.device(), {n});
  t.inv_freq = Tensor(static_cast<char*>(t.buffer.data()) + n * sizeof(int32_t), DType::F32, be.device(), {n});
  be.copy_to_device(t.axes.data, axes.data(), axes.size() * sizeof(int32_t));
  be.copy_to_device(t.inv_freq.data, inv.data(), inv.size() * sizeof(float));
  return t;
}

void add_attention_ops(const AttentionOptions& opt, DType act, DType wdtype, std::vector<OpUse>& ops) {
  ops.insert(ops.end(), {{Op::Linear, wdtype}, {Op::Rope, act}, {Op::ReshapeAndCache, act},
                         {Op::PagedAttention, act}});
  if (opt.mrope != nullptr) ops.push_back({Op::RopeAxes, act});
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
  Tensor gu = s.gate_up.rows(0, T), act = s.mlp_act.rows(0, T);
  glu_forward(be, w, x, gu, act, out, activation);
}

void glu_forward(Backend& be, const MlpWeights& w, const Tensor& x, Tensor& gate_up, Tensor& act, Tensor& out,
                 GluActivation activation) {
  w.gate_up.forward(be, x, gate_up);
  switch (activation) {
    case GluActivation::Silu:
      w.down.forward_silu_mul(be, gate_up, act, out);  // a backend may fuse the activation
      break;
    case GluActivation::GeluTanh:
      be.gelu_tanh_mul(gate_up, act);
      w.down.forward(be, act, out);
      break;
  }
}

}  // namespace pagoda

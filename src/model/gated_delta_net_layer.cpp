#include "model/gated_delta_net_layer.h"

#include <tuple>

namespace pagoda {

int64_t gated_delta_net_proj_cols(const ModelConfig& cfg) {
  const int64_t Hv = cfg.linear_num_value_heads;
  return cfg.conv_dim() + Hv * cfg.linear_value_head_dim + 2 * Hv;
}

GatedDeltaNetWeights load_gated_delta_net(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype,
                                          const ShardSpec& shard) {
  const std::string p = "model.layers." + std::to_string(layer) + ".linear_attn.";
  const int64_t H = cfg.hidden_size, C = cfg.conv_dim(), Hk = cfg.linear_num_key_heads, Hv = cfg.linear_num_value_heads;
  const int64_t dv = cfg.linear_value_head_dim, K = cfg.linear_conv_kernel_dim;
  GatedDeltaNetWeights w;
  // One GEMM for the four projections that read the layer input; the layer takes column views.
  // in_proj_qkv is three parts (q | k | v by head), so a column shard takes each one's heads; with
  // fewer key heads than ranks, a key head is shared by the ranks of its value heads.
  const int64_t qk = Hk * cfg.linear_key_head_dim;
  const std::string qkv = p + "in_proj_qkv.weight";
  w.in_proj = Linear::load(ws, {.parts = {{.weight = qkv, .rows = C, .begin = 0, .end = qk, .units = Hk},
                                          {.weight = qkv, .rows = C, .begin = qk, .end = 2 * qk, .units = Hk},
                                          {.weight = qkv, .rows = C, .begin = 2 * qk, .end = C},
                                          {.weight = p + "in_proj_z.weight", .rows = Hv * dv},
                                          {.weight = p + "in_proj_b.weight", .rows = Hv},
                                          {.weight = p + "in_proj_a.weight", .rows = Hv}},
                                .in_features = H, .dtype = wdtype, .shard = ShardKind::Column},
                           shard);
  // The conv's channels are in_proj_qkv's rows: this rank's q, k and v channels, in that order.
  const std::string conv = p + "conv1d.weight";
  std::vector<WeightRows> channels;
  for (const auto& [begin, n, units] : {std::tuple{int64_t{0}, qk, Hk}, {qk, qk, Hk}, {2 * qk, C - 2 * qk, int64_t{0}}}) {
    const auto [lo, hi] = shard_rows(n, shard, "the channels of " + conv, units);
    channels.push_back(WeightRows{.name = conv, .shape = {C, 1, K}, .begin = begin + lo, .end = begin + hi});
  }
  w.conv = ws.load_parts(channels, wdtype);  // [C of this rank, K]
  const std::pair<int64_t, int64_t> heads = shard_rows(Hv, shard, p + "A_log");
  auto per_head = [&, vlo = heads.first, vhi = heads.second](const std::string& name) {
    const Tensor full = ws.load(name, DType::F32, {Hv});
    return full.reshape({Hv, 1}).rows(vlo, vhi).reshape({vhi - vlo});
  };
  w.A_log = per_head(p + "A_log");
  w.dt_bias = per_head(p + "dt_bias");
  w.norm = ws.load(p + "norm.weight", DType::F32, {dv});  // one vector for every head
  w.out = Linear::load(ws, {.parts = {{.weight = p + "out_proj.weight", .rows = H}}, .in_features = Hv * dv,
                            .dtype = wdtype, .shard = ShardKind::Row, .sum_outside = true},
                       shard);
  return w;
}

void add_gated_delta_net_ops(DType act, DType wdtype, std::vector<OpUse>& ops) {
  ops.insert(ops.end(), {{Op::Linear, wdtype}, {Op::CausalConv1dSilu, act}, {Op::GatedDeltaRule, act},
                         {Op::GatedRmsNorm, act}});
}

void gated_delta_net_forward(Backend& be, const ModelConfig& cfg, const GatedDeltaNetWeights& w,
                             const StepMeta& meta, Tensor& conv_state, Tensor& recurrent_state,
                             const Tensor& x, GatedDeltaNetScratch& s, Tensor& out) {
  const int64_t T = meta.num_tokens, C = cfg.conv_dim();
  const int64_t Hk = cfg.linear_num_key_heads, Hv = cfg.linear_num_value_heads;
  const int64_t dk = cfg.linear_key_head_dim, dv = cfg.linear_value_head_dim;
  const int64_t Z = Hv * dv;

  Tensor proj = s.proj.rows(0, T);
  w.in_proj.forward(be, x, proj);
  const Tensor mixed = proj.cols(0, C);
  const Tensor z = proj.cols(C, C + Z).reshape({T, Hv, dv});
  const Tensor b = proj.cols(C + Z, C + Z + Hv);
  const Tensor a = proj.cols(C + Z + Hv, C + Z + 2 * Hv);

  Tensor conv_out = s.conv_out.rows(0, T);
  be.causal_conv1d_silu(mixed, w.conv, conv_state, meta, conv_out);
  const Tensor q = conv_out.cols(0, Hk * dk).reshape({T, Hk, dk});
  const Tensor k = conv_out.cols(Hk * dk, 2 * Hk * dk).reshape({T, Hk, dk});
  const Tensor v = conv_out.cols(2 * Hk * dk, C).reshape({T, Hv, dv});

  Tensor core = s.core.rows(0, T).reshape({T, Hv, dv});
  be.gated_delta_rule(q, k, v, b, a, w.A_log, w.dt_bias, recurrent_state, meta, core);
  be.gated_rms_norm(core, z, w.norm, static_cast<float>(cfg.rms_norm_eps), core);
  w.out.forward(be, core.reshape({T, Z}), out);
}

}  // namespace pagoda

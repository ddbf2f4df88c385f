#include "model/moe_block.h"

#include <algorithm>
#include <memory>
#include <tuple>

#include "core/dtype.h"
#include "core/error.h"
#include "core/format.h"

namespace pagoda {
namespace {

// Far above released checkpoints (512 experts, top-10); keeps every size product inside int64.
constexpr int64_t kMaxExperts = 4096;

std::string layer_prefix(int layer) { return "model.layers." + std::to_string(layer) + ".mlp."; }

std::vector<int64_t> read_layer_list(const ConfigReader& r, const std::string& key) {
  std::vector<int64_t> out;
  const ConfigReader::Found f = r.find(key);
  if (f.value == nullptr) return out;
  check(f.value->is_array() && f.value->size() <= static_cast<size_t>(config_limits::kMaxLayers),
        "config.json: " + f.path + " must be a list of layer indices");
  for (const nlohmann::json& v : *f.value)
    out.push_back(ConfigReader::to_int(v, "config.json: " + f.path + " entry", 0, config_limits::kMaxLayers));
  return out;
}

}  // namespace

bool MoeFields::sparse(int64_t layer) const {
  const bool dense_listed = std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end();
  return !dense_listed && num_experts > 0 && (layer + 1) % decoder_sparse_step == 0;
}

int64_t MoeFields::num_sparse_layers(int64_t num_layers) const {
  int64_t n = 0;
  for (int64_t i = 0; i < num_layers; ++i) n += sparse(i);
  return n;
}

void read_moe_fields(const ConfigReader& r, const MoeConfigRules& rules, ModelConfig* c) {
  using namespace config_limits;
  auto f = std::make_shared<MoeFields>();
  // transformers 5's Qwen3MoeConfig maps num_experts onto num_local_experts (Mixtral's name), which is
  // then what its config.json may hold; released checkpoints say num_experts.
  f->num_experts = r.optional_int("num_experts", 1, kMaxExperts)
                       .value_or(r.optional_int("num_local_experts", 1, kMaxExperts).value_or(rules.default_num_experts));
  f->experts_per_token =
      r.optional_int("num_experts_per_tok", 1, kMaxExperts).value_or(rules.default_experts_per_token);
  f->expert_intermediate_size =
      r.optional_int("moe_intermediate_size", 1, kMaxIntermediate).value_or(rules.default_expert_intermediate_size);
  check(f->num_experts >= 1 && f->expert_intermediate_size >= 1,
        "config.json: " + r.prefix() + "num_experts and moe_intermediate_size are missing; a " + r.model_type() +
            " config needs them");
  check(f->experts_per_token >= 1 && f->experts_per_token <= f->num_experts,
        "config.json: " + r.prefix() + "num_experts_per_tok (" + std::to_string(f->experts_per_token) +
            ") must lie in [1, num_experts = " + std::to_string(f->num_experts) + "]");
  f->norm_topk_prob = rules.reads_norm_topk_prob
                          ? r.optional_bool("norm_topk_prob", false).value_or(rules.default_norm_topk_prob)
                          : rules.default_norm_topk_prob;
  if (rules.reads_sparse_layout) {
    f->decoder_sparse_step = r.optional_int("decoder_sparse_step", 1, kMaxLayers).value_or(1);
    f->mlp_only_layers = read_layer_list(r, "mlp_only_layers");
  }
  if (rules.shared_expert) f->shared_expert_intermediate_size = r.required_int("shared_expert_intermediate_size", kMaxIntermediate);
  // A dense layer needs the dense MLP's size (MoE configs may leave it out when every layer is sparse).
  check(c->intermediate_size > 0 || f->num_sparse_layers(c->num_layers) == c->num_layers,
        "config.json: " + r.prefix() + "intermediate_size is missing and some layers have a dense MLP "
        "(mlp_only_layers / decoder_sparse_step); it is needed");
  c->family_fields = f;
}

const MoeFields* moe_fields(const ModelConfig& cfg) { return cfg.family_fields_as<MoeFields>(); }

bool is_sparse_layer(const ModelConfig& cfg, int64_t layer) {
  const MoeFields* f = moe_fields(cfg);
  return f != nullptr && f->sparse(layer);
}

namespace {

// "<layer>.mlp.experts.<e>." of a checkpoint with a tensor per expert; throws when it has neither
// layout.
std::string per_expert_prefix(const WeightStore& ws, const std::string& p, int64_t e) {
  const std::string pe = p + "experts." + std::to_string(e) + ".";
  check(ws.has(pe + "gate_proj.weight"),
        "checkpoint has neither " + p + "experts.gate_up_proj (packed experts) nor " + pe +
            "gate_proj.weight (one tensor per expert)");
  return pe;
}

// Under tensor parallelism: this rank's share of every expert, gathered on the host one expert at a
// time (either layout) — gate_up [E, 2n, H] (its n gate rows, then its n up rows), down [E, H, n]
// (its n input columns), n = I / world — as ExpertLinear::load_* lays out the whole.
void load_expert_shards(WeightStore& ws, const std::string& p, int64_t E, int64_t I, int64_t H, DType wdtype,
                        const ShardSpec& shard, MoeWeights& w) {
  check(!ws.quantization().fp8() && !ws.quantization().int4(),
        "tensor parallelism of FP8 or 4-bit experts is not implemented yet; use --tensor-parallel-size 1");
  const auto [lo, hi] = shard_rows(I, shard, p + "experts (moe_intermediate_size)");
  const int64_t n = hi - lo;
  const bool packed = ws.has(p + "experts.gate_up_proj");
  std::vector<float> gate_up, down;
  gate_up.reserve(static_cast<size_t>(E * 2 * n * H));
  down.reserve(static_cast<size_t>(E * H * n));
  auto append = [](std::vector<float>& to, const std::vector<float>& from) { to.insert(to.end(), from.begin(), from.end()); };
  for (int64_t e = 0; e < E; ++e) {
    if (packed) {  // expert e is row e of [E, 2I·H] and of [E, H·I]
      const WeightRows gu{.name = p + "experts.gate_up_proj", .shape = {E, 2 * I, H}, .begin = e, .end = e + 1};
      append(gate_up, ws.host_rows({gu}, lo * H, hi * H));
      append(gate_up, ws.host_rows({gu}, (I + lo) * H, (I + hi) * H));
      const std::vector<float> d =
          ws.host_rows({WeightRows{.name = p + "experts.down_proj", .shape = {E, H, I}, .begin = e, .end = e + 1}});
      for (int64_t h = 0; h < H; ++h) down.insert(down.end(), d.begin() + h * I + lo, d.begin() + h * I + hi);
    } else {
      const std::string pe = per_expert_prefix(ws, p, e);
      append(gate_up, ws.host_rows({WeightRows{.name = pe + "gate_proj.weight", .shape = {I, H}, .begin = lo, .end = hi},
                                    WeightRows{.name = pe + "up_proj.weight", .shape = {I, H}, .begin = lo, .end = hi}}));
      append(down, ws.host_rows({WeightRows{.name = pe + "down_proj.weight", .shape = {H, I}}}, lo, hi));
    }
  }
  auto upload = [&](const std::vector<float>& host, int64_t rows, int64_t cols) {
    std::vector<uint8_t> bytes(host.size() * dtype_size(wdtype));
    convert_float_elements(host.data(), DType::F32, bytes.data(), wdtype, host.size());
    return ws.upload(bytes.data(), wdtype, rows, cols);
  };
  w.gate_up = ExpertLinear::over(upload(gate_up, E * 2 * n, H).reshape({E, 2 * n, H}));
  w.down = ExpertLinear::over(upload(down, E * H, n).reshape({E, H, n}));
}

}  // namespace

MoeWeights load_moe(WeightStore& ws, const ModelConfig& cfg, int layer, DType wdtype, const ShardSpec& shard) {
  const MoeFields& f = *moe_fields(cfg);
  const std::string p = layer_prefix(layer);
  const int64_t H = cfg.hidden_size, E = f.num_experts, I = f.expert_intermediate_size;
  const int64_t Is = f.shared_expert_intermediate_size;
  MoeWeights w;
  LinearSpec router{.parts = {{.weight = p + "gate.weight", .rows = E}}, .in_features = H, .dtype = wdtype};
  const bool sharded = shard.world > 1;
  if (Is > 0) {
    router.parts.push_back({.weight = p + "shared_expert_gate.weight", .rows = 1});
    // Its partial sums join the routed experts' (moe_forward), summed once by the decoder.
    w.shared = load_mlp_at(ws, cfg, p + "shared_expert.", Is, wdtype, shard, /*sum_outside=*/sharded);
  }
  w.router = Linear::load(ws, router);  // every rank routes every token alike
  if (sharded && !shard.expert_parallel) {
    load_expert_shards(ws, p, E, I, H, wdtype, shard, w);
    return w;
  }
  // Whole experts: all of them, or under expert parallelism this rank's E / world in a row (the
  // shared expert stays split like a dense MLP, above).
  int64_t lo = 0, hi = E;
  if (sharded) {
    std::tie(lo, hi) = shard_rows(E, shard, p + "experts (num_experts) under --enable-expert-parallel");
  }
  w.first_expert = lo;
  if (ws.has(p + "experts.gate_up_proj")) {  // packed, [E, 2I, H]: each expert's gate rows then up rows
    w.gate_up = ExpertLinear::load_packed(ws, p + "experts.gate_up_proj", E, 2 * I, H, wdtype, lo, hi);
    w.down = ExpertLinear::load_packed(ws, p + "experts.down_proj", E, H, I, wdtype, lo, hi);
    return w;
  }
  std::vector<std::vector<LinearPart>> gate_up, down;
  for (int64_t e = lo; e < hi; ++e) {
    const std::string pe = per_expert_prefix(ws, p, e);
    gate_up.push_back({{.weight = pe + "gate_proj.weight", .rows = I}, {.weight = pe + "up_proj.weight", .rows = I}});
    down.push_back({{.weight = pe + "down_proj.weight", .rows = H}});
  }
  w.gate_up = ExpertLinear::load_per_expert(ws, gate_up, H, wdtype);
  w.down = ExpertLinear::load_per_expert(ws, down, I, wdtype);
  return w;
}

MoeScratch reserve_moe(const ModelConfig& cfg, int64_t max_tokens, DType act, const ScratchAlloc& alloc) {
  const MoeFields& f = *moe_fields(cfg);
  const int64_t T = max_tokens, k = f.experts_per_token, R = T * k, E = f.num_experts, H = cfg.hidden_size;
  const int64_t I = f.expert_intermediate_size, Is = f.shared_expert_intermediate_size;
  MoeScratch s;
  s.router = alloc(T, E + (Is > 0 ? 1 : 0), act);
  s.expert_ids = alloc(T, k, DType::I32);
  s.weights = alloc(T, k, DType::F32);
  s.offsets = alloc(E + 1, 1, DType::I32);
  s.sorted_slots = alloc(R, 1, DType::I32);
  s.slot_rows = alloc(R, 1, DType::I32);
  s.x_sorted = alloc(R, H, act);
  s.gate_up = alloc(R, 2 * I, act);
  s.act = alloc(R, I, act);
  s.y = alloc(R, H, act);
  if (Is > 0) {
    s.shared_gate_up = alloc(T, 2 * Is, act);
    s.shared_act = alloc(T, Is, act);
    s.shared_out = alloc(T, H, act);
  }
  return s;
}

void add_moe_ops(const ModelConfig& cfg, DType act, DType wdtype, std::vector<OpUse>& ops) {
  ops.insert(ops.end(), {{Op::Linear, wdtype}, {Op::MoeRoute, act}, {Op::MoePermute, act},
                         {Op::MoeGroupedLinear, wdtype}, {Op::SiluMul, act}, {Op::MoeUnpermute, act}});
  (void)cfg;  // the shared expert uses linear and silu_mul too
}

void moe_forward(Backend& be, const ModelConfig& cfg, const MoeWeights& w, const Tensor& x, MoeScratch& s,
                 Tensor& out) {
  const MoeFields& f = *moe_fields(cfg);
  const int64_t T = x.size(0), R = T * f.experts_per_token, E = f.num_experts;
  const bool shared = f.shared_expert_intermediate_size > 0;
  Tensor router = s.router.rows(0, T);
  w.router.forward(be, x, router);
  Tensor ids = s.expert_ids.rows(0, T), weights = s.weights.rows(0, T);
  be.moe_route(shared ? router.cols(0, E) : router, f.norm_topk_prob, ids, weights);
  Tensor sorted = s.sorted_slots.rows(0, R), rows = s.slot_rows.rows(0, R), x_sorted = s.x_sorted.rows(0, R);
  be.moe_permute(x, ids, s.offsets, sorted, rows, x_sorted);
  Tensor gate_up = s.gate_up.rows(0, R), act = s.act.rows(0, R), y = s.y.rows(0, R);
  // Expert parallelism: this rank multiplies the rows of its experts only (their offsets, a window of
  // the sort over all E); every other routed row is a zero here, the rank holding its expert adds it.
  const int64_t local = w.gate_up.weight().size(0);
  const Tensor offsets = local < E ? s.offsets.rows(w.first_expert, w.first_expert + local + 1) : s.offsets;
  if (local < E) be.fill_zero(y.data, y.nbytes());
  w.gate_up.forward(be, x_sorted, offsets, gate_up);
  be.silu_mul(gate_up, act);
  w.down.forward(be, act, offsets, y);
  Tensor shared_out, shared_gate;
  if (shared) {
    Tensor sgu = s.shared_gate_up.rows(0, T), sact = s.shared_act.rows(0, T);
    shared_out = s.shared_out.rows(0, T);
    glu_forward(be, w.shared, x, sgu, sact, shared_out);
    shared_gate = router.cols(E, E + 1);
  }
  // The weighted sum and the gate are linear in the experts' outputs: under tensor parallelism out is
  // this rank's partial sum, which the decoder sums once (DecoderBase::add_norm).
  be.moe_unpermute(y, weights, rows, shared_out, shared_gate, out);
}

namespace {

// Parameters of one attention layer as transformers holds them (q/k/v/o, the per-head norms).
int64_t attention_params(const ModelConfig& c, bool gated) {
  const int64_t q = c.num_heads * c.head_dim * (gated ? 2 : 1), kv = c.num_kv_heads * c.head_dim;
  return c.hidden_size * (q + 2 * kv) + c.num_heads * c.head_dim * c.hidden_size + 2 * c.head_dim;
}

// Gated DeltaNet: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, conv1d (no bias), dt_bias, A_log,
// the gated norm, out_proj.
int64_t gated_delta_net_params(const ModelConfig& c) {
  const int64_t C = c.conv_dim(), Hv = c.linear_num_value_heads, Z = Hv * c.linear_value_head_dim;
  return c.hidden_size * (C + Z + 2 * Hv) + C * c.linear_conv_kernel_dim + 2 * Hv + c.linear_value_head_dim +
         Z * c.hidden_size;
}

}  // namespace

ParameterCounts moe_parameter_counts(const ModelConfig& c, bool gated_attention) {
  const MoeFields& f = *moe_fields(c);
  const int64_t H = c.hidden_size, E = f.num_experts, k = f.experts_per_token;
  const int64_t expert = 3 * H * f.expert_intermediate_size;
  const int64_t shared = f.shared_expert_intermediate_size > 0 ? 3 * H * f.shared_expert_intermediate_size + H : 0;
  // Embeddings, the lm_head when untied and the final norm: every token uses them.
  const int64_t outside = c.vocab_size * H * (c.tie_word_embeddings ? 1 : 2) + H;
  ParameterCounts n{outside, outside};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    int64_t layer = 2 * H;  // input and post-attention norms
    layer += c.layer_types[static_cast<size_t>(i)] == LayerKind::FullAttention ? attention_params(c, gated_attention)
                                                                                : gated_delta_net_params(c);
    int64_t idle = 0;
    if (f.sparse(i)) {
      layer += E * H + E * expert + shared;  // router, experts, shared expert and its gate
      idle = (E - k) * expert;               // the experts a token does not visit
    } else {
      layer += 3 * H * c.intermediate_size;
    }
    n.total += layer;
    n.active += layer - idle;
  }
  return n;
}

std::vector<std::pair<std::string, std::string>> describe_moe(const ModelConfig& cfg, bool gated_attention) {
  const MoeFields& f = *moe_fields(cfg);
  std::string experts = std::to_string(f.num_experts) + " routed, top " + std::to_string(f.experts_per_token) +
                        (f.norm_topk_prob ? " renormalised" : " (not renormalised)") + ", moe_intermediate_size " +
                        std::to_string(f.expert_intermediate_size);
  if (f.shared_expert_intermediate_size > 0)
    experts += ", shared expert " + std::to_string(f.shared_expert_intermediate_size) + " (sigmoid-gated)";
  const int64_t sparse = f.num_sparse_layers(cfg.num_layers);
  std::string layers = std::to_string(sparse) + " of " + std::to_string(cfg.num_layers) + " sparse";
  if (sparse < cfg.num_layers) {
    std::string dense;
    for (int64_t i = 0; i < cfg.num_layers; ++i)
      if (!f.sparse(i)) {
        if (!dense.empty()) dense += ' ';
        dense += std::to_string(i);
      }
    layers += "; dense MLP (intermediate_size " + std::to_string(cfg.intermediate_size) + ") in layers " + dense;
  }
  const ParameterCounts n = moe_parameter_counts(cfg, gated_attention);
  return {{"experts", experts},
          {"moe layers", layers},
          {"params (config)", std::to_string(n.total) + " total (" + format_count(n.total) + "), " +
                                  std::to_string(n.active) + " active per token (" + format_count(n.active) + ")"}};
}

}  // namespace pagoda

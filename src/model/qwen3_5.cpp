// Qwen3.5 (hybrid, `qwen3_5` / `qwen3_5_text`): Gated DeltaNet layers mixed with output-gated full
// attention (partial RoPE), SwiGLU MLP, zero-centred (1 + w) RMSNorm everywhere (docs/models.md). Text
// decoder only; the multimodal checkpoints keep its settings under text_config. Its hybrid loop
// (qwen3_5.h) also runs Qwen3.5-MoE, whose config carries MoeFields: the experts in place of the MLP.
#include "model/qwen3_5.h"

#include "core/error.h"
#include "io/config_reader.h"
#include "model/decoder_base.h"
#include "model/gated_delta_net_layer.h"
#include "model/layers.h"
#include "model/moe_block.h"
#include "model/mtp_head.h"
#include "model/registry.h"

namespace pagoda {
namespace {

constexpr AttentionOptions kAttention{.gated = true, .qk_norm = true,
                                      .zero_centered_qk_norm = true};
constexpr bool kZeroCenteredNorm = true;  // input, post-attention and final norms use 1 + w

struct Qwen3_5Layer {
  LayerKind kind = LayerKind::FullAttention;
  Tensor input_norm, post_norm;  // [H], zero-centred
  AttentionWeights attn;         // full-attention layers
  GatedDeltaNetWeights gdn;      // linear-attention layers
  bool sparse = false;           // the mixture of experts instead of the dense MLP
  MlpWeights mlp;
  MoeWeights moe;
};

class Qwen3_5Model final : public DecoderBase {
 public:
  Qwen3_5Model(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend, const ShardSpec& shard)
      : DecoderBase(cfg, ckpt, backend, shard) {
    const int64_t H = cfg.hidden_size;
    const DType wdt = weight_dtype();
    load_embedding_and_head();
    // Images: the multimodal RoPE's table, where the backend has rope_axes (without it the engine
    // loads no vision tower, so no step carries image positions).
    if (cfg.vision.present() && be_.supports(Op::RopeAxes, be_.activation_dtype())) {
      mrope_ = make_mrope_tables(be_, local_);
      attention_opt_.mrope = &mrope_;
    }
    int num_attention = 0;
    for (int i = 0; i < cfg.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      Qwen3_5Layer l;
      l.kind = cfg.layer_types.at(static_cast<size_t>(i));
      l.input_norm = ws_.load(p + "input_layernorm.weight", DType::F32, {H});
      l.post_norm = ws_.load(p + "post_attention_layernorm.weight", DType::F32, {H});
      if (l.kind == LayerKind::FullAttention) {
        l.attn = load_attention(ws_, cfg, i, wdt, attention_opt_, shard_);
        attention_index_.push_back(num_attention++);
        gdn_index_.push_back(-1);
      } else {
        l.gdn = load_gated_delta_net(ws_, cfg, i, wdt, shard_);
        attention_index_.push_back(-1);
        gdn_index_.push_back(num_gdn_++);
      }
      l.sparse = is_sparse_layer(cfg, i);
      if (l.sparse) {
        l.moe = load_moe(ws_, cfg, i, wdt, shard_);
        ++num_sparse_;
      } else {
        l.mlp = load_mlp(ws_, cfg, i, wdt, shard_);
      }
      layers_.push_back(l);
    }
  }

  std::vector<OpUse> required_ops() const override {
    std::vector<OpUse> ops = DecoderBase::required_ops();
    const DType act = be_.activation_dtype(), wdt = weight_dtype();
    if (num_gdn_ < cfg_.num_layers) add_attention_ops(attention_opt_, act, wdt, ops);
    if (num_gdn_ > 0) add_gated_delta_net_ops(act, wdt, ops);
    if (num_sparse_ < cfg_.num_layers) add_mlp_ops(GluActivation::Silu, act, wdt, ops);
    if (num_sparse_ > 0) add_moe_ops(cfg_, act, wdt, ops);
    return ops;
  }

  size_t reserve(int32_t max_tokens, int32_t max_logits_rows) override {
    const ModelConfig& c = local_;  // this rank's heads and columns
    const int64_t T = max_tokens, D = c.head_dim;
    begin_reserve(max_tokens, max_logits_rows);
    if (c.num_layers_of(LayerKind::FullAttention) > 0) {
      s_.qkv = scratch(T, (2 * c.num_heads + 2 * c.num_kv_heads) * D);  // q | gate | k | v
      s_.attn = scratch(T, c.num_heads * D);
    }
    if (num_gdn_ > 0) {
      g_.proj = scratch(T, gated_delta_net_proj_cols(c));
      g_.conv_out = scratch(T, c.conv_dim());
      g_.core = scratch(T, c.linear_num_value_heads * c.linear_value_head_dim);
    }
    if (num_sparse_ < c.num_layers) {
      s_.gate_up = scratch(T, 2 * c.intermediate_size);
      s_.mlp_act = scratch(T, c.intermediate_size);
    }
    if (num_sparse_ > 0)
      moe_ = reserve_moe(local_, T, be_.activation_dtype(),
                         [this](int64_t rows, int64_t cols, DType dt) { return scratch(rows, cols, dt); });
    const size_t gdn_bytes = num_gdn_ > 0 ? be_.reserve_gated_delta_rule(T, c.linear_num_value_heads,
                                                                         c.linear_value_head_dim, be_.activation_dtype())
                                          : 0;
    return scratch_bytes() + gdn_bytes;
  }

  std::unique_ptr<Model> load_mtp_head(const Checkpoint& ckpt) override {
    return pagoda::load_mtp_head(cfg_, ckpt, be_, embed_, full_lm_head_weight(), kAttention, kZeroCenteredNorm);
  }

  void forward(const StepMeta& meta, const ModelState& state, Tensor& logits) override {
    RecurrentState* rs = state.recurrent;
    check_invariant(num_gdn_ == 0 || (rs && rs->shape().num_layers == num_gdn_),
                    "a Qwen3.5 forward pass needs the recurrent state of its " + std::to_string(num_gdn_) +
                        " Gated DeltaNet layers");
    const float eps = static_cast<float>(cfg_.rms_norm_eps);
    constexpr bool zc = kZeroCenteredNorm;
    Stream s = begin_forward(meta);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Qwen3_5Layer& l = layers_[i];
      // The previous layer's MLP output is added to the residual stream by the fused norm.
      if (i == 0) be_.rms_norm(s.h, l.input_norm, s.x, eps, zc);
      else add_norm(s, l.input_norm, zc);
      if (l.kind == LayerKind::FullAttention) {
        const int a = attention_index_[i];
        attention_forward(be_, local_, l.attn, attention_opt_, meta, state.kv.k(a), state.kv.v(a),
                          s.x, s_, s.y);
      } else {
        const int g = gdn_index_[i];
        gated_delta_net_forward(be_, local_, l.gdn, meta, rs->conv(g), rs->recurrent(g), s.x, g_, s.y);
      }
      add_norm(s, l.post_norm, zc);  // sums the ranks' partial outputs first (layers.h)
      if (l.sparse) moe_forward(be_, local_, l.moe, s.x, moe_, s.y);
      else mlp_forward(be_, l.mlp, s.x, s_, s.y);
    }
    finish_forward(meta, s, zc, logits);
  }

 private:
  std::vector<Qwen3_5Layer> layers_;
  AttentionOptions attention_opt_ = kAttention;  // with the multimodal RoPE's table when images are served
  MropeTables mrope_;
  std::vector<int> gdn_index_;  // index among the GDN layers of each layer (-1 for attention)
  int num_gdn_ = 0;
  int num_sparse_ = 0;  // layers with experts
  LayerScratch s_;
  MoeScratch moe_;
  GatedDeltaNetScratch g_;
};

// Gated DeltaNet sizes of Qwen3_5TextConfig (required: no defaults worth trusting).
void read_linear_attention(const ConfigReader& r, ModelConfig* c) {
  using namespace config_limits;
  c->linear_num_key_heads = r.required_int("linear_num_key_heads", kMaxHeads);
  c->linear_num_value_heads = r.required_int("linear_num_value_heads", kMaxHeads);
  c->linear_key_head_dim = r.required_int("linear_key_head_dim", kMaxHeadDim);
  c->linear_value_head_dim = r.required_int("linear_value_head_dim", kMaxHeadDim);
  c->linear_conv_kernel_dim = r.required_int("linear_conv_kernel_dim", kMaxConvKernel);
  check(c->linear_num_value_heads % c->linear_num_key_heads == 0,
        "config.json: " + r.prefix() + "linear_num_value_heads (" +
            std::to_string(c->linear_num_value_heads) + ") is not a multiple of " + r.prefix() +
            "linear_num_key_heads (" + std::to_string(c->linear_num_key_heads) + ")");
}

// The multimodal RoPE sections (text_config.rope_parameters) and, for a checkpoint with a vision
// tower, its token ids and merge size (docs/vision.md).
void read_vision_fields(const ConfigReader& r, ModelConfig* c) {
  auto& v = c->vision;
  if (const nlohmann::json* rp = r.find("rope_parameters").value; rp != nullptr && rp->is_object()) {
    if (const nlohmann::json* sec = ConfigReader::get(*rp, "mrope_section")) {
      check(sec->is_array() && sec->size() == 3, "config.json: rope_parameters.mrope_section must be 3 integers");
      for (const auto& x : *sec)
        v.mrope_section.push_back(ConfigReader::to_int(x, "config.json: rope_parameters.mrope_section", 0, 4096));
    }
    if (const nlohmann::json* il = ConfigReader::get(*rp, "mrope_interleaved"))
      v.mrope_interleaved = il->is_boolean() && il->get<bool>();
  }
  const nlohmann::json* vc = r.nested() ? ConfigReader::get(r.top(), "vision_config") : nullptr;
  if (vc == nullptr || !vc->is_object()) return;
  // Ids outside the vocabulary (a text-only test checkpoint keeping the released ids): no images.
  auto id = [&](const char* key) -> int64_t {
    const nlohmann::json* x = ConfigReader::get(r.top(), key);
    if (x == nullptr || !x->is_number_integer()) return -1;
    const auto value = x->get<int64_t>();
    return value >= 0 && value < c->vocab_size ? value : -1;
  };
  const int64_t image = id("image_token_id"), start = id("vision_start_token_id"), end = id("vision_end_token_id");
  if (image < 0 || start < 0 || end < 0) return;
  v.image_token_id = image;
  v.vision_start_token_id = start;
  v.vision_end_token_id = end;
  const nlohmann::json* m = ConfigReader::get(*vc, "spatial_merge_size");
  v.spatial_merge_size = m ? ConfigReader::to_int(*m, "config.json: vision_config.spatial_merge_size", 1, 16) : 2;
}

}  // namespace

// Qwen3_5TextConfig: a quarter of the head rotates by default; without layer_types every
// full_attention_interval-th layer (default 4) is full attention, the rest Gated DeltaNet.
void read_qwen3_5_config(const ConfigReader& r, ModelConfig* c) {
  read_rotary_dim(r, /*default_factor=*/0.25, c);
  const int64_t interval =
      r.find("layer_types").value != nullptr
          ? 1
          : r.optional_int("full_attention_interval", 1, config_limits::kMaxLayers).value_or(4);
  read_layer_types(r, /*allow_linear=*/true, interval, c);
  read_linear_attention(r, c);
  refuse_unimplemented_features(r);
  read_vision_fields(r, c);
}

std::unique_ptr<Model> make_qwen3_5(const ModelConfig& config, const Checkpoint& ckpt,
                                    Backend& backend, const ShardSpec& shard) {
  return std::make_unique<Qwen3_5Model>(config, ckpt, backend, shard);
}

std::vector<ModelFamily> qwen3_5_families() {
  return {
      {"Qwen3.5", "qwen3_5", "Qwen3_5ForConditionalGeneration", /*nested=*/true,
       /*default_head_dim=*/256, read_qwen3_5_config, make_qwen3_5},
      {"Qwen3.5", "qwen3_5_text", "Qwen3_5ForCausalLM", /*nested=*/false,
       /*default_head_dim=*/256, read_qwen3_5_config, make_qwen3_5},
  };
}

}  // namespace pagoda

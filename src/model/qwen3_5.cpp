#include "model/qwen3_5.h"

#include "core/error.h"
#include "model/gated_delta_net_layer.h"
#include "model/layers.h"

namespace pagoda {
namespace {

struct Qwen3_5Layer {
  LayerKind kind = LayerKind::FullAttention;
  Tensor input_norm, post_norm;  // [H], zero-centred
  AttentionWeights attn;         // full-attention layers
  GatedDeltaNetWeights gdn;      // linear-attention layers
  MlpWeights mlp;
};

class Qwen3_5Model final : public Model {
 public:
  Qwen3_5Model(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend)
      : cfg_(cfg), be_(backend), ws_(backend, ckpt) {
    // The CPU computes in fp32, so its weights are fp32; the GPU keeps the checkpoint's 16-bit type.
    const DType wdt = backend.device() == Device::CPU ? DType::F32 : backend.activation_dtype();
    const int64_t H = cfg.hidden_size, V = cfg.vocab_size;
    embed_ = ws_.load("model.embed_tokens.weight", wdt, {V, H});
    int num_attention = 0, num_gdn = 0;
    for (int i = 0; i < cfg.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      Qwen3_5Layer l;
      l.kind = cfg.layer_types.at(static_cast<size_t>(i));
      l.input_norm = ws_.load(p + "input_layernorm.weight", DType::F32, {H});
      l.post_norm = ws_.load(p + "post_attention_layernorm.weight", DType::F32, {H});
      if (l.kind == LayerKind::FullAttention) {
        l.attn = load_attention(ws_, cfg, i, wdt, /*gated=*/true);
        attention_index_.push_back(num_attention++);
        gdn_index_.push_back(-1);
      } else {
        l.gdn = load_gated_delta_net(ws_, cfg, i, wdt);
        attention_index_.push_back(-1);
        gdn_index_.push_back(num_gdn++);
      }
      l.mlp = load_mlp(ws_, cfg, i, wdt);
      layers_.push_back(l);
    }
    num_gdn_ = num_gdn;
    final_norm_ = ws_.load("model.norm.weight", DType::F32, {H});
    check(cfg.tie_word_embeddings || ws_.has("lm_head.weight"),
          "config says tie_word_embeddings=false but the checkpoint has no lm_head.weight");
    lm_head_ = (!cfg.tie_word_embeddings && ws_.has("lm_head.weight"))
                   ? ws_.load("lm_head.weight", wdt, {V, H})
                   : embed_;
  }

  const ModelConfig& config() const override { return cfg_; }
  size_t weight_bytes() const override { return ws_.bytes(); }

  size_t reserve(int32_t max_tokens, int32_t max_logits_rows) override {
    const int64_t T = max_tokens, H = cfg_.hidden_size, D = cfg_.head_dim;
    const DType a = be_.activation_dtype();
    scratch_buffers_.clear();
    auto make = [&](int64_t rows, int64_t cols) {
      scratch_buffers_.push_back(be_.alloc(static_cast<size_t>(rows * cols) * dtype_size(a)));
      return scratch_buffers_.back().tensor(a, {rows, cols});
    };
    residual_ = make(T, H);
    normed_ = make(T, H);
    mixer_out_ = make(T, H);
    if (cfg_.num_layers_of(LayerKind::FullAttention) > 0) {
      s_.qkv = make(T, (2 * cfg_.num_heads + 2 * cfg_.num_kv_heads) * D);  // q | gate | k | v
      s_.attn = make(T, cfg_.num_heads * D);
    }
    if (num_gdn_ > 0) {
      g_.proj = make(T, gated_delta_net_proj_cols(cfg_));
      g_.conv_out = make(T, cfg_.conv_dim());
      g_.core = make(T, cfg_.linear_num_value_heads * cfg_.linear_value_head_dim);
    }
    s_.gate_up = make(T, 2 * cfg_.intermediate_size);
    s_.mlp_act = make(T, cfg_.intermediate_size);
    last_rows_ = make(max_logits_rows, H);
    max_tokens_ = max_tokens;
    max_logits_rows_ = max_logits_rows;
    size_t total = 0;
    for (const Buffer& b : scratch_buffers_) total += b.bytes();
    return total;
  }

  void forward(const StepMeta& meta, const ModelState& state, Tensor& logits) override {
    check(meta.num_tokens <= max_tokens_ && meta.num_logits_rows <= max_logits_rows_,
          "internal: step larger than the reserved workspace");
    RecurrentState* rs = state.recurrent;
    check(num_gdn_ == 0 || (rs && rs->shape().num_layers == num_gdn_),
          "internal: a Qwen3.5 forward pass needs the recurrent state of its " +
              std::to_string(num_gdn_) + " Gated DeltaNet layers");
    const int64_t T = meta.num_tokens;
    const float eps = static_cast<float>(cfg_.rms_norm_eps);
    constexpr bool zc = true;  // Qwen3.5's input, post-attention and final norms use 1 + w
    Tensor h = residual_.rows(0, T), x = normed_.rows(0, T), y = mixer_out_.rows(0, T);
    be_.embedding(embed_, meta.token_ids, h);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Qwen3_5Layer& l = layers_[i];
      // The previous layer's MLP output is added to the residual stream by the fused norm.
      if (i == 0) be_.rms_norm(h, l.input_norm, x, eps, zc);
      else be_.add_rms_norm(h, y, l.input_norm, x, eps, zc);
      if (l.kind == LayerKind::FullAttention) {
        const int a = attention_index_[i];
        attention_forward(be_, cfg_, l.attn, /*gated=*/true, meta, state.kv.k(a), state.kv.v(a),
                          x, s_, y);
      } else {
        const int g = gdn_index_[i];
        gated_delta_net_forward(be_, cfg_, l.gdn, meta, rs->conv(g), rs->recurrent(g), x, g_, y);
      }
      be_.add_rms_norm(h, y, l.post_norm, x, eps, zc);
      mlp_forward(be_, l.mlp, x, s_, y);
    }
    be_.add_rms_norm(h, y, final_norm_, x, eps, zc);
    Tensor rows = last_rows_.rows(0, meta.num_logits_rows);
    be_.gather_rows(x, meta.logits_rows, rows);
    be_.linear(rows, lm_head_, logits);
  }

 private:
  ModelConfig cfg_;
  Backend& be_;
  WeightStore ws_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<Qwen3_5Layer> layers_;
  std::vector<int> gdn_index_;  // index among the GDN layers of each layer (-1 for attention)
  int num_gdn_ = 0;
  std::vector<Buffer> scratch_buffers_;
  Tensor residual_, normed_, mixer_out_, last_rows_;
  LayerScratch s_;
  GatedDeltaNetScratch g_;
  int32_t max_tokens_ = 0, max_logits_rows_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_qwen3_5(const ModelConfig& config, const Checkpoint& ckpt,
                                    Backend& backend) {
  return std::make_unique<Qwen3_5Model>(config, ckpt, backend);
}

}  // namespace pagoda

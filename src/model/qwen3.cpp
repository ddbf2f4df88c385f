#include "model/qwen3.h"

#include "core/error.h"
#include "model/layers.h"

namespace pagoda {
namespace {

struct Qwen3Layer {
  Tensor input_norm, post_norm;  // [H]
  AttentionWeights attn;
  MlpWeights mlp;
};

class Qwen3Model final : public Model {
 public:
  Qwen3Model(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend)
      : cfg_(cfg), be_(backend), ws_(backend, ckpt) {
    // The CPU computes in fp32, so its weights are fp32; the GPU keeps the checkpoint's 16-bit type.
    const DType wdt = backend.device() == Device::CPU ? DType::F32 : backend.activation_dtype();
    const int64_t H = cfg.hidden_size, V = cfg.vocab_size;
    embed_ = ws_.load("model.embed_tokens.weight", wdt, {V, H});
    for (int i = 0; i < cfg.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      Qwen3Layer l;
      l.input_norm = ws_.load(p + "input_layernorm.weight", DType::F32, {H});
      l.post_norm = ws_.load(p + "post_attention_layernorm.weight", DType::F32, {H});
      l.attn = load_attention(ws_, cfg, i, wdt, /*gated=*/false);
      l.mlp = load_mlp(ws_, cfg, i, wdt);
      layers_.push_back(l);
      attention_index_.push_back(i);
    }
    final_norm_ = ws_.load("model.norm.weight", DType::F32, {H});
    lm_head_ = (!cfg.tie_word_embeddings && ws_.has("lm_head.weight"))
                   ? ws_.load("lm_head.weight", wdt, {V, H})
                   : embed_;
    check(cfg.tie_word_embeddings || ws_.has("lm_head.weight"),
          "config says tie_word_embeddings=false but the checkpoint has no lm_head.weight");
  }

  const ModelConfig& config() const override { return cfg_; }
  size_t weight_bytes() const override { return ws_.bytes(); }

  size_t reserve(int32_t max_tokens, int32_t max_logits_rows) override {
    const int64_t T = max_tokens, H = cfg_.hidden_size, D = cfg_.head_dim;
    const int64_t qkv_cols = (cfg_.num_heads + 2 * cfg_.num_kv_heads) * D;
    const DType a = be_.activation_dtype();
    scratch_buffers_.clear();
    auto make = [&](DType t, int64_t rows, int64_t cols) {
      scratch_buffers_.push_back(be_.alloc(static_cast<size_t>(rows * cols) * dtype_size(t)));
      return scratch_buffers_.back().tensor(t, {rows, cols});
    };
    residual_ = make(a, T, H);
    normed_ = make(a, T, H);
    mixer_out_ = make(a, T, H);
    s_.qkv = make(a, T, qkv_cols);
    s_.attn = make(a, T, cfg_.num_heads * D);
    s_.gate_up = make(a, T, 2 * cfg_.intermediate_size);
    s_.mlp_act = make(a, T, cfg_.intermediate_size);
    last_rows_ = make(a, max_logits_rows, H);
    max_tokens_ = max_tokens;
    max_logits_rows_ = max_logits_rows;
    size_t total = 0;
    for (const Buffer& b : scratch_buffers_) total += b.bytes();
    return total;
  }

  void forward(const StepMeta& meta, const ModelState& state, Tensor& logits) override {
    PagedKvCache& kv = state.kv;
    check(meta.num_tokens <= max_tokens_ && meta.num_logits_rows <= max_logits_rows_,
          "internal: step larger than the reserved workspace");
    const int64_t T = meta.num_tokens;
    const float eps = static_cast<float>(cfg_.rms_norm_eps);
    Tensor h = residual_.rows(0, T), x = normed_.rows(0, T), y = mixer_out_.rows(0, T);
    be_.embedding(embed_, meta.token_ids, h);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Qwen3Layer& l = layers_[i];
      // The previous layer's MLP output is added to the residual stream by the fused norm.
      if (i == 0) be_.rms_norm(h, l.input_norm, x, eps, false);
      else be_.add_rms_norm(h, y, l.input_norm, x, eps, false);
      const int a = attention_index_[i];
      attention_forward(be_, cfg_, l.attn, false, meta, kv.k(a), kv.v(a), x, s_, y);
      be_.add_rms_norm(h, y, l.post_norm, x, eps, false);
      mlp_forward(be_, l.mlp, x, s_, y);
    }
    be_.add_rms_norm(h, y, final_norm_, x, eps, false);
    Tensor rows = last_rows_.rows(0, meta.num_logits_rows);
    be_.gather_rows(x, meta.logits_rows, rows);
    be_.linear(rows, lm_head_, logits);
  }

 private:
  ModelConfig cfg_;
  Backend& be_;
  WeightStore ws_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<Qwen3Layer> layers_;
  std::vector<Buffer> scratch_buffers_;
  Tensor residual_, normed_, mixer_out_, last_rows_;
  LayerScratch s_;
  int32_t max_tokens_ = 0, max_logits_rows_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_qwen3(const ModelConfig& config, const Checkpoint& ckpt,
                                  Backend& backend) {
  return std::make_unique<Qwen3Model>(config, ckpt, backend);
}

}  // namespace pagoda

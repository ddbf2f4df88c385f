#include "model/qwen3.h"

#include "model/decoder_base.h"
#include "model/layers.h"

namespace pagoda {
namespace {

struct Qwen3Layer {
  Tensor input_norm, post_norm;  // [H]
  AttentionWeights attn;
  MlpWeights mlp;
};

class Qwen3Model final : public DecoderBase {
 public:
  Qwen3Model(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend)
      : DecoderBase(cfg, ckpt, backend) {
    const int64_t H = cfg.hidden_size;
    load_embedding_and_head();
    for (int i = 0; i < cfg.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      Qwen3Layer l;
      l.input_norm = ws_.load(p + "input_layernorm.weight", DType::F32, {H});
      l.post_norm = ws_.load(p + "post_attention_layernorm.weight", DType::F32, {H});
      l.attn = load_attention(ws_, cfg, i, weight_dtype(), /*gated=*/false);
      l.mlp = load_mlp(ws_, cfg, i, weight_dtype());
      layers_.push_back(l);
      attention_index_.push_back(i);
    }
  }

  size_t reserve(int32_t max_tokens, int32_t max_logits_rows) override {
    const int64_t T = max_tokens, D = cfg_.head_dim;
    begin_reserve(max_tokens, max_logits_rows);
    s_.qkv = scratch(T, (cfg_.num_heads + 2 * cfg_.num_kv_heads) * D);
    s_.attn = scratch(T, cfg_.num_heads * D);
    s_.gate_up = scratch(T, 2 * cfg_.intermediate_size);
    s_.mlp_act = scratch(T, cfg_.intermediate_size);
    return scratch_bytes();
  }

  void forward(const StepMeta& meta, const ModelState& state, Tensor& logits) override {
    const float eps = static_cast<float>(cfg_.rms_norm_eps);
    Stream s = begin_forward(meta);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const Qwen3Layer& l = layers_[i];
      // The previous layer's MLP output is added to the residual stream by the fused norm.
      if (i == 0) be_.rms_norm(s.h, l.input_norm, s.x, eps, false);
      else be_.add_rms_norm(s.h, s.y, l.input_norm, s.x, eps, false);
      const int a = attention_index_[i];
      attention_forward(be_, cfg_, l.attn, false, meta, state.kv.k(a), state.kv.v(a), s.x, s_, s.y);
      be_.add_rms_norm(s.h, s.y, l.post_norm, s.x, eps, false);
      mlp_forward(be_, l.mlp, s.x, s_, s.y);
    }
    finish_forward(meta, s, /*zero_centered=*/false, logits);
  }

 private:
  std::vector<Qwen3Layer> layers_;
  LayerScratch s_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3(const ModelConfig& config, const Checkpoint& ckpt,
                                  Backend& backend) {
  return std::make_unique<Qwen3Model>(config, ckpt, backend);
}

}  // namespace pagoda

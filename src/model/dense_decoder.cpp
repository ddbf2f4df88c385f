#include "model/dense_decoder.h"

#include "model/decoder_base.h"

namespace pagoda {
namespace {

struct DenseLayer {
  Tensor input_norm, post_norm;  // [H]
  AttentionWeights attn;
  MlpWeights mlp;
};

class DenseDecoder final : public DecoderBase {
 public:
  DenseDecoder(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend,
               const DenseDecoderOptions& opt)
      : DecoderBase(cfg, ckpt, backend), opt_(opt) {
    const int64_t H = cfg.hidden_size;
    load_embedding_and_head();
    for (int i = 0; i < cfg.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      DenseLayer l;
      l.input_norm = ws_.load(p + "input_layernorm.weight", DType::F32, {H});
      l.post_norm = ws_.load(p + "post_attention_layernorm.weight", DType::F32, {H});
      l.attn = load_attention(ws_, cfg, i, weight_dtype(), opt_.attention);
      l.mlp = load_mlp(ws_, cfg, i, weight_dtype());
      layers_.push_back(l);
      attention_index_.push_back(i);
    }
  }

  std::vector<OpUse> required_ops() const override {
    std::vector<OpUse> ops = DecoderBase::required_ops();
    add_attention_ops(opt_.attention, be_.activation_dtype(), weight_dtype(), ops);
    add_mlp_ops(be_.activation_dtype(), weight_dtype(), ops);
    return ops;
  }

  size_t reserve(int32_t max_tokens, int32_t max_logits_rows) override {
    const int64_t T = max_tokens, D = cfg_.head_dim;
    const int64_t q_heads = cfg_.num_heads * (opt_.attention.gated ? 2 : 1);
    begin_reserve(max_tokens, max_logits_rows);
    s_.qkv = scratch(T, (q_heads + 2 * cfg_.num_kv_heads) * D);
    s_.attn = scratch(T, cfg_.num_heads * D);
    s_.gate_up = scratch(T, 2 * cfg_.intermediate_size);
    s_.mlp_act = scratch(T, cfg_.intermediate_size);
    return scratch_bytes();
  }

  void forward(const StepMeta& meta, const ModelState& state, Tensor& logits) override {
    const float eps = static_cast<float>(cfg_.rms_norm_eps);
    const bool zc = opt_.zero_centered_norm;
    Stream s = begin_forward(meta);
    for (size_t i = 0; i < layers_.size(); ++i) {
      const DenseLayer& l = layers_[i];
      // The previous layer's MLP output is added to the residual stream by the fused norm.
      if (i == 0) be_.rms_norm(s.h, l.input_norm, s.x, eps, zc);
      else be_.add_rms_norm(s.h, s.y, l.input_norm, s.x, eps, zc);
      const int a = attention_index_[i];
      attention_forward(be_, cfg_, l.attn, opt_.attention, meta, state.kv.k(a), state.kv.v(a), s.x,
                        s_, s.y);
      be_.add_rms_norm(s.h, s.y, l.post_norm, s.x, eps, zc);
      mlp_forward(be_, l.mlp, s.x, s_, s.y);
    }
    finish_forward(meta, s, zc, logits);
  }

 private:
  DenseDecoderOptions opt_;
  std::vector<DenseLayer> layers_;
  LayerScratch s_;
};

}  // namespace

std::unique_ptr<Model> make_dense_decoder(const ModelConfig& config, const Checkpoint& ckpt,
                                          Backend& backend, const DenseDecoderOptions& options) {
  return std::make_unique<DenseDecoder>(config, ckpt, backend, options);
}

}  // namespace pagoda

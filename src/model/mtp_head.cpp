#include "model/mtp_head.h"

#include "core/error.h"
#include "model/moe_block.h"

namespace pagoda {
namespace {

class MtpHead final : public DecoderBase {
 public:
  MtpHead(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend, const Tensor& embed, const Tensor& lm_head,
          const AttentionOptions& attention, bool zero_centered)
      : DecoderBase(cfg, ckpt, backend), opt_(attention), zc_(zero_centered) {
    const int64_t H = cfg.hidden_size;
    check(ws_.has("mtp.fc.weight"),
          "--speculative-config: method \"mtp\": the checkpoint has no multi-token-prediction head (mtp.fc.weight)");
    check(moe_fields(cfg) == nullptr,
          "--speculative-config: method \"mtp\" on a mixture-of-experts model is not supported yet");
    const DType wdt = weight_dtype();
    embed_ = embed;
    lm_head_ = Linear::over(lm_head);
    final_norm_ = ws_.load("mtp.norm.weight", DType::F32, {H});
    norm_embedding_ = ws_.load("mtp.pre_fc_norm_embedding.weight", DType::F32, {H});
    norm_hidden_ = ws_.load("mtp.pre_fc_norm_hidden.weight", DType::F32, {H});
    // fc works on [embedding; hidden]: two projections over its two column halves, so that
    // fc(cat) = fc_e · e + fc_h · h needs no concatenated input.
    const LinearPart fc{.weight = "mtp.fc.weight", .rows = H};
    fc_e_ = Linear::load(ws_, {.parts = {fc}, .in_features = 2 * H, .dtype = wdt, .col_begin = 0, .col_end = H});
    fc_h_ = Linear::load(ws_, {.parts = {fc}, .in_features = 2 * H, .dtype = wdt, .col_begin = H, .col_end = 2 * H});
    input_norm_ = ws_.load("mtp.layers.0.input_layernorm.weight", DType::F32, {H});
    post_norm_ = ws_.load("mtp.layers.0.post_attention_layernorm.weight", DType::F32, {H});
    attn_ = load_attention_at(ws_, cfg, "mtp.layers.0.", wdt, opt_);
    mlp_ = load_mlp_at(ws_, cfg, "mtp.layers.0.mlp.", cfg.intermediate_size, wdt);
    attention_index_ = {0};
  }

  std::vector<OpUse> required_ops() const override {
    std::vector<OpUse> ops = DecoderBase::required_ops();
    const DType act = be_.activation_dtype(), wdt = weight_dtype();
    add_attention_ops(opt_, act, wdt, ops);
    add_mlp_ops(GluActivation::Silu, act, wdt, ops);
    return ops;
  }

  size_t reserve(int32_t max_tokens, int32_t max_logits_rows) override {
    const int64_t T = max_tokens, D = cfg_.head_dim;
    begin_reserve(max_tokens, max_logits_rows);
    s_.qkv = scratch(T, (2 * cfg_.num_heads + 2 * cfg_.num_kv_heads) * D);
    s_.attn = scratch(T, cfg_.num_heads * D);
    s_.gate_up = scratch(T, 2 * cfg_.intermediate_size);
    s_.mlp_act = scratch(T, cfg_.intermediate_size);
    return scratch_bytes();
  }

  void set_hidden_input(const Tensor& hidden) override { hidden_in_ = hidden; }
  size_t weight_bytes() const override { return ws_.bytes(); }

  void forward(const StepMeta& meta, const ModelState& state, Tensor& logits) override {
    check_invariant(meta.hidden_rows.numel() == meta.num_tokens && hidden_in_.data != nullptr,
                    "an MTP pass needs the hidden state of every token (StepMeta::hidden_rows, set_hidden_input)");
    const float eps = static_cast<float>(cfg_.rms_norm_eps);
    Stream s = begin_forward(meta);  // s.h = embed(token t + 1)
    be_.rms_norm(s.h, norm_embedding_, s.x, eps, zc_);
    fc_e_.forward(be_, s.x, s.h);
    be_.gather_rows(hidden_in_, meta.hidden_rows, s.y);
    be_.rms_norm(s.y, norm_hidden_, s.x, eps, zc_);
    fc_h_.forward(be_, s.x, s.y);
    be_.add(s.h, s.y, s.h);  // the residual stream starts at fc([e; h])
    be_.rms_norm(s.h, input_norm_, s.x, eps, zc_);
    attention_forward(be_, cfg_, attn_, opt_, meta, state.kv.k(0), state.kv.v(0), s.x, s_, s.y);
    be_.add_rms_norm(s.h, s.y, post_norm_, s.x, eps, zc_);
    mlp_forward(be_, mlp_, s.x, s_, s.y);
    finish_forward(meta, s, zc_, logits);
  }

 private:
  AttentionOptions opt_;
  bool zc_;
  Tensor norm_embedding_, norm_hidden_, input_norm_, post_norm_;
  Linear fc_e_, fc_h_;
  AttentionWeights attn_;
  MlpWeights mlp_;
  LayerScratch s_;
  Tensor hidden_in_;
};

}  // namespace

std::unique_ptr<Model> load_mtp_head(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend,
                                     const Tensor& embed, const Tensor& lm_head, const AttentionOptions& attention,
                                     bool zero_centered_norms) {
  return std::make_unique<MtpHead>(cfg, ckpt, backend, embed, lm_head, attention, zero_centered_norms);
}

}  // namespace pagoda

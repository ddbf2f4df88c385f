#include "model/dense_decoder.h"

#include "core/error.h"
#include "model/decoder_base.h"
#include "model/moe_block.h"

namespace pagoda {
namespace {

struct DenseLayer {
  // input_norm before attention; mlp_norm before the MLP; with sandwich norms also attn_out_norm
  // and mlp_out_norm on the two sub-layer outputs (empty otherwise). All [H].
  Tensor input_norm, mlp_norm, attn_out_norm, mlp_out_norm;
  AttentionWeights attn;
  bool sparse = false;  // the mixture of experts (moe_block.h) instead of the dense MLP
  MlpWeights mlp;
  MoeWeights moe;
};

class DenseDecoder final : public DecoderBase {
 public:
  DenseDecoder(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend, const ShardSpec& shard,
               const DenseDecoderOptions& opt)
      : DecoderBase(cfg, ckpt, backend, shard), opt_(opt) {
    const int64_t H = cfg.hidden_size;
    check_invariant(opt_.layer_attention.empty() ||
                        static_cast<int64_t>(opt_.layer_attention.size()) == cfg.num_layers,
                    "per-layer attention options for " + std::to_string(opt_.layer_attention.size()) +
                        " layers, the config has " + std::to_string(cfg.num_layers));
    load_embedding_and_head();
    set_embedding_scale(opt_.embedding_scale);
    final_logit_softcap_ = opt_.final_logit_softcap;
    for (int i = 0; i < cfg.num_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      DenseLayer l;
      l.input_norm = ws_.load(p + "input_layernorm.weight", DType::F32, {H});
      if (opt_.sandwich_norms) {
        l.attn_out_norm = ws_.load(p + "post_attention_layernorm.weight", DType::F32, {H});
        l.mlp_norm = ws_.load(p + "pre_feedforward_layernorm.weight", DType::F32, {H});
        l.mlp_out_norm = ws_.load(p + "post_feedforward_layernorm.weight", DType::F32, {H});
      } else {
        l.mlp_norm = ws_.load(p + "post_attention_layernorm.weight", DType::F32, {H});
      }
      l.attn = load_attention(ws_, cfg, i, weight_dtype(), attention_options(i), shard_);
      l.sparse = is_sparse_layer(cfg, i);
      if (l.sparse) {
        l.moe = load_moe(ws_, cfg, i, weight_dtype(), shard_);
        ++num_sparse_;
      } else {
        l.mlp = load_mlp(ws_, cfg, i, weight_dtype(), shard_);
      }
      layers_.push_back(l);
      attention_index_.push_back(i);
    }
  }

  std::vector<OpUse> required_ops() const override {
    std::vector<OpUse> ops = DecoderBase::required_ops();
    for (int i = 0; i < cfg_.num_layers; ++i)
      add_attention_ops(attention_options(i), be_.activation_dtype(), weight_dtype(), ops);
    if (num_sparse_ < cfg_.num_layers) add_mlp_ops(opt_.activation, be_.activation_dtype(), weight_dtype(), ops);
    if (num_sparse_ > 0) add_moe_ops(cfg_, be_.activation_dtype(), weight_dtype(), ops);
    return ops;
  }

  size_t reserve(int32_t max_tokens, int32_t max_logits_rows) override {
    const ModelConfig& c = local_;  // this rank's heads and columns
    const int64_t T = max_tokens, D = c.head_dim;
    const int64_t q_heads = c.num_heads * (opt_.attention.gated ? 2 : 1);
    begin_reserve(max_tokens, max_logits_rows);
    s_.qkv = scratch(T, (q_heads + 2 * c.num_kv_heads) * D);
    s_.attn = scratch(T, c.num_heads * D);
    if (num_sparse_ < c.num_layers) {
      s_.gate_up = scratch(T, 2 * c.intermediate_size);
      s_.mlp_act = scratch(T, c.intermediate_size);
    }
    if (num_sparse_ > 0)
      moe_ = reserve_moe(local_, T, be_.activation_dtype(),
                         [this](int64_t rows, int64_t cols, DType dt) { return scratch(rows, cols, dt); });
    if (opt_.sandwich_norms) sublayer_out_ = scratch(T, cfg_.hidden_size);
    aux_.clear();
    for (size_t j = 0; j < aux_layers_.size(); ++j) aux_.push_back(scratch(T, cfg_.hidden_size));
    return scratch_bytes();
  }

  void set_aux_hidden_layers(const std::vector<int>& layers) override {
    std::string list;
    for (int id : layers) list += (list.empty() ? "" : ", ") + std::to_string(id);
    for (size_t j = 0; j < layers.size(); ++j)
      check(layers[j] >= 0 && layers[j] <= cfg_.num_layers && (j == 0 || layers[j] > layers[j - 1]),
            "--speculative-config: EAGLE-3 aux hidden-state layers [" + list + "] must be distinct and ascending in [0, " +
                std::to_string(cfg_.num_layers) + "] (the target has " + std::to_string(cfg_.num_layers) +
                " layers; " + std::to_string(cfg_.num_layers) + " = after the last one)");
    aux_layers_ = layers;
    aux_slot_.assign(static_cast<size_t>(cfg_.num_layers) + 1, -1);
    for (size_t j = 0; j < layers.size(); ++j) aux_slot_[static_cast<size_t>(layers[j])] = static_cast<int>(j);
    aux_.clear();  // allocated by the next reserve()
  }

  std::vector<Tensor> aux_hidden(int32_t num_tokens) const override {
    check_invariant(aux_.size() == aux_layers_.size(), "EAGLE-3 aux layers set after reserve()");
    std::vector<Tensor> out;
    for (const Tensor& a : aux_) out.push_back(a.rows(0, num_tokens));
    return out;
  }

  void forward(const StepMeta& meta, const ModelState& state, Tensor& logits) override {
    const float eps = static_cast<float>(cfg_.rms_norm_eps);
    const bool zc = opt_.zero_centered_norm;
    Stream s = begin_forward(meta);
    // With sandwich norms a sub-layer writes to `raw` and its output norm to s.y; otherwise the
    // sub-layer writes s.y directly. Either way s.y is what the next fused norm adds.
    Tensor raw = opt_.sandwich_norms ? sublayer_out_.rows(0, meta.num_tokens) : s.y;
    for (size_t i = 0; i < layers_.size(); ++i) {
      const DenseLayer& l = layers_[i];
      // The previous layer's MLP output is added to the residual stream by the fused norm (summed
      // over the ranks there, unless a sandwich norm summed it first).
      if (i == 0) be_.rms_norm(s.h, l.input_norm, s.x, eps, zc);
      else add_norm(s, l.input_norm, zc, !opt_.sandwich_norms);
      keep_aux(static_cast<int>(i), s.h);  // the residual stream at the input of layer i
      const int a = attention_index_[i];
      attention_forward(be_, local_, l.attn, attention_options(static_cast<int>(i)), meta,
                        state.kv.k(a), state.kv.v(a), s.x, s_, raw);
      if (opt_.sandwich_norms) sandwich_norm(raw, l.attn_out_norm, s.y);
      add_norm(s, l.mlp_norm, zc, !opt_.sandwich_norms);
      if (l.sparse) moe_forward(be_, local_, l.moe, s.x, moe_, raw);
      else mlp_forward(be_, l.mlp, s.x, s_, raw, opt_.activation);
      if (opt_.sandwich_norms) sandwich_norm(raw, l.mlp_out_norm, s.y);
    }
    finish_forward(meta, s, zc, logits, !opt_.sandwich_norms);
    keep_aux(static_cast<int>(layers_.size()), s.h);  // after the last layer, before the final norm
  }

 private:
  // Gemma 3's norm of a sub-layer's output before it joins the residual stream: of the whole sum,
  // so the ranks' partial outputs are summed first.
  void sandwich_norm(Tensor& raw, const Tensor& w, Tensor& y) {
    sum_ranks(raw);
    be_.rms_norm(raw, w, y, static_cast<float>(cfg_.rms_norm_eps), opt_.zero_centered_norm);
  }

  // EAGLE-3: a copy of the residual stream `h` when `layer` is one of the aux layers.
  void keep_aux(int layer, const Tensor& h) {
    if (aux_.empty() || aux_slot_[static_cast<size_t>(layer)] < 0) return;
    Tensor dst = aux_[static_cast<size_t>(aux_slot_[static_cast<size_t>(layer)])];
    check_invariant(h.is_contiguous() && dst.size(0) >= h.size(0), "the residual stream outgrew its aux buffer");
    be_.copy_on_device(dst.data, h.data, h.nbytes());
  }

  const AttentionOptions& attention_options(int layer) const {
    return opt_.layer_attention.empty() ? opt_.attention
                                        : opt_.layer_attention[static_cast<size_t>(layer)];
  }

  DenseDecoderOptions opt_;
  std::vector<DenseLayer> layers_;
  LayerScratch s_;
  int num_sparse_ = 0;  // layers with experts
  MoeScratch moe_;
  Tensor sublayer_out_;  // [T, H]: a sub-layer's output before its norm (sandwich norms)
  // EAGLE-3 targets: the layer ids whose residual stream is kept (ascending), each one's slot in
  // aux_ by layer id (-1: none; num_layers + 1 entries), and the [max_tokens, H] copies.
  std::vector<int> aux_layers_, aux_slot_;
  std::vector<Tensor> aux_;
};

}  // namespace

std::unique_ptr<Model> make_dense_decoder(const ModelConfig& config, const Checkpoint& ckpt, Backend& backend,
                                          const ShardSpec& shard, const DenseDecoderOptions& options) {
  return std::make_unique<DenseDecoder>(config, ckpt, backend, shard, options);
}

}  // namespace pagoda

#include "model/decoder_base.h"

#include "core/error.h"

namespace pagoda {

DecoderBase::DecoderBase(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend, const ShardSpec& shard)
    : cfg_(cfg), shard_(shard), local_(rank_view(cfg, shard)), be_(backend), ws_(backend, ckpt, cfg.quantization), native_dtype_(WeightStore::native_dtype(ckpt)) {
  ws_.set_lora(shard.lora);
}

// The CPU keeps the checkpoint's dtype (used in place from the mapping; its kernels accumulate in
// fp32 whatever the weight dtype), and so does Vulkan (its shaders read f32, bf16 or f16 weights);
// CUDA converts to its activation dtype (cuBLASLt's operands).
DType DecoderBase::weight_dtype() const {
  return be_.device() == Device::CUDA ? be_.activation_dtype() : native_dtype_;
}

void DecoderBase::load_embedding_and_head() {
  const int64_t H = cfg_.hidden_size, V = cfg_.vocab_size;
  embed_ = ws_.load("model.embed_tokens.weight", weight_dtype(), {V, H});
  final_norm_ = ws_.load("model.norm.weight", DType::F32, {H});
  check(cfg_.tie_word_embeddings || ws_.has("lm_head.weight"),
        "config says tie_word_embeddings=false but the checkpoint has no lm_head.weight");
  // Under tensor parallelism each rank multiplies its slice of the vocabulary (Megatron's
  // vocab-parallel lm_head; a decode step reads the whole matrix once over the ranks instead of once
  // on each) and the slices are gathered. A vocabulary the ranks do not divide stays whole.
  vocab_sharded_ = shard_.world > 1 && V % shard_.world == 0;
  const bool untied = !cfg_.tie_word_embeddings && ws_.has("lm_head.weight");
  if (untied)
    lm_head_ = Linear::load(ws_, {.parts = {{.weight = "lm_head.weight", .rows = V}}, .in_features = H,
                                  .dtype = weight_dtype(), .shard = vocab_sharded_ ? ShardKind::Column : ShardKind::Replicated},
                            shard_);
  else if (vocab_sharded_)
    lm_head_ = Linear::over(embed_.rows(V / shard_.world * shard_.rank, V / shard_.world * (shard_.rank + 1)));
  else
    lm_head_ = Linear::over(embed_);
}

Tensor DecoderBase::full_lm_head_weight() {
  if (!vocab_sharded_) return lm_head_.weight();
  if (cfg_.tie_word_embeddings || !ws_.has("lm_head.weight")) return embed_;
  return ws_.load("lm_head.weight", weight_dtype(), {cfg_.vocab_size, cfg_.hidden_size});
}

Tensor DecoderBase::scratch(int64_t rows, int64_t cols) { return scratch(rows, cols, be_.activation_dtype()); }

Tensor DecoderBase::scratch(int64_t rows, int64_t cols, DType dtype) {
  scratch_buffers_.push_back(be_.alloc(static_cast<size_t>(rows * cols) * dtype_size(dtype)));
  return scratch_buffers_.back().tensor(dtype, {rows, cols});
}

void DecoderBase::begin_reserve(int32_t max_tokens, int32_t max_logits_rows) {
  scratch_buffers_.clear();
  const int64_t H = cfg_.hidden_size;
  residual_ = scratch(max_tokens, H);
  normed_ = scratch(max_tokens, H);
  mixer_out_ = scratch(max_tokens, H);
  last_rows_ = scratch(max_logits_rows, H);
  if (vocab_sharded_) {
    const int64_t n = cfg_.vocab_size / shard_.world;
    local_logits_ = scratch(max_logits_rows, n, DType::F32);
    gathered_logits_ = scratch(static_cast<int64_t>(shard_.world) * max_logits_rows, n, DType::F32);
  }
  max_tokens_ = max_tokens;
  max_logits_rows_ = max_logits_rows;
}

size_t DecoderBase::scratch_bytes() const {
  size_t total = 0;
  for (const Buffer& b : scratch_buffers_) total += b.bytes();
  return total;
}

DecoderBase::Stream DecoderBase::begin_forward(const StepMeta& meta) {
  check_invariant(meta.num_tokens <= max_tokens_ && meta.num_logits_rows <= max_logits_rows_,
                  "step larger than the reserved workspace");
  const int64_t T = meta.num_tokens;
  Stream s{residual_.rows(0, T), normed_.rows(0, T), mixer_out_.rows(0, T)};
  be_.embedding(embed_, meta.token_ids, s.h);
  if (embedding_scale_ != 1.0f) be_.scale(s.h, embedding_scale_);
  if (meta.embedding_overrides != nullptr)  // image placeholders take their encoder's rows
    for (const EmbeddingOverride& o : *meta.embedding_overrides) {
      check_invariant(o.row >= 0 && o.row + o.source.size(0) <= T && o.source.row_numel() == s.h.row_numel() &&
                          o.source.dtype == s.h.dtype && o.source.is_contiguous(),
                      "an embedding override outside the step or of another shape");
      be_.copy_on_device(s.h.row(o.row), o.source.data, o.source.nbytes());
    }
  return s;
}

std::vector<OpUse> DecoderBase::required_ops() const {
  const DType a = be_.activation_dtype(), w = weight_dtype();
  std::vector<OpUse> ops = {{Op::Embedding, w},  {Op::RmsNorm, a}, {Op::Add, a},
                            {Op::GatherRows, a}, {Op::Linear, w},  {Op::ArgmaxRows, DType::F32},
                            {Op::ApplyTokenMask, DType::F32}};
  if (embedding_scale_ != 1.0f) ops.push_back({Op::Scale, a});
  if (final_logit_softcap_ > 0.0f) ops.push_back({Op::Softcap, DType::F32});
  // Quantized projections (a checkpoint's or --quantization fp8), refused at load where unsupported.
  if (cfg_.quantization.fp8()) ops.push_back({Op::LinearFp8, DType::F8_E4M3});
  if (cfg_.quantization.int4()) ops.push_back({Op::LinearInt4, DType::I32});
  return ops;
}

Tensor DecoderBase::last_hidden_rows(int32_t num_rows) const {
  check_invariant(num_rows >= 0 && num_rows <= max_logits_rows_, "more hidden rows asked for than reserved");
  return last_rows_.rows(0, num_rows);
}

Tensor DecoderBase::final_hidden(int32_t num_tokens) const {
  check_invariant(num_tokens >= 0 && num_tokens <= max_tokens_, "more hidden rows asked for than reserved");
  return normed_.rows(0, num_tokens);  // finish_forward leaves the final norm's output there
}

void DecoderBase::add_norm(Stream& s, const Tensor& w, bool zero_centered, bool y_partial) {
  const auto eps = static_cast<float>(cfg_.rms_norm_eps);
  if (y_partial && shard_.world > 1) shard_.comm->all_reduce_add_rms_norm(be_, s.y, s.h, w, s.x, eps, zero_centered);
  else be_.add_rms_norm(s.h, s.y, w, s.x, eps, zero_centered);
}

void DecoderBase::sum_ranks(Tensor& y) {
  if (shard_.world > 1) shard_.comm->all_reduce_sum(be_, y);
}

void DecoderBase::finish_forward(const StepMeta& meta, Stream& s, bool zero_centered, Tensor& logits, bool y_partial) {
  add_norm(s, final_norm_, zero_centered, y_partial);
  Tensor rows = last_rows_.rows(0, meta.num_logits_rows);
  be_.gather_rows(s.x, meta.logits_rows, rows);
  if (vocab_sharded_) {
    Tensor local = local_logits_.rows(0, meta.num_logits_rows);
    lm_head_.forward(be_, rows, local);
    Tensor scratch = gathered_logits_.rows(0, static_cast<int64_t>(shard_.world) * meta.num_logits_rows);
    shard_.comm->all_gather_cols(be_, local, scratch, logits);
  } else {
    lm_head_.forward(be_, rows, logits);
  }
  if (final_logit_softcap_ > 0.0f) be_.softcap(logits, final_logit_softcap_);
}

void DecoderBase::set_embedding_scale(double scale) {
  if (scale == 0.0 || scale == 1.0) {
    embedding_scale_ = 1.0f;
    return;
  }
  const auto f = static_cast<float>(scale);
  embedding_scale_ = be_.activation_dtype() == DType::BF16 ? bf16_to_f32(f32_to_bf16(f)) : f;
}

}  // namespace pagoda

// What every decoder family shares around its layers: the embedding, the residual stream and its
// scratch buffers, the final norm and the lm_head (only for the rows that sample). A family adds
// its layers and its forward loop (or uses dense_decoder.h's).
#pragma once

#include <vector>

#include "model/linear.h"
#include "model/model.h"
#include "model/weight_store.h"

namespace pagoda {

class DecoderBase : public Model {
 public:
  const ModelConfig& config() const override { return cfg_; }
  const ModelConfig& rank_config() const override { return local_; }
  size_t weight_bytes() const override { return ws_.bytes() + ws_.mapped_bytes(); }
  Tensor last_hidden_rows(int32_t num_rows) const override;
  Tensor final_hidden(int32_t num_tokens) const override;
  Tensor input_embeddings() const override { return embed_; }
  // The embedding, the norms and residual adds, the logits rows and greedy sampling; a family adds
  // its layers' ops (layers.h, gated_delta_net_layer.h).
  std::vector<OpUse> required_ops() const override;

 protected:
  DecoderBase(const ModelConfig& cfg, const Checkpoint& ckpt, Backend& backend, const ShardSpec& shard = {});

  // The CPU computes in fp32, so its weights are fp32; the GPU keeps the checkpoint's 16-bit type.
  DType weight_dtype() const;
  // Loads embed_tokens, model.norm and lm_head (tied to the embedding when the config says so).
  void load_embedding_and_head();
  // Frees the previous workspace and allocates the residual-stream buffers for a step of up to
  // `max_tokens` tokens and `max_logits_rows` sampled rows.
  void begin_reserve(int32_t max_tokens, int32_t max_logits_rows);
  Tensor scratch(int64_t rows, int64_t cols);  // workspace in the activation dtype
  Tensor scratch(int64_t rows, int64_t cols, DType dtype);  // workspace of another dtype (indices)
  size_t scratch_bytes() const;

  // h, x, y: the residual stream, the normed input of a sub-layer, and a sub-layer's output,
  // sized to this step. Checks the step fits the reserved workspace; embeds the tokens into h.
  struct Stream {
    Tensor h, x, y;
  };
  Stream begin_forward(const StepMeta& meta);
  // h += y, x = rms_norm(h) · w, where y is a sub-layer's output: under tensor parallelism each
  // rank's partial product (layers.h), summed over the ranks here, fused with the add and the norm
  // where the communicator can. y_partial false: y is whole already (a sandwich norm's output).
  void add_norm(Stream& s, const Tensor& w, bool zero_centered, bool y_partial = true);
  // y = the sum over the ranks of y, in place (one rank: nothing).
  void sum_ranks(Tensor& y);
  // Adds the last sub-layer's output y to the residual (as add_norm), applies the final norm, and
  // writes the logits of meta.logits_rows (soft-capped when final_logit_softcap_ is set).
  void finish_forward(const StepMeta& meta, Stream& s, bool zero_centered, Tensor& logits, bool y_partial = true);
  // The whole lm_head matrix [V, H] (an MTP head shares it): this rank's rows when the vocabulary
  // is sharded are not enough, so then it is loaded (again) whole.
  Tensor full_lm_head_weight();
  // Multiplies the embeddings by `scale` rounded to the activation dtype, as transformers' Gemma
  // does (embed_scale.to(dtype)); 0 or 1: no scaling.
  void set_embedding_scale(double scale);

  ModelConfig cfg_;    // the whole model's (the checkpoint's shapes: what loading reads)
  ShardSpec shard_;    // this rank's place in its tensor-parallel group
  ModelConfig local_;  // this rank's view (rank_view): what reserve() and forward() read
  Backend& be_;
  WeightStore ws_;
  DType native_dtype_;  // the checkpoint's dominant float dtype (WeightStore::native_dtype)
  Tensor embed_, final_norm_;
  Linear lm_head_;  // over embed_ when tied; this rank's rows of the vocabulary when vocab_sharded_
  float final_logit_softcap_ = 0.0f;  // logits = cap·tanh(logits/cap); 0: none

 private:
  std::vector<Buffer> scratch_buffers_;
  Tensor residual_, normed_, mixer_out_, last_rows_;
  // Tensor parallelism: each rank multiplies its V / world rows of the lm_head (a vocabulary the
  // ranks divide; else every rank holds it whole) into local_logits_, gathered into the logits.
  bool vocab_sharded_ = false;
  Tensor local_logits_, gathered_logits_;
  int32_t max_tokens_ = 0, max_logits_rows_ = 0;
  float embedding_scale_ = 1.0f;
};

}  // namespace pagoda

// A model: weights on a backend and a forward pass over one step's varlen batch. Models never see
// requests (docs/design.md §1): they read a StepMeta and the caches, and write logits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/paged_kv_cache.h"
#include "kv/recurrent_state.h"
#include "model/registry.h"

namespace pagoda {

// The caches a forward pass reads and appends to: the paged KV cache of the full-attention layers
// and, for hybrid models, the recurrent-state slots of the Gated DeltaNet layers (null otherwise).
struct ModelState {
  PagedKvCache& kv;
  RecurrentState* recurrent = nullptr;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  // The config as this rank sees it (tensor parallelism: local head counts, what its KV cache and
  // recurrent state are sized by); config() itself with one rank.
  virtual const ModelConfig& rank_config() const { return config(); }
  // Allocates the activation workspace for steps of up to `max_tokens` new tokens and
  // `max_logits_rows` sampled rows; returns its bytes. Must be called before forward().
  virtual size_t reserve(int32_t max_tokens, int32_t max_logits_rows) = 0;
  // Runs the step; writes fp32 logits [meta.num_logits_rows, vocab] into `logits` (on device).
  // Hybrid models need state.recurrent (its slots indexed by meta.state_slots).
  virtual void forward(const StepMeta& meta, const ModelState& state, Tensor& logits) = 0;
  virtual size_t weight_bytes() const = 0;
  // Every primitive op (with the dtype supports() is asked about) that forward() and the runner's
  // greedy sampling use on this backend; load_model() refuses a backend that lacks one.
  virtual std::vector<OpUse> required_ops() const = 0;
  // The final-norm hidden states of the last forward's meta.logits_rows: [num_rows, hidden_size]
  // (num_rows = that step's num_logits_rows) in the activation dtype, on the device. What an
  // embedding model pools; the logits are made from these rows. Valid until the next forward, and
  // written by graph replays too.
  virtual Tensor last_hidden_rows(int32_t num_rows) const = 0;
  // The final-norm hidden states of every token of the last forward: [num_tokens, hidden_size]
  // (num_tokens <= that step's), what a multi-token-prediction head reads. Valid until the next
  // forward.
  virtual Tensor final_hidden(int32_t num_tokens) const = 0;
  // The checkpoint's multi-token-prediction head as a model of its own: its forward reads the
  // hidden states set by set_hidden_input (rows chosen by StepMeta::hidden_rows) beside the token
  // ids, and shares this model's embedding and lm_head. Throws pagoda::Error when the family or
  // the checkpoint has none.
  virtual std::unique_ptr<Model> load_mtp_head(const Checkpoint& ckpt);
  // For MTP heads: where the next forward's hidden states come from. Others ignore it.
  virtual void set_hidden_input(const Tensor& hidden) { (void)hidden; }

  // ---- EAGLE-3 (model/eagle3_head.h) ----------------------------------------------------------
  // A target: from the next reserve() on, every forward keeps the residual stream at each of
  // `layers` (ascending, in [0, num_layers]): id i < num_layers is the stream at the INPUT of layer
  // i (transformers' output_hidden_states[i]; 0 = the embeddings), id num_layers the stream after
  // the last layer, before the final norm. Throws pagoda::Error for a model that cannot.
  virtual void set_aux_hidden_layers(const std::vector<int>& layers);
  // Those states of every token of the last forward: one [num_tokens, hidden_size] tensor per layer
  // in the order set, on the device, valid until the next forward. Empty when none were set.
  virtual std::vector<Tensor> aux_hidden(int32_t num_tokens) const;
  // The input embedding table [vocab, hidden] on the device (a head without its own shares it);
  // empty when the model has none to share.
  virtual Tensor input_embeddings() const { return {}; }
  // A head: the target's aux states its next forward reads (rows by StepMeta::hidden_rows) instead
  // of set_hidden_input's. Others ignore it.
  virtual void set_aux_hidden_input(const std::vector<Tensor>& aux) { (void)aux; }
  // A head: per logits row of the last forward, the hidden state a next draft pass reads (MTP: the
  // final-norm row, last_hidden_rows; EAGLE-3: the pre-norm one).
  virtual Tensor draft_hidden_rows(int32_t num_rows) const { return last_hidden_rows(num_rows); }
  // Index among the full-attention layers of each layer (-1 for other kinds): the KV pool it uses.
  int attention_index(int layer) const;

 protected:
  std::vector<int> attention_index_;
};

// Throws pagoda::Error, before anything is allocated, when the checkpoint's served tensors stored
// as `weight_dtype` need more than `device_bytes` (0: no limit, host memory), naming the bytes, the
// parameters (total and, for mixtures of experts, active per token) and the device. load_model calls
// it with the backend's total_memory(): a model larger than one device says so up front instead of
// failing at some tensor midway (tensor parallelism is a later issue).
void check_weights_fit(const ModelConfig& config, const Checkpoint& ckpt, DType weight_dtype, int64_t device_bytes,
                       const std::string& device);

// Loads the checkpoint in `dir` (config.json + safetensors) onto `backend`, choosing the model
// family from the config's architecture (model/registry.h).
std::unique_ptr<Model> load_model(const std::string& dir, Backend& backend);
std::unique_ptr<Model> load_model(const ModelConfig& config, const Checkpoint& ckpt, Backend& backend,
                                  const ShardSpec& shard = {});

}  // namespace pagoda

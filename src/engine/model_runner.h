// Runs one StepBatch through the model: uploads the batch's index arrays in one copy, calls the
// forward pass, and brings the sampled rows' logits back to the host for the sampler.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "engine/step_batch.h"
#include "kv/paged_kv_cache.h"
#include "kv/recurrent_state.h"
#include "model/model.h"

namespace pagoda {

class ModelRunner {
 public:
  // Reserves the model's workspace and the metadata buffer for steps of up to `max_tokens` new
  // tokens over `max_seqs` sequences, each with at most `max_blocks_per_seq` blocks.
  // Constructed before the KV cache: its workspace is an input of the memory plan.
  ModelRunner(Backend& backend, Model& model, int32_t max_tokens, int32_t max_seqs,
              int32_t max_blocks_per_seq);

  // Returns logits [batch.logits_rows.size(), vocab] row-major, fp32, on the host. `recurrent`:
  // the state slots of a hybrid model (null for dense models).
  const std::vector<float>& execute(const StepBatch& batch, PagedKvCache& kv,
                                    RecurrentState* recurrent = nullptr);
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  StepMeta upload(const StepBatch& batch);

  Backend& be_;
  Model& model_;
  int32_t max_tokens_, max_seqs_, max_blocks_per_seq_;
  Buffer meta_buf_, logits_buf_;
  std::vector<int32_t> staging_;
  std::vector<float> host_logits_;
  size_t workspace_bytes_ = 0;
};

}  // namespace pagoda

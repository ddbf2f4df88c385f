// Drafts from a smaller model with the same vocabulary (vLLM's draft-model method, e.g.
// Qwen3-0.6B drafting for Qwen3-8B), from the target's own multi-token-prediction head
// (method "mtp", model/mtp_head.h) or from an EAGLE-3 head (method "eagle3", model/eagle3_head.h):
// the same passes, with a head's input shifted by one token (at position t it reads token t + 1
// and the target's hidden state at t: its final-norm one for MTP, its residual stream at three
// layers for EAGLE-3; later passes read the head's own output row of the pass before). An EAGLE-3
// head's logits are over its draft vocabulary: its argmax d is target token d + d2t[d]. The draft model keeps a KV cache of its own, indexed by the
// target's block tables (same block ids, its own pools), so it needs no allocator of its own: the
// scheduler lends it slots past a sequence's verified tokens ("lookahead") for the draft tokens.
//
// After every target step, for each sequence of the step: one catch-up pass feeds the draft model
// every token the target verified in the step (and the token sampled after them), whose last
// logits row gives draft 1; then k - 1 single-token passes feed each draft to get the next
// (greedy: the drafts are the draft model's argmax). The catch-up runs in every step, drafts or
// not (k may be 0), so the draft cache never misses a verified token. Tokens the target later rejects leave draft-KV
// entries past the verified length; the next catch-up, which starts where the target's step
// started, overwrites them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/model_runner.h"
#include "engine/proposer.h"
#include "engine/scheduler.h"
#include "kv/paged_kv_cache.h"
#include "model/eagle3_head.h"
#include "model/model.h"

namespace pagoda {

class DraftModelProposer final : public Proposer {
 public:
  // Loads the draft model in `dir` onto `backend`. Throws pagoda::Error when its vocabulary differs
  // from `target`'s or it has layers a draft cannot roll back (Gated DeltaNet).
  DraftModelProposer(const std::string& dir, const ModelConfig& target, Backend& backend);
  // The target's MTP head (Model::load_mtp_head); `target` must outlive the proposer.
  DraftModelProposer(std::unique_ptr<Model> mtp_head, Model& target, Backend& backend);
  // An EAGLE-3 head (load_eagle3_head); `target` must outlive the proposer and have been told the
  // head's aux layers (Model::set_aux_hidden_layers) before its workspace was reserved.
  DraftModelProposer(Eagle3Head head, Model& target, Backend& backend);
  ~DraftModelProposer();

  const ModelConfig& config() const { return model_->config(); }
  size_t weight_bytes() const { return model_->weight_bytes(); }
  // KV bytes per token of the draft model's attention layers (the memory plan adds them to the
  // target's: both caches have the same number of blocks).
  int64_t kv_bytes_per_token(DType kv_dtype) const;
  // Reserves the runner's workspace; returns its bytes. Before allocate().
  size_t reserve(int32_t max_tokens, int32_t max_seqs, int32_t max_blocks_per_seq);
  void allocate(int32_t num_blocks, int32_t block_size, DType kv_dtype);
  size_t kv_bytes() const { return kv_ ? kv_->bytes() : 0; }

  // Sets draft_tokens (at most `k` each, fewer near a sequence's limits) of the sequences of `step`
  // that are still running, after the scheduler's update.
  void propose(Scheduler& scheduler, const SchedulerOutput& step, int32_t k) override;

 private:
  std::unique_ptr<Model> model_;
  Model* target_ = nullptr;  // MTP, EAGLE-3: whose hidden states the head reads
  int32_t shift_ = 0;        // MTP, EAGLE-3: 1 (position t is fed token t + 1)
  bool aux_input_ = false;   // EAGLE-3: the first pass reads the target's aux hidden states
  std::vector<int32_t> draft_to_target_;  // EAGLE-3: target token of each draft id
  Backend& backend_;
  std::unique_ptr<PagedKvCache> kv_;
  std::unique_ptr<ModelRunner> runner_;
  int32_t max_tokens_ = 0, max_seqs_ = 0;
};

}  // namespace pagoda

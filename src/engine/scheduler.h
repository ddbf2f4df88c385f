// Continuous batching (docs/design.md §6). Each step takes, in order: one decode token of every running
// sequence, the next chunk of running sequences whose prefill is unfinished, then prefill chunks of
// waiting sequences in FIFO order, within --max-num-batched-tokens and --max-num-seqs. When a
// sequence needs a block and none is free, the most recently admitted running sequence that is not
// yet in the step is preempted (blocks and state slot freed, back to the front of the waiting
// queue, recomputed later from prompt + generated tokens). Chunked prefill is always on.
//
// One engine step:
//   SchedulerOutput out = scheduler.schedule();
//   logits = model.forward(out.batch);                       // rows = out.batch.logits_rows
//   tokens = sampler.sample(logits, out.sampling_seqs());
//   scheduler.update_from_output(out, tokens);               // appends, checks stops, frees
//   for (auto& seq : scheduler.take_finished()) ...          // done: stop / length / abort
//
// Prefix caching (docs/design.md §5): a waiting sequence starts from the longest run of cached full
// blocks of its tokens (never its last token: that one must be computed for its logits). On a
// hybrid model the run also needs a state snapshot at its end; snapshots are taken at the end of
// prefill chunks, so chunks are cut at the snapshot boundaries of a prompt: its last full block,
// every state_checkpoint_interval tokens, the last full block before each of the request's
// prefix_boundaries (where the chat route saw earlier messages end), and the branch point where a
// cached run without a snapshot ended. The engine copies the state around the forward pass:
// ScheduledSequence::restore_snapshot before it, take_snapshot after it.
//
// The scheduler owns every Sequence from add() until take_finished() hands it back; Sequence
// pointers stay valid until then. Single-threaded: call everything from the engine thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/sequence.h"
#include "engine/step_batch.h"
#include "kv/kv_cache_manager.h"

namespace pagoda {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 8192;  // >= max_num_seqs
  int32_t max_model_len = 4096;           // prompt + output tokens
  int32_t block_size = 16;
  int32_t num_kv_blocks = 0;              // from the MemoryPlan
  bool use_state_slots = false;           // the model has GDN layers: max_num_seqs state slots
  std::vector<int32_t> eos_token_ids;     // stop tokens of the model (generation_config.json)
  uint64_t seed = 0;                      // engine seed, for requests without their own
  bool enable_prefix_caching = false;
  int32_t num_state_snapshots = 0;        // hybrid models with prefix caching: snapshot slots
  int32_t state_checkpoint_interval = 0;  // tokens between snapshots of long prefills; 0 = only the last block
  int prefix_hash_bits = 64;              // < 64: a test hook that makes hash collisions common
  int32_t num_speculative_tokens = 0;     // most drafts a sequence may bring to a step (0 = none)
  int32_t max_loras = 0;                  // LoRA: the most distinct adapters running at once (0 = no LoRA)
  // vLLM's --long-prefill-token-threshold: a prompt's chunk in one step is at most this many tokens
  // (0 = no limit but the step's budget), so a long prompt leaves room for others (see admit_waiting).
  int32_t long_prefill_token_threshold = 0;
};

// One sequence's share of a step.
struct ScheduledSequence {
  Sequence* seq = nullptr;
  int32_t start = 0;           // num_computed_tokens before the step = position of the first new token
  int32_t num_new_tokens = 0;  // including the drafts
  bool samples = false;        // the chunk reaches the end of its known tokens: a token is sampled
  int32_t restore_snapshot = -1;  // copy this snapshot into the sequence's state slot before the step
  int32_t take_snapshot = -1;     // copy the sequence's state into this snapshot after the step
  int32_t num_drafts = 0;  // the last num_drafts new tokens are the sequence's draft_tokens, to verify
};

struct SchedulerOutput {
  // In batch order: all decodes first, then prefill chunks.
  std::vector<ScheduledSequence> scheduled;
  StepBatch batch;
  int32_t num_decodes = 0;      // scheduled[0, num_decodes) are single-token decodes
  int32_t num_preempted = 0;    // preemptions made by this schedule() call

  bool empty() const { return scheduled.empty(); }
  // The sampling sequences, in batch order. Each has 1 + num_drafts consecutive rows of
  // batch.logits_rows: after its last known token and after each draft.
  std::vector<Sequence*> sampling_seqs() const;
  int32_t num_prefill_tokens() const { return batch.num_tokens() - num_decodes; }
};

class Scheduler {
 public:
  // Throws pagoda::Error for an invalid config.
  explicit Scheduler(SchedulerConfig config);

  const SchedulerConfig& config() const { return config_; }
  // Upper bound of StepBatch::max_blocks_per_seq (a sequence never holds K/V of more than
  // max_model_len tokens), for sizing the ModelRunner's buffers. Also: num_tokens() <=
  // max_num_batched_tokens and num_seqs() <= max_num_seqs in every step.
  int32_t max_blocks_per_seq() const {
    return (config_.max_model_len + config_.block_size - 1) / config_.block_size;
  }

  // Queues a new sequence. Throws pagoda::Error for an empty prompt, a prompt longer than
  // max_model_len, an id already in use, or invalid sampling params. `embed`: an embedding request
  // (Sequence::embed), finished with reason Stop once its prompt is computed, no token appended.
  Sequence* add(int64_t id, std::vector<int32_t> prompt, SamplingParams params, bool embed = false);

  // Plans the next step and reserves its KV slots. An empty output means nothing can run.
  SchedulerOutput schedule();
  // `sampled[i]` is the token sampled for out.sampling_seqs()[i]. Advances num_computed_tokens,
  // appends the tokens, checks the stop conditions and frees what finished.
  void update_from_output(const SchedulerOutput& out, std::span<const int32_t> sampled);
  // With drafts: `tokens[i]` are the tokens out.sampling_seqs()[i] gets: its accepted drafts (a
  // prefix of its draft_tokens) and one token sampled after them. Rejected drafts' KV slots are
  // dropped. On a hybrid model a sequence that rejected a draft is rewound to the start of the
  // step (its recurrent state went past the accepted tokens; the engine restores the state it had
  // before the step, rollback_state() tells which) and recomputes the accepted tokens next step.
  void update_from_output(const SchedulerOutput& out, std::span<const std::vector<int32_t>> tokens);
  // Whether a sequence of the step that accepted `accepted` of its drafts must have its recurrent
  // state restored to what it was before the step.
  bool rollback_state(const ScheduledSequence& s, int32_t accepted) const {
    return config_.use_state_slots && s.num_drafts > 0 && accepted < s.num_drafts;
  }

  // Draft models (draft_model_proposer.h): slots for `seq`'s first `num_tokens` tokens, past its
  // computed ones, lent between steps for draft passes; false (nothing changed) when the pool has
  // too few free blocks. drop_lookahead gives them back before the next schedule().
  bool reserve_lookahead(const Sequence& seq, int32_t num_tokens);
  void drop_lookahead(const Sequence& seq);

  // Whether `seq` may sample in the next step: false while its structured-output mask is still
  // being computed (engine/grammar_masks.h). Such a sequence sits out the steps that would sample
  // it (a decode is left out, a prefill chunk stops one token short of its end) and the others
  // run. Unset: every sequence may.
  void set_sample_gate(std::function<bool(const Sequence&)> gate) { sample_gate_ = std::move(gate); }

  // Finishes a sequence with reason abort (at once, or at the end of the step in flight).
  // Returns false for an unknown or already finished id.
  bool abort(int64_t id);
  // Finishes a sequence with reason error and `why` as its finish_detail (at once, or at the end
  // of the step in flight, its token of that step dropped): something only it needed failed.
  // Returns false for an unknown or already finished id.
  bool fail(int64_t id, const std::string& why);
  // The step `out` (from schedule()) threw before update_from_output finished: every sequence of
  // it finishes with reason error and `why`, and what the step had taken is given back — its KV
  // blocks (never registered in the prefix cache: their K/V may be half written), its state slots,
  // the snapshots reserved for it, lookahead slots a draft pass kept. The next schedule() runs
  // normally. Also called by schedule() itself when it throws (then rethrows).
  void fail_step(const SchedulerOutput& out, const std::string& why);
  // Finished sequences (stop / length / abort), in the order they finished, handed to the caller.
  std::vector<std::unique_ptr<Sequence>> take_finished();

  bool has_unfinished() const { return !running_.empty() || !waiting_.empty(); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Prefix cache counters since start, in tokens (vLLM's prefix_cache_queries / _hits): the
  // tokens of every admitted sequence, and those of them found in the cache.
  int64_t prefix_cache_queries() const { return prefix_queries_; }
  int64_t prefix_cache_hits() const { return prefix_hits_; }
  double kv_usage() const { return kv_.usage(); }
  const KvCacheManager& kv() const { return kv_; }
  // Where the prefix cache tells its registrations and evictions (no-op without prefix caching).
  void set_kv_event_log(KvEventLog* log) {
    if (PrefixCache* c = kv_.prefix_cache()) c->set_event_log(log);
  }
  const StateSlotPool& state_slots() const { return slots_; }
  // Running sequences in admission order; waiting ones in queue order.
  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  Sequence* find(int64_t id) const;

 private:
  // Room for `want` new tokens of running `seq` at running_[index], preempting younger unscheduled
  // sequences as needed. A prefill chunk may shrink to what fits. Returns the tokens granted; 0
  // when `seq` itself was preempted or finished (it can never fit).
  int32_t reserve_running(size_t index, int32_t want, bool can_shrink);
  void schedule_decodes(std::vector<ScheduledSequence>& out, int32_t& budget);
  void schedule_running_prefills(std::vector<ScheduledSequence>& out, int32_t& budget);
  void admit_waiting(std::vector<ScheduledSequence>& out, int32_t& budget);
  void schedule_steps(SchedulerOutput& out);
  // Requests to end a sequence that came while a step was in flight, applied after it.
  void apply_pending_finishes();
  void preempt(Sequence* seq);
  void finish(Sequence* seq, FinishReason reason);
  // The finish reason the sequence's last token gives it (None: it goes on); sets stop_token.
  FinishReason stop_reason(Sequence* seq) const;
  // Drafts of running_[index] that fit the step after its `num_real` tokens.
  int32_t drafts_that_fit(size_t index, int32_t num_real, int32_t budget) const;
  void release(Sequence* seq);
  void remove_running(Sequence* seq);
  void build_batch(SchedulerOutput& out) const;
  bool hybrid_caching() const { return kv_.prefix_caching() && config_.use_state_slots; }
  bool may_sample(const Sequence& seq) const { return !sample_gate_ || sample_gate_(seq); }
  // The cached run a waiting sequence can start from (blocks), and its snapshot (hybrid models).
  std::vector<int32_t> find_prefix(Sequence* seq, int32_t* snapshot);
  // A prompt's uncomputed `tokens` capped at long_prefill_token_threshold (vLLM's rule: any
  // prefill chunk, running or new).
  int32_t prefill_cap(int32_t tokens) const;
  // `want` cut at the sequence's next snapshot boundary after `start` (hybrid caching only).
  int32_t cut_at_boundary(const Sequence& seq, int32_t start, int32_t want) const;
  // Images (vLLM's encoder budget): `want` cut before the first image starting in the chunk whose
  // merged tokens would pass the step's encoder budget; 0 when the chunk starts at such an image.
  // One image larger than the whole budget goes alone in its step. charge_encoder takes the
  // images of the chunk actually scheduled.
  int32_t cut_at_encoder_budget(const Sequence& seq, int32_t start, int32_t want) const;
  void charge_encoder(const Sequence& seq, int32_t start, int32_t n);
  // A snapshot slot when a chunk ending at `end` must leave one, else -1.
  int32_t snapshot_for_chunk_end(const Sequence& seq, int32_t end);
  void cache_computed_blocks(const ScheduledSequence& s);

  SchedulerConfig config_;
  std::function<bool(const Sequence&)> sample_gate_;
  KvCacheManager kv_;
  StateSlotPool slots_;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> live_;
  std::vector<Sequence*> running_;  // admission order
  std::deque<Sequence*> waiting_;
  std::vector<std::unique_ptr<Sequence>> finished_;
  std::vector<std::pair<int64_t, FinishReason>> pending_finishes_;  // abort() / fail() during a step
  Sequence* scheduling_ = nullptr;  // during schedule(): the sequence being scheduled
  int64_t encoder_budget_ = 0, encoder_used_ = 0;  // during schedule(): images' merged tokens this step
  std::unordered_set<const Sequence*> in_step_;  // during schedule(): already in the step
  uint64_t next_arrival_ = 0;
  int64_t num_preemptions_ = 0;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
  int32_t preempted_this_step_ = 0;
  bool in_flight_ = false;
};

}  // namespace pagoda

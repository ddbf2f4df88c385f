#include "engine/scheduler.h"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/error.h"
#include "kv/memory_plan.h"

namespace pagoda {

std::vector<Sequence*> SchedulerOutput::sampling_seqs() const {
  std::vector<Sequence*> out;
  for (const ScheduledSequence& s : scheduled) {
    if (s.samples) out.push_back(s.seq);
  }
  return out;
}

Scheduler::Scheduler(SchedulerConfig config)
    : config_(std::move(config)),
      kv_(config_.num_kv_blocks, config_.block_size, config_.enable_prefix_caching,
          config_.use_state_slots ? config_.num_state_snapshots : 0, config_.prefix_hash_bits),
      slots_(config_.use_state_slots ? config_.max_num_seqs : 0) {
  check(config_.max_num_seqs >= 1, "--max-num-seqs must be >= 1, got " + std::to_string(config_.max_num_seqs));
  check(config_.max_num_batched_tokens >= config_.max_num_seqs,
        "--max-num-batched-tokens (" + std::to_string(config_.max_num_batched_tokens) +
            ") must be >= --max-num-seqs (" + std::to_string(config_.max_num_seqs) + ")");
  check(config_.max_model_len >= 1, "--max-model-len must be >= 1, got " + std::to_string(config_.max_model_len));
  check(config_.state_checkpoint_interval >= 0 && config_.state_checkpoint_interval % config_.block_size == 0,
        "--state-checkpoint-interval must be a multiple of --block-size (" + std::to_string(config_.block_size) +
            "), got " + std::to_string(config_.state_checkpoint_interval));
}

namespace {

// The prefix-cache salt of a request: its cache_salt and its LoRA adapter (cached K/V depend on the
// adapter: requests of different adapters never share a block). Injective: an adapter's salts
// begin with \x1e, and so does a base-model salt only when the client's did (then tagged "-").
std::string prefix_salt(const SamplingParams& p) {
  std::string salt;
  if (p.lora >= 0) {
    salt = '\x1e';
    salt += std::to_string(p.lora);
    salt += '\x1e';
  } else if (!p.cache_salt.empty() && p.cache_salt[0] == '\x1e') {
    salt = "\x1e-\x1e";
  }
  salt += p.cache_salt;
  return salt;
}

}  // namespace

std::vector<int32_t> Scheduler::find_prefix(Sequence* seq, int32_t* snapshot) {
  *snapshot = -1;
  PrefixCache* cache = kv_.prefix_cache();
  if (cache == nullptr) return {};
  const std::string salt = prefix_salt(seq->params());
  cache->extend_hashes(seq->cache_tokens(), salt, seq->block_hashes);
  // The last token is always computed: its logits are the point of the step.
  const int32_t max_blocks = (seq->num_tokens() - 1) / config_.block_size;
  int32_t kv_blocks = 0;
  std::vector<int32_t> run =
      cache->match(seq->cache_tokens(), seq->block_hashes, salt, max_blocks, config_.use_state_slots, snapshot, &kv_blocks);
  if (kv_blocks > static_cast<int32_t>(run.size())) seq->branch_snapshot_at = kv_blocks * config_.block_size;
  return run;
}

int32_t Scheduler::cut_at_boundary(const Sequence& seq, int32_t start, int32_t want) const {
  if (!hybrid_caching() || config_.num_state_snapshots == 0) return want;
  const int32_t bs = config_.block_size;
  const int32_t last_full = seq.num_prompt_tokens() / bs * bs;
  int32_t next = last_full > start ? last_full : INT32_MAX;
  if (seq.branch_snapshot_at > start) next = std::min(next, seq.branch_snapshot_at);
  for (int32_t b : seq.params().prefix_boundaries)
    if (const int32_t at = b / bs * bs; at > start && at < last_full) next = std::min(next, at);
  if (const int32_t iv = config_.state_checkpoint_interval; iv > 0) {
    const int32_t k = (start / iv + 1) * iv;
    if (k < last_full) next = std::min(next, k);
  }
  return next < start + want ? next - start : want;
}

int32_t Scheduler::cut_at_encoder_budget(const Sequence& seq, int32_t start, int32_t want) const {
  const auto& mm = seq.mm();
  if (!mm) return want;
  int64_t used = encoder_used_;
  for (const auto& img : mm->images) {
    if (img->offset < start || img->offset >= start + want) continue;  // encoded in an earlier chunk, or later
    if (used > 0 && used + img->num_tokens > encoder_budget_) return img->offset - start;
    used += img->num_tokens;
  }
  return want;
}

void Scheduler::charge_encoder(const Sequence& seq, int32_t start, int32_t n) {
  if (const auto& mm = seq.mm())
    for (const auto& img : mm->images)
      if (img->offset >= start && img->offset < start + n) encoder_used_ += img->num_tokens;
}

int32_t Scheduler::snapshot_for_chunk_end(const Sequence& seq, int32_t end) {
  if (!hybrid_caching() || config_.num_state_snapshots == 0) return -1;
  const int32_t bs = config_.block_size;
  const int32_t last_full = seq.num_prompt_tokens() / bs * bs;
  const int32_t iv = config_.state_checkpoint_interval;
  const auto& hints = seq.params().prefix_boundaries;
  const bool hinted = std::any_of(hints.begin(), hints.end(), [&](int32_t b) { return b / bs * bs == end; });
  const bool boundary = end > 0 && (end == last_full || end == seq.branch_snapshot_at || hinted ||
                                    (iv > 0 && end < last_full && end % iv == 0));
  return boundary ? kv_.prefix_cache()->reserve_snapshot() : -1;
}

void Scheduler::cache_computed_blocks(const ScheduledSequence& s) {
  PrefixCache* cache = kv_.prefix_cache();
  if (cache == nullptr) return;
  Sequence* seq = s.seq;
  const std::string salt = prefix_salt(seq->params());
  cache->extend_hashes(seq->cache_tokens(), salt, seq->block_hashes);
  kv_.cache_full_blocks(seq->id(), seq->cache_tokens(), seq->block_hashes, salt, seq->num_computed_tokens);
  if (s.take_snapshot < 0) return;
  const int32_t block = kv_.cached_block(seq->id(), seq->num_computed_tokens / config_.block_size - 1);
  if (block >= 0) cache->bind_snapshot(s.take_snapshot, block);
  else cache->release_snapshot(s.take_snapshot);
}

Sequence* Scheduler::add(int64_t id, std::vector<int32_t> prompt, SamplingParams params, bool embed) {
  check(!prompt.empty(), "request " + std::to_string(id) + ": the prompt is empty");
  check(static_cast<int64_t>(prompt.size()) <= config_.max_model_len,
        "request " + std::to_string(id) + ": the prompt has " + std::to_string(prompt.size()) +
            " tokens, more than max_model_len " + std::to_string(config_.max_model_len));
  check(live_.count(id) == 0, "request id " + std::to_string(id) + " is already in use");
  if (auto err = validate_sampling_params(params)) throw Error(*err);
  auto seq = std::make_unique<Sequence>(id, std::move(prompt), std::move(params), config_.seed);
  seq->arrival = next_arrival_++;
  seq->embed = embed;
  Sequence* raw = seq.get();
  live_.emplace(id, std::move(seq));
  // Priority scheduling: behind every waiting sequence of the same or a lower value (all 0 under fcfs).
  const int32_t priority = raw->params().priority;
  const auto behind = std::find_if(waiting_.begin(), waiting_.end(),
                                   [priority](const Sequence* s) { return s->params().priority > priority; });
  waiting_.insert(behind, raw);
  return raw;
}

Sequence* Scheduler::find(int64_t id) const {
  auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second.get();
}

void Scheduler::release(Sequence* seq) {
  kv_.free(seq->id());
  if (seq->state_slot >= 0) {
    slots_.free(seq->state_slot);
    seq->state_slot = -1;
  }
}

void Scheduler::remove_running(Sequence* seq) {
  auto it = std::find(running_.begin(), running_.end(), seq);
  if (it != running_.end()) running_.erase(it);
}

void Scheduler::preempt(Sequence* seq) {
  release(seq);
  remove_running(seq);
  seq->num_computed_tokens = 0;
  seq->draft_tokens.clear();
  seq->status = SequenceStatus::Waiting;
  ++seq->num_preemptions;
  ++num_preemptions_;
  ++preempted_this_step_;
  waiting_.push_front(seq);
}

void Scheduler::finish(Sequence* seq, FinishReason reason) {
  release(seq);
  if (seq->status == SequenceStatus::Running) {
    remove_running(seq);
  } else if (seq->status == SequenceStatus::Waiting) {
    auto it = std::find(waiting_.begin(), waiting_.end(), seq);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  seq->status = SequenceStatus::Finished;
  seq->finish_reason = reason;
  auto node = live_.extract(seq->id());
  finished_.push_back(std::move(node.mapped()));
}

int32_t Scheduler::reserve_running(size_t index, int32_t want, bool can_shrink) {
  Sequence* seq = running_[index];
  for (;;) {
    const int32_t fit = kv_.max_appendable(seq->id());
    if (fit >= want) return want;
    if (can_shrink && fit > 0) return fit;
    // The most recently admitted sequence that is younger than `seq` and not yet in this step.
    Sequence* victim = nullptr;
    for (size_t j = running_.size(); j-- > index + 1;) {
      if (in_step_.count(running_[j]) == 0) {
        victim = running_[j];
        break;
      }
    }
    if (victim != nullptr) {
      preempt(victim);
      continue;
    }
    // Alone in the pool (no other running sequence holds a block; with prefix caching a block
    // may be shared, so counting the pool's used blocks would not tell) and still too big: the
    // cache can never hold it.
    const bool others_hold_blocks = std::any_of(running_.begin(), running_.end(), [&](const Sequence* r) {
      return r != seq && !kv_.block_table(r->id()).empty();
    });
    if (!others_hold_blocks) {
      // Alone in the pool and still too big: the cache can never hold it.
      seq->finish_detail = "the KV cache (" + std::to_string(kv_.pool().num_blocks()) + " blocks of " +
                           std::to_string(kv_.block_size()) + " tokens) cannot hold " +
                           std::to_string(seq->num_computed_tokens + want) + " tokens";
      finish(seq, FinishReason::Length);
      return 0;
    }
    preempt(seq);
    return 0;
  }
}

int32_t Scheduler::drafts_that_fit(size_t index, int32_t num_real, int32_t budget) const {
  const Sequence* seq = running_[index];
  if (seq->draft_tokens.empty() || config_.num_speculative_tokens == 0) return 0;
  int32_t d = std::min(static_cast<int32_t>(seq->draft_tokens.size()), config_.num_speculative_tokens);
  d = std::min(d, budget - num_real);
  // Positions past max_model_len have no block-table room.
  d = std::min(d, config_.max_model_len - seq->num_tokens());
  // Drafts never preempt anyone: only the room there is.
  d = std::min(d, kv_.max_appendable(seq->id()) - num_real);
  return std::max(d, 0);
}

void Scheduler::schedule_decodes(std::vector<ScheduledSequence>& out, int32_t& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (seq->is_prefilling() || !may_sample(*seq)) {
      ++i;
      continue;
    }
    scheduling_ = seq;
    if (reserve_running(i, 1, false) == 0) continue;  // seq left running_; i now names the next
    const int32_t start = seq->num_computed_tokens;
    const int32_t d = drafts_that_fit(i, 1, budget);
    kv_.append_slots(seq->id(), 1 + d);
    ScheduledSequence& s = out.emplace_back(ScheduledSequence{seq, start, 1 + d, true});
    s.num_drafts = d;
    seq->draft_tokens.resize(static_cast<size_t>(d));
    in_step_.insert(seq);
    budget -= 1 + d;
    ++i;
  }
}

int32_t Scheduler::prefill_cap(int32_t tokens) const {
  const int32_t cap = config_.long_prefill_token_threshold;
  return cap > 0 && tokens > cap ? cap : tokens;
}

void Scheduler::schedule_running_prefills(std::vector<ScheduledSequence>& out, int32_t& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    if (in_step_.count(seq) != 0 || !seq->is_prefilling()) {
      ++i;
      continue;
    }
    scheduling_ = seq;
    const int32_t start = seq->num_computed_tokens;
    const int32_t want = cut_at_encoder_budget(
        *seq, start, cut_at_boundary(*seq, start, std::min(prefill_cap(seq->num_uncomputed_tokens()), budget)));
    if (want == 0) {  // its next image waits for a step with room in the encoder budget
      ++i;
      continue;
    }
    int32_t n = reserve_running(i, want, true);
    if (n == 0) continue;
    // Its mask is not ready: all but the last token now, which samples once it is.
    if (start + n == seq->num_tokens() && !may_sample(*seq)) --n;  // n >= 2: it is prefilling
    const bool to_end = start + n == seq->num_tokens();
    const int32_t snapshot = snapshot_for_chunk_end(*seq, start + n);
    // A chunk that reaches the end (a recompute after a rejected draft, or after preemption) may
    // verify drafts too, unless a state snapshot is taken after it: a snapshot must never hold
    // unverified tokens.
    const int32_t d = to_end && snapshot < 0 ? drafts_that_fit(i, n, budget) : 0;
    kv_.append_slots(seq->id(), n + d);
    charge_encoder(*seq, start, n);
    ScheduledSequence& s = out.emplace_back(ScheduledSequence{seq, start, n + d, to_end, -1, snapshot});
    s.num_drafts = d;
    seq->draft_tokens.resize(static_cast<size_t>(d));
    in_step_.insert(seq);
    budget -= n + d;
    ++i;
  }
}

void Scheduler::admit_waiting(std::vector<ScheduledSequence>& out, int32_t& budget) {
  // LoRA: the adapters running, of which there may be at most max_loras (the device slots).
  std::vector<int32_t> adapters;
  if (config_.max_loras > 0)
    for (const Sequence* s : running_)
      if (s->params().lora >= 0 && std::find(adapters.begin(), adapters.end(), s->params().lora) == adapters.end())
        adapters.push_back(s->params().lora);
  // FIFO, except that a sequence which can take nothing but its sampling token while its mask is
  // not ready, or whose adapter would be one more than the slots, is passed over (it stays at its
  // place) instead of holding the ones behind it.
  for (size_t i = 0; i < waiting_.size() && budget > 0 && num_running() < config_.max_num_seqs;) {
    Sequence* seq = waiting_[i];
    const int32_t lora = seq->params().lora;
    const bool new_adapter = lora >= 0 && std::find(adapters.begin(), adapters.end(), lora) == adapters.end();
    if (new_adapter && config_.max_loras > 0 && static_cast<int32_t>(adapters.size()) >= config_.max_loras) {
      ++i;
      continue;
    }
    scheduling_ = seq;
    if (blocks_for_tokens(seq->num_tokens(), config_.block_size) > kv_.pool().num_blocks()) {
      seq->finish_detail = "the KV cache (" + std::to_string(kv_.pool().num_blocks()) + " blocks of " +
                           std::to_string(kv_.block_size()) + " tokens) cannot hold " +
                           std::to_string(seq->num_tokens()) + " tokens";
      finish(seq, FinishReason::Length);
      continue;
    }
    // A cached prefix first (blocks shared, and on hybrid models the state at its end).
    int32_t restore = -1;
    const std::vector<int32_t> hit = find_prefix(seq, &restore);
    const int32_t start = static_cast<int32_t>(hit.size()) * config_.block_size;
    // The whole chunk must fit: a waiting sequence never takes a partial chunk of free memory.
    int32_t n = cut_at_encoder_budget(*seq, start,
                                      cut_at_boundary(*seq, start, std::min(prefill_cap(seq->num_tokens() - start), budget)));
    if (n == 0) {  // its first image waits for a step with room in the encoder budget
      ++i;
      continue;
    }
    if (start + n == seq->num_tokens() && !may_sample(*seq)) {
      if (n == 1) {
        ++i;
        continue;
      }
      --n;
    }
    if (kv_.blocks_needed_after(hit, n) > kv_.num_free_blocks()) break;
    int32_t slot = -1;
    if (config_.use_state_slots) {
      slot = slots_.allocate();
      if (slot < 0) break;
    }
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
    if (new_adapter) adapters.push_back(lora);
    seq->state_slot = slot;
    seq->status = SequenceStatus::Running;
    running_.push_back(seq);
    kv_.adopt_prefix(seq->id(), hit);
    if (restore >= 0) kv_.prefix_cache()->touch_snapshot(restore);
    seq->num_computed_tokens = start;
    if (seq->num_cached_tokens < 0) seq->num_cached_tokens = start;
    if (kv_.prefix_caching()) {
      prefix_queries_ += seq->num_tokens();
      prefix_hits_ += start;
    }
    kv_.append_slots(seq->id(), n);
    charge_encoder(*seq, start, n);
    out.push_back({seq, start, n, start + n == seq->num_tokens(), restore, snapshot_for_chunk_end(*seq, start + n)});
    in_step_.insert(seq);
    budget -= n;
  }
}

SchedulerOutput Scheduler::schedule() {
  if (in_flight_) throw std::logic_error("Scheduler::schedule: the previous step was not updated");
  SchedulerOutput out;
  try {
    schedule_steps(out);
  } catch (const std::exception& e) {
    // The sequences already in the step and the one being scheduled when it threw (a KV table or a
    // batch array that could not grow) are the ones it can be blamed on; the rest stay queued.
    if (scheduling_ != nullptr && !scheduling_->finished() && in_step_.count(scheduling_) == 0)
      out.scheduled.push_back(ScheduledSequence{scheduling_, scheduling_->num_computed_tokens, 0, false});
    scheduling_ = nullptr;
    fail_step(out, std::string("the engine step failed while scheduling (") + e.what() +
                       "); the requests of that step were stopped and the others go on: retry this request");
    throw;
  }
  return out;
}

void Scheduler::schedule_steps(SchedulerOutput& out) {
  in_step_.clear();
  preempted_this_step_ = 0;
  int32_t budget = config_.max_num_batched_tokens;
  // Images encoded in one step: at most a step's worth of merged tokens (vLLM's encoder budget).
  encoder_budget_ = config_.max_num_batched_tokens;
  encoder_used_ = 0;
  // 1. One decode token for every running sequence whose prefill is done (admission order).
  schedule_decodes(out.scheduled, budget);
  out.num_decodes = static_cast<int32_t>(out.scheduled.size());
  // 2. The next chunk of running sequences whose prefill (or recompute) is unfinished.
  schedule_running_prefills(out.scheduled, budget);
  // 3. New (or preempted) sequences in FIFO order; none in a step that had to preempt.
  if (preempted_this_step_ == 0) admit_waiting(out.scheduled, budget);
  out.num_preempted = preempted_this_step_;
  scheduling_ = nullptr;
  build_batch(out);
  in_step_.clear();
  in_flight_ = !out.empty();
}

void Scheduler::build_batch(SchedulerOutput& out) const {
  StepBatch& b = out.batch;
  const int32_t bs = config_.block_size;
  b.block_size = bs;
  b.max_blocks_per_seq = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    b.max_blocks_per_seq =
        std::max(b.max_blocks_per_seq, static_cast<int32_t>(kv_.block_table(s.seq->id()).size()));
  }
  const size_t num_seqs = out.scheduled.size();
  bool has_lora = false;  // a step of the base model alone carries no slots
  for (const ScheduledSequence& s : out.scheduled) has_lora = has_lora || s.seq->params().lora >= 0;
  b.cu_seqlens_q.assign(1, 0);
  b.block_tables.assign(num_seqs * static_cast<size_t>(b.max_blocks_per_seq), 0);
  for (size_t i = 0; i < num_seqs; ++i) {
    const ScheduledSequence& s = out.scheduled[i];
    const std::vector<int32_t>& table = kv_.block_table(s.seq->id());
    const std::span<const int32_t> tokens = s.seq->tokens();
    const int32_t real_end = s.start + s.num_new_tokens - s.num_drafts;
    for (int32_t p = s.start; p < s.start + s.num_new_tokens; ++p) {
      b.token_ids.push_back(p < real_end ? tokens[static_cast<size_t>(p)]
                                         : s.seq->draft_tokens[static_cast<size_t>(p - real_end)]);
      b.positions.push_back(s.seq->rope_position(p));
      b.slot_mapping.push_back(table[static_cast<size_t>(p / bs)] * bs + p % bs);
      if (has_lora) b.lora_slots.push_back(s.seq->params().lora);
    }
    if (const auto& mm = s.seq->mm())
      for (const auto& img : mm->images) {  // the image tokens this chunk feeds take the encoder's rows
        const int32_t from = std::max(s.start, img->offset), to = std::min(real_end, img->offset + img->num_tokens);
        if (from < to)
          b.image_rows.push_back({b.cu_seqlens_q.back() + (from - s.start), from - img->offset, to - from, img});
      }
    b.cu_seqlens_q.push_back(b.num_tokens());
    b.seq_lens.push_back(s.start + s.num_new_tokens);
    std::copy(table.begin(), table.end(),
              b.block_tables.begin() + static_cast<std::ptrdiff_t>(i * static_cast<size_t>(b.max_blocks_per_seq)));
    b.state_slots.push_back(s.seq->state_slot);
    b.has_initial_state.push_back(s.start > 0 ? 1 : 0);
    if (s.samples)
      for (int32_t j = s.num_drafts; j >= 0; --j) b.logits_rows.push_back(b.num_tokens() - 1 - j);
  }
  if (b.image_rows.empty()) return;
  // Image tokens in the step: every row's (temporal, height, width) rotary positions; text rows
  // carry their one position three times.
  const auto T = static_cast<size_t>(b.num_tokens());
  b.mrope_positions.resize(3 * T);
  for (size_t t = 0; t < T; ++t)
    for (size_t a = 0; a < 3; ++a) b.mrope_positions[a * T + t] = b.positions[t];
  for (size_t i = 0; i < num_seqs; ++i) {
    const ScheduledSequence& s = out.scheduled[i];
    const auto& mm = s.seq->mm();
    if (!mm) continue;
    const auto row0 = static_cast<size_t>(b.cu_seqlens_q[i]);
    for (int32_t p = s.start; p < std::min(s.start + s.num_new_tokens, mm->num_prompt); ++p)
      for (size_t a = 0; a < 3; ++a)
        b.mrope_positions[a * T + row0 + static_cast<size_t>(p - s.start)] =
            mm->positions[a * static_cast<size_t>(mm->num_prompt) + static_cast<size_t>(p)];
  }
}

FinishReason Scheduler::stop_reason(Sequence* seq) const {
  const SamplingParams& p = seq->params();
  const int32_t token = seq->last_token();
  const int32_t num_out = seq->num_output_tokens();
  if (num_out >= p.min_tokens) {
    const bool is_eos = !p.ignore_eos && std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(),
                                                   token) != config_.eos_token_ids.end();
    const bool is_stop = p.stop_token_ids.contains(token);
    if (is_eos || is_stop) {
      seq->stop_token = token;
      return FinishReason::Stop;
    }
  }
  if ((p.max_tokens && num_out >= *p.max_tokens) || seq->num_tokens() >= config_.max_model_len)
    return FinishReason::Length;
  return FinishReason::None;
}

void Scheduler::update_from_output(const SchedulerOutput& out, std::span<const int32_t> sampled) {
  std::vector<std::vector<int32_t>> tokens;
  tokens.reserve(sampled.size());
  for (int32_t t : sampled) tokens.push_back({t});
  update_from_output(out, tokens);
}

void Scheduler::update_from_output(const SchedulerOutput& out, std::span<const std::vector<int32_t>> sampled) {
  if (out.empty()) return;
  if (!in_flight_) throw std::logic_error("Scheduler::update_from_output: no step in flight");
  size_t k = 0;
  for (const ScheduledSequence& s : out.scheduled) k += s.samples ? 1 : 0;
  if (sampled.size() != k) {
    throw std::logic_error("Scheduler::update_from_output: " + std::to_string(sampled.size()) +
                           " sampled token lists for " + std::to_string(k) + " sampling sequences");
  }
  in_flight_ = false;
  k = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    Sequence* seq = s.seq;
    if (seq->num_computed_tokens != s.start) {
      throw std::logic_error("Scheduler::update_from_output: sequence changed during the step");
    }
    const int32_t real = s.num_new_tokens - s.num_drafts;
    seq->num_computed_tokens += real;
    if (!s.samples) {
      cache_computed_blocks(s);
      continue;
    }
    const std::vector<int32_t>& got = sampled[k++];
    const auto accepted = static_cast<int32_t>(got.size()) - 1;
    if (accepted < 0 || accepted > s.num_drafts ||
        !std::equal(got.begin(), got.begin() + accepted, seq->draft_tokens.begin()))
      throw std::logic_error("Scheduler::update_from_output: the tokens of a sequence are not its accepted drafts "
                             "and one more");
    seq->draft_tokens.clear();
    if (seq->abort_requested || seq->embed) {
      kv_.truncate(seq->id(), seq->num_computed_tokens);
      cache_computed_blocks(s);
      if (seq->embed && !seq->abort_requested) finish(seq, FinishReason::Stop);  // the engine took its hidden state
      continue;  // an abort is applied below; the token is dropped
    }
    // Accepted drafts are computed tokens now; on a hybrid model that rejected one, the state went
    // past them, so the whole step is recomputed (from the state the engine restores).
    const bool rewind = rollback_state(s, accepted);
    FinishReason reason = FinishReason::None;
    for (int32_t t : got) {
      seq->append_token(t);
      if ((reason = stop_reason(seq)) != FinishReason::None) break;
    }
    seq->num_computed_tokens = rewind ? s.start : std::min(seq->num_computed_tokens + accepted, seq->num_tokens());
    if (s.num_drafts > 0) kv_.truncate(seq->id(), seq->num_computed_tokens);
    cache_computed_blocks(s);
    if (reason != FinishReason::None) finish(seq, reason);
  }
  apply_pending_finishes();
}

void Scheduler::apply_pending_finishes() {
  std::vector<std::pair<int64_t, FinishReason>> pending;
  pending.swap(pending_finishes_);
  for (const auto& [id, reason] : pending)
    if (Sequence* seq = find(id); seq != nullptr && !seq->finished()) finish(seq, reason);
}

void Scheduler::fail_step(const SchedulerOutput& out, const std::string& why) {
  in_flight_ = false;
  in_step_.clear();
  scheduling_ = nullptr;
  PrefixCache* cache = kv_.prefix_cache();
  for (const ScheduledSequence& s : out.scheduled) {
    // A snapshot taken after a forward pass that did not finish holds a state nobody may resume.
    if (cache != nullptr && s.take_snapshot >= 0 && cache->is_reserved_snapshot(s.take_snapshot))
      cache->release_snapshot(s.take_snapshot);
    Sequence* seq = s.seq;
    seq->draft_tokens.clear();
    seq->step_error.clear();
    seq->finish_detail = why;
    // Finished by the part of update_from_output that ran: its last tokens were never delivered.
    if (seq->finished()) seq->finish_reason = FinishReason::Error;
    else finish(seq, FinishReason::Error);  // frees its blocks: none of this step's were registered
  }
  // A draft pass that threw after the update may have kept lookahead slots of sequences that go on.
  for (Sequence* seq : running_) drop_lookahead(*seq);
  apply_pending_finishes();
}

bool Scheduler::reserve_lookahead(const Sequence& seq, int32_t num_tokens) {
  if (in_flight_) throw std::logic_error("Scheduler::reserve_lookahead: a step is in flight");
  const int32_t have = kv_.num_tokens(seq.id());
  if (num_tokens <= have) return true;
  return kv_.append_slots(seq.id(), num_tokens - have);
}

void Scheduler::drop_lookahead(const Sequence& seq) {
  if (kv_.num_tokens(seq.id()) > seq.num_computed_tokens) kv_.truncate(seq.id(), seq.num_computed_tokens);
}

bool Scheduler::abort(int64_t id) {
  Sequence* seq = find(id);
  if (seq == nullptr || seq->finished()) return false;
  if (in_flight_) {
    if (!seq->abort_requested) pending_finishes_.emplace_back(id, FinishReason::Abort);
    seq->abort_requested = true;
    return true;
  }
  seq->abort_requested = true;
  finish(seq, FinishReason::Abort);
  return true;
}

bool Scheduler::fail(int64_t id, const std::string& why) {
  Sequence* seq = find(id);
  if (seq == nullptr || seq->finished()) return false;
  seq->finish_detail = why;
  if (in_flight_) {
    // Ahead of an abort asked for in the same step: the error is what the client should see.
    pending_finishes_.insert(pending_finishes_.begin(), {id, FinishReason::Error});
    seq->abort_requested = true;  // its token of this step is dropped
    return true;
  }
  seq->abort_requested = true;
  finish(seq, FinishReason::Error);
  return true;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::take_finished() {
  std::vector<std::unique_ptr<Sequence>> out;
  out.swap(finished_);
  return out;
}

}  // namespace pagoda

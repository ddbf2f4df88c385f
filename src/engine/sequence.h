// One sequence being generated: its tokens, how far the KV cache has them, how it samples and why
// it stopped. Owned by the Scheduler from add() until the engine takes it back when finished.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <memory>

#include "engine/multimodal.h"
#include "engine/sampling_params.h"
#include "structured/matcher.h"

namespace pagoda {

enum class SequenceStatus { Waiting, Running, Finished };
// Error: the engine failed the request (an exception in a step it was part of, or in something
// only it needed); finish_detail says what went wrong. vLLM's FinishReason.ERROR.
enum class FinishReason { None, Stop, Length, Abort, Error };

const char* sequence_status_name(SequenceStatus s);
// OpenAI's finish_reason strings: "stop", "length", "abort", "error" ("" for None).
const char* finish_reason_name(FinishReason r);

class Sequence {
 public:
  // The RNG is seeded from params.seed when set, else from (engine_seed, id), so a request's samples
  // depend on nothing but its own seed and tokens.
  Sequence(int64_t id, std::vector<int32_t> prompt, SamplingParams params, uint64_t engine_seed = 0);

  int64_t id() const { return id_; }
  const SamplingParams& params() const { return params_; }

  // prompt + output tokens.
  std::span<const int32_t> tokens() const { return tokens_; }
  std::span<const int32_t> prompt() const { return std::span<const int32_t>(tokens_).first(num_prompt_); }
  std::span<const int32_t> output() const { return std::span<const int32_t>(tokens_).subspan(num_prompt_); }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t num_prompt_tokens() const { return static_cast<int32_t>(num_prompt_); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens(); }
  int32_t last_token() const { return tokens_.back(); }
  void append_token(int32_t token) {
    tokens_.push_back(token);
    if (!cache_tokens_.empty()) cache_tokens_.push_back(token);
  }
  // The images of a multimodal prompt and their rotary positions; null for a text prompt.
  const std::shared_ptr<const MultimodalPrompt>& mm() const { return mm_; }
  void set_mm(std::shared_ptr<const MultimodalPrompt> mm);
  // What the prefix cache names this sequence's blocks by: tokens(), with each image placeholder
  // replaced by a key of its image and index (multimodal.h), so blocks of different images differ.
  std::span<const int32_t> cache_tokens() const { return cache_tokens_.empty() ? tokens() : cache_tokens_; }
  // The rotary position of token `index` (text: the index, shifted after images; multimodal.h).
  int32_t rope_position(int32_t index) const;

  // Tokens whose K/V are in the cache. Tokens [num_computed_tokens, num_tokens) are fed next.
  int32_t num_computed_tokens = 0;
  SequenceStatus status = SequenceStatus::Waiting;
  FinishReason finish_reason = FinishReason::None;
  int32_t stop_token = -1;      // the EOS / stop token that finished it (vLLM's stop_reason), else -1
  std::string finish_detail;    // why, in words, for finishes the user did not ask for
  int32_t state_slot = -1;      // recurrent-state slot while running (hybrid models)
  uint64_t arrival = 0;         // order of add(), set by the scheduler
  int32_t num_preemptions = 0;
  bool abort_requested = false;
  // An embedding request: its prompt is run once and the final hidden state of its last token is
  // its output; it samples nothing and finishes when its prefill does.
  bool embed = false;
  // Prefix caching: the chained hashes of the full blocks of tokens() so far (PrefixCache), and
  // the prompt tokens that came from the cache at the first admission (-1 until admitted; usage's
  // cached_tokens).
  std::vector<uint64_t> block_hashes;
  int32_t num_cached_tokens = -1;
  // Hybrid models: where this sequence's tokens leave a cached run that had no state snapshot at
  // its end (a branch point, e.g. the end of a shared system prompt): the sequence leaves one there
  // so that the next request with that prefix can resume from it. 0 = none.
  int32_t branch_snapshot_at = 0;
  // Speculative decoding: tokens proposed to follow tokens() (not yet verified, not in tokens()).
  // The scheduler feeds them after the sequence's last token when they fit; the step's target
  // logits decide how many become tokens. Cleared when scheduled or preempted.
  std::vector<int32_t> draft_tokens;

  std::mt19937_64& rng() { return rng_; }
  // Structured output: this sequence's position in params().grammar (made on first use); the
  // mask of the next token is computed into grammar_mask before sampling.
  std::optional<structured::Matcher> matcher;
  structured::TokenMask grammar_mask;
  // Set during a step when something only this sequence needed failed (its grammar state, its mask,
  // its sampling): the engine fails this request alone at the end of the step.
  std::string step_error;

  bool finished() const { return status == SequenceStatus::Finished; }
  // Tokens not yet in the cache.
  int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  // Prefill (or recompute after preemption) not done: more than the last sampled token is missing.
  bool is_prefilling() const { return num_uncomputed_tokens() > 1; }

 private:
  int64_t id_;
  size_t num_prompt_;
  std::vector<int32_t> tokens_;
  std::shared_ptr<const MultimodalPrompt> mm_;
  std::vector<int32_t> cache_tokens_;  // empty: tokens_
  SamplingParams params_;
  std::mt19937_64 rng_;
};

// How many drafts `seq` may bring to its next step (speculative decoding): at most `k`; none for an
// embedding request, before its first output token or under a structured-output grammar (its mask
// is made for one row a step); never more than the tokens it may still produce after the one
// sampled anyway (max_tokens, max_model_len).
int32_t draft_budget(const Sequence& seq, int32_t k, int32_t max_model_len);

// splitmix64: a well-mixed 64-bit value of `x`, for deriving seeds.
uint64_t mix_seed(uint64_t x);

}  // namespace pagoda

// Logits rows → tokens, on the host, in fp32. Each row is processed with its own sequence's
// parameters, token history and RNG only, so a request's samples never depend on its batch-mates.
//
// Order of the logits processors (vLLM's, as in its v0 sampler and Hugging Face's warpers):
//   0. allowed_token_ids and bad_words (vLLM's): tokens outside the set, and each bad word's last
//      token where the output ends with the rest of the word, become -inf
//   1. min_tokens: while fewer than min_tokens tokens are out, EOS (unless ignore_eos) and
//      stop_token_ids are masked, so that the request cannot stop early
//   2. logit_bias added to the raw logits (OpenAI's; vLLM applies it with the logits processors,
//      before penalties)
//   2b. repetition penalty over prompt + output tokens (divide positive logits, multiply negative)
//   3. frequency and presence penalties over output tokens (OpenAI)
//   4. temperature                                         (greedy: argmax here, lowest id on ties)
//   5. top-k (ties with the k-th value are kept)
//   6. top-p over the top-k survivors' renormalised probabilities (at least one token kept)
//   7. min-p: drop tokens with probability below min_p × the largest probability
//   then one draw from the sequence's RNG (exactly one 64-bit value per sampled token).
// Penalties act before temperature so that they mean the same thing at every temperature; top-p
// after top-k so that p is a share of the tokens top-k let through (the usual convention).
//
// Logprobs (vLLM's default "raw" mode): the log-softmax of the raw model logits, before any
// penalty, temperature or mask: the chosen token's logprob and the top-n (id, logprob), largest
// first, lowest id first on ties. Only computed when params.logprobs is set.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace pagoda {

class Sequence;

struct SampleResult {
  int32_t token = -1;
  float logprob = 0.0f;                              // of `token`, when logprobs were asked for
  std::vector<std::pair<int32_t, float>> top_logprobs;  // top-n, when logprobs were asked for
};

class Sampler {
 public:
  explicit Sampler(std::vector<int32_t> eos_token_ids = {});

  // `logits` is [seqs.size(), vocab] row-major; row i belongs to seqs[i] (e.g.
  // SchedulerOutput::sampling_seqs()). Uses and advances each sequence's RNG.
  std::vector<SampleResult> sample(std::span<const float> logits, int64_t vocab,
                                   std::span<Sequence* const> seqs) const;

  // False when the sequence's next token is the plain argmax of the raw logits (greedy, no
  // penalties, no min_tokens mask in force, no logprobs): a backend's argmax_rows gives it, and
  // the row's logits need not leave the device.
  bool needs_logits(const Sequence& seq) const;

  // One row, with the history and RNG given explicitly.
  // `allowed`: the structured-output mask (one bit per token) or null.
  SampleResult sample_row(std::span<const float> logits, const SamplingParams& params,
                          std::span<const int32_t> prompt, std::span<const int32_t> output,
                          std::mt19937_64& rng, const std::vector<uint64_t>* allowed = nullptr) const;

  // Speculative verification of one sequence: `logits` holds drafts.size() + 1 rows, row j the
  // target's logits for the token after draft j - 1 (row 0: after the last verified token).
  // Returns the tokens the sequence gets: the accepted drafts, then one token from the first row
  // that rejected (or from the last row when every draft was accepted). Greedy: a draft is
  // accepted when it is the processed row's argmax. Sampling: rejection sampling against a
  // one-hot draft distribution, which leaves the output distributed exactly as without drafts.
  std::vector<SampleResult> sample_with_drafts(std::span<const float> logits, size_t vocab,
                                               std::span<const int32_t> drafts, const SamplingParams& params,
                                               std::span<const int32_t> prompt, std::span<const int32_t> output,
                                               std::mt19937_64& rng) const;

 private:
  // Greedy with no logits processor in force (no penalty, bias, min_tokens mask, logprobs).
  bool plain_greedy(const SamplingParams& params, size_t num_output_tokens) const;
  // Every processor in order (min_tokens, logit_bias, penalties, then the warpers unless greedy).
  void process_row(std::vector<float>& row, const SamplingParams& params, std::span<const int32_t> prompt,
                   std::span<const int32_t> output) const;

  std::vector<int32_t> eos_token_ids_;
};

// The processors, exposed for tests. Each works in place on one row; masked entries become -inf.
void mask_stop_tokens_for_min_tokens(std::span<float> row, const SamplingParams& p,
                                     std::span<const int32_t> eos_token_ids, int32_t num_output_tokens);
void apply_logit_bias(std::span<float> row, const SamplingParams& p);
// allowed_token_ids: -inf for every token outside the set (nothing when it is empty).
void apply_allowed_token_ids(std::span<float> row, const SamplingParams& p);
// bad_words: -inf for each word's last token where `output` ends with the word's other tokens.
void apply_bad_words(std::span<float> row, const SamplingParams& p, std::span<const int32_t> output);
// Whether allowed_token_ids or bad_words are in force (the row must then reach the host).
bool has_token_masks(const SamplingParams& p);
// Structured output: -inf for every token whose bit in `allowed` is clear, before anything else
// touches the row, so whatever the later steps do the chosen token is one the grammar allows.
void apply_token_mask(std::span<float> row, const std::vector<uint64_t>& allowed);
void apply_penalties(std::span<float> row, const SamplingParams& p, std::span<const int32_t> prompt,
                     std::span<const int32_t> output);
void apply_temperature(std::span<float> row, double temperature);
void apply_top_k(std::span<float> row, int32_t k);
void apply_top_p(std::span<float> row, double p);
void apply_min_p(std::span<float> row, double min_p);
// Log-softmax of `row` (numerically stable); -inf entries stay -inf.
std::vector<float> log_softmax(std::span<const float> row);
// Index of the largest value, lowest index on ties.
int32_t argmax(std::span<const float> row);
// argmax of the row with every token outside `allowed` at -inf, without touching those; -1 when
// that would not be the plain argmax's answer (no allowed finite value, or a NaN among them).
int32_t masked_argmax(std::span<const float> row, const std::vector<uint64_t>& allowed);
// softmax(row)[token]; 0 for a masked token.
double probability_of(std::span<const float> row, int32_t token);
// A draw from softmax(row) with uniform u in [0, 1).
int32_t sample_from_logits(std::span<const float> row, double u);
// A uniform double in [0, 1) from one 64-bit draw (53 random bits), the same on every platform.
double uniform_from(std::mt19937_64& rng);

}  // namespace pagoda

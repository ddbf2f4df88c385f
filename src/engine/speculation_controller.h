// How many drafts to ask for in the next step (adaptive speculation; docs/architecture.md,
// "Speculative decoding").
// Speculation pays when the step is bound by reading the weights: verifying k more tokens per
// sequence is then nearly free. Under load the step is bound by compute, each verified token costs
// its share, and drafts that are rejected only slow everyone down. The controller picks, each step,
// the k in [0, k_max] with the most tokens per second expected (SmartSpec's goodput rule):
//
//   goodput(k) = N · (1 + E(k)) / t(k),   E(k) = Σ_{j=1..k} Π_{i<=j} a_i,
//   t(k)       = c0 + c_tok · (P + N · (1 + k)) + c_pass · k
//
// N: the sequences that will decode; a_i: the measured chance that draft i is accepted once the
// drafts before it were (each position's own exponentially weighted counts); P: the other tokens
// of the step (prefill chunks, as in the last step); c0, c_tok, c_pass: a least-squares fit of the
// measured step times to the step's tokens and drafting passes (exponentially weighted, lightly
// held towards "tokens cost nothing" so that it starts as a static k). Until enough steps are
// measured it answers k_max (vLLM's static behaviour); every few steps it tries a neighbour of its
// choice, so that the acceptance and the cost keep being measured when it has turned speculation
// down. `disable_by_batch_size` (vLLM's field) forces 0 past that many running sequences.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace pagoda {

class SpeculationController {
 public:
  SpeculationController(int32_t k_max, bool adaptive, int32_t disable_by_batch_size);

  // The drafts per sequence for the next step, for `decoding` sequences (and `other_tokens`
  // scheduled beside them: this step's, as the best guess of the next).
  int32_t choose(int32_t decoding, int64_t other_tokens);
  // A verified sequence's drafts of the step: `drafts` proposed, the first `accepted` taken.
  void observe_acceptance(int32_t drafts, int32_t accepted);
  // A step: `tokens` scheduled (verification included), `passes` drafting passes run in it (the k
  // chosen for the next step), `seconds` of wall time.
  void observe_step(int64_t tokens, int32_t passes, double seconds);

  // What the rule sees (tests, docs): the acceptance rate at draft position j (1-based), the
  // expected tokens per second of k drafts for `decoding` sequences, the fitted step time.
  double acceptance(int32_t j) const;
  double goodput(int32_t k, int32_t decoding, int64_t other_tokens) const;
  double step_seconds(int64_t tokens, int32_t passes) const;
  bool fitted() const;
  int32_t last_choice() const { return last_; }

 private:
  void solve();

  int32_t k_max_;
  bool adaptive_;
  int32_t disable_by_batch_size_;
  std::vector<double> reached_, accepted_;  // per draft position, exponentially weighted
  // Weighted sums for the least-squares fit of seconds over (1, tokens, passes).
  std::array<std::array<double, 3>, 3> xtx_{};
  std::array<double, 3> xty_{};
  std::array<double, 3> coef_{};  // c0, c_tok, c_pass
  int64_t steps_ = 0, since_probe_ = 0;
  int32_t last_ = 0;
  bool probe_up_ = true;
};

}  // namespace pagoda

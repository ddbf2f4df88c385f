// Where speculative decoding's drafts come from (vLLM's proposers), behind one interface: prompt
// lookup (n-gram, on the host), a draft model or the target's own MTP head (draft_model_proposer.h,
// on the driver worker's device), or a test's function. After each step the engine core asks its
// proposer for the next drafts; the target verifies them in the next step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/scheduler.h"

namespace pagoda {

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Sets draft_tokens (at most `k` each, fewer near a sequence's limits) of the sequences still
  // running after `step`, once the scheduler has taken the step's tokens.
  virtual void propose(Scheduler& scheduler, const SchedulerOutput& step, int32_t k) = 0;
};

// Prompt lookup over each running sequence's own tokens (ngram_proposer.h), suffixes of
// [min_n, max_n] tokens.
std::unique_ptr<Proposer> make_ngram_proposer(int32_t min_n, int32_t max_n);

// Drafts from `fn` (the sequence's tokens so far and the most drafts wanted): a test's proposer.
using DraftFunction = std::function<std::vector<int32_t>(const Sequence& seq, int32_t max_drafts)>;
std::unique_ptr<Proposer> make_function_proposer(DraftFunction fn);

}  // namespace pagoda

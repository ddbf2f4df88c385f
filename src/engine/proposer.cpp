#include "engine/proposer.h"

#include <utility>

#include "engine/ngram_proposer.h"

namespace pagoda {
namespace {

// Drafts per running sequence from a host function of its tokens.
class PerSequenceProposer final : public Proposer {
 public:
  explicit PerSequenceProposer(DraftFunction fn) : fn_(std::move(fn)) {}
  void propose(Scheduler& scheduler, const SchedulerOutput&, int32_t k) override {
    const int32_t max_len = scheduler.config().max_model_len;
    for (Sequence* seq : scheduler.running()) {
      seq->draft_tokens.clear();
      const int32_t budget = draft_budget(*seq, k, max_len);
      if (budget <= 0) continue;
      seq->draft_tokens = fn_(*seq, budget);
      if (seq->draft_tokens.size() > static_cast<size_t>(budget)) seq->draft_tokens.resize(static_cast<size_t>(budget));
    }
  }

 private:
  DraftFunction fn_;
};

}  // namespace

std::unique_ptr<Proposer> make_ngram_proposer(int32_t min_n, int32_t max_n) {
  return make_function_proposer(
      [=](const Sequence& seq, int32_t k) { return propose_ngram(seq.tokens(), k, min_n, max_n); });
}

std::unique_ptr<Proposer> make_function_proposer(DraftFunction fn) {
  return std::make_unique<PerSequenceProposer>(std::move(fn));
}

}  // namespace pagoda

#include "structured/state_dfa.h"

#include <algorithm>

namespace pagoda::structured {

void StateDfa::bound() {
  if (states_.size() <= kMaxStates) return;
  states_.clear();
  ids_.clear();
  next_.clear();
  shortest_.clear();
  hole_.clear();
}

void StateDfa::clear() {
  std::vector<State>().swap(states_);
  std::unordered_map<State, uint32_t, StateHash>().swap(ids_);
  std::vector<std::array<uint32_t, 256>>().swap(next_);
  std::vector<uint32_t>().swap(shortest_);
  std::vector<uint8_t>().swap(hole_);
}

uint32_t StateDfa::intern(const State& s) {
  auto [it, inserted] = ids_.emplace(s, static_cast<uint32_t>(states_.size()));
  if (inserted) {
    states_.push_back(s);
    next_.emplace_back();
    next_.back().fill(0);
    shortest_.push_back(kDead);
    hole_.push_back(std::binary_search(s.begin(), s.end(), kHole) ? 1 : 0);
  }
  return it->second;
}

uint32_t StateDfa::compute_next(uint32_t q, uint8_t b) {
  scratch_.clear();
  const std::vector<StackId>& pool = a_.pool();
  for (size_t k = 0; k < states_[q].size(); ++k) {
    auto [begin, end] = a_.step_stack(states_[q][k], b);
    scratch_.insert(scratch_.end(), pool.begin() + begin, pool.begin() + end);
  }
  if (states_[q].size() > 1) {
    std::sort(scratch_.begin(), scratch_.end());
    scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
    a_.check_state_size(scratch_.size());
  }
  if (scratch_.empty()) {
    next_[q][b] = 1;
    return kDead;
  }
  const uint32_t r = intern(scratch_);
  next_[q][b] = r + 2;
  return r;
}

}  // namespace pagoda::structured

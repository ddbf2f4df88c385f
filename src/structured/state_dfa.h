// The automaton's states as numbered DFA states with a lazily filled transition table: a trie walk
// then costs one table lookup per node once the states it passes through are known. States repeat
// across walks (every character of a JSON string leads back to the same state; the levels of a
// bounded repetition are each other's successors), so walks after the first are mostly lookups.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "structured/automaton.h"

namespace pagoda::structured {

struct StateHash {
  size_t operator()(const State& s) const {
    uint64_t h = 1469598103934665603ull;
    for (StackId id : s) h = (h ^ id) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

class StateDfa {
 public:
  static constexpr uint32_t kDead = UINT32_MAX;

  explicit StateDfa(Automaton& a) : a_(a) {}
  // Forgets every state when the table has grown past its bound; ids from before are invalid.
  void bound();
  // Forgets every state and frees the table.
  void clear();
  uint32_t intern(const State& s);
  uint32_t next(uint32_t q, uint8_t b) {
    const uint32_t v = next_[q][b];
    if (v == 0) return compute_next(q, b);
    return v == 1 ? kDead : v - 2;
  }
  bool has_hole(uint32_t q) const { return hole_[q] != 0; }
  uint32_t shortest(uint32_t q) {
    if (shortest_[q] == kDead) shortest_[q] = a_.shortest(states_[q]);
    return shortest_[q];
  }
  const State& state(uint32_t q) const { return states_[q]; }
  // Memory of the table and its states (approximate: containers' own overhead included as a guess).
  size_t bytes() const {
    size_t n = next_.size() * (sizeof(std::array<uint32_t, 256>) + 2 * sizeof(State) + sizeof(uint32_t) + 48);
    for (const State& s : states_) n += 2 * s.size() * sizeof(StackId);
    return n;
  }

 private:
  // × 1 KB of transitions: 4 MiB a grammar at most (the server caches 64 compiled grammars).
  static constexpr size_t kMaxStates = 4096;
  uint32_t compute_next(uint32_t q, uint8_t b);

  Automaton& a_;
  std::vector<State> states_;
  std::unordered_map<State, uint32_t, StateHash> ids_;
  std::vector<std::array<uint32_t, 256>> next_;  // 0 = not yet, 1 = dead, else the id + 2
  std::vector<uint32_t> shortest_;
  std::vector<uint8_t> hole_;
  State scratch_;
};

}  // namespace pagoda::structured

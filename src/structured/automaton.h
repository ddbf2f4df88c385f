// The grammar as a pushdown automaton over bytes. An automaton state is a set of stacks of rule
// positions (each stack one way the input so far can continue); stacks are hash-consed into an
// arena shared by every request of the grammar, so a state is a short sorted list of stack ids,
// equal states compare equal, and the work of expanding a stack or stepping it over a byte is
// done once per (stack, byte) and then looked up. Not thread-safe: GrammarRuntime locks it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "structured/grammar.h"

namespace pagoda::structured {

using StackId = uint32_t;
using State = std::vector<StackId>;  // sorted, unique; StackId 0 = the empty stack (input complete)

// StackId 1 is the hole: an unknown rest of a stack. A stack built on it (hole_stack) stands for
// every real stack with the same top positions, which is what lets token classes computed once per
// grammar position serve every context (token_classes.h). Stepping the hole over a byte rejects;
// its shortest completion counts as 0 (the real rest adds its own).
inline constexpr StackId kHole = 1;

// What one grammar's parser may hold, so that a small hostile grammar (an ambiguous one whose stack
// sets double with every byte) ends with an error instead of taking gigabytes and minutes.
struct ParserBudget {
  // Stacks in one automaton state: how many ways the input so far can continue. Real grammars
  // (JSON schemas, regexes, tool calls) stay in the tens; exponential ambiguity passes any bound
  // within a few dozen bytes.
  size_t max_state_stacks = 1024;
  // The automaton's memory (stacks, their memoised expansions and byte steps).
  size_t max_bytes = size_t{64} << 20;
};

class Automaton {
 public:
  explicit Automaton(Grammar g, ParserBudget budget = {});

  State initial();
  // Appends to `out` (sorted, unique) the stacks of `from` after byte b; empty = rejected.
  void step(const State& from, uint8_t b, State& out);
  static bool accepting(const State& s) { return !s.empty() && s.front() == 0; }
  const Grammar& grammar() const { return g_; }
  size_t stacks() const { return nodes_.size(); }
  // The automaton's memory as counted against ParserBudget::max_bytes.
  size_t bytes() const { return bytes_; }
  // Throws Error when a state of `n` stacks is past the budget.
  void check_state_size(size_t n) const;
  // Frees every stack and memo (after a budget error: nothing may use this automaton again).
  void release();

  // Stepping one stack over one byte, memoised: [begin, end) into pool().
  std::pair<uint32_t, uint32_t> step_stack(StackId s, uint8_t b);
  const std::vector<StackId>& pool() const { return pool_; }

  // The fewest bytes that take state `s` to acceptance (kNoCompletion when none is known): what a
  // budget of max_tokens must leave room for (every byte is a token of a byte-level vocabulary).
  static constexpr uint32_t kNoCompletion = 1u << 30;
  uint32_t shortest(const State& s);
  uint32_t shortest_stack(StackId s) { return remaining(s); }

  // Stack `s` with everything below its top `depth` nodes replaced by the hole; `*rest` is the
  // replaced real stack. A stack no deeper than `depth` is returned as is, with *rest = 0.
  StackId hole_stack(StackId s, int depth, StackId* rest);
  // The grammar as seen from stack `s` (its positions down to the hole or the bottom, and every
  // rule reachable from them), as bytes: stacks of two grammars with equal shapes take every
  // token alike. Empty when larger than `limit` bytes.
  std::string shape(StackId s, size_t limit);
  uint32_t pos_of(StackId s) const { return nodes_[s].pos; }
  StackId parent_of(StackId s) const { return nodes_[s].parent; }

 private:
  struct Node {
    uint32_t pos;
    StackId parent;
  };
  StackId push(uint32_t pos, StackId parent);
  void expand(StackId s, std::vector<StackId>& out, int depth);
  std::pair<uint32_t, uint32_t> expanded(StackId s);
  void compute_suffix_lengths();
  uint32_t remaining(StackId s);

  void charge(size_t bytes);

  Grammar g_;
  ParserBudget budget_;
  size_t bytes_ = 0;
  std::vector<std::vector<uint32_t>> alt_starts_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, StackId> index_;
  std::vector<uint64_t> expanded_;  // per stack: 0 = not yet, else (begin << 20 | (len + 1))
  std::vector<std::unique_ptr<std::array<uint64_t, 256>>> steps_;
  std::vector<StackId> pool_;
  std::vector<StackId> scratch_;
  std::vector<uint32_t> suffix_min_;  // per element: fewest bytes from it to its alternative's end
  std::vector<uint32_t> remaining_;   // per stack, memoised: fewest bytes to an empty stack
  std::vector<StackId> chain_;
};

}  // namespace pagoda::structured

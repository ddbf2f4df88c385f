// A compiled grammar bound to one vocabulary (GrammarRuntime, shared by every request that uses
// the grammar) and the per-request cursor over it (Matcher): which tokens may come next, as a
// bitmask of the vocabulary, and advancing over the token that was sampled.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/automaton.h"
#include "structured/token_classes.h"
#include "structured/token_trie.h"

namespace pagoda::structured {

// One bit per token id: bit (id % 64) of word id / 64.
using TokenMask = std::vector<uint64_t>;
inline bool mask_allows(const TokenMask& m, int32_t id) {
  return (m[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}
inline void mask_allow(TokenMask& m, size_t id) { m[id >> 6] |= uint64_t{1} << (id & 63); }
// The ids the mask allows, ascending, into `out` (cleared first).
inline void allowed_ids(const TokenMask& m, std::vector<int32_t>& out) {
  out.clear();
  for (size_t w = 0; w < m.size(); ++w)
    for (uint64_t bits = m[w]; bits; bits &= bits - 1)
      out.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
}

class GrammarRuntime {
 public:
  GrammarRuntime(Grammar g, std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> eos_ids,
                 ParserBudget budget = {});

  // Explores the automaton from its start, the states that track the most stacks first, for at
  // most `max_work` (stack, byte) steps and `max_ms` milliseconds: exponential ambiguity (stack
  // sets that double with each byte) shows within a few dozen bytes and throws Error here, at
  // compile time, instead of mid-output. A grammar it does not finish exploring passes.
  void probe(size_t max_work = size_t{1} << 22, double max_ms = 250);
  // Once any call has thrown a budget Error, the runtime is spent: its memory is freed and every
  // later call throws that Error again (the requests that share it end). Empty while healthy.
  std::string failure() const;
  // The memory this runtime holds now (its automaton, mask and class caches, lazy DFA, grammar),
  // as of its last call; read without its lock, so a cache can weigh a runtime another thread is
  // using. It grows as requests walk new states, up to its budgets.
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

  State initial();
  // The state after `token`'s bytes; empty when the grammar rejects it.
  State advance(const State& s, int32_t token);
  bool accepting(const State& s) const { return Automaton::accepting(s); }
  // Writes the allowed next tokens of state `s` into `mask` (vocab bits); EOS only when the
  // grammar accepts. Masks of recent states are cached (the automaton revisits them, e.g. every
  // character inside one JSON string), so most steps are a copy. `tokens_left`: how many tokens
  // the output may still have, this one included; near that limit only tokens after which the
  // grammar can still complete (its shortest completion, one byte a token, then EOS) are allowed,
  // so an output ends valid instead of cut (when no token fits, the plain mask: cut as vLLM is).
  void fill_mask(const State& s, TokenMask& mask, int64_t tokens_left = INT64_MAX);
  int32_t vocab_size() const { return trie_->vocab_size(); }
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }

  // fill_mask by the plain walk of the whole trie for every state, no token classes and no cache:
  // the reference the fast path is tested against.
  void reference_mask(const State& s, TokenMask& mask, int64_t tokens_left = INT64_MAX);
  // Off: a state's first mask is the plain trie walk, as before token classes (bench baseline).
  void set_token_classes(bool on) { token_classes_ = on; }

  // How many positions of a stack its token classes know (the rest is the hole). Three keep a JSON
  // string's characters, its repetition and its closing quote: every token inside one string is
  // decided once for all strings.
  static constexpr int kClassDepth = 3;

 private:
  // Allows the tokens whose shortest completion after them is at most `limit` (INT64_MAX: every
  // token the grammar takes); returns the largest such completion over the allowed tokens.
  uint32_t compute_mask(const State& s, TokenMask& mask, int64_t limit);
  // compute_mask over the lazy DFA (the same walk, a table load per trie node once warm).
  uint32_t compute_mask_dfa(const State& s, TokenMask& mask, int64_t limit);
  // Every token the grammar takes, from token classes; returns an upper bound of compute_mask's
  // result (what decides whether the budget needs the exact walk).
  uint32_t compute_mask_fast(const State& s, TokenMask& mask);
  const TokenClasses& classes_of(StackId hole_stack);
  // The tokens of `candidates` (trie order) that state `s` takes, walked sharing prefixes.
  void walk_candidates(const State& s, const std::vector<uint32_t>& candidates, TokenMask& mask, uint32_t& max_after);
  void allow_eos(const State& s, TokenMask& mask) const;
  void fill_mask_locked(const State& s, TokenMask& mask, int64_t tokens_left, std::unique_lock<std::mutex>& lock);
  void reference_mask_locked(const State& s, TokenMask& mask, int64_t tokens_left);
  // Runs f (mu_ held); a budget Error spends the runtime (see failure()).
  template <class F>
  auto guarded(F&& f) -> decltype(f());
  void spend(const std::string& why);
  void update_bytes();  // mu_ held

  mutable std::mutex mu_;
  std::atomic<size_t> bytes_{0};
  std::string failure_;
  Automaton automaton_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> eos_ids_;
  std::vector<State> per_depth_;
  StateDfa dfa_;
  std::vector<uint32_t> at_;
  struct CachedMask {
    TokenMask mask;
    uint32_t max_after;  // compute_mask's result
  };
  std::unordered_map<State, std::shared_ptr<const CachedMask>, StateHash> cache_;
  std::deque<State> cache_order_;
  std::unordered_map<StackId, std::shared_ptr<const TokenClasses>> classes_;
  size_t classes_bytes_ = 0;  // of classes_
  std::vector<uint32_t> candidates_;
  bool token_classes_ = true;
};

// One request's position in its grammar.
class Matcher {
 public:
  // A runtime that fails to start (spent by another request) leaves the matcher failed: fill_mask
  // and accept throw that Error, so that the engine ends the request.
  explicit Matcher(std::shared_ptr<GrammarRuntime> runtime);
  // False (state unchanged) when the grammar does not allow `token`; EOS is allowed only when
  // the grammar accepts, and ends the matcher.
  bool accept(int32_t token);
  void fill_mask(TokenMask& mask, int64_t tokens_left = INT64_MAX) const;
  // fill_mask by GrammarRuntime::reference_mask (tests).
  void reference_mask(TokenMask& mask, int64_t tokens_left = INT64_MAX) const;
  bool accepting() const { return runtime_->accepting(state_); }
  bool finished() const { return finished_; }
  const GrammarRuntime& runtime() const { return *runtime_; }

 private:
  std::shared_ptr<GrammarRuntime> runtime_;
  State state_;
  bool finished_ = false;
  std::string error_;
};

}  // namespace pagoda::structured

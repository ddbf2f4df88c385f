// A compiled grammar bound to one vocabulary (GrammarRuntime, shared by every request that uses
// the grammar) and the per-request cursor over it (Matcher): which tokens may come next, as a
// bitmask of the vocabulary, and advancing over the token that was sampled.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/automaton.h"
#include "structured/token_trie.h"

namespace pagoda::structured {

// One bit per token id: bit (id % 64) of word id / 64.
using TokenMask = std::vector<uint64_t>;
inline bool mask_allows(const TokenMask& m, int32_t id) {
  return (m[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1;
}

class GrammarRuntime {
 public:
  GrammarRuntime(Grammar g, std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> eos_ids);

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

 private:
  // Allows the tokens whose shortest completion after them is at most `limit` (INT64_MAX: every
  // token the grammar takes); returns the largest such completion over the allowed tokens.
  uint32_t compute_mask(const State& s, TokenMask& mask, int64_t limit);
  void allow_eos(const State& s, TokenMask& mask) const;

  std::mutex mu_;
  Automaton automaton_;
  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> eos_ids_;
  std::vector<State> per_depth_;
  struct StateHash {
    size_t operator()(const State& s) const {
      uint64_t h = 1469598103934665603ull;
      for (StackId id : s) h = (h ^ id) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };
  struct CachedMask {
    TokenMask mask;
    uint32_t max_after;  // compute_mask's result
  };
  std::unordered_map<State, CachedMask, StateHash> cache_;
  std::deque<State> cache_order_;
};

// One request's position in its grammar.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<GrammarRuntime> runtime);
  // False (state unchanged) when the grammar does not allow `token`; EOS is allowed only when
  // the grammar accepts, and ends the matcher.
  bool accept(int32_t token);
  void fill_mask(TokenMask& mask, int64_t tokens_left = INT64_MAX) const;
  bool accepting() const { return runtime_->accepting(state_); }
  bool finished() const { return finished_; }
  const GrammarRuntime& runtime() const { return *runtime_; }

 private:
  std::shared_ptr<GrammarRuntime> runtime_;
  State state_;
  bool finished_ = false;
};

}  // namespace pagoda::structured

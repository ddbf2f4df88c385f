// xgrammar's adaptive token mask, our way: for a stack whose rest below its top few positions is
// replaced by the hole (Automaton::hole_stack), each token is decided once as accepted whatever
// the rest is, rejected whatever the rest is, or uncertain (its bytes run past the known positions
// into the rest). A mask is then the accepted set of each of the state's stacks plus a walk of the
// few uncertain tokens from the real state, instead of a walk of the whole vocabulary trie. Classes
// are cached per hole stack in a grammar and, by the grammar's shape there, across grammars
// (every JSON schema shares the JSON string's classes).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/automaton.h"
#include "structured/state_dfa.h"
#include "structured/token_trie.h"

namespace pagoda::structured {

struct TokenClasses {
  std::vector<uint64_t> accepted;   // one bit per token id
  std::vector<uint32_t> uncertain;  // indices into TokenTrie::token_ids(), ascending (byte order)
  // Over the accepted tokens: the largest of the fewest bytes after the token to the hole (or to
  // acceptance when there is no hole); the real rest's completion adds to it.
  uint32_t max_after = 0;
  bool any_accepted = false;
  size_t bytes() const { return accepted.size() * 8 + uncertain.size() * 4 + sizeof(*this); }
};

// Walks the trie from stack `s` (a hole stack or a real one). Exact (nothing uncertain) when `s`
// does not rest on the hole.
TokenClasses classify_tokens(StateDfa& dfa, StackId s, const TokenTrie& trie);

// Classes by grammar shape (Automaton::shape), bounded in bytes, oldest dropped first.
class TokenClassCache {
 public:
  std::shared_ptr<const TokenClasses> find(const std::string& shape);
  void insert(const std::string& shape, std::shared_ptr<const TokenClasses> c);

 private:
  static constexpr size_t kMaxBytes = size_t{64} << 20;  // ~1,500 positions of ~40 KB
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const TokenClasses>> map_;
  std::deque<std::string> order_;
  size_t bytes_ = 0;
};

}  // namespace pagoda::structured

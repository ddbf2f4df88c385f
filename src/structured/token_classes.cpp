#include "structured/token_classes.h"

#include <algorithm>

namespace pagoda::structured {

TokenClasses classify_tokens(StateDfa& dfa, StackId s, const TokenTrie& trie) {
  TokenClasses out;
  out.accepted.assign((static_cast<size_t>(trie.vocab_size()) + 63) / 64, 0);
  const auto& nodes = trie.nodes();
  const auto& ids = trie.token_ids();
  // at[d]: the state after the first d bytes of the current path; open_rest[d]: those bytes
  // reached the hole on some path, so any byte after them is up to the unknown rest.
  std::vector<uint32_t> at(trie.max_depth() + 1);
  std::vector<uint8_t> open_rest(trie.max_depth() + 1, 0);
  dfa.bound();
  at[0] = dfa.intern({s});
  const size_t n = nodes.size();
  for (size_t i = 0; i < n;) {
    const TokenTrie::Node& node = nodes[i];
    const uint32_t parent = at[node.depth - 1];
    const bool into_rest = open_rest[node.depth - 1] || dfa.has_hole(parent);
    const uint32_t cur = dfa.next(parent, node.byte);
    if (cur == StateDfa::kDead) {
      // No known position takes this byte: the subtree is up to the rest, or rejected.
      if (into_rest)
        for (uint32_t t = trie.tokens_before(i); t < trie.tokens_before(node.subtree_end); ++t) out.uncertain.push_back(t);
      i = node.subtree_end;
      continue;
    }
    at[node.depth] = cur;
    open_rest[node.depth] = into_rest ? 1 : 0;
    if (node.tokens_begin < node.tokens_end) {
      out.max_after = std::max(out.max_after, dfa.shortest(cur));
      out.any_accepted = true;
      for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) {
        const auto id = static_cast<size_t>(ids[t]);
        out.accepted[id >> 6] |= uint64_t{1} << (id & 63);
      }
    }
    ++i;
  }
  out.uncertain.shrink_to_fit();
  return out;
}

std::shared_ptr<const TokenClasses> TokenClassCache::find(const std::string& shape) {
  std::lock_guard lock(mu_);
  auto it = map_.find(shape);
  return it == map_.end() ? nullptr : it->second;
}

void TokenClassCache::insert(const std::string& shape, std::shared_ptr<const TokenClasses> c) {
  std::lock_guard lock(mu_);
  const size_t add = c->bytes() + shape.size();
  if (!map_.emplace(shape, std::move(c)).second) return;
  order_.push_back(shape);
  bytes_ += add;
  while (bytes_ > kMaxBytes && order_.size() > 1) {
    auto it = map_.find(order_.front());
    bytes_ -= it->second->bytes() + it->first.size();
    map_.erase(it);
    order_.pop_front();
  }
}

}  // namespace pagoda::structured

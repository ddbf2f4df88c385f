#include "structured/token_trie.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "structured/token_classes.h"

namespace pagoda::structured {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes)
    : bytes_(token_bytes), vocab_size_(static_cast<int32_t>(token_bytes.size())) {
  std::vector<int32_t> order;
  for (size_t i = 0; i < token_bytes.size(); ++i)
    if (!token_bytes[i].empty()) order.push_back(static_cast<int32_t>(i));
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes[static_cast<size_t>(a)] < token_bytes[static_cast<size_t>(b)];
  });
  // Sorted strings give the preorder directly: each token adds the nodes past its common prefix
  // with the previous token. `open` holds the node index at each depth of the current path.
  std::vector<uint32_t> open;
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& s = token_bytes[static_cast<size_t>(id)];
    check(s.size() < 65535, "tokenizer: a token longer than 65,535 bytes");
    size_t common = 0;
    if (prev) {
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    }
    while (open.size() > common) {
      nodes_[open.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      open.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back({0, 0, 0, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
    }
    Node& leaf = nodes_[open.back()];
    if (leaf.tokens_begin == leaf.tokens_end) leaf.tokens_begin = leaf.tokens_end = static_cast<uint32_t>(token_ids_.size());
    token_ids_.push_back(id);
    leaf.tokens_end = static_cast<uint32_t>(token_ids_.size());
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  while (!open.empty()) {
    nodes_[open.back()].subtree_end = static_cast<uint32_t>(nodes_.size());
    open.pop_back();
  }
  tokens_before_.resize(nodes_.size() + 1);
  uint32_t count = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    tokens_before_[i] = count;
    count += nodes_[i].tokens_end - nodes_[i].tokens_begin;
  }
  tokens_before_[nodes_.size()] = count;
  class_cache_ = std::make_shared<TokenClassCache>();
}

}  // namespace pagoda::structured

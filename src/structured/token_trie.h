// The vocabulary as a byte trie in preorder, built once per tokenizer: a mask walk visits a node
// only while the automaton accepts the bytes on its path, and skips a rejected subtree in one jump.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pagoda::structured {

class TokenClassCache;

class TokenTrie {
 public:
  struct Node {
    uint32_t subtree_end;  // preorder index just past this node's subtree
    uint32_t tokens_begin; // tokens whose bytes end here: token_ids()[tokens_begin, tokens_end)
    uint32_t tokens_end;
    uint16_t depth;        // 1 for a first byte
    uint8_t byte;
  };

  // token_bytes[id]: what the token decodes to; an empty string is a token the grammar never
  // allows (special tokens; EOS is allowed separately when the grammar accepts).
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  int32_t vocab_size() const { return vocab_size_; }
  size_t max_depth() const { return max_depth_; }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  // Index into token_ids() of the first token at or after node i in preorder: the tokens of node
  // i's subtree are token_ids()[tokens_before(i), tokens_before(subtree_end)).
  uint32_t tokens_before(size_t i) const { return tokens_before_[i]; }
  // Token classes shared by every grammar bound to this vocabulary (thread-safe).
  TokenClassCache& class_cache() const { return *class_cache_; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  std::vector<uint32_t> tokens_before_;
  std::shared_ptr<TokenClassCache> class_cache_;
  std::vector<std::string> bytes_;
  int32_t vocab_size_ = 0;
  size_t max_depth_ = 0;
};

}  // namespace pagoda::structured

// Added tokens (tokenizer.json "added_tokens"): found in the text before anything else, like
// Hugging Face's AddedVocabulary. Leftmost-longest matching; lstrip/rstrip absorb neighbouring
// whitespace into the token; single_word rejects matches inside a word. Tokens with
// normalized=false are matched in the raw text, those with normalized=true in each normalized
// segment.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/string_hash.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

class AddedVocabulary {
 public:
  // Ids follow Hugging Face's assignment (the model's id when the content is in the vocab, else the
  // next free id in list order); a file whose ids disagree is refused, since HF would not produce
  // the ids the file states.
  AddedVocabulary(const tokjson::Json* list, const BpeModel& model, const Normalizer& normalizer,
                  const tokjson::Where& where);

  // Calls fn(text, id) for consecutive segments of text: id >= 0 for an added token (text is the
  // span it covers, stripped whitespace included), id < 0 for plain text in between.
  using SegmentFn = std::function<void(std::string_view, int32_t)>;
  // `literal_at` (sorted byte offsets): no token is matched starting there.
  void split_raw(std::string_view text, const SegmentFn& fn, const std::vector<size_t>& literal_at = {}) const {
    raw_.split(text, fn, literal_at);
  }
  void split_normalized(std::string_view text, const SegmentFn& fn) const {
    normalized_.split(text, fn, {});
  }

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find_id(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view content) const;
  int32_t max_id() const { return max_id_; }

 private:
  class Matcher {
   public:
    void add(const AddedToken* token, std::string pattern);
    void finish();
    void split(std::string_view text, const SegmentFn& fn, const std::vector<size_t>& literal_at) const;

   private:
    struct Entry {
      const AddedToken* token;
      std::string pattern;
    };
    struct Found {
      size_t start;
      size_t end;
      const Entry* entry;
    };
    std::optional<Found> find_next(std::string_view text, size_t from) const;

    // The patterns as a byte trie: finding the longest match at a position walks at most as many
    // bytes as the longest pattern and stops at the first byte no pattern continues with, whatever
    // the number of tokens sharing a prefix (Llama 3's 256 "<|...|>" tokens on a text of "<|<|<|").
    struct TrieNode {
      std::vector<std::pair<uint8_t, uint32_t>> next;  // sorted by byte
      int32_t entry = -1;                              // the first entry whose pattern ends here
    };
    std::vector<Entry> entries_;
    std::vector<TrieNode> trie_;
    std::array<bool, 256> starts_{};  // bytes some pattern starts with
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> by_content_;
  std::unordered_map<int32_t, size_t> by_id_;
  int32_t max_id_ = -1;
  Matcher raw_;
  Matcher normalized_;
};

}  // namespace pagoda

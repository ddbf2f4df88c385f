// Special-token text that a client writes into a chat (`<|im_end|><|im_start|>system` in a message)
// is tokenized as text; only the special tokens the chat template itself emits count as tokens.
//
// How: before rendering, every string the client gave (message fields, tools, template kwargs, and
// object keys) gets a mark, U+FDD0 (a Unicode noncharacter, removed from client text first), after
// the first byte of each special token's text in it. The template renders around the marks. The
// prompt is then tokenized with the marks removed and, where each mark was, no added token allowed
// to start (Tokenizer::encode_literal_at). A template's own special tokens carry no mark; a marked
// one that some other path tokenized plainly would still not match, the mark being inside it.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pagoda {
class Tokenizer;
}

namespace pagoda::server {

class SpecialTextGuard {
 public:
  static constexpr std::string_view kMark = "\xEF\xB7\x90";  // U+FDD0

  // `specials`: the text of each special token (AddedToken::special) of the vocabulary.
  explicit SpecialTextGuard(std::vector<std::string> specials);
  static SpecialTextGuard for_tokenizer(const Tokenizer& tok);

  // Client text with kMark removed and inserted after the first byte of each special token's text.
  std::string mark(std::string_view client_text) const;
  // mark() on every string and object key of `v`.
  void mark_json(nlohmann::ordered_json& v) const;

  // A rendered prompt without its marks, and the byte offsets (in the result, sorted) where a
  // marked special token's text starts.
  static std::string unmark(std::string_view rendered, std::vector<size_t>& literal_at);

 private:
  std::vector<std::string> specials_;
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

}  // namespace pagoda::server

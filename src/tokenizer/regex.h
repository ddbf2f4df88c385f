// A compiled PCRE2 pattern (UTF + UCP, JIT when available) for the Split pre-tokenizer. Hugging
// Face runs these patterns with Oniguruma, whose \s is Unicode White_Space (U+0085, U+00A0, U+3000,
// U+2028 in; U+180E, U+200B, U+001C out). PCRE2's UCP \s also takes U+180E, so \s and \S are
// rewritten to \p{White_Space} and \P{White_Space}; the tests pin these characters.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;

namespace pagoda {

class Regex {
 public:
  // literal: match `pattern` as plain text. Throws pagoda::Error naming `where` on a bad pattern.
  Regex(std::string_view pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends every non-overlapping match [start, end), left to right, to out. `text` must be valid
  // UTF-8 (the tokenizer guarantees it), so PCRE2's own check is skipped.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

  // The \s / \S rewrite described above (exposed for tests).
  static std::string unicode_whitespace(std::string_view pattern);

 private:
  pcre2_real_code_8* code_ = nullptr;
  std::string where_;
};

}  // namespace pagoda

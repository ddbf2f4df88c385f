// The tokenizer.json "normalizer": null, NFC, Replace (a literal or regex pattern), Prepend, or a
// Sequence of those, applied in order. Anything else is refused by name rather than silently
// skipped, because skipping it would change the ids.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_fields.h"
#include "tokenizer/regex.h"

namespace pagoda {

// Hugging Face's Replace: every non-overlapping match of a literal string or a regex becomes
// `content`. Shared by the Replace normalizer and the Replace decoder.
class ReplaceRule {
 public:
  // j is the Replace object ({"pattern": {"String"|"Regex": ...}, "content": ...}).
  static ReplaceRule from_json(const tokjson::Json& j, const tokjson::Where& where);
  // text must be valid UTF-8.
  std::string apply(std::string_view text) const;

 private:
  std::string literal_;           // the pattern when it is a String
  std::shared_ptr<Regex> regex_;  // the pattern when it is a Regex
  std::string content_;
};

class Normalizer {
 public:
  // j may be null (no normalization).
  static Normalizer from_json(const tokjson::Json& j, const tokjson::Where& where);

  bool is_identity() const { return steps_.empty(); }
  // text must be valid UTF-8.
  std::string normalize(std::string_view text) const;

 private:
  struct Step {
    enum class Kind { kNfc, kReplace, kPrepend } kind = Kind::kNfc;
    ReplaceRule replace;
    std::string prepend;
  };
  static void parse_into(const tokjson::Json& j, const tokjson::Where& where, int depth,
                         std::vector<Step>& steps);

  std::vector<Step> steps_;
};

// Unicode NFC (utf8proc). Only stretches around characters that NFC might change go through the
// library; ASCII, Latin-1 and common CJK text are copied as they are.
std::string nfc(std::string_view text);

}  // namespace pagoda

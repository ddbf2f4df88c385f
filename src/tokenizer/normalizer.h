// The tokenizer.json "normalizer": null, NFC, or a Sequence of those. Anything else is refused by
// name rather than silently skipped, because skipping it would change the ids.
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/json_fields.h"

namespace pagoda {

class Normalizer {
 public:
  // j may be null (no normalization).
  static Normalizer from_json(const tokjson::Json& j, const tokjson::Where& where);

  bool is_identity() const { return !nfc_; }
  // text must be valid UTF-8.
  std::string normalize(std::string_view text) const;

 private:
  bool nfc_ = false;  // NFC is idempotent, so a Sequence of several NFCs is one NFC.
};

// Unicode NFC (utf8proc). Only stretches around characters that NFC might change go through the
// library; ASCII, Latin-1 and common CJK text are copied as they are.
std::string nfc(std::string_view text);

}  // namespace pagoda

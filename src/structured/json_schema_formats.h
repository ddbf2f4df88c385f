// The GBNF rules every compiled JSON schema shares (whitespace, strings, numbers, any value) and
// the string formats as regular languages, each a subset of what its RFC allows.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace pagoda::structured {

const char* json_schema_primitives();

struct FormatRule {
  std::string rule;          // matches the quoted JSON string
  int64_t min_len, max_len;  // characters between the quotes, over every string the rule matches
};
// The rule of a known format; nullopt for a format the compiler treats as an annotation.
std::optional<FormatRule> format_rule(const std::string& format);

}  // namespace pagoda::structured

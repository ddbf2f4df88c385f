// UTF-8 scanning that follows the Unicode "substitution of maximal subparts" rule, which is what
// Rust's String::from_utf8_lossy (and so Hugging Face decode) does with invalid bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

enum class StepKind {
  kValid,      // a complete, well-formed character
  kInvalid,    // a maximal ill-formed subpart: replace it by one U+FFFD
  kTruncated,  // a well-formed prefix cut short by the end of the input
};

struct Step {
  StepKind kind;
  size_t len;       // bytes consumed (>= 1)
  uint32_t cp = 0;  // the code point when kind == kValid
};

// Reads the character (or ill-formed subpart) that starts at s[i]; i < s.size().
Step next(std::string_view s, size_t i);

bool is_valid(std::string_view s);

// Every maximal ill-formed subpart and a truncated tail each become one U+FFFD.
std::string to_valid_lossy(std::string_view s);

// How many leading bytes of s can be emitted now: everything except a truncated tail that later
// bytes could still complete. Appends the (lossy) text of that prefix to out.
size_t drain_complete(std::string_view s, std::string& out);

void append(std::string& out, uint32_t cp);

// Unicode White_Space, as Rust's char::is_whitespace.
bool is_whitespace(uint32_t cp);

}  // namespace pagoda::utf8

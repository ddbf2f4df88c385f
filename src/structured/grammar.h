// The grammar IR every front end (GBNF, regex, JSON Schema, choices) compiles into: a context-free
// grammar over bytes. A rule is a flat list of alternatives, each a sequence of byte sets and rule
// references, ended by kAlt (another alternative follows) or kEnd (llama.cpp's layout), so a parse
// position is one index into Grammar::elements.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::structured {

struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum Kind : uint8_t { kEnd, kAlt, kRef, kBytes };
  Kind kind;
  uint32_t value;  // kRef: rule index; kBytes: index into Grammar::byte_sets
};

struct Grammar {
  std::vector<Element> elements;          // all rules, back to back
  std::vector<uint32_t> rule_start;       // first element of each rule
  std::vector<std::string> rule_names;    // for errors
  std::vector<ByteSet> byte_sets;
  uint32_t root = 0;

  bool ends_alternative(uint32_t pos) const {
    const auto k = elements[pos].kind;
    return k == Element::kEnd || k == Element::kAlt;
  }
};

// Limits that keep compiling a client's grammar bounded in memory and time.
inline constexpr size_t kMaxGrammarElements = 1u << 20;
inline constexpr size_t kMaxRules = 1u << 16;

// A code point range set as UTF-8 byte sequences: appends to `alternatives` one sequence of
// byte sets per piece (at most four sets each), so [lo, hi] matches exactly the UTF-8 encodings
// of the code points in the ranges. Ranges may overlap; surrogates are skipped.
using ByteSeq = std::vector<ByteSet>;
void utf8_ranges(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, std::vector<ByteSeq>& alternatives);
std::string utf8_encode(uint32_t cp);

}  // namespace pagoda::structured

#include "structured/grammar.h"

#include <algorithm>

namespace pagoda::structured {

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

namespace {

// Splits [lo, hi] (same encoded length) until each piece is a product of byte ranges, the way
// RE2 and Rust's utf8-ranges do: a piece whose lower bytes span their full 0x80..0xBF range.
void split_same_length(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  const std::string a = utf8_encode(lo), b = utf8_encode(hi);
  const size_t n = a.size();
  for (size_t i = 1; i < n; ++i) {
    const uint32_t bits = 6 * static_cast<uint32_t>(n - i);
    const uint32_t m = (uint32_t{1} << bits) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  ByteSeq seq(n);
  for (size_t i = 0; i < n; ++i)
    seq[i].add_range(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  out.push_back(seq);
}

}  // namespace

void utf8_ranges(const std::vector<std::pair<uint32_t, uint32_t>>& ranges, std::vector<ByteSeq>& out) {
  std::vector<std::pair<uint32_t, uint32_t>> r = ranges;
  std::sort(r.begin(), r.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (auto [lo, hi] : r) {
    hi = std::min<uint32_t>(hi, 0x10FFFF);
    if (lo > hi) continue;
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.emplace_back(lo, hi);
    }
  }
  static constexpr uint32_t kBounds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (auto [lo, hi] : merged) {
    for (uint32_t bound_lo = 0; uint32_t bound : kBounds) {
      const uint32_t a = std::max(lo, bound_lo), b = std::min(hi, bound);
      bound_lo = bound + 1;
      if (a > b) continue;
      // Surrogates have no UTF-8 encoding.
      if (bound == 0xFFFF && a <= 0xDFFF && b >= 0xD800) {
        if (a < 0xD800) split_same_length(a, 0xD7FF, out);
        if (b > 0xDFFF) split_same_length(0xE000, b, out);
      } else {
        split_same_length(a, b, out);
      }
    }
  }
}

}  // namespace pagoda::structured

#include "tokenizer/utf8.h"

namespace pagoda::utf8 {

namespace {

// Allowed range of the second byte after a lead byte (Unicode Table 3-7); later bytes are 80..BF.
struct LeadInfo {
  int len;  // 0: not a lead byte
  uint8_t lo;
  uint8_t hi;
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};  // excludes the surrogates
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  return {0, 0, 0};
}

}  // namespace

Step next(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return {StepKind::kValid, 1, b0};
  const LeadInfo info = lead_info(b0);
  if (info.len == 0) return {StepKind::kInvalid, 1};
  uint32_t cp = b0 & (0xFF >> (info.len + 1));
  for (int k = 1; k < info.len; ++k) {
    if (i + k >= s.size()) return {StepKind::kTruncated, static_cast<size_t>(k)};
    const auto b = static_cast<uint8_t>(s[i + k]);
    const uint8_t lo = k == 1 ? info.lo : 0x80;
    const uint8_t hi = k == 1 ? info.hi : 0xBF;
    if (b < lo || b > hi) return {StepKind::kInvalid, static_cast<size_t>(k)};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {StepKind::kValid, static_cast<size_t>(info.len), cp};
}

bool is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Step st = next(s, i);
    if (st.kind != StepKind::kValid) return false;
    i += st.len;
  }
  return true;
}

size_t drain_complete(std::string_view s, std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    const Step st = next(s, i);
    if (st.kind == StepKind::kTruncated) break;
    if (st.kind == StepKind::kValid) {
      out.append(s.substr(i, st.len));
    } else {
      out.append(kReplacement);
    }
    i += st.len;
  }
  return i;
}

std::string to_valid_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const size_t done = drain_complete(s, out);
  if (done < s.size()) out.append(kReplacement);  // a truncated tail is one maximal subpart
  return out;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_whitespace(uint32_t cp) {
  if (cp == 0x20 || (cp >= 0x09 && cp <= 0x0D)) return true;
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace pagoda::utf8

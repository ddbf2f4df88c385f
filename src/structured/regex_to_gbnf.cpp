#include "structured/regex_to_gbnf.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "structured/grammar.h"

namespace pagoda::structured {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr int kMaxDepth = 64;

std::string hex_escape(uint32_t cp) {
  char buf[16];
  if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  else std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

bool plain(uint32_t cp) {
  return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9');
}

Ranges complement(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = std::max(next, hi + 1);
  }
  if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
  return out;
}

// Removes `"`, `\` and control characters (what a JSON string cannot hold unescaped).
Ranges json_safe(const Ranges& r) {
  Ranges out;
  const Ranges banned = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  const Ranges allowed = complement(banned);
  for (auto [lo, hi] : r)
    for (auto [alo, ahi] : allowed) {
      const uint32_t a = std::max(lo, alo), b = std::min(hi, ahi);
      if (a <= b) out.emplace_back(a, b);
    }
  return out;
}

class RegexParser {
 public:
  RegexParser(std::string_view s, bool json, int64_t cap = -1) : s_(s), json_(json), cap_(cap) {}

  std::string run() {
    if (!s_.empty() && s_[0] == '^') ++pos_;
    std::string out = alternation(0);
    if (pos_ < s_.size()) fail("unbalanced ')'");
    return out;
  }

  // Characters in the shortest and longest match of what run() parsed (-1: unbounded).
  std::pair<int64_t, int64_t> lengths() const { return {min_, max_}; }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("regex: " + what + " (at offset " + std::to_string(pos_) + ")");
  }

  std::string alternation(int depth) {
    if (depth > kMaxDepth) fail("groups nested deeper than " + std::to_string(kMaxDepth));
    const bool start = at_start_;
    std::string out = "(" + concat(depth);
    int64_t lo = min_, hi = max_;
    while (pos_ < s_.size() && s_[pos_] == '|') {
      ++pos_;
      at_start_ = start;
      out += " | " + concat(depth);
      lo = std::min(lo, min_);
      hi = (hi < 0 || max_ < 0) ? -1 : std::max(hi, max_);
    }
    min_ = lo, max_ = hi;
    return out + ")";
  }

  std::string concat(int depth) {
    std::string out;
    int64_t lo = 0, hi = 0;
    while (pos_ < s_.size() && s_[pos_] != '|' && s_[pos_] != ')') {
      if (s_[pos_] == '$' && (pos_ + 1 == s_.size() || s_[pos_ + 1] == '|' || s_[pos_ + 1] == ')')) {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '^') {
        if (!at_start_) fail("'^' is supported only at the start");
        ++pos_;
        continue;
      }
      min_ = max_ = 1;  // a character, unless the atom is a group
      std::string atom_text = atom(depth);
      at_start_ = false;
      const std::string q = quantifier();
      repeat_lengths(q);
      lo = std::min<int64_t>(lo + min_, int64_t{1} << 40);
      hi = (hi < 0 || max_ < 0) ? -1 : std::min<int64_t>(hi + max_, int64_t{1} << 40);
      out += " " + atom_text + q;
    }
    min_ = lo, max_ = hi;
    return out.empty() ? " \"\"" : out;
  }

  // The atom's lengths (min_, max_) under the quantifier text q.
  void repeat_lengths(const std::string& q) {
    int64_t m = 1, n = 1;
    if (q == "*") m = 0, n = -1;
    else if (q == "+") n = -1;
    else if (q == "?") m = 0;
    else if (!q.empty()) {
      const std::string body = q.substr(1, q.size() - 2);
      if (body.size() > 18) fail("repetition count too large");
      const size_t comma = body.find(',');
      m = std::stoll(body.substr(0, comma));
      if (comma == std::string::npos) n = m;
      else if (body.find_first_of("0123456789", comma) == std::string::npos) n = -1;
      else n = std::stoll(body.substr(comma + 1));
    }
    min_ = std::min<int64_t>(min_ * m, int64_t{1} << 40);
    max_ = (n < 0 || max_ < 0) ? ((n == 0 || max_ == 0) ? 0 : -1) : std::min<int64_t>(max_ * n, int64_t{1} << 40);
  }

  std::string quantifier() {
    if (pos_ >= s_.size()) return "";
    std::string q;
    const char c = s_[pos_];
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      q = std::string(1, c);
      if (cap_ >= 0 && c != '?') q = "{" + std::string(c == '*' ? "0" : "1") + "," + std::to_string(cap_ + (c == '+')) + "}";
    } else if (c == '{') {
      const size_t close = s_.find('}', pos_);
      if (close == std::string_view::npos) fail("unterminated {m,n}");
      const std::string_view body = s_.substr(pos_ + 1, close - pos_ - 1);
      for (char d : body)
        if (!(d >= '0' && d <= '9') && d != ',' && d != ' ') fail("bad {m,n} quantifier");
      if (body.empty() || body[0] == ',') fail("{,n} needs a minimum: write {0,n}");
      q = "{" + std::string(body) + "}";
      pos_ = close + 1;
      if (cap_ >= 0 && body.back() == ',') {
        const std::string m(body.substr(0, body.size() - 1));
        if (m.size() > 9) fail("repetition count too large");
        q = "{" + m + "," + std::to_string(std::stoll(m) + cap_) + "}";
      }
    } else {
      return "";
    }
    if (pos_ < s_.size() && (s_[pos_] == '?' || s_[pos_] == '+')) ++pos_;  // lazy/possessive: same language
    return q;
  }

  uint32_t utf8_char() {
    const auto b = static_cast<uint8_t>(s_[pos_]);
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    ++pos_;
    for (int i = 1; i < n && pos_ < s_.size(); ++i) cp = (cp << 6) | (static_cast<uint8_t>(s_[pos_++]) & 0x3F);
    return cp;
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos_ >= s_.size()) fail("unfinished escape");
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
      else fail("bad hex digit");
    }
    return v;
  }

  // After a backslash: a class (\d \w \s and negations) or one character. Whitespace differs
  // between the validators outputs meet: JSON Schema's regexes are ECMA-262's (\s: Unicode spaces,
  // line terminators and U+FEFF), Python's re adds U+001C-001F and U+0085 and leaves out U+FEFF. So
  // \s writes only what both call whitespace and \S only what neither does; inside a negated class
  // (`widest`, complemented afterwards) \s stands for what either calls whitespace.
  Ranges escape(bool widest = false) {
    if (pos_ >= s_.size()) fail("trailing backslash");
    const char e = s_[pos_++];
    const Ranges digit = {{'0', '9'}}, word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
                 space_both = {{'\t', '\r'}, {' ', ' '}, {0xa0, 0xa0}, {0x1680, 0x1680}, {0x2000, 0x200a},
                               {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000}},
                 space_either = {{'\t', '\r'}, {0x1c, ' '}, {0x85, 0x85}, {0xa0, 0xa0}, {0x1680, 0x1680},
                                 {0x2000, 0x200a}, {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f},
                                 {0x3000, 0x3000}, {0xfeff, 0xfeff}};
    switch (e) {
      case 'd': return digit;
      case 'D': return complement(digit);
      case 'w': return word;
      case 'W': return complement(word);
      case 's': return widest ? space_either : space_both;
      case 'S': return complement(widest ? space_both : space_either);
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 't': return {{'\t', '\t'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': { const uint32_t v = hex(2); return {{v, v}}; }
      case 'u': { const uint32_t v = hex(4); return {{v, v}}; }
      case 'b': case 'B': fail("word boundaries (\\b, \\B) are not supported in structured output");
      case 'A': case 'z': case 'Z': fail("anchors \\A \\z \\Z are not supported");
      default:
        if (e >= '1' && e <= '9') fail("backreferences are not supported in structured output");
        if (plain(static_cast<uint8_t>(e))) fail(std::string("unknown escape \\") + e);
        return {{static_cast<uint8_t>(e), static_cast<uint8_t>(e)}};
    }
  }

  std::string emit_ranges(Ranges r) {
    if (json_) {
      // A lone `"` or `\` in the class is written escaped as its own alternative.
      std::string extra;
      for (auto [lo, hi] : r) {
        if (lo <= '"' && '"' <= hi) extra += " | " + gbnf_literal("\\\"");
        if (lo <= '\\' && '\\' <= hi) extra += " | " + gbnf_literal("\\\\");
      }
      r = json_safe(r);
      if (r.empty() && extra.empty()) fail("a class with no character a JSON string can hold");
      if (r.empty()) return "(" + extra.substr(3) + ")";
      if (!extra.empty()) return "(" + gbnf_class(r) + extra + ")";
    }
    if (r.empty()) fail("empty character class");
    return gbnf_class(r);
  }

  std::string atom(int depth) {
    const char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      if (pos_ < s_.size() && s_[pos_] == '?') {
        ++pos_;
        if (pos_ < s_.size() && s_[pos_] == ':') {
          ++pos_;
        } else if (pos_ < s_.size() && (s_[pos_] == 'P' || s_[pos_] == '<') &&
                   !(s_.substr(pos_, 2) == "<=" || s_.substr(pos_, 2) == "<!")) {
          const size_t close = s_.find('>', pos_);
          if (close == std::string_view::npos) fail("unterminated group name");
          pos_ = close + 1;
        } else {
          fail("lookaround and inline flags ((?=, (?!, (?<=, (?i)) are not supported in structured output");
        }
      }
      std::string inner = alternation(depth + 1);
      if (pos_ >= s_.size() || s_[pos_] != ')') fail("missing ')'");
      ++pos_;
      return inner;
    }
    if (c == '[') return emit_ranges(char_class());
    if (c == '.') {
      ++pos_;
      return emit_ranges(complement({{'\n', '\n'}}));
    }
    if (c == '\\') {
      ++pos_;
      Ranges r = escape();
      if (r.size() == 1 && r[0].first == r[0].second) return literal(r[0].first);
      return emit_ranges(r);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') fail(std::string("nothing to repeat before '") + c + "'");
    return literal(utf8_char());
  }

  std::string literal(uint32_t cp) {
    if (json_ && cp == '"') return gbnf_literal("\\\"");
    if (json_ && cp == '\\') return gbnf_literal("\\\\");
    if (json_ && cp < 0x20) fail("a control character cannot appear unescaped in a JSON string");
    return gbnf_literal(utf8_encode(cp));
  }

  Ranges char_class() {
    ++pos_;
    bool negated = false;
    if (pos_ < s_.size() && s_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    Ranges r;
    bool first = true;
    while (pos_ < s_.size() && (s_[pos_] != ']' || first)) {
      first = false;
      Ranges item;
      if (s_[pos_] == '\\') {
        ++pos_;
        item = escape(negated);
      } else if (s_[pos_] == '[' && pos_ + 1 < s_.size() && s_[pos_ + 1] == ':') {
        fail("POSIX classes like [:alpha:] are not supported");
      } else {
        const uint32_t cp = utf8_char();
        item = {{cp, cp}};
      }
      if (item.size() == 1 && item[0].first == item[0].second && pos_ + 1 < s_.size() && s_[pos_] == '-' &&
          s_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi;
        if (s_[pos_] == '\\') {
          ++pos_;
          Ranges e = escape();
          if (e.size() != 1 || e[0].first != e[0].second) fail("a class cannot end a range");
          hi = e[0].first;
        } else {
          hi = utf8_char();
        }
        if (hi < item[0].first) fail("character range out of order");
        item[0].second = hi;
      }
      r.insert(r.end(), item.begin(), item.end());
    }
    if (pos_ >= s_.size()) fail("unterminated '['");
    ++pos_;
    return negated ? complement(r) : r;
  }

  std::string_view s_;
  bool json_;
  size_t pos_ = 0;
  int64_t cap_;  // >= 0: unbounded repetitions repeat at most this many times more than their minimum
  int64_t min_ = 0, max_ = 0;
  bool at_start_ = true;  // nothing matched yet: '^' is allowed (and means nothing)
};

}  // namespace

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char ch : bytes) {
    const auto b = static_cast<uint8_t>(ch);
    if (b == '"' || b == '\\' || b < 0x20 || b == 0x7F) out += hex_escape(b);
    else out += ch;
  }
  return out + "\"";
}

std::string gbnf_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  std::string out = "[";
  auto one = [](uint32_t cp) { return plain(cp) ? std::string(1, static_cast<char>(cp)) : hex_escape(cp); };
  for (auto [lo, hi] : ranges) {
    out += one(lo);
    if (hi != lo) out += "-" + one(hi);
  }
  return out + "]";
}

std::pair<int64_t, int64_t> regex_length_bounds(std::string_view regex, int64_t cap) {
  check(regex.size() <= 16384, "regex: longer than 16,384 characters");
  RegexParser p(regex, true, cap);
  p.run();
  return p.lengths();
}

std::string regex_to_gbnf(std::string_view regex, bool json_string, int64_t cap) {
  check(regex.size() <= 16384, "regex: longer than 16,384 characters");
  return RegexParser(regex, json_string, cap).run();
}

}  // namespace pagoda::structured

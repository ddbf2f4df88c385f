#include "structured/gbnf.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace pagoda::structured {
namespace {

constexpr int kMaxNesting = 64;
constexpr uint32_t kMaxRepeat = 10000;

using Seq = std::vector<Element>;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Grammar run() {
    skip_space(true);
    while (pos_ < s_.size()) {
      const std::string name = parse_name();
      skip_space(false);
      expect("::=");
      const uint32_t r = rule_index(name);
      if (defined_[r]) fail("rule '" + name + "' is defined twice");
      defined_[r] = true;
      bodies_[r] = parse_alternatives(0);
      skip_space(true);
    }
    return finish();
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) line += s_[i] == '\n';
    throw Error("grammar: line " + std::to_string(line) + ": " + what);
  }

  void skip_space(bool newlines) {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(s_.substr(start, pos_ - start));
  }

  void expect(std::string_view what) {
    if (s_.substr(pos_, what.size()) != what) fail("expected '" + std::string(what) + "'");
    pos_ += what.size();
  }

  // True when a new rule `name ::=` starts here (ends the current rule's last alternative).
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < s_.size() && name_char(s_[p])) ++p;
    if (p == pos_) return false;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
    return s_.substr(p, 3) == "::=";
  }

  uint32_t rule_index(const std::string& name) {
    auto it = names_.find(name);
    if (it != names_.end()) return it->second;
    return new_rule(name, false);
  }

  uint32_t new_rule(const std::string& name, bool defined) {
    if (bodies_.size() >= kMaxRules) fail("too many rules (more than " + std::to_string(kMaxRules) + ")");
    const auto r = static_cast<uint32_t>(bodies_.size());
    bodies_.emplace_back();
    rule_names_.push_back(name);
    defined_.push_back(defined);
    names_.emplace(name, r);
    return r;
  }

  uint32_t generated_rule(Seq body) {
    const uint32_t r = new_rule("_gen" + std::to_string(bodies_.size()), true);
    bodies_[r] = std::move(body);
    return r;
  }

  uint32_t byte_set(const ByteSet& b) {
    auto [it, inserted] = sets_.emplace(b.bits, static_cast<uint32_t>(set_list_.size()));
    if (inserted) set_list_.push_back(b);
    return it->second;
  }

  void count(size_t n) {
    total_ += n;
    if (total_ > kMaxGrammarElements) fail("grammar too large (more than " + std::to_string(kMaxGrammarElements) + " elements)");
  }

  Seq parse_alternatives(int depth) {
    if (depth > kMaxNesting) fail("groups nested deeper than " + std::to_string(kMaxNesting));
    Seq out;
    for (;;) {
      Seq seq = parse_sequence(depth);
      out.insert(out.end(), seq.begin(), seq.end());
      skip_space(true);
      if (pos_ < s_.size() && s_[pos_] == '|') {
        ++pos_;
        out.push_back({Element::kAlt, 0});
        continue;
      }
      out.push_back({Element::kEnd, 0});
      count(out.size());
      return out;
    }
  }

  Seq parse_sequence(int depth) {
    Seq seq;
    for (;;) {
      skip_space(depth > 0);
      if (depth == 0 && pos_ < s_.size() && (s_[pos_] == '\n' || s_[pos_] == '\r')) {
        // A newline ends the rule unless the next line continues it (with | or an item).
        const size_t save = pos_;
        skip_space(true);
        if (pos_ >= s_.size() || at_rule_start()) {
          pos_ = save;
          return seq;
        }
      }
      if (pos_ >= s_.size()) return seq;
      const char c = s_[pos_];
      if (c == '|' || c == ')') return seq;
      Seq item = parse_primary(depth);
      parse_repetition(item);
      seq.insert(seq.end(), item.begin(), item.end());
    }
  }

  Seq parse_primary(int depth) {
    const char c = s_[pos_];
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return class_elements({{0, 0x10FFFF}});
    }
    if (c == '(') {
      ++pos_;
      Seq body = parse_alternatives(depth + 1);
      skip_space(true);
      expect(")");
      return {{Element::kRef, generated_rule(std::move(body))}};
    }
    if (name_char(c)) return {{Element::kRef, rule_index(parse_name())}};
    fail(std::string("unexpected character '") + c + "'");
  }

  uint32_t parse_escape() {
    if (pos_ >= s_.size()) fail("unfinished escape");
    const char e = s_[pos_++];
    auto hex = [&](int n) {
      uint32_t v = 0;
      for (int i = 0; i < n; ++i) {
        if (pos_ >= s_.size()) fail("unfinished \\x/\\u escape");
        const char h = s_[pos_++];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
        else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
        else fail("bad hex digit in escape");
      }
      return v;
    };
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      default: return static_cast<uint8_t>(e);
    }
  }

  // One code point of the text (UTF-8) or an escape.
  uint32_t parse_char() {
    if (pos_ >= s_.size()) fail("unfinished literal");
    const auto b = static_cast<uint8_t>(s_[pos_]);
    if (b == '\\') {
      ++pos_;
      return parse_escape();
    }
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? b : b & (0x7F >> n);
    ++pos_;
    for (int i = 1; i < n && pos_ < s_.size(); ++i) cp = (cp << 6) | (static_cast<uint8_t>(s_[pos_++]) & 0x3F);
    return cp;
  }

  Seq parse_literal() {
    ++pos_;
    Seq seq;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      const uint32_t cp = parse_char();
      if (cp > 0x10FFFF) fail("code point out of range");
      for (char ch : utf8_encode(cp)) {
        ByteSet b;
        b.add(static_cast<uint8_t>(ch));
        seq.push_back({Element::kBytes, byte_set(b)});
      }
    }
    expect("\"");
    count(seq.size());
    return seq;
  }

  Seq parse_class() {
    ++pos_;
    bool negated = false;
    if (pos_ < s_.size() && s_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    while (pos_ < s_.size() && s_[pos_] != ']') {
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
      }
      if (hi < lo) fail("character range out of order");
      ranges.emplace_back(lo, hi);
    }
    expect("]");
    if (negated) {
      std::sort(ranges.begin(), ranges.end());
      std::vector<std::pair<uint32_t, uint32_t>> inv;
      uint32_t next = 0;
      for (auto [lo, hi] : ranges) {
        if (lo > next) inv.emplace_back(next, lo - 1);
        next = std::max(next, hi + 1);
      }
      if (next <= 0x10FFFF) inv.emplace_back(next, 0x10FFFF);
      ranges = inv;
    }
    return class_elements(ranges);
  }

  Seq class_elements(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    std::vector<ByteSeq> seqs;
    utf8_ranges(ranges, seqs);
    ByteSet single;
    Seq multi;
    for (const ByteSeq& bs : seqs) {
      if (bs.size() == 1) {
        for (int w = 0; w < 4; ++w) single.bits[static_cast<size_t>(w)] |= bs[0].bits[static_cast<size_t>(w)];
        continue;
      }
      if (!multi.empty()) multi.push_back({Element::kAlt, 0});
      for (const ByteSet& b : bs) multi.push_back({Element::kBytes, byte_set(b)});
    }
    if (multi.empty()) {
      if (single == ByteSet{}) fail("empty character class");
      return {{Element::kBytes, byte_set(single)}};
    }
    if (single != ByteSet{}) {
      multi.push_back({Element::kAlt, 0});
      multi.push_back({Element::kBytes, byte_set(single)});
    }
    multi.push_back({Element::kEnd, 0});
    count(multi.size());
    return {{Element::kRef, generated_rule(std::move(multi))}};
  }

  uint32_t parse_int() {
    uint32_t v = 0;
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + static_cast<uint32_t>(s_[pos_++] - '0');
      if (v > kMaxRepeat) fail("repetition count above " + std::to_string(kMaxRepeat));
    }
    if (pos_ == start) fail("expected a number in {m,n}");
    return v;
  }

  void parse_repetition(Seq& item) {
    if (pos_ >= s_.size()) return;
    const char c = s_[pos_];
    uint32_t lo = 0, hi = 0;
    bool unbounded = false;
    if (c == '*') { ++pos_; unbounded = true; }
    else if (c == '+') { ++pos_; lo = 1; unbounded = true; }
    else if (c == '?') { ++pos_; hi = 1; }
    else if (c == '{') {
      ++pos_;
      skip_space(false);
      lo = parse_int();
      skip_space(false);
      hi = lo;
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        skip_space(false);
        if (pos_ < s_.size() && s_[pos_] == '}') unbounded = true;
        else hi = parse_int();
      }
      skip_space(false);
      expect("}");
      if (!unbounded && hi < lo) fail("{m,n} with n < m");
    } else {
      return;
    }
    count(item.size() * (lo + 1) + (unbounded ? 0 : hi - lo) * 4);
    const Seq x = item;
    Seq out;
    for (uint32_t i = 0; i < lo; ++i) out.insert(out.end(), x.begin(), x.end());
    if (unbounded) {
      // r ::= x r | ε  (the tail call keeps the automaton's stack flat)
      const uint32_t r = generated_rule({});
      Seq body = x;
      body.push_back({Element::kRef, r});
      body.push_back({Element::kAlt, 0});
      body.push_back({Element::kEnd, 0});
      bodies_[r] = std::move(body);
      out.push_back({Element::kRef, r});
    } else if (hi > lo) {
      // (x (x (x)?)?)? built from the inside out.
      uint32_t inner = 0;
      for (uint32_t i = 0; i < hi - lo; ++i) {
        Seq body = x;
        if (i > 0) body.push_back({Element::kRef, inner});
        body.push_back({Element::kAlt, 0});
        body.push_back({Element::kEnd, 0});
        inner = generated_rule(std::move(body));
      }
      out.push_back({Element::kRef, inner});
    }
    item = std::move(out);
  }

  Grammar finish() {
    auto it = names_.find("root");
    if (it == names_.end()) fail("no rule named 'root'");
    for (size_t r = 0; r < bodies_.size(); ++r) {
      if (!defined_[r]) fail("rule '" + rule_names_[r] + "' is used but not defined");
    }
    Grammar g;
    g.root = it->second;
    for (auto& body : bodies_) {
      g.rule_start.push_back(static_cast<uint32_t>(g.elements.size()));
      g.elements.insert(g.elements.end(), body.begin(), body.end());
    }
    g.rule_names = rule_names_;
    g.byte_sets = set_list_;
    check_no_left_recursion(g);
    return g;
  }

  std::string_view s_;
  size_t pos_ = 0;
  size_t total_ = 0;
  std::vector<Seq> bodies_;
  std::vector<std::string> rule_names_;
  std::vector<bool> defined_;
  std::map<std::string, uint32_t> names_;
  std::map<std::array<uint64_t, 4>, uint32_t> sets_;
  std::vector<ByteSet> set_list_;
};

}  // namespace

void check_no_left_recursion(const Grammar& g) {
  const size_t n = g.rule_start.size();
  // Nullable rules, to a fixed point.
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (uint32_t p = g.rule_start[r];; ++p) {
        // Walk one alternative: nullable if every element is a nullable ref.
        bool ok = true;
        for (; !g.ends_alternative(p); ++p) {
          const Element& e = g.elements[p];
          if (e.kind == Element::kBytes || !nullable[e.value]) ok = false;
        }
        if (ok) { nullable[r] = true; changed = true; break; }
        if (g.elements[p].kind == Element::kEnd) break;
      }
    }
  }
  // first[r]: rules reachable at the start of r without consuming a byte.
  std::vector<std::vector<uint32_t>> first(n);
  for (size_t r = 0; r < n; ++r) {
    bool at_start = true;
    for (uint32_t p = g.rule_start[r];; ++p) {
      const Element& e = g.elements[p];
      if (e.kind == Element::kEnd) break;
      if (e.kind == Element::kAlt) { at_start = true; continue; }
      if (!at_start) continue;
      if (e.kind == Element::kRef) {
        first[r].push_back(e.value);
        at_start = nullable[e.value];
      } else {
        at_start = false;
      }
    }
  }
  // Cycle search, iterative (colour 1 = on the path, 2 = done).
  std::vector<uint8_t> colour(n, 0);
  for (size_t start = 0; start < n; ++start) {
    if (colour[start]) continue;
    std::vector<std::pair<uint32_t, size_t>> stack{{static_cast<uint32_t>(start), 0}};
    colour[start] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == first[r].size()) {
        colour[r] = 2;
        stack.pop_back();
        continue;
      }
      const uint32_t next = first[r][i++];
      if (colour[next] == 1) {
        throw Error("grammar: rule '" + g.rule_names[next] +
                    "' is left-recursive (it can reach itself without consuming input); rewrite it "
                    "with repetition, e.g. expr ::= term (\"+\" term)*");
      }
      if (colour[next] == 0) {
        colour[next] = 1;
        stack.emplace_back(next, 0);
      }
    }
  }
}

Grammar parse_gbnf(std::string_view text) { return Parser(text).run(); }

}  // namespace pagoda::structured

#include "template/jinja_lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "template/jinja_value.h"
#include "tokenizer/utf8.h"

namespace pagoda::jinja {

void syntax_error(int line, int col, const std::string& what) {
  throw Error("chat template syntax error at line " + std::to_string(line) + ", column " +
              std::to_string(col) + ": " + what);
}

namespace {

// "\r\n", "\r" and "\n" all become "\n"; one trailing newline is dropped.
std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length in bytes of the Python-whitespace character at s[i], or 0.
size_t space_at(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return py_isspace(c) ? 1 : 0;
  const utf8::Step st = utf8::next(s, i);
  return st.kind == utf8::StepKind::kValid && py_isspace(st.cp) ? st.len : 0;
}

size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size()) {
    const size_t n = space_at(s, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}

// Python str.rstrip(): the length of s without its trailing whitespace.
size_t rstrip_len(std::string_view s) {
  size_t keep = 0, i = 0;
  while (i < s.size()) {
    const size_t n = space_at(s, i);
    if (n) {
      i += n;
    } else {
      const utf8::Step st = utf8::next(s, i);
      i += st.kind == utf8::StepKind::kValid ? st.len : 1;
      keep = i;
    }
  }
  return keep;
}

bool all_spaces(std::string_view s) {
  return !s.empty() && skip_spaces(s, 0) == s.size();
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < s_.size(); ++i)
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < s_.size()) {
      const size_t start = find_tag(pos);
      if (start == std::string::npos) {
        emit_data(pos, s_.substr(pos));
        break;
      }
      std::string text = s_.substr(pos, start - pos);
      const char kind = s_[start + 1];  // '{', '%' or '#'
      size_t p = start + 2;
      char sign = 0;
      if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) sign = s_[p++];
      size_t raw_body = 0;
      const bool raw = kind == '%' && match_raw(start, "raw", &raw_body);
      apply_strip(text, sign, kind != '{', line_starting);
      emit_data(pos, std::move(text));
      if (kind == '#') {
        pos = end_comment(start, p);
      } else if (raw) {
        pos = lex_raw(raw_body);
      } else {
        pos = lex_tag(start, p, kind == '%');
      }
      line_starting = pos > 0 && s_[pos - 1] == '\n';
    }
    Token end;
    end.kind = Tok::End;
    locate(s_.size(), end);
    tokens_.push_back(end);
    return std::move(tokens_);
  }

 private:
  void locate(size_t pos, Token& t) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    const size_t ls = *(it - 1);
    t.line = static_cast<int>(it - line_starts_.begin());
    t.col = static_cast<int>(code_point_count(std::string_view(s_).substr(ls, pos - ls))) + 1;
  }

  [[noreturn]] void fail(size_t pos, const std::string& what) const {
    Token t;
    locate(pos, t);
    syntax_error(t.line, t.col, what);
  }

  size_t find_tag(size_t pos) const {
    while (true) {
      const size_t k = s_.find('{', pos);
      if (k == std::string::npos || k + 1 >= s_.size()) return std::string::npos;
      const char c = s_[k + 1];
      if (c == '{' || c == '%' || c == '#') return k;
      pos = k + 1;
    }
  }

  void emit_data(size_t pos, std::string text) {
    if (text.empty()) return;
    Token t;
    t.kind = Tok::Data;
    t.text = std::move(text);
    locate(pos, t);
    tokens_.push_back(std::move(t));
  }

  // The text before a tag: "-" strips all trailing whitespace; lstrip_blocks strips the spaces
  // between the last newline (or the start of a line) and a block or comment tag.
  static void apply_strip(std::string& text, char sign, bool block_or_comment, bool line_starting) {
    if (sign == '-') {
      text.resize(rstrip_len(text));
    } else if (sign != '+' && block_or_comment) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting) && all_spaces(std::string_view(text).substr(l_pos)))
        text.resize(l_pos);
    }
  }

  // At s_[at] == '{': does "{%[-+]?\s*WORD\s*(-%}\s*|%})" match? (trim_blocks does not apply to
  // the raw tag.) On success *after is the position following it.
  bool match_raw(size_t at, const char* word, size_t* after) const {
    size_t p = at + 2;
    if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
    p = skip_spaces(s_, p);
    const std::string w = word;
    if (s_.compare(p, w.size(), w) != 0) return false;
    p += w.size();
    if (p < s_.size() && is_name_char(s_[p])) return false;
    p = skip_spaces(s_, p);
    if (s_.compare(p, 3, "-%}") == 0) {
      *after = skip_spaces(s_, p + 3);
      return true;
    }
    if (s_.compare(p, 2, "%}") == 0) {
      *after = p + 2;
      return true;
    }
    return false;
  }

  size_t lex_raw(size_t body) {
    size_t p = body;
    while (true) {
      const size_t k = s_.find("{%", p);
      if (k == std::string::npos) fail(body, "missing end of raw directive");
      size_t q = k + 2;
      char sign = 0;
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) sign = s_[q++];
      q = skip_spaces(s_, q);
      if (s_.compare(q, 6, "endraw") == 0) {
        q = skip_spaces(s_, q + 6);
        size_t after = 0;
        if (s_.compare(q, 3, "+%}") == 0) {
          after = q + 3;
        } else if (s_.compare(q, 3, "-%}") == 0) {
          after = skip_spaces(s_, q + 3);
        } else if (s_.compare(q, 2, "%}") == 0) {
          after = q + 2;
          if (after < s_.size() && s_[after] == '\n') ++after;
        }
        if (after) {
          std::string text = s_.substr(body, k - body);
          const bool line_starting = body > 0 && s_[body - 1] == '\n';
          apply_strip(text, sign, true, line_starting);
          emit_data(body, std::move(text));
          return after;
        }
      }
      p = k + 2;
    }
  }

  size_t end_comment(size_t start, size_t p) {
    const size_t k = s_.find("#}", p);
    if (k == std::string::npos) fail(start, "missing end of comment tag");
    if (k > p && s_[k - 1] == '-') return skip_spaces(s_, k + 2);
    if (k > p && s_[k - 1] == '+') return k + 2;
    size_t after = k + 2;
    if (after < s_.size() && s_[after] == '\n') ++after;
    return after;
  }

  void push(Tok kind, size_t pos, std::string text = {}) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    locate(pos, t);
    tokens_.push_back(std::move(t));
  }

  // Lexes the inside of a {{ }} or {% %} tag that starts at `start` (its body at p) and returns the
  // position after the closing delimiter.
  size_t lex_tag(size_t start, size_t p, bool block) {
    push(block ? Tok::BlockBegin : Tok::VarBegin, start);
    std::vector<char> balance;
    while (true) {
      if (p >= s_.size()) fail(start, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      if (balance.empty()) {
        if (block) {
          if (s_.compare(p, 3, "+%}") == 0) {
            push(Tok::BlockEnd, p);
            return p + 3;
          }
          if (s_.compare(p, 3, "-%}") == 0) {
            push(Tok::BlockEnd, p);
            return skip_spaces(s_, p + 3);
          }
          if (s_.compare(p, 2, "%}") == 0) {
            push(Tok::BlockEnd, p);
            return p + 2 < s_.size() && s_[p + 2] == '\n' ? p + 3 : p + 2;
          }
        } else {
          if (s_.compare(p, 3, "-}}") == 0) {
            push(Tok::VarEnd, p);
            return skip_spaces(s_, p + 3);
          }
          if (s_.compare(p, 2, "}}") == 0) {
            push(Tok::VarEnd, p);
            return p + 2;
          }
        }
      }
      const size_t sp = space_at(s_, p);
      if (sp) {
        p += sp;
        continue;
      }
      const char c = s_[p];
      if (is_digit(c)) {
        p = lex_number(p);
      } else if (is_name_start(c)) {
        size_t q = p;
        while (q < s_.size() && is_name_char(s_[q])) ++q;
        push(Tok::Name, p, s_.substr(p, q - p));
        p = q;
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        p = lex_operator(p, balance);
      }
    }
  }

  size_t lex_operator(size_t p, std::vector<char>& balance) {
    static const char* const two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two) {
      if (s_.compare(p, 2, op) == 0) {
        push(Tok::Op, p, op);
        return p + 2;
      }
    }
    const char c = s_[p];
    static const std::string singles = "+-/*%~[](){}><=.:|,;";
    if (singles.find(c) == std::string::npos) {
      fail(p, std::string("unexpected char ") + (static_cast<unsigned char>(c) < 0x80 && c >= 0x20 ? std::string("'") + c + "'" : "byte"));
    }
    if (c == '(' || c == '[' || c == '{') {
      if (balance.size() >= 256) fail(p, "brackets nested too deeply");
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty() || balance.back() != c) fail(p, std::string("unexpected '") + c + "'");
      balance.pop_back();
    }
    push(Tok::Op, p, std::string(1, c));
    return p + 1;
  }

  // Digits with single underscores between them: (\d+_)*\d+
  size_t digits_at(size_t p) const {
    if (p >= s_.size() || !is_digit(s_[p])) return 0;
    size_t q = p;
    while (true) {
      while (q < s_.size() && is_digit(s_[q])) ++q;
      if (q + 1 < s_.size() && s_[q] == '_' && is_digit(s_[q + 1])) {
        ++q;
        continue;
      }
      return q - p;
    }
  }

  static std::string strip_underscores(std::string_view t) {
    std::string out;
    for (const char c : t)
      if (c != '_') out += c;
    return out;
  }

  size_t lex_number(size_t p) {
    const size_t n = digits_at(p);
    size_t q = p + n;
    // Float: digits ((. digits)? e[+-]? digits | . digits), not right after a '.'.
    const bool after_dot = p > 0 && s_[p - 1] == '.';
    if (!after_dot) {
      size_t f = q;
      bool frac = false;
      if (f < s_.size() && s_[f] == '.' && digits_at(f + 1)) {
        f += 1 + digits_at(f + 1);
        frac = true;
      }
      size_t e = f;
      bool expo = false;
      if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
        size_t g = e + 1;
        if (g < s_.size() && (s_[g] == '+' || s_[g] == '-')) ++g;
        if (const size_t d = digits_at(g)) {
          e = g + d;
          expo = true;
        }
      }
      if (frac || expo) {
        const size_t end = expo ? e : f;
        const std::string text = strip_underscores(std::string_view(s_).substr(p, end - p));
        Token t;
        t.kind = Tok::Float;
        t.fval = std::strtod(text.c_str(), nullptr);
        locate(p, t);
        tokens_.push_back(std::move(t));
        return end;
      }
    }
    // Integer, with 0b / 0o / 0x prefixes as Python allows.
    int base = 10;
    size_t body = p, end = q;
    if (s_[p] == '0' && p + 1 < s_.size()) {
      const char x = static_cast<char>(s_[p + 1] | 0x20);
      if (x == 'b' || x == 'o' || x == 'x') {
        base = x == 'b' ? 2 : x == 'o' ? 8 : 16;
        body = p + 2;
        end = body;
        auto ok = [&](char ch) {
          const int v = ch >= '0' && ch <= '9' ? ch - '0'
                        : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10
                                                                     : 99;
          return v < base;
        };
        while (end < s_.size() && (ok(s_[end]) || (s_[end] == '_' && end + 1 < s_.size() && ok(s_[end + 1])))) ++end;
        if (end == body) {
          body = p;
          end = q;
          base = 10;
        }
      }
    }
    const std::string text = strip_underscores(std::string_view(s_).substr(body, end - body));
    // Python ints have no size limit; past int64 the literal is kept exactly as a BigInt.
    std::optional<BigInt> v;
    try {
      v = BigInt::parse(text, base);
    } catch (const Error& e) {
      fail(p, e.what());
    }
    if (!v) fail(p, "invalid integer literal");
    Token t;
    t.kind = Tok::Int;
    if (v->fits_int64()) {
      t.ival = v->to_int64();
    } else {
      t.big = std::make_shared<const BigInt>(std::move(*v));
    }
    locate(p, t);
    tokens_.push_back(std::move(t));
    return end;
  }

  // A quoted literal, decoded as jinja2 does (Python "unicode-escape" of the source text).
  size_t lex_string(size_t p) {
    const char q = s_[p];
    size_t k = p + 1;
    while (k < s_.size() && s_[k] != q) k += s_[k] == '\\' ? 2 : 1;
    if (k >= s_.size()) fail(p, "unexpected end of string");
    const std::string_view body = std::string_view(s_).substr(p + 1, k - p - 1);
    std::string out;
    for (size_t i = 0; i < body.size(); ++i) {
      const char c = body[i];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i + 1 >= body.size()) fail(p, "invalid escape at end of string");
      const char e = body[++i];
      auto hex = [&](size_t count) -> uint32_t {
        uint32_t v = 0;
        for (size_t n = 0; n < count; ++n) {
          if (i + 1 >= body.size()) fail(p, "truncated \\x/\\u escape in string");
          const char h = static_cast<char>(body[++i] | 0x20);
          if (h >= '0' && h <= '9') {
            v = v * 16 + static_cast<uint32_t>(h - '0');
          } else if (h >= 'a' && h <= 'f') {
            v = v * 16 + static_cast<uint32_t>(h - 'a' + 10);
          } else {
            fail(p, "truncated \\x/\\u escape in string");
          }
        }
        return v;
      };
      auto put = [&](uint32_t cp) {
        if (cp > 0x10FFFF) fail(p, "illegal Unicode character in string");
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        utf8::append(out, cp);
      };
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': put(hex(2)); break;
        case 'u': put(hex(4)); break;
        case 'U': put(hex(8)); break;
        case 'N': fail(p, "\\N{...} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = static_cast<uint32_t>(e - '0');
            for (int n = 0; n < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++n)
              v = v * 8 + static_cast<uint32_t>(body[++i] - '0');
            put(v);
          } else if (static_cast<unsigned char>(e) >= 0x80) {
            // jinja2 encodes the literal with backslashreplace before decoding: "\é" becomes
            // "\\xe9", which decodes to the four characters \xe9.
            const utf8::Step st = utf8::next(body, i);
            const uint32_t cp = st.kind == utf8::StepKind::kValid ? st.cp : static_cast<unsigned char>(e);
            char buf[16];
            if (cp < 0x100) {
              std::snprintf(buf, sizeof buf, "\\x%02x", cp);
            } else if (cp < 0x10000) {
              std::snprintf(buf, sizeof buf, "\\u%04x", cp);
            } else {
              std::snprintf(buf, sizeof buf, "\\U%08x", cp);
            }
            out += buf;
            i += (st.kind == utf8::StepKind::kValid ? st.len : 1) - 1;
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    push(Tok::String, p, std::move(out));
    return k + 1;
  }

  std::string s_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) {
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace pagoda::jinja

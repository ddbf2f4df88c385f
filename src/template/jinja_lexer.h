// Splits a template into tokens the way jinja2's lexer does with trim_blocks=True and
// lstrip_blocks=True: newlines normalised to "\n" and one trailing newline dropped
// (keep_trailing_newline=False), "-"/"+" whitespace control on every tag, comments dropped, raw
// blocks kept as text, and the inside of {{ }} / {% %} cut into expression tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja_bigint.h"

namespace pagoda::jinja {

enum class Tok : uint8_t {
  Data,        // template text (already stripped as whitespace control says)
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // text holds the decoded literal
  Int,
  Float,
  Op,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { } ;
  End,
};

struct Token {
  Tok kind = Tok::End;
  std::string text;
  int64_t ival = 0;
  std::shared_ptr<const BigInt> big;  // an Int literal beyond int64 (then ival is unused)
  double fval = 0;
  int line = 1;
  int col = 1;
};

// Throws pagoda::Error("chat template syntax error at line L, column C: ...") on bad input.
std::vector<Token> lex(std::string_view source);

// "chat template syntax error at line L, column C: what"
[[noreturn]] void syntax_error(int line, int col, const std::string& what);

}  // namespace pagoda::jinja

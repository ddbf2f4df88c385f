// The parser's class, shared by jinja_parser.cpp (statements) and jinja_parse_expr.cpp
// (expressions). Internal to the template interpreter.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "template/jinja_ast.h"
#include "template/jinja_builtins.h"
#include "template/jinja_lexer.h"

namespace pagoda::jinja::detail {

constexpr int kMaxDepth = 200;       // nesting of statements and parenthesised expressions
constexpr int kMaxExprDepth = 400;   // depth of an expression tree (operator and filter chains)

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body run() {
    Body body = subparse({});
    if (cur().kind != Tok::End) fail("unexpected '" + describe(cur()) + "'");
    return body;
  }

 private:
  // --- token stream ---
  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(p_ + n, t_.size() - 1)]; }
  void advance() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  bool is_op(const char* op) const { return cur().kind == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    advance();
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::Data: return "template data";
      case Tok::VarBegin: return "begin of print statement";
      case Tok::VarEnd: return "end of print statement";
      case Tok::BlockBegin: return "begin of statement block";
      case Tok::BlockEnd: return "end of statement block";
      case Tok::End: return "end of template";
      case Tok::String: return "string";
      case Tok::Int: return "integer";
      case Tok::Float: return "float";
      default: return t.text;
    }
  }
  [[noreturn]] void fail(const std::string& what) const { syntax_error(cur().line, cur().col, what); }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail(std::string("expected '") + op + "', got '" + describe(cur()) + "'");
  }
  std::string expect_name() {
    if (cur().kind != Tok::Name) fail("expected a name, got '" + describe(cur()) + "'");
    std::string n = cur().text;
    advance();
    return n;
  }
  void expect_block_end() {
    if (cur().kind != Tok::BlockEnd) fail("expected end of statement block, got '" + describe(cur()) + "'");
    advance();
  }

  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxDepth) parser.fail("template nested too deeply");
    }
    ~DepthGuard() { --parser.depth_; }
    Parser& parser;
  };

  // Records the depth of a finished node and refuses trees too deep to evaluate recursively.
  ExprPtr seal(ExprPtr e) const {
    int d = 0;
    for (const ExprPtr& a : e->args)
      if (a) d = std::max(d, a->depth);
    for (const auto& kv : e->kwargs) d = std::max(d, kv.second->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) syntax_error(e->line, e->col, "expression nested too deeply");
    return e;
  }

  ExprPtr node(ExprKind kind, const Token& at) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  // --- statements ---
  // Parses until a block whose tag is one of `ends` (left unconsumed: cur() is its name) or the
  // end of the template.
  Body subparse(std::initializer_list<const char*> ends);
  // cur() is the name of an end tag: consume it and its %}.
  void end_tag();
  StmtPtr parse_statement();
  // A name, or names separated by commas (optionally in parentheses), up to `stop`.
  void parse_targets(Stmt& s, const char* stop);
  // `| f | g(x)` after a block set; `f | g(x)` (the first without a pipe) after {% filter %}.
  void parse_filter_chain(Stmt& s, bool first_inline);

  // --- expressions ---
  bool tuple_end(std::initializer_list<const char*> extra) const;
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra, bool explicit_parens);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr binary(const Token& at, const std::string& op, ExprPtr a, ExprPtr b);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj);
  // An index or a slice (as a Slice node whose args are start, stop, step).
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  ExprPtr parse_filter(ExprPtr subject);
  ExprPtr parse_test(ExprPtr subject);

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  bool saw_varargs_ = false;
  bool saw_kwargs_ = false;
};

}  // namespace pagoda::jinja::detail

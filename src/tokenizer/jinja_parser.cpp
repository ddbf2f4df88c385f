#include "tokenizer/jinja_parser.h"

#include <initializer_list>

#include "core/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_lexer.h"

namespace pagoda::jinja {
namespace {

constexpr int kMaxDepth = 200;  // nesting of statements and expressions

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
  Body subparse(std::initializer_list<const char*> ends) {
    DepthGuard guard(*this);
    Body body;
    while (cur().kind != Tok::End) {
      const Token& t = cur();
      if (t.kind == Tok::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.kind == Tok::VarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Emit;
        s->line = t.line;
        s->col = t.col;
        advance();
        s->expr = parse_tuple(true, {}, false);
        if (cur().kind != Tok::VarEnd) fail("expected end of print statement, got '" + describe(cur()) + "'");
        advance();
        body.push_back(std::move(s));
      } else if (t.kind == Tok::BlockBegin) {
        advance();
        if (cur().kind != Tok::Name) fail("tag name expected");
        for (const char* e : ends)
          if (cur().text == e) return body;
        body.push_back(parse_statement());
      } else {
        fail("unexpected '" + describe(t) + "'");
      }
    }
    if (ends.size() != 0) {
      std::string want;
      for (const char* e : ends) want += std::string(want.empty() ? "" : " or ") + "'" + e + "'";
      fail("unexpected end of template, expected " + want);
    }
    return body;
  }

  // cur() is the name of an end tag: consume it and its %}.
  void end_tag() {
    advance();
    expect_block_end();
  }

  StmtPtr parse_statement() {
    const Token tag = cur();
    auto s = std::make_unique<Stmt>();
    s->line = tag.line;
    s->col = tag.col;
    const std::string& n = tag.text;
    advance();
    if (n == "if") {
      s->kind = StmtKind::If;
      while (true) {
        s->conds.push_back(parse_tuple(false, {}, false));
        expect_block_end();
        s->bodies.push_back(subparse({"elif", "else", "endif"}));
        if (is_name("elif")) {
          advance();
          continue;
        }
        if (is_name("else")) {
          end_tag();
          s->bodies.push_back(subparse({"endif"}));
        }
        end_tag();
        break;
      }
    } else if (n == "for") {
      s->kind = StmtKind::For;
      parse_targets(*s, "in");
      if (!skip_name("in")) fail("expected 'in', got '" + describe(cur()) + "'");
      s->expr = parse_tuple(false, {"recursive"}, false);
      if (skip_name("if")) s->cond = parse_expression(true);
      if (is_name("recursive")) fail("recursive loops are not supported");
      expect_block_end();
      ++loop_depth_;
      s->bodies.push_back(subparse({"endfor", "else"}));
      --loop_depth_;
      if (is_name("else")) {
        end_tag();
        s->bodies.push_back(subparse({"endfor"}));
      }
      end_tag();
    } else if (n == "set") {
      if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == ".") {
        s->kind = StmtKind::SetAttr;
        s->targets.push_back(expect_name());
        advance();
        s->text = expect_name();
        expect_op("=");
        s->expr = parse_tuple(true, {}, false);
        expect_block_end();
      } else {
        parse_targets(*s, "=");
        if (skip_op("=")) {
          s->kind = StmtKind::Set;
          s->expr = parse_tuple(true, {}, false);
          expect_block_end();
        } else {
          if (s->unpack) fail("a block set needs a single name");
          s->kind = StmtKind::SetBlock;
          parse_filter_chain(*s);
          expect_block_end();
          s->bodies.push_back(subparse({"endset"}));
          end_tag();
        }
      }
    } else if (n == "macro") {
      s->kind = StmtKind::Macro;
      s->text = expect_name();
      expect_op("(");
      while (!is_op(")")) {
        if (!s->params.empty()) expect_op(",");
        if (is_op(")")) break;
        Param prm;
        prm.name = expect_name();
        if (skip_op("=")) prm.default_value = parse_expression(true);
        s->params.push_back(std::move(prm));
      }
      expect_op(")");
      expect_block_end();
      const int saved_loops = loop_depth_;
      const bool saved_va = saw_varargs_, saved_kw = saw_kwargs_;
      loop_depth_ = 0;
      saw_varargs_ = saw_kwargs_ = false;
      s->bodies.push_back(subparse({"endmacro"}));
      s->uses_varargs = saw_varargs_;
      s->uses_kwargs = saw_kwargs_;
      loop_depth_ = saved_loops;
      saw_varargs_ = saved_va || saw_varargs_;
      saw_kwargs_ = saved_kw || saw_kwargs_;
      end_tag();
    } else if (n == "filter") {
      s->kind = StmtKind::FilterBlock;
      parse_filter_chain(*s);
      if (s->filters.empty()) fail("expected a filter name");
      expect_block_end();
      s->bodies.push_back(subparse({"endfilter"}));
      end_tag();
    } else if (n == "with") {
      s->kind = StmtKind::With;
      while (cur().kind != Tok::BlockEnd) {
        if (!s->targets.empty()) expect_op(",");
        s->targets.push_back(expect_name());
        expect_op("=");
        s->with_values.push_back(parse_expression(true));
      }
      expect_block_end();
      s->bodies.push_back(subparse({"endwith"}));
      end_tag();
    } else if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) syntax_error(tag.line, tag.col, "'" + n + "' outside loop");
      s->kind = n == "break" ? StmtKind::Break : StmtKind::Continue;
      expect_block_end();
    } else if (n == "generation") {
      s->kind = StmtKind::Block;
      expect_block_end();
      s->bodies.push_back(subparse({"endgeneration"}));
      end_tag();
    } else {
      syntax_error(tag.line, tag.col, "Encountered unknown tag '" + n + "'.");
    }
    return s;
  }

  // A name, or names separated by commas (optionally in parentheses), up to `stop`.
  void parse_targets(Stmt& s, const char* stop) {
    const bool paren = skip_op("(");
    while (true) {
      s.targets.push_back(expect_name());
      if (!skip_op(",")) break;
      s.unpack = true;
      if ((cur().kind == Tok::Name && cur().text == stop) || is_op(stop) || is_op(")")) break;
    }
    if (paren) {
      expect_op(")");
      s.unpack = true;
    }
  }

  void parse_filter_chain(Stmt& s) {
    while (skip_op("|")) s.filters.push_back(parse_filter(nullptr));
  }

  // --- expressions ---
  bool tuple_end(std::initializer_list<const char*> extra) const {
    if (cur().kind == Tok::VarEnd || cur().kind == Tok::BlockEnd || cur().kind == Tok::End || is_op(")"))
      return true;
    for (const char* e : extra)
      if (cur().kind == Tok::Name && cur().text == e) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra, bool explicit_parens) {
    const Token start = cur();
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (tuple_end(extra)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("Expected an expression, got '" + describe(cur()) + "'");
    }
    auto e = node(ExprKind::Tuple, start);
    e->args = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    if (!with_condexpr) return parse_or();
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const Token at = cur();
      advance();
      auto c = node(ExprKind::CondExpr, at);
      c->args.push_back(parse_or());
      c->args.push_back(std::move(e));
      if (skip_name("else")) {
        c->args.push_back(parse_expression(true));
      } else {
        c->args.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const Token& at, const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = node(ExprKind::Binary, at);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Token at = cur();
      advance();
      e = binary(at, "or", std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Token at = cur();
      advance();
      e = binary(at, "and", std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      const Token at = cur();
      advance();
      auto e = node(ExprKind::Not, at);
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token at = cur();
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().kind == Tok::Op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().kind == Tok::Name && peek().text == "in") {
        op = "notin";
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(ExprKind::Compare, at);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token at = cur();
      advance();
      e = binary(at, at.text, std::move(e), parse_concat());
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const Token at = cur();
      advance();
      e = binary(at, "~", std::move(e), parse_math2());
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token at = cur();
      advance();
      e = binary(at, at.text, std::move(e), parse_pow());
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const Token at = cur();
      advance();
      e = binary(at, "**", std::move(e), parse_unary(true));
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    const Token at = cur();
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      advance();
      e = node(at.text == "-" ? ExprKind::Neg : ExprKind::Pos, at);
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token at = cur();
    switch (at.kind) {
      case Tok::Name: {
        advance();
        auto e = node(ExprKind::Literal, at);
        if (at.text == "true" || at.text == "True") {
          e->value = Value::boolean(true);
        } else if (at.text == "false" || at.text == "False") {
          e->value = Value::boolean(false);
        } else if (at.text == "none" || at.text == "None") {
          e->value = Value::none();
        } else {
          e->kind = ExprKind::Name;
          e->name = at.text;
          if (at.text == "varargs") saw_varargs_ = true;
          if (at.text == "kwargs") saw_kwargs_ = true;
        }
        return e;
      }
      case Tok::String: {
        std::string s;
        while (cur().kind == Tok::String) {  // adjacent literals concatenate
          s += cur().text;
          advance();
        }
        auto e = node(ExprKind::Literal, at);
        e->value = Value::string(std::move(s));
        return e;
      }
      case Tok::Int: {
        advance();
        auto e = node(ExprKind::Literal, at);
        e->value = Value::integer(at.ival);
        return e;
      }
      case Tok::Float: {
        advance();
        auto e = node(ExprKind::Literal, at);
        e->value = Value::real(at.fval);
        return e;
      }
      default: break;
    }
    if (skip_op("(")) {
      ExprPtr e = parse_tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto e = node(ExprKind::List, at);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (skip_op("{")) {
      auto e = node(ExprKind::DictLit, at);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    fail("unexpected '" + describe(at) + "'");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        advance();
        e = parse_filter(std::move(e));
      } else if (is_name("is")) {
        e = parse_test(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Token at = cur();
    if (skip_op(".")) {
      if (cur().kind == Tok::Name) {
        auto e = node(ExprKind::Getattr, at);
        e->name = cur().text;
        advance();
        e->args.push_back(std::move(obj));
        return e;
      }
      if (cur().kind != Tok::Int) fail("expected name or number");
      auto e = node(ExprKind::Getitem, at);
      e->args.push_back(std::move(obj));
      auto idx = node(ExprKind::Literal, cur());
      idx->value = Value::integer(cur().ival);
      advance();
      e->args.push_back(std::move(idx));
      return e;
    }
    expect_op("[");
    std::vector<ExprPtr> subs;
    while (!is_op("]")) {
      if (!subs.empty()) {
        expect_op(",");
        if (is_op("]")) break;
      }
      subs.push_back(parse_subscribed());
    }
    expect_op("]");
    if (subs.empty()) fail("expected subscript expression");
    ExprPtr index;
    if (subs.size() == 1) {
      index = std::move(subs[0]);
    } else {
      index = node(ExprKind::Tuple, at);
      index->args = std::move(subs);
    }
    if (index->kind == ExprKind::Slice) {
      index->args.insert(index->args.begin(), std::move(obj));
      return index;
    }
    auto e = node(ExprKind::Getitem, at);
    e->args.push_back(std::move(obj));
    e->args.push_back(std::move(index));
    return e;
  }

  // An index or a slice (as a Slice node whose args are start, stop, step).
  ExprPtr parse_subscribed() {
    const Token at = cur();
    std::vector<ExprPtr> parts;
    if (skip_op(":")) {
      parts.push_back(nullptr);
    } else {
      ExprPtr e = parse_expression(true);
      if (!skip_op(":")) return e;
      parts.push_back(std::move(e));
    }
    if (is_op(":") || is_op("]") || is_op(",")) {
      parts.push_back(nullptr);
    } else {
      parts.push_back(parse_expression(true));
    }
    if (skip_op(":")) {
      if (is_op("]") || is_op(",")) {
        parts.push_back(nullptr);
      } else {
        parts.push_back(parse_expression(true));
      }
    } else {
      parts.push_back(nullptr);
    }
    auto s = node(ExprKind::Slice, at);
    s->args = std::move(parts);
    return s;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (cur().kind == Tok::Name && peek().kind == Tok::Op && peek().text == "=") {
        std::string key = cur().text;
        advance();
        advance();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("invalid syntax for function call expression");
        e.args.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = node(ExprKind::Call, cur());
    e->args.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (skip_op(".")) n += "." + expect_name();
    return n;
  }

  ExprPtr parse_filter(ExprPtr subject) {
    const Token at = cur();
    auto e = node(ExprKind::Filter, at);
    e->name = dotted_name();
    if (!has_filter(e->name)) syntax_error(at.line, at.col, "No filter named '" + e->name + "'.");
    e->args.push_back(std::move(subject));
    if (is_op("(")) parse_call_args(*e);
    return e;
  }

  ExprPtr parse_test(ExprPtr subject) {
    const Token at = cur();
    advance();  // "is"
    const bool negated = skip_name("not");
    const Token name_at = cur();
    auto e = node(ExprKind::Test, at);
    e->name = dotted_name();
    if (!has_test(e->name)) syntax_error(name_at.line, name_at.col, "No test named '" + e->name + "'.");
    e->args.push_back(std::move(subject));
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((cur().kind == Tok::Name || cur().kind == Tok::String || cur().kind == Tok::Int ||
                cur().kind == Tok::Float || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      e->args.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return e;
    auto n = node(ExprKind::Not, at);
    n->args.push_back(std::move(e));
    return n;
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  bool saw_varargs_ = false;
  bool saw_kwargs_ = false;
};

}  // namespace

Body parse(std::string_view source) { return Parser(lex(source)).run(); }

}  // namespace pagoda::jinja

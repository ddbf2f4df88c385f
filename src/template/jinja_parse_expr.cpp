// Expression parsing: jinja2's precedence climbing (condexpr, or, and, not, compare, + -, ~,
// * / // %, **, unary, postfix, filters and tests).
#include "template/jinja_parser_impl.h"

namespace pagoda::jinja::detail {

bool Parser::tuple_end(std::initializer_list<const char*> extra) const {
  if (cur().kind == Tok::VarEnd || cur().kind == Tok::BlockEnd || cur().kind == Tok::End || is_op(")"))
    return true;
  for (const char* e : extra)
    if (cur().kind == Tok::Name && cur().text == e) return true;
  return false;
}

ExprPtr Parser::parse_tuple(bool with_condexpr, std::initializer_list<const char*> extra, bool explicit_parens) {
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
  return seal(std::move(e));
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
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
    e = seal(std::move(c));
  }
  return e;
}

ExprPtr Parser::binary(const Token& at, const std::string& op, ExprPtr a, ExprPtr b) {
  auto e = node(ExprKind::Binary, at);
  e->name = op;
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return seal(std::move(e));
}

ExprPtr Parser::parse_or() {
  ExprPtr e = parse_and();
  while (is_name("or")) {
    const Token at = cur();
    advance();
    e = binary(at, "or", std::move(e), parse_and());
  }
  return e;
}

ExprPtr Parser::parse_and() {
  ExprPtr e = parse_not();
  while (is_name("and")) {
    const Token at = cur();
    advance();
    e = binary(at, "and", std::move(e), parse_not());
  }
  return e;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    const Token at = cur();
    advance();
    auto e = node(ExprKind::Not, at);
    e->args.push_back(parse_not());
    return seal(std::move(e));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
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
  return cmp ? seal(std::move(cmp)) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  ExprPtr e = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token at = cur();
    advance();
    e = binary(at, at.text, std::move(e), parse_concat());
  }
  return e;
}

ExprPtr Parser::parse_concat() {
  ExprPtr e = parse_math2();
  while (is_op("~")) {
    const Token at = cur();
    advance();
    e = binary(at, "~", std::move(e), parse_math2());
  }
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr e = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token at = cur();
    advance();
    e = binary(at, at.text, std::move(e), parse_pow());
  }
  return e;
}

ExprPtr Parser::parse_pow() {
  ExprPtr e = parse_unary(true);
  while (is_op("**")) {
    const Token at = cur();
    advance();
    e = binary(at, "**", std::move(e), parse_unary(true));
  }
  return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  const Token at = cur();
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    advance();
    e = node(at.text == "-" ? ExprKind::Neg : ExprKind::Pos, at);
    e->args.push_back(parse_unary(false));
    e = seal(std::move(e));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
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
      e->value = at.big ? Value::integer(*at.big) : Value::integer(at.ival);
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
    return seal(std::move(e));
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
    return seal(std::move(e));
  }
  fail("unexpected '" + describe(at) + "'");
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
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

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
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

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  const Token at = cur();
  if (skip_op(".")) {
    if (cur().kind == Tok::Name) {
      auto e = node(ExprKind::Getattr, at);
      e->name = cur().text;
      advance();
      e->args.push_back(std::move(obj));
      return seal(std::move(e));
    }
    if (cur().kind != Tok::Int) fail("expected name or number");
    auto e = node(ExprKind::Getitem, at);
    e->args.push_back(std::move(obj));
    auto idx = node(ExprKind::Literal, cur());
    idx->value = cur().big ? Value::integer(*cur().big) : Value::integer(cur().ival);
    advance();
    e->args.push_back(std::move(idx));
    return seal(std::move(e));
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
    // A tuple of slices (numpy's x[1:2, 3]) indexes nothing in Jinja, and a Slice node carries its
    // object only at the top of a subscript.
    for (const ExprPtr& s : subs)
      if (s->kind == ExprKind::Slice) fail("a slice cannot be one of several subscripts");
    index = node(ExprKind::Tuple, at);
    index->args = std::move(subs);
    index = seal(std::move(index));
  }
  if (index->kind == ExprKind::Slice) {
    index->args.insert(index->args.begin(), std::move(obj));
    return seal(std::move(index));
  }
  auto e = node(ExprKind::Getitem, at);
  e->args.push_back(std::move(obj));
  e->args.push_back(std::move(index));
  return seal(std::move(e));
}

ExprPtr Parser::parse_subscribed() {
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
  return seal(std::move(s));
}

void Parser::parse_call_args(Expr& e) {
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

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = node(ExprKind::Call, cur());
  e->args.push_back(std::move(callee));
  parse_call_args(*e);
  return seal(std::move(e));
}

std::string Parser::dotted_name() {
  std::string n = expect_name();
  while (skip_op(".")) {
    n += '.';
    n += expect_name();
  }
  return n;
}

ExprPtr Parser::parse_filter(ExprPtr subject) {
  const Token at = cur();
  auto e = node(ExprKind::Filter, at);
  e->name = dotted_name();
  if (!has_filter(e->name)) syntax_error(at.line, at.col, "No filter named '" + e->name + "'.");
  e->args.push_back(std::move(subject));
  if (is_op("(")) parse_call_args(*e);
  return seal(std::move(e));
}

ExprPtr Parser::parse_test(ExprPtr subject) {
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
  e = seal(std::move(e));
  if (!negated) return e;
  auto n = node(ExprKind::Not, at);
  n->args.push_back(std::move(e));
  return seal(std::move(n));
}

}  // namespace pagoda::jinja::detail

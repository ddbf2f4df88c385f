#include "template/jinja_parser.h"

#include "template/jinja_parser_impl.h"

namespace pagoda::jinja {
namespace detail {

Body Parser::subparse(std::initializer_list<const char*> ends) {
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

void Parser::end_tag() {
  advance();
  expect_block_end();
}

StmtPtr Parser::parse_statement() {
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
        parse_filter_chain(*s, false);
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
    parse_filter_chain(*s, true);
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

void Parser::parse_targets(Stmt& s, const char* stop) {
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

void Parser::parse_filter_chain(Stmt& s, bool first_inline) {
  if (first_inline) s.filters.push_back(parse_filter(nullptr));
  while (skip_op("|")) s.filters.push_back(parse_filter(nullptr));
}

}  // namespace detail


Body parse(std::string_view source) { return detail::Parser(lex(source)).run(); }

}  // namespace pagoda::jinja

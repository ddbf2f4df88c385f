// The chat-template interpreter against Python jinja2 as transformers sets it up: the real Qwen3
// and DeepSeek-V3 templates over many conversations and small feature templates (fixtures written
// by tools/chat_template_reference.py), compared byte for byte; then null content, integers beyond
// 64 bits, syntax errors, undefined values, raise_exception, template loading and the resource
// limits (nesting of request data and of template-built values included).
#include "template/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

using nlohmann::ordered_json;

const std::string kRoot = PAGODA_SOURCE_DIR;
const std::string kQwen3Dir = kRoot + "/tests/data/qwen3-tokenizer";
const std::string kFixtures = kRoot + "/tests/fixtures/chat_templates";

ordered_json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path << " is missing: run tools/chat_template_reference.py";
  if (!in) return ordered_json::array();
  return ordered_json::parse(in);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path << " is missing";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fixture case: the render, or the error jinja2 raised (raise_exception's message alone; other
// Python exceptions after our "chat template error at line N: " prefix).
void expect_render(const ChatTemplate& tmpl, const ordered_json& c) {
  if (!c.contains("error")) {
    std::string got;
    ASSERT_NO_THROW(got = tmpl.render(c["context"]));
    EXPECT_EQ(got, c["render"].get<std::string>());
    return;
  }
  try {
    tmpl.render(c["context"]);
    ADD_FAILURE() << "expected an error: " << c["error"];
  } catch (const Error& e) {
    const std::string msg = e.what(), want = c["error"].get<std::string>();
    if (c.contains("error_type")) {
      EXPECT_EQ(msg.rfind("chat template error at line ", 0), 0u) << msg;
      EXPECT_EQ(msg.substr(msg.find(": ") + 2), want);
    } else {
      EXPECT_EQ(msg, "chat template: " + want);
    }
  }
}

std::string render(const std::string& source, const ordered_json& context = ordered_json::object()) {
  return ChatTemplate(source).render(context);
}

std::string error_of(const std::string& source, const ordered_json& context = ordered_json::object()) {
  try {
    ChatTemplate(source).render(context);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ChatTemplate, Qwen3MatchesJinja2) {
  // A missing download must fail, not skip: the data is part of the test setup.
  ASSERT_TRUE(std::filesystem::exists(kQwen3Dir + "/tokenizer_config.json"))
      << kQwen3Dir << "/tokenizer_config.json is missing: run tools/fetch_test_data.sh";
  const std::optional<ChatTemplate> tmpl = ChatTemplate::load_dir(kQwen3Dir);
  ASSERT_TRUE(tmpl.has_value());
  const ordered_json cases = read_json(kFixtures + "/qwen3_renders.json");
  ASSERT_GE(cases.size(), 25u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::string got;
    ASSERT_NO_THROW(got = tmpl->render(c["context"]));
    EXPECT_EQ(got, c["render"].get<std::string>());
  }
}

TEST(ChatTemplate, FeatureTemplatesMatchJinja2) {
  const ordered_json cases = read_json(kFixtures + "/feature_renders.json");
  ASSERT_GE(cases.size(), 3u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const ChatTemplate tmpl(c["template"].get<std::string>());
    expect_render(tmpl, c);
  }
}

TEST(ChatTemplate, DeepSeekV3MatchesJinja2) {
  // The real template (fixture, see tests/fixtures/chat_templates/README.md) over tool-call
  // conversations given straight; the request-level cases of this fixture are in
  // tests/server/openai_request_test.cpp.
  const ChatTemplate tmpl(read_text(kFixtures + "/deepseek_v3.jinja"));
  const ordered_json cases = read_json(kFixtures + "/deepseek_v3_renders.json");
  size_t direct = 0;
  for (const auto& c : cases) {
    if (c.contains("request")) continue;
    SCOPED_TRACE(c["name"].get<std::string>());
    expect_render(tmpl, c);
    ++direct;
  }
  EXPECT_GE(direct, 5u);
}

TEST(ChatTemplate, NullContentIsNone) {
  // jinja2: a None value is `none`, is defined, prints as "None"; "" is a string; a missing key is
  // undefined. DeepSeek-V3's template renders an assistant's tool calls only on `content is none`.
  const std::string source =
      "{% for m in messages %}{% if m.content is none %}N{% elif m.content is string %}S{% else %}U{% endif %}"
      "{{ m.content is defined }}{{ m.content }}{% if m.tool_calls %}:{{ m.tool_calls[0].function.name }}{% endif %};{% endfor %}";
  const ordered_json ctx = ordered_json::parse(R"({"messages": [
      {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]},
      {"role": "assistant", "content": ""}, {"role": "assistant"}]})");
  EXPECT_EQ(render(source, ctx), "NTrueNone:f;STrue;UFalse;");
}

TEST(ChatTemplate, RequestDataNestedTooDeeplyIsAnError) {
  // Built directly (no parser in between to refuse it); the conversion to template values must
  // stop with an error rather than recurse 20,000 levels.
  ordered_json deep = ordered_json::array();
  for (int i = 0; i < 20000; ++i) {
    ordered_json outer = ordered_json::array();
    outer.push_back(std::move(deep));
    deep = std::move(outer);
  }
  EXPECT_THROW(jinja::Value::from_json(deep), Error);
  ordered_json ctx = ordered_json::object();
  ctx["messages"] = std::move(deep);
  const std::string msg = error_of("{{ messages|length }}", ctx);
  EXPECT_NE(msg.find("nested too deeply"), std::string::npos) << msg;
  // 128 levels are fine, 129 are not.
  ordered_json ok = ordered_json::array();
  for (int i = 1; i < 128; ++i) ok = ordered_json::array({std::move(ok)});
  EXPECT_EQ(jinja::Value::from_json(ok).depth, 128u);
  EXPECT_THROW(jinja::Value::from_json(ordered_json::array({std::move(ok)})), Error);
}

TEST(ChatTemplate, TemplateBuiltNestingIsBounded) {
  // A template can nest values itself, one level per loop turn; printing, comparing or freeing
  // such a value would recurse as deep, so building past the bound is an error.
  EXPECT_NE(error_of("{% set ns = namespace(x=[]) %}{% for i in range(2000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}")
                .find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(x=none) %}{% for i in range(2000) %}{% set ns.x = namespace(n=ns.x) %}{% endfor %}")
                .find("nested too deeply"),
            std::string::npos);
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(3) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}"),
            "[[[[]]]]");
}

TEST(ChatTemplate, IntegersBeyond64Bits) {
  // Expected values are Python's (see also the big_integers feature fixture).
  EXPECT_EQ(render("{{ 99999999999999999999 }} {{ 99999999999999999999 + 1 }} {{ -99999999999999999999 < -(2 ** 64) }}"),
            "99999999999999999999 100000000000000000000 True");
  EXPECT_EQ(render("{{ 2 ** 200 // 3 ** 100 }} {{ 2 ** 200 % 3 ** 100 }} {{ -(2 ** 200) // 3 ** 100 }}"),
            "3117982410207 485474658062875558680597653734966805650575837169 -3117982410208");
  EXPECT_EQ(render("{{ 2 ** 200 / 3 ** 100 }} {{ 1 / 3 ** 100 }}"), "3117982410207.942 1.9403252174826328e-48");
  ordered_json data = {{"u", 18446744073709551615ull}, {"i", INT64_MIN}};
  EXPECT_EQ(render("{{ u }} {{ u|tojson }} {{ [u]|tojson }} {{ u * 2 }} {{ i - 1 }} {{ -i }}", data),
            "18446744073709551615 18446744073709551615 [18446744073709551615] 36893488147419103230 "
            "-9223372036854775809 9223372036854775808");
  // Past Python's 4300-digit limit for printing an int: an error, never another value.
  EXPECT_NE(error_of("{{ 10 ** 5000 }}").find("4300 digits"), std::string::npos);
  EXPECT_NE(error_of("{{ 1" + std::string(4400, '0') + " }}").find("4300 digits"), std::string::npos);
  EXPECT_NE(error_of("{{ 10 ** 400 * 1.0 }}").find("int too large to convert to float"), std::string::npos);
  EXPECT_EQ(render("{{ 2 ** 100 * 1e300 }}"), "inf");  // float overflow is inf in Python, not an error
  EXPECT_NE(error_of("{{ range(2 ** 64) }}").find("beyond 64 bits"), std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 2 ** 64 }}").find("beyond 64 bits"), std::string::npos);
}

TEST(ChatTemplate, WhitespaceControlAsJinja2) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indentation before one.
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n"), "  x\n");
  EXPECT_EQ(render("a  {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(render("a {#- note -#} b{# c #}\nd"), "abd");
  EXPECT_EQ(render("x\n    {%+ if true %}y{% endif %}"), "x\n    y");
  EXPECT_EQ(render("{% raw %}{{ kept }}{% endraw %}"), "{{ kept }}");
  EXPECT_EQ(render("line\r\nnext\n"), "line\nnext");  // newlines normalised, one trailing dropped
}

TEST(ChatTemplate, PythonSemantics) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.5] }}{{ (1,) }}{{ {'k': 'v'} }}"), "[1, 'a', None, True, 1.5](1,){'k': 'v'}");
  EXPECT_EQ(render("{{ 1e16 }} {{ 1e15 }} {{ 0.1 + 0.2 }} {{ 7 // -2 }} {{ -7 % 3 }} {{ 2 ** 3 ** 2 }}"),
            "1e+16 1000000000000000.0 0.30000000000000004 -4 2 64");
  EXPECT_EQ(render("{{ 'héllo'[1:3] }}{{ 'abc'[::-1] }}{{ 'héllo'|length }}"), "élcba5");
  EXPECT_EQ(render("{{ none or 'x' }}{{ 0 and 1 }}{{ 'a' ~ 1 ~ none }}"), "x0a1None");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 'é'}|tojson }}"), "{\"b\": 1, \"a\": \"é\"}");
  EXPECT_EQ(render("{% for i in range(9) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"), "024");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  // A set inside a loop stays in that iteration, as in jinja2.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [5] %}{% set x = i %}{% endfor %}{{ x }}"), "1");
}

TEST(ChatTemplate, UndefinedBehavesAsJinja2DefaultUndefined) {
  EXPECT_EQ(render("[{{ missing }}]"), "[]");
  EXPECT_EQ(render("{{ missing is defined }}{{ missing is undefined }}{{ missing|default('d') }}"), "FalseTrued");
  EXPECT_EQ(render("{% for x in missing %}x{% endfor %}{{ missing|length }}{% if not missing %}falsy{% endif %}"), "0falsy");
  ordered_json ctx = {{"m", {{"role", "user"}}}};
  EXPECT_EQ(render("[{{ m.content }}]{{ m.content is defined }}", ctx), "[]False");
  // Using an undefined value beyond printing and testing raises, as jinja2's UndefinedError does.
  EXPECT_NE(error_of("{{ missing.attr }}").find("'missing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ m.content.strip() }}", ctx).find("'dict object' has no attribute 'content'"), std::string::npos);
  EXPECT_NE(error_of("{{ missing + 1 }}").find("'missing' is undefined"), std::string::npos);
  // The sandbox refuses to mutate lists and dicts.
  EXPECT_NE(error_of("{{ [1].append(2) }}").find("unsafe"), std::string::npos);
}

TEST(ChatTemplate, RaiseException) {
  EXPECT_EQ(error_of("a{{ raise_exception('Roles must alternate') }}"), "chat template: Roles must alternate");
  EXPECT_EQ(error_of("{% if true %}{{ raise_exception('x' ~ 1) }}{% endif %}"), "chat template: x1");
}

TEST(ChatTemplate, SyntaxErrorsCarryPositions) {
  auto syntax_error = [](const std::string& source) {
    try {
      ChatTemplate t(source);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(syntax_error("ok\n{{ 1 + }}"), "chat template syntax error at line 2, column 8: unexpected 'end of print statement'");
  EXPECT_NE(syntax_error("{% if x %}never closed").find("unexpected end of template, expected 'elif' or 'else' or 'endif'"), std::string::npos);
  EXPECT_EQ(syntax_error("a\n  {% frobnicate %}"), "chat template syntax error at line 2, column 6: Encountered unknown tag 'frobnicate'.");
  EXPECT_EQ(syntax_error("{{ x | nosuch }}"), "chat template syntax error at line 1, column 8: No filter named 'nosuch'.");
  EXPECT_EQ(syntax_error("{{ x is nosuch }}"), "chat template syntax error at line 1, column 9: No test named 'nosuch'.");
  EXPECT_EQ(syntax_error("{% break %}"), "chat template syntax error at line 1, column 4: 'break' outside loop");
  EXPECT_NE(syntax_error("{{ 'unterminated }}").find("line 1, column 4: unexpected end of string"), std::string::npos);
  EXPECT_NE(syntax_error("{# no end").find("missing end of comment tag"), std::string::npos);
  EXPECT_NE(syntax_error("{{ a ]").find("unexpected ']'"), std::string::npos);
  // Found by the fuzzer: a slice among several subscripts was evaluated without its object.
  EXPECT_NE(syntax_error("{{ s[:, 1] }}").find("a slice cannot be one of several subscripts"), std::string::npos);
  EXPECT_NE(syntax_error("{{ s[0, ::2] }}").find("a slice cannot be one of several subscripts"), std::string::npos);
}

TEST(ChatTemplate, LimitsStopRunawayTemplates) {
  jinja::Limits small;
  small.max_steps = 100000;
  const ChatTemplate loops("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_THROW(loops.render(ordered_json::object(), small), Error);
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nested too deeply"), std::string::npos);
  EXPECT_NE(error_of("{{ range(1000000)|length }}").find("MAX_RANGE"), std::string::npos);
  EXPECT_THROW(render("{{ 'x' * 100000000000 }}"), Error);
  EXPECT_THROW(ChatTemplate("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"), Error);
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_THROW(ChatTemplate(chain + " }}"), Error);
  std::string nested;
  for (int i = 0; i < 500; ++i) nested += "{% if true %}";
  EXPECT_THROW(ChatTemplate{nested}, Error);
}

TEST(ChatTemplate, LoadDir) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("pagoda_chat_template_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name) << text; };
  EXPECT_FALSE(ChatTemplate::load_dir(dir.string()).has_value());
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_FALSE(ChatTemplate::load_dir(dir.string()).has_value());
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ 1 }}"}]})");
  EXPECT_EQ(ChatTemplate::load_dir(dir.string())->render(ordered_json::object()), "D1");
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"}]})");
  EXPECT_THROW(ChatTemplate::load_dir(dir.string()), Error);
  write("tokenizer_config.json", R"({"chat_template": "S{{ 2 }}"})");
  EXPECT_EQ(ChatTemplate::load_dir(dir.string())->render(ordered_json::object()), "S2");
  write("chat_template.jinja", "J{{ 3 }}\n");
  EXPECT_EQ(ChatTemplate::load_dir(dir.string())->render(ordered_json::object()), "J3");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pagoda

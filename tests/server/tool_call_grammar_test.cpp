// Forced tool calls (tool_choice required / named) in each family's syntax: random walks of the
// grammar on a byte vocabulary are read back by the parser of the same syntax, and every call's
// arguments are checked against its function's parameters by python3-jsonschema.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "server/chat_output_parser.h"
#include "structured/compile.h"
#include "structured/matcher.h"
#include "core/build_paths.h"

namespace pagoda::server {
namespace {

using nlohmann::json;
using structured::Constraint;
using structured::ConstraintKind;

TEST(ToolCallGrammar, EverySyntaxRoundTripsThroughItsParser) {
  const std::vector<std::string> names = {"get_weather", "set_alarm"};
  const std::vector<json> params = {
      json::parse(R"({"type":"object","properties":{"city":{"type":"string","maxLength":8},
        "unit":{"enum":["c","f"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"]})"),
      json::parse(R"({"type":"object","$defs":{"t":{"type":"string","format":"time"}},
        "properties":{"at":{"$ref":"#/$defs/t"},"repeat":{"type":"boolean"},"tags":{"type":"array",
        "items":{"type":"string","maxLength":3},"maxItems":2}},"required":["at","repeat"]})")};
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(1, static_cast<char>(b));
  vocab.emplace_back();
  auto trie = std::make_shared<structured::TokenTrie>(vocab);
  const std::string out_path = ::testing::TempDir() + "/tool_call_grammar.jsonl";
  std::ofstream out(out_path);
  std::mt19937_64 rng(3);
  for (const ToolCallFormat fmt : {ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json, ToolCallFormat::kMistral,
                                   ToolCallFormat::kPythonic}) {
    for (const bool named : {false, true}) {
      Constraint c{ConstraintKind::kToolCalls, "", {}, {}, !named};
      for (size_t i = named ? 1 : 0; i < names.size(); ++i) {
        c.choices.push_back(names[i]);
        c.schemas.push_back(params[i].dump());
      }
      c.tool_syntax = tool_call_format_name(fmt);
      auto rt = std::make_shared<structured::GrammarRuntime>(structured::compile_constraint(c), trie,
                                                             std::vector<int32_t>{256});
      for (int w = 0; w < 30; ++w) {
        structured::Matcher m(rt);
        structured::TokenMask mask;
        std::vector<int32_t> allowed;
        std::string text;
        for (int step = 0; step < 3000; ++step) {
          m.fill_mask(mask, 3000 - step);
          structured::allowed_ids(mask, allowed);
          ASSERT_FALSE(allowed.empty());
          int32_t t = allowed[rng() % allowed.size()];
          if (m.accepting() && rng() % 2 == 0) t = 256;
          ASSERT_TRUE(m.accept(t));
          if (t == 256) break;
          text += static_cast<char>(t);
        }
        ChatParserOptions o{false, false, true, fmt};
        ChatOutputParser p(o);
        ChatDelta d = p.feed(text);
        ChatDelta e = p.finish();
        for (auto& call : e.tool_calls) d.tool_calls.push_back(call);
        d.content += e.content;
        ASSERT_FALSE(d.tool_calls.empty()) << tool_call_format_name(fmt) << ": no call read from " << text;
        EXPECT_EQ(d.content, "") << text;
        if (named || !c.parallel) {
          EXPECT_EQ(d.tool_calls.size(), 1u) << text;
        }
        for (const auto& call : d.tool_calls) {
          const auto it = std::find(names.begin(), names.end(), call.name);
          ASSERT_NE(it, names.end()) << call.name;
          if (named) {
            EXPECT_EQ(call.name, names[1]);
          }
          out << json{{"kind", "schema"}, {"spec", params[static_cast<size_t>(it - names.begin())]},
                      {"output", call.arguments}}.dump() << "\n";
        }
      }
    }
  }
  out.close();
  const std::string cmd = "python3 " + std::string(PAGODA_SOURCE_DIR) + "/tests/structured/validate_outputs.py " + out_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace pagoda::server

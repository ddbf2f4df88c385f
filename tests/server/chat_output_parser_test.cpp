// The reasoning / tool-call splitter on crafted model outputs, whole and cut at every byte.
#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "server/chat_output_parser.h"

namespace pagoda::server {
namespace {

ChatDelta parse_whole(const std::string& text, ChatParserOptions o) {
  ChatOutputParser p(o);
  ChatDelta d = p.feed(text);
  ChatDelta e = p.finish();
  d.reasoning += e.reasoning;
  d.content += e.content;
  for (auto& c : e.tool_calls) d.tool_calls.push_back(c);
  return d;
}

// Feeding the text in pieces of `step` bytes gives what feeding it whole gives.
void expect_split_invariant(const std::string& text, ChatParserOptions o) {
  const ChatDelta whole = parse_whole(text, o);
  for (size_t step = 1; step <= 7; ++step) {
    ChatOutputParser p(o);
    ChatDelta acc;
    auto add = [&](ChatDelta d) {
      // A tag never leaks: no delta carries a fragment that only makes sense joined.
      acc.reasoning += d.reasoning;
      acc.content += d.content;
      for (auto& c : d.tool_calls) acc.tool_calls.push_back(c);
    };
    for (size_t i = 0; i < text.size(); i += step) add(p.feed(text.substr(i, step)));
    add(p.finish());
    EXPECT_EQ(acc.reasoning, whole.reasoning) << "step " << step;
    EXPECT_EQ(acc.content, whole.content) << "step " << step;
    ASSERT_EQ(acc.tool_calls.size(), whole.tool_calls.size()) << "step " << step;
    for (size_t k = 0; k < acc.tool_calls.size(); ++k) {
      EXPECT_EQ(acc.tool_calls[k].name, whole.tool_calls[k].name);
      EXPECT_EQ(acc.tool_calls[k].arguments, whole.tool_calls[k].arguments);
    }
  }
}

const ChatParserOptions kAll{true, false, true};

TEST(ChatOutputParser, PlainContentPassesThrough) {
  const ChatDelta d = parse_whole("Hello <b>world</b> < tool", kAll);
  EXPECT_EQ(d.content, "Hello <b>world</b> < tool");
  EXPECT_TRUE(d.reasoning.empty());
  EXPECT_TRUE(d.tool_calls.empty());
}

TEST(ChatOutputParser, ThinkBlockBecomesReasoning) {
  const std::string text = "<think>\nLet me see.\n</think>\n\nThe answer is 4.";
  const ChatDelta d = parse_whole(text, kAll);
  EXPECT_EQ(d.reasoning, "\nLet me see.\n");
  EXPECT_EQ(d.content, "The answer is 4.");
  expect_split_invariant(text, kAll);
}

TEST(ChatOutputParser, OnlyClosingTagWhenThePromptOpenedThink) {
  ChatParserOptions o = kAll;
  o.starts_in_reasoning = true;
  const std::string text = "thinking hard</think>\n\nDone.";
  const ChatDelta d = parse_whole(text, o);
  EXPECT_EQ(d.reasoning, "thinking hard");
  EXPECT_EQ(d.content, "Done.");
  expect_split_invariant(text, o);
}

TEST(ChatOutputParser, UnfinishedThinkingIsAllReasoning) {
  ChatParserOptions o = kAll;
  o.starts_in_reasoning = true;
  const ChatDelta d = parse_whole("still thinking </thi", o);
  EXPECT_EQ(d.reasoning, "still thinking </thi");
  EXPECT_EQ(d.content, "");
}

TEST(ChatOutputParser, ReasoningOffKeepsTags) {
  const ChatDelta d = parse_whole("<think>x</think>y", ChatParserOptions{false, false, false});
  EXPECT_EQ(d.content, "<think>x</think>y");
}

TEST(ChatOutputParser, ToolCallsAreParsed) {
  const std::string text =
      "I'll check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const ChatDelta d = parse_whole(text, kAll);
  EXPECT_EQ(d.content, "I'll check.\n");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(d.tool_calls[0].arguments), nlohmann::json::parse(R"({"city":"Paris","days":2})"));
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Paris","days":2})");  // key order kept
  EXPECT_EQ(d.tool_calls[1].name, "get_time");
  EXPECT_EQ(d.tool_calls[1].arguments, "{}");
  EXPECT_EQ(d.tool_calls[0].id.rfind("chatcmpl-tool-", 0), 0u);
  EXPECT_NE(d.tool_calls[0].id, d.tool_calls[1].id);
  expect_split_invariant(text, kAll);
}

TEST(ChatOutputParser, ReasoningThenToolCall) {
  const std::string text = "<think>need weather</think>\n\n<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}</tool_call>";
  const ChatDelta d = parse_whole(text, kAll);
  EXPECT_EQ(d.reasoning, "need weather");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"a\":1}");  // a string of JSON is kept as it is
  expect_split_invariant(text, kAll);
}

TEST(ChatOutputParser, MalformedToolCallStaysContent) {
  const std::string text = "a<tool_call>{not json}</tool_call>b";
  const ChatDelta d = parse_whole(text, kAll);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, text);
  expect_split_invariant(text, kAll);
}

TEST(ChatOutputParser, UnterminatedToolCallAtEnd) {
  // A complete JSON body without the closing tag (generation stopped on it) is still a call.
  ChatDelta d = parse_whole("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n", kAll);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  d = parse_whole("<tool_call>{\"name\": \"f\", \"argu", kAll);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "<tool_call>{\"name\": \"f\", \"argu");
}

TEST(ChatOutputParser, ToolTagsIgnoredWithoutTools) {
  const std::string text = "<tool_call>{\"name\": \"f\"}</tool_call>";
  const ChatDelta d = parse_whole(text, ChatParserOptions{true, false, false});
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, text);
}

TEST(ChatOutputParser, PartialTagIsHeldBackUntilKnown) {
  ChatOutputParser p(kAll);
  EXPECT_EQ(p.feed("Hi <tool").content, "Hi ");
  EXPECT_EQ(p.feed("box> ok").content, "<toolbox> ok");
  EXPECT_EQ(p.finish().content, "");
}

TEST(ChatOutputParser, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}


ChatParserOptions with_format(ToolCallFormat f) {
  ChatParserOptions o = kAll;
  o.tool_format = f;
  return o;
}

TEST(ChatOutputParser, Llama3JsonCalls) {
  const auto o = with_format(ToolCallFormat::kLlama3Json);
  const std::string text = R"({"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}})";
  const ChatDelta d = parse_whole(text, o);
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(d.tool_calls[1].name, "get_time");
  expect_split_invariant(text, o);
  // <|python_tag|> (when kept) is dropped; a JSON answer that is not a call stays content.
  EXPECT_EQ(parse_whole(R"(<|python_tag|>{"name": "f", "arguments": {"x": 1}})", o).tool_calls.size(), 1u);
  EXPECT_EQ(parse_whole(R"({"answer": 4})", o).content, R"({"answer": 4})");
  EXPECT_EQ(parse_whole("The answer is {4}.", o).content, "The answer is {4}.");
}

TEST(ChatOutputParser, MistralCalls) {
  const auto o = with_format(ToolCallFormat::kMistral);
  // The tag as text (forced calls), or dropped with the special token (auto): both are calls.
  for (const std::string& text : {std::string(R"([TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}])"),
                                 std::string(R"([{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "neg", "arguments": {"a": 3}}])")}) {
    const ChatDelta d = parse_whole(text, o);
    ASSERT_GE(d.tool_calls.size(), 1u) << text;
    EXPECT_EQ(d.tool_calls[0].name, "add");
    EXPECT_EQ(d.tool_calls[0].arguments, R"({"a":1,"b":2})");
    EXPECT_EQ(d.content, "");
    expect_split_invariant(text, o);
  }
  const ChatDelta after = parse_whole(R"(Let me add. [TOOL_CALLS][{"name": "add", "arguments": {}}])", o);
  EXPECT_EQ(after.content, "Let me add. ");
  ASSERT_EQ(after.tool_calls.size(), 1u);
  EXPECT_EQ(parse_whole("[1, 2, 3] are the numbers", o).content, "[1, 2, 3] are the numbers");
}

// Mistral's template raises on a call id that is not 9 letters and digits, so the ids a client
// sends back must be of that form.
TEST(ChatOutputParser, MistralCallIdsAreNineLettersAndDigits) {
  const ChatDelta d = parse_whole(R"([TOOL_CALLS][{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}])",
                                  with_format(ToolCallFormat::kMistral));
  ASSERT_EQ(d.tool_calls.size(), 2u);
  for (const ParsedToolCall& c : d.tool_calls) EXPECT_TRUE(std::regex_match(c.id, std::regex("[A-Za-z0-9]{9}"))) << c.id;
  EXPECT_NE(d.tool_calls[0].id, d.tool_calls[1].id);
}

TEST(ChatOutputParser, PythonicCalls) {
  const auto o = with_format(ToolCallFormat::kPythonic);
  const std::string text = R"([get_weather(city='Paris', days=2, metric=True, extra=None), get_time(), f(xs=[1, 2.5, "a"], d={'k': False})])";
  const ChatDelta d = parse_whole(text, o);
  ASSERT_EQ(d.tool_calls.size(), 3u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(d.tool_calls[0].arguments),
            nlohmann::json::parse(R"({"city":"Paris","days":2,"metric":true,"extra":null})"));
  EXPECT_EQ(d.tool_calls[1].arguments, "{}");
  EXPECT_EQ(nlohmann::json::parse(d.tool_calls[2].arguments), nlohmann::json::parse(R"({"xs":[1,2.5,"a"],"d":{"k":false}})"));
  expect_split_invariant(text, o);
  // Gemma 3's fenced form.
  EXPECT_EQ(parse_whole("```tool_code\n[lookup(q=\"pagoda\")]\n```", o).tool_calls.size(), 1u);
  EXPECT_EQ(parse_whole("[see the docs](http://x)", o).content, "[see the docs](http://x)");
  EXPECT_EQ(parse_whole("Plain answer.", o).content, "Plain answer.");
}

TEST(ChatOutputParser, ParserNames) {
  EXPECT_EQ(tool_call_format_named("llama3_json"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(tool_call_format_named("mistral"), ToolCallFormat::kMistral);
  EXPECT_EQ(tool_call_format_named("pythonic"), ToolCallFormat::kPythonic);
  EXPECT_EQ(tool_call_format_named("hermes"), ToolCallFormat::kHermes);
  EXPECT_FALSE(tool_call_format_named("granite").has_value());
}

}  // namespace
}  // namespace pagoda::server

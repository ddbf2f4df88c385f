// /v1/messages request translation: Anthropic messages, system, tools and tool_choice -> the chat
// messages, function tools and forced-call constraint the chat machinery takes (as vLLM translates
// them), the sampling fields, and the 400s with their param.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/messages_request.h"

namespace pagoda::server {
namespace {

MessagesRequest parse(const std::string& json) { return parse_messages_request(parse_json_body(json)); }

// The ApiError that parsing `json` throws (status 0 when it parses).
ApiError error_of(const std::string& json) {
  try {
    parse(json);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "");
}

#define EXPECT_400(json, expected_param)              \
  do {                                                \
    const ApiError e_ = error_of(json);               \
    EXPECT_EQ(e_.status, 400) << (json);              \
    EXPECT_EQ(e_.param, expected_param) << e_.what(); \
    EXPECT_FALSE(std::string(e_.what()).empty());     \
  } while (0)

TEST(MessagesRequest, StringContentAndSystem) {
  const MessagesRequest r =
      parse(R"({"model": "m", "max_tokens": 7, "system": "Be brief.", "messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt.messages, Json::parse(R"([{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": "Hi"}])"));
  EXPECT_TRUE(r.prompt.add_generation_prompt);
  EXPECT_TRUE(r.prompt.tools.is_null());
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.constraint.has_value());
  EXPECT_FALSE(r.parse_tool_calls);
}

TEST(MessagesRequest, TextBlocksAreJoined) {
  const MessagesRequest r = parse(R"({"max_tokens": 1,
      "system": [{"type": "text", "text": "A"}, {"type": "text", "text": "B", "cache_control": {"type": "ephemeral"}}],
      "messages": [{"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": ""},
                                                {"type": "text", "text": "two"}]},
                   {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                   {"role": "user", "content": "three"}]})");
  EXPECT_EQ(r.prompt.messages, Json::parse(R"([{"role": "system", "content": "AB"},
                                               {"role": "user", "content": "one\ntwo"},
                                               {"role": "assistant", "content": "ok"},
                                               {"role": "user", "content": "three"}])"));
  // An empty system prompt adds no system message.
  EXPECT_EQ(parse(R"({"max_tokens": 1, "system": "", "messages": [{"role": "user", "content": "x"}]})")
                .prompt.messages.size(),
            1u);
}

TEST(MessagesRequest, ToolUseAndToolResultHistory) {
  const MessagesRequest r = parse(R"({"max_tokens": 5,
      "tools": [{"name": "get_weather", "description": "Weather for a city",
                 "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
      "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "use the tool", "signature": "s"},
                                          {"type": "text", "text": "Checking."},
                                          {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "21C"},
                                     {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
                                      "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                                     {"type": "text", "text": "And tomorrow?"}]}]})");
  EXPECT_EQ(r.prompt.messages, Json::parse(R"([
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "Checking.", "reasoning": "use the tool", "reasoning_content": "use the tool",
       "tool_calls": [{"id": "toolu_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "toolu_1", "content": "21C"},
      {"role": "tool", "tool_call_id": "toolu_2", "content": "a\nb"},
      {"role": "user", "content": "And tomorrow?"}])"));
  EXPECT_EQ(r.prompt.tools, Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])"));
  EXPECT_TRUE(r.parse_tool_calls);
  EXPECT_FALSE(r.constraint.has_value());  // auto by default
}

TEST(MessagesRequest, AssistantWithOnlyToolUseHasNullContent) {
  const MessagesRequest r = parse(R"({"max_tokens": 5, "messages": [
      {"role": "user", "content": "x"},
      {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]})");
  EXPECT_EQ(r.prompt.messages[1], Json::parse(R"({"role": "assistant", "content": null,
      "tool_calls": [{"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})"));
  // A tool_result without content is an empty result; with no text, no user message follows it.
  EXPECT_EQ(r.prompt.messages.size(), 3u);
  EXPECT_EQ(r.prompt.messages[2], Json::parse(R"({"role": "tool", "tool_call_id": "t", "content": ""})"));
}

TEST(MessagesRequest, ToolChoice) {
  const std::string tools =
      R"("tools": [{"name": "f", "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}},
                   {"name": "g", "input_schema": {"type": "object"}}], )";
  const std::string msgs = R"("max_tokens": 5, "messages": [{"role": "user", "content": "x"}])";
  {
    const MessagesRequest r = parse("{" + tools + R"("tool_choice": {"type": "auto"}, )" + msgs + "}");
    EXPECT_TRUE(r.parse_tool_calls);
    EXPECT_FALSE(r.constraint.has_value());
  }
  {
    const MessagesRequest r = parse("{" + tools + R"("tool_choice": {"type": "none"}, )" + msgs + "}");
    EXPECT_FALSE(r.parse_tool_calls);
    EXPECT_FALSE(r.constraint.has_value());
    EXPECT_FALSE(r.prompt.tools.is_null());  // the template still sees the tools, as chat's none
  }
  for (const char* choice : {R"({"type": "any"})", R"({"type": "tool", "name": "f"})",
                             R"({"type": "any", "disable_parallel_tool_use": true})"}) {
    const MessagesRequest r = parse("{" + tools + R"("tool_choice": )" + choice + ", " + msgs + "}");
    EXPECT_TRUE(r.parse_tool_calls) << choice;
    ASSERT_TRUE(r.constraint.has_value()) << choice;
    EXPECT_EQ(r.constraint->constraint.kind, structured::ConstraintKind::kToolCalls) << choice;
    EXPECT_EQ(r.constraint->param, "tool_choice") << choice;
  }
  EXPECT_400("{" + tools + R"("tool_choice": {"type": "tool", "name": "nope"}, )" + msgs + "}", "tool_choice");
  EXPECT_400("{" + tools + R"("tool_choice": {"type": "tool"}, )" + msgs + "}", "tool_choice.name");
  EXPECT_400("{" + tools + R"("tool_choice": {"type": "required"}, )" + msgs + "}", "tool_choice.type");
  EXPECT_400("{" + tools + R"("tool_choice": "auto", )" + msgs + "}", "tool_choice");
  EXPECT_400(R"({"tool_choice": {"type": "any"}, )" + msgs + "}", "tool_choice");
}

TEST(MessagesRequest, Sampling) {
  const MessagesRequest r = parse(R"({"max_tokens": 9, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
      "stop_sequences": ["END", "\n\n"], "stream": true, "metadata": {"user_id": "u-1"},
      "messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(r.params.max_tokens, 9);
  EXPECT_DOUBLE_EQ(r.params.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.params.top_p, 0.9);
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.user, "u-1");
}

TEST(MessagesRequest, Thinking) {
  const std::string msgs = R"("max_tokens": 5, "messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(parse(R"({"thinking": {"type": "enabled", "budget_tokens": 1024}, )" + msgs + "}")
                .prompt.chat_template_kwargs,
            Json::parse(R"({"enable_thinking": true})"));
  EXPECT_EQ(parse(R"({"thinking": {"type": "disabled"}, )" + msgs + "}").prompt.chat_template_kwargs,
            Json::parse(R"({"enable_thinking": false})"));
  EXPECT_EQ(parse("{" + msgs + "}").prompt.chat_template_kwargs, Json::object());
  EXPECT_400(R"({"thinking": {"type": "adaptive"}, )" + msgs + "}", "thinking.type");
}

TEST(MessagesRequest, CountTokensNeedsNoMaxTokens) {
  const ChatPromptRequest p = parse_messages_prompt(parse_json_body(R"({"messages": [{"role": "user", "content": "x"}]})"));
  EXPECT_EQ(p.messages.size(), 1u);
}

TEST(MessagesRequest, Errors) {
  const std::string user = R"([{"role": "user", "content": "x"}])";
  EXPECT_400(R"({"messages": )" + user + "}", "max_tokens");
  EXPECT_400(R"({"max_tokens": 0, "messages": )" + user + "}", "max_tokens");
  EXPECT_400(R"({"max_tokens": "5", "messages": )" + user + "}", "max_tokens");
  EXPECT_400(R"({"max_tokens": 5})", "messages");
  EXPECT_400(R"({"max_tokens": 5, "messages": []})", "messages");
  EXPECT_400(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})", "messages[0].role");
  EXPECT_400(R"({"max_tokens": 5, "messages": [{"role": "user"}]})", "messages[0].content");
  EXPECT_400(R"({"max_tokens": 5, "messages": [{"role": "user", "content": 3}]})", "messages[0].content");
  EXPECT_400(R"({"max_tokens": 5, "messages": [{"role": "user", "content": []}]})", "messages[0].content");
  EXPECT_400(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image",
      "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]})",
             "messages[0].content[0].type");
  EXPECT_400(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t",
      "name": "f", "input": {}}]}]})", "messages[0].content[0].type");
  EXPECT_400(R"({"max_tokens": 5, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t",
      "name": "f", "input": "{}"}]}]})", "messages[0].content[0].input");
  EXPECT_400(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})",
             "messages[0].content[0].tool_use_id");
  EXPECT_400(R"({"max_tokens": 5, "system": 3, "messages": )" + user + "}", "system");
  EXPECT_400(R"({"max_tokens": 5, "stop_sequences": "END", "messages": )" + user + "}", "stop_sequences");
  EXPECT_400(R"({"max_tokens": 5, "stop_sequences": [1], "messages": )" + user + "}", "stop_sequences");
  EXPECT_400(R"({"max_tokens": 5, "temperature": -1, "messages": )" + user + "}", "temperature");
  EXPECT_400(R"({"max_tokens": 5, "tools": [{"type": "web_search_20250305", "name": "web_search"}], "messages": )" +
                 user + "}",
             "tools[0].type");
  EXPECT_400(R"({"max_tokens": 5, "tools": [{"name": "f"}], "messages": )" + user + "}", "tools[0].input_schema");
  EXPECT_400(R"({"max_tokens": 5, "metadata": {"user_id": 3}, "messages": )" + user + "}", "metadata.user_id");
  EXPECT_400(R"({"max_tokens": 5, "mcp_servers": [], "messages": )" + user + "}", "mcp_servers");
}

// Hostile nesting is a 400, never a deep recursion: the body parser bounds it first (the
// per-message and tools bounds of kMaxChatNesting stand behind it).
TEST(MessagesRequest, DeepNestingIsRefused) {
  std::string deep;
  for (int i = 0; i < 80; ++i) deep += "[";
  for (int i = 0; i < 80; ++i) deep += "]";
  for (const std::string& json :
       {R"({"max_tokens": 5, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t",
            "name": "f", "input": {"a": )" + deep + "}}]}]}",
        R"({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
            "tools": [{"name": "f", "input_schema": {"a": )" + deep + "}}]}"}) {
    const ApiError e = error_of(json);
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(std::string(e.what()).find("deeper"), std::string::npos) << e.what();
  }
}

TEST(ErrorShape, AnthropicErrorObject) {
  EXPECT_EQ(bad_request("bad", "max_tokens").to_anthropic_json(),
            Json::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})"));
  EXPECT_EQ(unauthorized().to_anthropic_json()["error"]["type"], "authentication_error");
  EXPECT_EQ(not_found("no").to_anthropic_json()["error"]["type"], "not_found_error");
  EXPECT_EQ(ApiError(413, "big", "invalid_request_error").to_anthropic_json()["error"]["type"], "request_too_large");
  EXPECT_EQ(unavailable("busy").to_anthropic_json()["error"]["type"], "overloaded_error");
  EXPECT_EQ(internal_error("bug").to_anthropic_json()["error"]["type"], "api_error");
  // The OpenAI form is unchanged.
  EXPECT_EQ(bad_request("bad").to_json(ErrorShape::kOpenAI)["error"]["message"], "bad");
}

}  // namespace
}  // namespace pagoda::server

// Request parsing and validation: what becomes SamplingParams, and the 400s with their param.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace pagoda::server {
namespace {

Json body(const std::string& s) { return parse_json_body(s); }

// The ApiError that parsing `json` throws (status 0 when it parses).
ApiError completion_error(const std::string& json) {
  try {
    parse_completion_request(body(json));
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "");
}

TEST(OpenAiRequest, CompletionSamplingFields) {
  const CompletionRequest r = parse_completion_request(body(R"({
      "model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 3,
      "min_p": 0.1, "seed": 42, "stop": "x", "stop_token_ids": [5, 6], "n": 2, "logprobs": 3,
      "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.1,
      "ignore_eos": true, "min_tokens": 2, "stream": true, "stream_options": {"include_usage": true}})"));
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(*r.prompts[0].text, "hi");
  EXPECT_EQ(*r.params.max_tokens, 7);
  EXPECT_TRUE(r.params.greedy());
  EXPECT_EQ(r.params.top_k, 3);
  EXPECT_EQ(*r.params.seed, 42u);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(r.params.n, 2);
  EXPECT_EQ(*r.params.logprobs, 3);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_EQ(r.params.min_tokens, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(OpenAiRequest, CompletionPromptForms) {
  EXPECT_EQ(parse_completion_request(body(R"({"prompt": ["a", "b"]})")).prompts.size(), 2u);
  auto ids = parse_completion_request(body(R"({"prompt": [1, 2, 3]})"));
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_completion_request(body(R"({"prompt": [[1], [2, 3]]})")).prompts.size(), 2u);
  EXPECT_EQ(*parse_completion_request(body(R"({"prompt": "x"})")).params.max_tokens, 16);  // OpenAI default
}

TEST(OpenAiRequest, CompletionErrorsNameTheField) {
  EXPECT_EQ(completion_error(R"({"prompt": "x", "temperature": -1})").param, "temperature");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "temperature": "hot"})").param, "temperature");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "top_p": 0})").param, "top_p");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "max_tokens": 0})").param, "max_tokens");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "max_tokens": 1.5})").param, "max_tokens");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "n": 0})").param, "n");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "logprobs": 21})").param, "logprobs");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "stop": [1]})").param, "stop");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "stop_token_ids": [-1]})").param, "stop_token_ids");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "stream_options": {"include_usage": true}})").param,
            "stream_options");
  EXPECT_EQ(completion_error(R"({"prompt": 5})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"max_tokens": 5})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "presence_penalty": 3})").status, 400);
  EXPECT_EQ(completion_error(R"({"prompt": "x", "max_tokens": 99999999999})").status, 400);
  EXPECT_THROW(parse_json_body("{not json"), ApiError);
  EXPECT_THROW(parse_json_body("[1, 2]"), ApiError);
}

TEST(OpenAiRequest, ChatMessagesAndTools) {
  const ChatRequest r = parse_chat_request(body(R"({
      "messages": [{"role": "system", "content": "be brief"},
                   {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                   {"role": "assistant", "content": null, "tool_calls": [
                       {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": 2}"}}]}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "max_completion_tokens": 9, "max_tokens": 3, "logprobs": true, "top_logprobs": 2,
      "chat_template_kwargs": {"enable_thinking": false}})"));
  EXPECT_EQ(r.prompt.messages[1]["content"], "a\nb");
  EXPECT_EQ(r.prompt.messages[2]["content"], "");
  // Arguments become a mapping, in the client's key order.
  EXPECT_EQ(r.prompt.messages[2]["tool_calls"][0]["function"]["arguments"].dump(), R"({"z":1,"a":2})");
  EXPECT_TRUE(r.parse_tool_calls);
  EXPECT_EQ(*r.params.max_tokens, 9);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(*r.params.logprobs, 2);
  EXPECT_EQ(r.prompt.chat_template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(r.prompt.add_generation_prompt);

  const ChatRequest none = parse_chat_request(body(R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})"));
  EXPECT_FALSE(none.parse_tool_calls);
}

TEST(OpenAiRequest, ChatErrors) {
  auto param = [](const std::string& json) {
    try {
      parse_chat_request(parse_json_body(json));
    } catch (const ApiError& e) {
      return e.param;
    }
    return std::string("<parsed>");
  };
  EXPECT_EQ(param(R"({"messages": []})"), "messages");
  EXPECT_EQ(param(R"({"messages": [{"content": "x"}]})"), "messages[0].role");
  EXPECT_EQ(param(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})"), "top_logprobs");
  EXPECT_EQ(param(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})"), "tools");
  EXPECT_EQ(param(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"})"), "tool_choice");
}

}  // namespace
}  // namespace pagoda::server

namespace pagoda::server {
namespace {

TEST(OpenAiRequest, UnsetSamplingFieldsTakeTheModelDefaults) {
  SamplingParams defaults;
  defaults.temperature = 0.7;
  defaults.top_k = 40;
  const CompletionRequest a = parse_completion_request(Json::parse(R"({"prompt": "x"})"), defaults);
  EXPECT_EQ(a.params.temperature, 0.7);
  EXPECT_EQ(a.params.top_k, 40);
  const ChatRequest b = parse_chat_request(
      Json::parse(R"({"messages": [{"role": "user", "content": "x"}], "temperature": 0})"), defaults);
  EXPECT_EQ(b.params.temperature, 0.0);  // what the request sets wins
  EXPECT_EQ(b.params.top_k, 40);
}

}  // namespace
}  // namespace pagoda::server

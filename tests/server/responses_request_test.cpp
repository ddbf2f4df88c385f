// /v1/responses request parsing: input items -> chat messages (as vLLM's construct_input_messages
// builds them), function tools -> the chat-completions shape, and the 400s with their param.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/responses_request.h"

namespace pagoda::server {
namespace {

ResponsesRequest parse(const std::string& json) { return parse_responses_request(parse_json_body(json)); }

// The ApiError that parsing `json` throws (status 0 when it parses).
ApiError error_of(const std::string& json) {
  try {
    parse(json);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "", "");
}

#define EXPECT_400(json, expected_param)                         \
  do {                                                           \
    const ApiError e_ = error_of(json);                          \
    EXPECT_EQ(e_.status, 400) << (json);                         \
    EXPECT_EQ(e_.param, expected_param) << e_.what();            \
    EXPECT_FALSE(std::string(e_.what()).empty());                \
  } while (0)

TEST(ResponsesRequest, TextInputAndInstructions) {
  const ResponsesRequest r = parse(R"({"model": "m", "input": "Hi", "instructions": "Be brief."})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt.messages, Json::parse(R"([{"role": "system", "content": "Be brief."},
                                               {"role": "user", "content": "Hi"}])"));
  EXPECT_TRUE(r.prompt.add_generation_prompt);
  EXPECT_FALSE(r.prompt.continue_final_message);
  EXPECT_TRUE(r.prompt.tools.is_null());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  // An empty instructions string adds no system message (vLLM tests its truthiness).
  EXPECT_EQ(parse(R"({"input": "Hi", "instructions": ""})").prompt.messages.size(), 1u);
}

TEST(ResponsesRequest, TextFormatIsAConstraint) {
  const ResponsesRequest r =
      parse(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "integer"}}}})");
  ASSERT_TRUE(r.constraint.has_value());
  EXPECT_EQ(r.constraint->constraint.kind, structured::ConstraintKind::kJsonSchema);
  EXPECT_EQ(Json::parse(r.constraint->constraint.text), Json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(r.constraint->param, "text.format");
  EXPECT_EQ(parse(R"({"input": "x", "text": {"format": {"type": "json_object"}}})").constraint->constraint.kind,
            structured::ConstraintKind::kJsonObject);
  EXPECT_FALSE(parse(R"({"input": "x", "text": {"format": {"type": "text"}}})").constraint.has_value());
}

TEST(ResponsesRequest, MessageItemsJoinTextParts) {
  const ResponsesRequest r = parse(R"({"input": [
      {"role": "developer", "content": "Rules."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"},
                                                      {"type": "input_text", "text": "b"}]},
      {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
       "content": [{"type": "output_text", "text": "c", "annotations": []}]},
      {"role": "user", "content": "d"}]})");
  EXPECT_EQ(r.prompt.messages, Json::parse(R"([{"role": "developer", "content": "Rules."},
                                               {"role": "user", "content": "a\nb"},
                                               {"role": "assistant", "content": "c"},
                                               {"role": "user", "content": "d"}])"));
}

TEST(ResponsesRequest, FunctionCallsAndOutputsBecomeToolCallsAndToolMessages) {
  const ResponsesRequest r = parse(R"({"input": [
      {"role": "user", "content": "Weather?"},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "{\"temp\": 21}"},
      {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "noon"}]}]})");
  EXPECT_EQ(r.prompt.messages, Json::parse(R"([
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
          {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
          {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
      {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call_1"},
      {"role": "tool", "content": "noon", "tool_call_id": "call_2"}])"));
}

TEST(ResponsesRequest, OneTurnsItemsExtendOneAssistantMessage) {
  // A previous response's output sent back: reasoning, message, function call -> one message.
  const ResponsesRequest r = parse(R"({"input": [
      {"role": "user", "content": "q"},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c", "output": "1"},
      {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "sum"}]}]})");
  EXPECT_EQ(r.prompt.messages, Json::parse(R"([
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": "Let me look.", "reasoning": "hmm", "reasoning_content": "hmm",
       "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
      {"role": "tool", "content": "1", "tool_call_id": "c"},
      {"role": "assistant", "content": null, "reasoning": "sum", "reasoning_content": "sum"}])"));
}

TEST(ResponsesRequest, PartialAssistantMessageIsContinued) {
  const ResponsesRequest r = parse(R"({"input": [{"role": "user", "content": "q"},
      {"type": "message", "role": "assistant", "status": "incomplete", "content": "Once upon"}]})");
  EXPECT_FALSE(r.prompt.add_generation_prompt);
  EXPECT_TRUE(r.prompt.continue_final_message);
  const ResponsesRequest done = parse(R"({"input": [{"role": "user", "content": "q"},
      {"type": "message", "role": "assistant", "status": "completed", "content": "Once upon"}]})");
  EXPECT_TRUE(done.prompt.add_generation_prompt);
}

TEST(ResponsesRequest, FunctionToolsInTheChatShape) {
  const ResponsesRequest r = parse(R"({"input": "x", "tools": [
      {"type": "function", "name": "f", "description": "does f", "parameters": {"type": "object"}, "strict": true},
      {"type": "function", "name": "g"}]})");
  EXPECT_EQ(r.prompt.tools, Json::parse(R"([
      {"type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object"}, "strict": true}},
      {"type": "function", "function": {"name": "g", "description": null, "parameters": null}}])"));
  EXPECT_TRUE(r.parse_tool_calls);
  EXPECT_EQ(r.echo["tools"][1], Json::parse(R"({"type": "function", "name": "g"})"));
  EXPECT_EQ(r.echo["tool_choice"], "auto");
  // tool_choice none: the tools still reach the template, but calls are not parsed (chat's rule).
  const ResponsesRequest none = parse(R"({"input": "x", "tool_choice": "none", "tools": [{"type": "function", "name": "f"}]})");
  EXPECT_FALSE(none.parse_tool_calls);
  EXPECT_FALSE(none.prompt.tools.is_null());
  EXPECT_FALSE(parse(R"({"input": "x", "tools": []})").parse_tool_calls);
}

TEST(ResponsesRequest, SamplingFields) {
  SamplingParams defaults;
  defaults.temperature = 0.7;
  defaults.top_p = 0.9;
  const ResponsesRequest d = parse_responses_request(parse_json_body(R"({"input": "x"})"), defaults);
  EXPECT_DOUBLE_EQ(d.params.temperature, 0.7);
  EXPECT_DOUBLE_EQ(d.params.top_p, 0.9);
  EXPECT_FALSE(d.params.max_tokens);
  const ResponsesRequest r = parse(R"({"input": "x", "max_output_tokens": 9, "temperature": 0, "top_p": 0.5,
      "top_k": 4, "seed": 3, "stop": ["a", "b"], "ignore_eos": true, "repetition_penalty": 1.2,
      "include": ["message.output_text.logprobs"], "top_logprobs": 2, "stream": true,
      "stream_options": {"include_obfuscation": false}})");
  EXPECT_EQ(*r.params.max_tokens, 9);
  EXPECT_TRUE(r.params.greedy());
  EXPECT_DOUBLE_EQ(r.params.top_p, 0.5);
  EXPECT_EQ(r.params.top_k, 4);
  EXPECT_EQ(*r.params.seed, 3u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_DOUBLE_EQ(r.params.repetition_penalty, 1.2);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(*r.params.logprobs, 2);
  EXPECT_TRUE(r.stream);
  // top_logprobs without the include asks for nothing (vLLM's rule), but is echoed.
  const ResponsesRequest t = parse(R"({"input": "x", "top_logprobs": 3})");
  EXPECT_FALSE(t.params.logprobs);
  EXPECT_EQ(t.echo["top_logprobs"], 3);
}

TEST(ResponsesRequest, EchoedFields) {
  const ResponsesRequest r = parse(R"({"input": "x", "store": true, "metadata": {"k": "v"}, "user": "u",
      "parallel_tool_calls": false, "reasoning": {"effort": "low"}, "service_tier": "flex",
      "text": {"format": {"type": "text"}, "verbosity": "low"}, "max_tool_calls": 2, "background": false,
      "truncation": "disabled"})");
  const Json& e = r.echo;
  EXPECT_EQ(e["store"], false);  // nothing is stored, whatever was asked
  EXPECT_EQ(e["metadata"], Json::parse(R"({"k": "v"})"));
  EXPECT_EQ(e["user"], "u");
  EXPECT_EQ(e["parallel_tool_calls"], false);
  EXPECT_EQ(e["reasoning"], Json::parse(R"({"effort": "low", "summary": null})"));
  EXPECT_EQ(r.prompt.chat_template_kwargs["reasoning_effort"], "low");
  EXPECT_EQ(e["service_tier"], "flex");
  EXPECT_EQ(e["text"]["verbosity"], "low");
  EXPECT_EQ(e["max_tool_calls"], 2);
  EXPECT_EQ(e["truncation"], "disabled");
  const Json defaults = parse(R"({"input": "x"})").echo;
  EXPECT_EQ(defaults["text"], Json::parse(R"({"format": {"type": "text"}})"));
  EXPECT_TRUE(defaults["metadata"].is_null());
  EXPECT_TRUE(defaults["instructions"].is_null());
  EXPECT_EQ(defaults["tools"], Json::array());
  EXPECT_EQ(defaults["parallel_tool_calls"], true);
}

TEST(ResponsesRequest, InputErrors) {
  EXPECT_400(R"({"model": "m"})", "input");
  EXPECT_400(R"({"input": 5})", "input");
  EXPECT_400(R"({"input": []})", "input");
  EXPECT_400(R"({"input": [7]})", "input[0]");
  EXPECT_400(R"({"input": [{"content": "x"}]})", "input[0].type");
  EXPECT_400(R"({"input": [{"type": "message", "content": "x"}]})", "input[0].role");
  EXPECT_400(R"({"input": [{"role": "robot", "content": "x"}]})", "input[0].role");
  EXPECT_400(R"({"input": [{"role": "user"}]})", "input[0].content");
  EXPECT_400(R"({"input": [{"role": "user", "content": 3}]})", "input[0].content");
  EXPECT_400(R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})",
             "input[0].content[0].type");
  EXPECT_400(R"({"input": [{"role": "user", "content": [{"type": "input_text"}]}]})", "input[0].content[0].text");
  EXPECT_400(R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input[0].call_id");
  EXPECT_400(R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]})",
             "input[0].arguments");
  EXPECT_400(R"({"input": [{"type": "function_call_output", "call_id": "c"}]})", "input[0].output");
  EXPECT_400(R"({"input": [{"type": "function_call_output", "output": "1"}]})", "input[0].call_id");
  EXPECT_400(R"({"input": [{"type": "reasoning", "encrypted_content": "abc", "summary": []}]})",
             "input[0].encrypted_content");
  EXPECT_400(R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input[0].type");
  EXPECT_400(R"({"input": [{"type": "web_search_call", "id": "ws_1"}]})", "input[0].type");
  EXPECT_400(R"({"input": "x", "instructions": 5})", "instructions");
}

// tool_choice required / named: the chat route's grammar of calls (every tool, or the named one
// alone and no parallel calls), calls parsed; the echo is what the client sent.
TEST(ResponsesRequest, ToolChoiceRequiredAndNamedConstrainTheOutputToCalls) {
  const ResponsesRequest req = parse(R"({"input": "x", "tool_choice": "required", "tools": [
      {"type": "function", "name": "f", "parameters": {"type": "object"}}, {"type": "function", "name": "g"}]})");
  ASSERT_TRUE(req.constraint.has_value());
  EXPECT_EQ(req.constraint->constraint.kind, structured::ConstraintKind::kToolCalls);
  EXPECT_EQ(req.constraint->constraint.choices, (std::vector<std::string>{"f", "g"}));
  EXPECT_TRUE(req.constraint->constraint.parallel);
  EXPECT_TRUE(req.parse_tool_calls);
  EXPECT_EQ(req.echo["tool_choice"], "required");
  const ResponsesRequest named = parse(R"({"input": "x", "tool_choice": {"type": "function", "name": "g"},
      "tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "g"}]})");
  ASSERT_TRUE(named.constraint.has_value());
  EXPECT_EQ(named.constraint->constraint.choices, (std::vector<std::string>{"g"}));
  EXPECT_FALSE(named.constraint->constraint.parallel);
  EXPECT_EQ(named.echo["tool_choice"], Json::parse(R"({"type": "function", "name": "g"})"));
  const ResponsesRequest serial = parse(R"({"input": "x", "tool_choice": "required", "parallel_tool_calls": false,
      "tools": [{"type": "function", "name": "f"}]})");
  ASSERT_TRUE(serial.constraint.has_value());
  EXPECT_FALSE(serial.constraint->constraint.parallel);
}

TEST(ResponsesRequest, ToolErrors) {
  EXPECT_400(R"({"input": "x", "tools": {}})", "tools");
  EXPECT_400(R"({"input": "x", "tools": [{"type": "web_search"}]})", "tools[0].type");
  EXPECT_400(R"({"input": "x", "tools": [{"name": "f"}]})", "tools[0].type");
  // The chat-completions shape is not the Responses one: the message says so.
  const ApiError e = error_of(R"({"input": "x", "tools": [{"type": "function", "function": {"name": "f"}}]})");
  EXPECT_EQ(e.param, "tools[0].name");
  EXPECT_NE(std::string(e.what()).find("flat"), std::string::npos) << e.what();
  EXPECT_400(R"({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": []}]})",
             "tools[0].parameters");
  // Required and named need the tool among the tools; they cannot share the output with text.format.
  EXPECT_400(R"({"input": "x", "tool_choice": "required"})", "tool_choice");
  EXPECT_400(R"({"input": "x", "tool_choice": {"type": "function", "name": "f"}})", "tool_choice");
  EXPECT_400(R"({"input": "x", "tool_choice": {"type": "function", "name": "g"}, "tools": [{"type": "function", "name": "f"}]})",
             "tool_choice");
  EXPECT_400(R"({"input": "x", "tool_choice": {"type": "function"}, "tools": [{"type": "function", "name": "f"}]})",
             "tool_choice");
  EXPECT_400(R"({"input": "x", "tool_choice": "required", "tools": [{"type": "function", "name": "f"}],
                 "text": {"format": {"type": "json_object"}}})",
             "tool_choice");
  EXPECT_400(R"({"input": "x", "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}})",
             "tool_choice");
  EXPECT_400(R"({"input": "x", "tool_choice": "sometimes"})", "tool_choice");
  // Deeper than the template may see: built directly (the body parser has its own bound).
  Json deep = Json::object();
  for (int i = 0; i < 80; ++i) deep = Json{{"type", "object"}, {"properties", {{"p", deep}}}};
  Json body = {{"input", "x"}, {"tools", Json::array({{{"type", "function"}, {"name", "f"}, {"parameters", deep}}})}};
  try {
    parse_responses_request(body);
    ADD_FAILURE() << "no error for a tool nested 160 levels deep";
  } catch (const ApiError& err) {
    EXPECT_EQ(err.status, 400);
    EXPECT_EQ(err.param, "tools");
  }
}

TEST(ResponsesRequest, StoredStateAndUnsupportedFields) {
  // Nothing is stored: what needs a stored response says so.
  const ApiError prev = error_of(R"({"input": "x", "previous_response_id": "resp_1"})");
  EXPECT_EQ(prev.status, 400);
  EXPECT_EQ(prev.param, "previous_response_id");
  EXPECT_NE(std::string(prev.what()).find("store"), std::string::npos) << prev.what();
  EXPECT_400(R"({"input": "x", "conversation": "conv_1"})", "conversation");
  EXPECT_400(R"({"input": "x", "background": true})", "background");
  EXPECT_400(R"({"input": "x", "prompt": {"id": "p"}})", "prompt");
  EXPECT_400(R"({"input": "x", "truncation": "auto"})", "truncation");
  EXPECT_400(R"({"input": "x", "truncation": "most"})", "truncation");
  EXPECT_400(R"({"input": "x", "logit_bias": {"1": 5}})", "logit_bias");
  EXPECT_400(R"({"input": "x", "text": {"format": {"type": "xml"}}})", "text.format");
  EXPECT_400(R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": 5}}})", "text.format.schema");
  EXPECT_400(R"({"input": "x", "include": ["reasoning.encrypted_content"]})", "include");
  EXPECT_400(R"({"input": "x", "include": ["everything"]})", "include");
  EXPECT_400(R"({"input": "x", "include": "message.output_text.logprobs"})", "include");
  EXPECT_400(R"({"input": "x", "reasoning": "high"})", "reasoning");
  EXPECT_400(R"({"input": "x", "metadata": {"k": 1}})", "metadata.k");
  EXPECT_400(R"({"input": "x", "store": "yes"})", "store");
  // Accepted and without effect: store true, null fields.
  EXPECT_EQ(error_of(R"({"input": "x", "store": true, "previous_response_id": null, "background": null})").status, 0);
}

TEST(ResponsesRequest, SamplingErrors) {
  EXPECT_400(R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens");
  EXPECT_400(R"({"input": "x", "max_output_tokens": "many"})", "max_output_tokens");
  EXPECT_400(R"({"input": "x", "temperature": -1})", "temperature");
  EXPECT_400(R"({"input": "x", "top_p": 0})", "top_p");
  EXPECT_400(R"({"input": "x", "top_logprobs": 21})", "top_logprobs");
  EXPECT_400(R"({"input": "x", "stop": [1]})", "stop");
  EXPECT_400(R"({"input": "x", "stream": "yes"})", "stream");
  EXPECT_400(R"({"input": "x", "stream_options": {}})", "stream_options");
  EXPECT_400(R"({"input": "x", "model": 3})", "model");
}

// Every value of a full request, replaced in turn by each JSON type: a request or an ApiError 400,
// never another exception (which would be a 500) or a crash.
TEST(ResponsesRequest, EveryFieldOfEveryTypeGivesARequestOrA400) {
  const Json full = parse_json_body(R"({"model": "m", "instructions": "i", "input": [
      {"role": "user", "content": [{"type": "input_text", "text": "a"}]},
      {"type": "message", "role": "assistant", "status": "in_progress", "content": "b"},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}], "content": [{"type": "reasoning_text", "text": "r"}]},
      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "id": "fc_1", "status": "completed"},
      {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "o"}]}],
      "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": true}],
      "tool_choice": "auto", "max_output_tokens": 5, "temperature": 0.5, "top_p": 0.9, "top_k": 3, "seed": 1,
      "stop": ["x"], "ignore_eos": false, "repetition_penalty": 1.0, "include": ["message.output_text.logprobs"],
      "top_logprobs": 1, "stream": true, "stream_options": {"include_obfuscation": true}, "store": true,
      "metadata": {"k": "v"}, "user": "u", "reasoning": {"effort": "low", "summary": "auto"},
      "text": {"format": {"type": "text"}}, "parallel_tool_calls": true, "max_tool_calls": 1,
      "service_tier": "auto", "truncation": "disabled", "chat_template_kwargs": {"enable_thinking": false}})");
  const std::vector<Json> values = {nullptr, true, 0, -1, 1.5, 1e300, "s", "", Json::array(), Json::object(),
                                    Json::array({nullptr}), Json::array({Json::object()}),
                                    Json::parse("18446744073709551615"), Json::parse("-9223372036854775808")};
  size_t cases = 0;
  // Each (pointer to a value, replacement) pair.
  std::vector<Json::json_pointer> pointers;
  const Json flat = full.flatten();
  for (const auto& [path, v] : flat.items()) {
    Json::json_pointer ptr(path);
    while (!ptr.empty()) {  // the leaf and every container above it
      pointers.push_back(ptr);
      ptr = ptr.parent_pointer();
    }
  }
  for (const Json::json_pointer& ptr : pointers) {
    for (const Json& v : values) {
      Json body = full;
      body[ptr] = v;
      ++cases;
      try {
        parse_responses_request(body);
      } catch (const ApiError& e) {
        EXPECT_EQ(e.status, 400) << ptr.to_string() << " = " << v.dump();
      } catch (const std::exception& e) {
        ADD_FAILURE() << ptr.to_string() << " = " << v.dump() << ": " << e.what();
      }
    }
  }
  EXPECT_GT(cases, 1000u);
}

}  // namespace
}  // namespace pagoda::server

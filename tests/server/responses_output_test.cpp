// /v1/responses output items and their events, from hand-made parsed output: reasoning, message and
// function_call items, the event order of OpenAI's Responses streaming reference, and the same items
// whether the events are sent or not. (The end-to-end tests use a random-weight model, which never
// writes a tool call, so function_call items are checked here.)
#include <gtest/gtest.h>

#include "server/responses_output.h"

namespace pagoda::server {
namespace {

// The events in `text` ("event: T\ndata: {...}\n\n" each), checked to be well formed.
std::vector<Json> parse_events(const std::string& text) {
  std::vector<Json> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find("\n\n", at);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    const std::string block = text.substr(at, end - at);
    at = end + 2;
    const size_t nl = block.find('\n');
    EXPECT_EQ(block.substr(0, 7), "event: ");
    EXPECT_EQ(block.substr(nl + 1, 6), "data: ");
    Json data = Json::parse(block.substr(nl + 7));
    EXPECT_EQ(data["type"], block.substr(7, nl - 7));
    out.push_back(std::move(data));
  }
  return out;
}

std::vector<std::string> types_of(const std::vector<Json>& events) {
  std::vector<std::string> types;
  for (const Json& e : events) types.push_back(e["type"]);
  return types;
}

ChatDelta delta(std::string reasoning, std::string content, std::vector<ParsedToolCall> calls = {}) {
  ChatDelta d;
  d.reasoning = std::move(reasoning);
  d.content = std::move(content);
  d.tool_calls = std::move(calls);
  return d;
}

TEST(ResponsesOutput, ReasoningThenMessageEvents) {
  ResponseEvents ev(true);
  ResponseItems items(nullptr, false);
  items.add(delta("Let me ", ""), {}, ev);
  items.add(delta("think.", "Hel"), {}, ev);
  items.add(delta("", "lo"), {}, ev);
  items.finish("incomplete", ev);
  const std::vector<Json> events = parse_events(ev.take());
  EXPECT_EQ(types_of(events), (std::vector<std::string>{
                                  "response.output_item.added", "response.content_part.added",
                                  "response.reasoning_text.delta", "response.reasoning_text.delta",
                                  "response.reasoning_text.done", "response.content_part.done",
                                  "response.output_item.done",
                                  "response.output_item.added", "response.content_part.added",
                                  "response.output_text.delta", "response.output_text.delta",
                                  "response.output_text.done", "response.content_part.done",
                                  "response.output_item.done"}));
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i]["sequence_number"], i);
  // The reasoning item: index 0, its text as a reasoning_text part.
  const std::string rs = events[0]["item"]["id"];
  EXPECT_EQ(rs.substr(0, 3), "rs_");
  EXPECT_EQ(events[0]["output_index"], 0);
  EXPECT_EQ(events[0]["item"]["status"], "in_progress");
  EXPECT_EQ(events[1]["part"], Json::parse(R"({"type": "reasoning_text", "text": ""})"));
  EXPECT_EQ(events[2]["delta"], "Let me ");
  EXPECT_EQ(events[4]["text"], "Let me think.");
  EXPECT_EQ(events[6]["item"]["status"], "completed");  // closed by the message, not by the end
  // The message: index 1, its item_id on every event, the last status from finish().
  const std::string msg = events[7]["item"]["id"];
  EXPECT_EQ(msg.substr(0, 4), "msg_");
  for (size_t i = 7; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["output_index"], 1);
    if (events[i].contains("item_id")) {
      EXPECT_EQ(events[i]["item_id"], msg);
    }
  }
  EXPECT_EQ(events[8]["part"],
            Json::parse(R"({"type": "output_text", "text": "", "annotations": [], "logprobs": []})"));
  EXPECT_EQ(events[11]["text"], "Hello");
  EXPECT_EQ(events[13]["item"]["status"], "incomplete");

  EXPECT_EQ(items.output(), Json::parse(R"([
      {"type": "reasoning", "id": ")" + rs + R"(", "summary": [],
       "content": [{"type": "reasoning_text", "text": "Let me think."}], "status": "completed"},
      {"type": "message", "id": ")" + msg + R"(", "status": "incomplete", "role": "assistant",
       "content": [{"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}]}])"));
}

TEST(ResponsesOutput, FunctionCallItems) {
  ResponseEvents ev(true);
  ResponseItems items(nullptr, false);
  items.add(delta("", "Checking.", {{"chatcmpl-tool-1", "get_weather", R"({"city": "Paris"})"},
                                    {"chatcmpl-tool-2", "get_time", "{}"}}),
            {}, ev);
  items.finish("completed", ev);
  const std::vector<Json> events = parse_events(ev.take());
  const std::vector<std::string> call_events = {
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done"};
  std::vector<std::string> want = {"response.output_item.added", "response.content_part.added",
                                   "response.output_text.delta", "response.output_text.done",
                                   "response.content_part.done", "response.output_item.done"};
  want.insert(want.end(), call_events.begin(), call_events.end());
  want.insert(want.end(), call_events.begin(), call_events.end());
  EXPECT_EQ(types_of(events), want);

  const Json& out = items.output();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["type"], "message");
  EXPECT_EQ(out[0]["status"], "completed");
  for (int i = 1; i <= 2; ++i) {
    const Json& call = out[i];
    EXPECT_EQ(call["type"], "function_call");
    EXPECT_EQ(call["id"].get<std::string>().substr(0, 3), "fc_");
    EXPECT_EQ(call["call_id"].get<std::string>().substr(0, 5), "call_");
    EXPECT_EQ(call["status"], "completed");
    // Its events: index i, item_id its id; the added item has empty arguments.
    const size_t first = 6 + 4 * (i - 1);
    EXPECT_EQ(events[first]["output_index"], i);
    EXPECT_EQ(events[first]["item"]["arguments"], "");
    EXPECT_EQ(events[first]["item"]["status"], "in_progress");
    EXPECT_EQ(events[first]["item"]["call_id"], call["call_id"]);
    EXPECT_EQ(events[first + 1]["item_id"], call["id"]);
    EXPECT_EQ(events[first + 1]["delta"], call["arguments"]);
    EXPECT_EQ(events[first + 2]["name"], call["name"]);
    EXPECT_EQ(events[first + 2]["arguments"], call["arguments"]);
    EXPECT_EQ(events[first + 3]["item"], call);
  }
  EXPECT_EQ(out[1]["name"], "get_weather");
  EXPECT_EQ(out[1]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(out[2]["name"], "get_time");
  EXPECT_NE(out[1]["call_id"], out[2]["call_id"]);
}

TEST(ResponsesOutput, ContentAfterACallOpensANewMessage) {
  ResponseEvents ev(false);
  ResponseItems items(nullptr, false);
  items.add(delta("", "a", {{"x", "f", "{}"}}), {}, ev);
  items.add(delta("", "b"), {}, ev);
  items.finish("completed", ev);
  const Json& out = items.output();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["content"][0]["text"], "a");
  EXPECT_EQ(out[1]["type"], "function_call");
  EXPECT_EQ(out[2]["content"][0]["text"], "b");
  EXPECT_NE(out[0]["id"], out[2]["id"]);
  EXPECT_EQ(ev.take(), "");  // disabled: nothing written
}

TEST(ResponsesOutput, EmptyOutputHasNoItems) {
  ResponseEvents ev(true);
  ResponseItems items(nullptr, false);
  items.add(delta("", ""), {}, ev);
  items.finish("completed", ev);
  EXPECT_EQ(items.output(), Json::array());
  EXPECT_EQ(ev.take(), "");
}

TEST(ResponsesOutput, LogprobsGoWithTheNextContent) {
  ResponseEvents ev(true);
  ResponseItems items(nullptr, true);
  SampleResult a;
  a.token = 7;
  a.logprob = -0.5f;
  SampleResult b = a;
  b.token = 8;
  b.logprob = -1.5f;
  items.add(delta("", ""), {a}, ev);   // held back by the parser: no content yet
  items.add(delta("", "xy"), {b}, ev);
  items.finish("completed", ev);
  const Json& part = items.output()[0]["content"][0];
  ASSERT_EQ(part["logprobs"].size(), 2u);
  EXPECT_EQ(part["logprobs"][0]["token"], "token_id:7");
  EXPECT_DOUBLE_EQ(part["logprobs"][0]["logprob"].get<double>(), -0.5);
  EXPECT_EQ(part["logprobs"][1]["token"], "token_id:8");
  const std::vector<Json> events = parse_events(ev.take());
  EXPECT_EQ(events[2]["type"], "response.output_text.delta");
  EXPECT_EQ(events[2]["logprobs"].size(), 2u);
}

}  // namespace
}  // namespace pagoda::server

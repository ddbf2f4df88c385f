// /v1/messages content blocks and their events, from hand-made parsed output: thinking, text and
// tool_use blocks, the event order of Anthropic's streaming reference, the same blocks whether the
// events are written or not, and the stop_reason mapping. (The end-to-end tests use a
// random-weight model, which writes no <think> and no tool call unless forced.)
#include <gtest/gtest.h>

#include "server/messages_output.h"

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

ChatDelta delta(std::string reasoning, std::string content, std::vector<ParsedToolCall> calls = {}) {
  ChatDelta d;
  d.reasoning = std::move(reasoning);
  d.content = std::move(content);
  d.tool_calls = std::move(calls);
  return d;
}

TEST(MessagesOutput, ThinkingTextAndToolUseEvents) {
  MessageContent c(true);
  c.add(delta("Let me", ""));
  c.add(delta(" think.", "The"));
  c.add(delta("", " answer", {{"chatcmpl-tool-abc123", "get_weather", R"({"city": "Paris", "n": 2})"}}));
  c.finish();
  const std::vector<Json> ev = parse_events(c.take_events());
  const Json expected = Json::parse(R"([
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": " think."}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "The"}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": " answer"}},
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2,
     "content_block": {"type": "tool_use", "id": "toolu_abc123", "name": "get_weather", "input": {}}},
    {"type": "content_block_delta", "index": 2,
     "delta": {"type": "input_json_delta", "partial_json": "{\"city\":\"Paris\",\"n\":2}"}},
    {"type": "content_block_stop", "index": 2}])");
  EXPECT_EQ(Json(ev), expected);
  EXPECT_EQ(c.blocks(), Json::parse(R"([
    {"type": "thinking", "thinking": "Let me think.", "signature": ""},
    {"type": "text", "text": "The answer"},
    {"type": "tool_use", "id": "toolu_abc123", "name": "get_weather", "input": {"city": "Paris", "n": 2}}])"));
  EXPECT_TRUE(c.has_tool_use());
  EXPECT_TRUE(c.take_events().empty());  // taken once
}

TEST(MessagesOutput, SameBlocksWithoutEvents) {
  MessageContent streamed(true), whole(false);
  for (MessageContent* c : {&streamed, &whole}) {
    c->add(delta("", "Hi"));
    c->add(delta("", "", {{"chatcmpl-tool-1", "f", "{}"}, {"chatcmpl-tool-2", "g", R"({"a": [1]})"}}));
    c->add(delta("", " after"));
    c->finish();
  }
  EXPECT_EQ(streamed.blocks(), whole.blocks());
  EXPECT_TRUE(whole.take_events().empty());
  EXPECT_EQ(whole.blocks(), Json::parse(R"([
    {"type": "text", "text": "Hi"},
    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
    {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {"a": [1]}},
    {"type": "text", "text": " after"}])"));
}

// Arguments a client could not take as an input object never throw while the reply is sent.
TEST(MessagesOutput, UnusableArgumentsGiveAnEmptyInput) {
  std::string deep = R"({"a": )";
  for (int i = 0; i < 100; ++i) deep += "[";
  for (int i = 0; i < 100; ++i) deep += "]";
  deep += "}";
  MessageContent c(false);
  c.add(delta("", "", {{"chatcmpl-tool-1", "f", deep},
                       {"chatcmpl-tool-2", "f", R"({"n": 123456789012345678901234567890})"},
                       {"chatcmpl-tool-3", "f", "[1, 2]"}}));
  c.finish();
  ASSERT_EQ(c.blocks().size(), 3u);
  for (const Json& b : c.blocks()) EXPECT_EQ(b["input"], Json::object()) << b.dump();
}

TEST(MessagesOutput, EmptyOutputHasNoBlocks) {
  MessageContent c(true);
  c.add(delta("", ""));
  c.finish();
  EXPECT_EQ(c.blocks(), Json::array());
  EXPECT_TRUE(c.take_events().empty());
  EXPECT_FALSE(c.has_tool_use());
}

TEST(MessagesOutput, StopReason) {
  RequestOutput o;
  Json seq = "unset";
  o.finish_reason = FinishReason::Stop;
  EXPECT_EQ(anthropic_stop_reason(o, false, seq), "end_turn");
  EXPECT_TRUE(seq.is_null());
  EXPECT_EQ(anthropic_stop_reason(o, true, seq), "tool_use");
  o.stop_string = "END";
  EXPECT_EQ(anthropic_stop_reason(o, false, seq), "stop_sequence");
  EXPECT_EQ(seq, "END");
  o.stop_string.clear();
  o.finish_reason = FinishReason::Length;
  EXPECT_EQ(anthropic_stop_reason(o, false, seq), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason(o, true, seq), "max_tokens");  // a call cut short is no call to make
  EXPECT_TRUE(seq.is_null());
}

TEST(MessagesOutput, MessageObject) {
  const Json m = anthropic_message("msg_1", "tiny", Json::parse(R"([{"type": "text", "text": "x"}])"), "end_turn",
                                   nullptr, 12, 3);
  EXPECT_EQ(m.dump(), Json::parse(R"({"id": "msg_1", "type": "message", "role": "assistant", "model": "tiny",
      "content": [{"type": "text", "text": "x"}], "stop_reason": "end_turn", "stop_sequence": null,
      "usage": {"input_tokens": 12, "output_tokens": 3}})").dump());  // key order too
  EXPECT_EQ(anthropic_event({{"type", "message_stop"}}), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
}

}  // namespace
}  // namespace pagoda::server

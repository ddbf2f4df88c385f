// The content blocks of an Anthropic Message (thinking, text, tool_use), built as the model's text
// is parsed, and the server-sent events that announce them: content_block_start, then
// content_block_delta (thinking_delta / text_delta / input_json_delta), then content_block_stop,
// one block at a time. Whole and streamed messages go through the same builder, so a stream's
// blocks are the ones a whole message of the same output holds.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/chat_output_parser.h"
#include "server/openai_request.h"

namespace pagoda::server {

// Anthropic's server-sent event: "event: <type>\ndata: <json>\n\n" (`data` starts with "type").
std::string anthropic_event(const Json& data);

class MessageContent {
 public:
  // stream: events are written for take_events; otherwise only the blocks are built.
  explicit MessageContent(bool stream) : stream_(stream) {}

  // One step of parsed output, in the order reasoning, content, tool calls.
  void add(const ChatDelta& d);
  // The end of the output: the open block stops.
  void finish();
  // The blocks done so far (a tool_use block's input parsed into an object).
  const Json& blocks() const { return blocks_; }
  bool has_tool_use() const { return tool_uses_ > 0; }
  // The events written since the last take.
  std::string take_events() { return std::move(events_); }

 private:
  enum class Kind { None, Thinking, Text };
  void text(Kind kind, const std::string& delta);
  void tool_use(const ParsedToolCall& call);
  void open(Kind kind);
  void close();
  void emit(const Json& event);

  bool stream_;
  Json blocks_ = Json::array();
  Kind kind_ = Kind::None;  // the open block (a tool_use block opens and stops in one step)
  std::string text_;        // the open block's text
  int64_t tool_uses_ = 0;
  std::string events_;
};

// stop_reason: tool_use when the output ended in tool calls, max_tokens at the length limit,
// stop_sequence when one of stop_sequences matched (`stop_sequence` gets it), else end_turn.
std::string anthropic_stop_reason(const RequestOutput& last, bool tool_use, Json& stop_sequence);

// A Message object in Anthropic's key order.
Json anthropic_message(const std::string& id, const std::string& model, Json content, Json stop_reason,
                       Json stop_sequence, int64_t input_tokens, int64_t output_tokens);

// A tool_use id from a parsed call's ("chatcmpl-tool-<hex>" -> "toolu_<hex>").
std::string tool_use_id(const std::string& call_id);

}  // namespace pagoda::server

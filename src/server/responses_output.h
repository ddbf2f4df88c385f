// The output items of a Response (reasoning, message, function_call), built as the model's text is
// parsed, and the server-sent events that announce them. Whole and streamed responses go through
// the same builder, so both hold the same items, and the items of a stream's final response are
// the ones its events announced (same ids), as the openai client checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/chat_output_parser.h"
#include "server/openai_request.h"

namespace pagoda::server {

// Numbered events, as the Responses API sends them: "event: <type>\ndata: <json>\n\n" with a
// sequence_number from 0 (no "data: [DONE]" at the end). Disabled: only counted.
class ResponseEvents {
 public:
  explicit ResponseEvents(bool enabled) : enabled_(enabled) {}
  // `event` starts with its "type"; sequence_number is added.
  void emit(Json event);
  // The text of the events emitted since the last take.
  std::string take() { return std::move(text_); }

 private:
  bool enabled_;
  int64_t sequence_ = 0;
  std::string text_;
};

class ResponseItems {
 public:
  // `logprobs`: output_text parts carry the logprobs of their tokens (include
  // message.output_text.logprobs); `tok` spells them.
  ResponseItems(const Tokenizer* tok, bool logprobs) : tok_(tok), logprobs_(logprobs) {}

  // One step of parsed output, in the order reasoning, content, tool calls, with the samples of
  // the tokens it came from (their logprobs go with the next content).
  void add(const ChatDelta& d, const std::vector<SampleResult>& samples, ResponseEvents& ev);
  // The end of the output: the open item is done with `status` ("completed" or "incomplete").
  void finish(const std::string& status, ResponseEvents& ev);
  // The items done so far.
  const Json& output() const { return output_; }

 private:
  enum class Kind { None, Message, Reasoning };
  void open(Kind kind, ResponseEvents& ev);
  void close(const std::string& status, ResponseEvents& ev);
  void text(Kind kind, const std::string& delta, ResponseEvents& ev);
  void function_call(const ParsedToolCall& call, ResponseEvents& ev);
  Json open_item_json(const std::string& status) const;
  Json part_json() const;

  const Tokenizer* tok_;
  bool logprobs_;
  Json output_ = Json::array();
  Kind kind_ = Kind::None;  // the open item
  std::string id_;
  std::string text_;
  Json item_logprobs_ = Json::array();
  std::vector<SampleResult> pending_;  // samples whose logprobs have not gone out yet
};

}  // namespace pagoda::server

#include "server/messages_output.h"

#include "server/api_error.h"
#include "server/request_json.h"
#include "server/sse.h"

namespace pagoda::server {

std::string anthropic_event(const Json& data) {
  return "event: " + data.at("type").get<std::string>() + "\ndata: " + dump_json(data) + "\n\n";
}

std::string tool_use_id(const std::string& call_id) {
  const size_t dash = call_id.rfind('-');
  return "toolu_" + (dash == std::string::npos ? call_id : call_id.substr(dash + 1));
}

void MessageContent::emit(const Json& event) {
  if (stream_) events_ += anthropic_event(event);
}

void MessageContent::open(Kind kind) {
  kind_ = kind;
  text_.clear();
  const Json block = kind == Kind::Thinking ? Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                            : Json{{"type", "text"}, {"text", ""}};
  emit({{"type", "content_block_start"}, {"index", blocks_.size()}, {"content_block", block}});
}

void MessageContent::close() {
  if (kind_ == Kind::None) return;
  // A thinking block carries a signature that Anthropic checks when it comes back; pagoda signs
  // nothing, and an empty one says so.
  Json block = kind_ == Kind::Thinking ? Json{{"type", "thinking"}, {"thinking", text_}, {"signature", ""}}
                                       : Json{{"type", "text"}, {"text", text_}};
  emit({{"type", "content_block_stop"}, {"index", blocks_.size()}});
  blocks_.push_back(std::move(block));
  kind_ = Kind::None;
  text_.clear();
}

void MessageContent::text(Kind kind, const std::string& delta) {
  if (delta.empty()) return;
  if (kind_ != kind) {
    close();
    open(kind);
  }
  text_ += delta;
  const Json d = kind == Kind::Thinking ? Json{{"type", "thinking_delta"}, {"thinking", delta}}
                                        : Json{{"type", "text_delta"}, {"text", delta}};
  emit({{"type", "content_block_delta"}, {"index", blocks_.size()}, {"delta", d}});
}

void MessageContent::tool_use(const ParsedToolCall& call) {
  close();
  // The parser gives JSON object text. Anything else, and arguments that nest too deeply or hold
  // an integer beyond 64 bits (parse_arguments_json refuses both), is an empty input rather than a
  // block a client cannot parse; this runs while the reply is sent, where nothing may throw.
  Json input = Json::object();
  try {
    if (std::optional<Json> parsed = parse_arguments_json(call.arguments, "tool_use.input");
        parsed && parsed->is_object())
      input = std::move(*parsed);
  } catch (const ApiError&) {
  }
  const std::string id = tool_use_id(call.id);
  const size_t index = blocks_.size();
  emit({{"type", "content_block_start"},
        {"index", index},
        {"content_block", {{"type", "tool_use"}, {"id", id}, {"name", call.name}, {"input", Json::object()}}}});
  emit({{"type", "content_block_delta"},
        {"index", index},
        {"delta", {{"type", "input_json_delta"}, {"partial_json", dump_json(input)}}}});
  emit({{"type", "content_block_stop"}, {"index", index}});
  blocks_.push_back({{"type", "tool_use"}, {"id", id}, {"name", call.name}, {"input", std::move(input)}});
  ++tool_uses_;
}

void MessageContent::add(const ChatDelta& d) {
  text(Kind::Thinking, d.reasoning);
  text(Kind::Text, d.content);
  for (const ParsedToolCall& c : d.tool_calls) tool_use(c);
}

void MessageContent::finish() { close(); }

std::string anthropic_stop_reason(const RequestOutput& last, bool tool_use, Json& stop_sequence) {
  stop_sequence = nullptr;
  if (last.finish_reason == FinishReason::Length) return "max_tokens";
  if (tool_use) return "tool_use";
  if (!last.stop_string.empty()) {
    stop_sequence = last.stop_string;
    return "stop_sequence";
  }
  return "end_turn";
}

Json anthropic_message(const std::string& id, const std::string& model, Json content, Json stop_reason,
                       Json stop_sequence, int64_t input_tokens, int64_t output_tokens) {
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", std::move(content)},
          {"stop_reason", std::move(stop_reason)},
          {"stop_sequence", std::move(stop_sequence)},
          {"usage", {{"input_tokens", input_tokens}, {"output_tokens", output_tokens}}}};
}

}  // namespace pagoda::server

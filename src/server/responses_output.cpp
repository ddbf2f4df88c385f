#include "server/responses_output.h"

#include "server/openai_response.h"
#include "server/sse.h"

namespace pagoda::server {

void ResponseEvents::emit(Json event) {
  event["sequence_number"] = sequence_++;
  if (!enabled_) return;
  text_ += "event: ";
  text_ += event["type"].get_ref<const std::string&>();
  text_ += "\ndata: ";
  text_ += dump_json(event);
  text_ += "\n\n";
}

namespace {

Json event(const char* type, int64_t output_index) { return {{"type", type}, {"output_index", output_index}}; }

}  // namespace

Json ResponseItems::part_json() const {
  if (kind_ == Kind::Reasoning) return {{"type", "reasoning_text"}, {"text", text_}};
  return {{"type", "output_text"}, {"text", text_}, {"annotations", Json::array()}, {"logprobs", item_logprobs_}};
}

Json ResponseItems::open_item_json(const std::string& status) const {
  const bool started = status == "in_progress";
  if (kind_ == Kind::Reasoning) {
    return {{"type", "reasoning"}, {"id", id_}, {"summary", Json::array()},
            {"content", started ? Json::array() : Json::array({part_json()})}, {"status", status}};
  }
  return {{"type", "message"}, {"id", id_}, {"status", status}, {"role", "assistant"},
          {"content", started ? Json::array() : Json::array({part_json()})}};
}

// output_item.added, then content_part.added with an empty part (the reasoning text is a content
// part of its item as in OpenAI's API; vLLM's reasoning_part events are unknown to the clients).
void ResponseItems::open(Kind kind, ResponseEvents& ev) {
  kind_ = kind;
  id_ = random_id(kind == Kind::Reasoning ? "rs_" : "msg_");
  text_.clear();
  item_logprobs_ = Json::array();
  const int64_t index = static_cast<int64_t>(output_.size());
  Json added = event("response.output_item.added", index);
  added["item"] = open_item_json("in_progress");
  ev.emit(std::move(added));
  Json part = event("response.content_part.added", index);
  part["item_id"] = id_;
  part["content_index"] = 0;
  part["part"] = part_json();
  ev.emit(std::move(part));
}

void ResponseItems::close(const std::string& status, ResponseEvents& ev) {
  if (kind_ == Kind::None) return;
  const int64_t index = static_cast<int64_t>(output_.size());
  const bool reasoning = kind_ == Kind::Reasoning;
  Json done = event(reasoning ? "response.reasoning_text.done" : "response.output_text.done", index);
  done["item_id"] = id_;
  done["content_index"] = 0;
  done["text"] = text_;
  if (!reasoning) done["logprobs"] = item_logprobs_;
  ev.emit(std::move(done));
  Json part = event("response.content_part.done", index);
  part["item_id"] = id_;
  part["content_index"] = 0;
  part["part"] = part_json();
  ev.emit(std::move(part));
  Json item = open_item_json(status);
  Json item_done = event("response.output_item.done", index);
  item_done["item"] = item;
  ev.emit(std::move(item_done));
  output_.push_back(std::move(item));
  kind_ = Kind::None;
}

void ResponseItems::text(Kind kind, const std::string& delta, ResponseEvents& ev) {
  if (delta.empty()) return;
  if (kind_ != kind) {
    close("completed", ev);
    open(kind, ev);
  }
  text_ += delta;
  const int64_t index = static_cast<int64_t>(output_.size());
  if (kind == Kind::Reasoning) {
    Json e = event("response.reasoning_text.delta", index);
    e["item_id"] = id_;
    e["content_index"] = 0;
    e["delta"] = delta;
    ev.emit(std::move(e));
    return;
  }
  Json lp = Json::array();
  if (logprobs_ && !pending_.empty()) {
    lp = chat_logprobs_content(tok_, pending_);
    for (const Json& entry : lp) item_logprobs_.push_back(entry);
  }
  pending_.clear();
  Json e = event("response.output_text.delta", index);
  e["item_id"] = id_;
  e["content_index"] = 0;
  e["delta"] = delta;
  e["logprobs"] = std::move(lp);
  ev.emit(std::move(e));
}

// The parser gives whole tool calls, so the arguments go out in one delta.
void ResponseItems::function_call(const ParsedToolCall& call, ResponseEvents& ev) {
  close("completed", ev);
  const int64_t index = static_cast<int64_t>(output_.size());
  const std::string id = random_id("fc_");
  Json item = {{"type", "function_call"}, {"id", id}, {"call_id", random_id("call_")}, {"name", call.name},
               {"arguments", ""}, {"status", "in_progress"}};
  Json added = event("response.output_item.added", index);
  added["item"] = item;
  ev.emit(std::move(added));
  Json delta = event("response.function_call_arguments.delta", index);
  delta["item_id"] = id;
  delta["delta"] = call.arguments;
  ev.emit(std::move(delta));
  Json args_done = event("response.function_call_arguments.done", index);
  args_done["item_id"] = id;
  args_done["name"] = call.name;
  args_done["arguments"] = call.arguments;
  ev.emit(std::move(args_done));
  item["arguments"] = call.arguments;
  item["status"] = "completed";
  Json done = event("response.output_item.done", index);
  done["item"] = item;
  ev.emit(std::move(done));
  output_.push_back(std::move(item));
}

void ResponseItems::add(const ChatDelta& d, const std::vector<SampleResult>& samples, ResponseEvents& ev) {
  if (logprobs_) pending_.insert(pending_.end(), samples.begin(), samples.end());
  text(Kind::Reasoning, d.reasoning, ev);
  text(Kind::Message, d.content, ev);
  for (const ParsedToolCall& call : d.tool_calls) function_call(call, ev);
}

void ResponseItems::finish(const std::string& status, ResponseEvents& ev) {
  close(status, ev);
  pending_.clear();
}

}  // namespace pagoda::server

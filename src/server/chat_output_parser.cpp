#include "server/chat_output_parser.h"

#include "server/json_body.h"

#include <random>

#include <nlohmann/json.hpp>

namespace pagoda::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kToolOpen = "<tool_call>";
constexpr std::string_view kToolClose = "</tool_call>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::string random_id(const std::string& prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = prefix;
  for (int i = 0; i < 2; ++i) {
    uint64_t v = rng();
    for (int k = 0; k < 16; ++k, v >>= 4) id += kHex[v & 15];
  }
  return id;
}

bool parse_tool_call_body(std::string_view body, ParsedToolCall& out) {
  // Model output is bounded like client input: the arguments are dumped again (recursively).
  std::string error;
  const nlohmann::ordered_json j = parse_json_bounded(body, kMaxJsonDepth, error);
  if (j.is_discarded() || !j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return false;
  out.name = name->get<std::string>();
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");  // Llama 3's JSON tool calls
  if (args == j.end() || args->is_null()) {
    out.arguments = "{}";
  } else if (args->is_string()) {
    out.arguments = args->get<std::string>();
  } else {
    out.arguments = args->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  out.id = random_id("chatcmpl-tool-");
  return true;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t open = prompt.rfind(kThinkOpen);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(kThinkClose);
  return close == std::string_view::npos || close < open;
}

ChatOutputParser::ChatOutputParser(ChatParserOptions options)
    : options_(options),
      state_(options.reasoning && options.starts_in_reasoning ? State::Reasoning : State::Start) {}

ChatDelta ChatOutputParser::feed(std::string_view text) {
  buf_.append(text);
  ChatDelta d;
  run(d, false);
  return d;
}

ChatDelta ChatOutputParser::finish() {
  ChatDelta d;
  run(d, true);
  return d;
}

void ChatOutputParser::emit_content(ChatDelta& d, std::string text) {
  if (strip_leading_space_) {
    size_t i = 0;
    while (i < text.size() && is_space(text[i])) ++i;
    text.erase(0, i);
    if (text.empty()) return;
    strip_leading_space_ = false;
  }
  if (num_tool_calls_ > 0) {
    // Between and after tool calls only real text counts; bare whitespace is dropped.
    size_t i = 0;
    while (i < text.size() && is_space(text[i])) ++i;
    if (i == text.size()) {
      held_space_ += text;
      return;
    }
    text = held_space_ + text;
    held_space_.clear();
  }
  d.content += text;
}

void ChatOutputParser::run(ChatDelta& d, bool at_end) {
  for (;;) {
    switch (state_) {
      case State::Start: {
        // Before any content: an opening <think> (after optional whitespace) starts reasoning.
        size_t i = 0;
        while (i < buf_.size() && is_space(buf_[i])) ++i;
        const std::string_view rest = std::string_view(buf_).substr(i);
        if (options_.reasoning && rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
          buf_.erase(0, i + kThinkOpen.size());
          state_ = State::Reasoning;
          continue;
        }
        if (options_.reasoning && !at_end && kThinkOpen.substr(0, rest.size()) == rest) return;  // undecided
        state_ = State::Content;
        continue;
      }
      case State::Reasoning: {
        const size_t close = buf_.find(kThinkClose);
        if (close != std::string::npos) {
          d.reasoning += buf_.substr(0, close);
          buf_.erase(0, close + kThinkClose.size());
          state_ = State::Content;
          strip_leading_space_ = true;
          continue;
        }
        const size_t hold = at_end ? 0 : partial_tag_suffix(buf_, kThinkClose);
        d.reasoning += buf_.substr(0, buf_.size() - hold);
        buf_.erase(0, buf_.size() - hold);
        return;
      }
      case State::Content: {
        const ToolCallFormat fmt = options_.tool_format;
        if (options_.tool_calls && fmt != ToolCallFormat::kHermes && !content_seen_) {
          // The whole-answer formats are recognised by the answer's first character.
          size_t i = 0;
          while (i < buf_.size() && is_space(buf_[i])) ++i;
          if (i == buf_.size() && !at_end) return;  // only whitespace so far: undecided
          content_seen_ = true;
          const char c = i < buf_.size() ? buf_[i] : '\0';
          if ((fmt == ToolCallFormat::kLlama3Json && (c == '{' || c == '<')) ||
              ((fmt == ToolCallFormat::kMistral || fmt == ToolCallFormat::kPythonic) && (c == '[' || c == '`'))) {
            state_ = State::WholeToolCalls;
            continue;
          }
        }
        if (options_.tool_calls && fmt == ToolCallFormat::kMistral) {
          const size_t open = buf_.find(kMistralTag);
          if (open != std::string::npos) {
            emit_content(d, buf_.substr(0, open));
            buf_.erase(0, open);
            state_ = State::WholeToolCalls;
            continue;
          }
          const size_t hold = at_end ? 0 : partial_tag_suffix(buf_, kMistralTag);
          emit_content(d, buf_.substr(0, buf_.size() - hold));
          buf_.erase(0, buf_.size() - hold);
          return;
        }
        if (options_.tool_calls && fmt != ToolCallFormat::kHermes) {
          emit_content(d, buf_);
          buf_.clear();
          return;
        }
        if (options_.tool_calls) {
          const size_t open = buf_.find(kToolOpen);
          if (open != std::string::npos) {
            emit_content(d, buf_.substr(0, open));
            buf_.erase(0, open + kToolOpen.size());
            state_ = State::ToolCall;
            continue;
          }
        }
        const size_t hold = (at_end || !options_.tool_calls) ? 0 : partial_tag_suffix(buf_, kToolOpen);
        emit_content(d, buf_.substr(0, buf_.size() - hold));
        buf_.erase(0, buf_.size() - hold);
        return;
      }
      case State::WholeToolCalls: {
        // Held to the end: a call is only known to be one once the answer ends.
        if (!at_end) return;
        std::vector<ParsedToolCall> calls;
        const ToolCallFormat fmt = options_.tool_format;
        const bool ok = fmt == ToolCallFormat::kLlama3Json ? parse_llama3_json_calls(buf_, calls)
                        : fmt == ToolCallFormat::kMistral  ? parse_mistral_calls(buf_, calls)
                                                           : parse_pythonic_calls(buf_, calls);
        if (ok && !calls.empty()) {
          for (auto& call : calls) d.tool_calls.push_back(std::move(call));
          num_tool_calls_ += calls.size();
        } else {
          emit_content(d, buf_);
        }
        buf_.clear();
        return;
      }
      case State::ToolCall: {
        const size_t close = buf_.find(kToolClose);
        if (close == std::string::npos && !at_end) return;  // wait for the whole call
        const std::string body = buf_.substr(0, close);
        ParsedToolCall call;
        if (parse_tool_call_body(body, call)) {
          held_space_.clear();
          d.tool_calls.push_back(std::move(call));
          ++num_tool_calls_;
        } else {
          // Not a tool call after all: the text goes out as it came.
          emit_content(d, std::string(kToolOpen) + body + (close == std::string::npos ? "" : std::string(kToolClose)));
        }
        buf_.erase(0, close == std::string::npos ? buf_.size() : close + kToolClose.size());
        state_ = State::Content;
        if (at_end && buf_.empty()) return;
        continue;
      }
    }
  }
}

}  // namespace pagoda::server

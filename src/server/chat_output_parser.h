// Splits a chat completion's text, as it streams, into reasoning (`<think>...</think>`), content and
// Qwen/Hermes-style tool calls (`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`).
// Text that might be the start of a tag is held back until it is known not to be one, so a tag
// never leaks into content. The same parser serves streaming (feed each delta) and whole responses
// (feed everything once).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pagoda::server {

struct ParsedToolCall {
  std::string id;         // "chatcmpl-tool-<hex>"
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct ChatParserOptions {
  bool reasoning = false;           // recognise <think>...</think>
  bool starts_in_reasoning = false; // the prompt already opened <think> (Qwen3 thinking templates)
  bool tool_calls = false;          // recognise <tool_call>...</tool_call>
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(ChatParserOptions options);

  // The parts of `text` (appended to what came before) that are now certain.
  ChatDelta feed(std::string_view text);
  // End of output: everything held back. An unterminated <think> is reasoning; an unterminated or
  // malformed tool call is content.
  ChatDelta finish();
  size_t num_tool_calls() const { return num_tool_calls_; }

 private:
  enum class State { Start, Reasoning, Content, ToolCall };
  void run(ChatDelta& d, bool at_end);
  void emit_content(ChatDelta& d, std::string text);

  ChatParserOptions options_;
  State state_;
  std::string buf_;          // text not yet classified
  std::string held_space_;   // whitespace after a tool call, dropped unless more content follows
  bool strip_leading_space_ = false;  // content right after </think>
  size_t num_tool_calls_ = 0;
};

// Parses the body between <tool_call> and </tool_call>. False when it is not a JSON object with a
// string "name" (arguments: an object, a JSON string, or absent = {}).
bool parse_tool_call_body(std::string_view body, ParsedToolCall& out);

// True when a rendered chat prompt leaves a <think> block open (its generation prompt starts the
// model inside its reasoning), so the output may hold only the closing </think>.
bool prompt_opens_reasoning(std::string_view prompt);

// A fresh id: prefix + 32 hex digits.
std::string random_id(const std::string& prefix);

}  // namespace pagoda::server

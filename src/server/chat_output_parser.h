// Splits a chat completion's text, as it streams, into reasoning (`<think>...</think>`), content and
// tool calls in the syntax of the model's family (ToolCallFormat: Qwen/Hermes `<tool_call>` tags,
// Llama 3 JSON, Mistral `[TOOL_CALLS]`, pythonic `[f(a=1)]`).
// Text that might be the start of a tag is held back until it is known not to be one, so a tag
// never leaks into content. The same parser serves streaming (feed each delta) and whole responses
// (feed everything once).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda {
class Tokenizer;
}

namespace pagoda::server {

struct ParsedToolCall {
  std::string id;         // "chatcmpl-tool-<hex>"; mistral: 9 letters and digits (its template checks)
  std::string name;
  std::string arguments;  // JSON text of the arguments object
};

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ParsedToolCall> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

// vLLM's --tool-call-parser names: hermes (<tool_call>{json}</tool_call>, Qwen), llama3_json
// ({"name": .., "parameters": {..}} as the whole answer, several separated by ';'), mistral
// ([TOOL_CALLS] then a JSON array of calls; the tag is a special token that detokenizing drops, so
// an answer that is such an array counts too), pythonic ([f(a=1), g(b="x")] as the whole answer:
// Gemma 3, Llama 3.2/4 pythonic).
enum class ToolCallFormat { kHermes, kLlama3Json, kMistral, kPythonic };
// nullopt for a name pagoda does not have; "auto" is resolved by the caller.
std::optional<ToolCallFormat> tool_call_format_named(const std::string& name);
// --tool-call-parser's value (auto or a name) for the served model's vocabulary.
ToolCallFormat resolve_tool_call_format(const std::string& option, const Tokenizer* tok);
const char* tool_call_format_name(ToolCallFormat f);

struct ChatParserOptions {
  bool reasoning = false;           // recognise <think>...</think>
  bool starts_in_reasoning = false; // the prompt already opened <think> (Qwen3 thinking templates)
  bool tool_calls = false;          // recognise tool calls (in tool_format)
  ToolCallFormat tool_format = ToolCallFormat::kHermes;
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
  enum class State { Start, Reasoning, Content, ToolCall, WholeToolCalls };
  void run(ChatDelta& d, bool at_end);
  void emit_content(ChatDelta& d, std::string text);

  ChatParserOptions options_;
  State state_;
  std::string buf_;          // text not yet classified
  std::string held_space_;   // whitespace after a tool call, dropped unless more content follows
  bool strip_leading_space_ = false;  // content right after </think>
  size_t num_tool_calls_ = 0;
  bool content_seen_ = false;  // a non-space character of the answer has been read
};

// Parses the body between <tool_call> and </tool_call>. False when it is not a JSON object with a
// string "name" (arguments: an object, a JSON string, or absent = {}).
bool parse_tool_call_body(std::string_view body, ParsedToolCall& out);

// The whole-answer formats: the calls `text` holds, or false (then it is content). Mistral's text
// is what follows [TOOL_CALLS] (or the whole answer); llama3_json's may start with <|python_tag|>.
bool parse_llama3_json_calls(std::string_view text, std::vector<ParsedToolCall>& out);
bool parse_mistral_calls(std::string_view text, std::vector<ParsedToolCall>& out);
bool parse_pythonic_calls(std::string_view text, std::vector<ParsedToolCall>& out);

// True when a rendered chat prompt leaves a <think> block open (its generation prompt starts the
// model inside its reasoning), so the output may hold only the closing </think>.
bool prompt_opens_reasoning(std::string_view prompt);

// A fresh id: prefix + 32 hex digits.
std::string random_id(const std::string& prefix);

}  // namespace pagoda::server

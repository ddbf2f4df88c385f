// POST /v1/messages requests (Anthropic's Messages API, as vLLM serves it), parsed and validated.
// The request becomes chat messages for the model's template, as vLLM translates it: `system` a
// system message first, an assistant's tool_use blocks its tool_calls, a user's tool_result blocks
// tool messages (ahead of the user's text), thinking blocks the assistant's reasoning. Tools become
// function tools (input_schema their parameters); tool_choice any / tool the same forced-call
// grammar as chat's required / named.
#pragma once

#include <optional>
#include <string>

#include "server/openai_request.h"
#include "server/structured_output.h"

namespace pagoda::server {

struct MessagesRequest {
  std::string model;
  ChatPromptRequest prompt;       // messages and tools in the chat-completions shape
  bool parse_tool_calls = false;  // tools given and tool_choice is not none
  SamplingParams params;
  bool stream = false;
  std::optional<RequestedConstraint> constraint;  // tool_choice any / tool
  std::string user;  // metadata.user_id: the end user, for fairness between clients
};

// `defaults`: the sampling values for the fields the request leaves out (generation_config.json).
// Throws ApiError 400 naming the field for anything malformed or not supported.
MessagesRequest parse_messages_request(const Json& body, const SamplingParams& defaults = {});

// The fields that decide the prompt only (POST /v1/messages/count_tokens): max_tokens not needed.
ChatPromptRequest parse_messages_prompt(const Json& body);

// The most messages one request may hold (Anthropic allows 100,000).
inline constexpr size_t kMaxAnthropicMessages = 100000;

}  // namespace pagoda::server

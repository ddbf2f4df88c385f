// POST /v1/responses requests (OpenAI's Responses API, as vLLM serves it), parsed and validated.
// The input items become chat messages for the model's template, as vLLM builds them: instructions
// a system message first, function_call items an assistant's tool_calls, function_call_output
// items tool messages, reasoning items an assistant's reasoning. Nothing is stored, so whatever
// needs a stored response (previous_response_id, conversation, background) is a 400 that says so.
#pragma once

#include <string>

#include "server/openai_request.h"
#include "server/structured_output.h"

namespace pagoda::server {

struct ResponsesRequest {
  std::string model;
  ChatPromptRequest prompt;      // messages and tools in the chat-completions shape
  bool parse_tool_calls = false; // function tools given and tool_choice is "auto"
  SamplingParams params;
  bool stream = false;
  bool logprobs = false;         // include has "message.output_text.logprobs"
  std::optional<RequestedConstraint> constraint;  // text.format json_schema / json_object
  // The request fields a Response object repeats, in its key order: background, instructions,
  // max_tool_calls, parallel_tool_calls, previous_response_id, reasoning, service_tier, store,
  // text, tool_choice, tools, top_logprobs, truncation, user, metadata.
  Json echo = Json::object();
  std::string request_id;  // vLLM's: the response's id when given ("" = a fresh resp_ id)
};

// `defaults`: the sampling values for the fields the request leaves out (generation_config.json).
// Throws ApiError 400 naming the field for anything malformed or not supported.
ResponsesRequest parse_responses_request(const Json& body, const SamplingParams& defaults = {});

// The most input items one request may hold (OpenAI does not say; far beyond any context window).
inline constexpr size_t kMaxInputItems = 100000;

}  // namespace pagoda::server

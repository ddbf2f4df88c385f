// Requests of the OpenAI-compatible API (and vLLM's extensions), parsed and validated. Every
// problem becomes ApiError 400 naming the field; nothing here touches the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"
#include "server/structured_output.h"

namespace pagoda::server {

using Json = nlohmann::ordered_json;

// The body as a JSON object (400 for anything else). Object key order is kept: the chat template
// sees tools and arguments in the order the client wrote them, as Python dicts keep it.
Json parse_json_body(const std::string& body);

struct CompletionPrompt {
  std::optional<std::string> text;  // a text prompt, tokenized by the server
  std::vector<int32_t> token_ids;   // a prompt given as token ids
};

// vLLM's request extensions that the routes apply once the prompt is tokenized (the sampling ones,
// allowed_token_ids, skip_special_tokens and priority, go straight into SamplingParams).
struct VllmExtras {
  std::vector<std::string> bad_words;            // tokenized by the route (needs the tokenizer)
  std::optional<int64_t> truncate_prompt_tokens; // keep the last k prompt tokens; -1 = max_model_len
  bool return_token_ids = false;                 // prompt_token_ids and token_ids in the response
  bool return_tokens_as_token_ids = false;       // logprobs name tokens "token_id:N"
  std::string request_id;                        // the response id's suffix ("" = a fresh one)
  bool continuous_usage_stats = false;           // usage in every streamed chunk (with include_usage)
};

struct CompletionRequest {
  std::string model;  // "" when not given
  std::vector<CompletionPrompt> prompts;
  SamplingParams params;  // params.n choices per prompt
  bool stream = false;
  bool include_usage = false;
  bool echo = false;
  std::optional<RequestedConstraint> constraint;  // structured output, compiled by the route
  VllmExtras extras;
};

// The chat fields that decide the prompt (shared with /tokenize).
// An image part of a chat message: its URL (image_url.url) and where it was, for errors.
struct ImagePart {
  std::string url;
  std::string key;  // "messages[1].content[2]"
};

struct ChatPromptRequest {
  Json messages = Json::array();  // as sent, but text parts joined (see normalize_messages)
  // The image parts in message order; a message with one keeps its content as a list of parts
  // ({"type": "text", "text": ...} and {"type": "image"}) for the template (docs/vision.md).
  std::vector<ImagePart> images;
  Json tools;                     // null or an array of tools
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  Json chat_template_kwargs = Json::object();
  Json documents;  // null or vLLM's documents (an array of objects), for RAG templates
};

struct ChatRequest {
  std::string model;
  ChatPromptRequest prompt;
  bool parse_tool_calls = false;  // tools given and tool_choice is not "none"
  SamplingParams params;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;  // params.logprobs holds top_logprobs when set
  std::optional<RequestedConstraint> constraint;  // structured output or a forced tool call
  // vLLM's chat echo: the last message's content, when its role is the answer's, starts the answer.
  bool echo = false;
  VllmExtras extras;
};

struct TokenizeRequest {
  std::string model;
  std::optional<std::string> prompt;  // text form; otherwise `chat` holds messages
  ChatPromptRequest chat;
  bool return_token_strs = false;
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// `defaults`: the sampling values a request gets for the fields it does not set (the model's
// generation_config.json over the built-in defaults).
CompletionRequest parse_completion_request(const Json& body, const SamplingParams& defaults = {});
ChatRequest parse_chat_request(const Json& body, const SamplingParams& defaults = {});
TokenizeRequest parse_tokenize_request(const Json& body);
DetokenizeRequest parse_detokenize_request(const Json& body);

// The largest top-n logprobs a request may ask for (vLLM's default max_logprobs).
inline constexpr int32_t kMaxLogprobs = 20;
// The most choices one request may fan out into.
inline constexpr int32_t kMaxChoices = 256;
// allowed_token_ids: beyond every vocabulary pagoda serves (a mask over all of it is still one pass
// over the row).
inline constexpr size_t kMaxAllowedTokenIds = size_t{1} << 18;
// bad_words: each is tokenized (twice) and checked against the output on every sampled token.
inline constexpr size_t kMaxBadWords = 64;
inline constexpr size_t kMaxBadWordsBytes = size_t{16} << 10;
// request_id: it becomes part of the response id, as a header can carry it.
inline constexpr size_t kMaxRequestIdBytes = 256;
// The request's `request_id` (absent: nullopt); anything but 1 to kMaxRequestIdBytes visible ASCII
// characters is a 400 naming it.
std::optional<std::string> read_request_id(const Json& j);

}  // namespace pagoda::server

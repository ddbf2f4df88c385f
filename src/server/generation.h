// The steps every generating route shares: check the model name, tokenize and bound the prompt,
// fan a request out into choices, check its budget, submit them, and describe how the connection
// turns the generation into a response (whole, or server-sent events).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/async_engine.h"
#include "server/chat_output_parser.h"
#include "server/http_message.h"
#include "server/server_context.h"
#include "server/structured_output.h"

namespace pagoda::server {

// 404 unless `requested` is empty or one of the served names.
// The LoRA adapter a request's "model" names (its engine slot), -1 for the base model (or no
// model given); anything else is a 404 model_not_found, as vLLM answers.
int32_t check_model_name(const ServerContext& ctx, const std::string& requested);

// Text -> token ids (400 when the model has no tokenizer).
// 400 naming `param` when a request asks for more than --max-tokenize-bytes of text to be tokenized.
void check_tokenize_bytes(const ServerContext& ctx, size_t bytes, const std::string& param);
// A prompt rendered by ChatPrompt, tokenized so that special-token text from the client stays text.
std::vector<int32_t> encode_chat_prompt(const ServerContext& ctx, const std::string& rendered, const std::string& param);
std::vector<int32_t> encode_text(const ServerContext& ctx, const std::string& text, const std::string& param);

// Checks ids against the vocabulary and the context length; sets params.max_tokens when unset to
// what the context has left. Throws ApiError 400 (code context_length_exceeded when too long).
// Prefix caching on a hybrid model: the prompt lengths (tokens of `ids`) where the conversation's
// earlier parts end: the system prompt, and everything before the final user message. Hints for
// where to leave state snapshots, never a correctness matter. Empty when the engine needs none (a
// dense model, or prefix caching off).
std::vector<int32_t> conversation_boundaries(const ServerContext& ctx, const ChatPromptRequest& request,
                                             const std::vector<int32_t>& ids);

// A request's structured-output constraint compiled for the served model (cached); 400 when it
// does not compile, or when the model has no tokenizer to map tokens to bytes.
std::shared_ptr<structured::GrammarRuntime> compile_for_engine(const ServerContext& ctx, const RequestedConstraint& c);

// The chat-shaped routes' output reading for a rendered prompt: reasoning when --reasoning-parser is
// on and the vocabulary has <think> and </think> (begun already when the prompt opened it), tool
// calls when the request asks (`parse_tool_calls`) in the served syntax. The request's constraint
// goes into params.grammar, forced calls written in that syntax, held until </think> when the
// answer starts inside reasoning.
ChatParserOptions chat_output_options(const ServerContext& ctx, const std::string& prompt_text, bool parse_tool_calls,
                                      std::optional<RequestedConstraint>& constraint, SamplingParams& params);

void fit_prompt(const ServerContext& ctx, const std::vector<int32_t>& prompt, SamplingParams& params,
                const std::string& param);

// vLLM's truncate_prompt_tokens: the last k tokens of the prompt (-1: the last max_model_len). 400
// naming the field when k is beyond max_model_len, as vLLM refuses it.
void truncate_prompt(const ServerContext& ctx, std::vector<int32_t>& ids, const std::optional<int64_t>& keep);

// What of vLLM's extensions needs the served model or the server's flags: bad_words tokenized into
// params (400 without a tokenizer), priority checked against --scheduling-policy (fcfs refuses a
// non-zero one, as vLLM does).
void apply_vllm_params(const ServerContext& ctx, const VllmExtras& extras, SamplingParams& params);

// A response's id as vLLM makes it: `prefix` + the client's X-Request-Id header (when a header can
// carry it as it is), else the body's request_id, else a fresh random id.
std::string response_id(const HttpRequest& req, const std::string& prefix, const VllmExtras& extras);

// n choices of one prompt; with a seed, choice i uses seed + i so that they differ. The stop
// strings are shared between the choices, not copied.
void fan_out(const std::vector<int32_t>& prompt, const SamplingParams& params, std::vector<ChoiceSpec>& out);

// Checks the request against ServerOptions::request (stop strings, logprobs, the output budget),
// then submits it. Throws ApiError 400 naming the limit, or 503 (with Retry-After) when the engine
// is overloaded or shutting down.
// `client` groups requests for fair scheduling (fairness_client).
std::shared_ptr<GenerationChannel> submit(ServerContext& ctx, std::vector<ChoiceSpec> choices,
                                          const std::string& client = "");

// Who a request is for fairness between clients: OpenAI's `user` field (the end-user the
// application serves) when it is a string; else, when the server has several API keys (one per
// tenant), the key the request presented (as a hash: keys never reach logs or messages); else ""
// (every such request shares one client, and is still taken in turn with the others of that client).
std::string fairness_client(const ServerContext& ctx, const HttpRequest& req, const nlohmann::ordered_json& body);

// A whole response: `on_output` sees each output as it arrives, `finish` makes the body after the
// last one (a channel error becomes a 500 instead).
HttpReply whole_reply(std::shared_ptr<GenerationChannel> channel, std::function<void(ChoiceOutput&)> on_output,
                      std::function<nlohmann::ordered_json()> finish);

// A text/event-stream response: `on_events` turns outputs into events, `on_end` gives the last events
// (before "data: [DONE]").
HttpReply stream_reply(std::shared_ptr<GenerationChannel> channel,
                       std::function<std::string(std::vector<ChoiceOutput>&)> on_events,
                       std::function<std::string()> on_end);

}  // namespace pagoda::server

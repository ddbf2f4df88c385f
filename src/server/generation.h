// The steps every generating route shares: check the model name, tokenize and bound the prompt,
// fan a request out into choices, submit them, and drive a channel to the end (whole response) or
// stream it as server-sent events.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/async_engine.h"
#include "server/server_context.h"

namespace httplib {
struct Response;
}

namespace pagoda::server {

// 404 unless `requested` is empty or one of the served names.
void check_model_name(const ServerContext& ctx, const std::string& requested);

// Text -> token ids (400 when the model has no tokenizer).
std::vector<int32_t> encode_text(const ServerContext& ctx, const std::string& text, const std::string& param);

// Checks ids against the vocabulary and the context length; sets params.max_tokens when unset to
// what the context has left. Throws ApiError 400 (code context_length_exceeded when too long).
void fit_prompt(const ServerContext& ctx, const std::vector<int32_t>& prompt, SamplingParams& params,
                const std::string& param);

// n choices of one prompt; with a seed, choice i uses seed + i so that they differ.
void fan_out(const std::vector<int32_t>& prompt, const SamplingParams& params, std::vector<ChoiceSpec>& out);

// Submits, or throws ApiError 503.
std::shared_ptr<GenerationChannel> submit(ServerContext& ctx, std::vector<ChoiceSpec> choices);

// Waits for every output of the channel, passing each to `on_output`. Throws ApiError 500 when the
// engine failed the request.
void collect(const std::shared_ptr<GenerationChannel>& channel, const std::function<void(ChoiceOutput&)>& on_output);

// Streams the channel as text/event-stream: `on_outputs` turns outputs into events, `on_end` gives
// the last events (before "data: [DONE]"). A client that goes away cancels the generation.
void stream_events(ServerContext& ctx, httplib::Response& res, std::shared_ptr<GenerationChannel> channel,
                   std::function<std::string(std::vector<ChoiceOutput>&)> on_outputs,
                   std::function<std::string()> on_end);

void send_json(httplib::Response& res, const nlohmann::ordered_json& body, int status = 200);

}  // namespace pagoda::server

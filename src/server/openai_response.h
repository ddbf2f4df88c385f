// Pieces of OpenAI responses built from engine outputs: finish reasons, usage, logprobs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace pagoda::server {

using Json = nlohmann::ordered_json;

// "stop" / "length" / "abort".
std::string finish_reason_text(FinishReason r);
// vLLM's stop_reason: the stop string or stop token id the client asked for that ended the choice;
// null for EOS, length and abort.
Json stop_reason_json(const RequestOutput& o, const SamplingParams& params);

// With `prompt_details`, usage.prompt_tokens_details {cached_tokens} as vLLM's
// --enable-prompt-tokens-details: `cached_tokens`, the prompt tokens found in the prefix cache.
Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, bool prompt_details = false, int64_t cached_tokens = 0);

// Seconds since the epoch, for "created".
int64_t unix_now();

// The text of one token as logprobs show it ("token_id:N" without a tokenizer).
std::string token_text(const Tokenizer* tok, int32_t id);

// Completions logprobs {tokens, token_logprobs, top_logprobs, text_offset} for `samples`;
// `text_offset` is where the first token's text starts and moves past the last.
Json completion_logprobs(const Tokenizer* tok, const std::vector<SampleResult>& samples, int64_t& text_offset);
// Chat logprobs entries [{token, logprob, bytes, top_logprobs: [...]}, ...].
Json chat_logprobs_content(const Tokenizer* tok, const std::vector<SampleResult>& samples);

}  // namespace pagoda::server

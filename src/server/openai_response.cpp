#include "server/openai_response.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace pagoda::server {
namespace {

// -inf (a token the sampler masked) as vLLM reports it.
double finite_logprob(float lp) { return std::isfinite(lp) ? std::max<double>(lp, -9999.0) : -9999.0; }

Json token_bytes_json(const Tokenizer* tok, int32_t id) {
  Json bytes = Json::array();
  if (!tok) return bytes;
  for (unsigned char c : tok->token_bytes(id)) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

std::string finish_reason_text(FinishReason r) {
  const char* s = finish_reason_name(r);
  return s && *s ? s : "stop";
}

Json stop_reason_json(const RequestOutput& o, const SamplingParams& params) {
  if (!o.stop_string.empty()) return o.stop_string;
  if (o.finish_reason == FinishReason::Stop && o.stop_token >= 0 &&
      params.stop_token_ids.contains(o.stop_token))
    return o.stop_token;
  return nullptr;
}

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, bool prompt_details, int64_t cached_tokens) {
  Json u = {{"prompt_tokens", prompt_tokens},
            {"total_tokens", prompt_tokens + completion_tokens},
            {"completion_tokens", completion_tokens}};
  if (prompt_details) u["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
  return u;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string token_text(const Tokenizer* tok, int32_t id) {
  if (!tok || id < 0 || id >= tok->vocab_size()) return "token_id:" + std::to_string(id);
  try {
    return tok->decode({id});
  } catch (const std::exception&) {
    return "token_id:" + std::to_string(id);
  }
}

Json completion_logprobs(const Tokenizer* tok, const std::vector<SampleResult>& samples, int64_t& text_offset) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  for (const SampleResult& s : samples) {
    const std::string text = token_text(tok, s.token);
    tokens.push_back(text);
    token_logprobs.push_back(finite_logprob(s.logprob));
    Json entry = Json::object();
    for (const auto& [id, lp] : s.top_logprobs) entry[token_text(tok, id)] = finite_logprob(lp);
    top.push_back(std::move(entry));
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(text.size());
  }
  return {{"text_offset", offsets}, {"token_logprobs", token_logprobs}, {"tokens", tokens}, {"top_logprobs", top}};
}

Json chat_logprobs_content(const Tokenizer* tok, const std::vector<SampleResult>& samples) {
  Json content = Json::array();
  for (const SampleResult& s : samples) {
    Json top = Json::array();
    for (const auto& [id, lp] : s.top_logprobs)
      top.push_back({{"token", token_text(tok, id)}, {"logprob", finite_logprob(lp)}, {"bytes", token_bytes_json(tok, id)}});
    content.push_back({{"token", token_text(tok, s.token)},
                       {"logprob", finite_logprob(s.logprob)},
                       {"bytes", token_bytes_json(tok, s.token)},
                       {"top_logprobs", std::move(top)}});
  }
  return content;
}

}  // namespace pagoda::server

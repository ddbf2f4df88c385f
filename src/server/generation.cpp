#include "server/generation.h"

#include <algorithm>
#include <cstdio>

#include "server/api_error.h"
#include "server/chat_output_parser.h"
#include "server/router.h"
#include "server/special_text.h"
#include "server/sse.h"

namespace pagoda::server {

using namespace std::chrono_literals;

int32_t check_model_name(const ServerContext& ctx, const std::string& requested) {
  if (requested.empty()) return -1;
  const auto& names = ctx.options.served_model_names;
  if (std::find(names.begin(), names.end(), requested) != names.end()) return -1;
  if (const auto loras = ctx.engine.loras())
    if (const std::optional<LoraEntry> e = loras->find(requested)) return e->id;
  throw not_found("The model `" + requested + "` does not exist.", "model_not_found");
}

void check_tokenize_bytes(const ServerContext& ctx, size_t bytes, const std::string& param) {
  const int64_t limit = ctx.options.request.max_tokenize_bytes;
  if (static_cast<int64_t>(bytes) > limit)
    throw bad_request("the text to tokenize has " + std::to_string(bytes) + " bytes; at most " +
                          std::to_string(limit) + " are allowed (--max-tokenize-bytes)",
                      param, "request_too_large");
}

std::vector<int32_t> encode_text(const ServerContext& ctx, const std::string& text, const std::string& param) {
  const Tokenizer* tok = ctx.engine.tokenizer();
  if (!tok) throw bad_request("this model has no tokenizer.json: give the prompt as token ids", param);
  check_tokenize_bytes(ctx, text.size(), param);
  return tok->encode(text);
}

std::vector<int32_t> encode_chat_prompt(const ServerContext& ctx, const std::string& rendered, const std::string& param) {
  const Tokenizer* tok = ctx.engine.tokenizer();
  if (!tok) throw bad_request("this model has no tokenizer.json: give the prompt as token ids", param);
  check_tokenize_bytes(ctx, rendered.size(), param);
  std::vector<size_t> literal_at;
  const std::string text = SpecialTextGuard::unmark(rendered, literal_at);
  if (literal_at.empty()) return tok->encode(text);
  return tok->encode_literal_at(text, literal_at);
}

std::vector<int32_t> conversation_boundaries(const ServerContext& ctx, const ChatPromptRequest& request,
                                             const std::vector<int32_t>& ids) {
  const Tokenizer* tok = ctx.engine.tokenizer();
  if (!ctx.chat || !tok || !ctx.engine.hybrid_prefix_caching() || !request.messages.is_array()) return {};
  const Json& msgs = request.messages;
  auto role = [&](size_t i) { return msgs[i].is_object() ? msgs[i].value("role", "") : std::string(); };
  // The first message after the leading system ones, and the last user message: a request that
  // shares the system prompt (or the whole conversation so far) differs from here on. Rendering
  // the prompt with that message's text emptied and comparing tokens finds where, whatever the
  // template wraps around messages (a template may refuse a conversation cut short, so none is).
  size_t first = 0;
  while (first < msgs.size() && (role(first) == "system" || role(first) == "developer")) ++first;
  size_t last_user = msgs.size();
  while (last_user > 0 && role(last_user - 1) != "user") --last_user;
  std::vector<size_t> at;
  if (first > 0 && first < msgs.size()) at.push_back(first);
  if (last_user > 0 && last_user - 1 != first) at.push_back(last_user - 1);
  std::vector<int32_t> out;
  for (size_t i : at) {
    if (!msgs[i].contains("content") || !msgs[i]["content"].is_string()) continue;
    ChatPromptRequest variant = request;
    variant.messages[i]["content"] = "";
    try {
      const std::vector<int32_t> t = encode_chat_prompt(ctx, ctx.chat->render(variant), "messages");
      const auto common = static_cast<int32_t>(std::mismatch(t.begin(), t.end(), ids.begin(), ids.end()).first - t.begin());
      if (common > 0 && common + 1 < static_cast<int32_t>(ids.size())) out.push_back(common);
    } catch (const std::exception&) {
      // A template that refuses the emptied message: no boundary there.
    }
  }
  return out;
}

std::shared_ptr<structured::GrammarRuntime> compile_for_engine(const ServerContext& ctx, const RequestedConstraint& c) {
  const Tokenizer* tok = ctx.engine.tokenizer();
  if (!tok) throw bad_request("structured output needs the model's tokenizer, and this model has none", c.param);
  std::vector<int32_t> eos;
  for (int64_t id : ctx.engine.model_config().eos_token_ids) eos.push_back(static_cast<int32_t>(id));
  return compile_constraint_cached(c, *tok, eos);
}

void fit_prompt(const ServerContext& ctx, const std::vector<int32_t>& prompt, SamplingParams& params,
                const std::string& param) {
  if (prompt.empty()) throw bad_request("the prompt is empty", param);
  const int32_t vocab = static_cast<int32_t>(ctx.engine.model_config().vocab_size);
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab)
      throw bad_request("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(vocab) + ")", param);
  // The count first: the vocabulary check below walks the entries.
  if (params.logit_bias && static_cast<int64_t>(params.logit_bias->size()) > ctx.options.request.max_logit_bias)
    throw bad_request("logit_bias has " + std::to_string(params.logit_bias->size()) + " entries; at most " +
                          std::to_string(ctx.options.request.max_logit_bias) + " are allowed (--max-logit-bias)",
                      "logit_bias");
  if (params.logit_bias)
    for (const auto& [id, bias] : *params.logit_bias)
      if (id >= vocab)
        throw bad_request("logit_bias names token id " + std::to_string(id) + ", outside the vocabulary [0, " +
                              std::to_string(vocab) + ")", "logit_bias");
  if (!params.allowed_token_ids.empty() && params.allowed_token_ids.list().back() >= vocab)
    throw bad_request("allowed_token_ids names token id " + std::to_string(params.allowed_token_ids.list().back()) +
                          ", outside the vocabulary [0, " + std::to_string(vocab) + ")", "allowed_token_ids");
  if (!params.stop.empty() && !ctx.engine.tokenizer())
    throw bad_request("stop strings need a tokenizer, and this model has none; use stop_token_ids", "stop");
  const int64_t max_len = ctx.engine.max_model_len();
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int64_t want = params.max_tokens ? *params.max_tokens : std::max<int64_t>(1, max_len - n);
  if (n + want > max_len) {
    throw bad_request("This model's maximum context length is " + std::to_string(max_len) +
                          " tokens. However, you requested " + std::to_string(n + want) + " tokens (" +
                          std::to_string(n) + " in the prompt, " + std::to_string(want) +
                          " in the completion). Please reduce the length of the prompt or completion.",
                      param, "context_length_exceeded");
  }
  params.max_tokens = static_cast<int32_t>(want);
}

void truncate_prompt(const ServerContext& ctx, std::vector<int32_t>& ids, const std::optional<int64_t>& keep) {
  if (!keep || *keep == 0) return;
  const int64_t max_len = ctx.engine.max_model_len();
  if (*keep > max_len)
    throw bad_request("truncate_prompt_tokens (" + std::to_string(*keep) + ") is greater than max_model_len (" +
                          std::to_string(max_len) + "); give a smaller value, or -1 for max_model_len",
                      "truncate_prompt_tokens");
  const int64_t k = *keep < 0 ? max_len : *keep;
  if (static_cast<int64_t>(ids.size()) > k) ids.erase(ids.begin(), ids.end() - k);
}

void apply_vllm_params(const ServerContext& ctx, const VllmExtras& extras, SamplingParams& params) {
  if (params.priority != 0 && !ctx.options.priority_scheduling)
    throw bad_request("priority " + std::to_string(params.priority) +
                          " needs priority scheduling; this server schedules first come, first served (start it "
                          "with --scheduling-policy priority, or leave priority out)",
                      "priority");
  if (extras.bad_words.empty()) return;
  const Tokenizer* tok = ctx.engine.tokenizer();
  if (!tok) throw bad_request("bad_words need a tokenizer, and this model has none", "bad_words");
  // As vLLM: each word as written (leading spaces dropped), and with one leading space when that
  // tokenizes into as many tokens, starting differently (the word inside a sentence).
  auto words = std::make_shared<std::vector<std::vector<int32_t>>>();
  for (const std::string& word : extras.bad_words) {
    const size_t start = word.find_first_not_of(' ');
    const std::string bare = start == std::string::npos ? "" : word.substr(start);
    if (bare.empty()) throw bad_request("bad_words cannot contain an empty word", "bad_words");
    check_tokenize_bytes(ctx, bare.size() + 1, "bad_words");
    std::vector<int32_t> plain = tok->encode(bare);
    std::vector<int32_t> spaced = tok->encode(" " + bare);
    if (plain.empty()) continue;
    const bool add_spaced = !spaced.empty() && spaced.front() != plain.front() && spaced.size() == plain.size();
    words->push_back(std::move(plain));
    if (add_spaced) words->push_back(std::move(spaced));
  }
  const int32_t vocab = static_cast<int32_t>(ctx.engine.model_config().vocab_size);
  for (const auto& w : *words)
    for (int32_t id : w)
      if (id < 0 || id >= vocab)
        throw bad_request("a bad word tokenizes to token id " + std::to_string(id) + ", outside the vocabulary [0, " +
                              std::to_string(vocab) + ")", "bad_words");
  params.bad_words_token_ids = std::move(words);
}

std::string response_id(const HttpRequest& req, const std::string& prefix, const VllmExtras& extras) {
  const std::string header(req.header("x-request-id"));
  bool usable = !header.empty() && header.size() <= kMaxRequestIdBytes;
  for (char c : header) usable = usable && c >= 0x21 && c <= 0x7e;
  if (usable) return prefix + header;
  if (!extras.request_id.empty()) return prefix + extras.request_id;
  return random_id(prefix);
}

void fan_out(const std::vector<int32_t>& prompt, const SamplingParams& params, std::vector<ChoiceSpec>& out) {
  for (int32_t i = 0; i < std::max(1, params.n); ++i) {
    ChoiceSpec c{prompt, params};
    c.params.n = 1;
    if (params.seed) c.params.seed = *params.seed + static_cast<uint64_t>(i);
    out.push_back(std::move(c));
  }
}

namespace {

void check_budget(const ServerContext& ctx, const std::vector<ChoiceSpec>& choices) {
  if (choices.empty()) return;
  const RequestLimits& lim = ctx.options.request;
  const SamplingParams& p = choices.front().params;  // the stop list and logprobs are the request's
  if (static_cast<int64_t>(p.stop.size()) > lim.max_stop_strings)
    throw bad_request("stop has " + std::to_string(p.stop.size()) + " strings; at most " +
                          std::to_string(lim.max_stop_strings) + " are allowed (--max-stop-strings)", "stop");
  if (p.stop.total_bytes() > lim.max_stop_bytes)
    throw bad_request("the stop strings have " + std::to_string(p.stop.total_bytes()) + " bytes; at most " +
                          std::to_string(lim.max_stop_bytes) + " are allowed (--max-stop-bytes)", "stop");
  if (static_cast<int64_t>(p.stop_token_ids.size()) > lim.max_stop_token_ids)
    throw bad_request("stop_token_ids has " + std::to_string(p.stop_token_ids.size()) + " distinct ids; at most " +
                          std::to_string(lim.max_stop_token_ids) + " are allowed (--max-stop-token-ids)",
                      "stop_token_ids");
  if (p.logprobs && *p.logprobs > lim.max_logprobs)
    throw bad_request("at most " + std::to_string(lim.max_logprobs) + " logprobs per token may be asked for, got " +
                          std::to_string(*p.logprobs) + " (--max-logprobs)", "logprobs");
  int64_t budget = 0;
  for (const ChoiceSpec& c : choices)
    budget += int64_t{c.params.max_tokens.value_or(1)} * (1 + c.params.logprobs.value_or(0));
  if (budget > lim.max_output_budget)
    throw bad_request("the request could produce " + std::to_string(budget) +
                          " tokens and logprob entries (choices x max_tokens x (1 + logprobs)); the server "
                          "allows " + std::to_string(lim.max_output_budget) +
                          " per request (--max-request-output-budget): lower n, max_tokens or logprobs",
                      "max_tokens", "request_too_large");
}

}  // namespace

std::shared_ptr<GenerationChannel> submit(ServerContext& ctx, std::vector<ChoiceSpec> choices,
                                          const std::string& client) {
  check_budget(ctx, choices);
  std::string why;
  auto channel = ctx.engine.submit(std::move(choices), why, client);
  if (!channel) throw unavailable(why);
  return channel;
}

std::string fairness_client(const ServerContext& ctx, const HttpRequest& req, const nlohmann::ordered_json& body) {
  // The prefixes keep the two kinds apart: no `user` value can pose as a key's client.
  if (const auto it = body.find("user"); it != body.end() && it->is_string())
    return "user:" + it->get_ref<const std::string&>().substr(0, 256);  // an identifier, not a payload
  const std::optional<std::string_view> token = request_api_key(req);
  if (ctx.options.api_keys.size() < 2 || !token) return "";
  uint64_t h = 1469598103934665603ull;  // FNV-1a: an identity, not a secret (the key passed auth)
  for (const unsigned char c : *token) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("key:") + hex;
}

HttpReply whole_reply(std::shared_ptr<GenerationChannel> channel, std::function<void(ChoiceOutput&)> on_output,
                      std::function<nlohmann::ordered_json()> finish) {
  HttpReply r;
  r.generation = std::make_shared<GenerationReply>();
  r.generation->channel = std::move(channel);
  r.generation->on_output = std::move(on_output);
  r.generation->finish = std::move(finish);
  return r;
}

HttpReply stream_reply(std::shared_ptr<GenerationChannel> channel,
                       std::function<std::string(std::vector<ChoiceOutput>&)> on_events,
                       std::function<std::string()> on_end) {
  HttpReply r;
  r.content_type = "text/event-stream";
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.generation = std::make_shared<GenerationReply>();
  r.generation->channel = std::move(channel);
  r.generation->stream = true;
  r.generation->on_events = std::move(on_events);
  r.generation->on_end = std::move(on_end);
  return r;
}

HttpReply json_reply(const nlohmann::ordered_json& body, int status) {
  return text_reply(dump_json(body), "application/json", status);
}

HttpReply text_reply(std::string body, std::string content_type, int status) {
  HttpReply r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  return r;
}

ChatParserOptions chat_output_options(const ServerContext& ctx, const std::string& prompt_text, bool parse_tool_calls,
                                      std::optional<RequestedConstraint>& constraint, SamplingParams& params) {
  const Tokenizer* tok = ctx.engine.tokenizer();
  auto has_token = [tok](const char* text) { return tok && tok->token_to_id(text).has_value(); };
  ChatParserOptions popts;
  popts.reasoning = ctx.options.reasoning_parser && has_token("<think>") && has_token("</think>");
  popts.starts_in_reasoning = popts.reasoning && prompt_opens_reasoning(prompt_text);
  popts.tool_format = resolve_tool_call_format(ctx.options.tool_call_format, tok);
  popts.tool_calls = parse_tool_calls && ctx.options.tool_call_parser;
  // Forced calls (tool_choice required or named) are written in the syntax the parser reads.
  if (constraint && constraint->constraint.kind == structured::ConstraintKind::kToolCalls)
    constraint->constraint.tool_syntax = tool_call_format_name(popts.tool_format);
  if (constraint) {
    params.grammar = compile_for_engine(ctx, *constraint);
    // Reasoning (the template opened <think>) stays free; the constraint holds for the answer.
    if (popts.starts_in_reasoning) params.grammar_after_token = *tok->token_to_id("</think>");
  }
  return popts;
}

}  // namespace pagoda::server

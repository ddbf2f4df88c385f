// POST /v1/responses: OpenAI's Responses API as vLLM serves it, stateless (nothing is stored).
// The input items go through the model's chat template like chat messages; the output is parsed
// into reasoning, message and function_call items like a chat completion's; whole or streamed as
// numbered `event:` / `data:` server-sent events that end with the final response.
#include "server/api_error.h"
#include "server/generation.h"
#include "server/openai_response.h"
#include "server/responses_output.h"
#include "server/responses_request.h"
#include "server/pooling_runner.h"
#include "server/routes.h"

namespace pagoda::server {
namespace {

// Output tokens inside <think>...</think>, for usage.output_tokens_details.reasoning_tokens: vLLM's
// count (a depth counter over the marker tokens), starting inside when the prompt opened <think>.
class ReasoningTokenCounter {
 public:
  ReasoningTokenCounter(const Tokenizer* tok, bool enabled, bool starts_inside) {
    if (!enabled) return;
    open_ = *tok->token_to_id("<think>");
    close_ = *tok->token_to_id("</think>");
    depth_ = starts_inside ? 1 : 0;
  }
  void feed(const std::vector<int32_t>& ids) {
    if (open_ < 0) return;
    for (int32_t id : ids) {
      if (id == open_) ++depth_;
      else if (id == close_) depth_ = depth_ > 0 ? depth_ - 1 : 0;
      else if (depth_ > 0) ++count_;
    }
  }
  int64_t count() const { return count_; }

 private:
  int32_t open_ = -1, close_ = -1;
  int64_t depth_ = 0, count_ = 0;
};

// What every Response object of one request shares.
struct ResponseHead {
  std::string id;
  int64_t created_at = 0;
  std::string model;
  Json echo;  // ResponsesRequest::echo
  double temperature = 1, top_p = 1;
  int64_t max_output_tokens = 0;
  int64_t input_tokens = 0;
};

struct ResponseState {
  ResponseState(const Tokenizer* tok, const ChatParserOptions& popts, bool logprobs, bool stream)
      : parser(popts), items(tok, logprobs), events(stream),
        reasoning_tokens(tok, popts.reasoning, popts.starts_in_reasoning) {}
  ChatOutputParser parser;
  ResponseItems items;
  ResponseEvents events;
  ReasoningTokenCounter reasoning_tokens;
  bool started = false;  // streaming: response.created went out
  FinishReason finish = FinishReason::None;
  int64_t output_tokens = 0;
  int64_t cached_tokens = 0;
};

// One engine output: parsed into items (and their events); the open item closes with the output.
void consume(ResponseState& s, const RequestOutput& out) {
  ChatDelta d = s.parser.feed(out.new_text);
  s.reasoning_tokens.feed(out.new_token_ids);
  if (out.finished) {
    ChatDelta rest = s.parser.finish();
    d.reasoning += rest.reasoning;
    d.content += rest.content;
    for (auto& c : rest.tool_calls) d.tool_calls.push_back(std::move(c));
  }
  s.items.add(d, out.samples, s.events);
  if (out.finished) {
    s.finish = out.finish_reason;
    s.output_tokens = out.num_output_tokens;
    s.cached_tokens = out.num_cached_tokens;
    s.items.finish(out.finish_reason == FinishReason::Length ? "incomplete" : "completed", s.events);
  }
}

std::string status_of(FinishReason r) {
  if (r == FinishReason::Length) return "incomplete";
  if (r == FinishReason::Abort) return "failed";
  return "completed";
}

// The Response object, in the key order of OpenAI's reference. `usage` null while in progress.
Json response_json(const ResponseHead& h, const std::string& status, Json output, Json usage) {
  const Json& e = h.echo;
  Json r = {{"id", h.id}, {"object", "response"}, {"created_at", h.created_at}, {"status", status},
            {"background", e.at("background")}, {"error", nullptr}, {"incomplete_details", nullptr}};
  if (status == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (status == "failed")
    r["error"] = {{"code", "server_error"},
                  {"message", "the generation was aborted before it finished (the server is shutting down)"}};
  r["instructions"] = e.at("instructions");
  r["max_output_tokens"] = h.max_output_tokens;
  r["max_tool_calls"] = e.at("max_tool_calls");
  r["model"] = h.model;
  r["output"] = std::move(output);
  for (const char* k : {"parallel_tool_calls", "previous_response_id", "reasoning", "service_tier", "store"})
    r[k] = e.at(k);
  r["temperature"] = h.temperature;
  for (const char* k : {"text", "tool_choice", "tools", "top_logprobs"}) r[k] = e.at(k);
  r["top_p"] = h.top_p;
  r["truncation"] = e.at("truncation");
  r["usage"] = std::move(usage);
  r["user"] = e.at("user");
  r["metadata"] = e.at("metadata");
  return r;
}

Json usage_of(const ResponseHead& h, const ResponseState& s) {
  return {{"input_tokens", h.input_tokens},
          {"input_tokens_details", {{"cached_tokens", s.cached_tokens}}},
          {"output_tokens", s.output_tokens},
          {"output_tokens_details", {{"reasoning_tokens", s.reasoning_tokens.count()}}},
          {"total_tokens", h.input_tokens + s.output_tokens}};
}

Json final_response(const ResponseHead& h, const ResponseState& s) {
  return response_json(h, status_of(s.finish), s.items.output(), usage_of(h, s));
}

// response.created and response.in_progress: the response with no output yet.
void emit_start(const ResponseHead& h, ResponseState& s) {
  const Json pending = response_json(h, "in_progress", Json::array(), nullptr);
  s.events.emit({{"type", "response.created"}, {"response", pending}});
  s.events.emit({{"type", "response.in_progress"}, {"response", pending}});
  s.started = true;
}

}  // namespace

HttpReply handle_responses(ServerContext& ctx, const HttpRequest& req) {
  require_generate_runner(ctx, "Responses API");
  const Json body = parse_json_body(req.body);
  ResponsesRequest r = parse_responses_request(body, ctx.sampling_defaults);
  r.params.lora = check_model_name(ctx, r.model);
  apply_vllm_params(ctx, VllmExtras{}, r.params);  // priority against --scheduling-policy
  if (!ctx.chat) throw bad_request("this model has no chat template; use /v1/completions", "input");
  const std::string prompt_text = ctx.chat->render(r.prompt);
  const std::vector<int32_t> ids = encode_chat_prompt(ctx, prompt_text, "input");
  fit_prompt(ctx, ids, r.params, "input");
  const Tokenizer* tok = ctx.engine.tokenizer();
  const ChatParserOptions popts = chat_output_options(ctx, prompt_text, r.parse_tool_calls, r.constraint, r.params);
  std::vector<ChoiceSpec> specs;
  fan_out(ids, r.params, specs);

  auto state = std::make_shared<ResponseState>(tok, popts, r.logprobs, r.stream);

  auto head = std::make_shared<ResponseHead>();
  head->id = r.request_id.empty() ? random_id("resp_") : r.request_id;
  head->created_at = unix_now();
  head->model = r.model.empty() ? ctx.model_name() : r.model;
  head->echo = std::move(r.echo);
  head->temperature = r.params.temperature;
  head->top_p = r.params.top_p;
  head->max_output_tokens = r.params.max_tokens.value_or(0);
  head->input_tokens = static_cast<int64_t>(ids.size());
  auto channel = submit(ctx, std::move(specs), fairness_client(ctx, req, body));

  if (!r.stream) {
    return whole_reply(
        channel, [state](ChoiceOutput& o) { consume(*state, o.out); },
        [state, head] { return final_response(*head, *state); });
  }
  HttpReply reply = stream_reply(
      channel,
      [state, head](std::vector<ChoiceOutput>& outputs) {
        if (!state->started) emit_start(*head, *state);
        for (const ChoiceOutput& o : outputs) consume(*state, o.out);
        return state->events.take();
      },
      [state, head] {
        if (!state->started) emit_start(*head, *state);
        if (state->finish == FinishReason::None) {  // no last output: close what is open
          state->finish = FinishReason::Abort;
          state->items.finish("incomplete", state->events);
        }
        const std::string status = status_of(state->finish);
        state->events.emit({{"type", "response." + status}, {"response", final_response(*head, *state)}});
        return state->events.take();
      });
  reply.generation->done_marker = false;  // the Responses API ends with its final event
  return reply;
}

}  // namespace pagoda::server

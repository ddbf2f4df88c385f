// POST /v1/completions: text (or token-id) prompts, n choices each, whole or streamed.
#include "server/api_error.h"
#include "server/chat_output_parser.h"
#include "server/generation.h"
#include "server/openai_response.h"
#include "server/pooling_runner.h"
#include "server/routes.h"
#include "server/sse.h"

namespace pagoda::server {
namespace {

struct CompletionChoice {
  std::string text;
  std::vector<int32_t> token_ids;  // return_token_ids
  std::vector<SampleResult> samples;
  RequestOutput last;  // the finishing output
};

struct StreamState {
  std::vector<int64_t> text_offsets;
  std::vector<bool> echoed;
  std::vector<bool> started;  // return_token_ids: the choice's prompt_token_ids went out
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // of the first choice
};

}  // namespace

HttpReply handle_completions(ServerContext& ctx, const HttpRequest& req) {
  require_generate_runner(ctx, "Completions API");
  const Json body = parse_json_body(req.body);
  CompletionRequest r = parse_completion_request(body, ctx.sampling_defaults);
  if (r.constraint) r.params.grammar = compile_for_engine(ctx, *r.constraint);
  r.params.lora = check_model_name(ctx, r.model);
  apply_vllm_params(ctx, r.extras, r.params);
  std::vector<ChoiceSpec> choices;
  // return_token_ids: each choice's prompt, as the engine got it (after truncate_prompt_tokens).
  auto prompt_ids = std::make_shared<std::vector<std::vector<int32_t>>>();
  int64_t prompt_tokens = 0;
  auto echo = std::make_shared<std::vector<std::string>>();  // echo: each choice's prompt text
  for (const CompletionPrompt& p : r.prompts) {
    std::vector<int32_t> ids = p.text ? encode_text(ctx, *p.text, "prompt") : p.token_ids;
    const size_t full_length = ids.size();
    truncate_prompt(ctx, ids, r.extras.truncate_prompt_tokens);
    const bool truncated = ids.size() != full_length;
    SamplingParams params = r.params;
    fit_prompt(ctx, ids, params, "prompt");
    fan_out(ids, params, choices);
    prompt_tokens += static_cast<int64_t>(ids.size());
    if (r.echo) {
      if ((!p.text || truncated) && !ctx.engine.tokenizer())
        throw bad_request("echo of a token-id prompt needs a tokenizer, and this model has none", "echo");
      echo->resize(choices.size(), p.text && !truncated ? *p.text : ctx.engine.tokenizer()->decode(ids));
    }
    if (r.extras.return_token_ids) prompt_ids->resize(choices.size(), ids);
  }
  const size_t num_choices = choices.size();
  const std::string id = response_id(req, "cmpl-", r.extras);
  const int64_t created = unix_now();
  const std::string model = r.model.empty() ? ctx.model_name() : r.model;
  const bool details = ctx.options.enable_prompt_tokens_details;
  // Logprobs name tokens by their text, or as "token_id:N" (--return-tokens-as-token-ids).
  const bool as_ids = ctx.options.return_tokens_as_token_ids || r.extras.return_tokens_as_token_ids;
  const Tokenizer* tok = as_ids ? nullptr : ctx.engine.tokenizer();
  const bool return_token_ids = r.extras.return_token_ids;
  const SamplingParams params = r.params;
  auto channel = submit(ctx, std::move(choices), fairness_client(ctx, req, body));

  if (!r.stream) {
    auto acc = std::make_shared<std::vector<CompletionChoice>>(num_choices);
    for (size_t i = 0; i < echo->size(); ++i) (*acc)[i].text = (*echo)[i];
    return whole_reply(
        channel,
        [acc](ChoiceOutput& o) {
          CompletionChoice& c = (*acc)[static_cast<size_t>(o.choice)];
          c.text += o.out.new_text;
          c.token_ids.insert(c.token_ids.end(), o.out.new_token_ids.begin(), o.out.new_token_ids.end());
          c.samples.insert(c.samples.end(), o.out.samples.begin(), o.out.samples.end());
          if (o.out.finished) c.last = std::move(o.out);
        },
        [=] {
          Json out_choices = Json::array();
          int64_t completion_tokens = 0;
          for (size_t i = 0; i < acc->size(); ++i) {
            CompletionChoice& c = (*acc)[i];
            int64_t offset = 0;
            Json choice = {{"index", i},
                           {"text", c.text},
                           {"logprobs", params.logprobs ? completion_logprobs(tok, c.samples, offset) : Json(nullptr)},
                           {"finish_reason", finish_reason_text(c.last.finish_reason)},
                           {"stop_reason", stop_reason_json(c.last, params)}};
            if (return_token_ids) {
              choice["prompt_token_ids"] = (*prompt_ids)[i];
              choice["token_ids"] = c.token_ids;
            }
            out_choices.push_back(std::move(choice));
            completion_tokens += c.last.num_output_tokens;
          }
          return Json{{"id", id},
                      {"object", "text_completion"},
                      {"created", created},
                      {"model", model},
                      {"choices", out_choices},
                      {"usage", usage_json(prompt_tokens, completion_tokens, details,
                                           acc->empty() ? 0 : (*acc)[0].last.num_cached_tokens)}};
        });
  }

  auto state = std::make_shared<StreamState>();
  state->text_offsets.assign(num_choices, 0);
  state->echoed.assign(num_choices, false);
  state->started.assign(num_choices, false);
  const bool include_usage = r.include_usage;
  const bool continuous_usage = r.extras.continuous_usage_stats;
  auto chunk = [=](Json choices_json) {
    Json c = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model},
              {"choices", std::move(choices_json)}};
    if (include_usage) c["usage"] = nullptr;
    return c;
  };
  return stream_reply(
      channel,
      [=](std::vector<ChoiceOutput>& items) {
        std::string events;
        for (ChoiceOutput& o : items) {
          const RequestOutput& out = o.out;
          if (out.finished) state->completion_tokens += out.num_output_tokens;
          if (o.choice == 0) state->cached_tokens = out.num_cached_tokens;
          const bool has_logprobs = params.logprobs && !out.samples.empty();
          std::string text = out.new_text;
          if (const auto i = static_cast<size_t>(o.choice); i < echo->size() && !state->echoed[i]) {
            state->echoed[i] = true;
            text = (*echo)[i] + text;
          }
          const bool has_ids = return_token_ids && !out.new_token_ids.empty();
          if (text.empty() && !out.finished && !has_logprobs && !has_ids) continue;
          const auto index = static_cast<size_t>(o.choice);
          Json choice = {{"index", o.choice},
                         {"text", text},
                         {"logprobs", has_logprobs ? completion_logprobs(tok, out.samples,
                                                                         state->text_offsets[static_cast<size_t>(o.choice)])
                                                   : Json(nullptr)},
                         {"finish_reason", out.finished ? Json(finish_reason_text(out.finish_reason)) : Json(nullptr)},
                         {"stop_reason", out.finished ? stop_reason_json(out, params) : Json(nullptr)}};
          if (return_token_ids) {
            if (!state->started[index]) choice["prompt_token_ids"] = (*prompt_ids)[index];
            choice["token_ids"] = out.new_token_ids;
          }
          state->started[index] = true;
          Json c = chunk(Json::array({std::move(choice)}));
          if (continuous_usage)  // vLLM's: this choice's prompt and its tokens so far
            c["usage"] = usage_json(out.num_prompt_tokens, out.num_output_tokens, details, out.num_cached_tokens);
          events += sse_event(c);
        }
        return events;
      },
      [=] {
        if (!include_usage) return std::string();
        Json c = chunk(Json::array());
        c["usage"] = usage_json(prompt_tokens, state->completion_tokens, details, state->cached_tokens);
        return sse_event(c);
      });
}

}  // namespace pagoda::server

// POST /v1/chat/completions: messages through the model's chat template; the output split into
// reasoning (also as reasoning_content), content and tool_calls; whole or streamed.
#include "server/image_inputs.h"
#include "server/api_error.h"
#include "server/chat_output_parser.h"
#include "server/generation.h"
#include "server/openai_response.h"
#include "server/pooling_runner.h"
#include "server/routes.h"
#include "server/sse.h"

namespace pagoda::server {
namespace {

Json tool_calls_json(const std::vector<ParsedToolCall>& calls, size_t first_index, bool with_index) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json call;
    if (with_index) call["index"] = first_index + i;
    call["id"] = calls[i].id;
    call["type"] = "function";
    call["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(call));
  }
  return out;
}

struct ChatChoice {
  std::unique_ptr<ChatOutputParser> parser;
  ChatDelta parsed;  // everything, for a whole response
  std::vector<SampleResult> samples;
  std::vector<int32_t> token_ids;  // return_token_ids
  RequestOutput last;
  bool started = false;  // streaming: the role chunk went out
  size_t tool_calls_sent = 0;
};

void append(ChatDelta& into, ChatDelta d) {
  into.reasoning += d.reasoning;
  into.content += d.content;
  for (auto& c : d.tool_calls) into.tool_calls.push_back(std::move(c));
}

std::string chat_finish_reason(const RequestOutput& last, size_t num_tool_calls) {
  if (num_tool_calls > 0 && last.finish_reason == FinishReason::Stop) return "tool_calls";
  return finish_reason_text(last.finish_reason);
}

struct ChatStream {
  std::vector<ChatChoice> choices;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // of the first choice (the prompt is counted once)
};

// vLLM's chat echo: the last message's content when its role is the one answering (the assistant,
// or with add_generation_prompt false the last message's own role); "" otherwise.
std::string echo_text(const ChatPromptRequest& prompt) {
  if (prompt.messages.empty()) return "";
  const Json& last = prompt.messages.back();
  const auto role = last.find("role");
  const auto content = last.find("content");
  if (role == last.end() || content == last.end() || !content->is_string()) return "";
  if (prompt.add_generation_prompt && *role != "assistant") return "";
  return content->get<std::string>();
}

// The request's images for the engine; 400 when the model takes none or there are too many.
std::vector<std::shared_ptr<ImageInput>> load_images(const ServerContext& ctx, const std::vector<ImagePart>& parts) {
  if (!ctx.images)
    throw bad_request(ctx.engine.model_config().vision.present()
                          ? "this server takes no images (--limit-mm-per-prompt is 0)"
                          : "this model takes no images (its checkpoint has no vision tower): send text only",
                      parts.front().key);
  if (static_cast<int64_t>(parts.size()) > ctx.images->max_images())
    throw bad_request(std::to_string(parts.size()) + " images in one request; --limit-mm-per-prompt allows " +
                          std::to_string(ctx.images->max_images()),
                      parts.front().key);
  std::vector<std::shared_ptr<ImageInput>> out;
  for (const ImagePart& p : parts) out.push_back(ctx.images->load(p.url, p.key));
  return out;
}

}  // namespace

HttpReply handle_chat_completions(ServerContext& ctx, const HttpRequest& req) {
  require_generate_runner(ctx, "Chat Completions API");
  const Json body = parse_json_body(req.body);
  ChatRequest r = parse_chat_request(body, ctx.sampling_defaults);
  r.params.lora = check_model_name(ctx, r.model);
  if (!ctx.chat) throw bad_request("this model has no chat template; use /v1/completions", "messages");
  apply_vllm_params(ctx, r.extras, r.params);
  // Images: read, decoded and preprocessed here (a worker thread), before anything else is done.
  if (!r.prompt.images.empty()) r.params.images = load_images(ctx, r.prompt.images);
  const std::string prompt_text = ctx.chat->render(r.prompt);
  std::vector<int32_t> ids = encode_chat_prompt(ctx, prompt_text, "messages");
  if (!r.params.images.empty()) {
    if (r.extras.truncate_prompt_tokens)
      throw bad_request("truncate_prompt_tokens cannot be used with images (it could cut one)", "truncate_prompt_tokens");
    ctx.images->expand_placeholders(ids, r.params.images);
  }
  const size_t full_length = ids.size();
  truncate_prompt(ctx, ids, r.extras.truncate_prompt_tokens);
  const bool truncated = ids.size() != full_length;
  fit_prompt(ctx, ids, r.params, "messages");
  const ChatParserOptions popts = chat_output_options(ctx, prompt_text, r.parse_tool_calls, r.constraint, r.params);
  // The boundaries are positions in the whole prompt; a truncated one has lost its start, and one
  // with images has them expanded after the boundaries were measured.
  if (!truncated && r.params.images.empty()) r.params.prefix_boundaries = conversation_boundaries(ctx, r.prompt, ids);
  std::vector<ChoiceSpec> specs;
  fan_out(ids, r.params, specs);

  const bool details = ctx.options.enable_prompt_tokens_details;
  // Logprobs name tokens by their text, or as "token_id:N" (--return-tokens-as-token-ids).
  const bool as_ids = ctx.options.return_tokens_as_token_ids || r.extras.return_tokens_as_token_ids;
  const Tokenizer* tok = as_ids ? nullptr : ctx.engine.tokenizer();
  const bool return_token_ids = r.extras.return_token_ids;
  const bool continuous_usage = r.extras.continuous_usage_stats;
  const std::string echo = r.echo ? echo_text(r.prompt) : std::string();
  auto prompt_ids = return_token_ids ? std::make_shared<const std::vector<int32_t>>(ids) : nullptr;
  auto state = std::make_shared<ChatStream>();
  state->choices.resize(specs.size());
  for (ChatChoice& c : state->choices) c.parser = std::make_unique<ChatOutputParser>(popts);

  const std::string id = response_id(req, "chatcmpl-", r.extras);
  const int64_t created = unix_now();
  const std::string model = r.model.empty() ? ctx.model_name() : r.model;
  const SamplingParams params = r.params;
  const bool logprobs = r.logprobs;
  const int64_t prompt_tokens = static_cast<int64_t>(ids.size());
  auto channel = submit(ctx, std::move(specs), fairness_client(ctx, req, body));

  if (!r.stream) {
    return whole_reply(
        channel,
        [state](ChoiceOutput& o) {
          ChatChoice& c = state->choices[static_cast<size_t>(o.choice)];
          append(c.parsed, c.parser->feed(o.out.new_text));
          c.samples.insert(c.samples.end(), o.out.samples.begin(), o.out.samples.end());
          c.token_ids.insert(c.token_ids.end(), o.out.new_token_ids.begin(), o.out.new_token_ids.end());
          if (o.choice == 0) state->cached_tokens = o.out.num_cached_tokens;
          if (o.out.finished) {
            append(c.parsed, c.parser->finish());
            c.last = std::move(o.out);
          }
        },
        [=] {
          Json out_choices = Json::array();
          int64_t completion_tokens = 0;
          for (size_t i = 0; i < state->choices.size(); ++i) {
            ChatChoice& c = state->choices[i];
            Json message = {{"role", "assistant"}};
            const bool calls = !c.parsed.tool_calls.empty();
            const std::string content = echo + c.parsed.content;
            message["content"] = calls && content.empty() ? Json(nullptr) : Json(content);
            // `reasoning` is current vLLM's name; `reasoning_content` its older one, which clients still read.
            if (!c.parsed.reasoning.empty()) message["reasoning"] = message["reasoning_content"] = c.parsed.reasoning;
            if (calls) message["tool_calls"] = tool_calls_json(c.parsed.tool_calls, 0, false);
            Json choice = {{"index", i},
                           {"message", std::move(message)},
                           {"logprobs", logprobs ? Json{{"content", chat_logprobs_content(tok, c.samples)}} : Json(nullptr)},
                           {"finish_reason", chat_finish_reason(c.last, c.parsed.tool_calls.size())},
                           {"stop_reason", stop_reason_json(c.last, params)}};
            if (return_token_ids) choice["token_ids"] = c.token_ids;
            out_choices.push_back(std::move(choice));
            completion_tokens += c.last.num_output_tokens;
          }
          Json response = {{"id", id},
                           {"object", "chat.completion"},
                           {"created", created},
                           {"model", model},
                           {"choices", out_choices},
                           {"usage", usage_json(prompt_tokens, completion_tokens, details, state->cached_tokens)}};
          if (return_token_ids) response["prompt_token_ids"] = *prompt_ids;
          return response;
        });
  }

  const bool include_usage = r.include_usage;
  auto chunk = [=](Json choice) {
    Json c = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
              {"choices", Json::array({std::move(choice)})}};
    if (include_usage) c["usage"] = nullptr;
    return c;
  };
  return stream_reply(
      channel,
      [=](std::vector<ChoiceOutput>& items) {
        std::string events;
        for (ChoiceOutput& o : items) {
          ChatChoice& c = state->choices[static_cast<size_t>(o.choice)];
          const RequestOutput& out = o.out;
          if (o.choice == 0) state->cached_tokens = out.num_cached_tokens;
          // vLLM's continuous_usage_stats: every chunk carries this choice's usage so far.
          auto with_usage = [&](Json event, int64_t completion_tokens) {
            if (continuous_usage)
              event["usage"] = usage_json(prompt_tokens, completion_tokens, details, state->cached_tokens);
            return event;
          };
          if (!c.started) {
            c.started = true;
            Json first = chunk({{"index", o.choice},
                                {"delta", {{"role", "assistant"}, {"content", ""}}},
                                {"logprobs", nullptr},
                                {"finish_reason", nullptr}});
            if (return_token_ids) first["prompt_token_ids"] = *prompt_ids;
            events += sse_event(with_usage(std::move(first), 0));
            if (!echo.empty())
              events += sse_event(with_usage(chunk({{"index", o.choice},
                                                    {"delta", {{"content", echo}}},
                                                    {"logprobs", nullptr},
                                                    {"finish_reason", nullptr}}),
                                             0));
          }
          ChatDelta d = c.parser->feed(out.new_text);
          if (out.finished) {
            append(d, c.parser->finish());
            state->completion_tokens += out.num_output_tokens;
          }
          const bool has_logprobs = logprobs && !out.samples.empty();
          const bool has_ids = return_token_ids && !out.new_token_ids.empty();
          if (d.empty() && !out.finished && !has_logprobs && !has_ids) continue;
          Json delta = Json::object();
          if (!d.reasoning.empty()) delta["reasoning"] = delta["reasoning_content"] = d.reasoning;
          if (!d.content.empty()) delta["content"] = d.content;
          if (!d.tool_calls.empty()) {
            delta["tool_calls"] = tool_calls_json(d.tool_calls, c.tool_calls_sent, true);
            c.tool_calls_sent += d.tool_calls.size();
          }
          Json choice = {{"index", o.choice},
                         {"delta", std::move(delta)},
                         {"logprobs", has_logprobs ? Json{{"content", chat_logprobs_content(tok, out.samples)}}
                                                   : Json(nullptr)},
                         {"finish_reason", out.finished ? Json(chat_finish_reason(out, c.tool_calls_sent))
                                                        : Json(nullptr)}};
          if (out.finished) choice["stop_reason"] = stop_reason_json(out, params);
          if (return_token_ids) choice["token_ids"] = out.new_token_ids;
          events += sse_event(with_usage(chunk(std::move(choice)), out.num_output_tokens));
        }
        return events;
      },
      [=] {
        if (!include_usage) return std::string();
        Json c = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model},
                  {"choices", Json::array()}, {"usage", usage_json(prompt_tokens, state->completion_tokens, details, state->cached_tokens)}};
        return sse_event(c);
      });
}

}  // namespace pagoda::server

// POST /v1/messages: Anthropic's Messages API as vLLM serves it. The request goes through the
// model's chat template like chat messages; the output is parsed into thinking, text and tool_use
// blocks like a chat completion's; whole, or streamed as Anthropic's named events (message_start,
// content_block_start / _delta / _stop, message_delta, message_stop). Errors are Anthropic's shape
// (router.cpp: error_shape_for). POST /v1/messages/count_tokens: the prompt's token count.
#include "server/api_error.h"
#include "server/generation.h"
#include "server/messages_output.h"
#include "server/messages_request.h"
#include "server/openai_response.h"
#include "server/pooling_runner.h"
#include "server/routes.h"
#include "server/sse.h"

namespace pagoda::server {
namespace {

struct MessageHead {
  std::string id;
  std::string model;
  int64_t input_tokens = 0;
};

struct MessageState {
  MessageState(const ChatParserOptions& popts, bool stream) : parser(popts), content(stream) {}
  ChatOutputParser parser;
  MessageContent content;
  bool started = false;  // streaming: message_start went out
  bool finished = false;
  RequestOutput last;    // the last output (finish reason, stop string, token count)
};

void consume(MessageState& s, RequestOutput& out) {
  ChatDelta d = s.parser.feed(out.new_text);
  if (out.finished) {
    ChatDelta rest = s.parser.finish();
    d.reasoning += rest.reasoning;
    d.content += rest.content;
    for (auto& c : rest.tool_calls) d.tool_calls.push_back(std::move(c));
  }
  s.content.add(d);
  if (out.finished) {
    s.content.finish();
    s.finished = true;
    s.last = std::move(out);
  }
}

std::string emit_start(const MessageHead& h, MessageState& s) {
  s.started = true;
  std::string events = anthropic_event(
      {{"type", "message_start"},
       {"message", anthropic_message(h.id, h.model, Json::array(), nullptr, nullptr, h.input_tokens, 0)}});
  // Anthropic sends a ping right after message_start; clients skip it.
  return events + anthropic_event({{"type", "ping"}});
}

// The prompt of a Messages request, rendered and tokenized as chat's.
std::vector<int32_t> render_prompt(ServerContext& ctx, const ChatPromptRequest& prompt, std::string& text) {
  if (!ctx.chat) throw bad_request("this model has no chat template; use /v1/completions", "messages");
  text = ctx.chat->render(prompt);
  return encode_chat_prompt(ctx, text, "messages");
}

}  // namespace

HttpReply handle_messages(ServerContext& ctx, const HttpRequest& req) {
  require_generate_runner(ctx, "Messages API");
  const Json body = parse_json_body(req.body);
  MessagesRequest r = parse_messages_request(body, ctx.sampling_defaults);
  r.params.lora = check_model_name(ctx, r.model);
  std::string prompt_text;
  const std::vector<int32_t> ids = render_prompt(ctx, r.prompt, prompt_text);
  fit_prompt(ctx, ids, r.params, "messages");
  const ChatParserOptions popts = chat_output_options(ctx, prompt_text, r.parse_tool_calls, r.constraint, r.params);
  r.params.prefix_boundaries = conversation_boundaries(ctx, r.prompt, ids);
  std::vector<ChoiceSpec> specs;
  fan_out(ids, r.params, specs);

  auto state = std::make_shared<MessageState>(popts, r.stream);
  auto head = std::make_shared<MessageHead>();
  head->id = random_id("msg_");
  head->model = r.model.empty() ? ctx.model_name() : r.model;
  head->input_tokens = static_cast<int64_t>(ids.size());
  // metadata.user_id is the Messages API's end-user id: fairness groups by it as chat's `user`.
  const Json fairness_body = r.user.empty() ? Json::object() : Json{{"user", r.user}};
  auto channel = submit(ctx, std::move(specs), fairness_client(ctx, req, fairness_body));

  if (!r.stream) {
    HttpReply reply = whole_reply(
        channel, [state](ChoiceOutput& o) { consume(*state, o.out); },
        [state, head] {
          Json stop_sequence;
          const std::string reason =
              anthropic_stop_reason(state->last, state->content.has_tool_use(), stop_sequence);
          return anthropic_message(head->id, head->model, state->content.blocks(), reason, stop_sequence,
                                   head->input_tokens, state->last.num_output_tokens);
        });
    reply.generation->error_shape = ErrorShape::kAnthropic;
    return reply;
  }
  HttpReply reply = stream_reply(
      channel,
      [state, head](std::vector<ChoiceOutput>& outputs) {
        std::string events = state->started ? std::string() : emit_start(*head, *state);
        for (ChoiceOutput& o : outputs) consume(*state, o.out);
        return events + state->content.take_events();
      },
      [state, head] {
        std::string events = state->started ? std::string() : emit_start(*head, *state);
        if (!state->finished) {  // no last output (the server is shutting down): an error ends it
          state->content.finish();
          events += state->content.take_events();
          return events + sse_error_event(unavailable("the generation was aborted before it finished "
                                                      "(the server is shutting down)"),
                                          ErrorShape::kAnthropic);
        }
        Json stop_sequence;
        const std::string reason = anthropic_stop_reason(state->last, state->content.has_tool_use(), stop_sequence);
        events += anthropic_event({{"type", "message_delta"},
                                   {"delta", {{"stop_reason", reason}, {"stop_sequence", stop_sequence}}},
                                   {"usage", {{"input_tokens", head->input_tokens},
                                              {"output_tokens", state->last.num_output_tokens}}}});
        return events + anthropic_event({{"type", "message_stop"}});
      });
  reply.generation->done_marker = false;  // the Messages API ends with message_stop
  reply.generation->error_shape = ErrorShape::kAnthropic;
  return reply;
}

HttpReply handle_messages_count_tokens(ServerContext& ctx, const HttpRequest& req) {
  require_generate_runner(ctx, "Messages API");
  const Json body = parse_json_body(req.body);
  const ChatPromptRequest prompt = parse_messages_prompt(body);
  if (const auto m = body.find("model"); m != body.end() && m->is_string()) check_model_name(ctx, m->get<std::string>());
  std::string text;
  const std::vector<int32_t> ids = render_prompt(ctx, prompt, text);
  // context_management as vLLM (and Anthropic) send it: nothing is edited out of the context here.
  return json_reply({{"input_tokens", ids.size()}, {"context_management", {{"original_input_tokens", ids.size()}}}});
}

}  // namespace pagoda::server

#include "server/generation.h"

#include <httplib.h>

#include <algorithm>

#include "server/api_error.h"
#include "server/sse.h"

namespace pagoda::server {

using namespace std::chrono_literals;

void check_model_name(const ServerContext& ctx, const std::string& requested) {
  if (requested.empty()) return;
  const auto& names = ctx.options.served_model_names;
  if (std::find(names.begin(), names.end(), requested) == names.end())
    throw not_found("The model `" + requested + "` does not exist.", "model_not_found");
}

std::vector<int32_t> encode_text(const ServerContext& ctx, const std::string& text, const std::string& param) {
  const Tokenizer* tok = ctx.engine.tokenizer();
  if (!tok) throw bad_request("this model has no tokenizer.json: give the prompt as token ids", param);
  return tok->encode(text);
}

void fit_prompt(const ServerContext& ctx, const std::vector<int32_t>& prompt, SamplingParams& params,
                const std::string& param) {
  if (prompt.empty()) throw bad_request("the prompt is empty", param);
  const int32_t vocab = static_cast<int32_t>(ctx.engine.model_config().vocab_size);
  for (int32_t id : prompt)
    if (id < 0 || id >= vocab)
      throw bad_request("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(vocab) + ")", param);
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

void fan_out(const std::vector<int32_t>& prompt, const SamplingParams& params, std::vector<ChoiceSpec>& out) {
  for (int32_t i = 0; i < std::max(1, params.n); ++i) {
    ChoiceSpec c{prompt, params};
    c.params.n = 1;
    if (params.seed) c.params.seed = *params.seed + static_cast<uint64_t>(i);
    out.push_back(std::move(c));
  }
}

std::shared_ptr<GenerationChannel> submit(ServerContext& ctx, std::vector<ChoiceSpec> choices) {
  std::string why;
  auto channel = ctx.engine.submit(std::move(choices), why);
  if (!channel) throw unavailable(why);
  return channel;
}

void collect(const std::shared_ptr<GenerationChannel>& channel, const std::function<void(ChoiceOutput&)>& on_output) {
  std::vector<ChoiceOutput> items;
  for (;;) {
    items.clear();
    const bool more = channel->next(items, 1000ms);
    for (ChoiceOutput& o : items) on_output(o);
    if (!more) break;
  }
  if (const std::string err = channel->error(); !err.empty()) throw internal_error(err);
}

void stream_events(ServerContext& ctx, httplib::Response& res, std::shared_ptr<GenerationChannel> channel,
                   std::function<std::string(std::vector<ChoiceOutput>&)> on_outputs,
                   std::function<std::string()> on_end) {
  AsyncEngine* engine = &ctx.engine;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [engine, channel, on_outputs, on_end](size_t, httplib::DataSink& sink) {
        std::vector<ChoiceOutput> items;
        auto last_write = std::chrono::steady_clock::now();
        for (;;) {
          items.clear();
          const bool more = channel->next(items, 250ms);
          std::string text;
          if (!items.empty()) text = on_outputs(items);
          if (!more) {
            if (const std::string err = channel->error(); !err.empty())
              text += sse_event(internal_error(err).to_json());
            else
              text += on_end();
            text += kSseDone;
          }
          const auto now = std::chrono::steady_clock::now();
          // Nothing to say for a while (queued behind others): a comment finds out whether the
          // client is still there.
          if (text.empty() && now - last_write > 1s) text = kSsePing;
          if (!text.empty()) {
            if (!sink.write(text.data(), text.size())) {
              engine->cancel(channel);
              return false;
            }
            last_write = now;
          }
          if (!more) {
            sink.done();
            return true;
          }
        }
      },
      [engine, channel](bool success) {
        if (!success) engine->cancel(channel);
      });
}

void send_json(httplib::Response& res, const nlohmann::ordered_json& body, int status) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

}  // namespace pagoda::server

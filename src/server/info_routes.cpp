// GET /v1/models, POST /tokenize, POST /detokenize (vLLM's), GET /metrics.
#include "server/api_error.h"
#include "server/generation.h"
#include "server/openai_response.h"
#include "server/routes.h"

namespace pagoda::server {

HttpReply handle_models(ServerContext& ctx, const HttpRequest&) {
  // vLLM's root is the model path; only its last part here: where the model lives on this machine
  // is no client's business.
  std::string root = ctx.options.model_dir;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  if (const size_t slash = root.rfind('/'); slash != std::string::npos) root = root.substr(slash + 1);
  Json data = Json::array();
  for (const std::string& name : ctx.options.served_model_names) {
    data.push_back({{"id", name},
                    {"object", "model"},
                    {"created", unix_now()},
                    {"owned_by", "pagoda"},
                    {"root", root},
                    {"parent", nullptr},
                    {"max_model_len", ctx.engine.max_model_len()},
                    {"vocab_size", ctx.engine.model_config().vocab_size}});
  }
  // LoRA adapters as vLLM lists them: root their directory, parent the base model.
  for (const LoraEntry& e : ctx.engine.loras() ? ctx.engine.loras()->served() : std::vector<LoraEntry>{})
    data.push_back({{"id", e.name},
                    {"object", "model"},
                    {"created", unix_now()},
                    {"owned_by", "pagoda"},
                    {"root", e.path},
                    {"parent", ctx.options.served_model_names.front()},
                    {"max_model_len", ctx.engine.max_model_len()},
                    {"vocab_size", ctx.engine.model_config().vocab_size}});
  return json_reply({{"object", "list"}, {"data", data}});
}

HttpReply handle_tokenize(ServerContext& ctx, const HttpRequest& req) {
  const TokenizeRequest r = parse_tokenize_request(parse_json_body(req.body));
  check_model_name(ctx, r.model);
  std::string text;
  if (r.prompt) {
    text = *r.prompt;
  } else {
    if (!ctx.chat) throw bad_request("this model has no chat template", "messages");
    text = ctx.chat->render(r.chat);
  }
  const std::vector<int32_t> ids = r.prompt ? encode_text(ctx, text, "prompt") : encode_chat_prompt(ctx, text, "messages");
  Json out = {{"count", ids.size()}, {"max_model_len", ctx.engine.max_model_len()}, {"tokens", ids}};
  if (r.return_token_strs) {
    Json strs = Json::array();
    for (int32_t id : ids) strs.push_back(token_text(ctx.engine.tokenizer(), id));
    out["token_strs"] = strs;
  } else {
    out["token_strs"] = nullptr;
  }
  return json_reply(out);
}

HttpReply handle_detokenize(ServerContext& ctx, const HttpRequest& req) {
  const DetokenizeRequest r = parse_detokenize_request(parse_json_body(req.body));
  check_model_name(ctx, r.model);
  const Tokenizer* tok = ctx.engine.tokenizer();
  if (!tok) throw bad_request("this model has no tokenizer.json", "tokens");
  for (int32_t id : r.tokens)
    if (id >= tok->vocab_size())
      throw bad_request("token id " + std::to_string(id) + " is outside the vocabulary", "tokens");
  return json_reply({{"prompt", tok->decode(r.tokens)}});
}

HttpReply handle_metrics(ServerContext& ctx, const HttpRequest&) {
  return text_reply(ctx.metrics.render(), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace pagoda::server

// POST /v1/load_lora_adapter and /v1/unload_lora_adapter, as vLLM serves them when
// VLLM_ALLOW_RUNTIME_LORA_UPDATING is set: {"lora_name", "lora_path"} in, vLLM's plain-text
// "Success: ..." out; a bad adapter is a 400 naming the file, an unknown name a 404.
#include <algorithm>

#include "core/error.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/routes.h"

namespace pagoda::server {
namespace {

constexpr size_t kMaxNameBytes = 256, kMaxPathBytes = 4096;

std::string string_field(const Json& body, const char* key, size_t max_bytes, bool required) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) {
    if (required) throw bad_request(std::string("'") + key + "' is required", key);
    return "";
  }
  if (!it->is_string()) throw bad_request(std::string("'") + key + "' must be a string", key);
  const std::string v = it->get<std::string>();
  if (v.empty() || v.size() > max_bytes)
    throw bad_request(std::string("'") + key + "' must have 1 to " + std::to_string(max_bytes) + " bytes", key);
  return v;
}

// Off unless the engine serves adapters and runtime updates were allowed: vLLM has no such routes
// then (404); this says how to turn them on.
void check_enabled(const ServerContext& ctx) {
  if (!ctx.engine.loras())
    throw not_found("LoRA adapters are not served: start the server with --enable-lora (and "
                    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True to load them at run time)");
  if (!ctx.engine.runtime_lora_updates())
    throw not_found("loading LoRA adapters at run time is off: start the server with "
                    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True");
}

Json object_body(const HttpRequest& req) {
  Json body = parse_json_body(req.body);
  if (!body.is_object()) throw bad_request("the body must be a JSON object");
  return body;
}

}  // namespace

HttpReply handle_load_lora_adapter(ServerContext& ctx, const HttpRequest& req) {
  check_enabled(ctx);
  const Json body = object_body(req);
  const std::string name = string_field(body, "lora_name", kMaxNameBytes, true);
  const std::string path = string_field(body, "lora_path", kMaxPathBytes, true);
  const auto& served = ctx.options.served_model_names;
  if (std::find(served.begin(), served.end(), name) != served.end())
    throw bad_request("'" + name + "' is the served model's name; give the adapter another", "lora_name");
  if (ctx.engine.loras()->find(name))
    throw bad_request("The lora adapter '" + name + "' has already been loaded.", "lora_name");
  try {
    ctx.engine.load_lora_adapter(name, path);
  } catch (const Error& e) {
    throw bad_request(e.what(), "lora_path");
  }
  return text_reply("Success: LoRA adapter '" + name + "' added successfully.", "text/plain");
}

HttpReply handle_unload_lora_adapter(ServerContext& ctx, const HttpRequest& req) {
  check_enabled(ctx);
  const Json body = object_body(req);
  const std::string name = string_field(body, "lora_name", kMaxNameBytes, true);
  if (!ctx.engine.unload_lora_adapter(name))
    throw not_found("The lora adapter '" + name + "' cannot be found.", "lora_not_found");
  return text_reply("Success: LoRA adapter '" + name + "' removed successfully.", "text/plain");
}

}  // namespace pagoda::server

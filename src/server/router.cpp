#include "server/router.h"

#include <cctype>
#include <iterator>

#include "core/error.h"
#include "core/log.h"
#include "server/routes.h"

namespace pagoda::server {
namespace {

// 503 from the moment the engine stops serving (shutting down, or a fatal fault): a load balancer
// or Kubernetes probe stops sending work before the process goes (docs/faults.md).
HttpReply handle_health(ServerContext& ctx, const HttpRequest&) {
  if (!ctx.engine.serving()) return error_reply(unavailable(ctx.engine.not_serving_reason()));
  return text_reply("", "text/plain");
}

HttpReply handle_version(ServerContext&, const HttpRequest&) { return json_reply({{"version", PAGODA_VERSION}}); }

// vLLM's GET /load: requests in flight (its --enable-server-load-tracking; always on here).
HttpReply handle_load(ServerContext& ctx, const HttpRequest&) {
  return json_reply({{"server_load", ctx.engine.num_live_generations()}});
}

constexpr Route kRoutes[] = {
    {"GET", "/health", handle_health, true, false},
    {"GET", "/ping", handle_health, true, false},
    {"POST", "/ping", handle_health, true, false},
    {"GET", "/version", handle_version, true, false},
    {"GET", "/load", handle_load, true, false},
    {"GET", "/v1/models", handle_models, true, false},
    {"GET", "/metrics", handle_metrics, true, false},
    {"POST", "/v1/completions", handle_completions, false, true},
    {"POST", "/v1/chat/completions", handle_chat_completions, false, true},
    {"POST", "/v1/responses", handle_responses, false, true},
    {"POST", "/v1/messages", handle_messages, false, true},
    {"POST", "/v1/messages/count_tokens", handle_messages_count_tokens, false, true},
    {"POST", "/v1/embeddings", handle_embeddings, false, true},
    {"POST", "/tokenize", handle_tokenize, false, true},
    {"POST", "/detokenize", handle_detokenize, false, true},
    {"POST", "/v1/load_lora_adapter", handle_load_lora_adapter, false, true},
    {"POST", "/v1/unload_lora_adapter", handle_unload_lora_adapter, false, true},
    {"POST", "/start_profile", handle_start_profile, false, false},
    {"POST", "/stop_profile", handle_stop_profile, false, false},
};

// Equal length and bytes, in time that depends only on the length of `given`.
bool constant_time_equal(std::string_view given, std::string_view expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ (expected.empty() ? 0 : expected[i % expected.size()]));
  return diff == 0;
}

// Errors go to clients, which have no business knowing where the model lives on disk.
std::string without_paths(const ServerContext& ctx, std::string message) {
  const std::string& dir = ctx.options.model_dir;
  if (dir.empty()) return message;
  for (size_t at = message.find(dir); at != std::string::npos; at = message.find(dir, at))
    message.replace(at, dir.size(), "<model>");
  return message;
}

}  // namespace

const Route* find_route(const std::string& method, const std::string& path, HttpReply& error) {
  bool path_known = false;
  for (const Route& r : kRoutes) {
    if (path != r.path) continue;
    path_known = true;
    if (method == r.method || (method == "HEAD" && std::string_view(r.method) == "GET")) return &r;
  }
  if (path_known) {
    error = error_reply(ApiError(405, "Method Not Allowed: " + method + " " + path, "invalid_request_error"),
                        error_shape_for(path));
    std::string allow;
    for (const Route& r : kRoutes)
      if (path == r.path) allow += (allow.empty() ? "" : ", ") + std::string(r.method);
    error.headers.emplace_back("Allow", allow);
  } else {
    error = error_reply(not_found("Invalid URL (" + method + " " + path + ")"));
  }
  return nullptr;
}

bool authorized(const ServerContext& ctx, const HttpRequest& req) {
  const std::vector<std::string>& keys = ctx.options.api_keys;
  if (keys.empty() || req.method == "OPTIONS") return true;
  // vLLM's prefixes (its AuthenticationMiddleware): a route added under them later is guarded too.
  const bool guarded = req.path.rfind("/v1", 0) == 0 || req.path.rfind("/v2", 0) == 0 ||
                       req.path.rfind("/inference", 0) == 0;
  if (!guarded) return true;
  const std::optional<std::string_view> token = request_api_key(req);
  if (!token) return false;
  bool ok = false;  // every key compared, whichever matches
  for (const std::string& key : keys) ok = constant_time_equal(*token, key) || ok;
  return ok;
}

std::optional<std::string_view> bearer_token(const HttpRequest& req) {
  const std::string_view auth = req.header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.substr(0, kBearer.size()) != kBearer) return std::nullopt;
  return auth.substr(kBearer.size());
}

std::optional<std::string_view> request_api_key(const HttpRequest& req) {
  if (std::optional<std::string_view> bearer = bearer_token(req)) return bearer;
  // Anthropic's clients send the key as x-api-key.
  if (const std::string_view key = req.header("x-api-key"); !key.empty()) return key;
  return std::nullopt;
}

ErrorShape error_shape_for(std::string_view path) {
  return path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0 ? ErrorShape::kAnthropic : ErrorShape::kOpenAI;
}

HttpReply error_reply(const ApiError& e, ErrorShape shape) {
  HttpReply r = json_reply(e.to_json(shape), e.status);
  if (e.status == 503) r.headers.emplace_back("Retry-After", "5");
  return r;
}

bool is_json_content_type(std::string_view ct) {
  ct = ct.substr(0, ct.find(';'));
  while (!ct.empty() && (ct.back() == ' ' || ct.back() == '\t')) ct.remove_suffix(1);
  while (!ct.empty() && (ct.front() == ' ' || ct.front() == '\t')) ct.remove_prefix(1);
  std::string lower(ct);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "application/json") return true;
  return lower.rfind("application/", 0) == 0 && lower.size() > 17 && lower.ends_with("+json");
}

HttpReply run_route(const Route& route, ServerContext& ctx, const HttpRequest& req) {
  if (route.json_body && !is_json_content_type(req.header("content-type"))) {
    const std::string_view given = req.header("content-type");
    return error_reply(ApiError(415,
                                "the body of " + req.path + " must be JSON sent with 'Content-Type: application/json'" +
                                    (given.empty() ? std::string(" (the request has no Content-Type)")
                                                   : "; got '" + std::string(given.substr(0, 100)) + "'"),
                                "invalid_request_error"),
                       error_shape_for(route.path));
  }
  const ErrorShape shape = error_shape_for(route.path);
  try {
    return route.handler(ctx, req);
  } catch (const ApiError& e) {
    return error_reply(e, shape);
  } catch (const Error& e) {
    return error_reply(bad_request(without_paths(ctx, e.what())), shape);
  } catch (const InternalError& e) {
    LOG_ERROR(req.method << " " << req.path << ": internal error: " << e.what() << " — please report it");
    return error_reply(internal_error(without_paths(ctx, e.what())), shape);
  } catch (const std::bad_alloc&) {
    LOG_ERROR(req.method << " " << req.path << ": out of memory");
    return error_reply(ApiError(507, "the server ran out of memory for this request", "server_error"), shape);
  } catch (const std::exception& e) {
    LOG_ERROR(req.method << " " << req.path << ": " << e.what());
    return error_reply(internal_error(without_paths(ctx, e.what())), shape);
  }
}

}  // namespace pagoda::server

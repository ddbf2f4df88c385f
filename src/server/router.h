// Which route answers a request, and the checks every request passes first (API key, method).
// Pure functions of the request: the HTTP session calls them, and so does the fuzzer.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/http_message.h"
#include "server/server_context.h"

namespace pagoda::server {

using RouteHandler = HttpReply (*)(ServerContext&, const HttpRequest&);

struct Route {
  const char* method;
  const char* path;
  RouteHandler handler;
  // Cheap and never waiting on the engine: answered on the I/O thread itself, so it is never
  // queued behind requests being parsed and tokenized (/health under load).
  bool on_io_thread;
  // The body is JSON: any other Content-Type is refused (415), so that a web page cannot post here
  // with a "simple" text/plain or form request that browsers send without a CORS preflight.
  bool json_body = false;
};

// The route for method + path; null with `error` set (404 unknown path, 405 wrong method).
const Route* find_route(const std::string& method, const std::string& path, HttpReply& error);

// 401 unless the request carries the API key. As vLLM: only /v1 routes need it (/health, /metrics,
// /version, /tokenize stay open for probes and scrapers), and never a CORS preflight (OPTIONS),
// which browsers send without credentials. Compared in constant time.
bool authorized(const ServerContext& ctx, const HttpRequest& req);
// The KEY of an `Authorization: Bearer KEY` header, or nullopt when the request has none.
std::optional<std::string_view> bearer_token(const HttpRequest& req);
// The API key a request presents: its bearer token, else its `x-api-key` header (Anthropic's
// clients send that one); nullopt when it has neither.
std::optional<std::string_view> request_api_key(const HttpRequest& req);

// True for application/json and application/*+json, whatever the parameters (charset) and case.
bool is_json_content_type(std::string_view content_type);

// Runs a route (415 first when it takes JSON and the request says it sends something else); whatever it throws becomes an error object (error_shape_for) with its status.
HttpReply run_route(const Route& route, ServerContext& ctx, const HttpRequest& req);

// The reply for an error (503 carries Retry-After), in the error shape of the API asked.
HttpReply error_reply(const ApiError& e, ErrorShape shape = ErrorShape::kOpenAI);
// Anthropic's shape for /v1/messages and what is under it; OpenAI's for every other path.
ErrorShape error_shape_for(std::string_view path);

}  // namespace pagoda::server

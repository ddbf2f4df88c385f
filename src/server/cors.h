// Cross-origin requests as vLLM answers them (Starlette's CORSMiddleware behind --allowed-origins,
// --allowed-methods, --allowed-headers, --allow-credentials): browsers may call the API from a web
// page. Pure functions of the options and the request: the HTTP session calls them.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/http_message.h"

namespace pagoda::server {

struct CorsOptions {
  // vLLM's defaults: every origin, method and header ("*"), no credentials.
  std::vector<std::string> allowed_origins = {"*"};
  std::vector<std::string> allowed_methods = {"*"};
  std::vector<std::string> allowed_headers = {"*"};
  bool allow_credentials = false;
};

// OPTIONS with Origin and Access-Control-Request-Method: the browser asks before the real request.
bool is_cors_preflight(const HttpRequest& req);

// The answer to a preflight: 200 with the Access-Control-Allow-* headers, or 400 "Disallowed CORS
// origin, method, headers" naming what was refused (as Starlette answers).
HttpReply cors_preflight_reply(const CorsOptions& o, const HttpRequest& req);

// The headers every other answer to a request with an Origin carries (none without one).
std::vector<std::pair<std::string, std::string>> cors_response_headers(const CorsOptions& o, const HttpRequest& req);

// A value of --allowed-origins / --allowed-methods / --allowed-headers: a JSON list of strings as
// vLLM takes it ('["https://a.example"]'); a bare word is taken as a list of one. Throws
// pagoda::Error naming `flag`.
std::vector<std::string> parse_cors_list(const std::string& value, const std::string& flag);

}  // namespace pagoda::server

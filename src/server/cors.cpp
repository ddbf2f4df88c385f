#include "server/cors.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pagoda::server {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Starlette's expansion of "*" in allow_methods.
const std::vector<std::string> kAllMethods = {"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"};
// Headers a browser may always send; Starlette adds them to Access-Control-Allow-Headers.
const std::vector<std::string> kSafelisted = {"accept", "accept-language", "content-language", "content-type"};

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

bool origin_allowed(const CorsOptions& o, const std::string& origin) {
  return contains(o.allowed_origins, "*") || contains(o.allowed_origins, origin);
}

}  // namespace

bool is_cors_preflight(const HttpRequest& req) {
  return req.method == "OPTIONS" && !req.header("origin").empty() &&
         !req.header("access-control-request-method").empty();
}

HttpReply cors_preflight_reply(const CorsOptions& o, const HttpRequest& req) {
  const std::string origin(req.header("origin"));
  const std::string method(req.header("access-control-request-method"));
  const bool all_origins = contains(o.allowed_origins, "*");
  const bool all_headers = contains(o.allowed_headers, "*");
  const std::vector<std::string>& methods = contains(o.allowed_methods, "*") ? kAllMethods : o.allowed_methods;

  std::vector<std::string> failures;
  if (!origin_allowed(o, origin)) failures.push_back("origin");
  if (!contains(methods, method)) failures.push_back("method");
  // Access-Control-Request-Headers: "content-type, authorization"
  const std::string requested(req.header("access-control-request-headers"));
  if (!all_headers) {
    std::set<std::string> allowed(kSafelisted.begin(), kSafelisted.end());
    for (const std::string& h : o.allowed_headers) allowed.insert(lower(h));
    size_t start = 0;
    while (start <= requested.size()) {
      const size_t comma = std::min(requested.find(',', start), requested.size());
      const std::string h = lower(trim(requested.substr(start, comma - start)));
      if (!h.empty() && !allowed.count(h)) {
        failures.push_back("headers");
        break;
      }
      start = comma + 1;
    }
  }

  HttpReply r;
  r.content_type = "text/plain; charset=utf-8";
  std::string joined_methods;
  for (const std::string& m : methods) joined_methods += (joined_methods.empty() ? "" : ", ") + m;
  // Without credentials every origin may be answered "*"; with them (or a list) the origin itself.
  if (all_origins && !o.allow_credentials) {
    r.headers.emplace_back("Access-Control-Allow-Origin", "*");
  } else {
    r.headers.emplace_back("Access-Control-Allow-Origin", origin);
    r.headers.emplace_back("Vary", "Origin");
  }
  r.headers.emplace_back("Access-Control-Allow-Methods", joined_methods);
  r.headers.emplace_back("Access-Control-Max-Age", "600");
  if (all_headers) {
    if (!requested.empty()) r.headers.emplace_back("Access-Control-Allow-Headers", requested);
  } else {
    std::set<std::string> names;
    for (const std::string& h : kSafelisted) names.insert(h);
    for (const std::string& h : o.allowed_headers) names.insert(lower(h));
    std::string joined;
    for (const std::string& h : names) joined += (joined.empty() ? "" : ", ") + h;
    r.headers.emplace_back("Access-Control-Allow-Headers", joined);
  }
  if (o.allow_credentials) r.headers.emplace_back("Access-Control-Allow-Credentials", "true");
  if (failures.empty()) {
    r.status = 200;
    r.body = "OK";
  } else {
    r.status = 400;
    std::string what;
    for (const std::string& f : failures) what += (what.empty() ? "" : ", ") + f;
    r.body = "Disallowed CORS " + what;
  }
  return r;
}

std::vector<std::pair<std::string, std::string>> cors_response_headers(const CorsOptions& o, const HttpRequest& req) {
  std::vector<std::pair<std::string, std::string>> h;
  const std::string origin(req.header("origin"));
  if (origin.empty()) return h;
  const bool all_origins = contains(o.allowed_origins, "*");
  // A request with cookies must be answered with its origin, never "*" (the browser refuses it).
  if ((all_origins && !req.header("cookie").empty()) || (!all_origins && origin_allowed(o, origin))) {
    h.emplace_back("Access-Control-Allow-Origin", origin);
    h.emplace_back("Vary", "Origin");
  } else if (all_origins) {
    h.emplace_back("Access-Control-Allow-Origin", "*");
  }
  if (o.allow_credentials) h.emplace_back("Access-Control-Allow-Credentials", "true");
  return h;
}

std::vector<std::string> parse_cors_list(const std::string& value, const std::string& flag) {
  const std::string v = trim(value);
  if (v.empty() || v[0] != '[') return {v};
  const nlohmann::json j = nlohmann::json::parse(v, nullptr, false);
  check(j.is_array() && std::all_of(j.begin(), j.end(), [](const nlohmann::json& x) { return x.is_string(); }),
        flag + " takes a JSON list of strings, e.g. '[\"https://app.example\"]' (or one value); got " + value);
  std::vector<std::string> out;
  for (const auto& x : j) out.push_back(x.get<std::string>());
  return out;
}

}  // namespace pagoda::server

// OpenAI's error object, {"error": {"message", "type", "param", "code"}}, with its HTTP status, or
// Anthropic's ({"type": "error", "error": {"type", "message"}}) on Anthropic's routes.
// Request handlers throw ApiError; the HTTP layer turns it into the response.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace pagoda::server {

// Which API's error object a route answers with: /v1/messages is Anthropic's.
enum class ErrorShape { kOpenAI, kAnthropic };

class ApiError : public std::runtime_error {
 public:
  ApiError(int http_status, const std::string& message, std::string error_type, std::string error_param = {},
           std::string error_code = {})
      : std::runtime_error(message), status(http_status), type(std::move(error_type)),
        param(std::move(error_param)), code(std::move(error_code)) {}

  int status;
  std::string type;
  std::string param;  // the offending request field, "" = null
  std::string code;   // a machine-readable code, "" = null

  nlohmann::ordered_json to_json() const;
  // Anthropic's form: the type named by the status (invalid_request_error, authentication_error,
  // not_found_error, request_too_large, rate_limit_error, overloaded_error, api_error).
  nlohmann::ordered_json to_anthropic_json() const;
  nlohmann::ordered_json to_json(ErrorShape shape) const {
    return shape == ErrorShape::kAnthropic ? to_anthropic_json() : to_json();
  }
};

// 400 invalid_request_error, naming the field at fault.
ApiError bad_request(const std::string& message, const std::string& param = {}, const std::string& code = {});
// 401: missing or wrong API key.
ApiError unauthorized();
// 404: unknown route or model.
ApiError not_found(const std::string& message, const std::string& code = {});
// 503: overloaded or shutting down.
ApiError unavailable(const std::string& message);
// 500: a bug or an engine failure.
ApiError internal_error(const std::string& message);

}  // namespace pagoda::server

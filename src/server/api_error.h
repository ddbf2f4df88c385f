// OpenAI's error object, {"error": {"message", "type", "param", "code"}}, with its HTTP status.
// Request handlers throw ApiError; the HTTP layer turns it into the response.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace pagoda::server {

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

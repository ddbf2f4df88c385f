#include "server/api_error.h"

namespace pagoda::server {

nlohmann::ordered_json ApiError::to_json() const {
  nlohmann::ordered_json e;
  e["message"] = what();
  e["type"] = type;
  e["param"] = param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param);
  e["code"] = code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(code);
  return {{"error", e}};
}

nlohmann::ordered_json ApiError::to_anthropic_json() const {
  const char* t = "api_error";
  if (status == 401) t = "authentication_error";
  else if (status == 403) t = "permission_error";
  else if (status == 404) t = "not_found_error";
  else if (status == 413) t = "request_too_large";
  else if (status == 429) t = "rate_limit_error";
  else if (status == 503 || status == 529) t = "overloaded_error";
  else if (status >= 400 && status < 500) t = "invalid_request_error";
  return {{"type", "error"}, {"error", {{"type", t}, {"message", what()}}}};
}

ApiError bad_request(const std::string& message, const std::string& param, const std::string& code) {
  return ApiError(400, message, "invalid_request_error", param, code);
}

ApiError unauthorized() {
  return ApiError(401, "Incorrect API key provided. Pass it as 'Authorization: Bearer KEY' (or 'x-api-key: KEY').",
                  "invalid_request_error", {}, "invalid_api_key");
}

ApiError not_found(const std::string& message, const std::string& code) {
  return ApiError(404, message, "invalid_request_error", {}, code);
}

ApiError unavailable(const std::string& message) {
  return ApiError(503, message, "server_error", {}, "service_unavailable");
}

ApiError internal_error(const std::string& message) {
  return ApiError(500, message, "server_error", {}, "internal_error");
}

}  // namespace pagoda::server

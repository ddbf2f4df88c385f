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

ApiError bad_request(const std::string& message, const std::string& param, const std::string& code) {
  return ApiError(400, message, "invalid_request_error", param, code);
}

ApiError unauthorized() {
  return ApiError(401, "Incorrect API key provided. Pass it as 'Authorization: Bearer KEY'.",
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

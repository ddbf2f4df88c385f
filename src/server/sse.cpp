#include "server/sse.h"

namespace pagoda::server {

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string sse_event(const nlohmann::ordered_json& data) { return "data: " + dump_json(data) + "\n\n"; }

std::string sse_error_event(const ApiError& e, ErrorShape shape) {
  if (shape == ErrorShape::kAnthropic) return "event: error\ndata: " + dump_json(e.to_anthropic_json()) + "\n\n";
  return sse_event(e.to_json());
}

}  // namespace pagoda::server

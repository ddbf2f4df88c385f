// Server-sent events as OpenAI streams them: one `data: {json}` event per chunk, `data: [DONE]` last.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace pagoda::server {

// JSON text for a response body; invalid UTF-8 (a token cut inside a character) becomes U+FFFD.
std::string dump_json(const nlohmann::ordered_json& j);

std::string sse_event(const nlohmann::ordered_json& data);
// The event a stream ends with when its generation fails: OpenAI's `data: {"error": ...}`, or
// Anthropic's `event: error`.
std::string sse_error_event(const ApiError& e, ErrorShape shape);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// A comment line: ignored by clients, used to find out whether the client is still there.
inline constexpr const char* kSsePing = ": ping\n\n";

}  // namespace pagoda::server

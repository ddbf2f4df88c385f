// Server-sent events as OpenAI streams them: one `data: {json}` event per chunk, `data: [DONE]` last.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pagoda::server {

// JSON text for a response body; invalid UTF-8 (a token cut inside a character) becomes U+FFFD.
std::string dump_json(const nlohmann::ordered_json& j);

std::string sse_event(const nlohmann::ordered_json& data);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// A comment line: ignored by clients, used to find out whether the client is still there.
inline constexpr const char* kSsePing = ": ping\n\n";

}  // namespace pagoda::server

// JSON from clients, parsed with a bound on nesting depth. nlohmann's parser is iterative, but what
// consumes its result (templates, normalisation, destructors of older versions) may not be: a 40 KB
// body of 20,000 '[' must become a 400, not a stack overflow.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pagoda::server {

// vLLM/pydantic has no limit; 64 levels is more than any real tool schema or message uses.
inline constexpr int kMaxJsonDepth = 64;

// The parsed document, or a discarded value with `error` set (syntax error, or deeper than
// `max_depth` levels of objects/arrays).
nlohmann::ordered_json parse_json_bounded(std::string_view text, int max_depth, std::string& error);

}  // namespace pagoda::server

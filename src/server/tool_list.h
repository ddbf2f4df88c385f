// A request's `tools` array turned into the chat-completions form the chat template takes
// ({"type": "function", "function": {...}}), with the checks every API's tools share: an array,
// bounded nesting, each tool an object. The Messages and Responses APIs differ only in how one tool
// becomes a function.
#pragma once

#include <functional>
#include <string>

#include "server/openai_request.h"

namespace pagoda::server {

// `to_function` reads one tool (`key` is "tools[i]", for its errors) and returns the function
// object; it throws ApiError for a tool it does not take.
Json chat_function_tools(const Json& tools, const std::function<Json(const Json& tool, const std::string& key)>& to_function);

}  // namespace pagoda::server

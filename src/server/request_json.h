// Client JSON handled without recursion: how deeply a value nests, and JSON text inside a request
// (tool-call arguments) parsed with a nesting bound and without changing any number.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "server/openai_request.h"

namespace pagoda::server {

// How deeply one message, tool list or chat_template_kwargs object may nest; tool-call arguments
// parsed from text get the same bound. Well under the chat template's own conversion bound.
inline constexpr size_t kMaxChatNesting = 64;
// Image parts one chat request may carry before any is read (--limit-mm-per-prompt is checked
// after, and is usually far lower): thousands of them are refused at parse time.
inline constexpr size_t kMaxImageParts = 256;

// True when `v` nests deeper than `limit` levels (a scalar is 0 levels, [] is 1). Iterative, and
// stops walking as soon as the answer is known.
bool nesting_exceeds(const Json& v, size_t limit);

// Parses tool-call arguments as vLLM does (json.loads): nullopt when the text is not JSON.
// Throws ApiError 400 naming `param` when it nests deeper than kMaxChatNesting or holds an integer
// beyond 64 bits (Python would keep it exactly; a double here would change its value).
std::optional<Json> parse_arguments_json(const std::string& text, const std::string& param);

}  // namespace pagoda::server

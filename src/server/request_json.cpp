#include "server/request_json.h"

#include <utility>
#include <vector>

#include "server/api_error.h"
#include "server/json_body.h"

namespace pagoda::server {

bool nesting_exceeds(const Json& v, size_t limit) {
  if (!v.is_structured()) return false;
  std::vector<std::pair<const Json*, size_t>> todo{{&v, 1}};
  while (!todo.empty()) {
    const auto [node, depth] = todo.back();
    todo.pop_back();
    if (depth > limit) return true;
    for (const Json& child : *node)
      if (child.is_structured()) todo.emplace_back(&child, depth + 1);
  }
  return false;
}

std::optional<Json> parse_arguments_json(const std::string& text, const std::string& param) {
  JsonLimits limits;
  limits.max_depth = kMaxChatNesting;
  JsonParse p = parse_json_limited(text, limits);
  switch (p.fault) {
    case JsonFault::none: return std::move(p.value);
    case JsonFault::syntax: return std::nullopt;
    case JsonFault::too_deep:
      throw bad_request(param + " is nested too deeply (more than " + std::to_string(kMaxChatNesting) + " levels)",
                        param);
    case JsonFault::big_integer:
      throw bad_request(param + " holds the integer " + p.detail +
                            ", which is beyond 64 bits; integers that large are not supported",
                        param);
    default: throw bad_request(describe_json_fault(p, limits, param), param);
  }
}

}  // namespace pagoda::server

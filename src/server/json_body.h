// JSON from clients, parsed in time linear in its size, with bounds on nesting depth and key counts.
// nlohmann's own DOM parser inserts each key of an ordered_json object by scanning the keys before it,
// so an object of k keys costs k²/2 string compares (200,000 keys: over a minute); this parser keeps
// a hash index of the keys of any object past a few, so that a duplicate is found in O(1) and every
// insert appends. Its result is iterative to build; what consumes it (templates, normalisation) may
// not be, so a 40 KB body of 20,000 '[' must become a 400, not a stack overflow.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pagoda::server {

// vLLM/pydantic has no limit; 64 levels is more than any real tool schema or message uses.
inline constexpr int kMaxJsonDepth = 64;
// Keys in one object: above every vocabulary pagoda serves (a logit_bias over all of it still
// parses), far above any real schema's properties.
inline constexpr size_t kMaxJsonObjectKeys = size_t{1} << 18;
// Keys in the whole document: what a 12 MiB body of short keys holds; bounds the memory and the
// work of everything that walks the result.
inline constexpr size_t kMaxJsonKeys = size_t{1} << 20;

struct JsonLimits {
  size_t max_depth = kMaxJsonDepth;  // open objects/arrays at once; a scalar is depth 0
  size_t max_object_keys = kMaxJsonObjectKeys;
  size_t max_keys = kMaxJsonKeys;
};

enum class JsonFault {
  none,
  syntax,         // not JSON
  too_deep,       // deeper than max_depth
  object_keys,    // one object with more than max_object_keys distinct keys
  total_keys,     // more than max_keys keys in all (repeats count: each is parsed)
  big_integer,    // an integer literal beyond 64 bits (nlohmann would round it into a double)
};

struct JsonParse {
  nlohmann::ordered_json value;  // discarded unless fault == none
  JsonFault fault = JsonFault::none;
  std::string detail;  // big_integer: the literal (shortened)
};

// Parses `text` in one pass, stopping at the first fault: the work is linear in the text, and past
// a limit nothing more of it is read. A repeated key keeps its first place and takes the last value,
// as Python's json.loads does.
JsonParse parse_json_limited(std::string_view text, const JsonLimits& limits);

// A fault as a sentence for the client ("" for none); `what` names the document ("the request body").
std::string describe_json_fault(const JsonParse& p, const JsonLimits& limits, const std::string& what);

// The parsed document, or a discarded value with `error` set (syntax error, deeper than `max_depth`
// levels of objects/arrays, too many keys, or an integer beyond 64 bits).
nlohmann::ordered_json parse_json_bounded(std::string_view text, int max_depth, std::string& error);

}  // namespace pagoda::server

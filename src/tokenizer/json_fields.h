// Typed access to tokenizer.json fields. Every failure is a pagoda::Error that names the file (the
// label) and the field path, because a bare "type_error.302" helps nobody.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace pagoda::tokjson {

using Json = nlohmann::json;

// Where a field lives, for messages: "<label>: <path>".
struct Where {
  const std::string& label;
  std::string path;
  Where at(std::string_view key) const;
  Where at(size_t index) const;
  std::string str() const;
};

[[noreturn]] void fail(const Where& where, const std::string& what);

// The member `key` of object j (which must be an object), or nullptr when absent.
const Json* find(const Json& j, const char* key, const Where& where);
void require_object(const Json& j, const Where& where);
void require_array(const Json& j, const Where& where);

// Required string member.
const std::string& get_string(const Json& j, const char* key, const Where& where);
// Optional bool member: absent or null gives `fallback`.
bool get_bool(const Json& j, const char* key, bool fallback, const Where& where);
// A JSON integer in [0, max]; anything else (negative, fractional, too large, not a number) throws.
int64_t as_index(const Json& v, int64_t max, const Where& where);

}  // namespace pagoda::tokjson

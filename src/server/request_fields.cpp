#include "server/request_fields.h"

#include <cmath>

#include "server/api_error.h"

namespace pagoda::server {

const char* type_name(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

void wrong_type(const std::string& key, const char* want, const Json& got) {
  throw bad_request("'" + key + "' must be " + want + ", got " + type_name(got), key);
}

const Json* field(const Json& j, const std::string& key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> opt_number(const Json& j, const std::string& key) {
  const Json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d)) throw bad_request("'" + key + "' must be finite", key);
  return d;
}

int64_t as_int(const Json& v, const std::string& key, int64_t lo, int64_t hi) {
  if (!v.is_number()) wrong_type(key, "an integer", v);
  int64_t i = 0;
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
      throw bad_request("'" + key + "' is out of range", key);
    i = v.get<int64_t>();
  } else {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e15) wrong_type(key, "an integer", v);
    i = static_cast<int64_t>(d);
  }
  if (i < lo || i > hi)
    throw bad_request("'" + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                          std::to_string(i), key);
  return i;
}

std::optional<bool> opt_bool(const Json& j, const std::string& key) {
  const Json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) wrong_type(key, "a boolean", *v);
  return v->get<bool>();
}

std::string param_of(const std::string& message) { return message.substr(0, message.find(' ')); }

}  // namespace pagoda::server

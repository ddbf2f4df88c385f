#include "server/request_fields.h"

#include <cmath>
#include <limits>
#include <vector>

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

void read_common_sampling(const Json& j, SamplingParams& p) {
  if (auto v = opt_number(j, "temperature")) p.temperature = *v;
  if (auto v = opt_number(j, "top_p")) p.top_p = *v;
  if (const Json* v = field(j, "top_k"))
    p.top_k = static_cast<int32_t>(
        as_int(*v, "top_k", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
  if (auto v = opt_number(j, "repetition_penalty")) p.repetition_penalty = *v;
  if (const Json* v = field(j, "seed"))
    p.seed = static_cast<uint64_t>(as_int(*v, "seed", std::numeric_limits<int64_t>::min(),
                                          std::numeric_limits<int64_t>::max()));
  if (auto v = opt_bool(j, "ignore_eos")) p.ignore_eos = *v;
  if (const Json* v = field(j, "cache_salt")) {  // vLLM: a non-empty string when given
    if (!v->is_string()) wrong_type("cache_salt", "a non-empty string", *v);
    if (v->get_ref<const std::string&>().empty())
      throw bad_request("cache_salt must be a non-empty string when given", "cache_salt");
    p.cache_salt = v->get<std::string>();
  }
  if (const Json* v = field(j, "stop")) {
    std::vector<std::string> stop;
    if (v->is_string()) {
      stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      stop.reserve(v->size());
      for (const Json& s : *v) {
        if (!s.is_string()) wrong_type("stop", "a string or an array of strings", *v);
        stop.push_back(s.get<std::string>());
      }
    } else {
      wrong_type("stop", "a string or an array of strings", *v);
    }
    p.stop = std::move(stop);
  }
}

}  // namespace pagoda::server

#include "tokenizer/json_fields.h"

#include "core/error.h"

namespace pagoda::tokjson {

Where Where::at(std::string_view key) const {
  return {label, path.empty() ? std::string(key) : path + "." + std::string(key)};
}

Where Where::at(size_t index) const { return {label, path + "[" + std::to_string(index) + "]"}; }

std::string Where::str() const { return path.empty() ? label : label + ": " + path; }

void fail(const Where& where, const std::string& what) { throw Error(where.str() + ": " + what); }

static const char* type_name(const Json& j) { return j.type_name(); }

void require_object(const Json& j, const Where& where) {
  if (!j.is_object()) fail(where, std::string("expected an object, got ") + type_name(j));
}

void require_array(const Json& j, const Where& where) {
  if (!j.is_array()) fail(where, std::string("expected an array, got ") + type_name(j));
}

const Json* find(const Json& j, const char* key, const Where& where) {
  require_object(j, where);
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

const std::string& get_string(const Json& j, const char* key, const Where& where) {
  const Json* v = find(j, key, where);
  if (v == nullptr) fail(where.at(key), "missing");
  if (!v->is_string()) fail(where.at(key), std::string("expected a string, got ") + type_name(*v));
  return v->get_ref<const std::string&>();
}

bool get_bool(const Json& j, const char* key, bool fallback, const Where& where) {
  const Json* v = find(j, key, where);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_boolean())
    fail(where.at(key), std::string("expected a boolean, got ") + type_name(*v));
  return v->get<bool>();
}

int64_t as_index(const Json& v, int64_t max, const Where& where) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(max)) fail(where, "id " + std::to_string(u) + " is too large");
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < 0) fail(where, "id " + std::to_string(i) + " is negative");
    if (i > max) fail(where, "id " + std::to_string(i) + " is too large");
    return i;
  }
  fail(where, std::string("expected a non-negative integer id, got ") + type_name(v));
}

}  // namespace pagoda::tokjson

// The values a chat template computes with, modelled on the Python objects jinja2 works with:
// Undefined (jinja2's default Undefined), None, bool, int, float, str, list/tuple, dict (keeps
// insertion order), namespace and callables. Lists and dicts are immutable (as in jinja2's
// ImmutableSandboxedEnvironment) and shared; a namespace is the one mutable object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda::jinja {

class Evaluator;
struct Value;

struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // replaces an equal key in place, else appends
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

struct Function {
  std::string name;
  std::function<Value(Evaluator&, CallArgs&)> call;
};

enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

struct Value {
  Type type = Type::Undefined;
  bool is_tuple = false;  // a List that Python would hold as a tuple (prints with parentheses)
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;  // String; for Undefined, the message an error about it would carry
  std::shared_ptr<const std::vector<Value>> list;
  std::shared_ptr<const Dict> dict;
  std::shared_ptr<Dict> ns;
  std::shared_ptr<const Function> fn;

  Value() = default;
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value real(double v);
  static Value string(std::string v);
  static Value list_of(std::vector<Value> items, bool tuple = false);
  static Value dict_of(Dict d);
  static Value namespace_of(Dict d);
  static Value function(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn);
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return type == Type::Undefined; }
  bool is_none() const { return type == Type::None; }
  bool is_string() const { return type == Type::String; }
  bool is_number() const { return type == Type::Int || type == Type::Float || type == Type::Bool; }
  bool is_integral() const { return type == Type::Int || type == Type::Bool; }
  bool is_list() const { return type == Type::List; }
  bool is_dict() const { return type == Type::Dict; }
  int64_t as_int() const { return type == Type::Bool ? (b ? 1 : 0) : i; }
  double as_double() const { return type == Type::Float ? f : static_cast<double>(as_int()); }
  const std::vector<Value>& items() const { return *list; }
};

// Python truthiness (Undefined is false).
bool truthy(const Value& v);
// Python ==, with 1 == 1.0 == True and Undefined equal only to Undefined.
bool equals(const Value& a, const Value& b);
// Python <; throws pagoda::Error for unorderable types.
bool less_than(const Value& a, const Value& b);
// Python str() and repr() (jinja2 prints a value with str(); Undefined prints as "").
std::string to_str(const Value& v);
std::string repr(const Value& v);
std::string float_repr(double d);
// Python's type name as jinja2 error messages use it ("dict object", "str object", ...).
std::string type_name(const Value& v);
// Python json.dumps(v, ensure_ascii, indent, separators, sort_keys) as transformers' tojson.
struct JsonStyle {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;  // the text one level adds
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};
std::string json_dumps(const Value& v, const JsonStyle& style);

// Unicode helpers with Python str semantics (code points; invalid UTF-8 bytes count as one each).
std::vector<uint32_t> code_points(std::string_view s);
std::string from_code_points(const std::vector<uint32_t>& cps, size_t begin, size_t end);
size_t code_point_count(std::string_view s);
bool py_isspace(uint32_t cp);

}  // namespace pagoda::jinja

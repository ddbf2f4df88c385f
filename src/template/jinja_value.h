// The values a chat template computes with, modelled on the Python objects jinja2 works with:
// Undefined (jinja2's default Undefined), None, bool, int (any size up to Python's 4300-digit
// printing limit), float, str, list/tuple, dict (keeps insertion order), namespace and callables.
// Lists and dicts are immutable (as in jinja2's ImmutableSandboxedEnvironment) and shared; a
// namespace is the one mutable object. Nesting is bounded (kMaxNesting) so that printing, comparing
// and freeing a value never recurse without bound.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "template/jinja_bigint.h"

namespace pagoda::jinja {

// How deeply lists, dicts and namespaces may nest inside one another (Python's own recursion limit
// stops repr() and == near 1000).
inline constexpr uint32_t kMaxNesting = 512;
// How deeply request data (JSON) may nest when it becomes template values; the server's JSON parser
// allows less, this holds without it.
inline constexpr size_t kMaxJsonNesting = 128;

class Evaluator;
struct Value;

struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  uint32_t depth = 1;  // for a namespace: its nesting, kept up to date as attributes are set
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
  uint32_t depth = 0;  // List / Dict: 1 + the deepest item's depth
  int64_t i = 0;
  std::shared_ptr<const BigInt> big;  // an Int beyond int64 (then `i` is unused)
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
  static Value integer(const BigInt& v);  // stored as int64 when it fits
  static Value real(double v);
  static Value string(std::string v);
  static Value list_of(std::vector<Value> items, bool tuple = false);
  static Value dict_of(Dict d);
  static Value namespace_of(Dict d);
  static Value function(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn);
  // Request data as template values; iterative, throws pagoda::Error past kMaxJsonNesting.
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return type == Type::Undefined; }
  bool is_none() const { return type == Type::None; }
  bool is_string() const { return type == Type::String; }
  bool is_number() const { return type == Type::Int || type == Type::Float || type == Type::Bool; }
  bool is_integral() const { return type == Type::Int || type == Type::Bool; }
  bool is_list() const { return type == Type::List; }
  bool is_dict() const { return type == Type::Dict; }
  bool is_big() const { return big != nullptr; }
  // An Int or Bool as int64; throws pagoda::Error for an integer beyond int64 (the operations
  // that take any size read `big` first).
  int64_t as_int() const {
    if (big) too_big_for_int64();
    return type == Type::Bool ? (b ? 1 : 0) : i;
  }
  // Python's float(x) for a number; throws for an integer beyond the float range.
  double as_double() const {
    if (type == Type::Float) return f;
    return big ? big->to_double() : static_cast<double>(as_int());
  }
  // An Int or Bool as a BigInt, whatever its size.
  BigInt as_bigint() const { return big ? *big : BigInt(as_int()); }
  const std::vector<Value>& items() const { return *list; }

 private:
  [[noreturn]] void too_big_for_int64() const;
};

// Nesting of a value: 0 for scalars; a namespace counts what it holds now.
uint32_t nesting(const Value& v);
// `set ns.attr = value`: checks the nesting bound and keeps the namespace's depth current.
void namespace_set(const Value& ns, Value key, Value value);

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

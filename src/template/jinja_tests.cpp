// jinja2's built-in tests: `x is defined`, `x is string`, `x is divisibleby 3`, ...
#include <map>

#include "template/jinja_builtins.h"
#include "template/jinja_eval.h"

namespace pagoda::jinja {
namespace {

using TestFn = bool (*)(Evaluator&, const Value&, CallArgs&);

const Value& need(const CallArgs& a, size_t pos, const char* name, const char* test) {
  const Value* v = arg(a, pos, name);
  if (v == nullptr) throw Error(std::string("test '") + test + "' needs an argument");
  return *v;
}

bool t_defined(Evaluator&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Evaluator&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Evaluator&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Evaluator&, const Value& v, CallArgs&) { return v.type == Type::Bool; }
bool t_false(Evaluator&, const Value& v, CallArgs&) { return v.type == Type::Bool && !v.b; }
bool t_true(Evaluator&, const Value& v, CallArgs&) { return v.type == Type::Bool && v.b; }
bool t_integer(Evaluator&, const Value& v, CallArgs&) { return v.type == Type::Int; }
bool t_float(Evaluator&, const Value& v, CallArgs&) { return v.type == Type::Float; }
bool t_number(Evaluator&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Evaluator&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Evaluator&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_iterable(Evaluator&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_sequence(Evaluator& ev, const Value& v, CallArgs& a) { return t_iterable(ev, v, a); }
bool t_callable(Evaluator&, const Value& v, CallArgs&) { return v.type == Type::Function; }
bool t_sameas(Evaluator&, const Value& v, CallArgs& a) {
  const Value& o = need(a, 0, "other", "sameas");
  if (v.type != o.type) return false;
  switch (v.type) {
    case Type::None:
    case Type::Undefined: return true;
    case Type::Bool: return v.b == o.b;
    case Type::Int:
      if (v.is_big() || o.is_big()) return v.big == o.big;  // the same object, as Python's `is`
      return v.i == o.i && v.i >= -5 && v.i <= 256;           // CPython's small-int cache
    case Type::Float: return v.f == o.f;
    case Type::List: return v.list == o.list;
    case Type::Dict: return v.dict == o.dict;
    case Type::Namespace: return v.ns == o.ns;
    case Type::Function: return v.fn == o.fn;
    default: return false;
  }
}
bool t_eq(Evaluator&, const Value& v, CallArgs& a) { return equals(v, need(a, 0, "other", "eq")); }
bool t_ne(Evaluator&, const Value& v, CallArgs& a) { return !equals(v, need(a, 0, "other", "ne")); }
bool t_lt(Evaluator&, const Value& v, CallArgs& a) { return less_than(v, need(a, 0, "other", "lt")); }
bool t_gt(Evaluator&, const Value& v, CallArgs& a) { return less_than(need(a, 0, "other", "gt"), v); }
bool t_le(Evaluator&, const Value& v, CallArgs& a) {
  const Value& o = need(a, 0, "other", "le");
  return less_than(v, o) || equals(v, o);
}
bool t_ge(Evaluator&, const Value& v, CallArgs& a) {
  const Value& o = need(a, 0, "other", "ge");
  return less_than(o, v) || equals(v, o);
}
bool t_in(Evaluator&, const Value& v, CallArgs& a) { return contains(need(a, 0, "seq", "in"), v); }
BigInt int_subject(const Value& v, const char* test) {
  if (!v.is_integral()) throw Error(std::string("test '") + test + "' needs an integer");
  return v.as_bigint();
}
bool t_odd(Evaluator&, const Value& v, CallArgs&) { return int_subject(v, "odd").is_odd(); }
bool t_even(Evaluator&, const Value& v, CallArgs&) { return !int_subject(v, "even").is_odd(); }
bool t_divisibleby(Evaluator&, const Value& v, CallArgs& a) {
  const Value& n = need(a, 0, "num", "divisibleby");
  if (!n.is_integral() || (!n.is_big() && n.as_int() == 0)) throw Error("divisibleby needs a non-zero integer");
  return BigInt::divmod(int_subject(v, "divisibleby"), n.as_bigint()).second.is_zero();
}
bool t_lower(Evaluator&, const Value& v, CallArgs&) {
  const std::string s = to_str(v);
  return str_lower(s) == s && str_upper(s) != s;
}
bool t_upper(Evaluator&, const Value& v, CallArgs&) {
  const std::string s = to_str(v);
  return str_upper(s) == s && str_lower(s) != s;
}
bool t_escaped(Evaluator&, const Value&, CallArgs&) { return false; }
bool t_filter(Evaluator&, const Value& v, CallArgs&) { return v.is_string() && has_filter(v.s); }
bool t_test(Evaluator&, const Value& v, CallArgs&) { return v.is_string() && has_test(v.s); }

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const std::map<std::string, TestFn, std::less<>> table = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none},
      {"boolean", t_boolean}, {"false", t_false},         {"true", t_true},
      {"integer", t_integer}, {"float", t_float},         {"number", t_number},
      {"string", t_string},   {"mapping", t_mapping},     {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable}, {"sameas", t_sameas},
      {"eq", t_eq},           {"equalto", t_eq},          {"==", t_eq},
      {"ne", t_ne},           {"!=", t_ne},               {"lt", t_lt},
      {"lessthan", t_lt},     {"<", t_lt},                {"le", t_le},
      {"<=", t_le},           {"gt", t_gt},               {"greaterthan", t_gt},
      {">", t_gt},            {"ge", t_ge},               {">=", t_ge},
      {"in", t_in},           {"odd", t_odd},             {"even", t_even},
      {"divisibleby", t_divisibleby}, {"lower", t_lower}, {"upper", t_upper},
      {"escaped", t_escaped}, {"filter", t_filter},       {"test", t_test},
  };
  return table;
}

}  // namespace

bool has_test(std::string_view name) { return tests().count(name) != 0; }

bool apply_test(Evaluator& ev, const std::string& name, const Value& subject, CallArgs& args) {
  ev.step();
  const auto it = tests().find(name);
  if (it == tests().end()) throw Error("No test named '" + name + "'.");
  return it->second(ev, subject, args);
}

}  // namespace pagoda::jinja

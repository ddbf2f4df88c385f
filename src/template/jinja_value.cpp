#include "template/jinja_value.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace pagoda::jinja {

// --- construction ---------------------------------------------------------------------------------

Value Value::undefined(std::string hint) {
  Value v;
  v.s = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.type = Type::None;
  return v;
}
Value Value::boolean(bool x) {
  Value v;
  v.type = Type::Bool;
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v;
  v.type = Type::Int;
  v.i = x;
  return v;
}
Value Value::integer(const BigInt& x) {
  if (x.fits_int64()) return integer(x.to_int64());
  Value v;
  v.type = Type::Int;
  v.big = std::make_shared<const BigInt>(x);
  return v;
}
Value Value::real(double x) {
  Value v;
  v.type = Type::Float;
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v;
  v.type = Type::String;
  v.s = std::move(x);
  return v;
}
namespace {

// 1 + the deepest of the items; throws past kMaxNesting.
uint32_t depth_over(uint32_t deepest) {
  if (deepest >= kMaxNesting)
    throw Error("value nested too deeply (more than " + std::to_string(kMaxNesting) + " levels)");
  return deepest + 1;
}

}  // namespace

Value Value::list_of(std::vector<Value> items, bool tuple) {
  uint32_t deepest = 0;
  for (const Value& x : items) deepest = std::max(deepest, nesting(x));
  Value v;
  v.type = Type::List;
  v.is_tuple = tuple;
  v.depth = depth_over(deepest);
  v.list = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}
Value Value::dict_of(Dict d) {
  uint32_t deepest = 0;
  for (const auto& [k, x] : d.entries) deepest = std::max({deepest, nesting(k), nesting(x)});
  Value v;
  v.type = Type::Dict;
  v.depth = depth_over(deepest);
  v.dict = std::make_shared<const Dict>(std::move(d));
  return v;
}
Value Value::namespace_of(Dict d) {
  uint32_t deepest = 0;
  for (const auto& [k, x] : d.entries) deepest = std::max(deepest, nesting(x));
  d.depth = depth_over(deepest);
  Value v;
  v.type = Type::Namespace;
  v.ns = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::function(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn) {
  Value v;
  v.type = Type::Function;
  v.fn = std::make_shared<const Function>(Function{std::move(name), std::move(fn)});
  return v;
}

void Value::too_big_for_int64() const {
  throw Error("integer " + big->to_string() + " is beyond 64 bits, which this operation does not support");
}

uint32_t nesting(const Value& v) {
  if (v.type == Type::Namespace) return v.ns->depth;
  return v.depth;
}

void namespace_set(const Value& ns, Value key, Value value) {
  ns.ns->depth = std::max(ns.ns->depth, depth_over(nesting(value)));
  ns.ns->set(std::move(key), std::move(value));
}

// --- dict -----------------------------------------------------------------------------------------

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : entries)
    if (equals(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k.type == Type::String && k.s == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

// --- unicode --------------------------------------------------------------------------------------

std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const utf8::Step st = utf8::next(s, i);
    if (st.kind == utf8::StepKind::kValid) {
      out.push_back(st.cp);
      i += st.len;
    } else {
      // An invalid byte stands for itself (as Python's surrogateescape does), so slicing and
      // joining give the bytes back unchanged.
      out.push_back(0xDC00u + static_cast<unsigned char>(s[i]));
      ++i;
    }
  }
  return out;
}

std::string from_code_points(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t k = begin; k < end; ++k) {
    const uint32_t cp = cps[k];
    if (cp >= 0xDC80u && cp <= 0xDCFFu) {
      out.push_back(static_cast<char>(cp - 0xDC00u));
    } else {
      utf8::append(out, cp);
    }
  }
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0, i = 0;
  while (i < s.size()) {
    const utf8::Step st = utf8::next(s, i);
    i += st.kind == utf8::StepKind::kValid ? st.len : 1;
    ++n;
  }
  return n;
}

bool py_isspace(uint32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  if (cp >= 0x1C && cp <= 0x20) return true;
  if (cp == 0x85 || cp == 0xA0 || cp == 0x1680) return true;
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  return cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {

bool py_isprintable(uint32_t cp) {
  if (cp == ' ') return true;
  if (cp >= 0xDC80u && cp <= 0xDCFFu) return false;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

void append_hex(std::string& out, const char* prefix, uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*x", digits, static_cast<unsigned>(v));
  out += prefix;
  out += buf;
}

std::string str_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const uint32_t cp : code_points(s)) {
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      append_hex(out, "\\x", cp, 2);
    } else if (cp < 0x7F) {
      out += static_cast<char>(cp);
    } else if (!py_isprintable(cp)) {
      if (cp < 0x100) {
        append_hex(out, "\\x", cp, 2);
      } else if (cp < 0x10000) {
        append_hex(out, "\\u", cp, 4);
      } else {
        append_hex(out, "\\U", cp, 8);
      }
    } else {
      utf8::append(out, cp);
    }
  }
  out += quote;
  return out;
}

}  // namespace

// --- comparisons ----------------------------------------------------------------------------------

bool truthy(const Value& v) {
  switch (v.type) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool: return v.b;
    case Type::Int: return v.big != nullptr || v.i != 0;
    case Type::Float: return v.f != 0.0;
    case Type::String: return !v.s.empty();
    case Type::List: return !v.list->empty();
    case Type::Dict: return !v.dict->entries.empty();
    default: return true;
  }
}

namespace {

// Python compares an int with a float exactly (2**53 + 1 != 2.0**53): -1, 0 or 1, or 2 when f is
// NaN. `n` is an Int or Bool of any size.
int compare_int_float(const Value& n, double f) {
  if (std::isnan(f)) return 2;
  if (std::isinf(f)) return f > 0 ? -1 : 1;
  const double fl = std::floor(f);
  int c;
  if (!n.is_big() && std::fabs(fl) < 9.2e18) {
    const int64_t x = n.as_int(), y = static_cast<int64_t>(fl);
    c = x < y ? -1 : x > y ? 1 : 0;
  } else {
    c = n.as_bigint().compare(BigInt::from_double(fl));
  }
  if (c != 0) return c;
  return fl == f ? 0 : -1;  // n == floor(f) < f
}

// Two numbers (bool, int of any size, float) as Python orders them; 2 when unordered (NaN).
int compare_numbers(const Value& a, const Value& b) {
  const bool fa = a.type == Type::Float, fb = b.type == Type::Float;
  if (fa && fb) return a.f < b.f ? -1 : a.f > b.f ? 1 : a.f == b.f ? 0 : 2;
  if (fa) {
    const int c = compare_int_float(b, a.f);
    return c == 2 ? 2 : -c;
  }
  if (fb) return compare_int_float(a, b.f);
  if (!a.is_big() && !b.is_big()) {
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return a.as_bigint().compare(b.as_bigint());
}

}  // namespace

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
  if (a.type != b.type) return false;
  switch (a.type) {
    case Type::Undefined:
    case Type::None: return true;
    case Type::String: return a.s == b.s;
    case Type::List: {
      if (a.is_tuple != b.is_tuple || a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    }
    case Type::Dict: {
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& [k, v] : a.dict->entries) {
        const Value* other = b.dict->find(k);
        if (other == nullptr || !equals(v, *other)) return false;
      }
      return true;
    }
    case Type::Namespace: return a.ns == b.ns;
    case Type::Function: return a.fn == b.fn;
    default: return false;
  }
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == -1;
  if (a.type == Type::String && b.type == Type::String) return a.s < b.s;
  if (a.type == Type::List && b.type == Type::List && a.is_tuple == b.is_tuple) {
    const auto& x = *a.list;
    const auto& y = *b.list;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (equals(x[k], y[k])) continue;
      return less_than(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  std::string ta = type_name(a), tb = type_name(b);
  throw Error("'<' not supported between instances of '" + ta + "' and '" + tb + "'");
}

// --- text -----------------------------------------------------------------------------------------

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // like "-1.2345e+16", shortest round-trip digits
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp10 = std::stoi(sci.substr(e + 1));
  const bool neg = !mant.empty() && mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (const char c : mant)
    if (c != '.') digits += c;
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = neg ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    out += eb;
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

std::string to_str(const Value& v) {
  switch (v.type) {
    case Type::Undefined: return "";
    case Type::String: return v.s;
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.type) {
    case Type::Undefined: return "";
    case Type::None: return "None";
    case Type::Bool: return v.b ? "True" : "False";
    case Type::Int: return v.big ? v.big->to_string() : std::to_string(v.i);
    case Type::Float: return float_repr(v.f);
    case Type::String: return str_repr(v.s);
    case Type::List: {
      std::string out = v.is_tuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += ", ";
        out += repr((*v.list)[k]);
      }
      if (v.is_tuple && v.list->size() == 1) out += ",";
      out += v.is_tuple ? ")" : "]";
      return out;
    }
    case Type::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.dict->entries) {
        if (!first) out += ", ";
        first = false;
        out += repr(k) + ": " + repr(x);
      }
      return out + "}";
    }
    case Type::Namespace: return "<Namespace>";
    case Type::Function: return "<function " + v.fn->name + ">";
  }
  return "";
}

std::string type_name(const Value& v) {
  switch (v.type) {
    case Type::Undefined: return "Undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::List: return v.is_tuple ? "tuple" : "list";
    case Type::Dict: return "dict";
    case Type::Namespace: return "Namespace";
    case Type::Function: return "function";
  }
  return "object";
}

// --- json -----------------------------------------------------------------------------------------

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (const uint32_t cp : code_points(s)) {
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        append_hex(out, "\\u", 0xD800 + (v >> 10), 4);
        append_hex(out, "\\u", 0xDC00 + (v & 0x3FF), 4);
      } else {
        append_hex(out, "\\u", cp, 4);
      }
    } else if (cp >= 0xDC80u && cp <= 0xDCFFu) {
      out.push_back(static_cast<char>(cp - 0xDC00u));
    } else {
      utf8::append(out, cp);
    }
  }
  out += '"';
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

std::string json_key(const Value& k) {
  switch (k.type) {
    case Type::String: return k.s;
    case Type::Bool: return k.b ? "true" : "false";
    case Type::None: return "null";
    case Type::Int: return k.big ? k.big->to_string() : std::to_string(k.i);
    case Type::Float: return json_float(k.f);
    default:
      throw Error("keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

void dump(std::string& out, const Value& v, const JsonStyle& st, int level, int depth) {
  if (depth > 512) throw Error("tojson: value nested too deeply");
  auto newline = [&](int lvl) {
    out += '\n';
    for (int k = 0; k < lvl; ++k) out += st.indent;
  };
  switch (v.type) {
    case Type::None: out += "null"; return;
    case Type::Bool: out += v.b ? "true" : "false"; return;
    case Type::Int: out += v.big ? v.big->to_string() : std::to_string(v.i); return;
    case Type::Float: out += json_float(v.f); return;
    case Type::String: json_string(out, v.s, st.ensure_ascii); return;
    case Type::List: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      if (st.has_indent) newline(level + 1);
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) {
          out += st.item_sep;
          if (st.has_indent) newline(level + 1);
        }
        dump(out, (*v.list)[k], st, level + 1, depth + 1);
      }
      if (st.has_indent) newline(level);
      out += ']';
      return;
    }
    case Type::Dict: {
      if (v.dict->entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, x] : v.dict->entries) {
        if (st.sort_keys && k.type != Type::String)
          throw Error("'<' not supported between instances of '" + type_name(k) + "' and 'str'");
        items.emplace_back(json_key(k), &x);
      }
      if (st.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      if (st.has_indent) newline(level + 1);
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) {
          out += st.item_sep;
          if (st.has_indent) newline(level + 1);
        }
        json_string(out, items[k].first, st.ensure_ascii);
        out += st.key_sep;
        dump(out, *items[k].second, st, level + 1, depth + 1);
      }
      if (st.has_indent) newline(level);
      out += '}';
      return;
    }
    default:
      throw Error("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string json_dumps(const Value& v, const JsonStyle& style) {
  std::string out;
  dump(out, v, style, 0, 0);
  return out;
}

}  // namespace pagoda::jinja

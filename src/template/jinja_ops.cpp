// Operators, attribute/item access and slicing with Python semantics.
#include <cmath>
#include <cstdio>
#include <limits>

#include "template/jinja_builtins.h"
#include "template/jinja_eval.h"

namespace pagoda::jinja {
namespace {

std::string object_desc(const Value& v) {
  if (v.type == Type::None) return "'None'";
  std::string out = "'";
  out += type_name(v);
  out += " object'";
  return out;
}

Value missing_attr(const Value& obj, const std::string& name) {
  return Value::undefined(object_desc(obj) + " has no attribute '" + name + "'");
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw Error("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// Python int arithmetic: int64 while the result fits, exact BigInt beyond.
Value int_add(const Value& a, const Value& b) {
  int64_t r = 0;
  if (!a.is_big() && !b.is_big() && !__builtin_add_overflow(a.as_int(), b.as_int(), &r)) return Value::integer(r);
  return Value::integer(a.as_bigint() + b.as_bigint());
}
Value int_sub(const Value& a, const Value& b) {
  int64_t r = 0;
  if (!a.is_big() && !b.is_big() && !__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) return Value::integer(r);
  return Value::integer(a.as_bigint() - b.as_bigint());
}
Value int_mul(const Value& a, const Value& b) {
  int64_t r = 0;
  if (!a.is_big() && !b.is_big() && !__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) return Value::integer(r);
  return Value::integer(a.as_bigint() * b.as_bigint());
}

Value int_floordiv_mod(const std::string& op, const Value& a, const Value& b) {
  if (!a.is_big() && !b.is_big()) {
    const int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) throw Error("integer division or modulo by zero");
    if (!(x == std::numeric_limits<int64_t>::min() && y == -1)) {
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
  }
  auto [q, m] = BigInt::divmod(a.as_bigint(), b.as_bigint());
  return Value::integer(op == "//" ? q : m);
}

Value int_pow(const Value& a, const Value& b) {
  if (!a.is_big() && !b.is_big()) {
    int64_t base = a.as_int(), e = b.as_int(), acc = 1;
    bool overflow = false;
    while (e > 0 && !overflow) {
      if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) overflow = true;
      e >>= 1;
      if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow = true;
    }
    if (!overflow) return Value::integer(acc);
  }
  return Value::integer(BigInt::pow(a.as_bigint(), b.as_bigint()));
}

// int / int: Python rounds the exact quotient once; doubles can do that only while both operands
// are exact in a double.
Value int_true_div(const Value& a, const Value& b) {
  constexpr int64_t kExact = int64_t{1} << 53;
  if (!a.is_big() && !b.is_big()) {
    const int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) throw Error("division by zero");
    if (x >= -kExact && x <= kExact && y >= -kExact && y <= kExact)
      return Value::real(static_cast<double>(x) / static_cast<double>(y));
  }
  return Value::real(BigInt::true_divide(a.as_bigint(), b.as_bigint()));
}

Value repeat(Evaluator& ev, const Value& seq, int64_t count) {
  if (count <= 0) return seq.is_string() ? Value::string("") : Value::list_of({}, seq.is_tuple);
  const size_t unit = seq.is_string() ? seq.s.size() : seq.list->size() * sizeof(Value);
  if (unit != 0 && static_cast<uint64_t>(count) > ev.limits().max_output_bytes / unit)
    throw Error("repeated sequence too large");
  if (seq.is_string()) {
    std::string out;
    out.reserve(seq.s.size() * static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) out += seq.s;
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t k = 0; k < count; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::list_of(std::move(out), seq.is_tuple);
}

std::optional<int64_t> slice_index(const Value& v) {
  if (v.is_none()) return std::nullopt;
  if (!v.is_integral()) throw Error("slice indices must be integers or None or have an __index__ method");
  // Python clamps slice bounds to the sequence, so a huge one acts as the extreme it points to.
  if (v.is_big()) return v.big->negative() ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  return v.as_int();
}

}  // namespace

std::optional<int64_t> length(const Value& v) {
  switch (v.type) {
    case Type::Undefined: return 0;
    case Type::String: return static_cast<int64_t>(code_point_count(v.s));
    case Type::List: return static_cast<int64_t>(v.list->size());
    case Type::Dict: return static_cast<int64_t>(v.dict->entries.size());
    default: return std::nullopt;
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.type) {
    case Type::Undefined: return {};
    case Type::List: return *v.list;
    case Type::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict->entries.size());
      for (const auto& kv : v.dict->entries) keys.push_back(kv.first);
      return keys;
    }
    case Type::String: {
      const std::vector<uint32_t> cps = code_points(v.s);
      std::vector<Value> out;
      out.reserve(cps.size());
      for (size_t k = 0; k < cps.size(); ++k) out.push_back(Value::string(from_code_points(cps, k, k + 1)));
      return out;
    }
    default: throw Error("'" + type_name(v) + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.type) {
    case Type::Undefined: return false;
    case Type::String:
      if (!item.is_string()) throw Error("'in <string>' requires string as left operand, not " + type_name(item));
      return container.s.find(item.s) != std::string::npos;
    case Type::List:
      for (const Value& x : *container.list)
        if (equals(x, item)) return true;
      return false;
    case Type::Dict: return container.dict->find(item) != nullptr;
    default: throw Error("argument of type '" + type_name(container) + "' is not iterable");
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.type == Type::Namespace) {
    if (const Value* v = obj.ns->find(std::string_view(name))) return *v;
    return missing_attr(obj, name);
  }
  if (std::optional<Value> m = method(obj, name)) return *m;
  if (obj.type == Type::Dict) {
    if (const Value* v = obj.dict->find(std::string_view(name))) return *v;
  }
  return missing_attr(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  switch (obj.type) {
    case Type::Dict:
      if (const Value* v = obj.dict->find(key)) return *v;
      break;
    case Type::List:
      if (key.is_integral() && !key.is_big()) {
        int64_t k = key.as_int();
        const int64_t n = static_cast<int64_t>(obj.list->size());
        if (k < 0) k += n;
        if (k >= 0 && k < n) return (*obj.list)[static_cast<size_t>(k)];
        return Value::undefined(object_desc(obj) + " has no element " + repr(key));
      }
      break;
    case Type::String:
      if (key.is_integral() && !key.is_big()) {
        const std::vector<uint32_t> cps = code_points(obj.s);
        int64_t k = key.as_int();
        const int64_t n = static_cast<int64_t>(cps.size());
        if (k < 0) k += n;
        if (k >= 0 && k < n) return Value::string(from_code_points(cps, static_cast<size_t>(k), static_cast<size_t>(k) + 1));
        return Value::undefined(object_desc(obj) + " has no element " + repr(key));
      }
      break;
    default: break;
  }
  if (key.is_string()) return get_attr(obj, key.s);
  return Value::undefined(object_desc(obj) + " has no element " + repr(key));
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj);
  const std::optional<int64_t> start_i = slice_index(start_v), stop_i = slice_index(stop_v), step_i = slice_index(step_v);
  if (obj.type != Type::List && obj.type != Type::String) return Value::undefined(object_desc(obj) + " is not subscriptable");
  const int64_t step = step_i.value_or(1);
  if (step == 0) throw Error("slice step cannot be zero");
  std::vector<uint32_t> cps;
  int64_t len = 0;
  if (obj.is_string()) {
    cps = code_points(obj.s);
    len = static_cast<int64_t>(cps.size());
  } else {
    len = static_cast<int64_t>(obj.list->size());
  }
  const int64_t lower = step < 0 ? -1 : 0;
  const int64_t upper = step < 0 ? len - 1 : len;
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x = x < -len ? lower : x + len;  // avoids overflow for huge negative indices
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  const int64_t start = adjust(start_i, step < 0 ? upper : lower);
  const int64_t stop = adjust(stop_i, step < 0 ? lower : upper);
  std::vector<size_t> picks;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    picks.push_back(static_cast<size_t>(k));
    if ((step > 0 && k > std::numeric_limits<int64_t>::max() - step) ||
        (step < 0 && k < std::numeric_limits<int64_t>::min() - step))
      break;
  }
  if (obj.is_string()) {
    std::vector<uint32_t> out;
    out.reserve(picks.size());
    for (size_t k : picks) out.push_back(cps[k]);
    return Value::string(from_code_points(out, 0, out.size()));
  }
  std::vector<Value> out;
  out.reserve(picks.size());
  for (size_t k : picks) out.push_back((*obj.list)[k]);
  return Value::list_of(std::move(out), obj.is_tuple);
}

Value binary_op(Evaluator& ev, const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (op == "%" && a.is_string()) return Value::string(percent_format(ev, a.s, b));
  if (b.is_undefined()) undefined_error(b);
  const bool nums = a.is_number() && b.is_number();
  const bool floats = nums && (a.type == Type::Float || b.type == Type::Float);
  if (op == "+") {
    if (floats) return Value::real(a.as_double() + b.as_double());
    if (nums) return int_add(a, b);
    if (a.is_string() && b.is_string()) {
      ev.check_size(a.s.size() + b.s.size());
      return Value::string(a.s + b.s);
    }
    if (a.is_list() && b.is_list() && a.is_tuple == b.is_tuple) {
      std::vector<Value> out = *a.list;
      out.insert(out.end(), b.list->begin(), b.list->end());
      return Value::list_of(std::move(out), a.is_tuple);
    }
    if (a.is_string()) throw Error("can only concatenate str (not \"" + type_name(b) + "\") to str");
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (floats) return Value::real(a.as_double() - b.as_double());
    if (nums) return int_sub(a, b);
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (floats) return Value::real(a.as_double() * b.as_double());
    if (nums) return int_mul(a, b);
    if ((a.is_string() || a.is_list()) && b.is_integral()) return repeat(ev, a, b.as_int());
    if ((b.is_string() || b.is_list()) && a.is_integral()) return repeat(ev, b, a.as_int());
    unsupported("*", a, b);
  }
  if (!nums) unsupported(op, a, b);
  if (op == "/") {
    if (!floats) return int_true_div(a, b);
    if (b.as_double() == 0) throw Error("division by zero");
    return Value::real(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (floats) {
      const double x = a.as_double(), y = b.as_double();
      if (y == 0) throw Error(op == "//" ? "float floor division by zero" : "float modulo");
      // CPython's float_divmod.
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      if (op == "%") return Value::real(mod);
      double floordiv = std::copysign(0.0, x / y);
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      }
      return Value::real(floordiv);
    }
    return int_floordiv_mod(op, a, b);
  }
  if (op == "**") {
    if (!floats && !b.as_bigint().negative()) return int_pow(a, b);
    if (a.as_double() == 0 && b.as_double() < 0) throw Error("0.0 cannot be raised to a negative power");
    return Value::real(std::pow(a.as_double(), b.as_double()));
  }
  unsupported(op, a, b);
}

std::string percent_format(Evaluator& ev, const std::string& fmt, const Value& args) {
  std::vector<Value> pos;
  const Dict* mapping = nullptr;
  if (args.is_list() && args.is_tuple) {
    pos = *args.list;
  } else {
    if (args.is_dict()) mapping = args.dict.get();
    pos.push_back(args);
  }
  size_t next = 0;
  auto take = [&]() -> const Value& {
    if (next >= pos.size()) throw Error("not enough arguments for format string");
    return pos[next++];
  };
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw Error("incomplete format");
    const Value* val = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos) throw Error("incomplete format key");
      if (mapping == nullptr) throw Error("format requires a mapping");
      const Value* v = mapping->find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (v == nullptr) throw Error("KeyError: " + fmt.substr(i + 1, close - i - 1));
      val = v;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) flags += fmt[i++];
    int width = 0, prec = -1;
    while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9' && width < 10000) width = width * 10 + (fmt[i++] - '0');
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      prec = 0;
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9' && prec < 10000) prec = prec * 10 + (fmt[i++] - '0');
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) throw Error("incomplete format");
    const char conv = fmt[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    const Value& v = val ? *val : take();
    std::string piece;
    bool numeric = false;
    switch (conv) {
      case 's': piece = to_str(v); break;
      case 'r':
      case 'a': piece = repr(v); break;
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_number()) throw Error(std::string("%") + conv + " format: a real number is required, not " + type_name(v));
        numeric = true;
        const char* sign_flag = flags.find('+') != std::string::npos ? "+" : flags.find(' ') != std::string::npos ? " " : "";
        if (v.is_big() && (conv == 'd' || conv == 'i' || conv == 'u')) {
          piece = v.big->to_string();
          if (!v.big->negative()) piece = sign_flag + piece;
          break;
        }
        const double d = v.as_double();
        if (v.type == Type::Float && !(std::fabs(d) < 9.2e18)) throw Error("cannot convert float to integer");
        const int64_t n = v.type == Type::Float ? static_cast<int64_t>(d) : v.as_int();
        const uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
        char buf[64];
        std::snprintf(buf, sizeof buf, conv == 'x' ? "%llx" : conv == 'X' ? "%llX" : conv == 'o' ? "%llo" : "%llu",
                      static_cast<unsigned long long>(mag));
        piece = std::string(n < 0 ? "-" : flags.find('+') != std::string::npos ? "+" : flags.find(' ') != std::string::npos ? " " : "") + buf;
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        if (!v.is_number()) throw Error("must be real number, not " + type_name(v));
        numeric = true;
        char spec[16];
        std::snprintf(spec, sizeof spec, "%%%s.%d%c", flags.find('+') != std::string::npos ? "+" : flags.find(' ') != std::string::npos ? " " : "",
                      prec < 0 ? 6 : std::min(prec, 300), conv);
        char buf[512];
        std::snprintf(buf, sizeof buf, spec, v.as_double());
        piece = buf;
        break;
      }
      case 'c':
        if (v.is_string() && code_point_count(v.s) == 1) {
          piece = v.s;
        } else {
          throw Error("%c requires int or char");
        }
        break;
      default: throw Error(std::string("unsupported format character '") + conv + "'");
    }
    if (prec >= 0 && (conv == 's' || conv == 'r' || conv == 'a')) {
      const std::vector<uint32_t> cps = code_points(piece);
      if (cps.size() > static_cast<size_t>(prec)) piece = from_code_points(cps, 0, static_cast<size_t>(prec));
    }
    const size_t shown = code_point_count(piece);
    if (shown < static_cast<size_t>(width)) {
      const size_t pad = static_cast<size_t>(width) - shown;
      if (flags.find('-') != std::string::npos) {
        piece += std::string(pad, ' ');
      } else if (numeric && flags.find('0') != std::string::npos) {
        const size_t sign = !piece.empty() && (piece[0] == '-' || piece[0] == '+' || piece[0] == ' ') ? 1 : 0;
        piece.insert(sign, std::string(pad, '0'));
      } else {
        piece.insert(0, std::string(pad, ' '));
      }
    }
    ev.check_size(out.size() + piece.size());
    out += piece;
  }
  if (mapping == nullptr && next < pos.size()) throw Error("not all arguments converted during string formatting");
  return out;
}

}  // namespace pagoda::jinja

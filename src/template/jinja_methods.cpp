// The methods of str, dict and list that jinja2's ImmutableSandboxedEnvironment lets templates call,
// with Python's semantics; the mutating ones raise the sandbox's SecurityError when called.
#include <utf8proc.h>

#include <algorithm>
#include <cstdio>

#include "template/jinja_builtins.h"
#include "template/jinja_eval.h"
#include "tokenizer/utf8.h"

namespace pagoda::jinja {
namespace {

bool is_cased(uint32_t cp) {
  const auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}
bool is_upper_cp(uint32_t cp) {
  const auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LT;
}
bool is_lower_cp(uint32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)) == UTF8PROC_CATEGORY_LL; }

void put_upper(std::string& out, uint32_t cp) {
  if (cp == 0xDF) {  // ß: Python's full case mapping
    out += "SS";
    return;
  }
  utf8::append(out, static_cast<uint32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp))));
}
void put_lower(std::string& out, uint32_t cp) {
  if (cp == 0x130) {  // İ
    out += "i\xCC\x87";
    return;
  }
  utf8::append(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
}
void put_title(std::string& out, uint32_t cp) {
  utf8::append(out, static_cast<uint32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp))));
}
void put_cp(std::string& out, uint32_t cp) {
  if (cp >= 0xDC80u && cp <= 0xDCFFu) {
    out.push_back(static_cast<char>(cp - 0xDC00u));
  } else {
    utf8::append(out, cp);
  }
}

const std::string& str_arg(const CallArgs& a, size_t pos, const char* name, const char* method) {
  const Value* v = arg(a, pos, name);
  if (v == nullptr || !v->is_string())
    throw Error(std::string(method) + "() argument must be str" + (v ? ", not " + type_name(*v) : ""));
  return v->s;
}

std::string str_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (const uint32_t cp : code_points(s)) {
    if (prev_cased) {
      put_lower(out, cp);
    } else {
      put_title(out, cp);
    }
    prev_cased = is_cased(cp);
  }
  return out;
}

int64_t maxsplit_arg(const CallArgs& a) {
  const Value* m = arg(a, 1, "maxsplit");
  if (m == nullptr || m->is_none()) return -1;
  if (!m->is_integral()) throw Error("maxsplit must be an integer");
  return m->as_int();
}

Value str_split(const std::string& s, const CallArgs& a, bool right) {
  const Value* sepv = arg(a, 0, "sep");
  int64_t maxsplit = maxsplit_arg(a);
  std::vector<Value> parts;
  if (sepv == nullptr || sepv->is_none()) {
    const std::vector<uint32_t> cps = code_points(s);
    const int64_t n = static_cast<int64_t>(cps.size());
    if (!right) {
      int64_t i = 0;
      while (true) {
        while (i < n && py_isspace(cps[static_cast<size_t>(i)])) ++i;
        if (i >= n) break;
        if (maxsplit == 0) {
          parts.push_back(Value::string(from_code_points(cps, static_cast<size_t>(i), cps.size())));
          break;
        }
        int64_t j = i;
        while (j < n && !py_isspace(cps[static_cast<size_t>(j)])) ++j;
        parts.push_back(Value::string(from_code_points(cps, static_cast<size_t>(i), static_cast<size_t>(j))));
        if (maxsplit > 0) --maxsplit;
        i = j;
      }
    } else {
      int64_t j = n;
      while (true) {
        while (j > 0 && py_isspace(cps[static_cast<size_t>(j - 1)])) --j;
        if (j <= 0) break;
        if (maxsplit == 0) {
          parts.push_back(Value::string(from_code_points(cps, 0, static_cast<size_t>(j))));
          break;
        }
        int64_t i = j;
        while (i > 0 && !py_isspace(cps[static_cast<size_t>(i - 1)])) --i;
        parts.push_back(Value::string(from_code_points(cps, static_cast<size_t>(i), static_cast<size_t>(j))));
        if (maxsplit > 0) --maxsplit;
        j = i;
      }
      std::reverse(parts.begin(), parts.end());
    }
    return Value::list_of(std::move(parts));
  }
  if (!sepv->is_string()) throw Error("must be str or None, not " + type_name(*sepv));
  const std::string& sep = sepv->s;
  if (sep.empty()) throw Error("empty separator");
  if (!right) {
    size_t start = 0;
    while (maxsplit != 0) {
      const size_t k = s.find(sep, start);
      if (k == std::string::npos) break;
      parts.push_back(Value::string(s.substr(start, k - start)));
      start = k + sep.size();
      if (maxsplit > 0) --maxsplit;
    }
    parts.push_back(Value::string(s.substr(start)));
  } else {
    size_t end = s.size();
    while (maxsplit != 0 && end >= sep.size()) {
      const size_t k = s.rfind(sep, end - sep.size());
      if (k == std::string::npos) break;
      parts.push_back(Value::string(s.substr(k + sep.size(), end - k - sep.size())));
      end = k;
      if (maxsplit > 0) --maxsplit;
    }
    parts.push_back(Value::string(s.substr(0, end)));
    std::reverse(parts.begin(), parts.end());
  }
  return Value::list_of(std::move(parts));
}

Value str_replace(Evaluator& ev, const std::string& s, const CallArgs& a) {
  const std::string& old = str_arg(a, 0, "old", "replace");
  const std::string& rep = str_arg(a, 1, "new", "replace");
  const Value* c = arg(a, 2, "count");
  int64_t count = c && c->is_integral() ? c->as_int() : -1;
  std::string out;
  if (old.empty()) {
    const std::vector<uint32_t> cps = code_points(s);
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count != 0) {
        out += rep;
        if (count > 0) --count;
      }
      if (k < cps.size()) put_cp(out, cps[k]);
      ev.check_size(out.size());
    }
    return Value::string(std::move(out));
  }
  size_t start = 0;
  while (count != 0) {
    const size_t k = s.find(old, start);
    if (k == std::string::npos) break;
    out.append(s, start, k - start);
    out += rep;
    ev.check_size(out.size());
    start = k + old.size();
    if (count > 0) --count;
  }
  out.append(s, start, std::string::npos);
  return Value::string(std::move(out));
}

bool affix_match(const std::string& s, const Value& affix, bool suffix) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) throw Error(std::string(suffix ? "endswith" : "startswith") + " first arg must be str or a tuple of str");
    if (v.s.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - v.s.size(), v.s.size(), v.s) == 0 : s.compare(0, v.s.size(), v.s) == 0;
  };
  if (affix.is_list() && affix.is_tuple) {
    for (const Value& v : *affix.list)
      if (one(v)) return true;
    return false;
  }
  return one(affix);
}

int64_t cp_index(const std::string& s, size_t byte_pos) {
  return static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, byte_pos)));
}

// str.format with positional {} / {0} and named {name} fields; a format spec is not supported.
std::string str_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw Error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw Error("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    bool use_repr = false;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      use_repr = field.substr(bang + 1) == "r";
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos) throw Error("format specs in str.format are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < a.pos.size() ? &a.pos[auto_index] : nullptr;
      ++auto_index;
    } else if (std::all_of(field.begin(), field.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      const size_t k = field.size() > 6 ? a.pos.size() : std::stoul(field);
      v = k < a.pos.size() ? &a.pos[k] : nullptr;
    } else {
      for (const auto& [key, x] : a.kw)
        if (key == field) v = &x;
    }
    if (v == nullptr) throw Error("Replacement index out of range / missing key '" + field + "' in format string");
    out += use_repr ? repr(*v) : to_str(*v);
  }
  return out;
}

template <typename Pred>
bool all_cps(const std::string& s, Pred pred) {
  const std::vector<uint32_t> cps = code_points(s);
  return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred);
}

Value bound(const Value& obj, const std::string& name, std::function<Value(Evaluator&, const Value&, CallArgs&)> f) {
  return Value::function(name, [obj, f = std::move(f)](Evaluator& ev, CallArgs& a) { return f(ev, obj, a); });
}

Value unsafe(const Value& obj, const std::string& name) {
  const std::string msg = "access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.";
  return Value::function(name, [msg](Evaluator&, CallArgs&) -> Value { throw Error(msg); });
}

std::optional<Value> string_method(const Value& obj, const std::string& name) {
  using A = CallArgs;
  if (name == "startswith" || name == "endswith") {
    const bool suffix = name == "endswith";
    return bound(obj, name, [suffix](Evaluator&, const Value& self, A& a) {
      const Value* p = arg(a, 0, "prefix");
      if (p == nullptr) throw Error("startswith/endswith takes at least 1 argument");
      return Value::boolean(affix_match(self.s, *p, suffix));
    });
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    return bound(obj, name, [left, right](Evaluator&, const Value& self, A& a) {
      const Value* c = arg(a, 0, "chars");
      if (c && !c->is_none() && !c->is_string()) throw Error("strip arg must be None or str");
      return Value::string(str_strip(self.s, c && c->is_string() ? &c->s : nullptr, left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return bound(obj, name, [right](Evaluator&, const Value& self, A& a) { return str_split(self.s, a, right); });
  }
  if (name == "replace")
    return bound(obj, name, [](Evaluator& ev, const Value& self, A& a) { return str_replace(ev, self.s, a); });
  if (name == "upper") return bound(obj, name, [](Evaluator&, const Value& self, A&) { return Value::string(str_upper(self.s)); });
  if (name == "lower") return bound(obj, name, [](Evaluator&, const Value& self, A&) { return Value::string(str_lower(self.s)); });
  if (name == "title") return bound(obj, name, [](Evaluator&, const Value& self, A&) { return Value::string(str_title(self.s)); });
  if (name == "capitalize")
    return bound(obj, name, [](Evaluator&, const Value& self, A&) { return Value::string(str_capitalize(self.s)); });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const bool rev = name[0] == 'r', raise = name.find("index") != std::string::npos;
    return bound(obj, name, [rev, raise](Evaluator&, const Value& self, A& a) {
      const std::string& sub = str_arg(a, 0, "sub", "find");
      const size_t k = rev ? self.s.rfind(sub) : self.s.find(sub);
      if (k == std::string::npos) {
        if (raise) throw Error("substring not found");
        return Value::integer(-1);
      }
      return Value::integer(cp_index(self.s, k));
    });
  }
  if (name == "count") {
    return bound(obj, name, [](Evaluator&, const Value& self, A& a) {
      const std::string& sub = str_arg(a, 0, "sub", "count");
      if (sub.empty()) return Value::integer(static_cast<int64_t>(code_point_count(self.s)) + 1);
      int64_t n = 0;
      for (size_t k = self.s.find(sub); k != std::string::npos; k = self.s.find(sub, k + sub.size())) ++n;
      return Value::integer(n);
    });
  }
  if (name == "join") {
    return bound(obj, name, [](Evaluator& ev, const Value& self, A& a) {
      const Value* it = arg(a, 0, "iterable");
      if (it == nullptr) throw Error("join() takes exactly one argument");
      std::string out;
      bool first = true;
      for (const Value& v : iterate(*it)) {
        if (!v.is_string()) throw Error("sequence item: expected str instance, " + type_name(v) + " found");
        if (!first) out += self.s;
        first = false;
        out += v.s;
        ev.check_size(out.size());
      }
      return Value::string(std::move(out));
    });
  }
  if (name == "format")
    return bound(obj, name, [](Evaluator&, const Value& self, A& a) { return Value::string(str_format(self.s, a)); });
  if (name == "splitlines") {
    return bound(obj, name, [](Evaluator&, const Value& self, A&) {
      std::vector<Value> out;
      for (std::string& l : str_splitlines(self.s)) out.push_back(Value::string(std::move(l)));
      return Value::list_of(std::move(out));
    });
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") {
    return bound(obj, name, [](Evaluator&, const Value& self, A&) {
      return Value::boolean(all_cps(self.s, [](uint32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_ND; }));
    });
  }
  if (name == "isalpha" || name == "isalnum") {
    const bool alnum = name == "isalnum";
    return bound(obj, name, [alnum](Evaluator&, const Value& self, A&) {
      return Value::boolean(all_cps(self.s, [alnum](uint32_t c) {
        const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
        const bool alpha = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
        return alpha || (alnum && cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
      }));
    });
  }
  if (name == "isspace")
    return bound(obj, name, [](Evaluator&, const Value& self, A&) { return Value::boolean(all_cps(self.s, py_isspace)); });
  if (name == "islower" || name == "isupper") {
    const bool lower = name == "islower";
    return bound(obj, name, [lower](Evaluator&, const Value& self, A&) {
      bool any = false;
      for (const uint32_t c : code_points(self.s)) {
        if (lower ? is_upper_cp(c) : (is_lower_cp(c) || utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_LT))
          return Value::boolean(false);
        any = any || is_cased(c);
      }
      return Value::boolean(any);
    });
  }
  return std::nullopt;
}

std::optional<Value> dict_method(const Value& obj, const std::string& name) {
  using A = CallArgs;
  if (name == "items" || name == "keys" || name == "values") {
    const int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
    return bound(obj, name, [which](Evaluator&, const Value& self, A&) {
      std::vector<Value> out;
      for (const auto& [k, v] : self.dict->entries)
        out.push_back(which == 0 ? Value::list_of({k, v}, true) : which == 1 ? k : v);
      return Value::list_of(std::move(out));
    });
  }
  if (name == "get") {
    return bound(obj, name, [](Evaluator&, const Value& self, A& a) {
      const Value* k = arg(a, 0, "key");
      if (k == nullptr) throw Error("get expected at least 1 argument, got 0");
      if (const Value* v = self.dict->find(*k)) return *v;
      const Value* d = arg(a, 1, "default");
      return d ? *d : Value::none();
    });
  }
  if (name == "copy") return bound(obj, name, [](Evaluator&, const Value& self, A&) { return Value::dict_of(*self.dict); });
  if (name == "pop" || name == "popitem" || name == "update" || name == "clear" || name == "setdefault")
    return unsafe(obj, name);
  return std::nullopt;
}

std::optional<Value> list_method(const Value& obj, const std::string& name) {
  using A = CallArgs;
  if (name == "index" || name == "count") {
    const bool count = name == "count";
    return bound(obj, name, [count](Evaluator&, const Value& self, A& a) {
      const Value* x = arg(a, 0, "value");
      if (x == nullptr) throw Error(std::string(count ? "count" : "index") + "() takes exactly one argument");
      int64_t n = 0;
      for (size_t k = 0; k < self.list->size(); ++k) {
        if (!equals((*self.list)[k], *x)) continue;
        if (!count) return Value::integer(static_cast<int64_t>(k));
        ++n;
      }
      if (!count) throw Error(repr(*x) + " is not in list");
      return Value::integer(n);
    });
  }
  if (name == "copy" && !obj.is_tuple)
    return bound(obj, name, [](Evaluator&, const Value& self, A&) { return Value::list_of(*self.list); });
  if (!obj.is_tuple && (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
                        name == "remove" || name == "reverse" || name == "sort" || name == "clear"))
    return unsafe(obj, name);
  return std::nullopt;
}

}  // namespace

std::string str_upper(std::string_view s) {
  std::string out;
  for (const uint32_t cp : code_points(s)) {
    if (cp >= 0xDC80u && cp <= 0xDCFFu) {
      put_cp(out, cp);
    } else {
      put_upper(out, cp);
    }
  }
  return out;
}

std::string str_lower(std::string_view s) {
  std::string out;
  for (const uint32_t cp : code_points(s)) {
    if (cp >= 0xDC80u && cp <= 0xDCFFu) {
      put_cp(out, cp);
    } else {
      put_lower(out, cp);
    }
  }
  return out;
}

std::string str_capitalize(std::string_view s) {
  const std::vector<uint32_t> cps = code_points(s);
  std::string out;
  for (size_t k = 0; k < cps.size(); ++k) {
    if (cps[k] >= 0xDC80u && cps[k] <= 0xDCFFu) {
      put_cp(out, cps[k]);
    } else if (k == 0) {
      put_title(out, cps[k]);
    } else {
      put_lower(out, cps[k]);
    }
  }
  return out;
}

std::string str_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::vector<uint32_t> cps = code_points(s);
  std::vector<uint32_t> set;
  if (chars) set = code_points(*chars);
  auto strip_it = [&](uint32_t cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : py_isspace(cp);
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return from_code_points(cps, b, e);
}

std::vector<std::string> str_splitlines(std::string_view s) {
  const std::vector<uint32_t> cps = code_points(s);
  std::vector<std::string> out;
  size_t start = 0, k = 0;
  while (k < cps.size()) {
    const uint32_t c = cps[k];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                     c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      ++k;
      continue;
    }
    out.push_back(from_code_points(cps, start, k));
    k += (c == '\r' && k + 1 < cps.size() && cps[k + 1] == '\n') ? 2 : 1;
    start = k;
  }
  if (start < cps.size()) out.push_back(from_code_points(cps, start, cps.size()));
  return out;
}

std::optional<Value> method(const Value& obj, const std::string& name) {
  switch (obj.type) {
    case Type::String: return string_method(obj, name);
    case Type::Dict: return dict_method(obj, name);
    case Type::List: return list_method(obj, name);
    default: return std::nullopt;
  }
}

}  // namespace pagoda::jinja

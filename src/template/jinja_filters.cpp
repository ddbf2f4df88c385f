// jinja2's built-in filters (the ones chat templates use) and transformers' tojson.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "template/jinja_builtins.h"
#include "template/jinja_eval.h"

namespace pagoda::jinja {

const Value* arg(const CallArgs& args, size_t pos, const char* name) {
  if (pos < args.pos.size()) return &args.pos[pos];
  for (const auto& [k, v] : args.kw)
    if (k == name) return &v;
  return nullptr;
}

namespace {

using FilterFn = Value (*)(Evaluator&, const Value&, CallArgs&);

bool flag(const CallArgs& a, size_t pos, const char* name) {
  const Value* v = arg(a, pos, name);
  return v != nullptr && truthy(*v);
}

Value ignore_case(const Value& v) { return v.is_string() ? Value::string(str_lower(v.s)) : v; }

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0, with getitem.
Value lookup_path(const Value& item, const Value& attribute) {
  if (attribute.is_integral()) return get_item(item, attribute);
  const std::string path = to_str(attribute);
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = get_item(cur, digits ? Value::integer(*BigInt::parse(part, 10)) : Value::string(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

std::vector<Value> attribute_keys(const std::vector<Value>& items, const Value* attribute, bool case_sensitive) {
  std::vector<Value> keys;
  keys.reserve(items.size());
  for (const Value& it : items) {
    Value k = attribute ? lookup_path(it, *attribute) : it;
    keys.push_back(case_sensitive ? k : ignore_case(k));
  }
  return keys;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Python float(str); nullopt where Python raises ValueError.
std::optional<double> parse_float(const std::string& text) {
  std::string t = str_strip(text, nullptr, true, true);
  std::string clean;
  for (size_t k = 0; k < t.size(); ++k) {
    if (t[k] == '_') {
      if (k == 0 || k + 1 >= t.size() || !isdigit(static_cast<unsigned char>(t[k - 1])) ||
          !isdigit(static_cast<unsigned char>(t[k + 1])))
        return std::nullopt;
      continue;
    }
    clean += t[k];
  }
  if (clean.empty()) return std::nullopt;
  const std::string low = str_lower(clean);
  const std::string body = low[0] == '+' || low[0] == '-' ? low.substr(1) : low;
  const double sign = low[0] == '-' ? -1.0 : 1.0;
  if (body == "inf" || body == "infinity") return sign * HUGE_VAL;
  if (body == "nan") return std::nan("");
  if (body.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

// Python int(str, base) (whitespace, sign, underscores between digits, and for bases 2, 8 and 16
// the matching 0b / 0o / 0x prefix); any size; nullopt on ValueError.
std::optional<Value> parse_int(const std::string& text, int base) {
  const std::string t = str_strip(text, nullptr, true, true);
  size_t k = 0;
  bool neg = false;
  if (k < t.size() && (t[k] == '+' || t[k] == '-')) neg = t[k++] == '-';
  if (base != 10 && k + 1 < t.size() && t[k] == '0') {
    const char p = static_cast<char>(t[k + 1] | 0x20);
    if ((base == 2 && p == 'b') || (base == 8 && p == 'o') || (base == 16 && p == 'x')) {
      k += 2;
      if (k < t.size() && t[k] == '_') ++k;  // int('0x_ff', 16) is allowed
    }
  }
  std::string digits;
  for (; k < t.size(); ++k) {
    const char c = t[k];
    if (c == '_' && !digits.empty() && k + 1 < t.size() && t[k + 1] != '_') continue;
    if (!isalnum(static_cast<unsigned char>(c))) return std::nullopt;
    digits += c;
  }
  std::optional<BigInt> v = BigInt::parse(digits, base, neg);
  if (!v) return std::nullopt;
  return Value::integer(*v);
}

// int(x) for a float: truncated toward zero, exact at any size.
Value to_int_value(double d) {
  if (std::isinf(d)) throw Error("cannot convert float infinity to integer");
  return Value::integer(BigInt::from_double(std::trunc(d)));
}

Value f_int(Evaluator&, const Value& v, CallArgs& a) {
  const Value* dflt = arg(a, 0, "default");
  const Value fallback = dflt ? *dflt : Value::integer(0);
  const Value* base = arg(a, 1, "base");
  if (v.type == Type::Int) return v;
  if (v.type == Type::Bool) return Value::integer(v.as_int());
  // int(nan) is a ValueError, which jinja2's do_int turns into the default.
  if (v.type == Type::Float) return std::isnan(v.f) ? fallback : to_int_value(v.f);
  if (v.is_string()) {
    int b = 10;
    if (base && base->is_integral() && !base->is_big() && base->as_int() != 10) {
      if (base->as_int() < 2 || base->as_int() > 36) throw Error("int() base must be >= 2 and <= 36, or 0");
      b = static_cast<int>(base->as_int());
    }
    if (std::optional<Value> i = parse_int(v.s, b)) return *i;
    if (std::optional<double> d = parse_float(v.s)) return std::isnan(*d) ? fallback : to_int_value(*d);
  }
  return fallback;
}

Value f_float(Evaluator&, const Value& v, CallArgs& a) {
  const Value* dflt = arg(a, 0, "default");
  if (v.is_number()) return Value::real(v.as_double());
  if (v.is_string())
    if (std::optional<double> d = parse_float(v.s)) return Value::real(*d);
  return dflt ? *dflt : Value::real(0.0);
}

Value f_length(Evaluator&, const Value& v, CallArgs&) {
  std::optional<int64_t> n = length(v);
  if (!n) throw Error("object of type '" + type_name(v) + "' has no len()");
  return Value::integer(*n);
}

Value f_default(Evaluator&, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "default_value");
  if (v.is_undefined() || (flag(a, 1, "boolean") && !truthy(v))) return d ? *d : Value::string("");
  return v;
}

Value f_first(Evaluator&, const Value& v, CallArgs&) {
  if (v.type == Type::List && !v.list->empty()) return v.list->front();
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Evaluator&, const Value& v, CallArgs&) {
  if (v.is_undefined()) undefined_error(v);
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_list(Evaluator&, const Value& v, CallArgs&) { return Value::list_of(iterate(v)); }

Value f_string(Evaluator&, const Value& v, CallArgs&) { return Value::string(to_str(v)); }

Value f_trim(Evaluator&, const Value& v, CallArgs& a) {
  const Value* c = arg(a, 0, "chars");
  return Value::string(str_strip(to_str(v), c && c->is_string() ? &c->s : nullptr, true, true));
}

Value f_upper(Evaluator&, const Value& v, CallArgs&) { return Value::string(str_upper(to_str(v))); }
Value f_lower(Evaluator&, const Value& v, CallArgs&) { return Value::string(str_lower(to_str(v))); }
Value f_capitalize(Evaluator&, const Value& v, CallArgs&) { return Value::string(str_capitalize(to_str(v))); }

Value f_title(Evaluator&, const Value& v, CallArgs&) {
  // Words begin after runs of "-", whitespace, "(", "{", "[", "<".
  const std::vector<uint32_t> cps = code_points(to_str(v));
  auto sep = [](uint32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
  std::string out;
  size_t k = 0;
  while (k < cps.size()) {
    size_t j = k;
    const bool is_sep = sep(cps[k]);
    while (j < cps.size() && sep(cps[j]) == is_sep) ++j;
    const std::string piece = from_code_points(cps, k, j);
    if (is_sep) {
      out += piece;
    } else {
      out += str_upper(from_code_points(cps, k, k + 1)) + str_lower(from_code_points(cps, k + 1, j));
    }
    k = j;
  }
  return Value::string(std::move(out));
}

Value f_replace(Evaluator& ev, const Value& v, CallArgs& a) {
  const Value self = Value::string(to_str(v));
  std::optional<Value> m = method(self, "replace");
  CallArgs b;
  for (size_t k = 0; k < 3; ++k) {
    const char* names[] = {"old", "new", "count"};
    if (const Value* x = arg(a, k, names[k])) {
      b.pos.push_back(x->is_string() || k == 2 ? *x : Value::string(to_str(*x)));
    }
  }
  return ev.call(*m, b);
}

Value f_join(Evaluator& ev, const Value& v, CallArgs& a) {
  const Value* d = arg(a, 0, "d");
  const Value* attribute = arg(a, 1, "attribute");
  const std::string sep = d ? to_str(*d) : "";
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attribute && !attribute->is_none() ? lookup_path(item, *attribute) : item);
    ev.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value f_items(Evaluator&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::list_of({});
  if (!v.is_dict()) throw Error("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict->entries) out.push_back(Value::list_of({k, x}, true));
  return Value::list_of(std::move(out));
}

Value f_dictsort(Evaluator&, const Value& v, CallArgs& a) {
  if (!v.is_dict()) throw Error("dictsort expects a mapping");
  const bool cs = flag(a, 0, "case_sensitive");
  const Value* by = arg(a, 1, "by");
  const bool reverse = flag(a, 2, "reverse");
  size_t pos = 0;
  if (by && to_str(*by) == "value") {
    pos = 1;
  } else if (by && to_str(*by) != "key") {
    throw Error("You can only sort by either \"key\" or \"value\"");
  }
  std::vector<Value> items;
  for (const auto& [k, x] : v.dict->entries) items.push_back(Value::list_of({k, x}, true));
  std::vector<size_t> order(items.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::vector<Value> keys;
  for (const Value& it : items) keys.push_back(cs ? (*it.list)[pos] : ignore_case((*it.list)[pos]));
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? less_than(keys[y], keys[x]) : less_than(keys[x], keys[y]);
  });
  std::vector<Value> out;
  for (size_t k : order) out.push_back(items[k]);
  return Value::list_of(std::move(out));
}

Value f_sort(Evaluator&, const Value& v, CallArgs& a) {
  std::vector<Value> items = iterate(v);
  const bool reverse = flag(a, 0, "reverse");
  const bool cs = flag(a, 1, "case_sensitive");
  const Value* attribute = arg(a, 2, "attribute");
  const std::vector<Value> keys = attribute_keys(items, attribute && !attribute->is_none() ? attribute : nullptr, cs);
  std::vector<size_t> order(items.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? less_than(keys[y], keys[x]) : less_than(keys[x], keys[y]);
  });
  std::vector<Value> out;
  for (size_t k : order) out.push_back(items[k]);
  return Value::list_of(std::move(out));
}

Value min_max(const Value& v, CallArgs& a, bool want_max) {
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool cs = flag(a, 0, "case_sensitive");
  const Value* attribute = arg(a, 1, "attribute");
  const std::vector<Value> keys = attribute_keys(items, attribute && !attribute->is_none() ? attribute : nullptr, cs);
  size_t best = 0;
  for (size_t k = 1; k < items.size(); ++k)
    if (want_max ? less_than(keys[best], keys[k]) : less_than(keys[k], keys[best])) best = k;
  return items[best];
}
Value f_max(Evaluator&, const Value& v, CallArgs& a) { return min_max(v, a, true); }
Value f_min(Evaluator&, const Value& v, CallArgs& a) { return min_max(v, a, false); }

Value f_unique(Evaluator&, const Value& v, CallArgs& a) {
  std::vector<Value> items = iterate(v);
  const bool cs = flag(a, 0, "case_sensitive");
  const Value* attribute = arg(a, 1, "attribute");
  const std::vector<Value> keys = attribute_keys(items, attribute && !attribute->is_none() ? attribute : nullptr, cs);
  std::vector<Value> out, seen;
  for (size_t k = 0; k < items.size(); ++k) {
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, keys[k]); })) continue;
    seen.push_back(keys[k]);
    out.push_back(items[k]);
  }
  return Value::list_of(std::move(out));
}

Value f_reverse(Evaluator&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::vector<uint32_t> cps = code_points(v.s);
    std::reverse(cps.begin(), cps.end());
    return Value::string(from_code_points(cps, 0, cps.size()));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list_of(std::move(items));
}

Value f_sum(Evaluator& ev, const Value& v, CallArgs& a) {
  const Value* attribute = arg(a, 0, "attribute");
  const Value* start = arg(a, 1, "start");
  Value total = start ? *start : Value::integer(0);
  for (const Value& item : iterate(v))
    total = binary_op(ev, "+", total, attribute && !attribute->is_none() ? lookup_path(item, *attribute) : item);
  return total;
}

Value f_map(Evaluator& ev, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  const Value* attribute = arg(a, 1000, "attribute");
  if (a.pos.empty() && attribute) {
    const Value* dflt = arg(a, 1000, "default");
    for (const Value& item : iterate(v)) {
      Value x = lookup_path(item, *attribute);
      out.push_back(x.is_undefined() && dflt ? *dflt : x);
    }
    return Value::list_of(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string()) throw Error("map requires a filter argument");
  const std::string name = a.pos[0].s;
  if (!has_filter(name)) throw Error("No filter named '" + name + "'.");
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& item : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(ev.filter(name, item, copy));
  }
  return Value::list_of(std::move(out));
}

Value select_common(Evaluator& ev, const Value& v, CallArgs& a, bool with_attr, bool keep) {
  size_t next = 0;
  Value attribute;
  if (with_attr) {
    if (a.pos.empty()) throw Error("Missing parameter for attribute name");
    attribute = a.pos[next++];
  }
  std::string test;
  if (next < a.pos.size()) {
    if (!a.pos[next].is_string()) throw Error("test name must be a string");
    test = a.pos[next++].s;
    if (!has_test(test)) throw Error("No test named '" + test + "'.");
  }
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(next), a.pos.end());
  rest.kw = a.kw;
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    const Value subject = with_attr ? lookup_path(item, attribute) : item;
    bool r = false;
    if (test.empty()) {
      r = truthy(subject);
    } else {
      CallArgs copy = rest;
      r = ev.test(test, subject, copy);
    }
    if (r == keep) out.push_back(item);
  }
  return Value::list_of(std::move(out));
}
Value f_select(Evaluator& ev, const Value& v, CallArgs& a) { return select_common(ev, v, a, false, true); }
Value f_reject(Evaluator& ev, const Value& v, CallArgs& a) { return select_common(ev, v, a, false, false); }
Value f_selectattr(Evaluator& ev, const Value& v, CallArgs& a) { return select_common(ev, v, a, true, true); }
Value f_rejectattr(Evaluator& ev, const Value& v, CallArgs& a) { return select_common(ev, v, a, true, false); }

Value f_tojson(Evaluator& ev, const Value& v, CallArgs& a) {
  // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  JsonStyle st;
  st.ensure_ascii = flag(a, 0, "ensure_ascii");
  if (const Value* ind = arg(a, 1, "indent"); ind && !ind->is_none()) {
    st.has_indent = true;
    if (ind->is_string()) {
      st.indent = ind->s;
    } else if (ind->is_integral()) {
      const int64_t n = ind->as_int();
      if (n > 1000) throw Error("tojson indent too large");
      st.indent = std::string(n > 0 ? static_cast<size_t>(n) : 0, ' ');
    } else {
      throw Error("tojson indent must be an int or a string");
    }
    st.item_sep = ",";
  }
  if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->list->size() != 2 || !(*sep->list)[0].is_string() || !(*sep->list)[1].is_string())
      throw Error("tojson separators must be a pair of strings");
    st.item_sep = (*sep->list)[0].s;
    st.key_sep = (*sep->list)[1].s;
  }
  st.sort_keys = flag(a, 3, "sort_keys");
  std::string out = json_dumps(v, st);
  ev.check_size(out.size());
  return Value::string(std::move(out));
}

Value f_indent(Evaluator&, const Value& v, CallArgs& a) {
  if (v.is_undefined()) undefined_error(v);
  const Value* w = arg(a, 0, "width");
  std::string ind = "    ";
  if (w && w->is_string()) {
    ind = w->s;
  } else if (w && w->is_integral()) {
    ind = std::string(w->as_int() > 0 ? static_cast<size_t>(std::min<int64_t>(w->as_int(), 1000)) : 0, ' ');
  }
  const bool first = flag(a, 1, "first"), blank = flag(a, 2, "blank");
  std::vector<std::string> lines = str_splitlines(to_str(v) + "\n");
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
  } else {
    rv = lines.empty() ? "" : lines[0];
    if (lines.size() > 1) {
      rv += "\n";
      for (size_t k = 1; k < lines.size(); ++k) rv += (k > 1 ? "\n" : "") + (lines[k].empty() ? "" : ind) + lines[k];
    }
  }
  return Value::string(first ? ind + rv : rv);
}

Value f_center(Evaluator&, const Value& v, CallArgs& a) {
  const std::string s = to_str(v);
  const Value* w = arg(a, 0, "width");
  const int64_t width = w && w->is_integral() ? std::min<int64_t>(w->as_int(), 100000) : 80;
  const int64_t n = static_cast<int64_t>(code_point_count(s));
  if (width <= n) return Value::string(s);
  const int64_t marg = width - n;
  const int64_t left = marg / 2 + (marg & width & 1);
  return Value::string(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(marg - left), ' '));
}

Value f_round(Evaluator&, const Value& v, CallArgs& a) {
  const Value* p = arg(a, 0, "precision");
  const int64_t prec = p && p->is_integral() ? p->as_int() : 0;
  const Value* m = arg(a, 1, "method");
  const std::string how = m ? to_str(*m) : "common";
  if (how != "common" && how != "ceil" && how != "floor") throw Error("method must be common, ceil or floor");
  if (!v.is_number()) throw Error("round: a number is required, not " + type_name(v));
  if (how == "common") {
    if (v.type == Type::Int) return v;
    if (v.is_integral()) return Value::integer(v.as_int());
    if (prec < 0 || prec > 300 || !std::isfinite(v.f)) {
      const double scale = std::pow(10.0, static_cast<double>(-prec));
      return Value::real(std::isfinite(v.f) && prec < 0 ? std::nearbyint(v.f / scale) * scale : v.f);
    }
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), v.f);
    return Value::real(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(prec));
  const double x = v.as_double() * scale;
  return Value::real((how == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_abs(Evaluator&, const Value& v, CallArgs&) {
  if (v.type == Type::Float) return Value::real(std::fabs(v.f));
  if (!v.is_integral()) throw Error("bad operand type for abs(): '" + type_name(v) + "'");
  if (v.is_big() || v.as_int() == INT64_MIN) {
    const BigInt n = v.as_bigint();
    return Value::integer(n.negative() ? -n : n);
  }
  return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
}

Value f_attr(Evaluator&, const Value& v, CallArgs& a) {
  const Value* n = arg(a, 0, "name");
  if (n == nullptr || !n->is_string()) throw Error("attr filter needs an attribute name");
  if (v.is_undefined()) undefined_error(v);
  if (v.type == Type::Namespace) {
    if (const Value* x = v.ns->find(std::string_view(n->s))) return *x;
  } else if (std::optional<Value> m = method(v, n->s)) {
    return *m;
  }
  return Value::undefined("'" + type_name(v) + " object' has no attribute '" + n->s + "'");
}

Value f_escape(Evaluator&, const Value& v, CallArgs&) { return Value::string(html_escape(to_str(v))); }
Value f_safe(Evaluator&, const Value& v, CallArgs&) { return Value::string(to_str(v)); }

Value f_format(Evaluator& ev, const Value& v, CallArgs& a) {
  if (!a.kw.empty() && !a.pos.empty()) throw Error("can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) {
    Dict d;
    for (const auto& [k, x] : a.kw) d.set(Value::string(k), x);
    return Value::string(percent_format(ev, to_str(v), Value::dict_of(std::move(d))));
  }
  return Value::string(percent_format(ev, to_str(v), Value::list_of(a.pos, true)));
}

Value f_wordcount(Evaluator&, const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (const uint32_t c : code_points(to_str(v))) {
    const bool w = c == '_' || (c < 0x80 ? isalnum(static_cast<int>(c)) != 0 : !py_isspace(c));
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_batch(Evaluator&, const Value& v, CallArgs& a) {
  const Value* c = arg(a, 0, "linecount");
  if (c == nullptr || !c->is_integral() || c->as_int() <= 0) throw Error("batch needs a positive line count");
  const Value* fill = arg(a, 1, "fill_with");
  const size_t n = static_cast<size_t>(c->as_int());
  std::vector<Value> out, cur;
  for (const Value& item : iterate(v)) {
    cur.push_back(item);
    if (cur.size() == n) {
      out.push_back(Value::list_of(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (cur.size() < n) cur.push_back(*fill);
    out.push_back(Value::list_of(std::move(cur)));
  }
  return Value::list_of(std::move(out));
}

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const std::map<std::string, FilterFn, std::less<>> table = {
      {"abs", f_abs},         {"attr", f_attr},           {"batch", f_batch},
      {"capitalize", f_capitalize}, {"center", f_center}, {"count", f_length},
      {"d", f_default},       {"default", f_default},     {"dictsort", f_dictsort},
      {"e", f_escape},        {"escape", f_escape},       {"first", f_first},
      {"float", f_float},     {"forceescape", f_escape},  {"format", f_format},
      {"indent", f_indent},   {"int", f_int},             {"items", f_items},
      {"join", f_join},       {"last", f_last},           {"length", f_length},
      {"list", f_list},       {"lower", f_lower},         {"map", f_map},
      {"max", f_max},         {"min", f_min},             {"reject", f_reject},
      {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
      {"round", f_round},     {"safe", f_safe},           {"select", f_select},
      {"selectattr", f_selectattr}, {"sort", f_sort},     {"string", f_string},
      {"sum", f_sum},         {"title", f_title},         {"tojson", f_tojson},
      {"trim", f_trim},       {"unique", f_unique},       {"upper", f_upper},
      {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

bool has_filter(std::string_view name) { return filters().count(name) != 0; }

Value apply_filter(Evaluator& ev, const std::string& name, const Value& subject, CallArgs& args) {
  ev.step();
  const auto it = filters().find(name);
  if (it == filters().end()) throw Error("No filter named '" + name + "'.");
  return it->second(ev, subject, args);
}


}  // namespace pagoda::jinja

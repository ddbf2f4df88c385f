#include "structured/json_schema_merge.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <vector>

#include "core/error.h"

namespace pagoda::structured {
namespace {

using json = SchemaJson;

constexpr int kMaxDepth = 32;
constexpr size_t kMaxProduct = 64;  // anyOf x anyOf alternatives formed when merging

// Records the text of integer literals beyond 64 bits (the parser hands them over as doubles).
class BigLiteralSax : public nlohmann::json_sax<json> {
 public:
  BigLiterals found;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t v, const string_t& s) override {
    if (s.find_first_of(".eE") == std::string::npos) found.emplace(v, s);
    return true;
  }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

std::vector<std::string> type_list(const json& t) {
  std::vector<std::string> out;
  if (t.is_string()) out.push_back(t.get<std::string>());
  else if (t.is_array())
    for (const json& x : t)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

const std::set<std::string> kAllTypes = {"null", "boolean", "object", "array", "number", "string"};

std::string type_of(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  return v.is_number_float() && v.get<double>() != static_cast<double>(static_cast<int64_t>(v.get<double>())) ? "number"
                                                                                                               : "integer";
}

bool types_overlap(const std::set<std::string>& a, const std::set<std::string>& b) {
  for (const auto& t : a) {
    if (b.count(t)) return true;
    if (t == "integer" && b.count("number")) return true;
    if (t == "number" && b.count("integer")) return true;
  }
  return false;
}

// The values a (flattened) schema lists, if it lists them.
std::optional<json> listed_values(const json& s) {
  if (!s.is_object()) return std::nullopt;
  if (s.contains("const")) return json::array({s["const"]});
  if (s.contains("enum") && s["enum"].is_array()) return s["enum"];
  return std::nullopt;
}

}  // namespace

void schema_fail(const std::string& what) { throw Error("json schema: " + what); }
void schema_empty(const std::string& what) { throw EmptySchema("json schema: " + what); }

bool is_assertion(const std::string& key) {
  static const std::set<std::string> keys = {
      "type", "enum", "const", "properties", "required", "additionalProperties", "patternProperties",
      "propertyNames", "minProperties", "maxProperties", "dependencies", "dependentRequired", "dependentSchemas",
      "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains",
      "maxContains", "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
      "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "$ref",
      "$dynamicRef", "$recursiveRef", "$pagodaOmit"};
  return keys.count(key) > 0;
}

bool has_assertions(const json& s) {
  if (!s.is_object()) return !s.is_boolean() || !s.get<bool>();
  for (auto& [k, v] : s.items())
    if (is_assertion(k)) return true;
  return false;
}

BigLiterals big_integer_literals(std::string_view text) {
  BigLiteralSax sax;
  json::sax_parse(text, &sax);
  return std::move(sax.found);
}

const json& SchemaMerger::resolve(const std::string& pointer) const {
  if (pointer == "#") return root_;
  if (pointer.rfind("#/", 0) != 0) schema_fail("$ref '" + pointer + "': only local references (#/...) are supported");
  try {
    return root_.at(json::json_pointer(pointer.substr(1)));
  } catch (const json::exception&) {
    schema_fail("$ref '" + pointer + "' does not resolve within the schema");
  }
}

Decimal SchemaMerger::exact(const json& v, const char* key) const {
  std::string text;
  if (v.is_number_integer() || v.is_number_unsigned()) {
    text = v.dump();
  } else {
    const double d = v.get<double>();
    if (!std::isfinite(d)) schema_fail(std::string("'") + key + "' is not a finite number");
    auto [first, last] = big_.equal_range(d);
    if (first != last) {
      text = first->second;
      for (auto it = first; it != last; ++it)
        if (it->second != text)
          schema_fail(std::string("'") + key + "': integer literals " + text + " and " + it->second +
                      " are beyond 64 bits and too close to tell apart here; write the bound with fewer digits");
    } else if (std::fabs(d) >= 9007199254740992.0) {
      // An integral double: its exact value, as a validator compares an integer with it.
      char buf[400];
      std::snprintf(buf, sizeof buf, "%.0f", d);
      text = buf;
    } else {
      text = v.dump();  // the shortest text that reads back as this double
    }
  }
  auto dec = parse_decimal(text);
  if (!dec) schema_fail(std::string("'") + key + "' = " + text + " is beyond the numbers the compiler can enforce");
  return *dec;
}

json SchemaMerger::inline_all(const json& s, int depth) const {
  if (depth > kMaxDepth) schema_fail("allOf/$ref nested deeper than " + std::to_string(kMaxDepth) + " levels (a recursive allOf?)");
  if (s.is_boolean()) {
    if (!s.get<bool>()) schema_empty("a 'false' schema admits no value");
    return json::object();
  }
  if (!s.is_object()) schema_fail("a schema must be an object or a boolean");
  if (!s.contains("allOf") && !s.contains("$ref")) return s;
  json acc = json::object();
  for (auto& [k, v] : s.items())
    if (k != "allOf" && k != "$ref" && is_assertion(k)) acc[k] = v;
  if (s.contains("$ref")) {
    if (!s["$ref"].is_string()) schema_fail("$ref must be a string");
    merge_into(acc, inline_all(resolve(s["$ref"].get<std::string>()), depth + 1));
  }
  // additionalProperties: false closes an object to the properties declared beside it: a part's
  // properties the other parts' closures do not list can never be written.
  std::vector<std::set<std::string>> closed;
  auto note_closed = [&closed](const json& part) {
    if (!part.is_object() || !part.contains("additionalProperties") || part["additionalProperties"] != json(false)) return;
    std::set<std::string> names;
    if (part.contains("properties") && part["properties"].is_object())
      for (auto& [k, v] : part["properties"].items()) names.insert(k);
    closed.push_back(std::move(names));
  };
  note_closed(acc);
  if (s.contains("$ref")) note_closed(resolve(s["$ref"].get<std::string>()));
  if (s.contains("allOf")) {
    if (!s["allOf"].is_array() || s["allOf"].empty()) schema_fail("'allOf' must be a non-empty array");
    for (const json& part : s["allOf"]) {
      json inlined = inline_all(part, depth + 1);
      note_closed(inlined);
      merge_into(acc, inlined);
    }
  }
  if (closed.size() > 0 && acc.contains("properties") && acc["properties"].is_object()) {
    json kept = json::object();
    for (auto& [k, v] : acc["properties"].items()) {
      bool allowed = true;
      for (const auto& names : closed) allowed = allowed && names.count(k) > 0;
      if (allowed) kept[k] = v;
    }
    acc["properties"] = kept;
    for (const json& r : acc.value("required", json::array()))
      if (r.is_string() && !kept.contains(r.get<std::string>()))
        for (const auto& names : closed)
          if (!names.count(r.get<std::string>()))
            schema_empty("property '" + r.get<std::string>() + "' is required, yet additionalProperties: false beside another part's properties forbids it");
  }
  return acc;
}

json SchemaMerger::flatten(const json& s, int depth) const {
  if (!s.is_object()) return s;
  bool lone_ref = s.contains("$ref");
  for (auto& [k, v] : s.items())
    if (k != "$ref" && is_assertion(k)) lone_ref = false;
  if (lone_ref || (!s.contains("allOf") && !s.contains("$ref"))) return s;
  return inline_all(s, depth);
}

void SchemaMerger::merge_into(json& a, const json& b) const {
  if (a.contains("if") && b.contains("if") && a["if"] != b["if"]) {
    // A second if/then: outputs satisfy its `if` and `then` outright (as the compiler writes
    // every if/then), so both merge in as plain constraints.
    json rest = b;
    for (const char* k : {"if", "then", "else"}) rest.erase(k);
    merge_into(a, inline_all(b["if"], 1));
    if (b.contains("then")) merge_into(a, inline_all(b["then"], 1));
    merge_into(a, rest);
    return;
  }
  for (auto& [k, v] : b.items()) {
    if (!is_assertion(k)) continue;
    if (!a.contains(k)) {
      a[k] = v;
      continue;
    }
    json& x = a[k];
    if (x == v) continue;
    // A named copy: clang 14 cannot capture a structured binding.
    const std::string key = k;
    auto conflict = [&key]() { schema_fail("allOf: two different '" + key + "' cannot be combined; merge them by hand"); };
    if (k == "properties" || k == "patternProperties") {
      if (!x.is_object() || !v.is_object()) schema_fail("'" + k + "' must be an object");
      for (auto& [p, ps] : v.items()) x[p] = x.contains(p) ? json{{"allOf", json::array({x[p], ps})}} : ps;
    } else if (k == "required") {
      for (const json& r : v)
        if (std::find(x.begin(), x.end(), r) == x.end()) x.push_back(r);
    } else if (k == "type") {
      std::vector<std::string> both;
      const auto tv = type_list(v);
      for (const auto& t : type_list(x)) {
        const bool in_v = std::find(tv.begin(), tv.end(), t) != tv.end();
        const bool int_num = (t == "integer" && std::find(tv.begin(), tv.end(), "number") != tv.end());
        if (in_v || int_num) both.push_back(t);
        else if (t == "number" && std::find(tv.begin(), tv.end(), "integer") != tv.end()) both.push_back("integer");
      }
      if (both.empty()) schema_empty("allOf: the types " + x.dump() + " and " + v.dump() + " have nothing in common");
      x = json(both);
    } else if (k == "enum") {
      json both = json::array();
      for (const json& e : x)
        if (std::find(v.begin(), v.end(), e) != v.end()) both.push_back(e);
      if (both.empty()) schema_empty("allOf: two 'enum' lists have no value in common");
      x = both;
    } else if (k == "minimum" || k == "maximum" || (k.rfind("exclusive", 0) == 0 && x.is_number() && v.is_number())) {
      const int c = compare(exact(x, k.c_str()), exact(v, k.c_str()));
      const bool take_v = (k == "minimum" || k == "exclusiveMinimum") ? c < 0 : c > 0;
      if (take_v) x = v;
    } else if (k == "exclusiveMinimum" || k == "exclusiveMaximum" || k == "uniqueItems") {
      if (!x.is_boolean() || !v.is_boolean()) conflict();
      x = x.get<bool>() || v.get<bool>();
    } else if (k == "minLength" || k == "minItems" || k == "minProperties") {
      if (v.is_number() && x.is_number() && v.get<double>() > x.get<double>()) x = v;
    } else if (k == "maxLength" || k == "maxItems" || k == "maxProperties") {
      if (v.is_number() && x.is_number() && v.get<double>() < x.get<double>()) x = v;
    } else if (k == "additionalProperties" || k == "propertyNames" || k == "contains" ||
               (k == "items" && x.is_object() && v.is_object()) || k == "additionalItems") {
      if (x.is_boolean() && !x.get<bool>()) continue;
      if (v.is_boolean() && !v.get<bool>()) x = false;
      else x = json{{"allOf", json::array({x, v})}};
    } else if (k == "anyOf" || k == "oneOf") {
      // (x1 | x2) & (v1 | v2) = x1&v1 | x1&v2 | ...
      if (x.size() * v.size() > kMaxProduct) schema_fail("allOf of two large anyOf/oneOf lists is not enforced");
      json product = json::array();
      for (const json& xi : x)
        for (const json& vj : v) product.push_back(json{{"allOf", json::array({xi, vj})}});
      x = product;
    } else if (k == "dependentRequired" || k == "dependencies" || k == "dependentSchemas") {
      for (auto& [p, d] : v.items()) {
        if (!x.contains(p)) x[p] = d;
        else if (x[p] != d) conflict();
      }
    } else if (k == "$pagodaOmit") {
      for (const json& r : v) x.push_back(r);
    } else if (k == "const") {
      schema_empty("allOf: two different 'const' values: no value satisfies both");
    } else {
      conflict();
    }
  }
}

}  // namespace pagoda::structured

namespace pagoda::structured {
namespace {

// Types a validator lets through the schema (accepting) or the compiler writes for it (output:
// without `type`, only the types its keywords describe, as the compiler infers them).
std::set<std::string> schema_types(const SchemaMerger& m, const json& s, bool output, int depth) {
  if (depth > kMaxDepth) return kAllTypes;
  if (!s.is_object()) return kAllTypes;
  std::set<std::string> out;
  if (auto v = listed_values(s)) {
    for (const json& x : *v) out.insert(type_of(x));
    return out;
  }
  for (const char* key : {"anyOf", "oneOf"})
    if (s.contains(key) && s[key].is_array()) {
      for (const json& alt : s[key])
        for (const auto& t : schema_types(m, m.flatten(alt.is_object() && alt.contains("$ref") ? json{{"allOf", json::array({alt})}} : alt, depth + 1), output, depth + 1))
          out.insert(t);
      return out;
    }
  if (s.contains("type")) {
    for (const auto& t : type_list(s["type"])) out.insert(t);
    if (out.count("any")) return kAllTypes;
  } else if (!output) {
    return kAllTypes;
  } else {
    auto uses = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys)
        if (s.contains(k)) return true;
      return false;
    };
    if (uses({"properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties",
              "dependencies", "dependentRequired", "dependentSchemas", "propertyNames"}))
      out.insert("object");
    if (uses({"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "additionalItems"})) out.insert("array");
    if (uses({"minLength", "maxLength", "pattern", "format"})) out.insert("string");
    if (uses({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})) out.insert("number");
    if (out.empty()) return kAllTypes;
  }
  return out;
}

std::vector<std::string> required_of(const json& s) {
  std::vector<std::string> out;
  if (s.is_object() && s.contains("required") && s["required"].is_array())
    for (const json& r : s["required"])
      if (r.is_string()) out.push_back(r.get<std::string>());
  return out;
}

}  // namespace

std::vector<std::vector<std::string>> SchemaMerger::one_of_omissions(const json& rest, const json& alts, int depth) const {
  std::vector<json> merged;
  for (const json& alt : alts) merged.push_back(inline_all(json{{"allOf", json::array({rest, alt})}}, depth + 1));
  std::vector<std::vector<std::string>> omit(merged.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    const auto out_types = schema_types(*this, merged[i], true, depth);
    const auto req_i = required_of(merged[i]);
    for (size_t j = 0; j < merged.size(); ++j) {
      if (i == j) continue;
      // Disjoint types: an output of i never matches j.
      if (!types_overlap(out_types, schema_types(*this, merged[j], false, depth))) continue;
      // Disjoint listed values, of the whole value or of a property i requires.
      auto disjoint = [](const std::optional<json>& a, const std::optional<json>& b) {
        if (!a || !b) return false;
        for (const json& x : *a)
          if (std::find(b->begin(), b->end(), x) != b->end()) return false;
        return true;
      };
      if (disjoint(listed_values(merged[i]), listed_values(merged[j]))) continue;
      // Property-based separation holds only for objects: any other value skips `properties`.
      const bool objects_only = out_types == std::set<std::string>{"object"};
      bool separated = false;
      for (const auto& p : objects_only ? req_i : std::vector<std::string>{}) {
        auto prop = [&](const json& m) -> std::optional<json> {
          if (!m.contains("properties") || !m["properties"].contains(p)) return std::nullopt;
          return listed_values(flatten(json{{"allOf", json::array({m["properties"][p]})}}, depth + 1));
        };
        if (disjoint(prop(merged[i]), prop(merged[j]))) separated = true;
      }
      if (separated) continue;
      // An object output of i leaves out a property j requires and i does not.
      if (objects_only) {
        std::string drop;
        for (const auto& p : required_of(merged[j]))
          if (drop.empty() && std::find(req_i.begin(), req_i.end(), p) == req_i.end()) drop = p;
        if (!drop.empty()) {
          omit[i].push_back(drop);
          continue;
        }
      }
      schema_fail("oneOf: alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                  " can match the same value, and exactly one must match; make them exclusive (distinct types, "
                  "const values or required properties) or use anyOf");
    }
  }
  return omit;
}

}  // namespace pagoda::structured

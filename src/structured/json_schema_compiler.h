// The JSON Schema compiler's class, shared by json_schema.cpp (schemas, strings, numbers) and
// json_schema_containers.cpp (objects and arrays). Internal to src/structured.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "structured/json_schema_formats.h"
#include "structured/json_schema_merge.h"
#include "structured/json_schema_numbers.h"
#include "structured/regex_to_gbnf.h"

namespace pagoda::structured::detail {

using json = SchemaJson;  // ordered: properties keep their declared order

constexpr int kMaxDepth = 32;
constexpr size_t kMaxGbnfBytes = 1u << 20;
constexpr int64_t kMaxRepeat = 10000;
// uniqueItems over enumerable items: orderings tracked per count up to this many values.
constexpr size_t kMaxUniqueCounted = 16;

// Assertions the compiler does not enforce: a schema that uses them is refused by name (every
// other unknown keyword is an annotation, as JSON Schema says, and ignored).
inline const std::set<std::string> kUnenforced = {"minContains", "maxContains", "$dynamicRef", "$recursiveRef"};

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, std::string prefix, const BigLiterals& big)
      : root_(root), prefix_(std::move(prefix)), merger_(root, big) {}

  std::string run() {
    out_ = prefix_ + "root ::= " + value(root_, 0) + "\n";
    // $ref targets become named rules, compiled here (not by recursion) so a recursive schema is
    // one rule that names itself.
    while (!pending_.empty()) {
      auto [name, pointer] = pending_.back();
      pending_.pop_back();
      const json& target = merger_.resolve(pointer);
      const std::string body = value(target, 1);
      out_ += name + " ::= " + body + "\n";
      bound();
    }
    return out_ + extra_;
  }

 private:
  void bound() const {
    if (out_.size() + extra_.size() > kMaxGbnfBytes) schema_fail("the schema compiles to a grammar over 1 MiB; simplify it");
  }

  std::string new_rule(const std::string& body) {
    const std::string name = prefix_ + "s" + std::to_string(next_rule_++);
    extra_ += name + " ::= " + body + "\n";
    bound();
    return name;
  }

  std::string ref_rule(const std::string& pointer) {
    auto it = refs_.find(pointer);
    if (it != refs_.end()) return it->second;
    if (refs_.size() > 1000) schema_fail("more than 1,000 distinct $ref targets");
    merger_.resolve(pointer);
    const std::string name = prefix_ + "ref" + std::to_string(refs_.size());
    refs_.emplace(pointer, name);
    pending_.emplace_back(name, pointer);
    return name;
  }

  static std::string alternatives(const std::vector<std::string>& alts) {
    std::string out;
    for (const auto& a : alts) out += (out.empty() ? "" : " | ") + a;
    return "(" + out + ")";
  }

  std::string value(const json& s, int depth) {
    if (depth > kMaxDepth) schema_fail("schema nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (s.is_boolean()) {
      if (!s.get<bool>()) schema_empty("a 'false' schema admits no value");
      return "json-value";
    }
    if (!s.is_object()) schema_fail("a schema must be an object or a boolean");
    // A lone $ref stays a named rule (recursion); with siblings it is merged like allOf.
    if (is_lone_ref(s)) return ref_rule(s["$ref"].get<std::string>());
    const json m = merger_.flatten(s, depth);
    if (is_lone_ref(m)) return ref_rule(m["$ref"].get<std::string>());
    return flat(m, depth);
  }

  static bool is_lone_ref(const json& s) {
    if (!s.contains("$ref")) return false;
    if (!s["$ref"].is_string()) schema_fail("$ref must be a string");
    for (auto& [k, v] : s.items())
      if (k != "$ref" && is_assertion(k)) return false;
    return true;
  }

  // s has no allOf and no $ref beside other assertions.
  std::string flat(const json& s, int depth) {
    for (auto& [k, v] : s.items())
      if (kUnenforced.count(k)) schema_fail("'" + k + "' cannot be enforced; remove it");
    if (s.contains("if")) {
      // if/then/else: every output satisfies `if` and `then` (so `else` never applies); a subset of
      // what the schema allows, always valid.
      json rest = s;
      rest.erase("if");
      rest.erase("then");
      rest.erase("else");
      json parts = json::array({rest, s["if"]});
      if (s.contains("then")) parts.push_back(s["then"]);
      return value(json{{"allOf", parts}}, depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      if (!s[key].is_array() || s[key].empty()) schema_fail(std::string("'") + key + "' must be a non-empty array");
      json rest = s;
      rest.erase(key);
      // oneOf: each alternative written so that it cannot match another one too.
      std::vector<std::vector<std::string>> omit(s[key].size());
      if (std::string(key) == "oneOf" && s[key].size() > 1) omit = merger_.one_of_omissions(rest, s[key], depth);
      std::vector<std::string> alts;
      for (size_t i = 0; i < s[key].size(); ++i) {
        const json& sub = s[key][i];
        json parts = json::array({rest, sub});
        if (!omit[i].empty()) parts.push_back(json{{"$pagodaOmit", omit[i]}});
        try {
          alts.push_back(parts.size() == 2 && !has_assertions(rest) ? value(sub, depth + 1) : value(json{{"allOf", parts}}, depth + 1));
        } catch (const EmptySchema&) {
          // an alternative no value satisfies: the others remain
          if (alts.empty() && i + 1 == s[key].size()) throw;
        }
      }
      if (alts.empty()) schema_empty("no alternative of '" + std::string(key) + "' admits a value");
      return alternatives(alts);
    }
    std::vector<std::string> types = types_of(s);
    if (s.contains("const")) {
      if (s.contains("enum") && (!s["enum"].is_array() || std::find(s["enum"].begin(), s["enum"].end(), s["const"]) == s["enum"].end()))
        schema_empty("'const' is not one of 'enum'");
      return typed_literal(s["const"], types, s);
    }
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) schema_fail("'enum' must be a non-empty array");
      std::vector<std::string> alts;
      for (const json& v : s["enum"])
        if (type_allows(types, v) && not_allows(s, v)) alts.push_back(gbnf_literal(v.dump()));
      if (alts.empty()) schema_empty("no value of 'enum' has the schema's 'type'");
      return alternatives(alts);
    }
    if (types.empty()) return "json-value";
    std::vector<std::string> alts;
    for (const std::string& t : types) alts.push_back(typed(s, t, depth));
    return alternatives(alts);
  }

  std::string typed_literal(const json& v, const std::vector<std::string>& types, const json& s) {
    if (!types.empty() && !type_allows(types, v)) schema_empty("'const' does not have the schema's 'type'");
    if (!not_allows(s, v)) schema_empty("'const' is excluded by 'not'");
    return gbnf_literal(v.dump());
  }

  static bool type_allows(const std::vector<std::string>& types, const json& v) {
    if (types.empty()) return true;
    for (const auto& t : types) {
      if ((t == "string" && v.is_string()) || (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null()) ||
          (t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "number" && v.is_number()) ||
          (t == "integer" && (v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))))))
        return true;
    }
    return false;
  }

  // A value `not` (in the forms the compiler reads) does not exclude.
  static bool not_allows(const json& s, const json& v) {
    if (!s.contains("not") || !s["not"].is_object()) return true;
    const json& n = s["not"];
    if (n.contains("const") && n["const"] == v) return false;
    if (n.contains("enum") && n["enum"].is_array())
      for (const json& e : n["enum"])
        if (e == v) return false;
    return true;
  }

  // The types an output may have: `type` (minus those `not` excludes), or, where there is no
  // `type`, those whose keywords the schema uses (a subset of the any-type the schema allows).
  std::vector<std::string> types_of(const json& s) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array()) {
        for (const json& x : t) {
          if (!x.is_string()) schema_fail("'type' array entries must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        schema_fail("'type' must be a string or an array of strings");
      }
      if (std::find(types.begin(), types.end(), "any") != types.end()) types.clear();
    } else {
      auto uses = [&](std::initializer_list<const char*> keys) {
        for (const char* k : keys)
          if (s.contains(k)) return true;
        return false;
      };
      if (uses({"properties", "required", "additionalProperties", "patternProperties", "minProperties",
                "maxProperties", "dependencies", "dependentRequired", "dependentSchemas", "propertyNames"}))
        types.push_back("object");
      if (uses({"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "additionalItems"}))
        types.push_back("array");
      if (uses({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
      if (uses({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})) types.push_back("number");
    }
    // OpenAPI's `nullable` is not JSON Schema: validators ignore it, so null is not added.
    outer_lists_values_ = s.contains("enum") || s.contains("const");
    if (s.contains("not")) types = not_types(s["not"], types);
    // integer beside number adds nothing and would compile the range twice
    if (std::find(types.begin(), types.end(), "number") != types.end())
      types.erase(std::remove(types.begin(), types.end(), "integer"), types.end());
    return types;
  }

  std::vector<std::string> not_types(const json& n, std::vector<std::string> types) {
    if (!n.is_object()) schema_fail("'not' must be a schema object");
    if (types.empty()) types = {"null", "boolean", "object", "array", "number", "string"};
    std::set<std::string> excluded;
    bool understood = false;
    if (n.contains("type")) {
      understood = true;
      if (n["type"].is_string()) excluded.insert(n["type"].get<std::string>());
      else
        for (const json& x : n["type"]) excluded.insert(x.get<std::string>());
    }
    for (const char* k : {"const", "enum", "required"})
      if (n.contains(k)) understood = true;  // handled where values and properties are written
    for (auto& [k, v] : n.items())
      if (is_assertion(k) && k != "type" && k != "const" && k != "enum" && k != "required")
        schema_fail("'not' with '" + k + "' is not enforced; only not {type}, {const}, {enum} and {required} are");
    if (!understood) schema_fail("'not' of a schema with no type/const/enum/required admits no value");
    // const/enum are excluded where values are listed (not_allows); elsewhere only when their
    // type cannot be written anyway.
    if (!outer_lists_values_) {
      json values = n.contains("enum") && n["enum"].is_array() ? n["enum"] : json::array();
      if (n.contains("const")) values.push_back(n["const"]);
      for (const json& v : values)
        if (type_allows(types, v) && !excluded.count(v.is_string() ? "string" : v.is_boolean() ? "boolean" : v.is_null() ? "null" : v.is_number() ? "number" : v.is_array() ? "array" : "object"))
          schema_fail("'not' with const/enum is enforced only beside 'enum' (list the allowed values instead)");
    }
    std::vector<std::string> out;
    for (const auto& t : types)
      if (!excluded.count(t) && !(t == "integer" && excluded.count("number"))) out.push_back(t);
    if (excluded.count("integer") && std::find(out.begin(), out.end(), "number") != out.end())
      schema_fail("'not': {type: integer} beside type number is not enforced");
    if (out.empty()) schema_empty("'not' excludes every type the schema allows");
    return out;
  }

  std::string typed(const json& s, const std::string& t, int depth) {
    if (t == "string") return string_rule(s);
    if (t == "integer" || t == "number") return numeric_rule(s, t == "integer");
    if (t == "boolean") return "json-boolean";
    if (t == "null") return "json-null";
    if (t == "object") return object_rule(s, depth);
    if (t == "array") return array_rule(s, depth);
    schema_fail("unknown type '" + t + "'");
  }

  static int64_t count_field(const json& s, const char* key, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    const json& v = s[key];
    if (!v.is_number() || v.get<double>() < 0) schema_fail(std::string("'") + key + "' must be a non-negative integer");
    const double d = v.get<double>();
    return d > static_cast<double>(kMaxRepeat) ? kMaxRepeat + 1 : static_cast<int64_t>(d);
  }

  static std::string repeat(int64_t lo, int64_t hi) {
    return hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
  }

  std::string string_rule(const json& s) {
    const int64_t lo = count_field(s, "minLength", 0), hi_raw = count_field(s, "maxLength", -1);
    if (lo > kMaxRepeat) schema_fail("'minLength' above " + std::to_string(kMaxRepeat) + " is not enforced");
    // A maxLength beyond the repeat limit bounds nothing a generation reaches.
    const int64_t hi = hi_raw > kMaxRepeat ? -1 : hi_raw;
    if (hi >= 0 && hi < lo) schema_fail("maxLength below minLength");
    std::optional<FormatRule> fmt;
    if (s.contains("format") && s["format"].is_string()) fmt = format_rule(s["format"].get<std::string>());
    // Beside a pattern (zod writes both for email, uuid, ...) the pattern is enforced: it spells
    // out the format, usually more strictly than the format's own grammar.
    if (fmt && s.contains("pattern")) fmt.reset();
    if (fmt) {
      if (fmt->min_len < lo || (hi >= 0 && fmt->max_len > hi))
        schema_fail("format '" + s["format"].get<std::string>() + "' writes " + std::to_string(fmt->min_len) + " to " +
                    std::to_string(fmt->max_len) + " characters, outside minLength/maxLength; widen them or drop the format");
      return fmt->rule;
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) schema_fail("'pattern' must be a string");
      const std::string& re = s["pattern"].get_ref<const std::string&>();
      // With lengths: the pattern's unbounded repetitions are capped (halving the cap until its
      // longest match fits maxLength); a minimum above the pattern's shortest match is refused.
      int64_t cap = -1;
      if (lo > 0 || hi >= 0) {
        auto [rmin, rmax] = regex_length_bounds(re);
        for (int64_t c = hi; hi >= 0 && (rmax < 0 || rmax > hi) && c >= 0; c = c > 0 ? c / 2 : -1) {
          std::tie(rmin, rmax) = regex_length_bounds(re, c);
          cap = c;
        }
        if (rmin < lo || (hi >= 0 && (rmax < 0 || rmax > hi)))
          schema_fail("'pattern' together with minLength/maxLength is enforced only where every match of the pattern "
                      "(its unbounded repetitions capped) has an allowed length; bound the pattern's repetitions "
                      "(e.g. {3,20}) instead");
      }
      return new_rule("\"\\\"\" " + regex_to_gbnf(re, true, cap) + " \"\\\"\"");
    }
    if (lo == 0 && hi < 0) return "json-string";
    return new_rule("\"\\\"\" json-char" + repeat(lo, hi) + " \"\\\"\"");
  }

  std::optional<Decimal> numeric_keyword(const json& s, const char* key) {
    if (!s.contains(key)) return std::nullopt;
    const json& v = s[key];
    if (v.is_boolean()) return std::nullopt;  // draft-4 exclusive flags
    if (!v.is_number()) schema_fail(std::string("'") + key + "' must be a number");
    return merger_.exact(v, key);
  }

  std::string numeric_rule(const json& s, bool integer) {
    NumericBounds b;
    b.lo = numeric_keyword(s, "minimum");
    b.hi = numeric_keyword(s, "maximum");
    if (s.value("exclusiveMinimum", json(false)).is_boolean()) b.lo_exclusive = s.value("exclusiveMinimum", false) && b.lo;
    if (s.value("exclusiveMaximum", json(false)).is_boolean()) b.hi_exclusive = s.value("exclusiveMaximum", false) && b.hi;
    if (auto x = numeric_keyword(s, "exclusiveMinimum"); x && (!b.lo || compare(*x, *b.lo) >= 0)) b.lo = x, b.lo_exclusive = true;
    if (auto x = numeric_keyword(s, "exclusiveMaximum"); x && (!b.hi || compare(*x, *b.hi) <= 0)) b.hi = x, b.hi_exclusive = true;
    b.multiple_of = numeric_keyword(s, "multipleOf");
    if (b.multiple_of && (b.multiple_of->neg || b.multiple_of->is_zero())) schema_fail("'multipleOf' must be positive");
    if (!b.lo && !b.hi && !b.multiple_of) return integer ? "json-int" : "json-number";
    return new_rule(integer ? integer_range_gbnf(b, prefix_, extra_) : number_range_gbnf(b, prefix_, extra_));
  }

  // json_schema_containers.cpp
  std::string object_rule(const json& s, int depth);
  std::string map_rule(const json& s, int depth, int64_t min_props, int64_t max_props);
  void check_property_name(const json& s, const std::string& name);
  std::string array_rule(const json& s, int depth);
  std::string unique_enum_array(const json& values, int64_t lo, int64_t hi);
  std::string items_rule(const std::vector<std::string>& prefix, const std::string& rest, int64_t lo, int64_t hi);

  const json& root_;
  std::string prefix_;
  SchemaMerger merger_;
  std::string out_, extra_;
  int next_rule_ = 0;
  bool outer_lists_values_ = false;  // the schema being typed has enum/const
  std::map<std::string, std::string> refs_;
  std::vector<std::pair<std::string, std::string>> pending_;
};

}  // namespace pagoda::structured::detail

#include "structured/json_schema.h"

#include <cmath>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/error.h"
#include "structured/regex_to_gbnf.h"

namespace pagoda::structured {
namespace {

using json = nlohmann::ordered_json;  // properties keep their declared order

constexpr int kMaxDepth = 32;
constexpr size_t kMaxGbnfBytes = 1u << 20;
constexpr int64_t kMaxRepeat = 10000;
constexpr int64_t kMaxEnumeratedRange = 2000;

const char* kPrimitives = R"(ws ::= (" " | "\n" [ ]{0,16})?
json-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-uint ::= "0" | [1-9] [0-9]{0,15}
json-frac-exp ::= ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?
json-number ::= json-int json-frac-exp
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws (json-string ws ":" ws json-value (ws "," ws json-string ws ":" ws json-value)*)? ws "}"
json-array ::= "[" ws (json-value (ws "," ws json-value)*)? ws "]"
fmt-year ::= [1-9] [0-9]{3} | "0" ([1-9] [0-9]{2} | "0" ([1-9] [0-9] | "0" [1-9]))
fmt-date ::= fmt-year "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8]))
fmt-time ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])
fmt-date-time ::= "\"" fmt-date "T" fmt-time "\""
fmt-date-only ::= "\"" fmt-date "\""
fmt-time-only ::= "\"" fmt-time "\""
hex ::= [0-9a-fA-F]
fmt-uuid ::= "\"" hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12} "\""
email-label ::= [a-zA-Z0-9] ([a-zA-Z0-9-]{0,30} [a-zA-Z0-9])?
fmt-email ::= "\"" [a-zA-Z0-9._+-]{1,32} "@" email-label ("." email-label){0,3} "." [a-zA-Z]{2,8} "\""
)";

// Keywords that only annotate: they never change which instances are valid.
const std::set<std::string> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id",
                                            "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                            "definitions", "strict", "name", "example"};

class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  std::string run() {
    out_ = prefix_ + "root ::= " + value(root_, 0) + "\n";
    // $ref targets become named rules, compiled here (not by recursion) so a recursive schema is
    // one rule that names itself.
    while (!pending_.empty()) {
      auto [name, pointer] = pending_.back();
      pending_.pop_back();
      const json& target = resolve(pointer);
      const std::string body = value(target, 1);
      out_ += name + " ::= " + body + "\n";
      bound();
    }
    return out_ + extra_;
  }

 private:
  [[noreturn]] static void fail(const std::string& what) { throw Error("json schema: " + what); }

  void bound() const {
    if (out_.size() + extra_.size() > kMaxGbnfBytes) fail("the schema compiles to a grammar over 1 MiB; simplify it");
  }

  std::string new_rule(const std::string& body) {
    const std::string name = prefix_ + "s" + std::to_string(next_rule_++);
    extra_ += name + " ::= " + body + "\n";
    bound();
    return name;
  }

  const json& resolve(const std::string& pointer) {
    if (pointer == "#") return root_;
    if (pointer.rfind("#/", 0) != 0) fail("$ref '" + pointer + "': only local references (#/...) are supported");
    try {
      const json& j = root_.at(json::json_pointer(pointer.substr(1)));
      return j;
    } catch (const json::exception&) {
      fail("$ref '" + pointer + "' does not resolve within the schema");
    }
  }

  std::string ref_rule(const std::string& pointer) {
    auto it = refs_.find(pointer);
    if (it != refs_.end()) return it->second;
    if (refs_.size() > 1000) fail("more than 1,000 distinct $ref targets");
    resolve(pointer);
    const std::string name = prefix_ + "ref" + std::to_string(refs_.size());
    refs_.emplace(pointer, name);
    pending_.emplace_back(name, pointer);
    return name;
  }

  static std::string literal_json(const json& v) { return gbnf_literal(v.dump()); }

  std::string value(const json& s, int depth) {
    if (depth > kMaxDepth) fail("schema nested deeper than " + std::to_string(kMaxDepth) + " levels");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("a 'false' schema admits no value");
      return "json-value";
    }
    if (!s.is_object()) fail("a schema must be an object or a boolean");
    check_keywords(s);
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail("$ref must be a string");
      if (s.size() > 1) {
        for (auto& [k, v] : s.items())
          if (k != "$ref" && !kAnnotations.count(k)) fail("'" + k + "' beside $ref is not supported");
      }
      return ref_rule(s["$ref"].get<std::string>());
    }
    if (s.contains("const")) return literal_json(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) fail("'enum' must be a non-empty array");
      std::string alts;
      for (const json& v : s["enum"]) alts += (alts.empty() ? "" : " | ") + literal_json(v);
      return "(" + alts + ")";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      // oneOf is compiled as anyOf: the alternatives of real schemas are disjoint.
      if (!s[key].is_array() || s[key].empty()) fail(std::string("'") + key + "' must be a non-empty array");
      std::string alts;
      for (const json& sub : s[key]) alts += (alts.empty() ? "" : " | ") + value(sub, depth + 1);
      return "(" + alts + ")";
    }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array() || s["allOf"].size() != 1) fail("'allOf' with more than one schema is not supported");
      return value(s["allOf"][0], depth + 1);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array()) {
        for (const json& x : t) {
          if (!x.is_string()) fail("'type' array entries must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail("'type' must be a string or an array of strings");
      }
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      types.push_back("object");
    } else if (s.contains("items")) {
      types.push_back("array");
    } else {
      return "json-value";
    }
    if (s.value("nullable", false)) types.push_back("null");
    std::string alts;
    for (const std::string& t : types) alts += (alts.empty() ? "" : " | ") + typed(s, t, depth);
    return "(" + alts + ")";
  }

  static void check_keywords(const json& s) {
    static const std::set<std::string> known = {
        "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
        "enum", "const", "format", "pattern", "minLength", "maxLength", "minimum", "maximum",
        "anyOf", "oneOf", "allOf", "$ref", "nullable"};
    for (auto& [k, v] : s.items()) {
      if (known.count(k) || kAnnotations.count(k)) continue;
      fail("unsupported keyword '" + k + "' (it cannot be enforced; remove it or express it another way)");
    }
  }

  std::string typed(const json& s, const std::string& t, int depth) {
    if (t == "string") return string_rule(s);
    if (t == "integer") return integer_rule(s);
    if (t == "number") return number_rule(s);
    if (t == "boolean") return "json-boolean";
    if (t == "null") return "json-null";
    if (t == "object") return object_rule(s, depth);
    if (t == "array") return array_rule(s, depth);
    fail("unknown type '" + t + "'");
  }

  static int64_t count_field(const json& s, const char* key, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    if (!s[key].is_number_integer() || s[key].get<int64_t>() < 0 || s[key].get<int64_t>() > kMaxRepeat)
      fail(std::string("'") + key + "' must be an integer in [0, " + std::to_string(kMaxRepeat) + "]");
    return s[key].get<int64_t>();
  }

  std::string string_rule(const json& s) {
    if (s.contains("format")) {
      if (s.contains("pattern") || s.contains("minLength") || s.contains("maxLength"))
        fail("'format' together with pattern/minLength/maxLength is not supported");
      const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
      if (f == "date-time") return "fmt-date-time";
      if (f == "date") return "fmt-date-only";
      if (f == "time") return "fmt-time-only";
      if (f == "uuid") return "fmt-uuid";
      if (f == "email") return "fmt-email";
      fail("unsupported string format '" + f + "' (supported: date-time, date, time, uuid, email)");
    }
    if (s.contains("pattern")) {
      if (s.contains("minLength") || s.contains("maxLength")) fail("'pattern' together with minLength/maxLength is not supported");
      if (!s["pattern"].is_string()) fail("'pattern' must be a string");
      return new_rule("\"\\\"\" " + regex_to_gbnf(s["pattern"].get<std::string>(), true) + " \"\\\"\"");
    }
    const int64_t lo = count_field(s, "minLength", 0), hi = count_field(s, "maxLength", -1);
    if (hi >= 0 && hi < lo) fail("maxLength below minLength");
    if (lo == 0 && hi < 0) return "json-string";
    const std::string rep = hi < 0 ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    return new_rule("\"\\\"\" json-char" + rep + " \"\\\"\"");
  }

  static std::optional<double> bound_of(const json& s, const char* key) {
    if (!s.contains(key)) return std::nullopt;
    if (!s[key].is_number()) fail(std::string("'") + key + "' must be a number");
    return s[key].get<double>();
  }

  std::string integer_rule(const json& s) {
    const auto lo = bound_of(s, "minimum"), hi = bound_of(s, "maximum");
    if (!lo && !hi) return "json-int";
    if (lo && hi && *hi - *lo <= kMaxEnumeratedRange) {
      const auto a = static_cast<int64_t>(std::ceil(*lo)), b = static_cast<int64_t>(std::floor(*hi));
      if (a > b) fail("the integer range [minimum, maximum] is empty");
      std::string alts;
      for (int64_t v = a; v <= b; ++v) alts += (alts.empty() ? "" : " | ") + gbnf_literal(std::to_string(v));
      return new_rule(alts);
    }
    if (lo && !hi && *lo == 0) return "json-uint";
    if (lo && !hi && *lo == 1) return new_rule("[1-9] [0-9]{0,15}");
    fail("integer minimum/maximum: only ranges up to 2,000 values, or minimum 0 or 1 alone, are enforced");
  }

  std::string number_rule(const json& s) {
    const auto lo = bound_of(s, "minimum"), hi = bound_of(s, "maximum");
    if (!lo && !hi) return "json-number";
    // Integer part bounded by [lo, hi] digits with the fraction kept under the bound: only the
    // common unit-interval and non-negative cases are enforced exactly.
    if (lo && *lo == 0 && !hi) return new_rule("json-uint (\".\" [0-9]{1,16})?");
    if (lo && *lo == 0 && hi && *hi == 1) return new_rule("\"0\" (\".\" [0-9]{1,16})? | \"1\" (\".\" \"0\"{1,16})?");
    fail("number minimum/maximum: only minimum 0 (optionally with maximum 1) is enforced");
  }

  std::string object_rule(const json& s, int depth) {
    std::vector<std::pair<std::string, std::string>> props;  // (key literal, value rule)
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail("'required' must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) fail("'required' entries must be strings");
        required.insert(r.get<std::string>());
      }
    }
    std::vector<bool> is_required;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) fail("'properties' must be an object");
      for (auto& [k, v] : s["properties"].items()) {
        props.emplace_back(gbnf_literal(json(k).dump()), value(v, depth + 1));
        is_required.push_back(required.count(k) > 0);
        required.erase(k);
      }
    }
    if (!required.empty()) fail("required property '" + *required.begin() + "' has no schema in 'properties'");
    std::string extra;
    if (props.empty()) {
      const json ap = s.value("additionalProperties", json(true));
      if (!(ap.is_boolean() && !ap.get<bool>())) {
        const std::string v = ap.is_boolean() ? "json-value" : value(ap, depth + 1);
        return new_rule("\"{\" ws (json-string ws \":\" ws " + v + " (ws \",\" ws json-string ws \":\" ws " + v +
                        ")*)? ws \"}\"");
      }
      return "\"{\" ws \"}\"";
    }
    // tail_i: what may follow once some property was written, from property i on;
    // start_i: the first property written is i or later.
    const size_t n = props.size();
    std::vector<std::string> tail(n + 1), start(n + 1);
    tail[n] = new_rule("\"\"");
    start[n] = tail[n];
    for (size_t i = n; i-- > 0;) {
      const std::string kv = props[i].first + " ws \":\" ws " + props[i].second;
      const std::string sep_kv = "ws \",\" ws " + kv;
      tail[i] = new_rule(is_required[i] ? sep_kv + " " + tail[i + 1] : "(" + sep_kv + ")? " + tail[i + 1]);
      start[i] = new_rule(is_required[i] ? kv + " " + tail[i + 1] : kv + " " + tail[i + 1] + " | " + start[i + 1]);
    }
    return new_rule("\"{\" ws " + start[0] + " ws \"}\"");
  }

  std::string array_rule(const json& s, int depth) {
    if (s.contains("prefixItems")) fail("unsupported keyword 'prefixItems'");
    const std::string item = s.contains("items") ? value(s["items"], depth + 1) : "json-value";
    const int64_t lo = count_field(s, "minItems", 0), hi = count_field(s, "maxItems", -1);
    if (hi >= 0 && hi < lo) fail("maxItems below minItems");
    if (hi == 0) return "\"[\" ws \"]\"";
    const std::string more = "(ws \",\" ws " + item + ")";
    const int64_t more_lo = lo > 0 ? lo - 1 : 0;
    const std::string rep = hi < 0 ? "{" + std::to_string(more_lo) + ",}" : "{" + std::to_string(more_lo) + "," + std::to_string(hi - 1) + "}";
    const std::string body = item + " " + more + rep;
    return new_rule("\"[\" ws " + (lo > 0 ? body : "(" + body + ")?") + " ws \"]\"");
  }

  const json& root_;
  std::string prefix_;
  std::string out_, extra_;
  int next_rule_ = 0;
  std::map<std::string, std::string> refs_;
  std::vector<std::pair<std::string, std::string>> pending_;
};

}  // namespace

std::string json_schema_rules(std::string_view schema_text, const std::string& prefix) {
  check(schema_text.size() <= (1u << 20), "json schema: larger than 1 MiB");
  json schema;
  try {
    // nlohmann's parser and destructor are iterative; the depth is checked below.
    schema = json::parse(schema_text);
  } catch (const json::parse_error& e) {
    throw Error(std::string("json schema: not valid JSON: ") + e.what());
  }
  // dump() and the compiler recurse over the document: bound its nesting first, iteratively.
  std::vector<std::pair<const json*, int>> todo{{&schema, 0}};
  while (!todo.empty()) {
    auto [j, d] = todo.back();
    todo.pop_back();
    check(d <= 64, "json schema: nested deeper than 64 levels");
    if (j->is_structured())
      for (const json& child : *j) todo.emplace_back(&child, d + 1);
  }
  return SchemaCompiler(schema, prefix).run();
}

std::string json_schema_to_gbnf(std::string_view schema_text) {
  return json_schema_rules(schema_text, "") + json_primitives_gbnf();
}

std::string json_primitives_gbnf() { return kPrimitives; }

std::string json_object_gbnf() { return std::string("root ::= json-object\n") + kPrimitives; }

}  // namespace pagoda::structured

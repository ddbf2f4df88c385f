// Objects and arrays of the JSON Schema compiler. Where a keyword allows more than one form, the
// grammar writes a subset that is still valid: declared properties in their order and no others,
// an optional property that triggers a dependency left out, at most one item where uniqueness
// cannot be tracked.
#include <regex>

#include "structured/json_schema_compiler.h"

namespace pagoda::structured::detail {
namespace {

bool regex_finds(const std::string& pattern, const std::string& text) {
  try {
    // JSON Schema patterns are ECMA-262 regexes, unanchored (a search).
    return std::regex_search(text, std::regex(pattern, std::regex::ECMAScript));
  } catch (const std::regex_error&) {
    schema_fail("pattern '" + pattern + "' is not a regex this compiler reads");
  }
}

int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

}  // namespace

void SchemaCompiler::check_property_name(const json& names, const std::string& name) {
  if (names.is_boolean()) {
    if (!names.get<bool>()) schema_fail("propertyNames: false admits no property, yet '" + name + "' is declared");
    return;
  }
  bool ok = true;
  for (auto& [k, v] : names.items()) {
    if (!is_assertion(k) || k == "type") continue;
    if (k == "pattern") ok = ok && regex_finds(v.get<std::string>(), name);
    else if (k == "maxLength") ok = ok && code_points(name) <= v.get<int64_t>();
    else if (k == "minLength") ok = ok && code_points(name) >= v.get<int64_t>();
    else if (k == "enum") ok = ok && std::find(v.begin(), v.end(), json(name)) != v.end();
    else if (k == "const") ok = ok && v == json(name);
    else schema_fail("propertyNames with '" + k + "' is not enforced");
  }
  if (!ok) schema_fail("property '" + name + "' does not satisfy propertyNames");
}

std::string SchemaCompiler::object_rule(const json& s, int depth) {
  std::vector<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) schema_fail("'required' must be an array");
    for (const json& r : s["required"]) {
      if (!r.is_string()) schema_fail("'required' entries must be strings");
      if (std::find(required.begin(), required.end(), r.get<std::string>()) == required.end())
        required.push_back(r.get<std::string>());
    }
  }
  auto is_required = [&](const std::string& k) { return std::find(required.begin(), required.end(), k) != required.end(); };
  // Dependencies: an optional trigger is never written (so nothing depends on it); a required
  // one brings its dependents along (names become required, a schema is merged in).
  std::set<std::string> dropped;
  json merged_deps = json::array();
  for (const char* key : {"dependentRequired", "dependencies", "dependentSchemas"}) {
    if (!s.contains(key)) continue;
    if (!s[key].is_object()) schema_fail(std::string("'") + key + "' must be an object");
    for (auto& [trigger, dep] : s[key].items()) {
      if (!is_required(trigger)) {
        dropped.insert(trigger);
      } else if (dep.is_array()) {
        for (const json& r : dep)
          if (r.is_string() && !is_required(r.get<std::string>())) required.push_back(r.get<std::string>());
      } else {
        merged_deps.push_back(dep);
      }
    }
  }
  if (!merged_deps.empty()) {
    json rest = s;
    for (const char* key : {"dependencies", "dependentSchemas"}) rest.erase(key);
    rest["required"] = required;
    merged_deps.insert(merged_deps.begin(), rest);
    return value(json{{"allOf", merged_deps}}, depth + 1);
  }
  // Properties a oneOf alternative leaves out so that it cannot match another alternative.
  if (s.contains("$pagodaOmit"))
    for (const json& r : s["$pagodaOmit"]) {
      if (is_required(r.get<std::string>())) schema_fail("oneOf: property '" + r.get<std::string>() + "' must be left out to keep the alternatives exclusive, yet it is required");
      dropped.insert(r.get<std::string>());
    }
  // not {required: [...]}: leave out one of the names that is not required.
  if (s.contains("not") && s["not"].is_object() && s["not"].contains("required")) {
    std::string out;
    for (const json& r : s["not"]["required"])
      if (out.empty() && !is_required(r.get<std::string>())) out = r.get<std::string>();
    if (out.empty()) schema_fail("'not' forbids properties that 'required' demands");
    dropped.insert(out);
  }
  const json empty_obj = json::object();
  const json& patterns = s.contains("patternProperties") ? s["patternProperties"] : empty_obj;
  if (!patterns.is_object()) schema_fail("'patternProperties' must be an object");
  const json additional = s.value("additionalProperties", json(true));
  // A property's schema, with every patternProperties schema whose pattern its name matches.
  auto schema_of = [&](const std::string& name, const json* declared) -> std::optional<json> {
    json parts = json::array();
    if (declared) parts.push_back(*declared);
    for (auto& [pat, ps] : patterns.items())
      if (regex_finds(pat, name)) parts.push_back(ps);
    if (!declared && parts.empty()) {
      if (additional.is_boolean() && !additional.get<bool>()) return std::nullopt;
      parts.push_back(additional);
    }
    return parts.size() == 1 ? parts[0] : json{{"allOf", parts}};
  };
  std::vector<std::pair<std::string, json>> props;  // (name, schema)
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) schema_fail("'properties' must be an object");
    for (auto& [k, v] : s["properties"].items())
      if (!dropped.count(k)) props.emplace_back(k, *schema_of(k, &v));
  }
  for (const std::string& r : required) {
    if (std::any_of(props.begin(), props.end(), [&](auto& p) { return p.first == r; })) continue;
    if (dropped.count(r)) schema_fail("property '" + r + "' is both required and excluded");
    // Required but not declared: any value JSON Schema allows for it.
    auto sch = schema_of(r, nullptr);
    if (!sch) schema_fail("required property '" + r + "' is not allowed by additionalProperties: false");
    props.emplace_back(r, *sch);
  }
  if (s.contains("propertyNames"))
    for (auto& [k, v] : props) check_property_name(s["propertyNames"], k);
  const int64_t min_p = count_field(s, "minProperties", 0), max_p_raw = count_field(s, "maxProperties", -1);
  const int64_t max_p = max_p_raw > kMaxRepeat ? -1 : max_p_raw;
  if (props.empty()) return map_rule(s, depth, min_p, max_p);

  // Each property's rule; an optional property that admits no value is left out.
  std::vector<std::string> rules;
  for (size_t i = 0; i < props.size();) {
    try {
      rules.push_back(value(props[i].second, depth + 1));
      ++i;
    } catch (const EmptySchema&) {
      if (is_required(props[i].first)) throw;
      props.erase(props.begin() + static_cast<long>(i));
    }
  }
  if (props.empty()) return map_rule(s, depth, min_p, max_p);
  std::vector<bool> req(props.size());
  int64_t n_req = 0;
  for (size_t i = 0; i < props.size(); ++i) n_req += (req[i] = is_required(props[i].first));
  if (max_p >= 0 && n_req > max_p) schema_fail("maxProperties is below the number of required properties");
  // minProperties: the first optional properties become required; maxProperties: the last ones
  // are left out.
  for (size_t i = 0; i < props.size() && n_req < min_p; ++i)
    if (!req[i]) req[i] = true, ++n_req;
  if (n_req < min_p) schema_fail("minProperties above the declared properties is not enforced; declare more properties");
  if (max_p >= 0) {
    int64_t total = static_cast<int64_t>(props.size());
    for (size_t i = props.size(); i-- > 0 && total > max_p;)
      if (!req[i]) {
        props.erase(props.begin() + static_cast<long>(i));
        rules.erase(rules.begin() + static_cast<long>(i));
        req.erase(req.begin() + static_cast<long>(i));
        --total;
      }
  }
  // tail_i: what may follow once some property was written, from property i on;
  // start_i: the first property written is i or later.
  const size_t n = props.size();
  std::vector<std::string> tail(n + 1), start(n + 1);
  tail[n] = new_rule("\"\"");
  start[n] = tail[n];
  for (size_t i = n; i-- > 0;) {
    const std::string kv = gbnf_literal(json(props[i].first).dump()) + " ws \":\" ws " + rules[i];
    const std::string sep_kv = "ws \",\" ws " + kv;
    tail[i] = new_rule(req[i] ? sep_kv + " " + tail[i + 1] : "(" + sep_kv + ")? " + tail[i + 1]);
    start[i] = new_rule(req[i] ? kv + " " + tail[i + 1] : kv + " " + tail[i + 1] + " | " + start[i + 1]);
  }
  return new_rule("\"{\" ws " + start[0] + " ws \"}\"");
}

// An object with no declared property: entries whose keys the schema describes.
std::string SchemaCompiler::map_rule(const json& s, int depth, int64_t min_p, int64_t max_p) {
  const std::string empty = "\"{\" ws \"}\"";
  if (max_p == 0) return empty;
  const bool arbitrary_keys_risky = s.contains("dependencies") || s.contains("dependentRequired") ||
                                    s.contains("dependentSchemas") || s.contains("$pagodaOmit") ||
                                    (s.contains("not") && s["not"].contains("required"));
  std::string key, val;
  const json additional = s.value("additionalProperties", json(true));
  if (s.contains("patternProperties") && !s["patternProperties"].empty()) {
    // With propertyNames too a key must satisfy both: only the empty object is written.
    if (s["patternProperties"].size() == 1 && !s.contains("propertyNames")) {
      auto it = s["patternProperties"].items().begin();
      key = new_rule("\"\\\"\" " + regex_to_gbnf(it.key(), true) + " \"\\\"\"");
      val = value(it.value(), depth + 1);
    }
  } else if (!(additional.is_boolean() && !additional.get<bool>()) && !arbitrary_keys_risky) {
    key = "json-string";
    if (s.contains("propertyNames")) {
      json names = s["propertyNames"];
      if (names.is_object()) names["type"] = "string";
      key = value(names, depth + 1);
    }
    val = value(additional, depth + 1);
  }
  if (key.empty()) {
    // No key can be written safely (several patterns may overlap, or none is allowed): the empty
    // object, which is valid when nothing is demanded.
    if (min_p > 0) schema_fail("minProperties on an object whose keys cannot be generated (several patternProperties, or additionalProperties: false)");
    return empty;
  }
  // Keys written at random may repeat, and a parser keeps one of them: counts above 1 unsafe.
  if (min_p > 1) schema_fail("minProperties above 1 on an object without declared properties is not enforced; declare the properties");
  const std::string entry = key + " ws \":\" ws " + val;
  const std::string more = "(ws \",\" ws " + entry + ")" + (max_p < 0 ? "*" : "{0," + std::to_string(max_p - 1) + "}");
  const std::string body = entry + " " + more;
  return new_rule("\"{\" ws " + (min_p > 0 ? body : "(" + body + ")?") + " ws \"}\"");
}

std::string SchemaCompiler::items_rule(const std::vector<std::string>& prefix, const std::string& rest, int64_t lo, int64_t hi) {
  if (hi == 0) return "\"[\" ws \"]\"";
  const auto n = static_cast<int64_t>(prefix.size());
  // after_k: what may follow once k items are written.
  std::string after;
  {
    const int64_t more_lo = std::max<int64_t>(lo - std::max<int64_t>(n, 1), 0);
    if (rest.empty() || (hi >= 0 && hi <= std::max<int64_t>(n, 1))) {
      after = "\"\"";
    } else {
      const int64_t more_hi = hi < 0 ? -1 : hi - std::max<int64_t>(n, 1);
      after = "(ws \",\" ws " + rest + ")" + repeat(more_lo, more_hi);
    }
  }
  for (int64_t k = n - 1; k >= 1; --k) {
    if (hi >= 0 && k >= hi) continue;
    const std::string step = "ws \",\" ws " + prefix[static_cast<size_t>(k)] + " " + after;
    after = new_rule(k < lo ? step : "(" + step + ")?");
  }
  const std::string first = n > 0 ? prefix[0] : rest;
  const std::string body = first + " " + after;
  return new_rule("\"[\" ws " + (lo > 0 ? body : "(" + body + ")?") + " ws \"]\"");
}

std::string SchemaCompiler::unique_enum_array(const json& values, int64_t lo, int64_t hi) {
  std::vector<std::string> lits;
  for (const json& v : values)
    if (std::find(lits.begin(), lits.end(), gbnf_literal(v.dump())) == lits.end()) lits.push_back(gbnf_literal(v.dump()));
  const auto m = static_cast<int64_t>(lits.size());
  if (hi < 0 || hi > m) hi = m;
  if (lo > m) schema_fail("uniqueItems: minItems is above the number of distinct values the items may take");
  if (hi == 0) return "\"[\" ws \"]\"";
  // Items in the order of the list, each at most once: t(j, c) follows item j as the c-th.
  const bool counted = !(lo <= 1 && hi == m);
  if (counted && m > static_cast<int64_t>(kMaxUniqueCounted))
    schema_fail("uniqueItems with minItems/maxItems over more than 16 values is not enforced");
  const std::string base = prefix_ + "u" + std::to_string(next_rule_++) + "-";
  auto name = [&](int64_t j, int64_t c) { return base + std::to_string(j) + "-" + std::to_string(counted ? c : 0); };
  for (int64_t c = counted ? hi : 1; c >= 1; --c) {
    for (int64_t j = 0; j < m; ++j) {
      std::string alts = (!counted || c >= lo) ? "\"\"" : "";
      if (!counted || c < hi)
        for (int64_t k = j + 1; k < m; ++k) {
          if (counted && m - 1 - k < lo - (c + 1)) continue;  // too few values left to reach minItems
          alts += std::string(alts.empty() ? "" : " | ") + "ws \",\" ws " + lits[static_cast<size_t>(k)] + " " + name(k, c + 1);
        }
      if (alts.empty()) alts = "\"\"";  // unreachable: not enough values left (the count guard)
      extra_ += name(j, c) + " ::= " + alts + "\n";
    }
    if (!counted) break;
  }
  bound();
  std::vector<std::string> firsts;
  for (int64_t j = 0; j < m; ++j)
    if (m - 1 - j >= lo - 1) firsts.push_back(lits[static_cast<size_t>(j)] + " " + name(j, 1));
  const std::string body = alternatives(firsts);
  return new_rule("\"[\" ws " + (lo > 0 ? body : "(" + body + ")?") + " ws \"]\"");
}

std::string SchemaCompiler::array_rule(const json& s, int depth) {
  std::vector<json> prefix;
  json rest = true;
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) schema_fail("'prefixItems' must be an array");
    for (const json& p : s["prefixItems"]) prefix.push_back(p);
    if (s.contains("items")) rest = s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {
    for (const json& p : s["items"]) prefix.push_back(p);  // draft 4 to 2019-09 tuples
    if (s.contains("additionalItems")) rest = s["additionalItems"];
  } else if (s.contains("items")) {
    rest = s["items"];
  }
  const bool rest_allowed = !(rest.is_boolean() && !rest.get<bool>());
  int64_t lo = count_field(s, "minItems", 0), hi = count_field(s, "maxItems", -1);
  if (lo > kMaxRepeat) schema_fail("'minItems' above " + std::to_string(kMaxRepeat) + " is not enforced");
  if (hi > kMaxRepeat) hi = -1;
  const auto n = static_cast<int64_t>(prefix.size());
  if (!rest_allowed) hi = hi < 0 ? n : std::min(hi, n);
  if (hi >= 0 && hi < lo) schema_fail("maxItems below minItems (or more items required than the tuple allows)");
  if (s.contains("contains")) {
    // The first item satisfies `contains` (and the items schema).
    if (!prefix.empty() || !rest_allowed) schema_fail("'contains' beside prefixItems is not enforced");
    prefix.push_back(json{{"allOf", json::array({rest, s["contains"]})}});
    lo = std::max<int64_t>(lo, 1);
    if (hi == 0) schema_fail("'contains' with maxItems 0 admits no array");
  }
  if (s.value("uniqueItems", false)) {
    const json item = merger_.flatten(rest, depth);
    std::optional<json> values;
    if (prefix.empty() && item.is_object()) {
      if (item.contains("enum")) values = item["enum"];
      else if (item.contains("const")) values = json::array({item["const"]});
      else if (item.value("type", json()) == "boolean") values = json::array({false, true});
    }
    if (values && !item.contains("anyOf") && !item.contains("oneOf")) return unique_enum_array(*values, lo, hi);
    // Items that can repeat: at most one of them, the relaxation that stays valid.
    if (lo > 1 || static_cast<int64_t>(prefix.size()) > 1)
      schema_fail("uniqueItems is enforced for items from a fixed list (enum, const, boolean) or arrays of at most "
                  "one item; this schema needs more (minItems above 1)");
    hi = hi < 0 ? 1 : std::min<int64_t>(hi, 1);
  }
  std::vector<std::string> prefix_rules;
  for (size_t i = 0; i < prefix.size() && (hi < 0 || static_cast<int64_t>(i) < hi); ++i)
    prefix_rules.push_back(value(prefix[i], depth + 1));
  std::string rest_rule;
  try {
    if (rest_allowed) rest_rule = value(rest, depth + 1);
  } catch (const EmptySchema&) {
    // No value fits the further items: the array ends after the tuple.
    const auto tuple = static_cast<int64_t>(prefix.size());
    hi = hi < 0 ? tuple : std::min(hi, tuple);
    if (hi < lo) throw;
  }
  return items_rule(prefix_rules, rest_rule, lo, hi);
}

}  // namespace pagoda::structured::detail

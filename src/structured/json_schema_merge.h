// JSON Schema helpers shared by the compiler's files: which keywords assert (the rest annotate),
// $ref resolution, allOf (and $ref beside other keywords) merged into one schema object, and
// numeric keyword values read exactly.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "structured/json_schema_numbers.h"

namespace pagoda::structured {

using SchemaJson = nlohmann::ordered_json;

[[noreturn]] void schema_fail(const std::string& what);
[[noreturn]] void schema_empty(const std::string& what);  // throws EmptySchema

// Keywords that constrain instances; every other keyword (title, id, x-*, readonly, links, ...)
// only annotates and is ignored, as JSON Schema says a validator does.
bool is_assertion(const std::string& key);
bool has_assertions(const SchemaJson& s);

// Integer literals too large for 64 bits, which the JSON parser keeps only as doubles, by that
// double: their exact text, so a bound like 18446744073709551616 is compared exactly.
using BigLiterals = std::multimap<double, std::string>;
BigLiterals big_integer_literals(std::string_view text);

class SchemaMerger {
 public:
  SchemaMerger(const SchemaJson& root, const BigLiterals& big) : root_(root), big_(big) {}

  const SchemaJson& resolve(const std::string& pointer) const;
  // s with allOf, and $ref beside other assertions, merged into one object (the intersection
  // where the compiler can form it, an Error naming the keyword where it cannot).
  SchemaJson flatten(const SchemaJson& s, int depth) const;
  // For oneOf: per alternative (each merged with `rest`), the properties to leave out of it so
  // that no output of it also matches another alternative; an Error where that cannot be shown.
  std::vector<std::vector<std::string>> one_of_omissions(const SchemaJson& rest, const SchemaJson& alts, int depth) const;
  // A numeric keyword's exact value, as a validator reading the same JSON compares it.
  Decimal exact(const SchemaJson& v, const char* key) const;

 private:
  SchemaJson inline_all(const SchemaJson& s, int depth) const;
  void merge_into(SchemaJson& a, const SchemaJson& b) const;

  const SchemaJson& root_;
  const BigLiterals& big_;
};

}  // namespace pagoda::structured

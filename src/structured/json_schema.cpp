#include "structured/json_schema.h"

#include <vector>

#include "core/error.h"
#include "structured/json_schema_compiler.h"

namespace pagoda::structured {

using detail::SchemaCompiler;
using json = SchemaJson;

std::string json_schema_rules(std::string_view schema_text, const std::string& prefix) {
  check(schema_text.size() <= (1u << 20), "json schema: larger than 1 MiB");
  json schema;
  BigLiterals big;
  try {
    // nlohmann's parser and destructor are iterative; the depth is checked below.
    schema = json::parse(schema_text);
    big = big_integer_literals(schema_text);
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
  try {
    return SchemaCompiler(schema, prefix, big).run();
  } catch (const json::exception& e) {
    // a keyword of the wrong JSON type, met where the compiler reads it
    throw Error(std::string("json schema: a keyword has the wrong type: ") + e.what());
  }
}

std::string json_schema_to_gbnf(std::string_view schema_text) {
  return json_schema_rules(schema_text, "") + json_primitives_gbnf();
}

std::string json_primitives_gbnf() { return json_schema_primitives(); }

std::string json_object_gbnf() { return std::string("root ::= json-object\n") + json_schema_primitives(); }

}  // namespace pagoda::structured

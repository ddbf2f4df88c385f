// JSON Schema (the part real tool and output schemas use) as a GBNF grammar whose every sentence
// is a JSON text valid against the schema. What the grammar cannot enforce is an Error naming the
// keyword, never silently dropped. Where a schema allows more than one form the grammar picks a
// subset that is still valid: properties in their declared order, no undeclared properties
// beside declared ones, numbers of at most 16 integer and 16 fraction digits, whitespace one space or a newline and
// up to 16 spaces.
#pragma once

#include <string>
#include <string_view>

namespace pagoda::structured {

std::string json_schema_to_gbnf(std::string_view schema_text);
// The schema's rules alone, named with `prefix` (its top rule is <prefix>root), to combine
// several schemas in one grammar; they use the rules of json_primitives_gbnf(), added once.
std::string json_schema_rules(std::string_view schema_text, const std::string& prefix);
std::string json_primitives_gbnf();
// Any JSON object ({"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace pagoda::structured

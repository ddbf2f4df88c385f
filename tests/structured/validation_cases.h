// The constraints whose outputs tests/structured/validate_outputs.py checks with validators that are
// not ours: every schema of schemas.json, json_object, six regexes, a choice list and a GBNF
// arithmetic grammar. Shared by the byte-level walk (grammar_test.cpp) and the run through the engine
// on the default model (tests/engine/structured_output_test.cpp).
#pragma once

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "structured/compile.h"
#include "core/build_paths.h"

namespace pagoda::structured::testing {

// (the validator's record without the output: kind and spec, the constraint that makes it)
inline std::vector<std::pair<nlohmann::json, Constraint>> validation_cases() {
  using nlohmann::json;
  std::vector<std::pair<json, Constraint>> cases;
  std::ifstream f(std::string(PAGODA_SOURCE_DIR) + "/tests/structured/schemas.json");
  const json schemas = json::parse(f);
  for (const json& s : schemas)
    cases.push_back({{{"kind", "schema"}, {"spec", s}}, {ConstraintKind::kJsonSchema, s.dump(), {}}});
  cases.push_back({{{"kind", "json_object"}, {"spec", nullptr}}, {ConstraintKind::kJsonObject, "", {}}});
  for (const char* re : {"[a-z]{3}-\\d{2}", "(cat|dog)s?", "\\w+@\\w+\\.com", "[^x]{1,4}", "(ab|c)*d", "\\(\\d+\\.\\d\\)"})
    cases.push_back({{{"kind", "regex"}, {"spec", re}}, {ConstraintKind::kRegex, re, {}}});
  const std::vector<std::string> choices = {"yes", "no", "maybe so", "\xC3\xA9t\xC3\xA9"};
  cases.push_back({{{"kind", "choice"}, {"spec", choices}}, {ConstraintKind::kChoice, "", choices}});
  const std::string arith =
      "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= factor ((\"*\" | \"/\") factor)*\n"
      "factor ::= \"0\" | [1-9] [0-9]{0,2} | \"(\" expr \")\"\n";  // as Python: no leading zeros
  cases.push_back({{{"kind", "arith"}, {"spec", nullptr}}, {ConstraintKind::kGrammar, arith, {}}});
  return cases;
}

}  // namespace pagoda::structured::testing

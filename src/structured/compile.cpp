#include "structured/compile.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/regex_to_gbnf.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::structured {

namespace {

// Qwen's tool-call syntax (its chat template):
//   <tool_call>\n{"name": "<function>", "arguments": <parameters JSON>}\n</tool_call>
// one call, or several separated by a newline when parallel calls are allowed.
std::string tool_calls_gbnf(const Constraint& c) {
  check(!c.choices.empty() && c.choices.size() == c.schemas.size(), "tool_choice: no functions to call");
  check(c.choices.size() <= 256, "tools: more than 256 functions");
  std::string rules, alts;
  for (size_t i = 0; i < c.choices.size(); ++i) {
    const std::string prefix = "t" + std::to_string(i) + "-";
    rules += json_schema_rules(c.schemas[i], prefix);
    alts += (alts.empty() ? "" : " | ") + gbnf_literal(nlohmann::json(c.choices[i]).dump()) + " " +
            gbnf_literal(", \"arguments\": ") + " " + prefix + "root";
  }
  std::string root = "root ::= call";
  if (c.parallel) root += " (\"\\n\" call)*";
  return root + "\ncall ::= " + gbnf_literal("<tool_call>\n{\"name\": ") + " (" + alts + ") " +
         gbnf_literal("}\n</tool_call>") + "\n" + rules + json_primitives_gbnf();
}

}  // namespace

std::string constraint_to_gbnf(const Constraint& c) {
  switch (c.kind) {
    case ConstraintKind::kJsonSchema: return json_schema_to_gbnf(c.text);
    case ConstraintKind::kJsonObject: return json_object_gbnf();
    case ConstraintKind::kRegex: return "root ::= " + regex_to_gbnf(c.text) + "\n";
    case ConstraintKind::kGrammar: return c.text;
    case ConstraintKind::kToolCalls: return tool_calls_gbnf(c);
    case ConstraintKind::kChoice: {
      check(!c.choices.empty(), "choice: the list of choices is empty");
      check(c.choices.size() <= 10000, "choice: more than 10,000 choices");
      std::string alts;
      for (const std::string& s : c.choices) alts += (alts.empty() ? "" : " | ") + gbnf_literal(s);
      return "root ::= " + alts + "\n";
    }
  }
  throw InternalError("constraint_to_gbnf: unknown kind");
}

Grammar compile_constraint(const Constraint& c) { return parse_gbnf(constraint_to_gbnf(c)); }

std::vector<std::string> vocabulary_bytes(const Tokenizer& tok, const std::vector<int32_t>& skip) {
  const int32_t n = tok.vocab_size();
  std::vector<std::string> out(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_special(id) || std::find(skip.begin(), skip.end(), id) != skip.end()) continue;
    out[static_cast<size_t>(id)] = tok.token_bytes(id);
  }
  return out;
}

}  // namespace pagoda::structured

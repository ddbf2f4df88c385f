// Structured-output requests: response_format, vLLM's structured_outputs and guided_* fields, and
// tool_choice required/named, read into a Constraint (400 naming the field for anything wrong),
// and compiled against the served vocabulary through a bounded cache keyed by the constraint.
#pragma once

#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "structured/compile.h"

namespace pagoda {
class Tokenizer;
}

namespace pagoda::server {

using Json = nlohmann::ordered_json;

struct RequestedConstraint {
  structured::Constraint constraint;
  std::string param;  // the request field it came from (for errors)
};

// The constraint a completions/chat body asks for through response_format, structured_outputs or
// guided_*; nullopt when none. More than one is a 400.
std::optional<RequestedConstraint> read_constraint(const Json& body);
// The Responses API's text.format: {"type": "text" | "json_object" | "json_schema", name, schema,
// strict} (the schema beside the type, not nested as in response_format); nullopt for text.
std::optional<RequestedConstraint> read_text_format(const Json& format);
// tool_choice "required" or a named function over `tools` (the request's tools array): Qwen's
// <tool_call> syntax with each function's parameters schema; nullopt for auto/none.
std::optional<RequestedConstraint> read_tool_choice(const Json& body, const Json& tools);

// The compiled grammar for `c` bound to the tokenizer's vocabulary and the model's EOS ids;
// compile errors are a 400 naming `c.param`.
std::shared_ptr<structured::GrammarRuntime> compile_constraint_cached(const RequestedConstraint& c,
                                                                      const Tokenizer& tok,
                                                                      const std::vector<int32_t>& eos_ids);

}  // namespace pagoda::server

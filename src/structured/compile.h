// The front door of structured output: a request's constraint (JSON Schema, any JSON object,
// regex, a choice list or a GBNF grammar) compiled into an automaton bound to the vocabulary, and
// the vocabulary as the automaton sees it (each token's bytes; special tokens none).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "structured/matcher.h"

namespace pagoda {
class Tokenizer;
}

namespace pagoda::structured {

enum class ConstraintKind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar, kToolCalls };

struct Constraint {
  ConstraintKind kind = ConstraintKind::kJsonObject;
  std::string text;                  // the schema JSON, regex or grammar
  std::vector<std::string> choices;  // kChoice; kToolCalls: the function names
  std::vector<std::string> schemas;  // kToolCalls: each function's parameters schema (JSON text)
  bool parallel = true;              // kToolCalls: more than one call allowed
  // kToolCalls: the syntax the calls are written in, a --tool-call-parser name (hermes,
  // llama3_json, mistral, pythonic).
  std::string tool_syntax = "hermes";
};

// The constraint as GBNF text (every front end ends there); Error names what is wrong.
std::string constraint_to_gbnf(const Constraint& c);
// Parsed and checked IR.
Grammar compile_constraint(const Constraint& c);

// Each token's bytes for the trie: the tokenizer's token_bytes, with special tokens (and the
// `skip` ids: EOS and other control tokens) mapped to nothing.
std::vector<std::string> vocabulary_bytes(const Tokenizer& tok, const std::vector<int32_t>& skip);

}  // namespace pagoda::structured

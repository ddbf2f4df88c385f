#include "structured/compile.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/regex_to_gbnf.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::structured {

namespace {

// A pythonic call's keyword arguments (`name=value, ...`, values as JSON, which the pythonic
// parser reads beside Python's literals): the parameters' properties in their order, required ones
// always, optional ones maybe. Each value is its property's schema compiled with the document's
// $defs/definitions beside it, so its $refs still resolve.
std::string pythonic_kwargs(const std::string& schema_text, const std::string& prefix, std::string& rules) {
  const auto schema = nlohmann::ordered_json::parse(schema_text);
  check(schema.is_object(), "tools: a pythonic call needs object parameters");
  std::vector<std::pair<std::string, std::string>> args;  // (key, value rule)
  std::vector<bool> required;
  if (schema.contains("properties") && schema["properties"].is_object()) {
    size_t i = 0;
    for (auto& [k, v] : schema["properties"].items()) {
      bool identifier = !k.empty() && !std::isdigit(static_cast<unsigned char>(k[0]));
      for (char ch : k) identifier = identifier && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
      check(identifier, "tools: parameter '" + k + "' is not a Python identifier, so no pythonic call can name it");
      nlohmann::ordered_json doc = {{"allOf", nlohmann::ordered_json::array({v})}};
      for (const char* defs : {"$defs", "definitions"})
        if (schema.contains(defs)) doc[defs] = schema[defs];
      const std::string p = prefix + "a" + std::to_string(i++) + "-";
      rules += json_schema_rules(doc.dump(), p);
      args.emplace_back(k, p + "root");
      const auto& req = schema.value("required", nlohmann::ordered_json::array());
      required.push_back(std::find(req.begin(), req.end(), k) != req.end());
    }
  }
  // As object properties: tail_i follows a written argument, start_i is the first one written.
  const size_t n = args.size();
  std::string tail = "\"\"", start = "\"\"";
  for (size_t i = n; i-- > 0;) {
    const std::string kv = gbnf_literal(args[i].first + "=") + " " + args[i].second;
    const std::string t = prefix + "kt" + std::to_string(i), st = prefix + "ks" + std::to_string(i);
    rules += t + " ::= " + (required[i] ? "\", \" " + kv + " " + tail : "(\", \" " + kv + ")? " + tail) + "\n";
    rules += st + " ::= " + (required[i] ? kv + " " + tail : kv + " " + tail + " | " + start) + "\n";
    tail = t;
    start = st;
  }
  return start;
}

// Forced tool calls (tool_choice required or named) in the syntax of the model's family:
//   hermes (Qwen's template):  <tool_call>\n{"name": "<function>", "arguments": <JSON>}\n</tool_call>
//                              several separated by a newline;
//   llama3_json:               {"name": "<function>", "parameters": <JSON>}, several joined by "; ";
//   mistral:                   [TOOL_CALLS][{"name": "<function>", "arguments": <JSON>}, ...] (the
//                              tag written as text: the special token has no bytes to mask);
//   pythonic:                  [<function>(key=<JSON>, ...), ...].
std::string tool_calls_gbnf(const Constraint& c) {
  check(!c.choices.empty() && c.choices.size() == c.schemas.size(), "tool_choice: no functions to call");
  check(c.choices.size() <= 256, "tools: more than 256 functions");
  const std::string& syn = c.tool_syntax;
  check(syn == "hermes" || syn == "llama3_json" || syn == "mistral" || syn == "pythonic",
        "tool calls: no grammar for the syntax '" + syn + "'");
  const std::string args_key = syn == "llama3_json" ? "parameters" : "arguments";
  std::string rules, alts;
  for (size_t i = 0; i < c.choices.size(); ++i) {
    const std::string prefix = "t" + std::to_string(i) + "-";
    std::string alt;
    if (syn == "pythonic") {
      for (char ch : c.choices[i])
        check(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-',
              "tools: function name '" + c.choices[i] + "' cannot be written as a pythonic call");
      alt = gbnf_literal(c.choices[i] + "(") + " " + pythonic_kwargs(c.schemas[i], prefix, rules) + " " + gbnf_literal(")");
    } else {
      rules += json_schema_rules(c.schemas[i], prefix);
      alt = gbnf_literal(nlohmann::json(c.choices[i]).dump()) + " " + gbnf_literal(", \"" + args_key + "\": ") + " " +
            prefix + "root";
    }
    alts += (alts.empty() ? "" : " | ") + alt;
  }
  std::string root, call;
  if (syn == "hermes") {
    root = std::string("root ::= call") + (c.parallel ? " (\"\\n\" call)*" : "");
    call = gbnf_literal("<tool_call>\n{\"name\": ") + " (" + alts + ") " + gbnf_literal("}\n</tool_call>");
  } else if (syn == "llama3_json") {
    root = std::string("root ::= call") + (c.parallel ? " (\"; \" call)*" : "");
    call = gbnf_literal("{\"name\": ") + " (" + alts + ") " + gbnf_literal("}");
  } else if (syn == "mistral") {
    root = std::string("root ::= \"[TOOL_CALLS][\" call") + (c.parallel ? " (\", \" call)*" : "") + " \"]\"";
    call = gbnf_literal("{\"name\": ") + " (" + alts + ") " + gbnf_literal("}");
  } else {
    root = std::string("root ::= \"[\" call") + (c.parallel ? " (\", \" call)*" : "") + " \"]\"";
    call = "(" + alts + ")";
  }
  return root + "\ncall ::= " + call + "\n" + rules + json_primitives_gbnf();
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

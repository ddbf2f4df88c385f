#include "server/structured_output.h"

#include <list>
#include <mutex>
#include <unordered_map>

#include "core/error.h"
#include "server/api_error.h"
#include "server/request_fields.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::server {
namespace {

using structured::Constraint;
using structured::ConstraintKind;

constexpr size_t kCacheEntries = 64;

std::string schema_text(const Json& v, const std::string& param) {
  if (!v.is_object() && !v.is_boolean()) wrong_type(param, "a JSON Schema object", v);
  return v.dump();
}

std::vector<std::string> choice_list(const Json& v, const std::string& param) {
  if (!v.is_array() || v.empty()) wrong_type(param, "a non-empty array of strings", v);
  std::vector<std::string> out;
  for (const Json& c : v) {
    if (!c.is_string()) wrong_type(param, "a non-empty array of strings", v);
    out.push_back(c.get<std::string>());
  }
  return out;
}

std::string text_field(const Json& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, "a string", v);
  return v.get<std::string>();
}

std::optional<RequestedConstraint> from_response_format(const Json& rf) {
  if (!rf.is_object()) wrong_type("response_format", "an object", rf);
  const Json* t = field(rf, "type");
  const std::string type = t ? text_field(*t, "response_format.type") : "text";
  if (type == "text") return std::nullopt;
  if (type == "json_object") return RequestedConstraint{{ConstraintKind::kJsonObject, "", {}, {}, true}, "response_format"};
  if (type == "json_schema") {
    const Json* js = field(rf, "json_schema");
    if (!js || !js->is_object())
      throw bad_request("response_format of type 'json_schema' needs a json_schema object {name, schema}", "response_format");
    const Json* schema = field(*js, "schema");
    // OpenAI's name/strict are accepted; a schema is always enforced strictly.
    const std::string text = schema ? schema_text(*schema, "response_format.json_schema.schema") : "{}";
    return RequestedConstraint{{ConstraintKind::kJsonSchema, text, {}, {}, true}, "response_format"};
  }
  throw bad_request("response_format type must be 'text', 'json_object' or 'json_schema', got '" + type + "'",
                    "response_format");
}

}  // namespace

std::optional<RequestedConstraint> read_text_format(const Json& f) {
  if (!f.is_object()) wrong_type("text.format", "an object", f);
  const Json* t = field(f, "type");
  const std::string type = t ? text_field(*t, "text.format.type") : "text";
  if (type == "text") return std::nullopt;
  if (type == "json_object") return RequestedConstraint{{ConstraintKind::kJsonObject, "", {}, {}, true}, "text.format"};
  if (type == "json_schema") {
    const Json* schema = field(f, "schema");
    const std::string text = schema ? schema_text(*schema, "text.format.schema") : "{}";
    return RequestedConstraint{{ConstraintKind::kJsonSchema, text, {}, {}, true}, "text.format"};
  }
  throw bad_request("text.format type must be 'text', 'json_object' or 'json_schema', got '" + type + "'",
                    "text.format");
}

namespace {

std::optional<RequestedConstraint> from_vllm(const Json& j, const std::string& prefix, const Json& obj) {
  std::optional<RequestedConstraint> out;
  auto set = [&](ConstraintKind k, std::string text, std::vector<std::string> choices, const std::string& param) {
    if (out) throw bad_request("give one structured-output constraint, not several (" + out->param + " and " + param + ")", param);
    out = RequestedConstraint{{k, std::move(text), std::move(choices), {}, true}, param};
  };
  const bool nested = prefix == "structured_outputs.";
  const std::string pj = nested ? "json" : "guided_json", pr = nested ? "regex" : "guided_regex",
                    pc = nested ? "choice" : "guided_choice", pg = nested ? "grammar" : "guided_grammar";
  if (const Json* v = field(obj, pj)) {
    // vLLM takes the schema as an object or as its JSON text.
    const std::string text = v->is_string() ? v->get<std::string>() : schema_text(*v, prefix + pj);
    set(ConstraintKind::kJsonSchema, text, {}, nested ? prefix + pj : pj);
  }
  if (const Json* v = field(obj, pr)) set(ConstraintKind::kRegex, text_field(*v, prefix + pr), {}, nested ? prefix + pr : pr);
  if (const Json* v = field(obj, pc)) set(ConstraintKind::kChoice, "", choice_list(*v, prefix + pc), nested ? prefix + pc : pc);
  if (const Json* v = field(obj, pg)) set(ConstraintKind::kGrammar, text_field(*v, prefix + pg), {}, nested ? prefix + pg : pg);
  if (nested && field(obj, "json_object") && opt_bool(obj, "json_object").value_or(false))
    set(ConstraintKind::kJsonObject, "", {}, "structured_outputs.json_object");
  (void)j;
  return out;
}

}  // namespace

std::optional<RequestedConstraint> read_constraint(const Json& j) {
  std::vector<RequestedConstraint> found;
  if (const Json* rf = field(j, "response_format"))
    if (auto c = from_response_format(*rf)) found.push_back(*c);
  if (const Json* so = field(j, "structured_outputs")) {
    if (!so->is_object()) wrong_type("structured_outputs", "an object", *so);
    if (auto c = from_vllm(j, "structured_outputs.", *so)) found.push_back(*c);
  }
  if (auto c = from_vllm(j, "", j)) found.push_back(*c);
  if (found.size() > 1)
    throw bad_request("give one structured-output constraint, not several (" + found[0].param + " and " +
                          found[1].param + ")",
                      found[1].param);
  if (found.empty()) return std::nullopt;
  return found[0];
}

std::optional<RequestedConstraint> read_tool_choice(const Json& j, const Json& tools) {
  const Json* tc = field(j, "tool_choice");
  if (!tc || (tc->is_string() && (*tc == "auto" || *tc == "none"))) return std::nullopt;
  if (!tools.is_array() || tools.empty()) throw bad_request("tool_choice needs a non-empty tools array", "tool_choice");
  std::string wanted;
  if (tc->is_object()) {
    const Json* fn = field(*tc, "function");
    if (!fn || !fn->is_object() || !field(*fn, "name") || !(*fn)["name"].is_string())
      throw bad_request("a named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
    wanted = (*fn)["name"].get<std::string>();
  }
  Constraint c{ConstraintKind::kToolCalls, "", {}, {}, true};
  for (const Json& t : tools) {
    const Json* fn = t.is_object() ? field(t, "function") : nullptr;
    if (!fn || !fn->is_object() || !field(*fn, "name") || !(*fn)["name"].is_string()) continue;
    const std::string name = (*fn)["name"].get<std::string>();
    if (!wanted.empty() && name != wanted) continue;
    const Json* params = field(*fn, "parameters");
    c.choices.push_back(name);
    c.schemas.push_back(params ? schema_text(*params, "tools.function.parameters") : "{\"type\": \"object\"}");
  }
  if (c.choices.empty()) throw bad_request("tool_choice names function '" + wanted + "', which is not in tools", "tool_choice");
  c.parallel = wanted.empty() && opt_bool(j, "parallel_tool_calls").value_or(true);
  return RequestedConstraint{std::move(c), "tool_choice"};
}

std::shared_ptr<structured::GrammarRuntime> compile_constraint_cached(const RequestedConstraint& rc,
                                                                      const Tokenizer& tok,
                                                                      const std::vector<int32_t>& eos_ids) {
  // One trie per tokenizer (the server serves one model) and a small LRU of compiled grammars.
  static std::mutex mu;
  static const Tokenizer* trie_of = nullptr;
  static std::shared_ptr<const structured::TokenTrie> trie;
  static std::list<std::pair<std::string, std::shared_ptr<structured::GrammarRuntime>>> lru;
  const Constraint& c = rc.constraint;
  std::string key = std::to_string(static_cast<int>(c.kind)) + (c.parallel ? "p" : "s") + '\x1f' + c.text;
  for (const auto& s : c.choices) key += '\x1f' + s;
  for (const auto& s : c.schemas) key += '\x1e' + s;
  std::lock_guard lock(mu);
  if (trie_of != &tok) {
    trie = std::make_shared<structured::TokenTrie>(structured::vocabulary_bytes(tok, eos_ids));
    trie_of = &tok;
    lru.clear();
  }
  for (auto it = lru.begin(); it != lru.end(); ++it) {
    if (it->first == key) {
      // A grammar that ran out of its parser budget for an earlier request would again: dropped
      // (its memory is already freed) and refused.
      if (const std::string why = it->second->failure(); !why.empty()) {
        lru.erase(it);
        throw bad_request(why, rc.param);
      }
      lru.splice(lru.begin(), lru, it);
      return it->second;
    }
  }
  std::shared_ptr<structured::GrammarRuntime> rt;
  try {
    rt = std::make_shared<structured::GrammarRuntime>(structured::compile_constraint(c), trie, eos_ids);
    // A grammar whose start cannot expand fails here, as a 400; so does one whose ambiguity shows
    // within the probe's bounded exploration (the parser budget, structured/automaton.h).
    rt->initial();
    rt->probe();
  } catch (const Error& e) {
    throw bad_request(e.what(), rc.param);
  }
  lru.emplace_front(key, rt);
  if (lru.size() > kCacheEntries) lru.pop_back();
  return rt;
}

}  // namespace pagoda::server

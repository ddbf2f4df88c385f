#include "server/messages_request.h"

#include <limits>

#include "server/api_error.h"
#include "server/request_fields.h"
#include "server/request_json.h"
#include "server/sse.h"
#include "server/tool_list.h"

namespace pagoda::server {
namespace {

std::string at(const std::string& where, const std::string& name) { return where.empty() ? name : where + "." + name; }
std::string at(const std::string& where, size_t index) { return where + "[" + std::to_string(index) + "]"; }

std::optional<std::string> opt_string(const Json& j, const std::string& name, const std::string& where = "") {
  const Json* v = field(j, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(at(where, name), "a string", *v);
  return v->get<std::string>();
}

std::string required_string(const Json& j, const std::string& name, const std::string& where) {
  std::optional<std::string> s = opt_string(j, name, where);
  if (!s) throw bad_request("'" + at(where, name) + "' is required", at(where, name));
  return *s;
}

[[noreturn]] void unsupported_block(const std::string& type, const std::string& key, const char* allowed) {
  throw bad_request("content blocks of type '" + type + "' are not supported here (" + allowed +
                        " are): pagoda serves text and tools only",
                    at(key, "type"));
}

// A string, or an array of text blocks joined by `separator`.
std::string text_of(const Json& content, const std::string& key, const char* separator = "\n") {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) wrong_type(key, "a string or an array of text blocks", content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    const std::string bkey = at(key, i);
    if (!block.is_object()) wrong_type(bkey, "an object", block);
    const std::string type = required_string(block, "type", bkey);
    if (type != "text") unsupported_block(type, bkey, "text blocks");
    if (i > 0) text += separator;
    text += required_string(block, "text", bkey);
  }
  return text;
}

// Text blocks of a message are joined with "\n", as chat's text parts; empty ones are skipped, as
// vLLM skips them.
void append_text(std::optional<std::string>& into, const std::string& text) {
  if (text.empty()) return;
  if (into) *into += "\n";
  else into.emplace();
  *into += text;
}

// A user message: its tool_result blocks become tool messages ahead of the user's own text (the
// chat form has no other place for them), as vLLM orders them.
void user_message(const Json& content, const std::string& key, Json& out) {
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  std::optional<std::string> text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    const std::string bkey = at(key, i);
    if (!block.is_object()) wrong_type(bkey, "an object", block);
    const std::string type = required_string(block, "type", bkey);
    if (type == "text") {
      append_text(text, required_string(block, "text", bkey));
    } else if (type == "tool_result") {
      const std::string id = required_string(block, "tool_use_id", bkey);
      const Json* c = field(block, "content");
      out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", c ? text_of(*c, at(bkey, "content")) : ""}});
    } else {
      unsupported_block(type, bkey, "text and tool_result blocks");
    }
  }
  if (text) out.push_back({{"role", "user"}, {"content", std::move(*text)}});
}

// An assistant message: text, thinking (the reasoning the template may render) and tool_use
// blocks (its tool_calls, the input object as JSON text as chat clients send arguments).
void assistant_message(const Json& content, const std::string& key, Json& out) {
  if (content.is_string()) {
    out.push_back({{"role", "assistant"}, {"content", content}});
    return;
  }
  std::optional<std::string> text, reasoning;
  Json calls = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    const std::string bkey = at(key, i);
    if (!block.is_object()) wrong_type(bkey, "an object", block);
    const std::string type = required_string(block, "type", bkey);
    if (type == "text") {
      append_text(text, required_string(block, "text", bkey));
    } else if (type == "thinking") {
      append_text(reasoning, required_string(block, "thinking", bkey));
    } else if (type == "tool_use") {
      const Json* input = field(block, "input");
      if (!input) throw bad_request("'" + at(bkey, "input") + "' is required", at(bkey, "input"));
      if (!input->is_object()) wrong_type(at(bkey, "input"), "an object", *input);
      calls.push_back({{"id", required_string(block, "id", bkey)},
                       {"type", "function"},
                       {"function", {{"name", required_string(block, "name", bkey)}, {"arguments", dump_json(*input)}}}});
    } else {
      unsupported_block(type, bkey, "text, thinking and tool_use blocks");
    }
  }
  if (!text && !reasoning && calls.empty()) return;  // nothing to render (an empty block list)
  Json msg = {{"role", "assistant"}, {"content", text ? Json(std::move(*text)) : Json(nullptr)}};
  if (reasoning) {  // vLLM gives templates both names: Qwen3's and DeepSeek's read reasoning_content
    msg["reasoning"] = *reasoning;
    msg["reasoning_content"] = std::move(*reasoning);
  }
  if (!calls.empty()) msg["tool_calls"] = std::move(calls);
  out.push_back(std::move(msg));
}

Json read_messages(const Json& j) {
  Json out = Json::array();
  if (const Json* system = field(j, "system")) {
    const std::string text = text_of(*system, "system", "");  // vLLM concatenates system blocks
    if (!text.empty()) out.push_back({{"role", "system"}, {"content", text}});
  }
  const Json* msgs = field(j, "messages");
  if (!msgs) throw bad_request("'messages' is required", "messages");
  if (!msgs->is_array() || msgs->empty()) throw bad_request("'messages' must be a non-empty array", "messages");
  if (msgs->size() > kMaxAnthropicMessages)
    throw bad_request("'messages' has " + std::to_string(msgs->size()) + " messages; at most " +
                          std::to_string(kMaxAnthropicMessages) + " are allowed", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string key = at("messages", i);
    if (!m.is_object()) wrong_type(key, "an object", m);
    // Bounded before anything is copied out of it (copies and dumps recurse).
    if (nesting_exceeds(m, kMaxChatNesting))
      throw bad_request(key + " is nested too deeply (more than " + std::to_string(kMaxChatNesting) + " levels)", key);
    const std::string role = required_string(m, "role", key);
    const Json* content = field(m, "content");
    if (!content) throw bad_request("'" + at(key, "content") + "' is required", at(key, "content"));
    if (!content->is_string() && !content->is_array())
      wrong_type(at(key, "content"), "a string or an array of content blocks", *content);
    if (content->is_array() && content->empty())
      throw bad_request("'" + at(key, "content") + "' must not be empty", at(key, "content"));
    if (role == "user") user_message(*content, at(key, "content"), out);
    else if (role == "assistant") assistant_message(*content, at(key, "content"), out);
    else
      throw bad_request("'" + at(key, "role") + "' must be 'user' or 'assistant' (the system prompt goes in 'system')",
                        at(key, "role"));
  }
  return out;
}

// Anthropic's custom tools ({name, description, input_schema}) as chat's function tools.
Json read_tools(const Json& tools) {
  return chat_function_tools(tools, [](const Json& t, const std::string& key) {
    if (auto type = opt_string(t, "type", key); type && *type != "custom")
      throw bad_request("tools of type '" + *type + "' are not supported: Anthropic's server tools run on "
                        "Anthropic's side; pagoda serves custom tools ({name, description, input_schema})",
                        at(key, "type"));
    Json fn = {{"name", required_string(t, "name", key)}};
    if (auto d = opt_string(t, "description", key)) fn["description"] = *d;
    const Json* schema = field(t, "input_schema");
    if (!schema) throw bad_request("'" + at(key, "input_schema") + "' is required", at(key, "input_schema"));
    if (!schema->is_object()) wrong_type(at(key, "input_schema"), "an object (a JSON schema)", *schema);
    fn["parameters"] = *schema;
    return fn;
  });
}

// tool_choice {type: auto | any | tool (with name) | none, disable_parallel_tool_use}: any and tool
// force calls through the same grammar as chat's required and named (`forced` gets it). Returns
// the type.
std::string read_tool_choice_field(const Json& j, const Json& chat_tools, std::optional<RequestedConstraint>& forced) {
  const Json* tc = field(j, "tool_choice");
  if (!tc) return "auto";
  if (!tc->is_object()) wrong_type("tool_choice", "an object such as {\"type\": \"auto\"}", *tc);
  const std::string type = required_string(*tc, "type", "tool_choice");
  Json chat_form;  // the body read_tool_choice of structured_output.h takes
  if (type == "auto" || type == "none") {
    chat_form["tool_choice"] = type;
  } else if (type == "any") {
    chat_form["tool_choice"] = "required";
  } else if (type == "tool") {
    chat_form["tool_choice"] = {{"type", "function"}, {"function", {{"name", required_string(*tc, "name", "tool_choice")}}}};
  } else {
    throw bad_request("tool_choice type must be 'auto', 'any', 'tool' or 'none', got '" + type + "'", "tool_choice.type");
  }
  if (auto off = opt_bool(*tc, "disable_parallel_tool_use")) chat_form["parallel_tool_calls"] = !*off;
  if (type == "auto" || type == "none") return type;
  if (chat_tools.is_null())
    throw bad_request("tool_choice '" + type + "' needs 'tools'", "tool_choice");
  forced = read_tool_choice(chat_form, chat_tools);
  return type;
}

// metadata: Anthropic's {user_id}, an opaque id of the end user (up to 256 characters).
std::string read_metadata(const Json& j) {
  const Json* m = field(j, "metadata");
  if (!m) return "";
  if (!m->is_object()) wrong_type("metadata", "an object", *m);
  const std::string user = opt_string(*m, "user_id", "metadata").value_or("");
  if (user.size() > 256) throw bad_request("metadata.user_id may have at most 256 characters", "metadata.user_id");
  return user;
}

// thinking {type: enabled (budget_tokens) | disabled}: reaches the template as enable_thinking
// (Qwen3's reads it); the budget is not enforced (max_tokens bounds the whole output).
void read_thinking(const Json& j, Json& template_kwargs) {
  const Json* t = field(j, "thinking");
  if (!t) return;
  if (!t->is_object()) wrong_type("thinking", "an object", *t);
  const std::string type = required_string(*t, "type", "thinking");
  if (type != "enabled" && type != "disabled")
    throw bad_request("thinking.type must be 'enabled' or 'disabled', got '" + type + "'", "thinking.type");
  if (!template_kwargs.contains("enable_thinking")) template_kwargs["enable_thinking"] = type == "enabled";
}

void reject_unsupported(const Json& j) {
  if (field(j, "mcp_servers"))
    throw bad_request("mcp_servers is not supported: pagoda calls no tools itself; give them as 'tools'",
                      "mcp_servers");
  if (field(j, "container"))
    throw bad_request("container is not supported: pagoda runs no code-execution containers", "container");
}

ChatPromptRequest read_prompt(const Json& j) {
  reject_unsupported(j);
  ChatPromptRequest p;
  p.messages = read_messages(j);
  if (p.messages.empty()) throw bad_request("'messages' holds no text, tool_use or tool_result block", "messages");
  if (const Json* t = field(j, "tools")) {
    p.tools = read_tools(*t);
    if (p.tools.empty()) p.tools = nullptr;
  }
  if (const Json* kw = field(j, "chat_template_kwargs")) {  // vLLM's chat extension, taken here too
    if (!kw->is_object()) wrong_type("chat_template_kwargs", "an object", *kw);
    if (nesting_exceeds(*kw, kMaxChatNesting))
      throw bad_request("'chat_template_kwargs' is nested too deeply", "chat_template_kwargs");
    p.chat_template_kwargs = *kw;
  }
  read_thinking(j, p.chat_template_kwargs);
  return p;
}

}  // namespace

ChatPromptRequest parse_messages_prompt(const Json& j) { return read_prompt(j); }

MessagesRequest parse_messages_request(const Json& j, const SamplingParams& defaults) {
  MessagesRequest r;
  r.params = defaults;
  r.model = opt_string(j, "model").value_or("");
  r.prompt = read_prompt(j);
  const std::string tool_choice = read_tool_choice_field(j, r.prompt.tools, r.constraint);
  r.parse_tool_calls = !r.prompt.tools.is_null() && tool_choice != "none";

  const Json* max_tokens = field(j, "max_tokens");
  if (!max_tokens) throw bad_request("'max_tokens' is required", "max_tokens");
  r.params.max_tokens = static_cast<int32_t>(as_int(*max_tokens, "max_tokens", 1, std::numeric_limits<int32_t>::max()));
  // The sampling fields the Messages API has, read as every route reads them (stop_sequences is
  // chat's stop); vLLM's extensions (seed, repetition_penalty, ...) are taken too.
  Json sampling = Json::object();
  for (const char* k : {"temperature", "top_p", "top_k", "seed", "repetition_penalty", "ignore_eos"})
    if (const Json* v = field(j, k)) sampling[k] = *v;
  if (const Json* s = field(j, "stop_sequences")) {
    if (!s->is_array()) wrong_type("stop_sequences", "an array of strings", *s);
    sampling["stop"] = *s;
  }
  try {
    read_common_sampling(sampling, r.params);
  } catch (const ApiError& e) {  // name the Messages field, not chat's
    if (e.param != "stop") throw;
    throw bad_request("stop_sequences must be an array of strings", "stop_sequences");
  }
  if (auto err = validate_sampling_params(r.params)) {
    std::string param = param_of(*err);
    throw bad_request(*err, param == "stop" ? "stop_sequences" : param);
  }
  r.stream = opt_bool(j, "stream").value_or(false);
  r.user = read_metadata(j);
  opt_string(j, "service_tier");  // accepted: one tier here
  return r;
}

}  // namespace pagoda::server

#include "server/responses_request.h"

#include <cmath>
#include <limits>

#include "server/api_error.h"
#include "server/request_fields.h"
#include "server/request_json.h"
#include "server/tool_list.h"

namespace pagoda::server {
namespace {

std::string at(const std::string& where, const std::string& name) { return where.empty() ? name : where + "." + name; }
std::string at(const std::string& where, size_t index) { return where + "[" + std::to_string(index) + "]"; }

std::optional<int64_t> opt_int(const Json& j, const std::string& name, int64_t lo = 0,
                               int64_t hi = std::numeric_limits<int32_t>::max()) {
  const Json* v = field(j, name);
  if (!v) return std::nullopt;
  return as_int(*v, name, lo, hi);
}

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

// A content value (a string, or an array of text parts) as one string: the parts joined by "\n",
// as vLLM gives templates that take strings. Images, files and audio are a 400: text only.
std::string content_text(const Json& content, const std::string& key) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return "";
  if (!content.is_array()) wrong_type(key, "a string or an array of content parts", content);
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string pkey = at(key, i);
    if (!part.is_object()) wrong_type(pkey, "an object", part);
    const std::string type = required_string(part, "type", pkey);
    std::string t;
    if (type == "input_text" || type == "output_text" || type == "text") t = required_string(part, "text", pkey);
    else if (type == "refusal") t = required_string(part, "refusal", pkey);
    else throw bad_request("content parts of type '" + type + "' are not supported (text only)", at(pkey, "type"));
    if (i > 0) text += "\n";
    text += t;
  }
  return text;
}

// Chat messages from input items, as vLLM's construct_input_messages builds them: one turn's
// reasoning item, message and function calls extend one assistant message.
class MessageBuilder {
 public:
  explicit MessageBuilder(Json& messages) : messages_(messages) {}

  void item(const Json& it, const std::string& key) {
    if (!it.is_object()) wrong_type(key, "an object", it);
    std::string type = opt_string(it, "type", key).value_or("");
    if (type.empty() && it.contains("role")) type = "message";
    if (type == "message") message(it, key);
    else if (type == "function_call") function_call(it, key);
    else if (type == "function_call_output") function_call_output(it, key);
    else if (type == "reasoning") reasoning(it, key);
    else if (type == "item_reference")
      throw bad_request("item_reference input items are not supported: pagoda stores no items; send the item itself",
                        at(key, "type"));
    else if (type.empty()) throw bad_request("'" + at(key, "type") + "' is required", at(key, "type"));
    else
      throw bad_request("input items of type '" + type +
                            "' are not supported (message, function_call, function_call_output and reasoning are)",
                        at(key, "type"));
  }

 private:
  // The last message when it is the assistant's and lacks `what` (null or absent).
  Json* open_assistant(const char* what) {
    if (messages_.empty()) return nullptr;
    Json& last = messages_.back();
    if (last["role"] != "assistant") return nullptr;
    const auto f = last.find(what);
    return f == last.end() || f->is_null() ? &last : nullptr;
  }

  void message(const Json& it, const std::string& key) {
    const std::string role = required_string(it, "role", key);
    if (role != "user" && role != "system" && role != "developer" && role != "assistant")
      throw bad_request("'" + at(key, "role") + "' must be user, system, developer or assistant, got '" + role + "'",
                        at(key, "role"));
    const auto content = it.find("content");
    if (content == it.end()) throw bad_request("'" + at(key, "content") + "' is required", at(key, "content"));
    std::string text = content_text(*content, at(key, "content"));
    if (role == "assistant") {
      if (Json* open = open_assistant("content")) {
        (*open)["content"] = std::move(text);
        return;
      }
    }
    messages_.push_back({{"role", role}, {"content", std::move(text)}});
  }

  void function_call(const Json& it, const std::string& key) {
    Json call = {{"id", required_string(it, "call_id", key)},
                 {"type", "function"},
                 {"function", {{"name", required_string(it, "name", key)},
                               {"arguments", required_string(it, "arguments", key)}}}};
    if (!messages_.empty() && messages_.back()["role"] == "assistant") {
      Json& calls = messages_.back()["tool_calls"];
      if (!calls.is_array()) calls = Json::array();
      calls.push_back(std::move(call));
      return;
    }
    messages_.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array({std::move(call)})}});
  }

  void function_call_output(const Json& it, const std::string& key) {
    const std::string call_id = required_string(it, "call_id", key);
    const auto output = it.find("output");
    if (output == it.end() || output->is_null())
      throw bad_request("'" + at(key, "output") + "' is required", at(key, "output"));
    messages_.push_back(
        {{"role", "tool"}, {"content", content_text(*output, at(key, "output"))}, {"tool_call_id", call_id}});
  }

  // The text of a reasoning item: its first content part, else its first summary part (vLLM).
  static std::string reasoning_text(const Json& it, const std::string& key) {
    for (const char* name : {"content", "summary"}) {
      const Json* parts = field(it, name);
      if (!parts) continue;
      if (!parts->is_array()) wrong_type(at(key, name), "an array", *parts);
      if (parts->empty()) continue;
      const Json& first = parts->front();
      if (!first.is_object()) wrong_type(at(at(key, name), 0), "an object", first);
      return required_string(first, "text", at(at(key, name), 0));
    }
    return "";
  }

  void reasoning(const Json& it, const std::string& key) {
    if (field(it, "encrypted_content"))
      throw bad_request("encrypted reasoning content is not supported", at(key, "encrypted_content"));
    std::string text = reasoning_text(it, key);
    // vLLM gives templates both names: Qwen3's and DeepSeek's read reasoning_content.
    if (Json* open = open_assistant("reasoning")) {
      (*open)["reasoning"] = text;
      (*open)["reasoning_content"] = std::move(text);
      return;
    }
    messages_.push_back({{"role", "assistant"}, {"content", nullptr}, {"reasoning", text},
                         {"reasoning_content", text}});
  }

  Json& messages_;
};

// vLLM continues the last message instead of opening a new turn when the input ends with a
// partial assistant message or reasoning item (status in_progress or incomplete).
bool continues_final_message(const Json& items) {
  if (items.empty() || !items.back().is_object()) return false;
  const Json& last = items.back();  // already checked by MessageBuilder
  const Json* type = field(last, "type");
  const bool reasoning = type && *type == "reasoning";
  const bool message = type ? *type == "message" : last.contains("role");
  if (!reasoning && !(message && last.at("role") == "assistant")) return false;
  const Json* status = field(last, "status");
  return status && status->is_string() && (*status == "in_progress" || *status == "incomplete");
}

Json read_messages(const Json& j, ChatPromptRequest& prompt) {
  Json messages = Json::array();
  if (auto instructions = opt_string(j, "instructions"); instructions && !instructions->empty())
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  const Json* input = field(j, "input");
  if (!input) throw bad_request("'input' is required", "input");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", input->get<std::string>()}});
  } else if (input->is_array()) {
    if (input->size() > kMaxInputItems)
      throw bad_request("'input' has " + std::to_string(input->size()) + " items; at most " +
                            std::to_string(kMaxInputItems) + " are allowed", "input");
    MessageBuilder builder(messages);
    for (size_t i = 0; i < input->size(); ++i) builder.item((*input)[i], at("input", i));
    if (continues_final_message(*input)) {
      prompt.add_generation_prompt = false;
      prompt.continue_final_message = true;
    }
  } else {
    wrong_type("input", "a string or an array of input items", *input);
  }
  if (messages.empty()) throw bad_request("'input' is empty", "input");
  return messages;
}

// Responses function tools ({type, name, description, parameters, strict}) in the chat-completions
// shape the template takes, as vLLM converts them: the function's name, description and
// parameters (null when absent), then its other fields as sent.
Json chat_tools(const Json& tools) {
  return chat_function_tools(tools, [](const Json& t, const std::string& key) {
    const std::string type = required_string(t, "type", key);
    if (type != "function")
      throw bad_request("tools of type '" + type + "' are not supported; pagoda serves function tools only",
                        at(key, "type"));
    if (!field(t, "name"))
      throw bad_request("'" + at(key, "name") +
                            "' is required (the Responses API takes function tools flat: "
                            "{\"type\": \"function\", \"name\", \"description\", \"parameters\"})",
                        at(key, "name"));
    Json fn = {{"name", required_string(t, "name", key)},
               {"description", opt_string(t, "description", key) ? t.at("description") : Json(nullptr)},
               {"parameters", nullptr}};
    if (const Json* p = field(t, "parameters")) {
      if (!p->is_object()) wrong_type(at(key, "parameters"), "an object", *p);
      fn["parameters"] = *p;
    }
    for (const auto& [k, v] : t.items())
      if (k != "type" && k != "name" && k != "description" && k != "parameters") fn[k] = v;
    return fn;
  });
}

// auto, none, required, or a named function ({"type": "function", "name": N}: the Responses form;
// chat's {"function": {"name": N}} is taken too). Required and named become the same grammar as on
// /v1/chat/completions (structured_output.h: the calls in the served model's tool-call syntax);
// `forced` gets it. Returns the mode: auto | none | required | named.
std::string read_responses_tool_choice(const Json& j, const Json& chat_tools_json,
                                       std::optional<RequestedConstraint>& forced) {
  const Json* tc = field(j, "tool_choice");
  if (!tc) return "auto";
  Json chat_form;  // the body read_tool_choice(body, tools) of structured_output.h takes
  std::string mode;
  if (tc->is_string()) {
    mode = tc->get<std::string>();
    if (mode == "auto" || mode == "none") return mode;
    if (mode != "required")
      throw bad_request("tool_choice must be 'auto', 'none', 'required' or an object, got '" + mode + "'", "tool_choice");
    chat_form["tool_choice"] = "required";
  } else {
    if (!tc->is_object()) wrong_type("tool_choice", "a string or an object", *tc);
    const std::string type = opt_string(*tc, "type", "tool_choice").value_or("");
    if (type != "function")
      throw bad_request("tool_choice of type '" + type + "' is not supported; use 'auto', 'none', 'required' or "
                        "{\"type\": \"function\", \"name\": ...}",
                        "tool_choice");
    std::optional<std::string> name = opt_string(*tc, "name", "tool_choice.name");
    if (const Json* fn = field(*tc, "function"); !name && fn && fn->is_object())
      name = opt_string(*fn, "name", "tool_choice.function.name");
    if (!name) throw bad_request("a named tool_choice is {\"type\": \"function\", \"name\": ...}", "tool_choice");
    mode = "named";
    chat_form["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  }
  if (const Json* p = field(j, "parallel_tool_calls")) chat_form["parallel_tool_calls"] = *p;
  forced = read_tool_choice(chat_form, chat_tools_json.is_null() ? Json::array() : chat_tools_json);
  return mode;
}

// include: which extra data to return. Only output-text logprobs exist here; the others name
// outputs of tools pagoda does not serve, so there is never anything to add for them.
bool read_include(const Json& j) {
  const Json* inc = field(j, "include");
  if (!inc) return false;
  if (!inc->is_array()) wrong_type("include", "an array of strings", *inc);
  bool logprobs = false;
  for (const Json& v : *inc) {
    if (!v.is_string()) wrong_type("include", "an array of strings", *inc);
    const std::string s = v.get<std::string>();
    if (s == "message.output_text.logprobs") logprobs = true;
    else if (s == "reasoning.encrypted_content")
      throw bad_request("encrypted reasoning content is not supported", "include");
    else if (s != "code_interpreter_call.outputs" && s != "computer_call_output.output.image_url" &&
             s != "file_search_call.results" && s != "message.input_image.image_url" &&
             s != "web_search_call.action.sources" && s != "web_search_call.results")
      throw bad_request("include: unknown value '" + s + "'", "include");
  }
  return logprobs;
}

void reject_stored_state(const Json& j) {
  if (field(j, "previous_response_id"))
    throw bad_request("previous_response_id is not supported: pagoda stores no responses (store behaves as false); "
                      "send the earlier turns in 'input' (output items can be sent back as input items)",
                      "previous_response_id");
  if (field(j, "conversation"))
    throw bad_request("conversation is not supported: pagoda stores no conversations; send the earlier turns in "
                      "'input'", "conversation");
  if (opt_bool(j, "background").value_or(false))
    throw bad_request("background mode is not supported: it needs stored responses, and pagoda stores none",
                      "background");
  if (field(j, "prompt")) throw bad_request("prompt templates are not supported", "prompt");
  if (field(j, "logit_bias")) throw bad_request("logit_bias is not supported on /v1/responses yet", "logit_bias");
  if (auto t = opt_string(j, "truncation"); t && *t != "disabled") {
    if (*t == "auto")
      throw bad_request("truncation 'auto' is not supported: a prompt longer than the context is rejected",
                        "truncation");
    throw bad_request("truncation must be 'disabled' or 'auto', got '" + *t + "'", "truncation");
  }
}

// reasoning {effort, summary}: echoed; the effort reaches the template as reasoning_effort (vLLM).
Json read_reasoning(const Json& j, Json& template_kwargs) {
  const Json* r = field(j, "reasoning");
  if (!r) return nullptr;
  if (!r->is_object()) wrong_type("reasoning", "an object", *r);
  Json out = {{"effort", nullptr}, {"summary", nullptr}};
  if (auto effort = opt_string(*r, "effort", "reasoning")) {
    out["effort"] = *effort;
    template_kwargs["reasoning_effort"] = *effort;
  }
  if (auto summary = opt_string(*r, "summary", "reasoning")) out["summary"] = *summary;
  return out;
}

// text {format, verbosity}: format json_schema / json_object constrains the output as chat's
// response_format does.
Json read_text(const Json& j, std::optional<RequestedConstraint>& constraint) {
  const Json* t = field(j, "text");
  if (!t) return {{"format", {{"type", "text"}}}};
  if (!t->is_object()) wrong_type("text", "an object", *t);
  if (const Json* f = field(*t, "format")) constraint = read_text_format(*f);
  opt_string(*t, "verbosity", "text");
  return *t;
}

// metadata: at most 16 string pairs, keys up to 64 characters and values up to 512 (OpenAI's).
Json read_metadata(const Json& j) {
  const Json* m = field(j, "metadata");
  if (!m) return nullptr;
  if (!m->is_object()) wrong_type("metadata", "an object of strings", *m);
  if (m->size() > 16) throw bad_request("metadata may have at most 16 keys", "metadata");
  for (const auto& [k, v] : m->items()) {
    if (!v.is_string()) wrong_type("metadata." + k, "a string", v);
    if (k.size() > 64 || v.get_ref<const std::string&>().size() > 512)
      throw bad_request("metadata keys may have at most 64 characters and values at most 512", "metadata");
  }
  return *m;
}

void read_sampling(const Json& j, SamplingParams& p) {
  read_common_sampling(j, p);
  if (auto v = opt_int(j, "max_output_tokens", 1)) p.max_tokens = static_cast<int32_t>(*v);
}

void read_stream(const Json& j, bool& stream) {
  stream = opt_bool(j, "stream").value_or(false);
  if (const Json* so = field(j, "stream_options")) {
    if (!so->is_object()) wrong_type("stream_options", "an object", *so);
    if (!stream) throw bad_request("stream_options can only be given when stream is true", "stream_options");
    opt_bool(*so, "include_obfuscation");  // accepted; no obfuscation field is sent
  }
}

}  // namespace

ResponsesRequest parse_responses_request(const Json& j, const SamplingParams& defaults) {
  ResponsesRequest r;
  r.params = defaults;
  r.model = opt_string(j, "model").value_or("");
  reject_stored_state(j);
  r.prompt.messages = read_messages(j, r.prompt);

  Json tools = Json::array();
  if (const Json* t = field(j, "tools")) {
    r.prompt.tools = chat_tools(*t);
    if (r.prompt.tools.empty()) r.prompt.tools = nullptr;
    tools = *t;
  }
  std::optional<RequestedConstraint> forced;
  const std::string tool_choice = read_responses_tool_choice(j, r.prompt.tools, forced);
  r.parse_tool_calls = !r.prompt.tools.is_null() && tool_choice != "none";

  if (const Json* kw = field(j, "chat_template_kwargs")) {  // vLLM's chat extension, taken here too
    if (!kw->is_object()) wrong_type("chat_template_kwargs", "an object", *kw);
    if (nesting_exceeds(*kw, kMaxChatNesting))
      throw bad_request("'chat_template_kwargs' is nested too deeply", "chat_template_kwargs");
    r.prompt.chat_template_kwargs = *kw;
  }
  const Json reasoning = read_reasoning(j, r.prompt.chat_template_kwargs);

  read_sampling(j, r.params);
  r.logprobs = read_include(j);
  const int64_t top_logprobs = opt_int(j, "top_logprobs", 0, kMaxLogprobs).value_or(0);
  if (r.logprobs) r.params.logprobs = static_cast<int32_t>(top_logprobs);
  read_stream(j, r.stream);
  // vLLM's ResponsesRequest extensions: priority (the route checks it against the policy) and
  // request_id, the response's id as given.
  if (const Json* v = field(j, "priority"))
    r.params.priority = static_cast<int32_t>(
        as_int(*v, "priority", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
  if (auto v = read_request_id(j)) r.request_id = *v;
  if (auto err = validate_sampling_params(r.params)) throw bad_request(*err, param_of(*err));

  opt_bool(j, "store");  // accepted: nothing is stored either way (vLLM without its store)
  Json& e = r.echo;
  e["background"] = false;
  e["instructions"] = opt_string(j, "instructions") ? j.at("instructions") : Json(nullptr);
  e["max_tool_calls"] = opt_int(j, "max_tool_calls") ? j.at("max_tool_calls") : Json(nullptr);
  e["parallel_tool_calls"] = opt_bool(j, "parallel_tool_calls").value_or(true);
  e["previous_response_id"] = nullptr;
  e["reasoning"] = reasoning;
  e["service_tier"] = opt_string(j, "service_tier").value_or("auto");
  e["store"] = false;
  e["text"] = read_text(j, r.constraint);
  if (forced) {
    if (r.constraint)
      throw bad_request("tool_choice " + tool_choice + " and " + r.constraint->param + " cannot both constrain the output",
                        "tool_choice");
    r.constraint = std::move(forced);
  }
  e["tool_choice"] = tool_choice == "named" ? j.at("tool_choice") : Json(tool_choice);
  e["tools"] = std::move(tools);
  e["top_logprobs"] = top_logprobs;
  e["truncation"] = "disabled";
  e["user"] = opt_string(j, "user") ? j.at("user") : Json(nullptr);
  e["metadata"] = read_metadata(j);
  return r;
}

}  // namespace pagoda::server

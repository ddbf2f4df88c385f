#include "server/openai_request.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "server/api_error.h"
#include "server/json_body.h"
#include "server/request_fields.h"
#include "server/structured_output.h"
#include "server/request_json.h"

namespace pagoda::server {
namespace {

std::optional<int64_t> opt_int(const Json& j, const std::string& key,
                               int64_t lo = std::numeric_limits<int32_t>::min(),
                               int64_t hi = std::numeric_limits<int32_t>::max()) {
  const Json* v = field(j, key);
  if (!v) return std::nullopt;
  return as_int(*v, key, lo, hi);
}

std::optional<std::string> opt_string(const Json& j, const std::string& key) {
  const Json* v = field(j, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) wrong_type(key, "a string", *v);
  return v->get<std::string>();
}

std::vector<int32_t> token_id_list(const Json& v, const std::string& key) {
  if (!v.is_array()) wrong_type(key, "an array of token ids", v);
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const Json& t : v) ids.push_back(static_cast<int32_t>(as_int(t, key, 0, std::numeric_limits<int32_t>::max())));
  return ids;
}

// Sampling fields both endpoints take (beyond the common ones). max_tokens is read by the caller.
void read_sampling(const Json& j, SamplingParams& p) {
  read_common_sampling(j, p);
  if (auto v = opt_number(j, "min_p")) p.min_p = *v;
  if (auto v = opt_number(j, "presence_penalty")) p.presence_penalty = *v;
  if (auto v = opt_number(j, "frequency_penalty")) p.frequency_penalty = *v;
  if (auto v = opt_int(j, "min_tokens")) p.min_tokens = static_cast<int32_t>(*v);
  if (auto v = opt_bool(j, "include_stop_str_in_output")) p.include_stop_str_in_output = *v;
  if (auto v = opt_int(j, "n")) p.n = static_cast<int32_t>(*v);
  if (const Json* v = field(j, "stop_token_ids")) p.stop_token_ids = token_id_list(*v, "stop_token_ids");
  if (const Json* v = field(j, "logit_bias")) {
    // {"token id": bias}; ids are checked against the vocabulary once the model is known.
    if (!v->is_object()) wrong_type("logit_bias", "an object mapping token ids to biases", *v);
    auto bias = std::make_shared<std::vector<std::pair<int32_t, float>>>();
    bias->reserve(v->size());
    for (const auto& [key, value] : v->items()) {
      int64_t id = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
        throw bad_request("logit_bias keys must be token ids (integers as strings), got '" + key + "'", "logit_bias");
      if (!value.is_number()) wrong_type("logit_bias", "an object mapping token ids to numbers", *v);
      bias->emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
    p.logit_bias = std::move(bias);
  }
}

// vLLM's extensions both endpoints take; what needs the tokenizer or the server's options is
// applied by the route (server/generation.h).
void read_vllm_extras(const Json& j, SamplingParams& p, VllmExtras& x) {
  if (const Json* v = field(j, "allowed_token_ids")) {
    if (v->is_array() && v->size() > kMaxAllowedTokenIds)
      throw bad_request("allowed_token_ids has " + std::to_string(v->size()) + " entries; at most " +
                            std::to_string(kMaxAllowedTokenIds) + " are allowed", "allowed_token_ids");
    std::vector<int32_t> ids = token_id_list(*v, "allowed_token_ids");
    if (ids.empty()) throw bad_request("allowed_token_ids cannot be empty; leave it out to allow every token",
                                       "allowed_token_ids");
    p.allowed_token_ids = TokenIdSet(std::move(ids));
  }
  if (const Json* v = field(j, "bad_words")) {
    if (!v->is_array()) wrong_type("bad_words", "an array of strings", *v);
    if (v->size() > kMaxBadWords)
      throw bad_request("bad_words has " + std::to_string(v->size()) + " words; at most " +
                            std::to_string(kMaxBadWords) + " are allowed", "bad_words");
    size_t bytes = 0;
    for (const Json& w : *v) {
      if (!w.is_string()) wrong_type("bad_words", "an array of strings", *v);
      bytes += w.get_ref<const std::string&>().size();
      x.bad_words.push_back(w.get<std::string>());
    }
    if (bytes > kMaxBadWordsBytes)
      throw bad_request("bad_words have " + std::to_string(bytes) + " bytes; at most " +
                            std::to_string(kMaxBadWordsBytes) + " are allowed", "bad_words");
  }
  if (auto v = opt_bool(j, "skip_special_tokens")) p.skip_special_tokens = *v;
  if (field(j, "prompt_logprobs"))
    throw bad_request("prompt_logprobs is not supported: pagoda's engine computes logprobs of sampled tokens "
                      "only; leave prompt_logprobs out", "prompt_logprobs");
  if (auto v = opt_int(j, "truncate_prompt_tokens", -1)) x.truncate_prompt_tokens = *v;
  x.return_token_ids = opt_bool(j, "return_token_ids").value_or(false);
  x.return_tokens_as_token_ids = opt_bool(j, "return_tokens_as_token_ids").value_or(false);
  if (auto v = read_request_id(j)) x.request_id = *v;
  if (auto v = opt_int(j, "priority")) p.priority = static_cast<int32_t>(*v);
}

void finish_sampling(SamplingParams& p) {
  if (auto err = validate_sampling_params(p)) throw bad_request(*err, param_of(*err));
  if (p.n > kMaxChoices)
    throw bad_request("n must be at most " + std::to_string(kMaxChoices) + ", got " + std::to_string(p.n), "n");
  if (p.logprobs && *p.logprobs > kMaxLogprobs)
    throw bad_request("logprobs must be at most " + std::to_string(kMaxLogprobs), "logprobs");
}

void read_stream(const Json& j, bool& stream, bool& include_usage, bool& continuous_usage_stats) {
  stream = opt_bool(j, "stream").value_or(false);
  if (const Json* so = field(j, "stream_options")) {
    if (!so->is_object()) wrong_type("stream_options", "an object", *so);
    if (!stream) throw bad_request("stream_options can only be given when stream is true", "stream_options");
    include_usage = opt_bool(*so, "include_usage").value_or(false);
    // vLLM: usage in every chunk, only together with include_usage.
    continuous_usage_stats = include_usage && opt_bool(*so, "continuous_usage_stats").value_or(false);
  }
}

std::string read_model(const Json& j) { return opt_string(j, "model").value_or(""); }

// One content part's text, for the flattened string content: plain strings and text-like parts give
// their text; a part whose text is missing or null is skipped (nullopt), as vLLM skips it.
std::optional<std::string> part_text(const Json& part, const std::string& key) {
  if (part.is_string()) return part.get<std::string>();
  if (!part.is_object()) wrong_type(key, "an array of content parts", part);
  const std::string type = opt_string(part, "type").value_or("text");
  if (type != "text" && type != "input_text" && type != "output_text" && type != "refusal")
    throw bad_request("content parts of type '" + type + "' are not supported (text only)", key);
  return opt_string(part, type == "refusal" ? "refusal" : "text");
}

// A message's content for the template. A string or null passes through as sent: templates tell
// null from "" (DeepSeek-V3's renders an assistant's tool calls only when `content is none`). An
// array of text parts becomes one string joined by "\n", as vLLM gives templates that expect
// strings.
//
// With image parts (image_url: {"url": ...} or a string), the content stays a list, as vLLM gives it
// to templates that iterate over parts: text parts as {"type": "text", "text": ...}, each image as
// {"type": "image"}, whose placeholder the template renders; the URLs go to `images`.
Json content_value(const Json& content, size_t index, std::vector<ImagePart>& images) {
  const std::string key = "messages[" + std::to_string(index) + "].content";
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) wrong_type(key, "a string, null or an array of content parts", content);
  auto is_image = [](const Json& part) {
    return part.is_object() && part.contains("type") && part["type"].is_string() && part["type"] == "image_url";
  };
  if (std::any_of(content.begin(), content.end(), is_image)) {
    Json parts = Json::array();
    for (size_t i = 0; i < content.size(); ++i) {
      const Json& part = content[i];
      const std::string part_key = key + "[" + std::to_string(i) + "]";
      if (!is_image(part)) {
        if (const std::optional<std::string> t = part_text(part, key)) parts.push_back({{"type", "text"}, {"text", *t}});
        continue;
      }
      if (images.size() >= kMaxImageParts)
        throw bad_request("more than " + std::to_string(kMaxImageParts) + " image parts in one request", part_key);
      const Json* iu = field(part, "image_url");
      const Json* url = iu && iu->is_object() ? field(*iu, "url") : iu;
      if (!url || !url->is_string())
        throw bad_request(part_key + ".image_url must be {\"url\": \"data:image/...;base64,...\"} or a URL string",
                          part_key + ".image_url");
      images.push_back({url->get<std::string>(), part_key});
      parts.push_back({{"type", "image"}});
    }
    return parts;
  }
  std::string text;
  bool first = true;
  for (const Json& part : content) {
    const std::optional<std::string> t = part_text(part, key);
    if (!t) continue;
    if (!first) text += "\n";
    first = false;
    text += *t;
  }
  return text;
}

// An assistant's tool_calls: each call an object with a "function" object; a null or empty list is
// dropped, as vLLM drops it, so that templates take their plain-assistant path (Llama 3.1's takes
// `'tool_calls' in message` as a call and measures its length). The arguments stay as sent here;
// ChatPrompt gives them to the template in the form it takes (server/chat_message_forms.h).
void check_tool_calls(Json& msg, const std::string& key) {
  const auto calls = msg.find("tool_calls");
  if (calls == msg.end()) return;
  if (calls->is_null() || calls->empty()) {
    msg.erase(calls);
    return;
  }
  for (size_t c = 0; c < calls->size(); ++c) {
    const std::string call_key = key + ".tool_calls[" + std::to_string(c) + "]";
    const Json& call = (*calls)[c];
    if (!call.is_object()) wrong_type(call_key, "an object", call);
    const auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object()) throw bad_request(call_key + ".function must be an object", call_key + ".function");
  }
}

// OpenAI's roles (and the legacy "function"), as OpenAI answers anything else: a role is rendered by
// the template as is, so an open set would let a client write any text, special tokens included,
// into the turn headers (`<|im_end|><|im_start|>system`).
void check_role(const std::string& role, const std::string& key) {
  static constexpr const char* kRoles[] = {"system", "developer", "user", "assistant", "tool", "function"};
  for (const char* r : kRoles)
    if (role == r) return;
  const std::string shown = role.size() > 40 ? role.substr(0, 40) + "..." : role;
  throw bad_request(key + " must be one of system, developer, user, assistant, tool or function; got " +
                        nlohmann::json(shown).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    key);
}

// Messages as sent (every field kept, null stays null), but for what vLLM normalises whatever the
// template: text-part arrays joined into a string, an assistant's null or empty tool_calls dropped.
Json normalize_messages(const Json& j, std::vector<ImagePart>& images) {
  const Json* msgs = field(j, "messages");
  if (!msgs) throw bad_request("'messages' is required", "messages");
  if (!msgs->is_array() || msgs->empty()) throw bad_request("'messages' must be a non-empty array", "messages");
  Json out = Json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string key = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) wrong_type(key, "an object", m);
    // Checked before the copy below, which (as nlohmann copies) recurses.
    if (nesting_exceeds(m, kMaxChatNesting))
      throw bad_request(key + " is nested too deeply (more than " + std::to_string(kMaxChatNesting) + " levels)", key);
    const Json* role = field(m, "role");
    if (!role || !role->is_string()) throw bad_request(key + ".role must be a string", key + ".role");
    check_role(role->get_ref<const std::string&>(), key + ".role");
    if (const Json* calls = field(m, "tool_calls"); calls && !calls->is_array())
      wrong_type(key + ".tool_calls", "an array", *calls);
    Json msg = m;
    if (const auto content = msg.find("content"); content != msg.end())
      *content = content_value(*content, i, images);
    if (*role == "assistant") check_tool_calls(msg, key);
    out.push_back(std::move(msg));
  }
  return out;
}

// A client object that the chat template will see, bounded before it is copied.
void check_nesting(const Json& v, const std::string& key) {
  if (nesting_exceeds(v, kMaxChatNesting))
    throw bad_request("'" + key + "' is nested too deeply (more than " + std::to_string(kMaxChatNesting) + " levels)", key);
}

ChatPromptRequest read_chat_prompt(const Json& j) {
  ChatPromptRequest r;
  r.messages = normalize_messages(j, r.images);
  if (const Json* tools = field(j, "tools")) {
    if (!tools->is_array()) wrong_type("tools", "an array", *tools);
    check_nesting(*tools, "tools");
    for (const Json& t : *tools) {
      if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
          !t["function"].contains("name") || !t["function"]["name"].is_string())
        throw bad_request("each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}", "tools");
    }
    if (!tools->empty()) r.tools = *tools;
  }
  r.add_generation_prompt = opt_bool(j, "add_generation_prompt").value_or(true);
  r.continue_final_message = opt_bool(j, "continue_final_message").value_or(false);
  if (r.add_generation_prompt && r.continue_final_message)
    throw bad_request("continue_final_message and add_generation_prompt cannot both be true",
                      "continue_final_message");
  if (const Json* kw = field(j, "chat_template_kwargs")) {
    if (!kw->is_object()) wrong_type("chat_template_kwargs", "an object", *kw);
    check_nesting(*kw, "chat_template_kwargs");
    r.chat_template_kwargs = *kw;
  }
  if (const Json* docs = field(j, "documents")) {
    // vLLM's: a list of {"title": ..., "text": ...} objects, handed to the template as `documents`.
    if (!docs->is_array()) wrong_type("documents", "an array of objects", *docs);
    for (const Json& d : *docs)
      if (!d.is_object()) wrong_type("documents", "an array of objects", *docs);
    check_nesting(*docs, "documents");
    r.documents = *docs;
  }
  if (field(j, "chat_template"))
    throw bad_request("a per-request chat_template is not supported; the model's own template is used",
                      "chat_template");
  return r;
}

}  // namespace

Json parse_json_body(const std::string& body) {
  std::string error;
  Json j = parse_json_bounded(body, kMaxJsonDepth, error);
  if (j.is_discarded()) throw bad_request(error);
  if (!j.is_object()) throw bad_request("the request body must be a JSON object");
  return j;
}

CompletionRequest parse_completion_request(const Json& j, const SamplingParams& defaults) {
  CompletionRequest r;
  r.params = defaults;
  r.model = read_model(j);
  const Json* prompt = field(j, "prompt");
  if (!prompt) throw bad_request("'prompt' is required", "prompt");
  auto bad_prompt = [] {
    return bad_request("'prompt' must be a string, an array of strings, an array of token ids or an array of "
                       "arrays of token ids", "prompt");
  };
  if (prompt->is_string()) {
    r.prompts.push_back({prompt->get<std::string>(), {}});
  } else if (prompt->is_array()) {
    if (prompt->empty()) throw bad_request("'prompt' cannot be empty", "prompt");
    const Json& first = prompt->front();
    if (first.is_number()) {
      r.prompts.push_back({std::nullopt, token_id_list(*prompt, "prompt")});
    } else {
      for (const Json& p : *prompt) {
        if (p.is_string()) r.prompts.push_back({p.get<std::string>(), {}});
        else if (p.is_array()) r.prompts.push_back({std::nullopt, token_id_list(p, "prompt")});
        else throw bad_prompt();
      }
    }
  } else {
    throw bad_prompt();
  }
  read_sampling(j, r.params);
  r.params.max_tokens = static_cast<int32_t>(opt_int(j, "max_tokens").value_or(16));  // OpenAI's default
  if (auto v = opt_int(j, "logprobs", 0, kMaxLogprobs)) r.params.logprobs = static_cast<int32_t>(*v);
  r.echo = opt_bool(j, "echo").value_or(false);
  if (r.echo && r.params.logprobs)
    throw bad_request("echo with logprobs is not supported: pagoda does not compute prompt logprobs", "echo");
  if (opt_string(j, "suffix"))
    throw bad_request("suffix is not supported (as in vLLM): no model pagoda serves was trained for insertion",
                      "suffix");
  r.constraint = read_constraint(j);
  if (auto best_of = opt_int(j, "best_of"); best_of && *best_of != r.params.n)
    throw bad_request("best_of other than n is not supported", "best_of");
  read_stream(j, r.stream, r.include_usage, r.extras.continuous_usage_stats);
  read_vllm_extras(j, r.params, r.extras);
  finish_sampling(r.params);
  if (static_cast<int64_t>(r.prompts.size()) * r.params.n > kMaxChoices)
    throw bad_request("prompts x n must be at most " + std::to_string(kMaxChoices), "n");
  return r;
}

ChatRequest parse_chat_request(const Json& j, const SamplingParams& defaults) {
  ChatRequest r;
  r.params = defaults;
  r.model = read_model(j);
  r.prompt = read_chat_prompt(j);
  read_sampling(j, r.params);
  if (auto v = opt_int(j, "max_completion_tokens")) r.params.max_tokens = static_cast<int32_t>(*v);
  else if (auto w = opt_int(j, "max_tokens")) r.params.max_tokens = static_cast<int32_t>(*w);
  r.logprobs = opt_bool(j, "logprobs").value_or(false);
  if (auto top = opt_int(j, "top_logprobs", 0, kMaxLogprobs)) {
    if (!r.logprobs) throw bad_request("top_logprobs needs logprobs set to true", "top_logprobs");
    r.params.logprobs = static_cast<int32_t>(*top);
  } else if (r.logprobs) {
    r.params.logprobs = 0;
  }
  std::string tool_choice = "auto";
  if (const Json* tc = field(j, "tool_choice")) {
    if (tc->is_string()) tool_choice = tc->get<std::string>();
    else if (tc->is_object()) tool_choice = "named";
    else wrong_type("tool_choice", "a string or an object", *tc);
    if (tool_choice != "auto" && tool_choice != "none" && tool_choice != "required" && tool_choice != "named")
      throw bad_request("tool_choice must be none, auto, required or a named function", "tool_choice");
  }
  r.constraint = read_constraint(j);
  if (auto forced = read_tool_choice(j, r.prompt.tools)) {
    if (r.constraint)
      throw bad_request("tool_choice " + tool_choice + " and " + r.constraint->param + " cannot both constrain the output",
                        "tool_choice");
    r.constraint = std::move(forced);
  }
  // vLLM hands reasoning_effort to the chat template (gpt-oss's reads it); others ignore it.
  if (auto effort = opt_string(j, "reasoning_effort"); effort && !r.prompt.chat_template_kwargs.contains("reasoning_effort"))
    r.prompt.chat_template_kwargs["reasoning_effort"] = *effort;
  r.parse_tool_calls = !r.prompt.tools.is_null() && tool_choice != "none";
  r.echo = opt_bool(j, "echo").value_or(false);
  read_stream(j, r.stream, r.include_usage, r.extras.continuous_usage_stats);
  read_vllm_extras(j, r.params, r.extras);
  finish_sampling(r.params);
  return r;
}

TokenizeRequest parse_tokenize_request(const Json& j) {
  TokenizeRequest r;
  r.model = read_model(j);
  if (field(j, "messages")) {
    r.chat = read_chat_prompt(j);
  } else {
    r.prompt = opt_string(j, "prompt");
    if (!r.prompt) throw bad_request("give 'prompt' (a string) or 'messages'", "prompt");
  }
  r.return_token_strs = opt_bool(j, "return_token_strs").value_or(false);
  return r;
}

DetokenizeRequest parse_detokenize_request(const Json& j) {
  DetokenizeRequest r;
  r.model = read_model(j);
  const Json* tokens = field(j, "tokens");
  if (!tokens) throw bad_request("'tokens' is required", "tokens");
  r.tokens = token_id_list(*tokens, "tokens");
  return r;
}

std::optional<std::string> read_request_id(const Json& j) {
  auto v = opt_string(j, "request_id");
  if (!v) return v;
  bool printable = !v->empty() && v->size() <= kMaxRequestIdBytes;
  for (char c : *v) printable = printable && c >= 0x21 && c <= 0x7e;
  if (!printable)
    throw bad_request("request_id must be 1 to " + std::to_string(kMaxRequestIdBytes) +
                          " visible ASCII characters (no spaces)", "request_id");
  return v;
}

}  // namespace pagoda::server

#include "server/chat_message_forms.h"

#include <array>
#include <optional>
#include <utility>

#include "core/error.h"
#include "server/request_json.h"
#include "template/chat_template.h"

namespace pagoda::server {
namespace {

constexpr const char* kProbeValue = "pagoda-probe-value";

// user -> assistant tool call -> tool result, with one tool defined; the same conversation as
// tools/chat_template_reference.py's probe.
Json probe_context(const ToolCallForms& f, const std::string& bos_token, const std::string& eos_token) {
  Json arguments = f.object_arguments ? Json::object({{"pagoda_probe_arg", kProbeValue}})
                                      : Json(std::string("{\"pagoda_probe_arg\": \"") + kProbeValue + "\"}");
  Json function = Json::object({{"name", "pagoda_probe_fn"}, {"arguments", std::move(arguments)}});
  Json call = Json::object({{"id", "call_probe"}, {"type", "function"}, {"function", std::move(function)}});
  Json messages = Json::array();
  messages.push_back(Json::object({{"role", "user"}, {"content", "pagoda-probe-question"}}));
  messages.push_back(Json::object({{"role", "assistant"},
                                   {"content", f.null_content ? Json(nullptr) : Json("")},
                                   {"tool_calls", Json::array({std::move(call)})}}));
  messages.push_back(Json::object({{"role", "tool"}, {"tool_call_id", "call_probe"}, {"content", "pagoda-probe-result"}}));
  Json properties = Json::object({{"pagoda_probe_arg", Json::object({{"type", "string"}})}});
  Json parameters = Json::object({{"type", "object"}, {"properties", std::move(properties)}});
  Json tool = Json::object(
      {{"type", "function"},
       {"function", Json::object({{"name", "pagoda_probe_fn"}, {"description", "Probe."}, {"parameters", std::move(parameters)}})}});
  Json context = Json::object();
  context["messages"] = std::move(messages);
  context["tools"] = Json::array({std::move(tool)});
  context["add_generation_prompt"] = true;
  context["bos_token"] = bos_token;
  context["eos_token"] = eos_token;
  return context;
}

// vLLM's reading of tool-call arguments (chat_utils._postprocess_messages).
void parse_arguments(Json& arguments, const std::string& param) {
  if (arguments.is_string()) {
    std::optional<Json> parsed = parse_arguments_json(arguments.get<std::string>(), param);
    arguments = parsed ? std::move(*parsed) : Json::object();
  } else if (!arguments.is_object() && !arguments.is_array()) {
    arguments = Json::object();
  }
}

}  // namespace

ToolCallForms probe_tool_call_forms(const ChatTemplate& tmpl, const std::string& bos_token, const std::string& eos_token) {
  const std::array<ToolCallForms, 4> order = {{{true, true}, {true, false}, {false, true}, {false, false}}};
  std::array<std::optional<std::string>, 4> renders;
  for (size_t k = 0; k < order.size(); ++k) {
    try {
      renders[k] = tmpl.render(probe_context(order[k], bos_token, eos_token));
    } catch (const Error&) {
      // This form raises in this template.
    }
  }
  for (size_t k = 0; k < order.size(); ++k)
    if (renders[k] && renders[k]->find(kProbeValue) != std::string::npos) return order[k];
  for (size_t k = 0; k < order.size(); ++k)
    if (renders[k]) return order[k];
  return order[0];
}

Json adapt_messages(const Json& messages, const ToolCallForms& forms) {
  Json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    Json& m = out[i];
    if (!m.is_object()) continue;
    const auto role = m.find("role");
    const bool assistant = role != m.end() && *role == "assistant";
    const auto content = m.find("content");
    if (content == m.end()) {
      // The OpenAI API reads an absent content as null (an assistant's that only calls tools).
      if (assistant) m["content"] = forms.null_content ? Json(nullptr) : Json("");
    } else if (content->is_null() && !forms.null_content) {
      *content = "";
    }
    const auto calls = m.find("tool_calls");
    if (!assistant || !forms.object_arguments || calls == m.end() || !calls->is_array()) continue;
    for (size_t c = 0; c < calls->size(); ++c) {
      Json& call = (*calls)[c];
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
      parse_arguments(call["function"]["arguments"],
                      "messages[" + std::to_string(i) + "].tool_calls[" + std::to_string(c) + "].function.arguments");
    }
  }
  return out;
}

}  // namespace pagoda::server

#include "server/chat_prompt.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"
#include "server/request_json.h"

#if __has_include("template/chat_template.h")
#include "template/chat_template.h"
#define PAGODA_HAS_CHAT_TEMPLATE 1
#else
// The Jinja interpreter is not in this tree yet: chat requests answer 400 until it is.
namespace pagoda {
class ChatTemplate {};
}  // namespace pagoda
#define PAGODA_HAS_CHAT_TEMPLATE 0
#endif

namespace pagoda::server {
namespace {

// bos_token / eos_token of tokenizer_config.json: a string, {"content": ...} or null.
std::string special_token(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return "";
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

ChatPrompt::~ChatPrompt() = default;

std::unique_ptr<ChatPrompt> ChatPrompt::load(const std::string& model_dir, const std::string& template_override) {
#if PAGODA_HAS_CHAT_TEMPLATE
  std::optional<ChatTemplate> tmpl;
  if (!template_override.empty()) {
    std::string source = template_override;
    std::error_code ec;
    // As vLLM: a path when one exists there, otherwise the template itself.
    if (template_override.find('\n') == std::string::npos && std::filesystem::is_regular_file(template_override, ec)) {
      std::ifstream in(template_override, std::ios::binary);
      check(in.good(), "--chat-template: cannot read " + template_override);
      source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } else if (template_override.find("{{") == std::string::npos && template_override.find("{%") == std::string::npos) {
      throw Error("--chat-template: " + template_override +
                  " is neither a file nor a Jinja template (no {{ or {% in it)");
    }
    tmpl.emplace(std::move(source));
  } else {
    tmpl = ChatTemplate::load_dir(model_dir);
  }
  if (!tmpl) return nullptr;
  std::unique_ptr<ChatPrompt> p(new ChatPrompt());
  p->template_ = std::make_unique<ChatTemplate>(std::move(*tmpl));
  const auto config_path = std::filesystem::path(model_dir) / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    std::ifstream in(config_path);
    const nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
    if (!config.is_discarded()) {
      p->bos_token = special_token(config, "bos_token");
      p->eos_token = special_token(config, "eos_token");
    }
  }
  p->forms_ = probe_tool_call_forms(*p->template_, p->bos_token, p->eos_token);
  if (!p->forms_.null_content || !p->forms_.object_arguments)
    LOG_INFO("chat template: assistant tool-call messages are given with "
             << (p->forms_.null_content ? "content null" : "content \"\" for null (the template cannot take None)")
             << " and " << (p->forms_.object_arguments ? "arguments as a mapping" : "arguments as the JSON text sent (the template concatenates them)"));
  return p;
#else
  (void)model_dir;
  (void)template_override;
  (void)&special_token;
  LOG_WARN("this build has no chat template interpreter; /v1/chat/completions is unavailable");
  return nullptr;
#endif
}

void ChatPrompt::protect_special_tokens(const Tokenizer& tok) {
  guard_ = std::make_shared<const SpecialTextGuard>(SpecialTextGuard::for_tokenizer(tok));
}

std::string ChatPrompt::render(const ChatPromptRequest& r) const {
#if PAGODA_HAS_CHAT_TEMPLATE
  // The request parser bounds these already (parsed tool arguments may add to a message's nesting,
  // hence the margin); this holds for any other caller too, before the copies below, which recurse.
  for (const auto& [what, v] : {std::pair<const char*, const Json*>{"messages", &r.messages}, {"tools", &r.tools},
                                {"chat_template_kwargs", &r.chat_template_kwargs}, {"documents", &r.documents}})
    if (nesting_exceeds(*v, 2 * kMaxChatNesting))
      throw bad_request(std::string("'") + what + "' is nested too deeply", what);
  Json context = Json::object();
  // chat_template_kwargs first, so that the request's own fields win over them.
  for (const auto& [k, v] : r.chat_template_kwargs.items()) context[k] = v;
  context["messages"] = adapt_messages(r.messages, forms_);
  if (!r.tools.is_null()) context["tools"] = r.tools;
  if (!r.documents.is_null()) context["documents"] = r.documents;  // as Hugging Face hands them over
  if (guard_) guard_->mark_json(context);  // all of it is the client's so far
  context["add_generation_prompt"] = r.add_generation_prompt;
  context["bos_token"] = bos_token;
  context["eos_token"] = eos_token;
  std::string text;
  try {
    text = template_->render(context);
  } catch (const Error& e) {
    throw bad_request(e.what(), "messages");
  }
  if (r.continue_final_message) {
    // As Hugging Face: the prompt ends where the final message's text ends.
    // A final message without text content (null, absent) has nothing to continue.
    std::string final_text;
    if (!r.messages.empty() && r.messages.back().is_object()) {
      const Json& last = r.messages.back();
      if (const auto it = last.find("content"); it != last.end() && it->is_string()) final_text = trim(it->get<std::string>());
    }
    if (guard_) final_text = guard_->mark(final_text);
    const size_t at = final_text.empty() ? std::string::npos : text.rfind(final_text);
    if (at == std::string::npos)
      throw bad_request("continue_final_message: the final message does not appear in the rendered prompt",
                        "continue_final_message");
    text.resize(at + final_text.size());
  }
  return text;
#else
  (void)r;
  (void)&trim;
  throw bad_request("this build has no chat template interpreter", "messages");
#endif
}

}  // namespace pagoda::server

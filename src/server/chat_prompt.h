// Chat messages -> prompt text through the model's own chat template (tokenizer_config.json or
// chat_template.jinja), rendered with the context Hugging Face gives it: messages, tools,
// add_generation_prompt, bos_token, eos_token and the request's chat_template_kwargs.
#pragma once

#include <memory>
#include <string>

#include "server/chat_message_forms.h"
#include "server/openai_request.h"
#include "server/special_text.h"

namespace pagoda {
class ChatTemplate;
class Tokenizer;
}

namespace pagoda::server {

class ChatPrompt {
 public:
  // Null when the model directory has no chat template. `template_override` (serve's
  // --chat-template): a file holding a template, or the template text itself; "" = the model's own.
  // Throws pagoda::Error when the override cannot be read or parsed.
  static std::unique_ptr<ChatPrompt> load(const std::string& model_dir, const std::string& template_override = "");
  ~ChatPrompt();

  // The prompt text. Template errors (raise_exception included) become ApiError 400.
  std::string render(const ChatPromptRequest& request) const;
  // From now on, special-token text in the client's strings is marked so that it is tokenized as
  // text (server/special_text.h); the prompt render() returns must then be tokenized with
  // encode_chat_prompt (generation.h).
  void protect_special_tokens(const Tokenizer& tok);
  // The form this template takes tool-call messages in, probed at load.
  const ToolCallForms& tool_call_forms() const { return forms_; }

 private:
  ChatPrompt() = default;
  std::unique_ptr<ChatTemplate> template_;
  std::string bos_token, eos_token;
  ToolCallForms forms_;
  std::shared_ptr<const SpecialTextGuard> guard_;
};

}  // namespace pagoda::server

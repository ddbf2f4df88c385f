// A model's chat template, rendered by our interpreter for the subset of Jinja2 that Hugging Face
// chat templates use, byte for byte as transformers renders it with Python jinja2
// (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls; transformers'
// tojson, raise_exception and strftime_now).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "template/jinja_eval.h"

namespace pagoda {

class ChatTemplate {
 public:
  // Parses the template source; throws pagoda::Error with line/column on a syntax error.
  explicit ChatTemplate(std::string source);
  // Loads the model's template: chat_template.jinja when present (as transformers prefers it), else
  // tokenizer_config.json's "chat_template" (a string, or a list of {name, template} where
  // "default" is used); nullopt when there is none.
  static std::optional<ChatTemplate> load_dir(const std::string& dir);
  // Renders with the variables transformers passes: messages, tools (may be null/absent),
  // add_generation_prompt, bos_token, eos_token, plus chat_template_kwargs (e.g. enable_thinking)
  // merged at top level. raise_exception(msg) in the template → pagoda::Error("chat template: " +
  // msg); other failures → pagoda::Error("chat template error at line N: ...").
  std::string render(const nlohmann::ordered_json& context) const;
  std::string render(const nlohmann::ordered_json& context, const jinja::Limits& limits) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Body> body_;
};

}  // namespace pagoda

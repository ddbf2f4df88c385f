// libFuzzer target: the input as a chat template must parse or fail with pagoda::Error, and a
// template that parses must render a fixed conversation or fail with pagoda::Error, within small
// limits (no hang, no unbounded memory, no crash). A second pass splices the input into a known
// template so the evaluator sees well-formed statements around fuzzed expressions.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"
#include "template/chat_template.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Hi <think>x</think> é 😀"},
      {"role": "assistant", "content": "", "reasoning_content": "r",
       "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5, null, true]}}}]},
      {"role": "tool", "content": "{\"ok\": 1}"}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false,
    "n": 3, "s": "a b  c", "d": {"k": "v", "n": {"x": [1, 2]}}
  })");
  return ctx;
}

void try_render(const std::string& source) {
  pagoda::jinja::Limits limits;
  limits.max_steps = 200000;
  limits.max_output_bytes = 1 << 20;
  limits.max_call_depth = 16;
  try {
    const pagoda::ChatTemplate tmpl(source);
    (void)tmpl.render(context(), limits);
  } catch (const pagoda::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  const std::string input(reinterpret_cast<const char*>(data), size);
  try_render(input);
  try_render("{% for m in messages %}{% set x = m.content %}{{ " + input + " }}{% endfor %}");
  try_render("{% set ns = namespace(v=0) %}{% if " + input + " %}{% set ns.v = 1 %}{% endif %}{{ ns.v }}");
  return 0;
}

#include "template/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "template/jinja_parser.h"

namespace pagoda {
namespace {

std::optional<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "chat_template" of a config: a string, or a list of {"name", "template"} of which "default" is
// the one transformers renders when none is asked for.
std::optional<std::string> template_field(const nlohmann::json& config, const std::string& where) {
  if (!config.is_object() || !config.contains("chat_template")) return std::nullopt;
  const nlohmann::json& t = config["chat_template"];
  if (t.is_null()) return std::nullopt;
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& entry : t) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
    }
    throw Error(where + ": chat_template lists several templates and none is named \"default\"");
  }
  throw Error(where + ": chat_template must be a string or a list of {name, template}");
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)), body_(std::make_shared<const jinja::Body>(jinja::parse(source_))) {}

std::optional<ChatTemplate> ChatTemplate::load_dir(const std::string& dir) {
  const std::filesystem::path root(dir);
  if (std::optional<std::string> text = read_file(root / "chat_template.jinja")) return ChatTemplate(std::move(*text));
  for (const char* name : {"tokenizer_config.json", "chat_template.json"}) {
    const std::filesystem::path path = root / name;
    std::optional<std::string> text = read_file(path);
    if (!text) continue;
    nlohmann::json config;
    try {
      config = nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
      throw Error(path.string() + ": not valid JSON (" + e.what() + ")");
    }
    if (std::optional<std::string> t = template_field(config, path.string())) return ChatTemplate(std::move(*t));
  }
  return std::nullopt;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render(context, jinja::Limits{});
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context, const jinja::Limits& limits) const {
  if (!context.is_object()) throw Error("chat template: the context must be a JSON object");
  jinja::Dict globals;
  globals.entries.reserve(context.size());
  for (auto it = context.begin(); it != context.end(); ++it)
    globals.entries.emplace_back(jinja::Value::string(it.key()), jinja::Value::from_json(it.value()));
  jinja::Evaluator ev(globals, limits);
  try {
    return ev.render(*body_);
  } catch (const jinja::RaisedError& e) {
    throw Error(std::string("chat template: ") + e.what());
  } catch (const Error& e) {
    throw Error("chat template error at line " + std::to_string(ev.line()) + ": " + e.what());
  }
}

}  // namespace pagoda

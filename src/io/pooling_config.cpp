#include "io/pooling_config.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/text_file.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr size_t kMaxJsonBytes = 1 << 20;

json parse_file(const fs::path& path) {
  const std::string text = read_text_file(path.string(), kMaxJsonBytes);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  check(!j.is_discarded(), path.string() + " is not valid JSON");
  return j;
}

// A module path from modules.json, kept inside the model directory.
fs::path module_dir(const fs::path& dir, const json& module) {
  const auto it = module.find("path");
  if (it == module.end() || !it->is_string()) return dir;
  const fs::path rel = it->get<std::string>();
  check(rel.is_relative(), (dir / "modules.json").string() + ": module path '" + rel.string() +
                               "' must be relative to the model directory");
  for (const fs::path& part : rel)
    check(part != "..", (dir / "modules.json").string() + ": module path '" + rel.string() +
                            "' leaves the model directory");
  return dir / rel;
}

void read_pooling_modes(const fs::path& file, PoolingConfig& pc) {
  const json j = parse_file(file);
  check(j.is_object(), file.string() + " must be a JSON object");
  std::vector<std::string> modes;
  for (const auto& [key, value] : j.items())
    if (key.rfind("pooling_mode_", 0) == 0 && value.is_boolean() && value.get<bool>()) modes.push_back(key);
  check(!modes.empty(), file.string() + " sets no pooling_mode_* to true");
  if (modes.size() > 1)
    throw Error(file.string() + " sets several pooling modes at once (" + modes[0] + ", " + modes[1] +
                "); pagoda pools the last token only (pooling_mode_lasttoken)");
  check(modes[0] == "pooling_mode_lasttoken",
        file.string() + " asks for " + modes[0] +
            "; pagoda implements last-token pooling only (pooling_mode_lasttoken, as Qwen3-Embedding)");
  pc.type = PoolingConfig::Type::Last;
}

void read_matryoshka(const fs::path& dir, PoolingConfig& pc) {
  const fs::path file = dir / "config.json";
  if (!fs::exists(file)) return;
  const json j = parse_file(file);
  if (!j.is_object()) return;  // load_model_config reports it
  if (auto it = j.find("is_matryoshka"); it != j.end() && it->is_boolean()) pc.is_matryoshka = it->get<bool>();
  if (auto it = j.find("matryoshka_dimensions"); it != j.end() && !it->is_null()) {
    check(it->is_array() && it->size() <= 4096, file.string() + ": matryoshka_dimensions must be a list of sizes");
    for (const json& d : *it) {
      check(d.is_number_integer() && d.get<int64_t>() > 0,
            file.string() + ": matryoshka_dimensions must hold positive integers");
      pc.matryoshka_dimensions.push_back(d.get<int64_t>());
    }
  }
}

}  // namespace

std::optional<PoolingConfig> load_sentence_transformers_pooling(const std::string& dir_str) {
  const fs::path dir = dir_str;
  const fs::path modules_file = dir / "modules.json";
  if (!fs::exists(modules_file)) return std::nullopt;
  const json modules = parse_file(modules_file);
  check(modules.is_array(), modules_file.string() + " must be a list of modules");
  PoolingConfig pc;
  pc.normalize = false;  // only with a Normalize module, as sentence-transformers does
  pc.source = "modules.json";
  bool pooling = false;
  std::string unknown;  // a module pagoda cannot apply
  for (const json& m : modules) {
    check(m.is_object() && m.contains("type") && m["type"].is_string(),
          modules_file.string() + ": every module needs a \"type\"");
    const std::string type = m["type"].get<std::string>();
    if (type == "sentence_transformers.models.Pooling") {
      check(!pooling, modules_file.string() + " has more than one Pooling module");
      pooling = true;
      read_pooling_modes(module_dir(dir, m) / "config.json", pc);
    } else if (type == "sentence_transformers.models.Normalize") {
      pc.normalize = true;
    } else if (type != "sentence_transformers.models.Transformer" && unknown.empty()) {
      unknown = type;
    }
  }
  if (!pooling) return std::nullopt;
  check(unknown.empty(), modules_file.string() + " has a module of type " + unknown +
                             " that pagoda cannot apply (it runs the Transformer, Pooling and Normalize modules)");
  read_matryoshka(dir, pc);
  return pc;
}

PoolingConfig load_pooling_config(const std::string& dir) {
  if (std::optional<PoolingConfig> st = load_sentence_transformers_pooling(dir)) return *st;
  PoolingConfig pc;
  pc.source = "default (last token, normalised)";
  read_matryoshka(dir, pc);
  return pc;
}

}  // namespace pagoda

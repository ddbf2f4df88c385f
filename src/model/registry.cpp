#include "model/registry.h"

#include <filesystem>

#include "core/error.h"
#include "io/text_file.h"

namespace pagoda {

// Each family's file (src/model/<family>.cpp) defines its entry point; registering a family is its
// line in this list.
std::vector<ModelFamily> qwen3_families();
std::vector<ModelFamily> qwen3_5_families();
std::vector<ModelFamily> llama_families();
std::vector<ModelFamily> qwen2_families();
std::vector<ModelFamily> mistral_families();
std::vector<ModelFamily> gemma3_families();
std::vector<ModelFamily> qwen3_moe_families();
std::vector<ModelFamily> qwen3_5_moe_families();
std::vector<ModelFamily> phi3_families();

namespace {

using json = nlohmann::json;
using FamiliesOf = std::vector<ModelFamily> (*)();
constexpr FamiliesOf kRegistered[] = {
    qwen3_families,
    qwen3_5_families,
    llama_families,
    qwen2_families,
    mistral_families,
    gemma3_families,
    qwen3_moe_families,
    qwen3_5_moe_families,
    phi3_families,
};

constexpr size_t kMaxConfigBytes = 16u * 1000 * 1000;

std::string string_or(const json& obj, const char* key, const std::string& fallback) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

const ModelFamily& detect_family(const json& top) {
  const std::string model_type = string_or(top, "model_type", "");
  std::string arch;
  auto it = top.find("architectures");
  if (it != top.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    arch = (*it)[0].get<std::string>();
  }
  if (const ModelFamily* f = find_model_family(model_type, arch)) return *f;
  std::string supported;
  for (const ModelFamily& f : model_families()) {
    supported += std::string(supported.empty() ? "" : ", ") + f.model_type + " (" +
                 f.architecture + ")";
  }
  throw Error("config.json: unsupported architecture " + in_quotes(arch.empty() ? "none" : arch) +
              " (model_type " + in_quotes(model_type.empty() ? "none" : model_type) +
              "); pagoda supports: " + supported);
}

}  // namespace

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> all = [] {
    std::vector<ModelFamily> v;
    for (FamiliesOf families_of : kRegistered) {
      for (const ModelFamily& f : families_of()) v.push_back(f);
    }
    return v;
  }();
  return all;
}

const ModelFamily* find_model_family(const std::string& model_type,
                                     const std::string& architecture) {
  for (const ModelFamily& f : model_families()) {
    // architectures is optional in transformers; when present it must agree with model_type.
    if (model_type == f.model_type && (architecture.empty() || architecture == f.architecture)) {
      return &f;
    }
  }
  return nullptr;
}

const ModelFamily& model_family_of(const ModelConfig& config) {
  const ModelFamily* f = find_model_family(config.model_type, config.architecture);
  check(f != nullptr, "unsupported model architecture " + in_quotes(config.architecture) +
                          " (model_type " + in_quotes(config.model_type) + ")");
  return *f;
}

ModelConfig parse_model_config(const std::string& config_json,
                               const std::string& generation_json) {
  const json top = parse_config_object(config_json, "config.json");
  std::optional<json> gen;
  if (!generation_json.empty()) gen = parse_config_object(generation_json, "generation_config.json");

  const ModelFamily& family = detect_family(top);
  const json* dec = &top;
  if (family.nested) {
    auto it = top.find("text_config");
    check(it != top.end() && it->is_object(),
          std::string("config.json: text_config is missing; a ") + family.model_type +
              " config keeps the decoder settings there");
    dec = &*it;
  }
  const ConfigReader r(top, *dec, family.nested, family.model_type);

  ModelConfig c;
  c.family = family.name;
  c.model_type = family.model_type;
  c.architecture = family.architecture;
  read_common_config(r, gen ? &*gen : nullptr, family.default_head_dim, &c);
  family.read_config(r, &c);
  validate_common_config(r, c);
  return c;
}

ModelConfig load_model_config(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  std::error_code ec;
  check(fs::exists(config_path, ec),
        "no config.json in " + dir + "; pass a Hugging Face checkpoint directory");
  const std::string config_text = read_text_file(config_path, kMaxConfigBytes);
  const std::string gen_text =
      fs::exists(gen_path, ec) ? read_text_file(gen_path, kMaxConfigBytes) : std::string();
  try {
    return parse_model_config(config_text, gen_text);
  } catch (const Error& e) {
    throw Error(dir + ": " + e.what());  // the file names in the message are relative to dir
  }
}

}  // namespace pagoda

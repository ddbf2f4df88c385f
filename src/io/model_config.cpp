// config.json / generation_config.json of Qwen3 and Qwen3.5 checkpoints (MODELS.md). Field names
// and defaults follow transformers' Qwen3Config and Qwen3_5TextConfig; every value is
// range-checked, since the files are outside input and the sizes feed allocations.
#include "io/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/text_file.h"

namespace pagoda {

namespace {

using json = nlohmann::json;

// Generous caps (the largest released models are far below) that keep every size product in
// kv_bytes_per_token / state_bytes_per_sequence well inside int64.
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxHeadDim = 65536;
constexpr int64_t kMaxHidden = int64_t{1} << 20;
constexpr int64_t kMaxIntermediate = int64_t{1} << 22;
constexpr int64_t kMaxVocab = int64_t{1} << 28;
constexpr int64_t kMaxPositions = int64_t{1} << 40;
constexpr int64_t kMaxConvKernel = 64;
constexpr size_t kMaxConfigBytes = 16u * 1000 * 1000;

struct Family {
  const char* model_type;
  const char* architecture;
  ModelArch arch;
  bool nested;  // decoder settings under text_config
  int64_t default_head_dim;  // transformers' dataclass default when head_dim is absent
};

constexpr Family kFamilies[] = {
    {"qwen3", "Qwen3ForCausalLM", ModelArch::Qwen3, false, 128},
    {"qwen3_5", "Qwen3_5ForConditionalGeneration", ModelArch::Qwen3_5, true, 256},
    {"qwen3_5_text", "Qwen3_5ForCausalLM", ModelArch::Qwen3_5, false, 256},
};

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

json parse_object(const std::string& text, const std::string& file) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  check(!j.is_discarded(), file + " is not valid JSON; re-download the checkpoint");
  check(j.is_object(), file + " is not a JSON object");
  return j;
}

// Reads fields from the decoder settings (text_config when nested, else the top level), falling
// back to the top level for the few fields transformers keeps there in nested configs.
class FieldReader {
 public:
  FieldReader(const json& top, const json& dec, bool nested, std::string model_type)
      : top_(top), dec_(dec), nested_(nested), model_type_(std::move(model_type)) {}

  struct Found {
    const json* value = nullptr;  // nullptr when absent or null
    std::string path;             // e.g. text_config.hidden_size
  };

  Found find(const std::string& key, bool top_fallback = false) const {
    if (const json* v = get(dec_, key)) return {v, prefix() + key};
    if (nested_ && top_fallback) {
      if (const json* v = get(top_, key)) return {v, key};
    }
    return {nullptr, prefix() + key};
  }

  std::optional<int64_t> optional_int(const std::string& key, int64_t lo, int64_t hi,
                                      bool top_fallback = false) const {
    const Found f = find(key, top_fallback);
    if (f.value == nullptr) return std::nullopt;
    return to_int(*f.value, "config.json: " + f.path, lo, hi);
  }

  int64_t required_int(const std::string& key, int64_t hi) const {
    auto v = optional_int(key, 1, hi);
    check(v.has_value(), "config.json: " + prefix() + key + " is missing; a " + model_type_ +
                             " config needs it (is this config.json complete?)");
    return *v;
  }

  std::optional<double> optional_positive(const std::string& key, bool top_fallback) const {
    const Found f = find(key, top_fallback);
    if (f.value == nullptr) return std::nullopt;
    return to_positive(*f.value, "config.json: " + f.path);
  }

  std::optional<bool> optional_bool(const std::string& key, bool top_fallback) const {
    const Found f = find(key, top_fallback);
    if (f.value == nullptr) return std::nullopt;
    check(f.value->is_boolean(), "config.json: " + f.path + " must be true or false");
    return f.value->get<bool>();
  }

  std::string prefix() const { return nested_ ? "text_config." : ""; }
  const json& dec() const { return dec_; }
  const json& top() const { return top_; }
  bool nested() const { return nested_; }

  static const json* get(const json& obj, const std::string& key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  static int64_t to_int(const json& v, const std::string& what, int64_t lo, int64_t hi) {
    check(v.is_number_integer(), what + " must be an integer, got " + v.type_name());
    const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi);
    const int64_t i = too_big ? hi : v.get<int64_t>();
    check(!too_big && i >= lo && i <= hi,
          what + " = " + v.dump() + " is outside [" + std::to_string(lo) + ", " +
              std::to_string(hi) + "]");
    return i;
  }

  static double to_positive(const json& v, const std::string& what) {
    check(v.is_number(), what + " must be a number, got " + v.type_name());
    const double d = v.get<double>();
    check(std::isfinite(d) && d > 0, what + " must be a positive number");
    return d;
  }

 private:
  const json& top_;
  const json& dec_;
  bool nested_;
  std::string model_type_;
};

std::string string_or(const json& obj, const char* key, const std::string& fallback) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

const Family& detect_family(const json& top) {
  const std::string model_type = string_or(top, "model_type", "");
  std::string arch;
  auto it = top.find("architectures");
  if (it != top.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    arch = (*it)[0].get<std::string>();
  }
  for (const Family& f : kFamilies) {
    // architectures is optional in transformers; when present it must agree with model_type.
    if (model_type == f.model_type && (arch.empty() || arch == f.architecture)) return f;
  }
  std::string supported;
  for (const Family& f : kFamilies) {
    supported += std::string(supported.empty() ? "" : ", ") + f.model_type + " (" +
                 f.architecture + ")";
  }
  throw Error("config.json: unsupported architecture " + in_quotes(arch.empty() ? "none" : arch) +
              " (model_type " + in_quotes(model_type.empty() ? "none" : model_type) +
              "); pagoda supports: " + supported);
}

void read_dimensions(const FieldReader& r, const Family& family, ModelConfig* c) {
  c->vocab_size = r.required_int("vocab_size", kMaxVocab);
  c->hidden_size = r.required_int("hidden_size", kMaxHidden);
  c->intermediate_size = r.required_int("intermediate_size", kMaxIntermediate);
  c->num_layers = r.required_int("num_hidden_layers", kMaxLayers);
  c->num_heads = r.required_int("num_attention_heads", kMaxHeads);
  c->num_kv_heads = r.required_int("num_key_value_heads", kMaxHeads);
  // transformers' configs always carry head_dim (dataclass default), so an absent one means the
  // default, not hidden/heads.
  c->head_dim = r.optional_int("head_dim", 1, kMaxHeadDim).value_or(family.default_head_dim);
  c->rms_norm_eps = r.optional_positive("rms_norm_eps", false).value_or(1e-6);
  c->max_position_embeddings =
      r.optional_int("max_position_embeddings", 1, kMaxPositions).value_or(32768);
  c->tie_word_embeddings = r.optional_bool("tie_word_embeddings", true).value_or(false);
}

void read_rope(const FieldReader& r, const Family& family, ModelConfig* c) {
  // transformers 5 writes rope_parameters; 4.x wrote rope_theta and rope_scaling at the top.
  FieldReader::Found params = r.find("rope_parameters", true);
  if (params.value == nullptr) params = r.find("rope_scaling", true);
  const json* rp = params.value;
  if (rp != nullptr) check(rp->is_object(), "config.json: " + params.path + " must be an object");
  const std::string where = "config.json: " + params.path;

  std::optional<double> theta;
  if (rp != nullptr && FieldReader::get(*rp, "rope_theta")) {
    theta = FieldReader::to_positive(rp->at("rope_theta"), where + ".rope_theta");
  }
  if (!theta) theta = r.optional_positive("rope_theta", true);
  check(theta.has_value(), "config.json: rope_theta is missing; looked for " + r.prefix() +
                               "rope_parameters.rope_theta and " + r.prefix() + "rope_theta");
  c->rope_theta = *theta;

  for (const char* key : {"rope_type", "type"}) {
    if (rp == nullptr || !FieldReader::get(*rp, key)) continue;
    const json& t = rp->at(key);
    check(t.is_string() && t.get<std::string>() == "default",
          where + "." + key + " is " + (t.is_string() ? in_quotes(t.get<std::string>()) : "not a "
          "string") + "; pagoda implements the default RoPE only (no scaling)");
  }

  std::optional<double> factor;
  if (rp != nullptr && FieldReader::get(*rp, "partial_rotary_factor")) {
    factor = FieldReader::to_positive(rp->at("partial_rotary_factor"),
                                      where + ".partial_rotary_factor");
  }
  if (!factor) factor = r.optional_positive("partial_rotary_factor", true);
  // Qwen3_5TextConfig defaults the factor to 0.25; Qwen3 rotates the whole head.
  c->partial_rotary_factor = factor.value_or(family.arch == ModelArch::Qwen3_5 ? 0.25 : 1.0);
  check(c->partial_rotary_factor <= 1.0, "config.json: partial_rotary_factor must be in (0, 1]");
  const double dims = static_cast<double>(c->head_dim) * c->partial_rotary_factor;
  c->rotary_dim = static_cast<int64_t>(std::llround(dims));
  check(std::fabs(dims - static_cast<double>(c->rotary_dim)) < 1e-6 && c->rotary_dim >= 2 &&
            c->rotary_dim % 2 == 0,
        "config.json: head_dim " + std::to_string(c->head_dim) + " x partial_rotary_factor " +
            std::to_string(c->partial_rotary_factor) + " is not an even number of rotary dims");
}

// layer_types, with transformers' legacy spellings; without it Qwen3.5 puts full attention on
// every full_attention_interval-th layer.
void read_layer_types(const FieldReader& r, const Family& family, ModelConfig* c) {
  const FieldReader::Found f = r.find("layer_types");
  if (f.value == nullptr) {
    int64_t interval = 1;  // Qwen3: every layer is full attention
    if (family.arch == ModelArch::Qwen3_5) {
      interval = r.optional_int("full_attention_interval", 1, kMaxLayers).value_or(4);
    }
    for (int64_t i = 0; i < c->num_layers; ++i) {
      c->layer_types.push_back((i + 1) % interval == 0 ? LayerKind::FullAttention
                                                       : LayerKind::LinearAttention);
    }
    return;
  }
  check(f.value->is_array(), "config.json: " + f.path + " must be a list of layer kinds");
  check(static_cast<int64_t>(f.value->size()) == c->num_layers,
        "config.json: " + f.path + " has " + std::to_string(f.value->size()) +
            " entries but num_hidden_layers is " + std::to_string(c->num_layers));
  for (size_t i = 0; i < f.value->size(); ++i) {
    const json& t = (*f.value)[i];
    const std::string s = t.is_string() ? t.get<std::string>() : "";
    const std::string at = "config.json: " + f.path + "[" + std::to_string(i) + "]";
    if (s == "full_attention" || s == "attention") {
      c->layer_types.push_back(LayerKind::FullAttention);
    } else if (family.arch == ModelArch::Qwen3_5 && (s == "linear_attention" || s == "mamba")) {
      c->layer_types.push_back(LayerKind::LinearAttention);
    } else {
      throw Error(at + " is " + (t.is_string() ? in_quotes(s) : std::string("not a string")) +
                  "; pagoda supports " +
                  (family.arch == ModelArch::Qwen3_5 ? "full_attention and linear_attention"
                                                     : "full_attention") +
                  " layers for " + family.model_type);
    }
  }
}

void read_linear_attention(const FieldReader& r, ModelConfig* c) {
  c->linear_num_key_heads = r.required_int("linear_num_key_heads", kMaxHeads);
  c->linear_num_value_heads = r.required_int("linear_num_value_heads", kMaxHeads);
  c->linear_key_head_dim = r.required_int("linear_key_head_dim", kMaxHeadDim);
  c->linear_value_head_dim = r.required_int("linear_value_head_dim", kMaxHeadDim);
  c->linear_conv_kernel_dim = r.required_int("linear_conv_kernel_dim", kMaxConvKernel);
  check(c->linear_num_value_heads % c->linear_num_key_heads == 0,
        "config.json: " + r.prefix() + "linear_num_value_heads (" +
            std::to_string(c->linear_num_value_heads) + ") is not a multiple of " + r.prefix() +
            "linear_num_key_heads (" + std::to_string(c->linear_num_key_heads) + ")");
}

void read_dtype(const FieldReader& r, ModelConfig* c) {
  FieldReader::Found f = r.find("dtype", true);
  if (f.value == nullptr) f = r.find("torch_dtype", true);
  if (f.value == nullptr) return;  // transformers' default for these checkpoints: bf16
  const std::string s = f.value->is_string() ? f.value->get<std::string>() : "";
  if (s == "bfloat16") c->dtype = DType::BF16;
  else if (s == "float16") c->dtype = DType::F16;
  else if (s == "float32") c->dtype = DType::F32;
  else {
    throw Error("config.json: " + f.path + " is " + (f.value->is_string() ? in_quotes(s) : "not a "
                "string") + "; pagoda loads bfloat16, float16 and float32 checkpoints");
  }
}

// Features transformers supports for these families that pagoda does not implement: refusing is
// better than silently producing wrong logits.
void check_unsupported_features(const FieldReader& r) {
  if (r.optional_bool("attention_bias", false).value_or(false)) {
    throw Error("config.json: " + r.prefix() + "attention_bias is true; pagoda's models have no "
                "biases");
  }
  if (r.optional_bool("use_sliding_window", false).value_or(false)) {
    throw Error("config.json: " + r.prefix() + "use_sliding_window is true; pagoda implements "
                "full attention only");
  }
  const FieldReader::Found act = r.find("hidden_act");
  if (act.value != nullptr) {
    check(act.value->is_string() && act.value->get<std::string>() == "silu",
          "config.json: " + act.path + " must be 'silu' (the only MLP activation pagoda has)");
  }
}

// Appends the ids of an eos_token_id field (int or list of ints), skipping ones already seen.
void append_token_ids(const json* v, const std::string& what, int64_t vocab,
                      std::vector<int64_t>* out) {
  if (v == nullptr) return;
  std::vector<const json*> items;
  if (v->is_array()) {
    for (const json& e : *v) items.push_back(&e);
  } else {
    items.push_back(v);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string at = v->is_array() ? what + "[" + std::to_string(i) + "]" : what;
    const int64_t id = FieldReader::to_int(*items[i], at, 0, vocab - 1);
    if (std::find(out->begin(), out->end(), id) == out->end()) out->push_back(id);
  }
}

void read_special_tokens(const FieldReader& r, const json* gen, ModelConfig* c) {
  if (gen != nullptr) {
    append_token_ids(FieldReader::get(*gen, "eos_token_id"),
                     "generation_config.json: eos_token_id", c->vocab_size, &c->eos_token_ids);
  }
  append_token_ids(FieldReader::get(r.dec(), "eos_token_id"),
                   "config.json: " + r.prefix() + "eos_token_id", c->vocab_size,
                   &c->eos_token_ids);
  if (r.nested()) {
    append_token_ids(FieldReader::get(r.top(), "eos_token_id"), "config.json: eos_token_id",
                     c->vocab_size, &c->eos_token_ids);
  }
  const json* bos = gen != nullptr ? FieldReader::get(*gen, "bos_token_id") : nullptr;
  std::string bos_where = "generation_config.json: bos_token_id";
  if (bos == nullptr) {
    const FieldReader::Found f = r.find("bos_token_id", true);
    bos = f.value;
    bos_where = "config.json: " + f.path;
  }
  if (bos != nullptr) c->bos_token_id = FieldReader::to_int(*bos, bos_where, 0, c->vocab_size - 1);
}

// Sampling defaults of generation_config.json; a value of the wrong type or range is an error that
// names it. As vLLM, do_sample is not read: only the values themselves become defaults.
void read_generation_defaults(const json& gen, ModelConfig* c) {
  auto number = [&](const char* key, double lo, double hi) -> std::optional<double> {
    auto it = gen.find(key);
    if (it == gen.end() || it->is_null()) return std::nullopt;
    check(it->is_number() && it->get<double>() >= lo && it->get<double>() <= hi,
          std::string("generation_config.json: ") + key + " must be a number in [" +
              std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return it->get<double>();
  };
  ModelConfig::GenerationDefaults& d = c->generation_defaults;
  d.temperature = number("temperature", 0, 100);
  d.top_p = number("top_p", 0, 1);
  d.min_p = number("min_p", 0, 1);
  d.repetition_penalty = number("repetition_penalty", 1e-6, 100);
  if (auto k = number("top_k", -1, 1e9)) d.top_k = static_cast<int64_t>(*k);
}

void validate(const FieldReader& r, ModelConfig* c) {
  check(c->num_heads % c->num_kv_heads == 0,
        "config.json: " + r.prefix() + "num_attention_heads (" + std::to_string(c->num_heads) +
            ") is not a multiple of num_key_value_heads (" + std::to_string(c->num_kv_heads) +
            ")");
  check(static_cast<int64_t>(c->layer_types.size()) == c->num_layers,
        "config.json: layer_types does not have num_hidden_layers entries");
}

}  // namespace

const char* model_arch_name(ModelArch arch) {
  switch (arch) {
    case ModelArch::Qwen3: return "Qwen3";
    case ModelArch::Qwen3_5: return "Qwen3.5";
  }
  return "?";
}

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::FullAttention: return "full_attention";
    case LayerKind::LinearAttention: return "linear_attention";
  }
  return "?";
}

int64_t ModelConfig::num_layers_of(LayerKind kind) const {
  return static_cast<int64_t>(std::count(layer_types.begin(), layer_types.end(), kind));
}

int64_t ModelConfig::kv_bytes_per_token(DType kv) const {
  // K and V for each full-attention layer.
  return num_layers_of(LayerKind::FullAttention) * 2 * num_kv_heads * head_dim *
         static_cast<int64_t>(dtype_size(kv));
}

int64_t ModelConfig::conv_dim() const {
  return 2 * linear_num_key_heads * linear_key_head_dim +
         linear_num_value_heads * linear_value_head_dim;
}

int64_t ModelConfig::state_bytes_per_sequence(DType conv_state_dtype) const {
  if (linear_conv_kernel_dim < 1) return 0;  // Qwen3: no GDN layers
  const int64_t conv = conv_dim() * (linear_conv_kernel_dim - 1) *
                       static_cast<int64_t>(dtype_size(conv_state_dtype));
  const int64_t recurrent = linear_num_value_heads * linear_key_head_dim *
                            linear_value_head_dim * 4;  // fp32 S per value head
  return num_layers_of(LayerKind::LinearAttention) * (conv + recurrent);
}

ModelConfig parse_model_config(const std::string& config_json,
                               const std::string& generation_json) {
  const json top = parse_object(config_json, "config.json");
  std::optional<json> gen;
  if (!generation_json.empty()) gen = parse_object(generation_json, "generation_config.json");

  const Family& family = detect_family(top);
  const json* dec = &top;
  if (family.nested) {
    auto it = top.find("text_config");
    check(it != top.end() && it->is_object(),
          std::string("config.json: text_config is missing; a ") + family.model_type +
              " config keeps the decoder settings there");
    dec = &*it;
  }
  const FieldReader r(top, *dec, family.nested, family.model_type);

  ModelConfig c;
  c.arch = family.arch;
  c.model_type = family.model_type;
  c.architecture = family.architecture;
  read_dimensions(r, family, &c);
  read_rope(r, family, &c);
  read_layer_types(r, family, &c);
  if (family.arch == ModelArch::Qwen3_5) read_linear_attention(r, &c);
  read_dtype(r, &c);
  check_unsupported_features(r);
  read_special_tokens(r, gen ? &*gen : nullptr, &c);
  if (gen) read_generation_defaults(*gen, &c);
  validate(r, &c);
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

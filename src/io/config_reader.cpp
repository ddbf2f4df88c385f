// The common core of config.json / generation_config.json (docs/models.md). Field names and defaults
// follow transformers' configs; every value is range-checked, since the files are outside input and
// the sizes feed allocations.
#include "io/config_reader.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pagoda {

using json = nlohmann::json;
using namespace config_limits;

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

json parse_config_object(const std::string& text, const std::string& file) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  check(!j.is_discarded(), file + " is not valid JSON; re-download the checkpoint");
  check(j.is_object(), file + " is not a JSON object");
  return j;
}

ConfigReader::Found ConfigReader::find(const std::string& key, bool top_fallback) const {
  if (const json* v = get(dec_, key)) return {v, prefix() + key};
  if (nested_ && top_fallback) {
    if (const json* v = get(top_, key)) return {v, key};
  }
  return {nullptr, prefix() + key};
}

std::optional<int64_t> ConfigReader::optional_int(const std::string& key, int64_t lo, int64_t hi,
                                                  bool top_fallback) const {
  const Found f = find(key, top_fallback);
  if (f.value == nullptr) return std::nullopt;
  return to_int(*f.value, "config.json: " + f.path, lo, hi);
}

int64_t ConfigReader::required_int(const std::string& key, int64_t hi) const {
  auto v = optional_int(key, 1, hi);
  check(v.has_value(), "config.json: " + prefix() + key + " is missing; a " + model_type_ +
                           " config needs it (is this config.json complete?)");
  return *v;
}

std::optional<double> ConfigReader::optional_positive(const std::string& key,
                                                      bool top_fallback) const {
  const Found f = find(key, top_fallback);
  if (f.value == nullptr) return std::nullopt;
  return to_positive(*f.value, "config.json: " + f.path);
}

std::optional<bool> ConfigReader::optional_bool(const std::string& key, bool top_fallback) const {
  const Found f = find(key, top_fallback);
  if (f.value == nullptr) return std::nullopt;
  check(f.value->is_boolean(), "config.json: " + f.path + " must be true or false");
  return f.value->get<bool>();
}

const json* ConfigReader::get(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

int64_t ConfigReader::to_int(const json& v, const std::string& what, int64_t lo, int64_t hi) {
  check(v.is_number_integer(), what + " must be an integer, got " + v.type_name());
  const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi);
  const int64_t i = too_big ? hi : v.get<int64_t>();
  check(!too_big && i >= lo && i <= hi,
        what + " = " + v.dump() + " is outside [" + std::to_string(lo) + ", " +
            std::to_string(hi) + "]");
  return i;
}

double ConfigReader::to_positive(const json& v, const std::string& what) {
  check(v.is_number(), what + " must be a number, got " + v.type_name());
  const double d = v.get<double>();
  check(std::isfinite(d) && d > 0, what + " must be a positive number");
  return d;
}

namespace {

void read_dimensions(const ConfigReader& r, int64_t default_head_dim, ModelConfig* c) {
  c->vocab_size = r.required_int("vocab_size", kMaxVocab);
  c->hidden_size = r.required_int("hidden_size", kMaxHidden);
  // MoE configs whose every layer is sparse (Qwen3.5-MoE) have no dense MLP and may leave it out;
  // the MoE reader refuses its absence where a dense layer needs it.
  c->intermediate_size = r.find("moe_intermediate_size").value != nullptr
                             ? r.optional_int("intermediate_size", 1, kMaxIntermediate).value_or(0)
                             : r.required_int("intermediate_size", kMaxIntermediate);
  c->num_layers = r.required_int("num_hidden_layers", kMaxLayers);
  c->num_heads = r.required_int("num_attention_heads", kMaxHeads);
  c->num_kv_heads = r.required_int("num_key_value_heads", kMaxHeads);
  // transformers' configs always carry head_dim (dataclass default), so an absent one means the
  // default, not hidden/heads.
  c->head_dim = r.optional_int("head_dim", 1, kMaxHeadDim)
                    .value_or(default_head_dim > 0 ? default_head_dim : c->hidden_size / c->num_heads);
  check(c->head_dim >= 1, "config.json: hidden_size / num_attention_heads is 0; set head_dim");
  c->rms_norm_eps = r.optional_positive("rms_norm_eps", false).value_or(1e-6);
  c->max_position_embeddings =
      r.optional_int("max_position_embeddings", 1, kMaxPositions).value_or(32768);
  c->tie_word_embeddings = r.optional_bool("tie_word_embeddings", true).value_or(false);
}

}  // namespace

namespace {

// transformers 5 keys rope_parameters by layer type ({"full_attention": {...}, "sliding_attention":
// {...}}) when the model's layers use different RoPE: every key is one of the config's layer_types.
bool keyed_by_layer_type(const ConfigReader& r, const json& rope) {
  const json* types = ConfigReader::get(r.dec(), "layer_types");
  if (types == nullptr || !types->is_array() || !rope.is_object() || rope.empty()) return false;
  for (const auto& [key, value] : rope.items()) {
    bool listed = false;
    for (const json& t : *types) listed = listed || (t.is_string() && t.get<std::string>() == key);
    if (!listed || !value.is_object()) return false;
  }
  return true;
}

}  // namespace

bool rope_keyed_by_layer_type(const ConfigReader& r) {
  ConfigReader::Found params = r.find("rope_parameters", true);
  if (params.value == nullptr) params = r.find("rope_scaling", true);
  return params.value != nullptr && keyed_by_layer_type(r, *params.value);
}

ConfigReader::Found rope_settings(const ConfigReader& r, const std::string& layer_type) {
  ConfigReader::Found params = r.find("rope_parameters", true);
  if (params.value == nullptr) params = r.find("rope_scaling", true);
  if (params.value == nullptr) return params;
  check(params.value->is_object(), "config.json: " + params.path + " must be an object");
  if (!keyed_by_layer_type(r, *params.value)) return params;
  return {ConfigReader::get(*params.value, layer_type), params.path + "." + layer_type};
}

std::string rope_type(const ConfigReader::Found& params) {
  for (const char* key : {"rope_type", "type"}) {
    if (params.value == nullptr || !ConfigReader::get(*params.value, key)) continue;
    const json& t = params.value->at(key);
    check(t.is_string(), "config.json: " + params.path + "." + key + " is not a string");
    return t.get<std::string>();
  }
  return "default";
}

std::string rope_type(const ConfigReader& r) { return rope_type(rope_settings(r)); }

namespace {

std::optional<double> rope_number(const ConfigReader::Found& params, const char* key) {
  const json* v = params.value != nullptr ? ConfigReader::get(*params.value, key) : nullptr;
  if (v == nullptr) return std::nullopt;
  return ConfigReader::to_positive(*v, "config.json: " + params.path + "." + key);
}

double required_rope_number(const ConfigReader::Found& params, const char* key,
                            const std::string& type) {
  const std::optional<double> v = rope_number(params, key);
  check(v.has_value(), "config.json: " + params.path + "." + key + " is missing; rope_type " +
                           type + " needs it");
  return *v;
}

// The context length the model was pretrained with: a top-level original_max_position_embeddings
// wins (transformers: Phi-3 keeps it there), then the RoPE settings' own, then
// max_position_embeddings (standardize_rope_params' fallback).
double original_max_positions(const ConfigReader& r, const ConfigReader::Found& params,
                              const ModelConfig& c) {
  const ConfigReader::Found top = r.find("original_max_position_embeddings", true);
  if (top.value != nullptr) return ConfigReader::to_positive(*top.value, "config.json: " + top.path);
  return rope_number(params, "original_max_position_embeddings")
      .value_or(static_cast<double>(c.max_position_embeddings));
}

// transformers' get_mscale: 1 for scale <= 1, else 0.1·m·ln(scale) + 1.
double yarn_mscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

// A number or absent (0); transformers reads these with `x or default` / `if x and y`.
double number_or_zero(const ConfigReader::Found& params, const char* key) {
  const json* v = ConfigReader::get(*params.value, key);
  if (v == nullptr) return 0.0;
  check(v->is_number() && std::isfinite(v->get<double>()),
        "config.json: " + params.path + "." + key + " must be a number");
  return v->get<double>();
}

void read_yarn(const ConfigReader& r, const ConfigReader::Found& params, const ModelConfig& c,
               RopeParams* rope) {
  rope->original_max_positions = original_max_positions(r, params, c);
  // No factor: the ratio of the extended to the original context (DeepSeek-V3's convention).
  rope->factor = rope_number(params, "factor")
                     .value_or(static_cast<double>(c.max_position_embeddings) / rope->original_max_positions);
  const double beta_fast = number_or_zero(params, "beta_fast");
  const double beta_slow = number_or_zero(params, "beta_slow");
  rope->beta_fast = beta_fast != 0 ? beta_fast : 32.0;
  rope->beta_slow = beta_slow != 0 ? beta_slow : 1.0;
  const json* truncate = ConfigReader::get(*params.value, "truncate");
  if (truncate != nullptr) {
    check(truncate->is_boolean(), "config.json: " + params.path + ".truncate must be true or false");
    rope->truncate = truncate->get<bool>();
  }
  std::optional<double> attention = rope_number(params, "attention_factor");
  if (!attention) {
    const double mscale = number_or_zero(params, "mscale");
    const double mscale_all_dim = number_or_zero(params, "mscale_all_dim");
    attention = mscale != 0 && mscale_all_dim != 0
                    ? yarn_mscale(rope->factor, mscale) / yarn_mscale(rope->factor, mscale_all_dim)
                    : yarn_mscale(rope->factor, 1.0);
  }
  rope->attention_factor = static_cast<float>(*attention);
}

}  // namespace

RopeParams read_rope_scaling(const ConfigReader& r, const ConfigReader::Found& params,
                             const ModelConfig& c) {
  RopeParams rope;
  const std::string type = rope_type(params);
  if (type == "default") return rope;
  if (type == "linear") {
    rope.scaling = RopeScaling::Linear;
    rope.factor = required_rope_number(params, "factor", type);
  } else if (type == "llama3") {
    rope.scaling = RopeScaling::Llama3;
    rope.factor = required_rope_number(params, "factor", type);
    rope.low_freq_factor = required_rope_number(params, "low_freq_factor", type);
    rope.high_freq_factor = required_rope_number(params, "high_freq_factor", type);
    rope.original_max_positions = original_max_positions(r, params, c);
    check(rope.high_freq_factor > rope.low_freq_factor,
          "config.json: " + params.path + ".high_freq_factor must be larger than low_freq_factor");
  } else if (type == "yarn") {
    rope.scaling = RopeScaling::Yarn;
    read_yarn(r, params, c, &rope);
  } else {
    throw Error("config.json: " + params.path + ".rope_type is " + in_quotes(type) +
                "; pagoda implements the RoPE types default, linear, llama3 and yarn");
  }
  return rope;
}

namespace {

void read_rope_theta(const ConfigReader& r, ModelConfig* c) {
  const ConfigReader::Found params = rope_settings(r);
  const json* rp = params.value;
  const std::string where = "config.json: " + params.path;

  std::optional<double> theta;
  if (rp != nullptr && ConfigReader::get(*rp, "rope_theta")) {
    theta = ConfigReader::to_positive(rp->at("rope_theta"), where + ".rope_theta");
  }
  if (!theta) theta = r.optional_positive("rope_theta", true);
  check(theta.has_value(), "config.json: rope_theta is missing; looked for " + r.prefix() +
                               "rope_parameters.rope_theta and " + r.prefix() + "rope_theta");
  c->rope_theta = *theta;
}

void read_dtype(const ConfigReader& r, ModelConfig* c) {
  ConfigReader::Found f = r.find("dtype", true);
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
    const int64_t id = ConfigReader::to_int(*items[i], at, 0, vocab - 1);
    if (std::find(out->begin(), out->end(), id) == out->end()) out->push_back(id);
  }
}

void read_special_tokens(const ConfigReader& r, const json* gen, ModelConfig* c) {
  if (gen != nullptr) {
    append_token_ids(ConfigReader::get(*gen, "eos_token_id"),
                     "generation_config.json: eos_token_id", c->vocab_size, &c->eos_token_ids);
  }
  append_token_ids(ConfigReader::get(r.dec(), "eos_token_id"),
                   "config.json: " + r.prefix() + "eos_token_id", c->vocab_size,
                   &c->eos_token_ids);
  if (r.nested()) {
    append_token_ids(ConfigReader::get(r.top(), "eos_token_id"), "config.json: eos_token_id",
                     c->vocab_size, &c->eos_token_ids);
  }
  const json* bos = gen != nullptr ? ConfigReader::get(*gen, "bos_token_id") : nullptr;
  std::string bos_where = "generation_config.json: bos_token_id";
  if (bos == nullptr) {
    const ConfigReader::Found f = r.find("bos_token_id", true);
    bos = f.value;
    bos_where = "config.json: " + f.path;
  }
  if (bos != nullptr) c->bos_token_id = ConfigReader::to_int(*bos, bos_where, 0, c->vocab_size - 1);
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

}  // namespace

void read_common_config(const ConfigReader& r, const json* gen, int64_t default_head_dim,
                        ModelConfig* c) {
  read_dimensions(r, default_head_dim, c);
  read_rope_theta(r, c);
  c->rope_scaling = read_rope_scaling(r, rope_settings(r), *c);
  read_dtype(r, c);
  c->quantization = read_quantization_config(r.top());
  read_special_tokens(r, gen, c);
  if (gen != nullptr) read_generation_defaults(*gen, c);
}

void read_rotary_dim(const ConfigReader& r, double default_factor, ModelConfig* c) {
  const ConfigReader::Found params = rope_settings(r);
  const json* rp = params.value;
  std::optional<double> factor;
  if (rp != nullptr && ConfigReader::get(*rp, "partial_rotary_factor")) {
    factor = ConfigReader::to_positive(rp->at("partial_rotary_factor"),
                                       "config.json: " + params.path + ".partial_rotary_factor");
  }
  if (!factor) factor = r.optional_positive("partial_rotary_factor", true);
  c->partial_rotary_factor = factor.value_or(default_factor);
  check(c->partial_rotary_factor <= 1.0, "config.json: partial_rotary_factor must be in (0, 1]");
  const double dims = static_cast<double>(c->head_dim) * c->partial_rotary_factor;
  c->rotary_dim = static_cast<int64_t>(std::llround(dims));
  check(std::fabs(dims - static_cast<double>(c->rotary_dim)) < 1e-6 && c->rotary_dim >= 2 &&
            c->rotary_dim % 2 == 0,
        "config.json: head_dim " + std::to_string(c->head_dim) + " x partial_rotary_factor " +
            std::to_string(c->partial_rotary_factor) + " is not an even number of rotary dims");
}

void read_layer_types(const ConfigReader& r, bool allow_linear, int64_t default_interval,
                      ModelConfig* c) {
  const ConfigReader::Found f = r.find("layer_types");
  c->sliding_layers.assign(static_cast<size_t>(c->num_layers), false);
  if (f.value == nullptr) {
    for (int64_t i = 0; i < c->num_layers; ++i) {
      c->layer_types.push_back((i + 1) % default_interval == 0 ? LayerKind::FullAttention
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
    } else if (s == "sliding_attention") {
      c->layer_types.push_back(LayerKind::FullAttention);
      c->sliding_layers[i] = true;
    } else if (allow_linear && (s == "linear_attention" || s == "mamba")) {
      c->layer_types.push_back(LayerKind::LinearAttention);
    } else {
      throw Error(at + " is " + (t.is_string() ? in_quotes(s) : std::string("not a string")) +
                  "; pagoda supports " +
                  (allow_linear ? "full_attention, sliding_attention and linear_attention"
                                : "full_attention and sliding_attention") +
                  " layers for " + r.model_type());
    }
  }
}

void read_sliding_window(const ConfigReader& r, bool every_layer, ModelConfig* c) {
  c->sliding_layers.resize(static_cast<size_t>(c->num_layers), false);
  const std::optional<int64_t> window = r.optional_int("sliding_window", 1, kMaxPositions);
  if (every_layer && window) c->sliding_layers.assign(c->sliding_layers.size(), true);
  const bool any = std::find(c->sliding_layers.begin(), c->sliding_layers.end(), true) !=
                   c->sliding_layers.end();
  check(!any || window, "config.json: " + r.prefix() + "layer_types has sliding_attention layers "
                        "but " + r.prefix() + "sliding_window is missing");
  c->sliding_window = any ? *window : 0;
}

void refuse_unimplemented_features(const ConfigReader& r) {
  if (r.optional_bool("attention_bias", false).value_or(false)) {
    throw Error("config.json: " + r.prefix() + "attention_bias is true; pagoda's models have no "
                "biases");
  }
  if (r.optional_bool("use_sliding_window", false).value_or(false)) {
    throw Error("config.json: " + r.prefix() + "use_sliding_window is true; pagoda implements "
                "full attention only");
  }
  require_silu_activation(r);
}

void require_silu_activation(const ConfigReader& r) {
  const ConfigReader::Found act = r.find("hidden_act");
  if (act.value != nullptr) {
    check(act.value->is_string() && act.value->get<std::string>() == "silu",
          "config.json: " + act.path + " must be 'silu' (the only MLP activation pagoda has)");
  }
}

void validate_common_config(const ConfigReader& r, const ModelConfig& c) {
  check(c.num_heads % c.num_kv_heads == 0,
        "config.json: " + r.prefix() + "num_attention_heads (" + std::to_string(c.num_heads) +
            ") is not a multiple of num_key_value_heads (" + std::to_string(c.num_kv_heads) +
            ")");
  check(static_cast<int64_t>(c.layer_types.size()) == c.num_layers,
        "config.json: layer_types does not have num_hidden_layers entries");
  const bool sliding = std::find(c.sliding_layers.begin(), c.sliding_layers.end(), true) !=
                       c.sliding_layers.end();
  check(!sliding || c.sliding_window > 0,
        "config.json: " + r.prefix() + "layer_types has sliding_attention layers, which pagoda's " +
            r.model_type() + " does not implement (it reads no sliding_window)");
}

}  // namespace pagoda

// Reading config.json fields with bounds and error messages that name the field: what every model
// family's config parser is written with. The common core (dimensions, RoPE, dtype, special tokens,
// sampling defaults) is read here; each family (src/model/<family>.cpp) reads its own fields.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "io/model_config.h"

namespace pagoda {

// Generous caps (the largest released models are far below) that keep every size product in
// kv_bytes_per_token / state_bytes_per_sequence well inside int64.
namespace config_limits {
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxHeads = 4096;
constexpr int64_t kMaxHeadDim = 65536;
constexpr int64_t kMaxHidden = int64_t{1} << 20;
constexpr int64_t kMaxIntermediate = int64_t{1} << 22;
constexpr int64_t kMaxVocab = int64_t{1} << 28;
constexpr int64_t kMaxPositions = int64_t{1} << 40;
constexpr int64_t kMaxConvKernel = 64;
}  // namespace config_limits

// Reads fields from the decoder settings (text_config when nested, else the top level), falling
// back to the top level for the few fields transformers keeps there in nested configs.
class ConfigReader {
 public:
  using json = nlohmann::json;
  ConfigReader(const json& top, const json& dec, bool nested, std::string model_type)
      : top_(top), dec_(dec), nested_(nested), model_type_(std::move(model_type)) {}

  struct Found {
    const json* value = nullptr;  // nullptr when absent or null
    std::string path;             // e.g. text_config.hidden_size
  };

  Found find(const std::string& key, bool top_fallback = false) const;
  std::optional<int64_t> optional_int(const std::string& key, int64_t lo, int64_t hi,
                                      bool top_fallback = false) const;
  int64_t required_int(const std::string& key, int64_t hi) const;
  std::optional<double> optional_positive(const std::string& key, bool top_fallback) const;
  std::optional<bool> optional_bool(const std::string& key, bool top_fallback) const;

  std::string prefix() const { return nested_ ? "text_config." : ""; }
  const json& dec() const { return dec_; }
  const json& top() const { return top_; }
  bool nested() const { return nested_; }
  const std::string& model_type() const { return model_type_; }

  static const json* get(const json& obj, const std::string& key);
  static int64_t to_int(const json& v, const std::string& what, int64_t lo, int64_t hi);
  static double to_positive(const json& v, const std::string& what);

 private:
  const json& top_;
  const json& dec_;
  bool nested_;
  std::string model_type_;
};

std::string in_quotes(const std::string& s);
// Parses `text` as a JSON object; errors name `file`.
nlohmann::json parse_config_object(const std::string& text, const std::string& file);

// The common core every family has: dimensions (head_dim defaulting to `default_head_dim`, as
// transformers' dataclass does; 0 = hidden_size / num_attention_heads, as LlamaConfig does), rope
// theta and scaling (of the full-attention layers), dtype, special tokens and, when `gen` is given, generation_config.json's sampling defaults.
void read_common_config(const ConfigReader& r, const nlohmann::json* gen, int64_t default_head_dim,
                        ModelConfig* c);
// The RoPE settings object: rope_parameters (transformers 5) or rope_scaling (4.x); value null
// when neither is there. When rope_parameters is keyed by layer type (transformers 5, models whose
// layers use different RoPE), the entry of `layer_type` (null when absent).
ConfigReader::Found rope_settings(const ConfigReader& r,
                                  const std::string& layer_type = "full_attention");
// Whether rope_parameters is keyed by layer type (transformers 5's form for per-layer RoPE).
bool rope_keyed_by_layer_type(const ConfigReader& r);
// Its rope_type (or legacy `type`); "default" when absent.
std::string rope_type(const ConfigReader::Found& params);
std::string rope_type(const ConfigReader& r);
// The scaling fields of RopeParams (rotary_dim and theta left default) from one RoPE settings
// object: rope_type default, linear, llama3 or yarn with transformers' defaults (docs/models.md,
// "RoPE scaling"); any other rope_type is refused. Needs c's max_position_embeddings.
RopeParams read_rope_scaling(const ConfigReader& r, const ConfigReader::Found& params,
                             const ModelConfig& c);
// partial_rotary_factor (default `default_factor`) and the rotary_dim it gives.
void read_rotary_dim(const ConfigReader& r, double default_factor, ModelConfig* c);
// layer_types with transformers' legacy spellings. Without it, every `default_interval`-th layer
// is full attention and the others linear attention. `allow_linear` says whether the family has
// linear-attention (Gated DeltaNet) layers at all. sliding_attention layers are attention layers
// marked in sliding_layers (their window: read_sliding_window).
void read_layer_types(const ConfigReader& r, bool allow_linear, int64_t default_interval,
                      ModelConfig* c);
// sliding_window (absent or null: none) for the layers read_layer_types marked sliding_attention,
// or for every layer when `every_layer` (Mistral) and the config sets one.
void read_sliding_window(const ConfigReader& r, bool every_layer, ModelConfig* c);
// Refuses features transformers supports for the family that pagoda does not implement (biases,
// sliding window, activations other than SiLU): refusing beats silently wrong logits.
void refuse_unimplemented_features(const ConfigReader& r);
// hidden_act, when present, must be silu (the only MLP activation pagoda has).
void require_silu_activation(const ConfigReader& r);
// Checks that hold for every family (GQA divisibility, one layer kind per layer).
void validate_common_config(const ConfigReader& r, const ModelConfig& c);

}  // namespace pagoda

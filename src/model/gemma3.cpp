// Gemma 3 (`gemma3_text` / Gemma3ForCausalLM, and the language model of `gemma3` /
// Gemma3ForConditionalGeneration, saved as language_model.model.* with its settings under
// text_config; transformers' modeling_gemma3.py): the dense decoder block with
//  - embeddings × sqrt(hidden_size), the scale rounded to the activation dtype;
//  - (1 + w) RMSNorm everywhere, four norms a layer (post-attention and post-feed-forward norms on
//    the sub-layer outputs before the residual adds), (1 + w) q/k norms;
//  - attention scores × query_pre_attn_scalar^-1/2; attn_logit_softcapping is read but, as in
//    transformers (Gemma3Attention passes no softcap to its attention function, unlike Gemma 2),
//    not applied — the tiny-softcap fixture pins that;
//  - sliding layers (window sliding_window) with their own RoPE, full layers with rope_theta and
//    its scaling (linear ×8 on the 4B+ checkpoints);
//  - a GELU-tanh GLU MLP, final logits soft-capped by final_logit_softcapping when set.
// Configs: transformers 5 (layer_types, rope_parameters keyed by layer type) or 4.x / the Hub
// (rope_theta + rope_scaling for full layers, rope_local_base_freq for sliding ones,
// sliding_window_pattern instead of layer_types).
#include <cmath>

#include "core/error.h"
#include "io/config_reader.h"
#include "model/dense_decoder.h"
#include "model/registry.h"

namespace pagoda {
namespace {

struct Gemma3Fields : FamilyFields {
  RopeParams sliding_rope;  // theta and scaling of the sliding layers
  double query_pre_attn_scalar = 256;
  double final_softcap = 0;
};

// Which layers slide: layer_types, else every layer but each sliding_window_pattern-th (6).
void read_gemma3_layers(const ConfigReader& r, ModelConfig* c) {
  read_layer_types(r, /*allow_linear=*/false, /*default_interval=*/1, c);
  if (r.find("layer_types").value == nullptr) {
    std::optional<int64_t> pattern = r.optional_int("sliding_window_pattern", 1, config_limits::kMaxLayers);
    if (!pattern) pattern = r.optional_int("_sliding_window_pattern", 1, config_limits::kMaxLayers);
    for (int64_t i = 0; i < c->num_layers; ++i)
      c->sliding_layers[static_cast<size_t>(i)] = (i + 1) % pattern.value_or(6) != 0;
  }
  read_sliding_window(r, /*every_layer=*/false, c);
}

// The sliding layers' RoPE: rope_parameters.sliding_attention (transformers 5), else theta
// rope_local_base_freq (default 10000) without scaling (4.x: rope_scaling is the full layers').
RopeParams read_sliding_rope(const ConfigReader& r, const ModelConfig& c) {
  if (!rope_keyed_by_layer_type(r)) {
    RopeParams rope;
    rope.theta = static_cast<float>(r.optional_positive("rope_local_base_freq", false).value_or(10000.0));
    return rope;
  }
  const ConfigReader::Found params = rope_settings(r, "sliding_attention");
  RopeParams rope = read_rope_scaling(r, params, c);
  const nlohmann::json* theta = params.value ? ConfigReader::get(*params.value, "rope_theta") : nullptr;
  rope.theta = static_cast<float>(theta ? ConfigReader::to_positive(*theta, "config.json: " + params.path +
                                                                                 ".rope_theta")
                                        : 10000.0);
  return rope;
}

double optional_softcap(const ConfigReader& r, const char* key) {
  return r.optional_positive(key, false).value_or(0.0);
}

void read_gemma3_config(const ConfigReader& r, ModelConfig* c) {
  const ConfigReader::Found act = r.find("hidden_activation");
  check(act.value == nullptr ||
            (act.value->is_string() && act.value->get<std::string>() == "gelu_pytorch_tanh"),
        "config.json: " + act.path + " must be 'gelu_pytorch_tanh' (Gemma 3's MLP activation)");
  check(!r.optional_bool("attention_bias", false).value_or(false),
        "config.json: " + r.prefix() + "attention_bias is true; pagoda's Gemma 3 has no attention biases");
  check(!r.optional_bool("use_bidirectional_attention", false).value_or(false),
        "config.json: " + r.prefix() + "use_bidirectional_attention is true (an encoder); pagoda "
        "serves Gemma 3 as a causal decoder");
  read_rotary_dim(r, /*default_factor=*/1.0, c);
  read_gemma3_layers(r, c);
  auto fields = std::make_shared<Gemma3Fields>();
  fields->sliding_rope = read_sliding_rope(r, *c);
  fields->query_pre_attn_scalar = r.optional_positive("query_pre_attn_scalar", false).value_or(256.0);
  optional_softcap(r, "attn_logit_softcapping");  // validated only (see the top of this file)
  fields->final_softcap = optional_softcap(r, "final_logit_softcapping");
  c->family_fields = std::move(fields);
}

std::unique_ptr<Model> make_gemma3(const ModelConfig& config, const Checkpoint& ckpt,
                                   Backend& backend, const ShardSpec& shard) {
  const Gemma3Fields* f = config.family_fields_as<Gemma3Fields>();
  check(f != nullptr, "internal: a Gemma 3 config without its Gemma 3 fields");
  DenseDecoderOptions opt;
  opt.zero_centered_norm = true;
  opt.sandwich_norms = true;
  opt.activation = GluActivation::GeluTanh;
  opt.embedding_scale = std::sqrt(static_cast<double>(config.hidden_size));
  opt.final_logit_softcap = static_cast<float>(f->final_softcap);
  AttentionOptions attention;
  attention.qk_norm = true;
  attention.zero_centered_qk_norm = true;
  attention.scale = static_cast<float>(std::pow(f->query_pre_attn_scalar, -0.5));
  // attn_logit_softcapping: not applied, as transformers' Gemma 3 (see the top of this file).
  opt.attention = attention;
  for (int64_t i = 0; i < config.num_layers; ++i) {
    AttentionOptions layer = attention;
    if (config.sliding_layers[static_cast<size_t>(i)]) layer.rope = f->sliding_rope;
    opt.layer_attention.push_back(layer);
  }
  return make_dense_decoder(config, ckpt, backend, shard, opt);
}

}  // namespace

std::vector<ModelFamily> gemma3_families() {
  // head_dim default 256 (Gemma3TextConfig).
  return {{"Gemma 3", "gemma3_text", "Gemma3ForCausalLM", /*nested=*/false, /*default_head_dim=*/256,
           read_gemma3_config, make_gemma3},
          {"Gemma 3", "gemma3", "Gemma3ForConditionalGeneration", /*nested=*/true,
           /*default_head_dim=*/256, read_gemma3_config, make_gemma3}};
}

}  // namespace pagoda

// Llama 3.x (`llama` / LlamaForCausalLM, transformers' modeling_llama.py): the dense decoder block
// without q/k norms, with optional biases on q/k/v/o_proj (attention_bias), RoPE over the whole head
// with transformers' `llama3` frequency scaling (MODELS.md "Llama 3.x"), tied or untied embeddings,
// head_dim explicit or hidden_size / num_attention_heads.
#include <cstdio>

#include "core/error.h"
#include "io/config_reader.h"
#include "model/dense_decoder.h"
#include "model/registry.h"

namespace pagoda {
namespace {

// What only the Llama model reads.
struct LlamaFields : FamilyFields {
  bool attention_bias = false;
  RopeParams rope_scaling;  // its scaling fields
};

double rope_number(const ConfigReader::Found& params, const char* key) {
  const nlohmann::json* v = ConfigReader::get(*params.value, key);
  const std::string what = "config.json: " + params.path + "." + key;
  check(v != nullptr, what + " is missing; rope_type llama3 needs factor, low_freq_factor, "
                             "high_freq_factor and original_max_position_embeddings");
  return ConfigReader::to_positive(*v, what);
}

// rope_type llama3: the four numbers of transformers' _compute_llama3_parameters.
RopeParams read_rope_scaling(const ConfigReader& r) {
  RopeParams rope;
  const std::string type = rope_type(r);
  if (type == "default") return rope;
  const ConfigReader::Found params = rope_settings(r);
  check(type == "llama3", "config.json: " + params.path + ".rope_type is " + in_quotes(type) +
                              "; pagoda implements default and llama3 RoPE for llama");
  rope.scaling = RopeScaling::Llama3;
  rope.factor = rope_number(params, "factor");
  rope.low_freq_factor = rope_number(params, "low_freq_factor");
  rope.high_freq_factor = rope_number(params, "high_freq_factor");
  rope.original_max_positions = rope_number(params, "original_max_position_embeddings");
  check(rope.high_freq_factor > rope.low_freq_factor,
        "config.json: " + params.path + ".high_freq_factor must be larger than low_freq_factor");
  return rope;
}

void read_llama_config(const ConfigReader& r, ModelConfig* c) {
  auto fields = std::make_shared<LlamaFields>();
  fields->rope_scaling = read_rope_scaling(r);
  fields->attention_bias = r.optional_bool("attention_bias", false).value_or(false);
  check(!r.optional_bool("mlp_bias", false).value_or(false),
        "config.json: " + r.prefix() + "mlp_bias is true; pagoda's Llama has no MLP biases yet");
  require_silu_activation(r);
  read_rotary_dim(r, /*default_factor=*/1.0, c);
  read_layer_types(r, /*allow_linear=*/false, /*default_interval=*/1, c);
  c->family_fields = std::move(fields);
}

std::unique_ptr<Model> make_llama(const ModelConfig& config, const Checkpoint& ckpt,
                                  Backend& backend) {
  const LlamaFields* f = config.family_fields_as<LlamaFields>();
  check(f != nullptr, "internal: a Llama config without its Llama fields");
  DenseDecoderOptions opt;
  opt.attention.qk_norm = false;
  opt.attention.bias = f->attention_bias;
  opt.attention.rope_scaling = f->rope_scaling;
  opt.zero_centered_norm = false;
  return make_dense_decoder(config, ckpt, backend, opt);
}

// `pagoda info`: the rope scaling and biases, which the common core does not carry.
std::vector<std::pair<std::string, std::string>> describe_llama(const ModelConfig& config) {
  const LlamaFields* f = config.family_fields_as<LlamaFields>();
  if (f == nullptr) return {};
  std::string rope = "none";
  if (f->rope_scaling.scaling == RopeScaling::Llama3) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "llama3 (factor %g, low_freq_factor %g, high_freq_factor %g, "
                  "original_max_position_embeddings %g)",
                  f->rope_scaling.factor, f->rope_scaling.low_freq_factor,
                  f->rope_scaling.high_freq_factor, f->rope_scaling.original_max_positions);
    rope = buf;
  }
  return {{"rope scaling", rope}, {"attention bias", f->attention_bias ? "q/k/v/o" : "none"}};
}

}  // namespace

std::vector<ModelFamily> llama_families() {
  // head_dim default 0: LlamaConfig derives it as hidden_size // num_attention_heads.
  return {{"Llama", "llama", "LlamaForCausalLM", /*nested=*/false, /*default_head_dim=*/0,
           read_llama_config, make_llama, describe_llama}};
}

}  // namespace pagoda

// Llama 3.x (`llama` / LlamaForCausalLM, transformers' modeling_llama.py): the dense decoder block
// without q/k norms, with optional biases on q/k/v/o_proj (attention_bias), RoPE over the whole head
// with transformers' `llama3` frequency scaling (docs/models.md "Llama 3.x"), tied or untied embeddings,
// head_dim explicit or hidden_size / num_attention_heads. (RoPE scaling is read with the common core.)
#include "core/error.h"
#include "io/config_reader.h"
#include "model/dense_decoder.h"
#include "model/registry.h"

namespace pagoda {
namespace {

// What only the Llama model reads.
struct LlamaFields : FamilyFields {
  bool attention_bias = false;
};

void read_llama_config(const ConfigReader& r, ModelConfig* c) {
  auto fields = std::make_shared<LlamaFields>();
  fields->attention_bias = r.optional_bool("attention_bias", false).value_or(false);
  check(!r.optional_bool("mlp_bias", false).value_or(false),
        "config.json: " + r.prefix() + "mlp_bias is true; pagoda's Llama has no MLP biases yet");
  require_silu_activation(r);
  read_rotary_dim(r, /*default_factor=*/1.0, c);
  read_layer_types(r, /*allow_linear=*/false, /*default_interval=*/1, c);
  c->family_fields = std::move(fields);
}

std::unique_ptr<Model> make_llama(const ModelConfig& config, const Checkpoint& ckpt,
                                  Backend& backend, const ShardSpec& shard) {
  const LlamaFields* f = config.family_fields_as<LlamaFields>();
  check_invariant(f != nullptr, "a Llama config without its Llama fields");
  DenseDecoderOptions opt;
  opt.attention.qk_norm = false;
  opt.attention.qkv_bias = f->attention_bias;
  opt.attention.o_bias = f->attention_bias;
  opt.zero_centered_norm = false;
  return make_dense_decoder(config, ckpt, backend, shard, opt);
}

// `pagoda info`: the rope scaling and biases, which the common core does not carry.
// What `pagoda info` adds for Llama (its RoPE scaling is printed with the common settings).
std::vector<std::pair<std::string, std::string>> describe_llama(const ModelConfig& config) {
  const LlamaFields* f = config.family_fields_as<LlamaFields>();
  if (f == nullptr) return {};
  return {{"attention bias", f->attention_bias ? "q/k/v/o" : "none"}};
}

}  // namespace

std::vector<ModelFamily> llama_families() {
  // head_dim default 0: LlamaConfig derives it as hidden_size // num_attention_heads.
  return {{"Llama", "llama", "LlamaForCausalLM", /*nested=*/false, /*default_head_dim=*/0,
           read_llama_config, make_llama, describe_llama}};
}

}  // namespace pagoda

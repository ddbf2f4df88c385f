// Mistral (`mistral` / MistralForCausalLM, transformers' modeling_mistral.py): Llama's block without
// biases, every layer attending within sliding_window W (a query at p sees keys (p - W, p]; none
// when sliding_window is null), head_dim explicit or hidden_size / num_attention_heads.
#include "core/error.h"
#include "io/config_reader.h"
#include "model/dense_decoder.h"
#include "model/registry.h"

namespace pagoda {
namespace {

void read_mistral_config(const ConfigReader& r, ModelConfig* c) {
  check(!r.optional_bool("attention_bias", false).value_or(false),
        "config.json: " + r.prefix() + "attention_bias is true; Mistral has no attention biases");
  require_silu_activation(r);
  read_rotary_dim(r, /*default_factor=*/1.0, c);
  read_layer_types(r, /*allow_linear=*/false, /*default_interval=*/1, c);
  read_sliding_window(r, /*every_layer=*/true, c);
}

std::unique_ptr<Model> make_mistral(const ModelConfig& config, const Checkpoint& ckpt,
                                    Backend& backend, const ShardSpec& shard) {
  DenseDecoderOptions opt;
  opt.attention.qk_norm = false;
  return make_dense_decoder(config, ckpt, backend, shard, opt);
}

}  // namespace

std::vector<ModelFamily> mistral_families() {
  // head_dim default 0: MistralConfig derives it as hidden_size // num_attention_heads.
  return {{"Mistral", "mistral", "MistralForCausalLM", /*nested=*/false, /*default_head_dim=*/0,
           read_mistral_config, make_mistral}};
}

}  // namespace pagoda

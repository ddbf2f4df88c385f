// Phi-3 / Phi-4-mini (`phi3` / Phi3ForCausalLM, transformers' modeling_phi3.py): Llama's block whose
// checkpoint stores q | k | v as one `qkv_proj` and gate | up as one `gate_up_proj` — loaded as
// parts lists of those tensors (layers.cpp), so a rank's shard takes its heads of each part — with
// partial RoPE (partial_rotary_factor, rotate-half over the first dims), an optional sliding window
// on every layer, no q/k norms and no biases.
#include "core/error.h"
#include "io/config_reader.h"
#include "model/dense_decoder.h"
#include "model/registry.h"

namespace pagoda {
namespace {

void read_phi3_config(const ConfigReader& r, ModelConfig* c) {
  require_silu_activation(r);
  read_rotary_dim(r, /*default_factor=*/1.0, c);
  read_layer_types(r, /*allow_linear=*/false, /*default_interval=*/1, c);
  read_sliding_window(r, /*every_layer=*/true, c);
}

std::unique_ptr<Model> make_phi3(const ModelConfig& config, const Checkpoint& ckpt, Backend& backend,
                                 const ShardSpec& shard) {
  DenseDecoderOptions opt;
  opt.attention.qk_norm = false;
  return make_dense_decoder(config, ckpt, backend, shard, opt);
}

}  // namespace

std::vector<ModelFamily> phi3_families() {
  // head_dim default 0: Phi3Config derives it as hidden_size // num_attention_heads.
  return {{"Phi-3", "phi3", "Phi3ForCausalLM", /*nested=*/false, /*default_head_dim=*/0, read_phi3_config, make_phi3}};
}

}  // namespace pagoda

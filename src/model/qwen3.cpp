// Qwen3 (dense, `qwen3` / Qwen3ForCausalLM): docs/models.md "Qwen3 attention" (per-head q/k RMSNorm,
// NeoX RoPE over the whole head) with the SwiGLU MLP and plain-w RMSNorm: the dense decoder block.
#include "io/config_reader.h"
#include "model/dense_decoder.h"
#include "model/registry.h"

namespace pagoda {
namespace {

// Qwen3Config: the whole head rotates, every layer is full attention (RoPE scaling, e.g. yarn for
// long context, is read with the common core).
void read_qwen3_config(const ConfigReader& r, ModelConfig* c) {
  read_rotary_dim(r, /*default_factor=*/1.0, c);
  read_layer_types(r, /*allow_linear=*/false, /*default_interval=*/1, c);
  refuse_unimplemented_features(r);
}

std::unique_ptr<Model> make_qwen3(const ModelConfig& config, const Checkpoint& ckpt,
                                  Backend& backend, const ShardSpec& shard) {
  DenseDecoderOptions opt;
  opt.attention.qk_norm = true;  // plain-w q/k norms, no biases, no output gate
  opt.zero_centered_norm = false;
  return make_dense_decoder(config, ckpt, backend, shard, opt);
}

}  // namespace

std::vector<ModelFamily> qwen3_families() {
  return {{"Qwen3", "qwen3", "Qwen3ForCausalLM", /*nested=*/false, /*default_head_dim=*/128,
           read_qwen3_config, make_qwen3}};
}

}  // namespace pagoda

// Qwen2 / Qwen2.5 (`qwen2` / Qwen2ForCausalLM, transformers' modeling_qwen2.py): Llama's block with
// biases on q_proj, k_proj and v_proj (never o_proj), no q/k norms, RoPE over the whole head (yarn
// for long context is read with the common core), head_dim = hidden_size / num_attention_heads
// unless given. With use_sliding_window, layers from max_window_layers on attend within
// sliding_window (transformers 5 writes that as layer_types).
#include "io/config_reader.h"
#include "model/dense_decoder.h"
#include "model/registry.h"

namespace pagoda {
namespace {

void read_qwen2_config(const ConfigReader& r, ModelConfig* c) {
  require_silu_activation(r);
  read_rotary_dim(r, /*default_factor=*/1.0, c);
  read_layer_types(r, /*allow_linear=*/false, /*default_interval=*/1, c);
  // Qwen2Config: no window at all unless use_sliding_window (whatever layer_types says); without
  // layer_types, the layers from max_window_layers on are the sliding ones.
  const bool use_window = r.optional_bool("use_sliding_window", false).value_or(false);
  if (!use_window) {
    c->sliding_layers.assign(c->sliding_layers.size(), false);
  } else if (r.find("layer_types").value == nullptr) {
    const int64_t first = r.optional_int("max_window_layers", 0, config_limits::kMaxLayers).value_or(28);
    for (int64_t i = first; i < c->num_layers; ++i) c->sliding_layers[static_cast<size_t>(i)] = true;
  }
  if (use_window) read_sliding_window(r, /*every_layer=*/false, c);
}

std::unique_ptr<Model> make_qwen2(const ModelConfig& config, const Checkpoint& ckpt,
                                  Backend& backend, const ShardSpec& shard) {
  DenseDecoderOptions opt;
  opt.attention.qk_norm = false;
  opt.attention.qkv_bias = true;
  return make_dense_decoder(config, ckpt, backend, shard, opt);
}

}  // namespace

std::vector<ModelFamily> qwen2_families() {
  // head_dim default 0: Qwen2 derives it as hidden_size // num_attention_heads.
  return {{"Qwen2", "qwen2", "Qwen2ForCausalLM", /*nested=*/false, /*default_head_dim=*/0,
           read_qwen2_config, make_qwen2}};
}

}  // namespace pagoda

// Qwen3-MoE (`qwen3_moe` / Qwen3MoeForCausalLM: Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention
// and norms (qwen3.cpp) with the mixture of experts (moe_block.h) in the sparse layers and the dense
// SwiGLU MLP in mlp_only_layers and off decoder_sparse_step. The dense decoder block runs it.
#include "io/config_reader.h"
#include "model/dense_decoder.h"
#include "model/moe_block.h"
#include "model/registry.h"

namespace pagoda {
namespace {

// Qwen3MoeConfig's defaults (transformers' configuration_qwen3_moe.py).
constexpr MoeConfigRules kRules{.default_num_experts = 128,
                                .default_experts_per_token = 8,
                                .default_expert_intermediate_size = 768,
                                .reads_norm_topk_prob = true,
                                .default_norm_topk_prob = false,
                                .reads_sparse_layout = true,
                                .shared_expert = false};

void read_qwen3_moe_config(const ConfigReader& r, ModelConfig* c) {
  read_rotary_dim(r, /*default_factor=*/1.0, c);
  read_layer_types(r, /*allow_linear=*/false, /*default_interval=*/1, c);
  read_moe_fields(r, kRules, c);
  refuse_unimplemented_features(r);
}

std::unique_ptr<Model> make_qwen3_moe(const ModelConfig& config, const Checkpoint& ckpt, Backend& backend,
                                      const ShardSpec& shard) {
  DenseDecoderOptions opt;  // Qwen3's: plain-w q/k norms, no biases, no output gate
  opt.attention.qk_norm = true;
  return make_dense_decoder(config, ckpt, backend, shard, opt);
}

std::vector<std::pair<std::string, std::string>> describe_qwen3_moe(const ModelConfig& config) {
  return describe_moe(config, /*gated_attention=*/false);
}

}  // namespace

std::vector<ModelFamily> qwen3_moe_families() {
  return {{"Qwen3-MoE", "qwen3_moe", "Qwen3MoeForCausalLM", /*nested=*/false, /*default_head_dim=*/0,
           read_qwen3_moe_config, make_qwen3_moe, describe_qwen3_moe}};
}

}  // namespace pagoda

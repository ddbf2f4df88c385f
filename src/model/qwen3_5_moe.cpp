// Qwen3.5-MoE (`qwen3_5_moe` / Qwen3_5MoeForConditionalGeneration: Qwen3.5-35B-A3B, 122B-A10B,
// 397B-A17B, Qwen3.6-35B-A3B; `qwen3_5_moe_text` / Qwen3_5MoeForCausalLM): Qwen3.5's hybrid layers
// (qwen3_5.h) with the mixture of experts and a sigmoid-gated shared expert in every layer's MLP
// (moe_block.h). Text decoder only: the vision tower and the MTP head are skipped at load.
#include "io/config_reader.h"
#include "model/moe_block.h"
#include "model/qwen3_5.h"
#include "model/registry.h"

namespace pagoda {
namespace {

// Qwen3_5MoeTextConfig: its router always renormalises (no norm_topk_prob), every layer is sparse
// (no decoder_sparse_step, no mlp_only_layers) and has the shared expert.
constexpr MoeConfigRules kRules{.default_num_experts = 256,
                                .default_experts_per_token = 8,
                                .default_expert_intermediate_size = 0,  // required
                                .reads_norm_topk_prob = false,
                                .default_norm_topk_prob = true,
                                .reads_sparse_layout = false,
                                .shared_expert = true};

void read_qwen3_5_moe_config(const ConfigReader& r, ModelConfig* c) {
  read_qwen3_5_config(r, c);
  read_moe_fields(r, kRules, c);
}

std::vector<std::pair<std::string, std::string>> describe_qwen3_5_moe(const ModelConfig& config) {
  return describe_moe(config, /*gated_attention=*/true);
}

}  // namespace

std::vector<ModelFamily> qwen3_5_moe_families() {
  return {
      {"Qwen3.5-MoE", "qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration", /*nested=*/true,
       /*default_head_dim=*/256, read_qwen3_5_moe_config, make_qwen3_5, describe_qwen3_5_moe},
      {"Qwen3.5-MoE", "qwen3_5_moe_text", "Qwen3_5MoeForCausalLM", /*nested=*/false,
       /*default_head_dim=*/256, read_qwen3_5_moe_config, make_qwen3_5, describe_qwen3_5_moe},
  };
}

}  // namespace pagoda

// The MoE families' config fields (model/moe_block.h) as transformers' configs define them:
// Qwen3MoeDecoderLayer's sparse-layer rule, the defaults and names of configuration_qwen3_moe.py,
// Qwen3.5-MoE's nested config without a dense intermediate_size; and the load-time refusal of
// weights larger than the device.
#include <gtest/gtest.h>

#include "../io/io_test_util.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/moe_block.h"
#include "model/registry.h"
#include "reference_fixture.h"

namespace pagoda {
namespace {

using io_test::contains;
using io_test::error_of;

std::string qwen3_moe_config(const std::string& moe_fields) {
  return R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 320,
             "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 6, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 24, "rms_norm_eps": 1e-6,
             "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, )" +
         moe_fields + "}";
}

TEST(MoeConfig, SparseLayersFollowTransformersRule) {
  // Qwen3MoeDecoderLayer: experts where layer_idx is not in mlp_only_layers and
  // (layer_idx + 1) % decoder_sparse_step == 0. Step 2 over 6 layers: 1, 3, 5; layer 3 listed dense.
  const ModelConfig c = parse_model_config(
      qwen3_moe_config(R"("num_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 24,
                          "norm_topk_prob": false, "decoder_sparse_step": 2, "mlp_only_layers": [3])"),
      "");
  EXPECT_EQ(c.family, "Qwen3-MoE");
  const MoeFields* f = moe_fields(c);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->num_experts, 16);
  EXPECT_EQ(f->experts_per_token, 4);
  EXPECT_EQ(f->expert_intermediate_size, 24);
  EXPECT_FALSE(f->norm_topk_prob);
  EXPECT_EQ(f->shared_expert_intermediate_size, 0);
  const std::vector<bool> want = {false, true, false, false, false, true};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(is_sparse_layer(c, i), want[static_cast<size_t>(i)]) << "layer " << i;
}

TEST(MoeConfig, Qwen3MoeDefaultsAndTheNumLocalExpertsName) {
  // configuration_qwen3_moe.py: 128 experts, top 8, moe_intermediate_size 768, norm_topk_prob false,
  // every layer sparse. transformers 5 may write num_experts as num_local_experts.
  const ModelConfig d = parse_model_config(qwen3_moe_config(R"("decoder_sparse_step": 1)"), "");
  const MoeFields& f = *moe_fields(d);
  EXPECT_EQ(f.num_experts, 128);
  EXPECT_EQ(f.experts_per_token, 8);
  EXPECT_EQ(f.expert_intermediate_size, 768);
  EXPECT_FALSE(f.norm_topk_prob);
  EXPECT_EQ(f.num_sparse_layers(6), 6);
  const ModelConfig l = parse_model_config(qwen3_moe_config(R"("num_local_experts": 12)"), "");
  EXPECT_EQ(moe_fields(l)->num_experts, 12);
}

TEST(MoeConfig, BadFieldsAreNamed) {
  EXPECT_TRUE(contains(error_of([] {
                         parse_model_config(qwen3_moe_config(R"("num_experts": 4, "num_experts_per_tok": 5)"), "");
                       }),
                       "num_experts_per_tok (5)"));
  EXPECT_TRUE(contains(error_of([] { parse_model_config(qwen3_moe_config(R"("mlp_only_layers": [1, "x"])"), ""); }),
                       "mlp_only_layers"));
  // A dense layer needs intermediate_size.
  std::string no_dense = qwen3_moe_config(R"("mlp_only_layers": [0])");
  no_dense.erase(no_dense.find(R"("intermediate_size": 96,)"), std::string(R"("intermediate_size": 96,)").size());
  EXPECT_TRUE(contains(error_of([&] { parse_model_config(no_dense, ""); }), "intermediate_size is missing"));
}

TEST(MoeConfig, Qwen3_5MoeNestedWithoutDenseSize) {
  // Qwen3_5MoeTextConfig deletes intermediate_size, norm_topk_prob, decoder_sparse_step and
  // mlp_only_layers: every layer is sparse, renormalised, with the shared expert.
  const ModelConfig c = parse_model_config(R"({
    "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
    "text_config": {"model_type": "qwen3_5_moe_text", "vocab_size": 320, "hidden_size": 64,
      "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
      "layer_types": ["linear_attention", "full_attention", "linear_attention", "linear_attention"],
      "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
      "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "num_experts": 8,
      "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
      "norm_topk_prob": false, "mlp_only_layers": [1],
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}}})",
                                           "");
  EXPECT_EQ(c.family, "Qwen3.5-MoE");
  EXPECT_EQ(c.intermediate_size, 0);
  const MoeFields& f = *moe_fields(c);
  EXPECT_TRUE(f.norm_topk_prob);  // the router renormalises whatever the config says
  EXPECT_EQ(f.shared_expert_intermediate_size, 48);
  EXPECT_EQ(f.num_sparse_layers(4), 4);  // mlp_only_layers is not a Qwen3.5-MoE field
}

TEST(MoeConfig, WeightsLargerThanTheDeviceAreRefusedWithTheNumbers) {
  const std::string dir = testing::fixture_model_dir("qwen3-tiny-tied");
  const ModelConfig cfg = load_model_config(dir);
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  int64_t params = 0;
  for (const TensorView* t : ckpt.all()) params += t->numel();
  EXPECT_NO_THROW(check_weights_fit(cfg, ckpt, DType::BF16, 2 * params, "cuda:0"));
  EXPECT_NO_THROW(check_weights_fit(cfg, ckpt, DType::F32, 0, "cpu"));  // host memory: no limit
  const std::string msg = error_of([&] { check_weights_fit(cfg, ckpt, DType::BF16, 2 * params - 1, "cuda:0"); });
  EXPECT_TRUE(contains(msg, "the weights need"));
  EXPECT_TRUE(contains(msg, "cuda:0"));
  EXPECT_TRUE(contains(msg, "tensor parallelism"));
}

}  // namespace
}  // namespace pagoda

#include "io/weight_names.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

TEST(WeightNames, CanonicalNamesPassThrough) {
  for (const char* n : {"model.embed_tokens.weight", "model.layers.3.self_attn.q_proj.weight",
                        "model.norm.weight", "lm_head.weight",
                        "model.layers.0.linear_attn.A_log"}) {
    EXPECT_EQ(canonical_weight_name(n), std::optional<std::string>(n));
  }
}

TEST(WeightNames, StripsLanguageModelPrefixes) {
  EXPECT_EQ(canonical_weight_name("model.language_model.layers.5.mlp.up_proj.weight"),
            "model.layers.5.mlp.up_proj.weight");
  EXPECT_EQ(canonical_weight_name("model.language_model.embed_tokens.weight"),
            "model.embed_tokens.weight");
  EXPECT_EQ(canonical_weight_name("model.language_model.norm.weight"), "model.norm.weight");
  EXPECT_EQ(canonical_weight_name("language_model.model.layers.1.linear_attn.conv1d.weight"),
            "model.layers.1.linear_attn.conv1d.weight");
  EXPECT_EQ(canonical_weight_name("language_model.model.norm.weight"), "model.norm.weight");
  EXPECT_EQ(canonical_weight_name("language_model.lm_head.weight"), "lm_head.weight");
}

TEST(WeightNames, SkipsVisionAndMtp) {
  for (const char* n :
       {"model.visual.blocks.0.attn.qkv.weight", "visual.patch_embed.proj.weight",
        "mtp.fc.weight", "mtp.layers.0.mlp.up_proj.weight", "model.mtp.norm.weight",
        "model.language_model.visual.x", "model.language_model.mtp.fc.weight",
        "language_model.model.visual.blocks.0.norm1.weight", "language_model.mtp.fc.weight",
        "language_model.model.mtp.fc.weight", "vision_tower.blocks.0.attn.qkv.weight"}) {
    EXPECT_EQ(canonical_weight_name(n), std::nullopt) << n;
  }
}

TEST(WeightNames, DoesNotSkipLookalikes) {
  // Only whole prefix components count.
  EXPECT_EQ(canonical_weight_name("model.visualizer.weight"), "model.visualizer.weight");
  EXPECT_EQ(canonical_weight_name("mtpx.weight"), "mtpx.weight");
}

}  // namespace
}  // namespace pagoda

// Images in on CUDA (fp32; decode steps under CUDA graphs): the vision tower's merged output and the
// greedy tokens and logprobs of the multimodal fixture's reference prompts equal transformers'
// (tools/make_vision_fixtures.py), through the tower's kernels (layer_norm, gelu, rope_axes,
// segment_attention), the encoder cache and the multimodal RoPE; a batch of them at once; the prefix
// cache keyed by image. The CPU's twin of each case is vision_reference_test.cpp.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "model/vision_encoder.h"
#include "vision_fixture.h"

namespace pagoda {
namespace {

TEST(CudaVision, TowerOutputEqualsTransformers) {
  auto be = make_backend("cuda", 0, "float32");
  vision_test::expect_tower_matches(*be, 1e-3);
}

TEST(CudaVision, TokensAndLogprobsEqualTransformers) {
  Engine engine(vision_test::fixture_dir(), vision_test::engine_config("cuda", "float32"));
  const std::vector<vision_test::Out> out = vision_test::run_cases(engine, {0, 1, 2, 3, 4, 5}, /*together=*/false);
  for (size_t i = 0; i < out.size(); ++i) vision_test::expect_reference(out[i], i, 1e-3);
}

TEST(CudaVision, ABatchOfImagePromptsGivesEachItsOwnTokens) {
  Engine engine(vision_test::fixture_dir(), vision_test::engine_config("cuda", "float32"));
  const std::vector<size_t> which = {3, 2, 1, 0, 2, 5};
  const std::vector<vision_test::Out> out = vision_test::run_cases(engine, which, /*together=*/true);
  for (size_t k = 0; k < out.size(); ++k) vision_test::expect_reference(out[k], which[k], 1e-3);
}

TEST(CudaVision, TheMoeDecoderGivesTransformersTokens) {
  Engine engine(vision_test::fixture_dir(vision_test::kMoe), vision_test::engine_config("cuda", "float32"));
  const std::vector<vision_test::Out> out =
      vision_test::run_cases(engine, {0, 1, 2, 3, 4, 5}, /*together=*/true, vision_test::kMoe);
  for (size_t i = 0; i < out.size(); ++i) vision_test::expect_reference(out[i], i, 1e-3, vision_test::kMoe);
}

}  // namespace
}  // namespace pagoda

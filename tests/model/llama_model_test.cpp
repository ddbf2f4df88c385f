// The Llama 3.x forward pass alone (no scheduler): prefill each reference prompt in one step, then
// decode token by token, against Hugging Face transformers' fp32 greedy tokens and logits
// (tools/make_llama_fixtures.py; tied + q/k/v/o biases + GQA 3:1 + head_dim 20, and untied MHA;
// both with llama3 RoPE scaling), and the llama3 inverse frequencies against MODELS.md's formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <random>

#include "backend/backend.h"
#include "engine/model_runner.h"
#include "io/model_config.h"
#include "model/model.h"
#include "reference_fixture.h"
#include "single_sequence.h"

namespace pagoda {
namespace {

using testing::argmax;
using testing::fixture_model_dir;
using testing::load_reference;
using testing::SingleSequence;

class LlamaReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaReferenceTest, GreedyTokensAndLogitsMatchTransformers) {
  const std::string name = GetParam();
  auto backend = make_backend("cpu");
  const ModelConfig cfg = load_model_config(fixture_model_dir(name));
  EXPECT_EQ(cfg.family, "Llama");
  const Checkpoint ckpt = Checkpoint::open_dir(fixture_model_dir(name));
  auto model = load_model(cfg, ckpt, *backend);

  const int32_t block_size = 16, max_len = 400, num_blocks = max_len / block_size + 1;
  KvCacheShape shape{static_cast<int32_t>(cfg.num_layers), num_blocks, block_size,
                     static_cast<int32_t>(cfg.num_kv_heads), static_cast<int32_t>(cfg.head_dim),
                     DType::F32};
  PagedKvCache kv(*backend, shape);
  ModelRunner runner(*backend, *model, max_len, 1, num_blocks);

  std::mt19937 rng(11);
  const auto cases = load_reference(name);
  ASSERT_FALSE(cases.empty());
  for (const auto& rc : cases) {
    SCOPED_TRACE("prompt of " + std::to_string(rc.prompt_ids.size()) + " tokens");
    SingleSequence seq{block_size, std::vector<int32_t>(static_cast<size_t>(num_blocks))};
    std::iota(seq.blocks.begin(), seq.blocks.end(), 0);
    std::shuffle(seq.blocks.begin(), seq.blocks.end(), rng);

    std::vector<float> logits = runner.execute(seq.step(rc.prompt_ids), kv);
    ASSERT_EQ(logits.size(), rc.prompt_last_logits.size());
    EXPECT_LT(testing::max_abs_diff(logits, rc.prompt_last_logits), 1e-4f)
        << "last-position logits differ from transformers";

    std::vector<int32_t> generated;
    for (size_t t = 0; t < rc.generated_ids.size(); ++t) {
      generated.push_back(argmax(logits));
      if (t + 1 < rc.generated_ids.size()) logits = runner.execute(seq.step({generated.back()}), kv);
    }
    EXPECT_EQ(generated, rc.generated_ids);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaReferenceTest,
                         ::testing::Values("llama3-tiny-tied-bias", "llama3-tiny-untied"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// MODELS.md: wavelen = 2π/f; f/factor where wavelen > old/low; f where wavelen < old/high; between
// them (1 - s)·f/factor + s·f with s = (old/wavelen - low)/(high - low). Here in double.
TEST(LlamaRope, Llama3InverseFrequenciesFollowTheFormula) {
  RopeParams rope;
  rope.rotary_dim = 20;
  rope.theta = 10000.0f;
  rope.scaling = RopeScaling::Llama3;
  rope.factor = 8.0;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  rope.original_max_positions = 64.0;
  const std::vector<float> got = rope_inv_freq(rope, 20);
  ASSERT_EQ(got.size(), 10u);
  int kept = 0, divided = 0, blended = 0;
  for (size_t j = 0; j < got.size(); ++j) {
    const double f = std::pow(10000.0, -2.0 * static_cast<double>(j) / 20.0);
    const double wavelen = 2 * std::numbers::pi / f;
    double want = f;
    if (wavelen > 64.0) {
      want = f / 8.0;
      ++divided;
    } else if (wavelen >= 16.0) {
      const double s = (64.0 / wavelen - 1.0) / 3.0;
      want = (1 - s) * f / 8.0 + s * f;
      ++blended;
    } else {
      ++kept;
    }
    EXPECT_NEAR(got[j], want, 1e-6 * want) << "pair " << j;
  }
  EXPECT_GT(kept, 0);  // the case covers all three bands
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);

  rope.scaling = RopeScaling::None;
  const std::vector<float> plain = rope_inv_freq(rope, 20);
  for (size_t j = 0; j < plain.size(); ++j)
    EXPECT_NEAR(plain[j], std::pow(10000.0, -2.0 * static_cast<double>(j) / 20.0), 1e-7);
}

}  // namespace
}  // namespace pagoda

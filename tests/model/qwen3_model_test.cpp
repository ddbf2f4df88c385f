// The Qwen3 forward pass alone (no scheduler): prefill each reference prompt in one step, then
// decode token by token, against Hugging Face transformers' fp32 greedy tokens and logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

using testing::fixture_model_dir;
using testing::load_reference;
using testing::SingleSequence;
using testing::argmax;

class Qwen3ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Qwen3ReferenceTest, GreedyTokensAndLogitsMatchTransformers) {
  const std::string name = GetParam();
  auto backend = make_backend("cpu");
  const ModelConfig cfg = load_model_config(fixture_model_dir(name));
  const Checkpoint ckpt = Checkpoint::open_dir(fixture_model_dir(name));
  auto model = load_model(cfg, ckpt, *backend);

  const int32_t block_size = 16, max_len = 400, num_blocks = max_len / block_size + 1;
  KvCacheShape shape{static_cast<int32_t>(cfg.num_layers), num_blocks, block_size,
                     static_cast<int32_t>(cfg.num_kv_heads), static_cast<int32_t>(cfg.head_dim),
                     DType::F32};
  PagedKvCache kv(*backend, shape);
  ModelRunner runner(*backend, *model, max_len, 1, num_blocks);

  std::mt19937 rng(7);
  for (const auto& rc : load_reference(name)) {
    SCOPED_TRACE("prompt of " + std::to_string(rc.prompt_ids.size()) + " tokens");
    SingleSequence seq{block_size, std::vector<int32_t>(static_cast<size_t>(num_blocks))};
    std::iota(seq.blocks.begin(), seq.blocks.end(), 0);
    std::shuffle(seq.blocks.begin(), seq.blocks.end(), rng);

    std::vector<float> logits = runner.execute(seq.step(rc.prompt_ids), kv);
    ASSERT_EQ(logits.size(), rc.prompt_last_logits.size());
    float max_err = 0;
    for (size_t i = 0; i < logits.size(); ++i)
      max_err = std::max(max_err, std::fabs(logits[i] - rc.prompt_last_logits[i]));
    EXPECT_LT(max_err, 1e-4f) << "last-position logits differ from transformers";

    std::vector<int32_t> generated;
    for (size_t t = 0; t < rc.generated_ids.size(); ++t) {
      generated.push_back(argmax(logits));
      if (t + 1 < rc.generated_ids.size()) logits = runner.execute(seq.step({generated.back()}), kv);
    }
    EXPECT_EQ(generated, rc.generated_ids);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen3ReferenceTest,
                         ::testing::Values("qwen3-tiny-tied", "qwen3-tiny-untied-gqa4",
                                           "qwen3-tiny-mha-sharded"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace pagoda

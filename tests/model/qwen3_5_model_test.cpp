// The Qwen3.5 forward pass alone (no scheduler): prefill each reference prompt, then decode token
// by token, against Hugging Face transformers' fp32 greedy tokens and logits, for the flat
// text-only checkpoint (fp32, Hv = 2·Hk, dk ≠ dv, explicit layer_types) and the multimodal one
// (nested names, bf16 weights with fp32 A_log and norm weights, interval-rule layer types).
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
using testing::max_abs_diff;

// Everything one fixture needs: the model on the CPU, its caches and a runner.
struct Harness {
  static constexpr int32_t kBlockSize = 16, kMaxLen = 400, kNumBlocks = kMaxLen / kBlockSize + 1;
  static constexpr int32_t kSlots = 3;
  std::unique_ptr<Backend> backend;
  ModelConfig cfg;
  std::unique_ptr<Model> model;
  std::unique_ptr<PagedKvCache> kv;
  std::unique_ptr<RecurrentState> state;
  std::unique_ptr<ModelRunner> runner;

  explicit Harness(const std::string& name) : backend(make_backend("cpu")) {
    cfg = load_model_config(fixture_model_dir(name));
    const Checkpoint ckpt = Checkpoint::open_dir(fixture_model_dir(name));
    model = load_model(cfg, ckpt, *backend);
    KvCacheShape shape{static_cast<int32_t>(cfg.num_layers_of(LayerKind::FullAttention)),
                       kNumBlocks, kBlockSize, static_cast<int32_t>(cfg.num_kv_heads),
                       static_cast<int32_t>(cfg.head_dim), DType::F32};
    kv = std::make_unique<PagedKvCache>(*backend, shape);
    state = std::make_unique<RecurrentState>(
        *backend, RecurrentStateShape::for_model(cfg, kSlots, backend->activation_dtype()));
    runner = std::make_unique<ModelRunner>(*backend, *model, kMaxLen, 1, kNumBlocks);
  }

  SingleSequence new_sequence(std::mt19937& rng, int32_t slot) {
    SingleSequence seq{kBlockSize, std::vector<int32_t>(static_cast<size_t>(kNumBlocks)), slot};
    std::iota(seq.blocks.begin(), seq.blocks.end(), 0);
    std::shuffle(seq.blocks.begin(), seq.blocks.end(), rng);
    return seq;
  }
  const std::vector<float>& run(SingleSequence& seq, const std::vector<int32_t>& tokens) {
    return runner->execute(seq.step(tokens), *kv, state.get());
  }
};

class Qwen3_5ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Qwen3_5ReferenceTest, GreedyTokensAndLogitsMatchTransformers) {
  const std::string name = GetParam();
  Harness hx(name);
  EXPECT_GT(hx.cfg.num_layers_of(LayerKind::LinearAttention), 0);
  std::mt19937 rng(7);
  int32_t slot = 0;
  for (const auto& rc : load_reference(name)) {
    SCOPED_TRACE("prompt of " + std::to_string(rc.prompt_ids.size()) + " tokens");
    // Slots rotate so that every case starts from a slot a previous case left dirty.
    SingleSequence seq = hx.new_sequence(rng, slot);
    slot = (slot + 2) % Harness::kSlots;

    std::vector<float> logits = hx.run(seq, rc.prompt_ids);
    ASSERT_EQ(logits.size(), rc.prompt_last_logits.size());
    EXPECT_LT(max_abs_diff(logits, rc.prompt_last_logits), 1e-4f)
        << "last-position logits differ from transformers";

    std::vector<int32_t> generated;
    for (size_t t = 0; t < rc.generated_ids.size(); ++t) {
      generated.push_back(argmax(logits));
      if (t + 1 < rc.generated_ids.size()) logits = hx.run(seq, {generated.back()});
    }
    EXPECT_EQ(generated, rc.generated_ids);
  }
}

// Chunked prefill at odd split points (through the chunked and the recurrent form of the delta
// rule, and conv states carried across chunks) gives the one-shot logits.
TEST_P(Qwen3_5ReferenceTest, SplitPrefillMatchesTransformers) {
  const std::string name = GetParam();
  Harness hx(name);
  std::mt19937 rng(8);
  for (const auto& rc : load_reference(name)) {
    const int32_t n = static_cast<int32_t>(rc.prompt_ids.size());
    if (n < 3) continue;
    SCOPED_TRACE("prompt of " + std::to_string(n) + " tokens");
    SingleSequence seq = hx.new_sequence(rng, 1);
    std::vector<int32_t> cuts;
    for (int32_t c : {37, 101, 102, 2})
      if (c < n && (cuts.empty() || c > cuts.back())) cuts.push_back(c);
    if (cuts.empty()) cuts.push_back(n / 2);
    cuts.push_back(n);
    std::vector<float> logits;
    int32_t at = 0;
    for (int32_t c : cuts) {
      logits = hx.run(seq, std::vector<int32_t>(rc.prompt_ids.begin() + at, rc.prompt_ids.begin() + c));
      at = c;
    }
    EXPECT_LT(max_abs_diff(logits, rc.prompt_last_logits), 1e-4f);
    EXPECT_EQ(argmax(logits), rc.generated_ids.at(0));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Qwen3_5ReferenceTest,
                         ::testing::Values("qwen3_5-tiny-text", "qwen3_5-tiny-mm"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// The recurrent-state memory: conv state in the backend's activation dtype, fp32 recurrent state,
// and exactly state_bytes_per_sequence × slots allocated.
TEST(Qwen3_5Model, StateBytesFollowTheConvStateDtype) {
  const ModelConfig cfg = load_model_config(fixture_model_dir("qwen3_5-tiny-text"));
  const int64_t gdn = cfg.num_layers_of(LayerKind::LinearAttention);
  const int64_t C = cfg.conv_dim(), K = cfg.linear_conv_kernel_dim;
  const int64_t rec = cfg.linear_num_value_heads * cfg.linear_key_head_dim * cfg.linear_value_head_dim * 4;
  EXPECT_EQ(cfg.state_bytes_per_sequence(DType::F32), gdn * (C * (K - 1) * 4 + rec));
  EXPECT_EQ(cfg.state_bytes_per_sequence(DType::BF16), gdn * (C * (K - 1) * 2 + rec));
  auto backend = make_backend("cpu", 1);
  RecurrentState st(*backend, RecurrentStateShape::for_model(cfg, 5, DType::F32));
  EXPECT_EQ(static_cast<int64_t>(st.bytes()), 5 * cfg.state_bytes_per_sequence(DType::F32));
}

}  // namespace
}  // namespace pagoda

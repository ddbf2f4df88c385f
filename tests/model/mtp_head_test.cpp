// Qwen3.5's multi-token-prediction head (model/mtp_head.h) against the reference of
// tools/make_mtp_fixture.py: transformers' own decoder layer, norm and rotary embedding wired as
// vLLM's qwen3_5_mtp wires them, on the hybrid fixture with a random-weight head. For each prompt
// position t the head reads the main model's final-norm hidden state h[t] and token t + 1; its
// logits (for token t + 2) must match within 1e-4, in one pass over the prompt and in two chunks.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <numeric>

#include "backend/backend.h"
#include "engine/model_runner.h"
#include "io/model_config.h"
#include "model/model.h"
#include "reference_fixture.h"
#include "single_sequence.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;

constexpr int32_t kBlockSize = 16, kMaxLen = 64, kNumBlocks = kMaxLen / kBlockSize + 1;

TEST(MtpHead, LogitsMatchTheTransformersBuiltReference) {
  const std::string dir = fixture_model_dir("qwen3_5-tiny-mtp");
  std::ifstream in(dir + "/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  auto backend = make_backend("cpu");
  const ModelConfig cfg = load_model_config(dir);
  const Checkpoint ckpt = Checkpoint::open_dir(dir);
  auto target = load_model(cfg, ckpt, *backend);
  auto head = target->load_mtp_head(ckpt);
  const KvCacheShape target_shape{static_cast<int32_t>(cfg.num_layers_of(LayerKind::FullAttention)), kNumBlocks,
                                  kBlockSize, static_cast<int32_t>(cfg.num_kv_heads),
                                  static_cast<int32_t>(cfg.head_dim), DType::F32};
  KvCacheShape head_shape = target_shape;
  head_shape.num_layers = 1;
  ASSERT_GE(ref.at("cases").size(), 2u);
  for (const auto& c : ref.at("cases")) {
    const auto prompt = c.at("prompt").get<std::vector<int32_t>>();
    const auto expected = c.at("mtp_logits").get<std::vector<std::vector<float>>>();
    const auto n = static_cast<int32_t>(prompt.size()) - 1;
    for (int32_t chunk : {n, 7}) {
      SCOPED_TRACE("prompt of " + std::to_string(prompt.size()) + " tokens, chunks of " + std::to_string(chunk));
      PagedKvCache kv(*backend, target_shape), head_kv(*backend, head_shape);
      RecurrentState state(*backend, RecurrentStateShape::for_model(cfg, 1, backend->activation_dtype()));
      ModelRunner runner(*backend, *target, kMaxLen, 1, kNumBlocks);
      ModelRunner head_runner(*backend, *head, kMaxLen, 1, kNumBlocks, kMaxLen);
      testing::SingleSequence seq{kBlockSize, std::vector<int32_t>(kNumBlocks), 0};
      std::iota(seq.blocks.rbegin(), seq.blocks.rend(), 0);  // blocks in reverse order
      testing::SingleSequence head_seq = seq;
      std::vector<std::vector<float>> got;
      for (int32_t at = 0; at < n; at += chunk) {
        const int32_t len = std::min(chunk, n - at);
        // The main model over positions [at, at + len); the head over the same positions, fed the
        // token after each, reading the hidden state of each (rows 0..len-1 of that pass).
        runner.execute(seq.step({prompt.begin() + at, prompt.begin() + at + len}), kv, &state);
        StepBatch b = head_seq.step({prompt.begin() + at + 1, prompt.begin() + at + 1 + len});
        b.hidden_rows.resize(static_cast<size_t>(len));
        std::iota(b.hidden_rows.begin(), b.hidden_rows.end(), 0);
        b.logits_rows = b.hidden_rows;
        head->set_hidden_input(target->final_hidden(len));
        const std::vector<float>& logits = head_runner.execute(b, head_kv);
        for (int32_t r = 0; r < len; ++r)
          got.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(r) * cfg.vocab_size,
                           logits.begin() + static_cast<std::ptrdiff_t>(r + 1) * cfg.vocab_size);
      }
      ASSERT_EQ(got.size(), expected.size());
      for (size_t t = 0; t < got.size(); ++t) {
        ASSERT_EQ(got[t].size(), expected[t].size());
        float worst = 0;
        for (size_t v = 0; v < got[t].size(); ++v) worst = std::max(worst, std::abs(got[t][v] - expected[t][v]));
        EXPECT_LT(worst, 1e-4) << "position " << t;
        EXPECT_EQ(testing::argmax(got[t]), c.at("mtp_argmax")[t].get<int32_t>()) << "position " << t;
      }
    }
  }
}

}  // namespace
}  // namespace pagoda

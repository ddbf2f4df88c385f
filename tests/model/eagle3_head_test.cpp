// EAGLE-3 draft heads (model/eagle3_head.h) against the reference of tools/make_eagle3_fixtures.py:
// an fp32 torch head written from vLLM's llama_eagle3.py, fed the target's residual stream taken
// from transformers (tests/fixtures/eagle3/<head>/reference.json). For every prompt: the target's
// aux hidden states and greedy next token, the head's first-pass logits at every prompt position
// (in one pass and in chunks of 7, as a chunked prefill feeds it) and its greedy drafts in target
// ids. And the refusals: a head for another target, with a tensor missing, d2t outside the vocabulary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "backend/backend.h"
#include "core/error.h"
#include "eagle3_fixture.h"
#include "engine/model_runner.h"
#include "io/model_config.h"
#include "model/eagle3_head.h"
#include "model/model.h"
#include "reference_fixture.h"
#include "single_sequence.h"

namespace pagoda {
namespace {

using testing::eagle3_fixture_dir;
using testing::fixture_model_dir;

constexpr int32_t kBlockSize = 16, kMaxLen = 64, kNumBlocks = kMaxLen / kBlockSize + 1;

std::vector<float> to_host(Backend& be, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  be.copy_to_host(out.data(), t.data, out.size() * sizeof(float));
  return out;
}

// Worst |a - b| relative to max(1, |b|).
float worst_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(1.0f, std::abs(b[i])));
  return worst;
}

class Eagle3Reference : public ::testing::TestWithParam<std::string> {};

TEST_P(Eagle3Reference, AuxStatesFirstPassLogitsAndDraftsMatchTheTorchHead) {
  const std::string dir = eagle3_fixture_dir(GetParam());
  if (!std::filesystem::exists(dir + "/reference.json"))
    GTEST_SKIP() << "tests/fixtures/eagle3/" << GetParam()
                 << "/reference.json is missing: make it on the GPU machine with "
                    "python3 tools/make_eagle3_fixtures.py --out tests/fixtures/eagle3";
  std::ifstream in(dir + "/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  const std::string target_dir = std::string(PAGODA_SOURCE_DIR) + "/" + ref.at("target").get<std::string>();
  auto backend = make_backend("cpu");
  const ModelConfig cfg = load_model_config(target_dir);
  const Checkpoint ckpt = Checkpoint::open_dir(target_dir);
  auto target = load_model(cfg, ckpt, *backend);
  Eagle3Head head = load_eagle3_head(dir, *target, *backend);
  EXPECT_EQ(head.aux_layers, ref.at("aux_layer_ids").get<std::vector<int>>());
  target->set_aux_hidden_layers(head.aux_layers);
  const ModelConfig& hc = head.model->config();
  const KvCacheShape target_shape{static_cast<int32_t>(cfg.num_layers), kNumBlocks, kBlockSize,
                                  static_cast<int32_t>(cfg.num_kv_heads), static_cast<int32_t>(cfg.head_dim),
                                  DType::F32};
  const KvCacheShape head_shape{1, kNumBlocks, kBlockSize, static_cast<int32_t>(hc.num_kv_heads),
                                static_cast<int32_t>(hc.head_dim), DType::F32};
  const int64_t Vd = hc.vocab_size;
  ASSERT_GE(ref.at("cases").size(), 3u);
  for (const auto& c : ref.at("cases")) {
    const auto prompt = c.at("prompt").get<std::vector<int32_t>>();
    const auto expected = c.at("first_pass_logits").get<std::vector<std::vector<float>>>();
    const auto n = static_cast<int32_t>(prompt.size());
    const int32_t next = c.at("target_next").get<int32_t>();
    std::vector<int32_t> fed(prompt.begin() + 1, prompt.end());
    fed.push_back(next);
    for (int32_t chunk : {n, 7}) {
      SCOPED_TRACE("prompt of " + std::to_string(n) + " tokens, chunks of " + std::to_string(chunk));
      PagedKvCache kv(*backend, target_shape), head_kv(*backend, head_shape);
      ModelRunner runner(*backend, *target, kMaxLen, 1, kNumBlocks);
      ModelRunner head_runner(*backend, *head.model, kMaxLen, 1, kNumBlocks, kMaxLen);
      testing::SingleSequence seq{kBlockSize, std::vector<int32_t>(kNumBlocks), 0};
      std::iota(seq.blocks.rbegin(), seq.blocks.rend(), 0);  // blocks in reverse order
      testing::SingleSequence head_seq = seq;
      std::vector<std::vector<float>> got;
      int32_t len = 0;
      for (int32_t at = 0; at < n; at += chunk) {
        len = std::min(chunk, n - at);
        // The target over positions [at, at + len); the head over the same positions, fed the
        // token after each and the target's aux states of each (rows 0..len-1 of that pass).
        const std::vector<float>& logits = runner.execute(seq.step({prompt.begin() + at, prompt.begin() + at + len}), kv);
        if (at + len == n) {
          EXPECT_EQ(testing::argmax(logits), next) << "the target's greedy token after the prompt";
          const auto aux_ref = c.at("aux_hidden_last").get<std::vector<std::vector<float>>>();
          const std::vector<Tensor> aux = target->aux_hidden(len);
          ASSERT_EQ(aux.size(), aux_ref.size());
          for (size_t a = 0; a < aux.size(); ++a)
            EXPECT_LT(worst_diff(to_host(*backend, aux[a].rows(len - 1, len)), aux_ref[a]), 1e-4)
                << "aux layer " << head.aux_layers[a];
        }
        StepBatch b = head_seq.step({fed.begin() + at, fed.begin() + at + len});
        b.hidden_rows.resize(static_cast<size_t>(len));
        std::iota(b.hidden_rows.begin(), b.hidden_rows.end(), 0);
        b.logits_rows = b.hidden_rows;
        head.model->set_aux_hidden_input(target->aux_hidden(len));
        const std::vector<float>& hl = head_runner.execute(b, head_kv);
        for (int32_t r = 0; r < len; ++r)
          got.emplace_back(hl.begin() + static_cast<std::ptrdiff_t>(r) * Vd,
                           hl.begin() + static_cast<std::ptrdiff_t>(r + 1) * Vd);
      }
      ASSERT_EQ(got.size(), expected.size());
      for (size_t t = 0; t < got.size(); ++t) {
        ASSERT_EQ(got[t].size(), expected[t].size());
        EXPECT_LT(worst_diff(got[t], expected[t]), 1e-4) << "position " << t;
        EXPECT_EQ(testing::argmax(got[t]), c.at("first_pass_argmax")[t].get<int32_t>()) << "position " << t;
      }
      // The drafts: the last row's argmax, then passes fed each draft (a target id) and the head's
      // own pre-norm state of the row before, at the positions after the prompt.
      std::vector<int32_t> ids, tokens;
      int32_t d = testing::argmax(got.back());
      int32_t prev_rows = len, prev_row = len - 1;
      const auto k = c.at("draft_tokens").size();
      for (size_t j = 0; j < k; ++j) {
        ids.push_back(d);
        tokens.push_back(head.draft_to_target[static_cast<size_t>(d)]);
        if (j + 1 == k) break;
        StepBatch b = head_seq.step({tokens.back()});
        b.hidden_rows = {prev_row};
        head.model->set_hidden_input(head.model->draft_hidden_rows(prev_rows));
        d = testing::argmax(head_runner.execute(b, head_kv));
        prev_rows = 1;
        prev_row = 0;
      }
      EXPECT_EQ(ids, c.at("draft_ids").get<std::vector<int32_t>>());
      EXPECT_EQ(tokens, c.at("draft_tokens").get<std::vector<int32_t>>());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Eagle3Reference, ::testing::Values("qwen3-gqa4-eagle3", "llama3-untied-eagle3"),
                         testing::FixtureParamName());

// The committed heads load whatever their reference says (they exist before reference.json does).
TEST(Eagle3Head, TheCommittedHeadsLoadWithTheirLayersAndDraftVocabularies) {
  auto backend = make_backend("cpu");
  struct Case {
    const char* head;
    const char* target;
    std::vector<int> aux;
    int64_t draft_vocab;
  };
  for (const Case& c : {Case{"qwen3-gqa4-eagle3", "qwen3-tiny-untied-gqa4", {0, 1, 2}, 64},
                        Case{"llama3-untied-eagle3", "llama3-tiny-untied", {0, 2, 3}, 96}}) {
    SCOPED_TRACE(c.head);
    auto target = load_model(fixture_model_dir(c.target), *backend);
    const Eagle3Head head = load_eagle3_head(eagle3_fixture_dir(c.head), *target, *backend);
    EXPECT_EQ(head.aux_layers, c.aux);
    EXPECT_EQ(head.model->config().vocab_size, c.draft_vocab);
    ASSERT_EQ(static_cast<int64_t>(head.draft_to_target.size()), c.draft_vocab);
    // Sorted target ids with 0, 1, 2 first, as the tool makes them: a non-trivial d2t.
    EXPECT_EQ(head.draft_to_target[2], 2);
    EXPECT_GT(head.draft_to_target.back(), c.draft_vocab);
    EXPECT_TRUE(std::is_sorted(head.draft_to_target.begin(), head.draft_to_target.end()));
  }
}

// ---- refusals ----------------------------------------------------------------------------------

std::string load_error(const std::string& target_name, const testing::RandomEagle3Head& o) {
  io_test::TempDir dir;
  auto backend = make_backend("cpu");
  const ModelConfig cfg = load_model_config(fixture_model_dir(target_name));
  testing::write_random_eagle3_head(dir.path(), cfg, o);
  auto target = load_model(fixture_model_dir(target_name), *backend);
  return io_test::error_of([&] {
    const Eagle3Head head = load_eagle3_head(dir.path(), *target, *backend);
    target->set_aux_hidden_layers(head.aux_layers);
  });
}

TEST(Eagle3Head, AHeadWhoseFcDoesNotReadThreeTargetLayersIsRefused) {
  testing::RandomEagle3Head o;
  o.aux_ids = {0, 1, 2};
  o.fc_cols = 3 * 64 + 8;  // qwen3-tiny-tied: hidden 64
  const std::string msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "EAGLE-3 head in ")) << msg;
  EXPECT_TRUE(io_test::contains(msg, "tensor 'fc.weight' is [64, 200], expected [64, 192]")) << msg;
  EXPECT_TRUE(io_test::contains(msg, "the head was trained for another target")) << msg;
}

TEST(Eagle3Head, AMissingTensorIsNamed) {
  for (const char* name : {"midlayer.hidden_norm.weight", "lm_head.weight", "fc.weight"}) {
    testing::RandomEagle3Head o;
    o.aux_ids = {0, 1, 2};
    o.drop = name;
    const std::string msg = load_error("qwen3-tiny-tied", o);
    EXPECT_TRUE(io_test::contains(msg, std::string("has no tensor '") + name + "'")) << msg;
    EXPECT_TRUE(io_test::contains(msg, "is it an EAGLE-3 checkpoint?")) << msg;
  }
}

TEST(Eagle3Head, D2tOutsideTheVocabularyIsRefused) {
  testing::RandomEagle3Head o;
  o.aux_ids = {0, 1, 2};
  o.bad_d2t = 5;
  const std::string msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "tensor 'd2t' maps draft token 5 to target token")) << msg;
  EXPECT_TRUE(io_test::contains(msg, "outside the target's vocabulary [0, 512)")) << msg;
  // Without d2t a draft vocabulary smaller than the target's cannot be mapped.
  o.bad_d2t = -1;
  o.drop = "d2t";
  EXPECT_TRUE(io_test::contains(load_error("qwen3-tiny-tied", o), "has no tensor 'd2t' but its draft_vocab_size"));
}

TEST(Eagle3Head, AHeadForAnotherTargetOrLayersTheTargetLacksIsRefused) {
  testing::RandomEagle3Head o;
  // The default layers (2, 1, -1) of a 2-layer target: -1 is not a layer.
  EXPECT_TRUE(io_test::contains(load_error("qwen3-tiny-tied", o), "reads the target's layers [-1, 1, 2]"));
  o.aux_ids = {0, 1, 5};
  const std::string msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "but the target has 2 layers (ids 0..2)")) << msg;
  // A head made for a target of another hidden size or vocabulary.
  io_test::TempDir dir;
  auto backend = make_backend("cpu");
  o.aux_ids = {0, 1, 2};
  testing::write_random_eagle3_head(dir.path(), load_model_config(fixture_model_dir("qwen3-tiny-tied")), o);
  auto other = load_model(fixture_model_dir("qwen3-tiny-untied-gqa4"), *backend);  // hidden 96, vocab 256
  const std::string vocab = io_test::error_of([&] { load_eagle3_head(dir.path(), *other, *backend); });
  EXPECT_TRUE(io_test::contains(vocab, "was made for a vocabulary of 512 tokens")) << vocab;
}

TEST(Eagle3Head, AnEagle1HeadOrAnotherModelIsRefusedByName) {
  testing::RandomEagle3Head o;
  o.aux_ids = {0, 1, 2};
  o.architecture = "EagleLlamaForCausalLM";
  std::string msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "is an EAGLE-1 head (EagleLlamaForCausalLM)")) << msg;
  o.architecture = "LlamaForCausalLM";
  msg = load_error("qwen3-tiny-tied", o);
  EXPECT_TRUE(io_test::contains(msg, "is not an EAGLE-3 head")) << msg;
}

TEST(Eagle3Head, AHybridTargetSaysItCannotExportAuxStates) {
  auto backend = make_backend("cpu");
  auto target = load_model(fixture_model_dir("qwen3_5-tiny-text"), *backend);
  const std::string msg = io_test::error_of([&] { target->set_aux_hidden_layers({0, 1, 2}); });
  EXPECT_TRUE(io_test::contains(msg, "pagoda exports them from dense decoders")) << msg;
  EXPECT_TRUE(io_test::contains(msg, "Qwen3_5ForCausalLM")) << msg;
}

}  // namespace
}  // namespace pagoda

// Every family against Hugging Face transformers' fp32 reference: each fixture directory under
// tests/fixtures/models/ made by tools/make_llama_fixtures.py, tools/make_family_fixtures.py or
// tools/make_moe_fixtures.py or tools/make_fp8_fixtures.py (FP8 weights against their dequantized fp32 values)
// (found at run time; a new family's fixtures join without touching this file) runs
//  (a) through the model alone: prefill each prompt in one step, then decode token by token with
//      shuffled KV blocks (and a recurrent-state slot for hybrid models); greedy tokens identical,
//      last-prompt logits within 1e-4;
//  (b) through the engine: all prompts at once, a token budget that forces chunked prefill and a
//      KV pool too small for all of them (preemption and recompute); greedy tokens identical.
// A fixture whose architecture no registered family claims fails loudly.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <random>

#include "backend/backend.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "io/model_config.h"
#include "kv/recurrent_state.h"
#include "model/model.h"
#include "model/registry.h"
#include "engine_reference_run.h"
#include "reference_fixture.h"
#include "single_sequence.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

using testing::argmax;
using testing::fixture_model_dir;
using testing::expect_engine_matches_reference;
using testing::load_reference;
using testing::SingleSequence;

// The scripts whose fixtures this harness runs (the Qwen3 / Qwen3.5 ones have their own tests).
bool made_by_family_script(const std::string& dir) {
  std::ifstream in(dir + "/reference.json");
  if (!in) return false;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("made_by") || !j["made_by"].is_string()) return false;
  const std::string by = j["made_by"].get<std::string>();
  return by.find("make_llama_fixtures.py") != std::string::npos ||
         by.find("make_family_fixtures.py") != std::string::npos ||
         by.find("make_moe_fixtures.py") != std::string::npos ||
         by.find("make_fp8_fixtures.py") != std::string::npos ||
         by.find("make_int4_fixtures.py") != std::string::npos;
}

std::vector<std::string> family_fixtures() {
  std::vector<std::string> names;
  const std::filesystem::path root = std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/models";
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    if (e.is_directory() && made_by_family_script(e.path().string()))
      names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

std::string reference_architecture(const std::string& name) {
  std::ifstream in(fixture_model_dir(name) + "/reference.json");
  return nlohmann::json::parse(in).at("architecture").get<std::string>();
}

TEST(FamilyFixtures, EveryFixtureHasARegisteredFamily) {
  const std::vector<std::string> names = family_fixtures();
  EXPECT_GE(names.size(), 9u) << "fixtures of Llama, Qwen2, Mistral and Gemma 3 expected";
  for (const std::string& name : names) {
    const std::string arch = reference_architecture(name);
    bool found = false;
    for (const ModelFamily& f : model_families()) found = found || arch == f.architecture;
    EXPECT_TRUE(found) << "fixture " << name << " is of architecture " << arch
                       << ", which no family in src/model/registry.cpp registers";
  }
}

class FamilyReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyReferenceTest, ModelAloneMatchesTransformers) {
  const std::string name = GetParam();
  auto backend = make_backend("cpu");
  const ModelConfig cfg = load_model_config(fixture_model_dir(name));
  EXPECT_EQ(cfg.architecture, reference_architecture(name));
  const Checkpoint ckpt = Checkpoint::open_dir(fixture_model_dir(name));
  auto model = load_model(cfg, ckpt, *backend);

  const auto cases = load_reference(name);
  ASSERT_FALSE(cases.empty());
  int32_t longest = 0;
  for (const auto& rc : cases)
    longest = std::max(longest, static_cast<int32_t>(rc.prompt_ids.size() + rc.generated_ids.size()));
  const int32_t block_size = 16, num_blocks = longest / block_size + 1;
  KvCacheShape shape{static_cast<int32_t>(cfg.num_layers_of(LayerKind::FullAttention)), num_blocks,
                     block_size, static_cast<int32_t>(cfg.num_kv_heads),
                     static_cast<int32_t>(cfg.head_dim), DType::F32};
  PagedKvCache kv(*backend, shape);
  ModelRunner runner(*backend, *model, longest, 1, num_blocks);
  // Hybrid models: one recurrent-state slot, cleared by each prompt's first step (no initial state).
  std::unique_ptr<RecurrentState> state;
  if (cfg.num_layers_of(LayerKind::LinearAttention) > 0)
    state = std::make_unique<RecurrentState>(*backend, RecurrentStateShape::for_model(cfg, 1, DType::F32));

  std::mt19937 rng(11);
  for (const auto& rc : cases) {
    SCOPED_TRACE("prompt of " + std::to_string(rc.prompt_ids.size()) + " tokens");
    SingleSequence seq{block_size, std::vector<int32_t>(static_cast<size_t>(num_blocks))};
    std::iota(seq.blocks.begin(), seq.blocks.end(), 0);
    std::shuffle(seq.blocks.begin(), seq.blocks.end(), rng);
    if (state) seq.state_slot = 0;

    std::vector<float> logits = runner.execute(seq.step(rc.prompt_ids), kv, state.get());
    ASSERT_EQ(logits.size(), rc.prompt_last_logits.size());
    EXPECT_LT(testing::max_abs_diff(logits, rc.prompt_last_logits), 1e-4f)
        << "last-position logits differ from transformers";

    std::vector<int32_t> generated;
    for (size_t t = 0; t < rc.generated_ids.size(); ++t) {
      generated.push_back(argmax(logits));
      if (t + 1 < rc.generated_ids.size()) logits = runner.execute(seq.step({generated.back()}), kv, state.get());
    }
    EXPECT_EQ(generated, rc.generated_ids);
  }
}

TEST_P(FamilyReferenceTest, EngineWithChunkedPrefillAndPreemptionMatchesTransformers) {
  const std::string name = GetParam();
  // The engine refuses sequences beyond max_position_embeddings (the model-alone test runs them).
  const int64_t max_positions = load_model_config(fixture_model_dir(name)).max_position_embeddings;
  std::vector<testing::ReferenceCase> cases;
  for (const auto& rc : load_reference(name))
    if (static_cast<int64_t>(rc.prompt_ids.size() + rc.generated_ids.size()) <= max_positions)
      cases.push_back(rc);
  ASSERT_GE(cases.size(), 3u);
  constexpr int32_t kBlock = 16;  // the engine's default block size
  int32_t longest = 0, blocks_for_all = 0;
  for (const auto& rc : cases) {
    const auto len = static_cast<int32_t>(rc.prompt_ids.size() + rc.generated_ids.size());
    longest = std::max(longest, len);
    blocks_for_all += (len + kBlock - 1) / kBlock;
  }
  EngineConfig config;
  config.device = "cpu";
  // Every prompt admitted at once, so that the younger ones are preempted when the older grow.
  config.max_num_seqs = static_cast<int32_t>(cases.size());
  config.max_num_batched_tokens = 32;  // longer prompts prefill in chunks
  config.max_model_len = static_cast<int32_t>(
      std::min<int64_t>((longest + kBlock - 1) / kBlock * kBlock, max_positions));
  // Room for the longest sequence and a little more: far fewer blocks than all of them need.
  config.num_gpu_blocks_override = config.max_model_len / kBlock + 2;
  ASSERT_LT(config.num_gpu_blocks_override, blocks_for_all);
  Engine engine(fixture_model_dir(name), config);
  expect_engine_matches_reference(engine, cases);
  EXPECT_GT(engine.scheduler().num_preemptions(), 0) << "the test should force preemption";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FamilyReferenceTest, ::testing::ValuesIn(family_fixtures()),
                         test_name);

}  // namespace
}  // namespace pagoda

// The executor/worker seam (engine/executor.h): an engine whose executor drives two CPU workers,
// each with the whole model, its own KV pool, recurrent-state pool and runner, gives the tokens of
// the one-worker engine. The logits of step s come from worker s mod 2, so a worker whose cache,
// snapshot or draft-rollback bookkeeping went astray changes the tokens: chunked prefill,
// preemption, prefix-cache hits (with Gated DeltaNet state snapshots) and speculative decoding with
// rejected drafts (state restored on every worker) all run through it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "prefix_caching_scenarios.h"
#include "speculative_scenarios.h"

namespace pagoda {
namespace {

class ExecutorTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ExecutorTest, TwoWorkersGiveTheOneWorkerTokensThroughChunksPreemptionAndCaching) {
  const std::vector<testing::Request> reqs = testing::shared_prefix_requests();
  testing::Knobs k;
  k.together = true;
  k.max_model_len = 200;
  k.num_blocks = 16;  // preemption and eviction
  k.snapshot_fraction = 0.5;
  k.max_tokens = 12;
  const testing::RunOutput one = testing::run(GetParam(), reqs, k);
  k.workers = 2;
  const testing::RunOutput two = testing::run(GetParam(), reqs, k);
  testing::expect_same(two, one);
  EXPECT_GT(two.preemptions, 0) << "the pool should force preemption";
  EXPECT_GT(two.hits, 0);
}

TEST_P(ExecutorTest, TwoWorkersGiveTheOneWorkerTokensWithRejectedDrafts) {
  const auto prompts = testing::spec::prompts();
  testing::spec::Knobs k;
  const testing::spec::RunOutput plain = testing::spec::run(GetParam(), prompts, k);
  k.k = 3;
  k.workers = 2;
  const testing::spec::RunOutput two = testing::spec::run(GetParam(), prompts, k);
  testing::spec::expect_same(two, plain);
  EXPECT_GT(two.stats.spec_num_drafts, 0);
  EXPECT_LT(two.stats.spec_num_accepted_tokens, two.stats.spec_num_draft_tokens) << "some drafts must be rejected";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ExecutorTest, ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(Executor, ReplicatedWorkersRunOnTheCpuOnly) {
  EngineConfig config;
  config.device = "vulkan";
  config.replicated_workers = 2;
  try {
    Engine engine(testing::fixture_model_dir("qwen3-tiny-tied"), config);
    ADD_FAILURE() << "replicated workers on vulkan were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run on the cpu only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pagoda

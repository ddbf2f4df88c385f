// The engine on the Vulkan backend (Mesa's lavapipe in CI, validation layer on): greedy tokens and
// logprobs equal the CPU backend's on the Qwen3 and Qwen3.5 fixtures, all requests queued at once
// through chunked prefill (a 32-token budget), preemption (a 16-block pool, asserted) and prefix
// caching (hits asserted; the hybrid's state snapshots are device copies). Where this build or
// machine has no Vulkan device the tests skip, naming why — never counted as passed.
#include <gtest/gtest.h>

#include "../support/vulkan_device.h"
#include "prefix_caching_scenarios.h"

namespace pagoda {
namespace {

using namespace pagoda::testing;

Knobs crowded(const std::string& device) {
  Knobs k;
  k.device = device;
  k.dtype = "float32";
  k.together = true;
  k.max_model_len = 200;
  k.num_blocks = 16;
  k.snapshot_fraction = 0.5;
  k.max_tokens = 8;
  return k;
}

class VulkanEngine : public ::testing::TestWithParam<const char*> {};

TEST_P(VulkanEngine, GreedyTokensEqualTheCpusThroughChunksPreemptionAndPrefixCaching) {
  const std::string why = vulkan_missing();
  if (!why.empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  const std::vector<Request> reqs = shared_prefix_requests();
  Knobs cpu = crowded("cpu");
  cpu.caching = false;
  const RunOutput want = run(GetParam(), reqs, cpu);
  const RunOutput got = run(GetParam(), reqs, crowded("vulkan"));
  expect_same(got, want);
  EXPECT_GT(got.preemptions, 0);
  EXPECT_GT(got.hits, 0);
}

TEST_P(VulkanEngine, OneAtATimeGivesTheCpusTokens) {
  const std::string why = vulkan_missing();
  if (!why.empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  std::vector<Request> reqs = shared_prefix_requests();
  reqs.resize(10);
  Knobs cpu;
  cpu.caching = false;
  Knobs vk = cpu;
  vk.device = "vulkan";
  expect_same(run(GetParam(), reqs, vk), run(GetParam(), reqs, cpu));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VulkanEngine, ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text"),
                         FixtureParamName());

}  // namespace
}  // namespace pagoda

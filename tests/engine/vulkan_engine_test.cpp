// The engine on the Vulkan backend (Mesa's lavapipe in CI, validation layer on): greedy tokens and
// logprobs equal the CPU backend's on a fixture of every family, all requests queued at once
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
  k.max_model_len = 200;  // within every fixture's max_position_embeddings (256 at the least)
  k.num_blocks = 16;
  k.snapshot_fraction = 0.5;
  k.max_tokens = 8;
  return k;
}

class VulkanEngine : public ::testing::TestWithParam<const char*> {};

TEST_P(VulkanEngine, GreedyTokensEqualTheCpusThroughChunksPreemptionAndPrefixCaching) {
  const std::string why = vulkan_missing();
  if (!why.empty()) GTEST_SKIP() << "no Vulkan device: " << why;
  const std::vector<Request> reqs = shared_prefix_requests_in_every_vocabulary();
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
  std::vector<Request> reqs = shared_prefix_requests_in_every_vocabulary();
  reqs.resize(10);
  Knobs cpu;
  cpu.caching = false;
  cpu.max_model_len = 200;
  Knobs vk = cpu;
  vk.device = "vulkan";
  expect_same(run(GetParam(), reqs, vk), run(GetParam(), reqs, cpu));
}

// Every family: dense Qwen3, the Qwen3.5 hybrid, Llama 3 (biases, untied), Qwen2 (YaRN), Mistral
// (sliding window), Gemma 3 (soft-capping, sliding layers), Phi-3 (fused projections), both MoEs.
INSTANTIATE_TEST_SUITE_P(Fixtures, VulkanEngine,
                         ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text", "llama3-tiny-tied-bias",
                                           "llama3-tiny-untied", "qwen2-tiny-yarn", "mistral-tiny-swa",
                                           "gemma3-tiny-softcap", "phi3-tiny-fused", "qwen3_moe-tiny-dense-layer",
                                           "qwen3_5_moe-tiny-mm"),
                         FixtureParamName());

}  // namespace
}  // namespace pagoda

// Tensor parallelism on GPUs through NCCL (run by hand on a machine of 2 or 4 GPUs,
// tools/device/tp_gpu.sh): the CPU test's scenarios (tensor_parallel_test.cpp) in fp32 with CUDA
// graphs on — every family fixture at 2 ranks (and 4 where its heads allow and the GPUs exist) gives
// the one-GPU greedy tokens and logprobs through chunked prefill, preemption and prefix caching, and
// speculative decoding with rejected drafts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/devices.h"
#include "prefix_caching_scenarios.h"
#include "speculative_scenarios.h"

namespace pagoda {
namespace {

struct TpCase {
  const char* fixture;
  std::vector<int32_t> sizes;
};

void PrintTo(const TpCase& c, std::ostream* os) { *os << c.fixture; }

class CudaTensorParallel : public ::testing::TestWithParam<TpCase> {};

// The shared-prefix requests in the smallest fixture vocabulary.
std::vector<testing::Request> small_vocabulary_requests() {
  std::vector<testing::Request> reqs = testing::shared_prefix_requests();
  for (testing::Request& r : reqs)
    for (int32_t& t : r.prompt) t %= 256;
  return reqs;
}

// fp32 on cuda through chunked prefill, preemption (16 blocks) and prefix-cache hits.
testing::Knobs caching_knobs() {
  testing::Knobs k;
  k.device = "cuda";
  k.dtype = "float32";
  k.together = true;
  k.max_model_len = 200;
  k.num_blocks = 16;
  k.snapshot_fraction = 0.5;
  k.max_tokens = 10;
  return k;
}

TEST_P(CudaTensorParallel, RanksGiveTheOneGpuTokensThroughChunksPreemptionAndCaching) {
  ASSERT_GE(cuda_device_count(), 2) << "tensor parallelism needs 2 GPUs (a machine of kind nvidia-h200-x2 or more)";
  const std::vector<testing::Request> reqs = small_vocabulary_requests();
  testing::Knobs k = caching_knobs();
  const testing::RunOutput one = testing::run(GetParam().fixture, reqs, k);
  for (const int32_t tp : GetParam().sizes) {
    if (tp > cuda_device_count()) continue;  // a 2-GPU machine runs the 2-rank cases
    SCOPED_TRACE("tensor parallel size " + std::to_string(tp));
    k.tp = tp;
    const testing::RunOutput many = testing::run(GetParam().fixture, reqs, k);
    testing::expect_same(many, one, 1e-4);
    EXPECT_GT(many.preemptions, 0);
    EXPECT_GT(many.hits, 0);
  }
  // Every other step timed on the driver (--profile-steps 2) runs eagerly there; the other ranks
  // must run it eagerly too, not replay a graph of a padded batch whose all-reduces differ in size
  // (that hung the 27B throughput run).
  if (cuda_device_count() >= 2) {
    SCOPED_TRACE("tensor parallel size 2, --profile-steps 2");
    k.tp = 2;
    k.profile_steps = 2;
    testing::expect_same(testing::run(GetParam().fixture, reqs, k), one, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, CudaTensorParallel,
    ::testing::Values(TpCase{"qwen3-tiny-tied", {2, 4}}, TpCase{"qwen3-tiny-untied-gqa4", {2, 4}},
                      TpCase{"qwen3_5-tiny-text", {2, 4}}, TpCase{"llama3-tiny-tied-bias", {2}},
                      TpCase{"qwen2-tiny-bias", {2, 4}}, TpCase{"mistral-tiny-swa", {2, 4}},
                      TpCase{"gemma3-tiny-text", {2, 4}}, TpCase{"phi3-tiny-fused", {2}},
                      TpCase{"qwen3_moe-tiny-dense-layer", {2, 4}}, TpCase{"qwen3_5_moe-tiny-mm", {2, 4}}),
    [](const auto& info) {
      std::string n = info.param.fixture;
      for (char& c : n)
        if (c == '-') c = '_';
      return n;
    });

// --enable-expert-parallel on GPUs: experts whole per rank (both checkpoint layouts), each rank's
// grouped GEMMs over its window of the routed rows, the rest zero (a memset captured in the graphs),
// in fp32 with graphs = one GPU.
TEST(CudaTensorParallelExperts, RanksHoldingWholeExpertsGiveTheOneGpuTokens) {
  ASSERT_GE(cuda_device_count(), 2) << "expert parallelism needs 2 GPUs (a machine of kind nvidia-h200-x2 or more)";
  const std::vector<testing::Request> reqs = small_vocabulary_requests();
  testing::Knobs k = caching_knobs();
  for (const char* fixture : {"qwen3_moe-tiny-dense-layer", "qwen3_5_moe-tiny-mm", "qwen3_5_moe-tiny-mm-relayout"}) {
    SCOPED_TRACE(fixture);
    k.tp = 1;
    k.ep = false;
    const testing::RunOutput one = testing::run(fixture, reqs, k);
    k.tp = 2;
    k.ep = true;
    const testing::RunOutput two = testing::run(fixture, reqs, k);
    testing::expect_same(two, one, 1e-4);
    EXPECT_GT(two.preemptions, 0);
    EXPECT_GT(two.hits, 0);
  }
}

TEST(CudaTensorParallelSpeculative, RanksGiveTheOneGpuTokensWithRejectedDrafts) {
  ASSERT_GE(cuda_device_count(), 2) << "tensor parallelism needs 2 GPUs";
  const auto prompts = testing::spec::prompts();
  for (const char* fixture : {"qwen3-tiny-tied", "qwen3_5-tiny-text"}) {
    SCOPED_TRACE(fixture);
    testing::spec::Knobs k;
    k.device = "cuda";
    k.dtype = "float32";
    const testing::spec::RunOutput plain = testing::spec::run(fixture, prompts, k);
    k.k = 3;
    k.tp = 2;
    const testing::spec::RunOutput two = testing::spec::run(fixture, prompts, k);
    testing::spec::expect_same(two, plain);
    EXPECT_LT(two.stats.spec_num_accepted_tokens, two.stats.spec_num_draft_tokens);
  }
}

}  // namespace
}  // namespace pagoda

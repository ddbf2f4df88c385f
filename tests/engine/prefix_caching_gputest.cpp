// Prefix caching on the CUDA backend (fp32, CUDA graphs on): the scenarios of the CPU test
// (prefix_caching_scenarios.h) — shared prefixes around block boundaries one after another, all at
// once with chunked prefill, preemption and eviction, and with colliding hashes — give the same
// greedy tokens and logprobs with the cache on and off, on a dense and a hybrid fixture. The
// hybrid's state snapshots are device copies in stream order around (graph-replayed) steps.
#include <gtest/gtest.h>

#include "prefix_caching_scenarios.h"

namespace pagoda {
namespace {

using namespace pagoda::testing;

Knobs on_cuda() {
  Knobs k;
  k.device = "cuda";
  k.dtype = "float32";
  return k;
}

class CudaPrefixCaching : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaPrefixCaching, OneAfterAnotherGivesTheSameTokensAsWithoutTheCache) {
  const std::vector<Request> reqs = shared_prefix_requests();
  Knobs off = on_cuda();
  off.caching = false;
  const RunOutput without = run(GetParam(), reqs, off);
  const RunOutput with = run(GetParam(), reqs, on_cuda());
  expect_same(with, without);
  EXPECT_GT(with.hits, with.queries / 3);
}

TEST_P(CudaPrefixCaching, AllAtOnceWithChunksPreemptionAndEvictionGivesTheSameTokens) {
  const std::vector<Request> reqs = shared_prefix_requests();
  Knobs k = on_cuda();
  k.together = true;
  k.max_model_len = 200;
  k.num_blocks = 16;
  k.snapshot_fraction = 0.5;
  k.max_tokens = 12;
  Knobs off = k;
  off.caching = false;
  const RunOutput without = run(GetParam(), reqs, off);
  const RunOutput with = run(GetParam(), reqs, k);
  expect_same(with, without);
  EXPECT_GT(with.preemptions, 0);
  EXPECT_GT(with.hits, 0);
}

TEST_P(CudaPrefixCaching, HashCollisionsStillGiveTheRightTokens) {
  const std::vector<Request> reqs = shared_prefix_requests();
  Knobs off = on_cuda();
  off.caching = false;
  Knobs k = on_cuda();
  k.hash_bits = 2;
  expect_same(run(GetParam(), reqs, k), run(GetParam(), reqs, off));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaPrefixCaching, ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text"),
                         FixtureParamName());

}  // namespace
}  // namespace pagoda

// Prefix caching on the CUDA backend (fp32, CUDA graphs on): the scenarios of the CPU test
// (prefix_caching_scenarios.h) — shared prefixes around block boundaries one after another, all at
// once with chunked prefill, preemption and eviction, and with colliding hashes — give the same
// greedy tokens and logprobs with the cache on and off, on a dense and a hybrid fixture. The
// hybrid's state snapshots are device copies in stream order around (graph-replayed) steps. With
// the FP8 KV cache as well.
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

// The FP8 KV cache (--kv-cache-dtype fp8): a hit reads back the e4m3 values the miss wrote, so the
// cache on and off agree token for token through chunks, preemption and eviction; and the cache
// does hold e4m3 values (the tokens differ from the fp32 cache's somewhere).
TEST_P(CudaPrefixCaching, Fp8KvCacheGivesTheSameTokensWithAndWithoutTheCache) {
  const std::vector<Request> reqs = shared_prefix_requests();
  Knobs k = on_cuda();
  k.together = true;
  k.max_model_len = 200;
  k.num_blocks = 16;
  k.snapshot_fraction = 0.5;
  k.max_tokens = 12;
  k.kv_cache_dtype = "fp8";
  Knobs off = k;
  off.caching = false;
  const RunOutput without = run(GetParam(), reqs, off);
  const RunOutput with = run(GetParam(), reqs, k);
  // Logprobs within 1e-2, not 1e-3: on the hybrid, a hit resumes the Gated DeltaNet state from a
  // snapshot where the miss runs through, so the keys differ by fp32 rounding, and now and then one
  // lands on the other side of an e4m3 rounding boundary (a step of 1/8 relative). Seen on an H200:
  // 1.5e-3 on qwen3_5-tiny-text, tokens equal.
  expect_same(with, without, 1e-2);
  EXPECT_GT(with.preemptions, 0);
  EXPECT_GT(with.hits, 0);
  Knobs fp32 = off;
  fp32.kv_cache_dtype = "auto";
  const RunOutput exact = run(GetParam(), reqs, fp32);
  bool differs = false;
  for (size_t i = 0; i < exact.results.size() && !differs; ++i)
    differs = exact.results[i].tokens != without.results[i].tokens;
  EXPECT_TRUE(differs) << "fp8 and fp32 caches gave identical tokens everywhere: is the fp8 cache used?";
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

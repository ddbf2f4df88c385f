// Prefix caching through the whole engine (docs/design.md §5), on a dense (Qwen3) and a hybrid
// (Qwen3.5: Gated DeltaNet state snapshots) fixture: requests that share prefixes of lengths around
// block and snapshot boundaries give the same greedy tokens (and logprobs) with the cache as
// without it — one at a time, and all at once with chunked prefill, preemption and eviction forced
// by a small pool — and report the hits as vLLM does (usage's cached_tokens).
#include <gtest/gtest.h>

#include "prefix_caching_scenarios.h"

namespace pagoda {
namespace {

using namespace pagoda::testing;

class PrefixCachingTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PrefixCachingTest, OneAfterAnotherGivesTheSameTokensAsWithoutTheCache) {
  const std::vector<Request> reqs = shared_prefix_requests();
  Knobs off;
  off.caching = false;
  const RunOutput without = run(GetParam(), reqs, off);
  EXPECT_EQ(without.hits, 0);
  const RunOutput with = run(GetParam(), reqs, Knobs{});
  expect_same(with, without);
  EXPECT_GT(with.hits, with.queries / 3) << "most of the repeated prefixes should hit";
  // The prompt repeated whole (index 3 of each group) hits at least every block of its prefix.
  const size_t lens[] = {15, 16, 17, 40, 144, 150, 160, 161};
  for (size_t g = 0; g < 8; ++g) {
    SCOPED_TRACE("prefix of " + std::to_string(lens[g]));
    EXPECT_GE(with.results[5 * g + 3].cached, static_cast<int32_t>(lens[g] / 16 * 16));
  }
}

TEST_P(PrefixCachingTest, AllAtOnceWithChunksPreemptionAndEvictionGivesTheSameTokens) {
  const std::vector<Request> reqs = shared_prefix_requests();
  Knobs k;
  k.together = true;
  k.max_model_len = 200;
  k.num_blocks = 16;  // 256 tokens for four sequences of up to 196: preemption and eviction
  k.snapshot_fraction = 0.5;  // a few snapshots beside so small a pool
  k.max_tokens = 12;
  Knobs off = k;
  off.caching = false;
  const RunOutput without = run(GetParam(), reqs, off);
  const RunOutput with = run(GetParam(), reqs, k);
  expect_same(with, without);
  EXPECT_GT(with.preemptions, 0) << "the pool should force preemption";
  EXPECT_GT(with.hits, 0);
}

// The FP8 KV cache (--kv-cache-dtype fp8): a hit reads back the e4m3 values the miss wrote, so
// cached and uncached runs agree token for token through chunks, preemption and eviction too.
TEST_P(PrefixCachingTest, Fp8KvCacheGivesTheSameTokensWithAndWithoutTheCache) {
  const std::vector<Request> reqs = shared_prefix_requests();
  Knobs k;
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
  expect_same(with, without);
  EXPECT_GT(with.preemptions, 0) << "the pool should force preemption";
  EXPECT_GT(with.hits, 0);
  // And the cache did hold e4m3: the tokens differ from the fp32 cache's somewhere.
  Knobs fp32 = off;
  fp32.kv_cache_dtype = "auto";
  const RunOutput exact = run(GetParam(), reqs, fp32);
  bool differs = false;
  for (size_t i = 0; i < exact.results.size() && !differs; ++i)
    differs = exact.results[i].tokens != without.results[i].tokens;
  EXPECT_TRUE(differs) << "fp8 and fp32 caches gave identical tokens everywhere: is the fp8 cache used?";
}

TEST_P(PrefixCachingTest, HashCollisionsStillGiveTheRightTokens) {
  // Two hash bits: nearly every lookup finds candidates that are not the prefix; only the token
  // (and parent) comparison stands between them and a wrong hit.
  const std::vector<Request> reqs = shared_prefix_requests();
  Knobs off;
  off.caching = false;
  Knobs k;
  k.hash_bits = 2;
  const RunOutput without = run(GetParam(), reqs, off);
  const RunOutput with = run(GetParam(), reqs, k);
  expect_same(with, without);
  EXPECT_GT(with.hits, with.queries / 3);
}

TEST_P(PrefixCachingTest, ExtendingA150TokenPromptHitsItsLastFullBlock) {
  std::mt19937 rng(7);
  const std::vector<int32_t> first = random_tokens(rng, 150);
  const std::vector<int32_t> longer = concat(first, random_tokens(rng, 20));
  const RunOutput out = run(GetParam(), {{first}, {longer}}, Knobs{});
  EXPECT_EQ(out.results[0].cached, 0);
  EXPECT_EQ(out.results[1].cached, 144);  // block granularity (16), hybrid or not
}

TEST_P(PrefixCachingTest, ASharedSystemPromptOf40TokensHits) {
  std::mt19937 rng(8);
  const std::vector<int32_t> system = random_tokens(rng, 40);
  std::vector<Request> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back({concat(system, random_tokens(rng, 10 + i))});
  const RunOutput out = run(GetParam(), reqs, Knobs{});
  EXPECT_EQ(out.results[0].cached, 0);
  // A dense model hits the system prompt's two full blocks from the second request on. A hybrid
  // one needs a state snapshot there: the first request left one only at its own last full block
  // (past the system prompt), the second finds the branch point and leaves one, the rest hit.
  const bool hybrid = std::string(GetParam()).find("qwen3_5") != std::string::npos;
  EXPECT_EQ(out.results[1].cached, hybrid ? 0 : 32);
  EXPECT_EQ(out.results[2].cached, 32);
  EXPECT_EQ(out.results[3].cached, 32);
}

TEST_P(PrefixCachingTest, ABoundaryAtTheSystemPromptMakesTheSecondRequestHit) {
  // The chat route tells where the system prompt ends (prefix_boundaries): the first request leaves
  // a state snapshot there, so a hybrid model hits from the second request on, as a dense one.
  std::mt19937 rng(8);
  const std::vector<int32_t> system = random_tokens(rng, 40);
  std::vector<Request> reqs;
  for (int i = 0; i < 3; ++i) reqs.push_back({concat(system, random_tokens(rng, 10 + i)), "", {40}});
  const RunOutput with = run(GetParam(), reqs, Knobs{});
  EXPECT_EQ(with.results[0].cached, 0);
  EXPECT_EQ(with.results[1].cached, 32);
  EXPECT_EQ(with.results[2].cached, 32);
  Knobs off;
  off.caching = false;
  expect_same(with, run(GetParam(), reqs, off));
}

TEST_P(PrefixCachingTest, DifferentSaltsNeverShare) {
  std::mt19937 rng(9);
  const std::vector<int32_t> prompt = random_tokens(rng, 70);
  const RunOutput out =
      run(GetParam(), {{prompt, "tenant-a"}, {prompt, "tenant-b"}, {prompt, ""}, {prompt, "tenant-a"}}, Knobs{});
  EXPECT_EQ(out.results[0].cached, 0);
  EXPECT_EQ(out.results[1].cached, 0);
  EXPECT_EQ(out.results[2].cached, 0);
  EXPECT_EQ(out.results[3].cached, 64);
  for (const Result& r : out.results) EXPECT_EQ(r.tokens, out.results[0].tokens);
}

TEST_P(PrefixCachingTest, OffMeansNoHits) {
  std::mt19937 rng(10);
  const std::vector<int32_t> prompt = random_tokens(rng, 70);
  Knobs off;
  off.caching = false;
  const RunOutput out = run(GetParam(), {{prompt}, {prompt}}, off);
  EXPECT_EQ(out.results[1].cached, 0);
  EXPECT_EQ(out.hits, 0);
  EXPECT_EQ(out.queries, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PrefixCachingTest,
                         ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text"), FixtureParamName());

}  // namespace
}  // namespace pagoda

// Prefix caching through the whole engine (DESIGN.md §5), on a dense (Qwen3) and a hybrid
// (Qwen3.5: Gated DeltaNet state snapshots) fixture: requests that share prefixes of lengths around
// block and snapshot boundaries give the same greedy tokens (and logprobs) with the cache as
// without it — one at a time, and all at once with chunked prefill, preemption and eviction forced
// by a small pool — and report the hits as vLLM does (usage's cached_tokens).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "../model/reference_fixture.h"
#include "engine/engine.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;

struct Request {
  std::vector<int32_t> prompt;
  std::string salt;
};

struct Result {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  int32_t cached = 0;
};

struct Knobs {
  bool caching = true;
  bool together = false;       // all requests queued at once (else one after the other)
  int32_t budget = 32;         // max_num_batched_tokens: long prompts are prefilled in chunks
  int64_t num_blocks = 0;      // 0 = plenty
  int hash_bits = 64;
  int32_t max_tokens = 6;
  int32_t max_model_len = 400;
  double snapshot_fraction = 0.1;
};

struct RunOutput {
  std::vector<Result> results;
  int64_t hits = 0, queries = 0, preemptions = 0;
};

RunOutput run(const std::string& model, const std::vector<Request>& requests, const Knobs& k) {
  EngineConfig config;
  config.device = "cpu";
  config.max_num_seqs = 4;
  config.max_num_batched_tokens = k.budget;
  config.max_model_len = k.max_model_len;
  config.num_gpu_blocks_override = k.num_blocks > 0 ? k.num_blocks : 400;
  config.enable_prefix_caching = k.caching;
  config.prefix_cache_hash_bits = k.hash_bits;
  config.state_snapshot_memory_fraction = k.snapshot_fraction;
  Engine engine(fixture_model_dir(model), config);
  RunOutput out;
  out.results.resize(requests.size());
  std::map<int64_t, size_t> index;
  auto add = [&](size_t i) {
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    p.max_tokens = k.max_tokens;
    p.logprobs = 0;
    p.cache_salt = requests[i].salt;
    index[engine.add_request(requests[i].prompt, p)] = i;
  };
  auto drain = [&] {
    for (int steps = 0; engine.has_unfinished() && steps < 20000; ++steps)
      for (const RequestOutput& o : engine.step()) {
        Result& r = out.results[index.at(o.id)];
        r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        for (const SampleResult& s : o.samples) r.logprobs.push_back(s.logprob);
        if (o.finished) r.cached = o.num_cached_tokens;
      }
    EXPECT_FALSE(engine.has_unfinished());
  };
  for (size_t i = 0; i < requests.size(); ++i) {
    add(i);
    if (!k.together) drain();
  }
  drain();
  out.hits = engine.core().stats().prefix_cache_hits;
  out.queries = engine.core().stats().prefix_cache_queries;
  out.preemptions = engine.scheduler().num_preemptions();
  return out;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int32_t> d(0, 511);  // the fixtures' vocabulary
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = d(rng);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Shared prefixes of lengths around the block (16) and snapshot boundaries, each followed by
// different suffixes, alone, and repeated.
std::vector<Request> shared_prefix_requests() {
  std::mt19937 rng(1234);
  std::vector<Request> reqs;
  for (size_t len : {15u, 16u, 17u, 40u, 144u, 150u, 160u, 161u}) {
    const std::vector<int32_t> prefix = random_tokens(rng, len);
    const std::vector<int32_t> s1 = random_tokens(rng, 5), s2 = random_tokens(rng, 23);
    reqs.push_back({concat(prefix, s1)});
    reqs.push_back({concat(prefix, s2)});
    reqs.push_back({prefix});
    reqs.push_back({concat(prefix, s1)});
    reqs.push_back({concat(prefix, s2)});
  }
  return reqs;
}

void expect_same(const RunOutput& with, const RunOutput& without) {
  ASSERT_EQ(with.results.size(), without.results.size());
  for (size_t i = 0; i < with.results.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(with.results[i].tokens, without.results[i].tokens);
    ASSERT_EQ(with.results[i].logprobs.size(), without.results[i].logprobs.size());
    for (size_t t = 0; t < with.results[i].logprobs.size(); ++t)
      EXPECT_NEAR(with.results[i].logprobs[t], without.results[i].logprobs[t], 1e-3) << "token " << t;
  }
}

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
                         ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace pagoda

// The prefix-caching scenarios, shared by the CPU test (prefix_caching_test.cpp) and the CUDA one
// (prefix_caching_gputest.cpp): the same requests run with the cache on and off must give the same
// greedy tokens and logprobs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../model/reference_fixture.h"
#include "engine/engine.h"

namespace pagoda::testing {

struct Request {
  std::vector<int32_t> prompt;
  std::string salt;
  std::vector<int32_t> boundaries;  // SamplingParams::prefix_boundaries
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
  std::string device = "cpu";
  std::string dtype = "auto";  // float32 on the GPU: on/off must match token for token
  int32_t workers = 1;         // EngineConfig::replicated_workers (the executor's test double)
  int32_t tp = 1;              // EngineConfig::tensor_parallel_size
  bool ep = false;             // EngineConfig::enable_expert_parallel
  std::string kv_cache_dtype = "auto";
  int32_t profile_steps = 0;   // EngineConfig::profile_steps
};

struct RunOutput {
  std::vector<Result> results;
  int64_t hits = 0, queries = 0, preemptions = 0;
};

inline RunOutput run(const std::string& model, const std::vector<Request>& requests, const Knobs& k) {
  EngineConfig config;
  config.device = k.device;
  config.dtype = k.dtype;
  config.max_num_seqs = 4;
  config.max_num_batched_tokens = k.budget;
  config.max_model_len = k.max_model_len;
  config.num_gpu_blocks_override = k.num_blocks > 0 ? k.num_blocks : 400;
  config.enable_prefix_caching = k.caching;
  config.prefix_cache_hash_bits = k.hash_bits;
  config.state_snapshot_memory_fraction = k.snapshot_fraction;
  config.replicated_workers = k.workers;
  config.tensor_parallel_size = k.tp;
  config.enable_expert_parallel = k.ep;
  config.kv_cache_dtype = k.kv_cache_dtype;
  config.profile_steps = k.profile_steps;
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
    p.prefix_boundaries = requests[i].boundaries;
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

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Shared prefixes of lengths around the block (16) and snapshot boundaries, each followed by
// different suffixes, alone, and repeated.
inline std::vector<Request> shared_prefix_requests() {
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

// The same requests within the smallest fixture vocabulary (256 tokens), for runs over every family.
inline std::vector<Request> shared_prefix_requests_in_every_vocabulary() {
  std::vector<Request> reqs = shared_prefix_requests();
  for (Request& r : reqs)
    for (int32_t& t : r.prompt) t %= 256;
  return reqs;
}

// tolerance: on logprobs; the tokens must be equal.
inline void expect_same(const RunOutput& with, const RunOutput& without, double tolerance = 1e-3) {
  ASSERT_EQ(with.results.size(), without.results.size());
  for (size_t i = 0; i < with.results.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(with.results[i].tokens, without.results[i].tokens);
    ASSERT_EQ(with.results[i].logprobs.size(), without.results[i].logprobs.size());
    for (size_t t = 0; t < with.results[i].logprobs.size(); ++t)
      EXPECT_NEAR(with.results[i].logprobs[t], without.results[i].logprobs[t], tolerance) << "token " << t;
  }
}

}  // namespace pagoda::testing

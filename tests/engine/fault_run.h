// The run harness of the fault-isolation tests (CPU: fault_isolation_test.cpp, CUDA:
// fault_isolation_gputest.cpp): a fixed set of requests through an Engine step by step, a fault
// armed or not, the pools' consistency checked after every step.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../model/reference_fixture.h"
#include "core/fault_injection.h"
#include "engine/engine.h"
#include "structured/compile.h"

namespace pagoda::fault_test {

using namespace pagoda::testing;

struct Req {
  std::vector<int32_t> prompt;
  int add_at_step = 0;
  std::shared_ptr<structured::GrammarRuntime> grammar;
  int abort_before_step = -1;  // aborted just before this step runs (-1: never)
};

struct Outcome {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::None;
  std::string detail;
  int32_t cached = 0;
};

struct RunResult {
  std::vector<Outcome> out;
  int64_t step_failures = 0;
  std::set<size_t> failed_step_requests;  // the requests of the step that threw (when one did)
  int failed_step = -1;                    // the loop's step number of the (last) step that threw
};

inline EngineConfig small_engine(const std::string& device = "cpu") {
  EngineConfig config;
  config.device = device;
  config.max_num_seqs = 2;  // the others wait: in flight, but in no step
  config.max_num_batched_tokens = 32;
  config.max_model_len = 128;
  config.num_gpu_blocks_override = 48;
  config.enable_prefix_caching = true;
  config.state_snapshot_memory_fraction = 0.3;
  return config;
}

// The pool holds exactly the blocks the running sequences' tables name; every state slot in use
// belongs to a running sequence; no snapshot is left reserved between steps.
inline void expect_consistent(const Engine& engine, const std::string& when) {
  SCOPED_TRACE(when);
  const Scheduler& s = engine.scheduler();
  std::set<int32_t> held;
  for (const Sequence* seq : s.running())
    for (int32_t b : s.kv().block_table(seq->id())) held.insert(b);
  EXPECT_EQ(s.kv().pool().num_used(), static_cast<int32_t>(held.size()));
  if (s.state_slots().num_slots() > 0) {
    EXPECT_EQ(s.state_slots().num_slots() - s.state_slots().num_free(), s.num_running());
  }
  if (const PrefixCache* c = s.kv().prefix_cache()) {
    EXPECT_EQ(c->num_reserved_snapshots(), 0);
  }
}

inline RunResult run(const std::string& model_dir, const std::vector<Req>& reqs, const std::function<void()>& arm,
                     const std::string& device = "cpu") {
  FaultInjector::global().disarm();
  Engine engine(model_dir, small_engine(device));
  arm();
  RunResult r;
  r.out.resize(reqs.size());
  std::map<int64_t, size_t> index;
  int last_add = 0;
  for (const Req& q : reqs) last_add = std::max(last_add, q.add_at_step);
  for (int step = 0; step < 400 && (step <= last_add || engine.has_unfinished()); ++step) {
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i].add_at_step != step) continue;
      SamplingParams p;
      p.temperature = 0;
      p.ignore_eos = true;
      p.max_tokens = 6;
      p.grammar = reqs[i].grammar;
      index[engine.add_request(reqs[i].prompt, p)] = i;
    }
    for (const auto& [id, i] : index)
      if (reqs[i].abort_before_step == step) engine.abort(id);
    for (const RequestOutput& o : engine.step()) {
      Outcome& out = r.out[index.at(o.id)];
      out.tokens.insert(out.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) {
        out.reason = o.finish_reason;
        out.detail = o.finish_detail;
        out.cached = o.num_cached_tokens;
      }
    }
    if (engine.stats().step_failed) {
      r.failed_step = step;
      for (int64_t id : engine.stats().step_scheduled) r.failed_step_requests.insert(index.at(id));
    }
    expect_consistent(engine, "after step " + std::to_string(step));
  }
  EXPECT_FALSE(engine.has_unfinished());
  const Scheduler& s = engine.scheduler();
  EXPECT_EQ(s.kv().pool().num_free(), s.kv().pool().num_blocks()) << "KV blocks leaked";
  EXPECT_EQ(s.state_slots().num_free(), s.state_slots().num_slots()) << "state slots leaked";
  r.step_failures = engine.core().stats().num_step_failures;
  FaultInjector::global().disarm();
  return r;
}

// Four prompts at once (two run, two wait), then the same four again: lengths around the block
// size (16) so that the failed step would register full blocks.
inline std::vector<Req> requests() {
  std::mt19937 rng(41);
  std::vector<std::vector<int32_t>> prompts = {random_tokens(rng, 40), random_tokens(rng, 20),
                                               random_tokens(rng, 18), random_tokens(rng, 33)};
  std::vector<Req> reqs;
  for (const auto& p : prompts) reqs.push_back({p, 0, nullptr});
  for (const auto& p : prompts) reqs.push_back({p, 12, nullptr});
  return reqs;
}

// Every request that did not fail has the fault-free run's tokens; every one that failed says why.
inline void expect_others_unchanged(const RunResult& with, const RunResult& without, const std::string& why) {
  for (size_t i = 0; i < with.out.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(without.out[i].reason, FinishReason::Length);
    if (with.out[i].reason == FinishReason::Error) {
      EXPECT_NE(with.out[i].detail.find(why), std::string::npos) << with.out[i].detail;
      continue;
    }
    EXPECT_EQ(with.out[i].reason, FinishReason::Length) << with.out[i].detail;
    EXPECT_EQ(with.out[i].tokens, without.out[i].tokens);
  }
}

}  // namespace pagoda::fault_test

// Fault isolation through the whole engine (docs/faults.md), on a dense (Qwen3) and a hybrid
// (Qwen3.5: state slots and snapshots) fixture. A fault is injected into one engine step, one KV
// allocation or one request's grammar state: the requests it can be blamed on finish with reason
// error and a message saying what failed; every other request, waiting at the time or added after,
// gives the same greedy tokens as the same run without the fault; the KV pool, the state slots and
// the snapshots are consistent after every step and all free at the end. The same prompts are run
// again after the fault: a block of the failed step left in the prefix cache (its K/V never
// written) would change their tokens, and its prompt would report cached tokens.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../model/reference_fixture.h"
#include "core/device_error.h"
#include "core/error.h"
#include "core/fault_injection.h"
#include "engine/engine.h"
#include "io/model_config.h"
#include "structured/compile.h"

namespace pagoda {
namespace {

using namespace pagoda::testing;

struct Req {
  std::vector<int32_t> prompt;
  int add_at_step = 0;
  std::shared_ptr<structured::GrammarRuntime> grammar;
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
};

EngineConfig small_engine() {
  EngineConfig config;
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
void expect_consistent(const Engine& engine, const std::string& when) {
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

RunResult run(const std::string& model_dir, const std::vector<Req>& reqs, const std::function<void()>& arm) {
  FaultInjector::global().disarm();
  Engine engine(model_dir, small_engine());
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
    for (const RequestOutput& o : engine.step()) {
      Outcome& out = r.out[index.at(o.id)];
      out.tokens.insert(out.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) {
        out.reason = o.finish_reason;
        out.detail = o.finish_detail;
        out.cached = o.num_cached_tokens;
      }
    }
    if (engine.stats().step_failed)
      for (int64_t id : engine.stats().step_scheduled) r.failed_step_requests.insert(index.at(id));
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
std::vector<Req> requests() {
  std::mt19937 rng(41);
  std::vector<std::vector<int32_t>> prompts = {random_tokens(rng, 40), random_tokens(rng, 20),
                                               random_tokens(rng, 18), random_tokens(rng, 33)};
  std::vector<Req> reqs;
  for (const auto& p : prompts) reqs.push_back({p, 0, nullptr});
  for (const auto& p : prompts) reqs.push_back({p, 12, nullptr});
  return reqs;
}

// Every request that did not fail has the fault-free run's tokens; every one that failed says why.
void expect_others_unchanged(const RunResult& with, const RunResult& without, const std::string& why) {
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

class FaultIsolation : public ::testing::TestWithParam<const char*> {};

TEST_P(FaultIsolation, AStepThatThrowsFailsItsOwnRequestsAndTheRestMatchARunWithoutIt) {
  const std::vector<Req> reqs = requests();
  const std::string dir = fixture_model_dir(GetParam());
  const RunResult without = run(dir, reqs, [] {});
  // The second step: the end of prompt 0's prefill and all of prompt 1's (a full block of it).
  const RunResult with = run(dir, reqs, [] { FaultInjector::global().arm(FaultSite::Step, 2); });
  EXPECT_EQ(without.step_failures, 0);
  EXPECT_EQ(with.step_failures, 1);
  ASSERT_FALSE(with.failed_step_requests.empty());
  std::set<size_t> failed;
  for (size_t i = 0; i < with.out.size(); ++i)
    if (with.out[i].reason == FinishReason::Error) failed.insert(i);
  EXPECT_EQ(failed, with.failed_step_requests) << "exactly the requests of the failed step fail";
  EXPECT_EQ(failed, (std::set<size_t>{0, 1}));
  expect_others_unchanged(with, without, "injected fault");
  // Prompt 1's first block was complete in the failed step only: it must not have been cached.
  EXPECT_GT(without.out[5].cached, 0) << "the fault-free rerun of prompt 1 should hit the cache";
  EXPECT_EQ(with.out[5].cached, 0) << "a block of the failed step became a cache hit";
}

TEST_P(FaultIsolation, AKvAllocationThatThrowsFailsOnlyTheRequestsOfThatSchedule) {
  const std::vector<Req> reqs = requests();
  const std::string dir = fixture_model_dir(GetParam());
  const RunResult without = run(dir, reqs, [] {});
  // The third KV allocation: admitting prompt 1 in the second step.
  const RunResult with = run(dir, reqs, [] { FaultInjector::global().arm(FaultSite::KvAllocation, 3); });
  EXPECT_EQ(with.step_failures, 1);
  int num_failed = 0;
  for (size_t i = 0; i < with.out.size(); ++i) num_failed += with.out[i].reason == FinishReason::Error;
  EXPECT_GE(num_failed, 1);
  EXPECT_LE(num_failed, 2) << "only the two running requests could be blamed";
  EXPECT_EQ(with.out[1].reason, FinishReason::Error);
  expect_others_unchanged(with, without, "while scheduling");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FaultIsolation, ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text"),
                         FixtureParamName());

TEST(FaultIsolationGrammar, AGrammarAllocationThatThrowsFailsThatRequestAlone) {
  const std::string dir = std::string(PAGODA_SOURCE_DIR) + "/models/default";
  std::vector<Req> reqs;
  std::shared_ptr<structured::GrammarRuntime> grammar;
  {
    const std::unique_ptr<Tokenizer> tok = load_engine_tokenizer(dir, "");
    ASSERT_NE(tok, nullptr);
    std::vector<int32_t> eos;
    for (int64_t id : load_model_config(dir).eos_token_ids) eos.push_back(static_cast<int32_t>(id));
    auto trie = std::make_shared<structured::TokenTrie>(structured::vocabulary_bytes(*tok, eos));
    structured::Constraint c;
    c.kind = structured::ConstraintKind::kRegex;
    c.text = "[a-z]{3,12}";
    grammar = std::make_shared<structured::GrammarRuntime>(structured::compile_constraint(c), trie, eos);
    const std::vector<int32_t> prompt = tok->encode("Name a colour:");
    reqs = {{prompt, 0, nullptr}, {prompt, 0, grammar}, {tok->encode("Count: one, two,"), 0, nullptr},
            {prompt, 8, grammar}};
  }
  const RunResult without = run(dir, reqs, [] {});
  const RunResult with = run(dir, reqs, [] { FaultInjector::global().arm(FaultSite::GrammarAllocation, 1); });
  EXPECT_EQ(with.step_failures, 0) << "a request's own allocation must not fail the step";
  EXPECT_EQ(with.out[1].reason, FinishReason::Error);
  EXPECT_NE(with.out[1].detail.find("structured-output state"), std::string::npos) << with.out[1].detail;
  for (size_t i : {0u, 2u, 3u}) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(with.out[i].reason, without.out[i].reason);
    EXPECT_EQ(with.out[i].tokens, without.out[i].tokens);
  }
  EXPECT_FALSE(without.out[3].tokens.empty());
}

TEST(FaultIsolationFatal, AFatalDeviceErrorLeavesTheStep) {
  FaultInjector::global().disarm();
  Engine engine(fixture_model_dir("qwen3-tiny-tied"), small_engine());
  SamplingParams p;
  p.max_tokens = 4;
  engine.add_request({1, 2, 3, 4, 5}, p);
  FaultInjector::global().arm(FaultSite::FatalStep, 1);
  EXPECT_THROW(engine.step(), FatalDeviceError);
  FaultInjector::global().disarm();
}

}  // namespace
}  // namespace pagoda

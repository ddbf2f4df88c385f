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
#include "fault_run.h"
#include "core/device_error.h"
#include "core/error.h"
#include "core/fault_injection.h"
#include "engine/engine.h"
#include "io/model_config.h"
#include "structured/compile.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

using namespace pagoda::testing;
using namespace pagoda::fault_test;

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

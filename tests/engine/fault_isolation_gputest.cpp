// Fault isolation on the CUDA backend with real device errors (docs/faults.md). `kernel`: a launch
// the CUDA runtime refuses (invalid configuration) at the end of one step's forward pass, after its
// kernels wrote K/V and recurrent state; the requests of that step fail with the runtime's message,
// the others give the tokens they give when those requests are aborted instead, and the pools are
// all free at the end — the context lives on. `sticky-kernel`: a kernel that traps inside
// a step of a real `pagoda serve --device cuda` on the shipped model; the context is lost, so /health turns 503 and the
// process exits with code 4 within --shutdown-timeout.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "../server/server_harness.h"
#include "fault_run.h"

namespace pagoda {
namespace {

using namespace pagoda::testing;
using namespace pagoda::fault_test;
using namespace std::chrono_literals;

class CudaFaultIsolation : public ::testing::TestWithParam<const char*> {};

// On the GPU a request's tokens may depend on what it is batched with (kernels chosen by batch
// size), so the run to match is not one without the fault but one where the failed step's requests
// were aborted just before that step: every later step then has the same batches. The same four
// prompts again, once the engine is idle, must find exactly the same prefix-cache hits in both runs
// (the failed step wrote K/V into blocks that must not have become cache entries) and give the
// same tokens.
TEST_P(CudaFaultIsolation, AKernelErrorFailsItsStepAloneAndTheRestMatchARunThatAbortedThem) {
  std::vector<Req> reqs = requests();
  for (size_t i = 4; i < reqs.size(); ++i) reqs[i].add_at_step = 60;  // after the first round ends
  const std::string dir = fixture_model_dir(GetParam());
  const RunResult with = run(dir, reqs, [] { FaultInjector::global().arm(FaultSite::KernelError, 2); }, "cuda");
  EXPECT_EQ(with.step_failures, 1);
  ASSERT_GE(with.failed_step, 0);
  ASSERT_FALSE(with.failed_step_requests.empty());
  std::set<size_t> failed;
  for (size_t i = 0; i < with.out.size(); ++i)
    if (with.out[i].reason == FinishReason::Error) {
      failed.insert(i);
      // The runtime's own report reaches the request: the device made the error.
      EXPECT_NE(with.out[i].detail.find("CUDA error"), std::string::npos) << with.out[i].detail;
    }
  EXPECT_EQ(failed, with.failed_step_requests) << "exactly the requests of the failed step fail";
  std::vector<Req> aborted = reqs;
  for (size_t i : failed) aborted[i].abort_before_step = with.failed_step;
  const RunResult base = run(dir, aborted, [] {}, "cuda");
  EXPECT_EQ(base.step_failures, 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (failed.count(i)) continue;
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(with.out[i].reason, FinishReason::Length) << with.out[i].detail;
    EXPECT_EQ(with.out[i].tokens, base.out[i].tokens);
    EXPECT_EQ(with.out[i].cached, base.out[i].cached) << "a block of the failed step became a cache hit";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaFaultIsolation, ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text"),
                         FixtureParamName());

TEST(CudaFaultServer, AStickyKernelErrorTurnsHealthTo503AndExitsWithCode4) {
  using server::test::ServerProcess;
  const server::test::DefaultModelDir dir;  // the shipped model: it has a tokenizer
  ASSERT_FALSE(dir.path.empty());
  ServerProcess s;
  setenv("PAGODA_INJECT_FAULT", "sticky-kernel:3", 1);
  const bool started = s.start(dir.path,
                               {"--device", "cuda", "--served-model-name", "tiny", "--shutdown-timeout", "4"});
  unsetenv("PAGODA_INJECT_FAULT");
  ASSERT_TRUE(started) << s.log();
  ASSERT_EQ(s.get("/health").status, 200);
  const server::test::FatalExit e = server::test::watch_fatal_exit(
      s,
      [&] {
        return s.request("POST", "/v1/completions",
                         R"({"model": "tiny", "prompt": "one two three", "max_tokens": 8, "ignore_eos": true})");
      },
      7s);
  EXPECT_TRUE(e.answer.status == 500 || e.answer.status == 503) << e.answer.status << " " << e.answer.body;
  EXPECT_EQ(e.code, 4) << s.log();
  EXPECT_LT(e.seconds, 4.5) << "not within --shutdown-timeout";
  EXPECT_TRUE(e.health_seen.count(503)) << "/health never answered 503 before the exit";
  const std::string log = s.log();
  EXPECT_NE(log.find("unspecified launch failure"), std::string::npos) << log;
  EXPECT_NE(log.find("exiting with code 4"), std::string::npos) << log;
}

}  // namespace
}  // namespace pagoda

// Scheduler::fail_step and Scheduler::fail (docs/faults.md), without a model: a step that threw
// gives back everything it took, and none of its blocks becomes a prefix-cache hit; a schedule()
// that throws (an injected KV allocation failure) fails only the sequences it can be blamed on.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/fault_injection.h"
#include "engine/scheduler.h"

namespace pagoda {
namespace {

using Ints = std::vector<int32_t>;

SchedulerConfig caching_config() {
  SchedulerConfig c;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 32;
  c.max_model_len = 64;
  c.block_size = 4;
  c.num_kv_blocks = 32;
  c.eos_token_ids = {0};
  c.enable_prefix_caching = true;
  return c;
}

Ints tokens(int n, int first) {
  Ints v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

SamplingParams greedy(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

// The prompt tokens a new sequence with `prompt` would start from (its cached prefix).
int32_t cached_start(Scheduler& s, int64_t id, const Ints& prompt) {
  s.add(id, prompt, greedy(1));
  SchedulerOutput o = s.schedule();
  int32_t start = -1;
  for (const ScheduledSequence& x : o.scheduled)
    if (x.seq->id() == id) start = x.start;
  s.update_from_output(o, Ints(o.sampling_seqs().size(), 5));
  s.take_finished();
  return start;
}

TEST(SchedulerFault, AFailedStepFreesItsBlocksAndCachesNoneOfThem) {
  const Ints prompt = tokens(10, 100);  // two full blocks of 4, and a partial one
  for (bool fail : {false, true}) {
    SCOPED_TRACE(fail ? "failed step" : "completed step");
    Scheduler s(caching_config());
    s.add(1, prompt, greedy(4));
    SchedulerOutput o = s.schedule();
    ASSERT_EQ(o.scheduled.size(), 1u);
    EXPECT_EQ(s.kv().pool().num_free(), 32 - 3);
    if (fail) {
      s.fail_step(o, "the forward pass threw");
      std::vector<std::unique_ptr<Sequence>> done = s.take_finished();
      ASSERT_EQ(done.size(), 1u);
      EXPECT_EQ(done[0]->finish_reason, FinishReason::Error);
      EXPECT_EQ(done[0]->finish_detail, "the forward pass threw");
      EXPECT_EQ(s.kv().pool().num_free(), 32);
      EXPECT_EQ(s.kv().prefix_cache()->num_cached_blocks(), 0);
      EXPECT_FALSE(s.has_unfinished());
      // The same prompt again: computed from the start, its blocks were never written.
      EXPECT_EQ(cached_start(s, 2, prompt), 0);
    } else {
      s.update_from_output(o, Ints{5});
      s.abort(1);
      s.take_finished();
      EXPECT_EQ(cached_start(s, 2, prompt), 8);  // the two full blocks
    }
  }
}

TEST(SchedulerFault, AFailedStepLeavesTheOthersAndTheNextStepRuns) {
  SchedulerConfig c = caching_config();
  c.max_num_seqs = 2;
  Scheduler s(c);
  s.add(1, tokens(6, 10), greedy(3));
  SchedulerOutput o1 = s.schedule();
  s.update_from_output(o1, Ints{5});           // 1 decodes from now on
  s.add(2, tokens(7, 30), greedy(3));
  s.add(3, tokens(5, 50), greedy(3));          // waits: max_num_seqs is 2
  SchedulerOutput o2 = s.schedule();
  ASSERT_EQ(o2.scheduled.size(), 2u);
  EXPECT_EQ(s.num_waiting(), 1);
  s.fail_step(o2, "boom");
  std::vector<std::unique_ptr<Sequence>> done = s.take_finished();
  ASSERT_EQ(done.size(), 2u);
  for (const auto& d : done) EXPECT_EQ(d->finish_reason, FinishReason::Error);
  EXPECT_EQ(s.kv().pool().num_free(), s.kv().pool().num_blocks());
  // The one that waited runs to its end.
  int steps = 0;
  while (s.has_unfinished() && steps++ < 20) {
    SchedulerOutput o = s.schedule();
    ASSERT_FALSE(o.empty());
    s.update_from_output(o, Ints(o.sampling_seqs().size(), 5));
  }
  done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->id(), 3);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::Length);
  EXPECT_EQ(s.kv().pool().num_free(), s.kv().pool().num_blocks());
}

TEST(SchedulerFault, FailDuringAStepDropsItsTokenAndFinishesItWithError) {
  Scheduler s(caching_config());
  s.add(1, tokens(5, 10), greedy(4));
  s.add(2, tokens(5, 40), greedy(4));
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.scheduled.size(), 2u);
  EXPECT_TRUE(s.fail(2, "its grammar state could not be made"));
  EXPECT_TRUE(s.abort(2));  // an abort after the failure does not hide it
  s.update_from_output(o, Ints{5, 6});
  std::vector<std::unique_ptr<Sequence>> done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->id(), 2);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::Error);
  EXPECT_EQ(done[0]->num_output_tokens(), 0);
  EXPECT_EQ(done[0]->finish_detail, "its grammar state could not be made");
  EXPECT_EQ(s.find(1)->num_output_tokens(), 1);
}

TEST(SchedulerFault, AScheduleThatThrowsFailsOnlyTheSequencesItReached) {
  SchedulerConfig c = caching_config();
  c.max_num_batched_tokens = 8;
  Scheduler s(c);
  s.add(1, tokens(6, 10), greedy(3));
  s.add(2, tokens(6, 30), greedy(3));  // no room in the first step's budget
  FaultInjector::global().disarm();
  FaultInjector::global().arm(FaultSite::KvAllocation, 1);
  EXPECT_THROW(s.schedule(), std::bad_alloc);
  FaultInjector::global().disarm();
  std::vector<std::unique_ptr<Sequence>> done = s.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->id(), 1);
  EXPECT_EQ(done[0]->finish_reason, FinishReason::Error);
  EXPECT_NE(done[0]->finish_detail.find("while scheduling"), std::string::npos) << done[0]->finish_detail;
  EXPECT_EQ(s.kv().pool().num_free(), s.kv().pool().num_blocks());
  // Not stuck in flight: the next step schedules the other one.
  SchedulerOutput o = s.schedule();
  ASSERT_EQ(o.scheduled.size(), 1u);
  EXPECT_EQ(o.scheduled[0].seq->id(), 2);
}

TEST(FaultInjector, SpecsArmTheNamedSitesAndBadOnesAreRefused) {
  FaultInjector f;
  f.arm_from_spec("step:2,kv-alloc:1:2");
  f.reach(FaultSite::Step);
  EXPECT_THROW(f.reach(FaultSite::Step), std::runtime_error);
  f.reach(FaultSite::Step);
  EXPECT_THROW(f.reach(FaultSite::KvAllocation), std::bad_alloc);
  EXPECT_THROW(f.reach(FaultSite::KvAllocation), std::bad_alloc);
  f.reach(FaultSite::KvAllocation);
  EXPECT_EQ(f.num_thrown(FaultSite::KvAllocation), 2);
  for (const char* bad : {"step", "step:0", "nowhere:1", "step:1:x", "step:-1"})
    EXPECT_THROW(f.arm_from_spec(bad), Error) << bad;
}

// The device-error sites (made by the CUDA backend) count only inside an engine step's forward
// pass, so start-up work does not move N.
TEST(FaultInjector, KernelSitesCountOnlyInsideAStep) {
  FaultInjector& f = FaultInjector::global();
  f.disarm();
  f.arm_from_spec("kernel:2,sticky-kernel:1");
  EXPECT_FALSE(f.due(FaultSite::KernelError));
  EXPECT_FALSE(f.due(FaultSite::KernelError));
  {
    const FaultInjector::StepScope in_step;
    EXPECT_FALSE(f.due(FaultSite::KernelError));
    EXPECT_TRUE(f.due(FaultSite::KernelError));
    EXPECT_FALSE(f.due(FaultSite::KernelError));
    EXPECT_TRUE(f.due(FaultSite::StickyKernelError));
  }
  EXPECT_FALSE(f.due(FaultSite::StickyKernelError));
  EXPECT_EQ(f.num_thrown(FaultSite::KernelError), 1);
  f.disarm();
}

}  // namespace
}  // namespace pagoda

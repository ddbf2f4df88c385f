// The engine invariants of docs/design.md §6 on the CPU, against Hugging Face's greedy tokens:
// batch independence, chunked prefill = one-shot prefill, preemption + recompute = no preemption.
#include <gtest/gtest.h>

#include <map>

#include "../support/engine_driver.h"
#include "core/error.h"
#include "engine/engine.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;
using testing::load_reference;
using testing::greedy;
using testing::ReferenceCase;
using testing::run_all;

EngineConfig small_config() {
  EngineConfig c;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 2048;
  c.max_model_len = 512;
  c.kv_cache_memory_bytes = 16 << 20;
  return c;
}

const char* kModel = "qwen3-tiny-tied";

TEST(Engine, BatchedGreedyMatchesTransformers) {
  const auto cases = load_reference(kModel);
  Engine engine(fixture_model_dir(kModel), small_config());
  const auto out = run_all(engine, cases, greedy(32));
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(out[i], cases[i].generated_ids) << "case " << i;
  EXPECT_EQ(engine.scheduler().kv().num_free_blocks(), engine.memory_plan().num_blocks);
}

TEST(Engine, ChunkedPrefillMatchesOneShot) {
  const auto cases = load_reference(kModel);
  EngineConfig c = small_config();
  c.max_num_batched_tokens = 48;  // prompts of up to 300 tokens take several steps
  c.max_num_seqs = 4;
  Engine engine(fixture_model_dir(kModel), c);
  const auto out = run_all(engine, cases, greedy(32));
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(out[i], cases[i].generated_ids) << "case " << i;
}

TEST(Engine, PreemptionAndRecomputeGiveTheSameTokens) {
  const auto cases = load_reference(kModel);
  EngineConfig c = small_config();
  c.max_model_len = 340;            // the longest case: 300 + 32 tokens, 21 blocks
  c.num_gpu_blocks_override = 30;  // 480 token slots for ~1200 tokens of work: must preempt
  c.block_size = 16;
  Engine engine(fixture_model_dir(kModel), c);
  const auto out = run_all(engine, cases, greedy(32));
  EXPECT_GT(engine.scheduler().num_preemptions(), 0) << "the test did not force a preemption";
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(out[i], cases[i].generated_ids) << "case " << i;
  EXPECT_EQ(engine.scheduler().kv().num_free_blocks(), 30);
}

TEST(Engine, SeededSamplingDoesNotDependOnBatchMates) {
  const auto cases = load_reference(kModel);
  SamplingParams p;
  p.temperature = 0.9;
  p.top_p = 0.95;
  p.seed = 1234;
  p.max_tokens = 24;
  p.ignore_eos = true;
  Engine alone(fixture_model_dir(kModel), small_config());
  const auto solo = run_all(alone, {cases[4]}, p);
  Engine together(fixture_model_dir(kModel), small_config());
  const auto batch = run_all(together, cases, p);
  EXPECT_EQ(solo[0], batch[4]);
  EXPECT_EQ(solo[0].size(), 24u);
}

TEST(Engine, StopsOnStopTokenAndMaxTokens) {
  const auto cases = load_reference(kModel);
  const ReferenceCase& rc = cases[3];
  SamplingParams p = greedy(32);
  p.stop_token_ids = {rc.generated_ids[5]};
  Engine engine(fixture_model_dir(kModel), small_config());
  const auto first = std::find(rc.generated_ids.begin(), rc.generated_ids.end(), rc.generated_ids[5]);
  const std::vector<int32_t> expect(rc.generated_ids.begin(), first + 1);
  std::vector<int32_t> got;
  FinishReason reason = FinishReason::None;
  engine.add_request(rc.prompt_ids, p);
  while (engine.has_unfinished())
    for (const RequestOutput& o : engine.step()) {
      got.insert(got.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) reason = o.finish_reason;
    }
  EXPECT_EQ(got, expect);  // the stop token is the last output token, as in vLLM
  EXPECT_EQ(reason, FinishReason::Stop);
}

TEST(Engine, AbortFreesBlocks) {
  const auto cases = load_reference(kModel);
  Engine engine(fixture_model_dir(kModel), small_config());
  const int64_t id = engine.add_request(cases.back().prompt_ids, greedy(32));
  engine.step();
  EXPECT_LT(engine.scheduler().kv().num_free_blocks(), engine.memory_plan().num_blocks);
  EXPECT_TRUE(engine.abort(id));
  bool finished = false;
  for (const RequestOutput& o : engine.step())
    if (o.id == id && o.finished) finished = o.finish_reason == FinishReason::Abort;
  EXPECT_TRUE(finished);
  EXPECT_FALSE(engine.has_unfinished());
  EXPECT_EQ(engine.scheduler().kv().num_free_blocks(), engine.memory_plan().num_blocks);
}

// The core/processor split end to end: a stop string found by the OutputProcessor finishes the
// request and the core frees its blocks. The expected text is the same request's text without the
// stop string, cut before its first occurrence (an invariant, not a recorded value).
TEST(Engine, StopStringFinishesTheRequestAndFreesItsBlocks) {
  const auto cases = load_reference(kModel);
  EngineConfig c = small_config();
  c.tokenizer_dir = std::string(PAGODA_SOURCE_DIR) + "/tests/data/qwen3-tokenizer";
  Engine engine(fixture_model_dir(kModel), c);
  ASSERT_NE(engine.tokenizer(), nullptr);
  auto text_of = [&](const SamplingParams& p, RequestOutput* last) {
    std::string text;
    engine.add_request(cases[1].prompt_ids, p);
    while (engine.has_unfinished())
      for (RequestOutput& o : engine.step()) {
        text += o.new_text;
        if (o.finished) *last = o;
      }
    return text;
  };
  RequestOutput last;
  const std::string full = text_of(greedy(24), &last);
  ASSERT_GE(full.size(), 8u) << "the fixture's greedy text is too short for this test";
  const std::string stop = full.substr(full.size() / 2, 3);
  SamplingParams p = greedy(24);
  p.stop = {stop};
  const std::string cut = text_of(p, &last);
  EXPECT_EQ(cut, full.substr(0, full.find(stop)));
  EXPECT_EQ(last.finish_reason, FinishReason::Stop);
  EXPECT_EQ(last.stop_string, stop);
  EXPECT_FALSE(engine.has_unfinished());
  EXPECT_EQ(engine.scheduler().kv().num_free_blocks(), engine.memory_plan().num_blocks);
  EXPECT_EQ(engine.stats().num_running, 0);
}

TEST(Engine, StepStatsDescribeTheStep) {
  const auto cases = load_reference(kModel);
  EngineConfig c = small_config();
  c.max_num_seqs = 2;  // three requests: one waits
  Engine engine(fixture_model_dir(kModel), c);
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(engine.add_request(cases[static_cast<size_t>(i)].prompt_ids, greedy(4)));
  engine.step();
  const EngineStats& s = engine.stats();
  EXPECT_EQ(s.num_running, 2);
  EXPECT_EQ(s.num_waiting, 1);
  EXPECT_EQ(s.step_scheduled, (std::vector<int64_t>{ids[0], ids[1]}));
  EXPECT_EQ(s.step_num_tokens, static_cast<int32_t>(cases[0].prompt_ids.size() + cases[1].prompt_ids.size()));
  EXPECT_EQ(s.step_num_decodes, 0);
  EXPECT_GT(s.kv_usage, 0.0);
  EXPECT_GT(s.step_s, 0.0);
  while (engine.has_unfinished()) engine.step();
  EXPECT_EQ(engine.stats().num_running, 0);
  EXPECT_EQ(engine.stats().num_waiting, 0);
  EXPECT_EQ(engine.stats().kv_usage, 0.0);
}

TEST(Engine, MemoryPlanEqualsAllocations) {
  Engine engine(fixture_model_dir(kModel), small_config());
  const MemoryPlan& plan = engine.memory_plan();
  EXPECT_EQ(static_cast<int64_t>(engine.kv_cache_bytes()), plan.kv_bytes);
  EXPECT_EQ(static_cast<int64_t>(engine.workspace_bytes()), plan.activation_bytes);
  EXPECT_EQ(plan.kv_bytes, plan.num_blocks * plan.kv_bytes_per_block);
}

TEST(Engine, RejectsBadRequests) {
  Engine engine(fixture_model_dir(kModel), small_config());
  EXPECT_THROW(engine.add_request({}, greedy(4)), Error);
  EXPECT_THROW(engine.add_request({100000}, greedy(4)), Error);  // outside the vocabulary
  EXPECT_THROW(engine.add_request(std::vector<int32_t>(600, 5), greedy(4)), Error);  // > max_model_len
}

TEST(Engine, StepTimesCountEveryStep) {
  const auto cases = load_reference(kModel);
  Engine engine(fixture_model_dir(kModel), small_config());
  EXPECT_EQ(engine.step_times().steps, 0);
  engine.add_request(cases[0].prompt_ids, greedy(5));
  int64_t steps = 0;
  while (engine.has_unfinished()) {
    engine.step();
    ++steps;
  }
  const StepTimes t = engine.step_times();
  EXPECT_EQ(t.steps, steps);
  EXPECT_GT(t.total_s, 0.0);
  EXPECT_GE(t.gpu_wait_s, 0.0);
  EXPECT_LE(t.prepare_s + t.gpu_wait_s, t.total_s);
  EXPECT_GT(t.host_s(), 0.0);
}

}  // namespace
}  // namespace pagoda

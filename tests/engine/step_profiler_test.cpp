// The step profiler (--profile-steps, engine/step_profiler.h) on the CPU: timed steps still give
// transformers' tokens, a decode step's table has what the model runs (an attention a layer, the
// lm_head once), op times fit inside the step, and only every N-th step is timed.
#include <gtest/gtest.h>

#include <string>

#include "../support/engine_driver.h"
#include "core/error.h"
#include "engine/engine.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;
using testing::greedy;
using testing::load_reference;
using testing::run_all;

const char* kModel = "qwen3-tiny-tied";

EngineConfig profiled(int32_t every) {
  EngineConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 2048;
  c.max_model_len = 512;
  c.kv_cache_memory_bytes = 16 << 20;
  c.profile_steps = every;
  return c;
}

TEST(StepProfiler, TimedStepsGiveTransformersTokens) {
  const auto cases = load_reference(kModel);
  Engine engine(fixture_model_dir(kModel), profiled(1));
  const auto out = run_all(engine, cases, greedy(32));
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(out[i], cases[i].generated_ids) << "case " << i;
  const StepProfiler* p = engine.step_profiler();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->kinds().count("decode"), 1u);
  EXPECT_EQ(p->kinds().count("mixed"), 1u);  // the prefills
}

TEST(StepProfiler, ADecodeStepHasAnAttentionALayerAndTheLmHeadOnce) {
  const auto cases = load_reference(kModel);
  Engine engine(fixture_model_dir(kModel), profiled(1));
  run_all(engine, cases, greedy(8));
  const ModelConfig& mc = engine.model_config();
  const StepKindProfile& d = engine.step_profiler()->kinds().at("decode");
  ASSERT_GT(d.steps, 0);
  int64_t attention = 0, lm_head = 0;
  double lm_head_flops = 0;
  const std::string vocab_rows = std::to_string(mc.vocab_size) + "x" + std::to_string(mc.hidden_size) + " ";
  for (const auto& [key, s] : d.ops) {
    if (s.op == std::string("paged_attention")) attention += s.calls;
    if (s.op == std::string("linear") && s.shape.rfind(vocab_rows, 0) == 0) {
      lm_head += s.calls;
      lm_head_flops += s.flops;
    }
    EXPECT_GE(s.ms, 0.0) << s.op << " " << s.shape;
  }
  EXPECT_EQ(attention, d.steps * mc.num_layers);
  EXPECT_EQ(lm_head, d.steps);
  // One logits row a sequence in a decode step: 2·V·H FLOPs each.
  EXPECT_DOUBLE_EQ(lm_head_flops, 2.0 * d.seqs * static_cast<double>(mc.vocab_size * mc.hidden_size));
}

TEST(StepProfiler, OpTimesFitInTheStepAndTheRooflineIsMeasured) {
  const auto cases = load_reference(kModel);
  Engine engine(fixture_model_dir(kModel), profiled(1));
  run_all(engine, cases, greedy(8));
  const StepProfiler* p = engine.step_profiler();
  EXPECT_GT(p->roofline().copy_gbs, 0.0);
  EXPECT_GT(p->roofline().gemm_tflops, 0.0);
  for (const auto& [kind, k] : p->kinds()) {
    EXPECT_GT(k.op_ms, 0.0) << kind;
    EXPECT_LE(k.op_ms, k.wall_ms * 1.001 + 1e-3) << kind << ": ops are timed inside the step";
  }
  // The bytes-moved floor: a tied model reads every weight once a step, and the KV of its contexts.
  const StepKindProfile& d = p->kinds().at("decode");
  EXPECT_DOUBLE_EQ(d.floor.weights, static_cast<double>(d.steps) * static_cast<double>(engine.memory_plan().weight_bytes));
  EXPECT_GT(d.floor.kv, 0.0);
  EXPECT_EQ(d.floor.state, 0.0);  // no recurrent layers
  const std::string report = p->report();
  EXPECT_NE(report.find("bytes-moved floor:"), std::string::npos) << report;
  EXPECT_NE(report.find("decode steps:"), std::string::npos) << report;
  EXPECT_NE(report.find("| paged_attention |"), std::string::npos) << report;
}

TEST(StepProfiler, AHybridModelsFloorCountsItsRecurrentState) {
  const auto cases = load_reference("qwen3_5-tiny-text");
  Engine engine(fixture_model_dir("qwen3_5-tiny-text"), profiled(2));
  const auto out = run_all(engine, cases, greedy(32));
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(out[i], cases[i].generated_ids) << "case " << i;
  const StepKindProfile& d = engine.step_profiler()->kinds().at("decode");
  EXPECT_GT(d.floor.state, 0.0);
  bool delta_rule = false;
  for (const auto& [key, s] : d.ops) delta_rule = delta_rule || s.op == std::string("gated_delta_rule");
  EXPECT_TRUE(delta_rule);
}

TEST(StepProfiler, OnlyEveryNthStepIsTimed) {
  const auto cases = load_reference(kModel);
  Engine engine(fixture_model_dir(kModel), profiled(3));
  run_all(engine, cases, greedy(8));
  const StepProfiler* p = engine.step_profiler();
  int64_t timed = 0;
  for (const auto& [kind, k] : p->kinds()) timed += k.steps;
  EXPECT_GT(p->steps_seen(), 3);
  EXPECT_EQ(timed, p->steps_seen() / 3);
}

TEST(StepProfiler, IsOffUnlessAskedForAndRefusesANegativeInterval) {
  Engine engine(fixture_model_dir(kModel), profiled(0));
  EXPECT_EQ(engine.step_profiler(), nullptr);
  EXPECT_THROW(Engine(fixture_model_dir(kModel), profiled(-2)), Error);
}

}  // namespace
}  // namespace pagoda

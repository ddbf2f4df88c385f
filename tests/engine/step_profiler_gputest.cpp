// The step profiler on CUDA (tools/device/: pagoda_gpu_tests --gtest_filter='CudaStepProfiler*'):
// with decode graphs captured, the timed steps run eagerly between graph replays, and every
// token is still transformers' (fp32); the op times come from events on the backend's stream.
#include <gtest/gtest.h>

#include <string>

#include "../support/engine_driver.h"
#include "engine/engine.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;
using testing::greedy;
using testing::load_reference;
using testing::run_all;

TEST(CudaStepProfiler, TimedStepsBetweenGraphReplaysGiveTransformersTokens) {
  const char* model = "qwen3-tiny-tied";
  const auto cases = load_reference(model);
  EngineConfig c;
  c.device = "cuda";
  c.dtype = "float32";
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 2048;
  c.max_model_len = 512;
  c.profile_steps = 4;
  Engine engine(fixture_model_dir(model), c);
  const auto out = run_all(engine, cases, greedy(32));
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(out[i], cases[i].generated_ids) << "case " << i;
  const StepProfiler* p = engine.step_profiler();
  ASSERT_NE(p, nullptr);
  EXPECT_GT(p->roofline().copy_gbs, 100.0);  // any GPU copies faster than this
  EXPECT_GT(p->roofline().gemm_tflops, 1.0);
  const StepKindProfile& d = p->kinds().at("decode");
  EXPECT_GT(d.steps, 0);
  EXPECT_GT(d.op_ms, 0.0);
  EXPECT_LE(d.op_ms, d.wall_ms * 1.001 + 1e-3);
  std::printf("%s", p->report().c_str());
}

}  // namespace
}  // namespace pagoda

// Qwen3.5 through the whole engine: several reference prompts at once with a KV pool too small
// for all of them (preemption and recompute of hybrid sequences, whose state slots are freed and
// rebuilt) and a token budget that forces chunked prefill. Greedy tokens must equal
// transformers' reference, whatever else shares the batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <ostream>

#include "engine/engine.h"
#include "engine_reference_run.h"
#include "reference_fixture.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;
using testing::load_reference;
using testing::ReferenceCase;
using testing::expect_engine_matches_reference;

struct EngineCase {
  const char* model;
  int32_t max_num_seqs, max_num_batched_tokens;
  int64_t num_blocks;
};

void PrintTo(const EngineCase& c, std::ostream* os) { *os << c.model; }

class Qwen3_5EngineTest : public ::testing::TestWithParam<EngineCase> {};

TEST_P(Qwen3_5EngineTest, PreemptedAndChunkedSequencesMatchReference) {
  const EngineCase ec = GetParam();
  EngineConfig config;
  config.device = "cpu";
  config.dtype = "float32";  // the reference is transformers in fp32 (a bf16 model's prefill rounds x)
  config.max_num_seqs = ec.max_num_seqs;
  config.max_num_batched_tokens = ec.max_num_batched_tokens;
  config.max_model_len = 400;  // 25 blocks of 16: the pool holds one long sequence, not all
  config.num_gpu_blocks_override = ec.num_blocks;
  Engine engine(fixture_model_dir(ec.model), config);
  // One state slot per sequence, plus the prefix cache's snapshots.
  const int64_t per_seq = engine.model_config().state_bytes_per_sequence(DType::F32);
  EXPECT_EQ(engine.memory_plan().state_bytes, per_seq * ec.max_num_seqs);
  EXPECT_EQ(engine.memory_plan().snapshot_bytes, per_seq * engine.memory_plan().num_snapshots);
  EXPECT_EQ(static_cast<int64_t>(engine.state_bytes()), engine.memory_plan().state_bytes + engine.memory_plan().snapshot_bytes);

  const auto cases = load_reference(ec.model);
  // 300 + 32 tokens need 21 blocks: the shorter prompts keep the rest of the pool busy.
  expect_engine_matches_reference(engine, cases, [](const ReferenceCase& c) { return c.prompt_ids.size() <= 200; },
                                  10000);
  EXPECT_GT(engine.scheduler().num_preemptions(), 0) << "the test should force preemption";
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, Qwen3_5EngineTest,
    ::testing::Values(EngineCase{"qwen3_5-tiny-text", 4, 48, 26},
                      EngineCase{"qwen3_5-tiny-mm", 8, 64, 30}),
    [](const auto& param_info) {
      std::string n = param_info.param.model;
      std::replace(n.begin(), n.end(), '-', '_');
      return n;
    });

}  // namespace
}  // namespace pagoda

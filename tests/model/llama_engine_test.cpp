// Llama 3.x through the whole engine: the reference prompts at once with a KV pool too small for all
// of them (preemption and recompute) and a token budget that forces chunked prefill. Greedy tokens
// must equal transformers' reference, whatever else shares the batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/engine.h"
#include "reference_fixture.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;
using testing::load_reference;

class LlamaEngineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaEngineTest, PreemptedAndChunkedSequencesMatchReference) {
  const std::string model = GetParam();
  EngineConfig config;
  config.device = "cpu";
  config.max_num_seqs = 4;
  config.max_num_batched_tokens = 32;  // the 40- and 130-token prompts prefill in chunks
  config.max_model_len = 160;          // 10 blocks of 16: the 130-token prompt and its 16 tokens
  config.num_gpu_blocks_override = 12; // all four sequences need 18 blocks
  Engine engine(fixture_model_dir(model), config);

  const auto cases = load_reference(model);
  std::map<int64_t, size_t> case_of;
  for (size_t i = 0; i < cases.size(); ++i) {
    SamplingParams p;
    p.temperature = 0;
    p.ignore_eos = true;
    p.max_tokens = static_cast<int32_t>(cases[i].generated_ids.size());
    case_of[engine.add_request(cases[i].prompt_ids, p)] = i;
  }
  std::map<int64_t, std::vector<int32_t>> tokens;
  int steps = 0;
  while (engine.has_unfinished() && steps < 10000) {
    for (const RequestOutput& o : engine.step())
      tokens[o.id].insert(tokens[o.id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
    ++steps;
  }
  EXPECT_FALSE(engine.has_unfinished());
  EXPECT_GT(engine.scheduler().num_preemptions(), 0) << "the test should force preemption";
  for (const auto& [id, i] : case_of) {
    SCOPED_TRACE("prompt of " + std::to_string(cases[i].prompt_ids.size()) + " tokens");
    EXPECT_EQ(tokens[id], cases[i].generated_ids);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaEngineTest,
                         ::testing::Values("llama3-tiny-tied-bias", "llama3-tiny-untied"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace pagoda

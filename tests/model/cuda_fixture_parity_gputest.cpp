// The tiny fixtures on the GPU with fp32 activations (--dtype float32): greedy tokens identical to
// Hugging Face transformers' fp32 reference (the same reference the CPU engine matches in ctest),
// for every fixture — Qwen3 tied/untied/GQA/sharded, both Qwen3.5 layouts, Llama 3 — batched with CUDA
// graphs, eagerly, and with chunked prefill plus forced preemption. In bf16 the fixtures' near-tied
// top-2 logits (margins down to 3e-3) flip some tokens; that is what the fp32 mode is for.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "../support/engine_driver.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;
using testing::load_reference;
using testing::greedy;
using testing::run_all;

const char* const kFixtures[] = {"qwen3-tiny-tied", "qwen3-tiny-untied-gqa4", "qwen3-tiny-mha-sharded",
                                 "qwen3_5-tiny-text", "qwen3_5-tiny-mm",
                                 // no q/k norm, llama3-scaled RoPE, q/k/v/o biases: the CUDA primitives
                                 "llama3-tiny-tied-bias", "llama3-tiny-untied"};

struct Variant {
  const char* name;
  bool eager;
  int32_t max_num_batched_tokens;
  int32_t max_num_seqs;
  int64_t num_blocks_override;  // 0: sized by kv_cache_memory_bytes
};

const Variant kVariants[] = {
    {"Graphs", false, 2048, 16, 0},
    {"Eager", true, 2048, 16, 0},
    // 48-token steps cut the prompts (up to 300 tokens) across several 64-token GDN chunks at odd
    // places; 30 blocks of 16 for ~1,200 tokens of work force preemption and recompute.
    {"ChunkedPreempted", false, 48, 4, 30},
};

class CudaFixtureParity : public ::testing::TestWithParam<std::tuple<const char*, Variant>> {};

TEST_P(CudaFixtureParity, Fp32GreedyTokensEqualTransformers) {
  const std::string name = std::get<0>(GetParam());
  const Variant v = std::get<1>(GetParam());
  const auto cases = load_reference(name);
  ASSERT_FALSE(cases.empty());
  EngineConfig c;
  c.device = "cuda";
  c.dtype = "float32";
  c.enforce_eager = v.eager;
  c.max_num_seqs = v.max_num_seqs;
  c.max_num_batched_tokens = v.max_num_batched_tokens;
  c.max_model_len = 340;  // the longest case: 300 + 32 tokens
  c.block_size = 16;
  c.kv_cache_memory_bytes = 64 << 20;
  c.num_gpu_blocks_override = v.num_blocks_override;
  Engine engine(fixture_model_dir(name), c);
  ASSERT_EQ(engine.backend().activation_dtype(), DType::F32);
  const int32_t max_tokens = static_cast<int32_t>(cases.front().generated_ids.size());
  const auto out = run_all(engine, cases, greedy(max_tokens));
  if (v.num_blocks_override > 0) {
    EXPECT_GT(engine.scheduler().num_preemptions(), 0) << "the variant did not force a preemption";
  }
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(out[i], cases[i].generated_ids) << name << " case " << i << " (" << cases[i].prompt_ids.size()
                                              << "-token prompt)";
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, CudaFixtureParity,
                         ::testing::Combine(::testing::ValuesIn(kFixtures), ::testing::ValuesIn(kVariants)),
                         [](const auto& param_info) {
                           std::string n = std::string(std::get<0>(param_info.param)) + "_" +
                                           std::get<1>(param_info.param).name;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace pagoda

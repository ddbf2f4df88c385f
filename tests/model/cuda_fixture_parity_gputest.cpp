// The tiny fixtures on the GPU with fp32 activations (--dtype float32): greedy tokens identical to
// Hugging Face transformers' fp32 reference (the same reference the CPU engine matches in ctest),
// for every fixture — Qwen3 tied/untied/GQA/sharded, both Qwen3.5 layouts, Llama 3, Qwen2, Mistral
// and Gemma 3 (every RoPE scaling, biases, sliding windows, soft-capping) — batched with CUDA
// graphs, eagerly, and with chunked prefill plus forced preemption. In bf16 the fixtures' near-tied
// top-2 logits (margins down to 3e-3) flip some tokens; that is what the fp32 mode is for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "../support/engine_driver.h"
#include "model/registry.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;
using testing::load_reference;
using testing::greedy;
using testing::run_all;

const char* const kFixtures[] = {"qwen3-tiny-tied", "qwen3-tiny-untied-gqa4", "qwen3-tiny-mha-sharded",
                                 "qwen3_5-tiny-text", "qwen3_5-tiny-mm", "llama3-tiny-tied-bias",
                                 "llama3-tiny-untied", "qwen2-tiny-bias", "qwen2-tiny-yarn", "mistral-tiny-swa",
                                 "mistral-tiny-linear", "gemma3-tiny-text", "gemma3-tiny-softcap", "gemma3-tiny-mm",
                                 // Mixtures of experts: never run on a GPU yet (docs/benchmarks.md).
                                 "qwen3_moe-tiny-dense-layer", "qwen3_moe-tiny-raw-topk", "qwen3_5_moe-tiny-mm",
                                 "qwen3_5_moe-tiny-mm-relayout",
                                 // Fused qkv_proj / gate_up_proj loaded as parts lists.
                                 "phi3-tiny-fused",
                                 // FP8 weights (block scales, per-channel; Qwen3.5's interleaved q|gate rows).
                                 "qwen3-tiny-fp8-block", "qwen3-tiny-fp8-channel", "qwen3_5-tiny-fp8-block",
                                 // 4-bit weights (AWQ, GPTQ, compressed-tensors W4A16).
                                 "qwen3-tiny-awq", "qwen3-tiny-gptq", "qwen3-tiny-w4a16", "qwen3_5-tiny-gptq"};

struct Variant {
  const char* name;
  bool eager;
  int32_t max_num_batched_tokens;
  int32_t max_num_seqs;
  bool starve_blocks;  // blocks for the longest case and one more: the cases cannot all run at once
};

const Variant kVariants[] = {
    {"Graphs", false, 2048, 16, false},
    {"Eager", true, 2048, 16, false},
    // 48-token steps cut the prompts (up to 300 tokens) across several 64-token GDN chunks at odd
    // places; a pool that holds the longest case but not all of them at once (every case admitted
    // together) forces preemption and recompute.
    {"ChunkedPreempted", false, 48, 8, true},
};

class CudaFixtureParity : public ::testing::TestWithParam<std::tuple<const char*, Variant>> {};

TEST_P(CudaFixtureParity, Fp32GreedyTokensEqualTransformers) {
  const std::string name = std::get<0>(GetParam());
  const Variant v = std::get<1>(GetParam());
  // The engine refuses sequences beyond max_position_embeddings (qwen2-tiny-yarn's is 256).
  const int64_t max_positions = load_model_config(fixture_model_dir(name)).max_position_embeddings;
  std::vector<testing::ReferenceCase> cases;
  for (auto& rc : load_reference(name))
    if (static_cast<int64_t>(rc.prompt_ids.size() + rc.generated_ids.size()) <= max_positions) cases.push_back(rc);
  ASSERT_FALSE(cases.empty());
  EngineConfig c;
  c.device = "cuda";
  c.dtype = "float32";
  c.enforce_eager = v.eager;
  c.max_num_seqs = v.max_num_seqs;
  c.max_num_batched_tokens = v.max_num_batched_tokens;
  c.max_model_len = static_cast<int32_t>(std::min<int64_t>(340, max_positions));  // the longest: 300 + 32
  c.block_size = 16;
  c.kv_cache_memory_bytes = 64 << 20;
  if (v.starve_blocks) {
    size_t longest = 0;
    for (const auto& rc : cases) longest = std::max(longest, rc.prompt_ids.size() + rc.generated_ids.size());
    c.num_gpu_blocks_override = static_cast<int64_t>((longest + 15) / 16 + 1);
    c.max_model_len = static_cast<int32_t>(c.num_gpu_blocks_override * 16);
  }
  Engine engine(fixture_model_dir(name), c);
  ASSERT_EQ(engine.backend().activation_dtype(), DType::F32);
  const int32_t max_tokens = static_cast<int32_t>(cases.front().generated_ids.size());
  const auto out = run_all(engine, cases, greedy(max_tokens));
  if (v.starve_blocks) {
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

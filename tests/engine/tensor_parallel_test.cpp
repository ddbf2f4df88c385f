// Tensor parallelism on the CPU (--tensor-parallel-size N, engine/executor.h): N ranks, each a thread
// with its shard of every layer — its query heads, its KV heads (shared when fewer than the ranks),
// its MLP and experts' columns, its Gated DeltaNet heads, conv channels and recurrent state — summing row-parallel
// products through the host communicator. Every family fixture gives the one-rank greedy tokens, and
// logprobs within float rounding (the shards sum the same products in another order), through
// chunked prefill, preemption, prefix-cache hits with state snapshots, and speculative decoding with
// rejected drafts.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/device_error.h"
#include "core/error.h"
#include "core/fault_injection.h"
#include "engine/engine.h"
#include "prefix_caching_scenarios.h"
#include "speculative_scenarios.h"

namespace pagoda {
namespace {

struct TpCase {
  const char* fixture;
  std::vector<int32_t> sizes;  // the tensor-parallel sizes its heads divide
};

void PrintTo(const TpCase& c, std::ostream* os) { *os << c.fixture; }

class TensorParallel : public ::testing::TestWithParam<TpCase> {};

// Chunked prefill, preemption and eviction (16 blocks), prefix-cache hits with state snapshots.
testing::Knobs caching_knobs() {
  testing::Knobs k;
  k.together = true;
  k.max_model_len = 200;
  k.num_blocks = 16;
  k.snapshot_fraction = 0.5;
  k.max_tokens = 10;
  return k;
}

TEST_P(TensorParallel, RanksGiveTheOneRankTokensThroughChunksPreemptionAndCaching) {
  const std::vector<testing::Request> reqs = testing::shared_prefix_requests_in_every_vocabulary();
  testing::Knobs k = caching_knobs();
  const testing::RunOutput one = testing::run(GetParam().fixture, reqs, k);
  for (const int32_t tp : GetParam().sizes) {
    SCOPED_TRACE("tensor parallel size " + std::to_string(tp));
    k.tp = tp;
    const testing::RunOutput many = testing::run(GetParam().fixture, reqs, k);
    testing::expect_same(many, one, 1e-4);
    EXPECT_GT(many.preemptions, 0) << "the pool should force preemption";
    EXPECT_GT(many.hits, 0);
  }
}

// Speculative decoding at the same sizes: n-gram drafts over self-repeating prompts, some rejected
// (the ranks' caches and, on hybrids, recurrent states roll back alike), give the plain tokens.
TEST_P(TensorParallel, RanksGiveThePlainTokensWithRejectedDrafts) {
  auto prompts = testing::spec::prompts();
  for (auto& p : prompts)
    for (int32_t& t : p) t %= 256;  // the smallest fixture vocabulary
  testing::spec::Knobs k;
  k.max_tokens = 12;
  k.max_model_len = 200;  // within every fixture's max_position_embeddings (256 at the least)
  const testing::spec::RunOutput plain = testing::spec::run(GetParam().fixture, prompts, k);
  k.k = 3;
  for (const int32_t tp : GetParam().sizes) {
    SCOPED_TRACE("tensor parallel size " + std::to_string(tp));
    k.tp = tp;
    const testing::spec::RunOutput many = testing::spec::run(GetParam().fixture, prompts, k);
    testing::spec::expect_same(many, plain);
    EXPECT_GT(many.stats.spec_num_drafts, 0);
    EXPECT_LT(many.stats.spec_num_accepted_tokens, many.stats.spec_num_draft_tokens) << "some drafts must be rejected";
  }
}

// Every family (Qwen3 tied / untied GQA / MHA, Qwen3.5 hybrid, Llama with biases and untied, Qwen2
// with biases and YaRN, Mistral full and sliding window, Gemma 3 with and without soft-capping,
// Phi-3's fused projections, Qwen3-MoE with a dense layer and without renormalised top-k, Qwen3.5-MoE
// with its shared expert) at the sizes its 4 or 6 heads allow; with 1 or 2 KV heads, 4 ranks share
// them.
INSTANTIATE_TEST_SUITE_P(
    Fixtures, TensorParallel,
    ::testing::Values(TpCase{"qwen3-tiny-tied", {2, 4}}, TpCase{"qwen3-tiny-untied-gqa4", {2, 4}},
                      TpCase{"qwen3-tiny-mha-sharded", {2, 4}}, TpCase{"qwen3_5-tiny-text", {2, 4}},
                      TpCase{"llama3-tiny-tied-bias", {2}}, TpCase{"llama3-tiny-untied", {2, 4}},
                      TpCase{"qwen2-tiny-bias", {2, 4}}, TpCase{"qwen2-tiny-yarn", {2}},
                      TpCase{"mistral-tiny-swa", {2, 4}}, TpCase{"mistral-tiny-linear", {2}},
                      TpCase{"gemma3-tiny-text", {2, 4}}, TpCase{"gemma3-tiny-softcap", {2, 4}},
                      TpCase{"phi3-tiny-fused", {2}}, TpCase{"qwen3_moe-tiny-dense-layer", {2, 4}},
                      TpCase{"qwen3_moe-tiny-raw-topk", {2, 4}}, TpCase{"qwen3_5_moe-tiny-mm", {2, 4}}),
    [](const auto& info) {
      std::string n = info.param.fixture;
      for (char& c : n)
        if (c == '-') c = '_';
      return n;
    });

// Expert parallelism (--enable-expert-parallel): each rank holds num_experts / N experts whole (both
// checkpoint layouts: one tensor per expert, and packed [E, 2I, H] in the relayout fixture) and
// multiplies only the rows routed to them; the sum over the ranks gives the one-rank tokens and
// logprobs through chunked prefill, preemption and prefix caching — with Qwen3.5-MoE's shared expert
// split like a dense MLP beside them.
TEST(ExpertParallel, RanksHoldingWholeExpertsGiveTheOneRankTokens) {
  const std::vector<testing::Request> reqs = testing::shared_prefix_requests_in_every_vocabulary();
  testing::Knobs k = caching_knobs();
  for (const char* fixture : {"qwen3_moe-tiny-dense-layer", "qwen3_moe-tiny-raw-topk", "qwen3_5_moe-tiny-mm",
                              "qwen3_5_moe-tiny-mm-relayout"}) {
    SCOPED_TRACE(fixture);
    k.tp = 1;
    k.ep = false;
    const testing::RunOutput one = testing::run(fixture, reqs, k);
    k.ep = true;
    for (const int32_t tp : {2, 4}) {
      SCOPED_TRACE("tensor parallel size " + std::to_string(tp));
      k.tp = tp;
      const testing::RunOutput many = testing::run(fixture, reqs, k);
      testing::expect_same(many, one, 1e-4);
      EXPECT_GT(many.preemptions, 0) << "the pool should force preemption";
      EXPECT_GT(many.hits, 0);
    }
  }
}

TEST(TensorParallelSpeculative, RanksGiveTheOneRankTokensWithRejectedDrafts) {
  const auto prompts = testing::spec::prompts();
  for (const char* fixture : {"qwen3-tiny-tied", "qwen3_5-tiny-text"}) {
    SCOPED_TRACE(fixture);
    testing::spec::Knobs k;
    const testing::spec::RunOutput plain = testing::spec::run(fixture, prompts, k);
    k.k = 3;
    k.tp = 2;
    const testing::spec::RunOutput two = testing::spec::run(fixture, prompts, k);
    testing::spec::expect_same(two, plain);
    EXPECT_GT(two.stats.spec_num_drafts, 0);
    EXPECT_LT(two.stats.spec_num_accepted_tokens, two.stats.spec_num_draft_tokens) << "some drafts must be rejected";
  }
}

// The MTP head (whole, on rank 0) drafts from the sharded model's hidden states.
TEST(TensorParallelSpeculative, TheMtpHeadDraftsForTheRanks) {
  const auto prompts = testing::spec::prompts();
  testing::spec::Knobs k;
  const testing::spec::RunOutput plain = testing::spec::run("qwen3_5-tiny-mtp", prompts, k);
  k.k = 2;
  k.mtp = true;
  k.tp = 2;
  const testing::spec::RunOutput two = testing::spec::run("qwen3_5-tiny-mtp", prompts, k);
  testing::spec::expect_same(two, plain);
  EXPECT_GT(two.stats.spec_num_drafts, 0);
}

// An EAGLE-3 head (whole, on rank 0) reads the aux hidden states of rank 0's shard (the residual
// stream is whole on every rank) and the whole embedding table.
TEST(TensorParallelSpeculative, AnEagle3HeadDraftsForTheRanks) {
  const auto prompts = testing::spec::prompts_in(256);
  testing::spec::Knobs k;
  const testing::spec::RunOutput plain = testing::spec::run("qwen3-tiny-untied-gqa4", prompts, k);
  k.k = 2;
  k.eagle3 = std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/eagle3/qwen3-gqa4-eagle3";
  k.tp = 2;
  const testing::spec::RunOutput two = testing::spec::run("qwen3-tiny-untied-gqa4", prompts, k);
  testing::spec::expect_same(two, plain);
  EXPECT_GT(two.stats.spec_num_drafts, 0);
}

std::string load_error(const std::string& fixture, int32_t tp) {
  EngineConfig config;
  config.tensor_parallel_size = tp;
  config.max_model_len = 64;
  config.num_gpu_blocks_override = 8;
  try {
    Engine engine(testing::fixture_model_dir(fixture), config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Sizes the heads do not allow are refused by name at load, and a group on a device without a
// communicator before it.
TEST(TensorParallel, WhatDoesNotDivideIsRefusedByName) {
  std::string e = load_error("llama3-tiny-tied-bias", 4);  // 6 query heads
  EXPECT_NE(e.find("num_attention_heads (6) does not divide over 4 ranks"), std::string::npos) << e;
  e = load_error("qwen3-tiny-untied-gqa4", 3);  // 8 query heads
  EXPECT_NE(e.find("num_attention_heads (8) does not divide over 3 ranks"), std::string::npos) << e;
  EngineConfig config;
  config.tensor_parallel_size = 2;
  config.device = "vulkan";
  try {
    validate_engine_config(config);
    ADD_FAILURE() << "a vulkan group was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("--tensor-parallel-size 2 on --device vulkan"), std::string::npos) << err.what();
  }
}

// A rank that stops answering mid-step (PAGODA_INJECT_FAULT rank-stall: rank 1 enters none of the
// step's collectives) would hold rank 0 in its all-reduce for ever; the step watchdog aborts the
// group after VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS and the step ends with a FatalDeviceError that says
// so. Without the watchdog this test would hang, not fail (ctest's timeout ends it).
TEST(TensorParallel, AStalledRankEndsTheStepWithAFatalErrorNotAHang) {
  ::setenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "1", 1);
  FaultInjector::global().arm(FaultSite::RankStall, 3);
  testing::Knobs k;
  k.tp = 2;
  k.max_tokens = 8;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    testing::run("qwen3-tiny-tied", testing::shared_prefix_requests(), k);
    ADD_FAILURE() << "the stalled rank went unnoticed";
  } catch (const FatalDeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("did not finish within 1 s (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS)"),
              std::string::npos)
        << e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(waited, 30.0);
  EXPECT_EQ(FaultInjector::global().num_thrown(FaultSite::RankStall), 1);
  FaultInjector::global().disarm();
  ::unsetenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS");
}

// A step that fails on a rank other than the driver aborts the group, which cannot sum again: the
// engine ends with a FatalDeviceError naming the rank's error rather than failing every later step.
TEST(TensorParallel, ARanksFailureEndsTheEngineWithAFatalError) {
  FaultInjector::global().arm(FaultSite::RankError, 2);
  testing::Knobs k;
  k.tp = 2;
  try {
    testing::run("qwen3-tiny-tied", testing::shared_prefix_requests(), k);
    ADD_FAILURE() << "the rank's failure went unnoticed";
  } catch (const FatalDeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("injected fault (PAGODA_INJECT_FAULT rank-error"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot sum again"), std::string::npos) << e.what();
  }
  EXPECT_EQ(FaultInjector::global().num_thrown(FaultSite::RankError), 1);
  FaultInjector::global().disarm();
}

TEST(TensorParallel, TheStepTimeoutIsCheckedWhereItIsRead) {
  ::setenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "soon", 1);
  testing::Knobs k;
  k.tp = 2;
  try {
    testing::run("qwen3-tiny-tied", testing::shared_prefix_requests(), k);
    ADD_FAILURE() << "a malformed timeout was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS must be a number of seconds"),
              std::string::npos)
        << e.what();
  }
  ::unsetenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS");
}

}  // namespace
}  // namespace pagoda

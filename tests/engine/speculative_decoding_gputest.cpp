// Speculative decoding on the CUDA backend (fp32, CUDA graphs on for plain decode steps): the
// scenarios of the CPU test (speculative_scenarios.h) give the same greedy tokens and logprobs with
// and without drafts — n-gram, drafts right / partly wrong / absent in one batch, a draft model, the
// MTP head, EAGLE-3 heads — through chunked prefill, preemption and prefix caching, on a dense and a hybrid
// fixture; and the target drafting for itself is accepted almost always.
#include <gtest/gtest.h>

#include "speculative_scenarios.h"

namespace pagoda {
namespace {

using namespace pagoda::testing::spec;
using pagoda::testing::FixtureParamName;

Knobs on_cuda() {
  Knobs k;
  k.device = "cuda";
  k.dtype = "float32";
  return k;
}

class CudaSpeculativeDecoding : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaSpeculativeDecoding, NgramOracleAndDraftModelGiveTheSameTokens) {
  const auto reqs = prompts();
  const RunOutput plain = run(GetParam(), reqs, on_cuda());
  Knobs ngram = on_cuda();
  ngram.k = 3;
  expect_same(run(GetParam(), reqs, ngram), plain);
  Knobs oracle = on_cuda();
  oracle.k = 4;
  oracle.oracle = true;
  oracle.max_num_seqs = 6;
  oracle.num_blocks = 14;
  oracle.max_model_len = 96;
  const RunOutput tight = run(GetParam(), reqs, oracle, &plain.tokens);
  expect_same(tight, plain);
  EXPECT_GT(tight.preemptions, 0);
  EXPECT_GT(tight.stats.spec_num_accepted_tokens, 0);
  EXPECT_LT(tight.stats.spec_num_accepted_tokens, tight.stats.spec_num_draft_tokens);
  Knobs draft = on_cuda();
  draft.k = 3;
  draft.draft_model = "qwen3-tiny-tied";
  draft.together = false;
  const RunOutput drafted = run(GetParam(), reqs, draft);
  expect_same(drafted, plain);
  EXPECT_GT(drafted.stats.prefix_cache_hits, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaSpeculativeDecoding, ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text"),
                         FixtureParamName());

TEST(CudaSpeculativeDecodingMtp, TheMtpHeadGivesTheSameTokens) {
  const auto reqs = prompts();
  const RunOutput plain = run("qwen3_5-tiny-mtp", reqs, on_cuda());
  Knobs kn = on_cuda();
  kn.k = 2;
  kn.mtp = true;
  const RunOutput spec = run("qwen3_5-tiny-mtp", reqs, kn);
  expect_same(spec, plain);
  EXPECT_GT(spec.stats.spec_num_drafts, 0);
}

// EAGLE-3 heads (tests/fixtures/eagle3) on their targets: the target keeps its aux hidden states
// inside the captured decode graphs too.
TEST(CudaSpeculativeDecodingEagle3, TheCommittedHeadsGiveTheSameTokens) {
  for (const auto& [target, head] : {std::pair<std::string, std::string>{"qwen3-tiny-untied-gqa4", "qwen3-gqa4-eagle3"},
                                     std::pair<std::string, std::string>{"llama3-tiny-untied", "llama3-untied-eagle3"}}) {
    SCOPED_TRACE(head);
    const auto reqs = prompts_in(load_model_config(pagoda::testing::fixture_model_dir(target)).vocab_size);
    const RunOutput plain = run(target, reqs, on_cuda());
    for (int32_t k : {1, 3}) {
      Knobs kn = on_cuda();
      kn.k = k;
      kn.eagle3 = std::string(PAGODA_SOURCE_DIR) + "/tests/fixtures/eagle3/" + head;
      const RunOutput spec = run(target, reqs, kn);
      expect_same(spec, plain);
      EXPECT_GT(spec.stats.spec_num_drafts, 0);
      kn.max_num_seqs = 8;
      kn.num_blocks = 12;
      kn.max_model_len = 96;
      const RunOutput tight = run(target, reqs, kn);
      expect_same(tight, plain);
      EXPECT_GT(tight.preemptions, 0);
    }
  }
}

TEST(CudaSpeculativeDecodingDraft, TheTargetDraftingForItselfIsAcceptedAlmostAlways) {
  const auto reqs = prompts();
  Knobs kn = on_cuda();
  kn.k = 4;
  kn.draft_model = "qwen3-tiny-tied";
  const RunOutput spec = run("qwen3-tiny-tied", reqs, kn);
  expect_same(spec, run("qwen3-tiny-tied", reqs, on_cuda()));
  EXPECT_GE(static_cast<double>(spec.stats.spec_num_accepted_tokens),
            0.97 * static_cast<double>(spec.stats.spec_num_draft_tokens));
}

}  // namespace
}  // namespace pagoda

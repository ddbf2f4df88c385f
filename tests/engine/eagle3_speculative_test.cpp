// EAGLE-3 heads drafting (method "eagle3", model/eagle3_head.h) are lossless: greedy decoding with
// the head's drafts gives the plain greedy tokens and logprobs, for k = 1..3 with adaptive
// speculation on and off, through chunked prefill, preemption and prefix caching. On the committed
// heads (tests/fixtures/eagle3, tools/make_eagle3_fixtures.py) and on a random head written here
// for a third target, reading the stream after its last layer.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "../model/eagle3_fixture.h"
#include "../model/eagle3_reference_check.h"
#include "core/error.h"
#include "engine/speculative_config.h"
#include "speculative_scenarios.h"

namespace pagoda {
namespace {

using testing::eagle3_fixture_dir;
using testing::fixture_model_dir;
using testing::spec::expect_same;
using testing::spec::Knobs;
using testing::spec::prompts_in;
using testing::spec::run;
using testing::spec::RunOutput;

void expect_lossless(const std::string& target, const std::string& head) {
  const auto reqs = prompts_in(load_model_config(fixture_model_dir(target)).vocab_size);
  const RunOutput plain = run(target, reqs, {});
  for (int32_t k : {1, 2, 3})
    for (bool adaptive : {false, true}) {
      SCOPED_TRACE("k = " + std::to_string(k) + (adaptive ? ", adaptive" : ""));
      Knobs kn;
      kn.k = k;
      kn.adaptive = adaptive;
      kn.eagle3 = head;
      const RunOutput spec = run(target, reqs, kn);
      expect_same(spec, plain);
      EXPECT_GT(spec.stats.spec_num_drafts, 0);
      EXPECT_LE(spec.stats.spec_num_accepted_tokens, spec.stats.spec_num_draft_tokens);
    }
  // Preemption (recomputed sequences catch the head's cache up again) and prefix-cache hits.
  Knobs kn;
  kn.k = 3;
  kn.eagle3 = head;
  kn.max_num_seqs = 8;
  kn.num_blocks = 12;
  kn.max_model_len = 96;
  const RunOutput tight = run(target, reqs, kn);
  expect_same(tight, plain);
  EXPECT_GT(tight.preemptions, 0);
  kn.num_blocks = 400;
  kn.max_model_len = 400;
  kn.together = false;
  const RunOutput sequential = run(target, reqs, kn);
  expect_same(sequential, plain);
  EXPECT_GT(sequential.stats.prefix_cache_hits, 0);
}

TEST(SpeculativeEagle3, TheCommittedHeadsGiveThePlainGreedyTokens) {
  expect_lossless("qwen3-tiny-untied-gqa4", eagle3_fixture_dir("qwen3-gqa4-eagle3"));
  expect_lossless("llama3-tiny-untied", eagle3_fixture_dir("llama3-untied-eagle3"));
}

TEST(SpeculativeEagle3, ARandomHeadReadingTheLastLayerGivesThePlainGreedyTokens) {
  io_test::TempDir dir;
  testing::RandomEagle3Head o;
  o.aux_ids = {2, 0, 1};  // ascending whatever the order written; 2 = after the last of 2 layers
  o.hidden = 48;          // narrower than the target: its own embed_tokens, target_hidden_size
  testing::write_random_eagle3_head(dir.path(), load_model_config(fixture_model_dir("qwen3-tiny-tied")), o);
  expect_lossless("qwen3-tiny-tied", dir.path());
}

// Drafts the target accepts: a head whose every draft is the target's most frequent greedy token
// (all logits 0: draft id 0, which d2t maps to it). Some drafts are accepted (11 of 428 at k = 3),
// so some catch-up passes read several verified rows of the target's aux states.
TEST(SpeculativeEagle3, AcceptedDraftsGiveThePlainGreedyTokens) {
  const std::string target = "qwen3-tiny-untied-gqa4";
  const auto reqs = prompts_in(256);
  const RunOutput plain = run(target, reqs, {});
  std::map<int32_t, int> count;
  for (const auto& t : plain.tokens)
    for (int32_t x : t) ++count[x];
  int32_t frequent = 0;
  for (const auto& [tok, n] : count)
    if (n > count[frequent]) frequent = tok;
  io_test::TempDir dir;
  testing::RandomEagle3Head o;
  o.constant_draft = frequent;
  testing::write_random_eagle3_head(dir.path(), load_model_config(fixture_model_dir(target)), o);
  for (int32_t k : {1, 3}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    Knobs kn;
    kn.k = k;
    kn.eagle3 = dir.path();
    kn.max_num_seqs = 8;
    const RunOutput spec = run(target, reqs, kn);
    expect_same(spec, plain);
    EXPECT_GT(spec.stats.spec_num_accepted_tokens, 0) << "token " << frequent << " appears " << count[frequent]
                                                      << " times in the plain outputs";
    EXPECT_LT(spec.stats.spec_num_accepted_tokens, spec.stats.spec_num_draft_tokens);
  }
}

// The drafts the engine's proposer makes after a chunked prefill (catch-up passes over each chunk,
// reading the target's aux rows of the step, then a chain of single-token passes) are the head's
// greedy chain computed directly with runners (the chain eagle3_head_test.cpp holds to the reference).
TEST(SpeculativeEagle3, TheProposersDraftsAreTheHeadsGreedyChain) {
  io_test::TempDir tmp;
  testing::RandomEagle3Head o;
  o.aux_ids = {0, 1, 2};
  o.hidden = 48;
  testing::write_random_eagle3_head(tmp.path(), load_model_config(fixture_model_dir("qwen3-tiny-tied")), o);
  struct Case {
    std::string target, head;
  };
  for (const Case& c : {Case{"qwen3-tiny-untied-gqa4", eagle3_fixture_dir("qwen3-gqa4-eagle3")},
                        Case{"llama3-tiny-untied", eagle3_fixture_dir("llama3-untied-eagle3")},
                        Case{"qwen3-tiny-tied", tmp.path()}}) {
    SCOPED_TRACE(c.head);
    const std::string target_dir = fixture_model_dir(c.target);
    std::mt19937 rng(5);
    std::vector<int32_t> prompt = testing::random_tokens(rng, 41);
    for (int32_t& t : prompt) t %= static_cast<int32_t>(load_model_config(target_dir).vocab_size);
    constexpr int32_t k = 4;
    const std::vector<int32_t> want = testing::eagle3_direct_drafts(target_dir, c.head, prompt, k);
    EngineConfig config;
    config.max_num_batched_tokens = 16;  // three chunks of prefill
    config.max_num_seqs = 2;
    config.max_model_len = 128;
    config.num_gpu_blocks_override = 32;
    config.speculative.method = SpeculativeMethod::Eagle3;
    config.speculative.model = c.head;
    config.speculative.num_speculative_tokens = k;
    config.speculative.adaptive = false;
    Engine engine(target_dir, config);
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 8;
    p.ignore_eos = true;
    engine.add_request(prompt, p);
    std::vector<int32_t> got;
    for (int steps = 0; got.empty() && steps < 10; ++steps)
      for (const RequestOutput& out : engine.step()) got = out.new_token_ids;
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(engine.scheduler().running().size(), 1u);
    got.insert(got.end(), engine.scheduler().running()[0]->draft_tokens.begin(),
               engine.scheduler().running()[0]->draft_tokens.end());
    EXPECT_EQ(got, want) << "the sampled token, then the drafts";
  }
}

TEST(SpeculativeEagle3, ConfigNamesTheMethodAndRefusesEagle1) {
  const SpeculativeConfig c = parse_speculative_config(
      R"({"method": "eagle3", "model": "/heads/x", "num_speculative_tokens": 3, "adaptive": false})");
  EXPECT_EQ(c.method, SpeculativeMethod::Eagle3);
  EXPECT_EQ(c.model, "/heads/x");
  EXPECT_EQ(c.num_speculative_tokens, 3);
  EXPECT_EQ(c.describe(), "eagle3 /heads/x k=3");
  const std::string eagle1 = io_test::error_of(
      [] { parse_speculative_config(R"({"method": "eagle", "model": "/heads/x", "num_speculative_tokens": 3})"); });
  EXPECT_TRUE(io_test::contains(eagle1, "EAGLE-1 heads) is not supported yet; pagoda takes EAGLE-3 heads")) << eagle1;
  const std::string no_model =
      io_test::error_of([] { parse_speculative_config(R"({"method": "eagle3", "num_speculative_tokens": 3})"); });
  EXPECT_TRUE(io_test::contains(no_model, "needs \"model\": the EAGLE-3 head's directory")) << no_model;
}

TEST(SpeculativeEagle3, AHybridTargetIsRefusedAtLoad) {
  EngineConfig config;
  config.speculative = parse_speculative_config(R"({"method": "eagle3", "model": ")" +
                                                eagle3_fixture_dir("qwen3-gqa4-eagle3") +
                                                R"(", "num_speculative_tokens": 2})");
  // qwen3_5-tiny-text has the vocabulary of 512, not the head's 256: refused before the layers.
  const std::string msg = io_test::error_of([&] { Engine(fixture_model_dir("qwen3_5-tiny-text"), config); });
  EXPECT_TRUE(io_test::contains(msg, "was made for a vocabulary of 256 tokens")) << msg;
}

}  // namespace
}  // namespace pagoda

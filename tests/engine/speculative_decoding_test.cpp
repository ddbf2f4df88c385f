// Speculative decoding is lossless: the same requests with and without drafts give the same greedy
// tokens (and logprobs), through chunked prefill, preemption, prefix caching and batches where some
// sequences bring drafts and others do not; at temperature 1 the token distribution is the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/ngram_proposer.h"
#include "engine/speculative_config.h"
#include "speculative_scenarios.h"
#include "core/build_paths.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;
using testing::spec::Knobs;
using testing::spec::RunOutput;
using testing::spec::run;
using testing::spec::prompts;
using testing::random_tokens;
using testing::spec::expect_same;

class SpeculativeDecodingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeDecodingTest, NgramDraftsGiveTheSameGreedyTokens) {
  const auto reqs = prompts();
  const RunOutput plain = run(GetParam(), reqs, {});
  for (int32_t k : {1, 3, 5}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    Knobs kn;
    kn.k = k;
    const RunOutput spec = run(GetParam(), reqs, kn);
    expect_same(spec, plain);
    EXPECT_GT(spec.stats.spec_num_drafts, 0);
    EXPECT_LE(spec.stats.spec_num_accepted_tokens, spec.stats.spec_num_draft_tokens);
  }
}

// Adaptive speculation (engine/speculation_controller.h) picks k per step from measured times:
// whatever it picks, the tokens are the plain ones.
TEST_P(SpeculativeDecodingTest, AdaptiveSpeculationGivesTheSameGreedyTokens) {
  const auto reqs = prompts();
  const RunOutput plain = run(GetParam(), reqs, {});
  Knobs kn;
  kn.k = 4;
  kn.adaptive = true;
  kn.max_num_seqs = 8;
  const RunOutput spec = run(GetParam(), reqs, kn);
  expect_same(spec, plain);
  EXPECT_GT(spec.stats.spec_num_drafts, 0) << "it drafts at k until the first steps are measured";
}

TEST_P(SpeculativeDecodingTest, AcceptedRejectedAndPlainSequencesInOneBatchGiveTheSameTokens) {
  const auto reqs = prompts();
  Knobs base;
  base.max_num_seqs = 8;
  base.budget = 64;
  const RunOutput plain = run(GetParam(), reqs, base);
  Knobs kn = base;
  kn.k = 4;
  kn.oracle = true;
  const RunOutput spec = run(GetParam(), reqs, kn, &plain.tokens);
  expect_same(spec, plain);
  // Whole runs of drafts were accepted and some rejected, per position too.
  EXPECT_GT(spec.stats.spec_num_accepted_tokens, spec.stats.spec_num_draft_tokens / 2);
  EXPECT_LT(spec.stats.spec_num_accepted_tokens, spec.stats.spec_num_draft_tokens);
  ASSERT_EQ(spec.stats.spec_accepted_per_pos.size(), 4u);
  EXPECT_GT(spec.stats.spec_accepted_per_pos[3], 0);
  EXPECT_GE(spec.stats.spec_accepted_per_pos[0], spec.stats.spec_accepted_per_pos[3]);
}

TEST_P(SpeculativeDecodingTest, PreemptionAndPrefixCachingGiveTheSameTokens) {
  const auto reqs = prompts();
  const RunOutput plain = run(GetParam(), reqs, {});
  Knobs kn;
  kn.k = 4;
  kn.oracle = true;
  kn.max_num_seqs = 6;
  kn.num_blocks = 14;  // 224 tokens for 9 requests of up to 90: sequences are preempted
  kn.max_model_len = 96;
  const RunOutput spec = run(GetParam(), reqs, kn, &plain.tokens);
  expect_same(spec, plain);
  EXPECT_GT(spec.preemptions, 0);
  EXPECT_GT(spec.stats.spec_num_accepted_tokens, 0);
  // One after another, the shared prefix and the repeated prompts hit the cache (on the hybrid
  // model too: its state snapshots are never taken after unverified tokens).
  kn.num_blocks = 400;
  kn.max_model_len = 400;
  kn.together = false;
  const RunOutput sequential = run(GetParam(), reqs, kn, &plain.tokens);
  expect_same(sequential, plain);
  EXPECT_GT(sequential.stats.prefix_cache_hits, 0);
  EXPECT_GT(sequential.stats.spec_num_accepted_tokens, 0);
}

TEST_P(SpeculativeDecodingTest, PenaltiesAndLogitBiasAreAppliedToEveryVerifiedRow) {
  const auto reqs = prompts();
  Knobs base;
  base.repetition_penalty = 1.3;
  base.presence_penalty = 0.4;
  base.logit_bias = true;
  const RunOutput plain = run(GetParam(), reqs, base);
  Knobs kn = base;
  kn.k = 3;
  kn.oracle = true;
  const RunOutput spec = run(GetParam(), reqs, kn, &plain.tokens);
  expect_same(spec, plain);
  EXPECT_GT(spec.stats.spec_num_accepted_tokens, 0);
  // The penalties matter here: without them the tokens differ.
  const RunOutput unpenalised = run(GetParam(), reqs, {});
  EXPECT_NE(unpenalised.tokens, plain.tokens);
}

// Chi-square statistic of two samples' counts over the same categories (homogeneity), and the
// 0.1% critical value for its degrees of freedom (Wilson–Hilferty).
struct ChiSquare {
  double statistic = 0, critical = 0;
  int df = 0;
};

ChiSquare two_sample_chi_square(const std::map<std::vector<int32_t>, int>& a, const std::map<std::vector<int32_t>, int>& b,
                                int na, int nb) {
  std::map<std::vector<int32_t>, std::pair<int, int>> cells;
  for (const auto& [key, n] : a) cells[key].first += n;
  for (const auto& [key, n] : b) cells[key].second += n;
  // Categories with too few expected counts are pooled into one.
  std::pair<int, int> rare{0, 0};
  std::vector<std::pair<int, int>> kept;
  for (const auto& [key, c] : cells) {
    if (c.first + c.second < 20) {
      rare.first += c.first;
      rare.second += c.second;
    } else {
      kept.push_back(c);
    }
  }
  if (rare.first + rare.second > 0) kept.push_back(rare);
  ChiSquare r;
  const double n = na + nb;
  for (const auto& [x, y] : kept) {
    const double tot = x + y;
    const double ex = tot * na / n, ey = tot * nb / n;
    r.statistic += (x - ex) * (x - ex) / ex + (y - ey) * (y - ey) / ey;
  }
  r.df = static_cast<int>(kept.size()) - 1;
  const double z = 3.0902;  // one-sided 0.1%
  const double v = 2.0 / (9.0 * r.df);
  r.critical = r.df * std::pow(1 - v + z * std::sqrt(v), 3);
  return r;
}

// Temperature 1 with top-k and top-p, each request its own seed: many requests per step.
Knobs sampling_knobs() {
  Knobs k;
  k.temperature = 1.0;
  k.top_k = 3;
  k.top_p = 0.95;
  k.max_tokens = 4;
  k.seeded = true;
  k.max_num_seqs = 64;
  k.budget = 1024;
  return k;
}

TEST_P(SpeculativeDecodingTest, SamplingAtTemperatureOneKeepsTheTokenDistribution) {
  // One prompt sampled 1,200 times with top-k and top-p: the joint distribution of output tokens
  // 2 and 3 (the ones drafts can decide) with drafts equals the one without, at significance 0.1%.
  std::mt19937 rng(5);
  const std::vector<int32_t> prompt = random_tokens(rng, 12);
  const std::vector<std::vector<int32_t>> reqs(1200, prompt);
  const Knobs base = sampling_knobs();
  const RunOutput plain = run(GetParam(), reqs, base);
  std::map<std::vector<int32_t>, int> count_plain, count_spec;
  for (const auto& t : plain.tokens) ++count_plain[{t[1], t[2]}];
  // Drafts after output token 1: the plain run's most frequent tokens 2 and 3 after it, so that
  // many are accepted and many rejected.
  std::map<int32_t, std::map<std::vector<int32_t>, int>> after;
  for (const auto& t : plain.tokens) ++after[t[0]][{t[1], t[2]}];
  Knobs kn = base;
  kn.k = 2;
  kn.proposer = [&after](const Sequence& seq, int32_t k) {
    std::vector<int32_t> drafts;
    auto it = after.find(seq.output()[0]);
    if (seq.num_output_tokens() != 1 || it == after.end()) return drafts;
    const auto best = std::max_element(it->second.begin(), it->second.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    drafts.assign(best->first.begin(), best->first.begin() + std::min<int32_t>(k, 2));
    return drafts;
  };
  const RunOutput spec = run(GetParam(), reqs, kn);
  for (const auto& t : spec.tokens) {
    ASSERT_EQ(t.size(), 4u);
    ++count_spec[{t[1], t[2]}];
  }
  EXPECT_GT(spec.stats.spec_num_accepted_tokens, 100);
  EXPECT_LT(spec.stats.spec_num_accepted_tokens, spec.stats.spec_num_draft_tokens);
  const ChiSquare c = two_sample_chi_square(count_plain, count_spec, 1200, 1200);
  ASSERT_GE(c.df, 2) << "too few categories to test";
  EXPECT_LT(c.statistic, c.critical) << "df " << c.df;
}

TEST_P(SpeculativeDecodingTest, DraftModelGivesTheSameTokensThroughPreemptionAndCaching) {
  const auto reqs = prompts();
  const RunOutput plain = run(GetParam(), reqs, {});
  Knobs kn;
  kn.k = 3;
  kn.draft_model = "qwen3-tiny-tied";
  const RunOutput spec = run(GetParam(), reqs, kn);
  expect_same(spec, plain);
  EXPECT_GT(spec.stats.spec_num_drafts, 0);
  kn.max_num_seqs = 8;
  kn.num_blocks = 12;
  kn.max_model_len = 96;
  const RunOutput tight = run(GetParam(), reqs, kn);
  expect_same(tight, plain);
  EXPECT_GT(tight.preemptions, 0);
  EXPECT_GT(tight.stats.spec_num_drafts, 0);
}

TEST(SpeculativeDraftModel, TheTargetDraftingForItselfIsAcceptedAlmostAlways) {
  // A check of the draft machinery itself: its KV catch-up, lookahead slots and recursion. With
  // the target as its own draft model every greedy draft should be right.
  const auto reqs = prompts();
  const RunOutput plain = run("qwen3-tiny-tied", reqs, {});
  Knobs kn;
  kn.k = 4;
  kn.draft_model = "qwen3-tiny-tied";
  const RunOutput spec = run("qwen3-tiny-tied", reqs, kn);
  expect_same(spec, plain);
  ASSERT_GT(spec.stats.spec_num_draft_tokens, 100);
  EXPECT_GE(static_cast<double>(spec.stats.spec_num_accepted_tokens),
            0.97 * static_cast<double>(spec.stats.spec_num_draft_tokens));
}

// Steps that draft nothing (vLLM's disable_by_batch_size here; an adaptive k of 0 the same way)
// still feed the draft model every verified token: when drafting resumes its cache has no holes,
// and the target drafting for itself is right as often as when it drafted every step (above).
TEST(SpeculativeDraftModel, TheDraftCacheHasNoHolesAfterStepsWithoutDrafts) {
  const std::string dir = fixture_model_dir("qwen3-tiny-tied");
  EngineConfig config;
  config.max_model_len = 200;
  config.speculative = parse_speculative_config(R"({"model": ")" + dir +
                                                R"(", "num_speculative_tokens": 4, "adaptive": false, "disable_by_batch_size": 1})");
  Engine engine(dir, config);
  std::mt19937 rng(21);
  SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  // Both decode together for 40 steps without drafts; then the second drafts alone.
  p.max_tokens = 40;
  engine.add_request(random_tokens(rng, 12), p);
  p.max_tokens = 140;
  engine.add_request(random_tokens(rng, 12), p);
  while (engine.has_unfinished()) engine.step();
  const EngineStats s = engine.core().stats();
  ASSERT_GT(s.spec_num_draft_tokens, 60) << "the second sequence drafts once alone";
  EXPECT_GE(static_cast<double>(s.spec_num_accepted_tokens), 0.97 * static_cast<double>(s.spec_num_draft_tokens))
      << s.spec_num_accepted_tokens << " of " << s.spec_num_draft_tokens;
}

TEST(SpeculativeDraftModel, SamplingKeepsTheTokenDistribution) {
  // The dense fixture drafting for itself (greedy drafts, often accepted); the acceptance rule is
  // the same for every proposer, and the hybrid target's case is tested with oracle drafts above.
  const std::string target = "qwen3-tiny-tied";
  std::mt19937 rng(9);
  const std::vector<int32_t> prompt = random_tokens(rng, 12);
  const std::vector<std::vector<int32_t>> reqs(1200, prompt);
  const Knobs base = sampling_knobs();
  const RunOutput plain = run(target, reqs, base);
  Knobs kn = base;
  kn.k = 2;
  kn.draft_model = target;
  const RunOutput spec = run(target, reqs, kn);
  std::map<std::vector<int32_t>, int> count_plain, count_spec;
  for (const auto& t : plain.tokens) ++count_plain[{t[1], t[2]}];
  for (const auto& t : spec.tokens) {
    ASSERT_EQ(t.size(), 4u);
    ++count_spec[{t[1], t[2]}];
  }
  EXPECT_GT(spec.stats.spec_num_accepted_tokens, 100) << spec.stats.spec_num_draft_tokens;
  EXPECT_LT(spec.stats.spec_num_accepted_tokens, spec.stats.spec_num_draft_tokens);
  const ChiSquare c = two_sample_chi_square(count_plain, count_spec, 1200, 1200);
  ASSERT_GE(c.df, 2) << "too few categories to test";
  EXPECT_LT(c.statistic, c.critical) << "df " << c.df;
}

TEST(SpeculativeMtp, TheMtpHeadGivesTheSameTokensThroughChunksPreemptionAndCaching) {
  // qwen3_5-tiny-mtp: the hybrid fixture with a random-weight MTP head (tools/make_mtp_fixture.py).
  const std::string model = "qwen3_5-tiny-mtp";
  const auto reqs = prompts();
  const RunOutput plain = run(model, reqs, {});
  for (int32_t k : {1, 3}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    Knobs kn;
    kn.k = k;
    kn.mtp = true;
    const RunOutput spec = run(model, reqs, kn);
    expect_same(spec, plain);
    EXPECT_GT(spec.stats.spec_num_drafts, 0);
    kn.max_num_seqs = 8;
    kn.num_blocks = 12;
    kn.max_model_len = 96;
    const RunOutput tight = run(model, reqs, kn);
    expect_same(tight, plain);
    EXPECT_GT(tight.preemptions, 0);
    kn.num_blocks = 400;
    kn.max_model_len = 400;
    kn.together = false;
    const RunOutput sequential = run(model, reqs, kn);
    expect_same(sequential, plain);
    EXPECT_GT(sequential.stats.prefix_cache_hits, 0);
  }
}

TEST(SpeculativeMtp, TheShippedModelsTrainedHeadIsMostlyAccepted) {
  // models/default carries an MTP head trained with the main model frozen (tools/train_mtp_head.py,
  // built from transformers' layers wired as vLLM wires them). Were pagoda's wiring different (the
  // hidden state before the final norm, the token not shifted, another position), its drafts
  // would be noise: most are accepted only when the head runs as it was trained.
  const std::string dir = std::string(PAGODA_SOURCE_DIR) + "/models/default";
  EngineConfig config;
  config.max_model_len = 512;
  // (Static k: the acceptance is what is measured here.)
  config.speculative = parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 1, "adaptive": false})");
  Engine engine(dir, config);
  ASSERT_NE(engine.tokenizer(), nullptr);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 96;
  p.ignore_eos = true;
  for (const char* text : {"In the beginning God created the heaven and the earth. And the earth",
                           "And Jesus answered and said unto them,", "The LORD is my shepherd; I shall not want."})
    engine.add_request(engine.tokenizer()->encode(text), p);
  while (engine.has_unfinished()) engine.step();
  const EngineStats s = engine.core().stats();
  ASSERT_GT(s.spec_num_draft_tokens, 150);
  EXPECT_GT(static_cast<double>(s.spec_num_accepted_tokens), 0.5 * static_cast<double>(s.spec_num_draft_tokens))
      << s.spec_num_accepted_tokens << " of " << s.spec_num_draft_tokens;
}

// Output tokens 2 and 3 of `n` samples of `text` on the shipped model at temperature 1 with top-k
// and top-p, with the speculative config `spec` ("" = none).
std::map<std::vector<int32_t>, int> shipped_model_samples(const std::string& spec, const std::string& text, int n,
                                                          EngineStats* stats) {
  EngineConfig config;
  config.max_model_len = 256;
  config.max_num_seqs = 256;
  config.speculative = parse_speculative_config(spec);
  config.speculative.adaptive = false;  // every step drafts: the distribution of verified tokens is tested
  Engine engine(std::string(PAGODA_SOURCE_DIR) + "/models/default", config);
  const std::vector<int32_t> prompt = engine.tokenizer()->encode(text);
  std::map<int64_t, size_t> index;
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
  auto step = [&] {
    for (const RequestOutput& o : engine.step()) {
      auto& t = out[index.at(o.id)];
      t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  };
  for (size_t i = 0; i < out.size(); ++i) {
    SamplingParams p;
    p.temperature = 1.0;
    p.top_k = 3;
    p.top_p = 0.95;
    p.max_tokens = 4;
    p.ignore_eos = true;
    p.seed = i;
    index[engine.add_request(prompt, p)] = i;
    if (i == 0) step();  // the prompt is computed once: the others find it in the prefix cache
  }
  while (engine.has_unfinished()) step();
  if (stats) *stats = engine.core().stats();
  std::map<std::vector<int32_t>, int> counts;
  for (const auto& t : out) {
    EXPECT_EQ(t.size(), 4u);
    if (t.size() == 4) ++counts[{t[1], t[2]}];
  }
  return counts;
}

TEST(SpeculativeMtp, SamplingKeepsTheTokenDistribution) {
  // The shipped model and its trained head (k = 2), 800 samples with and without.
  const std::string text = "And God said,";
  EngineStats stats;
  const auto plain = shipped_model_samples("", text, 800, nullptr);
  const auto spec = shipped_model_samples(R"({"method": "mtp", "num_speculative_tokens": 2})", text, 800, &stats);
  EXPECT_GT(stats.spec_num_accepted_tokens, 200);
  EXPECT_LT(stats.spec_num_accepted_tokens, stats.spec_num_draft_tokens);
  const ChiSquare c = two_sample_chi_square(plain, spec, 800, 800);
  ASSERT_GE(c.df, 2) << "too few categories to test";
  EXPECT_LT(c.statistic, c.critical) << "df " << c.df;
}

TEST(SpeculativeNgram, SamplingKeepsTheTokenDistribution) {
  // Real n-gram drafts: a prompt that quotes itself (the one of tools/bench_spec_decode.sh), whose
  // continuation the model often quotes too.
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tools/data/repetitive_prompt.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(text.size(), 500u);
  EngineStats stats;
  const auto plain = shipped_model_samples("", text, 600, nullptr);
  const auto spec = shipped_model_samples(
      R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 1, "prompt_lookup_max": 3})", text, 600,
      &stats);
  // Sampled continuations leave the quote often: drafts are mostly rejected, some accepted.
  EXPECT_GT(stats.spec_num_draft_tokens, 300);
  EXPECT_GT(stats.spec_num_accepted_tokens, 20) << stats.spec_num_draft_tokens;
  EXPECT_LT(stats.spec_num_accepted_tokens, stats.spec_num_draft_tokens);
  const ChiSquare c = two_sample_chi_square(plain, spec, 600, 600);
  ASSERT_GE(c.df, 2) << "too few categories to test";
  EXPECT_LT(c.statistic, c.critical) << "df " << c.df;
}

TEST(SpeculativeMtp, AModelWithoutAnMtpHeadIsRefused) {
  EngineConfig config;
  config.speculative = parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 2})");
  for (const char* model : {"qwen3_5-tiny-text", "qwen3-tiny-tied"})
    EXPECT_THROW(Engine(fixture_model_dir(model), config), Error) << model;
}

TEST(SpeculativeDraftModel, AHybridDraftModelOrAnotherVocabularyIsRefused) {
  EngineConfig config;
  config.speculative = parse_speculative_config(R"({"model": ")" + fixture_model_dir("qwen3_5-tiny-text") +
                                                R"(", "num_speculative_tokens": 2})");
  EXPECT_THROW(Engine(fixture_model_dir("qwen3-tiny-tied"), config), Error);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeDecodingTest, ::testing::Values("qwen3-tiny-tied", "qwen3_5-tiny-text"),
                         testing::FixtureParamName());

TEST(NgramProposer, ProposesWhatFollowedTheLongestEarlierMatch) {
  const std::vector<int32_t> t = {1, 2, 3, 9, 8, 4, 2, 3, 7, 1, 2, 3};
  // Suffix [1 2 3] occurred at 0: what followed it.
  EXPECT_EQ(propose_ngram(t, 2, 1, 3), (std::vector<int32_t>{9, 8}));
  // Only suffixes of 1..2 tokens: [2 3] occurred last at 6, followed by 7.
  EXPECT_EQ(propose_ngram(t, 2, 1, 2), (std::vector<int32_t>{7, 1}));
  // k larger than what follows the match is cut at the end of the tokens.
  const std::vector<int32_t> u = {5, 6, 5};
  EXPECT_EQ(propose_ngram(u, 4, 1, 1), (std::vector<int32_t>{6, 5}));
  // Periodic text: the latest occurrence of [7 8] is followed by only 2 tokens, an earlier one by 4.
  const std::vector<int32_t> periodic = {7, 8, 7, 8, 7, 8};
  EXPECT_EQ(propose_ngram(periodic, 4, 2, 2), (std::vector<int32_t>{7, 8, 7, 8}));
  // No earlier occurrence of any allowed suffix.
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{1, 2, 3, 4}, 3, 1, 3).empty());
  EXPECT_TRUE(propose_ngram(t, 3, 4, 5).empty());  // [9 .. 3] suffixes of 4+ never repeat
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{}, 3, 1, 3).empty());
}

// The rule as the header states it, position by position for each n (O(length · n) a call): what
// the one-pass proposer must agree with.
std::vector<int32_t> ngram_by_the_rule(const std::vector<int32_t>& t, int32_t k, int32_t min_n, int32_t max_n) {
  const auto len = static_cast<int64_t>(t.size());
  for (int64_t n = std::min<int64_t>(max_n, len - 1); n >= min_n && n >= 1; --n) {
    int64_t best_from = -1, best_count = 0;
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(t.end() - n, t.end(), t.begin() + start)) continue;
      const int64_t count = std::min<int64_t>(k, len - start - n);
      if (count > best_count) best_from = start + n, best_count = count;
      if (count == k) break;
    }
    if (best_count > 0) return {t.begin() + best_from, t.begin() + best_from + best_count};
  }
  return {};
}

TEST(NgramProposer, AgreesWithTheRuleOnRandomAndPeriodicTokens) {
  std::mt19937 rng(20261129);
  int64_t proposed = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const auto alphabet = static_cast<int32_t>(1 + rng() % 6);
    const auto len = static_cast<size_t>(rng() % 60);
    std::vector<int32_t> t(len);
    const auto period = static_cast<size_t>(1 + rng() % 7);
    const bool periodic = trial % 3 == 0;
    for (size_t i = 0; i < len; ++i)
      t[i] = periodic && i >= period ? t[i - period] : static_cast<int32_t>(rng() % static_cast<uint32_t>(alphabet));
    if (periodic && len > 3 && rng() % 2) t[rng() % len] = 99;  // a break in the period
    const auto k = static_cast<int32_t>(rng() % 7);
    const auto min_n = static_cast<int32_t>(rng() % 4);
    const auto max_n = static_cast<int32_t>(min_n + rng() % 5);
    const std::vector<int32_t> want = ngram_by_the_rule(t, k, min_n, max_n);
    ASSERT_EQ(propose_ngram(t, k, min_n, max_n), want)
        << "trial " << trial << " k " << k << " n " << min_n << ".." << max_n << " length " << len;
    proposed += want.empty() ? 0 : 1;
  }
  EXPECT_GT(proposed, 1000);  // the cases exercised matches, not just their absence
}

TEST(SpeculativeConfig, ParsesVllmsJson) {
  SpeculativeConfig c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 4})");
  EXPECT_EQ(c.method, SpeculativeMethod::Ngram);
  EXPECT_EQ(c.num_speculative_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_min, 5);  // vLLM's defaults
  EXPECT_EQ(c.prompt_lookup_max, 5);
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3})");
  EXPECT_EQ(c.prompt_lookup_min, 3);
  EXPECT_EQ(c.prompt_lookup_max, 3);
  c = parse_speculative_config(R"({"model": "/m/draft", "num_speculative_tokens": 5})");
  EXPECT_EQ(c.method, SpeculativeMethod::DraftModel);
  EXPECT_EQ(c.model, "/m/draft");
  EXPECT_EQ(parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 1})").method, SpeculativeMethod::Mtp);
  EXPECT_FALSE(parse_speculative_config("").enabled());
  // The flag's speculation is adaptive unless it says otherwise; vLLM's disable_by_batch_size.
  EXPECT_TRUE(c.adaptive);
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3, "adaptive": false, "disable_by_batch_size": 32})");
  EXPECT_FALSE(c.adaptive);
  EXPECT_EQ(c.disable_by_batch_size, 32);
  EXPECT_EQ(c.describe(), "ngram k=3 lookup 5..5 off past 32 sequences");
  EXPECT_FALSE(SpeculativeConfig{}.adaptive) << "a config built in code keeps a static k";
  for (const char* bad : {"[1]", "{", R"({"method": "eagle3", "num_speculative_tokens": 2})",
                          R"({"method": "ngram"})", R"({"method": "ngram", "num_speculative_tokens": 0})",
                          R"({"method": "ngram", "num_speculative_tokens": 99})",
                          R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, "prompt_lookup_max": 2})",
                          R"({"method": "mtp", "num_speculative_tokens": 2, "prompt_lookup_max": 2})",
                          R"({"method": "draft_model", "num_speculative_tokens": 2})",
                          R"({"method": "ngram", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1})",
                          R"({"method": "ngram", "num_speculative_tokens": 2, "adaptive": "yes"})",
                          R"({"method": "ngram", "num_speculative_tokens": 2, "disable_by_batch_size": -1})"})
    EXPECT_THROW(parse_speculative_config(bad), Error) << bad;
}

}  // namespace
}  // namespace pagoda

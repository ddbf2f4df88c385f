#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "engine/sequence.h"

namespace pagoda {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_logits(std::mt19937& gen, int n) {
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(gen);
  return v;
}

std::vector<float> logits_of_probs(const std::vector<double>& probs) {
  std::vector<float> v;
  for (double p : probs) v.push_back(static_cast<float>(std::log(p)));
  return v;
}

TEST(Sampler, GreedyIsArgmax) {
  std::mt19937 gen(1);
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0;
  std::mt19937_64 rng(0);
  for (int trial = 0; trial < 50; ++trial) {
    const auto row = random_logits(gen, 97);
    size_t best = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      if (row[i] > row[best]) best = i;
    }
    EXPECT_EQ(sampler.sample_row(row, p, {}, {}, rng).token, static_cast<int32_t>(best));
  }
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}), 1);  // lowest id on ties
}

TEST(Sampler, TopKOneIsGreedy) {
  std::mt19937 gen(2);
  Sampler sampler;
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplingParams k1;
  k1.temperature = 1.3;
  k1.top_k = 1;
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const auto row = random_logits(gen, 64);
    EXPECT_EQ(sampler.sample_row(row, k1, {}, {}, rng).token, sampler.sample_row(row, greedy, {}, {}, rng).token);
  }
}

// Runs `steps` sampling steps for a batch of sequences; row i's logits depend on its sequence only.
std::vector<float> logits_for(const Sequence& s, int vocab) {
  std::mt19937 gen(static_cast<uint32_t>(s.id() * 1000 + s.num_tokens()));
  return random_logits(gen, vocab);
}

TEST(Sampler, SeededSamplingIsReproducibleAndIndependentOfBatch) {
  const int vocab = 40;
  Sampler sampler;
  SamplingParams p;
  p.temperature = 1.0;
  p.top_p = 0.95;
  p.seed = 99;
  auto make = [&](int64_t id, const SamplingParams& params) {
    return std::make_unique<Sequence>(id, std::vector<int32_t>{1, 2, 3}, params, /*engine_seed=*/17);
  };
  // Alone.
  auto alone = make(1, p);
  for (int step = 0; step < 30; ++step) {
    Sequence* seqs[] = {alone.get()};
    const auto row = logits_for(*alone, vocab);
    alone->append_token(sampler.sample(row, vocab, seqs)[0].token);
  }
  // In changing batches, at changing rows, with unseeded neighbours.
  SamplingParams other;
  other.temperature = 0.8;
  auto a = make(1, p);
  auto b = make(2, other);
  auto c = make(3, other);
  for (int step = 0; step < 30; ++step) {
    std::vector<Sequence*> seqs;
    if (step % 3 == 0) seqs = {b.get(), a.get(), c.get()};
    if (step % 3 == 1) seqs = {a.get(), c.get()};
    if (step % 3 == 2) seqs = {c.get(), b.get(), a.get()};
    std::vector<float> logits;
    for (Sequence* s : seqs) {
      const auto row = logits_for(*s, vocab);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    const auto results = sampler.sample(logits, vocab, seqs);
    for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->append_token(results[i].token);
  }
  EXPECT_EQ(std::vector<int32_t>(a->output().begin(), a->output().end()),
            std::vector<int32_t>(alone->output().begin(), alone->output().end()));
  // Not degenerate: the stream has several distinct tokens.
  std::map<int32_t, int> distinct;
  for (int32_t t : alone->output()) ++distinct[t];
  EXPECT_GT(distinct.size(), 3u);
  // Another seed gives another stream.
  SamplingParams q = p;
  q.seed = 100;
  auto d = make(1, q);
  for (int step = 0; step < 30; ++step) {
    Sequence* seqs[] = {d.get()};
    d->append_token(sampler.sample(logits_for(*d, vocab), vocab, seqs)[0].token);
  }
  EXPECT_NE(std::vector<int32_t>(d->output().begin(), d->output().end()),
            std::vector<int32_t>(alone->output().begin(), alone->output().end()));
}

TEST(Sampler, PenaltiesHandComputed) {
  std::vector<float> row{2.0f, -1.0f, 0.5f, 3.0f, -2.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0;
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.25;
  const std::vector<int32_t> prompt{0, 1, 0};
  const std::vector<int32_t> output{1, 3, 3};
  apply_penalties(row, p, prompt, output);
  // repetition over {0, 1, 3}: 2/2 = 1, -1*2 = -2, 3/2 = 1.5 (once per token, however often seen)
  // output counts: 1 -> 1, 3 -> 2: token 1: -2 - 0.5 - 0.25; token 3: 1.5 - 1.0 - 0.25
  const std::vector<float> expect{1.0f, -2.75f, 0.5f, 0.25f, -2.0f};
  for (size_t i = 0; i < row.size(); ++i) EXPECT_FLOAT_EQ(row[i], expect[i]) << i;

  // Presence/frequency count output tokens only: a prompt token is not penalised by them.
  std::vector<float> row2{1.0f, 1.0f};
  SamplingParams q;
  q.presence_penalty = 1.0;
  apply_penalties(row2, q, std::vector<int32_t>{0}, std::vector<int32_t>{});
  EXPECT_FLOAT_EQ(row2[0], 1.0f);
}

TEST(Sampler, PenaltiesSteerGreedyChoice) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 1.5;
  std::mt19937_64 rng(0);
  const std::vector<float> row{3.0f, 2.5f};
  // Token 0 already seen: 3 / 1.5 = 2 < 2.5.
  EXPECT_EQ(sampler.sample_row(row, p, std::vector<int32_t>{0}, {}, rng).token, 1);
  p.repetition_penalty = 1.1;  // 3 / 1.1 = 2.73 > 2.5
  EXPECT_EQ(sampler.sample_row(row, p, std::vector<int32_t>{0}, {}, rng).token, 0);
}

TEST(Sampler, LogitBiasAddsToRawLogitsAndSteersGreedy) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0;
  std::mt19937_64 rng(0);
  const std::vector<float> row{3.0f, 2.5f, -1.0f};
  EXPECT_EQ(sampler.sample_row(row, p, {}, {}, rng).token, 0);
  p.logit_bias = std::make_shared<std::vector<std::pair<int32_t, float>>>(
      std::vector<std::pair<int32_t, float>>{{2, 4.5f}});  // -1 + 4.5 = 3.5 > 3
  EXPECT_EQ(sampler.sample_row(row, p, {}, {}, rng).token, 2);
  p.logit_bias = std::make_shared<std::vector<std::pair<int32_t, float>>>(
      std::vector<std::pair<int32_t, float>>{{2, 3.9f}, {0, -100.0f}});  // 2.9 > 2.5 > -97
  EXPECT_EQ(sampler.sample_row(row, p, {}, {}, rng).token, 2);
  std::vector<float> r(row);
  apply_logit_bias(r, p);
  EXPECT_FLOAT_EQ(r[0], -97.0f);
  EXPECT_FLOAT_EQ(r[1], 2.5f);
  EXPECT_FLOAT_EQ(r[2], 2.9f);
  // Logprobs stay those of the raw logits (vLLM's default).
  p.logprobs = 1;
  const SampleResult s = sampler.sample_row(row, p, {}, {}, rng);
  const float lse = std::log(std::exp(3.0f) + std::exp(2.5f) + std::exp(-1.0f));
  EXPECT_NEAR(s.logprob, -1.0f - lse, 1e-5);
  // A greedy request with a bias cannot take the device's argmax shortcut.
  SamplingParams greedy_biased;
  greedy_biased.temperature = 0;
  EXPECT_FALSE(sampler.needs_logits(Sequence(1, {1}, greedy_biased)));
  greedy_biased.logit_bias = p.logit_bias;
  EXPECT_TRUE(sampler.needs_logits(Sequence(2, {1}, greedy_biased)));
}

TEST(Sampler, TemperatureScales) {
  std::vector<float> row{1.0f, -2.0f, 4.0f};
  apply_temperature(row, 0.5);
  EXPECT_FLOAT_EQ(row[0], 2.0f);
  EXPECT_FLOAT_EQ(row[1], -4.0f);
  EXPECT_FLOAT_EQ(row[2], 8.0f);
}

std::vector<bool> kept(const std::vector<float>& row) {
  std::vector<bool> k;
  for (float v : row) k.push_back(v != -kInf);
  return k;
}

TEST(Sampler, TopKKeepsTiesAtTheThreshold) {
  std::vector<float> row{1, 5, 3, 3, 2};
  apply_top_k(row, 2);  // 2nd largest is 3: both 3s stay
  EXPECT_EQ(kept(row), (std::vector<bool>{false, true, true, true, false}));
  std::vector<float> row2{1, 5, 3, 4, 2};
  apply_top_k(row2, 3);
  EXPECT_EQ(kept(row2), (std::vector<bool>{false, true, true, true, false}));
  std::vector<float> row3{1, 5};
  apply_top_k(row3, 5);  // k beyond the vocab: nothing masked
  EXPECT_EQ(kept(row3), (std::vector<bool>{true, true}));
}

TEST(Sampler, TopPHandComputed) {
  // probabilities by id: 0.1, 0.5, 0.15, 0.25 (sorted: id1 0.5, id3 0.25, id2 0.15, id0 0.1)
  const std::vector<double> probs{0.1, 0.5, 0.15, 0.25};
  auto masked = [&](double top_p) {
    auto row = logits_of_probs(probs);
    apply_top_p(row, top_p);
    return kept(row);
  };
  EXPECT_EQ(masked(0.3), (std::vector<bool>{false, true, false, false}));   // 0.5 >= 0.3
  EXPECT_EQ(masked(0.7), (std::vector<bool>{false, true, false, true}));    // 0.5+0.25 >= 0.7
  EXPECT_EQ(masked(0.8), (std::vector<bool>{false, true, true, true}));     // + 0.15 = 0.9
  EXPECT_EQ(masked(0.95), (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(masked(1.0), (std::vector<bool>{true, true, true, true}));
  // Already-masked entries (e.g. by top-k) do not count: among {0.5, 0.15} renormalised to
  // {0.77, 0.23}, p = 0.7 keeps the first only.
  auto row = logits_of_probs(probs);
  row[3] = -kInf;
  row[0] = -kInf;
  apply_top_p(row, 0.7);
  EXPECT_EQ(kept(row), (std::vector<bool>{false, true, false, false}));
}

TEST(Sampler, TopPMatchesBruteForceOnALargeVocab) {
  std::mt19937 gen(7);
  for (double p : {0.05, 0.5, 0.9, 0.99}) {
    std::normal_distribution<float> d(0.0f, 0.5f);  // flat: the nucleus spans most of the vocab
    std::vector<float> row(3000);
    for (float& v : row) v = d(gen);
    // Brute force: all tokens by decreasing logit; keep while the mass above is below p.
    std::vector<int32_t> order(row.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    double z = 0;
    for (float v : row) z += std::exp(static_cast<double>(v));
    std::vector<bool> expect(row.size(), false);
    double above = 0;
    size_t kept_count = 0;
    for (int32_t i : order) {
      if (above < p) {
        expect[static_cast<size_t>(i)] = true;
        ++kept_count;
      }
      above += std::exp(static_cast<double>(row[static_cast<size_t>(i)])) / z;
    }
    apply_top_p(row, p);
    EXPECT_EQ(kept(row), expect) << "p = " << p << ", brute force keeps " << kept_count;
  }
}

TEST(Sampler, MinPHandComputed) {
  const std::vector<double> probs{0.1, 0.5, 0.15, 0.25};
  auto masked = [&](double min_p) {
    auto row = logits_of_probs(probs);
    apply_min_p(row, min_p);
    return kept(row);
  };
  EXPECT_EQ(masked(0.25), (std::vector<bool>{false, true, true, true}));   // threshold 0.125
  EXPECT_EQ(masked(0.4), (std::vector<bool>{false, true, false, true}));   // threshold 0.2
  EXPECT_EQ(masked(0.6), (std::vector<bool>{false, true, false, false}));  // threshold 0.3
  EXPECT_EQ(masked(0.0), (std::vector<bool>{true, true, true, true}));
}

TEST(Sampler, SampleFromLogitsInvertsTheCdf) {
  const auto row = logits_of_probs({0.25, 0.0 + 0.75});
  EXPECT_EQ(sample_from_logits(row, 0.0), 0);
  EXPECT_EQ(sample_from_logits(row, 0.2), 0);
  EXPECT_EQ(sample_from_logits(row, 0.3), 1);
  EXPECT_EQ(sample_from_logits(row, 0.999999), 1);
  std::vector<float> masked{-kInf, 0.0f, -kInf};
  EXPECT_EQ(sample_from_logits(masked, 0.99), 1);
}

// Pearson's chi-square of `counts` against `expected` probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& expected, int n) {
  double chi = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

TEST(Sampler, FrequenciesMatchTheDistribution) {
  Sampler sampler;
  const std::vector<double> probs{0.1, 0.2, 0.3, 0.4};
  const auto row = logits_of_probs(probs);
  const int n = 20000;
  // 3 degrees of freedom: chi-square above 16.27 has probability 0.001 under the right distribution.
  const double bound = 16.27;

  SamplingParams plain;
  plain.seed = 2024;
  std::mt19937_64 rng(*plain.seed);
  std::vector<int> counts(4, 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(sampler.sample_row(row, plain, {}, {}, rng).token)];
  EXPECT_LT(chi_square(counts, probs, n), bound);
  // A wrong distribution (uniform) is rejected by the same bound: the check can fail.
  EXPECT_GT(chi_square(counts, {0.25, 0.25, 0.25, 0.25}, n), bound);

  // Temperature 2: probabilities ∝ p^(1/2).
  SamplingParams hot = plain;
  hot.temperature = 2.0;
  std::vector<double> hot_probs;
  double z = 0;
  for (double p : probs) z += std::sqrt(p);
  for (double p : probs) hot_probs.push_back(std::sqrt(p) / z);
  std::fill(counts.begin(), counts.end(), 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(sampler.sample_row(row, hot, {}, {}, rng).token)];
  EXPECT_LT(chi_square(counts, hot_probs, n), bound);

  // Top-k 2: only ids 2 and 3, renormalised to 3/7 and 4/7 (1 degree of freedom: 10.83).
  SamplingParams k2 = plain;
  k2.top_k = 2;
  std::fill(counts.begin(), counts.end(), 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(sampler.sample_row(row, k2, {}, {}, rng).token)];
  EXPECT_EQ(counts[0] + counts[1], 0);
  EXPECT_LT(chi_square({counts[2], counts[3]}, {3.0 / 7, 4.0 / 7}, n), 10.83);
}

TEST(Sampler, MinTokensMasksStopTokens) {
  Sampler sampler(/*eos_token_ids=*/{2});
  SamplingParams p;
  p.temperature = 0;
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  std::mt19937_64 rng(0);
  const std::vector<float> row{0.0f, 5.0f, 9.0f, 1.0f};
  const std::vector<int32_t> one{3};
  const std::vector<int32_t> two{3, 3};
  EXPECT_EQ(sampler.sample_row(row, p, {}, one, rng).token, 3);  // EOS (2) and stop id (1) masked
  EXPECT_EQ(sampler.sample_row(row, p, {}, two, rng).token, 2);  // min_tokens reached
  p.ignore_eos = true;                                            // EOS is then a plain token
  EXPECT_EQ(sampler.sample_row(row, p, {}, one, rng).token, 2);
}

TEST(Sampler, LogprobsOfTheRawDistribution) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0.5;
  p.repetition_penalty = 1.7;
  p.top_k = 2;
  p.logprobs = 2;
  p.seed = 3;
  std::mt19937_64 rng(3);
  const std::vector<float> row{1.0f, 2.0f, 3.0f, 0.5f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(0.5);
  const SampleResult r = sampler.sample_row(row, p, std::vector<int32_t>{2}, {}, rng);
  ASSERT_TRUE(r.token == 1 || r.token == 2);  // top-2 after the penalty: ids 1 and 2
  EXPECT_NEAR(r.logprob, row[static_cast<size_t>(r.token)] - std::log(z), 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 2u);
  EXPECT_EQ(r.top_logprobs[0].first, 2);
  EXPECT_NEAR(r.top_logprobs[0].second, 3.0 - std::log(z), 1e-5);
  EXPECT_EQ(r.top_logprobs[1].first, 1);
  EXPECT_NEAR(r.top_logprobs[1].second, 2.0 - std::log(z), 1e-5);

  p.logprobs = 0;  // only the chosen token's
  const SampleResult r0 = sampler.sample_row(row, p, {}, {}, rng);
  EXPECT_TRUE(r0.top_logprobs.empty());
  EXPECT_NEAR(r0.logprob, row[static_cast<size_t>(r0.token)] - std::log(z), 1e-5);
}

TEST(Sampler, RejectsMismatchedShapes) {
  Sampler sampler;
  Sequence s(1, {1}, SamplingParams{});
  Sequence* seqs[] = {&s};
  std::vector<float> logits(7, 0.0f);
  EXPECT_THROW(sampler.sample(logits, 8, seqs), std::logic_error);
}

// Structured output: the mask is applied before bias, penalties and sampling, so whatever they do
// the chosen token is one the mask allows (expected sets written from the mask, not from pagoda).
TEST(Sampler, TokenMaskWinsOverBiasAndSampling) {
  Sampler sampler;
  std::mt19937 gen(3);
  std::mt19937_64 rng(5);
  const std::vector<uint64_t> allowed = {(uint64_t{1} << 3) | (uint64_t{1} << 40), uint64_t{1} << 6};  // 3, 40, 70
  SamplingParams p;
  p.logit_bias = std::make_shared<std::vector<std::pair<int32_t, float>>>(
      std::vector<std::pair<int32_t, float>>{{0, 100.0f}, {71, 100.0f}});
  p.frequency_penalty = 1.0;
  for (double temperature : {0.0, 1.0, 2.0}) {
    p.temperature = temperature;
    for (int trial = 0; trial < 50; ++trial) {
      const auto row = random_logits(gen, 100);
      const int32_t t = sampler.sample_row(row, p, {}, {}, rng, &allowed).token;
      EXPECT_TRUE(t == 3 || t == 40 || t == 70) << t;
    }
  }
  std::vector<float> row(100, 0.0f);
  apply_token_mask(row, allowed);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(std::isinf(row[static_cast<size_t>(i)]), !(i == 3 || i == 40 || i == 70)) << i;
}

// The greedy masked argmax that reads the row in place equals the argmax of the row with the mask
// applied (the general path: copy, -inf outside the mask, argmax), or declines (-1) where -inf or
// NaN would make them differ; ties go to the lowest id in both.
TEST(Sampler, MaskedArgmaxEqualsArgmaxOfTheMaskedRow) {
  std::mt19937_64 gen(11);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + gen() % 300;
    std::vector<float> row(n);
    for (float& v : row) v = static_cast<float>(gen() % 7) - 3.0f;  // many ties
    if (trial % 5 == 0) row[gen() % n] = -std::numeric_limits<float>::infinity();
    if (trial % 17 == 0) row[gen() % n] = std::numeric_limits<float>::quiet_NaN();
    std::vector<uint64_t> allowed((n + 63) / 64 + (trial % 3 == 0 ? 1 : 0));
    const int density = static_cast<int>(gen() % 4);  // none, sparse, dense, full words
    for (uint64_t& w : allowed)
      w = density == 0 ? 0 : density == 3 ? ~uint64_t{0} : density == 1 ? (gen() & gen() & gen()) : gen();
    std::vector<float> masked = row;
    apply_token_mask(masked, allowed);
    const int32_t fast = masked_argmax(row, allowed);
    bool nan_allowed = false, finite_allowed = false;
    for (size_t i = 0; i < n; ++i)
      if ((allowed[i >> 6] >> (i & 63)) & 1) {
        nan_allowed |= std::isnan(row[i]);
        finite_allowed |= row[i] > -std::numeric_limits<float>::infinity();
      }
    if (nan_allowed || !finite_allowed) {
      EXPECT_EQ(fast, -1) << "trial " << trial;
    } else {
      EXPECT_EQ(fast, argmax(masked)) << "trial " << trial;
    }
  }
}

// allowed_token_ids: only those survive, whatever their logits.
TEST(Sampler, AllowedTokenIdsMaskEverythingElse) {
  SamplingParams p;
  p.allowed_token_ids = TokenIdSet({5, 2});
  std::vector<float> row = {9, 1, 0.5f, 8, 7, 0.25f, 6};
  apply_allowed_token_ids(row, p);
  const std::vector<float> want = {-kInf, -kInf, 0.5f, -kInf, -kInf, 0.25f, -kInf};
  EXPECT_EQ(row, want);
  // The sampler, greedy and sampling, never picks outside the set.
  Sampler sampler({0});
  std::mt19937_64 rng(3);
  std::mt19937 gen(4);
  for (double t : {0.0, 1.0}) {
    p.temperature = t;
    for (int i = 0; i < 50; ++i) {
      const std::vector<float> logits = random_logits(gen, 7);
      const int32_t tok = sampler.sample_row(logits, p, {}, {}, rng).token;
      EXPECT_TRUE(tok == 2 || tok == 5) << tok;
    }
  }
}

// bad_words: a one-token word is always masked; a longer one only right after its prefix.
TEST(Sampler, BadWordsMaskTheLastTokenAfterThePrefix) {
  SamplingParams p;
  p.bad_words_token_ids = std::make_shared<const std::vector<std::vector<int32_t>>>(
      std::vector<std::vector<int32_t>>{{4}, {1, 2, 3}});
  const std::vector<float> flat(6, 1.0f);
  auto masked = [&](std::vector<int32_t> output) {
    std::vector<float> row = flat;
    apply_bad_words(row, p, output);
    std::vector<int32_t> out;
    for (size_t i = 0; i < row.size(); ++i)
      if (row[i] == -kInf) out.push_back(static_cast<int32_t>(i));
    return out;
  };
  EXPECT_EQ(masked({}), (std::vector<int32_t>{4}));
  EXPECT_EQ(masked({1}), (std::vector<int32_t>{4}));
  EXPECT_EQ(masked({0, 1, 2}), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(masked({1, 2, 0}), (std::vector<int32_t>{4}));
  EXPECT_TRUE(has_token_masks(p));
  EXPECT_FALSE(has_token_masks(SamplingParams{}));
}

}  // namespace
}  // namespace pagoda

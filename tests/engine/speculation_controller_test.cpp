// Adaptive speculation (engine/speculation_controller.h): the rule picks k from the measured
// acceptance and step times. Synthetic steps stand for the two regimes: a step whose time does not
// grow with its tokens (bound by reading the weights: drafts are nearly free) and one whose time
// grows with every token (bound by compute: rejected drafts cost). Expected choices are worked out
// from the goodput formula by hand below, never read from the controller.
#include "engine/speculation_controller.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace pagoda {
namespace {

// Sequences whose draft j is accepted with probability p (independently) until the first reject.
void feed_acceptance(SpeculationController& c, int32_t k, double p, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution ok(p);
  for (int i = 0; i < n; ++i) {
    int32_t a = 0;
    while (a < k && ok(rng)) ++a;
    c.observe_acceptance(k, a);
  }
}

// Steps of varied sizes timed by seconds(tokens, passes).
template <typename F>
void feed_steps(SpeculationController& c, int n, F seconds, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tokens(1, 600), passes(0, 4);
  for (int i = 0; i < n; ++i) {
    const int t = tokens(rng), p = passes(rng);
    c.observe_step(t, p, seconds(t, p));
  }
}

TEST(SpeculationController, StaticAndDisabledByBatchSize) {
  SpeculationController fixed(4, /*adaptive=*/false, /*disable_by_batch_size=*/0);
  feed_steps(fixed, 50, [](int t, int) { return 1e-3 + 1e-4 * t; }, 1);
  feed_acceptance(fixed, 4, 0.1, 500, 2);
  EXPECT_EQ(fixed.choose(512, 0), 4) << "not adaptive: always k";
  SpeculationController capped(3, /*adaptive=*/false, /*disable_by_batch_size=*/8);
  EXPECT_EQ(capped.choose(8, 0), 3);
  EXPECT_EQ(capped.choose(9, 0), 0) << "vLLM's disable_by_batch_size: no drafts past 8 sequences";
  SpeculationController none(0, true, 0);
  EXPECT_EQ(none.choose(1, 0), 0);
}

TEST(SpeculationController, StartsStaticUntilStepsAreMeasured) {
  SpeculationController c(3, true, 0);
  EXPECT_FALSE(c.fitted());
  EXPECT_EQ(c.choose(256, 0), 3);
  feed_steps(c, 7, [](int t, int) { return 1e-3 + 1e-4 * t; }, 3);
  EXPECT_EQ(c.choose(256, 0), 3) << "seven steps are not enough to fit";
}

TEST(SpeculationController, MeasuresAcceptancePerPosition) {
  SpeculationController c(4, true, 0);
  EXPECT_DOUBLE_EQ(c.acceptance(1), 0.5) << "no evidence yet";
  feed_acceptance(c, 4, 0.8, 3000, 4);
  for (int j = 1; j <= 4; ++j) EXPECT_NEAR(c.acceptance(j), 0.8, 0.05) << "position " << j;
  // Later positions are decided on only after the earlier ones were accepted: with p = 0.3 the
  // fourth is reached in 0.3^3 of the sequences, and its rate is still p.
  SpeculationController low(4, true, 0);
  feed_acceptance(low, 4, 0.3, 20000, 5);
  // (The counts fade over ~200 sequences, so the rarely reached positions are the noisier.)
  EXPECT_NEAR(low.acceptance(1), 0.3, 0.05);
  for (int j = 2; j <= 3; ++j) EXPECT_NEAR(low.acceptance(j), 0.3, 0.15) << "position " << j;
}

TEST(SpeculationController, FitsStepTimeToTokensAndPasses) {
  SpeculationController c(4, true, 0);
  feed_steps(c, 200, [](int t, int p) { return 2e-3 + 1e-4 * t + 5e-4 * p; }, 6);
  ASSERT_TRUE(c.fitted());
  EXPECT_NEAR(c.step_seconds(100, 2), 2e-3 + 1e-2 + 1e-3, 1e-5);
  EXPECT_NEAR(c.step_seconds(0, 0), 2e-3, 1e-5);
}

TEST(SpeculationController, WeightBoundStepsSpeculateFully) {
  // 10 ms a step whatever its tokens; acceptance 0.6. goodput(k) = N (1 + 0.6 + ... + 0.6^k) / 10 ms
  // grows with k: k = 4 at any N.
  SpeculationController c(4, true, 0);
  feed_steps(c, 100, [](int, int) { return 1e-2; }, 7);
  feed_acceptance(c, 4, 0.6, 2000, 8);
  EXPECT_EQ(c.choose(1, 0), 4);
  EXPECT_EQ(c.choose(64, 0), 4);
}

TEST(SpeculationController, ComputeBoundStepsUnderLoadTurnItDown) {
  // t = 1 ms + 0.1 ms a token. N = 256 sequences, acceptance 0.3:
  //   k = 0: 256 · 1 / (1 + 25.6) ms = 9.62 tok/ms
  //   k = 1: 256 · 1.3 / (1 + 51.2) ms = 6.38 tok/ms — every draft loses: k = 0.
  // One sequence, acceptance 0.9, t = 10 ms + 0.01 ms a token: the step hardly grows, k = 4
  //   (1 + 0.9 + 0.81 + 0.729 + 0.656 = 4.10 tokens for 10.05 ms against 1 for 10.01 ms).
  SpeculationController busy(4, true, 0);
  feed_steps(busy, 100, [](int t, int) { return 1e-3 + 1e-4 * t; }, 9);
  feed_acceptance(busy, 4, 0.3, 3000, 10);
  EXPECT_EQ(busy.choose(256, 0), 0);
  const double g0 = busy.goodput(0, 256, 0), g1 = busy.goodput(1, 256, 0);
  EXPECT_NEAR(g0, 256.0 / (1e-3 + 1e-4 * 256), 0.01 * g0);
  EXPECT_NEAR(g1, 256.0 * (1 + busy.acceptance(1)) / (1e-3 + 1e-4 * 512), 0.01 * g1);
  SpeculationController light(4, true, 0);
  feed_steps(light, 100, [](int t, int) { return 1e-2 + 1e-5 * t; }, 11);
  feed_acceptance(light, 4, 0.9, 3000, 12);
  EXPECT_EQ(light.choose(1, 0), 4);
  // The same model at 256 sequences with acceptance 0.9: k = 1 costs 2× the tokens for 1.9× the
  // output — (1 + 0.9) / (10 + 5.12) against 1 / (10 + 2.56): 0.1257 vs 0.0796 per ms, still worth
  // it; the rule's answer is the k of the largest goodput, checked against the formula.
  int32_t best = 0;
  for (int32_t k = 1; k <= 4; ++k)
    if (light.goodput(k, 256, 0) > light.goodput(best, 256, 0)) best = k;
  EXPECT_EQ(light.choose(256, 0), best);
}

TEST(SpeculationController, ProbesANeighbourNowAndThen) {
  // Turned down to 0 under load, it still tries k = 1 once in 16 choices (so acceptance and cost
  // keep being measured), and never more often.
  SpeculationController c(3, true, 0);
  feed_steps(c, 100, [](int t, int) { return 1e-3 + 1e-4 * t; }, 13);
  feed_acceptance(c, 3, 0.2, 2000, 14);
  int probes = 0;
  for (int i = 0; i < 64; ++i) {
    const int32_t k = c.choose(256, 0);
    EXPECT_LE(k, 1);
    probes += k;
  }
  EXPECT_EQ(probes, 4);
}

}  // namespace
}  // namespace pagoda

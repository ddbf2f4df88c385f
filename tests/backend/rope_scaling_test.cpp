// rope_inv_freq's scaled frequencies against transformers' formulas (modeling_rope_utils.py,
// written out here in double from its source, not from pagoda's), and the CPU rope's cos/sin
// scaling by attention_factor (YaRN).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "backend/backend.h"
#include "cpu_test_util.h"

namespace pagoda {
namespace {

double plain_inv_freq(double theta, int j, int rot) { return std::pow(theta, -2.0 * j / rot); }

TEST(RopeScaling, LinearDividesEveryFrequencyByTheFactor) {
  RopeParams rope;
  rope.rotary_dim = 20;
  rope.theta = 10000.0f;
  rope.scaling = RopeScaling::Linear;
  rope.factor = 2.5;
  const std::vector<float> got = rope_inv_freq(rope, 20);
  ASSERT_EQ(got.size(), 10u);
  for (int j = 0; j < 10; ++j) {
    const double want = plain_inv_freq(10000.0, j, 20) / 2.5;
    EXPECT_NEAR(got[static_cast<size_t>(j)], want, 1e-6 * want) << "pair " << j;
  }
}

// docs/models.md: wavelen = 2π/f; f/factor where wavelen > old/low; f where wavelen < old/high; between
// them (1 - s)·f/factor + s·f with s = (old/wavelen - low)/(high - low). Here in double.
TEST(RopeScaling, Llama3InverseFrequenciesFollowTheFormula) {
  RopeParams rope;
  rope.rotary_dim = 20;
  rope.theta = 10000.0f;
  rope.scaling = RopeScaling::Llama3;
  rope.factor = 8.0;
  rope.low_freq_factor = 1.0;
  rope.high_freq_factor = 4.0;
  rope.original_max_positions = 64.0;
  const std::vector<float> got = rope_inv_freq(rope, 20);
  ASSERT_EQ(got.size(), 10u);
  int kept = 0, divided = 0, blended = 0;
  for (size_t j = 0; j < got.size(); ++j) {
    const double f = std::pow(10000.0, -2.0 * static_cast<double>(j) / 20.0);
    const double wavelen = 2 * std::numbers::pi / f;
    double want = f;
    if (wavelen > 64.0) {
      want = f / 8.0;
      ++divided;
    } else if (wavelen >= 16.0) {
      const double s = (64.0 / wavelen - 1.0) / 3.0;
      want = (1 - s) * f / 8.0 + s * f;
      ++blended;
    } else {
      ++kept;
    }
    EXPECT_NEAR(got[j], want, 1e-6 * want) << "pair " << j;
  }
  EXPECT_GT(kept, 0);  // the case covers all three bands
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);

  rope.scaling = RopeScaling::None;
  const std::vector<float> plain = rope_inv_freq(rope, 20);
  for (size_t j = 0; j < plain.size(); ++j)
    EXPECT_NEAR(plain[j], std::pow(10000.0, -2.0 * static_cast<double>(j) / 20.0), 1e-7);
}

// _compute_yarn_parameters: d(r) = rot·ln(old/(2π r)) / (2 ln θ); low = floor(d(beta_fast)),
// high = ceil(d(beta_slow)) (unrounded without truncate), clamped to [0, rot-1]; ramp_j =
// clamp((j - low)/(high - low), 0, 1); inv_freq_j = f_j/factor · ramp_j + f_j · (1 - ramp_j).
std::vector<double> yarn_reference(double theta, int rot, double factor, double old, double beta_fast,
                                   double beta_slow, bool truncate) {
  const auto d = [&](double r) { return rot * std::log(old / (r * 2 * std::numbers::pi)) / (2 * std::log(theta)); };
  double low = d(beta_fast), high = d(beta_slow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, rot - 1.0);
  if (low == high) high += 0.001;
  std::vector<double> out;
  for (int j = 0; j < rot / 2; ++j) {
    const double f = plain_inv_freq(theta, j, rot);
    const double ramp = std::clamp((j - low) / (high - low), 0.0, 1.0);
    out.push_back(f / factor * ramp + f * (1 - ramp));
  }
  return out;
}

TEST(RopeScaling, YarnRampsFromExtrapolationToInterpolation) {
  for (const bool truncate : {true, false}) {
    SCOPED_TRACE(truncate ? "truncate" : "no truncate");
    RopeParams rope;
    rope.rotary_dim = 32;
    rope.theta = 10000.0f;
    rope.scaling = RopeScaling::Yarn;
    rope.factor = 4.0;
    rope.original_max_positions = 64.0;
    rope.beta_fast = 32.0;
    rope.beta_slow = 1.0;
    rope.truncate = truncate;
    const std::vector<float> got = rope_inv_freq(rope, 32);
    const std::vector<double> want = yarn_reference(10000.0, 32, 4.0, 64.0, 32.0, 1.0, truncate);
    ASSERT_EQ(got.size(), want.size());
    int kept = 0, divided = 0, blended = 0;
    for (size_t j = 0; j < want.size(); ++j) {
      EXPECT_NEAR(got[j], want[j], 2e-6 * want[j]) << "pair " << j;
      const double f = plain_inv_freq(10000.0, static_cast<int>(j), 32);
      if (std::fabs(want[j] - f) < 1e-12) ++kept;
      else if (std::fabs(want[j] - f / 4.0) < 1e-12) ++divided;
      else ++blended;
    }
    EXPECT_GT(kept, 0);  // the case covers the three bands
    EXPECT_GT(divided, 0);
    EXPECT_GT(blended, 0);
  }
}

// The rotation of KnownValuesWithoutNorm (cpu_rope_test.cpp) with cos and sin both multiplied by
// the attention factor, as transformers' rotary embedding does with attention_scaling.
TEST(RopeScaling, CpuRopeScalesCosAndSinByTheAttentionFactor) {
  auto be = make_backend("cpu", 1);
  using cpu_test::Blob;
  Blob q(DType::F32, 4), k(DType::F32, 4), v(DType::F32, 4), kc(DType::F32, 4), vc(DType::F32, 4);
  for (int i = 0; i < 4; ++i) {
    q.set(i, static_cast<float>(i + 1));
    k.set(i, static_cast<float>(i + 1));
    v.set(i, 7.0f);
  }
  std::vector<int32_t> pos{1}, slots{0};
  StepMeta meta;
  meta.positions = cpu_test::i32_tensor(pos);
  meta.slot_mapping = cpu_test::i32_tensor(slots);
  meta.num_tokens = 1;
  RopeParams rope;
  rope.rotary_dim = 4;
  rope.theta = 100.0f;
  rope.attention_factor = 1.25f;
  Tensor qt = q.tensor({1, 1, 4}), kt = k.tensor({1, 1, 4}), kct = kc.tensor({1, 1, 1, 4}),
         vct = vc.tensor({1, 1, 1, 4});
  be->qk_norm_rope_and_cache(qt, kt, v.tensor({1, 1, 4}), Tensor(), Tensor(), 1e-6f, false, rope,
                             meta, kct, vct);
  const double a = 1.25, c1 = a * std::cos(1.0), s1 = a * std::sin(1.0), c2 = a * std::cos(0.1),
               s2 = a * std::sin(0.1);
  const double want[4] = {1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(q.get(i), want[i], 1e-6);
    EXPECT_NEAR(kc.get(i), want[i], 1e-6);
    EXPECT_EQ(vc.get(i), 7.0f);  // v is not rotated
  }
}

}  // namespace
}  // namespace pagoda

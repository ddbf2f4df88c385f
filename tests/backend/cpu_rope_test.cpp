// qk_norm_rope_and_cache against the formulas of docs/models.md: per-head RMSNorm, NeoX RoPE on the
// leading rotary_dim dims, then K/V in the paged cache at slot_mapping.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "backend/backend.h"
#include "cpu_test_util.h"

namespace pagoda {
namespace {

using cpu_test::Blob;

// Reference rotation of one head (already normalised) at position pos, angles in fp32 as specified.
std::vector<double> rope_ref(const std::vector<double>& x, int pos, int rot, float theta) {
  std::vector<double> y = x;
  const int half = rot / 2;
  for (int i = 0; i < half; ++i) {
    // As transformers computes it in fp32: 1 / theta^(float(2i) / rot), then pos * inv_freq. At
    // positions near 40k one ulp of inv_freq moves the angle by ~5e-3, so the fp32 steps matter.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rot);
    const float inv_freq = 1.0f / ::powf(theta, exponent);
    const double angle = static_cast<float>(pos) * inv_freq;  // fp32 product
    const double c = std::cos(angle), s = std::sin(angle);
    y[static_cast<size_t>(i)] =
        x[static_cast<size_t>(i)] * c - x[static_cast<size_t>(i + half)] * s;
    y[static_cast<size_t>(i + half)] =
        x[static_cast<size_t>(i + half)] * c + x[static_cast<size_t>(i)] * s;
  }
  return y;
}

std::vector<double> norm_ref(const std::vector<double>& x, const Blob& w, bool zc, double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double wi = w.get(static_cast<int64_t>(i));
    y[i] = x[i] * inv * (zc ? 1.0 + wi : wi);
  }
  return y;
}

TEST(CpuRope, KnownValuesWithoutNorm) {
  // D = 4, full rotation, theta 100: inv_freq = {1, 0.1}; pairs (0, 2) and (1, 3).
  auto be = make_backend("cpu", 1);
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
  Tensor qt = q.tensor({1, 1, 4}), kt = k.tensor({1, 1, 4}), kct = kc.tensor({1, 1, 1, 4}),
         vct = vc.tensor({1, 1, 1, 4});
  be->qk_norm_rope_and_cache(qt, kt, v.tensor({1, 1, 4}), Tensor(), Tensor(), 1e-6f, false, rope,
                             meta, kct, vct);
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(0.1), s2 = std::sin(0.1);
  const double want[4] = {1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2};
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(q.get(i), want[i], 1e-6);
    EXPECT_NEAR(kc.get(i), want[i], 1e-6);
    EXPECT_EQ(vc.get(i), 7.0f);
  }
}

struct RopeCase {
  int hq, hkv, D, rot;
  float theta;
  bool zero_centered;
  DType cache, weights;
};

void check_rope(const RopeCase& rc, uint32_t seed) {
  SCOPED_TRACE("hq=" + std::to_string(rc.hq) + " hkv=" + std::to_string(rc.hkv) +
               " D=" + std::to_string(rc.D) + " rot=" + std::to_string(rc.rot) +
               " cache=" + dtype_name(rc.cache) + (rc.zero_centered ? " zc" : ""));
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(seed);
  const int T = 9, bs = 4, num_blocks = 5;
  const int64_t qn = int64_t{rc.hq} * rc.D, kn = int64_t{rc.hkv} * rc.D, width = qn + 2 * kn;
  // A fused qkv output [T, q | k | v]: q, k and v are strided column views of it.
  Blob qkv(DType::F32, T * width), qw(rc.weights, rc.D), kw(rc.weights, rc.D);
  const auto vals = cpu_test::random_vector(rng, T * width, -2, 2);
  for (int64_t i = 0; i < T * width; ++i) qkv.set(i, vals[static_cast<size_t>(i)]);
  const auto wq = cpu_test::random_vector(rng, rc.D, -0.5, 1.5),
             wk = cpu_test::random_vector(rng, rc.D, -0.5, 1.5);
  for (int i = 0; i < rc.D; ++i) {
    qw.set(i, wq[static_cast<size_t>(i)]);
    kw.set(i, wk[static_cast<size_t>(i)]);
  }
  std::vector<int32_t> pos(T), slots(T);
  for (int t = 0; t < T; ++t) {
    pos[static_cast<size_t>(t)] = std::uniform_int_distribution<int>(0, 40000)(rng);
    slots[static_cast<size_t>(t)] = (t * 7 + 3) % (num_blocks * bs);
  }
  slots[4] = -1;
  const int64_t cache_n = int64_t{num_blocks} * bs * kn;
  Blob kc(rc.cache, cache_n), vc(rc.cache, cache_n);
  kc.fill(-5.0f);
  vc.fill(-5.0f);
  StepMeta meta;
  meta.positions = cpu_test::i32_tensor(pos);
  meta.slot_mapping = cpu_test::i32_tensor(slots);
  meta.num_tokens = T;
  meta.block_size = bs;

  Tensor all = qkv.tensor({T, width});
  Tensor q = all.cols(0, qn).reshape({T, rc.hq, rc.D});
  Tensor k = all.cols(qn, qn + kn).reshape({T, rc.hkv, rc.D});
  Tensor v = all.cols(qn + kn, width).reshape({T, rc.hkv, rc.D});
  Tensor kct = kc.tensor({num_blocks, bs, rc.hkv, rc.D}),
         vct = vc.tensor({num_blocks, bs, rc.hkv, rc.D});
  const float eps = 1e-6f;
  be->qk_norm_rope_and_cache(q, k, v, qw.tensor({rc.D}), kw.tensor({rc.D}), eps, rc.zero_centered,
                             RopeParams{rc.rot, rc.theta}, meta, kct, vct);

  const double tol = 2e-5;  // fp32 norm and rotation of values of order 1
  for (int t = 0; t < T; ++t) {
    for (int part = 0; part < 2; ++part) {
      const int heads = part == 0 ? rc.hq : rc.hkv;
      const int64_t base = part == 0 ? 0 : qn;
      for (int h = 0; h < heads; ++h) {
        std::vector<double> x;
        for (int i = 0; i < rc.D; ++i)
          x.push_back(vals[static_cast<size_t>(t * width + base + h * rc.D + i)]);
        const auto want = rope_ref(norm_ref(x, part == 0 ? qw : kw, rc.zero_centered, eps),
                                   pos[static_cast<size_t>(t)], rc.rot, rc.theta);
        for (int i = 0; i < rc.D; ++i) {
          const double got = qkv.get(t * width + base + h * rc.D + i);
          ASSERT_NEAR(got, want[static_cast<size_t>(i)], tol)
              << "t=" << t << " part=" << part << " h=" << h << " i=" << i;
          if (part == 1 && slots[static_cast<size_t>(t)] >= 0) {
            const int64_t at = int64_t{slots[static_cast<size_t>(t)]} * kn + h * rc.D + i;
            ASSERT_EQ(kc.get(at), cpu_test::round_to(rc.cache, static_cast<float>(got)));
            ASSERT_EQ(vc.get(at),
                      cpu_test::round_to(
                          rc.cache, vals[static_cast<size_t>(t * width + qn + kn + h * rc.D + i)]));
          }
        }
      }
    }
  }
  // Slot (4*7+3) % 20 = 11 belongs only to the skipped token: untouched.
  for (int64_t e = 0; e < kn; ++e) {
    ASSERT_EQ(kc.get(11 * kn + e), -5.0f);
    ASSERT_EQ(vc.get(11 * kn + e), -5.0f);
  }
}

TEST(CpuRope, Qwen3StyleFullRotation) {
  check_rope({4, 2, 128, 128, 1e6f, false, DType::F32, DType::F32}, 1);
  check_rope({4, 2, 128, 128, 1e6f, false, DType::BF16, DType::BF16}, 2);
  check_rope({2, 1, 64, 64, 10000.0f, false, DType::F16, DType::F16}, 3);
}

TEST(CpuRope, Qwen35StylePartialRotationZeroCentred) {
  check_rope({4, 2, 256, 64, 1e7f, true, DType::F32, DType::F32}, 4);
  check_rope({8, 2, 256, 64, 1e7f, true, DType::BF16, DType::F32}, 5);
}

}  // namespace
}  // namespace pagoda

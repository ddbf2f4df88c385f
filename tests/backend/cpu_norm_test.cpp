// rms_norm and add_rms_norm against the formula, with plain and zero-centred weights of every
// dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/backend.h"
#include "cpu_test_util.h"

namespace pagoda {
namespace {

using cpu_test::Blob;

constexpr double kTol = 2e-6;  // relative; fp32 statistics on values of order 1

double naive_norm(const std::vector<double>& x, int64_t i, double w, bool zc, double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  return x[static_cast<size_t>(i)] / std::sqrt(ss / static_cast<double>(x.size()) + eps) *
         (zc ? 1.0 + w : w);
}

TEST(CpuNorm, RmsNormMatchesFormula) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(3);
  const float eps = 1e-6f;
  for (DType wtype : {DType::F32, DType::BF16, DType::F16})
    for (bool zc : {false, true})
      for (bool strided : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(wtype)) + (zc ? " zero-centred" : "") +
                     (strided ? " strided" : ""));
        const int64_t T = 7, H = 100, ld = strided ? 150 : H;
        Blob x(DType::F32, T * ld), w(wtype, H), out(DType::F32, T * ld);
        const auto xv = cpu_test::random_vector(rng, T * ld, -2, 2);
        const auto wv = cpu_test::random_vector(rng, H, -0.5f, 1.5f);
        for (int64_t i = 0; i < T * ld; ++i) x.set(i, xv[static_cast<size_t>(i)]);
        for (int64_t i = 0; i < H; ++i) w.set(i, wv[static_cast<size_t>(i)]);
        out.fill(99.0f);
        Tensor ot = out.strided({T, H}, ld);
        be->rms_norm(x.strided({T, H}, ld), w.tensor({H}), ot, eps, zc);
        for (int64_t t = 0; t < T; ++t) {
          std::vector<double> row;
          for (int64_t i = 0; i < H; ++i) row.push_back(x.get(t * ld + i));
          for (int64_t i = 0; i < H; ++i) {
            const double want = naive_norm(row, i, w.get(i), zc, eps);
            ASSERT_NEAR(out.get(t * ld + i), want, kTol * (1 + std::abs(want))) << t << "," << i;
          }
          if (strided) {
            EXPECT_EQ(out.get(t * ld + H), 99.0f);
          }
        }
      }
}

TEST(CpuNorm, ZeroCenteredDiffersFromPlain) {
  auto be = make_backend("cpu", 1);
  Blob x(DType::F32, 4), w(DType::F32, 4), a(DType::F32, 4), b(DType::F32, 4);
  for (int i = 0; i < 4; ++i) {
    x.set(i, static_cast<float>(i + 1));
    w.set(i, 0.5f);
  }
  Tensor at = a.tensor({1, 4}), bt = b.tensor({1, 4});
  be->rms_norm(x.tensor({1, 4}), w.tensor({4}), at, 0.0f, false);
  be->rms_norm(x.tensor({1, 4}), w.tensor({4}), bt, 0.0f, true);
  const double rms = std::sqrt((1 + 4 + 9 + 16) / 4.0);
  EXPECT_NEAR(a.get(3), 4 / rms * 0.5, 1e-6);
  EXPECT_NEAR(b.get(3), 4 / rms * 1.5, 1e-6);
}

TEST(CpuNorm, NormOverLastDimOfThreeDimTensor) {
  // [T, heads, D] normalises each head separately.
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(4);
  const int64_t T = 3, Hd = 4, D = 16;
  Blob x(DType::F32, T * Hd * D), w(DType::F32, D), out(DType::F32, T * Hd * D);
  const auto xv = cpu_test::random_vector(rng, T * Hd * D);
  for (int64_t i = 0; i < T * Hd * D; ++i) x.set(i, xv[static_cast<size_t>(i)]);
  w.fill(1.0f);
  Tensor ot = out.tensor({T, Hd, D});
  be->rms_norm(x.tensor({T, Hd, D}), w.tensor({D}), ot, 1e-6f, false);
  for (int64_t h = 0; h < T * Hd; ++h) {
    std::vector<double> row;
    for (int64_t i = 0; i < D; ++i) row.push_back(x.get(h * D + i));
    for (int64_t i = 0; i < D; ++i)
      ASSERT_NEAR(out.get(h * D + i), naive_norm(row, i, 1.0, false, 1e-6), 1e-5);
  }
}

TEST(CpuNorm, AddRmsNormUpdatesResidualAndNormalises) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(5);
  for (DType wtype : {DType::F32, DType::BF16})
    for (bool zc : {false, true}) {
      const int64_t T = 5, H = 64, ld = 80;
      Blob res(DType::F32, T * H), x(DType::F32, T * ld), w(wtype, H), out(DType::F32, T * H);
      const auto rv = cpu_test::random_vector(rng, T * H),
                 xv = cpu_test::random_vector(rng, T * ld);
      const auto wv = cpu_test::random_vector(rng, H);
      for (int64_t i = 0; i < T * H; ++i) res.set(i, rv[static_cast<size_t>(i)]);
      for (int64_t i = 0; i < T * ld; ++i) x.set(i, xv[static_cast<size_t>(i)]);
      for (int64_t i = 0; i < H; ++i) w.set(i, wv[static_cast<size_t>(i)]);
      Tensor rt = res.tensor({T, H}), ot = out.tensor({T, H});
      be->add_rms_norm(rt, x.strided({T, H}, ld), w.tensor({H}), ot, 1e-6f, zc);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> sum;
        for (int64_t i = 0; i < H; ++i) {
          const float s = rv[static_cast<size_t>(t * H + i)] + xv[static_cast<size_t>(t * ld + i)];
          ASSERT_EQ(res.get(t * H + i), s);
          sum.push_back(s);
        }
        for (int64_t i = 0; i < H; ++i) {
          const double want = naive_norm(sum, i, w.get(i), zc, 1e-6);
          ASSERT_NEAR(out.get(t * H + i), want, kTol * (1 + std::abs(want)));
        }
      }
    }
}

}  // namespace
}  // namespace pagoda

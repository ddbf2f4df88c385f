// The elementwise ops Gemma needs, against naive formulas in double: gelu_tanh_mul (transformers'
// gelu_pytorch_tanh GLU: 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³)))·u), scale and softcap.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>

#include "backend/backend.h"
#include "cpu_test_util.h"

namespace pagoda {
namespace {

using cpu_test::Blob;

double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

TEST(CpuGemmaOps, GeluTanhMulOfFusedGateUp) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(3);
  const int64_t T = 6, I = 37, ld_in = 2 * I + 4, ld_out = I + 2;
  Blob gu(DType::F32, T * ld_in), out(DType::F32, T * ld_out);
  const auto v = cpu_test::random_vector(rng, T * ld_in, -6, 6);
  for (int64_t i = 0; i < T * ld_in; ++i) gu.set(i, v[static_cast<size_t>(i)]);
  out.fill(3.0f);
  Tensor ot = out.strided({T, I}, ld_out);
  be->gelu_tanh_mul(gu.strided({T, 2 * I}, ld_in), ot);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < I; ++i) {
      const double g = gu.get(t * ld_in + i), u = gu.get(t * ld_in + I + i);
      ASSERT_NEAR(out.get(t * ld_out + i), gelu_tanh(g) * u, 1e-5 * (1 + std::abs(g * u)));
    }
    EXPECT_EQ(out.get(t * ld_out + I), 3.0f);  // the stride's padding is left alone
  }
  // Known points: gelu_tanh(0) = 0, gelu_tanh(x) → x for large x, → 0 for very negative x.
  EXPECT_NEAR(gelu_tanh(0.0), 0.0, 1e-12);
  EXPECT_NEAR(gelu_tanh(1.0), 0.8411920, 1e-6);  // torch.nn.functional.gelu(1, approximate="tanh")
}

TEST(CpuGemmaOps, ScaleAndSoftcapInPlace) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(4);
  const int64_t T = 5, n = 40, ld = 44;
  Blob x(DType::F32, T * ld);
  const auto v = cpu_test::random_vector(rng, T * ld, -30, 30);
  for (int64_t i = 0; i < T * ld; ++i) x.set(i, v[static_cast<size_t>(i)]);
  Tensor xt = x.strided({T, n}, ld);
  be->scale(xt, 8.0f);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(x.get(t * ld + i), 8.0f * v[static_cast<size_t>(t * ld + i)]);
    EXPECT_EQ(x.get(t * ld + n), v[static_cast<size_t>(t * ld + n)]);  // padding untouched
  }
  be->softcap(xt, 30.0f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < n; ++i) {
      const double want = 30.0 * std::tanh(8.0 * v[static_cast<size_t>(t * ld + i)] / 30.0);
      ASSERT_NEAR(x.get(t * ld + i), want, 1e-5);
      ASSERT_LE(std::abs(x.get(t * ld + i)), 30.0f);
    }
}

}  // namespace
}  // namespace pagoda

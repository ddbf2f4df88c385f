// linear against a naive fp64 matrix product: every weight dtype, decode and prefill row counts,
// odd sizes, strided x and out.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "backend/backend.h"
#include "core/error.h"
#include "cpu_test_util.h"

namespace pagoda {
namespace {

using cpu_test::Blob;

// Max abs error allowed, relative to sum_k |x_k w_k| of the output element: fp32 accumulation of
// exactly representable products (the reference multiplies the same stored weight values).
constexpr double kRelTol = 2e-6;

void check_linear(Backend& be, DType wtype, int64_t T, int64_t N, int64_t K, bool strided,
                  uint32_t seed) {
  SCOPED_TRACE(std::string(dtype_name(wtype)) + " T=" + std::to_string(T) +
               " N=" + std::to_string(N) + " K=" + std::to_string(K) + (strided ? " strided" : ""));
  std::mt19937 rng(seed);
  const int64_t ldx = strided ? K + 5 : K, ldo = strided ? N + 3 : N;
  Blob x(DType::F32, T * ldx), w(wtype, N * K), out(DType::F32, T * ldo);
  const auto xv = cpu_test::random_vector(rng, T * ldx), wv = cpu_test::random_vector(rng, N * K);
  for (int64_t i = 0; i < T * ldx; ++i) x.set(i, xv[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < N * K; ++i) w.set(i, wv[static_cast<size_t>(i)]);
  out.fill(1234.0f);
  Tensor xt = strided ? x.strided({T, K}, ldx) : x.tensor({T, K});
  Tensor ot = strided ? out.strided({T, N}, ldo) : out.tensor({T, N});
  be.linear(xt, w.tensor({N, K}), ot);
  double worst = 0.0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double want = 0.0, mag = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(x.get(t * ldx + k)) * w.get(n * K + k);
        want += p;
        mag += std::abs(p);
      }
      worst = std::max(worst, std::abs(out.get(t * ldo + n) - want) / (mag + 1e-30));
    }
  EXPECT_LE(worst, kRelTol);
  if (strided) {
    for (int64_t t = 0; t < T; ++t) EXPECT_EQ(out.get(t * ldo + N), 1234.0f);  // padding untouched
  }
}

TEST(CpuLinear, MatchesNaiveProductForEveryWeightType) {
  auto be = make_backend("cpu", 2);
  uint32_t seed = 1;
  for (DType wtype : {DType::F32, DType::BF16, DType::F16})
    for (int64_t T : {1, 2, 3, 4, 5, 9, 17, 64})
      for (auto [N, K] :
           {std::pair<int64_t, int64_t>{1, 1}, {7, 13}, {33, 64}, {100, 130}, {200, 1024}})
        check_linear(*be, wtype, T, N, K, false, seed++);
}

TEST(CpuLinear, StridedInputAndOutput) {
  auto be = make_backend("cpu", 2);
  uint32_t seed = 500;
  for (DType wtype : {DType::F32, DType::BF16})
    for (int64_t T : {1, 3, 16, 33}) check_linear(*be, wtype, T, 96, 72, true, seed++);
}

TEST(CpuLinear, SingleThreadAgreesWithThreaded) {
  // The result must not depend on how the work was split: each element is one thread's sum.
  auto one = make_backend("cpu", 1), two = make_backend("cpu", 2);
  std::mt19937 rng(9);
  const int64_t T = 24, N = 300, K = 256;
  Blob x(DType::F32, T * K), w(DType::F32, N * K), a(DType::F32, T * N), b(DType::F32, T * N);
  const auto xv = cpu_test::random_vector(rng, T * K), wv = cpu_test::random_vector(rng, N * K);
  for (int64_t i = 0; i < T * K; ++i) x.set(i, xv[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < N * K; ++i) w.set(i, wv[static_cast<size_t>(i)]);
  Tensor at = a.tensor({T, N}), bt = b.tensor({T, N});
  one->linear(x.tensor({T, K}), w.tensor({N, K}), at);
  two->linear(x.tensor({T, K}), w.tensor({N, K}), bt);
  for (int64_t i = 0; i < T * N; ++i) ASSERT_NEAR(a.get(i), b.get(i), 1e-4f) << i;
}

// linear_silu_mul is silu_mul into the scratch, then linear: bit-identical to the two ops, and the
// formula silu(g) * u · w.
TEST(CpuLinear, LinearSiluMulIsSiluMulThenLinear) {
  auto be = make_backend("cpu", 3);
  std::mt19937 rng(21);
  for (int64_t T : {1, 5}) {
    const int64_t I = 67, N = 29, ld = 2 * I + 6;
    SCOPED_TRACE("T=" + std::to_string(T));
    Blob gu(DType::F32, T * ld), w(DType::BF16, N * I), act(DType::F32, T * I), act2(DType::F32, T * I),
        out(DType::F32, T * N), out2(DType::F32, T * N);
    const auto gv = cpu_test::random_vector(rng, T * ld, -4, 4), wv = cpu_test::random_vector(rng, N * I);
    for (int64_t i = 0; i < T * ld; ++i) gu.set(i, gv[static_cast<size_t>(i)]);
    for (int64_t i = 0; i < N * I; ++i) w.set(i, wv[static_cast<size_t>(i)]);
    const Tensor gut = gu.strided({T, 2 * I}, ld), wt = w.tensor({N, I});
    Tensor at = act.tensor({T, I}), at2 = act2.tensor({T, I}), ot = out.tensor({T, N}), ot2 = out2.tensor({T, N});
    be->linear_silu_mul(gut, wt, at, ot);
    be->silu_mul(gut, at2);
    be->linear(at2, wt, ot2);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) {
        ASSERT_EQ(out.get(t * N + n), out2.get(t * N + n)) << "t " << t << " n " << n;
        double want = 0.0, mag = 0.0;
        for (int64_t k = 0; k < I; ++k) {
          const double g = gu.get(t * ld + k), u = gu.get(t * ld + I + k);
          const double p = g / (1.0 + std::exp(-g)) * u * w.get(n * I + k);
          want += p;
          mag += std::abs(p);
        }
        ASSERT_NEAR(out.get(t * N + n), want, 1e-5 * (1.0 + mag)) << "t " << t << " n " << n;
      }
  }
}

TEST(CpuLinear, RejectsMismatchedShapes) {
  auto be = make_backend("cpu", 1);
  Blob x(DType::F32, 8), w(DType::F32, 12), out(DType::F32, 8);
  Tensor ot = out.tensor({2, 3});
  EXPECT_THROW(be->linear(x.tensor({2, 4}), w.tensor({4, 3}), ot), Error);
}

}  // namespace
}  // namespace pagoda

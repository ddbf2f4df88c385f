// The 16-bit-weight GEMV kernels of the CPU backend (src/backend/cpu/gemv.h), each ISA path the
// machine can run, against a naive fp64 product over the same stored weights (the formula, not
// another kernel). A path this CPU lacks is skipped and says so; it never counts as a pass.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/gemv.h"
#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/error.h"

namespace pagoda {
namespace {

// SwiGLU's activation against silu in double, over the range a gate takes and past where exp
// overflows in fp32 (there silu is 0 or x).
TEST(CpuKernels, SiluMulIsSiluTimesUp) {
  const cpu::Kernels& k = cpu::kernels();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-120.0f, 120.0f), w(-2.0f, 2.0f);
  for (int64_t n : {1, 9, 64, 133}) {
    std::vector<float> g(static_cast<size_t>(n)), up(static_cast<size_t>(n)), o(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      g[static_cast<size_t>(i)] = i % 3 == 0 ? u(rng) : w(rng) * 4;
      up[static_cast<size_t>(i)] = w(rng);
    }
    k.silu_mul(g.data(), up.data(), o.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double x = g[static_cast<size_t>(i)];
      const double want = x / (1.0 + std::exp(-x)) * up[static_cast<size_t>(i)];
      EXPECT_NEAR(o[static_cast<size_t>(i)], want, 1e-30 + 4 * 1.2e-7 * std::fabs(want)) << "n " << n << " x " << x;
    }
  }
}

// Softmax's numerators in the prefill attention: exp(s - m) against the C library's (double) exp,
// over the range a softmax sees (0 down to past where fp32 underflows), lengths with a tail.
TEST(CpuKernels, ExpSumIsExpWithinAFewUlp) {
  const cpu::Kernels& k = cpu::kernels();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-100.0f, 0.0f);
  for (int64_t n : {1, 7, 8, 64, 131}) {
    std::vector<float> s(static_cast<size_t>(n));
    for (float& x : s) x = u(rng) + 3.0f;
    s[0] = 3.0f;  // the max itself: exp(0) = 1
    const std::vector<float> in = s;
    const float sum = k.exp_sum(s.data(), n, 3.0f);
    double want_sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double want = std::exp(static_cast<double>(in[static_cast<size_t>(j)]) - 3.0);
      want_sum += want;
      const double got = s[static_cast<size_t>(j)];
      if (in[static_cast<size_t>(j)] - 3.0f < -87.0f) {  // past fp32's normal range: 0
        EXPECT_LE(got, want) << "n " << n << " j " << j;
        continue;
      }
      EXPECT_NEAR(got, want, 4 * 1.2e-7 * want) << "n " << n << " j " << j << " x " << in[static_cast<size_t>(j)] - 3.0f;
    }
    EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum) << "n " << n;
  }
}

using cpu::CpuIsa;

// f32 -> f16 bits by round-to-nearest-even for normal values (the test's inputs are in [-1, 1]).
uint16_t to_half(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((b >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return static_cast<uint16_t>(sign);  // flush the few tiny inputs to zero
  uint32_t mant = b & 0x7fffffu;
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

double from_half(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return (h & 0x8000u) ? -v : v;
}

double from_bf16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Worst |got - want| / sum_k |x_k w_k| over all outputs of one shape; outputs outside [T, N] of the
// strided out must stay untouched.
// x rounded to bf16, round to nearest even (finite inputs): the blocked GEMM's formula.
double round_bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &b, 4);
  return r;
}

double worst_error(const cpu::GemvKernels& k, bool bf16, int64_t T, int64_t N, int64_t K, uint32_t seed,
                   bool x_bf16 = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t ldx = K + 3, ldo = N + 5;
  std::vector<float> x(static_cast<size_t>(T * ldx)), out(static_cast<size_t>(T * ldo), 1234.0f);
  std::vector<uint16_t> w(static_cast<size_t>(N * K));
  for (float& v : x) v = dist(rng);
  for (uint16_t& v : w) {
    const float f = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    v = bf16 ? static_cast<uint16_t>(bits >> 16) : to_half(f);
  }
  (bf16 ? k.bf16 : k.f16)(x.data(), ldx, w.data(), K, out.data(), ldo, T, N, K);
  double worst = 0.0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      double want = 0.0, mag = 0.0;
      for (int64_t kk = 0; kk < K; ++kk) {
        const uint16_t wb = w[static_cast<size_t>(n * K + kk)];
        const float xv = x[static_cast<size_t>(t * ldx + kk)];
        const double p = (x_bf16 ? round_bf16(xv) : double(xv)) * (bf16 ? from_bf16(wb) : from_half(wb));
        want += p;
        mag += std::fabs(p);
      }
      worst = std::max(worst, std::fabs(out[static_cast<size_t>(t * ldo + n)] - want) / (mag + 1e-30));
    }
    for (int64_t n = N; n < ldo; ++n) EXPECT_EQ(out[static_cast<size_t>(t * ldo + n)], 1234.0f);
  }
  return worst;
}

class CpuGemv : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(CpuGemv, MatchesNaiveProductOnEveryShape) {
  const CpuIsa isa = GetParam();
  if (!cpu::isa_supported(isa)) GTEST_SKIP() << "this CPU cannot run the " << cpu::isa_name(isa) << " path";
  const cpu::GemvKernels k = cpu::gemv_kernels_for(isa);
  EXPECT_EQ(k.isa, isa);
  // fp32 accumulation of the products of the stored weights (the avx512bf16 path's three-part bf16
  // split of x is within 2^-26 of x): the CPU backend's linear tolerance.
  const double tol = 2e-6;
  uint32_t seed = 1;
  struct Shape { int64_t t, n, k; };
  // T: decode (1), skinny batches, a tile-and-a-bit; N and K off the 4-row tile and 8/16/32 lanes.
  for (const Shape s : {Shape{1, 1, 1}, {1, 40, 64}, {1, 7, 13}, {3, 72, 136}, {8, 33, 256}, {9, 64, 96},
                        {5, 9, 1024}, {2, 16, 37}, {4, 5, 31}, {1, 4, 33}, {6, 12, 1000}, {1, 3, 48},
                        {1, 5, 1000}})
    for (bool bf16 : {true, false}) {
      SCOPED_TRACE(std::string(bf16 ? "bf16" : "f16") + " T=" + std::to_string(s.t) + " N=" + std::to_string(s.n) +
                   " K=" + std::to_string(s.k));
      EXPECT_LE(worst_error(k, bf16, s.t, s.n, s.k, seed++), tol);
    }
}

#if defined(__x86_64__)
// The blocked GEMM for many rows of x (gemm.h) against sum_k bf16(x) * w in fp64: exact products,
// fp32 sums, so the same tolerance as the GEMV kernels. x86 only: the GEMM is AVX-512 BF16 (the
// aarch64 run under qemu, where a skipped test fails the stage, has no such path to skip).
class CpuGemm : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(CpuGemm, MatchesNaiveProductOnEveryShape) {
  const CpuIsa isa = GetParam();
  if (!cpu::isa_supported(isa)) GTEST_SKIP() << "this CPU cannot run the " << cpu::isa_name(isa) << " path";
  const cpu::GemmKernels g = cpu::gemm_kernels_for(isa);
  ASSERT_NE(g.bf16, nullptr) << cpu::isa_name(isa);
  cpu::GemvKernels k;
  k.bf16 = g.bf16;
  const double tol = 2e-6;
  uint32_t seed = 100;
  struct Shape { int64_t t, n, k; };
  // T: one micro-tile, each rest of 12, past one 516-row chunk; N off the 32-row panel; K odd, past
  // one 512-column block, odd past it.
  for (const Shape s : {Shape{16, 32, 64}, {12, 1, 1}, {13, 33, 257}, {23, 64, 1024}, {530, 20, 300},
                        {17, 5, 31}, {35, 48, 601}, {16, 96, 1030}, {29, 31, 3}}) {
    SCOPED_TRACE("T=" + std::to_string(s.t) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k));
    EXPECT_LE(worst_error(k, true, s.t, s.n, s.k, seed++, true), tol);
  }
  // And it is not the exact product: the rounding of x shows (the reference can tell them apart).
  EXPECT_GT(worst_error(k, true, 16, 32, 256, 7, false), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuGemm, ::testing::Values(CpuIsa::Avx512Bf16),
                         [](const auto& p) { return std::string(cpu::isa_name(p.param)); });
#endif

TEST(CpuGemmCheck, OnlyAvx512Bf16HasTheGemm) {
  EXPECT_EQ(cpu::gemm_kernels_for(CpuIsa::Scalar).bf16, nullptr);
  EXPECT_EQ(cpu::gemm_kernels_for(CpuIsa::Avx512).bf16, nullptr);
#if defined(__x86_64__)
  EXPECT_NE(cpu::gemm_kernels_for(CpuIsa::Avx512Bf16).bf16, nullptr);
#endif
}

// The comparison can fail: a kernel that drops the last column is caught.
TEST(CpuGemvCheck, DetectsAWrongKernel) {
  cpu::GemvKernels wrong;
  wrong.bf16 = [](const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo, int64_t T,
                  int64_t N, int64_t K) { cpu::gemv_bf16_scalar(x, ldx, w, ldw, out, ldo, T, N, K - 1); };
  EXPECT_GT(worst_error(wrong, true, 2, 8, 64, 3), 1e-3);
}

TEST(CpuGemvCheck, ScalarPathAlwaysAvailable) {
  EXPECT_TRUE(cpu::isa_supported(CpuIsa::Scalar));
  EXPECT_NE(cpu::gemv_kernels().bf16, nullptr);
}

// A path of the other architecture is never offered, and asking for it is an error, not the scalar path.
TEST(CpuGemvCheck, OtherArchitecturesPathsAreRefused) {
#if defined(__aarch64__)
  const CpuIsa foreign[] = {CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16};
#else
  const CpuIsa foreign[] = {CpuIsa::Neon, CpuIsa::NeonBf16};
#endif
  for (CpuIsa isa : foreign) {
    EXPECT_FALSE(cpu::isa_supported(isa)) << cpu::isa_name(isa);
    EXPECT_THROW(cpu::gemv_kernels_for(isa), Error) << cpu::isa_name(isa);
  }
}

// The paths of this build's architecture (the other architecture's would only ever skip).
#if defined(__aarch64__)
constexpr CpuIsa kIsas[] = {CpuIsa::Scalar, CpuIsa::Neon, CpuIsa::NeonBf16};
#else
constexpr CpuIsa kIsas[] = {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16};
#endif
INSTANTIATE_TEST_SUITE_P(Isa, CpuGemv, ::testing::ValuesIn(kIsas),
                         [](const auto& p) { return std::string(cpu::isa_name(p.param)); });

}  // namespace
}  // namespace pagoda

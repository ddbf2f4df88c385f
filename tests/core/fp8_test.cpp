// e4m3fn conversions (core/dtype.h) against the format's definition written out here (OCP 8-bit
// floating point: value = (-1)^s · 2^(e-7) · (1 + m/8), subnormals 2^-6 · m/8, 0x7f/0xff NaN) and
// a brute-force nearest search over every code.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"

namespace pagoda {
namespace {

double definition(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// The code nearest to x among the finite codes of x's sign, ties to the even code.
uint8_t nearest(double x) {
  const int sign = std::signbit(x) ? 0x80 : 0;
  uint8_t best = static_cast<uint8_t>(sign);
  for (int m = 1; m < 0x7f; ++m) {
    const auto c = static_cast<uint8_t>(sign | m);
    const double d = std::fabs(definition(c) - x), bd = std::fabs(definition(best) - x);
    if (d < bd || (d == bd && (c & 1) == 0)) best = c;
  }
  return best;
}

TEST(Fp8E4m3, EveryCodeDecodesAsTheFormatDefinesIt) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(static_cast<double>(fp8_e4m3_to_f32(static_cast<uint8_t>(c))), definition(static_cast<uint8_t>(c)))
        << "code 0x" << std::hex << c;
  }
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);           // the largest finite value
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
}

TEST(Fp8E4m3, EncodingRoundsToTheNearestCodeTiesToEvenAndSaturates) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f || c == 0x80) continue;  // NaN; -0 encodes back as 0x80 too, checked below
    EXPECT_EQ(f32_to_fp8_e4m3(fp8_e4m3_to_f32(static_cast<uint8_t>(c))), c) << "code 0x" << std::hex << c;
  }
  EXPECT_EQ(f32_to_fp8_e4m3(-0.0f), 0x80);
  // Halfway cases: 1 + 1/16 lies between 1 (0x38) and 1.125 (0x39): to the even 0x38; 1 + 3/16 between
  // 0x39 and 0x3a: to 0x3a; 2^-10 between 0 and the smallest subnormal: to 0; 3·2^-10 → 0x02.
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625f), 0x38);
  EXPECT_EQ(f32_to_fp8_e4m3(1.1875f), 0x3a);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(3.0f, -10)), 0x02);
  EXPECT_EQ(f32_to_fp8_e4m3(1000.0f), 0x7e);   // saturates at 448, as quantizers clamp
  EXPECT_EQ(f32_to_fp8_e4m3(-1e30f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(NAN) & 0x7f, 0x7f);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-460.0f, 460.0f);
  std::uniform_real_distribution<float> small(-0.03f, 0.03f);
  for (int i = 0; i < 4000; ++i) {
    const float x = i % 2 ? u(rng) : small(rng);
    const uint8_t want = std::fabs(x) >= 448.0f ? static_cast<uint8_t>((x < 0 ? 0x80 : 0) | 0x7e) : nearest(x);
    ASSERT_EQ(f32_to_fp8_e4m3(x), want) << "x = " << x;
  }
}

}  // namespace
}  // namespace pagoda

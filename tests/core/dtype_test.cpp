// convert_float_elements (core/dtype.h) against IEEE 754 bit patterns worked out by hand: binary16
// and bfloat16 encodings of exact values, ties to even, subnormals, overflow, infinities and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"

namespace pagoda {
namespace {

std::vector<uint16_t> to_half(const std::vector<float>& in, DType t) {
  std::vector<uint16_t> out(in.size());
  convert_float_elements(in.data(), DType::F32, out.data(), t, in.size());
  return out;
}

TEST(ConvertFloatElements, F32ToF16MatchesTheIeeeEncodings) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {1.0f, -2.0f, 0.5f, 65504.0f, 65520.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                                 std::ldexp(1.0f, -24), std::ldexp(1.0f, -26), 0.0f, -inf};
  // 1 = 0x3c00; -2 = 0xc000; 0.5 = 0x3800; 65504 = max finite 0x7bff; 65520 rounds up to inf 0x7c00;
  // 1 + 2^-11 is halfway between 0x3c00 and 0x3c01: ties to even 0x3c00; 1 + 3·2^-11 halfway between
  // 0x3c01 and 0x3c02: to even 0x3c02; 2^-24 = the smallest subnormal 0x0001; 2^-26 rounds to 0.
  const std::vector<uint16_t> want = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x7c00, 0x3c00, 0x3c02, 0x0001, 0x0000,
                                      0x0000, 0xfc00};
  EXPECT_EQ(to_half(in, DType::F16), want);
}

TEST(ConvertFloatElements, F32ToBf16RoundsToNearestEvenAndKeepsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 1 + 2^-8 is halfway between 0x3f80 and 0x3f81: to even 0x3f80; 1 + 3·2^-8 → 0x3f82; 1 + 2^-8 + 2^-20
  // is above halfway → 0x3f81.
  const std::vector<float> in = {1.0f, -1.5f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 1.0f + 1.0f / 256 + std::ldexp(1.0f, -20)};
  const std::vector<uint16_t> want = {0x3f80, 0xbfc0, 0x3f80, 0x3f82, 0x3f81};
  EXPECT_EQ(to_half(in, DType::BF16), want);
  const uint16_t n = to_half({nan}, DType::BF16)[0];
  EXPECT_EQ(n & 0x7f80, 0x7f80);
  EXPECT_NE(n & 0x007f, 0) << "NaN must stay NaN, not become infinity";
}

TEST(ConvertFloatElements, HalfTypesWidenExactlyAndConvertIntoEachOther) {
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00};
  std::vector<float> wide(f16.size());
  convert_float_elements(f16.data(), DType::F16, wide.data(), DType::F32, f16.size());
  EXPECT_EQ(wide, (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), 65504.0f,
                                      std::numeric_limits<float>::infinity()}));
  // F16 → BF16 through fp32: 65504 = 1.1111111111b · 2^15 rounds to 1.0000000b · 2^16 = 0x4780.
  std::vector<uint16_t> b(f16.size());
  convert_float_elements(f16.data(), DType::F16, b.data(), DType::BF16, f16.size());
  EXPECT_EQ(b, (std::vector<uint16_t>{0x3f80, 0xc000, 0x3380, 0x4780, 0x7f80}));
}

}  // namespace
}  // namespace pagoda

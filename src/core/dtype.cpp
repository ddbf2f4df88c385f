#include "core/dtype.h"

#include <algorithm>
#include <cmath>

namespace pagoda {

bool parse_safetensors_dtype(std::string_view s, DType* out) {
  if (s == "F32") *out = DType::F32;
  else if (s == "F16") *out = DType::F16;
  else if (s == "BF16") *out = DType::BF16;
  else if (s == "F8_E4M3") *out = DType::F8_E4M3;
  else if (s == "I32") *out = DType::I32;
  else if (s == "I64") *out = DType::I64;  // index tables (an EAGLE-3 head's d2t)
  else return false;
  return true;
}

uint8_t f32_to_fp8_e4m3(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const auto sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  uint32_t a = bits & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;  // NaN
  if (a >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7e);  // ≥ 448: saturate
  if (a < 0x3c800000u) {  // below 2^-6: subnormal steps of 2^-9 (8 of them reach 2^-6, code 0x08)
    float m;
    std::memcpy(&m, &a, 4);
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(std::nearbyint(m * 512.0f)));
  }
  a += 0x7ffffu + ((a >> 20) & 1u);  // round the 23-bit mantissa to 3 bits, ties to even
  const uint32_t code = ((((a >> 23) - 127u + 7u) << 3) | ((a >> 20) & 7u));
  return static_cast<uint8_t>(sign | std::min<uint32_t>(code, 0x7e));
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(mant), -24);  // zero and subnormals
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (x < 0x38800000u) {  // subnormal or zero in f16: round the scaled value to an integer
    const float a = std::fabs(f) * 16777216.0f;  // 2^24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a)));
  }
  // Normal: rebias exponent (127 -> 15), round mantissa 23 -> 10 bits to nearest even.
  uint32_t r = x - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

void convert_float_elements(const void* src, DType src_type, void* dst, DType dst_type, size_t count) {
  const auto* in = static_cast<const unsigned char*>(src);
  auto* out = static_cast<unsigned char*>(dst);
  const size_t in_es = dtype_size(src_type), out_es = dtype_size(dst_type);
  for (size_t i = 0; i < count; ++i) {
    float f;
    if (src_type == DType::F32) {
      std::memcpy(&f, in + i * in_es, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, in + i * in_es, 2);
      f = src_type == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
    if (dst_type == DType::F32) {
      std::memcpy(out + i * out_es, &f, 4);
    } else {
      const uint16_t h = dst_type == DType::BF16 ? f32_to_bf16(f) : f32_to_f16(f);
      std::memcpy(out + i * out_es, &h, 2);
    }
  }
}

}  // namespace pagoda

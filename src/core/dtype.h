// Element types of tensors and their conversions to and from fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pagoda {

// F8_E4M3: OCP FP8 e4m3fn (1 sign, 4 exponent bits with bias 7, 3 mantissa bits, no infinity,
// ±448 largest), the element type of FP8 weights; only a projection's weight (with its scales) and
// the conversions below use it.
enum class DType : uint8_t { F32, F16, BF16, I32, I64, F8_E4M3 };

// Inline (not in dtype.cpp) so the CUDA library, linked after pagoda_lib, can use them too.
inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::F8_E4M3: return 1;
  }
  return 0;
}

// safetensors spelling: "F32", "BF16", ...
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::F8_E4M3: return "F8_E4M3";
  }
  return "?";
}
// Parses a safetensors dtype string; returns false for types pagoda does not load.
bool parse_safetensors_dtype(std::string_view s, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as PyTorch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// e4m3fn → fp32, exactly: the 7 magnitude bits placed at fp32's exponent/mantissa boundary read as
// a float 2^-120 times the value (normals and subnormals alike), so one multiply by 2^120 fixes
// them. 0x7f / 0xff (NaN) come out as 480; a checkpoint holding them is refused at load.
inline float fp8_e4m3_to_f32(uint8_t b) {
  const uint32_t bits = (static_cast<uint32_t>(b & 0x80) << 24) | (static_cast<uint32_t>(b & 0x7f) << 20);
  float f;
  std::memcpy(&f, &bits, 4);
  return f * 1.329227995784916e36f;  // 2^120
}
// fp32 → e4m3fn, round to nearest even, saturating at ±448 (what quantizers do after scaling);
// NaN becomes 0x7f.
uint8_t f32_to_fp8_e4m3(float f);

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Converts `count` contiguous elements between the float types F32, BF16 and F16 on the host
// (through fp32, rounding to nearest even): the staging step of a backend's upload_convert.
void convert_float_elements(const void* src, DType src_type, void* dst, DType dst_type, size_t count);

}  // namespace pagoda

// Element types of tensors and their conversions to and from fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pagoda {

enum class DType : uint8_t { F32, F16, BF16, I32, I64 };

// Inline (not in dtype.cpp) so the CUDA library, linked after pagoda_lib, can use them too.
inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
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

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Converts `count` contiguous elements between the float types F32, BF16 and F16 on the host
// (through fp32, rounding to nearest even): the staging step of a backend's upload_convert.
void convert_float_elements(const void* src, DType src_type, void* dst, DType dst_type, size_t count);

}  // namespace pagoda

// Row conversions between the float storage types (F32, BF16, F16) and fp32, for the CPU ops.
// Internal to src/backend/cpu.
#pragma once

#include <cstdint>
#include <array>
#include <cstring>

#include "core/dtype.h"

namespace pagoda::cpu {

// Branch-free f16 -> f32 (exact for every input, NaN payloads kept), written so loops vectorise.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;
  float f;
  std::memcpy(&f, &em, 4);
  f *= 0x1p112f;  // rebias the exponent: 2^(127-15); subnormal halves become normal floats
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint32_t inf_nan = em >= (0x7c00u << 13) ? (0x7f800000u | em) : bits;
  bits = inf_nan | sign;
  std::memcpy(&f, &bits, 4);
  return f;
}

// e4m3fn → fp32 for every byte, made once: a table read, where the bit-pattern conversion would
// form an fp32 denormal (a microcode assist) for e4m3's subnormals.
inline const float* fp8_e4m3_table() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[static_cast<size_t>(b)] = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
    return t;
  }();
  return table.data();
}

inline float load_scalar(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(p)[i];
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::F16:
      return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::F8_E4M3:
      return fp8_e4m3_table()[static_cast<const uint8_t*>(p)[i]];
    default:
      return 0.0f;
  }
}

// dst[0..n) = fp32(src[0..n)).
inline void load_row(const void* src, DType t, float* dst, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t bits = static_cast<uint32_t>(s[i]) << 16;
        std::memcpy(&dst[i], &bits, 4);
      }
      return;
    }
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(s[i]);
      return;
    }
    case DType::F8_E4M3: {  // the FP8 KV cache (its scale is 1, as vLLM's uncalibrated one)
      const auto* s = static_cast<const uint8_t*>(src);
      const float* table = fp8_e4m3_table();
      for (int64_t i = 0; i < n; ++i) dst[i] = table[s[i]];
      return;
    }
    default:
      return;
  }
}

// dst[0..n) = t(src[0..n)), rounding to nearest even.
inline void store_row(const float* src, DType t, void* dst, int64_t n) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    case DType::F8_E4M3: {  // saturating at ±448
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp8_e4m3(src[i]);
      return;
    }
    default:
      return;
  }
}

// Returns a pointer to row data as fp32: the row itself when it is F32, else `scratch` filled.
inline const float* as_f32(const void* src, DType t, float* scratch, int64_t n) {
  if (t == DType::F32) return static_cast<const float*>(src);
  load_row(src, t, scratch, n);
  return scratch;
}

inline bool is_float_dtype(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

// The dtypes a KV cache may hold on the CPU: the float ones and FP8 (--kv-cache-dtype fp8).
inline bool is_kv_cache_dtype(DType t) { return is_float_dtype(t) || t == DType::F8_E4M3; }

}  // namespace pagoda::cpu

// Helpers for the CPU backend tests: host storage of any float dtype, random data, and strided
// views. The reference formulas live in the tests themselves; only core/dtype.h conversions are
// shared with the code under test.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace pagoda::cpu_test {

// Host bytes holding `n` elements of `dtype`, padded to a multiple of 64 bytes.
class Blob {
 public:
  Blob(DType dtype, int64_t n)
      : dtype_(dtype), n_(n), bytes_(static_cast<size_t>(n) * dtype_size(dtype) + 64) {}
  DType dtype() const { return dtype_; }
  int64_t size() const { return n_; }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }

  float get(int64_t i) const {
    switch (dtype_) {
      case DType::F32: {
        float f;
        std::memcpy(&f, bytes_.data() + 4 * i, 4);
        return f;
      }
      case DType::BF16:
        return bf16_to_f32(half_bits(i));
      case DType::F16:
        return f16_to_f32(half_bits(i));
      default:
        return 0.0f;
    }
  }
  void set(int64_t i, float v) {
    switch (dtype_) {
      case DType::F32:
        std::memcpy(bytes_.data() + 4 * i, &v, 4);
        break;
      case DType::BF16:
        set_half_bits(i, f32_to_bf16(v));
        break;
      case DType::F16:
        set_half_bits(i, f32_to_f16(v));
        break;
      default:
        break;
    }
  }
  void fill(float v) {
    for (int64_t i = 0; i < n_; ++i) set(i, v);
  }
  // Contiguous tensor over the blob.
  Tensor tensor(std::initializer_list<int64_t> dims) {
    return Tensor(data(), dtype_, Device::CPU, dims);
  }
  // Tensor whose dim-0 rows are `stride` elements apart (starting at element `offset`).
  Tensor strided(std::initializer_list<int64_t> dims, int64_t stride, int64_t offset = 0) {
    Tensor t(static_cast<char*>(data()) + static_cast<size_t>(offset) * dtype_size(dtype_), dtype_,
             Device::CPU, dims);
    t.row_stride = stride;
    return t;
  }

 private:
  uint16_t half_bits(int64_t i) const {
    uint16_t h;
    std::memcpy(&h, bytes_.data() + 2 * i, 2);
    return h;
  }
  void set_half_bits(int64_t i, uint16_t h) { std::memcpy(bytes_.data() + 2 * i, &h, 2); }

  DType dtype_;
  int64_t n_;
  std::vector<unsigned char> bytes_;
};

// The value `v` becomes once stored as `dtype`.
inline float round_to(DType dtype, float v) {
  switch (dtype) {
    case DType::BF16:
      return bf16_to_f32(f32_to_bf16(v));
    case DType::F16:
      return f16_to_f32(f32_to_f16(v));
    default:
      return v;
  }
}

inline std::vector<float> random_vector(std::mt19937& rng, int64_t n, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

inline Tensor i32_tensor(std::vector<int32_t>& v) {
  return Tensor(v.data(), DType::I32, Device::CPU, {static_cast<int64_t>(v.size())});
}

inline const char* dtype_label(DType t) { return dtype_name(t); }

}  // namespace pagoda::cpu_test

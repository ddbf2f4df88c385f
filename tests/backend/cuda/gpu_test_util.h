// Helpers of the CUDA kernel tests: one CUDA and one CPU backend, host <-> device tensors of any
// float dtype, seeded random data, and an element-wise comparison that reports the worst offenders.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/dtype.h"

namespace pagoda::test {

// A device tensor with the buffer that owns it.
struct DevTensor {
  Buffer buf;
  Tensor t;
};

inline float round_to(float v, DType t) {
  switch (t) {
    case DType::BF16: return bf16_to_f32(f32_to_bf16(v));
    case DType::F16: return f16_to_f32(f32_to_f16(v));
    default: return v;
  }
}

inline std::vector<float> round_all(std::vector<float> v, DType t) {
  for (float& x : v) x = round_to(x, t);
  return v;
}

inline std::vector<float> random_vec(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f,
                                     DType representable = DType::BF16) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = round_to(dist(rng), representable);
  return v;
}

inline DevTensor upload(Backend& be, const std::vector<float>& host, DType dtype, std::initializer_list<int64_t> dims) {
  DevTensor d;
  Tensor shape_only(nullptr, dtype, be.device(), dims);
  const size_t n = static_cast<size_t>(shape_only.numel());
  EXPECT_EQ(n, host.size());
  d.buf = be.alloc(std::max<size_t>(n * dtype_size(dtype), 16));
  d.t = Tensor(d.buf.data(), dtype, be.device(), dims);
  Tensor src(const_cast<float*>(host.data()), DType::F32, Device::CPU, dims);
  be.upload_convert(src, d.t);
  return d;
}

inline DevTensor upload_i32(Backend& be, const std::vector<int32_t>& host, std::initializer_list<int64_t> dims) {
  DevTensor d;
  d.buf = be.alloc(std::max<size_t>(host.size() * 4, 16));
  d.t = Tensor(d.buf.data(), DType::I32, be.device(), dims);
  be.copy_to_device(d.buf.data(), host.data(), host.size() * 4);
  return d;
}

inline DevTensor empty(Backend& be, DType dtype, std::initializer_list<int64_t> dims) {
  DevTensor d;
  Tensor shape_only(nullptr, dtype, be.device(), dims);
  const size_t bytes = std::max<size_t>(static_cast<size_t>(shape_only.numel()) * dtype_size(dtype), 16);
  d.buf = be.alloc(bytes);
  d.t = Tensor(d.buf.data(), dtype, be.device(), dims);
  std::vector<unsigned char> nan_bytes(bytes, 0xff);  // NaN in every float dtype: unwritten outputs show
  be.copy_to_device(d.buf.data(), nan_bytes.data(), bytes);
  return d;
}

// All elements of t (dim 0 may be strided) as fp32, row-major.
inline std::vector<float> download(Backend& be, const Tensor& t) {
  const int64_t rows = t.ndim ? t.shape[0] : 1, cols = t.row_numel();
  const size_t es = dtype_size(t.dtype);
  const int64_t stride = t.stride0();
  std::vector<unsigned char> raw(static_cast<size_t>((rows ? (rows - 1) * stride + cols : 0)) * es);
  if (!raw.empty()) be.copy_to_host(raw.data(), t.data, raw.size());
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(r * stride + c);
      float v = 0.0f;
      switch (t.dtype) {
        case DType::F32: std::memcpy(&v, &raw[i * 4], 4); break;
        case DType::BF16: { uint16_t h; std::memcpy(&h, &raw[i * 2], 2); v = bf16_to_f32(h); break; }
        case DType::F16: { uint16_t h; std::memcpy(&h, &raw[i * 2], 2); v = f16_to_f32(h); break; }
        case DType::I32: { int32_t x; std::memcpy(&x, &raw[i * 4], 4); v = static_cast<float>(x); break; }
        default: break;
      }
      out[static_cast<size_t>(r * cols + c)] = v;
    }
  return out;
}

// |actual - expected| <= atol + rtol * |expected| for every element; NaN never matches.
inline void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, double atol, double rtol,
                         const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  size_t bad = 0, worst = 0;
  double worst_excess = -1.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const double err = std::fabs(a - e), lim = atol + rtol * std::fabs(e);
    if (!(err <= lim)) {
      ++bad;
      const double excess = std::isnan(err) ? 1e30 : err - lim;
      if (excess > worst_excess) worst_excess = excess, worst = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << actual.size() << " elements differ; worst at " << worst
                     << ": got " << actual[worst] << ", expected " << expected[worst] << " (atol " << atol
                     << ", rtol " << rtol << ")";
}

// The two backends every test compares.
struct Backends {
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  std::unique_ptr<Backend> cpu = make_backend("cpu");
};

// Tolerances of bf16 activations against a double-precision formula on the same (rounded) inputs:
// one or two bf16 roundings of the result, relative 2^-8 each.
constexpr double kBf16Rtol = 1.6e-2;
constexpr double kBf16Atol = 1e-2;

}  // namespace pagoda::test

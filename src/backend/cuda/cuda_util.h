// Host-side helpers of the CUDA backend: error checks and Tensor geometry that do not depend on
// pagoda_lib's out-of-line code (pagoda_cuda is linked after pagoda_lib). C++17-clean: included by
// .cu files. Internal to src/backend/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace pagoda::cuda {

[[noreturn]] inline void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line) {
  throw Error(std::string("CUDA error: ") + call + " failed: " + cudaGetErrorString(err) + " (" +
              file + ":" + std::to_string(line) + ")");
}

#define PAGODA_CUDA_CHECK(call)                                                      \
  do {                                                                               \
    const cudaError_t pagoda_err_ = (call);                                          \
    if (pagoda_err_ != cudaSuccess)                                                  \
      ::pagoda::cuda::throw_cuda_error(#call, pagoda_err_, __FILE__, __LINE__);      \
  } while (0)

// After a kernel launch: reports launch errors (bad configuration, missing image); no host sync.
#define PAGODA_CUDA_CHECK_LAUNCH() PAGODA_CUDA_CHECK(cudaGetLastError())

inline size_t elem_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
  }
  return 0;
}

inline const char* dtype_str(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
  }
  return "?";
}

inline int64_t row_elems(const Tensor& t) {
  int64_t n = 1;
  for (int i = 1; i < t.ndim; ++i) n *= t.shape[static_cast<size_t>(i)];
  return n;
}
inline int64_t num_elems(const Tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[static_cast<size_t>(i)];
  return n;
}
inline int64_t num_rows(const Tensor& t) { return t.ndim == 0 ? 1 : t.shape[0]; }
// Elements between consecutive rows of dim 0.
inline int64_t stride_rows(const Tensor& t) { return t.row_stride ? t.row_stride : row_elems(t); }

inline bool contiguous(const Tensor& t) { return t.row_stride == 0 || t.row_stride == row_elems(t); }

inline std::string shape_str(const Tensor& t) {
  std::string s = std::string(dtype_str(t.dtype)) + "[";
  for (int i = 0; i < t.ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(t.shape[static_cast<size_t>(i)]);
  }
  return s + "]" + (t.device == Device::CUDA ? " on cuda" : " on cpu");
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Throws a pagoda::Error "<op>: <what>" when cond is false.
inline void require(bool cond, const char* op, const std::string& what) {
  if (!cond) throw Error(std::string("cuda ") + op + ": " + what);
}

}  // namespace pagoda::cuda

// Host-side helpers of the CUDA backend: error checks and Tensor geometry. Only inline code of
// core/ may be used here (pagoda_cuda is linked after pagoda_lib). C++17-clean: included by
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

inline int64_t num_rows(const Tensor& t) { return t.ndim == 0 ? 1 : t.shape[0]; }

inline std::string shape_str(const Tensor& t) {
  std::string s = std::string(dtype_name(t.dtype)) + "[";
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

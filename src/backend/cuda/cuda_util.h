// Host-side helpers of the CUDA backend: error checks and Tensor geometry. Only inline code of
// core/ may be used here (pagoda_cuda is linked after pagoda_lib). C++17-clean: included by
// .cu files. Internal to src/backend/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/device_error.h"
#include "core/error.h"
#include "core/tensor.h"

namespace pagoda::cuda {

// Errors after which the CUDA context is unusable ("sticky": every later call fails the same way
// until the process ends) or the device is gone. Nothing can be rolled back from them.
inline bool is_fatal_cuda_error(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorDevicesUnavailable:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

// A sticky error is a FatalDeviceError (the server exits for a restart); any other CUDA error is
// an Error that fails one engine step and its requests.
[[noreturn]] inline void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line) {
  const std::string what = std::string("CUDA error: ") + call + " failed: " + cudaGetErrorString(err) + " (" +
                           file + ":" + std::to_string(line) + ")";
  if (is_fatal_cuda_error(err)) throw FatalDeviceError(what);
  throw Error(what);
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

// Lets `kernel` use `smem` bytes of dynamic shared memory per block: throws (naming `op`) when the
// device allows fewer than that, else raises the kernel's limit on the current device once (bit i of
// `opted_in`, one word per kernel kept by the caller, = device i done).
inline void opt_in_shared_memory(const void* kernel, size_t smem, size_t max_smem_optin,
                                 std::atomic<uint64_t>& opted_in, const char* op) {
  require(smem <= max_smem_optin, op,
          "needs " + std::to_string(smem) + " bytes of shared memory per block, the device allows " +
              std::to_string(max_smem_optin));
  int dev = 0;
  PAGODA_CUDA_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? (uint64_t{1} << dev) : 0;
  if (bit == 0 || !(opted_in.load(std::memory_order_relaxed) & bit)) {
    PAGODA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    opted_in.fetch_or(bit, std::memory_order_relaxed);
  }
}

}  // namespace pagoda::cuda

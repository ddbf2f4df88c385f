// y[T, N] = x[T, K] · w[N, K]^T through cuBLASLt, fp32 accumulation, with the matmul descriptors and
// the heuristic's algorithm cached per shape, strides, dtypes and pointer alignments.
// Internal to src/backend/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/tensor.h"

namespace pagoda::cuda {

class LtGemm {
 public:
  // workspace: device memory owned by the caller, kept for the lifetime of this object.
  LtGemm(void* workspace, size_t workspace_bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void linear(const Tensor& x, const Tensor& w, Tensor& out, cudaStream_t stream);
  // FP8 tensor cores with per-row scales (cuBLASLt's outer-vector scaling, CUDA 12.9+ on Hopper):
  // out[t, n] = scale_x[t] · scale_w[n] · Σ_k xq[t, k] · w[n, k], xq and w F8_E4M3 (contiguous, K a
  // multiple of 16), scale_x F32 [T], scale_w F32 [N], out BF16 or F32, fp32 accumulation. False
  // (nothing run) when cuBLASLt has no algorithm for it on this device.
  bool linear_fp8_rowwise(const Tensor& xq, const Tensor& scale_x, const Tensor& w, const Tensor& scale_w, Tensor& out,
                          cudaStream_t stream);

 private:
  struct Plan;
  // (T, N, K, ldw, ldx, ldy, type w, type x, type y, align w, align x, align y, outer-vector scales)
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, int, int, bool>;

  // The plan for `key`; null when cuBLASLt has no algorithm and `may_fail`, else it throws.
  const Plan* plan_for(const Key& key, bool may_fail = false);

  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_;
  size_t workspace_bytes_;
  std::mutex mu_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace pagoda::cuda

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

 private:
  struct Plan;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, int, int>;

  const Plan& plan_for(const Key& key);

  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_;
  size_t workspace_bytes_;
  std::mutex mu_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace pagoda::cuda

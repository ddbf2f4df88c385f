// Mixture-of-experts ops of the CUDA backend: thin wrappers over the launchers of moe_kernels.cu.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/moe_kernels.h"

namespace pagoda {

void CudaBackend::moe_route(const Tensor& logits, bool renormalize, Tensor& expert_ids, Tensor& weights) {
  activate();
  cuda::launch_moe_route(logits, renormalize, expert_ids, weights, stream_);
}

void CudaBackend::moe_permute(const Tensor& x, const Tensor& expert_ids, Tensor& expert_offsets,
                              Tensor& sorted_slots, Tensor& slot_rows, Tensor& x_sorted) {
  activate();
  cuda::launch_moe_permute(x, expert_ids, expert_offsets, sorted_slots, slot_rows, x_sorted, stream_);
}

void CudaBackend::moe_grouped_linear(const Tensor& x, const Tensor& w, const Tensor& expert_offsets, Tensor& out) {
  activate();
  // Decode-sized steps stream each routed expert's weights once (the grouped GEMV); prefill-sized
  // ones reuse weight tiles across an expert's many rows (the tiled grouped GEMM).
  if (moe_gemv_ && cuda::moe_gemv_fits(x, w, out))
    cuda::launch_moe_gemv(x, w, expert_offsets, out, stream_);
  else
    cuda::launch_moe_grouped_linear(x, w, expert_offsets, out, stream_);
}

void CudaBackend::moe_unpermute(const Tensor& y, const Tensor& weights, const Tensor& slot_rows,
                                const Tensor& shared, const Tensor& shared_gate, Tensor& out) {
  activate();
  cuda::launch_moe_unpermute(y, weights, slot_rows, shared, shared_gate, out, stream_);
}

}  // namespace pagoda

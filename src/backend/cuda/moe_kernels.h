// Launchers of the mixture-of-experts kernels (moe_kernels.cu); semantics in backend.h, "mixture of
// experts". Each checks its arguments, enqueues on `stream` and never synchronises; launch shapes
// depend only on tensor shapes (never on routed counts), so every one of them can be captured in
// a CUDA graph. Internal to src/backend/cuda; C++17-clean.
#pragma once

#include <cuda_runtime_api.h>

#include "backend/backend.h"

namespace pagoda::cuda {

// The most experts the routing, permutation and grouped-GEMM kernels take (their per-expert
// tables live in shared memory). Released checkpoints have at most 512.
constexpr int64_t kMoeMaxExperts = 1024;

// One warp per token: fp32 softmax over E, k rounds of a warp arg-max (lower id on ties, NaN
// last), renormalised in slot order.
void launch_moe_route(const Tensor& logits, bool renormalize, Tensor& expert_ids, Tensor& weights,
                      cudaStream_t stream);
// One block counts the slots per expert (shared-memory histogram), scans the counts into
// expert_offsets and places the slots stably (warps in turn, ranks within a warp by
// __match_any_sync); a second kernel gathers the rows of x.
void launch_moe_permute(const Tensor& x, const Tensor& expert_ids, Tensor& expert_offsets,
                        Tensor& sorted_slots, Tensor& slot_rows, Tensor& x_sorted, cudaStream_t stream);
// Our own tiled SIMT GEMM over (expert, row tile, column tile): the grid holds an upper bound of
// the row tiles (ceil(R / 32) + E), each block finds its expert and rows from expert_offsets on the
// device and blocks past the real tiles exit at once. fp32 accumulation; x, out in the activation
// dtype, w F32 or BF16.
void launch_moe_grouped_linear(const Tensor& x, const Tensor& w, const Tensor& expert_offsets, Tensor& out,
                               cudaStream_t stream);
// One block per token: the weighted sum of its k expert rows and the gated shared expert, in fp32.
void launch_moe_unpermute(const Tensor& y, const Tensor& weights, const Tensor& slot_rows, const Tensor& shared,
                          const Tensor& shared_gate, Tensor& out, cudaStream_t stream);

}  // namespace pagoda::cuda

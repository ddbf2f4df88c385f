// Launchers of the vision encoder's kernels (vision_kernels.cu); semantics in backend.h, "vision
// encoders". Each checks its arguments, enqueues on `stream` and never synchronises; grids depend on
// tensor shapes only (never on cu_seqlens' or positions' values), so they are captured in CUDA
// graphs. q/k/v/x/out in the activation dtype (F32, BF16 or F16), fp32 arithmetic. Internal to
// src/backend/cuda; C++17-clean.
#pragma once

#include <cuda_runtime_api.h>

#include "backend/backend.h"

namespace pagoda::cuda {

// One block per row: mean, then the variance of (x − mean) (two passes over the row, fp32), then
// the normalised row times w plus b. w, b [D] F32 / BF16 / F16 (b empty: none); out may alias x.
void launch_layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps, cudaStream_t stream);
// Elementwise, exact (erf) or tanh GELU; out may alias x.
void launch_gelu(const Tensor& x, Tensor& out, bool tanh_approx, cudaStream_t stream);
// In place on x [T, H, D] (dim 0 strided): a thread per (row, head, pair).
void launch_rope_axes(Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq,
                      cudaStream_t stream);
// Largest head dim segment_attention runs (its shared-memory tiles are sized for it).
constexpr int64_t kSegmentAttentionMaxHeadDim = 128;
// Bidirectional attention within segments, q/k/v [T, H, D] (dim 0 strided), D <= 128: a block per
// tile of query rows of one head streams the keys of those rows' segments through shared memory with
// an online softmax; each row finds its segment by a binary search in cu_seqlens on the device. BF16
// runs on tensor cores (64-row tiles, mma.sync; needs max_smem_optin, the device's opt-in shared
// memory per block), F32 and F16 on fp32 SIMT (32-row tiles).
void launch_segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, float scale,
                              Tensor& out, size_t max_smem_optin, cudaStream_t stream);

}  // namespace pagoda::cuda

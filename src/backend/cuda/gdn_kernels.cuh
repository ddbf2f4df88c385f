// Launchers of the Gated DeltaNet kernels (docs/models.md): the causal depthwise conv + SiLU, the gated
// delta rule (a recurrent kernel for decodes, a chunked kernel for prefill chunks) and the gated
// RMSNorm. Host declarations only (C++17-clean), so CudaBackend's .cpp can include this file; each
// launcher checks its arguments, enqueues on `stream` and never synchronises. Internal to
// src/backend/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "backend/backend.h"

namespace pagoda::cuda {

// Limits of the CUDA kernels (pagoda::Error naming them beyond).
constexpr int kGdnMaxConvKernel = 8;  // causal_conv1d_silu: kernel size K
constexpr int kGdnMaxKeyDim = 128;    // gated_delta_rule: dk (dv is tiled: any multiple of 4)
// Sequences with at most this many new tokens run the recurrent kernel, longer ones the chunked one.
constexpr int kGdnRecurrentMaxLen = 8;

void launch_causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state, const StepMeta& meta,
                               Tensor& out, cudaStream_t stream);

// `split_scratch` (null: none) of at least gdn_chunk_split_scratch_bytes bytes lets bf16 prefill chunks
// take the split form (gdn_chunk_split.cu); without it they run the one-pass chunked kernel.
void launch_gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a,
                             const Tensor& A_log, const Tensor& dt_bias, Tensor& state, const StepMeta& meta,
                             Tensor& out, int num_sms, size_t max_smem_optin, void* split_scratch,
                             size_t split_scratch_bytes, cudaStream_t stream);

// The split chunked form: a parallel pass over every window of 64 rows and value head (the chunk's
// (I + A)⁻¹ applied to β e^γ K̂ and β V, the decayed Q̃ K̂ᵀ) into this scratch, then the sequential
// state recurrence on tensor cores. Bytes for a step of `rows` rows; used for bf16 activations unless
// PAGODA_GDN_SPLIT=0.
size_t gdn_chunk_split_scratch_bytes(int64_t rows, int64_t hv, int64_t dv);
bool gdn_chunk_split_enabled();

void launch_gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out,
                           cudaStream_t stream);

}  // namespace pagoda::cuda

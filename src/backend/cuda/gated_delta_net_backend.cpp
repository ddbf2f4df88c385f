// Gated DeltaNet ops of the CUDA backend (docs/models.md): thin wrappers over the launchers of
// gdn_conv_norm.cu and gdn_delta_rule.cu.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gdn_kernels.cuh"

namespace pagoda {

void CudaBackend::causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& conv_state, const StepMeta& meta,
                                     Tensor& out) {
  activate();
  cuda::launch_causal_conv1d_silu(x, w, conv_state, meta, out, stream_);
}

void CudaBackend::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b,
                                   const Tensor& a, const Tensor& A_log, const Tensor& dt_bias, Tensor& state,
                                   const StepMeta& meta, Tensor& out) {
  activate();
  // Prefill chunks in bf16 take the split form, whose scratch grows here (never inside a capture: the
  // memory plan's profiling pass runs the largest prefill step first).
  void* ws = nullptr;
  size_t ws_bytes = 0;
  if (q.dtype == DType::BF16 && meta.max_query_len > cuda::kGdnRecurrentMaxLen && cuda::gdn_chunk_split_enabled() &&
      q.ndim == 3 && v.ndim == 3) {
    ws_bytes = cuda::gdn_chunk_split_scratch_bytes(q.shape[0], v.shape[1], v.shape[2]);
    ws = scratch(gdn_split_scratch_, ws_bytes);
  }
  cuda::launch_gated_delta_rule(q, k, v, b, a, A_log, dt_bias, state, meta, out, num_sms_, max_smem_optin_, ws,
                                ws_bytes, stream_);
}

void CudaBackend::gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) {
  activate();
  cuda::launch_gated_rms_norm(x, z, w, eps, out, stream_);
}

}  // namespace pagoda

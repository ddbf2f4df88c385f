// Gated DeltaNet ops of the CUDA backend (docs/models.md): thin wrappers over the launchers of
// gdn_conv_norm.cu and gdn_delta_rule.cu.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_util.h"
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
  // Prefill chunks in bf16 take the split form. Its scratch is reserved at load for the model's
  // largest step (reserve_gated_delta_rule, counted by the memory plan); a caller that did not reserve
  // (a test, a kernel bench) grows it here, never inside a capture, where the one-pass kernel runs.
  if (q.dtype == DType::BF16 && meta.max_query_len > cuda::kGdnRecurrentMaxLen && cuda::gdn_chunk_split_enabled() &&
      q.ndim == 3 && v.ndim == 3) {
    const size_t need = cuda::gdn_chunk_split_scratch_bytes(q.shape[0], v.shape[1], v.shape[2]);
    if (need > gdn_split_scratch_.bytes) {  // only then ask the driver whether a capture is running
      cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
      PAGODA_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capturing));
      if (capturing == cudaStreamCaptureStatusNone) scratch(gdn_split_scratch_, need);
    }
  }
  cuda::launch_gated_delta_rule(q, k, v, b, a, A_log, dt_bias, state, meta, out, num_sms_, max_smem_optin_,
                                gdn_split_scratch_.ptr, gdn_split_scratch_.bytes, stream_);
}

size_t CudaBackend::reserve_gated_delta_rule(int64_t max_tokens, int64_t hv, int64_t dv, DType act) {
  if (act != DType::BF16 || !cuda::gdn_chunk_split_enabled() || max_tokens <= 0) return 0;
  activate();
  const size_t bytes = cuda::gdn_chunk_split_scratch_bytes(max_tokens, hv, dv);
  scratch(gdn_split_scratch_, bytes);
  return bytes;
}

void CudaBackend::gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) {
  activate();
  cuda::launch_gated_rms_norm(x, z, w, eps, out, stream_);
}

}  // namespace pagoda

// The vision encoder's primitives on CUDA (backend.h, "vision encoders"): thin wrappers over
// vision_kernels.cu's launchers.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/vision_kernels.h"

namespace pagoda {

void CudaBackend::layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps) {
  activate();
  cuda::launch_layer_norm(x, w, b, out, eps, stream_);
}

void CudaBackend::gelu(const Tensor& x, Tensor& out, bool tanh_approx) {
  activate();
  cuda::launch_gelu(x, out, tanh_approx, stream_);
}

void CudaBackend::rope_axes(Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq) {
  activate();
  cuda::launch_rope_axes(x, positions, axes, inv_freq, stream_);
}

void CudaBackend::segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                    float scale, Tensor& out) {
  activate();
  cuda::launch_segment_attention(q, k, v, cu_seqlens, scale, out, max_smem_optin_, stream_);
}

}  // namespace pagoda

// The LoRA op of the CUDA backend: a thin wrapper over lora_kernels.cu's launcher.
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/lora_kernels.h"

namespace pagoda {

void CudaBackend::lora_expand(const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out) {
  activate();
  cuda::launch_lora_expand(low, b, slots, out, stream_);
}

}  // namespace pagoda

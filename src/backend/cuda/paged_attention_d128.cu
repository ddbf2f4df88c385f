// Instantiations of the paged-attention kernel for head_dim 128 (one file per head dim so that they
// compile in parallel).
#include "backend/cuda/paged_attention_launch.cuh"

namespace pagoda::cuda::attn {
template void launch_attention_kernel<128>(const Args&, bool, DType, dim3, size_t, cudaStream_t);
}  // namespace pagoda::cuda::attn

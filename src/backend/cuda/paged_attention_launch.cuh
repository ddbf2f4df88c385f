// The host side of one paged-attention instantiation: shared-memory opt-in and the launch.
// Included only by paged_attention_d*.cu. Internal to src/backend/cuda.
#pragma once

#include <atomic>
#include <string>

#include "backend/cuda/paged_attention.cuh"

namespace pagoda::cuda::attn {

template <int D, bool kDecode, typename KV>
void launch_one(const Args& a, dim3 grid, size_t max_smem_optin, cudaStream_t stream) {
  using C = CfgOf<D, kDecode, KV>;
  auto* kernel = &paged_attention_kernel<D, kDecode, KV>;
  constexpr size_t smem = C::kSmemBytes;
  static std::atomic<uint64_t> opted_in{0};
  opt_in_shared_memory(reinterpret_cast<const void*>(kernel), smem, max_smem_optin, opted_in, "paged_attention");
  kernel<<<grid, C::kThreads, smem, stream>>>(a);
  PAGODA_CUDA_CHECK_LAUNCH();
}

template <int D>
void launch_attention_kernel(const Args& a, bool decode, DType kv_dtype, dim3 grid, size_t max_smem_optin,
                             cudaStream_t stream) {
  switch (kv_dtype) {
    case DType::BF16:
      decode ? launch_one<D, true, bf16>(a, grid, max_smem_optin, stream)
             : launch_one<D, false, bf16>(a, grid, max_smem_optin, stream);
      return;
    case DType::F16:
      decode ? launch_one<D, true, __half>(a, grid, max_smem_optin, stream)
             : launch_one<D, false, __half>(a, grid, max_smem_optin, stream);
      return;
    case DType::F32:
      decode ? launch_one<D, true, float>(a, grid, max_smem_optin, stream)
             : launch_one<D, false, float>(a, grid, max_smem_optin, stream);
      return;
    case DType::F8_E4M3:
      decode ? launch_one<D, true, fp8_e4m3>(a, grid, max_smem_optin, stream)
             : launch_one<D, false, fp8_e4m3>(a, grid, max_smem_optin, stream);
      return;
    default:
      throw Error(std::string("cuda paged_attention: unsupported KV cache dtype ") + dtype_name(kv_dtype));
  }
}

}  // namespace pagoda::cuda::attn

// Pieces the skinny GEMMs share (gemv.cu, gemv_fp8.cu): the streaming 16-byte weight load, bf16
// widening, and the store in the output's dtype. Internal to src/backend/cuda.
#pragma once

#include "backend/cuda/device_util.cuh"

namespace pagoda::cuda::gemv_util {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

// 16 bytes of weights read once: past L1, not kept there.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Eight bf16 values (one 16-byte vector) to fp32, exactly.
__device__ __forceinline__ void unpack_bf16x8(const uint4& u, float* f) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

template <typename OutT>
__device__ __forceinline__ void store_out(OutT* p, float v);
template <>
__device__ __forceinline__ void store_out<float>(float* p, float v) { *p = v; }
template <>
__device__ __forceinline__ void store_out<bf16>(bf16* p, float v) { *p = __float2bfloat16_rn(v); }

}  // namespace pagoda::cuda::gemv_util

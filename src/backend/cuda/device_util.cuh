// Device-side helpers shared by the kernels: element conversions, reductions, dtype dispatch.
// Internal to src/backend/cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/cuda_util.h"

namespace pagoda::cuda {

using bf16 = __nv_bfloat16;

// One e4m3fn byte of the FP8 KV cache (--kv-cache-dtype fp8, scale 1): a type of its own so that
// the cache kernels' templates tell it from the float dtypes.
struct fp8_e4m3 {
  uint8_t bits;
};

// Two e4m3fn bytes (bits 0-7 and 16-23 of `w`) to fp32, exactly, as core/dtype.h's
// fp8_e4m3_to_f32 reads them (0x7f / 0xff give ±480 there and here): the 7 magnitude bits placed
// at fp16's exponent/mantissa boundary read as 2^-8 times the value, subnormals included, so the
// widening never forms an fp32 denormal and one multiply by 256 fixes the scale.
__device__ __forceinline__ float2 e4m3_pair_to_float2(uint32_t w) {
  const uint32_t h = ((w & 0x00800080u) << 8) | ((w & 0x007f007fu) << 7);
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
  return make_float2(f.x * 256.0f, f.y * 256.0f);
}

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(fp8_e4m3 x) {
  const uint32_t b = x.bits;
  return __half2float(__ushort_as_half(static_cast<unsigned short>(((b & 0x80u) << 8) | ((b & 0x7fu) << 7)))) * 256.0f;
}

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
// core/dtype.h's f32_to_fp8_e4m3: round to nearest even, saturating at ±448 (infinities too), NaN
// to 0x7f. cvt.rn.satfinite on sm_89+, cuda_fp8.h's exact emulation of it before.
template <>
__device__ __forceinline__ fp8_e4m3 from_f32<fp8_e4m3>(float x) {
  return fp8_e4m3{isnan(x) ? static_cast<uint8_t>(0x7f)
                           : static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3))};
}

// One warp's tensor-core product c[16x8] += a[16x16] · b[16x8], bf16 in, fp32 accumulation (sm_80+).
// Fragments as PTX's m16n8k16 defines them (g = lane / 4, i = lane % 4): a = {(g, 2i..2i+1),
// (g+8, 2i..), (g, 2i+8..), (g+8, 2i+8..)}, b = {(2i..2i+1, g), (2i+8.., g)}, c = {(g, 2i), (g, 2i+1),
// (g+8, 2i), (g+8, 2i+1)}; the low half of a register is the lower column / row.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Asynchronous copies global → shared (sm_80+): `valid` false fills with zeros and reads nothing.
// A thread's copies become visible to it after cp_async_wait<N> (at most N newest groups pending).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;  // 0: fill with zeros, read nothing
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async8(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int n = valid ? 8 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { cp_async_wait<0>(); }

// Rounds x to T's precision and back: the value a T-typed intermediate would hold.
template <typename T>
__device__ __forceinline__ float round_to(float x) { return to_f32(from_f32<T>(x)); }

// A weight of run-time dtype (norm weights may be F32, BF16 or F16).
__device__ __forceinline__ float load_weight(const void* w, int dtype, int64_t i) {
  switch (dtype) {
    case static_cast<int>(DType::BF16): return __bfloat162float(static_cast<const bf16*>(w)[i]);
    case static_cast<int>(DType::F16): return __half2float(static_cast<const __half*>(w)[i]);
    default: return static_cast<const float*>(w)[i];
  }
}

// The sequence a step's row belongs to: the last s < nseq with cu_seqlens[s] <= row (so empty
// sequences before it are skipped). row < cu_seqlens[nseq].
template <typename Row>
__device__ __forceinline__ int seq_of_row(const int32_t* cu_seqlens, int nseq, Row row) {
  int lo = 0, hi = nseq - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (cu_seqlens[mid] <= row) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int nwarps = static_cast<int>(blockDim.x >> 5);
  float s = lane < nwarps ? partial[lane] : 0.0f;
  return warp_sum(s);
}

}  // namespace pagoda::cuda

// Runs the statement list with `T` bound to the C++ type of a float DType.
#define PAGODA_DISPATCH_FLOAT(dtype, T, op, ...)                                                   \
  switch (dtype) {                                                                                 \
    case ::pagoda::DType::F32: {                                                                   \
      using T = float;                                                                             \
      __VA_ARGS__;                                                                                 \
      break;                                                                                       \
    }                                                                                              \
    case ::pagoda::DType::BF16: {                                                                  \
      using T = ::pagoda::cuda::bf16;                                                              \
      __VA_ARGS__;                                                                                 \
      break;                                                                                       \
    }                                                                                              \
    case ::pagoda::DType::F16: {                                                                   \
      using T = __half;                                                                            \
      __VA_ARGS__;                                                                                 \
      break;                                                                                       \
    }                                                                                              \
    default:                                                                                       \
      throw ::pagoda::Error(std::string("cuda ") + op + ": unsupported dtype " +                   \
                            ::pagoda::dtype_name(dtype));                                     \
  }

// As PAGODA_DISPATCH_FLOAT for a KV cache's dtype: the float ones and FP8 (fp8_e4m3).
#define PAGODA_DISPATCH_KV_CACHE(dtype, T, op, ...)                                                \
  if ((dtype) == ::pagoda::DType::F8_E4M3) {                                                       \
    using T = ::pagoda::cuda::fp8_e4m3;                                                            \
    __VA_ARGS__;                                                                                   \
  } else {                                                                                         \
    PAGODA_DISPATCH_FLOAT(dtype, T, op, __VA_ARGS__)                                               \
  }

// FP8 weights on the GPU (Backend::linear_fp8): out[T, N] = x[T, K] · (w ⊙ scale)[N, K]^T, w e4m3fn
// with 2-D block scales, x bf16, fp32 accumulation.
// - Decode (T ≤ kGemvMaxTokens): a skinny GEMM that streams each weight byte once (half of bf16's
//   bytes: decode is bandwidth-bound), laid out as gemv.cu's kernel — a block of 128 threads owns R
//   output rows and its threads split K in 16-byte vectors (16 weights, one scale block: block_k is
//   a multiple of 16). Each vector's dot product is scaled once by its block's scale.
// - Otherwise the matrix is dequantized into a bf16 scratch (each element w · scale rounded to bf16)
//   and multiplied by cuBLASLt: correct for every shape; FP8 tensor cores for prefill are the next
//   step (docs/architecture.md, "FP8 weights").
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gemv_util.cuh"
#include "backend/cuda/kernels.h"

namespace pagoda::cuda {
namespace {

using gemv_util::kThreads;
using gemv_util::kWarps;

__device__ __forceinline__ uint4 load_stream_u8(const uint8_t* p) { return gemv_util::load_stream(p); }

// Four e4m3fn bytes of `w` to fp32, exactly (e4m3 ⊂ fp16): the hardware's paired conversion to
// fp16 on sm_89+ (one instruction for two), then fp16 → fp32.
__device__ __forceinline__ void fp8x4_to_f32(uint32_t w, float* f) {
  const float2 lo = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3)));
  const float2 hi = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3)));
  f[0] = lo.x;
  f[1] = lo.y;
  f[2] = hi.x;
  f[3] = hi.y;
}

__device__ __forceinline__ void bf16x8_to_f32(const uint4& u, float* f) { gemv_util::unpack_bf16x8(u, f); }

template <typename OutT>
__device__ __forceinline__ void store(OutT* p, float v) { gemv_util::store_out(p, v); }

// One 16-byte vector v of each of R rows (weights wv, row scales sr, its scale column sb) against
// the T rows of x: acc[r][t] += scale · Σ_e w[r][e] · x[t][v·16 + e].
template <int T, int R>
__device__ __forceinline__ void fp8_vector_dot(const uint4 (&wv)[R], const bf16* __restrict__ x, int64_t ldx, int v,
                                               const float* const (&sr)[R], int sb, float (&acc)[R][T]) {
  float xf[T][16];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    const bf16* xp = x + t * ldx + static_cast<int64_t>(v) * 16;
    bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(xp)), xf[t]);
    bf16x8_to_f32(__ldg(reinterpret_cast<const uint4*>(xp + 8)), xf[t] + 8);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float wf[16];
    fp8x4_to_f32(wv[r].x, wf);
    fp8x4_to_f32(wv[r].y, wf + 4);
    fp8x4_to_f32(wv[r].z, wf + 8);
    fp8x4_to_f32(wv[r].w, wf + 12);
    const float s = __ldg(sr[r] + sb);
#pragma unroll
    for (int t = 0; t < T; ++t) {
      float d = 0.0f;
#pragma unroll
      for (int e = 0; e < 16; ++e) d = fmaf(wf[e], xf[t][e], d);
      acc[r][t] = fmaf(d, s, acc[r][t]);
    }
  }
}

// kv = K / 16 vectors per row; sc = scale columns; a vector v of row n has scale
// scale[(n / bn) * sc + v * 16 / bk]. U vectors per thread and row are loaded before any is used,
// so that enough bytes are in flight to reach the memory bandwidth.
template <int T, int R, int U, typename OutT>
__global__ void __launch_bounds__(kThreads)
    gemv_fp8_kernel(const bf16* __restrict__ x, int64_t ldx, const uint8_t* __restrict__ w, int64_t ldw,
                    const float* __restrict__ scale, int sc, int bn, int bk, OutT* __restrict__ out, int64_t ldo,
                    int n, int kv) {
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int row0 = static_cast<int>(blockIdx.x) * R;
  const uint8_t* wr[R];
  const float* sr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = min(row0 + r, n - 1);
    wr[r] = w + static_cast<int64_t>(row) * ldw;
    sr[r] = scale + static_cast<int64_t>(row / bn) * sc;
  }
  float acc[R][T];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;

  for (int v0 = tid; v0 < kv; v0 += U * kThreads) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = v0 + u * kThreads;
#pragma unroll
      for (int r = 0; r < R; ++r)
        wv[u][r] = v < kv ? load_stream_u8(wr[r] + static_cast<int64_t>(v) * 16) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = v0 + u * kThreads;
      if (v >= kv) break;
      fp8_vector_dot<T, R>(wv[u], x, ldx, v, sr, v * 16 / bk, acc);
    }
  }

  __shared__ float partial[kWarps][R * T];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) {
      float v = acc[r][t];
#pragma unroll
      for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0) partial[warp][r * T + t] = v;
    }
  __syncthreads();
  if (tid < R * T) {
    const int r = tid / T, t = tid % T, row = row0 + r;
    if (row < n) {
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kWarps; ++i) sum += partial[i][tid];
      store(out + t * ldo + row, sum);
    }
  }
}

// One warp per R rows (four warps a block, no block-wide reduction): for one or two tokens, where
// the 128-thread layout above leaves each thread two vectors of a 4096-wide row and its reduction
// dominates (8B qkv at T = 1: 59% of the copy bandwidth).
template <int T, int R, int U, typename OutT>
__global__ void __launch_bounds__(kThreads)
    gemv_fp8_warp_kernel(const bf16* __restrict__ x, int64_t ldx, const uint8_t* __restrict__ w, int64_t ldw,
                         const float* __restrict__ scale, int sc, int bn, int bk, OutT* __restrict__ out, int64_t ldo,
                         int n, int kv) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int row0 = (static_cast<int>(blockIdx.x) * kWarps + warp) * R;
  if (row0 >= n) return;
  const uint8_t* wr[R];
  const float* sr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = min(row0 + r, n - 1);
    wr[r] = w + static_cast<int64_t>(row) * ldw;
    sr[r] = scale + static_cast<int64_t>(row / bn) * sc;
  }
  float acc[R][T];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;
  for (int v0 = lane; v0 < kv; v0 += U * 32) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = v0 + u * 32;
#pragma unroll
      for (int r = 0; r < R; ++r)
        wv[u][r] = v < kv ? load_stream_u8(wr[r] + static_cast<int64_t>(v) * 16) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = v0 + u * 32;
      if (v >= kv) break;
      fp8_vector_dot<T, R>(wv[u], x, ldx, v, sr, v * 16 / bk, acc);
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) {
      float v = acc[r][t];
#pragma unroll
      for (int off = 16; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0 && row0 + r < n) store(out + t * ldo + row0 + r, v);
    }
}

bool use_warp_kernel() {
  static const bool on = [] {
    const char* env = std::getenv("PAGODA_FP8_GEMV_WARP");
    return !(env && *env && std::atoi(env) == 0);
  }();
  return on;
}

template <int T, typename OutT>
void launch_t(const bf16* x, int64_t ldx, const uint8_t* w, int64_t ldw, const float* scale, int sc, int bn, int bk,
              OutT* out, int64_t ldo, int n, int kv, int num_sms, cudaStream_t stream) {
  // Four rows per block where that leaves several blocks per SM, two for the narrow matrices; four
  // vectors a thread in flight for one or two tokens, two for more (registers).
  constexpr int U = T <= 2 ? 4 : 2;
  if constexpr (T <= 2) {
    if (use_warp_kernel()) {
      constexpr int R = 2, rows_per_block = kWarps * R;
      gemv_fp8_warp_kernel<T, R, U, OutT><<<(n + rows_per_block - 1) / rows_per_block, kThreads, 0, stream>>>(
          x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv);
      return;
    }
  }
  if (n >= 4 * 8 * num_sms && T <= 4)
    gemv_fp8_kernel<T, 4, U, OutT><<<(n + 3) / 4, kThreads, 0, stream>>>(x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv);
  else
    gemv_fp8_kernel<T, 2, U, OutT><<<(n + 1) / 2, kThreads, 0, stream>>>(x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv);
}

template <typename OutT>
void launch_out(int t, const bf16* x, int64_t ldx, const uint8_t* w, int64_t ldw, const float* scale, int sc, int bn,
                int bk, OutT* out, int64_t ldo, int n, int kv, int num_sms, cudaStream_t stream) {
  switch (t) {
    case 1: launch_t<1>(x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv, num_sms, stream); break;
    case 2: launch_t<2>(x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv, num_sms, stream); break;
    case 3: launch_t<3>(x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv, num_sms, stream); break;
    case 4: launch_t<4>(x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv, num_sms, stream); break;
    case 5: launch_t<5>(x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv, num_sms, stream); break;
    case 6: launch_t<6>(x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv, num_sms, stream); break;
    case 7: launch_t<7>(x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv, num_sms, stream); break;
    default: launch_t<8>(x, ldx, w, ldw, scale, sc, bn, bk, out, ldo, n, kv, num_sms, stream); break;
  }
}

// out[n, k] = fp8(w[n, k]) · scale[n / bn, k / bk], rounded to OutT (memory-bound: one byte in,
// two or four out). A block walks rows; a thread takes 16 columns of a row (one 16-byte load).
template <typename OutT>
__global__ void __launch_bounds__(256) dequantize_fp8_kernel(const uint8_t* __restrict__ w, const float* __restrict__ scale,
                                                          int sc, int bn, int bk, OutT* __restrict__ out, int n, int k) {
  const bool vec = (k & 15) == 0;
  for (int row = blockIdx.x; row < n; row += gridDim.x) {
    const uint8_t* wr = w + static_cast<int64_t>(row) * k;
    const float* sr = scale + static_cast<int64_t>(row / bn) * sc;
    OutT* orow = out + static_cast<int64_t>(row) * k;
    for (int c0 = threadIdx.x * 16; c0 < k; c0 += blockDim.x * 16) {
      float f[16];
      if (vec) {
        const uint4 q = __ldg(reinterpret_cast<const uint4*>(wr + c0));
        fp8x4_to_f32(q.x, f);
        fp8x4_to_f32(q.y, f + 4);
        fp8x4_to_f32(q.z, f + 8);
        fp8x4_to_f32(q.w, f + 12);
      }
      if (vec) {
        // 16 results, stored as whole 16-byte vectors (coalesced across the warp).
        OutT res[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) store(res + j, f[j] * sr[(c0 + j) / bk]);
        constexpr int kVecs = 16 * static_cast<int>(sizeof(OutT)) / 16;
#pragma unroll
        for (int i = 0; i < kVecs; ++i)
          reinterpret_cast<uint4*>(orow + c0)[i] = reinterpret_cast<const uint4*>(res)[i];
        continue;
      }
      for (int j = 0; j < 16 && c0 + j < k; ++j) {
        const int c = c0 + j;
        f[j] = __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(wr[c]), __NV_E4M3)));
        store(orow + c, f[j] * sr[c / bk]);
      }
    }
  }
}

// One row of x per block: s = max |x| / 448 (1 for a zero row), q = e4m3(x / s) saturated.
constexpr int kQuantThreads = 256;
__global__ void __launch_bounds__(kQuantThreads)
    quantize_rows_fp8_kernel(const bf16* __restrict__ x, int64_t ldx, int k, uint8_t* __restrict__ q, float* __restrict__ s) {
  const bf16* row = x + blockIdx.x * ldx;
  float amax = 0.0f;
  for (int i = threadIdx.x; i < k; i += kQuantThreads) amax = fmaxf(amax, fabsf(__bfloat162float(row[i])));
  __shared__ float warp_max[kQuantThreads / 32];
#pragma unroll
  for (int off = 16; off >= 1; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = amax;
  __syncthreads();
  amax = warp_max[0];
#pragma unroll
  for (int i = 1; i < kQuantThreads / 32; ++i) amax = fmaxf(amax, warp_max[i]);
  const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
  const float inv = 1.0f / scale;
  uint8_t* qrow = q + static_cast<int64_t>(blockIdx.x) * k;
  for (int i = threadIdx.x; i < k; i += kQuantThreads)
    qrow[i] = __nv_cvt_float_to_fp8(__bfloat162float(row[i]) * inv, __NV_SATFINITE, __NV_E4M3);
  if (threadIdx.x == 0) s[blockIdx.x] = scale;
}

}  // namespace

void launch_quantize_rows_fp8(const Tensor& x, Tensor& q, Tensor& scale, cudaStream_t stream) {
  require(x.dtype == DType::BF16 && x.ndim == 2 && q.dtype == DType::F8_E4M3 && q.is_contiguous() &&
              q.shape[0] == x.shape[0] && q.shape[1] == x.shape[1] && scale.dtype == DType::F32 &&
              scale.numel() == x.shape[0],
          "linear_fp8 (quantize x)", "unsupported operands x " + shape_str(x) + ", q " + shape_str(q));
  if (x.shape[0] == 0) return;
  quantize_rows_fp8_kernel<<<static_cast<unsigned>(x.shape[0]), kQuantThreads, 0, stream>>>(
      static_cast<const bf16*>(x.data), x.stride0(), static_cast<int>(x.shape[1]), static_cast<uint8_t*>(q.data),
      static_cast<float*>(scale.data));
  PAGODA_CUDA_CHECK_LAUNCH();
}

bool gemv_fp8_fits(const Tensor& x, const Tensor& w, const Tensor& out, int64_t block_k) {
  if (x.ndim != 2 || w.ndim != 2 || out.ndim != 2) return false;
  const int64_t t = x.shape[0], k = x.shape[1], n = w.shape[0];
  if (t < 1 || t > kGemvMaxTokens || k < 16 || k % 16 != 0 || n < 1 || block_k % 16 != 0) return false;
  if (x.dtype != DType::BF16 || w.dtype != DType::F8_E4M3) return false;
  if (out.dtype != DType::BF16 && out.dtype != DType::F32) return false;
  if (n > (int64_t{1} << 30) || k > (int64_t{1} << 30)) return false;
  return x.stride0() % 8 == 0 && w.is_contiguous() && aligned16(x.data) && aligned16(w.data);
}

void launch_gemv_fp8(const Tensor& x, const Tensor& w, const Tensor& scale, int64_t block_n, int64_t block_k,
                     Tensor& out, int num_sms, cudaStream_t stream) {
  require(gemv_fp8_fits(x, w, out, block_k), "linear_fp8 (gemv)",
          "unsupported operands x " + shape_str(x) + ", w " + shape_str(w) + ", out " + shape_str(out));
  const int t = static_cast<int>(x.shape[0]), n = static_cast<int>(w.shape[0]), kv = static_cast<int>(x.shape[1] / 16);
  const int sc = static_cast<int>(scale.shape[1]), bn = static_cast<int>(block_n), bk = static_cast<int>(block_k);
  const auto* xp = static_cast<const bf16*>(x.data);
  const auto* wp = static_cast<const uint8_t*>(w.data);
  const auto* sp = static_cast<const float*>(scale.data);
  if (out.dtype == DType::F32)
    launch_out(t, xp, x.stride0(), wp, w.shape[1], sp, sc, bn, bk, static_cast<float*>(out.data), out.stride0(), n, kv,
               num_sms, stream);
  else
    launch_out(t, xp, x.stride0(), wp, w.shape[1], sp, sc, bn, bk, static_cast<bf16*>(out.data), out.stride0(), n, kv,
               num_sms, stream);
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_dequantize_fp8(const Tensor& w, const Tensor& scale, int64_t block_n, int64_t block_k, Tensor& out,
                           cudaStream_t stream) {
  require(w.dtype == DType::F8_E4M3 && w.ndim == 2 && w.is_contiguous() &&
              (out.dtype == DType::BF16 || out.dtype == DType::F32) && out.is_contiguous() &&
              out.numel() == w.numel(),
          "linear_fp8 (dequantize)", "unsupported operands w " + shape_str(w) + ", out " + shape_str(out));
  const int n = static_cast<int>(w.shape[0]), k = static_cast<int>(w.shape[1]);
  if (n == 0 || k == 0) return;
  const int blocks = std::min(n, 65535);
  const auto* wp = static_cast<const uint8_t*>(w.data);
  const auto* sp = static_cast<const float*>(scale.data);
  const int sc = static_cast<int>(scale.shape[1]), bn = static_cast<int>(block_n), bk = static_cast<int>(block_k);
  if (out.dtype == DType::F32)
    dequantize_fp8_kernel<<<blocks, 256, 0, stream>>>(wp, sp, sc, bn, bk, static_cast<float*>(out.data), n, k);
  else
    dequantize_fp8_kernel<<<blocks, 256, 0, stream>>>(wp, sp, sc, bn, bk, static_cast<bf16*>(out.data), n, k);
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda

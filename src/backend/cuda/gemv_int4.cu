// 4-bit weights on the GPU (Backend::linear_int4: AWQ, GPTQ, compressed-tensors W4A16 repacked at
// load): out[T, N] = x[T, K] · ((q − z) ⊙ scale)[N, K]^T, x bf16, fp32 accumulation.
// - Decode and small batches (T ≤ kInt4MmaMaxTokens, group a multiple of 128): a skinny GEMM on the
//   tensor cores. Each packed byte is read once; a warp owns 16 output rows and the eight warps of
//   a block split K between them in 128-column chunks (one group's worth). Two nibbles become a bf16
//   pair in one logic op (0x4300 | q is 128 + q), the pair minus (128 + z) is q − z exactly, and
//   mma.m16n8k16 multiplies it by x with fp32 accumulation; each chunk's sums are scaled once. The
//   k order inside a chunk is permuted (A and B alike) so that a lane's 16-byte vector feeds it
//   whole. About 1.5 instructions a weight where the scalar form below needs five — yet at one
//   token it is no faster (43% of the copy bandwidth for 8B gate_up on an H200): not issue-bound;
//   its gain is from 8 to 32 tokens (docs/benchmarks.md).
// - Other groups (32, 64), T ≤ kGemvMaxTokens: the scalar skinny GEMM. A warp owns R output rows,
//   its lanes split K in 16-byte vectors (32 weights, within one group: group is a multiple of 32).
//   A nibble becomes a float exactly by the exponent trick (0x4B000000 | q is 2^23 + q), the zero
//   point is subtracted in the same instruction, each vector's dot product is scaled once.
// - Otherwise the matrix is dequantized into a scratch of the activation dtype ((q − z) · scale
//   rounded once) and multiplied by cuBLASLt: correct for every shape; a Marlin-class W4A16 GEMM
//   for prefill is the next step (docs/quantization.md).
#include <algorithm>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gemv_util.cuh"
#include "backend/cuda/kernels.h"

namespace pagoda::cuda {
namespace {

using gemv_util::kThreads;
using gemv_util::kWarps;

constexpr float kMagic = 8388608.0f;  // 2^23: 0x4B000000 as a float

template <typename OutT>
__device__ __forceinline__ void store(OutT* p, float v) { gemv_util::store_out(p, v); }

__device__ __forceinline__ float nibble(uint32_t word, int i, float zero_magic) {
  return __uint_as_float(0x4B000000u | ((word >> (4 * i)) & 15u)) - zero_magic;
}

// kv = K / 32 vectors per row; vector v of row n lies in group v * 32 / group.
template <int T, int R, int U, typename OutT>
__global__ void __launch_bounds__(kThreads)
    gemv_int4_kernel(const bf16* __restrict__ x, int64_t ldx, const uint32_t* __restrict__ w, int64_t ldw,
                     const float* __restrict__ scale, const uint32_t* __restrict__ zeros, int groups, int zero_words,
                     int vectors_per_group, OutT* __restrict__ out, int64_t ldo, int n, int kv) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int row0 = (static_cast<int>(blockIdx.x) * kWarps + warp) * R;
  if (row0 >= n) return;
  const uint32_t* wr[R];
  const float* sr[R];
  const uint32_t* zr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = min(row0 + r, n - 1);
    wr[r] = w + static_cast<int64_t>(row) * ldw;
    sr[r] = scale + static_cast<int64_t>(row) * groups;
    zr[r] = zeros + static_cast<int64_t>(row) * zero_words;
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
        wv[u][r] = v < kv ? gemv_util::load_stream(wr[r] + static_cast<int64_t>(v) * 4) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = v0 + u * 32;
      if (v >= kv) break;
      const int g = v / vectors_per_group;
      float s[R], zm[R], d[R][T];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        s[r] = __ldg(sr[r] + g);
        zm[r] = kMagic + static_cast<float>((__ldg(zr[r] + g / 8) >> (4 * (g % 8))) & 15u);
#pragma unroll
        for (int t = 0; t < T; ++t) d[r][t] = 0.0f;
      }
      // A word (eight weights) at a time, so that only eight of x's values per token are live.
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float xf[T][8];
#pragma unroll
        for (int t = 0; t < T; ++t)
          gemv_util::unpack_bf16x8(__ldg(reinterpret_cast<const uint4*>(x + t * ldx + static_cast<int64_t>(v) * 32) + j),
                                   xf[t]);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint32_t word = j == 0 ? wv[u][r].x : j == 1 ? wv[u][r].y : j == 2 ? wv[u][r].z : wv[u][r].w;
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            const float q = nibble(word, i, zm[r]);
#pragma unroll
            for (int t = 0; t < T; ++t) d[r][t] = fmaf(q, xf[t][i], d[r][t]);
          }
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < T; ++t) acc[r][t] = fmaf(d[r][t], s[r], acc[r][t]);
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

constexpr int kMmaWarps = 8;  // warps of a block, splitting K
constexpr int kChunk = 128;   // columns of K a lane-quad takes at once: 4 lanes x 32 nibbles

// Nibbles j and j + 4 of a word as a bf16 pair (low, high) minus the pair zz = (128 + z, 128 + z).
__device__ __forceinline__ uint32_t int4_pair(uint32_t word, int j, __nv_bfloat162 zz) {
  const uint32_t v = ((word >> (4 * j)) & 0x000F000Fu) | 0x43004300u;
  const __nv_bfloat162 d = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v), zz);
  return *reinterpret_cast<const uint32_t*>(&d);
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Block: 16 rows, kMmaWarps warps; warp w takes chunks w, w + 8, ... of K. Lane (g = lane / 4,
// i = lane % 4) reads 32 columns of each chunk (words 4i..4i+3 of rows g and g + 8) and the same 32
// columns of x for tokens g, g + 8, ... (NT tiles of eight tokens). In the mma's k index κ of word
// ws's half h, lane i's κ = 2i, 2i+1 are nibbles (2h, 2h + 4) and κ = 2i + 8, 2i + 9 nibbles
// (2h + 1, 2h + 5): a function of κ alone, so A and B agree. U chunks' weights are loaded into
// registers before any is used. (Measured on an H200: a cp.async pipeline of four chunks a warp
// through shared memory instead was slower — 37.8 against 29.3 µs for 8B gate_up at one token.)
template <int NT, int U, typename OutT>
__global__ void __launch_bounds__(32 * kMmaWarps)
    gemv_int4_mma_kernel(const bf16* __restrict__ x, int64_t ldx, const uint32_t* __restrict__ w, int64_t ldw,
                         const float* __restrict__ scale, const uint32_t* __restrict__ zeros, int groups,
                         int zero_words, int chunks_per_group, OutT* __restrict__ out, int64_t ldo, int n, int t,
                         int chunks) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, i = lane & 3;
  const int row0 = static_cast<int>(blockIdx.x) * 16;
  const int ra = min(row0 + g, n - 1), rb = min(row0 + g + 8, n - 1);
  const uint32_t* wa = w + static_cast<int64_t>(ra) * ldw + 4 * i;
  const uint32_t* wb = w + static_cast<int64_t>(rb) * ldw + 4 * i;
  float acc[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.0f;
  for (int c0 = warp; c0 < chunks; c0 += kMmaWarps * U) {
    uint4 qa[U], qb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * kMmaWarps;
      const bool in = c < chunks;
      qa[u] = in ? gemv_util::load_stream(wa + static_cast<int64_t>(c) * (kChunk / 8)) : make_uint4(0, 0, 0, 0);
      qb[u] = in ? gemv_util::load_stream(wb + static_cast<int64_t>(c) * (kChunk / 8)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * kMmaWarps;
      if (c >= chunks) break;
      const int gi = c / chunks_per_group;
      const float sa = __ldg(scale + static_cast<int64_t>(ra) * groups + gi);
      const float sb = __ldg(scale + static_cast<int64_t>(rb) * groups + gi);
      const uint32_t za = (__ldg(zeros + static_cast<int64_t>(ra) * zero_words + gi / 8) >> (4 * (gi % 8))) & 15u;
      const uint32_t zb = (__ldg(zeros + static_cast<int64_t>(rb) * zero_words + gi / 8) >> (4 * (gi % 8))) & 15u;
      const uint32_t za2 = (0x4300u | za) * 0x10001u, zb2 = (0x4300u | zb) * 0x10001u;
      const __nv_bfloat162 zza = *reinterpret_cast<const __nv_bfloat162*>(&za2);
      const __nv_bfloat162 zzb = *reinterpret_cast<const __nv_bfloat162*>(&zb2);
      float part[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[nt][e] = 0.0f;
#pragma unroll
      for (int ws = 0; ws < 4; ++ws) {
        const uint32_t word_a = word_of(qa[u], ws), word_b = word_of(qb[u], ws);
        // x's pairs (x_j, x_j+4) of the word's eight columns, for this lane's token of each tile.
        uint32_t xp[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int tok = nt * 8 + g;
          uint4 xv = make_uint4(0, 0, 0, 0);
          if (tok < t)
            xv = __ldg(reinterpret_cast<const uint4*>(x + tok * ldx + static_cast<int64_t>(c) * kChunk + 32 * i + 8 * ws));
          xp[nt][0] = __byte_perm(xv.x, xv.z, 0x5410);
          xp[nt][1] = __byte_perm(xv.x, xv.z, 0x7632);
          xp[nt][2] = __byte_perm(xv.y, xv.w, 0x5410);
          xp[nt][3] = __byte_perm(xv.y, xv.w, 0x7632);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t a[4] = {int4_pair(word_a, 2 * h, zza), int4_pair(word_b, 2 * h, zzb),
                                 int4_pair(word_a, 2 * h + 1, zza), int4_pair(word_b, 2 * h + 1, zzb)};
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma_bf16(part[nt], a, xp[nt][2 * h], xp[nt][2 * h + 1]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        acc[nt][0] = fmaf(part[nt][0], sa, acc[nt][0]);
        acc[nt][1] = fmaf(part[nt][1], sa, acc[nt][1]);
        acc[nt][2] = fmaf(part[nt][2], sb, acc[nt][2]);
        acc[nt][3] = fmaf(part[nt][3], sb, acc[nt][3]);
      }
    }
  }
  // The warps' partial sums of the block's 16 rows x 8·NT tokens, added in shared memory.
  constexpr int kCols = 8 * NT;
  __shared__ float red[kMmaWarps][16 * kCols];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    red[warp][g * kCols + nt * 8 + 2 * i] = acc[nt][0];
    red[warp][g * kCols + nt * 8 + 2 * i + 1] = acc[nt][1];
    red[warp][(g + 8) * kCols + nt * 8 + 2 * i] = acc[nt][2];
    red[warp][(g + 8) * kCols + nt * 8 + 2 * i + 1] = acc[nt][3];
  }
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < 16 * kCols; e += 32 * kMmaWarps) {
    const int r = e / kCols, tok = e % kCols;
    if (row0 + r >= n || tok >= t) continue;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < kMmaWarps; ++k) v += red[k][e];
    store(out + static_cast<int64_t>(tok) * ldo + row0 + r, v);
  }
}

struct Args {
  const bf16* x;
  int64_t ldx;
  const uint32_t* w;
  int64_t ldw;
  const float* scale;
  const uint32_t* zeros;
  int groups, zero_words, vectors_per_group;
  int64_t ldo;
  int n, kv;
};

template <int T, typename OutT>
void launch_t(const Args& a, OutT* out, cudaStream_t stream) {
  // Two rows a warp, four vectors a lane in flight for one or two tokens, two for more (registers).
  constexpr int R = 2, U = T <= 2 ? 4 : 2, rows_per_block = kWarps * R;
  gemv_int4_kernel<T, R, U, OutT><<<(a.n + rows_per_block - 1) / rows_per_block, kThreads, 0, stream>>>(
      a.x, a.ldx, a.w, a.ldw, a.scale, a.zeros, a.groups, a.zero_words, a.vectors_per_group, out, a.ldo, a.n, a.kv);
}

template <typename OutT>
void launch_out(int t, const Args& a, OutT* out, cudaStream_t stream) {
  switch (t) {
    case 1: launch_t<1>(a, out, stream); break;
    case 2: launch_t<2>(a, out, stream); break;
    case 3: launch_t<3>(a, out, stream); break;
    case 4: launch_t<4>(a, out, stream); break;
    case 5: launch_t<5>(a, out, stream); break;
    case 6: launch_t<6>(a, out, stream); break;
    case 7: launch_t<7>(a, out, stream); break;
    default: launch_t<8>(a, out, stream); break;
  }
}

template <int NT, typename OutT>
void launch_mma_nt(const Args& a, int t, OutT* out, cudaStream_t stream) {
  constexpr int U = NT == 1 ? 4 : 2;  // chunks in flight a lane (registers)
  gemv_int4_mma_kernel<NT, U, OutT><<<(a.n + 15) / 16, 32 * kMmaWarps, 0, stream>>>(
      a.x, a.ldx, a.w, a.ldw, a.scale, a.zeros, a.groups, a.zero_words, a.vectors_per_group * 32 / kChunk, out, a.ldo,
      a.n, t, a.kv * 32 / kChunk);
}

template <typename OutT>
void launch_mma(int t, const Args& a, OutT* out, cudaStream_t stream) {
  if (t <= 8) launch_mma_nt<1>(a, t, out, stream);
  else if (t <= 16) launch_mma_nt<2>(a, t, out, stream);
  else if (t <= 24) launch_mma_nt<3>(a, t, out, stream);
  else launch_mma_nt<4>(a, t, out, stream);
}

// out[n, k] = (q[n, k] − z[n, g]) · scale[n, g] rounded to OutT; a thread expands one packed word
// (eight columns) of a row.
template <typename OutT>
__global__ void __launch_bounds__(256)
    dequantize_int4_kernel(const uint32_t* __restrict__ w, const float* __restrict__ scale,
                           const uint32_t* __restrict__ zeros, int groups, int zero_words, int words_per_group,
                           OutT* __restrict__ out, int64_t n, int kw) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * kw) return;
  const int64_t row = i / kw;
  const int word_index = static_cast<int>(i % kw), g = word_index / words_per_group;
  const float s = scale[row * groups + g];
  const float zm = kMagic + static_cast<float>((zeros[row * zero_words + g / 8] >> (4 * (g % 8))) & 15u);
  const uint32_t word = w[i];
  OutT* o = out + i * 8;
#pragma unroll
  for (int e = 0; e < 8; ++e) store(o + e, nibble(word, e, zm) * s);
}

}  // namespace

bool gemv_int4_fits(const Tensor& x, const Tensor& w, const Tensor& out, int64_t group) {
  if (x.ndim != 2 || w.ndim != 2 || out.ndim != 2) return false;
  const int64_t t = x.shape[0], k = x.shape[1], n = w.shape[0];
  const int64_t max_t = group % kChunk == 0 ? kInt4MmaMaxTokens : kGemvMaxTokens;
  if (t < 1 || t > max_t || k < 32 || k % 32 != 0 || group % 32 != 0 || n < 1) return false;
  if (x.dtype != DType::BF16 || w.dtype != DType::I32 || w.shape[1] * 8 != k) return false;
  if (out.dtype != DType::BF16 && out.dtype != DType::F32) return false;
  if (n > (int64_t{1} << 30) || k > (int64_t{1} << 30)) return false;
  return x.stride0() % 8 == 0 && w.is_contiguous() && aligned16(x.data) && aligned16(w.data);
}

void launch_gemv_int4(const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros, int64_t group,
                      Tensor& out, cudaStream_t stream) {
  require(gemv_int4_fits(x, w, out, group), "linear_int4 (gemv)",
          "unsupported operands x " + shape_str(x) + ", w " + shape_str(w) + ", out " + shape_str(out));
  const int64_t k = x.shape[1];
  Args a{static_cast<const bf16*>(x.data), x.stride0(), static_cast<const uint32_t*>(w.data), w.shape[1],
         static_cast<const float*>(scale.data), static_cast<const uint32_t*>(zeros.data),
         static_cast<int>(k / group), static_cast<int>(zeros.shape[1]), static_cast<int>(group / 32), out.stride0(),
         static_cast<int>(w.shape[0]), static_cast<int>(k / 32)};
  const int t = static_cast<int>(x.shape[0]);
  if (group % kChunk == 0) {
    if (out.dtype == DType::F32) launch_mma(t, a, static_cast<float*>(out.data), stream);
    else launch_mma(t, a, static_cast<bf16*>(out.data), stream);
  } else if (out.dtype == DType::F32) {
    launch_out(t, a, static_cast<float*>(out.data), stream);
  } else {
    launch_out(t, a, static_cast<bf16*>(out.data), stream);
  }
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_dequantize_int4(const Tensor& w, const Tensor& scale, const Tensor& zeros, int64_t group, Tensor& out,
                            cudaStream_t stream) {
  const int64_t n = w.shape[0], kw = w.shape[1];
  require(w.dtype == DType::I32 && w.is_contiguous() && out.is_contiguous() && out.shape[0] == n &&
              out.shape[1] == kw * 8 && group % 8 == 0 && (kw * 8) % group == 0 &&
              (out.dtype == DType::BF16 || out.dtype == DType::F32),
          "linear_int4 (dequantize)", "unsupported operands w " + shape_str(w) + ", out " + shape_str(out));
  if (n == 0) return;
  const int64_t total = n * kw;
  const auto blocks = static_cast<unsigned>((total + 255) / 256);
  const auto* wp = static_cast<const uint32_t*>(w.data);
  const auto* sp = static_cast<const float*>(scale.data);
  const auto* zp = static_cast<const uint32_t*>(zeros.data);
  const int groups = static_cast<int>(kw * 8 / group), zw = static_cast<int>(zeros.shape[1]);
  const int wpg = static_cast<int>(group / 8);
  if (out.dtype == DType::F32)
    dequantize_int4_kernel<<<blocks, 256, 0, stream>>>(wp, sp, zp, groups, zw, wpg, static_cast<float*>(out.data), n,
                                                       static_cast<int>(kw));
  else
    dequantize_int4_kernel<<<blocks, 256, 0, stream>>>(wp, sp, zp, groups, zw, wpg, static_cast<bf16*>(out.data), n,
                                                       static_cast<int>(kw));
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda

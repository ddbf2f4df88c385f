// What the gated delta rule's kernels share (gdn_delta_rule.cu: the recurrent and the one-pass chunked
// kernels; gdn_chunk_split.cu: the chunked form split in a parallel and a sequential pass): the launch
// arguments, the per-token loads (β, g, l2-normalised q and k), float4 helpers and the warp-level
// tensor-core products in 3xTF32. Internal to src/backend/cuda; every symbol in an unnamed namespace.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gdn_kernels.cuh"

namespace pagoda::cuda::gdn {

constexpr int kMaxDk = kGdnMaxKeyDim;  // 128; smaller dk are zero-padded to it
static_assert(kMaxDk == 128, "the thread layouts below assume dk <= 128 in 16 row groups");

struct GdnArgs {
  const void* q;
  const void* k;
  const void* v;
  const void* b;
  const void* a;
  int64_t q_stride, k_stride, v_stride, b_stride, a_stride, out_stride;  // elements between tokens
  const void* a_log;
  const void* dt_bias;
  int a_log_dtype, dt_bias_dtype;
  void* state;     // F32, or BF16 when state_bf16 (--mamba-ssm-cache-dtype bfloat16)
  int state_bf16;  // the state is rounded to bf16 where a launch stores it, carried in fp32 inside one
  int64_t num_slots;
  void* out;
  const int32_t* cu_seqlens;
  const int32_t* state_slots;
  const int32_t* has_init;
  int hk, hv, dk, dv;
  int group;      // hv / hk
  float q_scale;  // 1 / sqrt(dk)
};

// Four consecutive state elements (index a multiple of 4) as fp32, and back.
__device__ __forceinline__ float4 load_state4(const GdnArgs& p, int64_t idx) {
  if (p.state_bf16) {
    const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const bf16*>(p.state) + idx);
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                       __uint_as_float(u.y & 0xffff0000u));
  }
  return *reinterpret_cast<const float4*>(static_cast<const float*>(p.state) + idx);
}
__device__ __forceinline__ void store_state4(const GdnArgs& p, int64_t idx, const float4& v) {
  if (p.state_bf16) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    *reinterpret_cast<uint2*>(static_cast<bf16*>(p.state) + idx) =
        make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    return;
  }
  *reinterpret_cast<float4*>(static_cast<float*>(p.state) + idx) = v;
}

// Where sequence s keeps value head h's state: a valid slot (the state is written back), whether it
// starts from that state (or from zeros), and the offset of its [dk, dv] block.
struct HeadState {
  bool ok, init;
  int64_t offset;
};
__device__ __forceinline__ HeadState head_state(const GdnArgs& p, int s, int h) {
  const int slot = p.state_slots[s];
  const bool ok = slot >= 0 && slot < p.num_slots;
  return {ok, ok && p.has_init[s] != 0, ok ? (static_cast<int64_t>(slot) * p.hv + h) * p.dk * p.dv : 0};
}

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// β and g of token `row`, value head h.
template <typename T>
__device__ __forceinline__ void beta_and_g(const GdnArgs& p, int64_t row, int h, float& beta, float& g) {
  const float bv = to_f32(static_cast<const T*>(p.b)[row * p.b_stride + h]);
  const float av = to_f32(static_cast<const T*>(p.a)[row * p.a_stride + h]);
  beta = round_to<T>(1.0f / (1.0f + expf(-bv)));
  g = -expf(load_weight(p.a_log, p.a_log_dtype, h)) * softplus(av + load_weight(p.dt_bias, p.dt_bias_dtype, h));
}

// One warp loads q and k of token `row` for key head kh (element i = lane + 32 e), l2-normalises
// both (q also scaled by 1/sqrt(dk)); elements past dk are 0. Returns k̂·q̃ in every lane.
template <typename T>
__device__ __forceinline__ float load_qk_normed(const GdnArgs& p, int64_t row, int kh, float (&qv)[4],
                                                float (&kv)[4]) {
  const int lane = threadIdx.x & 31;
  const T* qr = static_cast<const T*>(p.q) + row * p.q_stride + static_cast<int64_t>(kh) * p.dk;
  const T* kr = static_cast<const T*>(p.k) + row * p.k_stride + static_cast<int64_t>(kh) * p.dk;
  float sq = 0.0f, sk = 0.0f, sqk = 0.0f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int i = lane + 32 * e;
    qv[e] = i < p.dk ? to_f32(qr[i]) : 0.0f;
    kv[e] = i < p.dk ? to_f32(kr[i]) : 0.0f;
    sq = fmaf(qv[e], qv[e], sq);
    sk = fmaf(kv[e], kv[e], sk);
    sqk = fmaf(qv[e], kv[e], sqk);
  }
  sq = warp_sum(sq);
  sk = warp_sum(sk);
  sqk = warp_sum(sqk);
  const float rq = rsqrtf(sq + 1e-6f) * p.q_scale, rk = rsqrtf(sk + 1e-6f);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    qv[e] *= rq;
    kv[e] *= rk;
  }
  return sqk * rq * rk;
}

__device__ __forceinline__ float4 f4(float x) { return make_float4(x, x, x, x); }
__device__ __forceinline__ void fma4(float4& acc, float s, const float4& v) {
  acc.x = fmaf(s, v.x, acc.x);
  acc.y = fmaf(s, v.y, acc.y);
  acc.z = fmaf(s, v.z, acc.z);
  acc.w = fmaf(s, v.w, acc.w);
}
__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
  return fmaf(a.x, b.x, fmaf(a.y, b.y, fmaf(a.z, b.z, a.w * b.w)));
}

// ---- the chunked forms: chunks of 64 tokens, 256 threads ----------------------------------------------

constexpr int kChunk = 64;
constexpr int kChunkThreads = 256;
constexpr int kKs = kMaxDk + 4;  // row stride of K̂, Q̃ (float4 reads of 8 consecutive rows hit 32 banks)
constexpr int kMs = kChunk + 4;  // row stride of A and QK

// ---- tensor-core products of the chunked kernel (bf16 models) -------------------------------------------
// One warp's C[16 MT, 8 NT] += A[16 MT, K] B[K, 8 NT] on tensor cores (mma.sync m16n8k8 .tf32, fp32
// accumulate) over fp32 operands in shared memory, read through accessors a(m, k) and b(k, n) so that
// transposed and scaled views need no copy. Fragment layout (PTX ISA, m16n8k8 .tf32): with g = lane / 4,
// t = lane % 4, a holds (g, t) (g + 8, t) (g, t + 4) (g + 8, t + 4); b holds (t, g) (t + 4, g); c[i] is
// row g + 8 (i / 2), column 2 t + i % 2. Each operand is split into two TF32 parts (x = hi + lo, 3xTF32):
// lo·hi + hi·lo + hi·hi keeps the products at fp32's accuracy (the state is carried in fp32 across
// thousands of tokens), at three MMAs each — still a small part of the chunk's time.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

struct Tf32x2 {
  uint32_t hi, lo;
};
__device__ __forceinline__ Tf32x2 split_tf32(float x) {
  const uint32_t hi = to_tf32(x);
  return {hi, to_tf32(x - __uint_as_float(hi))};
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// d += a b with both split: the two cross terms first (they are small), then hi·hi.
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const Tf32x2 (&a)[4], const Tf32x2 (&b)[2]) {
  mma_tf32(d, a[0].lo, a[1].lo, a[2].lo, a[3].lo, b[0].hi, b[1].hi);
  mma_tf32(d, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].lo, b[1].lo);
  mma_tf32(d, a[0].hi, a[1].hi, a[2].hi, a[3].hi, b[0].hi, b[1].hi);
}

template <int MT, int NT>
__device__ __forceinline__ void zero_acc(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
}

// Rows m0 .. m0 + 16 MT, columns n0 .. n0 + 8 NT, K a multiple of 8. k3x: 3xTF32 (fp32's accuracy);
// otherwise one TF32 pass (inputs rounded to 10-bit mantissas), for products that only feed a bf16
// output, never the carried state.
template <bool k3x, int MT, int NT, typename FA, typename FB>
__device__ __forceinline__ void warp_mma_passes(float (&acc)[MT][NT][4], int m0, int n0, int K, FA a, FB b,
                                                int lane) {
  using Frag = std::conditional_t<k3x, Tf32x2, uint32_t>;
  const auto cvt = [](float x) {
    if constexpr (k3x) return split_tf32(x);
    else return to_tf32(x);
  };
  const int g = lane >> 2, t = lane & 3;
  for (int k0 = 0; k0 < K; k0 += 8) {
    Frag af[MT][4], bf[NT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int r = m0 + 16 * i + g;
      af[i][0] = cvt(a(r, k0 + t));
      af[i][1] = cvt(a(r + 8, k0 + t));
      af[i][2] = cvt(a(r, k0 + t + 4));
      af[i][3] = cvt(a(r + 8, k0 + t + 4));
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int c = n0 + 8 * j + g;
      bf[j][0] = cvt(b(k0 + t, c));
      bf[j][1] = cvt(b(k0 + t + 4, c));
    }
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if constexpr (k3x) mma_3xtf32(acc[i][j], af[i], bf[j]);
        else mma_tf32(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[j][0], bf[j][1]);
      }
  }
}

template <int MT, int NT, typename FA, typename FB>
__device__ __forceinline__ void warp_mma(float (&acc)[MT][NT][4], int m0, int n0, int K, FA a, FB b, int lane) {
  warp_mma_passes<true>(acc, m0, n0, K, a, b, lane);
}
template <int MT, int NT, typename FA, typename FB>
__device__ __forceinline__ void warp_mma_tf32(float (&acc)[MT][NT][4], int m0, int n0, int K, FA a, FB b, int lane) {
  warp_mma_passes<false>(acc, m0, n0, K, a, b, lane);
}

// The element (row, column) of accumulator register e of tile (i, j) of a warp_mma at (m0, n0).
__device__ __forceinline__ int acc_row(int m0, int i, int e, int lane) { return m0 + 16 * i + (lane >> 2) + 8 * (e >> 1); }
__device__ __forceinline__ int acc_col(int n0, int j, int e, int lane) { return n0 + 8 * j + 2 * (lane & 3) + (e & 1); }

// The dv tile width of the chunked kernels: 64 columns where the grid already fills the GPU (batches
// of prefills); narrower tiles where it would not (one long prompt: Qwen3.5-0.8B's 16 heads x 2 tiles =
// 32 CTAs on 132 SMs). A narrower tile repeats the per-chunk products of K̂, Q̃ but runs on SMs that
// would idle.
inline int chunk_cols_for(int64_t dv, int64_t hv, int64_t nseq, int num_sms) {
  for (int cols : {64, 32}) {
    const int64_t ctas = (dv + cols - 1) / cols * hv * nseq;
    if (ctas >= num_sms) return cols;
  }
  return 16;
}

// The split chunked form (gdn_chunk_split.cu) for bf16 activations; `scratch` holds
// gdn_chunk_split_scratch_bytes(rows, hv, dv). False (nothing launched) where the device's shared
// memory is too small for it.
bool launch_chunk_split_bf16(const GdnArgs& p, int nseq, int64_t rows, int num_sms, size_t max_smem_optin,
                             void* scratch, cudaStream_t stream);

}  // namespace pagoda::cuda::gdn

// Skinny bf16 GEMM for decode: out[T, N] = x[T, K] · w[N, K]^T for T ≤ kGemvMaxTokens, fp32
// accumulation, out BF16 or F32. Memory-bound: every weight byte is read once with 16-byte
// streaming loads. A block of 128 threads owns R consecutive output rows; its threads split K
// (thread i reads the 8-element vectors i, i + 128, ... of each of its rows), so that even the
// narrow matrices (N = 1024) put every weight byte of the matrix in flight at once. x is read
// through L1 (every block reads all of it). Partial sums are reduced across each warp by a
// transposing butterfly (R·T values in R·T − 1 + log shuffles instead of 5 each) and across the
// four warps through shared memory.
#include <algorithm>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gemv_util.cuh"
#include "backend/cuda/kernels.h"

namespace pagoda::cuda {
namespace {

using gemv_util::kThreads;
using gemv_util::kWarps;
using gemv_util::load_stream;
using gemv_util::store_out;

__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) { gemv_util::unpack_bf16x8(u, f); }

constexpr int log2_of(int v) { return v <= 1 ? 0 : 1 + log2_of(v / 2); }
constexpr int pow2_at_least(int v) { return v <= 1 ? 1 : 2 * pow2_at_least((v + 1) / 2); }

// a[V] (V a power of two ≤ 32) per lane → every lane gets the warp total of value lane >> (5 − log2 V).
// Each step halves the values a lane keeps: the half it keeps plus its partner's copy of that half.
template <int V>
__device__ __forceinline__ float warp_transpose_sum(float (&a)[V], int lane) {
#pragma unroll
  for (int step = 0; step < log2_of(V); ++step) {
    const int s = V >> (step + 1), off = 16 >> step;
    const bool upper = (lane & off) != 0;
#pragma unroll
    for (int i = 0; i < s; ++i) {
      const float send = upper ? a[i] : a[i + s];
      const float keep = upper ? a[i + s] : a[i];
      a[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
    }
  }
  float v = a[0];
#pragma unroll
  for (int off = 16 / V; off >= 1; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// x for the fused SwiGLU: x points at the gate half of gate_up, the up half `up` elements further.
// Each element is silu(g) rounded to bf16, times u, rounded to bf16: silu_mul_kernel's rounding, so
// the result is bit-identical to silu_mul followed by the plain kernel.
__device__ __forceinline__ void silu_mul8(float (&g)[8], const uint4& up) {
  float u[8];
  unpack8(up, u);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float s = round_to<bf16>(g[e] / (1.0f + __expf(-g[e])));
    g[e] = round_to<bf16>(s * u[e]);
  }
}

// T tokens, R rows per block, U vectors per thread and row loaded before they are used. Act: x is
// a gate_up row pair (see silu_mul8), `up` elements apart; otherwise `up` is unused.
template <int T, int R, int U, bool Act, typename OutT>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const bf16* __restrict__ x, int64_t ldx, int64_t up,
                                                        const bf16* __restrict__ w, int64_t ldw,
                                                        OutT* __restrict__ out, int64_t ldo, int n, int kv) {
  constexpr int TP = pow2_at_least(T), V = R * TP;
  static_assert(V <= 32, "R * T must fit one warp's transposing reduction");
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int row0 = static_cast<int>(blockIdx.x) * R;
  const bf16* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = w + static_cast<int64_t>(min(row0 + r, n - 1)) * ldw;

  float acc[V];
#pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.0f;

  for (int v0 = tid; v0 < kv; v0 += U * kThreads) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = v0 + u * kThreads;
#pragma unroll
      for (int r = 0; r < R; ++r) wv[u][r] = v < kv ? load_stream(wr[r] + static_cast<int64_t>(v) * 8) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = v0 + u * kThreads;
      if (v >= kv) break;
      float wf[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) unpack8(wv[u][r], wf[r]);
#pragma unroll
      for (int t = 0; t < T; ++t) {
        float xf[8];
        const bf16* xp = x + t * ldx + static_cast<int64_t>(v) * 8;
        unpack8(__ldg(reinterpret_cast<const uint4*>(xp)), xf);
        if constexpr (Act) silu_mul8(xf, __ldg(reinterpret_cast<const uint4*>(xp + up)));
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r * TP + t] = fmaf(wf[r][e], xf[e], acc[r * TP + t]);
      }
    }
  }

  __shared__ float partial[kWarps][V];
  const float s = warp_transpose_sum<V>(acc, lane);
  constexpr int group = 32 / V;  // lanes holding one value's total
  if ((lane & (group - 1)) == 0) partial[warp][lane / group] = s;
  __syncthreads();
  if (tid < V) {
    const int r = tid / TP, t = tid % TP, row = row0 + r;
    if (t < T && row < n) {
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kWarps; ++i) sum += partial[i][tid];
      store_out(out + t * ldo + row, sum);
    }
  }
}

template <int T, bool Act, typename OutT>
void launch_t(const bf16* x, int64_t ldx, int64_t up, const bf16* w, int64_t ldw, OutT* out, int64_t ldo, int n, int kv,
              int num_sms, cudaStream_t stream) {
  constexpr int U = T <= 2 ? 4 : 2;
  // Eight rows per block for the very wide lm_head at T = 1: four made ~38k tiny blocks there, 9%
  // slower than cuBLASLt on an H200 (2026-11-21).
  if constexpr (T == 1) {
    if (n >= 16384) {
      gemv_kernel<T, 8, 2, Act, OutT><<<(n + 7) / 8, kThreads, 0, stream>>>(x, ldx, up, w, ldw, out, ldo, n, kv);
      return;
    }
  }
  // Four rows per block where that still leaves several blocks per SM; two otherwise (the narrow
  // N = 1024 matrices), so that the rows spread evenly over the SMs; two for T > 4, where four rows
  // of 5–7 tokens put the accumulators on the stack.
  if constexpr (T <= 4) {
    if (n >= 4 * 8 * num_sms) {
      gemv_kernel<T, 4, U, Act, OutT><<<(n + 3) / 4, kThreads, 0, stream>>>(x, ldx, up, w, ldw, out, ldo, n, kv);
      return;
    }
  }
  gemv_kernel<T, 2, U, Act, OutT><<<(n + 1) / 2, kThreads, 0, stream>>>(x, ldx, up, w, ldw, out, ldo, n, kv);
}

template <bool Act, typename OutT>
void launch_out(int t, const bf16* x, int64_t ldx, int64_t up, const bf16* w, int64_t ldw, OutT* out, int64_t ldo, int n,
                int kv, int num_sms, cudaStream_t stream) {
  switch (t) {
    case 1: launch_t<1, Act>(x, ldx, up, w, ldw, out, ldo, n, kv, num_sms, stream); break;
    case 2: launch_t<2, Act>(x, ldx, up, w, ldw, out, ldo, n, kv, num_sms, stream); break;
    case 3: launch_t<3, Act>(x, ldx, up, w, ldw, out, ldo, n, kv, num_sms, stream); break;
    case 4: launch_t<4, Act>(x, ldx, up, w, ldw, out, ldo, n, kv, num_sms, stream); break;
    case 5: launch_t<5, Act>(x, ldx, up, w, ldw, out, ldo, n, kv, num_sms, stream); break;
    case 6: launch_t<6, Act>(x, ldx, up, w, ldw, out, ldo, n, kv, num_sms, stream); break;
    case 7: launch_t<7, Act>(x, ldx, up, w, ldw, out, ldo, n, kv, num_sms, stream); break;
    default: launch_t<8, Act>(x, ldx, up, w, ldw, out, ldo, n, kv, num_sms, stream); break;
  }
}


// ---- grouped GEMV for the experts of a decode step ------------------------------------------------
// out[r, :] = x[r, :] · w[e]^T for the rows r of expert e (expert_offsets), when the experts hold few
// rows each (decode: T·k routed rows over E experts). grid.y walks the non-empty experts only (a
// block finds the j-th one from the offsets; there are at most min(E, R)), grid.x the output rows in
// R-row tiles; each block streams its expert's weight tile once per chunk of MT rows, as gemv_kernel.
constexpr int kMoeGemvTokens = 4;

template <int R, typename OutT>
__global__ void __launch_bounds__(kThreads)
    moe_gemv_kernel(const bf16* __restrict__ x, int64_t ldx, const bf16* __restrict__ w, const int32_t* offsets,
                    int num_experts, OutT* __restrict__ out, int64_t ldo, int n, int kv) {
  constexpr int MT = kMoeGemvTokens, V = R * MT;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  // The j-th expert with rows, j = blockIdx.y: every warp scans the offsets 32 experts at a time.
  const int j = static_cast<int>(blockIdx.y);
  int e = -1, seen = 0;
  for (int base = 0; base < num_experts && e < 0; base += 32) {
    const int ex = base + lane;
    const bool has = ex < num_experts && offsets[ex + 1] > offsets[ex];
    const unsigned mask = __ballot_sync(0xffffffffu, has);
    const int count = __popc(mask);
    if (j < seen + count) {
      unsigned m = mask;
      for (int skip = j - seen; skip > 0; --skip) m &= m - 1;  // drop the lowest set bits
      e = base + __ffs(m) - 1;
    }
    seen += count;
  }
  if (e < 0) return;  // fewer non-empty experts than the grid's bound
  const int begin = offsets[e], rows = offsets[e + 1] - begin;
  const int row0 = static_cast<int>(blockIdx.x) * R;
  const bf16* wr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) wr[r] = w + (static_cast<int64_t>(e) * n + min(row0 + r, n - 1)) * (int64_t{8} * kv);
  __shared__ float partial[kWarps][V];
  for (int c0 = 0; c0 < rows; c0 += MT) {
    const int mt = min(MT, rows - c0);
    const bf16* xc = x + static_cast<int64_t>(begin + c0) * ldx;
    float acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = 0.0f;
    for (int v = tid; v < kv; v += kThreads) {
      float wf[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) unpack8(load_stream(wr[r] + static_cast<int64_t>(v) * 8), wf[r]);
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        if (t >= mt) break;
        float xf[8];
        unpack8(__ldg(reinterpret_cast<const uint4*>(xc + t * ldx + static_cast<int64_t>(v) * 8)), xf);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int q = 0; q < 8; ++q) acc[r * MT + t] = fmaf(wf[r][q], xf[q], acc[r * MT + t]);
      }
    }
    const float s = warp_transpose_sum<V>(acc, lane);
    constexpr int group = 32 / V;
    if ((lane & (group - 1)) == 0) partial[warp][lane / group] = s;
    __syncthreads();
    if (tid < V) {
      const int r = tid / MT, t = tid % MT, row = row0 + r;
      if (t < mt && row < n) {
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kWarps; ++i) sum += partial[i][tid];
        store_out(out + static_cast<int64_t>(begin + c0 + t) * ldo + row, sum);
      }
    }
    __syncthreads();  // partial is rewritten by the next chunk
  }
}

}  // namespace

bool gemv_preferred(int64_t t, int64_t n) { return t == 1 || t * n <= 8192; }

bool gemv_silu_mul_preferred(int64_t t, int64_t n) { return gemv_preferred(t, n) && n <= kGemvSiluMulMaxRows; }

bool gemv_fits(const Tensor& x, const Tensor& w, const Tensor& out, int max_tokens) {
  if (x.ndim != 2 || w.ndim != 2 || out.ndim != 2) return false;
  const int64_t t = x.shape[0], k = x.shape[1], n = w.shape[0];
  if (t < 1 || t > std::min(max_tokens, kGemvMaxTokens) || k < 8 || k % 8 != 0 || n < 1) return false;
  if (w.shape[1] != k || out.shape[0] != t || out.shape[1] != n) return false;
  if (x.dtype != DType::BF16 || w.dtype != DType::BF16) return false;
  if (out.dtype != DType::BF16 && out.dtype != DType::F32) return false;
  if (n > (int64_t{1} << 30) || k / 8 > (int64_t{1} << 30)) return false;
  const int64_t ldx = x.stride0(), ldw = w.stride0();
  return ldx % 8 == 0 && ldw % 8 == 0 && aligned16(x.data) && aligned16(w.data);
}

namespace {

template <bool Act>
void launch_any(const Tensor& x, int64_t up, const Tensor& w, Tensor& out, int num_sms, cudaStream_t stream) {
  const int t = static_cast<int>(x.shape[0]), n = static_cast<int>(w.shape[0]), kv = static_cast<int>(x.shape[1] / 8);
  const auto* xp = static_cast<const bf16*>(x.data);
  const auto* wp = static_cast<const bf16*>(w.data);
  const int64_t ldx = x.stride0(), ldw = w.stride0(), ldo = out.stride0();
  if (out.dtype == DType::F32)
    launch_out<Act>(t, xp, ldx, up, wp, ldw, static_cast<float*>(out.data), ldo, n, kv, num_sms, stream);
  else
    launch_out<Act>(t, xp, ldx, up, wp, ldw, static_cast<bf16*>(out.data), ldo, n, kv, num_sms, stream);
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_gemv(const Tensor& x, const Tensor& w, Tensor& out, int num_sms, cudaStream_t stream) {
  require(gemv_fits(x, w, out, kGemvMaxTokens), "linear (gemv)",
          "unsupported operands x " + shape_str(x) + ", w " + shape_str(w) + ", out " + shape_str(out));
  launch_any<false>(x, 0, w, out, num_sms, stream);
}

bool gemv_silu_mul_fits(const Tensor& gate_up, const Tensor& w, const Tensor& out, int max_tokens) {
  if (gate_up.ndim != 2 || gate_up.shape[1] % 2 != 0) return false;
  return gemv_fits(gate_up.cols(0, gate_up.shape[1] / 2), w, out, max_tokens);
}

void launch_gemv_silu_mul(const Tensor& gate_up, const Tensor& w, Tensor& out, int num_sms, cudaStream_t stream) {
  require(gemv_silu_mul_fits(gate_up, w, out, kGemvMaxTokens), "linear_silu_mul (gemv)",
          "unsupported operands gate_up " + shape_str(gate_up) + ", w " + shape_str(w) + ", out " + shape_str(out));
  const int64_t inter = gate_up.shape[1] / 2;
  launch_any<true>(gate_up.cols(0, inter), inter, w, out, num_sms, stream);
}

bool moe_gemv_fits(const Tensor& x, const Tensor& w, const Tensor& out) {
  if (x.ndim != 2 || w.ndim != 3 || out.ndim != 2 || !w.is_contiguous()) return false;
  const int64_t E = w.shape[0], n = w.shape[1], k = w.shape[2], rows = x.shape[0];
  if (x.dtype != DType::BF16 || w.dtype != DType::BF16 || (out.dtype != DType::BF16 && out.dtype != DType::F32))
    return false;
  if (k < 8 || k % 8 != 0 || x.shape[1] != k || out.shape[0] != rows || out.shape[1] != n) return false;
  if (n > (int64_t{1} << 30) || k / 8 > (int64_t{1} << 30) || rows >= (int64_t{1} << 31)) return false;
  // Decode-sized: at most kMoeGemvMaxRowsPerExpert rows per expert on average; a prefill's experts
  // hold tens of rows each, where the tiled kernel reuses each weight tile across them.
  if (rows > kMoeGemvMaxRowsPerExpert * E) return false;
  return x.stride0() % 8 == 0 && aligned16(x.data) && aligned16(w.data);
}

void launch_moe_gemv(const Tensor& x, const Tensor& w, const Tensor& expert_offsets, Tensor& out,
                     cudaStream_t stream) {
  require(moe_gemv_fits(x, w, out), "moe_grouped_linear (gemv)",
          "unsupported operands x " + shape_str(x) + ", w " + shape_str(w) + ", out " + shape_str(out));
  const int64_t E = w.shape[0], n = w.shape[1], rows = x.shape[0];
  if (rows == 0 || n == 0) return;
  constexpr int R = 4;
  const dim3 grid(static_cast<unsigned>((n + R - 1) / R), static_cast<unsigned>(std::min(E, rows)));
  const auto* xp = static_cast<const bf16*>(x.data);
  const auto* wp = static_cast<const bf16*>(w.data);
  const auto* op = static_cast<const int32_t*>(expert_offsets.data);
  const int kv = static_cast<int>(w.shape[2] / 8);
  if (out.dtype == DType::F32)
    moe_gemv_kernel<R, float><<<grid, kThreads, 0, stream>>>(xp, x.stride0(), wp, op, static_cast<int>(E),
                                                              static_cast<float*>(out.data), out.stride0(),
                                                              static_cast<int>(n), kv);
  else
    moe_gemv_kernel<R, bf16><<<grid, kThreads, 0, stream>>>(xp, x.stride0(), wp, op, static_cast<int>(E),
                                                             static_cast<bf16*>(out.data), out.stride0(),
                                                             static_cast<int>(n), kv);
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda

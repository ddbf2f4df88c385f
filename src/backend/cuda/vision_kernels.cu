// The vision encoder's kernels (backend.h, "vision encoders"): LayerNorm, GELU (exact and tanh), RoPE
// with a position row per rotary pair, and bidirectional attention within segments. Their CPU twins
// are cpu/vision_ops.cpp. fp32 arithmetic throughout, one rounding to the activation dtype at the
// store (BF16 attention: bf16 products on tensor cores, P rounded to bf16, fp32 sums and softmax);
// nothing reads a device value on the host, so every launch is graph-safe.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/vision_kernels.h"

namespace pagoda::cuda {
namespace {

// ---- vector access: V elements at once, 16 bytes where the caller checked the alignment -----------

template <int V, typename T>
__device__ __forceinline__ void load_vec(const T* p, T (&v)[V]) {
  if constexpr (V * sizeof(T) == 16) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = e[i];
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) v[i] = p[i];
  }
}

template <int V, typename T>
__device__ __forceinline__ void store_vec(T* p, const T (&v)[V]) {
  if constexpr (V * sizeof(T) == 16) {
    uint4 u;
    T* e = reinterpret_cast<T*>(&u);
#pragma unroll
    for (int i = 0; i < V; ++i) e[i] = v[i];
    *reinterpret_cast<uint4*>(p) = u;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = v[i];
  }
}

// True when rows of `cols` elements of size `esize` at (pointer, row stride) allow 16-byte access.
bool rows_vec16(size_t esize, int64_t cols, std::initializer_list<std::pair<const void*, int64_t>> rows) {
  if ((cols * static_cast<int64_t>(esize)) % 16 != 0) return false;
  for (const auto& [p, stride] : rows)
    if (!aligned16(p) || (stride * static_cast<int64_t>(esize)) % 16 != 0) return false;
  return true;
}

int threads_for(int64_t items) { return static_cast<int>(std::clamp<int64_t>((items + 31) / 32 * 32, 32, 256)); }

bool is_float(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

void require_on_cuda(const char* op, const Tensor& t, const char* name) {
  require(t.device == Device::CUDA, op, std::string(name) + " must be on cuda, got " + shape_str(t));
}

// ---- LayerNorm ----------------------------------------------------------------------------------

// One block per row. Two passes for the statistics (mean, then Σ(x − mean)²) so that rows far from
// zero mean keep their variance, which E[x²] − E[x]² in fp32 would cancel away. out may alias x:
// every read of the statistics passes precedes block_sum's barriers, and the last pass reads and
// writes each element in the same thread.
template <typename T, int V>
__global__ void layer_norm_kernel(const T* x, int64_t xs, const void* w, int wdt, const void* b, int bdt, T* out,
                                  int64_t os, int d, float eps) {
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * xs;
  T* orow = out + static_cast<int64_t>(blockIdx.x) * os;
  const int step = static_cast<int>(blockDim.x) * V;
  float sum = 0.0f;
  for (int i = static_cast<int>(threadIdx.x) * V; i < d; i += step) {
    T v[V];
    load_vec<V>(xr + i, v);
#pragma unroll
    for (int e = 0; e < V; ++e) sum += to_f32(v[e]);
  }
  const float mean = block_sum(sum) / static_cast<float>(d);
  float sq = 0.0f;
  for (int i = static_cast<int>(threadIdx.x) * V; i < d; i += step) {
    T v[V];
    load_vec<V>(xr + i, v);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float c = to_f32(v[e]) - mean;
      sq += c * c;
    }
  }
  const float inv = rsqrtf(block_sum(sq) / static_cast<float>(d) + eps);
  for (int i = static_cast<int>(threadIdx.x) * V; i < d; i += step) {
    T v[V], o[V];
    load_vec<V>(xr + i, v);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float shift = b ? load_weight(b, bdt, i + e) : 0.0f;
      o[e] = from_f32<T>((to_f32(v[e]) - mean) * inv * load_weight(w, wdt, i + e) + shift);
    }
    store_vec<V>(orow + i, o);
  }
}

// ---- GELU ---------------------------------------------------------------------------------------

// erff and tanhf (not the tanh.approx instruction: its 2^-11 relative error would show in fp32).
// For large negative x, 1 + erf / 1 + tanh cancel to 0 in fp32 where the true value is below 1e-8:
// the contract's fp32 evaluation, as torch does it.
template <typename T, int V, bool kTanh>
__global__ void gelu_kernel(const T* x, int64_t xs, T* out, int64_t os, int64_t cols, int blocks_per_row) {
  const int64_t row = blockIdx.x / blocks_per_row;
  const int64_t i = (static_cast<int64_t>(blockIdx.x % blocks_per_row) * blockDim.x + threadIdx.x) * V;
  if (i >= cols) return;
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kKappa = 0.044715f, kRsqrt2 = 0.7071067811865476f;
  T v[V];
  load_vec<V>(x + row * xs + i, v);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const float f = to_f32(v[e]);
    const float g = kTanh ? 0.5f * f * (1.0f + tanhf(kSqrt2OverPi * (f + kKappa * f * f * f)))
                          : 0.5f * f * (1.0f + erff(f * kRsqrt2));
    v[e] = from_f32<T>(g);
  }
  store_vec<V>(out + row * os + i, v);
}

// ---- RoPE by axes ---------------------------------------------------------------------------------

// A thread per (row, head, pair j): (x[j], x[j + n]) turned by positions[axes[j], t] · inv_freq[j]
// (fp32 product, accurate sincosf: positions reach tens of thousands), rounded once. Consecutive
// threads take consecutive pairs of one head, so the loads of x[j] and x[j + n] coalesce. An axis
// outside [0, P) (a caller's bug the host cannot see without a sync) poisons its pair with NaN
// instead of reading past positions.
template <typename T>
__global__ void rope_axes_kernel(T* x, int64_t xs, int64_t t_rows, int heads, int d, int n, const int32_t* positions,
                                 int p_rows, const int32_t* axes, const float* inv_freq) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_row = static_cast<int64_t>(heads) * n;
  if (idx >= t_rows * per_row) return;
  const int64_t t = idx / per_row;
  const int h = static_cast<int>((idx % per_row) / n), j = static_cast<int>(idx % n);
  T* head = x + t * xs + static_cast<int64_t>(h) * d;
  const int axis = axes[j];
  float c = __int_as_float(0x7fc00000), s = c;  // NaN
  if (axis >= 0 && axis < p_rows) sincosf(static_cast<float>(positions[axis * t_rows + t]) * inv_freq[j], &s, &c);
  const float a = to_f32(head[j]), b = to_f32(head[j + n]);
  head[j] = from_f32<T>(a * c - b * s);
  head[j + n] = from_f32<T>(b * c + a * s);
}

// ---- attention within segments ----------------------------------------------------------------------

constexpr int kSegWarps = 8;
constexpr int kSegRowsPerWarp = 4;
constexpr int kSegRows = kSegWarps * kSegRowsPerWarp;  // query rows of one head per block
constexpr int kSegKeys = 32;                           // keys per shared-memory tile: one per lane
constexpr float kLog2e = 1.4426950408889634f;

// The segment [begin, end) of row r: the last s with cu[s] <= r (empty segments skipped), by a
// binary search over cu[0 .. S]. Clamped to [0, T) and to hold r, so that a malformed cu_seqlens
// (not from 0 to T, decreasing) gives wrong numbers but never an access outside q, k and v.
__device__ __forceinline__ void row_segment(const int32_t* cu, int segs, int64_t r, int64_t t_rows, int64_t* begin,
                                            int64_t* end) {
  int lo = 0, hi = segs;  // the answer s lies in [lo, hi): cu[s] <= r < cu[s + 1]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (cu[mid] <= r) lo = mid;
    else hi = mid;
  }
  *begin = min(max(static_cast<int64_t>(cu[lo]), int64_t{0}), r);
  *end = max(min(static_cast<int64_t>(cu[lo + 1]), t_rows), r + 1);
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Grid (query tiles of kSegRows rows, heads); 8 warps, each owning 4 query rows. The tile's rows
// belong to one or a few consecutive segments whose union [kb, ke) the block streams in tiles of 32
// keys: K transposed (lane = key) and V in shared memory, fp32. Each lane scores its key against the
// warp's 4 rows (q pre-scaled by scale·log2 e, so exp2 gives the softmax), keys outside a row's own
// segment are masked, and the online softmax (running max m, sum l) rescales the accumulators; the
// probabilities go lane to lane by shuffles for p·V, where lane owns dims lane + 32c (c < C).
// Work is bounded by T: a block reads at most its segments' keys. Cost of one long segment of L rows
// (an image of L patches): every block streams the whole segment, so L²·H·D·4 FLOPs in fp32 SIMT
// with K/V read L/32 times from L2 — Qwen3.5's tower (H 16, D 72) at L = 4096 is 77 GFLOP a layer,
// expected ~3-4 ms on an H200 (about a third of fp32 peak: shared-memory loads bound the scores);
// four images of 1024 cost a quarter of that (measured: 7.2 ms on an H200). Runs F32 (exact-ish, for
// the parity tests) and F16; BF16 takes segment_attention_mma_kernel below.
template <typename T, int C>
__global__ void __launch_bounds__(kSegWarps * 32)
    segment_attention_kernel(const T* q, int64_t qs, const T* k, int64_t ks, const T* v, int64_t vs, T* out, int64_t os,
                             const int32_t* cu, int segs, int64_t t_rows, int d, float qk_scale) {
  constexpr int kDim = 32 * C;
  __shared__ __align__(16) float q_tile[kSegRows][kDim];
  __shared__ float k_tile[kDim][kSegKeys];  // column swizzled: key kk of dim e at [e][kk ^ (e % 32)]
  __shared__ float v_tile[kSegKeys][kDim];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kSegRows;
  const int64_t head_off = static_cast<int64_t>(blockIdx.y) * d;
  const int64_t last = min(row0 + kSegRows, t_rows) - 1;

  // This tile's queries, scaled, zero past D and past T.
  for (int i = static_cast<int>(threadIdx.x); i < kSegRows * kDim; i += static_cast<int>(blockDim.x)) {
    const int r = i / kDim, e = i % kDim;
    const int64_t row = row0 + r;
    q_tile[r][e] = (row < t_rows && e < d) ? to_f32(q[row * qs + head_off + e]) * qk_scale : 0.0f;
  }
  // The keys of the rows this tile holds: from the first row's segment start to the last's end.
  int64_t kb = 0, ke = 0, unused = 0;
  row_segment(cu, segs, row0, t_rows, &kb, &unused);
  row_segment(cu, segs, last, t_rows, &unused, &ke);
  // This warp's rows and their own segments (a row past T keeps an empty range and writes nothing).
  int64_t rb[kSegRowsPerWarp], re[kSegRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kSegRowsPerWarp; ++i) {
    const int64_t row = row0 + warp * kSegRowsPerWarp + i;
    rb[i] = re[i] = 0;
    if (row < t_rows) row_segment(cu, segs, row, t_rows, &rb[i], &re[i]);
  }
  float m[kSegRowsPerWarp], l[kSegRowsPerWarp], acc[kSegRowsPerWarp][C];
#pragma unroll
  for (int i = 0; i < kSegRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < C; ++c) acc[i][c] = 0.0f;
  }

  for (int64_t k0 = kb; k0 < ke; k0 += kSegKeys) {
    __syncthreads();  // the previous tile's keys are no longer read (and the queries are in)
    for (int i = static_cast<int>(threadIdx.x); i < kSegKeys * kDim; i += static_cast<int>(blockDim.x)) {
      const int kk = i / kDim, e = i % kDim;
      const int64_t key = k0 + kk;
      const bool ok = key < ke && e < d;
      k_tile[e][kk ^ (e & 31)] = ok ? to_f32(k[key * ks + head_off + e]) : 0.0f;
      v_tile[kk][e] = ok ? to_f32(v[key * vs + head_off + e]) : 0.0f;
    }
    __syncthreads();
    // Scores of key k0 + lane against the warp's rows (log2 domain).
    float s[kSegRowsPerWarp] = {};
    for (int e = 0; e < kDim; e += 4) {
      float kv[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) kv[u] = k_tile[e + u][lane ^ ((e + u) & 31)];
#pragma unroll
      for (int i = 0; i < kSegRowsPerWarp; ++i) {
        const float4 qv = *reinterpret_cast<const float4*>(&q_tile[warp * kSegRowsPerWarp + i][e]);
        s[i] += qv.x * kv[0] + qv.y * kv[1] + qv.z * kv[2] + qv.w * kv[3];
      }
    }
    const int64_t key = k0 + lane;
    float p[kSegRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kSegRowsPerWarp; ++i) {
      const bool ok = key >= rb[i] && key < re[i];
      const float si = ok ? s[i] : -INFINITY;
      const float m_new = fmaxf(m[i], warp_max(si));
      p[i] = ok ? exp2f(si - m_new) : 0.0f;  // ok: m_new is finite
      const float corr = m[i] == -INFINITY ? 0.0f : exp2f(m[i] - m_new);
      l[i] = l[i] * corr + warp_sum(p[i]);
#pragma unroll
      for (int c = 0; c < C; ++c) acc[i][c] *= corr;
      m[i] = m_new;
    }
#pragma unroll 4
    for (int kk = 0; kk < kSegKeys; ++kk) {
      float vv[C];
#pragma unroll
      for (int c = 0; c < C; ++c) vv[c] = v_tile[kk][lane + 32 * c];
#pragma unroll
      for (int i = 0; i < kSegRowsPerWarp; ++i) {
        const float pk = __shfl_sync(0xffffffffu, p[i], kk);
#pragma unroll
        for (int c = 0; c < C; ++c) acc[i][c] += pk * vv[c];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kSegRowsPerWarp; ++i) {
    const int64_t row = row0 + warp * kSegRowsPerWarp + i;
    if (row >= t_rows) continue;
    const float inv = 1.0f / l[i];  // l >= 1: a row's segment holds the row itself
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int e = lane + 32 * c;
      if (e < d) out[row * os + head_off + e] = from_f32<T>(acc[i][c] * inv);
    }
  }
}


// ---- attention within segments on tensor cores (bf16 activations) ---------------------------------
//
// FlashAttention-2 style. A CTA of 4 warps takes 64 query rows of one head (a warp owns 16 rows) and
// streams the keys of those rows' segments, [kb, ke), in tiles of 64 rows, double-buffered in shared
// memory by cp.async. S = Q·Kᵀ and O += P·V run on mma.sync m16n8k16 (bf16 in, fp32 accumulate), with
// an online fp32 softmax in the log2 domain. The head dim is zero-padded in shared memory to DP, a
// multiple of 16 (72 → 80). A tile may straddle segments: every row masks the keys outside its own
// segment (found by binary search in cu_seqlens on the device), and a warp skips key tiles that miss
// all of its rows' segments. Keys past ke are zero-filled (masked scores, and 0·V stays finite).
// Fragment layouts: mma_bf16 (device_util.cuh); Q and K fragments by ldmatrix, V's by ldmatrix.trans.

constexpr int kFaRows = 64;     // query rows per CTA
constexpr int kFaKeys = 64;     // keys per shared-memory tile
constexpr int kFaThreads = 128; // 4 warps × 16 rows

template <int DP>
struct FaCfg {
  static_assert(DP % 16 == 0 && DP <= 128, "DP: a multiple of 16 up to 128");
  static constexpr int kLd = DP + 8;  // bf16 row + 16 B: the 8 rows of an ldmatrix hit distinct banks
  static constexpr int kTile = kFaKeys * kLd;
  static constexpr size_t kSmem = static_cast<size_t>(kFaRows * kLd + 4 * kTile) * sizeof(bf16);  // Q, 2 × (K, V)
};

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const bf16* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const bf16* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) in the low half
  return *reinterpret_cast<const uint32_t*>(&v);
}

// vec: D % 8 == 0 and q, k, v, out rows 16-byte aligned (16-byte cp.async loads, 4-byte stores);
// otherwise element by element. t_rows < 2^31 - 64 (the launcher checks), so row indices fit int.
template <int DP>
__global__ void __launch_bounds__(kFaThreads)
    segment_attention_mma_kernel(const bf16* q, int64_t qs, const bf16* k, int64_t ks, const bf16* v, int64_t vs,
                                 bf16* out, int64_t os, const int32_t* cu, int segs, int t_rows, int d,
                                 float qk_scale, bool vec) {
  using C = FaCfg<DP>;
  constexpr int kLd = C::kLd, kChunks = DP / 8;
  extern __shared__ __align__(16) unsigned char fa_smem[];
  bf16* sQ = reinterpret_cast<bf16*>(fa_smem);
  bf16* sKV = sQ + kFaRows * kLd;  // stage s: K at sKV + 2s·kTile, V right after
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
  const int row0 = static_cast<int>(blockIdx.x) * kFaRows;
  const int64_t head_off = static_cast<int64_t>(blockIdx.y) * d;

  // Key range of the CTA (first row's segment start to the last row's end), of this warp, and the
  // segments of this thread's two rows (g and g + 8 of the warp's 16); a row past T masks every key.
  int64_t b64 = 0, e64 = 0, unused = 0;
  row_segment(cu, segs, row0, t_rows, &b64, &unused);
  row_segment(cu, segs, min(row0 + kFaRows, t_rows) - 1, t_rows, &unused, &e64);
  const int kb = static_cast<int>(b64), ke = static_cast<int>(e64);
  const int wrow0 = row0 + warp * 16;
  const bool warp_active = wrow0 < t_rows;
  int wkb = 0, wke = 0;
  if (warp_active) {
    row_segment(cu, segs, wrow0, t_rows, &b64, &unused);
    row_segment(cu, segs, min(wrow0 + 16, t_rows) - 1, t_rows, &unused, &e64);
    wkb = static_cast<int>(b64);
    wke = static_cast<int>(e64);
  }
  int rb[2] = {0, 0}, re[2] = {0, 0};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = wrow0 + g + 8 * h;
    if (row < t_rows) {
      row_segment(cu, segs, row, t_rows, &b64, &e64);
      rb[h] = static_cast<int>(b64);
      re[h] = static_cast<int>(e64);
    }
  }
  // A key tile inside both rows' segments needs no mask (the common case: one long image).
  const int rb_max = max(rb[0], rb[1]), re_min = min(re[0], re[1]);

  // 64 rows [first, first + 64) of src's head into dst, zeros past `end` and past d.
  auto load_rows = [&](bf16* dst, const bf16* src, int64_t stride, int first, int end) {
    if (vec) {
      for (int idx = tid; idx < kFaKeys * kChunks; idx += kFaThreads) {
        const int r = idx / kChunks, c = idx % kChunks, row = first + r;
        const bool ok = row < end && c * 8 < d;
        const bf16* from = ok ? src + static_cast<int64_t>(row) * stride + head_off + c * 8 : src;
        cp_async16(dst + r * kLd + c * 8, from, ok);  // !ok: zero fill, reads nothing
      }
    } else {
      for (int idx = tid; idx < kFaKeys * DP; idx += kFaThreads) {
        const int r = idx / DP, e = idx % DP, row = first + r;
        dst[r * kLd + e] = (row < end && e < d) ? src[static_cast<int64_t>(row) * stride + head_off + e]
                                                : __float2bfloat16_rn(0.0f);
      }
    }
  };

  const int n_tiles = (ke - kb + kFaKeys - 1) / kFaKeys;  // >= 1: the segment of row0 holds row0
  load_rows(sQ, q, qs, row0, t_rows);
  cp_async_commit();
  if (n_tiles > 0) {
    load_rows(sKV, k, ks, kb, ke);
    load_rows(sKV + C::kTile, v, vs, kb, ke);
  }
  cp_async_commit();
  cp_async_wait<1>();  // Q landed (tile 0 may be in flight)
  __syncthreads();
  // The warp's Q fragments (A, row-major 16 × 16 per k-step), kept in registers for every tile.
  uint32_t qf[DP / 16][4];
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) ldsm_x4(qf[kk], sQ + (warp * 16 + (lane & 15)) * kLd + kk * 16 + (lane >> 4) * 8);

  float acc[DP / 8][4];
#pragma unroll
  for (int n = 0; n < DP / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};

  for (int it = 0; it < n_tiles; ++it) {
    cp_async_wait_all();
    __syncthreads();  // tile `it` visible to all; every warp is done with the other stage
    if (it + 1 < n_tiles) {
      bf16* next = sKV + ((it + 1) & 1) * 2 * C::kTile;
      load_rows(next, k, ks, kb + (it + 1) * kFaKeys, ke);
      load_rows(next + C::kTile, v, vs, kb + (it + 1) * kFaKeys, ke);
    }
    cp_async_commit();
    const int k0 = kb + it * kFaKeys;
    if (!warp_active || k0 >= wke || k0 + kFaKeys <= wkb) continue;  // no key of this warp's rows
    const bf16* sK = sKV + (it & 1) * 2 * C::kTile;
    const bf16* sV = sK + C::kTile;

    // S = Q Kᵀ, 16 rows × 64 keys. B (col-major 16 × 8) of keys n..n+7 is K's rows, non-transposed:
    // ldmatrix x4 gives b0, b1 of keys j·16 + 0..7 and of keys j·16 + 8..15.
    float sc[kFaKeys / 8][4];
#pragma unroll
    for (int j = 0; j < kFaKeys / 8; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
#pragma unroll
      for (int j = 0; j < kFaKeys / 16; ++j) {
        uint32_t b[4];
        ldsm_x4(b, sK + (j * 16 + (lane & 7) + ((lane >> 4) << 3)) * kLd + kk * 16 + ((lane >> 3) & 1) * 8);
        mma_bf16(sc[2 * j], qf[kk], b[0], b[1]);
        mma_bf16(sc[2 * j + 1], qf[kk], b[2], b[3]);
      }
    }

    // Scale to the log2 domain, mask keys outside each row's segment, running max per row.
    const bool full = k0 >= rb_max && k0 + kFaKeys <= re_min;
    float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kFaKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, key = k0 + j * 8 + t4 * 2 + (e & 1);
        float x = sc[j][e] * qk_scale;
        if (!full) x = (key >= rb[h] && key < re[h]) ? x : -INFINITY;
        sc[j][e] = x;
        tmax[h] = fmaxf(tmax[h], x);
      }
    }
    float m_use[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 1));  // the quad shares a row
      tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 2));
      const float m_new = fmaxf(row_m[h], tmax[h]);
      m_use[h] = m_new == -INFINITY ? 0.0f : m_new;  // no key of the row yet: keep exp2 finite
      const float alpha = exp2f(row_m[h] - m_use[h]);
      row_m[h] = m_new;
      row_l[h] *= alpha;
#pragma unroll
      for (int n = 0; n < DP / 8; ++n) {
        acc[n][2 * h] *= alpha;
        acc[n][2 * h + 1] *= alpha;
      }
    }
#pragma unroll
    for (int j = 0; j < kFaKeys / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(sc[j][e] - m_use[e >> 1]);
        sc[j][e] = p;
        row_l[e >> 1] += p;  // this thread's columns; summed over the quad at the end
      }
    }

    // O += P V. The C fragments of key tiles 2kc, 2kc+1 are the A fragment of keys kc·16..+15; B
    // (keys × dims) is V transposed: ldmatrix.trans x4 gives b0, b1 of dims n·16 + 0..7 and + 8..15.
#pragma unroll
    for (int kc = 0; kc < kFaKeys / 16; ++kc) {
      const uint32_t pa[4] = {pack_bf16x2(sc[2 * kc][0], sc[2 * kc][1]), pack_bf16x2(sc[2 * kc][2], sc[2 * kc][3]),
                              pack_bf16x2(sc[2 * kc + 1][0], sc[2 * kc + 1][1]),
                              pack_bf16x2(sc[2 * kc + 1][2], sc[2 * kc + 1][3])};
#pragma unroll
      for (int n = 0; n < DP / 16; ++n) {
        uint32_t b[4];
        ldsm_x4_trans(b, sV + (kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd + n * 16 + (lane >> 4) * 8);
        mma_bf16(acc[2 * n], pa, b[0], b[1]);
        mma_bf16(acc[2 * n + 1], pa, b[2], b[3]);
      }
    }
  }
  cp_async_wait_all();  // nothing left in flight at exit

  // Normalise and write: this thread holds dims n·8 + 2·t4, +1 of rows g and g + 8.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_l[h] += __shfl_xor_sync(0xffffffffu, row_l[h], 1);
    row_l[h] += __shfl_xor_sync(0xffffffffu, row_l[h], 2);
    const int row = wrow0 + g + 8 * h;
    if (row >= t_rows) continue;
    const float inv = 1.0f / row_l[h];  // >= 1: a row's segment holds the row itself
    bf16* o = out + static_cast<int64_t>(row) * os + head_off;
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) {
      const int e = n * 8 + t4 * 2;
      const float x0 = acc[n][2 * h] * inv, x1 = acc[n][2 * h + 1] * inv;
      if (vec) {
        if (e < d) *reinterpret_cast<uint32_t*>(o + e) = pack_bf16x2(x0, x1);  // d % 8 == 0: e + 1 < d too
      } else {
        if (e < d) o[e] = __float2bfloat16_rn(x0);
        if (e + 1 < d) o[e + 1] = __float2bfloat16_rn(x1);
      }
    }
  }
}


template <int DP>
void launch_segment_attention_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens,
                                  Tensor& out, int segs, int t, int d, float qk_scale, bool vec, dim3 grid,
                                  size_t max_smem_optin, cudaStream_t stream) {
  static std::atomic<uint64_t> opted_in{0};  // FaCfg<80>::kSmem is 56 KB: past the default 48 KB
  const auto kernel = segment_attention_mma_kernel<DP>;
  opt_in_shared_memory(reinterpret_cast<const void*>(kernel), FaCfg<DP>::kSmem, max_smem_optin, opted_in,
                       "segment_attention");
  kernel<<<grid, kFaThreads, FaCfg<DP>::kSmem, stream>>>(q.ptr<bf16>(), q.stride0(), k.ptr<bf16>(), k.stride0(),
                                                          v.ptr<bf16>(), v.stride0(), out.ptr<bf16>(), out.stride0(),
                                                          cu_seqlens.ptr<int32_t>(), segs, t, d, qk_scale, vec);
}

}  // namespace

void launch_layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps, cudaStream_t stream) {
  const char* op = "layer_norm";
  require_on_cuda(op, x, "x");
  require_on_cuda(op, out, "out");
  require(x.ndim == 2 && out.ndim == 2 && out.shape[0] == x.shape[0] && out.shape[1] == x.shape[1], op,
          "x and out must be [T, D] of one shape, got x " + shape_str(x) + " and out " + shape_str(out));
  require(out.dtype == x.dtype, op, "out " + shape_str(out) + " and x " + shape_str(x) + " differ in dtype");
  const int64_t rows = x.shape[0], d = x.shape[1];
  require(is_float(w.dtype) && w.numel() == d && w.device == Device::CUDA, op,
          "w must be [" + std::to_string(d) + "] F32, BF16 or F16 on cuda, got " + shape_str(w));
  require(b.empty() || (is_float(b.dtype) && b.numel() == d && b.device == Device::CUDA), op,
          "b must be empty or [" + std::to_string(d) + "] F32, BF16 or F16 on cuda, got " + shape_str(b));
  if (rows == 0 || d == 0) return;
  require(d < (int64_t{1} << 30) && rows < (int64_t{1} << 31), op, "x too large: " + shape_str(x));
  PAGODA_DISPATCH_FLOAT(x.dtype, T, op, {
    constexpr int V16 = 16 / sizeof(T);
    auto go = [&](auto v_tag) {
      constexpr int V = decltype(v_tag)::value;
      layer_norm_kernel<T, V><<<static_cast<unsigned>(rows), threads_for(d / V), 0, stream>>>(
          x.ptr<T>(), x.stride0(), w.data, static_cast<int>(w.dtype), b.empty() ? nullptr : b.data,
          static_cast<int>(b.dtype), out.ptr<T>(), out.stride0(), static_cast<int>(d), eps);
    };
    if (rows_vec16(sizeof(T), d, {{x.data, x.stride0()}, {out.data, out.stride0()}}))
      go(std::integral_constant<int, V16>{});
    else
      go(std::integral_constant<int, 1>{});
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_gelu(const Tensor& x, Tensor& out, bool tanh_approx, cudaStream_t stream) {
  const char* op = "gelu";
  require_on_cuda(op, x, "x");
  require_on_cuda(op, out, "out");
  require(num_rows(out) == num_rows(x) && out.row_numel() == x.row_numel(), op,
          "out " + shape_str(out) + " must have the shape of x " + shape_str(x));
  require(out.dtype == x.dtype, op, "out " + shape_str(out) + " and x " + shape_str(x) + " differ in dtype");
  const int64_t rows = num_rows(x), cols = x.row_numel();
  if (rows == 0 || cols == 0) return;
  PAGODA_DISPATCH_FLOAT(x.dtype, T, op, {
    constexpr int V16 = 16 / sizeof(T);
    auto go = [&](auto v_tag, auto tanh_tag) {
      constexpr int V = decltype(v_tag)::value;
      const int64_t items = (cols + V - 1) / V;
      const int threads = threads_for(items);
      const int64_t bpr = (items + threads - 1) / threads;
      require(rows * bpr < (int64_t{1} << 31), op, "x too large: " + shape_str(x));
      gelu_kernel<T, V, decltype(tanh_tag)::value><<<static_cast<unsigned>(rows * bpr), threads, 0, stream>>>(
          x.ptr<T>(), x.stride0(), out.ptr<T>(), out.stride0(), cols, static_cast<int>(bpr));
    };
    const bool vec = rows_vec16(sizeof(T), cols, {{x.data, x.stride0()}, {out.data, out.stride0()}});
    if (vec && tanh_approx) go(std::integral_constant<int, V16>{}, std::true_type{});
    else if (vec) go(std::integral_constant<int, V16>{}, std::false_type{});
    else if (tanh_approx) go(std::integral_constant<int, 1>{}, std::true_type{});
    else go(std::integral_constant<int, 1>{}, std::false_type{});
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_rope_axes(Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq,
                      cudaStream_t stream) {
  const char* op = "rope_axes";
  require_on_cuda(op, x, "x");
  require(x.ndim == 3, op, "x must be [T, heads, head_dim], got " + shape_str(x));
  const int64_t t = x.shape[0], h = x.shape[1], d = x.shape[2], n = axes.numel();
  require(positions.dtype == DType::I32 && positions.device == Device::CUDA && positions.ndim == 2 &&
              positions.shape[1] == t && positions.is_contiguous(),
          op, "positions must be I32 [P, " + std::to_string(t) + "] contiguous on cuda, got " + shape_str(positions));
  require(axes.dtype == DType::I32 && axes.device == Device::CUDA, op, "axes must be I32 on cuda, got " + shape_str(axes));
  require(inv_freq.dtype == DType::F32 && inv_freq.device == Device::CUDA && inv_freq.numel() == n, op,
          "inv_freq must be F32 [" + std::to_string(n) + "] (one per axis) on cuda, got " + shape_str(inv_freq));
  require(2 * n <= d, op, std::to_string(n) + " rotary pairs do not fit head_dim " + std::to_string(d));
  const int64_t items = t * h * n;
  if (items == 0) return;
  require(items / 256 < (int64_t{1} << 31) && d < (int64_t{1} << 30) && h < (int64_t{1} << 30), op,
          "x too large: " + shape_str(x));
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((items + threads - 1) / threads);
  PAGODA_DISPATCH_FLOAT(x.dtype, T, op, {
    rope_axes_kernel<T><<<blocks, threads, 0, stream>>>(x.ptr<T>(), x.stride0(), t, static_cast<int>(h),
                                                        static_cast<int>(d), static_cast<int>(n),
                                                        positions.ptr<int32_t>(), static_cast<int>(positions.shape[0]),
                                                        axes.ptr<int32_t>(), inv_freq.ptr<float>());
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, float scale,
                              Tensor& out, size_t max_smem_optin, cudaStream_t stream) {
  const char* op = "segment_attention";
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}}) {
    require_on_cuda(op, *t, name);
    require(t->ndim == 3 && t->shape[0] == q.shape[0] && t->shape[1] == q.shape[1] && t->shape[2] == q.shape[2] &&
                t->dtype == q.dtype,
            op, std::string(name) + " " + shape_str(*t) + " must be [T, H, D] of q's shape and dtype (q " +
                    shape_str(q) + ")");
  }
  require(cu_seqlens.dtype == DType::I32 && cu_seqlens.device == Device::CUDA && cu_seqlens.numel() >= 1, op,
          "cu_seqlens must be I32 [S + 1] on cuda, got " + shape_str(cu_seqlens));
  const int64_t t = q.shape[0], h = q.shape[1], d = q.shape[2];
  require(d >= 1 && d <= kSegmentAttentionMaxHeadDim, op,
          "head_dim " + std::to_string(d) + " is past the kernel's " + std::to_string(kSegmentAttentionMaxHeadDim));
  require(h < 65536, op, std::to_string(h) + " heads are more than a grid's second dimension holds");
  const int64_t segs = cu_seqlens.numel() - 1;
  if (t == 0 || h == 0) return;
  require(segs >= 1, op, "cu_seqlens " + shape_str(cu_seqlens) + " holds no segment for " + std::to_string(t) + " rows");
  require(segs < (int64_t{1} << 31) && (t + kSegRows - 1) / kSegRows < (int64_t{1} << 31), op,
          "too many rows or segments: q " + shape_str(q) + ", cu_seqlens " + shape_str(cu_seqlens));
  const float qk_scale = scale * kLog2e;
  // bf16: tensor cores (head dim padded to a multiple of 16). fp32 keeps the exact SIMT kernel, and
  // f16 the SIMT kernel too (mma_bf16 would drop f16's 3 extra mantissa bits).
  if (q.dtype == DType::BF16 && t < (int64_t{1} << 31) - kFaRows &&
      FaCfg<(kSegmentAttentionMaxHeadDim + 15) / 16 * 16>::kSmem <= max_smem_optin) {
    const dim3 grid(static_cast<unsigned>((t + kFaRows - 1) / kFaRows), static_cast<unsigned>(h));
    const bool vec = rows_vec16(sizeof(bf16), d, {{q.data, q.stride0()}, {k.data, k.stride0()}, {v.data, v.stride0()},
                                                  {out.data, out.stride0()}});
    auto go = [&](auto dp_tag) {
      launch_segment_attention_mma<decltype(dp_tag)::value>(q, k, v, cu_seqlens, out, static_cast<int>(segs),
                                                            static_cast<int>(t), static_cast<int>(d), qk_scale, vec,
                                                            grid, max_smem_optin, stream);
    };
    switch ((d + 15) / 16) {
      case 1: go(std::integral_constant<int, 16>{}); break;
      case 2: go(std::integral_constant<int, 32>{}); break;
      case 3: go(std::integral_constant<int, 48>{}); break;
      case 4: go(std::integral_constant<int, 64>{}); break;
      case 5: go(std::integral_constant<int, 80>{}); break;
      case 6: go(std::integral_constant<int, 96>{}); break;
      case 7: go(std::integral_constant<int, 112>{}); break;
      default: go(std::integral_constant<int, 128>{}); break;
    }
    PAGODA_CUDA_CHECK_LAUNCH();
    return;
  }
  const dim3 grid(static_cast<unsigned>((t + kSegRows - 1) / kSegRows), static_cast<unsigned>(h));
  PAGODA_DISPATCH_FLOAT(q.dtype, T, op, {
    auto go = [&](auto c_tag) {
      constexpr int C = decltype(c_tag)::value;
      segment_attention_kernel<T, C><<<grid, kSegWarps * 32, 0, stream>>>(
          q.ptr<T>(), q.stride0(), k.ptr<T>(), k.stride0(), v.ptr<T>(), v.stride0(), out.ptr<T>(), out.stride0(),
          cu_seqlens.ptr<int32_t>(), static_cast<int>(segs), t, static_cast<int>(d), qk_scale);
    };
    if (d <= 32) go(std::integral_constant<int, 1>{});
    else if (d <= 64) go(std::integral_constant<int, 2>{});
    else if (d <= 96) go(std::integral_constant<int, 3>{});
    else go(std::integral_constant<int, 4>{});
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda

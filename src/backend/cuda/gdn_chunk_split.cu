// The chunked gated delta rule split in two passes, as fla's chunk_gated_delta_rule_fwd: what a chunk
// computes from its own tokens runs in parallel over every chunk of the step, and only the state
// recurrence runs chunk after chunk. The one-pass kernel (gdn_delta_rule.cu) did all of it in the
// sequential loop; its forward substitution and row-by-row loads held a 9B prefill step's 24 GDN layers
// at ~80 ms of ~260 (the step profiler, docs/benchmarks.md 2026-11-29).
//
// Chunks are the step's windows of 64 rows (rows 64 w .. 64 w + 63) cut at sequence boundaries: a
// segment is a window's rows of one sequence longer than kGdnRecurrentMaxLen (shorter ones are the
// recurrent kernel's), so one sequence's chunks are its windows in order. Per segment (γ = cumsum g
// from the segment's first row, γ_L its last):
//   A  = strictly lower β_r e^{γ_r−γ_s} k̂_r·k̂_s   (zero across segments)
//   W  = (I + A)⁻¹ (β e^γ ⊙ K̂)     U = (I + A)⁻¹ (β ⊙ V)     QK = lower e^{γ_r−γ_s} q̃_r·k̂_s
// and then, chunk after chunk, carrying S:
//   Vnew = U − W S     O = (e^γ ⊙ Q̃) S + QK Vnew     S ← e^{γ_L} S + (e^{γ_L−γ} ⊙ K̂)ᵀ Vnew
// the one-pass kernel's math with Vnew = (I+A)⁻¹ β (V − e^γ ⊙ K̂ S) unfolded. Every product on tensor
// cores in 3xTF32 (fp32's accuracy); bf16 activations only.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gdn_common.cuh"
#include "backend/cuda/gdn_kernels.cuh"

namespace pagoda::cuda {
namespace gdn {
namespace {

constexpr int kWin = kChunk;            // 64 rows a window
constexpr int kXs = kMaxDk + 16;        // row stride of X (substitution: the two lanes of a column hit other banks)
constexpr int kPadDv = 128;             // U's rows are dv rounded up to this (the prepare kernel's column tile)

// Where each array of the scratch starts, in floats; a record is one (window, value head).
struct SplitLayout {
  int64_t records, dvp;
  __host__ __device__ int64_t w_off() const { return 0; }
  __host__ __device__ int64_t q_off() const { return records * kWin * kMaxDk; }
  __host__ __device__ int64_t k_off() const { return 2 * records * kWin * kMaxDk; }
  __host__ __device__ int64_t qk_off() const { return 3 * records * kWin * kMaxDk; }
  __host__ __device__ int64_t g_off() const { return qk_off() + records * kWin * kWin; }
  __host__ __device__ int64_t u_off() const { return g_off() + records * kWin; }
  __host__ __device__ int64_t floats() const { return u_off() + records * kWin * dvp; }
};

SplitLayout split_layout(int64_t rows, int64_t hv, int64_t dv) {
  return {(rows + kWin - 1) / kWin * hv, (dv + kPadDv - 1) / kPadDv * kPadDv};
}

// ---- pass 1: per window and value head (grid: windows, Hv, 1 + dv tiles of 128) -------------------------
// z = 0 writes W, e^γ Q̃, e^{γ_L−γ} K̂, QK and γ; z ≥ 1 writes U's columns 128 (z − 1) ... Both build A.
// Shared memory: K̂ [64][kKs], X [64][kXs] (Q̃ first, for z = 0, then the right-hand sides), A [64][kMs],
// the inverses of A's diagonal blocks [4][16][kTs].
constexpr int kPrepOffK = 0;
constexpr int kPrepOffX = kPrepOffK + kWin * kKs;
constexpr int kPrepOffA = kPrepOffX + kWin * kXs;
constexpr int kTs = 16 + 4;                          // row stride of the diagonal blocks' inverses
constexpr int kPrepOffRow = kPrepOffA + kWin * kMs + 4 * 16 * kTs;  // γ, β, scan buffer
constexpr size_t kPrepSmemBytes = sizeof(float) * (kPrepOffRow + 3 * kWin) + sizeof(int) * 3 * kWin;

template <typename T>
__global__ void __launch_bounds__(kChunkThreads, 2) gdn_split_prepare_kernel(const GdnArgs p, int nseq, SplitLayout lay,
                                                                            float* __restrict__ ws) {
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  float* Ks = sm + kPrepOffK;
  float* Xs = sm + kPrepOffX;  // Q̃ (stride kKs) until the products are done, then X (stride kXs)
  float* As = sm + kPrepOffA;
  float* gam = sm + kPrepOffRow;
  float* bet = gam + kWin;
  float* buf = bet + kWin;
  int* seg = reinterpret_cast<int*>(buf + kWin);  // the row's sequence, or -1: not a chunked row
  int* sst = seg + kWin;                          // the row's segment: first and last row of the window
  int* slast = sst + kWin;

  const int w = static_cast<int>(blockIdx.x), h = static_cast<int>(blockIdx.y), z = static_cast<int>(blockIdx.z);
  const int kh = h / p.group;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int64_t row0 = static_cast<int64_t>(w) * kWin;
  const int64_t rec = static_cast<int64_t>(w) * p.hv + h;

  // (1) Each row's sequence and segment, β and g.
  bool mine = false;
  float gv = 0.0f;
  if (tid < kWin) {
    const int64_t t = row0 + tid;
    int s = -1, first = tid, last = tid;
    if (t < p.cu_seqlens[nseq]) {
      const int lo = seq_of_row(p.cu_seqlens, nseq, t);
      const int64_t b = p.cu_seqlens[lo], e = p.cu_seqlens[lo + 1];
      if (e - b > kGdnRecurrentMaxLen) {
        s = lo;
        first = static_cast<int>(max(b, row0) - row0);
        last = static_cast<int>(min(e, row0 + kWin) - row0 - 1);
      }
    }
    seg[tid] = s, sst[tid] = first, slast[tid] = last;
    float beta = 0.0f;
    if (s >= 0) beta_and_g<T>(p, t, h, beta, gv);
    bet[tid] = beta;
    mine = s >= 0;
  }
  if (!__syncthreads_or(mine)) return;  // no chunked row here: nothing reads this window's record

  // (2) γ: an inclusive scan of g within each segment (Hillis-Steele over the window's 64 rows).
  for (int o = 1; o < kWin; o <<= 1) {
    if (tid < kWin) buf[tid] = gv;
    __syncthreads();
    if (tid < kWin && tid - o >= sst[tid]) gv += buf[tid - o];
    __syncthreads();
  }
  if (tid < kWin) gam[tid] = gv;
  __syncthreads();

  // (3) K̂ and Q̃ rows, a warp's eight rows loaded at once (lane: elements 4 lane .. 4 lane + 3); z = 0
  // also writes e^γ Q̃ and e^{γ_L−γ} K̂. Elements past dk are 0.
  float* q_out = ws + lay.q_off() + rec * kWin * kMaxDk;
  float* k_out = ws + lay.k_off() + rec * kWin * kMaxDk;
  {
    constexpr int kRows = kWin / (kChunkThreads / 32);  // 8
    float qv[kRows][4], kv[kRows][4];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      const int r = warp + 8 * u;
      const bool ok = seg[r] >= 0;
      const T* qr = static_cast<const T*>(p.q) + (row0 + r) * p.q_stride + static_cast<int64_t>(kh) * p.dk;
      const T* kr = static_cast<const T*>(p.k) + (row0 + r) * p.k_stride + static_cast<int64_t>(kh) * p.dk;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * lane + e;
        qv[u][e] = ok && i < p.dk ? to_f32(qr[i]) : 0.0f;
        kv[u][e] = ok && i < p.dk ? to_f32(kr[i]) : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      const int r = warp + 8 * u;
      float sq = 0.0f, sk = 0.0f;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sq = fmaf(qv[u][e], qv[u][e], sq);
        sk = fmaf(kv[u][e], kv[u][e], sk);
      }
      sq = warp_sum(sq);
      sk = warp_sum(sk);
      const float rq = rsqrtf(sq + 1e-6f) * p.q_scale, rk = rsqrtf(sk + 1e-6f);
      const float4 kn = make_float4(kv[u][0] * rk, kv[u][1] * rk, kv[u][2] * rk, kv[u][3] * rk);
      const float4 qn = make_float4(qv[u][0] * rq, qv[u][1] * rq, qv[u][2] * rq, qv[u][3] * rq);
      *reinterpret_cast<float4*>(Ks + r * kKs + 4 * lane) = kn;
      if (z == 0) {
        const float eq = expf(gam[r]), ek = expf(gam[slast[r]] - gam[r]);
        *reinterpret_cast<float4*>(Xs + r * kKs + 4 * lane) = qn;
        *reinterpret_cast<float4*>(q_out + r * kMaxDk + 4 * lane) = make_float4(eq * qn.x, eq * qn.y, eq * qn.z, eq * qn.w);
        *reinterpret_cast<float4*>(k_out + r * kMaxDk + 4 * lane) = make_float4(ek * kn.x, ek * kn.y, ek * kn.z, ek * kn.w);
      }
    }
  }
  const int c0 = (z - 1) * kPadDv;  // z ≥ 1: this block's columns of V
  if (z > 0) {
    const T* vg = static_cast<const T*>(p.v);
    for (int idx = tid; idx < kWin * kPadDv; idx += kChunkThreads) {
      const int r = idx / kPadDv, j = idx % kPadDv;
      float v = 0.0f;
      if (seg[r] >= 0 && c0 + j < p.dv)
        v = bet[r] * to_f32(vg[(row0 + r) * p.v_stride + static_cast<int64_t>(h) * p.dv + c0 + j]);
      Xs[r * kXs + j] = v;
    }
  }
  __syncthreads();

  // (4) A = β e^{γ_r−γ_s} K̂K̂ᵀ (strictly lower, one segment) and, for z = 0, QK (lower) straight to the
  // scratch. Warp w: rows 16 (w / 2) .., columns 32 (w % 2) ..
  {
    const int m0 = 16 * (warp >> 1), n0 = 32 * (warp & 1);
    const int dk8 = (p.dk + 7) & ~7;
    float acc_a[1][4][4], acc_q[1][4][4];
    zero_acc(acc_a);
    zero_acc(acc_q);
    const int g = lane >> 2, t = lane & 3;
    const int k_end = n0 <= m0 + 15 ? dk8 : 0;  // a warp wholly above the diagonal has nothing to do
    for (int k0 = 0; k0 < k_end; k0 += 8) {
      Tf32x2 ka[4], kb[4][2];
      const int r = m0 + g;
      ka[0] = split_tf32(Ks[r * kKs + k0 + t]), ka[1] = split_tf32(Ks[(r + 8) * kKs + k0 + t]);
      ka[2] = split_tf32(Ks[r * kKs + k0 + t + 4]), ka[3] = split_tf32(Ks[(r + 8) * kKs + k0 + t + 4]);
      // Tiles wholly above the diagonal stay 0 (both products are lower triangular).
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (n0 + 8 * j > m0 + 15) continue;
        const int c = n0 + 8 * j + g;
        kb[j][0] = split_tf32(Ks[c * kKs + k0 + t]);
        kb[j][1] = split_tf32(Ks[c * kKs + k0 + t + 4]);
        mma_3xtf32(acc_a[0][j], ka, kb[j]);
      }
      if (z == 0) {  // QK feeds only the bf16 output: one TF32 pass
        const uint32_t qa0 = to_tf32(Xs[r * kKs + k0 + t]), qa1 = to_tf32(Xs[(r + 8) * kKs + k0 + t]);
        const uint32_t qa2 = to_tf32(Xs[r * kKs + k0 + t + 4]), qa3 = to_tf32(Xs[(r + 8) * kKs + k0 + t + 4]);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (n0 + 8 * j <= m0 + 15) mma_tf32(acc_q[0][j], qa0, qa1, qa2, qa3, kb[j][0].hi, kb[j][1].hi);
      }
    }
    float* qk_out = ws + lay.qk_off() + rec * kWin * kWin;
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = acc_row(m0, 0, e, lane), c = acc_col(n0, j, e, lane);
        const bool same = seg[r] >= 0 && c >= sst[r] && c <= r;
        const float dec = same ? expf(gam[r] - gam[c]) : 0.0f;
        As[r * kMs + c] = same && c < r ? bet[r] * dec * acc_a[0][j][e] : 0.0f;
        if (z == 0) qk_out[r * kWin + c] = dec * acc_q[0][j][e];
      }
  }
  __syncthreads();  // Q̃ is read; X takes its place

  // (5) z = 0: X = β e^γ ⊙ K̂ (zero past dk, as K̂).
  if (z == 0) {
    for (int idx = tid; idx < kWin * kMaxDk; idx += kChunkThreads) {
      const int r = idx / kMaxDk, i = idx % kMaxDk;
      Xs[r * kXs + i] = bet[r] * expf(gam[r]) * Ks[r * kKs + i];
    }
    __syncthreads();
  }

  // (6) X ← (I + A)⁻¹ X by blocks of 16 rows. First each diagonal block's inverse T_b = (I + A_bb)⁻¹
  // (warp b, by substitution on the identity: lane 2 j + part holds column j, rows ≡ part mod 2), then
  // per block X_b ← T_b (X_b − A_{b,<b} X_{<b}): two products on tensor cores, no chain. Each warp
  // owns 16 columns of X throughout, so only its own lanes need to agree (__syncwarp).
  float* Ts = As + kWin * kMs;  // [4][16][kTs]
  if (warp < kWin / 16) {
    const int b0 = 16 * warp, j = lane >> 1, part = lane & 1;
    float* tb = Ts + warp * 16 * kTs;
    for (int r = 0; r < 16; ++r) {
      float acc = 0.0f;
      for (int s2 = j + ((part - j) & 1); s2 < r; s2 += 2) acc = fmaf(As[(b0 + r) * kMs + b0 + s2], tb[s2 * kTs + j], acc);
      acc += __shfl_xor_sync(0xffffffffu, acc, 1);
      if (part == (r & 1)) tb[r * kTs + j] = (r == j ? 1.0f : 0.0f) - (r > j ? acc : 0.0f);
    }
  }
  __syncthreads();
  const int xc = 16 * warp;  // this warp's columns of X
  for (int b0 = 0; b0 < kWin; b0 += 16) {
    if (b0 > 0) {
      float acc[1][2][4];
      zero_acc(acc);
      warp_mma(acc, b0, xc, b0, [&](int r, int s2) { return As[r * kMs + s2]; },
               [&](int s2, int c) { return Xs[s2 * kXs + c]; }, lane);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj)
#pragma unroll
        for (int e = 0; e < 4; ++e) Xs[acc_row(b0, 0, e, lane) * kXs + acc_col(xc, jj, e, lane)] -= acc[0][jj][e];
      __syncwarp();
    }
    const float* tb = Ts + (b0 / 16) * 16 * kTs;
    float acc[1][2][4];
    zero_acc(acc);
    warp_mma(acc, 0, xc, 16, [&](int r, int s2) { return tb[r * kTs + s2]; },
             [&](int s2, int c) { return Xs[(b0 + s2) * kXs + c]; }, lane);
    __syncwarp();
#pragma unroll
    for (int jj = 0; jj < 2; ++jj)
#pragma unroll
      for (int e = 0; e < 4; ++e) Xs[(b0 + acc_row(0, 0, e, lane)) * kXs + acc_col(xc, jj, e, lane)] = acc[0][jj][e];
    __syncwarp();
  }
  __syncthreads();

  // (7) Out: z = 0 writes W and γ, z ≥ 1 its 128 columns of U.
  if (z == 0) {
    float* w_out = ws + lay.w_off() + rec * kWin * kMaxDk;
    for (int idx = tid; idx < kWin * kMaxDk / 4; idx += kChunkThreads) {
      const int r = idx / (kMaxDk / 4), i = 4 * (idx % (kMaxDk / 4));
      *reinterpret_cast<float4*>(w_out + r * kMaxDk + i) = *reinterpret_cast<const float4*>(Xs + r * kXs + i);
    }
    if (tid < kWin) ws[lay.g_off() + rec * kWin + tid] = gam[tid];
  } else {
    float* u_out = ws + lay.u_off() + rec * kWin * lay.dvp + c0;
    for (int idx = tid; idx < kWin * kPadDv / 4; idx += kChunkThreads) {
      const int r = idx / (kPadDv / 4), j = 4 * (idx % (kPadDv / 4));
      *reinterpret_cast<float4*>(u_out + r * lay.dvp + j) = *reinterpret_cast<const float4*>(Xs + r * kXs + j);
    }
  }
}

// ---- pass 2: the state recurrence (grid: dv tiles of kCols, Hv, sequences) ------------------------------
// A block carries its tile of S [dk, kCols] through the sequence's segments in order. Per segment it
// needs W, U's tile and γ first (Vnew = U − W S), then e^γ Q̃, QK and e^{γ_L−γ} K̂ (O and the state
// update); rows outside the segment load as zeros. Copies are asynchronous and overlap the products:
// e^γ Q̃, QK, K̂ land during Vnew; the next segment's W, U and γ (U and γ double-buffered: this
// segment's Vnew lives in U) during O and the state update.
constexpr int kScanThreads = 512;  // 16 warps: the products' latencies overlap (one block per SM)

template <int kCols>
struct ScanLayout {
  static constexpr int kSs = kCols + 8;  // B operands (row k = lane % 4, column lane / 4): 32 banks
  static constexpr int kUs = kCols + 8;
  static constexpr int kOffS = 0;
  static constexpr int kOffW = kOffS + kMaxDk * kSs;
  static constexpr int kOffQ = kOffW + kWin * kKs;
  static constexpr int kOffK = kOffQ + kWin * kKs;
  static constexpr int kOffU = kOffK + kWin * kKs;     // two buffers
  static constexpr int kOffQK = kOffU + 2 * kWin * kUs;
  static constexpr int kOffG = kOffQK + kWin * kMs;    // two buffers
  static constexpr size_t kSmemBytes = sizeof(float) * (kOffG + 2 * kWin);
  static_assert(kOffW % 4 == 0 && kOffU % 4 == 0 && kOffQK % 4 == 0 && kOffG % 4 == 0, "16-byte rows");
};

template <int kCols>
__global__ void __launch_bounds__(kScanThreads, 1) gdn_split_scan_kernel(const GdnArgs p, SplitLayout lay,
                                                                         const float* __restrict__ ws) {
  using L = ScanLayout<kCols>;
  constexpr int kSs = L::kSs, kUs = L::kUs, kC4 = kCols / 4;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  float* Ss = sm + L::kOffS;
  float* Ws = sm + L::kOffW;
  float* Qs = sm + L::kOffQ;
  float* Ks = sm + L::kOffK;
  float* QKs = sm + L::kOffQK;

  const int s = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int64_t begin = p.cu_seqlens[s], end = p.cu_seqlens[s + 1];
  if (end - begin <= kGdnRecurrentMaxLen) return;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int j0 = static_cast<int>(blockIdx.x) * kCols;
  const auto [slot_ok, init, st] = head_state(p, s, h);  // st: this head's state
  const int dk8 = (p.dk + 7) & ~7;
  bf16* out = static_cast<bf16*>(p.out);

  // The segment starting at row c0 of the sequence: its window, and its rows [r0, r1) there.
  auto segment = [&](int64_t c0, int64_t& w, int& r0, int& r1) {
    w = c0 / kWin;
    r0 = static_cast<int>(c0 - w * kWin);
    r1 = static_cast<int>(min(end, (w + 1) * kWin) - w * kWin);
  };
  auto load_wu = [&](int64_t c0, int buf) {  // W, U's tile, γ of the segment at c0 into buffer `buf`
    int64_t w;
    int r0, r1;
    segment(c0, w, r0, r1);
    const int64_t rec = w * p.hv + h;
    const float* wg = ws + lay.w_off() + rec * kWin * kMaxDk;
    for (int idx = tid; idx < kWin * kMaxDk / 4; idx += kScanThreads) {
      const int r = idx / (kMaxDk / 4), i = 4 * (idx % (kMaxDk / 4));
      cp_async16(Ws + r * kKs + i, wg + r * kMaxDk + i, r >= r0 && r < r1);
    }
    float* us = sm + L::kOffU + buf * kWin * kUs;
    const float* ug = ws + lay.u_off() + rec * kWin * lay.dvp + j0;
    for (int idx = tid; idx < kWin * kC4; idx += kScanThreads) {
      const int r = idx / kC4, c = 4 * (idx % kC4);
      cp_async16(us + r * kUs + c, ug + r * lay.dvp + c, r >= r0 && r < r1);
    }
    if (tid < kWin / 4)
      cp_async16(sm + L::kOffG + buf * kWin + 4 * tid, ws + lay.g_off() + rec * kWin + 4 * tid, true);
  };
  auto load_qk = [&](int64_t c0) {  // e^γ Q̃, QK, e^{γ_L−γ} K̂ of the segment at c0
    int64_t w;
    int r0, r1;
    segment(c0, w, r0, r1);
    const int64_t rec = w * p.hv + h;
    const float* qg = ws + lay.q_off() + rec * kWin * kMaxDk;
    const float* kg = ws + lay.k_off() + rec * kWin * kMaxDk;
    for (int idx = tid; idx < kWin * kMaxDk / 4; idx += kScanThreads) {
      const int r = idx / (kMaxDk / 4), i = 4 * (idx % (kMaxDk / 4));
      const bool in = r >= r0 && r < r1;
      cp_async16(Qs + r * kKs + i, qg + r * kMaxDk + i, in);
      cp_async16(Ks + r * kKs + i, kg + r * kMaxDk + i, in);
    }
    const float* qkg = ws + lay.qk_off() + rec * kWin * kWin;
    for (int idx = tid; idx < kWin * kWin / 4; idx += kScanThreads) {
      const int r = idx / (kWin / 4), c = 4 * (idx % (kWin / 4));
      cp_async16(QKs + r * kMs + c, qkg + r * kWin + c, r >= r0 && r < r1);
    }
  };

  load_wu(begin, 0);
  cp_async_commit();
  for (int idx = tid; idx < kMaxDk * kC4; idx += kScanThreads) {
    const int i = idx / kC4, c = 4 * (idx % kC4);
    float4 v = f4(0.0f);
    if (init && i < p.dk && j0 + c < p.dv) v = load_state4(p, st + static_cast<int64_t>(i) * p.dv + j0 + c);
    *reinterpret_cast<float4*>(Ss + i * kSs + c) = v;
  }

  // Vnew and O: 16 x 8 tiles, 4 rows of them by kCols / 8; warp w takes row w % 4 and NT tiles of one row
  // (kCols = 16 leaves half the warps idle there).
  constexpr int NT = kCols >= 32 ? kCols / 32 : 1;
  const int m0 = 16 * (warp & 3), n0 = (warp >> 2) * 8 * NT;
  const bool tile_warp = n0 < kCols;
  int buf = 0;
  for (int64_t c0 = begin; c0 < end; buf ^= 1) {
    int64_t w;
    int r0, r1;
    segment(c0, w, r0, r1);
    const int64_t next = w * kWin + r1;
    float* Us = sm + L::kOffU + buf * kWin * kUs;
    const float* gl = sm + L::kOffG + buf * kWin;
    __syncthreads();  // the previous segment is done with Q̃, QK, K̂ (and the state is written)
    load_qk(c0);
    cp_async_commit();
    cp_async_wait<1>();  // this segment's W, U, γ
    __syncthreads();

    // Vnew = U − W S (rows outside the segment stay 0).
    if (tile_warp) {
      float acc[1][NT][4];
      zero_acc(acc);
      warp_mma(acc, m0, n0, dk8, [&](int r, int k) { return Ws[r * kKs + k]; },
               [&](int k, int c) { return Ss[k * kSs + c]; }, lane);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) Us[acc_row(m0, 0, e, lane) * kUs + acc_col(n0, j, e, lane)] -= acc[0][j][e];
    }
    __syncthreads();  // W is free, Vnew complete
    if (next < end) load_wu(next, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // this segment's Q̃, QK, K̂
    __syncthreads();

    // O = (e^γ Q̃) S + QK Vnew, one TF32 pass (it only feeds the bf16 output): the segment's rows to global.
    if (tile_warp) {
      float acc[1][NT][4];
      zero_acc(acc);
      warp_mma_tf32(acc, m0, n0, dk8, [&](int r, int k) { return Qs[r * kKs + k]; },
                    [&](int k, int c) { return Ss[k * kSs + c]; }, lane);
      warp_mma_tf32(acc, m0, n0, kWin, [&](int r, int c) { return QKs[r * kMs + c]; },
                    [&](int c, int j) { return Us[c * kUs + j]; }, lane);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = acc_row(m0, 0, e, lane), c = acc_col(n0, j, e, lane);
          if (r >= r0 && r < r1 && j0 + c < p.dv)
            out[(w * kWin + r) * p.out_stride + static_cast<int64_t>(h) * p.dv + j0 + c] = from_f32<bf16>(acc[0][j][e]);
        }
    }
    __syncthreads();  // S is read; now it is rewritten

    // S ← e^{γ_L} S + (e^{γ_L−γ} K̂)ᵀ Vnew. Warp w: state rows 16 (w % 8) .., half of the tile's columns.
    {
      constexpr int NS = kCols / 16;
      const int s0 = 16 * (warp & 7), c0s = (warp >> 3) * (kCols / 2);
      const float el = expf(gl[r1 - 1]);
      float acc[1][NS][4];
#pragma unroll
      for (int j = 0; j < NS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][j][e] = el * Ss[acc_row(s0, 0, e, lane) * kSs + acc_col(c0s, j, e, lane)];
      warp_mma(acc, s0, c0s, kWin, [&](int i, int r) { return Ks[r * kKs + i]; },
               [&](int r, int j) { return Us[r * kUs + j]; }, lane);
#pragma unroll
      for (int j = 0; j < NS; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) Ss[acc_row(s0, 0, e, lane) * kSs + acc_col(c0s, j, e, lane)] = acc[0][j][e];
    }
    c0 = next;
  }

  cp_async_wait<0>();
  __syncthreads();
  if (!slot_ok) return;
  for (int idx = tid; idx < kMaxDk * kC4; idx += kScanThreads) {
    const int i = idx / kC4, c = 4 * (idx % kC4);
    if (i < p.dk && j0 + c < p.dv)
      store_state4(p, st + static_cast<int64_t>(i) * p.dv + j0 + c, *reinterpret_cast<const float4*>(Ss + i * kSs + c));
  }
}

template <int kCols>
void launch_scan(const GdnArgs& p, int nseq, const SplitLayout& lay, size_t max_smem_optin, const float* ws,
                 cudaStream_t stream) {
  auto* kernel = &gdn_split_scan_kernel<kCols>;
  constexpr size_t smem = ScanLayout<kCols>::kSmemBytes;
  static std::atomic<uint64_t> opted_in{0};
  opt_in_shared_memory(reinterpret_cast<const void*>(kernel), smem, max_smem_optin, opted_in,
                       "gated_delta_rule (chunked, state pass)");
  const dim3 grid(static_cast<unsigned>((p.dv + kCols - 1) / kCols), static_cast<unsigned>(p.hv),
                  static_cast<unsigned>(nseq));
  kernel<<<grid, kScanThreads, smem, stream>>>(p, lay, ws);
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool launch_chunk_split_bf16(const GdnArgs& p, int nseq, int64_t rows, int num_sms, size_t max_smem_optin,
                             void* scratch, cudaStream_t stream) {
  const int cols = chunk_cols_for(p.dv, p.hv, nseq, num_sms);
  const size_t scan_smem = cols == 64 ? ScanLayout<64>::kSmemBytes
                           : cols == 32 ? ScanLayout<32>::kSmemBytes
                                        : ScanLayout<16>::kSmemBytes;
  if (std::max(scan_smem, kPrepSmemBytes) > max_smem_optin) return false;
  const SplitLayout lay = split_layout(rows, p.hv, p.dv);
  auto* ws = static_cast<float*>(scratch);
  {
    auto* kernel = &gdn_split_prepare_kernel<bf16>;
    static std::atomic<uint64_t> opted_in{0};
    opt_in_shared_memory(reinterpret_cast<const void*>(kernel), kPrepSmemBytes, max_smem_optin, opted_in,
                         "gated_delta_rule (chunked, window pass)");
    const dim3 grid(static_cast<unsigned>((rows + kWin - 1) / kWin), static_cast<unsigned>(p.hv),
                    static_cast<unsigned>(1 + lay.dvp / kPadDv));
    kernel<<<grid, kChunkThreads, kPrepSmemBytes, stream>>>(p, nseq, lay, ws);
    PAGODA_CUDA_CHECK_LAUNCH();
  }
  if (cols == 64) launch_scan<64>(p, nseq, lay, max_smem_optin, ws, stream);
  else if (cols == 32) launch_scan<32>(p, nseq, lay, max_smem_optin, ws, stream);
  else launch_scan<16>(p, nseq, lay, max_smem_optin, ws, stream);
  return true;
}

}  // namespace gdn

size_t gdn_chunk_split_scratch_bytes(int64_t rows, int64_t hv, int64_t dv) {
  return static_cast<size_t>(gdn::split_layout(rows, hv, dv).floats()) * sizeof(float);
}

bool gdn_chunk_split_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("PAGODA_GDN_SPLIT");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

}  // namespace pagoda::cuda

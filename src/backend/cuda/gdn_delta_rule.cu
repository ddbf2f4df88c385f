// The gated delta rule (docs/models.md, Gated DeltaNet steps 4-6) over a varlen step: a recurrent kernel
// for sequences with few new tokens (decodes) and a chunked kernel (chunk 64, fp32; its products on tensor
// cores in 3xTF32 for bf16 activations) for prefill chunks. Both run over every sequence of the step and
// skip those of the other kind, so a mixed step needs no host knowledge of the lengths. State
// [slots, Hv, dk, dv] fp32 (or bf16, --mamba-ssm-cache-dtype: widened on load, rounded on store) is
// read and written in place at each sequence's slot (zero start where has_initial_state is 0).
//
// Per token and value head h (key head h / (Hv / Hk)), all fp32:
//   k̂ = k / sqrt(Σk² + 1e-6), q̃ = q / sqrt(Σq² + 1e-6) / sqrt(dk), β = sigmoid(b) (held in the
//   activation dtype, as the reference's bf16 tensor), g = -exp(A_log) softplus(a + dt_bias);
//   S ← e^g S;  δ = β (v − Sᵀk̂);  S ← S + k̂ δᵀ;  o = Sᵀq̃.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/gdn_common.cuh"
#include "backend/cuda/gdn_kernels.cuh"

namespace pagoda::cuda {
namespace {

using namespace gdn;  // NOLINT: the kernels' shared helpers

// ---- recurrent kernel (decodes) ---------------------------------------------------------------------

// Block = (dv tile of 32 columns, value head, sequence); 128 threads. Thread (rg = tid / 8, cg = tid % 8)
// holds the state rows rg + 16 m (m < 8) of columns 4 cg .. 4 cg + 3 in registers: a warp reads four
// full 128-byte row segments per access. Per token one block-wide reduction yields both Sᵀk̂ and Sᵀq̃;
// then δ = β (v − e^g Sᵀk̂), o = e^g Sᵀq̃ + δ (k̂·q̃) and S ← e^g S + k̂ δᵀ.
constexpr int kRecThreads = 128;
constexpr int kRecCols = 32;
constexpr int kRecRowGroups = kRecThreads / (kRecCols / 4);  // 16
constexpr int kRecRows = kMaxDk / kRecRowGroups;             // 8

template <typename T>
__global__ void __launch_bounds__(kRecThreads) gdn_recurrent_kernel(const GdnArgs p) {
  const int s = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int64_t begin = p.cu_seqlens[s];
  const int len = p.cu_seqlens[s + 1] - static_cast<int>(begin);
  if (len <= 0 || len > kGdnRecurrentMaxLen) return;
  const int kh = h / p.group;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int cg = tid & 7, rg = tid >> 3;
  const int col = static_cast<int>(blockIdx.x) * kRecCols + cg * 4;
  const bool col_ok = col < p.dv;  // dv % 4 == 0: a group of 4 columns is all in or all out
  const auto [slot_ok, init, st] = head_state(p, s, h);  // st: this head's state

  float4 S[kRecRows];
#pragma unroll
  for (int m = 0; m < kRecRows; ++m) {
    const int i = rg + m * kRecRowGroups;
    S[m] = (init && col_ok && i < p.dk) ? load_state4(p, st + static_cast<int64_t>(i) * p.dv + col)
                                        : f4(0.0f);
  }

  __shared__ float kn[kMaxDk], qn[kMaxDk], vt[kRecCols];
  __shared__ float scal[4];              // β, e^g, k̂·q̃
  __shared__ float4 red[4][8][2];        // [warp][cg][Sᵀk̂, Sᵀq̃] partial sums
  T* out = static_cast<T*>(p.out);

  for (int t = 0; t < len; ++t) {
    const int64_t row = begin + t;
    __syncthreads();  // the previous token's readers of kn, qn, vt, scal, red are done
    if (warp == 0) {
      float qv[4], kv[4];
      const float kq = load_qk_normed<T>(p, row, kh, qv, kv);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        qn[lane + 32 * e] = qv[e];
        kn[lane + 32 * e] = kv[e];
      }
      if (lane == 0) scal[2] = kq;
    } else if (warp == 1) {
      const int j = static_cast<int>(blockIdx.x) * kRecCols + lane;
      vt[lane] = j < p.dv ? to_f32(static_cast<const T*>(p.v)[row * p.v_stride + static_cast<int64_t>(h) * p.dv + j])
                          : 0.0f;
      if (lane == 0) {
        float beta, g;
        beta_and_g<T>(p, row, h, beta, g);
        scal[0] = beta;
        scal[1] = expf(g);
      }
    }
    __syncthreads();
    float4 pk = f4(0.0f), pq = f4(0.0f);
#pragma unroll
    for (int m = 0; m < kRecRows; ++m) {
      const int i = rg + m * kRecRowGroups;
      fma4(pk, kn[i], S[m]);
      fma4(pq, qn[i], S[m]);
    }
    // Sum the warp's four row groups (lane bits 3 and 4), then the four warps through shared memory.
#pragma unroll
    for (int o = 8; o <= 16; o <<= 1) {
      pk.x += __shfl_xor_sync(0xffffffffu, pk.x, o);
      pk.y += __shfl_xor_sync(0xffffffffu, pk.y, o);
      pk.z += __shfl_xor_sync(0xffffffffu, pk.z, o);
      pk.w += __shfl_xor_sync(0xffffffffu, pk.w, o);
      pq.x += __shfl_xor_sync(0xffffffffu, pq.x, o);
      pq.y += __shfl_xor_sync(0xffffffffu, pq.y, o);
      pq.z += __shfl_xor_sync(0xffffffffu, pq.z, o);
      pq.w += __shfl_xor_sync(0xffffffffu, pq.w, o);
    }
    if (lane < 8) {
      red[warp][cg][0] = pk;
      red[warp][cg][1] = pq;
    }
    __syncthreads();
    float4 sk = f4(0.0f), sq = f4(0.0f);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float4 a = red[w][cg][0], b = red[w][cg][1];
      sk.x += a.x, sk.y += a.y, sk.z += a.z, sk.w += a.w;
      sq.x += b.x, sq.y += b.y, sq.z += b.z, sq.w += b.w;
    }
    const float beta = scal[0], decay = scal[1], kq = scal[2];
    float4 delta, o;
    delta.x = beta * (vt[cg * 4 + 0] - decay * sk.x);
    delta.y = beta * (vt[cg * 4 + 1] - decay * sk.y);
    delta.z = beta * (vt[cg * 4 + 2] - decay * sk.z);
    delta.w = beta * (vt[cg * 4 + 3] - decay * sk.w);
    o.x = fmaf(decay, sq.x, delta.x * kq);
    o.y = fmaf(decay, sq.y, delta.y * kq);
    o.z = fmaf(decay, sq.z, delta.z * kq);
    o.w = fmaf(decay, sq.w, delta.w * kq);
#pragma unroll
    for (int m = 0; m < kRecRows; ++m) {
      const float kk = kn[rg + m * kRecRowGroups];
      S[m].x = fmaf(decay, S[m].x, kk * delta.x);
      S[m].y = fmaf(decay, S[m].y, kk * delta.y);
      S[m].z = fmaf(decay, S[m].z, kk * delta.z);
      S[m].w = fmaf(decay, S[m].w, kk * delta.w);
    }
    if (rg == 0 && col_ok) {
      T* orow = out + row * p.out_stride + static_cast<int64_t>(h) * p.dv + col;
      orow[0] = from_f32<T>(o.x);
      orow[1] = from_f32<T>(o.y);
      orow[2] = from_f32<T>(o.z);
      orow[3] = from_f32<T>(o.w);
    }
  }

  if (!slot_ok || !col_ok) return;
#pragma unroll
  for (int m = 0; m < kRecRows; ++m) {
    const int i = rg + m * kRecRowGroups;
    if (i < p.dk) store_state4(p, st + static_cast<int64_t>(i) * p.dv + col, S[m]);
  }
}

// ---- chunked kernel (prefill) -------------------------------------------------------------------------

// Block = (dv tile of 64, 32 or 16 columns (chunk_cols_for), value head, sequence); 256 threads; the
// sequence's chunks of 64 tokens in order, carrying the state tile S [dk, tile] in shared memory. Per chunk (γ = cumsum g,
// rows past the chunk's end padded with β = g = 0 and zero q, k, v):
//   A  = strictly lower β_r e^{γ_r−γ_s} k̂_r·k̂_s          QK = lower e^{γ_r−γ_s} q̃_r·k̂_s
//   R  = β ⊙ (V − e^γ ⊙ (K̂ S))                          Vnew = (I + A)⁻¹ R  (forward substitution)
//   O  = e^γ ⊙ (Q̃ S) + QK · Vnew                        S ← e^{γ_L} S + (e^{γ_L−γ} ⊙ K̂)ᵀ Vnew
// (Vnew = U − W S of docs/models.md with U and W folded: (I+A)⁻¹ (β V − β e^γ K̂ S).) The K̂ K̂ᵀ and Q̃ K̂ᵀ
// products are recomputed by each dv tile of a head. Plain fp32 FMA; matmuls with 4x4 (or 8x4)
// register tiles over float4 shared-memory reads.
// For bf16 activations (kTc) the products run on tensor cores in 3xTF32 (warp_mma) and (3) goes by
// blocks of 16 rows: 1.16x on the Qwen3.5-9B prefill shape (docs/benchmarks.md, 2026-11-28); the
// forward substitution and the loads, not the products, hold the rest of the time.

// The shared-memory layout and thread layout of a dv tile of kCols columns (64, 32 or 16). In the
// column-dependent steps thread (tq, tc) owns columns 4 tc .. 4 tc + 3 of rows tq + kRowGroups m.
template <int kCols>
struct ChunkLayout {
  static_assert(kCols == 64 || kCols == 32 || kCols == 16, "dv tiles of 64, 32 or 16 columns");
  static constexpr int kColGroups = kCols / 4;
  static constexpr int kRowGroups = kChunkThreads / kColGroups;  // 16, 32, 64
  static constexpr int kChunkRows = kChunk / kRowGroups;         // rows of a chunk tile per thread
  static constexpr int kStateRows = kMaxDk / kRowGroups;         // rows of the state tile per thread
  static constexpr int kParts = kChunkThreads / kCols;           // lanes per column in the substitution
  static constexpr int kSs = kCols + 4;  // row stride of the state tile
  static constexpr int kVs = kCols + 8;  // row stride of V / R / Vnew (forward substitution: conflict-free)
  static constexpr int kOffK = 0;
  static constexpr int kOffQ = kOffK + kChunk * kKs;
  static constexpr int kOffS = kOffQ + kChunk * kKs;
  static constexpr int kOffV = kOffS + kMaxDk * kSs;
  static constexpr int kOffA = kOffV + kChunk * kVs;
  static constexpr int kOffQK = kOffA + kChunk * kMs;
  static constexpr int kOffGam = kOffQK + kChunk * kMs;  // γ (cumulative g)
  static constexpr int kOffBeta = kOffGam + kChunk;      // β
  static constexpr int kOffEg = kOffBeta + kChunk;       // e^γ
  static constexpr int kOffEnd = kOffEg + kChunk;        // e^{γ_L − γ}
  static constexpr int kOffMisc = kOffEnd + kChunk;      // [0] = e^{γ_L}
  static constexpr size_t kSmemBytes = sizeof(float) * (kOffMisc + 4);
  static_assert(kOffQ % 4 == 0 && kOffS % 4 == 0 && kOffV % 4 == 0 && kOffA % 4 == 0 && kOffQK % 4 == 0,
                "float4 alignment of the shared-memory arrays");
  static_assert(kChunkRows >= 1 && kParts <= 32 && (kParts & (kParts - 1)) == 0, "thread layouts");
};


template <typename T, int kCols, bool kTc>
__global__ void __launch_bounds__(kChunkThreads, 1) gdn_chunk_kernel(const GdnArgs p) {
  using L = ChunkLayout<kCols>;
  constexpr int RG = L::kRowGroups, kSs = L::kSs, kVs = L::kVs;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  float* Ks = sm + L::kOffK;
  float* Qs = sm + L::kOffQ;
  float* Ss = sm + L::kOffS;
  float* Vs = sm + L::kOffV;
  float* As = sm + L::kOffA;
  float* QKs = sm + L::kOffQK;
  float* gam = sm + L::kOffGam;
  float* bet = sm + L::kOffBeta;
  float* eg = sm + L::kOffEg;
  float* eend = sm + L::kOffEnd;
  float* misc = sm + L::kOffMisc;

  const int s = static_cast<int>(blockIdx.z), h = static_cast<int>(blockIdx.y);
  const int64_t begin = p.cu_seqlens[s];
  const int len = p.cu_seqlens[s + 1] - static_cast<int>(begin);
  if (len <= kGdnRecurrentMaxLen) return;
  const int kh = h / p.group;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int tq = tid / L::kColGroups, tc = tid % L::kColGroups;  // row group, column group
  const int j0 = static_cast<int>(blockIdx.x) * kCols;
  const int colg = j0 + 4 * tc;            // this thread's first global dv column in 4-column layouts
  const bool col_ok = colg < p.dv;         // dv % 4 == 0
  const auto [slot_ok, init, st] = head_state(p, s, h);  // st: this head's state
  const int dk4 = (p.dk + 3) & ~3;
  const int dk8 = (p.dk + 7) & ~7;  // K̂, Q̃ and S are zero past dk up to kMaxDk
  const T* vg = static_cast<const T*>(p.v);
  T* out = static_cast<T*>(p.out);

  // The state tile, rows tq + RG m, columns 4 tc..: each thread owns these elements in the
  // state update too, so loads and the final store need no barrier of their own.
#pragma unroll
  for (int m = 0; m < L::kStateRows; ++m) {
    const int i = tq + RG * m;
    float4 v = f4(0.0f);
    if (init && col_ok && i < p.dk) v = load_state4(p, st + static_cast<int64_t>(i) * p.dv + colg);
    *reinterpret_cast<float4*>(Ss + i * kSs + 4 * tc) = v;
  }

  for (int c0 = 0; c0 < len; c0 += kChunk) {
    const int n = min(kChunk, len - c0);
    __syncthreads();  // the previous chunk is done with every array

    // (1) K̂, Q̃ rows (one warp per row), the V tile, β and γ.
    for (int r = warp; r < kChunk; r += kChunkThreads / 32) {
      float qv[4] = {0.0f, 0.0f, 0.0f, 0.0f}, kv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (r < n) load_qk_normed<T>(p, begin + c0 + r, kh, qv, kv);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        Ks[r * kKs + lane + 32 * e] = kv[e];
        Qs[r * kKs + lane + 32 * e] = qv[e];
      }
    }
    for (int idx = tid; idx < kChunk * kCols; idx += kChunkThreads) {
      const int r = idx / kCols, j = idx % kCols;
      float v = 0.0f;
      if (r < n && j0 + j < p.dv)
        v = to_f32(vg[(begin + c0 + r) * p.v_stride + static_cast<int64_t>(h) * p.dv + j0 + j]);
      Vs[r * kVs + j] = v;
    }
    if (warp == 0) {
      // Rows 2 lane and 2 lane + 1: β, g, then an inclusive scan of g over the chunk.
      float b2[2] = {0.0f, 0.0f}, g2[2] = {0.0f, 0.0f};
#pragma unroll
      for (int e = 0; e < 2; ++e)
        if (2 * lane + e < n) beta_and_g<T>(p, begin + c0 + 2 * lane + e, h, b2[e], g2[e]);
      const float pair = g2[0] + g2[1];
      float incl = pair;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float up = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += up;
      }
      const float total = __shfl_sync(0xffffffffu, incl, 31);  // γ_L: padded rows add nothing
      const float gm[2] = {incl - pair + g2[0], incl};
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = 2 * lane + e;
        gam[r] = gm[e];
        bet[r] = b2[e];
        eg[r] = expf(gm[e]);
        eend[r] = expf(total - gm[e]);
      }
      if (lane == 0) misc[0] = expf(total);
    }
    __syncthreads();

    // (2a) A and QK, whatever the dv tile: thread (aq, ac) computes rows aq + 16 m, columns ac + 16 n.
    if constexpr (kTc) {
      // Warp w: rows 16 (w / 2) .., columns 32 (w % 2) ..; both products share K̂ᵀ's fragments.
      const int m0 = 16 * (warp >> 1), n0 = 32 * (warp & 1);
      float acc_a[1][4][4], acc_q[1][4][4];
      zero_acc(acc_a);
      zero_acc(acc_q);
      const int g = lane >> 2, t = lane & 3;
      for (int k0 = 0; k0 < dk8; k0 += 8) {
        Tf32x2 ka[4], qa[4], kb[4][2];
        const int r = m0 + g;
        ka[0] = split_tf32(Ks[r * kKs + k0 + t]), ka[1] = split_tf32(Ks[(r + 8) * kKs + k0 + t]);
        ka[2] = split_tf32(Ks[r * kKs + k0 + t + 4]), ka[3] = split_tf32(Ks[(r + 8) * kKs + k0 + t + 4]);
        qa[0] = split_tf32(Qs[r * kKs + k0 + t]), qa[1] = split_tf32(Qs[(r + 8) * kKs + k0 + t]);
        qa[2] = split_tf32(Qs[r * kKs + k0 + t + 4]), qa[3] = split_tf32(Qs[(r + 8) * kKs + k0 + t + 4]);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = n0 + 8 * j + g;
          kb[j][0] = split_tf32(Ks[c * kKs + k0 + t]);
          kb[j][1] = split_tf32(Ks[c * kKs + k0 + t + 4]);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          mma_3xtf32(acc_a[0][j], ka, kb[j]);
          mma_3xtf32(acc_q[0][j], qa, kb[j]);
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = acc_row(m0, 0, e, lane), c = acc_col(n0, j, e, lane);
          const float dec = c <= r ? expf(gam[r] - gam[c]) : 0.0f;
          As[r * kMs + c] = c < r ? bet[r] * dec * acc_a[0][j][e] : 0.0f;
          QKs[r * kMs + c] = dec * acc_q[0][j][e];
        }
    } else {
      const int aq = tid >> 4, ac = tid & 15;
      float acc_a[4][4], acc_q[4][4];
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int n2 = 0; n2 < 4; ++n2) acc_a[m][n2] = acc_q[m][n2] = 0.0f;
      for (int i = 0; i < dk4; i += 4) {
        float4 kr[4], qr[4], kc[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          kr[m] = *reinterpret_cast<const float4*>(Ks + (aq + 16 * m) * kKs + i);
          qr[m] = *reinterpret_cast<const float4*>(Qs + (aq + 16 * m) * kKs + i);
          kc[m] = *reinterpret_cast<const float4*>(Ks + (ac + 16 * m) * kKs + i);
        }
#pragma unroll
        for (int m = 0; m < 4; ++m)
#pragma unroll
          for (int n2 = 0; n2 < 4; ++n2) {
            acc_a[m][n2] += dot4(kr[m], kc[n2]);
            acc_q[m][n2] += dot4(qr[m], kc[n2]);
          }
      }
#pragma unroll
      for (int m = 0; m < 4; ++m)
#pragma unroll
        for (int n2 = 0; n2 < 4; ++n2) {
          const int r = aq + 16 * m, c = ac + 16 * n2;
          const float dec = c <= r ? expf(gam[r] - gam[c]) : 0.0f;
          As[r * kMs + c] = c < r ? bet[r] * dec * acc_a[m][n2] : 0.0f;
          QKs[r * kMs + c] = dec * acc_q[m][n2];
        }
    }

    // (2b) R = β ⊙ (V − e^γ ⊙ (K̂ S)) in place of V: rows tq + RG m, columns 4 tc .. 4 tc + 3.
    if constexpr (kTc) {
      // Warp w: rows 16 (w / 2) .., columns (w % 2) kCols / 2 ..
      constexpr int NT = kCols / 16;
      const int m0 = 16 * (warp >> 1), n0 = (warp & 1) * (kCols / 2);
      float acc[1][NT][4];
      zero_acc(acc);
      warp_mma(acc, m0, n0, dk8, [&](int r, int k) { return Ks[r * kKs + k]; },
               [&](int k, int c) { return Ss[k * kSs + c]; }, lane);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = acc_row(m0, 0, e, lane), c = acc_col(n0, j, e, lane);
          float& v = Vs[r * kVs + c];
          v = bet[r] * (v - eg[r] * acc[0][j][e]);
        }
    } else {
      float4 acc[L::kChunkRows];
#pragma unroll
      for (int m = 0; m < L::kChunkRows; ++m) acc[m] = f4(0.0f);
      for (int i = 0; i < dk4; i += 4) {
        float4 sr[4], kr[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) sr[u] = *reinterpret_cast<const float4*>(Ss + (i + u) * kSs + 4 * tc);
#pragma unroll
        for (int m = 0; m < L::kChunkRows; ++m) kr[m] = *reinterpret_cast<const float4*>(Ks + (tq + RG * m) * kKs + i);
#pragma unroll
        for (int m = 0; m < L::kChunkRows; ++m) {
          fma4(acc[m], kr[m].x, sr[0]);
          fma4(acc[m], kr[m].y, sr[1]);
          fma4(acc[m], kr[m].z, sr[2]);
          fma4(acc[m], kr[m].w, sr[3]);
        }
      }
#pragma unroll
      for (int m = 0; m < L::kChunkRows; ++m) {
        const int r = tq + RG * m;
        const float e = eg[r], b = bet[r];
        float4* vp = reinterpret_cast<float4*>(Vs + r * kVs + 4 * tc);
        float4 v = *vp;
        v.x = b * (v.x - e * acc[m].x);
        v.y = b * (v.y - e * acc[m].y);
        v.z = b * (v.z - e * acc[m].z);
        v.w = b * (v.w - e * acc[m].w);
        *vp = v;
      }
    }
    __syncthreads();

    // (3) Vnew = (I + A)⁻¹ R by forward substitution, each column independent: P lanes per column
    // share the sum over s (s ≡ part mod P); row s of the column is written and later read by the
    // same lane (part = s mod P), so only the P-lane sum needs the shuffles. Rows past n stay 0.
    if constexpr (kTc) {
      // By blocks of 16 rows: what the rows above a block contribute is one product on tensor cores,
      // then the block's own rows are substituted in order (a chain of 15 short steps, not 63 long ones).
      constexpr int P = L::kParts;
      const int col = tid / P, part = tid % P;
      for (int b0 = 0; b0 < n; b0 += 16) {
        if (b0 > 0) {
          if (warp < kCols / 8) {
            float acc[1][1][4];
            zero_acc(acc);
            warp_mma(acc, b0, 8 * warp, b0, [&](int r, int s2) { return As[r * kMs + s2]; },
                     [&](int s2, int c) { return Vs[s2 * kVs + c]; }, lane);
#pragma unroll
            for (int e = 0; e < 4; ++e) Vs[acc_row(b0, 0, e, lane) * kVs + acc_col(8 * warp, 0, e, lane)] -= acc[0][0][e];
          }
          __syncthreads();
        }
        const int end = min(b0 + 16, n);
        for (int r = b0 + 1; r < end; ++r) {
          float acc = 0.0f;
          for (int s2 = b0 + part; s2 < r; s2 += P) acc = fmaf(As[r * kMs + s2], Vs[s2 * kVs + col], acc);
#pragma unroll
          for (int o = 1; o < P; o <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
          if (part == r % P) Vs[r * kVs + col] -= acc;
        }
        __syncthreads();
      }
    } else {
      constexpr int P = L::kParts;
      const int col = tid / P, part = tid % P;
      for (int r = 1; r < n; ++r) {
        float acc = 0.0f;
        for (int s2 = part; s2 < r; s2 += P) acc = fmaf(As[r * kMs + s2], Vs[s2 * kVs + col], acc);
#pragma unroll
        for (int o = 1; o < P; o <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (part == r % P) Vs[r * kVs + col] -= acc;
      }
    }
    __syncthreads();

    // (4) O = e^γ ⊙ (Q̃ S) + QK · Vnew: rows tq + RG m, columns 4 tc .. 4 tc + 3; to global.
    if constexpr (kTc) {
      constexpr int NT = kCols / 16;
      const int m0 = 16 * (warp >> 1), n0 = (warp & 1) * (kCols / 2);
      float acc[1][NT][4];
      zero_acc(acc);
      warp_mma(acc, m0, n0, dk8, [&](int r, int k) { return Qs[r * kKs + k]; },
               [&](int k, int c) { return Ss[k * kSs + c]; }, lane);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[0][j][e] *= eg[acc_row(m0, 0, e, lane)];
      // Rows of Vnew past n are 0, so the whole chunk's 64 columns of QK can be summed over.
      warp_mma(acc, m0, n0, kChunk, [&](int r, int c) { return QKs[r * kMs + c]; },
               [&](int c, int j) { return Vs[c * kVs + j]; }, lane);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = acc_row(m0, 0, e, lane), c = acc_col(n0, j, e, lane);
          if (r < n && j0 + c < p.dv)
            out[(begin + c0 + r) * p.out_stride + static_cast<int64_t>(h) * p.dv + j0 + c] = from_f32<T>(acc[0][j][e]);
        }
    } else {
      float4 acc[L::kChunkRows];
#pragma unroll
      for (int m = 0; m < L::kChunkRows; ++m) acc[m] = f4(0.0f);
      for (int i = 0; i < dk4; i += 4) {
        float4 sr[4], qr[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) sr[u] = *reinterpret_cast<const float4*>(Ss + (i + u) * kSs + 4 * tc);
#pragma unroll
        for (int m = 0; m < L::kChunkRows; ++m) qr[m] = *reinterpret_cast<const float4*>(Qs + (tq + RG * m) * kKs + i);
#pragma unroll
        for (int m = 0; m < L::kChunkRows; ++m) {
          fma4(acc[m], qr[m].x, sr[0]);
          fma4(acc[m], qr[m].y, sr[1]);
          fma4(acc[m], qr[m].z, sr[2]);
          fma4(acc[m], qr[m].w, sr[3]);
        }
      }
#pragma unroll
      for (int m = 0; m < L::kChunkRows; ++m) {
        const float e = eg[tq + RG * m];
        acc[m].x *= e, acc[m].y *= e, acc[m].z *= e, acc[m].w *= e;
      }
      const int n4 = (n + 3) & ~3;
      for (int c = 0; c < n4; c += 4) {
        float4 vr[4], qk[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) vr[u] = *reinterpret_cast<const float4*>(Vs + (c + u) * kVs + 4 * tc);
#pragma unroll
        for (int m = 0; m < L::kChunkRows; ++m) qk[m] = *reinterpret_cast<const float4*>(QKs + (tq + RG * m) * kMs + c);
#pragma unroll
        for (int m = 0; m < L::kChunkRows; ++m) {
          fma4(acc[m], qk[m].x, vr[0]);
          fma4(acc[m], qk[m].y, vr[1]);
          fma4(acc[m], qk[m].z, vr[2]);
          fma4(acc[m], qk[m].w, vr[3]);
        }
      }
      if (col_ok) {
#pragma unroll
        for (int m = 0; m < L::kChunkRows; ++m) {
          const int r = tq + RG * m;
          if (r < n) {
            T* orow = out + (begin + c0 + r) * p.out_stride + static_cast<int64_t>(h) * p.dv + colg;
            orow[0] = from_f32<T>(acc[m].x);
            orow[1] = from_f32<T>(acc[m].y);
            orow[2] = from_f32<T>(acc[m].z);
            orow[3] = from_f32<T>(acc[m].w);
          }
        }
      }
    }
    __syncthreads();  // (4) read S; (5) overwrites it

    // (5) S ← e^{γ_L} S + (e^{γ_L−γ} ⊙ K̂)ᵀ Vnew: rows tq + RG m, columns 4 tc .. 4 tc + 3.
    if constexpr (kTc) {
      // Warp w: state rows 16 w .. 16 w + 15, every column of the tile; each element is read (e^{γ_L} S)
      // and written by the thread that owns it.
      constexpr int NT = kCols / 8;
      const int m0 = 16 * warp;
      const float el = misc[0];
      float acc[1][NT][4];
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          acc[0][j][e] = el * Ss[acc_row(m0, 0, e, lane) * kSs + acc_col(0, j, e, lane)];
      warp_mma(acc, m0, 0, kChunk, [&](int i, int r) { return Ks[r * kKs + i]; },
               [&](int r, int j) { return eend[r] * Vs[r * kVs + j]; }, lane);
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) Ss[acc_row(m0, 0, e, lane) * kSs + acc_col(0, j, e, lane)] = acc[0][j][e];
    } else {
      const float el = misc[0];
      float4 acc[L::kStateRows];
#pragma unroll
      for (int m = 0; m < L::kStateRows; ++m) {
        const float4 v = *reinterpret_cast<const float4*>(Ss + (tq + RG * m) * kSs + 4 * tc);
        acc[m] = make_float4(el * v.x, el * v.y, el * v.z, el * v.w);
      }
      for (int r = 0; r < n; ++r) {
        const float e = eend[r];
        float4 vr = *reinterpret_cast<const float4*>(Vs + r * kVs + 4 * tc);
        vr.x *= e, vr.y *= e, vr.z *= e, vr.w *= e;
#pragma unroll
        for (int m = 0; m < L::kStateRows; ++m) fma4(acc[m], Ks[r * kKs + tq + RG * m], vr);
      }
#pragma unroll
      for (int m = 0; m < L::kStateRows; ++m)
        *reinterpret_cast<float4*>(Ss + (tq + RG * m) * kSs + 4 * tc) = acc[m];
    }
  }

  if constexpr (kTc) __syncthreads();  // (5) wrote the state in the warps' layout, not (tq, tc)'s
  if (!slot_ok || !col_ok) return;
#pragma unroll
  for (int m = 0; m < L::kStateRows; ++m) {
    const int i = tq + RG * m;
    if (i < p.dk)
      store_state4(p, st + static_cast<int64_t>(i) * p.dv + colg, *reinterpret_cast<const float4*>(Ss + i * kSs + 4 * tc));
  }
}

template <typename T, int kCols, bool kTc>
void launch_chunk_cols(const GdnArgs& a, dim3 grid, size_t max_smem_optin, cudaStream_t stream) {
  auto* kernel = &gdn_chunk_kernel<T, kCols, kTc>;
  constexpr size_t smem = ChunkLayout<kCols>::kSmemBytes;
  static std::atomic<uint64_t> opted_in{0};
  opt_in_shared_memory(reinterpret_cast<const void*>(kernel), smem, max_smem_optin, opted_in,
                       "gated_delta_rule (chunked)");
  kernel<<<grid, kChunkThreads, smem, stream>>>(a);
  PAGODA_CUDA_CHECK_LAUNCH();
}

// The chunk's products on tensor cores (3xTF32: fp32's accuracy) for bf16 activations; fp32 activations
// keep plain FMA, the form the token-exact comparisons with fp32 references were made with. PAGODA_GDN_TC=0 turns them off, to compare.
bool chunk_tensor_cores() {
  static const bool on = [] {
    const char* e = std::getenv("PAGODA_GDN_TC");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

template <typename T, int kCols>
void launch_chunk_tile(const GdnArgs& a, dim3 grid, size_t max_smem_optin, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, bf16>) {
    if (chunk_tensor_cores()) return launch_chunk_cols<T, kCols, true>(a, grid, max_smem_optin, stream);
  }
  launch_chunk_cols<T, kCols, false>(a, grid, max_smem_optin, stream);
}

template <typename T>
void launch_chunk(const GdnArgs& a, int nseq, int num_sms, size_t max_smem_optin, cudaStream_t stream) {
  const int cols = chunk_cols_for(a.dv, a.hv, nseq, num_sms);
  const dim3 grid(static_cast<unsigned>((a.dv + cols - 1) / cols), static_cast<unsigned>(a.hv),
                  static_cast<unsigned>(nseq));
  if (cols == 64) launch_chunk_tile<T, 64>(a, grid, max_smem_optin, stream);
  else if (cols == 32) launch_chunk_tile<T, 32>(a, grid, max_smem_optin, stream);
  else launch_chunk_tile<T, 16>(a, grid, max_smem_optin, stream);
}

void check_i32(const char* op, const Tensor& t, int64_t min_elems, const char* name) {
  require(t.dtype == DType::I32 && t.device == Device::CUDA && t.numel() >= min_elems && t.is_contiguous(), op,
          std::string("meta.") + name + " must be contiguous I32 on cuda with at least " +
              std::to_string(min_elems) + " entries, got " + shape_str(t));
}

bool is_float_dtype(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

}  // namespace

void launch_gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a,
                             const Tensor& A_log, const Tensor& dt_bias, Tensor& state, const StepMeta& meta,
                             Tensor& out, int num_sms, size_t max_smem_optin, void* split_scratch,
                             size_t split_scratch_bytes, cudaStream_t stream) {
  const char* op = "gated_delta_rule";
  require(q.ndim == 3 && k.ndim == 3 && v.ndim == 3, op,
          "q, k must be [T, Hk, dk] and v [T, Hv, dv], got " + shape_str(q) + ", " + shape_str(k) + ", " +
              shape_str(v));
  const int64_t t = q.shape[0], hk = q.shape[1], dk = q.shape[2], hv = v.shape[1], dv = v.shape[2];
  require(k.shape == q.shape && v.shape[0] == t, op,
          "k " + shape_str(k) + " and v " + shape_str(v) + " do not match q " + shape_str(q));
  require(hk > 0 && hv > 0 && hv % hk == 0, op,
          "value heads " + std::to_string(hv) + " must be a multiple of key heads " + std::to_string(hk));
  require(dk >= 1 && dk <= kMaxDk, op,
          "key head dim dk = " + std::to_string(dk) + " is not supported (CUDA limit: dk <= " +
              std::to_string(kMaxDk) + ")");
  require(dv >= 4 && dv % 4 == 0, op, "value head dim dv = " + std::to_string(dv) + " must be a multiple of 4");
  const DType act = q.dtype;
  require(k.dtype == act && v.dtype == act && b.dtype == act && a.dtype == act && out.dtype == act, op,
          "q, k, v, b, a and out must have one dtype");
  for (const Tensor* x : std::initializer_list<const Tensor*>{&q, &k, &v, &b, &a, &out, &A_log, &dt_bias, &state})
    require(x->device == Device::CUDA, op, "every tensor must be on cuda, got " + shape_str(*x));
  require(num_rows(b) == t && b.row_numel() == hv && num_rows(a) == t && a.row_numel() == hv, op,
          "b and a must be [T, Hv] = [" + std::to_string(t) + ", " + std::to_string(hv) + "], got " + shape_str(b) +
              " and " + shape_str(a));
  require(out.ndim == 3 && out.shape[0] == t && out.shape[1] == hv && out.shape[2] == dv, op,
          "out must be [T, Hv, dv], got " + shape_str(out));
  require(A_log.numel() == hv && dt_bias.numel() == hv && A_log.is_contiguous() && dt_bias.is_contiguous() &&
              is_float_dtype(A_log.dtype) && is_float_dtype(dt_bias.dtype),
          op, "A_log and dt_bias must be float [" + std::to_string(hv) + "], got " + shape_str(A_log) + " and " +
                  shape_str(dt_bias));
  require(state.ndim == 4 && (state.dtype == DType::F32 || state.dtype == DType::BF16) && state.shape[1] == hv &&
              state.shape[2] == dk && state.shape[3] == dv && state.is_contiguous() && aligned16(state.data),
          op, "state must be a contiguous, 16-byte aligned F32 or BF16 [slots, " + std::to_string(hv) + ", " +
                  std::to_string(dk) + ", " + std::to_string(dv) + "], got " + shape_str(state));
  const int nseq = meta.num_seqs;
  require(nseq >= 0 && nseq <= 65535, op, "num_seqs " + std::to_string(nseq) + " out of range (0..65535)");
  require(hv <= 65535, op, "too many value heads");
  require(meta.num_tokens <= t, op,
          "meta.num_tokens " + std::to_string(meta.num_tokens) + " exceeds the rows of q " + shape_str(q));
  if (t == 0 || nseq == 0 || meta.max_query_len <= 0) return;
  check_i32(op, meta.cu_seqlens_q, nseq + 1, "cu_seqlens_q");
  check_i32(op, meta.state_slots, nseq, "state_slots");
  check_i32(op, meta.has_initial_state, nseq, "has_initial_state");

  GdnArgs p{};
  p.q = q.data, p.k = k.data, p.v = v.data, p.b = b.data, p.a = a.data;
  p.q_stride = q.stride0(), p.k_stride = k.stride0(), p.v_stride = v.stride0();
  p.b_stride = b.stride0(), p.a_stride = a.stride0(), p.out_stride = out.stride0();
  p.a_log = A_log.data, p.dt_bias = dt_bias.data;
  p.a_log_dtype = static_cast<int>(A_log.dtype), p.dt_bias_dtype = static_cast<int>(dt_bias.dtype);
  p.state = state.data;
  p.state_bf16 = state.dtype == DType::BF16 ? 1 : 0;
  p.num_slots = state.shape[0];
  p.out = out.data;
  p.cu_seqlens = meta.cu_seqlens_q.ptr<int32_t>();
  p.state_slots = meta.state_slots.ptr<int32_t>();
  p.has_init = meta.has_initial_state.ptr<int32_t>();
  p.hk = static_cast<int>(hk), p.hv = static_cast<int>(hv), p.dk = static_cast<int>(dk), p.dv = static_cast<int>(dv);
  p.group = static_cast<int>(hv / hk);
  p.q_scale = 1.0f / sqrtf(static_cast<float>(dk));

  // Both kernels look at every sequence and take those of their kind. Skipped launches: the chunked
  // kernel when no sequence can be long enough, the recurrent one when a single sequence is.
  const bool any_long = meta.max_query_len > kGdnRecurrentMaxLen;
  const bool any_short = !(any_long && nseq == 1);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if (any_short) {
      const dim3 grid(static_cast<unsigned>((dv + kRecCols - 1) / kRecCols), static_cast<unsigned>(hv),
                      static_cast<unsigned>(nseq));
      gdn_recurrent_kernel<T><<<grid, kRecThreads, 0, stream>>>(p);
      PAGODA_CUDA_CHECK_LAUNCH();
    }
    if (!any_long) return;
    if constexpr (std::is_same_v<T, bf16>) {
      if (split_scratch && split_scratch_bytes >= gdn_chunk_split_scratch_bytes(t, hv, dv) &&
          launch_chunk_split_bf16(p, nseq, t, num_sms, max_smem_optin, split_scratch, stream))
        return;
    }
    launch_chunk<T>(p, nseq, num_sms, max_smem_optin, stream);
  };
  switch (act) {
    case DType::BF16: run(bf16{}); break;
    case DType::F32: run(float{}); break;
    default:
      throw Error(std::string("cuda gated_delta_rule: unsupported activation dtype ") + dtype_name(act) +
                  " (BF16 or F32)");
  }
}

}  // namespace pagoda::cuda

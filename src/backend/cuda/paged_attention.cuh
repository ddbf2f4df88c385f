// Unified varlen paged attention (prefill chunks and decodes in one launch), FlashAttention-2 style
// on tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate) with an online fp32 softmax.
//
// Work split. For a sequence s and kv head, the rows of attention are the pairs (query token i,
// query head j of the kv head's group), flattened as f = i * group + j. A CTA takes kM consecutive
// rows of one (sequence, kv head), so a decode CTA holds all the GQA heads of a token and reads
// each K/V block once for all of them. CTA x of the grid maps to a sequence by binary search over
// cu_seqlens_q: sequence s owns CTAs [start(s), start(s+1)) with start(s) = cu[s] * group / kM + s,
// an upper bound of its row tiles (extra CTAs exit), so the grid is planned from host scalars only.
// grid.z splits each CTA's key range (flash-decoding); partial results are merged by a second kernel.
//
// Inside a CTA, kWarpsM warps own 16 rows each and kWarpsN warps split the keys of each tile
// (prefill: 4 x 1, decode: 1 x up to 4); their partial softmax states are merged in shared memory.
// K/V tiles are double-buffered in shared memory: bf16 caches by cp.async; fp16/fp32 caches are
// converted on the way in to two bf16 planes, hi + lo (x = hi + lo to ~16 significant bits), and
// multiplied as q*k_hi + q*k_lo and p_hi*v_hi + p_hi*v_lo + p_lo*v_hi: fp32-class accuracy.
// FP8 (e4m3) caches: the bytes are double-buffered by cp.async (one byte an element moves), and
// each tile is widened in shared memory to one bf16 plane, which holds every e4m3 value exactly.
// Internal to src/backend/cuda.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/device_util.cuh"

namespace pagoda::cuda::attn {

struct Args {
  const bf16* q;
  int64_t q_stride;  // elements between tokens
  bf16* out;
  int64_t out_stride;
  const void* k_cache;
  const void* v_cache;
  const int32_t* cu_seqlens_q;
  const int32_t* seq_lens;
  const int32_t* block_tables;
  int64_t bt_stride;
  int num_seqs;
  int num_tokens;
  int num_q_heads;
  int num_kv_heads;
  int group;
  int head_dim;      // the real head dim: a multiple of 8, at most the kernel's D (zero-padded to D)
  int block_shift;   // log2(block_size)
  float scale;       // softmax scale
  float softcap;     // 0 = none
  int window;        // 0 = none
  int num_splits;
  float* part_o;     // [splits, T, Hq, head_dim] when num_splits > 1
  float* part_ml;    // [splits, T, Hq, 2]: running max (log2 domain) and sum
};

constexpr int kv_tile_keys(int d, int planes) {
  return d <= 64 ? 64 : d <= 128 ? (planes == 1 ? 64 : 32) : (planes == 1 ? 32 : 16);
}

// How a cache dtype is staged: bf16 planes per element (1: bf16 and fp8, whose values bf16 holds
// exactly; 2: hi + lo for fp16 and fp32), and whether its raw bytes are staged first (fp8).
template <typename KV>
struct KvKind {
  static constexpr int kPlanes = 2;
  static constexpr bool kStaged = false;
};
template <>
struct KvKind<bf16> {
  static constexpr int kPlanes = 1;
  static constexpr bool kStaged = false;
};
template <>
struct KvKind<fp8_e4m3> {
  static constexpr int kPlanes = 1;
  static constexpr bool kStaged = true;
};

template <int D, bool kDecode, int kPlanes, bool kStaged = false>
struct Cfg {
  static constexpr int kWarpsM = kDecode ? 1 : 4;
  static constexpr int kKT = kv_tile_keys(D, kPlanes);  // keys per tile (all warps)
  static constexpr int kWarpsN = kDecode ? kKT / 16 : 1;
  static constexpr int kKPW = kKT / kWarpsN;             // keys per warp per tile
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kM = 16 * kWarpsM;                // rows per CTA
  static constexpr int kLd = D + 8;                      // bf16 smem row (16 B pad: no bank conflicts)
  static constexpr int kQBytes = kM * kLd * 2;
  static constexpr int kPlaneElems = kKT * kLd;
  // Staged (fp8): one bf16 stage of {K,V}, then two stages of {K,V} raw tiles of D bytes a key.
  static constexpr int kStageBytes = kKT * D;
  static constexpr int kKVBytes = kStaged ? 2 * kPlaneElems * 2 + 2 * 2 * kStageBytes
                                          : 2 * 2 * kPlanes * kPlaneElems * 2;  // stages x {K,V} x planes
  static constexpr int kOLd = D + 4;
  static constexpr int kOBytes = kWarpsN * kM * kOLd * 4;
  static constexpr int kRegionBytes = kKVBytes > kOBytes ? kKVBytes : kOBytes;
  static constexpr int kSmemBytes = kQBytes + kRegionBytes + 2 * kWarpsN * kM * 4;
  static_assert(kKPW % 16 == 0, "a warp takes whole 16-key chunks");
  static_assert(D % 16 == 0, "head_dim must be a multiple of 16");
};

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t pack_raw(bf16 lo, bf16 hi) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(lo)) | (static_cast<uint32_t>(__bfloat16_as_ushort(hi)) << 16);
}
__device__ __forceinline__ uint32_t lds32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// 8 consecutive cache elements as fp32.
__device__ __forceinline__ void load8(const float* p, float (&x)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w; x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
}
__device__ __forceinline__ void load8(const __half* p, float (&x)[8]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const __half* h = reinterpret_cast<const __half*>(&u);
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = __half2float(h[i]);
}

// 8 e4m3 bytes to 8 bf16 (exact: every e4m3 value is a bf16 value).
__device__ __forceinline__ uint4 e4m3x8_to_bf16x8(uint2 raw) {
  uint4 out;
  uint32_t* o = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t word = i < 2 ? raw.x : raw.y;
    // bytes 2i and 2i + 1 of the eight to bits 0-7 and 16-23
    const float2 f = e4m3_pair_to_float2(__byte_perm(word, 0u, (i & 1) ? 0x4342u : 0x4140u));
    o[i] = pack_bf16(f.x, f.y);
  }
  return out;
}

constexpr float kLog2e = 1.4426950408889634f;

template <int D, bool kDecode, typename KV>
using CfgOf = Cfg<D, kDecode, KvKind<KV>::kPlanes, KvKind<KV>::kStaged>;

template <int D, bool kDecode, typename KV>
__global__ void __launch_bounds__(CfgOf<D, kDecode, KV>::kThreads) paged_attention_kernel(const Args a) {
  constexpr int P = KvKind<KV>::kPlanes;
  constexpr bool kStaged = KvKind<KV>::kStaged;
  using C = CfgOf<D, kDecode, KV>;
  constexpr int kM = C::kM, kKT = C::kKT, kKPW = C::kKPW, kLd = C::kLd, kWarpsN = C::kWarpsN;
  constexpr int kChunks = D / 8;  // 16-byte chunks of a bf16 row
  const int hd = a.head_dim;      // chunks at or past hd / 8 are zero padding
  const int real_chunks = hd / 8;

  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);
  bf16* sKV = reinterpret_cast<bf16*>(smem + C::kQBytes);
  float* sO = reinterpret_cast<float*>(smem + C::kQBytes);  // reuses the K/V area after the loop
  float* sM = reinterpret_cast<float*>(smem + C::kQBytes + C::kRegionBytes);
  float* sL = sM + kWarpsN * kM;
  // fp8: the raw tiles, after the one bf16 stage.
  uint8_t* sStage = smem + C::kQBytes + 2 * C::kPlaneElems * 2;

  const int kvh = blockIdx.y, split = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp % C::kWarpsM, warp_n = warp / C::kWarpsM;
  const int g = lane >> 2, t4 = lane & 3;
  const int group = a.group;

  // ---- which sequence and rows ----
  const int bx = blockIdx.x;
  int lo = 0, hi = a.num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    const int start = static_cast<int>(static_cast<int64_t>(a.cu_seqlens_q[mid]) * group / kM) + mid;
    if (start <= bx) lo = mid;
    else hi = mid - 1;
  }
  const int s = lo;
  const int q0 = a.cu_seqlens_q[s];
  const int q_len = a.cu_seqlens_q[s + 1] - q0;
  const int f0 = (bx - (static_cast<int>(static_cast<int64_t>(q0) * group / kM) + s)) * kM;
  const int rows_total = q_len * group;
  if (f0 >= rows_total) return;  // uniform over the CTA
  const int seq_len = a.seq_lens[s];
  const int ctx0 = seq_len - q_len;
  const int f_last = min(f0 + kM, rows_total) - 1;
  const int kv_hi = ctx0 + f_last / group + 1;  // keys [kv_lo, kv_hi) are read
  const int kv_lo = a.window > 0 ? max(0, ctx0 + f0 / group - a.window + 1) : 0;
  const int t_first = kv_lo / kKT;
  const int t_count = kv_hi > kv_lo ? (kv_hi + kKT - 1) / kKT - t_first : 0;
  const int per_split = (t_count + a.num_splits - 1) / a.num_splits;
  const int my_first = t_first + split * per_split;
  const int my_count = max(0, min(per_split, t_first + t_count - my_first));
  const int32_t* bt = a.block_tables + static_cast<int64_t>(s) * a.bt_stride;
  const int bmask = (1 << a.block_shift) - 1;

  // ---- Q tile ----
  for (int idx = tid; idx < kM * kChunks; idx += C::kThreads) {
    const int r = idx / kChunks, c = idx % kChunks, f = f0 + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (f < rows_total && c < real_chunks) {
      const int64_t tok = q0 + f / group, head = static_cast<int64_t>(kvh) * group + f % group;
      v = *reinterpret_cast<const uint4*>(a.q + tok * a.q_stride + head * hd + c * 8);
    }
    *reinterpret_cast<uint4*>(sQ + r * kLd + c * 8) = v;
  }

  // Context position of this thread's two rows (g and g + 8 of the warp); -1 for padding rows.
  int qpos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int f = f0 + warp_m * 16 + g + 8 * h;
    qpos[h] = f < rows_total ? ctx0 + f / group : -1;
  }
  const bool warp_active = f0 + warp_m * 16 < rows_total;

  auto load_tile = [&](int tile, int stage) {
    const int key0 = tile * kKT;
    for (int idx = tid; idx < kKT * kChunks; idx += C::kThreads) {
      const int j = idx / kChunks, c = idx % kChunks, kp = key0 + j;
      const bool ok = kp >= kv_lo && kp < kv_hi && c < real_chunks;
      int64_t off = 0;
      if (ok) {
        const int64_t blk = bt[kp >> a.block_shift];
        off = (((blk << a.block_shift) + (kp & bmask)) * a.num_kv_heads + kvh) * hd + c * 8;
      }
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        const KV* src = static_cast<const KV*>(kv ? a.v_cache : a.k_cache) + off;
        bf16* dst = sKV + ((stage * 2 + kv) * P) * C::kPlaneElems + j * kLd + c * 8;
        if constexpr (kStaged) {
          cp_async8(sStage + (stage * 2 + kv) * C::kStageBytes + j * D + c * 8, src, ok);  // zeros where !ok
        } else if constexpr (P == 1) {
          cp_async16(dst, src, ok);
        } else {
          float x[8];
          if (ok) {
            load8(src, x);
          } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) x[i] = 0.0f;
          }
          uint4 h4, l4;
          uint32_t* hw = reinterpret_cast<uint32_t*>(&h4);
          uint32_t* lw = reinterpret_cast<uint32_t*>(&l4);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const bf16 h0 = __float2bfloat16_rn(x[2 * i]), h1 = __float2bfloat16_rn(x[2 * i + 1]);
            hw[i] = pack_raw(h0, h1);
            lw[i] = pack_bf16(x[2 * i] - __bfloat162float(h0), x[2 * i + 1] - __bfloat162float(h1));
          }
          *reinterpret_cast<uint4*>(dst) = h4;
          *reinterpret_cast<uint4*>(dst + C::kPlaneElems) = l4;
        }
      }
    }
  };

  // fp8: a staged tile widened into the bf16 stage (every warp must be done with that stage).
  auto widen_tile = [&](int stage) {
    for (int idx = tid; idx < kKT * kChunks; idx += C::kThreads) {
      const int j = idx / kChunks, c = idx % kChunks;
#pragma unroll
      for (int kv = 0; kv < 2; ++kv) {
        const uint2 raw = *reinterpret_cast<const uint2*>(sStage + (stage * 2 + kv) * C::kStageBytes + j * D + c * 8);
        *reinterpret_cast<uint4*>(sKV + kv * C::kPlaneElems + j * kLd + c * 8) = e4m3x8_to_bf16x8(raw);
      }
    }
  };

  float acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
  const float scale_log2 = a.scale * kLog2e;

  if (my_count > 0) load_tile(my_first, 0);
  cp_async_commit();
  for (int it = 0; it < my_count; ++it) {
    cp_async_wait_all();
    __syncthreads();  // tile `it` visible; every warp is done with the other stage
    if (it + 1 < my_count) load_tile(my_first + it + 1, (it + 1) & 1);
    cp_async_commit();
    if constexpr (kStaged) {
      widen_tile(it & 1);  // while the next tile's bytes are in flight
      __syncthreads();
    }
    if (!warp_active) continue;

    const int stage = kStaged ? 0 : it & 1;
    const bf16* sK = sKV + (stage * 2 + 0) * P * C::kPlaneElems + warp_n * kKPW * kLd;
    const bf16* sV = sKV + (stage * 2 + 1) * P * C::kPlaneElems + warp_n * kKPW * kLd;

    // S = Q K^T for this warp's 16 rows x kKPW keys.
    float sc[kKPW / 8][4];
#pragma unroll
    for (int j = 0; j < kKPW / 8; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const bf16* qr = sQ + (warp_m * 16 + g) * kLd + kk * 16 + t4 * 2;
      const uint32_t af[4] = {lds32(qr), lds32(qr + 8 * kLd), lds32(qr + 8), lds32(qr + 8 * kLd + 8)};
#pragma unroll
      for (int j = 0; j < kKPW / 8; ++j) {
        const bf16* kr = sK + (j * 8 + g) * kLd + kk * 16 + t4 * 2;
        mma_bf16(sc[j], af, lds32(kr), lds32(kr + 8));
        if constexpr (P == 2) mma_bf16(sc[j], af, lds32(kr + C::kPlaneElems), lds32(kr + C::kPlaneElems + 8));
      }
    }

    // Scale, soft-cap, mask; the running max of each row (log2 domain).
    const int key_base = (my_first + it) * kKT + warp_n * kKPW;
    float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKPW / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, kp = key_base + j * 8 + t4 * 2 + (e & 1);
        float x = sc[j][e];
        if (a.softcap > 0.0f) x = a.softcap * tanhf(x * a.scale / a.softcap) * kLog2e;
        else x *= scale_log2;
        const bool ok = kp <= qpos[h] && (a.window <= 0 || kp > qpos[h] - a.window);
        x = ok ? x : -INFINITY;
        sc[j][e] = x;
        tmax[h] = fmaxf(tmax[h], x);
      }
    }
    float m_use[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 1));
      tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 2));
      const float m_new = fmaxf(row_m[h], tmax[h]);
      m_use[h] = m_new == -INFINITY ? 0.0f : m_new;  // a row with no key yet: keep exp2 finite
      const float alpha = exp2f(row_m[h] - m_use[h]);
      row_m[h] = m_new;
      row_l[h] *= alpha;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        acc[n][2 * h] *= alpha;
        acc[n][2 * h + 1] *= alpha;
      }
    }
#pragma unroll
    for (int j = 0; j < kKPW / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(sc[j][e] - m_use[e >> 1]);
        sc[j][e] = p;
        row_l[e >> 1] += p;  // per-thread partial sum; reduced over the quad at the end
      }
    }

    // O += P V. P comes straight from the S accumulators (C layout of two n-tiles = A layout).
#pragma unroll
    for (int kc = 0; kc < kKPW / 16; ++kc) {
      const float* p0 = sc[2 * kc];
      const float* p1 = sc[2 * kc + 1];
      const uint32_t pa[4] = {pack_bf16(p0[0], p0[1]), pack_bf16(p0[2], p0[3]), pack_bf16(p1[0], p1[1]),
                              pack_bf16(p1[2], p1[3])};
      uint32_t pl[4] = {0, 0, 0, 0};
      if constexpr (P == 2) {
        auto rest = [](float x, uint32_t packed, int half) {
          const unsigned short bits = static_cast<unsigned short>(half ? packed >> 16 : packed & 0xffffu);
          return x - __bfloat162float(__ushort_as_bfloat16(bits));
        };
        pl[0] = pack_bf16(rest(p0[0], pa[0], 0), rest(p0[1], pa[0], 1));
        pl[1] = pack_bf16(rest(p0[2], pa[1], 0), rest(p0[3], pa[1], 1));
        pl[2] = pack_bf16(rest(p1[0], pa[2], 0), rest(p1[1], pa[2], 1));
        pl[3] = pack_bf16(rest(p1[2], pa[3], 0), rest(p1[3], pa[3], 1));
      }
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const bf16* vr = sV + (kc * 16 + t4 * 2) * kLd + n * 8 + g;
        const uint32_t b0 = pack_raw(vr[0], vr[kLd]), b1 = pack_raw(vr[8 * kLd], vr[9 * kLd]);
        mma_bf16(acc[n], pa, b0, b1);
        if constexpr (P == 2) {
          const bf16* vl = vr + C::kPlaneElems;
          mma_bf16(acc[n], pa, pack_raw(vl[0], vl[kLd]), pack_raw(vl[8 * kLd], vl[9 * kLd]));
          mma_bf16(acc[n], pl, b0, b1);
        }
      }
    }
  }

  // ---- epilogue: merge the kWarpsN partial states per row, normalise, write ----
  cp_async_wait_all();
  __syncthreads();  // K/V area free for sO
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_l[h] += __shfl_xor_sync(0xffffffffu, row_l[h], 1);
    row_l[h] += __shfl_xor_sync(0xffffffffu, row_l[h], 2);
    if (t4 == 0) {
      const int r = warp_m * 16 + g + 8 * h;
      sM[warp_n * kM + r] = row_m[h];
      sL[warp_n * kM + r] = row_l[h];
    }
  }
  __syncthreads();
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warp_m * 16 + g + 8 * h;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarpsN; ++w) mx = fmaxf(mx, sM[w * kM + r]);
    const float f = row_m[h] == -INFINITY ? 0.0f : exp2f(row_m[h] - mx);
    float* o = sO + (warp_n * kM + r) * C::kOLd + t4 * 2;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) *reinterpret_cast<float2*>(o + n * 8) = make_float2(acc[n][2 * h] * f, acc[n][2 * h + 1] * f);
  }
  __syncthreads();
  for (int idx = tid; idx < kM * (D / 4); idx += C::kThreads) {
    const int r = idx / (D / 4), c = (idx % (D / 4)) * 4, f = f0 + r;
    if (f >= rows_total || c >= hd) continue;
    float mx = -INFINITY, l = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarpsN; ++w) mx = fmaxf(mx, sM[w * kM + r]);
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kWarpsN; ++w) {
      const float mw = sM[w * kM + r];
      l += mw == -INFINITY ? 0.0f : sL[w * kM + r] * exp2f(mw - mx);
      const float4 v = *reinterpret_cast<const float4*>(sO + (w * kM + r) * C::kOLd + c);
      o.x += v.x; o.y += v.y; o.z += v.z; o.w += v.w;
    }
    const int64_t tok = q0 + f / group, head = static_cast<int64_t>(kvh) * group + f % group;
    if (a.num_splits == 1) {
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      uint2 packed;
      packed.x = pack_bf16(o.x * inv, o.y * inv);
      packed.y = pack_bf16(o.z * inv, o.w * inv);
      *reinterpret_cast<uint2*>(a.out + tok * a.out_stride + head * hd + c) = packed;
    } else {
      const int64_t pi = (static_cast<int64_t>(split) * a.num_tokens + tok) * a.num_q_heads + head;
      *reinterpret_cast<float4*>(a.part_o + pi * hd + c) = o;
      if (c == 0) {
        a.part_ml[pi * 2] = mx;
        a.part_ml[pi * 2 + 1] = l;
      }
    }
  }
}

// Launches one instantiation (defined in paged_attention_d{64,128,256}.cu).
template <int D>
void launch_attention_kernel(const Args& a, bool decode, DType kv_dtype, dim3 grid, size_t max_smem_optin,
                             cudaStream_t stream);

}  // namespace pagoda::cuda::attn

// Mixture-of-experts kernels (moe_kernels.h): routing, permutation, grouped GEMM, un-permute.
// Everything a kernel needs to know about the routed counts it reads from device memory, so that
// the launches (grid sizes from T, k, E, R only) replay unchanged inside CUDA graphs.
//
// Not yet measured on a GPU (docs/benchmarks.md): these compile in CI; their op-table runs and
// speed belong to the GPU issue.
#include <algorithm>
#include <string>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/moe_kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kMaxPerLane = static_cast<int>(kMoeMaxExperts / 32);

// Higher probability first, the lower expert id on equal ones, NaN after every number.
__device__ __forceinline__ bool ranks_before(float pa, int a, float pb, int b) {
  const bool na = isnan(pa), nb = isnan(pb);
  if (na != nb) return nb;
  if (!na && pa != pb) return pa > pb;
  return a < b;
}

void check_on_cuda(const char* op, const Tensor& t, const char* name) {
  require(t.device == Device::CUDA, op, std::string(name) + " must be on cuda, got " + shape_str(t));
}

// ---- routing ------------------------------------------------------------------------------------

constexpr int kRouteWarps = 4;

template <typename T>
__global__ void moe_route_kernel(const T* logits, int64_t ld, int64_t num_tokens, int E, int k, bool renormalize,
                                 int32_t* ids, float* weights) {
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= num_tokens) return;  // uniform within a warp
  const T* row = logits + t * ld;
  float p[kMaxPerLane];
  uint32_t avail = 0;  // bit i: entry lane + 32 i is an expert not yet chosen
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int e = lane + 32 * i;
    p[i] = e < E ? to_f32(row[e]) : 0.0f;
    if (e < E) {
      avail |= 1u << i;
      mx = fmaxf(mx, p[i]);  // NaN never raises the max
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i)
    if (avail >> i & 1u) sum += (p[i] = expf(p[i] - mx));
  sum = warp_sum(sum);
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) p[i] /= sum;

  float top = 0.0f;
  for (int j = 0; j < k; ++j) {
    float best_p = 0.0f;
    int best_e = -1;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int e = lane + 32 * i;
      if ((avail >> i & 1u) && (best_e < 0 || ranks_before(p[i], e, best_p, best_e))) best_p = p[i], best_e = e;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float op = __shfl_xor_sync(0xffffffffu, best_p, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (oe >= 0 && (best_e < 0 || ranks_before(op, oe, best_p, best_e))) best_p = op, best_e = oe;
    }
    if (best_e >= 0 && (best_e & 31) == lane) avail &= ~(1u << (best_e >> 5));
    if (lane == 0) {
      ids[t * k + j] = best_e;
      weights[t * k + j] = best_p;
      top += best_p;
    }
  }
  if (renormalize && lane == 0)
    for (int j = 0; j < k; ++j) weights[t * k + j] /= top;
}

// ---- permutation --------------------------------------------------------------------------------

constexpr int kPermuteThreads = 1024;

__global__ void moe_permute_index_kernel(const int32_t* ids, int64_t R, int E, int32_t* offsets, int32_t* sorted,
                                         int32_t* slot_rows) {
  __shared__ int32_t cursor[kMoeMaxExperts];
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int nwarps = static_cast<int>(blockDim.x >> 5);
  for (int e = tid; e < E; e += blockDim.x) cursor[e] = 0;
  __syncthreads();
  for (int64_t s = tid; s < R; s += blockDim.x) {
    const int32_t id = ids[s];
    if (id >= 0 && id < E) atomicAdd(&cursor[id], 1);
  }
  __syncthreads();
  if (tid == 0) {  // E <= 1024: a serial scan costs about a microsecond
    int32_t run = 0;
    for (int e = 0; e < E; ++e) {
      const int32_t c = cursor[e];
      cursor[e] = run;
      offsets[e] = run;
      run += c;
    }
    offsets[E] = run;
  }
  __syncthreads();
  // Stable placement: chunks of blockDim slots; within a chunk the warps take turns, and the
  // lanes of a warp that share an expert are ranked by lane (= by slot).
  for (int64_t base = 0; base < R; base += blockDim.x) {
    const int64_t s = base + tid;
    const int32_t id = s < R ? ids[s] : -1;
    const bool valid = s < R && id >= 0 && id < E;
    if (s < R && !valid) slot_rows[s] = -1;
    const unsigned peers = __match_any_sync(0xffffffffu, valid ? id : -1);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    const int leader = __ffs(peers) - 1;
    for (int w = 0; w < nwarps; ++w) {
      if (warp == w) {
        int32_t pos = 0;
        if (valid) pos = cursor[id] + rank;
        __syncwarp();
        if (valid && lane == leader) cursor[id] += __popc(peers);
        if (valid) {
          sorted[pos] = static_cast<int32_t>(s);
          slot_rows[s] = pos;
        }
      }
      __syncthreads();
    }
  }
}

template <typename T>
__global__ void moe_gather_kernel(const T* x, int64_t ldx, const int32_t* sorted, const int32_t* offsets, int E,
                                  int k, T* out, int64_t ldo, int64_t H) {
  const int64_t r = blockIdx.x;
  if (r >= offsets[E]) return;  // rows of slots left out (ids outside [0, E))
  const T* src = x + static_cast<int64_t>(sorted[r] / k) * ldx;
  T* dst = out + r * ldo;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) dst[h] = src[h];
}

// ---- grouped GEMM -------------------------------------------------------------------------------

constexpr int kBM = 32, kBN = 64, kBK = 32, kGemmThreads = 256;

template <typename TA, typename TW>
__global__ void __launch_bounds__(kGemmThreads)
    moe_grouped_gemm_kernel(const TA* x, int64_t ldx, const TW* w, const int32_t* offsets, int E, int64_t N,
                            int64_t K, TA* out, int64_t ldo) {
  __shared__ int32_t tile_end[kMoeMaxExperts];  // inclusive prefix sum of the row tiles per expert
  __shared__ float As[kBM][kBK + 1];
  __shared__ float Ws[kBN][kBK + 1];
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31;
  for (int e = tid; e < E; e += blockDim.x) tile_end[e] = (offsets[e + 1] - offsets[e] + kBM - 1) / kBM;
  __syncthreads();
  if (tid < 32) {  // warp 0 scans: each lane a run of experts, then a shuffle scan of the runs
    const int per = (E + 31) / 32, begin = min(E, lane * per), end = min(E, begin + per);
    int32_t local = 0;
    for (int e = begin; e < end; ++e) local += tile_end[e];
    int32_t incl = local;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t n = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += n;
    }
    int32_t run = incl - local;
    for (int e = begin; e < end; ++e) tile_end[e] = (run += tile_end[e]);
  }
  __syncthreads();
  const int32_t tile = static_cast<int32_t>(blockIdx.y);
  if (tile >= tile_end[E - 1]) return;  // past the real tiles (the grid is an upper bound)
  int lo = 0, hi = E - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (tile_end[mid] > tile) hi = mid;
    else lo = mid + 1;
  }
  const int e = lo;
  const int64_t row0 = offsets[e] + static_cast<int64_t>(tile - (e ? tile_end[e - 1] : 0)) * kBM;
  const int64_t row_end = min(row0 + kBM, static_cast<int64_t>(offsets[e + 1]));
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const TW* we = w + static_cast<int64_t>(e) * N * K;
  const int tx = tid % 16, ty = tid / 16;  // 4 columns (tx + 16 j) x 2 rows (2 ty + i) each
  float acc[2][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kBK) {
    for (int i = tid; i < kBM * kBK; i += kGemmThreads) {
      const int r = i / kBK, c = i % kBK;
      const int64_t gr = row0 + r, gk = k0 + c;
      As[r][c] = gr < row_end && gk < K ? to_f32(x[gr * ldx + gk]) : 0.0f;
    }
    for (int i = tid; i < kBN * kBK; i += kGemmThreads) {
      const int r = i / kBK, c = i % kBK;
      const int64_t gn = n0 + r, gk = k0 + c;
      Ws[r][c] = gn < N && gk < K ? to_f32(we[gn * K + gk]) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kBK; ++kk) {
      const float a0 = As[2 * ty][kk], a1 = As[2 * ty + 1][kk];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float b = Ws[tx + 16 * j][kk];
        acc[0][j] = fmaf(a0, b, acc[0][j]);
        acc[1][j] = fmaf(a1, b, acc[1][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t r = row0 + 2 * ty + i;
    if (r >= row_end) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tx + 16 * j;
      if (n < N) out[r * ldo + n] = from_f32<TA>(acc[i][j]);
    }
  }
}

// ---- un-permute ---------------------------------------------------------------------------------

template <typename T>
__global__ void moe_unpermute_kernel(const T* y, int64_t ldy, const float* weights, const int32_t* slot_rows, int k,
                                     const T* shared, int64_t lds, const T* gate, int64_t ldg, T* out, int64_t ldo,
                                     int64_t H) {
  const int64_t t = blockIdx.x;
  const float g = gate ? 1.0f / (1.0f + expf(-to_f32(gate[t * ldg]))) : 1.0f;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int32_t r = slot_rows[t * k + j];
      if (r >= 0) acc = fmaf(weights[t * k + j], to_f32(y[r * ldy + h]), acc);
    }
    if (shared) acc = fmaf(g, to_f32(shared[t * lds + h]), acc);
    out[t * ldo + h] = from_f32<T>(acc);
  }
}

int row_threads(int64_t h) { return static_cast<int>(std::clamp<int64_t>((h + 31) / 32 * 32, 32, 256)); }

}  // namespace

void launch_moe_route(const Tensor& logits, bool renormalize, Tensor& expert_ids, Tensor& weights,
                      cudaStream_t stream) {
  const char* op = "moe_route";
  for (const Tensor* t : {&logits, static_cast<const Tensor*>(&expert_ids), static_cast<const Tensor*>(&weights)})
    check_on_cuda(op, *t, "every tensor");
  require(logits.ndim == 2, op, "logits must be [T, E], got " + shape_str(logits));
  const int64_t T = logits.size(0), E = logits.size(1), k = expert_ids.row_numel();
  require(expert_ids.dtype == DType::I32 && weights.dtype == DType::F32 && expert_ids.is_contiguous() &&
              weights.is_contiguous(),
          op, "expert_ids must be contiguous I32 [T, k], weights F32 [T, k]");
  require(num_rows(expert_ids) == T && num_rows(weights) == T && weights.row_numel() == k, op,
          "expert_ids and weights must have T rows of k");
  require(E >= 1 && E <= kMoeMaxExperts && k >= 1 && k <= E, op,
          "needs 1 <= k <= E <= " + std::to_string(kMoeMaxExperts) + ", got k " + std::to_string(k) + ", E " +
              std::to_string(E));
  if (T == 0) return;
  const unsigned blocks = static_cast<unsigned>((T + kRouteWarps - 1) / kRouteWarps);
  PAGODA_DISPATCH_FLOAT(logits.dtype, L, op,
                        moe_route_kernel<L><<<blocks, 32 * kRouteWarps, 0, stream>>>(
                            logits.ptr<const L>(), logits.stride0(), T, static_cast<int>(E), static_cast<int>(k),
                            renormalize, expert_ids.ptr<int32_t>(), weights.ptr<float>()));
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_moe_permute(const Tensor& x, const Tensor& expert_ids, Tensor& expert_offsets, Tensor& sorted_slots,
                        Tensor& slot_rows, Tensor& x_sorted, cudaStream_t stream) {
  const char* op = "moe_permute";
  for (const Tensor* t : {&x, &expert_ids, static_cast<const Tensor*>(&expert_offsets),
                          static_cast<const Tensor*>(&sorted_slots), static_cast<const Tensor*>(&slot_rows),
                          static_cast<const Tensor*>(&x_sorted)})
    check_on_cuda(op, *t, "every tensor");
  const int64_t T = num_rows(expert_ids), k = expert_ids.row_numel(), R = T * k, H = x.row_numel();
  const int64_t E = expert_offsets.numel() - 1;
  for (const Tensor* t : {&expert_ids, static_cast<const Tensor*>(&expert_offsets),
                          static_cast<const Tensor*>(&sorted_slots), static_cast<const Tensor*>(&slot_rows)})
    require(t->dtype == DType::I32 && t->is_contiguous(), op, "routing indices must be contiguous I32");
  require(E >= 1 && E <= kMoeMaxExperts, op, "E must lie in [1, " + std::to_string(kMoeMaxExperts) + "]");
  require(num_rows(x) == T && sorted_slots.numel() == R && slot_rows.numel() == R && num_rows(x_sorted) == R &&
              x_sorted.row_numel() == H && x_sorted.dtype == x.dtype,
          op, "x must be [T, H], sorted_slots and slot_rows [T·k], x_sorted [T·k, H] of x's dtype");
  require(R < (int64_t{1} << 31), op, "more than 2^31 routed rows");
  moe_permute_index_kernel<<<1, kPermuteThreads, 0, stream>>>(expert_ids.ptr<const int32_t>(), R,
                                                               static_cast<int>(E), expert_offsets.ptr<int32_t>(),
                                                               sorted_slots.ptr<int32_t>(), slot_rows.ptr<int32_t>());
  PAGODA_CUDA_CHECK_LAUNCH();
  if (R == 0 || H == 0) return;
  PAGODA_DISPATCH_FLOAT(x.dtype, T_, op,
                        moe_gather_kernel<T_><<<static_cast<unsigned>(R), row_threads(H), 0, stream>>>(
                            x.ptr<const T_>(), x.stride0(), sorted_slots.ptr<const int32_t>(),
                            expert_offsets.ptr<const int32_t>(), static_cast<int>(E), static_cast<int>(k),
                            x_sorted.ptr<T_>(), x_sorted.stride0(), H));
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_moe_grouped_linear(const Tensor& x, const Tensor& w, const Tensor& expert_offsets, Tensor& out,
                               cudaStream_t stream) {
  const char* op = "moe_grouped_linear";
  for (const Tensor* t : {&x, &w, &expert_offsets, static_cast<const Tensor*>(&out)})
    check_on_cuda(op, *t, "every tensor");
  require(w.ndim == 3 && w.is_contiguous(), op, "w must be a contiguous [E, N, K] tensor, got " + shape_str(w));
  const int64_t E = w.size(0), N = w.size(1), K = w.size(2), R = num_rows(x);
  require(E >= 1 && E <= kMoeMaxExperts, op, "E must lie in [1, " + std::to_string(kMoeMaxExperts) + "]");
  require(expert_offsets.dtype == DType::I32 && expert_offsets.numel() == E + 1, op, "expert_offsets must be I32 [E + 1]");
  require(x.row_numel() == K && num_rows(out) == R && out.row_numel() == N && out.dtype == x.dtype, op,
          "x must be [R, K] and out [R, N] of x's dtype");
  require(x.dtype == DType::F32 || x.dtype == DType::BF16, op, "activations must be F32 or BF16");
  require(w.dtype == DType::F32 || w.dtype == DType::BF16, op, "weights must be F32 or BF16");
  if (R == 0 || N == 0) return;
  const int64_t tiles = (R + kBM - 1) / kBM + E;  // each expert adds at most one partial tile
  require(tiles <= 65535, op, "too many rows for one launch: " + std::to_string(R));
  const dim3 grid(static_cast<unsigned>((N + kBN - 1) / kBN), static_cast<unsigned>(tiles));
  const auto run = [&](auto a_tag, auto w_tag) {
    using TA = decltype(a_tag);
    using TW = decltype(w_tag);
    moe_grouped_gemm_kernel<TA, TW><<<grid, kGemmThreads, 0, stream>>>(
        x.ptr<const TA>(), x.stride0(), w.ptr<const TW>(), expert_offsets.ptr<const int32_t>(), static_cast<int>(E),
        N, K, out.ptr<TA>(), out.stride0());
  };
  const bool a32 = x.dtype == DType::F32, w32 = w.dtype == DType::F32;
  if (a32 && w32) run(float{}, float{});
  else if (a32) run(float{}, bf16{});
  else if (w32) run(bf16{}, float{});
  else run(bf16{}, bf16{});
  PAGODA_CUDA_CHECK_LAUNCH();
}

void launch_moe_unpermute(const Tensor& y, const Tensor& weights, const Tensor& slot_rows, const Tensor& shared,
                          const Tensor& shared_gate, Tensor& out, cudaStream_t stream) {
  const char* op = "moe_unpermute";
  for (const Tensor* t : {&y, &weights, &slot_rows, static_cast<const Tensor*>(&out)}) check_on_cuda(op, *t, "every tensor");
  const int64_t T = num_rows(out), H = out.row_numel(), k = weights.row_numel();
  require(weights.dtype == DType::F32 && weights.is_contiguous() && num_rows(weights) == T, op,
          "weights must be contiguous F32 [T, k]");
  require(slot_rows.dtype == DType::I32 && slot_rows.is_contiguous() && slot_rows.numel() == T * k, op,
          "slot_rows must be contiguous I32 [T·k]");
  require(y.row_numel() == H && y.dtype == out.dtype, op, "y must be [R, H] of out's dtype");
  require(shared.empty() || (shared.dtype == out.dtype && num_rows(shared) == T && shared.row_numel() == H), op,
          "shared must be [T, H] of out's dtype");
  require(shared_gate.empty() || (shared_gate.dtype == out.dtype && num_rows(shared_gate) == T), op,
          "shared_gate must be [T, 1] of out's dtype");
  if (T == 0 || H == 0) return;
  PAGODA_DISPATCH_FLOAT(out.dtype, T_, op,
                        moe_unpermute_kernel<T_><<<static_cast<unsigned>(T), row_threads(H), 0, stream>>>(
                            y.ptr<const T_>(), y.stride0(), weights.ptr<const float>(), slot_rows.ptr<const int32_t>(),
                            static_cast<int>(k), shared.empty() ? nullptr : shared.ptr<const T_>(), shared.stride0(),
                            shared_gate.empty() ? nullptr : shared_gate.ptr<const T_>(), shared_gate.stride0(),
                            out.ptr<T_>(), out.stride0(), H));
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda

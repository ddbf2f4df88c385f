// The LoRA expand kernels (lora_kernels.h). The shrink is a plain `linear` by every slot's A stacked,
// so this is the only LoRA-specific kernel.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/lora_kernels.h"

namespace pagoda::cuda {
namespace {

constexpr int kExpandThreads = 128;
// Steps of more rows than this (prefills) take the tensor-core kernel where it applies.
constexpr int64_t kRowKernelMaxRows = 256;
// Steps of at most this many rows take the row kernel rather than the tile kernel.
constexpr int64_t kRowKernelFewRows = 16;

// R values of a B row and of low, in fp32: 8 at a time through 16-byte loads when both are bf16 and
// R is a multiple of 8 (the row starts are then 16-byte aligned), else one at a time.
template <typename TA, typename TW, bool kVec>
__device__ __forceinline__ float dot_row(const TW* brow, const TA* l, int R) {
  float acc = 0.0f;
  if constexpr (kVec) {
    for (int r = 0; r < R; r += 8) {
      const uint4 bw = *reinterpret_cast<const uint4*>(brow + r);
      const uint4 lw = *reinterpret_cast<const uint4*>(l + r);
      const bf16* bb = reinterpret_cast<const bf16*>(&bw);
      const bf16* ll = reinterpret_cast<const bf16*>(&lw);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc += __bfloat162float(bb[i]) * __bfloat162float(ll[i]);
    }
  } else {
    for (int r = 0; r < R; ++r) acc += to_f32(brow[r]) * to_f32(l[r]);
  }
  return acc;
}

template <typename TA, typename TW, bool kVec>
__global__ void lora_expand_kernel(const TA* low, int64_t ld_low, const TW* b, const int32_t* slots, int S, int N,
                                   int R, int64_t T, int rows_per_block, TA* out, int64_t ld_out) {
  const int n = static_cast<int>(blockIdx.x) * kExpandThreads + static_cast<int>(threadIdx.x);
  if (n >= N) return;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  const int64_t t1 = t0 + rows_per_block < T ? t0 + rows_per_block : T;
  for (int64_t t = t0; t < t1; ++t) {
    const int s = slots[t];
    if (s < 0 || s >= S) continue;  // the base model's rows (and, unchecked here, a slot past S)
    const float acc = dot_row<TA, TW, kVec>(b + (static_cast<int64_t>(s) * N + n) * R,
                                            low + t * ld_low + static_cast<int64_t>(s) * R, R);
    TA* o = out + t * ld_out + n;
    *o = from_f32<TA>(to_f32(*o) + acc);
  }
}

// Prefill-sized steps (bf16, R a multiple of 16): tensor cores. A block takes 16 rows × 256 columns
// (4 warps × 8 tiles of 8 columns). A sequence's rows are contiguous and of one slot, so nearly every
// 16-row tile is of one slot: then low's R values of that slot are the A operand (row-major, 16 × 16
// a step) and B's rows the B operand as they lie ([n][r]: PTX's "col" layout), fp32 accumulation,
// added onto out. A tile mixing slots (or the base model's rows) falls back to the row kernel's dot
// products.
constexpr int kMmaRows = 16, kMmaWarps = 4, kMmaTilesPerWarp = 8;
constexpr int kMmaCols = kMmaWarps * kMmaTilesPerWarp * 8;  // 256

__global__ void lora_expand_mma_kernel(const bf16* low, int64_t ld_low, const bf16* b, const int32_t* slots, int S,
                                       int N, int R, int64_t T, bf16* out, int64_t ld_out) {
  __shared__ int slot_sh[kMmaRows];
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kMmaRows;
  const int n_block = static_cast<int>(blockIdx.x) * kMmaCols;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  if (tid < kMmaRows) {
    const int64_t t = t0 + tid;
    const int sl = t < T ? slots[t] : -1;
    slot_sh[tid] = sl >= 0 && sl < S ? sl : -1;
  }
  __syncthreads();
  const int s = slot_sh[0];
  bool uniform = true;
  for (int i = 1; i < kMmaRows; ++i) uniform = uniform && slot_sh[i] == s;
  if (uniform && s < 0) return;  // the base model's rows only
  if (!uniform) {  // as the row kernel: a thread per column, its rows one after another
    for (int n = n_block + tid; n < n_block + kMmaCols && n < N; n += kMmaWarps * 32)
      for (int row = 0; row < kMmaRows; ++row) {
        const int sl = slot_sh[row];
        if (sl < 0) continue;
        const float acc = dot_row<bf16, bf16, true>(b + (static_cast<int64_t>(sl) * N + n) * R,
                                                    low + (t0 + row) * ld_low + static_cast<int64_t>(sl) * R, R);
        bf16* o = out + (t0 + row) * ld_out + n;
        *o = __float2bfloat16(__bfloat162float(*o) + acc);
      }
    return;
  }
  const int g = lane >> 2, i = lane & 3;
  float c[kMmaTilesPerWarp][4] = {};
  const bf16* l0 = low + (t0 + g) * ld_low + static_cast<int64_t>(s) * R;
  const bf16* l8 = l0 + 8 * ld_low;
  const bf16* bs = b + static_cast<int64_t>(s) * N * R;
  for (int k0 = 0; k0 < R; k0 += 16) {
    uint32_t a[4];
    a[0] = *reinterpret_cast<const uint32_t*>(l0 + k0 + 2 * i);
    a[1] = *reinterpret_cast<const uint32_t*>(l8 + k0 + 2 * i);
    a[2] = *reinterpret_cast<const uint32_t*>(l0 + k0 + 2 * i + 8);
    a[3] = *reinterpret_cast<const uint32_t*>(l8 + k0 + 2 * i + 8);
#pragma unroll
    for (int j = 0; j < kMmaTilesPerWarp; ++j) {
      const int n = n_block + (warp * kMmaTilesPerWarp + j) * 8 + g;
      uint32_t b0 = 0, b1 = 0;
      if (n < N) {
        const bf16* brow = bs + static_cast<int64_t>(n) * R + k0 + 2 * i;
        b0 = *reinterpret_cast<const uint32_t*>(brow);
        b1 = *reinterpret_cast<const uint32_t*>(brow + 8);
      }
      mma_bf16(c[j], a, b0, b1);
    }
  }
#pragma unroll
  for (int j = 0; j < kMmaTilesPerWarp; ++j) {
    const int n = n_block + (warp * kMmaTilesPerWarp + j) * 8 + 2 * i;
    for (int h = 0; h < 2; ++h) {  // rows g and g + 8
      const int64_t t = t0 + g + 8 * h;
      for (int e = 0; e < 2; ++e)
        if (n + e < N) {
          bf16* o = out + t * ld_out + n + e;
          *o = __float2bfloat16(__bfloat162float(*o) + c[j][2 * h + e]);
        }
    }
  }
}

// Every step size (bf16, R a multiple of 8): tensor cores over tiles of 64 rows × 64 columns (4
// warps of 16 columns), each row masked to its own slot. The delta is one GEMM of K = S·R, low's
// columns outside a row's slot zero, but a block reads only the slots its rows use. Latency, not
// bytes, bounds it at decode sizes, so every load is issued up front: the block's out values into
// registers, and for a group of its slots the 64 B rows and 64 low rows (zero-filled where a row
// is of another slot) into shared memory by cp.async, all in flight at once. A row gets products
// of one slot only, the rest exact zeros, so the order over slots changes nothing. Base-model rows
// (-1) are not written.
constexpr int kTileRows = 64, kTileWarps = 4, kTileThreads = kTileWarps * 32, kTileCols = kTileWarps * 16;
// More room (all 8 slots of R = 32 in one group, 82 KiB) was slower on an H200: fewer blocks an SM.
constexpr int kTileSharedBytes = 48 * 1024;
static_assert(kTileRows == kTileCols, "one (row, piece) loop stages B's column rows and low's rows");

__device__ __forceinline__ uint32_t ld_shared32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

__global__ void __launch_bounds__(kTileThreads)
    lora_expand_tile_kernel(const bf16* __restrict__ low, int64_t ld_low, const bf16* __restrict__ b,
                            const int32_t* __restrict__ slots, int S, int N, int R, int64_t T, int group,
                            bf16* __restrict__ out, int64_t ld_out) {
  // Dynamic shared memory: tiles_of_slot[S] (bit m: 16-row tile m has a row of the slot), the
  // block's slots in order [S], then `group` stages of B [64][R + 8] and low [64][R + 8] (8 values
  // of padding a row keep the fragment reads free of bank conflicts).
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t* tiles_of_slot = reinterpret_cast<uint32_t*>(smem);
  int* used = reinterpret_cast<int*>(tiles_of_slot + S);
  const int ld_sh = R + 8;
  bf16* stage = reinterpret_cast<bf16*>(smem + ((static_cast<size_t>(S) * 8 + 15) & ~size_t{15}));
  __shared__ int slot_sh[kTileRows];
  __shared__ int used_count;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, i = lane & 3;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTileRows;
  const int n_block = static_cast<int>(blockIdx.x) * kTileCols;
  for (int s = tid; s < S; s += kTileThreads) tiles_of_slot[s] = 0;
  __syncthreads();
  if (tid < kTileRows) {
    const int64_t t = t0 + tid;
    int sl = t < T ? slots[t] : -1;
    if (sl < 0 || sl >= S) sl = -1;
    slot_sh[tid] = sl;
    if (sl >= 0) atomicOr(&tiles_of_slot[sl], 1u << (tid >> 4));
  }
  __syncthreads();
  if (warp == 0) {  // the slots in use, in order (a ballot a 32 slots)
    int count = 0;
    for (int base = 0; base < S; base += 32) {
      const int s = base + lane;
      const bool in = s < S && tiles_of_slot[s] != 0;
      const unsigned ballot = __ballot_sync(0xffffffffu, in);
      if (in) used[count + __popc(ballot & ((1u << lane) - 1u))] = s;
      count += __popc(ballot);
    }
    if (lane == 0) used_count = count;
  }
  __syncthreads();
  const int used_n = used_count;
  if (used_n == 0) return;  // the base model's rows only

  // This thread's out values (rows g, g + 8 of each 16-row tile; columns 2i, 2i + 1 of each of its
  // warp's two 8-column tiles), read before anything is written.
  const int n_warp = n_block + warp * 16;
  uint32_t old[4][2][2];
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int r = mt * 16 + g + 8 * h, n = n_warp + j * 8 + 2 * i;  // N is even: n + 1 < N with n
        old[mt][h][j] = slot_sh[r] >= 0 && n < N
                            ? *reinterpret_cast<const uint32_t*>(out + (t0 + r) * ld_out + n)
                            : 0u;
      }

  float c[4][2][4] = {};
  const int pieces = R / 8;  // 16-byte pieces a row
  for (int u0 = 0; u0 < used_n; u0 += group) {
    const int un = used_n - u0 < group ? used_n - u0 : group;
    // A thread's (row, piece) pairs are the same for every slot and for B and low: one division each.
    for (int q = tid; q < kTileRows * pieces; q += kTileThreads) {
      const int row = q / pieces, piece = q - row * pieces;
      const int n = n_block + row, row_slot = slot_sh[row];
      for (int p = 0; p < un; ++p) {
        const int s = used[u0 + p];
        bf16* dst = stage + (static_cast<size_t>(2 * p) * kTileRows + row) * ld_sh + piece * 8;
        cp_async16(dst, n < N ? b + (static_cast<int64_t>(s) * N + n) * R + piece * 8 : b, n < N);
        const bool mine = row_slot == s;  // another slot's row (or none): zeros
        cp_async16(dst + static_cast<size_t>(kTileRows) * ld_sh,
                   mine ? low + (t0 + row) * ld_low + static_cast<int64_t>(s) * R + piece * 8 : low, mine);
      }
    }
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();
    for (int p = 0; p < un; ++p) {
      const uint32_t m = tiles_of_slot[used[u0 + p]];
      const bf16* bs = stage + static_cast<size_t>(2 * p) * kTileRows * ld_sh;
      const bf16* ls = bs + static_cast<size_t>(kTileRows) * ld_sh;
      for (int k0 = 0; k0 < R; k0 += 16) {
        const bool hi = k0 + 8 < R;  // R a multiple of 8, not 16: the last step's upper half is zero
        uint32_t b0[2], b1[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const bf16* brow = bs + (warp * 16 + j * 8 + g) * ld_sh + k0 + 2 * i;
          b0[j] = ld_shared32(brow);
          b1[j] = hi ? ld_shared32(brow + 8) : 0u;
        }
#pragma unroll
        for (int mt = 0; mt < 4; ++mt) {
          if (!(m & (1u << mt))) continue;
          const bf16* l0 = ls + (mt * 16 + g) * ld_sh + k0 + 2 * i;
          const bf16* l1 = l0 + 8 * ld_sh;
          const uint32_t a[4] = {ld_shared32(l0), ld_shared32(l1), hi ? ld_shared32(l0 + 8) : 0u,
                                 hi ? ld_shared32(l1 + 8) : 0u};
          mma_bf16(c[mt][0], a, b0[0], b1[0]);
          mma_bf16(c[mt][1], a, b0[1], b1[1]);
        }
      }
    }
    __syncthreads();  // the next group overwrites the stages
  }
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = mt * 16 + g + 8 * h;
      if (slot_sh[r] < 0) continue;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int n = n_warp + j * 8 + 2 * i;
        if (n >= N) continue;
        __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(&old[mt][h][j]);
        const float2 f = __bfloat1622float2(v);
        v = __floats2bfloat162_rn(f.x + c[mt][j][2 * h], f.y + c[mt][j][2 * h + 1]);
        *reinterpret_cast<__nv_bfloat162*>(out + (t0 + r) * ld_out + n) = v;
      }
    }
}

// Shared memory of the tile kernel for S slots: its slot tables, then as many slots' stages as fit
// (0: not even one, R too wide for it).
struct TilePlan {
  size_t shared = 0;
  int group = 0;
};
TilePlan tile_plan(int64_t S, int64_t R) {
  const size_t tables = (static_cast<size_t>(S) * 8 + 15) & ~size_t{15};
  const size_t per_slot = static_cast<size_t>(2 * kTileRows) * static_cast<size_t>(R + 8) * sizeof(bf16);
  if (tables + per_slot > static_cast<size_t>(kTileSharedBytes)) return {};
  const int64_t fit = static_cast<int64_t>((kTileSharedBytes - tables) / per_slot);
  const int group = static_cast<int>(fit < S ? fit : S);
  return {tables + static_cast<size_t>(group) * per_slot, group};
}

// PAGODA_LORA_EXPAND=legacy: the row kernel and 16-row tensor-core kernel this one replaced (A/B).
bool legacy_expand() {
  static const bool legacy = [] {
    const char* e = std::getenv("PAGODA_LORA_EXPAND");
    return e != nullptr && std::string(e) == "legacy";
  }();
  return legacy;
}

}  // namespace

void launch_lora_expand(const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out, cudaStream_t stream) {
  const char* op = "lora_expand";
  for (const Tensor* t : {&low, &b, &slots, static_cast<const Tensor*>(&out)})
    require(t->device == Device::CUDA, op, "every tensor must be on cuda, got " + shape_str(*t));
  require(b.ndim == 3 && b.is_contiguous(), op, "b must be a contiguous [S, N, R] tensor, got " + shape_str(b));
  const int64_t S = b.size(0), N = b.size(1), R = b.size(2), T = num_rows(out);
  require(slots.dtype == DType::I32 && slots.is_contiguous() && slots.numel() == T, op,
          "slots must be contiguous I32 [T]");
  require(num_rows(low) == T && low.row_numel() == S * R && out.row_numel() == N && low.dtype == out.dtype, op,
          "low must be [T, S·R] and out [T, N] of one activation dtype for b [S, N, R]");
  require(low.dtype == DType::F32 || low.dtype == DType::BF16, op, "activations must be F32 or BF16");
  require(b.dtype == DType::F32 || b.dtype == DType::BF16, op, "b must be F32 or BF16");
  require(N < (int64_t{1} << 31) && R < (int64_t{1} << 31) && S < (int64_t{1} << 31), op, "dimensions past 2^31");
  if (T == 0 || N == 0) return;
  const bool bf16_all = low.dtype == DType::BF16 && b.dtype == DType::BF16;
  const TilePlan plan = tile_plan(S, R);
  // A few rows (single-stream decode): the row kernel's shorter chain of loads wins.
  if (bf16_all && !legacy_expand() && T > kRowKernelFewRows && plan.group > 0 && R % 8 == 0 && N % 2 == 0 && low.stride0() % 8 == 0 &&
      out.stride0() % 2 == 0 && reinterpret_cast<uintptr_t>(low.data) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(b.data) % 16 == 0 && reinterpret_cast<uintptr_t>(out.data) % 4 == 0) {
    const int64_t tiles = (T + kTileRows - 1) / kTileRows;
    require(tiles <= 65535, op, "too many rows for one launch: " + std::to_string(T));
    const dim3 grid(static_cast<unsigned>((N + kTileCols - 1) / kTileCols), static_cast<unsigned>(tiles));
    lora_expand_tile_kernel<<<grid, kTileThreads, plan.shared, stream>>>(
        low.ptr<const bf16>(), low.stride0(), b.ptr<const bf16>(), slots.ptr<const int32_t>(), static_cast<int>(S),
        static_cast<int>(N), static_cast<int>(R), T, plan.group, out.ptr<bf16>(), out.stride0());
    PAGODA_CUDA_CHECK_LAUNCH();
    return;
  }
  // (16-byte aligned rows: the mixed tiles' fallback reads 8 values at a time.)
  const bool mma = T > kRowKernelMaxRows && low.dtype == DType::BF16 && b.dtype == DType::BF16 && R % 16 == 0 &&
                   low.stride0() % 8 == 0 && reinterpret_cast<uintptr_t>(low.data) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(b.data) % 16 == 0;
  if (mma) {
    const int64_t tiles = (T + kMmaRows - 1) / kMmaRows;
    require(tiles <= 65535, op, "too many rows for one launch: " + std::to_string(T));
    const dim3 grid(static_cast<unsigned>((N + kMmaCols - 1) / kMmaCols), static_cast<unsigned>(tiles));
    lora_expand_mma_kernel<<<grid, kMmaWarps * 32, 0, stream>>>(
        low.ptr<const bf16>(), low.stride0(), b.ptr<const bf16>(), slots.ptr<const int32_t>(), static_cast<int>(S),
        static_cast<int>(N), static_cast<int>(R), T, out.ptr<bf16>(), out.stride0());
    PAGODA_CUDA_CHECK_LAUNCH();
    return;
  }
  // More rows a block where there are many: a tile's rows of one slot share the B rows it reads.
  const int rows_per_block = T <= 16 ? 1 : T <= 256 ? 8 : 32;
  const int64_t tiles = (T + rows_per_block - 1) / rows_per_block;
  require(tiles <= 65535, op, "too many rows for one launch: " + std::to_string(T));
  const dim3 grid(static_cast<unsigned>((N + kExpandThreads - 1) / kExpandThreads), static_cast<unsigned>(tiles));
  const bool vec = low.dtype == DType::BF16 && b.dtype == DType::BF16 && R % 8 == 0 && low.stride0() % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(low.data) % 16 == 0 && reinterpret_cast<uintptr_t>(b.data) % 16 == 0;
  const auto run = [&](auto a_tag, auto w_tag, auto vec_tag) {
    using TA = decltype(a_tag);
    using TW = decltype(w_tag);
    lora_expand_kernel<TA, TW, decltype(vec_tag)::value><<<grid, kExpandThreads, 0, stream>>>(
        low.ptr<const TA>(), low.stride0(), b.ptr<const TW>(), slots.ptr<const int32_t>(), static_cast<int>(S),
        static_cast<int>(N), static_cast<int>(R), T, rows_per_block, out.ptr<TA>(), out.stride0());
  };
  using Vec = std::true_type;
  using Scalar = std::false_type;
  const bool a32 = low.dtype == DType::F32, w32 = b.dtype == DType::F32;
  if (vec) run(bf16{}, bf16{}, Vec{});
  else if (a32 && w32) run(float{}, float{}, Scalar{});
  else if (a32) run(float{}, bf16{}, Scalar{});
  else if (w32) run(bf16{}, float{}, Scalar{});
  else run(bf16{}, bf16{}, Scalar{});
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda

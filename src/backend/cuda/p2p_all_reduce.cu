// The one-shot peer-memory all-reduce (p2p_all_reduce.h).
//
// Block b of every rank handles the same 16-byte groups of the tensor: it writes them into its
// rank's slot on every rank, then (after its threads' stores) raises flag [b][rank] on every rank
// with its call count and waits until flag [b][q] of its own rank shows the count for every q —
// at which point block b of every rank has written its groups here — and sums the slots in rank
// order. The staging alternates between two sets by the call's parity: a rank writes call k + 2's
// data only after finishing call k + 1, which needed a flag that a peer raises only once its call k
// (stream order) is done, so the set a slow peer still reads is never the one being written. Counts are uint32 compared by signed difference (they
// wrap after 2^32 calls of one block). The host communicator's rank-order fp32 sums are the CPU twin.
#include "backend/cuda/p2p_all_reduce.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cuda_util.h"
#include "backend/cuda/device_util.cuh"
#include "core/error.h"

namespace pagoda::cuda {
namespace {

struct P2pPtrs {
  char* data[kP2pMaxRanks];
  uint32_t* flags[kP2pMaxRanks];
  const volatile uint32_t* aborted;  // mapped host memory
};

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

constexpr int kThreads = 512;

// Every counter moves on every call (block b the counters b, b + grid, ...): they all hold the
// call's number, so every block alternates the staging set in step with the others whatever the
// grid of the calls before (a block's region of one call can overlap another block's of the next).
// Returns the call's number (to every thread).
__device__ __forceinline__ uint32_t next_call(uint32_t* counters) {
  __shared__ uint32_t s_count;
  if (threadIdx.x == 0) {
    for (int i = static_cast<int>(blockIdx.x); i < kP2pMaxBlocks; i += static_cast<int>(gridDim.x)) {
      const uint32_t c = ++counters[i];
      if (i == static_cast<int>(blockIdx.x)) s_count = c;
    }
  }
  __syncthreads();
  return s_count;
}

// After the block's stores into every rank's slot: raises this block's flag on every rank and waits
// for every rank's (or for the group's abort).
__device__ __forceinline__ void exchange_flags(const P2pPtrs& ptrs, int world, int rank, uint32_t count) {
  __syncthreads();  // every thread's stores before the flags that publish them
  if (static_cast<int>(threadIdx.x) < world) {
    const int q = static_cast<int>(threadIdx.x);
    __threadfence_system();
    store_release_sys(ptrs.flags[q] + blockIdx.x * kP2pMaxRanks + rank, count);
    const uint32_t* mine = ptrs.flags[rank] + blockIdx.x * kP2pMaxRanks + q;
    for (uint32_t spins = 1; static_cast<int32_t>(load_acquire_sys(mine) - count) < 0; ++spins)
      if ((spins & 1023u) == 0 && *ptrs.aborted) break;  // the group was aborted: no partner is coming
  }
  __syncthreads();
}

// The rank-order fp32 sum of 16-byte group g over the slots (rank q's at slots + q · slot_bytes).
template <typename T>
__device__ __forceinline__ void sum_group(const char* slots, size_t slot_bytes, int world, int64_t g,
                                          float (&acc)[16 / sizeof(T)]) {
  constexpr int kPer = 16 / sizeof(T);
  const int4 v = reinterpret_cast<const int4*>(slots)[g];
  const T* e = reinterpret_cast<const T*>(&v);
  for (int i = 0; i < kPer; ++i) acc[i] = to_f32(e[i]);
  for (int q = 1; q < world; ++q) {
    const int4 u = reinterpret_cast<const int4*>(slots + static_cast<size_t>(q) * slot_bytes)[g];
    const T* f = reinterpret_cast<const T*>(&u);
    for (int i = 0; i < kPer; ++i) acc[i] += to_f32(f[i]);
  }
}

// T: the element type; groups: the tensor's 16-byte groups. x need not be 16-byte aligned (each
// group is then moved element by element): the partition into groups is the same on every rank.
template <typename T>
__global__ void __launch_bounds__(kThreads) p2p_all_reduce_kernel(P2pPtrs ptrs, uint32_t* counters, T* x,
                                                                  int64_t groups, int world, int rank,
                                                                  size_t slot_bytes) {
  constexpr int kPer = 16 / sizeof(T);
  const uint32_t count = next_call(counters);
  const size_t set = static_cast<size_t>(count & 1u) * slot_bytes * static_cast<size_t>(world);
  const int64_t per_block = (groups + gridDim.x - 1) / gridDim.x;
  const int64_t lo = static_cast<int64_t>(blockIdx.x) * per_block, hi = min(groups, lo + per_block);
  const bool aligned = (reinterpret_cast<uintptr_t>(x) & 15u) == 0;

  for (int64_t g = lo + threadIdx.x; g < hi; g += kThreads) {
    int4 v;
    if (aligned) {
      v = reinterpret_cast<const int4*>(x)[g];
    } else {
      T* e = reinterpret_cast<T*>(&v);
      for (int i = 0; i < kPer; ++i) e[i] = x[g * kPer + i];
    }
    for (int q = 0; q < world; ++q)
      reinterpret_cast<int4*>(ptrs.data[q] + set + static_cast<size_t>(rank) * slot_bytes)[g] = v;
  }
  exchange_flags(ptrs, world, rank, count);

  const char* slots = ptrs.data[rank] + set;
  for (int64_t g = lo + threadIdx.x; g < hi; g += kThreads) {
    float acc[kPer];
    sum_group<T>(slots, slot_bytes, world, g, acc);
    int4 out;
    T* o = reinterpret_cast<T*>(&out);
    for (int i = 0; i < kPer; ++i) o[i] = from_f32<T>(acc[i]);
    if (aligned) {
      reinterpret_cast<int4*>(x)[g] = out;
    } else {
      for (int i = 0; i < kPer; ++i) x[g * kPer + i] = o[i];
    }
  }
}

// N (4 or 8) norm weights from column col0: fp32 ones (as loaded) in 16-byte loads (w 16-byte
// aligned, p2p_norm_takes), 16-bit ones element by element.
template <int N>
__device__ __forceinline__ void load_weights(const void* w, int wdt, int64_t col0, float (&out)[8]) {
  if (wdt == static_cast<int>(DType::F32)) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(w) + col0);
#pragma unroll
    for (int j = 0; j < N / 4; ++j) {
      const float4 a = __ldg(p + j);
      out[4 * j] = a.x, out[4 * j + 1] = a.y, out[4 * j + 2] = a.z, out[4 * j + 3] = a.w;
    }
  } else {
    for (int i = 0; i < N; ++i) out[i] = load_weight(w, wdt, col0 + i);
  }
}

constexpr int kNormThreads = 1024;  // a 16-byte group a thread for rows up to 8,192 bf16

// The sum fused with add_rms_norm: block b takes whole rows (the same ones on every rank) and
// publishes them as p2p_all_reduce_kernel does. While it waits for the peers' flags each thread
// already holds the residual and weights of its first group (local memory: the wait hides their
// latency, the whole cost of a one-row decode sum). Then per row: the slots summed, rounded to T
// (the sum's dtype), added to the residual (rounded to T), the row normalised — rms_norm_kernel's
// arithmetic and rounding. x is not written back (the decoder reads only residual and out).
template <typename T>
__global__ void __launch_bounds__(kNormThreads)
    p2p_all_reduce_norm_kernel(P2pPtrs ptrs, uint32_t* counters, const T* x, T* res, const void* w, int wdt, T* out,
                               int64_t rows, int64_t row_groups, int world, int rank, size_t slot_bytes, float eps,
                               float w_offset) {
  constexpr int kPer = 16 / sizeof(T);
  static_assert(kPer <= 8, "eight weights a group at most");
  const uint32_t count = next_call(counters);
  const size_t set = static_cast<size_t>(count & 1u) * slot_bytes * static_cast<size_t>(world);
  const int64_t rows_per_block = (rows + gridDim.x - 1) / gridDim.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * rows_per_block, r1 = min(rows, r0 + rows_per_block);
  for (int64_t g = r0 * row_groups + threadIdx.x; g < r1 * row_groups; g += kNormThreads) {
    const int4 v = reinterpret_cast<const int4*>(x)[g];
    for (int q = 0; q < world; ++q)
      reinterpret_cast<int4*>(ptrs.data[q] + set + static_cast<size_t>(rank) * slot_bytes)[g] = v;
  }
  // The first row's first group of this thread: its residual and weights before the wait.
  const int64_t first = static_cast<int64_t>(threadIdx.x);
  int4 pre_res = make_int4(0, 0, 0, 0);
  float pre_w[8] = {};
  if (r0 < r1 && first < row_groups) {
    pre_res = reinterpret_cast<const int4*>(res)[r0 * row_groups + first];
    load_weights<kPer>(w, wdt, first * kPer, pre_w);
  }
  exchange_flags(ptrs, world, rank, count);

  const char* slots = ptrs.data[rank] + set;
  const float hidden = static_cast<float>(row_groups * kPer);
  for (int64_t row = r0; row < r1; ++row) {
    float ss = 0.0f;
    for (int64_t c = threadIdx.x; c < row_groups; c += kNormThreads) {
      const int64_t g = row * row_groups + c;
      float acc[kPer];
      sum_group<T>(slots, slot_bytes, world, g, acc);
      int4 rv = row == r0 && c == first ? pre_res : reinterpret_cast<const int4*>(res)[g];
      T* r = reinterpret_cast<T*>(&rv);
      for (int i = 0; i < kPer; ++i) {
        r[i] = from_f32<T>(to_f32(r[i]) + to_f32(from_f32<T>(acc[i])));  // the stream is stored in T
        const float f = to_f32(r[i]);
        ss += f * f;
      }
      reinterpret_cast<int4*>(res)[g] = rv;
    }
    const float inv = rsqrtf(block_sum(ss) / hidden + eps);
    for (int64_t c = threadIdx.x; c < row_groups; c += kNormThreads) {
      const int64_t g = row * row_groups + c;
      const int4 rv = reinterpret_cast<const int4*>(res)[g];  // this thread's own stores
      const T* r = reinterpret_cast<const T*>(&rv);
      float wv[8];
      if (c == first) {
        for (int i = 0; i < 8; ++i) wv[i] = pre_w[i];
      } else {
        load_weights<kPer>(w, wdt, c * kPer, wv);
      }
      int4 ov;
      T* o = reinterpret_cast<T*>(&ov);
      for (int i = 0; i < kPer; ++i)
        o[i] = w_offset == 0.0f ? from_f32<T>(round_to<T>(to_f32(r[i]) * inv) * wv[i])
                                : from_f32<T>(to_f32(r[i]) * inv * (wv[i] + w_offset));
      reinterpret_cast<int4*>(out)[g] = ov;
    }
  }
}

P2pPtrs pointers(const P2pGroup& g) {
  P2pPtrs ptrs{};
  ptrs.aborted = g.aborted;  // unified addressing: the host pointer is the device's too
  for (int r = 0; r < g.world; ++r) {
    ptrs.data[r] = g.data[static_cast<size_t>(r)];
    ptrs.flags[r] = g.flags[static_cast<size_t>(r)];
  }
  return ptrs;
}

bool aligned16(const Tensor& t) { return (reinterpret_cast<uintptr_t>(t.data) & 15u) == 0; }

}  // namespace

P2pGroup::~P2pGroup() {
  if (aborted) cudaFreeHost(const_cast<uint32_t*>(aborted));
  for (size_t r = 0; r < devices.size(); ++r) {
    cudaSetDevice(devices[r]);
    if (r < data.size() && data[r]) cudaFree(data[r]);
    if (r < flags.size() && flags[r]) cudaFree(flags[r]);
    if (r < counters.size() && counters[r]) cudaFree(counters[r]);
  }
}

std::shared_ptr<P2pGroup> make_p2p_group(const std::vector<int>& devices, size_t slot_bytes) {
  const int world = static_cast<int>(devices.size());
  if (world < 2 || world > kP2pMaxRanks || slot_bytes % 16 != 0) return nullptr;
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return nullptr;
  for (int a : devices)
    for (int b : devices) {
      int ok = 0;
      if (a != b && (cudaDeviceCanAccessPeer(&ok, a, b) != cudaSuccess || !ok)) return nullptr;
    }
  auto g = std::make_shared<P2pGroup>();
  g->world = world;
  g->slot_bytes = slot_bytes;
  g->devices = devices;
  g->data.assign(static_cast<size_t>(world), nullptr);
  g->flags.assign(static_cast<size_t>(world), nullptr);
  g->counters.assign(static_cast<size_t>(world), nullptr);
  const size_t flag_bytes = sizeof(uint32_t) * kP2pMaxBlocks * kP2pMaxRanks;
  bool ok = true;
  for (int r = 0; r < world && ok; ++r) {
    ok = cudaSetDevice(devices[static_cast<size_t>(r)]) == cudaSuccess;
    for (int b : devices) {
      if (!ok || b == devices[static_cast<size_t>(r)]) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();  // NCCL may have done it
      else ok = e == cudaSuccess;
    }
    ok = ok && cudaMalloc(&g->data[static_cast<size_t>(r)], 2 * static_cast<size_t>(world) * slot_bytes) == cudaSuccess;
    ok = ok && cudaMalloc(reinterpret_cast<void**>(&g->flags[static_cast<size_t>(r)]), flag_bytes) == cudaSuccess;
    ok = ok && cudaMalloc(reinterpret_cast<void**>(&g->counters[static_cast<size_t>(r)]),
                          sizeof(uint32_t) * kP2pMaxBlocks) == cudaSuccess;
    ok = ok && cudaMemset(g->flags[static_cast<size_t>(r)], 0, flag_bytes) == cudaSuccess;
    ok = ok && cudaMemset(g->counters[static_cast<size_t>(r)], 0, sizeof(uint32_t) * kP2pMaxBlocks) == cudaSuccess;
    ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  }
  void* host = nullptr;
  ok = ok && cudaHostAlloc(&host, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess;
  if (host) {
    g->aborted = static_cast<volatile uint32_t*>(host);
    *g->aborted = 0;
  }
  if (!ok) cudaGetLastError();
  cudaSetDevice(previous);
  return ok ? g : nullptr;
}

void launch_p2p_all_reduce(P2pGroup& g, int rank, Tensor& x, cudaStream_t stream) {
  const size_t bytes = x.nbytes();
  check_invariant(p2p_takes(g, bytes) && x.is_contiguous() && rank >= 0 && rank < g.world,
                  "launch_p2p_all_reduce: a sum the group does not take");
  const P2pPtrs ptrs = pointers(g);
  const auto groups = static_cast<int64_t>(bytes / 16);
  // Small sums in one block (one flag exchange); large ones over up to kP2pSumBlocks, each block
  // with at least 4 groups a thread. The count depends on the size alone: the same on every rank.
  const int blocks = static_cast<int>(std::clamp<int64_t>((groups + 4 * kThreads - 1) / (4 * kThreads), 1, kP2pSumBlocks));
  uint32_t* counters = g.counters[static_cast<size_t>(rank)];
  switch (x.dtype) {
    case DType::F32:
      p2p_all_reduce_kernel<float><<<blocks, kThreads, 0, stream>>>(ptrs, counters, static_cast<float*>(x.data),
                                                                    groups, g.world, rank, g.slot_bytes);
      break;
    case DType::BF16:
      p2p_all_reduce_kernel<bf16><<<blocks, kThreads, 0, stream>>>(ptrs, counters, static_cast<bf16*>(x.data), groups,
                                                                   g.world, rank, g.slot_bytes);
      break;
    case DType::F16:
      p2p_all_reduce_kernel<__half><<<blocks, kThreads, 0, stream>>>(ptrs, counters, static_cast<__half*>(x.data),
                                                                     groups, g.world, rank, g.slot_bytes);
      break;
    default:
      throw Error(std::string("the peer-memory all-reduce sums f32, bf16 or f16, not ") + dtype_name(x.dtype));
  }
  PAGODA_CUDA_CHECK_LAUNCH();
}

bool p2p_norm_takes(const P2pGroup& g, const Tensor& x, const Tensor& residual, const Tensor& w, const Tensor& out) {
  const auto ok = [&](const Tensor& t) {
    return t.is_contiguous() && aligned16(t) && t.dtype == x.dtype && t.numel() == x.numel() && t.ndim == 2;
  };
  const auto float_dtype = [](DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; };
  return p2p_takes(g, x.nbytes()) && ok(x) && ok(residual) && ok(out) && x.size(0) == residual.size(0) &&
         float_dtype(x.dtype) && (x.size(1) * static_cast<int64_t>(dtype_size(x.dtype))) % 16 == 0 &&
         aligned16(w) && float_dtype(w.dtype) && w.device == Device::CUDA && w.numel() == x.size(1);
}

void launch_p2p_all_reduce_add_rms_norm(P2pGroup& g, int rank, Tensor& x, Tensor& residual, const Tensor& w,
                                        Tensor& out, float eps, bool zero_centered, cudaStream_t stream) {
  check_invariant(p2p_norm_takes(g, x, residual, w, out) && rank >= 0 && rank < g.world,
                  "launch_p2p_all_reduce_add_rms_norm: tensors the group does not take");
  const int64_t rows = x.size(0), hidden = x.size(1);
  if (rows == 0) return;
  const P2pPtrs ptrs = pointers(g);
  const int64_t row_groups = hidden * static_cast<int64_t>(dtype_size(x.dtype)) / 16;
  // A block per row up to kP2pMaxBlocks (a decode step's rows normalise in parallel); the count
  // depends on the shape alone: the same on every rank.
  const int blocks = static_cast<int>(std::min<int64_t>(rows, kP2pMaxBlocks));
  uint32_t* counters = g.counters[static_cast<size_t>(rank)];
  const float w_off = zero_centered ? 1.0f : 0.0f;
  PAGODA_DISPATCH_FLOAT(x.dtype, T, "all_reduce_add_rms_norm", {
    p2p_all_reduce_norm_kernel<T><<<blocks, kNormThreads, 0, stream>>>(
        ptrs, counters, x.ptr<T>(), residual.ptr<T>(), w.data, static_cast<int>(w.dtype), out.ptr<T>(), rows,
        row_groups, g.world, rank, g.slot_bytes, eps, w_off);
  });
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda

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

// T: the element type; groups: the tensor's 16-byte groups. x need not be 16-byte aligned (each
// group is then moved element by element): the partition into groups is the same on every rank.
template <typename T>
__global__ void __launch_bounds__(kThreads) p2p_all_reduce_kernel(P2pPtrs ptrs, uint32_t* counters, T* x,
                                                                  int64_t groups, int world, int rank,
                                                                  size_t slot_bytes) {
  constexpr int kPer = 16 / sizeof(T);
  __shared__ uint32_t s_count;
  // Every counter moves on every call (block b the counters b, b + grid, ...): they all hold the
  // call's number, so every block alternates the staging set in step with the others whatever the
  // grid of the calls before (a block's region of one call can overlap another block's of the next).
  if (threadIdx.x == 0) {
    for (int i = static_cast<int>(blockIdx.x); i < kP2pMaxBlocks; i += static_cast<int>(gridDim.x)) {
      const uint32_t c = ++counters[i];
      if (i == static_cast<int>(blockIdx.x)) s_count = c;
    }
  }
  __syncthreads();
  const uint32_t count = s_count;
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
  __syncthreads();  // every thread's stores before the flags that publish them
  if (threadIdx.x < world) {
    const int q = threadIdx.x;
    __threadfence_system();
    store_release_sys(ptrs.flags[q] + blockIdx.x * kP2pMaxRanks + rank, count);
    const uint32_t* mine = ptrs.flags[rank] + blockIdx.x * kP2pMaxRanks + q;
    for (uint32_t spins = 1; static_cast<int32_t>(load_acquire_sys(mine) - count) < 0; ++spins)
      if ((spins & 1023u) == 0 && *ptrs.aborted) break;  // the group was aborted: no partner is coming
  }
  __syncthreads();

  const char* slots = ptrs.data[rank] + set;
  for (int64_t g = lo + threadIdx.x; g < hi; g += kThreads) {
    float acc[kPer];
    {
      const int4 v = reinterpret_cast<const int4*>(slots)[g];
      const T* e = reinterpret_cast<const T*>(&v);
      for (int i = 0; i < kPer; ++i) acc[i] = to_f32(e[i]);
    }
    for (int q = 1; q < world; ++q) {
      const int4 v = reinterpret_cast<const int4*>(slots + static_cast<size_t>(q) * slot_bytes)[g];
      const T* e = reinterpret_cast<const T*>(&v);
      for (int i = 0; i < kPer; ++i) acc[i] += to_f32(e[i]);
    }
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
  P2pPtrs ptrs{};
  ptrs.aborted = g.aborted;  // unified addressing: the host pointer is the device's too
  for (int r = 0; r < g.world; ++r) {
    ptrs.data[r] = g.data[static_cast<size_t>(r)];
    ptrs.flags[r] = g.flags[static_cast<size_t>(r)];
  }
  const auto groups = static_cast<int64_t>(bytes / 16);
  // Small sums in one block (one flag exchange); large ones over up to kP2pMaxBlocks, each block
  // with at least 4 groups a thread. The count depends on the size alone: the same on every rank.
  const int blocks = static_cast<int>(std::clamp<int64_t>((groups + 4 * kThreads - 1) / (4 * kThreads), 1, kP2pMaxBlocks));
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

}  // namespace pagoda::cuda

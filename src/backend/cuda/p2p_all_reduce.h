// A one-shot all-reduce between the GPUs of one process through peer memory, for the small sums of
// decode steps (a row-parallel projection's output: a few rows of hidden_size), where NCCL's ring
// pays its per-step latency once per hop. Each rank writes its tensor into a slot of every rank's
// staging buffer, raises a flag on every rank, waits for every rank's flag, and sums the slots in
// rank order in fp32 — so every rank gets the same bits, as from the host communicator. A kernel
// like any other: stream-ordered, no host wait, captured by CUDA graphs (its counters live on the
// device). The communicator (nccl_communicator.cpp) sends sums that fit here and NCCL the rest.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace pagoda::cuda {

inline constexpr int kP2pMaxRanks = 8;
inline constexpr int kP2pMaxBlocks = 32;

// The group's buffers, one set per device (UVA pointers: every rank's kernel reads and writes
// its peers' through NVLink / PCIe peer access).
struct P2pGroup {
  int world = 0;
  size_t slot_bytes = 0;  // the largest sum it takes
  std::vector<int> devices;
  std::vector<char*> data;          // per rank: [2 alternating sets][world slots][slot_bytes]
  std::vector<uint32_t*> flags;     // per rank: [kP2pMaxBlocks][kP2pMaxRanks], written by the peers
  std::vector<uint32_t*> counters;  // per rank: [kP2pMaxBlocks], every one the count of calls
  // Host memory every rank's kernel polls while it waits: set by abort(), so that a rank waiting for
  // a peer that will not come ends (its sum is then garbage; the step is failed by its caller).
  volatile uint32_t* aborted = nullptr;
  void abort() {
    if (aborted) *aborted = 1u;
  }
  ~P2pGroup();
};

// The group over `devices` (this process's, rank i = devices[i]), or null when a pair of them cannot
// reach each other's memory or the buffers cannot be had (the caller keeps NCCL for everything).
std::shared_ptr<P2pGroup> make_p2p_group(const std::vector<int>& devices, size_t slot_bytes);

// Whether a sum of `bytes` goes through the group: the same answer on every rank for the same
// tensor shape (the choice must not differ between ranks, or they would wait on each other).
inline bool p2p_takes(const P2pGroup& g, size_t bytes) { return bytes > 0 && bytes <= g.slot_bytes && bytes % 16 == 0; }

// Sums x (f32, bf16 or f16, contiguous, p2p_takes its size) over the group in place on rank
// `rank`'s stream. Every rank must call it for the same sizes in the same order.
void launch_p2p_all_reduce(P2pGroup& g, int rank, Tensor& x, cudaStream_t stream);

}  // namespace pagoda::cuda

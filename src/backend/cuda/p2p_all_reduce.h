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
// Flag slots: the fused norm runs a block per few rows, up to this many.
inline constexpr int kP2pMaxBlocks = 128;
// The plain sum's blocks (more only add flag exchanges).
inline constexpr int kP2pSumBlocks = 32;

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

// Whether the fused sum-and-norm below takes x [rows, hidden] (with its residual, norm weight and
// out): a size p2p_takes, every tensor contiguous and 16-byte aligned, rows of whole 16-byte groups,
// float dtypes, a weight of `hidden` elements on the device.
bool p2p_norm_takes(const P2pGroup& g, const Tensor& x, const Tensor& residual, const Tensor& w, const Tensor& out);

// The row-parallel sum fused with the residual add and RMSNorm that follow it (a layer's
// o_proj / down_proj / out_proj, then the next norm): x = Σ ranks' x (rank order, fp32, rounded to
// x's dtype), residual += x, out = rms_norm(residual) · w — with the rounding of add_rms_norm
// (elementwise_kernels.cu), one kernel instead of two; x is left as it was. zero_centered: weight
// (1 + w).
void launch_p2p_all_reduce_add_rms_norm(P2pGroup& g, int rank, Tensor& x, Tensor& residual, const Tensor& w,
                                        Tensor& out, float eps, bool zero_centered, cudaStream_t stream);

}  // namespace pagoda::cuda

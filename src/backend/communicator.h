// Collectives between the workers of one executor (DESIGN: one worker per device). A tensor-parallel
// group sums row-parallel partial products through it; NCCL implements it on CUDA, threads and
// shared memory on the CPU. The executor creates one group and hands each rank its view.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace pagoda {

class Backend;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // x = Σ over the group's ranks of each rank's x, in place, on `be`'s stream (no host wait). Every
  // rank ends with the same bits: the sum is taken in rank order once and copied to all.
  virtual void all_reduce_sum(Backend& be, Tensor& x) = 0;
  // The sum of a row-parallel projection's output x fused with the residual add and RMSNorm that
  // follow it: all_reduce_sum(x), then be.add_rms_norm(residual, x, w, out, eps, zero_centered) —
  // the default; a communicator overrides it to do both in one pass (decode's many small sums).
  virtual void all_reduce_add_rms_norm(Backend& be, Tensor& x, Tensor& residual, const Tensor& w, Tensor& out,
                                       float eps, bool zero_centered);
  // out [M, world · n] (dim 0 may be strided) = every rank's x [M, n] side by side in rank order: a
  // vocab-parallel lm_head's logits. scratch (world · M · n elements of x's dtype, contiguous) is
  // the caller's memory a communicator may land the gather in before placing the columns.
  virtual void all_gather_cols(Backend& be, const Tensor& x, Tensor& scratch, Tensor& out) = 0;
  // A rank that failed mid-step calls it: every rank blocked in (or later entering) a collective
  // throws pagoda::Error instead of waiting for it forever.
  virtual void abort(const std::string& why) = 0;
};

// One view per rank of a new group of `world` ranks on `device`: "cpu" (threads), "cuda" (NCCL over
// devices first_ordinal..first_ordinal+world-1: a data-parallel replica's; small sums through peer
// memory unless `custom_all_reduce` is false). Throws pagoda::Error naming what is missing (a
// device, GPUs, NCCL).
std::vector<std::unique_ptr<Communicator>> make_communicators(const std::string& device, int world,
                                                              int first_ordinal = 0, bool custom_all_reduce = true);

}  // namespace pagoda

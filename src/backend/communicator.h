// Collectives between the workers of one executor (DESIGN: one worker per device). A tensor-parallel
// group sums row-parallel partial products through it; NCCL implements it on CUDA, threads and
// shared memory on the CPU. The executor creates one per group and hands each rank its view.
#pragma once

#include "core/tensor.h"

namespace pagoda {

class Backend;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // x = Σ over the group's ranks of each rank's x, in place, on `be`'s stream (no host wait).
  virtual void all_reduce_sum(Backend& be, Tensor& x) = 0;
};

}  // namespace pagoda

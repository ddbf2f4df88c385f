#include "backend/communicator.h"

#include "backend/backend.h"
#include "backend/host_communicator.h"
#include "core/error.h"
#ifdef PAGODA_HAS_CUDA
#include "backend/cuda/nccl_communicator.h"
#endif

namespace pagoda {

void Communicator::all_reduce_add_rms_norm(Backend& be, Tensor& x, Tensor& residual, const Tensor& w, Tensor& out,
                                           float eps, bool zero_centered) {
  all_reduce_sum(be, x);
  be.add_rms_norm(residual, x, w, out, eps, zero_centered);
}

std::vector<std::unique_ptr<Communicator>> make_communicators(const std::string& device, int world, int first_ordinal,
                                                              bool custom_all_reduce) {
  check(world >= 1, "tensor parallelism: a group needs at least one rank");
  check(first_ordinal >= 0, "tensor parallelism: a device ordinal cannot be negative");
  if (device == "cpu") return make_host_communicators(world);  // sums in host memory: nothing to choose
  (void)custom_all_reduce;
#ifdef PAGODA_HAS_CUDA
  if (device == "cuda") return make_nccl_communicators(world, first_ordinal, custom_all_reduce);
#endif
  throw Error("--tensor-parallel-size " + std::to_string(world) + " on --device " + device +
              ": tensor parallelism runs on the cpu, and on cuda through NCCL in a build with CUDA; use "
              "--tensor-parallel-size 1");
}

}  // namespace pagoda

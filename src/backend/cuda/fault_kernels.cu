// Real device errors made on purpose (PAGODA_INJECT_FAULT kernel / sticky-kernel, docs/faults.md):
// the recovery paths must see what the CUDA runtime reports, not an exception thrown in its place.
#include "backend/cuda/cuda_util.h"
#include "backend/cuda/kernels.h"

namespace pagoda::cuda {
namespace {

__global__ void never_runs_kernel() {}

__global__ void trap_kernel() { __trap(); }

}  // namespace

void launch_injected_fault(bool sticky, cudaStream_t stream) {
  if (sticky) {
    // A trap ends the kernel with "unspecified launch failure": sticky, reported at the next sync.
    trap_kernel<<<1, 1, 0, stream>>>();
  } else {
    // 4,096 threads per block is past every GPU's limit (1,024): the launch itself is refused
    // (cudaErrorInvalidValue on an H100 with CUDA 12), which leaves the context usable.
    never_runs_kernel<<<1, 4096, 0, stream>>>();
  }
  PAGODA_CUDA_CHECK_LAUNCH();
}

}  // namespace pagoda::cuda

// Gated DeltaNet ops of the CUDA backend (placeholders until the kernels land).
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace pagoda {

void CudaBackend::causal_conv1d_silu(const Tensor&, const Tensor&, Tensor&, const StepMeta&, Tensor&) {
  throw Error("causal_conv1d_silu is not implemented on this backend yet");
}

void CudaBackend::gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  const Tensor&, const Tensor&, const Tensor&, Tensor&,
                                  const StepMeta&, Tensor&) {
  throw Error("gated_delta_rule is not implemented on this backend yet");
}

void CudaBackend::gated_rms_norm(const Tensor&, const Tensor&, const Tensor&, float, Tensor&) {
  throw Error("gated_rms_norm is not implemented on this backend yet");
}

}  // namespace pagoda

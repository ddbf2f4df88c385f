// The vision encoder's primitives on CUDA (backend.h, "vision encoders"): not written yet, so
// supports() answers false for them and a model that needs them is refused at load with their names.
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"

namespace pagoda {

void CudaBackend::layer_norm(const Tensor&, const Tensor&, const Tensor&, Tensor&, float) {
  throw Error("cuda: layer_norm is not implemented yet (supports() says so)");
}

void CudaBackend::gelu(const Tensor&, Tensor&, bool) {
  throw Error("cuda: gelu is not implemented yet (supports() says so)");
}

void CudaBackend::rope_axes(Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  throw Error("cuda: rope_axes is not implemented yet (supports() says so)");
}

void CudaBackend::segment_attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float, Tensor&) {
  throw Error("cuda: segment_attention is not implemented yet (supports() says so)");
}

}  // namespace pagoda

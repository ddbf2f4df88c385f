// Run-time choice of the blocked GEMM kernels (gemm.h).
#include "backend/cpu/gemm.h"

namespace pagoda::cpu {

GemmKernels gemm_kernels_for(CpuIsa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case CpuIsa::Avx512:
    case CpuIsa::Avx512Bf16:  // the exact fp32 kernel: vdpbf16ps would round x to bf16
      return {gemm_bf16_avx512, gemm_f16_avx512};
#endif
    default:
      return {};
  }
}

const GemmKernels& gemm_kernels() {
  static const GemmKernels k = gemm_kernels_for(gemv_kernels().isa);
  return k;
}

}  // namespace pagoda::cpu

// Run-time choice of the blocked GEMM kernels (gemm.h).
#include "backend/cpu/gemm.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace pagoda::cpu {

GemmKernels gemm_kernels_for(CpuIsa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case CpuIsa::Avx512Bf16:
      return {gemm_bf16_avx512bf16, nullptr};
#endif
    default:  // an exact fp32 GEMM of ours measured no faster than the GEMV kernels: the FMA is the limit
      return {};
  }
}

const GemmKernels& gemm_kernels() {
  static const GemmKernels k = [] {
    // Opt-in: rounding x to bf16 moves logits by 1e-1 on the fixture models, far outside the 1e-4
    // the parity tests against transformers (fp32) hold the CPU backend to.
    const char* mode = std::getenv("PAGODA_CPU_PREFILL");
    if (mode == nullptr || *mode == '\0' || std::strcmp(mode, "exact") == 0) return GemmKernels{};
    if (std::strcmp(mode, "bf16") != 0)
      throw Error(std::string("PAGODA_CPU_PREFILL=") + mode + " is not a prefill mode: use exact or bf16 (or unset it)");
    if (!isa_supported(CpuIsa::Avx512Bf16))
      throw Error("PAGODA_CPU_PREFILL=bf16 needs a CPU with AVX-512 BF16, which this one lacks: unset it");
    return gemm_kernels_for(CpuIsa::Avx512Bf16);
  }();
  return k;
}

}  // namespace pagoda::cpu

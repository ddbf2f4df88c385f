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

namespace {

// PAGODA_CPU_PREFILL: -1 unset, 0 exact, 1 bf16 (checked once).
int prefill_override() {
  static const int v = [] {
    const char* mode = std::getenv("PAGODA_CPU_PREFILL");
    if (mode == nullptr || *mode == '\0') return -1;
    if (std::strcmp(mode, "exact") == 0) return 0;
    if (std::strcmp(mode, "bf16") != 0)
      throw Error(std::string("PAGODA_CPU_PREFILL=") + mode + " is not a prefill mode: use exact or bf16 (or unset it)");
    if (!isa_supported(CpuIsa::Avx512Bf16))
      throw Error("PAGODA_CPU_PREFILL=bf16 needs a CPU with AVX-512 BF16, which this one lacks: unset it");
    return 1;
  }();
  return v;
}

}  // namespace

const GemmKernels& gemm_kernels(bool bf16_wanted) {
  // Rounding x to bf16 moves logits by 1e-1 on the fixture models, far outside the 1e-4 the parity
  // tests against transformers (fp32) hold: those run --dtype float32, whose weights are fp32.
  static const GemmKernels none{};
  static const GemmKernels bf16 = isa_supported(CpuIsa::Avx512Bf16) ? gemm_kernels_for(CpuIsa::Avx512Bf16) : GemmKernels{};
  const int o = prefill_override();
  return (o < 0 ? bf16_wanted : o == 1) ? bf16 : none;
}

}  // namespace pagoda::cpu

// Blocked GEMM over 16-bit weights for many rows of x (prefill): out[t, n] = sum_k x[t, k] * w[n, k],
// x fp32, w BF16/F16 rows, fp32 accumulation. The GEMV kernels of gemv.h compute dot products of a
// few x rows against a few weight rows and re-widen each weight every few rows of x; this one widens
// a panel of 32 weight rows × kKc columns once into an fp32 buffer and runs an outer-product
// micro-kernel over all rows of x (12 × 32 accumulators in registers, x broadcast), so the FMA
// units, not the loads and widening, are the limit. Same signature as GemvFn: single-threaded over a
// slice of output rows. Only where an ISA has one (x86-64 AVX-512 today); elsewhere the GEMV kernels
// serve every T. Internal to src/backend/cpu.
#pragma once

#include <cstdint>

#include "backend/cpu/gemv.h"

namespace pagoda::cpu {

struct GemmKernels {
  GemvFn bf16 = nullptr;  // null: no blocked GEMM for this ISA, use the GEMV kernels
  GemvFn f16 = nullptr;
};

// Below this many rows of x the GEMV kernels are at least as fast (the weights dominate).
constexpr int64_t kGemmMinRows = 16;
// Output rows per weight panel: a thread's slice should be a multiple of it.
constexpr int64_t kGemmPanelRows = 32;

GemmKernels gemm_kernels_for(CpuIsa isa);
// For the ISA the GEMV kernels in use were chosen for (gemv_kernels().isa).
const GemmKernels& gemm_kernels();

#if defined(__x86_64__)
void gemm_bf16_avx512(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
void gemm_f16_avx512(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
#endif

}  // namespace pagoda::cpu

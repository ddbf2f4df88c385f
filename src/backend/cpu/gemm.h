// Blocked GEMM over BF16 weights for many rows of x (prefill): out[t, n] = sum_k bf16(x[t, k]) * w[n, k]
// with fp32 sums. The exact GEMV kernels of gemv.h run fp32 FMAs near their limit (2026-11-27, Zen 4,
// one thread: 96 GFLOP/s; an exact blocked fp32 GEMM of ours reached 87); vdpbf16ps does twice the
// multiply-adds per instruction once x is rounded to bf16 (2^-9 relative per element, what llama.cpp's
// and oneDNN's bf16 matmuls and a bf16 transformers forward do) — outside the parity tests'
// tolerance, so only for bf16 models (a --dtype float32 run keeps x exact). Same signature as GemvFn: single-threaded over a
// slice of output rows. Only where an ISA has one (AVX-512 BF16); elsewhere, and for F16 weights,
// the GEMV kernels serve every T. Internal to src/backend/cpu.
#pragma once

#include <cstdint>

#include "backend/cpu/gemv.h"

namespace pagoda::cpu {

struct GemmKernels {
  GemvFn bf16 = nullptr;  // null: no blocked GEMM for this ISA, use the GEMV kernels
  GemvFn f16 = nullptr;   // none yet
};

// Below this many rows of x the GEMV kernels are at least as fast (the weights dominate).
constexpr int64_t kGemmMinRows = 16;
// Output rows per weight panel: a thread's slice should be a multiple of it.
constexpr int64_t kGemmPanelRows = 32;

GemmKernels gemm_kernels_for(CpuIsa isa);
// The kernels for a backend that wants the bf16 prefill GEMM (`bf16_wanted`: a bf16 model, the
// engine's rule) or not: AVX-512 BF16's where wanted and the CPU has it, else none (the exact GEMV
// kernels for every T). PAGODA_CPU_PREFILL=exact|bf16 overrides the wish either way (side-by-side
// runs); it throws naming the variable when the value is unknown or the CPU lacks AVX-512 BF16.
const GemmKernels& gemm_kernels(bool bf16_wanted);

#if defined(__x86_64__)
void gemm_bf16_avx512bf16(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t,
                          int64_t);
#endif

}  // namespace pagoda::cpu

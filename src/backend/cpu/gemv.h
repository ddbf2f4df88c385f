// Decode GEMV / skinny GEMM over 16-bit weights: out[t, n] = sum_k x[t, k] * w[n, k] with x fp32,
// w BF16 or F16 rows and fp32 accumulation, for the few-token steps (decode) where the weights are
// streamed once from memory and the speed is the read bandwidth. One translation unit per ISA
// (compiled with target attributes, so the binary still runs on CPUs without them), chosen at run
// time from cpuid (x86-64) or the HWCAPs (aarch64), or forced with
// PAGODA_CPU_ISA=avx512bf16|avx512|avx2|neonbf16|neon|scalar. Single-threaded:
// linear() splits the output rows over the thread pool. Internal to src/backend/cpu.
#pragma once

#include <cstdint>
#include <string>

namespace pagoda::cpu {

enum class CpuIsa { Scalar, Avx2, Avx512, Avx512Bf16, Neon, NeonBf16 };

using GemvFn = void (*)(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                        int64_t T, int64_t N, int64_t K);

struct GemvKernels {
  GemvFn bf16 = nullptr;
  GemvFn f16 = nullptr;
  CpuIsa isa = CpuIsa::Scalar;
};

const char* isa_name(CpuIsa isa);
bool isa_supported(CpuIsa isa);          // by this CPU (and this build: x86-64 or aarch64 paths)
GemvKernels gemv_kernels_for(CpuIsa isa);  // throws when the CPU lacks it
// The kernels in use: PAGODA_CPU_ISA when set (throws naming the variable when this CPU lacks that
// ISA or the name is unknown), else the best this CPU has. Decided once.
const GemvKernels& gemv_kernels();

// The per-ISA entry points (gemv_<isa>.cpp).
void gemv_bf16_scalar(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
void gemv_f16_scalar(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
#if defined(__x86_64__)
void gemv_bf16_avx2(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
void gemv_f16_avx2(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
void gemv_bf16_avx512(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
void gemv_f16_avx512(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
void gemv_bf16_avx512bf16(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t,
                          int64_t);
#endif
#if defined(__aarch64__)
// BFDOT through a per-function "+bf16" target: GCC 10 and later (other compilers get NEON only).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#define PAGODA_NEON_BF16 1
#endif
void gemv_bf16_neon(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
void gemv_f16_neon(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
#if defined(PAGODA_NEON_BF16)
void gemv_bf16_neonbf16(const float*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t, int64_t);
#endif
#endif

}  // namespace pagoda::cpu

// Run-time choice of the GEMV kernels (gemv.h) and the portable scalar path.
#include "backend/cpu/gemv.h"

#include <cstdlib>
#include <cstring>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "backend/cpu/convert.h"
#include "core/error.h"

namespace pagoda::cpu {
namespace {

// Four weight rows at a time, each x row against them: four independent sums keep the adds busy.
template <float (*Load)(uint16_t)>
void gemv_scalar(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo, int64_t T,
                 int64_t N, int64_t K) {
  int64_t n = 0;
  for (; n + 4 <= N; n += 4) {
    const uint16_t* w0 = w + n * ldw;
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x + t * ldx;
      float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      for (int64_t k = 0; k < K; ++k) {
        a0 += xt[k] * Load(w0[k]);
        a1 += xt[k] * Load(w0[ldw + k]);
        a2 += xt[k] * Load(w0[2 * ldw + k]);
        a3 += xt[k] * Load(w0[3 * ldw + k]);
      }
      float* o = out + t * ldo + n;
      o[0] = a0, o[1] = a1, o[2] = a2, o[3] = a3;
    }
  }
  for (; n < N; ++n)
    for (int64_t t = 0; t < T; ++t) {
      float a = 0;
      for (int64_t k = 0; k < K; ++k) a += x[t * ldx + k] * Load(w[n * ldw + k]);
      out[t * ldo + n] = a;
    }
}

float load_bf16(uint16_t v) { return bf16_to_f32(v); }
float load_f16(uint16_t v) { return half_to_float(v); }

// AVX-512F before AVX-512 BF16: on this project's EPYC (Zen 4) the exact widen-and-FMA kernel streamed
// bf16 weights at least as fast as vdpbf16ps with the three-part split of x that keeps fp32 accuracy
// (2026-11-27, single thread, 78 MB matrix: 13.5 vs 12.4 GB/s at T = 1); the bandwidth, not the
// arithmetic, is the limit. PAGODA_CPU_ISA=avx512bf16 selects the other. On aarch64 likewise the exact
// widening NEON kernel before BFDOT (not yet measured on Arm hardware; PAGODA_CPU_ISA=neonbf16).
CpuIsa best_isa() {
  for (CpuIsa isa : {CpuIsa::Avx512, CpuIsa::Avx512Bf16, CpuIsa::Avx2, CpuIsa::Neon, CpuIsa::NeonBf16})
    if (isa_supported(isa)) return isa;
  return CpuIsa::Scalar;
}

GemvKernels choose() {
  const char* forced = std::getenv("PAGODA_CPU_ISA");
  if (forced == nullptr || *forced == '\0') return gemv_kernels_for(best_isa());
  for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16, CpuIsa::Neon, CpuIsa::NeonBf16})
    if (std::strcmp(forced, isa_name(isa)) == 0) return gemv_kernels_for(isa);
  throw Error(std::string("PAGODA_CPU_ISA=") + forced +
              " is not a known kernel path: use avx512bf16, avx512, avx2, neonbf16, neon or scalar (or unset it)");
}

}  // namespace

void gemv_bf16_scalar(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                      int64_t T, int64_t N, int64_t K) {
  gemv_scalar<load_bf16>(x, ldx, w, ldw, out, ldo, T, N, K);
}
void gemv_f16_scalar(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                     int64_t T, int64_t N, int64_t K) {
  gemv_scalar<load_f16>(x, ldx, w, ldw, out, ldo, T, N, K);
}

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512Bf16:
      return "avx512bf16";
    case CpuIsa::Avx512:
      return "avx512";
    case CpuIsa::Avx2:
      return "avx2";
    case CpuIsa::Neon:
      return "neon";
    case CpuIsa::NeonBf16:
      return "neonbf16";
    default:
      return "scalar";
  }
}

bool isa_supported(CpuIsa isa) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  switch (isa) {
    case CpuIsa::Avx512Bf16:
      return avx512 && __builtin_cpu_supports("avx512bf16");
    case CpuIsa::Avx512:
      return avx512;
    case CpuIsa::Avx2:
      return avx2;  // F16C comes with every AVX2 CPU
    case CpuIsa::Neon:
    case CpuIsa::NeonBf16:
      return false;
    default:
      return true;
  }
#elif defined(__aarch64__) && defined(__linux__)
  // NEON (Advanced SIMD) is part of every AArch64 Linux CPU; BFDOT is Armv8.6 FEAT_BF16.
#ifndef HWCAP2_BF16
#define HWCAP2_BF16 (1UL << 14)
#endif
#if defined(PAGODA_NEON_BF16)
  if (isa == CpuIsa::NeonBf16) return (getauxval(AT_HWCAP2) & HWCAP2_BF16) != 0;
#endif
  return isa == CpuIsa::Neon || isa == CpuIsa::Scalar;
#else
  return isa == CpuIsa::Scalar;
#endif
}

GemvKernels gemv_kernels_for(CpuIsa isa) {
  if (!isa_supported(isa))
    throw Error(std::string("this CPU cannot run the ") + isa_name(isa) +
                " kernels: choose another with PAGODA_CPU_ISA (or unset it to pick the best)");
  switch (isa) {
#if defined(__x86_64__)
    case CpuIsa::Avx512Bf16:
      return {gemv_bf16_avx512bf16, gemv_f16_avx512, isa};
    case CpuIsa::Avx512:
      return {gemv_bf16_avx512, gemv_f16_avx512, isa};
    case CpuIsa::Avx2:
      return {gemv_bf16_avx2, gemv_f16_avx2, isa};
#endif
#if defined(PAGODA_NEON_BF16)
    case CpuIsa::NeonBf16:  // BFDOT is for bf16 only; f16 weights take the widening path
      return {gemv_bf16_neonbf16, gemv_f16_neon, isa};
#endif
#if defined(__aarch64__)
    case CpuIsa::Neon:
      return {gemv_bf16_neon, gemv_f16_neon, isa};
#endif
    default:
      return {gemv_bf16_scalar, gemv_f16_scalar, CpuIsa::Scalar};
  }
}

const GemvKernels& gemv_kernels() {
  static const GemvKernels k = choose();
  return k;
}

}  // namespace pagoda::cpu

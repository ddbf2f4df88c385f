// Blocked GEMM over BF16/F16 weights with AVX-512F (gemm.h). Loops: x rows in chunks of kTc (an x
// block of kTc × kKc fp32 stays in L2), K in blocks of kKc, output rows in panels of 32. Each panel's
// kKc columns are gathered and widened once into an fp32 [k][32] buffer (L1), then a 12 × 32
// outer-product micro-kernel runs over the x rows: per k, two panel loads and 24 FMAs with x
// broadcast from memory. Partial sums over K blocks are added into out. fp32 products and sums: the
// exact widened weights, as in the GEMV kernels.
#if defined(__x86_64__)
#include <immintrin.h>

// GCC 12 reports its own intrinsics' undefined-vector idiom (_mm512_undefined_*) as uninitialised.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>

#include "backend/cpu/convert.h"
#include "backend/cpu/gemm.h"

#define PAGODA_GEMM_TARGET __attribute__((target("avx512f,avx512bw,avx2,fma,f16c")))
#define PAGODA_GEMM PAGODA_GEMM_TARGET __attribute__((always_inline)) inline

namespace pagoda::cpu {
namespace {

constexpr int kNr = 32;        // output rows per panel (two vectors)
constexpr int kMr = 12;        // x rows per micro-tile: 24 accumulators + 2 panel vectors of 32 registers
constexpr int64_t kKc = 256;   // K per block: a 32 KiB widened panel
constexpr int64_t kTc = 192;   // x rows per chunk: 192 KiB of x per K block

// Widened panel: buf[k * 32 + j] = w[j, k0 + k] for j < rows, 0 beyond. Pairs of columns are gathered
// as one 32-bit word per row (k, k + 1), then split into the two fp32 vectors.
template <bool kBf16>
PAGODA_GEMM void pack(const uint16_t* w, int64_t ldw, int rows, int64_t kc, float* buf) {
  const __m512i step = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  __m512i idx[2];
  __mmask16 m[2];
  for (int h = 0; h < 2; ++h) {
    idx[h] = _mm512_mullo_epi32(_mm512_add_epi32(step, _mm512_set1_epi32(16 * h)),
                                _mm512_set1_epi32(static_cast<int>(ldw)));
    const int r = std::clamp(rows - 16 * h, 0, 16);
    m[h] = static_cast<__mmask16>((1u << r) - 1);
  }
  int64_t k = 0;
  for (; k + 2 <= kc; k += 2) {
    for (int h = 0; h < 2; ++h) {
      const __m512i pair = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m[h], idx[h], w + k, 2);
      __m512 lo, hi;
      if constexpr (kBf16) {
        lo = _mm512_castsi512_ps(_mm512_slli_epi32(pair, 16));
        hi = _mm512_castsi512_ps(_mm512_and_si512(pair, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
      } else {
        lo = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(pair));
        hi = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(pair, 16)));
      }
      _mm512_store_ps(buf + k * kNr + 16 * h, lo);
      _mm512_store_ps(buf + (k + 1) * kNr + 16 * h, hi);
    }
  }
  if (k < kc)  // an odd last column: the pair would read past the row
    for (int j = 0; j < kNr; ++j) {
      const uint16_t v = j < rows ? w[j * ldw + k] : 0;
      buf[k * kNr + j] = kBf16 ? bf16_to_f32(v) : half_to_float(v);
    }
}

template <int MR>
PAGODA_GEMM void micro(const float* x, int64_t ldx, const float* buf, int64_t kc, float* out, int64_t ldo,
                       bool first, __mmask16 m0, __mmask16 m1) {
  __m512 acc[MR][2];
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(buf + k * kNr);
    const __m512 b1 = _mm512_load_ps(buf + k * kNr + 16);
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_set1_ps(x[i * ldx + k]);
      acc[i][0] = _mm512_fmadd_ps(xv, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(xv, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* o = out + i * ldo;
    if (!first) {
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_maskz_loadu_ps(m0, o));
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_maskz_loadu_ps(m1, o + 16));
    }
    _mm512_mask_storeu_ps(o, m0, acc[i][0]);
    _mm512_mask_storeu_ps(o + 16, m1, acc[i][1]);
  }
}

// One panel against T (< kTc) rows of x for one K block: whole micro-tiles, then the rest.
template <int MR = kMr>
PAGODA_GEMM void tiles(const float* x, int64_t ldx, const float* buf, int64_t kc, float* out, int64_t ldo,
                       int64_t T, bool first, __mmask16 m0, __mmask16 m1) {
  if constexpr (MR > 0) {
    int64_t t = 0;
    if constexpr (MR == kMr)
      for (; t + MR <= T; t += MR) micro<MR>(x + t * ldx, ldx, buf, kc, out + t * ldo, ldo, first, m0, m1);
    if (T - t == MR) {
      micro<MR>(x + t * ldx, ldx, buf, kc, out + t * ldo, ldo, first, m0, m1);
      return;
    }
    tiles<MR - 1>(x + t * ldx, ldx, buf, kc, out + t * ldo, ldo, T - t, first, m0, m1);
  }
}

template <bool kBf16>
PAGODA_GEMM void gemm(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                      int64_t T, int64_t N, int64_t K) {
  alignas(64) float buf[kKc * kNr];
  for (int64_t t0 = 0; t0 < T; t0 += kTc) {
    const int64_t tc = std::min(kTc, T - t0);
    for (int64_t k0 = 0; k0 < K; k0 += kKc) {
      const int64_t kc = std::min(kKc, K - k0);
      for (int64_t n0 = 0; n0 < N; n0 += kNr) {
        const int rows = static_cast<int>(std::min<int64_t>(kNr, N - n0));
        pack<kBf16>(w + n0 * ldw + k0, ldw, rows, kc, buf);
        const auto m0 = static_cast<__mmask16>((1u << std::min(rows, 16)) - 1);
        const auto m1 = static_cast<__mmask16>((1u << std::max(rows - 16, 0)) - 1);
        tiles(x + t0 * ldx + k0, ldx, buf, kc, out + t0 * ldo + n0, ldo, tc, k0 == 0, m0, m1);
      }
    }
  }
}

}  // namespace

PAGODA_GEMM_TARGET void gemm_bf16_avx512(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out,
                                         int64_t ldo, int64_t T, int64_t N, int64_t K) {
  gemm<true>(x, ldx, w, ldw, out, ldo, T, N, K);
}

PAGODA_GEMM_TARGET void gemm_f16_avx512(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out,
                                        int64_t ldo, int64_t T, int64_t N, int64_t K) {
  gemm<false>(x, ldx, w, ldw, out, ldo, T, N, K);
}

}  // namespace pagoda::cpu
#endif

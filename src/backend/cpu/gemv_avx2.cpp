// GEMV over BF16/F16 weights with AVX2+FMA+F16C (gemv.h): 8 weights widened to fp32 per load (exact),
// fp32 FMA, so the result is the fp32 dot product. Up to 2 x rows (16 ymm registers) share each widened weight vector.
#if defined(__x86_64__)
#include <immintrin.h>

// GCC 12 reports its own intrinsics' undefined-vector idiom (_mm512_undefined_*) as uninitialised.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstring>

#include "backend/cpu/gemv.h"

#define PAGODA_AVX2 __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace pagoda::cpu {
namespace {

template <bool kBf16>
PAGODA_AVX2 __m256 widen(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return _mm256_cvtph_ps(h);
}

PAGODA_AVX2 float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 d = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

template <bool kBf16, int MT, int NR>
PAGODA_AVX2 void tile(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                        int64_t K) {
  __m256 acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = widen<kBf16>(w + j * ldw + k);
    for (int i = 0; i < MT; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * ldx + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  if (k < K) {  // the last K % 8 columns: zero-padded copies
    const auto r = static_cast<int>(K - k);
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j) {
      uint16_t buf[8] = {};
      std::memcpy(buf, w + j * ldw + k, static_cast<size_t>(r) * 2);
      wv[j] = widen<kBf16>(buf);
    }
    for (int i = 0; i < MT; ++i) {
      float xb[8] = {};
      std::memcpy(xb, x + i * ldx + k, static_cast<size_t>(r) * 4);
      const __m256 xv = _mm256_loadu_ps(xb);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NR; ++j) out[i * ldo + j] = hsum(acc[i][j]);
}

// Decode (T = 1): one weight row at a time, a sequential stream per thread, as in gemv_avx512.cpp
// (several rows in flight streamed 40-50% slower on this project's Zen 4).
template <bool kBf16>
PAGODA_AVX2 void row_dot(const float* x, const uint16_t* w, float* out, int64_t K) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), widen<kBf16>(w + k), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 8), widen<kBf16>(w + k + 8), a1);
    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 16), widen<kBf16>(w + k + 16), a2);
    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k + 24), widen<kBf16>(w + k + 24), a3);
  }
  for (; k + 8 <= K; k += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + k), widen<kBf16>(w + k), a0);
  if (k < K) {  // the last K % 8 columns: zero-padded copies
    const auto r = static_cast<size_t>(K - k);
    uint16_t wb[8] = {};
    float xb[8] = {};
    std::memcpy(wb, w + k, r * 2);
    std::memcpy(xb, x + k, r * 4);
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(xb), widen<kBf16>(wb), a0);
  }
  *out = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

template <bool kBf16, int NR>
PAGODA_AVX2 void rows(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                        int64_t T, int64_t K) {
  int64_t t = 0;
  for (; t + 2 <= T; t += 2) tile<kBf16, 2, NR>(x + t * ldx, ldx, w, ldw, out + t * ldo, ldo, K);
  switch (T - t) {
    case 2:
      tile<kBf16, 2, NR>(x + t * ldx, ldx, w, ldw, out + t * ldo, ldo, K);
      break;
    case 1:
      tile<kBf16, 1, NR>(x + t * ldx, ldx, w, ldw, out + t * ldo, ldo, K);
      break;
    default:
      break;
  }
}

template <bool kBf16>
PAGODA_AVX2 void gemv(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                        int64_t T, int64_t N, int64_t K) {
  int64_t n = 0;
  if (T == 1) {
    for (; n < N; ++n) row_dot<kBf16>(x, w + n * ldw, out + n, K);
    return;
  }
  for (; n + 4 <= N; n += 4) rows<kBf16, 4>(x, ldx, w + n * ldw, ldw, out + n, ldo, T, K);
  for (; n < N; ++n) rows<kBf16, 1>(x, ldx, w + n * ldw, ldw, out + n, ldo, T, K);
}

}  // namespace

__attribute__((target("avx2,fma,f16c"))) void gemv_bf16_avx2(
    const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo, int64_t T, int64_t N,
    int64_t K) {
  gemv<true>(x, ldx, w, ldw, out, ldo, T, N, K);
}

__attribute__((target("avx2,fma,f16c"))) void gemv_f16_avx2(
    const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo, int64_t T, int64_t N,
    int64_t K) {
  gemv<false>(x, ldx, w, ldw, out, ldo, T, N, K);
}

}  // namespace pagoda::cpu
#endif

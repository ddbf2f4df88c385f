// GEMV over BF16/F16 weights with AVX-512F (gemv.h): 16 weights widened to fp32 per load (exact),
// fp32 FMA, so the result is the fp32 dot product. Up to 4 x rows share each widened weight vector.
#if defined(__x86_64__)
#include <immintrin.h>

// GCC 12 reports its own intrinsics' undefined-vector idiom (_mm512_undefined_*) as uninitialised.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstring>

#include "backend/cpu/gemv.h"

#define PAGODA_AVX512 __attribute__((target("avx512f,avx512bw,avx2,fma,f16c"), always_inline)) inline

namespace pagoda::cpu {
namespace {

template <bool kBf16>
PAGODA_AVX512 __m512 widen(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (kBf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  return _mm512_cvtph_ps(h);
}

template <bool kBf16, int MT, int NR>
PAGODA_AVX512 void tile(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                        int64_t K) {
  __m512 acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = widen<kBf16>(w + j * ldw + k);
    for (int i = 0; i < MT; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + i * ldx + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  if (k < K) {  // the last K % 16 columns: zero-padded copies, x masked
    const auto r = static_cast<int>(K - k);
    const auto mask = static_cast<__mmask16>((1u << r) - 1);
    __m512 wv[NR];
    for (int j = 0; j < NR; ++j) {
      uint16_t buf[16] = {};
      std::memcpy(buf, w + j * ldw + k, static_cast<size_t>(r) * 2);
      wv[j] = widen<kBf16>(buf);
    }
    for (int i = 0; i < MT; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * ldx + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NR; ++j) out[i * ldo + j] = _mm512_reduce_add_ps(acc[i][j]);
}

// Decode (T = 1): one weight row at a time, so that each thread reads its rows as one sequential
// stream. Several rows in flight (2 to 8 streams 2-6 KB apart) streamed 40-50% slower on this
// project's Zen 4 (single thread, 512 MiB of bf16 rows, K = 1024: 8 rows 13.3 GB/s, 2 rows 10.3,
// one row 24.6 against a 22 GB/s plain read; K = 3072: 20.6 / 13.5 / 23.3), as llama.cpp's row-wise
// dot products do. Two accumulators: one or four measured slower.
template <bool kBf16>
PAGODA_AVX512 void row_dot(const float* x, const uint16_t* w, float* out, int64_t K) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), widen<kBf16>(w + k), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16), widen<kBf16>(w + k + 16), a1);
  }
  for (; k < K; k += 16) {  // the last K % 32 columns: zero-padded copies, x masked
    const auto r = static_cast<int>(K - k < 16 ? K - k : 16);
    const auto mask = static_cast<__mmask16>((1u << r) - 1);
    uint16_t buf[16] = {};
    std::memcpy(buf, w + k, static_cast<size_t>(r) * 2);
    a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, x + k), widen<kBf16>(buf), a0);
  }
  *out = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

template <bool kBf16, int NR>
PAGODA_AVX512 void rows(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                        int64_t T, int64_t K) {
  int64_t t = 0;
  for (; t + 4 <= T; t += 4) tile<kBf16, 4, NR>(x + t * ldx, ldx, w, ldw, out + t * ldo, ldo, K);
  switch (T - t) {
    case 3:
      tile<kBf16, 3, NR>(x + t * ldx, ldx, w, ldw, out + t * ldo, ldo, K);
      break;
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
PAGODA_AVX512 void gemv(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                        int64_t T, int64_t N, int64_t K) {
  if (T == 1) {
    for (int64_t n = 0; n < N; ++n) row_dot<kBf16>(x, w + n * ldw, out + n, K);
    return;
  }
  int64_t n = 0;
  for (; n + 4 <= N; n += 4) rows<kBf16, 4>(x, ldx, w + n * ldw, ldw, out + n, ldo, T, K);
  for (; n < N; ++n) rows<kBf16, 1>(x, ldx, w + n * ldw, ldw, out + n, ldo, T, K);
}

}  // namespace

__attribute__((target("avx512f,avx512bw,avx2,fma,f16c"))) void gemv_bf16_avx512(
    const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo, int64_t T, int64_t N,
    int64_t K) {
  gemv<true>(x, ldx, w, ldw, out, ldo, T, N, K);
}

__attribute__((target("avx512f,avx512bw,avx2,fma,f16c"))) void gemv_f16_avx512(
    const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo, int64_t T, int64_t N,
    int64_t K) {
  gemv<false>(x, ldx, w, ldw, out, ldo, T, N, K);
}

}  // namespace pagoda::cpu
#endif

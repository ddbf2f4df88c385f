// GEMV over BF16 weights with AVX-512 BF16 (gemv.h): vdpbf16ps multiplies 32 bf16 pairs per
// instruction. x is split once per call into three bf16 parts (x = hi + mid + lo to about 2^-26
// relative), each multiplied against the same weights, so the result is the fp32 dot product within
// the CPU backend's usual tolerance instead of the 2^-9 of rounding x to bf16 (two parts, 2^-17,
// measurably missed it on short rows).
#if defined(__x86_64__)
#include <immintrin.h>

// GCC 12 reports its own intrinsics' undefined-vector idiom (_mm512_undefined_*) as uninitialised.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstring>
#include <vector>

#include "backend/cpu/gemv.h"

#define PAGODA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define PAGODA_BF16 PAGODA_BF16_TARGET __attribute__((always_inline)) inline

namespace pagoda::cpu {
namespace {

PAGODA_BF16 __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

PAGODA_BF16 __m512 widen(__m256bh h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(reinterpret_cast<const __m256i&>(h)), 16));
}

PAGODA_BF16 void store(uint16_t* p, __m256bh v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), reinterpret_cast<const __m256i&>(v));
}

// hi/mid/lo bf16 rows of x (each a block of T rows of ldp), K rounded up to 32 and zero-padded, so
// the kernel never masks x.
PAGODA_BF16 void split(const float* x, int64_t ldx, int64_t T, int64_t K, int64_t ldp, uint16_t* hi) {
  uint16_t* mid = hi + T * ldp;
  uint16_t* lo = mid + T * ldp;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t k = 0; k < ldp; k += 16) {
      const int64_t r = K - k;
      const auto mask = static_cast<__mmask16>(r >= 16 ? 0xffffu : r <= 0 ? 0u : (1u << r) - 1);
      const __m512 v = _mm512_maskz_loadu_ps(mask, x + t * ldx + k);
      const __m256bh h = _mm512_cvtneps_pbh(v);
      const __m512 r1 = _mm512_sub_ps(v, widen(h));  // exact: the rounding error of h
      const __m256bh m = _mm512_cvtneps_pbh(r1);
      const __m256bh l = _mm512_cvtneps_pbh(_mm512_sub_ps(r1, widen(m)));
      store(hi + t * ldp + k, h);
      store(mid + t * ldp + k, m);
      store(lo + t * ldp + k, l);
    }
  }
}

template <int MT, int NR>
PAGODA_BF16 void tile(const uint16_t* hi, int64_t plane, int64_t ldp, const uint16_t* w, int64_t ldw,
                      float* out, int64_t ldo, int64_t K) {
  __m512 acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    const int64_t r = K - k;
    const auto mask = static_cast<__mmask32>(r >= 32 ? 0xffffffffu : (1u << r) - 1);
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = as_bh(_mm512_maskz_loadu_epi16(mask, w + j * ldw + k));
    for (int i = 0; i < MT; ++i) {
      const __m512bh h = as_bh(_mm512_loadu_si512(hi + i * ldp + k));
      const __m512bh m = as_bh(_mm512_loadu_si512(hi + plane + i * ldp + k));
      const __m512bh l = as_bh(_mm512_loadu_si512(hi + 2 * plane + i * ldp + k));
      for (int j = 0; j < NR; ++j)  // smallest part first
        acc[i][j] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[i][j], l, wv[j]), m, wv[j]), h, wv[j]);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NR; ++j) out[i * ldo + j] = _mm512_reduce_add_ps(acc[i][j]);
}

// Decode (T = 1): one weight row at a time, a sequential stream per thread (gemv_avx512.cpp says
// why), two accumulators.
PAGODA_BF16 void row_dot(const uint16_t* hi, int64_t plane, const uint16_t* w, float* out, int64_t K) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 64 <= K; k += 64) {
    const __m512bh w0 = as_bh(_mm512_loadu_si512(w + k)), w1 = as_bh(_mm512_loadu_si512(w + k + 32));
    a0 = _mm512_dpbf16_ps(a0, as_bh(_mm512_loadu_si512(hi + 2 * plane + k)), w0);
    a1 = _mm512_dpbf16_ps(a1, as_bh(_mm512_loadu_si512(hi + 2 * plane + k + 32)), w1);
    a0 = _mm512_dpbf16_ps(a0, as_bh(_mm512_loadu_si512(hi + plane + k)), w0);
    a1 = _mm512_dpbf16_ps(a1, as_bh(_mm512_loadu_si512(hi + plane + k + 32)), w1);
    a0 = _mm512_dpbf16_ps(a0, as_bh(_mm512_loadu_si512(hi + k)), w0);
    a1 = _mm512_dpbf16_ps(a1, as_bh(_mm512_loadu_si512(hi + k + 32)), w1);
  }
  for (; k < K; k += 32) {  // x is zero-padded to a multiple of 32; the weights are masked
    const int64_t r = K - k;
    const auto mask = static_cast<__mmask32>(r >= 32 ? 0xffffffffu : (1u << r) - 1);
    const __m512bh wv = as_bh(_mm512_maskz_loadu_epi16(mask, w + k));
    a0 = _mm512_dpbf16_ps(a0, as_bh(_mm512_loadu_si512(hi + 2 * plane + k)), wv);
    a0 = _mm512_dpbf16_ps(a0, as_bh(_mm512_loadu_si512(hi + plane + k)), wv);
    a0 = _mm512_dpbf16_ps(a0, as_bh(_mm512_loadu_si512(hi + k)), wv);
  }
  *out = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

template <int NR>
PAGODA_BF16 void rows(const uint16_t* hi, int64_t plane, int64_t ldp, const uint16_t* w, int64_t ldw,
                      float* out, int64_t ldo, int64_t T, int64_t K) {
  int64_t t = 0;
  for (; t + 4 <= T; t += 4) tile<4, NR>(hi + t * ldp, plane, ldp, w, ldw, out + t * ldo, ldo, K);
  switch (T - t) {
    case 3:
      tile<3, NR>(hi + t * ldp, plane, ldp, w, ldw, out + t * ldo, ldo, K);
      break;
    case 2:
      tile<2, NR>(hi + t * ldp, plane, ldp, w, ldw, out + t * ldo, ldo, K);
      break;
    case 1:
      tile<1, NR>(hi + t * ldp, plane, ldp, w, ldw, out + t * ldo, ldo, K);
      break;
    default:
      break;
  }
}

}  // namespace

PAGODA_BF16_TARGET void gemv_bf16_avx512bf16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw,
                                             float* out, int64_t ldo, int64_t T, int64_t N, int64_t K) {
  const int64_t ldp = (K + 31) / 32 * 32;
  thread_local std::vector<uint16_t> buf;  // per worker thread, grown once
  buf.resize(static_cast<size_t>(3 * T * ldp));
  uint16_t* hi = buf.data();
  split(x, ldx, T, K, ldp, hi);
  const int64_t plane = T * ldp;
  int64_t n = 0;
  if (T == 1) {
    for (; n < N; ++n) row_dot(hi, plane, w + n * ldw, out + n, K);
    return;
  }
  for (; n + 4 <= N; n += 4) rows<4>(hi, plane, ldp, w + n * ldw, ldw, out + n, ldo, T, K);
  for (; n < N; ++n) rows<1>(hi, plane, ldp, w + n * ldw, ldw, out + n, ldo, T, K);
}

}  // namespace pagoda::cpu
#endif

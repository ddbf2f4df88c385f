// Decode GEMV over FP8 (e4m3fn) weights with AVX2 + F16C (linear_fp8.cpp): 8 weight bytes widened to
// fp32 per load through fp16 — each byte's 7 magnitude bits placed at fp16's exponent/mantissa
// boundary make an fp16 2^-8 times the value (bias 15 against 7; e4m3's subnormals land on fp16's),
// which F16C widens exactly, and no fp32 denormal (a microcode assist each) is ever formed — fp32
// FMA against up to four rows of x, each scale block's sum multiplied by its scale times 2^8. Each
// weight byte is read once: half of bf16's bytes. Internal to src/backend/cpu.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "backend/cpu/gemv_fp8.h"
#include "core/dtype.h"

#define PAGODA_AVX2 __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace pagoda::cpu {
namespace {

PAGODA_AVX2 __m256 widen_fp8_scaled(const uint8_t* p) {
  const __m128i v = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i sign = _mm_and_si128(_mm_slli_epi16(v, 8), _mm_set1_epi16(static_cast<int16_t>(0x8000)));
  const __m128i mag = _mm_and_si128(_mm_slli_epi16(v, 7), _mm_set1_epi16(0x3f80));
  return _mm256_cvtph_ps(_mm_or_si128(sign, mag));
}

PAGODA_AVX2 float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

template <int MT>
__attribute__((target("avx2,fma,f16c"))) void rows(const float* x, int64_t ldx, const uint8_t* w, int64_t K,
                                                    const float* scale, int64_t scale_cols, int64_t bn, int64_t bk,
                                                    int64_t n0, int64_t n1, float* out, int64_t ldo) {
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* wr = w + n * K;
    const float* sr = scale + (n / bn) * scale_cols;
    __m256 total[MT];
    for (int t = 0; t < MT; ++t) total[t] = _mm256_setzero_ps();
    float tail[MT] = {};
    for (int64_t k0 = 0; k0 < K; k0 += bk) {
      const int64_t k1 = k0 + bk < K ? k0 + bk : K;
      // Two accumulators a row: two independent FMA chains.
      __m256 acc[MT][2];
      for (int t = 0; t < MT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
      int64_t k = k0;
      for (; k + 16 <= k1; k += 16) {
        const __m256 w0 = widen_fp8_scaled(wr + k), w1 = widen_fp8_scaled(wr + k + 8);
        for (int t = 0; t < MT; ++t) {
          acc[t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * ldx + k), acc[t][0]);
          acc[t][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + t * ldx + k + 8), acc[t][1]);
        }
      }
      const float s = sr[k0 / bk];
      const __m256 sv = _mm256_set1_ps(s * 256.0f);  // the widened weights are 2^-8 of theirs
      for (int t = 0; t < MT; ++t) total[t] = _mm256_fmadd_ps(_mm256_add_ps(acc[t][0], acc[t][1]), sv, total[t]);
      for (; k < k1; ++k)  // the block's last columns (block_k not a multiple of 16)
        for (int t = 0; t < MT; ++t) tail[t] += fp8_e4m3_to_f32(wr[k]) * s * x[t * ldx + k];
    }
    for (int t = 0; t < MT; ++t) out[t * ldo + n] = hsum(total[t]) + tail[t];
  }
}

}  // namespace

void gemv_fp8_avx2(const float* x, int64_t ldx, int64_t T, const uint8_t* w, int64_t K, const float* scale,
                   int64_t scale_cols, int64_t bn, int64_t bk, int64_t n0, int64_t n1, float* out, int64_t ldo) {
  for (int64_t t0 = 0; t0 < T; t0 += 4) {
    const int64_t mt = T - t0 < 4 ? T - t0 : 4;
    const float* xt = x + t0 * ldx;
    float* ot = out + t0 * ldo;
    switch (mt) {
      case 1: rows<1>(xt, ldx, w, K, scale, scale_cols, bn, bk, n0, n1, ot, ldo); break;
      case 2: rows<2>(xt, ldx, w, K, scale, scale_cols, bn, bk, n0, n1, ot, ldo); break;
      case 3: rows<3>(xt, ldx, w, K, scale, scale_cols, bn, bk, n0, n1, ot, ldo); break;
      default: rows<4>(xt, ldx, w, K, scale, scale_cols, bn, bk, n0, n1, ot, ldo); break;
    }
  }
}

}  // namespace pagoda::cpu
#endif

// GEMV over BF16/F16 weights with AArch64 NEON (gemv.h). The plain path widens 8 weights per load to
// fp32 (bf16: a 16-bit shift, exact; f16: vcvt, exact) and accumulates with fp32 FMA, so the result is
// the fp32 dot product. The BF16 path (Armv8.6 FEAT_BF16, chosen at run time from HWCAP2_BF16) uses
// BFDOT on the stored weights with x split once per call into three bf16 parts (x = hi + mid + lo to
// about 2^-26 relative), as the AVX-512 BF16 path does, to keep fp32 accuracy.
#if defined(__aarch64__)
#include <arm_neon.h>

#include <cstring>
#include <vector>

#include "backend/cpu/gemv.h"

#define PAGODA_NEON __attribute__((always_inline)) inline
// BFDOT only in these functions (the rest of the file stays Armv8.0). GCC 12 will not inline the bf16
// intrinsics into a plain "+bf16" target; Armv8.2 is the oldest base that CPUs with FEAT_BF16 have
// (e.g. Neoverse V1 is Armv8.4 with BF16), so not armv8.6-a.
#define PAGODA_NEON_BF16_TARGET __attribute__((target("arch=armv8.2-a+bf16")))

namespace pagoda::cpu {
namespace {

// 8 weights widened to fp32: low and high halves.
template <bool kBf16>
PAGODA_NEON void widen(const uint16_t* p, float32x4_t& lo, float32x4_t& hi) {
  const uint16x8_t h = vld1q_u16(p);
  if constexpr (kBf16) {
    lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    hi = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16));
  } else {
    const float16x8_t f = vreinterpretq_f16_u16(h);
    lo = vcvt_f32_f16(vget_low_f16(f));
    hi = vcvt_high_f32_f16(f);
  }
}

template <bool kBf16, int MT, int NR>
PAGODA_NEON void tile(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                      int64_t K) {
  float32x4_t acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vdupq_n_f32(0.0f);
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    float32x4_t wl[NR], wh[NR];
    for (int j = 0; j < NR; ++j) widen<kBf16>(w + j * ldw + k, wl[j], wh[j]);
    for (int i = 0; i < MT; ++i) {
      const float32x4_t xl = vld1q_f32(x + i * ldx + k), xh = vld1q_f32(x + i * ldx + k + 4);
      for (int j = 0; j < NR; ++j) acc[i][j] = vfmaq_f32(vfmaq_f32(acc[i][j], xl, wl[j]), xh, wh[j]);
    }
  }
  if (k < K) {  // the last K % 8 columns: zero-padded copies
    const auto r = static_cast<size_t>(K - k);
    float32x4_t wl[NR], wh[NR];
    for (int j = 0; j < NR; ++j) {
      uint16_t buf[8] = {};
      std::memcpy(buf, w + j * ldw + k, r * 2);
      widen<kBf16>(buf, wl[j], wh[j]);
    }
    for (int i = 0; i < MT; ++i) {
      float xb[8] = {};
      std::memcpy(xb, x + i * ldx + k, r * 4);
      const float32x4_t xl = vld1q_f32(xb), xh = vld1q_f32(xb + 4);
      for (int j = 0; j < NR; ++j) acc[i][j] = vfmaq_f32(vfmaq_f32(acc[i][j], xl, wl[j]), xh, wh[j]);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NR; ++j) out[i * ldo + j] = vaddvq_f32(acc[i][j]);
}

template <bool kBf16, int NR>
PAGODA_NEON void rows(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo,
                      int64_t T, int64_t K) {
  int64_t t = 0;
  for (; t + 2 <= T; t += 2) tile<kBf16, 2, NR>(x + t * ldx, ldx, w, ldw, out + t * ldo, ldo, K);
  if (t < T) tile<kBf16, 1, NR>(x + t * ldx, ldx, w, ldw, out + t * ldo, ldo, K);
}

template <bool kBf16>
void gemv(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo, int64_t T,
          int64_t N, int64_t K) {
  int64_t n = 0;
  if (T == 1)  // decode: more weight rows in flight at once
    for (; n + 8 <= N; n += 8) tile<kBf16, 1, 8>(x, ldx, w + n * ldw, ldw, out + n, ldo, K);
  for (; n + 4 <= N; n += 4) rows<kBf16, 4>(x, ldx, w + n * ldw, ldw, out + n, ldo, T, K);
  for (; n < N; ++n) rows<kBf16, 1>(x, ldx, w + n * ldw, ldw, out + n, ldo, T, K);
}

#if defined(PAGODA_NEON_BF16)
// --- BFDOT ---------------------------------------------------------------------------------------

// fp32 -> bf16 bits, round to nearest even (the split's inputs are finite).
uint16_t to_bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

float from_bf16(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// hi/mid/lo bf16 rows of x (three planes of T rows of ldp), K rounded up to 8 and zero-padded. Scalar:
// T * K values once per call against N * K weights.
void split(const float* x, int64_t ldx, int64_t T, int64_t K, int64_t ldp, uint16_t* hi) {
  uint16_t* mid = hi + T * ldp;
  uint16_t* lo = mid + T * ldp;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < ldp; ++k) {
      const float v = k < K ? x[t * ldx + k] : 0.0f;
      const uint16_t h = to_bf16(v);
      const float r1 = v - from_bf16(h);  // exact: the rounding error of h
      const uint16_t m = to_bf16(r1);
      hi[t * ldp + k] = h;
      mid[t * ldp + k] = m;
      lo[t * ldp + k] = to_bf16(r1 - from_bf16(m));
    }
}

template <int MT, int NR>
PAGODA_NEON_BF16_TARGET PAGODA_NEON void tile_bf(const uint16_t* hi, int64_t plane, int64_t ldp, const uint16_t* w,
                                                 int64_t ldw, float* out, int64_t ldo, int64_t K) {
  float32x4_t acc[MT][NR];
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vdupq_n_f32(0.0f);
  for (int64_t k = 0; k < K; k += 8) {
    bfloat16x8_t wv[NR];
    for (int j = 0; j < NR; ++j) {
      if (k + 8 <= K) {
        wv[j] = vreinterpretq_bf16_u16(vld1q_u16(w + j * ldw + k));
      } else {  // the last K % 8 columns: a zero-padded copy (x is zero there too)
        uint16_t buf[8] = {};
        std::memcpy(buf, w + j * ldw + k, static_cast<size_t>(K - k) * 2);
        wv[j] = vreinterpretq_bf16_u16(vld1q_u16(buf));
      }
    }
    for (int i = 0; i < MT; ++i) {
      const bfloat16x8_t h = vreinterpretq_bf16_u16(vld1q_u16(hi + i * ldp + k));
      const bfloat16x8_t m = vreinterpretq_bf16_u16(vld1q_u16(hi + plane + i * ldp + k));
      const bfloat16x8_t l = vreinterpretq_bf16_u16(vld1q_u16(hi + 2 * plane + i * ldp + k));
      for (int j = 0; j < NR; ++j)  // smallest part first
        acc[i][j] = vbfdotq_f32(vbfdotq_f32(vbfdotq_f32(acc[i][j], l, wv[j]), m, wv[j]), h, wv[j]);
    }
  }
  for (int i = 0; i < MT; ++i)
    for (int j = 0; j < NR; ++j) out[i * ldo + j] = vaddvq_f32(acc[i][j]);
}

template <int NR>
PAGODA_NEON_BF16_TARGET PAGODA_NEON void rows_bf(const uint16_t* hi, int64_t plane, int64_t ldp, const uint16_t* w,
                                                 int64_t ldw, float* out, int64_t ldo, int64_t T, int64_t K) {
  int64_t t = 0;
  for (; t + 2 <= T; t += 2) tile_bf<2, NR>(hi + t * ldp, plane, ldp, w, ldw, out + t * ldo, ldo, K);
  if (t < T) tile_bf<1, NR>(hi + t * ldp, plane, ldp, w, ldw, out + t * ldo, ldo, K);
}

#endif  // PAGODA_NEON_BF16

}  // namespace

void gemv_bf16_neon(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo, int64_t T,
                    int64_t N, int64_t K) {
  gemv<true>(x, ldx, w, ldw, out, ldo, T, N, K);
}

void gemv_f16_neon(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw, float* out, int64_t ldo, int64_t T,
                   int64_t N, int64_t K) {
  gemv<false>(x, ldx, w, ldw, out, ldo, T, N, K);
}

#if defined(PAGODA_NEON_BF16)
PAGODA_NEON_BF16_TARGET void gemv_bf16_neonbf16(const float* x, int64_t ldx, const uint16_t* w, int64_t ldw,
                                                float* out, int64_t ldo, int64_t T, int64_t N, int64_t K) {
  const int64_t ldp = (K + 7) / 8 * 8;
  thread_local std::vector<uint16_t> buf;  // per worker thread, grown once
  buf.resize(static_cast<size_t>(3 * T * ldp));
  uint16_t* hi = buf.data();
  split(x, ldx, T, K, ldp, hi);
  const int64_t plane = T * ldp;
  int64_t n = 0;
  if (T == 1)
    for (; n + 8 <= N; n += 8) tile_bf<1, 8>(hi, plane, ldp, w + n * ldw, ldw, out + n, ldo, K);
  for (; n + 4 <= N; n += 4) rows_bf<4>(hi, plane, ldp, w + n * ldw, ldw, out + n, ldo, T, K);
  for (; n < N; ++n) rows_bf<1>(hi, plane, ldp, w + n * ldw, ldw, out + n, ldo, T, K);
}
#endif

}  // namespace pagoda::cpu
#endif

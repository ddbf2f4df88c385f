#include "backend/cpu/kernels.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

// The vector helpers below are always inlined inside one translation unit: no ABI crosses them.
#pragma GCC diagnostic ignored "-Wpsabi"

// The same always-inline bodies are instantiated inside two entry points: one compiled for
// AVX2+FMA (x86-64 only), one for the baseline ISA. GCC/Clang vector extensions keep the code
// portable: on the baseline they lower to SSE2 (x86) or NEON (arm64).

namespace pagoda::cpu {
namespace {

#define PAGODA_INLINE inline __attribute__((always_inline))

typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));

PAGODA_INLINE v8 load8(const float* p) { return *reinterpret_cast<const v8u*>(p); }
PAGODA_INLINE void store8(float* p, const v8& v) { *reinterpret_cast<v8u*>(p) = v; }
PAGODA_INLINE float hsum(const v8& v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// out[i, j] = x[i, :] · w[j, :] for an MR x NR tile.
template <int MR, int NR>
PAGODA_INLINE void micro(const float* x, int64_t ldx, const float* w, int64_t ldw, float* out,
                         int64_t ldo, int64_t K) {
  v8 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = v8{};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    v8 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = load8(x + i * ldx + k);
    for (int j = 0; j < NR; ++j) {
      const v8 wv = load8(w + j * ldw + k);
      for (int i = 0; i < MR; ++i) acc[i][j] += xv[i] * wv;
    }
  }
  float r[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) r[i][j] = hsum(acc[i][j]);
  for (; k < K; ++k)
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) r[i][j] += x[i * ldx + k] * w[j * ldw + k];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) out[i * ldo + j] = r[i][j];
}

template <int MR, int NR>
PAGODA_INLINE void row_panel(const float* x, int64_t ldx, const float* w, int64_t ldw, float* out,
                             int64_t ldo, int64_t N, int64_t K) {
  int64_t n = 0;
  for (; n + NR <= N; n += NR) micro<MR, NR>(x, ldx, w + n * ldw, ldw, out + n, ldo, K);
  for (; n < N; ++n) micro<MR, 1>(x, ldx, w + n * ldw, ldw, out + n, ldo, K);
}

PAGODA_INLINE void gemm_impl(const float* x, int64_t ldx, const float* w, int64_t ldw, float* out,
                             int64_t ldo, int64_t T, int64_t N, int64_t K) {
  // Weight rows in blocks that stay in cache while every tile of x passes over them.
  const int64_t nb = T <= 1 ? N : 48;
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    const int64_t nn = std::min(nb, N - n0);
    const float* wb = w + n0 * ldw;
    float* ob = out + n0;
    int64_t t = 0;
    for (; t + 4 <= T; t += 4) row_panel<4, 3>(x + t * ldx, ldx, wb, ldw, ob + t * ldo, ldo, nn, K);
    switch (T - t) {
      case 3:
        row_panel<3, 4>(x + t * ldx, ldx, wb, ldw, ob + t * ldo, ldo, nn, K);
        break;
      case 2:
        row_panel<2, 4>(x + t * ldx, ldx, wb, ldw, ob + t * ldo, ldo, nn, K);
        break;
      case 1:
        row_panel<1, 8>(x + t * ldx, ldx, wb, ldw, ob + t * ldo, ldo, nn, K);
        break;
      default:
        break;
    }
  }
}

// Four rows of acc against 16 columns of v at a time: each v load serves four rows (the one-row
// loop below loads v once per row and multiply-add: load-bound).
PAGODA_INLINE void pv_rows4(const float* p, int64_t ldp, const float* v, int64_t n, int64_t ldv, int64_t D,
                            float* acc, int64_t ldacc) {
  int64_t d = 0;
  for (; d + 16 <= D; d += 16) {
    v8 a[4][2];
    for (int r = 0; r < 4; ++r) {
      a[r][0] = load8(acc + r * ldacc + d);
      a[r][1] = load8(acc + r * ldacc + d + 8);
    }
    for (int64_t j = 0; j < n; ++j) {
      const v8 v0 = load8(v + j * ldv + d), v1 = load8(v + j * ldv + d + 8);
      for (int r = 0; r < 4; ++r) {
        const float pj = p[r * ldp + j];
        a[r][0] += pj * v0;
        a[r][1] += pj * v1;
      }
    }
    for (int r = 0; r < 4; ++r) {
      store8(acc + r * ldacc + d, a[r][0]);
      store8(acc + r * ldacc + d + 8, a[r][1]);
    }
  }
  for (; d < D; ++d)
    for (int r = 0; r < 4; ++r) {
      float s = acc[r * ldacc + d];
      for (int64_t j = 0; j < n; ++j) s += p[r * ldp + j] * v[j * ldv + d];
      acc[r * ldacc + d] = s;
    }
}

PAGODA_INLINE void pv_impl(const float* p, int64_t G, int64_t ldp, const float* v, int64_t n,
                           int64_t ldv, int64_t D, float* acc, int64_t ldacc) {
  int64_t g0 = 0;
  for (; g0 + 4 <= G; g0 += 4) pv_rows4(p + g0 * ldp, ldp, v, n, ldv, D, acc + g0 * ldacc, ldacc);
  for (int64_t g = g0; g < G; ++g) {
    const float* pg = p + g * ldp;
    float* ag = acc + g * ldacc;
    int64_t d = 0;
    for (; d + 32 <= D; d += 32) {
      v8 a0 = load8(ag + d), a1 = load8(ag + d + 8), a2 = load8(ag + d + 16),
         a3 = load8(ag + d + 24);
      for (int64_t j = 0; j < n; ++j) {
        const float pj = pg[j];
        const float* vj = v + j * ldv + d;
        a0 += pj * load8(vj);
        a1 += pj * load8(vj + 8);
        a2 += pj * load8(vj + 16);
        a3 += pj * load8(vj + 24);
      }
      store8(ag + d, a0);
      store8(ag + d + 8, a1);
      store8(ag + d + 16, a2);
      store8(ag + d + 24, a3);
    }
    for (; d + 8 <= D; d += 8) {
      v8 a0 = load8(ag + d);
      for (int64_t j = 0; j < n; ++j) a0 += pg[j] * load8(v + j * ldv + d);
      store8(ag + d, a0);
    }
    for (; d < D; ++d) {
      float a = ag[d];
      for (int64_t j = 0; j < n; ++j) a += pg[j] * v[j * ldv + d];
      ag[d] = a;
    }
  }
}

typedef int32_t v8i __attribute__((vector_size(32)));

// exp(x) as Cephes' expf: 2^k times a degree-6 polynomial of r = x - k·ln2 in [-ln2/2, ln2/2],
// about 1 ulp; x below -87 gives 0, x above 88 gives exp(88).
PAGODA_INLINE v8 exp8(v8 x) {
  const v8 lo = v8{} + -87.0f, hi = v8{} + 88.0f;
  const v8i tiny = x < lo;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  // k = round(x / ln2): conversion truncates, so round half away from zero by hand.
  const v8 y0 = x * 1.44269504088896341f;
  const v8i k = __builtin_convertvector(y0 < 0.0f ? y0 - 0.5f : y0 + 0.5f, v8i);
  const v8 kf = __builtin_convertvector(k, v8);
  const v8 r = (x - kf * 0.693359375f) - kf * -2.12194440e-4f;
  v8 p = v8{} + 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  const v8 e = (p * r * r + r + 1.0f) * (v8)((k + 127) << 23);
  return tiny ? v8{} : e;
}

// s[j] = exp(s[j] - m) for j < n (every s[j] <= m), returns their sum.
PAGODA_INLINE float exp_sum_impl(float* s, int64_t n, float m) {
  v8 total{};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const v8 e = exp8(load8(s + j) - m);
    store8(s + j, e);
    total += e;
  }
  float sum = hsum(total);
  for (; j < n; ++j) {
    s[j] = __builtin_expf(s[j] - m);
    sum += s[j];
  }
  return sum;
}

// o[i] = silu(g[i]) · u[i] = g[i] / (1 + exp(-g[i])) · u[i].
PAGODA_INLINE void silu_mul_impl(const float* g, const float* u, float* o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8 x = load8(g + i);
    store8(o + i, x / (1.0f + exp8(-x)) * load8(u + i));
  }
  for (; i < n; ++i) o[i] = g[i] / (1.0f + __builtin_expf(-g[i])) * u[i];
}

PAGODA_INLINE void silu_impl(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8 v = load8(x + i);
    store8(x + i, v / (1.0f + exp8(-v)));
  }
  for (; i < n; ++i) x[i] = x[i] / (1.0f + __builtin_expf(-x[i]));
}

void gemm_generic(const float* x, int64_t ldx, const float* w, int64_t ldw, float* out, int64_t ldo,
                  int64_t T, int64_t N, int64_t K) {
  gemm_impl(x, ldx, w, ldw, out, ldo, T, N, K);
}
void qk_generic(const float* q, int64_t G, int64_t ldq, const float* k, int64_t n, int64_t ldk,
                int64_t D, float* s, int64_t lds) {
  gemm_impl(q, ldq, k, ldk, s, lds, G, n, D);
}
void pv_generic(const float* p, int64_t G, int64_t ldp, const float* v, int64_t n, int64_t ldv,
                int64_t D, float* acc, int64_t ldacc) {
  pv_impl(p, G, ldp, v, n, ldv, D, acc, ldacc);
}
float exp_sum_generic(float* s, int64_t n, float m) { return exp_sum_impl(s, n, m); }
void silu_mul_generic(const float* g, const float* u, float* o, int64_t n) { silu_mul_impl(g, u, o, n); }
void silu_generic(float* x, int64_t n) { silu_impl(x, n); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PAGODA_HAVE_AVX2_PATH 1
__attribute__((target("avx2,fma"))) void gemm_avx2(const float* x, int64_t ldx, const float* w,
                                                   int64_t ldw, float* out, int64_t ldo, int64_t T,
                                                   int64_t N, int64_t K) {
  gemm_impl(x, ldx, w, ldw, out, ldo, T, N, K);
}
__attribute__((target("avx2,fma"))) void qk_avx2(const float* q, int64_t G, int64_t ldq,
                                                 const float* k, int64_t n, int64_t ldk, int64_t D,
                                                 float* s, int64_t lds) {
  gemm_impl(q, ldq, k, ldk, s, lds, G, n, D);
}
__attribute__((target("avx2,fma"))) void pv_avx2(const float* p, int64_t G, int64_t ldp,
                                                 const float* v, int64_t n, int64_t ldv, int64_t D,
                                                 float* acc, int64_t ldacc) {
  pv_impl(p, G, ldp, v, n, ldv, D, acc, ldacc);
}
__attribute__((target("avx2,fma"))) float exp_sum_avx2(float* s, int64_t n, float m) {
  return exp_sum_impl(s, n, m);
}
__attribute__((target("avx2,fma"))) void silu_mul_avx2(const float* g, const float* u, float* o, int64_t n) {
  silu_mul_impl(g, u, o, n);
}
__attribute__((target("avx2,fma"))) void silu_avx2(float* x, int64_t n) { silu_impl(x, n); }
#endif

Kernels select_kernels() {
#ifdef PAGODA_HAVE_AVX2_PATH
  __builtin_cpu_init();
  // PAGODA_CPU_ISA=scalar forces the portable build of these loops too (tests run both paths).
  const char* forced = std::getenv("PAGODA_CPU_ISA");
  const bool portable = forced != nullptr && std::string_view(forced) == "scalar";
  if (!portable && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return Kernels{gemm_avx2, qk_avx2, pv_avx2, exp_sum_avx2, silu_mul_avx2, silu_avx2, "avx2"};
#endif
  return Kernels{gemm_generic, qk_generic, pv_generic, exp_sum_generic, silu_mul_generic, silu_generic, "generic"};
}

}  // namespace

const Kernels& kernels() {
  static const Kernels k = select_kernels();
  return k;
}

}  // namespace pagoda::cpu

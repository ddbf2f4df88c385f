// Vectorised fp32 inner loops of the CPU backend, compiled twice (AVX2+FMA and portable) and chosen
// once at run time by what the CPU supports (PAGODA_CPU_ISA=scalar forces the portable build).
// Single-threaded; the callers split the work.
#pragma once

#include <cstdint>

namespace pagoda::cpu {

struct Kernels {
  // out[t, n] = sum_k x[t, k] * w[n, k] for t < T, n < N (row strides ldx, ldw, ldo).
  void (*gemm)(const float* x, int64_t ldx, const float* w, int64_t ldw, float* out, int64_t ldo,
               int64_t T, int64_t N, int64_t K);
  // s[g, j] = q[g, :] · k[j, :] for g < G, j < n, over D elements.
  void (*qk_scores)(const float* q, int64_t G, int64_t ldq, const float* k, int64_t n, int64_t ldk,
                    int64_t D, float* s, int64_t lds);
  // acc[g, :] += sum_j p[g, j] * v[j, :] for g < G, j < n, over D elements.
  void (*pv_accumulate)(const float* p, int64_t G, int64_t ldp, const float* v, int64_t n,
                        int64_t ldv, int64_t D, float* acc, int64_t ldacc);
  // s[j] = exp(s[j] - m) for j < n (s[j] <= m), returning the sum: softmax's numerators (~1 ulp).
  float (*exp_sum)(float* s, int64_t n, float m);
  // o[i] = silu(g[i]) · u[i] for i < n (the SwiGLU activation), exp as exp_sum's.
  void (*silu_mul)(const float* g, const float* u, float* o, int64_t n);
  // x[i] = silu(x[i]) in place for i < n.
  void (*silu)(float* x, int64_t n);
  const char* isa;  // "avx2" or "generic"
};

const Kernels& kernels();

}  // namespace pagoda::cpu

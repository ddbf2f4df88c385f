// FP8 decode GEMV kernels of linear_fp8 (linear_fp8.cpp): out[t, n] = Σ_k x[t, k] · e4m3(w[n, k]) ·
// scale[n / bn, k / bk] for rows n in [n0, n1), x fp32 [T, K] (row stride ldx), w [N, K] bytes,
// scale [ceil(N / bn), scale_cols]. Single-threaded; the caller splits the rows. Internal to
// src/backend/cpu.
#pragma once

#include <cstdint>

namespace pagoda::cpu {

#if defined(__x86_64__)
// AVX2 + FMA + F16C; any block_k (columns past a block's last multiple of 16 are summed in scalar).
void gemv_fp8_avx2(const float* x, int64_t ldx, int64_t T, const uint8_t* w, int64_t K, const float* scale,
                     int64_t scale_cols, int64_t bn, int64_t bk, int64_t n0, int64_t n1, float* out, int64_t ldo);
#endif

}  // namespace pagoda::cpu

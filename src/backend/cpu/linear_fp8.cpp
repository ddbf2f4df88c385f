// linear_fp8: FP8 (e4m3fn) weights with 2-D block scales, out = x · (w ⊙ scale)ᵀ with fp32 math.
// Decode (a few rows of x) on AVX2 and better: the GEMV of gemv_fp8.h, widening the bytes in registers.
// Otherwise a thread dequantizes a panel of its weight rows into fp32 — each element the byte's value times
// its block's scale, one rounding, exactly what a dequantizing reference computes — and the fp32
// kernel of kernels.h multiplies the panel by every row of x. Each weight byte is read from memory
// once (a quarter of the fp32 bytes, half of bf16: decode is bandwidth-bound); the panel stays in L2.
#include <algorithm>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/dequantized_gemm.h"
#include "backend/cpu/gemv.h"
#include "backend/cpu/gemv_fp8.h"
#include "backend/cpu/kernels.h"

namespace pagoda::cpu {

namespace {

// Rows of x up to which the GEMV streams the bytes (each pass over the weights serves four rows):
// past it the panels' fp32 GEMM, which reuses each dequantized panel for every row, wins.
constexpr int64_t kFp8GemvMaxTokens = 8;

// dst[r, k] = fp8(w[n0 + r, k]) · scale[(n0 + r) / bn, k / bk] for r < rows.
void dequantize_rows(const uint8_t* w, const float* scale, int64_t n0, int64_t rows, int64_t K, int64_t bn,
                     int64_t bk, int64_t scale_cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = n0 + r;
    const uint8_t* src = w + n * K;
    const float* srow = scale + (n / bn) * scale_cols;
    float* d = dst + r * K;
    for (int64_t k0 = 0; k0 < K; k0 += bk) {
      const int64_t k1 = std::min(K, k0 + bk);
      const float s = srow[k0 / bk];
      for (int64_t k = k0; k < k1; ++k) d[k] = fp8_e4m3_to_f32(src[k]) * s;
    }
  }
}

}  // namespace

void linear_fp8(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& scale, int64_t bn, int64_t bk,
                Tensor& out) {
  const char* op = "linear_fp8";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(out, DType::F32, op, "out");
  require_dtype(w, DType::F8_E4M3, op, "w");
  require_dtype(scale, DType::F32, op, "scale");
  require(w.ndim == 2 && w.is_contiguous(), op, "w must be a contiguous [N, K] matrix");
  const int64_t T = x.size(0), K = x.row_numel(), N = w.size(0);
  require(w.size(1) == K, op, "x and w disagree on K");
  require(out.size(0) == T && out.row_numel() == N, op, "out must be [T, N]");
  require(bn >= 1 && bk >= 1, op, "block sizes must be positive");
  const int64_t scale_rows = (N + bn - 1) / bn, scale_cols = (K + bk - 1) / bk;
  require(scale.ndim == 2 && scale.is_contiguous() && scale.size(0) == scale_rows && scale.size(1) == scale_cols, op,
          "scale must be a contiguous [ceil(N / block_n), ceil(K / block_k)] matrix");
  if (T == 0 || N == 0) return;
  const float* xp = x.ptr<const float>();
  float* op_out = out.ptr<float>();
  const int64_t ldx = x.stride0(), ldo = out.stride0();
  const auto* wp = w.ptr<const uint8_t>();
  const float* sp = scale.ptr<const float>();
#if defined(__x86_64__)
  // PAGODA_CPU_ISA picks the GEMV family (gemv.h): the FP8 one follows it.
  const CpuIsa isa = gemv_kernels().isa;
  if (T <= kFp8GemvMaxTokens && (isa == CpuIsa::Avx2 || isa == CpuIsa::Avx512 || isa == CpuIsa::Avx512Bf16)) {
    pool.parallel_for_static(
        N, [&](int64_t n0, int64_t n1) { gemv_fp8_avx2(xp, ldx, T, wp, K, sp, scale_cols, bn, bk, n0, n1, op_out, ldo); },
        16, static_cast<double>((T + 1) * K));
    return;
  }
#endif
  dequantized_gemm(pool, xp, ldx, T, N, K, op_out, ldo, [&](int64_t n0, int64_t rows, float* dst) {
    dequantize_rows(wp, sp, n0, rows, K, bn, bk, scale_cols, dst);
  });
}

}  // namespace pagoda::cpu

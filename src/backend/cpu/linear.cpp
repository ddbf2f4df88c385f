// linear: out[T, N] = x[T, K] · w[N, K]^T, fp32 accumulation, weights F32/BF16/F16.
// BF16/F16 weights (the checkpoint's dtype, used in place from the mapping) go through the GEMV
// kernels of gemv.h, which widen them in registers: decode streams each weight byte once. For many
// rows of x (prefill) the same kernels over blocks of x rows that stay in cache (the FMAs are the
// limit), or the bf16-activation blocked GEMM of gemm.h for a bf16 model (bf16_prefill). F32
// weights: our tiled fp32 kernel (kernels.h).
#include <algorithm>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/gemv.h"
#include "backend/cpu/kernels.h"

namespace pagoda::cpu {

namespace {

// x rows per pass over a thread's weight rows: 128 fp32 rows of K = 1024..4096 (0.5-2 MiB) stay in
// L2/L3 while the weights stream; the weights are read ceil(T / 128) times.
constexpr int64_t kRowsPerPass = 128;

void linear_half(ThreadPool& pool, const float* x, int64_t ldx, const Tensor& w, float* out, int64_t ldo,
                 int64_t T, int64_t N, int64_t K, bool bf16_prefill) {
  const GemvKernels& kern = gemv_kernels();
  const GemvFn fn = w.dtype == DType::BF16 ? kern.bf16 : kern.f16;
  const auto* wp = static_cast<const uint16_t*>(w.data);
  const GemmKernels& gemm = gemm_kernels(bf16_prefill);
  const GemvFn gemm_fn = w.dtype == DType::BF16 ? gemm.bf16 : gemm.f16;
  if (gemm_fn != nullptr && T >= kGemmMinRows) {
    // Compute-bound: whole weight panels per thread, the GEMM blocks x itself.
    pool.parallel_for_static(
        N, [&](int64_t n0, int64_t n1) { gemm_fn(x, ldx, wp + n0 * K, K, out + n0, ldo, T, n1 - n0, K); },
        kGemmPanelRows, static_cast<double>(T * K));
    return;
  }
  // Even rows per thread (the loop is bandwidth-bound at small T); 16-row grains keep each thread's
  // slice a whole number of 4-row tiles.
  pool.parallel_for_static(
      N,
      [&](int64_t n0, int64_t n1) {
        for (int64_t t0 = 0; t0 < T; t0 += kRowsPerPass) {
          const int64_t tt = std::min(kRowsPerPass, T - t0);
          fn(x + t0 * ldx, ldx, wp + n0 * K, K, out + t0 * ldo + n0, ldo, tt, n1 - n0, K);
        }
      },
      16, static_cast<double>((T + 1) * K));
}

}  // namespace

void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out, bool bf16_prefill) {
  const char* op = "linear";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(out, DType::F32, op, "out");
  require(is_float_dtype(w.dtype) && w.ndim == 2 && w.is_contiguous(), op,
          "w must be a contiguous float [N, K] matrix");
  const int64_t T = x.size(0), K = x.row_numel(), N = w.size(0);
  require(w.size(1) == K, op, "x and w disagree on K");
  require(out.size(0) == T && out.row_numel() == N, op, "out must be [T, N]");
  if (T == 0 || N == 0) return;
  const float* xp = x.ptr<const float>();
  float* op_out = out.ptr<float>();
  const int64_t ldx = x.stride0(), ldo = out.stride0();

  if (w.dtype != DType::F32) {
    linear_half(pool, xp, ldx, w, op_out, ldo, T, N, K, bf16_prefill);
    return;
  }
  const float* wp = w.ptr<const float>();
  const Kernels& kern = kernels();
  pool.parallel_for(
      N,
      [&](int64_t n0, int64_t n1) {
        kern.gemm(xp, ldx, wp + n0 * K, K, op_out + n0, ldo, T, n1 - n0, K);
      },
      T == 1 ? 8 : 48, static_cast<double>(T * K));
}

}  // namespace pagoda::cpu

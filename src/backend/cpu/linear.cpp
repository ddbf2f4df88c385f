// linear: out[T, N] = x[T, K] · w[N, K]^T, fp32 accumulation, weights F32/BF16/F16.
// F32 weights: a multithreaded GEMV for decode; sgemm from the system BLAS (PAGODA_HAS_BLAS) or our
// own tiled kernel for T > 1. BF16/F16 weights: blocks of weight rows are converted to fp32 in a
// per-thread scratch buffer and multiplied there.
#include <algorithm>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels.h"

#ifdef PAGODA_HAS_BLAS
#include <cblas.h>
#endif

namespace pagoda::cpu {

namespace {

#ifdef PAGODA_HAS_BLAS
// Below this many rows the GEMV-style kernel streams the weights once and beats a BLAS call.
constexpr int64_t kBlasMinRows = 8;
#endif

void linear_converted(ThreadPool& pool, const float* x, int64_t ldx, const Tensor& w, float* out,
                      int64_t ldo, int64_t T, int64_t N, int64_t K) {
  const int64_t block = T == 1 ? 16 : 64;
  const auto esize = static_cast<int64_t>(dtype_size(w.dtype));
  const Kernels& kern = kernels();
  pool.parallel_for(
      N,
      [&](int64_t n_begin, int64_t n_end) {
        thread_local std::vector<float> scratch;
        scratch.resize(static_cast<size_t>(block * K));
        for (int64_t n0 = n_begin; n0 < n_end; n0 += block) {
          const int64_t nn = std::min(block, n_end - n0);
          const char* src = static_cast<const char*>(w.data) + n0 * K * esize;
          load_row(src, w.dtype, scratch.data(), nn * K);
          kern.gemm(x, ldx, scratch.data(), K, out + n0, ldo, T, nn, K);
        }
      },
      block, static_cast<double>((T + 1) * K));
}

}  // namespace

void linear(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out) {
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
    linear_converted(pool, xp, ldx, w, op_out, ldo, T, N, K);
    return;
  }
  const float* wp = w.ptr<const float>();
#ifdef PAGODA_HAS_BLAS
  if (T >= kBlasMinRows) {
    // One single-threaded sgemm per thread over its slice of N: our pool is the only parallelism.
    pool.parallel_for_static(
        N,
        [&](int64_t n0, int64_t n1) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(T),
                      static_cast<int>(n1 - n0), static_cast<int>(K), 1.0f, xp,
                      static_cast<int>(ldx), wp + n0 * K, static_cast<int>(K), 0.0f, op_out + n0,
                      static_cast<int>(ldo));
        },
        16, static_cast<double>(T * K));
    return;
  }
#endif
  const Kernels& kern = kernels();
  pool.parallel_for(
      N,
      [&](int64_t n0, int64_t n1) {
        kern.gemm(xp, ldx, wp + n0 * K, K, op_out + n0, ldo, T, n1 - n0, K);
      },
      T == 1 ? 8 : 48, static_cast<double>(T * K));
}

}  // namespace pagoda::cpu

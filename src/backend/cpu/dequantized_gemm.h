// The quantized linears' path for many rows of x (linear_fp8.cpp, linear_int4.cpp): a thread
// dequantizes a panel of its weight rows into fp32 — `dequantize(n0, rows, dst)` writes rows
// [n0, n0 + rows) of W, [rows, K] — and the fp32 kernel of kernels.h multiplies the panel by every
// row of x. Each packed weight is read once; the panel stays in L2. Internal to src/backend/cpu.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/thread_pool.h"

namespace pagoda::cpu {

template <typename Dequantize>
void dequantized_gemm(ThreadPool& pool, const float* x, int64_t ldx, int64_t T, int64_t N, int64_t K, float* out,
                      int64_t ldo, const Dequantize& dequantize) {
  // fp32 elements of one thread's panel: 256 KiB, within a core's L2.
  constexpr int64_t kPanelFloats = 64 * 1024;
  const Kernels& kern = kernels();
  const int64_t panel_rows = std::clamp<int64_t>(kPanelFloats / std::max<int64_t>(K, 1), 1, 64);
  pool.parallel_for_static(
      N,
      [&](int64_t n0, int64_t n1) {
        // Kept per thread: a fresh 256 KiB every call would fault its pages in every time.
        thread_local std::vector<float> panel;
        panel.resize(static_cast<size_t>(std::min(panel_rows, n1 - n0) * K));
        for (int64_t p0 = n0; p0 < n1; p0 += panel_rows) {
          const int64_t rows = std::min(panel_rows, n1 - p0);
          dequantize(p0, rows, panel.data());
          kern.gemm(x, ldx, panel.data(), K, out + p0, ldo, T, rows, K);
        }
      },
      16, static_cast<double>((T + 4) * K));
}

}  // namespace pagoda::cpu

// linear_int4: 4-bit weights in groups along K (backend.h), out = x · ((q − z) ⊙ scale)ᵀ in fp32,
// by dequantized panels (dequantized_gemm.h): each element (q − z) · scale, exact for the f16 / bf16
// scales checkpoints carry (a 4-bit integer times an 11-bit mantissa), so a panel holds exactly
// what a dequantizing reference multiplies by.
#include <algorithm>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/dequantized_gemm.h"

namespace pagoda::cpu {

namespace {

// dst[r, k] = (q[n0 + r, k] − z[n0 + r, k / group]) · scale[n0 + r, k / group] for r < rows.
void dequantize_rows(const uint32_t* w, const float* scale, const uint32_t* zeros, int64_t n0, int64_t rows, int64_t K,
                     int64_t group, int64_t zero_words, float* dst) {
  const int64_t G = K / group, kw = K / 8;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = n0 + r;
    const uint32_t* wr = w + n * kw;
    const float* sr = scale + n * G;
    const uint32_t* zr = zeros + n * zero_words;
    float* d = dst + r * K;
    for (int64_t g = 0; g < G; ++g) {
      const float s = sr[g];
      const auto z = static_cast<int32_t>((zr[g / 8] >> (4 * (g % 8))) & 15u);
      for (int64_t k = g * group; k < (g + 1) * group; k += 8) {
        const uint32_t word = wr[k / 8];
        for (int i = 0; i < 8; ++i)
          d[k + i] = static_cast<float>(static_cast<int32_t>((word >> (4 * i)) & 15u) - z) * s;
      }
    }
  }
}

}  // namespace

void linear_int4(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& scale, const Tensor& zeros,
                 int64_t group, Tensor& out) {
  const char* op = "linear_int4";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(out, DType::F32, op, "out");
  require_dtype(w, DType::I32, op, "w");
  require_dtype(scale, DType::F32, op, "scale");
  require_dtype(zeros, DType::I32, op, "zeros");
  require(w.ndim == 2 && w.is_contiguous(), op, "w must be a contiguous [N, K / 8] matrix");
  const int64_t T = x.size(0), K = x.row_numel(), N = w.size(0);
  require(group >= 8 && group % 8 == 0 && K % group == 0, op,
          "group must be a multiple of 8 dividing K");
  require(w.size(1) * 8 == K, op, "x and w disagree on K (w holds eight weights per element)");
  require(out.size(0) == T && out.row_numel() == N, op, "out must be [T, N]");
  const int64_t G = K / group, zero_words = (G + 7) / 8;
  require(scale.ndim == 2 && scale.is_contiguous() && scale.size(0) == N && scale.size(1) == G, op,
          "scale must be a contiguous [N, K / group] matrix");
  require(zeros.ndim == 2 && zeros.is_contiguous() && zeros.size(0) == N && zeros.size(1) == zero_words, op,
          "zeros must be a contiguous [N, ceil(K / group / 8)] matrix");
  if (T == 0 || N == 0) return;
  const float* xp = x.ptr<const float>();
  float* op_out = out.ptr<float>();
  const int64_t ldx = x.stride0(), ldo = out.stride0();
  const auto* wp = w.ptr<const uint32_t>();
  const auto* zp = zeros.ptr<const uint32_t>();
  const float* sp = scale.ptr<const float>();
  dequantized_gemm(pool, xp, ldx, T, N, K, op_out, ldo, [&](int64_t n0, int64_t rows, float* dst) {
    dequantize_rows(wp, sp, zp, n0, rows, K, group, zero_words, dst);
  });
}

}  // namespace pagoda::cpu

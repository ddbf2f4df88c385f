// RMSNorm over the last dimension, fp32 statistics; optional fused residual add.
#include <cmath>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"

namespace pagoda::cpu {

namespace {

float sum_squares(const float* x, int64_t n) {
  float part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += x[i + j] * x[i + j];
  float s =
      ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

// Norm weights as fp32, with the 1 already added for zero-centred weights.
std::vector<float> norm_weights(const Tensor& w, int64_t n, bool zero_centered) {
  std::vector<float> out(static_cast<size_t>(n));
  load_row(w.data, w.dtype, out.data(), n);
  if (zero_centered)
    for (float& v : out) v += 1.0f;
  return out;
}

// Vectors of the last dimension of t: (row of dim 0, offset inside the row).
struct VectorIndex {
  int64_t per_row, width;
  void* at(const Tensor& t, int64_t v) const {
    return static_cast<char*>(t.row(v / per_row)) +
           static_cast<size_t>((v % per_row) * width) * dtype_size(t.dtype);
  }
};

void check_norm_args(const char* op, const Tensor& x, const Tensor& w, const Tensor& out) {
  require_dtype(x, DType::F32, op, "x");
  require_dtype(out, DType::F32, op, "out");
  require(is_float_dtype(w.dtype) && w.numel() == x.size(-1), op, "w must be [hidden]");
  require(
      out.size(0) == x.size(0) && out.row_numel() == x.row_numel() && out.size(-1) == x.size(-1),
      op, "out must have the shape of x");
}

}  // namespace

void rms_norm_vector(float* x, const float* w, int64_t n, float eps) {
  const float inv = 1.0f / std::sqrt(sum_squares(x, n) / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * inv * w[i];
}

void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& out, float eps,
              bool zero_centered) {
  check_norm_args("rms_norm", x, w, out);
  const int64_t H = x.size(-1);
  const std::vector<float> wf = norm_weights(w, H, zero_centered);
  const VectorIndex vx{x.row_numel() / H, H}, vo{out.row_numel() / H, H};
  const int64_t count = x.size(0) * vx.per_row;
  pool.parallel_for(count, [&](int64_t begin, int64_t end) {
    for (int64_t v = begin; v < end; ++v) {
      const auto* xi = static_cast<const float*>(vx.at(x, v));
      auto* oi = static_cast<float*>(vo.at(out, v));
      const float inv = 1.0f / std::sqrt(sum_squares(xi, H) / static_cast<float>(H) + eps);
      for (int64_t i = 0; i < H; ++i) oi[i] = xi[i] * inv * wf[static_cast<size_t>(i)];
    }
  }, 1, static_cast<double>(4 * H));
}

void add_rms_norm(ThreadPool& pool, Tensor& residual, const Tensor& x, const Tensor& w, Tensor& out,
                  float eps, bool zero_centered) {
  check_norm_args("add_rms_norm", x, w, out);
  require_dtype(residual, DType::F32, "add_rms_norm", "residual");
  require(residual.size(0) == x.size(0) && residual.row_numel() == x.row_numel(), "add_rms_norm",
          "residual must have the shape of x");
  const int64_t H = x.size(-1);
  const std::vector<float> wf = norm_weights(w, H, zero_centered);
  const VectorIndex vx{x.row_numel() / H, H}, vo{out.row_numel() / H, H},
      vr{residual.row_numel() / H, H};
  const int64_t count = x.size(0) * vx.per_row;
  pool.parallel_for(count, [&](int64_t begin, int64_t end) {
    for (int64_t v = begin; v < end; ++v) {
      const auto* xi = static_cast<const float*>(vx.at(x, v));
      auto* ri = static_cast<float*>(vr.at(residual, v));
      auto* oi = static_cast<float*>(vo.at(out, v));
      for (int64_t i = 0; i < H; ++i) ri[i] += xi[i];
      const float inv = 1.0f / std::sqrt(sum_squares(ri, H) / static_cast<float>(H) + eps);
      for (int64_t i = 0; i < H; ++i) oi[i] = ri[i] * inv * wf[static_cast<size_t>(i)];
    }
  }, 1, static_cast<double>(6 * H));
}

}  // namespace pagoda::cpu

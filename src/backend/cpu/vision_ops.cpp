// The vision encoder's primitives on the CPU (backend.h, "vision encoders"): LayerNorm, GELU (exact
// and tanh), RoPE with a position row per rotary pair, and bidirectional attention within segments.
// The CPU twins of the CUDA kernels in cuda/vision_kernels.cu; plain fp32 loops over rows.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"

namespace pagoda::cpu {

namespace {

std::vector<float> as_floats(const Tensor& t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  load_row(t.data, t.dtype, out.data(), n);
  return out;
}

}  // namespace

void layer_norm(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps) {
  const char* op = "layer_norm";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(out, DType::F32, op, "out");
  require(x.ndim == 2 && out.ndim == 2 && out.size(0) == x.size(0) && out.size(1) == x.size(1), op,
          "x and out must be [T, D] of one shape");
  const int64_t D = x.size(1);
  require(is_float_dtype(w.dtype) && w.numel() == D, op, "w must be [D]");
  require(b.empty() || (is_float_dtype(b.dtype) && b.numel() == D), op, "b must be [D] or empty");
  const std::vector<float> wf = as_floats(w, D);
  const std::vector<float> bf = b.empty() ? std::vector<float>(static_cast<size_t>(D), 0.0f) : as_floats(b, D);
  pool.parallel_for(x.size(0), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const auto* xi = static_cast<const float*>(x.row(t));
      auto* oi = static_cast<float*>(out.row(t));
      float mean = 0.0f;
      for (int64_t i = 0; i < D; ++i) mean += xi[i];
      mean /= static_cast<float>(D);
      float var = 0.0f;
      for (int64_t i = 0; i < D; ++i) var += (xi[i] - mean) * (xi[i] - mean);
      var /= static_cast<float>(D);
      const float inv = 1.0f / std::sqrt(var + eps);
      for (int64_t i = 0; i < D; ++i) {
        const auto k = static_cast<size_t>(i);
        oi[i] = (xi[i] - mean) * inv * wf[k] + bf[k];
      }
    }
  }, 1, static_cast<double>(6 * D));
}

void gelu(ThreadPool& pool, const Tensor& x, Tensor& out, bool tanh_approx) {
  const char* op = "gelu";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(out, DType::F32, op, "out");
  require(out.size(0) == x.size(0) && out.row_numel() == x.row_numel(), op, "out must have the shape of x");
  const int64_t N = x.row_numel();
  pool.parallel_for(x.size(0), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const auto* xi = static_cast<const float*>(x.row(t));
      auto* oi = static_cast<float*>(out.row(t));
      for (int64_t i = 0; i < N; ++i) {
        const float v = xi[i];
        if (tanh_approx) {
          const float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
          oi[i] = 0.5f * v * (1.0f + std::tanh(inner));
        } else {
          oi[i] = 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
        }
      }
    }
  }, 1, static_cast<double>(20 * N));
}

void rope_axes(ThreadPool& pool, Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq) {
  const char* op = "rope_axes";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(positions, DType::I32, op, "positions");
  require_dtype(axes, DType::I32, op, "axes");
  require_dtype(inv_freq, DType::F32, op, "inv_freq");
  require(x.ndim == 3, op, "x must be [T, heads, head_dim]");
  const int64_t T = x.size(0), H = x.size(1), D = x.size(2), n = axes.numel();
  require(positions.ndim == 2 && positions.size(1) == T, op, "positions must be [P, T]");
  require(inv_freq.numel() == n && 2 * n <= D, op, "inv_freq must be [n] with 2n <= head_dim");
  const int64_t P = positions.size(0);
  const int32_t* ax = axes.ptr<const int32_t>();
  for (int64_t j = 0; j < n; ++j) require(ax[j] >= 0 && ax[j] < P, op, "an axis outside the position rows");
  const int32_t* pos = positions.ptr<const int32_t>();
  const float* freq = inv_freq.ptr<const float>();
  pool.parallel_for(T, [&](int64_t t0, int64_t t1) {
    std::vector<float> c(static_cast<size_t>(n)), s(static_cast<size_t>(n));
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t j = 0; j < n; ++j) {
        const float angle = static_cast<float>(pos[ax[j] * T + t]) * freq[j];
        c[static_cast<size_t>(j)] = std::cos(angle);
        s[static_cast<size_t>(j)] = std::sin(angle);
      }
      auto* row = static_cast<float*>(x.row(t));
      for (int64_t h = 0; h < H; ++h) {
        float* v = row + h * D;
        for (int64_t j = 0; j < n; ++j) {
          const float a = v[j], b = v[j + n];
          v[j] = a * c[static_cast<size_t>(j)] - b * s[static_cast<size_t>(j)];
          v[j + n] = b * c[static_cast<size_t>(j)] + a * s[static_cast<size_t>(j)];
        }
      }
    }
  }, 1, static_cast<double>(8 * H * n));
}

void segment_attention(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& cu_seqlens, float scale, Tensor& out) {
  const char* op = "segment_attention";
  for (const Tensor* t : {&q, &k, &v, static_cast<const Tensor*>(&out)}) require_dtype(*t, DType::F32, op, "q, k, v and out");
  require_dtype(cu_seqlens, DType::I32, op, "cu_seqlens");
  require(q.ndim == 3 && k.ndim == 3 && v.ndim == 3 && out.ndim == 3, op, "q, k, v, out must be [T, H, D]");
  const int64_t T = q.size(0), H = q.size(1), D = q.size(2);
  for (const Tensor* t : {&k, &v, static_cast<const Tensor*>(&out)})
    require(t->size(0) == T && t->size(1) == H && t->size(2) == D, op, "q, k, v, out must have one shape");
  const int64_t S = cu_seqlens.numel() - 1;
  const int32_t* cu = cu_seqlens.ptr<const int32_t>();
  require(S >= 0 && cu[0] == 0 && cu[S] == T, op, "cu_seqlens must run from 0 to T");
  for (int64_t s = 0; s < S; ++s) require(cu[s] <= cu[s + 1], op, "cu_seqlens must not decrease");
  // The segment of every row, then (row, head) pairs in parallel.
  std::vector<int32_t> seg(static_cast<size_t>(T));
  for (int64_t s = 0; s < S; ++s)
    for (int32_t r = cu[s]; r < cu[s + 1]; ++r) seg[static_cast<size_t>(r)] = static_cast<int32_t>(s);
  pool.parallel_for(T * H, [&](int64_t i0, int64_t i1) {
    std::vector<float> p;
    std::vector<float> acc(static_cast<size_t>(D));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H, h = i % H;
      const int32_t s = seg[static_cast<size_t>(t)];
      const int64_t b = cu[s], e = cu[s + 1];
      const float* qi = static_cast<const float*>(q.row(t)) + h * D;
      p.assign(static_cast<size_t>(e - b), 0.0f);
      float m = -INFINITY;
      for (int64_t r = b; r < e; ++r) {
        const float* kr = static_cast<const float*>(k.row(r)) + h * D;
        float dot = 0.0f;
        for (int64_t d = 0; d < D; ++d) dot += qi[d] * kr[d];
        p[static_cast<size_t>(r - b)] = dot * scale;
        m = std::max(m, dot * scale);
      }
      float sum = 0.0f;
      for (float& x : p) {
        x = std::exp(x - m);
        sum += x;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t r = b; r < e; ++r) {
        const float* vr = static_cast<const float*>(v.row(r)) + h * D;
        const float w = p[static_cast<size_t>(r - b)];
        for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += w * vr[d];
      }
      float* oi = static_cast<float*>(out.row(t)) + h * D;
      for (int64_t d = 0; d < D; ++d) oi[d] = acc[static_cast<size_t>(d)] / sum;
    }
  }, 1, 0.0);
}

}  // namespace pagoda::cpu

// The op table's references of the vision encoder's primitives (backend.h, "vision encoders"):
// LayerNorm, GELU, RoPE with a position row per rotary pair, attention within segments. Plain loops
// in double from the contract, each result rounded once to the dtype of the tensor it lands in.
#pragma once

#include "op_table_naive.h"

namespace pagoda::naive {

// (x − mean) / √(var + eps) · w + b per row, the biased variance; b absent: no bias. In place where
// the case has no "out".
inline Outputs layer_norm(const OpData& in) {
  const HostTensor& x = in.at("x");
  const HostTensor& w = in.at("w");
  const bool bias = in.t.count("b") > 0, in_place = in.t.count("out") == 0;
  const int64_t t = x.shape[0], d = x.shape[1];
  const double eps = in.param("eps");
  std::vector<double> out(static_cast<size_t>(t * d));
  for (int64_t r = 0; r < t; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += x.at(r * d + i);
    mean /= static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) var += (x.at(r * d + i) - mean) * (x.at(r * d + i) - mean);
    var /= static_cast<double>(d);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < d; ++i) {
      const double y = (x.at(r * d + i) - mean) * inv * w.at(i) + (bias ? double(in.at("b").at(i)) : 0.0);
      out[static_cast<size_t>(r * d + i)] = rnd(y, x.dtype);
    }
  }
  return {{in_place ? "x" : "out", out}};
}

// Exact: ½x(1 + erf(x/√2)); tanh: ½x(1 + tanh(√(2/π)(x + 0.044715x³))).
inline Outputs gelu(const OpData& in) {
  const HostTensor& x = in.at("x");
  const bool tanh_approx = in.param("tanh") != 0;
  const double k = std::sqrt(2.0 / std::numbers::pi);
  std::vector<double> out;
  for (float f : x.f) {
    const double v = f;
    const double g = tanh_approx ? 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)))
                                 : 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    out.push_back(rnd(g, x.dtype));
  }
  return {{in.t.count("out") ? "out" : "x", out}};
}

// Every head of token t: pair j = (x[j], x[j + n]) turned by the fp32 angle positions[axes[j], t] ·
// inv_freq[j] (cos and sin of it in double); dims from 2n on unchanged. x is "x" [T, H, D], or the
// part-th third of the columns of "qkv" [T, 3·H·D].
inline Outputs rope_axes(const OpData& in) {
  const bool fused = in.t.count("qkv") > 0;
  const HostTensor& x = in.at(fused ? "qkv" : "x");
  const int64_t t = x.shape[0], cols = x.row_numel();
  const int64_t h = fused ? static_cast<int64_t>(in.param("heads")) : x.shape[1];
  const int64_t d = fused ? static_cast<int64_t>(in.param("head_dim")) : x.shape[2];
  const int64_t first = fused ? static_cast<int64_t>(in.param("part")) * h * d : 0;
  const HostTensor &pos = in.at("positions"), &axes = in.at("axes"), &freq = in.at("inv_freq");
  const int64_t n = axes.numel();
  std::vector<double> out = values(x);
  for (int64_t r = 0; r < t; ++r)
    for (int64_t hh = 0; hh < h; ++hh) {
      double* head = &out[static_cast<size_t>(r * cols + first + hh * d)];
      for (int64_t j = 0; j < n; ++j) {
        const int32_t p = pos.i[static_cast<size_t>(axes.i[static_cast<size_t>(j)] * t + r)];
        const float angle = static_cast<float>(p) * freq.at(j);
        const double c = std::cos(static_cast<double>(angle)), s = std::sin(static_cast<double>(angle));
        const double a = head[j], b = head[j + n];
        head[j] = rnd(a * c - b * s, x.dtype);
        head[j + n] = rnd(b * c + a * s, x.dtype);
      }
    }
  return {{fused ? "qkv" : "x", out}};
}

// Row i of segment s (cu_seqlens[s] <= i < cu_seqlens[s+1]), head h: softmax over the segment's
// rows r of scale · q[i, h]·k[r, h], times v[r, h]. q, k, v are "q" / "k" / "v" [T, H, D] or the
// column thirds of "qkv" [T, 3·H·D].
inline Outputs segment_attention(const OpData& in) {
  const bool fused = in.t.count("qkv") > 0;
  const HostTensor& o = in.at("out");
  const int64_t t = o.shape[0], h = o.shape[1], d = o.shape[2];
  const double scale = in.param("scale");
  // q, k, v as [T, H, D] each (part 0, 1, 2), read out of the case's tensors once.
  std::vector<double> qkv[3];
  for (int part = 0; part < 3; ++part) {
    qkv[part].resize(static_cast<size_t>(t * h * d));
    for (int64_t i = 0; i < t * h * d; ++i) {
      const int64_t r = i / (h * d), c = i % (h * d);
      qkv[part][static_cast<size_t>(i)] = fused ? in.at("qkv").at(r * 3 * h * d + part * h * d + c)
                                                : in.at(part == 0 ? "q" : part == 1 ? "k" : "v").at(i);
    }
  }
  auto at = [&](int part, int64_t r, int64_t hh, int64_t e) { return qkv[part][static_cast<size_t>((r * h + hh) * d + e)]; };
  const std::vector<int32_t>& cu = in.at("cu_seqlens").i;
  std::vector<double> out(static_cast<size_t>(t * h * d));
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    for (int64_t i = cu[s]; i < cu[s + 1]; ++i)
      for (int64_t hh = 0; hh < h; ++hh) {
        std::vector<double> p;
        double m = -INFINITY;
        for (int64_t r = cu[s]; r < cu[s + 1]; ++r) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += at(0, i, hh, e) * at(1, r, hh, e);
          p.push_back(dot * scale);
          m = std::max(m, dot * scale);
        }
        double sum = 0;
        for (double& x : p) sum += (x = std::exp(x - m));
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t r = cu[s]; r < cu[s + 1]; ++r) acc += p[static_cast<size_t>(r - cu[s])] * at(2, r, hh, e);
          out[static_cast<size_t>((i * h + hh) * d + e)] = rnd(acc / sum, o.dtype);
        }
      }
  return {{"out", out}};
}

}  // namespace pagoda::naive

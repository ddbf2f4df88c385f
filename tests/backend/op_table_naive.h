// The op table's independent references: each op's formula in plain loops with double
// accumulation, from the contract in backend.h and docs/models.md (never from a backend's code). Each
// takes a case's inputs and returns its outputs by name; a result that a backend stores in a
// narrower dtype is rounded to it, once, as the contract says.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "bench/op_table.h"

namespace pagoda::naive {

using optable::HostTensor;
using optable::OpData;
using Outputs = std::map<std::string, std::vector<double>>;

inline double rnd(double v, DType t) { return optable::round_to(static_cast<float>(v), t); }
inline double silu(double x) { return x / (1.0 + std::exp(-x)); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

inline std::vector<double> values(const HostTensor& h) {
  if (h.dtype == DType::I32) return {h.i.begin(), h.i.end()};
  return {h.f.begin(), h.f.end()};
}

// x * rsqrt(mean(x^2) + eps) * (zc ? 1 + w : w) over n values.
inline void rms_norm_row(const double* x, const HostTensor& w, int64_t n, double eps, bool zc, double* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * r * ((zc ? 1.0 : 0.0) + w.at(i));
}

inline Outputs embedding(const OpData& in) {
  const HostTensor &table = in.at("table"), &ids = in.at("ids"), &o = in.at("out");
  const int64_t h = table.shape[1];
  std::vector<double> out;
  for (int32_t id : ids.i)
    for (int64_t j = 0; j < h; ++j) out.push_back(rnd(table.at(id * h + j), o.dtype));
  return {{"out", out}};
}

inline Outputs rms_norm(const OpData& in) {
  const HostTensor &x = in.at("x"), &w = in.at("w");
  const int64_t t = x.shape[0], h = x.shape[1];
  const bool zc = in.param("zero_centered") != 0;
  std::vector<double> xs = values(x), out(xs.size());
  for (int64_t r = 0; r < t; ++r) rms_norm_row(&xs[r * h], w, h, in.param("eps"), zc, &out[r * h]);
  for (double& v : out) v = rnd(v, x.dtype);
  return {{"out", out}};
}

inline Outputs add_rms_norm(const OpData& in) {
  const HostTensor &x = in.at("x"), &w = in.at("w"), &res = in.at("residual");
  const int64_t t = x.shape[0], h = x.shape[1];
  std::vector<double> sum(x.f.size()), out(x.f.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = rnd(double(res.f[i]) + x.f[i], res.dtype);
  for (int64_t r = 0; r < t; ++r)
    rms_norm_row(&sum[r * h], w, h, in.param("eps"), in.param("zero_centered") != 0, &out[r * h]);
  for (double& v : out) v = rnd(v, x.dtype);
  return {{"residual", sum}, {"out", out}};
}

inline std::vector<double> matmul_t(const std::vector<double>& x, const HostTensor& w, int64_t t, DType out_dt) {
  const int64_t n = w.shape[0], k = w.shape[1];
  std::vector<double> out(static_cast<size_t>(t * n));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < k; ++i) acc += x[r * k + i] * w.at(j * k + i);
      out[r * n + j] = rnd(acc, out_dt);
    }
  return out;
}

inline Outputs linear(const OpData& in) {
  const HostTensor& x = in.at("x");
  return {{"out", matmul_t(values(x), in.at("w"), x.shape[0], in.at("out").dtype)}};
}

// x · (w ⊙ scale)ᵀ with scale[n / block_n, k / block_k] (backend.h's linear_fp8), in double.
inline Outputs linear_fp8(const OpData& in) {
  const HostTensor &x = in.at("x"), &w = in.at("w"), &s = in.at("scale");
  const int64_t t = x.shape[0], n = w.shape[0], k = w.shape[1];
  const auto bn = static_cast<int64_t>(in.param("block_n")), bk = static_cast<int64_t>(in.param("block_k"));
  const int64_t sc = s.shape[1];
  std::vector<double> out(static_cast<size_t>(t * n));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < k; ++i)
        acc += static_cast<double>(x.at(r * k + i)) * w.at(j * k + i) * s.at((j / bn) * sc + i / bk);
      out[static_cast<size_t>(r * n + j)] = rnd(acc, in.at("out").dtype);
    }
  return {{"out", out}};
}

// x · ((q − z) ⊙ scale)ᵀ (backend.h's linear_int4), in double: q nibble k % 8 of w[n, k / 8], z nibble
// g % 8 of zeros[n, g / 8], g = k / group.
inline Outputs linear_int4(const OpData& in) {
  const HostTensor &x = in.at("x"), &w = in.at("w"), &s = in.at("scale"), &z = in.at("zeros");
  const int64_t t = x.shape[0], n = w.shape[0], k = w.shape[1] * 8, g_count = s.shape[1], zw = z.shape[1];
  const auto group = static_cast<int64_t>(in.param("group"));
  auto nibble = [](int32_t word, int64_t i) { return static_cast<int64_t>((static_cast<uint32_t>(word) >> (4 * i)) & 15u); };
  std::vector<double> out(static_cast<size_t>(t * n));
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < k; ++i) {
        const int64_t g = i / group;
        const int64_t q = nibble(w.i[static_cast<size_t>(j * (k / 8) + i / 8)], i % 8);
        const int64_t zero = nibble(z.i[static_cast<size_t>(j * zw + g / 8)], g % 8);
        acc += static_cast<double>(x.at(r * k + i)) * static_cast<double>(q - zero) * s.at(j * g_count + g);
      }
      out[static_cast<size_t>(r * n + j)] = rnd(acc, in.at("out").dtype);
    }
  return {{"out", out}};
}

// silu(gate_up[:, :I]) * gate_up[:, I:], rounded to the activation dtype.
inline std::vector<double> swiglu(const HostTensor& gu) {
  const int64_t t = gu.shape[0], i2 = gu.shape[1], half = i2 / 2;
  std::vector<double> out;
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < half; ++j) out.push_back(rnd(silu(gu.at(r * i2 + j)) * gu.at(r * i2 + half + j), gu.dtype));
  return out;
}

inline Outputs silu_mul(const OpData& in) { return {{"out", swiglu(in.at("gate_up"))}}; }

// transformers' gelu_pytorch_tanh: 0.5·g·(1 + tanh(√(2/π)·(g + 0.044715·g³))), times up.
inline Outputs gelu_tanh_mul(const OpData& in) {
  const HostTensor& gu = in.at("gate_up");
  const int64_t t = gu.shape[0], i2 = gu.shape[1], half = i2 / 2;
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  std::vector<double> out;
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < half; ++j) {
      const double g = gu.at(r * i2 + j), u = gu.at(r * i2 + half + j);
      out.push_back(rnd(0.5 * g * (1.0 + std::tanh(k * (g + 0.044715 * g * g * g))) * u, gu.dtype));
    }
  return {{"out", out}};
}

inline Outputs scale(const OpData& in) {
  const HostTensor& x = in.at("x");
  const double f = in.param("factor");
  std::vector<double> out;
  for (float v : x.f) out.push_back(rnd(v * f, x.dtype));
  return {{"x", out}};
}

inline Outputs softcap(const OpData& in) {
  const HostTensor& x = in.at("x");
  const double cap = in.param("cap");
  std::vector<double> out;
  for (float v : x.f) out.push_back(rnd(cap * std::tanh(v / cap), x.dtype));
  return {{"x", out}};
}

inline Outputs linear_silu_mul(const OpData& in) {
  const HostTensor& gu = in.at("gate_up");
  return {{"out", matmul_t(swiglu(gu), in.at("w"), gu.shape[0], in.at("out").dtype)}};
}

inline Outputs sigmoid_gate(const OpData& in) {
  const HostTensor &a = in.at("a"), &g = in.at("gate");
  std::vector<double> out;
  for (size_t i = 0; i < a.f.size(); ++i) out.push_back(rnd(a.f[i] * sigmoid(g.f[i]), a.dtype));
  return {{"a", out}};
}

// a + b, written to whichever tensor the case names as the output ("out", or "a"/"b" in place).
inline Outputs add(const OpData& in) {
  const HostTensor &a = in.at("a"), &b = in.at("b");
  const int alias = static_cast<int>(in.param("alias"));
  const DType out_dt = alias == 1 ? a.dtype : alias == 2 ? b.dtype : in.at("out").dtype;
  std::vector<double> out;
  for (size_t i = 0; i < a.f.size(); ++i) out.push_back(rnd(double(a.f[i]) + double(b.f[i]), out_dt));
  return {{alias == 1 ? "a" : alias == 2 ? "b" : "out", out}};
}

inline Outputs add_bias(const OpData& in) {
  const HostTensor &x = in.at("x"), &b = in.at("bias");
  const size_t n = b.f.size();
  std::vector<double> out;
  for (size_t i = 0; i < x.f.size(); ++i) out.push_back(rnd(x.f[i] + b.f[i % n], x.dtype));
  return {{"x", out}};
}

inline Outputs gather_rows(const OpData& in) {
  const HostTensor& x = in.at("x");
  const int64_t h = x.shape[1];
  std::vector<double> out;
  for (int32_t r : in.at("rows").i)
    for (int64_t j = 0; j < h; ++j) out.push_back(x.at(r * h + j));
  return {{"out", out}};
}

inline Outputs argmax_rows(const OpData& in) {
  const HostTensor& x = in.at("x");
  const int64_t rows = x.shape[0], v = x.shape[1];
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = -1;
    for (int64_t j = 0; j < v; ++j) {
      const float f = x.at(r * v + j);
      if (!std::isnan(f) && (best < 0 || f > x.at(r * v + best))) best = j;
    }
    out.push_back(static_cast<double>(best));
  }
  return {{"out", out}};
}

// Bit j of mask row m off: logits[rows[m], j] = -inf (bit j % 32 of 32-bit word j / 32).
inline Outputs apply_token_mask(const OpData& in) {
  const HostTensor &x = in.at("x"), &mask = in.at("mask");
  const int64_t v = x.shape[1], words = mask.shape[1];
  std::vector<double> out(x.f.begin(), x.f.end());
  const std::vector<int32_t>& rows = in.at("rows").i;
  for (size_t m = 0; m < rows.size(); ++m)
    for (int64_t j = 0; j < v; ++j) {
      const auto word = static_cast<uint32_t>(mask.i[m * static_cast<size_t>(words) + static_cast<size_t>(j / 32)]);
      if (((word >> (j % 32)) & 1u) == 0) out[static_cast<size_t>(rows[m] * v + j)] = -INFINITY;
    }
  return {{"x", out}};
}

}  // namespace pagoda::naive

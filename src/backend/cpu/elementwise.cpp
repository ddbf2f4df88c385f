// Elementwise and copy ops: silu_mul, gelu_tanh_mul, scale, softcap, add, add_bias, sigmoid_gate,
// gather_rows, dtype conversion.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <cstring>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels.h"

namespace pagoda::cpu {

namespace {

int64_t index_at(const Tensor& idx, int64_t i) {
  return idx.dtype == DType::I64 ? idx.ptr<const int64_t>()[i] : idx.ptr<const int32_t>()[i];
}

// Copies/converts one row of n elements between any two float dtypes (or equal dtypes).
void copy_row(const void* src, DType st, void* dst, DType dt, int64_t n, float* scratch) {
  if (st == dt) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(st));
  } else if (dt == DType::F32) {
    load_row(src, st, static_cast<float*>(dst), n);
  } else {
    store_row(as_f32(src, st, scratch, n), dt, dst, n);
  }
}

}  // namespace

void silu_mul(ThreadPool& pool, const Tensor& gate_up, Tensor& out) {
  const char* op = "silu_mul";
  require_dtype(gate_up, DType::F32, op, "gate_up");
  require_dtype(out, DType::F32, op, "out");
  const int64_t T = gate_up.size(0), I = out.row_numel();
  require(gate_up.row_numel() == 2 * I && out.size(0) == T, op,
          "gate_up must be [T, 2I], out [T, I]");
  pool.parallel_for(T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const auto* g = static_cast<const float*>(gate_up.row(t));
      const float* u = g + I;
      auto* o = static_cast<float*>(out.row(t));
      kernels().silu_mul(g, u, o, I);
    }
  }, 1, static_cast<double>(12 * I));
}

void gelu_tanh_mul(ThreadPool& pool, const Tensor& gate_up, Tensor& out) {
  const char* op = "gelu_tanh_mul";
  require_dtype(gate_up, DType::F32, op, "gate_up");
  require_dtype(out, DType::F32, op, "out");
  const int64_t T = gate_up.size(0), I = out.row_numel();
  require(gate_up.row_numel() == 2 * I && out.size(0) == T, op,
          "gate_up must be [T, 2I], out [T, I]");
  // torch's gelu(approximate="tanh"): 0.5·x·(1 + tanh(√2·(2/√π)·0.5·(x + 0.044715·x³))).
  const float kBeta = static_cast<float>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);  // √(2/π)
  const float kKappa = 0.044715f;
  pool.parallel_for(T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const auto* g = static_cast<const float*>(gate_up.row(t));
      const float* u = g + I;
      auto* o = static_cast<float*>(out.row(t));
      for (int64_t i = 0; i < I; ++i) {
        const float x = g[i], inner = kBeta * (x + kKappa * x * x * x);
        o[i] = 0.5f * x * (1.0f + std::tanh(inner)) * u[i];
      }
    }
  }, 1, static_cast<double>(24 * I));
}

void scale(ThreadPool& pool, Tensor& x, float factor) {
  require_dtype(x, DType::F32, "scale", "x");
  const int64_t n = x.row_numel();
  pool.parallel_for(x.size(0), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      auto* r = static_cast<float*>(x.row(t));
      for (int64_t i = 0; i < n; ++i) r[i] *= factor;
    }
  }, 1, static_cast<double>(n));
}

void softcap(ThreadPool& pool, Tensor& x, float cap) {
  require_dtype(x, DType::F32, "softcap", "x");
  require(cap > 0.0f, "softcap", "cap must be positive");
  const int64_t n = x.row_numel();
  pool.parallel_for(x.size(0), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      auto* r = static_cast<float*>(x.row(t));
      for (int64_t i = 0; i < n; ++i) r[i] = std::tanh(r[i] / cap) * cap;  // transformers' order
    }
  }, 1, static_cast<double>(20 * n));
}

void add(ThreadPool& pool, const Tensor& a, const Tensor& b, Tensor& out) {
  const char* op = "add";
  require_dtype(a, DType::F32, op, "a");
  require_dtype(b, DType::F32, op, "b");
  require_dtype(out, DType::F32, op, "out");
  const int64_t T = a.size(0), n = a.row_numel();
  require(b.size(0) == T && b.row_numel() == n && out.size(0) == T && out.row_numel() == n, op,
          "a, b and out must have the same shape");
  pool.parallel_for(T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const auto* ai = static_cast<const float*>(a.row(t));
      const auto* bi = static_cast<const float*>(b.row(t));
      auto* oi = static_cast<float*>(out.row(t));
      for (int64_t i = 0; i < n; ++i) oi[i] = ai[i] + bi[i];
    }
  }, 1, static_cast<double>(3 * n));
}

void add_bias(ThreadPool& pool, Tensor& x, const Tensor& bias) {
  const char* op = "add_bias";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(bias, DType::F32, op, "bias");
  const int64_t n = x.row_numel();
  require(bias.numel() == n, op, "bias must have one value per column of x");
  const float* bv = bias.ptr<const float>();
  pool.parallel_for(x.size(0), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      auto* row = static_cast<float*>(x.row(t));
      for (int64_t i = 0; i < n; ++i) row[i] += bv[i];
    }
  }, 1, static_cast<double>(2 * n));
}

void sigmoid_gate(ThreadPool& pool, const Tensor& a, const Tensor& gate, Tensor& out) {
  const char* op = "sigmoid_gate";
  require_dtype(a, DType::F32, op, "a");
  require_dtype(gate, DType::F32, op, "gate");
  require_dtype(out, DType::F32, op, "out");
  const int64_t T = a.size(0), n = a.row_numel();
  require(gate.size(0) == T && gate.row_numel() == n && out.size(0) == T && out.row_numel() == n,
          op, "a, gate and out must have the same shape");
  pool.parallel_for(T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const auto* ai = static_cast<const float*>(a.row(t));
      const auto* gi = static_cast<const float*>(gate.row(t));
      auto* oi = static_cast<float*>(out.row(t));
      for (int64_t i = 0; i < n; ++i) oi[i] = ai[i] / (1.0f + std::exp(-gi[i]));
    }
  }, 1, static_cast<double>(12 * n));
}

void gather_rows(ThreadPool& pool, const Tensor& x, const Tensor& rows, Tensor& out) {
  const char* op = "gather_rows";
  require(rows.dtype == DType::I32 || rows.dtype == DType::I64, op, "rows must be I32 or I64");
  const int64_t n = rows.numel(), width = x.row_numel(), R = x.size(0);
  require(out.size(0) == n && out.row_numel() == width, op, "out must be [rows, x row]");
  require(x.dtype == out.dtype || (is_float_dtype(x.dtype) && is_float_dtype(out.dtype)), op,
          "x and out must both be float types or the same type");
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = index_at(rows, i);
    require(r >= 0 && r < R, op, "row index out of range");
  }
  pool.parallel_for(n, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(width));
    for (int64_t i = begin; i < end; ++i)
      copy_row(x.row(index_at(rows, i)), x.dtype, out.row(i), out.dtype, width, scratch.data());
  }, 1, static_cast<double>(2 * width));
}

void argmax_rows(ThreadPool& pool, const Tensor& logits, Tensor& out) {
  const char* op = "argmax_rows";
  require_dtype(logits, DType::F32, op, "logits");
  require_dtype(out, DType::I32, op, "out");
  const int64_t n = logits.ndim ? logits.size(0) : 0, width = logits.row_numel();
  require(logits.ndim == 2 && out.numel() == n && width > 0, op, "logits must be [R, V], out [R]");
  auto* o = out.ptr<int32_t>();
  pool.parallel_for(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const auto* r = static_cast<const float*>(logits.row(i));
      int64_t best = 0;
      for (int64_t j = 1; j < width; ++j)
        if (r[j] > r[best] || (std::isnan(r[best]) && !std::isnan(r[j]))) best = j;
      o[i] = static_cast<int32_t>(best);
    }
  }, 1, static_cast<double>(2 * width));
}

void apply_token_mask(ThreadPool& pool, Tensor& logits, const Tensor& mask, const Tensor& rows) {
  const char* op = "apply_token_mask";
  require_dtype(logits, DType::F32, op, "logits");
  require_dtype(mask, DType::I32, op, "mask");
  require_dtype(rows, DType::I32, op, "rows");
  const int64_t R = logits.ndim ? logits.size(0) : 0, V = logits.row_numel(), M = rows.numel();
  require(logits.ndim == 2 && mask.ndim == 2 && mask.is_contiguous(), op, "logits must be [R, V], mask [M, W]");
  require(mask.size(0) == M && mask.size(1) * 32 >= V, op, "mask must be [M, >= ceil(V / 32)] for rows [M]");
  for (int64_t m = 0; m < M; ++m) {
    const int64_t r = index_at(rows, m);
    require(r >= 0 && r < R, op, "row index out of range");
  }
  const int64_t W = mask.size(1);
  pool.parallel_for(M, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      auto* row = static_cast<float*>(logits.row(index_at(rows, m)));
      const auto* bits = mask.ptr<uint32_t>() + m * W;
      constexpr float kOff = -std::numeric_limits<float>::infinity();
      // A word at a time: a grammar's mask is mostly whole words off (or on).
      for (int64_t w = 0; w * 32 < V; ++w) {
        const int64_t base = w * 32, n = std::min<int64_t>(32, V - base);
        const uint32_t off = ~bits[w] & (n == 32 ? ~0u : (1u << n) - 1u);
        if (off == 0) continue;
        if (n == 32 && off == ~0u) {
          std::fill(row + base, row + base + 32, kOff);
          continue;
        }
        for (uint32_t z = off; z != 0; z &= z - 1) row[base + __builtin_ctz(z)] = kOff;
      }
    }
  }, 1, static_cast<double>(V));
}

void convert_tensor(ThreadPool& pool, const Tensor& src, Tensor& dst) {
  const char* op = "upload_convert";
  require(src.numel() == dst.numel(), op, "element counts differ");
  require(src.dtype == dst.dtype || (is_float_dtype(src.dtype) && is_float_dtype(dst.dtype)), op,
          "only float types convert into one another");
  if (src.numel() == 0) return;
  if (src.is_contiguous() && dst.is_contiguous()) {
    // Flat: split the elements into cache-friendly pieces.
    constexpr int64_t kPiece = 16384;
    const int64_t n = src.numel(), pieces = (n + kPiece - 1) / kPiece;
    const size_t ss = dtype_size(src.dtype), ds = dtype_size(dst.dtype);
    pool.parallel_for(pieces, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> scratch;
      scratch.resize(kPiece);
      for (int64_t p = begin; p < end; ++p) {
        const int64_t e0 = p * kPiece, m = std::min(kPiece, n - e0);
        copy_row(static_cast<const char*>(src.data) + static_cast<size_t>(e0) * ss, src.dtype,
                 static_cast<char*>(dst.data) + static_cast<size_t>(e0) * ds, dst.dtype, m,
                 scratch.data());
      }
    }, 1, static_cast<double>(2 * kPiece));
    return;
  }
  require(src.size(0) == dst.size(0), op, "strided tensors must agree on dim 0");
  const int64_t width = src.row_numel();
  pool.parallel_for(src.size(0), [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(width));
    for (int64_t r = begin; r < end; ++r)
      copy_row(src.row(r), src.dtype, dst.row(r), dst.dtype, width, scratch.data());
  }, 1, static_cast<double>(2 * width));
}

}  // namespace pagoda::cpu

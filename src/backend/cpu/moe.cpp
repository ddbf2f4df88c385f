// Mixture-of-experts ops of the CPU backend (backend.h, "mixture of experts"): routing, the
// permutation into expert-contiguous rows, the grouped linear (each expert's rows one GEMM through
// linear()), and the weighted un-permute. Exact fp32: the reference the other backends meet.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"

namespace pagoda::cpu {

namespace {

// Whether expert a (probability pa) ranks before expert b: higher probability first, the lower id
// on equal ones, NaN after every number.
bool ranks_before(float pa, int32_t a, float pb, int32_t b) {
  if (std::isnan(pa) != std::isnan(pb)) return std::isnan(pb);
  if (pa != pb && !std::isnan(pa)) return pa > pb;
  return a < b;
}

}  // namespace

void moe_route(ThreadPool& pool, const Tensor& logits, bool renormalize, Tensor& expert_ids,
               Tensor& weights) {
  const char* op = "moe_route";
  require(logits.ndim == 2 && is_float_dtype(logits.dtype), op, "logits must be a float [T, E] matrix");
  require_dtype(expert_ids, DType::I32, op, "expert_ids");
  require_dtype(weights, DType::F32, op, "weights");
  const int64_t T = logits.size(0), E = logits.size(1), k = expert_ids.row_numel();
  require(expert_ids.size(0) == T && weights.size(0) == T && weights.row_numel() == k, op,
          "expert_ids and weights must be [T, k]");
  require(k >= 1 && k <= E, op, "top-k must lie in [1, E]");
  pool.parallel_for(T, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(E));
    std::vector<int32_t> order(static_cast<size_t>(E));
    for (int64_t t = begin; t < end; ++t) {
      load_row(logits.row(t), logits.dtype, p.data(), E);
      float mx = -INFINITY;
      for (float v : p) mx = std::max(mx, v);  // NaN never raises the max
      float sum = 0.0f;
      for (float& v : p) sum += (v = std::exp(v - mx));
      for (float& v : p) v /= sum;
      for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return ranks_before(p[static_cast<size_t>(a)], a, p[static_cast<size_t>(b)], b);
      });
      auto* ids = static_cast<int32_t*>(expert_ids.row(t));
      auto* w = static_cast<float*>(weights.row(t));
      float top = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        ids[j] = order[static_cast<size_t>(j)];
        w[j] = p[static_cast<size_t>(ids[j])];
        top += w[j];
      }
      if (renormalize)
        for (int64_t j = 0; j < k; ++j) w[j] /= top;
    }
  }, 1, static_cast<double>(8 * E));
}

void moe_permute(ThreadPool& pool, const Tensor& x, const Tensor& expert_ids, Tensor& expert_offsets,
                 Tensor& sorted_slots, Tensor& slot_rows, Tensor& x_sorted) {
  const char* op = "moe_permute";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(x_sorted, DType::F32, op, "x_sorted");
  for (const Tensor* t : {&expert_ids, static_cast<const Tensor*>(&expert_offsets), static_cast<const Tensor*>(&sorted_slots),
                          static_cast<const Tensor*>(&slot_rows)})
    require_dtype(*t, DType::I32, op, "routing index");
  const int64_t T = expert_ids.size(0), k = expert_ids.row_numel(), R = T * k;
  const int64_t E = expert_offsets.numel() - 1, H = x.row_numel();
  require(x.size(0) == T && E >= 1, op, "x must be [T, H] and expert_offsets [E + 1]");
  require(sorted_slots.numel() == R && slot_rows.numel() == R, op, "sorted_slots and slot_rows must hold T·k");
  require(x_sorted.size(0) == R && x_sorted.row_numel() == H, op, "x_sorted must be [T·k, H]");
  require(expert_ids.is_contiguous(), op, "expert_ids must be contiguous");
  const auto* ids = expert_ids.ptr<const int32_t>();
  auto* off = expert_offsets.ptr<int32_t>();
  auto* sorted = sorted_slots.ptr<int32_t>();
  auto* rows = slot_rows.ptr<int32_t>();
  // Counting sort, stable by slot: one pass to count, a prefix sum, one pass to place.
  std::vector<int32_t> next(static_cast<size_t>(E) + 1, 0);
  for (int64_t s = 0; s < R; ++s) {
    require(ids[s] >= 0 && ids[s] < E, op, ("expert id " + std::to_string(ids[s]) + " outside [0, E)").c_str());
    ++next[static_cast<size_t>(ids[s]) + 1];
  }
  for (int64_t e = 0; e < E; ++e) next[static_cast<size_t>(e) + 1] += next[static_cast<size_t>(e)];
  std::memcpy(off, next.data(), next.size() * sizeof(int32_t));
  for (int64_t s = 0; s < R; ++s) {
    const int32_t r = next[static_cast<size_t>(ids[s])]++;
    sorted[r] = static_cast<int32_t>(s);
    rows[s] = r;
  }
  pool.parallel_for(R, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      std::memcpy(x_sorted.row(r), x.row(sorted[r] / k), static_cast<size_t>(H) * sizeof(float));
  }, 1, static_cast<double>(2 * H));
}

void moe_grouped_linear(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor& expert_offsets,
                        Tensor& out) {
  const char* op = "moe_grouped_linear";
  require(w.ndim == 3 && is_float_dtype(w.dtype) && w.is_contiguous(), op,
          "w must be a contiguous float [E, N, K] tensor");
  require_dtype(expert_offsets, DType::I32, op, "expert_offsets");
  const int64_t E = w.size(0), N = w.size(1), K = w.size(2), R = x.size(0);
  require(expert_offsets.numel() == E + 1, op, "expert_offsets must be [E + 1]");
  require(x.row_numel() == K && out.size(0) == R && out.row_numel() == N, op, "x must be [R, K], out [R, N]");
  const auto* off = expert_offsets.ptr<const int32_t>();
  require(off[0] >= 0 && off[E] <= R, op, "expert_offsets must lie within [0, R]");
  const size_t expert_bytes = static_cast<size_t>(N * K) * dtype_size(w.dtype);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t begin = off[e], end = off[e + 1];
    require(begin <= end, op, "expert_offsets must not decrease");
    if (begin == end) continue;
    Tensor we(static_cast<char*>(w.data) + static_cast<size_t>(e) * expert_bytes, w.dtype, w.device, {N, K});
    Tensor o = out.rows(begin, end);
    linear(pool, x.rows(begin, end), we, o);
  }
}

void moe_unpermute(ThreadPool& pool, const Tensor& y, const Tensor& weights, const Tensor& slot_rows,
                   const Tensor& shared, const Tensor& shared_gate, Tensor& out) {
  const char* op = "moe_unpermute";
  require_dtype(y, DType::F32, op, "y");
  require_dtype(out, DType::F32, op, "out");
  require_dtype(weights, DType::F32, op, "weights");
  require_dtype(slot_rows, DType::I32, op, "slot_rows");
  const int64_t T = out.size(0), H = out.row_numel(), k = weights.row_numel(), R = y.size(0);
  require(weights.size(0) == T && slot_rows.numel() == T * k && y.row_numel() == H, op,
          "weights must be [T, k], slot_rows [T·k], y [R, H]");
  require(shared.empty() || (shared.dtype == DType::F32 && shared.size(0) == T && shared.row_numel() == H), op,
          "shared must be F32 [T, H]");
  require(shared_gate.empty() || (shared_gate.dtype == DType::F32 && shared_gate.size(0) == T), op,
          "shared_gate must be F32 [T, 1]");
  require(slot_rows.is_contiguous() && weights.is_contiguous(), op, "weights and slot_rows must be contiguous");
  const auto* rows = slot_rows.ptr<const int32_t>();
  const auto* wts = weights.ptr<const float>();
  for (int64_t s = 0; s < T * k; ++s) require(rows[s] >= 0 && rows[s] < R, op, "slot_rows outside [0, R)");
  pool.parallel_for(T, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      auto* o = static_cast<float*>(out.row(t));
      std::fill(o, o + H, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const float wj = wts[t * k + j];
        const auto* yr = static_cast<const float*>(y.row(rows[t * k + j]));
        for (int64_t h = 0; h < H; ++h) o[h] += wj * yr[h];
      }
      if (shared.empty()) continue;
      const float g = shared_gate.empty()
                          ? 1.0f
                          : 1.0f / (1.0f + std::exp(-*static_cast<const float*>(shared_gate.row(t))));
      const auto* sr = static_cast<const float*>(shared.row(t));
      for (int64_t h = 0; h < H; ++h) o[h] += g * sr[h];
    }
  }, 1, static_cast<double>(2 * (k + 1) * H));
}

}  // namespace pagoda::cpu

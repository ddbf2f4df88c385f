// Naive references of the mixture-of-experts ops (backend.h, "mixture of experts"), written from the
// contract and transformers' Qwen3MoeSparseMoeBlock / Qwen3_5MoeSparseMoeBlock: softmax in double,
// top-k by a full sort, the permutation by scanning every slot once per expert, one matrix product
// per row with its expert's weights, the weighted sum in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "op_table_naive.h"

namespace pagoda::naive {

inline Outputs moe_route(const OpData& in) {
  const HostTensor& l = in.at("logits");
  const int64_t t = l.shape[0], e = l.shape[1], k = in.at("expert_ids").shape[1];
  const bool renorm = in.param("renormalize") != 0;
  std::vector<double> ids, weights;
  for (int64_t r = 0; r < t; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < e; ++j) mx = std::max(mx, double(l.at(r * e + j)));
    std::vector<double> p(static_cast<size_t>(e));
    for (int64_t j = 0; j < e; ++j) sum += p[static_cast<size_t>(j)] = std::exp(l.at(r * e + j) - mx);
    for (double& v : p) v /= sum;
    std::vector<int64_t> order(static_cast<size_t>(e));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double top = 0;
    for (int64_t j = 0; j < k; ++j) top += p[static_cast<size_t>(order[static_cast<size_t>(j)])];
    for (int64_t j = 0; j < k; ++j) {
      const int64_t id = order[static_cast<size_t>(j)];
      ids.push_back(static_cast<double>(id));
      weights.push_back(p[static_cast<size_t>(id)] / (renorm ? top : 1.0));
    }
  }
  return {{"expert_ids", ids}, {"weights", weights}};
}

inline Outputs moe_permute(const OpData& in) {
  const HostTensor &x = in.at("x"), &ids = in.at("expert_ids");
  const int64_t k = ids.shape[1], r = static_cast<int64_t>(ids.i.size()), h = x.shape[1];
  const int64_t e = in.at("expert_offsets").shape[0] - 1;
  std::vector<double> offsets{0}, sorted, rows(static_cast<size_t>(r)), xs;
  for (int64_t ex = 0; ex < e; ++ex) {
    for (int64_t s = 0; s < r; ++s) {
      if (ids.i[static_cast<size_t>(s)] != ex) continue;
      rows[static_cast<size_t>(s)] = static_cast<double>(sorted.size());
      sorted.push_back(static_cast<double>(s));
      for (int64_t j = 0; j < h; ++j) xs.push_back(x.at((s / k) * h + j));
    }
    offsets.push_back(static_cast<double>(sorted.size()));
  }
  return {{"expert_offsets", offsets}, {"sorted_slots", sorted}, {"slot_rows", rows}, {"x_sorted", xs}};
}

inline Outputs moe_grouped_linear(const OpData& in) {
  const HostTensor &x = in.at("x"), &w = in.at("w"), &off = in.at("expert_offsets"), &o = in.at("out");
  const int64_t n = w.shape[1], k = w.shape[2], e = w.shape[0];
  std::vector<double> out = values(o);  // rows past the experts keep their values
  for (int64_t ex = 0; ex < e; ++ex)
    for (int64_t r = off.i[static_cast<size_t>(ex)]; r < off.i[static_cast<size_t>(ex) + 1]; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < k; ++i) acc += double(x.at(r * k + i)) * w.at((ex * n + j) * k + i);
        out[static_cast<size_t>(r * n + j)] = rnd(acc, o.dtype);
      }
  return {{"out", out}};
}

inline Outputs moe_unpermute(const OpData& in) {
  const HostTensor &y = in.at("y"), &w = in.at("weights"), &rows = in.at("slot_rows"), &o = in.at("out");
  const int64_t t = o.shape[0], h = o.shape[1], k = w.shape[1];
  const bool has_shared = in.t.count("shared") > 0, has_gate = in.t.count("router_gate") > 0;
  const int64_t gate_cols = static_cast<int64_t>(in.param("experts")) + 1;
  std::vector<double> out;
  for (int64_t r = 0; r < t; ++r) {
    const double g = has_gate ? sigmoid(in.at("router_gate").at(r * gate_cols + gate_cols - 1)) : 1.0;
    for (int64_t j = 0; j < h; ++j) {
      double acc = 0;
      for (int64_t s = 0; s < k; ++s) acc += double(w.at(r * k + s)) * y.at(rows.i[static_cast<size_t>(r * k + s)] * h + j);
      if (has_shared) acc += g * in.at("shared").at(r * h + j);
      out.push_back(rnd(acc, o.dtype));
    }
  }
  return {{"out", out}};
}

// out[t, n] += Σ_r b[s, n, r] · low[t, s·R + r] for s = slots[t] ≥ 0; other rows keep their values.
inline Outputs lora_expand(const OpData& in) {
  const HostTensor &low = in.at("low"), &b = in.at("b"), &slots = in.at("slots"), &o = in.at("out");
  const int64_t s_count = b.shape[0], n = b.shape[1], r = b.shape[2], t = o.shape[0];
  std::vector<double> out = values(o);
  for (int64_t row = 0; row < t; ++row) {
    const int64_t s = slots.i[static_cast<size_t>(row)];
    if (s < 0) continue;
    for (int64_t j = 0; j < n; ++j) {
      double acc = o.at(row * n + j);
      for (int64_t i = 0; i < r; ++i) acc += double(b.at((s * n + j) * r + i)) * low.at(row * s_count * r + s * r + i);
      out[static_cast<size_t>(row * n + j)] = rnd(acc, o.dtype);
    }
  }
  return {{"out", out}};
}

}  // namespace pagoda::naive

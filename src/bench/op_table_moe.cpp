// Op table test cases of the mixture-of-experts ops: moe_route (top-k 1/2/8, E up to 256, with and
// without renormalisation, exact ties, a strided view of a fused projection), moe_permute (ragged
// counts, experts that get no token, E up to 256), moe_grouped_linear (ragged and empty experts, one
// expert holding every row, rows past the last expert left alone) and moe_unpermute (with and
// without the gated shared expert).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>

#include "bench/op_table.h"

namespace pagoda::optable {
namespace {

HostTensor zeros(DType dt, std::vector<int64_t> shape) {
  HostTensor h;
  h.dtype = dt;
  h.shape = std::move(shape);
  if (dt == DType::I32)
    h.i.assign(static_cast<size_t>(h.numel()), 0);
  else
    h.f.assign(static_cast<size_t>(h.numel()), 0.0f);
  return h;
}

// Router choices of T tokens: k distinct experts each, drawn with a skew (low ids far more often)
// so that counts are ragged and some experts get nothing.
std::vector<int32_t> routed_ids(int64_t t, int64_t e, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < t; ++r) {
    std::vector<int32_t> chosen;
    while (static_cast<int64_t>(chosen.size()) < k) {
      const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
      const auto id = static_cast<int32_t>(std::min<double>(static_cast<double>(e) - 1, u * u * u * static_cast<double>(e)));
      const bool taken = std::find(chosen.begin(), chosen.end(), id) != chosen.end();
      if (!taken) chosen.push_back(id);
      else if (static_cast<int64_t>(chosen.size()) + 1 == e || rng() % 4 == 0) {
        // Dense fallback so that k close to E terminates quickly: the lowest id not taken.
        for (int32_t c = 0; c < e; ++c)
          if (std::find(chosen.begin(), chosen.end(), c) == chosen.end()) {
            chosen.push_back(c);
            break;
          }
      }
    }
    ids.insert(ids.end(), chosen.begin(), chosen.end());
  }
  return ids;
}

// Expert offsets of given per-expert row counts.
std::vector<int32_t> offsets_of(const std::vector<int32_t>& counts) {
  std::vector<int32_t> off(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), off.begin() + 1);
  return off;
}

std::string counts_label(const std::vector<int32_t>& counts) {
  int32_t zero = 0, most = 0;
  for (int32_t c : counts) zero += c == 0, most = std::max(most, c);
  return std::to_string(zero) + " of E=" + std::to_string(counts.size()) + " empty, max " + std::to_string(most);
}

void add_route(std::vector<OpCase>& out) {
  struct Spec { int64_t t, e, k; bool renorm; int64_t pad; };
  uint32_t seed = 6000;
  for (const Spec& s : {Spec{7, 8, 2, true, 0}, Spec{5, 256, 8, true, 1}, Spec{9, 16, 1, false, 0},
                        Spec{4, 64, 8, false, 3}, Spec{3, 128, 2, true, 0}, Spec{6, 8, 8, true, 0}}) {
    OpCase c;
    c.op = "moe_route";
    c.label = "T=" + std::to_string(s.t) + " E=" + std::to_string(s.e) + " k=" + std::to_string(s.k) +
              (s.renorm ? " renormalised" : " raw") + (s.pad ? " strided" : "");
    const uint32_t sd = seed++;
    c.make = [s, sd](DType act) {
      // Logits on a grid of 1/16 that every activation dtype holds exactly: a permutation of
      // distinct values (probabilities at least e^(1/16) apart, robust to any exp), then a row of
      // exact ties and a row with ties among the leaders (the lower id must win).
      std::mt19937 rng(sd);
      HostTensor l = zeros(act, {s.t, s.e});
      l.row_pad = s.pad;
      for (int64_t r = 0; r < s.t; ++r) {
        std::vector<int32_t> perm(static_cast<size_t>(s.e));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int64_t e = 0; e < s.e; ++e) {
          float v = static_cast<float>(perm[static_cast<size_t>(e)] % 128 - 64) / 16.0f;
          if (r == 1) v = 0.5f;
          if (r == 2 && perm[static_cast<size_t>(e)] >= s.e - 3) v = 4.5f;
          l.f[static_cast<size_t>(r * s.e + e)] = v;
        }
      }
      OpData d;
      d.t["logits"] = l;
      d.t["expert_ids"] = zeros(DType::I32, {s.t, s.k});
      d.t["weights"] = zeros(DType::F32, {s.t, s.k});
      d.p["renormalize"] = s.renorm ? 1.0 : 0.0;
      return d;
    };
    c.run = [renorm = s.renorm](Backend& be, DeviceData& d, int) {
      be.moe_route(d.t("logits"), renorm, d.t("expert_ids"), d.t("weights"));
    };
    c.outputs = {"expert_ids", "weights"};
    c.tol = [](DType, const std::string& name) { return name == "expert_ids" ? Tol{0, 0} : Tol{1e-7, 2e-6}; };
    out.push_back(std::move(c));
  }
}

void add_permute(std::vector<OpCase>& out) {
  struct Spec { int64_t t, e, k, h; int64_t pad; };
  uint32_t seed = 6100;
  for (const Spec& s : {Spec{9, 8, 2, 24, 0}, Spec{13, 256, 8, 16, 4}, Spec{1, 64, 8, 40, 0},
                        Spec{20, 16, 1, 8, 2}, Spec{33, 128, 2, 12, 0}}) {
    OpCase c;
    c.op = "moe_permute";
    c.label = "T=" + std::to_string(s.t) + " E=" + std::to_string(s.e) + " k=" + std::to_string(s.k) +
              " H=" + std::to_string(s.h) + (s.pad ? " x strided" : "");
    const uint32_t sd = seed++;
    c.make = [s, sd](DType act) {
      OpData d;
      const int64_t r = s.t * s.k;
      d.t["x"] = random_tensor(sd, act, {s.t, s.h}, -2.0f, 2.0f);
      d.t["x"].row_pad = s.pad;
      d.t["expert_ids"] = ints(routed_ids(s.t, s.e, s.k, sd + 1), {s.t, s.k});
      d.t["expert_offsets"] = zeros(DType::I32, {s.e + 1});
      d.t["sorted_slots"] = zeros(DType::I32, {r});
      d.t["slot_rows"] = zeros(DType::I32, {r});
      d.t["x_sorted"] = zeros(act, {r, s.h});
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) {
      be.moe_permute(d.t("x"), d.t("expert_ids"), d.t("expert_offsets"), d.t("sorted_slots"), d.t("slot_rows"),
                     d.t("x_sorted"));
    };
    c.outputs = {"expert_offsets", "sorted_slots", "slot_rows", "x_sorted"};
    c.tol = [](DType, const std::string&) { return Tol{0, 0}; };  // indices and copies
    out.push_back(std::move(c));
  }
}

void add_grouped_linear(std::vector<OpCase>& out) {
  // lead: rows before the first expert's (offsets starting above 0: one rank's window of a sort over
  // more experts, expert parallelism), left as they were like the rows past the experts.
  struct Spec { std::vector<int32_t> counts; int64_t n, k, extra_rows, pad, lead = 0; };
  // Ragged counts with empty experts (first and last among them), one expert with every row (a
  // prefill chunk that all went one way), decode-like single rows over many experts, K not a
  // multiple of 8, and the decode-sized shapes of the CUDA grouped GEMV.
  std::vector<int32_t> sparse256(256, 0);
  for (int i = 0; i < 256; i += 9) sparse256[static_cast<size_t>(i)] = 1 + (i % 3);
  const std::vector<Spec> specs = {
      {{0, 3, 1, 0, 7, 2, 0, 5}, 48, 64, 0, 0},
      {{0, 0, 70, 0}, 40, 32, 0, 8},
      {sparse256, 24, 16, 0, 0},
      {{1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1}, 64, 72, 0, 0},
      {{2, 0, 9, 4, 0}, 33, 37, 5, 0},
      // Decode-sized (the CUDA grouped GEMV): an expert over three 4-row chunks, N not a multiple
      // of its 4-row tiles, strided x, rows past the experts.
      {{5, 0, 1, 0, 12, 3}, 33, 40, 3, 8},
      // Expert parallelism: a window of experts over rows 7.. of a larger sort (GEMM and GEMV sizes).
      {{4, 0, 9, 3}, 48, 64, 5, 0, 7},
      {{1, 2, 0, 1}, 33, 40, 2, 8, 6},
  };
  uint32_t seed = 6200;
  for (const Spec& s : specs)
    for (DType wdt : {DType::F32, DType::BF16}) {
      OpCase c;
      c.op = "moe_grouped_linear";
      std::vector<int32_t> off = offsets_of(s.counts);
      for (int32_t& o : off) o += static_cast<int32_t>(s.lead);
      const int64_t e = static_cast<int64_t>(s.counts.size()), rows = off.back() + s.extra_rows;
      c.label = "R=" + std::to_string(rows) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) + " " +
                counts_label(s.counts) + " w " + dtype_name(wdt) +
                (s.extra_rows ? " +" + std::to_string(s.extra_rows) + " rows past the experts" : "") +
                (s.lead ? " from row " + std::to_string(s.lead) : "") +
                (s.pad ? " x strided" : "");
      const uint32_t sd = seed++;
      c.make = [=](DType act) {
        OpData d;
        d.t["x"] = random_tensor(sd, act, {rows, s.k});
        d.t["x"].row_pad = s.pad;
        d.t["w"] = random_tensor(sd + 1, wdt, {e, s.n, s.k});
        d.t["expert_offsets"] = ints(off, {e + 1});
        // Rows past the experts must keep what they held: start from values, not zeros.
        d.t["out"] = random_tensor(sd + 2, act, {rows, s.n});
        return d;
      };
      c.run = [](Backend& be, DeviceData& d, int) {
        be.moe_grouped_linear(d.t("x"), d.t("w"), d.t("expert_offsets"), d.t("out"));
      };
      c.outputs = {"out"};
      c.tol = tol_by_act({1e-5 * std::sqrt(double(s.k)), 1e-4}, {1e-2, 1.6e-2});
      out.push_back(std::move(c));
    }
}

void add_unpermute(std::vector<OpCase>& out) {
  struct Spec { int64_t t, e, k, h; bool shared, gate; };
  uint32_t seed = 6300;
  for (const Spec& s : {Spec{5, 8, 2, 32, false, false}, Spec{7, 256, 8, 24, true, true}, Spec{1, 64, 8, 64, true, true},
                        Spec{11, 16, 1, 16, true, false}, Spec{4, 128, 2, 40, false, false}}) {
    OpCase c;
    c.op = "moe_unpermute";
    c.label = "T=" + std::to_string(s.t) + " E=" + std::to_string(s.e) + " k=" + std::to_string(s.k) +
              " H=" + std::to_string(s.h) + (s.shared ? (s.gate ? " shared gated" : " shared ungated") : "");
    const uint32_t sd = seed++;
    c.make = [s, sd](DType act) {
      OpData d;
      const int64_t r = s.t * s.k;
      // slot_rows as moe_permute makes them: the stable sort of the slots by expert.
      const std::vector<int32_t> ids = routed_ids(s.t, s.e, s.k, sd);
      std::vector<int32_t> order(static_cast<size_t>(r)), rows(static_cast<size_t>(r));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return ids[a] < ids[b]; });
      for (int64_t i = 0; i < r; ++i) rows[static_cast<size_t>(order[static_cast<size_t>(i)])] = static_cast<int32_t>(i);
      d.t["y"] = random_tensor(sd + 1, act, {r, s.h}, -2.0f, 2.0f);
      d.t["weights"] = random_tensor(sd + 2, DType::F32, {s.t, s.k}, 0.0f, 1.0f);
      d.t["slot_rows"] = ints(rows, {r});
      if (s.shared) d.t["shared"] = random_tensor(sd + 3, act, {s.t, s.h}, -2.0f, 2.0f);
      if (s.gate) {
        // The gate logit is the last column of a fused router|gate projection: a strided view.
        d.t["router_gate"] = random_tensor(sd + 4, act, {s.t, s.e + 1}, -3.0f, 3.0f);
      }
      d.t["out"] = zeros(act, {s.t, s.h});
      d.p["experts"] = static_cast<double>(s.e);
      return d;
    };
    c.run = [s](Backend& be, DeviceData& d, int) {
      const Tensor shared = s.shared ? d.t("shared") : Tensor();
      const Tensor gate = s.gate ? d.t("router_gate").cols(s.e, s.e + 1) : Tensor();
      be.moe_unpermute(d.t("y"), d.t("weights"), d.t("slot_rows"), shared, gate, d.t("out"));
    };
    c.outputs = {"out"};
    c.tol = tol_by_act({1e-6, 1e-5}, {1e-2, 1.6e-2});
    out.push_back(std::move(c));
  }
}

// Perf: the grouped GEMMs of a Qwen3-30B-A3B layer (E 128, top 8, H 2048, moe_intermediate_size 768)
// with the routed rows spread evenly over the experts (decode: k experts of one row each).
void perf_grouped_linear(std::vector<OpCase>& out, int64_t t, bool down) {
  const int64_t e = 128, k = 8, h = 2048, i = 768, r = t * k;
  const int64_t n = down ? h : 2 * i, kk = down ? i : h;
  std::vector<int32_t> counts(static_cast<size_t>(e), 0);
  for (int64_t j = 0; j < r; ++j) ++counts[static_cast<size_t>((j * 37) % e)];
  const std::vector<int32_t> off = offsets_of(counts);
  const int64_t touched = std::count_if(counts.begin(), counts.end(), [](int32_t c) { return c > 0; });
  OpCase c;
  c.op = "moe_grouped_linear";
  c.label = down ? "30B-A3B down" : "30B-A3B gate_up";
  c.label += " T=" + std::to_string(t);
  c.label += " R=" + std::to_string(r);
  c.label += " " + std::to_string(n) + "x" + std::to_string(kk) + " x" + std::to_string(e);
  c.make = [=](DType act) {
    OpData d;
    for (auto [name, dt, shape] : {std::tuple<const char*, DType, std::vector<int64_t>>{"x", act, {r, kk}},
                                   {"w", act, {e, n, kk}}, {"out", act, {r, n}}}) {
      HostTensor hl;
      hl.dtype = dt;
      hl.shape = shape;
      hl.lazy = true;
      d.t[name] = hl;
    }
    d.t["expert_offsets"] = ints(off, {e + 1});
    return d;
  };
  c.run = [](Backend& be, DeviceData& d, int rep) {
    be.moe_grouped_linear(d.t("x"), d.t("w", rep), d.t("expert_offsets"), d.t("out"));
  };
  c.bytes = [=](DType act) {
    return static_cast<double>(touched * n * kk + r * kk + r * n) * static_cast<double>(dtype_size(act));
  };
  c.flops = [=](DType) { return 2.0 * static_cast<double>(r * n * kk); };
  c.rotate = {"w"};
  out.push_back(std::move(c));
}

}  // namespace

void add_moe_perf_cases(std::vector<OpCase>& out, bool quick) {
  for (int64_t t : quick ? std::vector<int64_t>{1, 512} : std::vector<int64_t>{1, 8, 64, 512, 2048})
    for (bool down : {false, true}) perf_grouped_linear(out, t, down);
}

void add_moe_cases(std::vector<OpCase>& out) {
  add_route(out);
  add_permute(out);
  add_grouped_linear(out);
  add_unpermute(out);
}

}  // namespace pagoda::optable

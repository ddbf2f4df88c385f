// Op table cases of lora_expand: rows of several slots and of the base model (-1) in one step, a
// slot holding every row, N not a multiple of the CUDA kernels' column blocks, each of their row
// tiles (1, 8, 32 and 64 rows a block), many slots, R a multiple of 8 and not, a wide R, strided
// outs, prefill-sized runs of one slot; the base model's rows must keep what they held. Perf cases
// at a Qwen3-8B shape.
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/op_table.h"

namespace pagoda::optable {
namespace {

// A prefill's slots: runs of `run` rows (a sequence's chunk), slot by slot, the base model's (-1) too.
std::vector<int32_t> slot_runs(int64_t t, int64_t s, int64_t run) {
  std::vector<int32_t> v(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) v[static_cast<size_t>(i)] = static_cast<int32_t>((i / run) % (s + 1)) - 1;
  return v;
}

std::vector<int32_t> random_slots(uint32_t seed, int64_t t, int64_t s, bool with_base) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(t));
  for (int32_t& x : v) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(s + (with_base ? 1 : 0))) - (with_base ? 1 : 0);
  return v;
}

OpCase expand_case(const std::string& label, int64_t t, int64_t s, int64_t n, int64_t r, DType wdt,
                   const std::vector<int32_t>& slots, int64_t pad, uint32_t seed) {
  OpCase c;
  c.op = "lora_expand";
  c.label = label + " T=" + std::to_string(t) + " S=" + std::to_string(s) + " N=" + std::to_string(n) +
            " R=" + std::to_string(r) + " b " + dtype_name(wdt) + (pad ? " out strided" : "");
  c.make = [=](DType act) {
    OpData d;
    d.t["low"] = random_tensor(seed, act, {t, s * r});
    d.t["b"] = random_tensor(seed + 1, wdt, {s, n, r}, -0.5f, 0.5f);
    d.t["slots"] = ints(slots, {t});
    d.t["out"] = random_tensor(seed + 2, act, {t, n});  // the base model's rows keep these
    d.t["out"].row_pad = pad;
    return d;
  };
  c.run = [](Backend& be, DeviceData& d, int) { be.lora_expand(d.t("low"), d.t("b"), d.t("slots"), d.t("out")); };
  c.outputs = {"out"};
  c.tol = tol_by_act({1e-5 * std::sqrt(double(r)), 1e-4}, {1e-2, 1.6e-2});
  // Vulkan has no shader for it (LoRA engines are refused at load there).
  c.unsupported = [wdt](Backend& be) {
    return be.supports(Op::LoraExpand, wdt) ? std::string()
                                            : "no lora_expand for " + std::string(dtype_name(wdt)) + " weights here";
  };
  return c;
}

}  // namespace

void add_lora_cases(std::vector<OpCase>& out) {
  uint32_t seed = 7100;
  for (DType wdt : {DType::F32, DType::BF16}) {
    out.push_back(expand_case("mixed", 7, 3, 40, 8, wdt, random_slots(seed, 7, 3, true), 0, seed + 10));
    out.push_back(expand_case("one slot", 33, 5, 130, 48, wdt, std::vector<int32_t>(33, 2), 3, seed + 20));
    out.push_back(expand_case("mixed", 300, 2, 64, 16, wdt, random_slots(seed + 1, 300, 2, true), 0, seed + 30));
    out.push_back(expand_case("R not a multiple of 8", 20, 4, 129, 6, wdt, random_slots(seed + 2, 20, 4, true), 0,
                              seed + 40));
    out.push_back(expand_case("base rows only", 5, 2, 16, 8, wdt, std::vector<int32_t>(5, -1), 0, seed + 50));
    out.push_back(expand_case("one row", 1, 8, 256, 32, wdt, {7}, 0, seed + 60));
    out.push_back(expand_case("wide", 9, 2, 70, 136, wdt, random_slots(seed + 3, 9, 2, true), 0, seed + 70));
    // Prefill-sized, runs of one slot (the CUDA tensor-core kernel's tiles of 16 rows, most of one
    // slot, some mixed at the runs' ends), N past its 256-column blocks.
    out.push_back(expand_case("runs of 40", 300, 3, 300, 32, wdt, slot_runs(300, 3, 40), 0, seed + 90));
    out.push_back(expand_case("runs of 64", 520, 2, 136, 48, wdt, slot_runs(520, 2, 64), 4, seed + 95));
    out.push_back(expand_case("wide", 40, 3, 33, 130, wdt, random_slots(seed + 4, 40, 3, true), 2, seed + 80));
    // Many slots over 64-row tiles (the CUDA tile kernel's slot loop), R = 24 (a half last step),
    // a strided out with an even stride.
    out.push_back(expand_case("many slots", 130, 40, 200, 24, wdt, random_slots(seed + 5, 130, 40, true), 2,
                              seed + 85));
    // Decode-sized, 8 slots of R = 32 (the CUDA tile kernel in two groups of slots).
    out.push_back(expand_case("decode", 64, 8, 192, 32, wdt, random_slots(seed + 6, 64, 8, true), 0, seed + 87));
    seed += 100;
  }
}

// Qwen3-8B's gate|up expand (N 24576, two parts of rank 16) at decode and prefill sizes, 8 slots,
// and its shrink.
void add_lora_perf_cases(std::vector<OpCase>& out) {
  const int64_t s = 8, n = 24576, r = 32;
  for (auto [t, mixed] : {std::pair<int64_t, bool>{1, false}, {64, false}, {64, true}, {2048, false}, {2048, true}}) {
    OpCase c;
    c.op = "lora_expand";
    c.label = "8B gate_up expand T=" + std::to_string(t) + " S=8 R=32 " + (mixed ? "8 adapters mixed" : "1 adapter");
    const std::vector<int32_t> slots = mixed ? random_slots(7900, t, s, false) : std::vector<int32_t>(size_t(t), 3);
    c.make = [=](DType act) {
      OpData d;
      for (auto [name, dt, shape] : {std::tuple<const char*, DType, std::vector<int64_t>>{"low", act, {t, s * r}},
                                     {"b", act, {s, n, r}}, {"out", act, {t, n}}}) {
        HostTensor h;
        h.dtype = dt;
        h.shape = shape;
        h.lazy = true;
        d.t[name] = h;
      }
      d.t["slots"] = ints(slots, {t});
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) { be.lora_expand(d.t("low"), d.t("b"), d.t("slots"), d.t("out")); };
    c.bytes = [=](DType act) { return static_cast<double>(s * n * r + t * s * r + 2 * t * n) * dtype_size(act); };
    c.flops = [=](DType) { return 2.0 * static_cast<double>(t * n * r); };
    out.push_back(std::move(c));
    if (mixed) continue;
    // Its shrink: x [T, 4096] by every slot's A ([8·32, 4096]), a plain linear.
    OpCase sh;
    sh.op = "linear";
    sh.label = "8B gate_up LoRA shrink T=" + std::to_string(t) + " " + std::to_string(s * r) + "x4096";
    sh.make = [=](DType act) {
      OpData d;
      for (auto [name, shape] : {std::pair<const char*, std::vector<int64_t>>{"x", {t, 4096}}, {"w", {s * r, 4096}},
                                 {"out", {t, s * r}}}) {
        HostTensor h;
        h.dtype = act;
        h.shape = shape;
        h.lazy = true;
        d.t[name] = h;
      }
      return d;
    };
    sh.run = [](Backend& be, DeviceData& d, int) { be.linear(d.t("x"), d.t("w"), d.t("out")); };
    sh.bytes = [=](DType act) { return static_cast<double>(s * r * 4096 + t * 4096 + t * s * r) * dtype_size(act); };
    sh.flops = [=](DType) { return 2.0 * static_cast<double>(t * s * r * 4096); };
    out.push_back(std::move(sh));
  }
}

}  // namespace pagoda::optable

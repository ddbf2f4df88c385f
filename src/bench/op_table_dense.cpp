// Op table test cases of the row-wise and matrix ops: embedding, rms_norm, add_rms_norm, linear,
// silu_mul, gelu_tanh_mul, scale, softcap, linear_silu_mul, gather_rows, sigmoid_gate, add,
// add_bias, argmax_rows, apply_token_mask.
#include <algorithm>
#include <cmath>
#include <random>

#include "bench/op_table.h"

namespace pagoda::optable {

std::function<Tol(DType, const std::string&)> tol_by_act(Tol f32, Tol bf16) {
  return [=](DType act, const std::string&) { return act == DType::F32 ? f32 : bf16; };
}

std::function<std::string(Backend&)> not_on_cuda(std::string why) {
  return [why](Backend& be) { return be.device() == Device::CUDA ? why : std::string(); };
}

namespace {

// bf16 activations against a double formula on the same inputs: one or two roundings of the result.
constexpr Tol kBf16{1e-2, 1.6e-2};
constexpr Tol kExactF32{0, 0};
constexpr Tol kRoundBf16{0, 8e-3};  // one rounding to bf16 (half an ulp is 2^-9 relative)

std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t v : d) {
    if (!s.empty()) s += 'x';
    s += std::to_string(v);
  }
  return s;
}

HostTensor zeros(DType dtype, std::vector<int64_t> shape) {
  HostTensor h;
  h.dtype = dtype;
  h.shape = std::move(shape);
  if (dtype == DType::I32)
    h.i.assign(static_cast<size_t>(h.numel()), -1);
  else
    h.f.assign(static_cast<size_t>(h.numel()), 0.0f);
  return h;
}

void add_embedding(std::vector<OpCase>& out) {
  for (DType table_dt : {DType::F32, DType::BF16})
    for (auto [v, h, t] : {std::tuple{37, 24, 9}, std::tuple{300, 136, 5}}) {
      OpCase c;
      c.op = "embedding";
      c.label = "V=" + std::to_string(v) + " H=" + std::to_string(h) + " T=" + std::to_string(t) + " table " +
                dtype_name(table_dt);
      c.make = [=](DType act) {
        OpData d;
        d.t["table"] = random_tensor(11 + v, table_dt, {v, h});
        std::mt19937 rng(v + t);
        std::vector<int32_t> ids{0, v - 1};  // the first and the last row
        while (static_cast<int>(ids.size()) < t) ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(v)));
        d.t["ids"] = ints(ids);
        d.t["out"] = zeros(act, {t, h});
        return d;
      };
      c.run = [](Backend& be, DeviceData& d, int) { be.embedding(d.t("table"), d.t("ids"), d.t("out")); };
      c.outputs = {"out"};
      c.tol = tol_by_act(kExactF32, kRoundBf16);
      out.push_back(std::move(c));
    }
}

void add_norms(std::vector<OpCase>& out) {
  struct Shape { int64_t t, h, pad; DType w; bool zc; };
  for (const Shape& s : {Shape{5, 64, 0, DType::F32, false}, Shape{3, 1000, 0, DType::BF16, true},
                         Shape{7, 100, 3, DType::F32, true}, Shape{1, 4096, 0, DType::BF16, false}}) {
    const std::string label = "T=" + std::to_string(s.t) + " H=" + std::to_string(s.h) + " w " + dtype_name(s.w) +
                              (s.zc ? " zero-centred" : "") + (s.pad ? " strided x" : "");
    auto inputs = [s](DType act) {
      OpData d;
      d.t["x"] = random_tensor(static_cast<uint32_t>(s.t * 31 + s.h), act, {s.t, s.h}, -2.0f, 2.0f);
      d.t["x"].row_pad = s.pad;
      d.t["w"] = random_tensor(static_cast<uint32_t>(s.h), s.w, {s.h}, s.zc ? -0.5f : 0.5f, 1.5f);
      d.t["out"] = zeros(act, {s.t, s.h});
      d.p["eps"] = 1e-6;
      d.p["zero_centered"] = s.zc;
      return d;
    };
    OpCase c;
    c.op = "rms_norm";
    c.label = label;
    c.make = inputs;
    c.run = [s](Backend& be, DeviceData& d, int) { be.rms_norm(d.t("x"), d.t("w"), d.t("out"), 1e-6f, s.zc); };
    c.outputs = {"out"};
    c.tol = tol_by_act({1e-5, 1e-5}, kBf16);
    out.push_back(c);

    c.op = "add_rms_norm";
    c.make = [inputs, s](DType act) {
      OpData d = inputs(act);
      d.t["residual"] = random_tensor(static_cast<uint32_t>(s.h + 5), act, {s.t, s.h}, -2.0f, 2.0f);
      return d;
    };
    c.run = [s](Backend& be, DeviceData& d, int) {
      be.add_rms_norm(d.t("residual"), d.t("x"), d.t("w"), d.t("out"), 1e-6f, s.zc);
    };
    c.outputs = {"residual", "out"};
    out.push_back(std::move(c));
  }
}

void add_linear_fp8(std::vector<OpCase>& out) {
  // Block scales with partial last blocks, per-channel (block 1 x K) and per-tensor (N x K); T from
  // decode to past CUDA's skinny-GEMM limit (its dequantize-and-GEMM path); K not a multiple of 16
  // (no skinny GEMM on CUDA either). Per-channel with T > 8 and K, N multiples of 16 is CUDA's FP8
  // tensor-core path, which quantizes x per token: there x lies on that grid (e4m3 codes times
  // 2^-9, every row reaching 448 · 2^-9), so every path has the same exact answer to compare.
  struct Shape { int64_t t, n, k, bn, bk; };
  const Shape shapes[] = {{1, 40, 64, 16, 32},  {3, 72, 136, 1, 136}, {8, 33, 256, 128, 128}, {9, 64, 96, 32, 32},
                          {2, 48, 64, 48, 64},  {37, 50, 128, 16, 16}, {1, 24, 40, 8, 8},     {16, 64, 128, 1, 128},
                          {40, 48, 256, 1, 256}};
  for (const Shape& s : shapes)
    for (bool f32_out : {false, true}) {
      if (f32_out && s.t > 3) continue;
      OpCase c;
      c.op = "linear_fp8";
      c.label = "T=" + std::to_string(s.t) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) + " block " +
                std::to_string(s.bn) + "x" + std::to_string(s.bk) + (f32_out ? " out f32" : "");
      c.make = [=](DType act) {
        OpData d;
        d.t["x"] = random_tensor(static_cast<uint32_t>(s.t + s.k), act, {s.t, s.k});
        if (s.bn == 1 && s.t > 8) {
          HostTensor g = random_tensor(static_cast<uint32_t>(s.t * 7 + s.k), DType::F8_E4M3, {s.t, s.k}, -448.0f, 448.0f);
          for (int64_t r = 0; r < s.t; ++r) g.f[static_cast<size_t>(r * s.k + r % s.k)] = r % 2 ? 448.0f : -448.0f;
          for (float& v : g.f) v = std::ldexp(v, -9);
          g.dtype = act;
          d.t["x"] = g;
        }
        // e4m3 values over most of its range (±448), as a quantizer leaves them.
        d.t["w"] = random_tensor(static_cast<uint32_t>(s.n * 5 + s.k), DType::F8_E4M3, {s.n, s.k}, -448.0f, 448.0f);
        const int64_t sr = (s.n + s.bn - 1) / s.bn, sc = (s.k + s.bk - 1) / s.bk;
        d.t["scale"] = random_tensor(static_cast<uint32_t>(sr * 3 + sc), DType::F32, {sr, sc}, 1e-4f, 4e-3f);
        d.t["out"] = zeros(f32_out ? DType::F32 : act, {s.t, s.n});
        d.p["block_n"] = static_cast<double>(s.bn);
        d.p["block_k"] = static_cast<double>(s.bk);
        return d;
      };
      c.run = [s](Backend& be, DeviceData& d, int) {
        be.linear_fp8(d.t("x"), d.t("w"), d.t("scale"), s.bn, s.bk, d.t("out"));
      };
      c.outputs = {"out"};
      // bf16: CUDA's dequantizing path rounds w · scale to bf16 too (a second rounding beside x's).
      c.tol = tol_by_act({1e-5 * std::sqrt(double(s.k)), 1e-4}, Tol{3e-2, 2e-2});
      c.unsupported = [](Backend& be) {
        return be.supports(Op::LinearFp8, DType::F8_E4M3) ? std::string()
                                                            : be.name() + " does not support FP8 weights";
      };
      out.push_back(std::move(c));
    }
}

void add_linear_int4(std::vector<OpCase>& out) {
  // Groups of 32 and 64 (CUDA's scalar skinny GEMM), multiples of 128 (its tensor-core skinny GEMM:
  // one to four tiles of 8 tokens, fewer and more 128-column chunks than its 8 warps, rows not a
  // multiple of 16), 8 and 16 (its dequantizing path), per channel (group K); T from decode past both
  // skinny GEMMs' limits (8, 32); G past 8 groups (a second zero-point word); every nibble value and
  // zero point from 0 to 15.
  struct Shape { int64_t t, n, k, group; };
  const Shape shapes[] = {{1, 40, 64, 32},    {3, 72, 320, 32},   {8, 33, 256, 64},    {9, 64, 96, 32},
                          {2, 24, 136, 8},    {5, 16, 128, 128},  {37, 50, 128, 16},   {1, 40, 256, 128},
                          {3, 70, 1152, 128}, {13, 48, 512, 256}, {24, 33, 128, 128},  {32, 17, 384, 128},
                          {33, 20, 256, 128}};
  for (const Shape& s : shapes)
    for (bool f32_out : {false, true}) {
      if (f32_out && s.t > 3) continue;
      OpCase c;
      c.op = "linear_int4";
      c.label = "T=" + std::to_string(s.t) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) + " group " +
                std::to_string(s.group) + (f32_out ? " out f32" : "");
      c.make = [=](DType act) {
        OpData d;
        d.t["x"] = random_tensor(static_cast<uint32_t>(s.t + s.k), act, {s.t, s.k});
        const int64_t G = s.k / s.group, zw = (G + 7) / 8;
        std::mt19937 rng(static_cast<uint32_t>(s.n * 11 + s.k));
        HostTensor w = zeros(DType::I32, {s.n, s.k / 8});
        for (int32_t& v : w.i) v = static_cast<int32_t>(rng());
        HostTensor z = zeros(DType::I32, {s.n, zw});
        for (int32_t& v : z.i) v = static_cast<int32_t>(rng());
        d.t["w"] = w;
        d.t["zeros"] = z;
        // Scales as a checkpoint's f16 ones are: a few significant bits (exact products in fp32).
        HostTensor sc = random_tensor(static_cast<uint32_t>(s.n * 3 + G), DType::F32, {s.n, G}, 1e-3f, 2e-2f);
        for (float& v : sc.f) v = static_cast<float>(optable::round_to(v, DType::F16));
        d.t["scale"] = sc;
        d.t["out"] = zeros(f32_out ? DType::F32 : act, {s.t, s.n});
        d.p["group"] = static_cast<double>(s.group);
        return d;
      };
      c.run = [s](Backend& be, DeviceData& d, int) {
        be.linear_int4(d.t("x"), d.t("w"), d.t("scale"), d.t("zeros"), s.group, d.t("out"));
      };
      c.outputs = {"out"};
      // bf16: CUDA's dequantizing path rounds (q − z) · scale to bf16 (a second rounding beside x's).
      c.tol = tol_by_act({1e-5 * std::sqrt(double(s.k)), 1e-4}, Tol{3e-2, 2e-2});
      c.unsupported = [](Backend& be) {
        return be.supports(Op::LinearInt4, DType::I32) ? std::string() : be.name() + " does not support 4-bit weights";
      };
      out.push_back(std::move(c));
    }
}

void add_linear(std::vector<OpCase>& out) {
  // T from 1 (decode GEMV) past the skinny-GEMM limit of 8 to a small GEMM; K a multiple of 8 and not.
  struct Shape { int64_t t, n, k; };
  // T=70: past the Vulkan backend's GEMV limit (64 tokens), its tiled path.
  const Shape shapes[] = {{1, 40, 64}, {3, 72, 136}, {8, 33, 256}, {9, 64, 96}, {37, 50, 72}, {2, 16, 37}, {70, 24, 40}};
  for (DType wdt : {DType::F32, DType::BF16, DType::F16})
    for (const Shape& s : shapes)
      for (bool f32_out : {false, true}) {
        if (f32_out && (wdt != DType::BF16 || s.t > 9)) continue;  // lm_head style: fp32 logits
        OpCase c;
        c.op = "linear";
        c.label = "T=" + std::to_string(s.t) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) + " w " +
                  dtype_name(wdt) + (f32_out ? " out f32" : "");
        c.make = [=](DType act) {
          OpData d;
          d.t["x"] = random_tensor(static_cast<uint32_t>(s.t + s.k), act, {s.t, s.k});
          d.t["w"] = random_tensor(static_cast<uint32_t>(s.n * 7 + s.k), wdt, {s.n, s.k});
          d.t["out"] = zeros(f32_out ? DType::F32 : act, {s.t, s.n});
          return d;
        };
        c.run = [](Backend& be, DeviceData& d, int) { be.linear(d.t("x"), d.t("w"), d.t("out")); };
        c.outputs = {"out"};
        c.tol = tol_by_act({1e-5 * std::sqrt(double(s.k)), 1e-4}, kBf16);
        // The CUDA backend multiplies weights in the activation dtype (the loader converts them).
        c.unsupported = [wdt](Backend& be) {
          return be.device() == Device::CUDA && wdt != be.activation_dtype()
                     ? std::string("cuda linear takes weights in the activation dtype")
                     : std::string();
        };
        out.push_back(std::move(c));
      }
}

void add_glu(std::vector<OpCase>& out) {
  for (auto [t, i] : {std::pair<int64_t, int64_t>{3, 40}, {1, 1000}, {17, 64}}) {
    OpCase c;
    c.op = "silu_mul";
    c.label = "T=" + std::to_string(t) + " I=" + std::to_string(i);
    c.make = [=](DType act) {
      OpData d;
      d.t["gate_up"] = random_tensor(static_cast<uint32_t>(t * i), act, {t, 2 * i}, -4.0f, 4.0f);
      d.t["out"] = zeros(act, {t, i});
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) { be.silu_mul(d.t("gate_up"), d.t("out")); };
    c.outputs = {"out"};
    c.tol = tol_by_act({1e-6, 1e-5}, kBf16);
    out.push_back(std::move(c));
  }
  for (auto [t, i] : {std::pair<int64_t, int64_t>{3, 40}, {1, 1000}, {9, 72}}) {
    OpCase c;
    c.op = "gelu_tanh_mul";
    c.label = "T=" + std::to_string(t) + " I=" + std::to_string(i);
    c.make = [=](DType act) {
      OpData d;
      d.t["gate_up"] = random_tensor(static_cast<uint32_t>(7 * t * i), act, {t, 2 * i}, -5.0f, 5.0f);
      d.t["gate_up"].row_pad = 8;  // a strided input
      d.t["out"] = zeros(act, {t, i});
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) { be.gelu_tanh_mul(d.t("gate_up"), d.t("out")); };
    c.outputs = {"out"};
    c.tol = tol_by_act({1e-6, 1e-5}, kBf16);
    out.push_back(std::move(c));
  }
  // In place, as Gemma calls them: the embedding scale and the final logit soft-cap.
  for (auto [t, n] : {std::pair<int64_t, int64_t>{1, 64}, {6, 1000}}) {
    OpCase c;
    c.op = "scale";
    c.label = "T=" + std::to_string(t) + " N=" + std::to_string(n) + " x 7.5";
    c.make = [=](DType act) {
      OpData d;
      d.t["x"] = random_tensor(static_cast<uint32_t>(11 * t + n), act, {t, n}, -2.0f, 2.0f);
      d.p["factor"] = 7.5;
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) { be.scale(d.t("x"), 7.5f); };
    c.outputs = {"x"};
    c.tol = tol_by_act({1e-6, 1e-6}, kRoundBf16);
    out.push_back(std::move(c));
  }
  for (auto [t, n] : {std::pair<int64_t, int64_t>{1, 300}, {5, 64}}) {
    OpCase c;
    c.op = "softcap";
    c.label = "T=" + std::to_string(t) + " N=" + std::to_string(n) + " cap 3";
    c.make = [=](DType act) {
      OpData d;
      d.t["x"] = random_tensor(static_cast<uint32_t>(13 * t + n), act, {t, n}, -12.0f, 12.0f);
      d.p["cap"] = 3.0;
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) { be.softcap(d.t("x"), 3.0f); };
    c.outputs = {"x"};
    c.tol = tol_by_act({1e-6, 1e-5}, kBf16);
    out.push_back(std::move(c));
  }
  // The MLP's down projection with its activation: decode rows (the fused skinny GEMM on CUDA) and more.
  for (auto [t, i, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 64, 48}, {4, 96, 40}, {12, 128, 24}}) {
    OpCase c;
    c.op = "linear_silu_mul";
    c.label = "T=" + std::to_string(t) + " I=" + std::to_string(i) + " N=" + std::to_string(n);
    c.make = [=](DType act) {
      OpData d;
      d.t["gate_up"] = random_tensor(static_cast<uint32_t>(t * i + 1), act, {t, 2 * i}, -3.0f, 3.0f);
      d.t["w"] = random_tensor(static_cast<uint32_t>(n + i), act, {n, i});
      d.t["act"] = zeros(act, {t, i});
      d.t["out"] = zeros(act, {t, n});
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) {
      be.linear_silu_mul(d.t("gate_up"), d.t("w"), d.t("act"), d.t("out"));
    };
    c.outputs = {"out"};
    // In bf16 the activation is an intermediate whose rounding is the backend's: CUDA rounds silu(g)
    // before the product as torch does, the CPU and the formula round once. Half an ulp on each of I
    // terms of up to |9| adds ~sqrt(I) * 2^-9 * rms to the sum; measured worst 0.094 at I = 96.
    c.tol = tol_by_act({2e-5 * std::sqrt(double(i)), 1e-4}, {2e-2 + 1e-2 * std::sqrt(double(i)), 2e-2});
    out.push_back(std::move(c));
  }
  for (auto [t, h] : {std::pair<int64_t, int64_t>{4, 48}, {9, 1000}}) {
    OpCase c;
    c.op = "sigmoid_gate";
    c.label = "T=" + std::to_string(t) + " H=" + std::to_string(h);
    c.make = [=](DType act) {
      OpData d;
      d.t["a"] = random_tensor(static_cast<uint32_t>(t + h), act, {t, h}, -2.0f, 2.0f);
      d.t["gate"] = random_tensor(static_cast<uint32_t>(t * h), act, {t, h}, -6.0f, 6.0f);
      d.t["gate"].row_pad = 8;  // the gate is a column view of the fused projection
      return d;
    };
    // In place, as the model calls it (out aliases a).
    c.run = [](Backend& be, DeviceData& d, int) { be.sigmoid_gate(d.t("a"), d.t("gate"), d.t("a")); };
    c.outputs = {"a"};
    c.tol = tol_by_act({1e-6, 1e-5}, kBf16);
    out.push_back(std::move(c));
  }
  // out = a + b: a separate output, in place on a (residual += x) and on b, and every operand a
  // strided view (rows of different widths).
  struct AddSpec { int64_t t, n; int alias; int64_t pad_a, pad_b, pad_out; };  // alias: 0 out, 1 a, 2 b
  for (const AddSpec& s : {AddSpec{5, 64, 0, 0, 0, 0}, AddSpec{7, 1000, 1, 0, 0, 0}, AddSpec{3, 136, 2, 0, 0, 0},
                           AddSpec{4, 96, 0, 8, 3, 5}, AddSpec{6, 40, 1, 24, 8, 0}}) {
    OpCase c;
    c.op = "add";
    c.label = "T=" + std::to_string(s.t) + " N=" + std::to_string(s.n) +
              (s.alias == 1 ? " out=a" : s.alias == 2 ? " out=b" : "") + (s.pad_a + s.pad_b + s.pad_out ? " strided" : "");
    c.make = [=](DType act) {
      OpData d;
      d.t["a"] = random_tensor(static_cast<uint32_t>(17 * s.t + s.n), act, {s.t, s.n}, -3.0f, 3.0f);
      d.t["a"].row_pad = s.pad_a;
      d.t["b"] = random_tensor(static_cast<uint32_t>(19 * s.t + s.n), act, {s.t, s.n}, -3.0f, 3.0f);
      d.t["b"].row_pad = s.pad_b;
      if (s.alias == 0) {
        d.t["out"] = zeros(act, {s.t, s.n});
        d.t["out"].row_pad = s.pad_out;
      }
      d.p["alias"] = s.alias;
      return d;
    };
    c.run = [alias = s.alias](Backend& be, DeviceData& d, int) {
      Tensor& sum = d.t(alias == 1 ? "a" : alias == 2 ? "b" : "out");
      be.add(d.t("a"), d.t("b"), sum);
    };
    c.outputs = {s.alias == 1 ? "a" : s.alias == 2 ? "b" : "out"};
    c.tol = tol_by_act({0, 0}, kRoundBf16);  // one fp32 sum: exact against the double sum rounded to fp32
    c.bytes = [=](DType act) { return 3.0 * static_cast<double>(s.t * s.n * dtype_size(act)); };
    c.flops = [=](DType) { return static_cast<double>(s.t * s.n); };
    out.push_back(std::move(c));
  }
  for (auto [t, n] : {std::pair<int64_t, int64_t>{1, 40}, {7, 1000}}) {
    OpCase c;
    c.op = "add_bias";
    c.label = "T=" + std::to_string(t) + " N=" + std::to_string(n);
    c.make = [=](DType act) {
      OpData d;
      d.t["x"] = random_tensor(static_cast<uint32_t>(3 * t + n), act, {t, n}, -2.0f, 2.0f);
      d.t["x"].row_pad = 8;  // q, k and v are column views of the fused projection
      d.t["bias"] = random_tensor(static_cast<uint32_t>(5 * t + n), DType::F32, {n}, -1.0f, 1.0f);
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) { be.add_bias(d.t("x"), d.t("bias")); };
    c.outputs = {"x"};
    c.tol = tol_by_act({1e-6, 1e-6}, kRoundBf16);
    out.push_back(std::move(c));
  }
}

void add_gather_argmax(std::vector<OpCase>& out) {
  {
    OpCase c;
    c.op = "gather_rows";
    c.label = "12x40 rows {11, 0, 5, 5, 3}";
    c.make = [](DType act) {
      OpData d;
      d.t["x"] = random_tensor(5, act, {12, 40});
      d.t["rows"] = ints({11, 0, 5, 5, 3});
      d.t["out"] = zeros(act, {5, 40});
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) { be.gather_rows(d.t("x"), d.t("rows"), d.t("out")); };
    c.outputs = {"out"};
    c.tol = tol_by_act(kExactF32, {0, 0});
    out.push_back(std::move(c));
  }
  // Ties (the lowest index wins), NaNs (never win), a strided row layout, a large vocab.
  for (auto [rows, vocab, pad] : {std::tuple<int64_t, int64_t, int64_t>{6, 1000, 0}, {3, 77, 5}, {2, 151936, 0}}) {
    OpCase c;
    c.op = "argmax_rows";
    c.label = dims({rows, vocab}) + (pad ? " strided" : "");
    c.make = [=](DType) {
      OpData d;
      HostTensor x = random_tensor(static_cast<uint32_t>(vocab + rows), DType::F32, {rows, vocab}, -10.0f, 10.0f);
      x.row_pad = pad;
      std::mt19937 rng(static_cast<uint32_t>(vocab));
      for (int64_t r = 0; r < rows; ++r) {
        auto at = [&](int64_t j) -> float& { return x.f[static_cast<size_t>(r * vocab + j)]; };
        const int64_t a = static_cast<int64_t>(rng() % static_cast<uint32_t>(vocab));
        const int64_t b = static_cast<int64_t>(rng() % static_cast<uint32_t>(vocab));
        if (r % 2 == 0) at(std::min(a, b)) = at(std::max(a, b)) = 50.0f;  // a tie
        if (r % 3 == 1) at(a) = std::nanf("");
      }
      d.t["x"] = x;
      d.t["out"] = zeros(DType::I32, {rows});
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) { be.argmax_rows(d.t("x"), d.t("out")); };
    c.outputs = {"out"};
    c.tol = tol_by_act({0, 0}, {0, 0});
    out.push_back(std::move(c));
  }
  // Masks on some rows, out of order; a strided layout; a vocab that is not a multiple of 32 with
  // set bits past it (ignored) and a spare word; a row that allows almost nothing; the real vocab.
  for (auto [rows, vocab, pad, masked] : {std::tuple<int64_t, int64_t, int64_t, std::vector<int32_t>>{5, 1000, 3, {3, 0, 4}},
                                          {2, 151936, 0, {1}}}) {
    OpCase c;
    c.op = "apply_token_mask";
    c.label = dims({rows, vocab}) + " rows " + std::to_string(masked.size()) + (pad ? " strided" : "");
    c.make = [=](DType) {
      OpData d;
      HostTensor x = random_tensor(static_cast<uint32_t>(vocab + 7), DType::F32, {rows, vocab}, -10.0f, 10.0f);
      x.row_pad = pad;
      d.t["x"] = x;
      const auto M = static_cast<int64_t>(masked.size()), words = (vocab + 31) / 32 + 1;
      HostTensor mask = zeros(DType::I32, {M, words});
      std::mt19937 rng(static_cast<uint32_t>(vocab * 3));
      for (int64_t m = 0; m < M; ++m)
        for (int64_t w = 0; w < words; ++w)
          mask.i[static_cast<size_t>(m * words + w)] = m == 1 ? static_cast<int32_t>(w == 2 ? 0x10 : 0)
                                                              : static_cast<int32_t>(rng());
      d.t["mask"] = mask;
      d.t["rows"] = ints(masked);
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) { be.apply_token_mask(d.t("x"), d.t("mask"), d.t("rows")); };
    c.outputs = {"x"};
    c.tol = tol_by_act({0, 0}, {0, 0});
    out.push_back(std::move(c));
  }
}

}  // namespace

void add_dense_cases(std::vector<OpCase>& out) {
  add_embedding(out);
  add_norms(out);
  add_linear(out);
  add_linear_fp8(out);
  add_linear_int4(out);
  add_glu(out);
  add_gather_argmax(out);
}

std::vector<OpCase> test_cases() {
  std::vector<OpCase> out;
  add_dense_cases(out);
  add_attention_cases(out);
  add_gdn_cases(out);
  add_moe_cases(out);
  add_lora_cases(out);
  add_vision_cases(out);
  return out;
}

}  // namespace pagoda::optable

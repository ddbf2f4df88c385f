// Op table cases of the vision encoder's primitives (backend.h, "vision encoders"): layer_norm with
// and without a bias, weights F32 / BF16, in place, rows far from zero mean (two-pass variance);
// gelu exact and tanh, in place, |x| up to 1e4; rope_axes with 2 and 3 position rows (the tower's
// 2-D layout, Qwen3.5's interleaved and sectioned mRoPE), pass-through dims (2n < D), odd n, on a
// strided view of a fused qkv; segment_attention over segments of length 0, 1, odd and > 256 rows,
// q/k/v separate or column views of one [T, 3·H·D] tensor, head dims 13 to 128, query tiles (bf16:
// 64 rows) within, across and on segment boundaries. Perf cases at Qwen3.5-9B's vision tower: hidden
// 1152, 16 heads of 72, intermediate 4304, one image of 4096 patches and four of 1024.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "bench/op_table.h"

namespace pagoda::optable {
namespace {

std::string dims(std::initializer_list<int64_t> d) {
  std::string s;
  for (int64_t v : d) s += (s.empty() ? "" : "x") + std::to_string(v);
  return s;
}

HostTensor zeros(DType dtype, std::vector<int64_t> shape) {
  HostTensor h;
  h.dtype = dtype;
  h.shape = std::move(shape);
  h.f.assign(static_cast<size_t>(h.numel()), 0.0f);
  return h;
}

// Vulkan has no shaders for these (a model that needs them is refused at load there), so its cases
// are skipped by name rather than run against the bare backend.
std::function<std::string(Backend&)> unless_supported(Op op) {
  return [op](Backend& be) {
    return be.supports(op, be.activation_dtype())
               ? std::string()
               : be.name() + " has no " + op_name(op) + " for " + dtype_name(be.activation_dtype()) + " activations";
  };
}

std::vector<int32_t> cu_of(const std::vector<int32_t>& lens) {
  std::vector<int32_t> cu{0};
  for (int32_t l : lens) cu.push_back(cu.back() + l);
  return cu;
}

std::string lens_str(const std::vector<int32_t>& lens) {
  std::string s;
  for (int32_t l : lens) s += (s.empty() ? "" : ",") + std::to_string(l);
  return "[" + s + "]";
}

// Σ len² over the segments: the (query, key) pairs attention computes.
double pairs_of(const std::vector<int32_t>& lens) {
  double p = 0;
  for (int32_t l : lens) p += static_cast<double>(l) * l;
  return p;
}

// q, k and v of a case: separate [T, H, D] tensors, or (fused) the column thirds of "qkv" [T, 3·H·D]
// as the vision tower slices its fused projection.
struct Qkv {
  Tensor q, k, v;
};
Qkv qkv_views(DeviceData& d, int64_t h, int64_t hd, bool fused) {
  if (!fused) return {d.t("q"), d.t("k"), d.t("v")};
  const Tensor& all = d.t("qkv");
  const int64_t t = all.size(0), c = h * hd;
  return {all.cols(0, c).reshape({t, h, hd}), all.cols(c, 2 * c).reshape({t, h, hd}),
          all.cols(2 * c, 3 * c).reshape({t, h, hd})};
}

// ---- layer_norm -------------------------------------------------------------------------------------

void add_layer_norm(std::vector<OpCase>& out) {
  struct Shape {
    int64_t t, d;
    DType w;
    bool bias, in_place;
    float mean;  // the rows' offset from zero: a one-pass E[x²] − E[x]² loses the variance there
  };
  const Shape shapes[] = {{5, 64, DType::F32, true, false, 0.0f},     {3, 1000, DType::BF16, true, false, 0.0f},
                          {7, 100, DType::F32, false, false, 0.0f},   {1, 1152, DType::BF16, false, false, 0.0f},
                          {17, 37, DType::F32, true, true, 0.0f},     {4, 1152, DType::F32, true, false, 24.0f},
                          {9, 4304, DType::BF16, true, true, -3.0f}, {2, 3, DType::F32, true, false, 0.0f}};
  uint32_t seed = 8100;
  for (const Shape& s : shapes) {
    OpCase c;
    c.op = "layer_norm";
    c.unsupported = unless_supported(Op::LayerNorm);
    c.label = "T=" + std::to_string(s.t) + " D=" + std::to_string(s.d) + " w " + dtype_name(s.w) +
              (s.bias ? " bias" : " no bias") + (s.in_place ? " in place" : "") +
              (s.mean != 0.0f ? " mean " + std::to_string(static_cast<int>(s.mean)) : "");
    const uint32_t sd = seed;
    seed += 10;
    c.make = [s, sd](DType act) {
      OpData d;
      d.t["x"] = random_tensor(sd, act, {s.t, s.d}, s.mean - 2.0f, s.mean + 2.0f);
      d.t["w"] = random_tensor(sd + 1, s.w, {s.d}, 0.5f, 1.5f);
      if (s.bias) d.t["b"] = random_tensor(sd + 2, s.w, {s.d}, -0.5f, 0.5f);
      if (!s.in_place) d.t["out"] = zeros(act, {s.t, s.d});
      d.p["eps"] = 1e-6;
      return d;
    };
    c.run = [s](Backend& be, DeviceData& d, int) {
      const Tensor no_bias;
      be.layer_norm(d.t("x"), d.t("w"), s.bias ? d.t("b") : no_bias, d.t(s.in_place ? "x" : "out"), 1e-6f);
    };
    c.outputs = {s.in_place ? "x" : "out"};
    c.tol = tol_by_act({2e-5, 1e-4}, {1e-2, 1.6e-2});
    out.push_back(std::move(c));
  }
}

// ---- gelu ---------------------------------------------------------------------------------------

void add_gelu(std::vector<OpCase>& out) {
  struct Shape {
    int64_t t, n;
    bool in_place;
    float range;  // x uniform in [-range, range], plus the extremes below in row 0
  };
  const Shape shapes[] = {{4, 64, false, 3.0f}, {3, 1001, true, 8.0f}, {1, 7, false, 1.0f}, {13, 4304, false, 30.0f}};
  // Where erf and tanh saturate (their 1 ± f(x) cancels), where x³ is large, and zero.
  const float extremes[] = {-1e4f, -60.0f, -30.0f, -10.0f, -5.5f, -3.0f, -1e-3f, 0.0f,
                            1e-3f, 3.0f,   5.5f,   10.0f,  30.0f, 60.0f, 1e4f};
  uint32_t seed = 8200;
  for (bool tanh_approx : {false, true})
    for (const Shape& s : shapes) {
      OpCase c;
      c.op = "gelu";
      c.unsupported = unless_supported(Op::Gelu);
      c.label = dims({s.t, s.n}) + (tanh_approx ? " tanh" : " exact") + " x in ±" +
                std::to_string(static_cast<int>(s.range)) + " and extremes" + (s.in_place ? " in place" : "");
      const uint32_t sd = seed++;
      c.make = [=](DType act) {
        OpData d;
        HostTensor x = random_tensor(sd, act, {s.t, s.n}, -s.range, s.range);
        for (size_t i = 0; i < std::size(extremes) && i < x.f.size(); ++i) x.f[i] = round_to(extremes[i], act);
        d.t["x"] = x;
        if (!s.in_place) d.t["out"] = zeros(act, {s.t, s.n});
        d.p["tanh"] = tanh_approx;
        return d;
      };
      c.run = [=](Backend& be, DeviceData& d, int) { be.gelu(d.t("x"), d.t(s.in_place ? "x" : "out"), tanh_approx); };
      c.outputs = {s.in_place ? "x" : "out"};
      c.tol = tol_by_act({1e-6, 1e-5}, {1e-3, 8e-3});
      out.push_back(std::move(c));
    }
}

// ---- rope_axes ------------------------------------------------------------------------------------

// inv_freq and axes of the rotary pairs.
struct PairTable {
  std::vector<int32_t> axes;
  std::vector<float> inv_freq;
};

// The vision tower's 2-D RoPE over n pairs: the first half by the row (axis 0), the second by the
// column (axis 1), both at θ^(-2(j mod n/2) / n) in fp32, as transformers' axial rope.
PairTable vision_pairs(int64_t n, float theta) {
  PairTable p;
  const int64_t q = n / 2;
  for (int64_t j = 0; j < n; ++j) {
    p.axes.push_back(j < q ? 0 : 1);
    p.inv_freq.push_back(1.0f / std::pow(theta, static_cast<float>(2 * (j % q)) / static_cast<float>(n)));
  }
  return p;
}

// Qwen3.5's multimodal RoPE over n pairs of rotary_dim 2n: sections (t, h, w), interleaved (t h w t
// h w ..., h and w only within 3·section) or in runs.
PairTable mrope_pairs(int64_t n, float theta, const int64_t (&sec)[3], bool interleaved) {
  PairTable p;
  for (int64_t j = 0; j < n; ++j) {
    int32_t a = 0;
    if (interleaved) a = (j % 3 == 1 && j < 3 * sec[1]) ? 1 : (j % 3 == 2 && j < 3 * sec[2]) ? 2 : 0;
    else a = j < sec[0] ? 0 : j < sec[0] + sec[1] ? 1 : 2;
    p.axes.push_back(a);
    p.inv_freq.push_back(1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(2 * n)));
  }
  return p;
}

HostTensor floats(const std::vector<float>& v) {
  HostTensor h;
  h.dtype = DType::F32;
  h.shape = {static_cast<int64_t>(v.size())};
  h.f = v;
  return h;
}

void add_rope_axes(std::vector<OpCase>& out) {
  struct Spec {
    std::string layout;
    int64_t t, h, d, p;
    PairTable pairs;
    int part;      // -1: x alone (row_pad elements after each row); 0 / 1 / 2: q / k / v of a fused qkv
    int64_t pad;
    int32_t max_pos;
  };
  const int64_t sec_interleaved[3] = {4, 4, 4}, sec_runs[3] = {3, 3, 3}, sec_qwen[3] = {11, 11, 10};
  const Spec specs[] = {
      {"vision 2-D", 6, 3, 16, 2, vision_pairs(8, 10000.0f), -1, 0, 40},
      {"vision 2-D q of qkv", 11, 4, 24, 2, vision_pairs(12, 10000.0f), 0, 0, 64},
      {"vision 2-D k of qkv", 11, 4, 24, 2, vision_pairs(12, 10000.0f), 1, 0, 64},
      {"vision 2-D D72", 9, 2, 72, 2, vision_pairs(36, 10000.0f), 2, 0, 100},
      {"mrope interleaved n<D/2", 9, 2, 32, 3, mrope_pairs(12, 1e6f, sec_interleaved, true), -1, 5, 5000},
      {"mrope runs odd n", 1, 5, 18, 3, mrope_pairs(9, 10000.0f, sec_runs, false), -1, 0, 300},
      {"mrope Qwen3.5 rot64 of D256", 5, 2, 256, 3, mrope_pairs(32, 1e7f, sec_qwen, true), 1, 0, 30000},
      {"2 rows n<D/2", 33, 3, 20, 2, vision_pairs(6, 100.0f), -1, 3, 1000},
  };
  uint32_t seed = 8300;
  for (const Spec& s : specs) {
    OpCase c;
    c.op = "rope_axes";
    c.unsupported = unless_supported(Op::RopeAxes);
    const auto n = static_cast<int64_t>(s.pairs.axes.size());
    c.label = s.layout + " T=" + std::to_string(s.t) + " H" + std::to_string(s.h) + " D" + std::to_string(s.d) +
              " n=" + std::to_string(n) + " P=" + std::to_string(s.p) + (s.pad ? " strided" : "");
    const uint32_t sd = seed;
    seed += 10;
    c.make = [s, sd](DType act) {
      OpData d;
      if (s.part < 0) {
        d.t["x"] = random_tensor(sd, act, {s.t, s.h, s.d}, -2.0f, 2.0f);
        d.t["x"].row_pad = s.pad;
      } else {
        d.t["qkv"] = random_tensor(sd, act, {s.t, 3 * s.h * s.d}, -2.0f, 2.0f);
        d.p["part"] = s.part;
        d.p["heads"] = static_cast<double>(s.h);
        d.p["head_dim"] = static_cast<double>(s.d);
      }
      std::mt19937 rng(sd + 1);
      std::vector<int32_t> pos(static_cast<size_t>(s.p * s.t));
      for (int32_t& v : pos) v = static_cast<int32_t>(rng() % static_cast<uint32_t>(s.max_pos));
      pos[0] = 0;
      d.t["positions"] = ints(pos, {s.p, s.t});
      d.t["axes"] = ints(s.pairs.axes);
      d.t["inv_freq"] = floats(s.pairs.inv_freq);
      return d;
    };
    c.run = [s](Backend& be, DeviceData& d, int) {
      if (s.part < 0) {
        be.rope_axes(d.t("x"), d.t("positions"), d.t("axes"), d.t("inv_freq"));
        return;
      }
      const Tensor& all = d.t("qkv");
      const int64_t w = s.h * s.d;
      Tensor x = all.cols(s.part * w, (s.part + 1) * w).reshape({s.t, s.h, s.d});
      be.rope_axes(x, d.t("positions"), d.t("axes"), d.t("inv_freq"));
    };
    c.outputs = {s.part < 0 ? "x" : "qkv"};
    c.tol = tol_by_act({1e-5, 1e-5}, {1e-2, 1.6e-2});
    out.push_back(std::move(c));
  }
}

// ---- segment_attention --------------------------------------------------------------------------

void add_segment_attention(std::vector<OpCase>& out) {
  struct Spec {
    std::vector<int32_t> lens;
    int64_t h, d;
    bool fused;
    float scale;  // 0: 1/√D
    float range;  // q and k uniform in [-range, range]: peaked or flat softmax
  };
  const Spec specs[] = {
      {{1, 5, 9}, 2, 16, false, 0.0f, 1.0f},
      {{7, 1, 300}, 3, 16, true, 0.0f, 1.0f},     // a segment past 256 rows
      {{64, 33}, 2, 72, true, 0.0f, 2.0f},        // the Qwen3.5 tower's head dim
      {{1, 1, 1}, 1, 128, false, 0.0f, 1.0f},     // every segment one row: out = v
      {{5, 0, 12}, 4, 40, true, 0.3f, 3.0f},      // an empty segment; a scale not 1/√D; peaked
      {{257}, 2, 128, true, 0.0f, 1.5f},          // one segment, the largest head dim
      {{3, 17, 2, 31}, 5, 24, false, 0.0f, 1.0f},
      // The bf16 tensor-core kernel's edges (64-row query and key tiles, head dim padded to 16):
      {{100, 60, 3}, 4, 64, true, 0.0f, 2.0f},       // boundaries inside query tiles; D 64
      {{40, 90, 130}, 2, 72, false, 0.0f, 1.0f},     // a query tile over three segments; D 72
      {{1030, 300}, 2, 72, true, 0.0f, 1.0f},       // many key tiles, a straddling tile at 1030
      {{2, 3, 4, 130, 1}, 3, 16, true, 0.0f, 2.0f},  // segments far shorter than a tile; D 16
      {{33, 95}, 3, 20, false, 0.0f, 1.0f},          // D % 8 != 0: element-wise loads and stores
      {{9, 70}, 2, 13, true, 0.5f, 1.0f},            // odd D, rows not 16-byte aligned
      {{64, 64, 1}, 2, 112, false, 0.0f, 2.0f},      // tiles on segment boundaries; D 112 (DP 112)
  };
  uint32_t seed = 8400;
  for (const Spec& s : specs) {
    OpCase c;
    c.op = "segment_attention";
    c.unsupported = unless_supported(Op::SegmentAttention);
    const std::vector<int32_t> cu = cu_of(s.lens);
    const int64_t t = cu.back();
    const float scale = s.scale > 0 ? s.scale : 1.0f / std::sqrt(static_cast<float>(s.d));
    c.label = "segments " + lens_str(s.lens) + " H" + std::to_string(s.h) + " D" + std::to_string(s.d) +
              (s.fused ? " views of qkv" : "") + (s.scale > 0 ? " scale " + std::to_string(s.scale).substr(0, 4) : "") +
              " |qk|<=" + std::to_string(s.range).substr(0, 3);
    const uint32_t sd = seed;
    seed += 10;
    c.make = [=](DType act) {
      OpData d;
      if (s.fused) {
        // q and k in [-range, range], v in [-1, 1]: the thirds of one tensor.
        HostTensor all = random_tensor(sd, act, {t, 3 * s.h * s.d}, -s.range, s.range);
        const HostTensor v = random_tensor(sd + 1, act, {t, s.h * s.d});
        for (int64_t r = 0; r < t; ++r)
          for (int64_t j = 0; j < s.h * s.d; ++j)
            all.f[static_cast<size_t>(r * 3 * s.h * s.d + 2 * s.h * s.d + j)] = v.f[static_cast<size_t>(r * s.h * s.d + j)];
        d.t["qkv"] = all;
      } else {
        d.t["q"] = random_tensor(sd, act, {t, s.h, s.d}, -s.range, s.range);
        d.t["k"] = random_tensor(sd + 1, act, {t, s.h, s.d}, -s.range, s.range);
        d.t["v"] = random_tensor(sd + 2, act, {t, s.h, s.d});
      }
      d.t["cu_seqlens"] = ints(cu);
      d.t["out"] = zeros(act, {t, s.h, s.d});
      d.t["out"].f.assign(d.t["out"].f.size(), round_to(7.0f, act));  // every row must be written
      d.p["scale"] = scale;
      d.p["heads"] = static_cast<double>(s.h);
      d.p["head_dim"] = static_cast<double>(s.d);
      return d;
    };
    c.run = [=](Backend& be, DeviceData& d, int) {
      const Qkv x = qkv_views(d, s.h, s.d, s.fused);
      be.segment_attention(x.q, x.k, x.v, d.t("cu_seqlens"), scale, d.t("out"));
    };
    c.outputs = {"out"};
    c.tol = tol_by_act({1e-4, 1e-4}, {2e-2, 2e-2});
    out.push_back(std::move(c));
  }
}

// ---- perf: Qwen3.5-9B's vision tower ----------------------------------------------------------------

constexpr int64_t kTowerHidden = 1152, kTowerHeads = 16, kTowerHeadDim = 72, kTowerInter = 4304;

std::string images_str(const std::vector<int32_t>& lens) {
  return lens.size() == 1 ? "1 image of " + std::to_string(lens[0])
                          : std::to_string(lens.size()) + " images of " + std::to_string(lens[0]);
}

void perf_layer_norm(std::vector<OpCase>& out, int64_t t) {
  const int64_t d = kTowerHidden;
  OpCase c;
  c.op = "layer_norm";
  c.unsupported = unless_supported(Op::LayerNorm);
  c.label = "tower T=" + std::to_string(t) + " D=" + std::to_string(d) + " w f32 bias";
  c.make = [=](DType act) {
    OpData data;
    data.t["x"] = lazy(act, {t, d});
    data.t["w"] = lazy(DType::F32, {d});
    data.t["b"] = lazy(DType::F32, {d});
    data.t["out"] = lazy(act, {t, d});
    return data;
  };
  c.run = [](Backend& be, DeviceData& dd, int rep) {
    be.layer_norm(dd.t("x", rep), dd.t("w"), dd.t("b"), dd.t("out", rep), 1e-6f);
  };
  c.bytes = [=](DType act) { return 2.0 * static_cast<double>(t * d) * es(act) + 2.0 * d * 4; };
  c.flops = [=](DType) { return 7.0 * static_cast<double>(t * d); };  // mean, (x − m)², scale, shift
  c.rotate = {"x", "out"};
  out.push_back(std::move(c));
}

// The blocks' MLP activation (T × intermediate, in place as the tower runs it) and the merger's
// exact one (T/4 × 4·hidden).
void perf_gelu(std::vector<OpCase>& out, int64_t t, int64_t n, bool tanh_approx, const std::string& what) {
  OpCase c;
  c.op = "gelu";
  c.unsupported = unless_supported(Op::Gelu);
  c.label = what + " " + dims({t, n}) + (tanh_approx ? " tanh" : " exact");
  c.make = [=](DType act) {
    OpData data;
    data.t["x"] = lazy(act, {t, n});
    return data;
  };
  c.run = [tanh_approx](Backend& be, DeviceData& dd, int rep) { be.gelu(dd.t("x", rep), dd.t("x", rep), tanh_approx); };
  c.bytes = [=](DType act) { return 2.0 * static_cast<double>(t * n) * es(act); };
  c.flops = [=](DType) { return 10.0 * static_cast<double>(t * n); };
  c.rotate = {"x"};
  out.push_back(std::move(c));
}

// q (and, as the tower does next, k) of the fused qkv [T, 3·1152] turned by (row, column).
void perf_rope_axes(std::vector<OpCase>& out, int64_t t) {
  const int64_t h = kTowerHeads, d = kTowerHeadDim, n = d / 2;
  OpCase c;
  c.op = "rope_axes";
  c.unsupported = unless_supported(Op::RopeAxes);
  c.label = "tower q of qkv T=" + std::to_string(t) + " H" + std::to_string(h) + " D" + std::to_string(d) + " 2-D";
  const PairTable pairs = vision_pairs(n, 10000.0f);
  c.make = [=](DType act) {
    OpData data;
    data.t["qkv"] = lazy(act, {t, 3 * h * d});
    data.t["positions"] = lazy(DType::I32, {2, t}, 64);
    data.t["axes"] = ints(pairs.axes);
    data.t["inv_freq"] = floats(pairs.inv_freq);
    return data;
  };
  c.run = [=](Backend& be, DeviceData& dd, int rep) {
    Tensor q = dd.t("qkv", rep).cols(0, h * d).reshape({t, h, d});
    be.rope_axes(q, dd.t("positions"), dd.t("axes"), dd.t("inv_freq"));
  };
  c.bytes = [=](DType act) { return 2.0 * static_cast<double>(t * h * d) * es(act) + 2.0 * t * 4; };
  c.flops = [=](DType) { return 6.0 * static_cast<double>(t * h * n); };
  c.rotate = {"qkv"};
  out.push_back(std::move(c));
}

void perf_segment_attention(std::vector<OpCase>& out, const std::vector<int32_t>& lens) {
  const int64_t h = kTowerHeads, d = kTowerHeadDim;
  const std::vector<int32_t> cu = cu_of(lens);
  const int64_t t = cu.back();
  OpCase c;
  c.op = "segment_attention";
  c.unsupported = unless_supported(Op::SegmentAttention);
  c.label = "tower " + images_str(lens) + " H" + std::to_string(h) + " D" + std::to_string(d) + " views of qkv";
  c.make = [=](DType act) {
    OpData data;
    data.t["qkv"] = lazy(act, {t, 3 * h * d});
    data.t["cu_seqlens"] = ints(cu);
    data.t["out"] = lazy(act, {t, h, d});
    return data;
  };
  c.run = [=](Backend& be, DeviceData& dd, int) {
    const Tensor& all = dd.t("qkv");
    const int64_t w = h * d;
    be.segment_attention(all.cols(0, w).reshape({t, h, d}), all.cols(w, 2 * w).reshape({t, h, d}),
                         all.cols(2 * w, 3 * w).reshape({t, h, d}), dd.t("cu_seqlens"),
                         1.0f / std::sqrt(static_cast<float>(d)), dd.t("out"));
  };
  c.bytes = [=](DType act) { return 4.0 * static_cast<double>(t * h * d) * es(act); };  // q, k, v read; out written
  c.flops = [=](DType) { return 4.0 * pairs_of(lens) * static_cast<double>(h * d); };  // q·k and p·v
  out.push_back(std::move(c));
}

}  // namespace

void add_vision_cases(std::vector<OpCase>& out) {
  add_layer_norm(out);
  add_gelu(out);
  add_rope_axes(out);
  add_segment_attention(out);
}

void add_vision_perf_cases(std::vector<OpCase>& out, bool quick) {
  for (int64_t t : quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{1024, 4096}) {
    perf_layer_norm(out, t);
    perf_gelu(out, t, kTowerInter, true, "tower mlp");
    perf_rope_axes(out, t);
  }
  perf_gelu(out, 4096 / 4, 4 * kTowerHidden, false, "tower merger");
  perf_segment_attention(out, {4096});
  perf_segment_attention(out, {1024, 1024, 1024, 1024});
  if (!quick) perf_segment_attention(out, {1024});
}

}  // namespace pagoda::optable

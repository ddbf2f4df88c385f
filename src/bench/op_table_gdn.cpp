// Op table test cases of Gated DeltaNet: causal_conv1d_silu, gated_delta_rule (recurrent decode
// steps and chunked prefills of several chunks, GQA between value and key heads, first chunks with
// no initial state among sequences that continue theirs, lengths on both sides of the GPU backends'
// recurrent/chunked threshold of 8 and on chunk boundaries, dv not a multiple of a 32-column tile,
// dk at the chunked shaders' 128 and past it), gated_rms_norm.
#include <algorithm>
#include <numeric>
#include <random>

#include "bench/op_table.h"

namespace pagoda::optable {
namespace {

struct Varlen {
  std::vector<int32_t> lens;
  std::vector<int32_t> init;  // has_initial_state per sequence
};

// cu_seqlens_q, distinct shuffled state slots out of lens.size() + 2, has_initial_state.
HostMeta gdn_meta(const Varlen& v, uint32_t seed, int32_t* num_slots) {
  HostMeta m;
  m.cu_seqlens_q.push_back(0);
  for (int32_t l : v.lens) m.cu_seqlens_q.push_back(m.cu_seqlens_q.back() + l);
  *num_slots = static_cast<int32_t>(v.lens.size()) + 2;
  std::vector<int32_t> slots(static_cast<size_t>(*num_slots));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(seed));
  m.state_slots.assign(slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(v.lens.size()));
  m.has_initial_state = v.init;
  m.token_ids.assign(static_cast<size_t>(m.cu_seqlens_q.back()), 0);
  return m;
}

std::string describe(const Varlen& v) {
  std::string s;
  for (size_t i = 0; i < v.lens.size(); ++i)
    s += (i ? "," : "") + std::to_string(v.lens[i]) + (v.init[i] ? "+" : "");
  return "lens [" + s + "] (+: continues its state)";
}

HostTensor zeros(DType dt, std::vector<int64_t> shape) {
  HostTensor h;
  h.dtype = dt;
  h.shape = std::move(shape);
  h.f.assign(static_cast<size_t>(h.numel()), 0.0f);
  return h;
}

const Varlen kMixed{{1, 70, 1, 5, 130, 2}, {1, 0, 0, 1, 1, 1}};
const Varlen kDecode{{1, 1, 1, 1}, {1, 1, 0, 1}};

void add_conv(std::vector<OpCase>& out) {
  struct Spec { int64_t c; int k; Varlen v; };
  uint32_t seed = 4000;
  for (const Spec& s : {Spec{64, 4, kMixed}, Spec{200, 4, kDecode}, Spec{40, 2, kMixed}, Spec{96, 3, kMixed}}) {
    OpCase c;
    c.op = "causal_conv1d_silu";
    c.label = "C=" + std::to_string(s.c) + " K=" + std::to_string(s.k) + " " + describe(s.v);
    const uint32_t sd = seed++;
    c.make = [s, sd](DType act) {
      OpData d;
      int32_t slots = 0;
      d.meta = gdn_meta(s.v, sd, &slots);
      const int64_t t = d.meta.num_tokens();
      d.t["x"] = random_tensor(sd + 1, act, {t, s.c}, -2.0f, 2.0f);
      d.t["x"].row_pad = 16;  // the pre-conv columns of the fused projection
      d.t["w"] = random_tensor(sd + 2, act, {s.c, s.k});
      d.t["conv_state"] = random_tensor(sd + 3, act, {slots, s.c, s.k - 1}, -2.0f, 2.0f);
      d.t["out"] = zeros(act, {t, s.c});
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) {
      be.causal_conv1d_silu(d.t("x"), d.t("w"), d.t("conv_state"), d.meta(), d.t("out"));
    };
    c.outputs = {"out", "conv_state"};
    c.tol = [](DType act, const std::string& name) {
      if (name == "conv_state") return Tol{0, 0};  // copies of inputs
      return act == DType::F32 ? Tol{1e-5, 1e-5} : Tol{1e-2, 1.6e-2};
    };
    out.push_back(std::move(c));
  }
}

struct GdnSpec {
  int64_t hk, hv, dk, dv;
  Varlen v;
  DType a_log;
  DType state = DType::F32;  // BF16: --mamba-ssm-cache-dtype bfloat16 (CUDA)
};

// One long prefill alone (the GPU backends then skip the recurrent launch), dk = 128, dv = 80: two
// full 32-column tiles and a half one.
const Varlen kLong{{200}, {1}};
// Lengths 8 (recurrent) and 9 (chunked) on the GPU backends, one and two whole chunks, a decode.
const Varlen kEdges{{8, 9, 128, 1, 64}, {1, 0, 1, 1, 0}};

void add_delta_rule(std::vector<OpCase>& out) {
  uint32_t seed = 5000;
  for (const GdnSpec& s : {GdnSpec{2, 2, 32, 32, kMixed, DType::F32}, GdnSpec{2, 4, 16, 24, kMixed, DType::BF16},
                           GdnSpec{1, 3, 24, 8, kDecode, DType::F32}, GdnSpec{2, 2, 128, 128, kDecode, DType::BF16},
                           GdnSpec{1, 2, 64, 64, Varlen{{3, 66}, {1, 0}}, DType::F32},
                           GdnSpec{1, 2, 128, 80, kLong, DType::F32}, GdnSpec{2, 2, 32, 40, kEdges, DType::BF16},
                           GdnSpec{1, 1, 160, 32, Varlen{{70, 1}, {1, 1}}, DType::F32},
                           // A bf16 state, decodes and chunks: widened on load, rounded on store.
                           GdnSpec{2, 4, 64, 64, kMixed, DType::F32, DType::BF16}}) {
    OpCase c;
    c.op = "gated_delta_rule";
    c.label = "Hk" + std::to_string(s.hk) + " Hv" + std::to_string(s.hv) + " dk" + std::to_string(s.dk) + " dv" +
              std::to_string(s.dv) + " A_log " + dtype_name(s.a_log) +
              (s.state == DType::F32 ? "" : std::string(" state ") + dtype_name(s.state)) + " " + describe(s.v);
    const uint32_t sd = seed++;
    c.make = [s, sd](DType act) {
      OpData d;
      int32_t slots = 0;
      d.meta = gdn_meta(s.v, sd, &slots);
      const int64_t t = d.meta.num_tokens();
      d.t["qkv"] = random_tensor(sd + 1, act, {t, 2 * s.hk * s.dk + s.hv * s.dv});
      d.t["ba"] = random_tensor(sd + 2, act, {t, 2 * s.hv}, -3.0f, 3.0f);
      d.t["A_log"] = random_tensor(sd + 3, s.a_log, {s.hv}, -1.0f, 0.5f);
      d.t["dt_bias"] = random_tensor(sd + 4, DType::F32, {s.hv});
      d.t["state"] = random_tensor(sd + 5, s.state, {slots, s.hv, s.dk, s.dv}, -0.5f, 0.5f);
      d.t["out"] = zeros(act, {t, s.hv, s.dv});
      d.p["hk"] = static_cast<double>(s.hk);
      d.p["hv"] = static_cast<double>(s.hv);
      d.p["dk"] = static_cast<double>(s.dk);
      d.p["dv"] = static_cast<double>(s.dv);
      return d;
    };
    c.run = [s](Backend& be, DeviceData& d, int) {
      const Tensor& qkv = d.t("qkv");
      const int64_t t = qkv.size(0), qk = s.hk * s.dk;
      const Tensor q = qkv.cols(0, qk).reshape({t, s.hk, s.dk});
      const Tensor k = qkv.cols(qk, 2 * qk).reshape({t, s.hk, s.dk});
      const Tensor v = qkv.cols(2 * qk, 2 * qk + s.hv * s.dv).reshape({t, s.hv, s.dv});
      const Tensor b = d.t("ba").cols(0, s.hv), a = d.t("ba").cols(s.hv, 2 * s.hv);
      be.gated_delta_rule(q, k, v, b, a, d.t("A_log"), d.t("dt_bias"), d.t("state"), d.meta(), d.t("out"));
    };
    c.outputs = {"out", "state"};
    if (s.dk > 128) c.unsupported = not_on_cuda("dk over 128 (the CUDA kernels' limit)");
    if (s.state != DType::F32)
      c.unsupported = [](Backend& be) {
        return be.device() == Device::CUDA ? std::string()
                                           : std::string("a bf16 recurrent state is the CUDA kernels' alone");
      };
    const bool bf16_state = s.state == DType::BF16;
    c.tol = [bf16_state](DType act, const std::string& name) {
      // One rounding to bf16 at the store (bf16 activations' own tolerance below is wider).
      if (bf16_state && name == "state" && act == DType::F32) return Tol{1e-5, 1.0 / 256};
      if (act == DType::F32) return name == "state" ? Tol{5e-5, 2e-4} : Tol{2e-5, 2e-4};
      return Tol{3e-3, 2e-2};  // bf16 inputs of the chunked form: a few 1e-3 relative
    };
    out.push_back(std::move(c));
  }
}

void add_gated_norm(std::vector<OpCase>& out) {
  for (auto [t, hv, dv] : {std::tuple<int64_t, int64_t, int64_t>{5, 4, 32}, {1, 16, 128}, {9, 3, 24}}) {
    OpCase c;
    c.op = "gated_rms_norm";
    c.label = "T=" + std::to_string(t) + " Hv" + std::to_string(hv) + " dv" + std::to_string(dv) + " z strided";
    c.make = [=](DType act) {
      OpData d;
      d.t["x"] = random_tensor(static_cast<uint32_t>(t * dv + hv), act, {t, hv, dv}, -2.0f, 2.0f);
      d.t["z"] = random_tensor(static_cast<uint32_t>(t + dv), act, {t, hv, dv}, -3.0f, 3.0f);
      d.t["z"].row_pad = 8;
      d.t["w"] = random_tensor(static_cast<uint32_t>(dv), DType::F32, {dv}, 0.5f, 1.5f);
      d.t["out"] = zeros(act, {t, hv, dv});
      return d;
    };
    c.run = [](Backend& be, DeviceData& d, int) {
      be.gated_rms_norm(d.t("x"), d.t("z"), d.t("w"), 1e-6f, d.t("out"));
    };
    c.outputs = {"out"};
    c.tol = tol_by_act({1e-5, 1e-4}, {1e-2, 3.2e-2});
    out.push_back(std::move(c));
  }
}

}  // namespace

void add_gdn_cases(std::vector<OpCase>& out) {
  add_conv(out);
  add_delta_rule(out);
  add_gated_norm(out);
}

}  // namespace pagoda::optable

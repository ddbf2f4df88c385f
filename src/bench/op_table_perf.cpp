// Op table perf cases (`pagoda bench kernels`): the hot ops at the shapes of the models we serve —
// Qwen3-0.6B (H 1024, 16/8 heads of 128, I 3072), Qwen3-8B (H 4096, 32/8 heads, I 12288),
// Qwen3.5-0.8B's attention (8/2 heads of 256) and Gated DeltaNet (16 heads of 128, conv 4).
// Inputs are lazy (device patterns), so GiB-sized weights cost no host memory; the big ones rotate
// between copies so that repetitions do not run from the L2 cache.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "bench/op_table.h"

namespace pagoda::optable {
namespace {

void perf_linear(std::vector<OpCase>& out, const char* model, int64_t n, int64_t k, const char* name, int64_t t) {
  const bool head = std::string(name) == "lm_head";
  OpCase c;
  c.op = "linear";
  c.label = std::string(model) + " " + name + " T=" + std::to_string(t) + " " + std::to_string(n) + "x" + std::to_string(k);
  c.make = [=](DType act) {
    OpData d;
    d.t["x"] = lazy(act, {t, k});
    d.t["w"] = lazy(act, {n, k});
    d.t["out"] = lazy(head ? DType::F32 : act, {t, n});
    return d;
  };
  c.run = [](Backend& be, DeviceData& d, int rep) { be.linear(d.t("x"), d.t("w", rep), d.t("out")); };
  c.bytes = [=](DType act) { return (n * k + t * k) * es(act) + t * n * es(head ? DType::F32 : act); };
  c.flops = [=](DType) { return 2.0 * t * n * k; };
  c.rotate = {"w"};
  out.push_back(std::move(c));
}

// The same matrices as FP8 with 128x128 block scales (Qwen's FP8 checkpoints) or per-channel ones
// (--quantization fp8): the bytes are half of bf16's weight bytes, so at decode the roofline time
// halves too.
void perf_linear_fp8(std::vector<OpCase>& out, const char* model, int64_t n, int64_t k, const char* name, int64_t t,
                     bool per_channel) {
  OpCase c;
  c.op = "linear_fp8";
  c.label = std::string(model) + " " + name + " T=" + std::to_string(t) + " " + std::to_string(n) + "x" +
            std::to_string(k) + (per_channel ? " per-channel" : " block 128x128");
  const int64_t bn = per_channel ? 1 : 128, bk = per_channel ? k : 128;
  const int64_t sr = (n + bn - 1) / bn, sc = (k + bk - 1) / bk;
  c.make = [=](DType act) {
    OpData d;
    d.t["x"] = lazy(act, {t, k});
    d.t["w"] = lazy(DType::F8_E4M3, {n, k});
    d.t["scale"] = lazy(DType::F32, {sr, sc});
    d.t["out"] = lazy(act, {t, n});
    return d;
  };
  c.run = [bn, bk](Backend& be, DeviceData& d, int rep) {
    be.linear_fp8(d.t("x"), d.t("w", rep), d.t("scale"), bn, bk, d.t("out"));
  };
  c.bytes = [=](DType act) { return n * k + sr * sc * 4.0 + (t * k + t * n) * es(act); };
  c.flops = [=](DType) { return 2.0 * t * n * k; };
  c.rotate = {"w"};
  c.unsupported = [](Backend& be) {
    return be.supports(Op::LinearFp8, DType::F8_E4M3) ? std::string() : be.name() + " does not support FP8 weights";
  };
  out.push_back(std::move(c));
}

// The same matrices in 4 bits, groups of 128 (AWQ / GPTQ / W4A16 checkpoints): a quarter of bf16's
// weight bytes plus 4-byte scales and half-byte zero points per group.
void perf_linear_int4(std::vector<OpCase>& out, const char* model, int64_t n, int64_t k, const char* name, int64_t t) {
  OpCase c;
  c.op = "linear_int4";
  c.label = std::string(model) + " " + name + " T=" + std::to_string(t) + " " + std::to_string(n) + "x" +
            std::to_string(k) + " group 128";
  const int64_t g = k / 128, zw = (g + 7) / 8;
  c.make = [=](DType act) {
    OpData d;
    d.t["x"] = lazy(act, {t, k});
    d.t["w"] = lazy(DType::I32, {n, k / 8});
    d.t["scale"] = lazy(DType::F32, {n, g});
    d.t["zeros"] = lazy(DType::I32, {n, zw});
    d.t["out"] = lazy(act, {t, n});
    return d;
  };
  c.run = [](Backend& be, DeviceData& d, int rep) {
    be.linear_int4(d.t("x"), d.t("w", rep), d.t("scale"), d.t("zeros"), 128, d.t("out"));
  };
  c.bytes = [=](DType act) { return n * k / 2.0 + n * g * 4.0 + n * zw * 4.0 + (t * k + t * n) * es(act); };
  c.flops = [=](DType) { return 2.0 * t * n * k; };
  c.rotate = {"w"};
  c.unsupported = [](Backend& be) {
    return be.supports(Op::LinearInt4, DType::I32) ? std::string() : be.name() + " does not support 4-bit weights";
  };
  out.push_back(std::move(c));
}

void perf_rowwise(std::vector<OpCase>& out, int64_t t, int64_t h) {
  const std::string shape = "T=" + std::to_string(t) + " H=" + std::to_string(h);
  auto make = [=](DType act) {
    OpData d;
    d.t["x"] = lazy(act, {t, h});
    d.t["residual"] = lazy(act, {t, h});
    d.t["out"] = lazy(act, {t, h});
    d.t["w"] = lazy(DType::F32, {h});
    d.t["gate_up"] = lazy(act, {t, 2 * h});
    return d;
  };
  const double n = static_cast<double>(t * h);
  OpCase c;
  c.op = "rms_norm";
  c.label = shape;
  c.make = make;
  c.run = [](Backend& be, DeviceData& d, int rep) { be.rms_norm(d.t("x", rep), d.t("w"), d.t("out", rep), 1e-6f, false); };
  c.bytes = [=](DType act) { return 2 * n * es(act) + h * 4.0; };
  c.flops = [=](DType) { return 4 * n; };
  c.rotate = {"x", "out", "residual", "gate_up"};
  out.push_back(c);
  c.op = "add_rms_norm";
  c.run = [](Backend& be, DeviceData& d, int rep) {
    be.add_rms_norm(d.t("residual", rep), d.t("x", rep), d.t("w"), d.t("out", rep), 1e-6f, false);
  };
  c.bytes = [=](DType act) { return 4 * n * es(act) + h * 4.0; };
  c.flops = [=](DType) { return 5 * n; };
  out.push_back(c);
  c.op = "add";
  c.run = [](Backend& be, DeviceData& d, int rep) { be.add(d.t("residual", rep), d.t("x", rep), d.t("residual", rep)); };
  c.bytes = [=](DType act) { return 3 * n * es(act); };
  c.flops = [=](DType) { return n; };
  out.push_back(c);
  if (h == 4096) {
    c.op = "silu_mul";
    c.label = "T=" + std::to_string(t) + " I=" + std::to_string(h);
    c.run = [](Backend& be, DeviceData& d, int rep) { be.silu_mul(d.t("gate_up", rep), d.t("out", rep)); };
    c.bytes = [=](DType act) { return 3 * n * es(act); };
    out.push_back(c);
  }
}

// Paged attention over `seqs` sequences of q_len new tokens and ctx context each, blocks shuffled;
// the cache in the activation dtype, or FP8 (--kv-cache-dtype fp8: one byte a value to read).
void perf_attention(std::vector<OpCase>& out, int hq, int hkv, int d, int seqs, int q_len, int ctx,
                    bool fp8_cache = false) {
  OpCase c;
  c.op = "paged_attention";
  c.label = std::string(q_len == 1 ? "decode " : "prefill ") + "Hq" + std::to_string(hq) + "/Hkv" + std::to_string(hkv) +
            " D" + std::to_string(d) + " B=" + std::to_string(seqs) + " q=" + std::to_string(q_len) + " ctx=" +
            std::to_string(ctx) + (fp8_cache ? " kv fp8" : "");
  const auto kv_of = [fp8_cache](DType act) { return fp8_cache ? DType::F8_E4M3 : act; };
  c.make = [=](DType act) {
    OpData data;
    int32_t nb = 0;
    data.meta = make_meta(std::vector<int32_t>(static_cast<size_t>(seqs), ctx),
                          std::vector<int32_t>(static_cast<size_t>(seqs), q_len), 16, 7, &nb);
    data.t["k_cache"] = lazy(kv_of(act), {nb, 16, hkv, d});
    data.t["v_cache"] = lazy(kv_of(act), {nb, 16, hkv, d});
    data.t["q"] = lazy(act, {int64_t{seqs} * q_len, hq, d});
    data.t["out"] = lazy(act, {int64_t{seqs} * q_len, hq, d});
    return data;
  };
  c.run = [=](Backend& be, DeviceData& dd, int rep) {
    AttentionShape shape;
    shape.num_q_heads = hq;
    shape.num_kv_heads = hkv;
    shape.head_dim = d;
    shape.q_dtype = dd.t("q").dtype;
    shape.kv_dtype = dd.t("k_cache").dtype;
    if (!dd.meta().attention_plan) dd.plan_attention(shape);  // once per step, as the engine does
    AttentionParams p;
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    be.paged_attention(dd.t("q"), dd.t("k_cache", rep), dd.t("v_cache", rep), dd.meta(), p, dd.t("out"));
  };
  double keys = 0;  // causal: query i of a chunk sees ctx - q_len + i + 1 keys
  for (int i = 0; i < q_len; ++i) keys += ctx - q_len + i + 1;
  c.bytes = [=](DType act) {
    return 2.0 * seqs * ctx * hkv * d * es(kv_of(act)) + 2.0 * seqs * q_len * hq * d * es(act);
  };
  c.flops = [=](DType) { return 4.0 * seqs * keys * hq * d; };
  c.rotate = {"k_cache", "v_cache"};
  if (fp8_cache)
    c.unsupported = [](Backend& be) {
      return be.device() == Device::Vulkan ? std::string("the FP8 KV cache runs on the CPU and CUDA backends only")
                                           : std::string();
    };
  out.push_back(std::move(c));
}

// hv value heads over 16 key heads: 16 is Qwen3.5-0.8B's, 32 the 9B's.
void perf_gdn(std::vector<OpCase>& out, int seqs, int q_len, int64_t hv = 16, DType state = DType::F32) {
  const int64_t hk = 16, dk = 128, dv = 128, kconv = 4, conv = 2 * hk * dk + hv * dv;
  const int64_t t = int64_t{seqs} * q_len;
  auto make = [=](DType act) {
    OpData d;
    d.meta.cu_seqlens_q.resize(static_cast<size_t>(seqs) + 1);
    for (int s = 0; s <= seqs; ++s) d.meta.cu_seqlens_q[static_cast<size_t>(s)] = s * q_len;
    d.meta.state_slots.resize(static_cast<size_t>(seqs));
    std::iota(d.meta.state_slots.begin(), d.meta.state_slots.end(), 0);
    std::shuffle(d.meta.state_slots.begin(), d.meta.state_slots.end(), std::mt19937(3));
    d.meta.has_initial_state.assign(static_cast<size_t>(seqs), 1);
    d.meta.token_ids.assign(static_cast<size_t>(t), 0);
    d.t["x"] = lazy(act, {t, conv});
    d.t["w"] = lazy(act, {conv, kconv});
    d.t["conv_state"] = lazy(act, {seqs, conv, kconv - 1});
    d.t["conv_out"] = lazy(act, {t, conv});
    d.t["ba"] = lazy(act, {t, 2 * hv});
    d.t["A_log"] = lazy(DType::F32, {hv});
    d.t["dt_bias"] = lazy(DType::F32, {hv});
    d.t["state"] = lazy(state, {seqs, hv, dk, dv});
    d.t["out"] = lazy(act, {t, hv, dv});
    d.t["z"] = lazy(act, {t, hv, dv});
    d.t["norm_w"] = lazy(DType::F32, {dv});
    return d;
  };
  const std::string shape =
      "Hv" + std::to_string(hv) + " dk128 dv128 B=" + std::to_string(seqs) + " q=" + std::to_string(q_len) +
      (state == DType::F32 ? "" : " state bf16");
  OpCase c;
  c.make = make;
  c.label = shape;
  c.op = "causal_conv1d_silu";
  c.run = [](Backend& be, DeviceData& d, int) {
    be.causal_conv1d_silu(d.t("x"), d.t("w"), d.t("conv_state"), d.meta(), d.t("conv_out"));
  };
  c.bytes = [=](DType act) { return (2.0 * t * conv + 2.0 * seqs * conv * (kconv - 1)) * es(act); };
  c.flops = [=](DType) { return 2.0 * t * conv * kconv; };
  out.push_back(c);
  c.op = "gated_delta_rule";
  c.run = [=](Backend& be, DeviceData& d, int) {
    const Tensor& x = d.t("x");
    const Tensor q = x.cols(0, hk * dk).reshape({t, hk, dk});
    const Tensor k = x.cols(hk * dk, 2 * hk * dk).reshape({t, hk, dk});
    const Tensor v = x.cols(2 * hk * dk, conv).reshape({t, hv, dv});
    const Tensor b = d.t("ba").cols(0, hv), a = d.t("ba").cols(hv, 2 * hv);
    be.gated_delta_rule(q, k, v, b, a, d.t("A_log"), d.t("dt_bias"), d.t("state"), d.meta(), d.t("out"));
  };
  c.bytes = [=](DType act) {
    return 2.0 * seqs * hv * dk * dv * es(state) + t * (conv + 2 * hv + hv * dv) * es(act);
  };
  c.flops = [=](DType) { return 8.0 * t * hv * dk * dv; };  // decay, k^T S, rank-1 update, q S
  out.push_back(c);
  c.op = "gated_rms_norm";
  c.run = [](Backend& be, DeviceData& d, int) { be.gated_rms_norm(d.t("out"), d.t("z"), d.t("norm_w"), 1e-6f, d.t("out")); };
  c.bytes = [=](DType act) { return 3.0 * t * hv * dv * es(act); };
  c.flops = [=](DType) { return 8.0 * t * hv * dv; };
  out.push_back(c);
}

// RoPE alone on q [T, heads, 128] (the interleaved-pair models' unfused path), ragged positions.
void perf_rope(std::vector<OpCase>& out, int heads, int64_t t) {
  const int64_t d = 128;
  OpCase c;
  c.op = "rope";
  c.label = "H" + std::to_string(heads) + " D" + std::to_string(d) + " T=" + std::to_string(t) + " interleaved";
  c.make = [=](DType act) {
    OpData data;
    data.t["x"] = lazy(act, {t, heads, d});
    data.t["positions"] = lazy(DType::I32, {t}, 32768);
    return data;
  };
  c.run = [](Backend& be, DeviceData& dd, int rep) {
    RopeParams rope;
    rope.theta = 1000000.0f;
    rope.style = RopeStyle::Interleaved;
    be.rope(dd.t("x", rep), dd.t("positions"), rope);
  };
  c.bytes = [=](DType act) { return 2.0 * static_cast<double>(t * heads * d) * es(act) + static_cast<double>(t) * 4; };
  c.flops = [=](DType) { return 3.0 * static_cast<double>(t * heads * d); };
  c.rotate = {"x"};
  out.push_back(std::move(c));
}

void perf_argmax(std::vector<OpCase>& out, int64_t rows) {
  const int64_t vocab = 151936;
  OpCase c;
  c.op = "argmax_rows";
  c.label = std::to_string(rows) + "x" + std::to_string(vocab) + " f32";
  c.make = [=](DType) {
    OpData d;
    d.t["x"] = lazy(DType::F32, {rows, vocab});
    d.t["out"] = lazy(DType::I32, {rows});
    return d;
  };
  c.run = [](Backend& be, DeviceData& d, int rep) { be.argmax_rows(d.t("x", rep), d.t("out")); };
  c.bytes = [=](DType) { return rows * vocab * 4.0; };
  c.flops = [=](DType) { return static_cast<double>(rows * vocab); };
  c.rotate = {"x"};
  out.push_back(std::move(c));
}

// Structured output's masks on a decode step's rows: each logit read, the disallowed written.
void perf_token_mask(std::vector<OpCase>& out, int64_t rows) {
  const int64_t vocab = 151936, words = (vocab + 31) / 32;
  OpCase c;
  c.op = "apply_token_mask";
  c.label = std::to_string(rows) + "x" + std::to_string(vocab) + " f32";
  c.make = [=](DType) {
    OpData d;
    d.t["x"] = lazy(DType::F32, {rows, vocab});
    d.t["mask"] = lazy(DType::I32, {rows, words}, 0x7fffffff);
    std::vector<int32_t> ids(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) ids[static_cast<size_t>(r)] = static_cast<int32_t>(r);
    d.t["rows"] = ints(std::move(ids));
    return d;
  };
  c.run = [](Backend& be, DeviceData& d, int rep) { be.apply_token_mask(d.t("x", rep), d.t("mask"), d.t("rows")); };
  c.bytes = [=](DType) { return rows * vocab * 8.0 + rows * words * 4.0; };
  c.flops = [=](DType) { return static_cast<double>(rows * vocab); };
  c.rotate = {"x"};
  out.push_back(std::move(c));
}

}  // namespace

std::vector<OpCase> perf_cases(bool quick) {
  std::vector<OpCase> out;
  const std::vector<int64_t> ts = quick ? std::vector<int64_t>{1, 128, 2048}
                                        : std::vector<int64_t>{1, 2, 4, 8, 16, 64, 128, 512, 2048, 8192};
  struct Mat { const char* name; int64_t n, k; };
  const std::pair<const char*, std::vector<Mat>> models[] = {
      {"0.6B", {{"qkv", 4096, 1024}, {"o", 1024, 2048}, {"gate_up", 6144, 1024}, {"down", 1024, 3072}, {"lm_head", 151936, 1024}}},
      {"8B", {{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 24576, 4096}, {"down", 4096, 12288}, {"lm_head", 151936, 4096}}},
      // Qwen3.5-9B's own: the GDN input projection (q k v z) and the gated attention's q|gate k v.
      {"9B", {{"gdn_qkvz", 12288, 4096}, {"attn_qkv", 10240, 4096}}}};
  for (const auto& [model, mats] : models)
    for (int64_t t : ts)
      for (const Mat& m : mats)
        if (!(std::string(m.name) == "lm_head" && t > 256)) perf_linear(out, model, m.n, m.k, m.name, t);  // lm_head: sampled rows only
  for (int64_t t : quick ? std::vector<int64_t>{1, 2048} : std::vector<int64_t>{1, 2, 4, 8, 16, 64, 2048})
    for (const auto& [name, n, k] : {std::tuple{"qkv", 6144, 4096}, std::tuple{"gate_up", 24576, 4096},
                                     std::tuple{"down", 4096, 12288}})
      for (bool per_channel : {false, true}) perf_linear_fp8(out, "8B", n, k, name, t, per_channel);
  for (int64_t t : quick ? std::vector<int64_t>{1, 2048} : std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 2048})
    for (const auto& [name, n, k] : {std::tuple{"qkv", 6144, 4096}, std::tuple{"gate_up", 24576, 4096},
                                     std::tuple{"down", 4096, 12288}})
      perf_linear_int4(out, "8B", n, k, name, t);
  for (int64_t h : {int64_t{1024}, int64_t{4096}})
    for (int64_t t : quick ? std::vector<int64_t>{1, 2048} : std::vector<int64_t>{1, 128, 8192}) perf_rowwise(out, t, h);
  for (auto [hq, hkv] : {std::pair{16, 8}, std::pair{32, 8}})
    for (auto [b, ctx] : {std::pair{1, 4096}, std::pair{1, 32768}, std::pair{16, 4096}, std::pair{64, 2048},
                          std::pair{128, 1024}, std::pair{128, 4096}, std::pair{256, 2048}})
      if (!(quick && ctx > 4096)) perf_attention(out, hq, hkv, 128, b, 1, ctx);
  perf_attention(out, 16, 8, 128, 1, 2048, 2048);
  perf_attention(out, 16, 8, 128, 8, 512, 512);
  perf_attention(out, 8, 2, 256, 64, 1, 2048);  // Qwen3.5-0.8B's attention layers
  // The FP8 KV cache beside the bf16 one above: Qwen3-8B's heads, decode batches and a prefill.
  for (auto [b, ctx] : {std::pair{1, 32768}, std::pair{16, 4096}, std::pair{64, 2048}, std::pair{64, 8192},
                        std::pair{256, 2048}})
    if (!(quick && ctx > 4096)) perf_attention(out, 32, 8, 128, b, 1, ctx, true);
  if (!quick) perf_attention(out, 32, 8, 128, 64, 1, 8192);  // the bf16 twin of B=64 ctx=8192
  perf_attention(out, 16, 8, 128, 1, 2048, 2048, true);
  for (auto [b, q] : {std::pair{1, 1}, std::pair{64, 1}, std::pair{256, 1}, std::pair{1, 4096}, std::pair{8, 512}})
    perf_gdn(out, b, q);
  // Qwen3.5-9B under the throughput profile: 512 sequences decoding, 8 prompts of 1,024 in one step.
  if (!quick)
    for (auto [b, q] : {std::pair{512, 1}, std::pair{8, 1024}}) {
      perf_gdn(out, b, q, 32);
      perf_gdn(out, b, q, 32, DType::BF16);  // --mamba-ssm-cache-dtype bfloat16
    }
  for (int heads : {16, 32})
    for (int64_t t : quick ? std::vector<int64_t>{1, 2048} : std::vector<int64_t>{1, 128, 8192}) perf_rope(out, heads, t);
  perf_argmax(out, 1);
  perf_argmax(out, 128);
  perf_token_mask(out, 1);
  perf_token_mask(out, 64);
  add_moe_perf_cases(out, quick);
  add_lora_perf_cases(out);
  add_vision_perf_cases(out, quick);
  return out;
}

}  // namespace pagoda::optable

// The backend contract's capability check and CPU fallback (fallback_backend.h), with a test double:
// a deliberately partial backend that runs only some primitives (through a CpuBackend it owns, and
// counting its calls) and throws on the rest. Host-visible, it runs real fixture models with the
// missing ops on a second, counting CPU backend and must give the plain CPU backend's logits and
// greedy tokens (and transformers' tokens); not host-visible, it is refused at load, by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <random>
#include <set>
#include <span>

#include "../model/reference_fixture.h"
#include "../model/single_sequence.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/fallback_backend.h"
#include "core/error.h"
#include "engine/model_runner.h"
#include "io/model_config.h"
#include "model/model.h"

namespace pagoda {
namespace {

using testing::fixture_model_dir;
using testing::load_reference;
using testing::SingleSequence;

// Runs the ops in `ops` (F32 only), throws on every other; memory and ops are an inner CpuBackend's.
class PartialBackend final : public Backend {
 public:
  PartialBackend(std::set<Op> ops, bool host_visible, std::string name)
      : ops_(std::move(ops)), host_visible_(host_visible), name_(std::move(name)), cpu_(1) {}

  int calls(Op op) const { return calls_[static_cast<size_t>(op)]; }
  int syncs() const { return syncs_; }

  Device device() const override { return Device::CPU; }
  DType activation_dtype() const override { return DType::F32; }
  std::string name() const override { return name_; }
  bool supports(Op op, DType dtype) const override { return ops_.count(op) && cpu_.supports(op, dtype); }
  bool host_visible_memory() const override { return host_visible_; }

  void* raw_alloc(size_t bytes) override { return cpu_.raw_alloc(bytes); }
  void raw_free(void* p) override { cpu_.raw_free(p); }
  void copy_to_device(void* d, const void* s, size_t n) override { cpu_.copy_to_device(d, s, n); }
  void copy_to_host(void* d, const void* s, size_t n) override { cpu_.copy_to_host(d, s, n); }
  void copy_on_device(void* d, const void* s, size_t n) override { cpu_.copy_on_device(d, s, n); }
  void fill_zero(void* d, size_t n) override { cpu_.fill_zero(d, n); }
  void synchronize() override { ++syncs_; }
  void upload_convert(const Tensor& src, Tensor& dst) override { cpu_.upload_convert(src, dst); }

  void embedding(const Tensor& t, const Tensor& ids, Tensor& out) override {
    run(Op::Embedding).embedding(t, ids, out);
  }
  void rms_norm(const Tensor& x, const Tensor& w, Tensor& out, float eps, bool zc) override {
    run(Op::RmsNorm).rms_norm(x, w, out, eps, zc);
  }
  void rope(Tensor& x, const Tensor& pos, const RopeParams& r) override { run(Op::Rope).rope(x, pos, r); }
  void reshape_and_cache(const Tensor& k, const Tensor& v, const Tensor& s, Tensor& kc, Tensor& vc) override {
    run(Op::ReshapeAndCache).reshape_and_cache(k, v, s, kc, vc);
  }
  void paged_attention(const Tensor& q, const Tensor& kc, const Tensor& vc, const StepMeta& m,
                       const AttentionParams& p, Tensor& out) override {
    run(Op::PagedAttention).paged_attention(q, kc, vc, m, p, out);
  }
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override { run(Op::Linear).linear(x, w, out); }
  void linear_int4(const Tensor& x, const Tensor& w, const Tensor& s, const Tensor& z, int64_t g, Tensor& out) override {
    run(Op::LinearInt4).linear_int4(x, w, s, z, g, out);
  }
  void linear_fp8(const Tensor& x, const Tensor& w, const Tensor& s, int64_t bn, int64_t bk, Tensor& out) override {
    run(Op::LinearFp8).linear_fp8(x, w, s, bn, bk, out);
  }
  void silu_mul(const Tensor& gu, Tensor& out) override { run(Op::SiluMul).silu_mul(gu, out); }
  void gelu_tanh_mul(const Tensor& gu, Tensor& out) override { run(Op::GeluTanhMul).gelu_tanh_mul(gu, out); }
  void scale(Tensor& x, float f) override { run(Op::Scale).scale(x, f); }
  void softcap(Tensor& x, float c) override { run(Op::Softcap).softcap(x, c); }
  void add(const Tensor& a, const Tensor& b, Tensor& out) override { run(Op::Add).add(a, b, out); }
  void add_bias(Tensor& x, const Tensor& b) override { run(Op::AddBias).add_bias(x, b); }
  void gather_rows(const Tensor& x, const Tensor& r, Tensor& out) override {
    run(Op::GatherRows).gather_rows(x, r, out);
  }
  void sigmoid_gate(const Tensor& a, const Tensor& g, Tensor& out) override {
    run(Op::SigmoidGate).sigmoid_gate(a, g, out);
  }
  void causal_conv1d_silu(const Tensor& x, const Tensor& w, Tensor& st, const StepMeta& m, Tensor& out) override {
    run(Op::CausalConv1dSilu).causal_conv1d_silu(x, w, st, m, out);
  }
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b, const Tensor& a,
                        const Tensor& A_log, const Tensor& dt_bias, Tensor& state, const StepMeta& m,
                        Tensor& out) override {
    run(Op::GatedDeltaRule).gated_delta_rule(q, k, v, b, a, A_log, dt_bias, state, m, out);
  }
  void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& w, float eps, Tensor& out) override {
    run(Op::GatedRmsNorm).gated_rms_norm(x, z, w, eps, out);
  }
  void argmax_rows(const Tensor& logits, Tensor& out) override { run(Op::ArgmaxRows).argmax_rows(logits, out); }
  void apply_token_mask(Tensor& logits, const Tensor& mask, const Tensor& rows) override {
    run(Op::ApplyTokenMask).apply_token_mask(logits, mask, rows);
  }
  void moe_route(const Tensor& l, bool renorm, Tensor& ids, Tensor& w) override {
    run(Op::MoeRoute).moe_route(l, renorm, ids, w);
  }
  void moe_permute(const Tensor& x, const Tensor& ids, Tensor& off, Tensor& sorted, Tensor& rows,
                   Tensor& xs) override {
    run(Op::MoePermute).moe_permute(x, ids, off, sorted, rows, xs);
  }
  void moe_grouped_linear(const Tensor& x, const Tensor& w, const Tensor& off, Tensor& out) override {
    run(Op::MoeGroupedLinear).moe_grouped_linear(x, w, off, out);
  }
  void moe_unpermute(const Tensor& y, const Tensor& w, const Tensor& rows, const Tensor& sh, const Tensor& g,
                     Tensor& out) override {
    run(Op::MoeUnpermute).moe_unpermute(y, w, rows, sh, g, out);
  }
  void lora_expand(const Tensor& low, const Tensor& b, const Tensor& slots, Tensor& out) override {
    run(Op::LoraExpand).lora_expand(low, b, slots, out);
  }
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out, float eps) override {
    run(Op::LayerNorm).layer_norm(x, w, b, out, eps);
  }
  void gelu(const Tensor& x, Tensor& out, bool tanh_approx) override { run(Op::Gelu).gelu(x, out, tanh_approx); }
  void rope_axes(Tensor& x, const Tensor& positions, const Tensor& axes, const Tensor& inv_freq) override {
    run(Op::RopeAxes).rope_axes(x, positions, axes, inv_freq);
  }
  void segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, float scale,
                         Tensor& out) override {
    run(Op::SegmentAttention).segment_attention(q, k, v, cu_seqlens, scale, out);
  }

 private:
  Backend& run(Op op) {
    if (!ops_.count(op)) throw Error(name_ + " was asked to run " + op_name(op) + ", which it does not support");
    ++calls_[static_cast<size_t>(op)];
    return cpu_;
  }

  std::set<Op> ops_;
  bool host_visible_;
  std::string name_;
  CpuBackend cpu_;
  std::array<int, static_cast<size_t>(Op::kCount)> calls_{};
  int syncs_ = 0;
};

// What the partial device runs: the projections and the cheap elementwise ops; the norms, RoPE,
// the cache write and attention are left to the CPU.
const std::set<Op> kDeviceOps = {Op::Embedding, Op::Linear, Op::SiluMul, Op::Add, Op::GatherRows, Op::ArgmaxRows};

std::set<Op> every_op() {
  const std::vector<Op> all = all_ops();
  return {all.begin(), all.end()};
}

struct FixtureRun {
  std::vector<std::vector<float>> prompt_logits;
  std::vector<std::vector<int32_t>> tokens;
};

// Prefill each reference prompt in one step, then greedy decode with the device argmax.
FixtureRun run_fixture(const std::string& name, Backend& be) {
  const ModelConfig cfg = load_model_config(fixture_model_dir(name));
  const Checkpoint ckpt = Checkpoint::open_dir(fixture_model_dir(name));
  auto model = load_model(cfg, ckpt, be);
  const int32_t block_size = 16, max_len = 400, num_blocks = max_len / block_size + 1;
  KvCacheShape shape{static_cast<int32_t>(cfg.num_layers), num_blocks, block_size,
                     static_cast<int32_t>(cfg.num_kv_heads), static_cast<int32_t>(cfg.head_dim), DType::F32};
  PagedKvCache kv(be, shape);
  ModelRunner runner(be, *model, max_len, 1, num_blocks);
  std::mt19937 rng(5);
  FixtureRun out;
  const uint8_t host_row[] = {1};
  for (const auto& rc : load_reference(name)) {
    SingleSequence seq{block_size, std::vector<int32_t>(static_cast<size_t>(num_blocks))};
    std::iota(seq.blocks.begin(), seq.blocks.end(), 0);
    std::shuffle(seq.blocks.begin(), seq.blocks.end(), rng);
    const StepLogits& first = runner.execute_greedy(seq.step(rc.prompt_ids), kv, nullptr, host_row);
    out.prompt_logits.push_back(first.host_logits);
    std::vector<int32_t> tokens{first.argmax.at(0)};
    while (tokens.size() < rc.generated_ids.size())
      tokens.push_back(runner.execute_greedy(seq.step({tokens.back()}), kv, nullptr, {}).argmax.at(0));
    out.tokens.push_back(tokens);
  }
  return out;
}

class PartialBackendFallback : public ::testing::TestWithParam<std::string> {};

TEST_P(PartialBackendFallback, RunsTheRestOnTheCpuWithTheCpuBackendsTokens) {
  const std::string name = GetParam();
  auto cpu = make_backend("cpu", 2);
  const FixtureRun want = run_fixture(name, *cpu);

  auto device = std::make_unique<PartialBackend>(kDeviceOps, /*host_visible=*/true, "partial-test");
  auto host = std::make_unique<PartialBackend>(every_op(), true, "counting-cpu");
  PartialBackend* dev = device.get();
  PartialBackend* cpu_side = host.get();
  FallbackBackend fb(std::move(device), std::move(host));
  EXPECT_TRUE(fb.supports(Op::PagedAttention, DType::F32));
  EXPECT_FALSE(fb.supports(Op::PagedAttention, DType::BF16)) << "neither side runs bf16 activations";
  const FixtureRun got = run_fixture(name, fb);

  ASSERT_EQ(got.tokens.size(), want.tokens.size());
  const auto reference = load_reference(name);
  for (size_t i = 0; i < want.tokens.size(); ++i) {
    // The same kernels run on either side, so the numbers are the plain CPU backend's exactly.
    EXPECT_EQ(got.prompt_logits[i], want.prompt_logits[i]) << "prompt " << i;
    EXPECT_EQ(got.tokens[i], want.tokens[i]) << "prompt " << i;
    EXPECT_EQ(got.tokens[i], reference[i].generated_ids) << "prompt " << i << " vs transformers";
  }
  // Each side ran what it was given, and only that.
  for (Op op : kDeviceOps) {
    EXPECT_GT(dev->calls(op), 0) << op_name(op) << " should run on the partial device";
    EXPECT_EQ(cpu_side->calls(op), 0) << op_name(op) << " ran on the CPU though the device has it";
  }
  for (Op op : {Op::RmsNorm, Op::Rope, Op::ReshapeAndCache, Op::PagedAttention})
    EXPECT_GT(cpu_side->calls(op), 0) << op_name(op) << " should fall back to the CPU";
  EXPECT_GT(dev->syncs(), 0) << "the CPU must wait for the device before reading what it wrote";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PartialBackendFallback,
                         ::testing::Values("qwen3-tiny-tied", "llama3-tiny-untied"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(PartialBackend, WithCpuFallbackWrapsOnlyAPartialHostVisibleBackend) {
  auto full = make_backend("cpu", 1);
  Backend* full_ptr = full.get();
  EXPECT_EQ(with_cpu_fallback(std::move(full), 1).get(), full_ptr) << "a complete backend needs no fallback";

  auto wrapped = with_cpu_fallback(std::make_unique<PartialBackend>(kDeviceOps, true, "partial-test"), 1);
  auto* fb = dynamic_cast<FallbackBackend*>(wrapped.get());
  ASSERT_NE(fb, nullptr);
  const std::vector<Op> on_cpu = fb->ops_on_cpu();
  EXPECT_EQ(on_cpu.size(), all_ops().size() - kDeviceOps.size());
  EXPECT_NE(std::find(on_cpu.begin(), on_cpu.end(), Op::PagedAttention), on_cpu.end());
  EXPECT_NE(wrapped->name().find("paged_attention"), std::string::npos) << wrapped->name();

  auto opaque = std::make_unique<PartialBackend>(kDeviceOps, false, "partial-test");
  Backend* opaque_ptr = opaque.get();
  EXPECT_EQ(with_cpu_fallback(std::move(opaque), 1).get(), opaque_ptr)
      << "device memory the CPU cannot read cannot fall back";
}

TEST(PartialBackend, NotHostVisibleIsRefusedAtLoadNamingTheMissingOps) {
  for (const std::string name : {"qwen3-tiny-tied", "llama3-tiny-untied"}) {
    SCOPED_TRACE(name);
    auto be = with_cpu_fallback(std::make_unique<PartialBackend>(kDeviceOps, false, "opaque-partial"), 1);
    const ModelConfig cfg = load_model_config(fixture_model_dir(name));
    const Checkpoint ckpt = Checkpoint::open_dir(fixture_model_dir(name));
    try {
      load_model(cfg, ckpt, *be);
      FAIL() << "a backend without rms_norm, rope and paged_attention loaded a model";
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const char* want : {"opaque-partial", cfg.family.c_str(), "rms_norm (F32)", "rope", "reshape_and_cache",
                               "paged_attention", "not host-visible", "--device cpu"})
        EXPECT_NE(msg.find(want), std::string::npos) << "'" << want << "' missing from: " << msg;
      for (Op op : kDeviceOps)
        EXPECT_EQ(msg.find(std::string(op_name(op)) + " ("), std::string::npos) << op_name(op) << " is supported: " << msg;
    }
  }
}

TEST(PartialBackend, HostVisibleButUnrunnableDtypeIsRefusedToo) {
  // A bf16 device lacking rms_norm: the CPU runs only f32 activations, so nothing can run it.
  std::vector<OpUse> uses = {{Op::Linear, DType::BF16}, {Op::RmsNorm, DType::BF16}, {Op::RmsNorm, DType::BF16}};
  FallbackBackend fb(std::make_unique<PartialBackend>(kDeviceOps, true, "partial-test"), make_backend("cpu", 1));
  EXPECT_EQ(unsupported_ops(fb, uses), (std::vector<OpUse>{{Op::RmsNorm, DType::BF16}}))
      << "each missing use once; bf16 linear runs on the CPU";
  try {
    require_ops(fb, uses, "Test");
    FAIL() << "no refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rms_norm (BF16)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pagoda

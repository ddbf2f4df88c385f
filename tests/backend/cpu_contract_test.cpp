// The primitives the backend contract split out of the fused ops (rope with style and scaling, add,
// add_bias, per-head rms_norm) against naive formulas written here, and the fused entry points'
// default compositions (backend.cpp) against the CPU backend's own fused kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"

namespace pagoda {
namespace {

std::vector<float> random_vec(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

Tensor view(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::F32, Device::CPU, dims);
}
Tensor view(std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::I32, Device::CPU, dims);
}

// One head rotated as the formula says: pair j = (a, b) at angle pos * inv_freq[j] (double math,
// inv_freq in double from the definition theta^(-2j/rot), llama3-scaled when asked).
void rope_ref(float* x, int64_t rot, int pos, double theta, bool interleaved, double llama3_factor) {
  const int64_t half = rot / 2;
  for (int64_t j = 0; j < half; ++j) {
    double f = std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(rot));
    if (llama3_factor > 0) {  // low 1, high 4, original 64: the three bands of docs/models.md
      const double wavelen = 2 * M_PI / f;
      if (wavelen > 64.0) f /= llama3_factor;
      else if (wavelen >= 16.0) {
        const double s = (64.0 / wavelen - 1.0) / 3.0;
        f = (1 - s) * f / llama3_factor + s * f;
      }
    }
    const double c = std::cos(pos * f), s = std::sin(pos * f);
    const int64_t i0 = interleaved ? 2 * j : j, i1 = interleaved ? 2 * j + 1 : j + half;
    const double a = x[i0], b = x[i1];
    x[i0] = static_cast<float>(a * c - b * s);
    x[i1] = static_cast<float>(b * c + a * s);
  }
}

struct RopeCase {
  RopeStyle style;
  int32_t rotary_dim;  // 0 = head_dim
  bool llama3;
};

class CpuContractRope : public ::testing::TestWithParam<RopeCase> {};

TEST_P(CpuContractRope, MatchesTheFormulaOnAStridedView) {
  const RopeCase c = GetParam();
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(3);
  const int64_t T = 5, H = 3, D = 12, width = 50;  // x is a column view of [T, width]
  std::vector<float> buf = random_vec(static_cast<size_t>(T * width), rng), want = buf;
  std::vector<int32_t> pos = {0, 1, 7, 300, 4095};
  Tensor x = view(buf, {T, width}).cols(4, 4 + H * D).reshape({T, H, D});
  RopeParams rp;
  rp.rotary_dim = c.rotary_dim;
  rp.theta = 10000.0f;
  rp.style = c.style;
  if (c.llama3) {
    rp.scaling = RopeScaling::Llama3;
    rp.factor = 8.0;
    rp.original_max_positions = 64.0;
  }
  be->rope(x, view(pos, {T}), rp);
  const int64_t rot = c.rotary_dim > 0 ? c.rotary_dim : D;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      rope_ref(want.data() + t * width + 4 + h * D, rot, pos[static_cast<size_t>(t)], 10000.0,
               c.style == RopeStyle::Interleaved, c.llama3 ? 8.0 : 0.0);
  for (size_t i = 0; i < buf.size(); ++i)
    ASSERT_NEAR(buf[i], want[i], 2e-3 * (1 + std::fabs(want[i]))) << "element " << i;  // fp32 angles at 4095
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuContractRope,
                         ::testing::Values(RopeCase{RopeStyle::NeoX, 0, false}, RopeCase{RopeStyle::NeoX, 8, false},
                                           RopeCase{RopeStyle::Interleaved, 0, false},
                                           RopeCase{RopeStyle::Interleaved, 6, true},
                                           RopeCase{RopeStyle::NeoX, 0, true}));

TEST(CpuContract, AddAndAddBiasMatchTheFormula) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(4);
  const int64_t T = 4, N = 9;
  std::vector<float> a = random_vec(T * 16, rng), b = random_vec(T * N, rng), bias = random_vec(N, rng);
  Tensor av = view(a, {T, 16}).cols(2, 2 + N), bv = view(b, {T, N});
  const std::vector<float> a0 = a;
  be->add(av, bv, av);  // in place into a strided view
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < 16; ++i) {
      const bool in = i >= 2 && i < 2 + N;
      EXPECT_EQ(a[t * 16 + i], in ? a0[t * 16 + i] + b[t * N + i - 2] : a0[t * 16 + i]);
    }
  const std::vector<float> b0 = b;
  be->add_bias(bv, view(bias, {N}));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < N; ++i) EXPECT_EQ(b[t * N + i], b0[t * N + i] + bias[i]);
}

TEST(CpuContract, PerHeadRmsNormInPlace) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(5);
  const int64_t T = 3, H = 4, D = 8;
  std::vector<float> x = random_vec(T * H * D, rng), w = random_vec(D, rng);
  const std::vector<float> x0 = x;
  Tensor xv = view(x, {T, H, D});
  be->rms_norm(xv, view(w, {D}), xv, 1e-6f, /*zero_centered=*/true);
  for (int64_t v = 0; v < T * H; ++v) {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += double(x0[v * D + i]) * x0[v * D + i];
    const double inv = 1.0 / std::sqrt(ss / D + 1e-6);
    for (int64_t i = 0; i < D; ++i) EXPECT_NEAR(x[v * D + i], x0[v * D + i] * inv * (1.0 + w[i]), 1e-5);
  }
}

// The defaults (Backend::…) against the CpuBackend overrides: the same numbers (fp32 both ways).
TEST(CpuContract, DefaultCompositionsMatchTheFusedCpuPaths) {
  auto be = make_backend("cpu", 2);
  std::mt19937 rng(6);
  const int64_t T = 6, H = 16;
  std::vector<float> r1 = random_vec(T * H, rng), x = random_vec(T * H, rng), w = random_vec(H, rng);
  std::vector<float> r2 = r1, o1(T * H), o2(T * H);
  Tensor r1v = view(r1, {T, H}), r2v = view(r2, {T, H}), o1v = view(o1, {T, H}), o2v = view(o2, {T, H});
  be->add_rms_norm(r1v, view(x, {T, H}), view(w, {H}), o1v, 1e-6f, false);
  be->Backend::add_rms_norm(r2v, view(x, {T, H}), view(w, {H}), o2v, 1e-6f, false);
  EXPECT_EQ(r1, r2);
  for (size_t i = 0; i < o1.size(); ++i) EXPECT_NEAR(o1[i], o2[i], 1e-6f * (1 + std::fabs(o1[i])));

  // qk_norm_rope_and_cache, with and without the norm weights.
  const int64_t Hq = 4, Hkv = 2, D = 8, blocks = 2, bs = 8;
  for (bool norm : {true, false}) {
    SCOPED_TRACE(norm ? "with q/k norm" : "without q/k norm");
    std::vector<float> q1 = random_vec(T * Hq * D, rng), k1 = random_vec(T * Hkv * D, rng);
    std::vector<float> v = random_vec(T * Hkv * D, rng), qw = random_vec(D, rng), kw = random_vec(D, rng);
    std::vector<float> q2 = q1, k2 = k1;
    std::vector<float> kc1(blocks * bs * Hkv * D, 0.f), vc1 = kc1, kc2 = kc1, vc2 = kc1;
    std::vector<int32_t> pos = {3, 4, 5, 0, 1, 2}, slots = {11, 12, -1, 0, 1, 2};
    StepMeta meta;
    meta.positions = view(pos, {T});
    meta.slot_mapping = view(slots, {T});
    meta.num_tokens = static_cast<int32_t>(T);
    RopeParams rp;
    rp.theta = 1000.0f;
    rp.rotary_dim = 6;
    const Tensor qwv = norm ? view(qw, {D}) : Tensor(), kwv = norm ? view(kw, {D}) : Tensor();
    Tensor q1v = view(q1, {T, Hq, D}), k1v = view(k1, {T, Hkv, D}), q2v = view(q2, {T, Hq, D}),
           k2v = view(k2, {T, Hkv, D});
    Tensor kc1v = view(kc1, {blocks, bs, Hkv, D}), vc1v = view(vc1, {blocks, bs, Hkv, D});
    Tensor kc2v = view(kc2, {blocks, bs, Hkv, D}), vc2v = view(vc2, {blocks, bs, Hkv, D});
    be->qk_norm_rope_and_cache(q1v, k1v, view(v, {T, Hkv, D}), qwv, kwv, 1e-6f, true, rp, meta, kc1v, vc1v);
    be->Backend::qk_norm_rope_and_cache(q2v, k2v, view(v, {T, Hkv, D}), qwv, kwv, 1e-6f, true, rp, meta, kc2v,
                                        vc2v);
    for (size_t i = 0; i < q1.size(); ++i) ASSERT_NEAR(q1[i], q2[i], 1e-5f) << "q " << i;
    for (size_t i = 0; i < kc1.size(); ++i) ASSERT_NEAR(kc1[i], kc2[i], 1e-5f) << "k cache " << i;
    EXPECT_EQ(vc1, vc2);
  }
}

TEST(CpuContract, SupportsEveryPrimitiveWithF32Activations) {
  auto be = make_backend("cpu", 1);
  EXPECT_TRUE(be->host_visible_memory());
  for (Op op : all_ops()) {
    // FP8 projections are asked about by their weights' dtype (backend.h).
    // The quantized linears are asked about their weights' dtype (decoder_base.cpp's required_ops).
    const DType dtype = op == Op::LinearFp8 ? DType::F8_E4M3 : op == Op::LinearInt4 ? DType::I32 : DType::F32;
    EXPECT_TRUE(be->supports(op, dtype)) << op_name(op);
    EXPECT_STRNE(op_name(op), "unknown op");
  }
  EXPECT_TRUE(be->supports(Op::Linear, DType::BF16)) << "bf16 weights";
  EXPECT_FALSE(be->supports(Op::RmsNorm, DType::BF16)) << "activations are fp32 on the CPU";
  EXPECT_FALSE(be->supports(Op::PagedAttention, DType::I32));
}

}  // namespace
}  // namespace pagoda

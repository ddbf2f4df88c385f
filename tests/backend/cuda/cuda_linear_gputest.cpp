// CudaBackend::linear at decode shapes (T ≤ 8: the skinny-GEMM kernel of gemv.cu where the backend
// picks it) against the CPU backend and a naive double-precision formula, on seeded random inputs;
// cuBLASLt (the kernel switched off) and the kernel launched directly (every shape it takes, also
// those where the backend prefers cuBLASLt) must agree with them. Strided x and out, bf16 and fp32 out, K and N
// that are not multiples of the kernel's tiles, and the cut-over to cuBLASLt at T = 9.
#include <cmath>

#include "backend/cuda/kernels.h"
#include "gpu_test_util.h"

namespace pagoda::test {
namespace {

constexpr DType kBf = DType::BF16;
constexpr DType kF32 = DType::F32;

struct Shape {
  int64_t t, k, n;
  bool strided;
};

void check_linear(Backends& be, std::mt19937& rng, const Shape& s, DType out_dt) {
  SCOPED_TRACE("T " + std::to_string(s.t) + " K " + std::to_string(s.k) + " N " + std::to_string(s.n) +
               (out_dt == kF32 ? " fp32 out" : " bf16 out") + (s.strided ? " strided" : ""));
  auto* cuda = dynamic_cast<CudaBackend*>(be.gpu.get());
  ASSERT_NE(cuda, nullptr);
  const int64_t xw = s.strided ? s.k + 40 : s.k, ow = s.strided ? s.n + 8 : s.n;
  const auto x = random_vec(rng, size_t(s.t * xw));
  const auto w = random_vec(rng, size_t(s.n * s.k), -0.1f, 0.1f);
  std::vector<float> naive(size_t(s.t * s.n));
  for (int64_t i = 0; i < s.t; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < s.k; ++kk) acc += double(x[size_t(i * xw + kk)]) * w[size_t(j * s.k + kk)];
      naive[size_t(i * s.n + j)] = float(acc);
    }
  auto gx = upload(*be.gpu, x, kBf, {s.t, xw});
  auto gw = upload(*be.gpu, w, kBf, {s.n, s.k});
  const Tensor xv = s.strided ? gx.t.cols(0, s.k) : gx.t;
  // fp32 out: only accumulation-order differences (products of bf16 are exact in fp32).
  const double atol = out_dt == kF32 ? 1e-4 * std::sqrt(double(s.k)) : 1e-2, rtol = out_dt == kF32 ? 1e-4 : kBf16Rtol;

  // 0: the backend's choice, 1: cuBLASLt, 2: the kernel launched directly (where it takes the operands).
  std::vector<float> got[3];
  for (int path = 0; path < 3; ++path) {
    auto gout = empty(*be.gpu, out_dt, {s.t, ow});  // NaN-poisoned: unwritten elements fail
    Tensor out_view = s.strided ? gout.t.cols(0, s.n) : gout.t;
    if (path == 2) {
      if (!cuda::gemv_fits(xv, gw.t, out_view, cuda::kGemvMaxTokens)) continue;
      cuda::launch_gemv(xv, gw.t, out_view, /*num_sms=*/132, cuda->stream());  // SM count only tunes rows per block
    } else {
      const int saved = cuda->gemv_max_tokens();
      if (path == 1) cuda->set_gemv_max_tokens(0);
      be.gpu->linear(xv, gw.t, out_view);
      cuda->set_gemv_max_tokens(saved);
    }
    got[path] = download(*be.gpu, out_view);
    static const char* names[] = {"linear vs naive", "cuBLASLt linear vs naive", "gemv kernel vs naive"};
    expect_close(got[path], naive, atol, rtol, names[path]);
    if (s.strided) {  // the padding columns between rows stay untouched (NaN)
      const auto whole = download(*be.gpu, gout.t);
      for (int64_t i = 0; i < s.t; ++i)
        for (int64_t j = s.n; j < ow; ++j) EXPECT_TRUE(std::isnan(whole[size_t(i * ow + j)])) << "row " << i << " col " << j;
    }
  }
  expect_close(got[0], got[1], atol, rtol, "linear vs cuBLASLt");
  if (!got[2].empty()) expect_close(got[2], got[1], atol, rtol, "gemv kernel vs cuBLASLt");

  auto cx = upload(*be.cpu, x, kF32, {s.t, xw});
  auto cw = upload(*be.cpu, w, kBf, {s.n, s.k});
  auto cout = empty(*be.cpu, kF32, {s.t, s.n});
  be.cpu->linear(s.strided ? cx.t.cols(0, s.k) : cx.t, cw.t, cout.t);
  expect_close(got[0], download(*be.cpu, cout.t), atol, rtol, "linear vs cpu");
}

TEST(CudaLinear, SkinnyShapes) {
  Backends be;
  std::mt19937 rng(11);
  for (int64_t t = 1; t <= 8; ++t)
    for (DType out_dt : {kBf, kF32}) check_linear(be, rng, Shape{t, 1024, 1000 + 7 * t, t % 3 == 0}, out_dt);
}

TEST(CudaLinear, ModelShapes) {
  Backends be;
  std::mt19937 rng(12);
  // Qwen3-0.6B's o_proj and down_proj (narrow N, long K), a wide qkv, lm_head-like fp32 out.
  for (const Shape& s : {Shape{1, 2048, 1024, false}, Shape{1, 3072, 1024, true}, Shape{4, 1024, 4096, false},
                         Shape{8, 3072, 1024, true}, Shape{2, 1024, 6144, false}})
    check_linear(be, rng, s, kBf);
  check_linear(be, rng, Shape{1, 1024, 20000, false}, kF32);  // eight rows per block (N ≥ 16384)
  check_linear(be, rng, Shape{1, 2048, 16389, true}, kF32);
}

TEST(CudaLinear, OddSizesAndCutOver) {
  Backends be;
  std::mt19937 rng(13);
  // K not a multiple of 8 (cuBLASLt), K below one vector per thread, N of one row, T just past the cut-over.
  for (const Shape& s : {Shape{1, 100, 64, false}, Shape{3, 8, 5, false}, Shape{2, 136, 1, true}, Shape{9, 512, 300, false},
                         Shape{5, 12296, 33, true}})
    for (DType out_dt : {kBf, kF32}) check_linear(be, rng, s, out_dt);
}

TEST(CudaLinear, CapturedInAGraph) {
  Backends be;
  std::mt19937 rng(14);
  const int64_t t = 2, k = 2048, n = 1024;
  const auto x = random_vec(rng, size_t(t * k));
  const auto w = random_vec(rng, size_t(n * k), -0.1f, 0.1f);
  auto gx = upload(*be.gpu, x, kBf, {t, k});
  auto gw = upload(*be.gpu, w, kBf, {n, k});
  auto direct = empty(*be.gpu, kBf, {t, n});
  be.gpu->linear(gx.t, gw.t, direct.t);
  auto replayed = empty(*be.gpu, kBf, {t, n});
  be.gpu->synchronize();
  be.gpu->begin_capture();
  be.gpu->linear(gx.t, gw.t, replayed.t);
  const int64_t g = be.gpu->end_capture();
  be.gpu->replay(g);
  be.gpu->synchronize();
  expect_close(download(*be.gpu, replayed.t), download(*be.gpu, direct.t), 0, 0, "replayed vs direct");
  be.gpu->destroy_graph(g);
}

// linear_silu_mul (the MLP's down projection with its SwiGLU) against silu_mul then linear: bit-identical
// on every path (the fused skinny-GEMM kernel rounds as silu_mul does), and close to the fp64 formula.
// T = 1..8 and 9 (past the kernel), the 0.6B down_proj shape and an odd one, a strided gate_up, bf16
// and fp32 out; the kernel launched directly against silu_mul + launch_gemv at every T it takes.
void check_linear_silu_mul(Backends& be, std::mt19937& rng, int64_t t, int64_t inter, int64_t n, bool strided,
                           DType out_dt) {
  SCOPED_TRACE("T " + std::to_string(t) + " I " + std::to_string(inter) + " N " + std::to_string(n) +
               (out_dt == kF32 ? " fp32 out" : " bf16 out") + (strided ? " strided" : ""));
  auto* cuda = dynamic_cast<CudaBackend*>(be.gpu.get());
  ASSERT_NE(cuda, nullptr);
  const int64_t ld = strided ? 2 * inter + 24 : 2 * inter;
  const auto gu = random_vec(rng, size_t(t * ld), -4.0f, 4.0f);
  const auto w = random_vec(rng, size_t(n * inter), -0.1f, 0.1f);
  auto g_gu = upload(*be.gpu, gu, kBf, {t, ld});
  auto g_w = upload(*be.gpu, w, kBf, {n, inter});
  const Tensor gut = strided ? g_gu.t.cols(0, 2 * inter) : g_gu.t;
  // The naive formula over the bf16 inputs the GPU sees.
  const auto gu_b = download(*be.gpu, g_gu.t), w_b = download(*be.gpu, g_w.t);
  std::vector<float> naive(size_t(t * n));
  double mag_max = 0.0;
  for (int64_t r = 0; r < t; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0, mag = 0.0;
      for (int64_t k = 0; k < inter; ++k) {
        const double g = gu_b[size_t(r * ld + k)], u = gu_b[size_t(r * ld + inter + k)];
        const double p = g / (1.0 + std::exp(-g)) * u * w_b[size_t(j * inter + k)];
        acc += p;
        mag += std::abs(p);
      }
      naive[size_t(r * n + j)] = float(acc);
      mag_max = std::max(mag_max, mag);
    }

  auto act = empty(*be.gpu, kBf, {t, inter});
  auto fused = empty(*be.gpu, out_dt, {t, n});
  be.gpu->linear_silu_mul(gut, g_w.t, act.t, fused.t);
  auto act2 = empty(*be.gpu, kBf, {t, inter});
  auto ref = empty(*be.gpu, out_dt, {t, n});
  be.gpu->silu_mul(gut, act2.t);
  be.gpu->linear(act2.t, g_w.t, ref.t);
  const auto got = download(*be.gpu, fused.t), want = download(*be.gpu, ref.t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "linear_silu_mul vs silu_mul + linear at " << i;
  // The formula does not round the activations to bf16 as the op does (two roundings of up to 2^-9
  // each, random in sign over I terms: errors up to ~5e-2 of sum|p|/sqrt(I) seen at I = 3072).
  expect_close(got, naive, 4e-2 * mag_max / std::sqrt(double(inter)) + 1e-3, kBf16Rtol, "linear_silu_mul vs naive");

  if (cuda::gemv_silu_mul_fits(gut, g_w.t, fused.t, cuda::kGemvMaxTokens)) {
    auto direct = empty(*be.gpu, out_dt, {t, n});
    auto plain = empty(*be.gpu, out_dt, {t, n});
    cuda::launch_gemv_silu_mul(gut, g_w.t, direct.t, /*num_sms=*/132, cuda->stream());
    cuda::launch_gemv(act2.t, g_w.t, plain.t, /*num_sms=*/132, cuda->stream());
    const auto d = download(*be.gpu, direct.t), pl = download(*be.gpu, plain.t);
    for (size_t i = 0; i < d.size(); ++i) ASSERT_EQ(d[i], pl[i]) << "fused kernel vs silu_mul + gemv kernel at " << i;
  } else {
    EXPECT_GT(t, cuda::kGemvMaxTokens);
  }
}

TEST(CudaLinear, SiluMulFusedIntoDownProjection) {
  Backends be;
  std::mt19937 rng(23);
  for (int64_t t = 1; t <= 9; ++t) {
    check_linear_silu_mul(be, rng, t, 3072, 1024, t % 2 == 0, kBf);
    check_linear_silu_mul(be, rng, t, 200, 77, t % 3 == 0, t % 2 == 0 ? kF32 : kBf);
  }
  check_linear_silu_mul(be, rng, 1, 3072, 20000, false, kBf);  // the eight-row blocks
}

}  // namespace
}  // namespace pagoda::test

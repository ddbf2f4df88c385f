// CUDA ops against the CPU backend and against a naive formula (the triangle of DESIGN.md §8), on
// seeded random inputs. The CUDA side runs bf16 activations, the CPU side fp32 on the same values.
#include <algorithm>
#include <numeric>

#include "gpu_test_util.h"

namespace pagoda::test {
namespace {

constexpr DType kBf = DType::BF16;
constexpr DType kF32 = DType::F32;

TEST(CudaOps, EmbeddingAndGatherRows) {
  Backends be;
  std::mt19937 rng(1);
  const int64_t vocab = 1000, hidden = 200, t = 37;
  const auto table = random_vec(rng, static_cast<size_t>(vocab * hidden));
  std::vector<int32_t> ids(static_cast<size_t>(t));
  for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
  ids[3] = ids[5];
  std::vector<float> naive(static_cast<size_t>(t * hidden));
  for (int64_t i = 0; i < t; ++i)
    std::copy_n(&table[static_cast<size_t>(ids[static_cast<size_t>(i)] * hidden)], hidden, &naive[static_cast<size_t>(i * hidden)]);

  for (DType out_dt : {kBf, kF32}) {
    auto g_table = upload(*be.gpu, table, kBf, {vocab, hidden});
    auto g_ids = upload_i32(*be.gpu, ids, {t});
    auto g_out = empty(*be.gpu, out_dt, {t, hidden});
    be.gpu->embedding(g_table.t, g_ids.t, g_out.t);
    expect_close(download(*be.gpu, g_out.t), naive, 0, 0, "embedding vs naive");

    auto c_table = upload(*be.cpu, table, kF32, {vocab, hidden});
    auto c_ids = upload_i32(*be.cpu, ids, {t});
    auto c_out = empty(*be.cpu, kF32, {t, hidden});
    be.cpu->embedding(c_table.t, c_ids.t, c_out.t);
    expect_close(download(*be.gpu, g_out.t), download(*be.cpu, c_out.t), 0, 0, "embedding vs cpu");
  }

  // gather_rows from a strided view (columns 8..8+hidden of a wider matrix) into a contiguous output.
  const int64_t wide = hidden + 24;
  const auto x = random_vec(rng, static_cast<size_t>(t * wide));
  std::vector<int32_t> rows = {5, 0, 36, 5, 17};
  std::vector<float> gathered;
  for (int32_t r : rows) gathered.insert(gathered.end(), &x[static_cast<size_t>(r * wide + 8)], &x[static_cast<size_t>(r * wide + 8 + hidden)]);
  for (Backend* b : {be.gpu.get(), be.cpu.get()}) {
    const DType dt = b == be.gpu.get() ? kBf : kF32;
    auto d_x = upload(*b, x, dt, {t, wide});
    auto d_rows = upload_i32(*b, rows, {static_cast<int64_t>(rows.size())});
    auto d_out = empty(*b, dt, {static_cast<int64_t>(rows.size()), hidden});
    b->gather_rows(d_x.t.cols(8, 8 + hidden), d_rows.t, d_out.t);
    expect_close(download(*b, d_out.t), gathered, 0, 0, std::string("gather_rows on ") + b->name());
  }
}

// Naive RMSNorm in double over rows of `x`.
std::vector<float> naive_rms_norm(const std::vector<float>& x, const std::vector<float>& w, int64_t rows, int64_t h,
                                  double eps, bool zc) {
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < h; ++i) ss += double(x[size_t(r * h + i)]) * x[size_t(r * h + i)];
    const double inv = 1.0 / std::sqrt(ss / double(h) + eps);
    for (int64_t i = 0; i < h; ++i)
      out[size_t(r * h + i)] = float(x[size_t(r * h + i)] * inv * (zc ? 1.0 + w[size_t(i)] : w[size_t(i)]));
  }
  return out;
}

TEST(CudaOps, RmsNormAndAddRmsNorm) {
  Backends be;
  std::mt19937 rng(2);
  for (int64_t h : {1024, 1000, 4096}) {
    for (bool zc : {false, true}) {
      SCOPED_TRACE("hidden " + std::to_string(h) + (zc ? " zero-centred" : ""));
      const int64_t t = 9;
      const float eps = 1e-6f;
      const auto x = random_vec(rng, size_t(t * h), -2.0f, 2.0f);
      const auto res = random_vec(rng, size_t(t * h), -4.0f, 4.0f);
      const auto w = random_vec(rng, size_t(h), zc ? -0.5f : 0.5f, zc ? 0.5f : 1.5f, kF32);

      // rms_norm
      const auto naive = naive_rms_norm(x, w, t, h, eps, zc);
      auto gx = upload(*be.gpu, x, kBf, {t, h});
      auto gw = upload(*be.gpu, w, kF32, {h});
      auto gout = empty(*be.gpu, kBf, {t, h});
      be.gpu->rms_norm(gx.t, gw.t, gout.t, eps, zc);
      const auto got = download(*be.gpu, gout.t);
      expect_close(got, naive, kBf16Atol, kBf16Rtol, "rms_norm vs naive");
      auto cx = upload(*be.cpu, x, kF32, {t, h});
      auto cw = upload(*be.cpu, w, kF32, {h});
      auto cout = empty(*be.cpu, kF32, {t, h});
      be.cpu->rms_norm(cx.t, cw.t, cout.t, eps, zc);
      expect_close(got, download(*be.cpu, cout.t), kBf16Atol, kBf16Rtol, "rms_norm vs cpu");

      // add_rms_norm: the residual is stored in bf16 (sum rounded), the norm is of the stored value.
      std::vector<float> new_res(x.size());
      for (size_t i = 0; i < x.size(); ++i) new_res[i] = round_to(res[i] + x[i], kBf);
      const auto naive2 = naive_rms_norm(new_res, w, t, h, eps, zc);
      auto gres = upload(*be.gpu, res, kBf, {t, h});
      be.gpu->add_rms_norm(gres.t, gx.t, gw.t, gout.t, eps, zc);
      const auto got_res = download(*be.gpu, gres.t), got2 = download(*be.gpu, gout.t);
      expect_close(got_res, new_res, 0, 0, "add_rms_norm residual vs naive (bit exact)");
      expect_close(got2, naive2, kBf16Atol, kBf16Rtol, "add_rms_norm vs naive");
      auto cres = upload(*be.cpu, res, kF32, {t, h});
      be.cpu->add_rms_norm(cres.t, cx.t, cw.t, cout.t, eps, zc);
      expect_close(got_res, download(*be.cpu, cres.t), 0, 1e-2, "add_rms_norm residual vs cpu");
      expect_close(got2, download(*be.cpu, cout.t), kBf16Atol, kBf16Rtol, "add_rms_norm vs cpu");
    }
  }
}

TEST(CudaOps, RmsNormStridedUnalignedRows) {
  // Rows of 100 elements inside rows of 103: the element-wise (non-vector) path.
  Backends be;
  std::mt19937 rng(3);
  const int64_t t = 5, h = 100, wide = 103;
  const auto x = random_vec(rng, size_t(t * wide));
  const auto w = random_vec(rng, size_t(h), 0.5f, 1.5f, kF32);
  std::vector<float> xs;
  for (int64_t r = 0; r < t; ++r) xs.insert(xs.end(), &x[size_t(r * wide + 3)], &x[size_t(r * wide + 3 + h)]);
  auto gx = upload(*be.gpu, x, kBf, {t, wide});
  auto gw = upload(*be.gpu, w, kF32, {h});
  auto gout = empty(*be.gpu, kBf, {t, h});
  be.gpu->rms_norm(gx.t.cols(3, 3 + h), gw.t, gout.t, 1e-6f, false);
  expect_close(download(*be.gpu, gout.t), naive_rms_norm(xs, w, t, h, 1e-6, false), kBf16Atol, kBf16Rtol,
               "strided rms_norm vs naive");
}

TEST(CudaOps, Linear) {
  Backends be;
  std::mt19937 rng(4);
  struct Shape { int64_t t, k, n; bool strided; };
  for (const Shape& s : {Shape{1, 256, 384, false}, Shape{5, 1024, 3072, false}, Shape{33, 512, 200, true},
                         Shape{128, 2048, 1024, false}}) {
    for (DType out_dt : {kBf, kF32}) {
      SCOPED_TRACE("T " + std::to_string(s.t) + " K " + std::to_string(s.k) + " N " + std::to_string(s.n) +
                   (out_dt == kF32 ? " fp32 out" : " bf16 out") + (s.strided ? " strided" : ""));
      const int64_t xw = s.strided ? s.k + 64 : s.k, ow = s.strided ? s.n + 8 : s.n;
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
      auto gout = empty(*be.gpu, out_dt, {s.t, ow});
      Tensor out_view = s.strided ? gout.t.cols(0, s.n) : gout.t;
      be.gpu->linear(s.strided ? gx.t.cols(0, s.k) : gx.t, gw.t, out_view);
      const auto got = download(*be.gpu, out_view);
      // fp32 out: only accumulation-order differences (products of bf16 are exact in fp32).
      const double atol = out_dt == kF32 ? 1e-4 * std::sqrt(double(s.k)) : 1e-2, rtol = out_dt == kF32 ? 1e-4 : kBf16Rtol;
      expect_close(got, naive, atol, rtol, "linear vs naive");

      auto cx = upload(*be.cpu, x, kF32, {s.t, xw});
      auto cw = upload(*be.cpu, w, kBf, {s.n, s.k});
      auto cout = empty(*be.cpu, kF32, {s.t, s.n});
      be.cpu->linear(s.strided ? cx.t.cols(0, s.k) : cx.t, cw.t, cout.t);
      expect_close(got, download(*be.cpu, cout.t), atol, rtol, "linear vs cpu");
    }
  }
}

TEST(CudaOps, SiluMulAndSigmoidGate) {
  Backends be;
  std::mt19937 rng(5);
  for (int64_t inter : {3072, 100}) {
    SCOPED_TRACE("I " + std::to_string(inter));
    const int64_t t = 7;
    const auto gu = random_vec(rng, size_t(t * 2 * inter), -6.0f, 6.0f);
    std::vector<float> naive(size_t(t * inter));
    for (int64_t r = 0; r < t; ++r)
      for (int64_t i = 0; i < inter; ++i) {
        const double g = gu[size_t(r * 2 * inter + i)], u = gu[size_t(r * 2 * inter + inter + i)];
        naive[size_t(r * inter + i)] = float(g / (1.0 + std::exp(-g)) * u);
      }
    auto g_gu = upload(*be.gpu, gu, kBf, {t, 2 * inter});
    auto g_out = empty(*be.gpu, kBf, {t, inter});
    be.gpu->silu_mul(g_gu.t, g_out.t);
    const auto got = download(*be.gpu, g_out.t);
    expect_close(got, naive, kBf16Atol, kBf16Rtol, "silu_mul vs naive");
    auto c_gu = upload(*be.cpu, gu, kF32, {t, 2 * inter});
    auto c_out = empty(*be.cpu, kF32, {t, inter});
    be.cpu->silu_mul(c_gu.t, c_out.t);
    expect_close(got, download(*be.cpu, c_out.t), kBf16Atol, kBf16Rtol, "silu_mul vs cpu");

    // sigmoid_gate with a strided gate (the second half of each gate_up row) and out aliasing a.
    const auto a = random_vec(rng, size_t(t * inter), -3.0f, 3.0f);
    std::vector<float> naive_g(size_t(t * inter));
    for (int64_t r = 0; r < t; ++r)
      for (int64_t i = 0; i < inter; ++i)
        naive_g[size_t(r * inter + i)] =
            float(a[size_t(r * inter + i)] / (1.0 + std::exp(-double(gu[size_t(r * 2 * inter + inter + i)]))));
    auto g_a = upload(*be.gpu, a, kBf, {t, inter});
    be.gpu->sigmoid_gate(g_a.t, g_gu.t.cols(inter, 2 * inter), g_a.t);
    const auto got_g = download(*be.gpu, g_a.t);
    expect_close(got_g, naive_g, kBf16Atol, kBf16Rtol, "sigmoid_gate vs naive");
    auto c_a = upload(*be.cpu, a, kF32, {t, inter});
    be.cpu->sigmoid_gate(c_a.t, c_gu.t.cols(inter, 2 * inter), c_a.t);
    expect_close(got_g, download(*be.cpu, c_a.t), kBf16Atol, kBf16Rtol, "sigmoid_gate vs cpu");
  }
}

// Expected cache contents: start from `init`, write rows of `src` [T, row] at slots (skip -1).
std::vector<float> naive_cache_write(std::vector<float> init, const std::vector<float>& src,
                                     const std::vector<int32_t>& slots, int64_t row, DType cache_dt) {
  for (size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] < 0) continue;
    for (int64_t i = 0; i < row; ++i)
      init[size_t(slots[t] * row + i)] = round_to(src[size_t(int64_t(t) * row + i)], cache_dt);
  }
  return init;
}

TEST(CudaOps, ReshapeAndCache) {
  Backends be;
  std::mt19937 rng(6);
  const int64_t t = 11, hkv = 4, d = 64, nb = 6, bs = 8;
  for (DType cache_dt : {kBf, DType::F16, kF32}) {
    SCOPED_TRACE(std::string("cache ") + dtype_name(cache_dt));
    const auto k = random_vec(rng, size_t(t * hkv * d)), v = random_vec(rng, size_t(t * hkv * d));
    std::vector<int32_t> slots(static_cast<size_t>(t));
    std::vector<int32_t> perm(size_t(nb * bs));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t i = 0; i < t; ++i) slots[size_t(i)] = perm[size_t(i)];
    slots[2] = -1;
    slots[7] = -1;
    const size_t cache_n = size_t(nb * bs * hkv * d);
    const auto init = random_vec(rng, cache_n, -1.0f, 1.0f, cache_dt);
    const auto want_k = naive_cache_write(init, k, slots, hkv * d, cache_dt);
    const auto want_v = naive_cache_write(init, v, slots, hkv * d, cache_dt);
    for (Backend* b : {be.gpu.get(), be.cpu.get()}) {
      const DType act = b->activation_dtype();
      auto dk = upload(*b, k, act, {t, hkv, d});
      auto dv = upload(*b, v, act, {t, hkv, d});
      auto ds = upload_i32(*b, slots, {t});
      auto kc = upload(*b, init, cache_dt, {nb, bs, hkv, d});
      auto vc = upload(*b, init, cache_dt, {nb, bs, hkv, d});
      b->reshape_and_cache(dk.t, dv.t, ds.t, kc.t, vc.t);
      expect_close(download(*b, kc.t), want_k, 0, 0, "k_cache on " + b->name());
      expect_close(download(*b, vc.t), want_v, 0, 0, "v_cache on " + b->name());
    }
  }
}

struct RopeCase {
  int64_t hq, hkv, d;
  int rotary_dim;
  float theta;
  bool zero_centered;
  DType cache_dt;
};

TEST(CudaOps, QkNormRopeAndCache) {
  Backends be;
  std::mt19937 rng(7);
  const RopeCase cases[] = {
      {16, 8, 128, 128, 1e6f, false, DType::BF16},  // Qwen3
      {8, 2, 256, 64, 1e7f, true, DType::BF16},     // Qwen3.5 (partial rotary, (1 + w) norms)
      {4, 2, 64, 32, 1e4f, false, DType::F32},
      {4, 1, 128, 128, 1e6f, false, DType::F16},
  };
  for (const RopeCase& c : cases) {
    SCOPED_TRACE("Hq " + std::to_string(c.hq) + " Hkv " + std::to_string(c.hkv) + " D " + std::to_string(c.d) +
                 " rotary " + std::to_string(c.rotary_dim) + " cache " + dtype_name(c.cache_dt));
    const int64_t t = 13, bs = 16, nb = 8, d = c.d;
    const float eps = 1e-6f;
    // q inside a fused qkv row: q | k | v columns, so q, k, v are strided views.
    const int64_t qkv_w = (c.hq + 2 * c.hkv) * d;
    const auto qkv = random_vec(rng, size_t(t * qkv_w), -3.0f, 3.0f);
    const auto qw = random_vec(rng, size_t(d), c.zero_centered ? -0.3f : 0.7f, c.zero_centered ? 0.3f : 1.3f, kF32);
    const auto kw = random_vec(rng, size_t(d), c.zero_centered ? -0.3f : 0.7f, c.zero_centered ? 0.3f : 1.3f, kF32);
    std::vector<int32_t> pos(static_cast<size_t>(t)), slots(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) {
      pos[size_t(i)] = i < 5 ? int32_t(i) : int32_t(rng() % 8000);
      slots[size_t(i)] = int32_t(i * 7 % (nb * bs));
    }
    slots[4] = -1;
    // Naive: per head, RMSNorm in double then NeoX RoPE with fp32 angles (as the contract says).
    auto norm_rope = [&](const float* x, const std::vector<float>& w, int32_t p) {
      std::vector<double> n(static_cast<size_t>(d)), y(static_cast<size_t>(d));
      double ss = 0;
      for (int64_t i = 0; i < d; ++i) ss += double(x[i]) * x[i];
      const double inv = 1.0 / std::sqrt(ss / double(d) + eps);
      for (int64_t i = 0; i < d; ++i) n[size_t(i)] = x[i] * inv * (c.zero_centered ? 1.0 + w[size_t(i)] : w[size_t(i)]);
      y = n;
      const int half = c.rotary_dim / 2;
      for (int j = 0; j < half; ++j) {
        const float inv_freq = 1.0f / std::pow(c.theta, float(2 * j) / float(c.rotary_dim));
        const double ang = double(float(p) * inv_freq);
        y[size_t(j)] = n[size_t(j)] * std::cos(ang) - n[size_t(j + half)] * std::sin(ang);
        y[size_t(j + half)] = n[size_t(j + half)] * std::cos(ang) + n[size_t(j)] * std::sin(ang);
      }
      return y;
    };
    std::vector<float> want_q(size_t(t * c.hq * d));
    const size_t cache_n = size_t(nb * bs * c.hkv * d);
    std::vector<float> want_kc(cache_n, 0.0f), want_vc(cache_n, 0.0f);
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t h = 0; h < c.hq; ++h) {
        const auto y = norm_rope(&qkv[size_t(i * qkv_w + h * d)], qw, pos[size_t(i)]);
        for (int64_t e = 0; e < d; ++e) want_q[size_t((i * c.hq + h) * d + e)] = float(y[size_t(e)]);
      }
      if (slots[size_t(i)] < 0) continue;
      for (int64_t h = 0; h < c.hkv; ++h) {
        const auto y = norm_rope(&qkv[size_t(i * qkv_w + (c.hq + h) * d)], kw, pos[size_t(i)]);
        for (int64_t e = 0; e < d; ++e) {
          const size_t ci = size_t((slots[size_t(i)] * c.hkv + h) * d + e);
          want_kc[ci] = float(y[size_t(e)]);
          want_vc[ci] = round_to(qkv[size_t(i * qkv_w + (c.hq + c.hkv + h) * d + e)], c.cache_dt);
        }
      }
    }
    std::vector<std::vector<float>> results[2];
    for (int bi = 0; bi < 2; ++bi) {
      Backend& b = bi == 0 ? *be.gpu : *be.cpu;
      const DType act = b.activation_dtype();
      auto dqkv = upload(b, qkv, act, {t, qkv_w});
      Tensor q = dqkv.t.cols(0, c.hq * d).reshape({t, c.hq, d});
      Tensor k = dqkv.t.cols(c.hq * d, (c.hq + c.hkv) * d).reshape({t, c.hkv, d});
      Tensor v = dqkv.t.cols((c.hq + c.hkv) * d, qkv_w).reshape({t, c.hkv, d});
      auto dqw = upload(b, qw, kF32, {d});
      auto dkw = upload(b, kw, kF32, {d});
      auto dpos = upload_i32(b, pos, {t});
      auto dslots = upload_i32(b, slots, {t});
      auto kc = upload(b, std::vector<float>(cache_n, 0.0f), c.cache_dt, {nb, bs, c.hkv, d});
      auto vc = upload(b, std::vector<float>(cache_n, 0.0f), c.cache_dt, {nb, bs, c.hkv, d});
      StepMeta meta;
      meta.positions = dpos.t;
      meta.slot_mapping = dslots.t;
      meta.num_tokens = int32_t(t);
      meta.block_size = int32_t(bs);
      RopeParams rope;
      rope.rotary_dim = c.rotary_dim;
      rope.theta = c.theta;
      b.qk_norm_rope_and_cache(q, k, v, dqw.t, dkw.t, eps, c.zero_centered, rope, meta, kc.t, vc.t);
      results[bi] = {download(b, q), download(b, kc.t), download(b, vc.t)};
    }
    // bf16 q/k with Hugging Face's bf16 rounding points (normed value, weight product, cos and sin,
    // q*cos and rotate_half(q)*sin, then their sum; values of magnitude ~1..3): the two rounded
    // products can cancel, so the error is bounded by their ulps (2 x 2^-7 at magnitude 2..4), not
    // by the result's.
    const double atol = 4e-2, rtol = kBf16Rtol;
    expect_close(results[0][0], want_q, atol, rtol, "q vs naive");
    expect_close(results[0][1], want_kc, atol, rtol, "k_cache vs naive");
    expect_close(results[0][2], want_vc, 0, 0, "v_cache vs naive");
    expect_close(results[0][0], results[1][0], atol, rtol, "q vs cpu");
    expect_close(results[0][1], results[1][1], atol, rtol, "k_cache vs cpu");
    expect_close(results[0][2], results[1][2], 0, 1e-2, "v_cache vs cpu");
  }
}

TEST(CudaOps, UploadConvertAndCopies) {
  Backends be;
  std::mt19937 rng(8);
  const auto x = random_vec(rng, 1000, -100.0f, 100.0f, kF32);
  for (DType dt : {kBf, DType::F16, kF32}) {
    auto d = upload(*be.gpu, x, dt, {10, 100});
    expect_close(download(*be.gpu, d.t), round_all(x, dt), 0, 0, std::string("upload_convert to ") + dtype_name(dt));
  }
  // bf16 host source → f32 device.
  std::vector<uint16_t> hb(x.size());
  for (size_t i = 0; i < x.size(); ++i) hb[i] = f32_to_bf16(x[i]);
  auto d = empty(*be.gpu, kF32, {1000});
  be.gpu->upload_convert(Tensor(hb.data(), kBf, Device::CPU, {1000}), d.t);
  expect_close(download(*be.gpu, d.t), round_all(x, kBf), 0, 0, "upload_convert bf16 → f32");
  auto e = empty(*be.gpu, kF32, {1000});
  be.gpu->copy_on_device(e.t.data, d.t.data, 4000);
  be.gpu->fill_zero(e.t.data, 400);
  auto want = round_all(x, kBf);
  std::fill_n(want.begin(), 100, 0.0f);
  expect_close(download(*be.gpu, e.t), want, 0, 0, "copy_on_device + fill_zero");
}

}  // namespace
}  // namespace pagoda::test

// The Gated DeltaNet ops of the CPU backend (causal_conv1d_silu, gated_delta_rule, gated_rms_norm)
// against naive formulas written here in double precision: docs/models.md step 2 for the conv, the
// token-by-token recurrence of step 6 for the (chunked) delta rule, step 7 for the gated norm.
// Batches mix prefill chunks (crossing several 64-token chunks, odd lengths) with decodes, fresh
// and continuing sequences, and state slots in shuffled order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "cpu_test_util.h"

namespace pagoda {
namespace {

using cpu_test::Blob;
using cpu_test::random_vector;

// The varlen layout of one step, as the ops read it from StepMeta.
struct Varlen {
  std::vector<int32_t> cu{0}, slots, init;
  StepMeta meta;

  Varlen(const std::vector<int64_t>& lens, const std::vector<int32_t>& slot_of,
         const std::vector<int32_t>& init_of)
      : slots(slot_of), init(init_of) {
    for (int64_t n : lens) cu.push_back(cu.back() + static_cast<int32_t>(n));
    meta.cu_seqlens_q = cpu_test::i32_tensor(cu);
    meta.state_slots = cpu_test::i32_tensor(slots);
    meta.has_initial_state = cpu_test::i32_tensor(init);
    meta.num_seqs = static_cast<int32_t>(lens.size());
    meta.num_tokens = cu.back();
    meta.max_query_len = static_cast<int32_t>(*std::max_element(lens.begin(), lens.end()));
  }
  int64_t start(size_t s) const { return cu[s]; }
  int64_t len(size_t s) const { return cu[s + 1] - cu[s]; }
};

std::vector<int32_t> shuffled_slots(std::mt19937& rng, int64_t num_slots, size_t n) {
  std::vector<int32_t> all(static_cast<size_t>(num_slots));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(n);
  return all;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double softplus(double x) { return std::log1p(std::exp(x)); }

// ---- causal_conv1d_silu ------------------------------------------------------------------------

// out[t, c] = silu(Σ_j w[c, j] · in[t − (K−1) + j, c]), inputs before the start from the state.
void naive_conv(const std::vector<float>& x, int64_t ldx, const std::vector<float>& w,
                std::vector<float>& state, int64_t C, int64_t K, const Varlen& vl,
                std::vector<double>& out) {
  const int64_t H = K - 1;
  for (size_t s = 0; s < vl.slots.size(); ++s) {
    float* st = &state[static_cast<size_t>(vl.slots[s] * C * H)];
    for (int64_t c = 0; c < C; ++c) {
      std::vector<double> seq;  // history then the new inputs
      for (int64_t j = 0; j < H; ++j) seq.push_back(vl.init[s] ? st[c * H + j] : 0.0);
      for (int64_t t = 0; t < vl.len(s); ++t)
        seq.push_back(x[static_cast<size_t>((vl.start(s) + t) * ldx + c)]);
      for (int64_t t = 0; t < vl.len(s); ++t) {
        double acc = 0;
        for (int64_t j = 0; j < K; ++j) acc += w[static_cast<size_t>(c * K + j)] * seq[static_cast<size_t>(t + j)];
        out[static_cast<size_t>((vl.start(s) + t) * C + c)] = silu(acc);
      }
      for (int64_t j = 0; j < H; ++j)
        st[c * H + j] = static_cast<float>(seq[seq.size() - static_cast<size_t>(H) + static_cast<size_t>(j)]);
    }
  }
}

void run_conv_case(DType wdtype, int64_t C, int64_t K, const std::vector<int64_t>& lens,
                   uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t num_slots = static_cast<int64_t>(lens.size()) + 3, H = K - 1;
  std::vector<int32_t> init(lens.size());
  for (size_t s = 0; s < lens.size(); ++s) init[s] = static_cast<int32_t>(s % 3 != 0);
  Varlen vl(lens, shuffled_slots(rng, num_slots, lens.size()), init);
  const int64_t T = vl.meta.num_tokens, ldx = C + 7;  // x is a strided view of a wider matrix

  std::vector<float> x = random_vector(rng, T * ldx, -2.0f, 2.0f);
  Blob wb(wdtype, C * K);
  std::vector<float> w = random_vector(rng, C * K);
  for (int64_t i = 0; i < C * K; ++i) {
    wb.set(i, w[static_cast<size_t>(i)]);
    w[static_cast<size_t>(i)] = wb.get(i);  // the reference uses the stored values
  }
  std::vector<float> state = random_vector(rng, num_slots * C * H, -2.0f, 2.0f);
  std::vector<float> ref_state = state;
  std::vector<double> ref(static_cast<size_t>(T * C));
  naive_conv(x, ldx, w, ref_state, C, K, vl, ref);

  auto be = make_backend("cpu", 3);
  Tensor xt(x.data(), DType::F32, Device::CPU, {T, C});
  xt.row_stride = ldx;
  Tensor wt = wb.tensor({C, K});
  Tensor st(state.data(), DType::F32, Device::CPU, {num_slots, C, H});
  std::vector<float> out(static_cast<size_t>(T * C), NAN);
  Tensor ot(out.data(), DType::F32, Device::CPU, {T, C});
  be->causal_conv1d_silu(xt, wt, st, vl.meta, ot);

  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_NEAR(out[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << "out element " << i;
  // Exactly the last K-1 inputs (copied, not computed); untouched slots keep their values.
  for (size_t i = 0; i < state.size(); ++i) ASSERT_EQ(state[i], ref_state[i]) << "state " << i;
}

TEST(CpuGdn, CausalConvMatchesFormulaOnMixedBatch) {
  run_conv_case(DType::F32, 96, 4, {1, 70, 2, 1, 5, 130, 1, 3}, 1);
}

TEST(CpuGdn, CausalConvBf16WeightsOtherKernelAndWideChannels) {
  run_conv_case(DType::BF16, 200, 4, {3, 1, 1, 66}, 2);
  run_conv_case(DType::F32, 70, 2, {1, 9, 1}, 3);
  run_conv_case(DType::F32, 40, 5, {2, 1, 4, 1}, 4);  // chunks shorter than the history
}

TEST(CpuGdn, CausalConvDecodeStepsEqualOnePrefill) {
  const int64_t C = 48, K = 4, N = 23;
  std::mt19937 rng(5);
  std::vector<float> x = random_vector(rng, N * C), w = random_vector(rng, C * K);
  auto be = make_backend("cpu", 2);
  Tensor wt(w.data(), DType::F32, Device::CPU, {C, K});
  std::vector<float> s1(static_cast<size_t>(2 * C * (K - 1)), 9.0f), s2 = s1;
  std::vector<float> o1(static_cast<size_t>(N * C)), o2 = o1;
  {
    Varlen vl({N}, {1}, {0});
    Tensor xt(x.data(), DType::F32, Device::CPU, {N, C}), ot(o1.data(), DType::F32, Device::CPU, {N, C});
    Tensor st(s1.data(), DType::F32, Device::CPU, {2, C, K - 1});
    be->causal_conv1d_silu(xt, wt, st, vl.meta, ot);
  }
  for (int64_t t = 0; t < N; ++t) {
    Varlen vl({1}, {0}, {t > 0});
    Tensor xt(&x[static_cast<size_t>(t * C)], DType::F32, Device::CPU, {1, C});
    Tensor ot(&o2[static_cast<size_t>(t * C)], DType::F32, Device::CPU, {1, C});
    Tensor st(s2.data(), DType::F32, Device::CPU, {2, C, K - 1});
    be->causal_conv1d_silu(xt, wt, st, vl.meta, ot);
  }
  EXPECT_EQ(o1, o2);
  for (int64_t i = 0; i < C * (K - 1); ++i)
    EXPECT_EQ(s1[static_cast<size_t>(C * (K - 1) + i)], s2[static_cast<size_t>(i)]);
}

// ---- gated_delta_rule --------------------------------------------------------------------------

struct GdnShape {
  int64_t Hk, Hv, dk, dv;
};

// Host inputs of one gated_delta_rule call. q, k, v are views into one [T, C] conv output as in
// the model; b and a are views into a wider projection output.
struct GdnInputs {
  GdnShape d;
  int64_t T, C, ldp;
  std::vector<float> conv, proj, A_log, dt_bias;

  GdnInputs(GdnShape shape, int64_t tokens, std::mt19937& rng, float a_log_lo, float a_log_hi)
      : d(shape), T(tokens), C(2 * shape.Hk * shape.dk + shape.Hv * shape.dv),
        ldp(2 * shape.Hv + 5) {
    conv = random_vector(rng, T * C, -1.0f, 1.0f);
    proj = random_vector(rng, T * ldp, -2.0f, 2.0f);
    A_log = random_vector(rng, d.Hv, a_log_lo, a_log_hi);
    dt_bias = random_vector(rng, d.Hv, -0.5f, 0.5f);
  }
  float q(int64_t t, int64_t h, int64_t i) const { return conv[static_cast<size_t>(t * C + h * d.dk + i)]; }
  float k(int64_t t, int64_t h, int64_t i) const {
    return conv[static_cast<size_t>(t * C + d.Hk * d.dk + h * d.dk + i)];
  }
  float v(int64_t t, int64_t h, int64_t j) const {
    return conv[static_cast<size_t>(t * C + 2 * d.Hk * d.dk + h * d.dv + j)];
  }
  float b(int64_t t, int64_t h) const { return proj[static_cast<size_t>(t * ldp + 1 + h)]; }
  float a(int64_t t, int64_t h) const { return proj[static_cast<size_t>(t * ldp + 1 + d.Hv + h)]; }

  Tensor view(int64_t col0, int64_t heads, int64_t dim, int64_t row0, int64_t rows) {
    Tensor t(&conv[static_cast<size_t>(row0 * C + col0)], DType::F32, Device::CPU, {rows, heads, dim});
    t.row_stride = C;
    return t;
  }
  Tensor proj_view(int64_t col0, int64_t row0, int64_t rows) {
    Tensor t(&proj[static_cast<size_t>(row0 * ldp + col0)], DType::F32, Device::CPU, {rows, d.Hv});
    t.row_stride = ldp;
    return t;
  }
};

// Calls the op on rows [row0, row0 + rows) of the inputs.
void call_gdn(Backend& be, GdnInputs& in, int64_t row0, int64_t rows, std::vector<float>& state,
              int64_t num_slots, const StepMeta& meta, std::vector<float>& out) {
  const GdnShape& d = in.d;
  Tensor q = in.view(0, d.Hk, d.dk, row0, rows);
  Tensor k = in.view(d.Hk * d.dk, d.Hk, d.dk, row0, rows);
  Tensor v = in.view(2 * d.Hk * d.dk, d.Hv, d.dv, row0, rows);
  Tensor b = in.proj_view(1, row0, rows), a = in.proj_view(1 + d.Hv, row0, rows);
  Tensor A_log(in.A_log.data(), DType::F32, Device::CPU, {d.Hv});
  Tensor dt_bias(in.dt_bias.data(), DType::F32, Device::CPU, {d.Hv});
  Tensor st(state.data(), DType::F32, Device::CPU, {num_slots, d.Hv, d.dk, d.dv});
  Tensor ot(&out[static_cast<size_t>(row0 * d.Hv * d.dv)], DType::F32, Device::CPU,
            {rows, d.Hv, d.dv});
  be.gated_delta_rule(q, k, v, b, a, A_log, dt_bias, st, meta, ot);
}

// docs/models.md steps 4-6, token by token, in double: out [T, Hv, dv], state updated.
void naive_gdn(const GdnInputs& in, const Varlen& vl, std::vector<double>& state,
               std::vector<double>& out) {
  const GdnShape& d = in.d;
  const int64_t r = d.Hv / d.Hk;
  for (size_t s = 0; s < vl.slots.size(); ++s)
    for (int64_t h = 0; h < d.Hv; ++h) {
      double* S = &state[static_cast<size_t>((vl.slots[s] * d.Hv + h) * d.dk * d.dv)];
      if (!vl.init[s]) std::fill(S, S + d.dk * d.dv, 0.0);
      const int64_t kh = h / r;
      for (int64_t t = vl.start(s); t < vl.start(s) + vl.len(s); ++t) {
        double qn = 0, kn = 0;
        for (int64_t i = 0; i < d.dk; ++i) {
          qn += double(in.q(t, kh, i)) * in.q(t, kh, i);
          kn += double(in.k(t, kh, i)) * in.k(t, kh, i);
        }
        std::vector<double> q(static_cast<size_t>(d.dk)), k(static_cast<size_t>(d.dk));
        for (int64_t i = 0; i < d.dk; ++i) {
          q[static_cast<size_t>(i)] = in.q(t, kh, i) / std::sqrt(qn + 1e-6) / std::sqrt(double(d.dk));
          k[static_cast<size_t>(i)] = in.k(t, kh, i) / std::sqrt(kn + 1e-6);
        }
        const double beta = 1.0 / (1.0 + std::exp(-double(in.b(t, h))));
        const double g = -std::exp(double(in.A_log[static_cast<size_t>(h)])) *
                         softplus(double(in.a(t, h)) + in.dt_bias[static_cast<size_t>(h)]);
        for (int64_t e = 0; e < d.dk * d.dv; ++e) S[e] *= std::exp(g);
        for (int64_t j = 0; j < d.dv; ++j) {
          double sk = 0;
          for (int64_t i = 0; i < d.dk; ++i) sk += S[i * d.dv + j] * k[static_cast<size_t>(i)];
          const double delta = beta * (in.v(t, h, j) - sk);
          for (int64_t i = 0; i < d.dk; ++i) S[i * d.dv + j] += k[static_cast<size_t>(i)] * delta;
        }
        for (int64_t j = 0; j < d.dv; ++j) {
          double o = 0;
          for (int64_t i = 0; i < d.dk; ++i) o += S[i * d.dv + j] * q[static_cast<size_t>(i)];
          out[static_cast<size_t>((t * d.Hv + h) * d.dv + j)] = o;
        }
      }
    }
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

void run_gdn_case(GdnShape d, const std::vector<int64_t>& lens, uint32_t seed, float a_log_lo,
                  float a_log_hi) {
  SCOPED_TRACE("Hk " + std::to_string(d.Hk) + " Hv " + std::to_string(d.Hv) + " dk " +
               std::to_string(d.dk) + " dv " + std::to_string(d.dv));
  std::mt19937 rng(seed);
  const int64_t num_slots = static_cast<int64_t>(lens.size()) + 2;
  std::vector<int32_t> init(lens.size());
  for (size_t s = 0; s < lens.size(); ++s) init[s] = static_cast<int32_t>(s % 3 != 1);
  Varlen vl(lens, shuffled_slots(rng, num_slots, lens.size()), init);
  const int64_t T = vl.meta.num_tokens;
  GdnInputs in(d, T, rng, a_log_lo, a_log_hi);

  const int64_t state_n = num_slots * d.Hv * d.dk * d.dv;
  std::vector<float> state = random_vector(rng, state_n, -0.5f, 0.5f);
  std::vector<double> ref_state(state.begin(), state.end()), ref(static_cast<size_t>(T * d.Hv * d.dv));
  naive_gdn(in, vl, ref_state, ref);

  auto be = make_backend("cpu", 3);
  std::vector<float> out(static_cast<size_t>(T * d.Hv * d.dv), NAN);
  call_gdn(*be, in, 0, T, state, num_slots, vl.meta, out);

  // fp32 against double: errors scale with the magnitudes involved (observed ~1e-7 of them).
  const double out_tol = 2e-6 * (1 + max_abs(ref)), state_tol = 2e-6 * (1 + max_abs(ref_state));
  double out_err = 0, state_err = 0;
  for (size_t i = 0; i < out.size(); ++i) out_err = std::max(out_err, std::fabs(out[i] - ref[i]));
  for (size_t i = 0; i < state.size(); ++i)
    state_err = std::max(state_err, std::fabs(state[i] - ref_state[i]));
  EXPECT_LT(out_err, out_tol) << "max |out - naive|";
  EXPECT_LT(state_err, state_tol) << "max |state - naive|";
}

TEST(CpuGdn, DeltaRuleMatchesRecurrenceOnMixedBatch) {
  // Prefill chunks crossing 64-token chunks at odd lengths, decodes, a 64 and a 65; Hv = 2·Hk,
  // dk ≠ dv (the tiny text fixture's shape).
  run_gdn_case({2, 4, 16, 24}, {1, 150, 1, 64, 65, 3, 1, 200, 2}, 11, -4.0f, 0.0f);
}

TEST(CpuGdn, DeltaRuleWeakDecayAndOtherShapes) {
  // A_log ≈ −8: almost no decay, so the state accumulates over hundreds of tokens.
  run_gdn_case({2, 2, 32, 32}, {257, 1, 31}, 12, -9.0f, -7.0f);
  run_gdn_case({1, 3, 8, 40}, {1, 1, 129, 2}, 13, -4.0f, 0.0f);
  run_gdn_case({2, 2, 40, 8}, {66, 1}, 14, -4.0f, 0.0f);
}

TEST(CpuGdn, DeltaRuleReleasedModelHeadDims) {
  // dk = dv = 128 as in the released checkpoints; nothing caps the head dims.
  run_gdn_case({1, 2, 128, 128}, {1, 100, 1}, 15, -4.0f, 0.0f);
}

// The state after N tokens prefilled (chunked form) vs decoded one at a time (recurrent step) vs
// prefilled in chunks of odd sizes: equal to fp32 accuracy (docs/models.md: ~1e-5).
TEST(CpuGdn, PrefillDecodeAndSplitPrefillAgree) {
  const GdnShape d{2, 4, 32, 48};
  const int64_t N = 200;
  std::mt19937 rng(21);
  GdnInputs in(d, N, rng, -6.0f, -1.0f);
  auto be = make_backend("cpu", 3);
  const int64_t num_slots = 3, per_slot = d.Hv * d.dk * d.dv;
  const size_t out_n = static_cast<size_t>(N * d.Hv * d.dv);

  auto run_pieces = [&](const std::vector<int64_t>& pieces, int32_t slot,
                        std::vector<float>& out) {
    std::vector<float> state(static_cast<size_t>(num_slots * per_slot), 123.0f);  // stale
    int64_t at = 0;
    for (int64_t n : pieces) {
      Varlen vl({n}, {slot}, {at > 0});
      call_gdn(*be, in, at, n, state, num_slots, vl.meta, out);
      at += n;
    }
    EXPECT_EQ(at, N);
    return std::vector<float>(state.begin() + slot * per_slot, state.begin() + (slot + 1) * per_slot);
  };
  std::vector<float> o_once(out_n), o_decode(out_n), o_split(out_n);
  const std::vector<float> s_once = run_pieces({N}, 2, o_once);
  const std::vector<float> s_decode = run_pieces(std::vector<int64_t>(N, 1), 0, o_decode);
  const std::vector<float> s_split = run_pieces({37, 64, 1, 98}, 1, o_split);

  auto rel_err = [](const std::vector<float>& x, const std::vector<float>& y) {
    double m = 0, e = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      m = std::max(m, double(std::fabs(y[i])));
      e = std::max(e, double(std::fabs(x[i] - y[i])));
    }
    return e / m;
  };
  EXPECT_LT(rel_err(s_once, s_decode), 1e-5) << "state: one-shot prefill vs token-by-token decode";
  EXPECT_LT(rel_err(s_split, s_once), 1e-5) << "state: 37+64+1+98 vs one-shot prefill";
  EXPECT_LT(rel_err(o_once, o_decode), 1e-5) << "outputs: prefill vs decode";
  EXPECT_LT(rel_err(o_split, o_once), 1e-5) << "outputs: split vs one-shot prefill";
}

TEST(CpuGdn, DeltaRuleRejectsBadArguments) {
  const GdnShape d{2, 4, 16, 24};
  std::mt19937 rng(31);
  GdnInputs in(d, 4, rng, -4.0f, 0.0f);
  auto be = make_backend("cpu", 1);
  std::vector<float> state(static_cast<size_t>(2 * d.Hv * d.dk * d.dv)), out(4 * 4 * 24);
  Varlen bad_slot({2, 2}, {0, 2}, {0, 0});
  EXPECT_THROW(call_gdn(*be, in, 0, 4, state, 2, bad_slot.meta, out), Error);
  Varlen shared_slot({2, 2}, {1, 1}, {0, 0});
  EXPECT_THROW(call_gdn(*be, in, 0, 4, state, 2, shared_slot.meta, out), Error);
  Varlen short_cu({2, 1}, {0, 1}, {0, 0});
  EXPECT_THROW(call_gdn(*be, in, 0, 4, state, 2, short_cu.meta, out), Error);
  // Hv not a multiple of Hk.
  GdnInputs odd({2, 3, 16, 24}, 4, rng, -4.0f, 0.0f);
  Varlen ok({4}, {0}, {0});
  std::vector<float> state3(static_cast<size_t>(2 * 3 * 16 * 24));
  EXPECT_THROW(call_gdn(*be, odd, 0, 4, state3, 2, ok.meta, out), Error);
}

// ---- gated_rms_norm ----------------------------------------------------------------------------

TEST(CpuGdn, GatedRmsNormMatchesFormulaInPlace) {
  const int64_t T = 7, Hv = 3, dv = 24, ldz = Hv * dv + 11;
  const float eps = 1e-6f;
  std::mt19937 rng(41);
  std::vector<float> x = random_vector(rng, T * Hv * dv, -3.0f, 3.0f);
  std::vector<float> z = random_vector(rng, T * ldz, -4.0f, 4.0f);
  Blob w(DType::BF16, dv);
  for (int64_t i = 0; i < dv; ++i) w.set(i, 1.0f + 0.3f * static_cast<float>(i % 5) - 0.5f);
  std::vector<double> ref(x.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hv; ++h) {
      const float* xi = &x[static_cast<size_t>((t * Hv + h) * dv)];
      double ss = 0;
      for (int64_t i = 0; i < dv; ++i) ss += double(xi[i]) * xi[i];
      const double inv = 1.0 / std::sqrt(ss / dv + eps);
      for (int64_t i = 0; i < dv; ++i)
        ref[static_cast<size_t>((t * Hv + h) * dv + i)] =
            xi[i] * inv * w.get(i) * silu(z[static_cast<size_t>(t * ldz + 2 + h * dv + i)]);
    }
  auto be = make_backend("cpu", 2);
  Tensor xt(x.data(), DType::F32, Device::CPU, {T, Hv, dv});
  Tensor zt(&z[2], DType::F32, Device::CPU, {T, Hv, dv});
  zt.row_stride = ldz;
  be->gated_rms_norm(xt, zt, w.tensor({dv}), eps, xt);  // out aliases x
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << i;
}

TEST(CpuGdn, GatedRmsNormUsesPlainWeight) {
  // w = 0 gives 0 with plain w (it would give the normed input with 1 + w).
  std::vector<float> x{1, 2, 3, 4}, z{1, 1, 1, 1}, w{0, 0, 0, 0}, out(4, NAN);
  auto be = make_backend("cpu", 1);
  Tensor xt(x.data(), DType::F32, Device::CPU, {1, 1, 4}), zt(z.data(), DType::F32, Device::CPU, {1, 1, 4});
  Tensor ot(out.data(), DType::F32, Device::CPU, {1, 1, 4});
  be->gated_rms_norm(xt, zt, Tensor(w.data(), DType::F32, Device::CPU, {4}), 1e-6f, ot);
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace pagoda

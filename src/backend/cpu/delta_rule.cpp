// The gated delta rule (docs/models.md, Gated DeltaNet steps 4-6) over a varlen batch, in fp32: the
// chunked form for prefill chunks, the recurrent step for decodes, one task per (sequence, value
// head), each starting from its slot's state and writing the final state back in place.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/check.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/state_sequences.h"

namespace pagoda::cpu {

namespace {

constexpr int64_t kChunk = 64;     // tokens per chunk of the chunked form
constexpr float kL2Eps = 1e-6f;    // q̂ = q / sqrt(Σq² + eps), same for k

struct Dims {
  int64_t Hk, Hv, dk, dv, ratio;  // ratio = Hv / Hk: value head h reads key head h / ratio
};

// Everything one (sequence, head) task needs besides its scratch.
struct Inputs {
  const Tensor &q, &k, &v, &b, &a;
  std::vector<float> neg_exp_a_log;  // −exp(A_log[h])
  std::vector<float> dt_bias;
  float* state;                      // [slots, Hv, dk, dv]
  Tensor& out;
  Dims d;
};

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Per-task buffers for one chunk (reused across chunks and tasks of a thread).
struct Scratch {
  std::vector<float> q, k, u, w, beta, gamma, tmp;
  std::vector<float> qg, kt;  // Q̃ ⊙ e^γ [L, dk] and the decayed K̂ transposed [dk, L]
  void size_for(const Dims& d) {
    tmp.resize(static_cast<size_t>(d.dv));
    qg.resize(static_cast<size_t>(kChunk * d.dk));
    kt.resize(static_cast<size_t>(kChunk * d.dk));
    q.resize(static_cast<size_t>(kChunk * d.dk));
    k.resize(static_cast<size_t>(kChunk * d.dk));
    w.resize(static_cast<size_t>(kChunk * d.dk));
    u.resize(static_cast<size_t>(kChunk * d.dv));
    beta.resize(kChunk);
    gamma.resize(kChunk);
  }
};

// Eight partial sums, so the loop vectorises without reassociating floats behind our back.
float dot(const float* x, const float* y, int64_t n) {
  float part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) part[j] += x[i + j] * y[i + j];
  float s =
      ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

// y += alpha * x over n floats.
void axpy(float alpha, const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// Loads rows [t0, t0 + L) of a sequence for value head h into the scratch: q̃ (l2-normalised and
// scaled by 1/sqrt(dk)) and k̂ (l2-normalised) of its key head, v, β and the gate log-decay g (in
// s.gamma, not yet accumulated).
void load_chunk(const Inputs& in, int64_t row0, int64_t L, int64_t h, Scratch& s) {
  const Dims& d = in.d;
  const int64_t kh = h / d.ratio;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.dk));
  for (int64_t r = 0; r < L; ++r) {
    const int64_t row = row0 + r;
    const float* qr = static_cast<const float*>(in.q.row(row)) + kh * d.dk;
    const float* kr = static_cast<const float*>(in.k.row(row)) + kh * d.dk;
    const float* vr = static_cast<const float*>(in.v.row(row)) + h * d.dv;
    float* qs = &s.q[static_cast<size_t>(r * d.dk)];
    float* ks = &s.k[static_cast<size_t>(r * d.dk)];
    const float qinv = 1.0f / std::sqrt(dot(qr, qr, d.dk) + kL2Eps);
    const float kinv = 1.0f / std::sqrt(dot(kr, kr, d.dk) + kL2Eps);
    for (int64_t i = 0; i < d.dk; ++i) {
      qs[i] = qr[i] * qinv * scale;
      ks[i] = kr[i] * kinv;
    }
    std::copy(vr, vr + d.dv, &s.u[static_cast<size_t>(r * d.dv)]);
    const float bv = static_cast<const float*>(in.b.row(row))[h];
    const float av = static_cast<const float*>(in.a.row(row))[h];
    s.beta[static_cast<size_t>(r)] = 1.0f / (1.0f + std::exp(-bv));
    s.gamma[static_cast<size_t>(r)] =
        in.neg_exp_a_log[static_cast<size_t>(h)] * softplus(av + in.dt_bias[static_cast<size_t>(h)]);
  }
}

// One token of the recurrence: S ← e^g S; δ = β (v − Sᵀk̂); S ← S + k̂ δᵀ; o = Sᵀq̃.
// q, k [dk], v [dv] (overwritten with δ), S [dk, dv], o [dv]. Two passes over S (a read, then a
// read-write): decode is bound by the state's memory traffic.
void recurrent_step(const float* q, const float* k, float* v, float beta, float g, float* S,
                    float* o, const Dims& d, float* ks) {
  const float decay = std::exp(g);
  std::fill(ks, ks + d.dv, 0.0f);
  for (int64_t i = 0; i < d.dk; ++i) axpy(k[i], S + i * d.dv, ks, d.dv);  // S₀ᵀk̂
  for (int64_t j = 0; j < d.dv; ++j) v[j] = beta * (v[j] - decay * ks[j]);
  std::fill(o, o + d.dv, 0.0f);
  for (int64_t i = 0; i < d.dk; ++i) {
    float* __restrict Si = S + i * d.dv;
    const float ki = k[i], qi = q[i];
    for (int64_t j = 0; j < d.dv; ++j) {
      Si[j] = decay * Si[j] + ki * v[j];
      o[j] += qi * Si[j];
    }
  }
}

// One chunk of L <= kChunk tokens in the chunked form of docs/models.md, from the scratch that
// load_chunk filled. Running only the L real rows is exactly the padded computation: padded rows
// (β = 0, g = 0) add nothing to U, W or the state, and leave γ_last unchanged.
// S [dk, dv] is updated in place; output row r goes to o_rows[r] (dv floats each).
void chunk_step(int64_t L, float* S, float* const* o_rows, const Dims& d, Scratch& s) {
  const int64_t dk = d.dk, dv = d.dv;
  float* gam = s.gamma.data();
  for (int64_t r = 1; r < L; ++r) gam[r] += gam[r - 1];  // γ_r = Σ_{u<=r} g_u
  auto K = [&](int64_t r) { return &s.k[static_cast<size_t>(r * dk)]; };
  auto Q = [&](int64_t r) { return &s.q[static_cast<size_t>(r * dk)]; };
  auto U = [&](int64_t r) { return &s.u[static_cast<size_t>(r * dv)]; };
  auto W = [&](int64_t r) { return &s.w[static_cast<size_t>(r * dk)]; };

  // A[r, s] = β_r (k̂_r·k̂_s) e^{γ_r−γ_s}; U = (I + A)⁻¹ (β ⊙ V) and W = (I + A)⁻¹ (β e^γ ⊙ K̂)
  // by forward substitution (row r needs rows s < r only), without forming (I + A)⁻¹.
  for (int64_t r = 0; r < L; ++r) {
    const float br = s.beta[static_cast<size_t>(r)];
    float* ur = U(r);
    float* wr = W(r);
    const float* kr = K(r);
    const float bg = br * std::exp(gam[r]);
    for (int64_t j = 0; j < dv; ++j) ur[j] *= br;
    for (int64_t i = 0; i < dk; ++i) wr[i] = bg * kr[i];
    for (int64_t c = 0; c < r; ++c) {
      const float arc = br * dot(kr, K(c), dk) * std::exp(gam[r] - gam[c]);
      axpy(-arc, U(c), ur, dv);
      axpy(-arc, W(c), wr, dk);
    }
  }
  // The three products with S₀ or into S below are row-broadcast GEMMs (kernels.h pv_accumulate:
  // four rows per load of S), summed over i in the same order as one axpy per i.
  const Kernels& kern = kernels();
  // Vnew = U − W·S₀ (in U).
  for (int64_t e = 0; e < L * dk; ++e) s.w[static_cast<size_t>(e)] = -s.w[static_cast<size_t>(e)];
  kern.pv_accumulate(s.w.data(), L, dk, S, dk, dv, dv, s.u.data(), dv);
  // O = (Q̃ ⊙ e^γ)·S₀ + ((Q̃K̂ᵀ) ⊙ D)·Vnew, D[r, c] = e^{γ_r−γ_c} for c <= r. The output rows are
  // consecutive rows of out: one stride apart.
  const int64_t ldo = L > 1 ? o_rows[1] - o_rows[0] : dv;
  for (int64_t r = 0; r < L; ++r) {
    std::fill(o_rows[r], o_rows[r] + dv, 0.0f);
    const float eg = std::exp(gam[r]);
    for (int64_t i = 0; i < dk; ++i) s.qg[static_cast<size_t>(r * dk + i)] = Q(r)[i] * eg;
  }
  kern.pv_accumulate(s.qg.data(), L, dk, S, dk, dv, dv, o_rows[0], ldo);
  for (int64_t r = 0; r < L; ++r) {
    float* o = o_rows[r];
    const float* qr = Q(r);
    for (int64_t c = 0; c <= r; ++c) axpy(dot(qr, K(c), dk) * std::exp(gam[r] - gam[c]), U(c), o, dv);
  }
  // S_end = e^{γ_last}·S₀ + (K̂ ⊙ e^{γ_last−γ})ᵀ·Vnew.
  const float last = gam[L - 1];
  const float decay = std::exp(last);
  for (int64_t r = 0; r < L; ++r) {
    const float f = std::exp(last - gam[r]);
    const float* kr = K(r);
    for (int64_t i = 0; i < dk; ++i) s.kt[static_cast<size_t>(i * L + r)] = kr[i] * f;
  }
  for (int64_t e = 0; e < dk * dv; ++e) S[e] *= decay;
  kern.pv_accumulate(s.kt.data(), dk, L, s.u.data(), L, dv, dv, S, dv);
}

// All new tokens of one sequence for value head h.
void run_sequence_head(const Inputs& in, const StateSequence& sq, int64_t h, Scratch& s) {
  const Dims& d = in.d;
  float* S = in.state + (sq.slot * d.Hv + h) * d.dk * d.dv;
  if (!sq.has_initial) std::fill(S, S + d.dk * d.dv, 0.0f);
  auto out_row = [&](int64_t row) { return static_cast<float*>(in.out.row(row)) + h * d.dv; };
  if (sq.len == 1) {
    load_chunk(in, sq.start, 1, h, s);
    recurrent_step(s.q.data(), s.k.data(), s.u.data(), s.beta[0], s.gamma[0], S,
                   out_row(sq.start), d, s.tmp.data());
    return;
  }
  float* o_rows[kChunk];
  for (int64_t t0 = 0; t0 < sq.len; t0 += kChunk) {
    const int64_t L = std::min(kChunk, sq.len - t0);
    load_chunk(in, sq.start + t0, L, h, s);
    for (int64_t r = 0; r < L; ++r) o_rows[r] = out_row(sq.start + t0 + r);
    chunk_step(L, S, o_rows, d, s);
  }
}

void check_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& b,
                const Tensor& a, const Tensor& A_log, const Tensor& dt_bias, const Tensor& state,
                const StepMeta& meta, const Tensor& out) {
  const char* op = "gated_delta_rule";
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&q, "q"}, {&k, "k"},
                                {&v, "v"}, {&b, "b"}, {&a, "a"}, {&state, "state"}, {&out, "out"}})
    require_dtype(*t, DType::F32, op, name);
  require(q.ndim == 3 && k.ndim == 3 && v.ndim == 3 && out.ndim == 3, op,
          "q, k must be [T, Hk, dk], v and out [T, Hv, dv]");
  const int64_t T = q.size(0), Hk = q.size(1), dk = q.size(2), Hv = v.size(1), dv = v.size(2);
  require(k.size(0) == T && k.size(1) == Hk && k.size(2) == dk, op, "k must have the shape of q");
  require(v.size(0) == T && out.size(0) == T && out.size(1) == Hv && out.size(2) == dv, op,
          "v and out must be [T, Hv, dv]");
  require(Hk > 0 && dk > 0 && dv > 0 && Hv % Hk == 0, op,
          "Hv must be a positive multiple of Hk, dk and dv positive");
  require(b.size(0) == T && b.row_numel() == Hv && a.size(0) == T && a.row_numel() == Hv, op,
          "b and a must be [T, Hv]");
  require(is_float_dtype(A_log.dtype) && A_log.numel() == Hv && A_log.is_contiguous() &&
              is_float_dtype(dt_bias.dtype) && dt_bias.numel() == Hv && dt_bias.is_contiguous(),
          op, "A_log and dt_bias must be [Hv] float tensors");
  require(state.ndim == 4 && state.dtype == DType::F32 && state.is_contiguous() && state.size(1) == Hv &&
              state.size(2) == dk && state.size(3) == dv,
          op, "state must be a contiguous F32 [slots, Hv, dk, dv] tensor (the CPU backend keeps the recurrent state in "
          "float32: --mamba-ssm-cache-dtype bfloat16 is for cuda)");
  require(meta.num_tokens == T, op, "q must have meta.num_tokens rows");
  // Rows of out are written while q, k, v of other tokens are still to be read.
  require(out.data != q.data && out.data != k.data && out.data != v.data, op,
          "out must not alias q, k or v");
}

}  // namespace

void gated_delta_rule(ThreadPool& pool, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& b, const Tensor& a, const Tensor& A_log, const Tensor& dt_bias,
                      Tensor& state, const StepMeta& meta, Tensor& out) {
  check_args(q, k, v, b, a, A_log, dt_bias, state, meta, out);
  const char* op = "gated_delta_rule";
  const Dims d{q.size(1), v.size(1), q.size(2), v.size(2), v.size(1) / q.size(1)};
  const std::vector<StateSequence> seqs = state_sequences(meta, q.size(0), state.size(0), op);
  Inputs in{q, k, v, b, a, {}, {}, state.ptr<float>(), out, d};
  in.neg_exp_a_log.resize(static_cast<size_t>(d.Hv));
  in.dt_bias.resize(static_cast<size_t>(d.Hv));
  for (int64_t h = 0; h < d.Hv; ++h) {
    in.neg_exp_a_log[static_cast<size_t>(h)] = -std::exp(load_scalar(A_log.data, A_log.dtype, h));
    in.dt_bias[static_cast<size_t>(h)] = load_scalar(dt_bias.data, dt_bias.dtype, h);
  }
  // Prefill chunks and decodes run as two passes: the pool hands out equal runs of tasks, so
  // mixing a few long tasks among many short ones would put the long ones on one thread.
  std::vector<int64_t> long_tasks, short_tasks;  // seq * Hv + h
  std::vector<size_t> order(seqs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return seqs[x].len > seqs[y].len; });
  for (size_t i : order)
    for (int64_t h = 0; h < d.Hv; ++h)
      (seqs[i].len > 1 ? long_tasks : short_tasks).push_back(static_cast<int64_t>(i) * d.Hv + h);
  // Work of one (sequence, head) task per token: the recurrent step is ~4 passes over the dk x dv
  // state; the chunked form adds the intra-chunk products (about kChunk x (dk + dv) per token).
  int64_t long_tokens = 0;
  for (const StateSequence& sq : seqs)
    if (sq.len > 1) long_tokens += sq.len;
  const double step_cost = static_cast<double>(4 * d.dk * d.dv + 8 * (d.dk + d.dv));
  const double chunk_cost = static_cast<double>(6 * d.dk * d.dv + kChunk * 2 * (d.dk + d.dv));
  for (const std::vector<int64_t>* tasks : {&long_tasks, &short_tasks}) {
    if (tasks->empty()) continue;
    const auto n_tasks = static_cast<int64_t>(tasks->size());
    const double cost =
        tasks == &short_tasks
            ? step_cost
            : chunk_cost * static_cast<double>(long_tokens * d.Hv) / static_cast<double>(n_tasks);
    pool.parallel_for(n_tasks, [&](int64_t begin, int64_t end) {
      thread_local Scratch scratch;
      scratch.size_for(d);
      for (int64_t i = begin; i < end; ++i) {
        const int64_t task = (*tasks)[static_cast<size_t>(i)];
        run_sequence_head(in, seqs[static_cast<size_t>(task / d.Hv)], task % d.Hv, scratch);
      }
    }, 1, cost);
  }
}

}  // namespace pagoda::cpu

// Causal depthwise conv1d + SiLU over a varlen batch, with each sequence's last K-1 inputs kept in
// its state slot (docs/models.md, Gated DeltaNet step 2).
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

constexpr int64_t kChannelBlock = 64;

}  // namespace

void causal_conv1d_silu(ThreadPool& pool, const Tensor& x, const Tensor& w, Tensor& conv_state,
                        const StepMeta& meta, Tensor& out) {
  const char* op = "causal_conv1d_silu";
  require_dtype(x, DType::F32, op, "x");
  require_dtype(out, DType::F32, op, "out");
  require_dtype(conv_state, DType::F32, op, "conv_state");
  require(is_float_dtype(w.dtype) && w.ndim == 2 && w.is_contiguous(), op,
          "w must be a contiguous [C, K] float tensor");
  const int64_t T = x.size(0), C = x.row_numel(), K = w.size(1), H = K - 1;
  require(K >= 1 && w.size(0) == C, op, "w must be [C, K] with C the row width of x");
  require(out.size(0) == T && out.row_numel() == C, op, "out must have the shape of x");
  require(conv_state.ndim == 3 && conv_state.is_contiguous() && conv_state.size(1) == C &&
              conv_state.size(2) == H,
          op, "conv_state must be a contiguous [slots, C, K-1] tensor");
  require(meta.num_tokens == T, op, "x must have meta.num_tokens rows");
  require(out.data != x.data, op, "out must not alias x");
  const std::vector<StateSequence> seqs = state_sequences(meta, T, conv_state.size(0), op);

  // Weights as fp32 [C, K], once per call (C*K is small).
  std::vector<float> wf(static_cast<size_t>(C * K));
  load_row(w.data, w.dtype, wf.data(), C * K);
  // And tap-major [K, C]: a token past the first H of its sequence sums its taps over contiguous
  // channels (vectorised), in the same order per channel as the general loop.
  std::vector<float> wt(static_cast<size_t>(K * C));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < K; ++j) wt[static_cast<size_t>(j * C + c)] = wf[static_cast<size_t>(c * K + j)];
  const Kernels& kern = kernels();

  const int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
  auto* state_base = conv_state.ptr<float>();
  const int64_t tasks = static_cast<int64_t>(seqs.size()) * blocks;
  // Average work of one (sequence, channel block) task: taps, the SiLU, the state update.
  const double cost = tasks > 0 ? static_cast<double>(T + static_cast<int64_t>(seqs.size())) *
                                      static_cast<double>(C * (2 * K + 12)) /
                                      static_cast<double>(tasks)
                                : 0.0;
  pool.parallel_for(tasks, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const StateSequence& sq = seqs[static_cast<size_t>(task / blocks)];
      const int64_t c0 = (task % blocks) * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
      float* st = state_base + sq.slot * C * H;  // [C, H] of this slot, oldest input first
      if (!sq.has_initial) std::fill(st + c0 * H, st + c1 * H, 0.0f);
      // Input τ of the sequence (τ < 0 reaches back into the state) for channel c.
      auto input = [&](int64_t tau, int64_t c) {
        return tau >= 0 ? static_cast<const float*>(x.row(sq.start + tau))[c] : st[c * H + H + tau];
      };
      for (int64_t t = 0; t < sq.len; ++t) {
        const auto* xt = static_cast<const float*>(x.row(sq.start + t));
        auto* ot = static_cast<float*>(out.row(sq.start + t));
        if (t >= H) {
          const float* wh = &wt[static_cast<size_t>(H * C)];
          for (int64_t c = c0; c < c1; ++c) ot[c] = wh[c] * xt[c];
          for (int64_t j = 0; j < H; ++j) {
            const float* wj = &wt[static_cast<size_t>(j * C)];
            const auto* xj = static_cast<const float*>(x.row(sq.start + t - H + j));
            for (int64_t c = c0; c < c1; ++c) ot[c] += wj[c] * xj[c];
          }
        } else {
          for (int64_t c = c0; c < c1; ++c) {
            const float* wc = &wf[static_cast<size_t>(c * K)];
            float acc = wc[H] * xt[c];
            for (int64_t j = 0; j < H; ++j) acc += wc[j] * input(t - H + j, c);
            ot[c] = acc;
          }
        }
        kern.silu(ot + c0, c1 - c0);
      }
      // Keep the last H inputs. In place, ascending j: entry j reads old entry len + j > j, which
      // no earlier iteration has written.
      if (sq.len > 0)
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t j = 0; j < H; ++j) st[c * H + j] = input(sq.len - H + j, c);
    }
  }, 1, cost);
}

}  // namespace pagoda::cpu

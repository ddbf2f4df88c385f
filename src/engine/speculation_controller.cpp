#include "engine/speculation_controller.h"

#include <algorithm>
#include <cmath>

namespace pagoda {
namespace {

constexpr double kStepDecay = 0.98;         // the step-time fit's memory: ~50 steps
constexpr double kAcceptDecay = 0.995;      // the acceptance counts' memory: ~200 verified sequences
constexpr int64_t kStepsBeforeFit = 8;      // static k_max until then
constexpr int64_t kProbeEvery = 16;         // a neighbouring k every this many choices

// Solves the 3×3 system a·x = b by Gaussian elimination with partial pivoting; false when singular.
bool solve3(std::array<std::array<double, 3>, 3> a, std::array<double, 3> b, std::array<double, 3>& x) {
  for (int c = 0; c < 3; ++c) {
    int p = c;
    for (int r = c + 1; r < 3; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    if (std::fabs(a[p][c]) < 1e-300) return false;
    std::swap(a[c], a[p]);
    std::swap(b[c], b[p]);
    for (int r = c + 1; r < 3; ++r) {
      const double f = a[r][c] / a[c][c];
      for (int k = c; k < 3; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (int c = 2; c >= 0; --c) {
    double s = b[c];
    for (int k = c + 1; k < 3; ++k) s -= a[c][k] * x[k];
    x[c] = s / a[c][c];
  }
  return true;
}

}  // namespace

SpeculationController::SpeculationController(int32_t k_max, bool adaptive, int32_t disable_by_batch_size)
    : k_max_(std::max(k_max, 0)),
      adaptive_(adaptive),
      disable_by_batch_size_(disable_by_batch_size),
      reached_(static_cast<size_t>(std::max(k_max, 0)), 0.0),
      accepted_(static_cast<size_t>(std::max(k_max, 0)), 0.0),
      last_(std::max(k_max, 0)) {}

double SpeculationController::acceptance(int32_t j) const {
  if (j < 1 || j > k_max_) return 0.0;
  const auto i = static_cast<size_t>(j - 1);
  // Half a success in one try: 0.5 before any evidence, the measured rate soon after.
  return (accepted_[i] + 0.5) / (reached_[i] + 1.0);
}

void SpeculationController::observe_acceptance(int32_t drafts, int32_t accepted) {
  drafts = std::clamp(drafts, 0, k_max_);
  accepted = std::clamp(accepted, 0, drafts);
  for (auto& r : reached_) r *= kAcceptDecay;
  for (auto& a : accepted_) a *= kAcceptDecay;
  // Draft j was decided on when every draft before it was accepted.
  for (int32_t j = 0; j < drafts && j <= accepted; ++j) {
    reached_[static_cast<size_t>(j)] += 1.0;
    if (j < accepted) accepted_[static_cast<size_t>(j)] += 1.0;
  }
}

void SpeculationController::observe_step(int64_t tokens, int32_t passes, double seconds) {
  if (tokens <= 0 || !(seconds > 0) || !std::isfinite(seconds)) return;
  const std::array<double, 3> x{1.0, static_cast<double>(tokens), static_cast<double>(passes)};
  for (auto& row : xtx_)
    for (double& v : row) v *= kStepDecay;
  for (double& v : xty_) v *= kStepDecay;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) xtx_[static_cast<size_t>(i)][static_cast<size_t>(j)] += x[static_cast<size_t>(i)] * x[static_cast<size_t>(j)];
    xty_[static_cast<size_t>(i)] += x[static_cast<size_t>(i)] * seconds;
  }
  ++steps_;
  solve();
}

void SpeculationController::solve() {
  // A light hold of the per-token and per-pass costs towards 0 (relative to the data's own scale)
  // keeps the fit defined while the step sizes have not varied yet; the data outweighs it at once.
  std::array<std::array<double, 3>, 3> a = xtx_;
  for (int i = 1; i < 3; ++i) a[static_cast<size_t>(i)][static_cast<size_t>(i)] += 1e-6 * (xtx_[static_cast<size_t>(i)][static_cast<size_t>(i)] + 1.0);
  std::array<double, 3> c{};
  if (!solve3(a, xty_, c)) return;
  // Costs are not negative; a negative slope (noise) is read as free.
  c[1] = std::max(c[1], 0.0);
  c[2] = std::max(c[2], 0.0);
  if (!(c[0] > 0)) {  // the intercept absorbs what is left: the mean time minus the slopes' share
    const double w = xtx_[0][0];
    if (!(w > 0)) return;
    c[0] = std::max((xty_[0] - c[1] * xtx_[0][1] - c[2] * xtx_[0][2]) / w, 1e-9);
  }
  coef_ = c;
}

bool SpeculationController::fitted() const { return steps_ >= kStepsBeforeFit && coef_[0] > 0; }

double SpeculationController::step_seconds(int64_t tokens, int32_t passes) const {
  return coef_[0] + coef_[1] * static_cast<double>(tokens) + coef_[2] * static_cast<double>(passes);
}

double SpeculationController::goodput(int32_t k, int32_t decoding, int64_t other_tokens) const {
  double expected = 1.0, run = 1.0;
  for (int32_t j = 1; j <= k; ++j) {
    run *= acceptance(j);
    expected += run;
  }
  const double t = step_seconds(other_tokens + static_cast<int64_t>(decoding) * (1 + k), k);
  return t > 0 ? decoding * expected / t : 0.0;
}

int32_t SpeculationController::choose(int32_t decoding, int64_t other_tokens) {
  if (k_max_ == 0) return last_ = 0;
  if (disable_by_batch_size_ > 0 && decoding > disable_by_batch_size_) return last_ = 0;
  if (!adaptive_ || !fitted() || decoding <= 0) return last_ = k_max_;
  int32_t best = 0;
  double best_rate = -1.0;
  for (int32_t k = 0; k <= k_max_; ++k) {
    const double g = goodput(k, decoding, other_tokens);
    if (g > best_rate * (1 + 1e-9)) {  // ties go to the smaller k
      best_rate = g;
      best = k;
    }
  }
  // Now and then a neighbour: keeps acceptance measured when speculation is down, and the step
  // sizes varied enough for the cost fit.
  if (++since_probe_ >= kProbeEvery) {
    since_probe_ = 0;
    const int32_t up = std::min(best + 1, k_max_), down = std::max(best - 1, 0);
    best = probe_up_ ? (up != best ? up : down) : (down != best ? down : up);
    probe_up_ = !probe_up_;
  }
  return last_ = best;
}

}  // namespace pagoda

#include "engine/step_profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "core/error.h"

namespace pagoda {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The best of `reps` timings of `fn` on `clock` (the first run warms caches and libraries up).
template <typename Fn>
double best_ms(Backend& be, DeviceClock& clock, int reps, Fn fn) {
  fn();
  be.synchronize();
  double best = 0;
  for (int i = 0; i < reps; ++i) {
    clock.mark();
    fn();
    clock.mark();
    const std::vector<double> ms = clock.read_ms();
    const double t = ms.back() - ms.front();
    if (i == 0 || t < best) best = t;
  }
  return best;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

Roofline measure_roofline(Backend& be, DeviceClock& clock) {
  Roofline r;
  const bool cpu = be.device() == Device::CPU;
  // Large enough to leave every cache (64 MiB on the CPU, 256 MiB on a GPU).
  const size_t copy_bytes = (cpu ? size_t{64} : size_t{256}) << 20;
  {
    Buffer a = be.alloc(copy_bytes), b = be.alloc(copy_bytes);
    be.fill_zero(a.data(), copy_bytes);
    const double ms = best_ms(be, clock, 3, [&] { be.copy_on_device(b.data(), a.data(), copy_bytes); });
    if (ms > 0) r.copy_gbs = 2.0 * static_cast<double>(copy_bytes) / (ms * 1e6);
  }
  {
    const int64_t n = cpu ? 512 : 4096;
    const DType dt = be.activation_dtype();
    const size_t bytes = static_cast<size_t>(n * n) * dtype_size(dt);
    Buffer x = be.alloc(bytes), w = be.alloc(bytes), out = be.alloc(bytes);
    be.fill_zero(x.data(), bytes);
    be.fill_zero(w.data(), bytes);
    Tensor tx = x.tensor(dt, {n, n}), tw = w.tensor(dt, {n, n}), to = out.tensor(dt, {n, n});
    const double ms = best_ms(be, clock, 3, [&] { be.linear(tx, tw, to); });
    if (ms > 0) r.gemm_tflops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / (ms * 1e9);
  }
  return r;
}

StepProfiler::StepProfiler(TimedBackend& be, int32_t every) : be_(be), every_(std::max(every, 1)) {
  clock_ = make_device_clock(be_);
  if (clock_) roofline_ = measure_roofline(be_.inner(), *clock_);
}

bool StepProfiler::due() {
  ++seen_;
  return clock_ != nullptr && seen_ % every_ == 0;
}

void StepProfiler::begin() {
  begin_ms_ = now_ms();
  be_.begin(clock_.get());
}

void StepProfiler::end(bool decode, int64_t tokens, int64_t seqs, const StepFloor& floor) {
  const std::vector<TimedOp> ops = be_.end();
  std::lock_guard lock(mu_);
  StepKindProfile& k = kinds_[decode ? "decode" : "mixed"];
  ++k.steps;
  k.tokens += static_cast<double>(tokens);
  k.seqs += static_cast<double>(seqs);
  k.wall_ms += now_ms() - begin_ms_;
  k.floor.weights += floor.weights;
  k.floor.kv += floor.kv;
  k.floor.state += floor.state;
  for (const TimedOp& op : ops) {
    OpStat& s = k.ops[{op.op, op.shape}];
    s.op = op.op;
    s.shape = op.shape;
    ++s.calls;
    s.ms += op.ms;
    s.bytes += op.bytes;
    s.flops += op.flops;
    k.op_ms += op.ms;
  }
}

void StepProfiler::restart() {
  std::lock_guard lock(mu_);
  kinds_.clear();
  seen_ = 0;
}

std::string StepProfiler::report() const {
  std::lock_guard lock(mu_);
  std::ostringstream o;
  o << "step profile: " << seen_.load() << " steps; "
    << (every_ == 1 ? std::string("each") : "one in " + std::to_string(every_))
    << " run eagerly with its ops timed on the device";
  if (!clock_) return o.str() + ": this backend has no device clock (no op times)\n";
  o << "; roofline " << fmt("%.1f", roofline_.copy_gbs) << " GB/s copy, " << fmt("%.2f", roofline_.gemm_tflops)
    << " TFLOP/s GEMM (measured at start)\n";
  for (const auto& [kind, k] : kinds_) {
    const double n = static_cast<double>(k.steps);
    o << "\n" << kind << " steps: " << k.steps << " timed, " << fmt("%.1f", k.tokens / n) << " tokens and "
      << fmt("%.1f", k.seqs / n) << " sequences a step; " << fmt("%.3f", k.wall_ms / n) << " ms a step on the host, "
      << fmt("%.3f", k.op_ms / n) << " ms of it in ops\n";
    if (k.floor.total() > 0 && roofline_.copy_gbs > 0) {
      const double floor_ms = k.floor.total() / n / (roofline_.copy_gbs * 1e6);
      o << "bytes-moved floor: " << fmt("%.1f", k.floor.total() / n / 1e6) << " MB a step (weights "
        << fmt("%.1f", k.floor.weights / n / 1e6) << ", KV " << fmt("%.1f", k.floor.kv / n / 1e6) << ", state "
        << fmt("%.1f", k.floor.state / n / 1e6) << ") = " << fmt("%.3f", floor_ms)
        << " ms at the copy rate; the ops took " << fmt("%.2f", floor_ms > 0 ? k.op_ms / n / floor_ms : 0)
        << "x that\n";
    }
    o << "| op | shape | calls/step | ms/step | % of ops | GB/s | % copy | TFLOP/s | % GEMM |\n"
      << "|---|---|---|---|---|---|---|---|---|\n";
    std::vector<const OpStat*> rows;
    for (const auto& [key, s] : k.ops) rows.push_back(&s);
    std::sort(rows.begin(), rows.end(), [](const OpStat* a, const OpStat* b) { return a->ms > b->ms; });
    for (const OpStat* s : rows) {
      const double sec = s->ms / 1e3;
      const double gbs = s->bytes > 0 && sec > 0 ? s->bytes / sec / 1e9 : 0;
      const double tf = s->flops > 0 && sec > 0 ? s->flops / sec / 1e12 : 0;
      o << "| " << s->op << " | " << (s->shape.empty() ? "-" : s->shape) << " | "
        << fmt("%.1f", static_cast<double>(s->calls) / n) << " | " << fmt("%.4f", s->ms / n) << " | "
        << fmt("%.1f", k.op_ms > 0 ? 100.0 * s->ms / k.op_ms : 0) << " | " << (gbs > 0 ? fmt("%.1f", gbs) : "-")
        << " | " << (gbs > 0 && roofline_.copy_gbs > 0 ? fmt("%.1f%%", 100.0 * gbs / roofline_.copy_gbs) : "-")
        << " | " << (tf > 0 ? fmt("%.3f", tf) : "-") << " | "
        << (tf > 0 && roofline_.gemm_tflops > 0 ? fmt("%.1f%%", 100.0 * tf / roofline_.gemm_tflops) : "-") << " |\n";
    }
  }
  return o.str();
}

}  // namespace pagoda

// The step profiler (`--profile-steps N`, bench offline --profile N): every N-th engine step runs
// eagerly with a device timestamp between its ops (backend/timed_backend.h), and the timed steps
// are summed per kind of step (decode: one new token a sequence; mixed: any prefill) into a table
// of op × shape — calls, ms a step, share of the step, achieved GB/s and TFLOP/s against the
// device's copy bandwidth and GEMM rate measured when the profiler starts (the roofline). The other
// steps run as they would without it (graphs included), so leaving it on costs about 1/N of the
// difference between an eager and a graph step.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/device_clock.h"
#include "backend/timed_backend.h"

namespace pagoda {

// What the device reached on a plain copy and a large GEMM in the activation dtype.
struct Roofline {
  double copy_gbs = 0;   // device-to-device copy, bytes read + written per second / 1e9
  double gemm_tflops = 0;
};
// Times a copy and a GEMM on `be` (before the KV cache takes its memory: it allocates ~100 MB on a GPU).
Roofline measure_roofline(Backend& be, DeviceClock& clock);

// The bytes a step cannot avoid moving: every weight it multiplies by read once, every sequence's
// keys and values read once, every sequence's recurrent state read and written once. At the
// device's copy rate, the floor of the step's time (issue 30's "bytes-moved floor").
struct StepFloor {
  double weights = 0, kv = 0, state = 0;
  double total() const { return weights + kv + state; }
};

struct OpStat {
  std::string op, shape;
  int64_t calls = 0;
  double ms = 0, bytes = 0, flops = 0;
};

struct StepKindProfile {
  int64_t steps = 0;
  double tokens = 0, seqs = 0;
  double wall_ms = 0;  // host time from the step's start to its results on the host
  double op_ms = 0;    // the ops' device time
  StepFloor floor;     // summed over the timed steps
  std::map<std::pair<std::string, std::string>, OpStat> ops;
};

class StepProfiler {
 public:
  // `be` wraps the worker's backend; every `every`-th step is timed (every >= 1).
  StepProfiler(TimedBackend& be, int32_t every);

  // Whether the step about to run is timed (counts the step).
  bool due();
  // Around a timed step: begin before its first op, end once its results are on the host.
  void begin();
  void end(bool decode, int64_t tokens, int64_t seqs, const StepFloor& floor = {});

  int64_t steps_seen() const { return seen_; }
  int32_t every() const { return every_; }
  const Roofline& roofline() const { return roofline_; }
  // decode / mixed, when any step of the kind was timed. Read it on the engine's thread (or once
  // the engine is idle); report() and restart() may be called from any thread.
  const std::map<std::string, StepKindProfile>& kinds() const { return kinds_; }
  // The tables, for people (docs/performance.md, "The step profiler").
  std::string report() const;
  // Forgets the steps summed so far (POST /start_profile): the next report covers what follows.
  void restart();

 private:
  TimedBackend& be_;
  std::unique_ptr<DeviceClock> clock_;
  int32_t every_;
  std::atomic<int64_t> seen_{0};
  mutable std::mutex mu_;  // kinds_ between the engine's thread and a server's report / restart
  Roofline roofline_;
  double begin_ms_ = 0;
  std::map<std::string, StepKindProfile> kinds_;
};

}  // namespace pagoda

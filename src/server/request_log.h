// Logging as vLLM does it: one line per finished request when asked for (--enable-log-requests;
// off by default, as in vLLM), and while the engine is busy a stats line every 10 s
// (--disable-log-stats turns it off):
//   Engine 000: Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: 95.1 tokens/s,
//   Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.5%
// The line and its rules follow vllm/v1/metrics/loggers.py (LoggingStatLogger): throughputs over the
// interval, "Preemptions: N" only when there were some, and an interval idle as the one before it
// is logged at debug level only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/log.h"
#include "engine/sampling_params.h"
#include "engine/sequence.h"

namespace pagoda::server {

struct RequestLogOptions {
  bool log_requests = false;         // --enable-log-requests (--disable-log-requests: false)
  bool log_stats = true;             // --disable-log-stats: false
  double stats_interval_s = 10.0;    // vLLM's VLLM_LOG_STATS_INTERVAL
  // The stats line's "Engine NNN": the data-parallel rank, as vLLM's engine index (one line each).
  int32_t engine_index = 0;
  // Where lines go; null = pagoda's log (stderr, PAGODA_LOG level). Tests inject one.
  std::function<void(LogLevel, const std::string&)> sink;
};

// What one finished request logs.
struct FinishedRequestLog {
  int64_t id = 0;
  int32_t prompt_tokens = 0;
  int32_t output_tokens = 0;
  const SamplingParams* params = nullptr;
  std::string finish_reason;  // stop | length | abort | error
  double e2e_s = 0;
};

// "Finished request 7: prompt_tokens: 12, params: SamplingParams(n=1, ...), finish_reason: stop,
// output_tokens: 30, e2e: 0.412 s". Client strings (stop) are quoted, escaped and cut short.
std::string format_request_line(const FinishedRequestLog& r);
// SamplingParams(...) in vLLM's field names.
std::string format_sampling_params(const SamplingParams& p);

// What the scheduler shows at a stats line.
struct SchedulerSnapshot {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  double kv_usage = 0;            // fraction
  int64_t num_preemptions = 0;    // since start
  int64_t prefix_cache_queries = 0;  // tokens, since start
  int64_t prefix_cache_hits = 0;
  bool prefix_caching = false;    // print the hit rate
  // Speculative decoding totals since start (EngineStats' spec_*); per_pos empty when off.
  int64_t spec_num_drafts = 0, spec_num_draft_tokens = 0, spec_num_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  // LoRA (--enable-lora): the adapters with requests running and waiting, comma-separated names.
  bool lora = false;
  std::string lora_running, lora_waiting;
};

// vLLM's speculative-decoding line over an interval of `dt` seconds, from the totals at its start
// (`last`) and end (`now`): "SpecDecoding metrics: Mean acceptance length: 2.31, Accepted
// throughput: ..., Per-position acceptance rate: 0.71, 0.42, 0.18, Avg Draft acceptance rate: 43.7%".
std::string format_spec_decode_line(const SchedulerSnapshot& last, const SchedulerSnapshot& now, double dt);

// The periodic stats line. Engine thread only; time is passed in, so tests drive it.
class StatsLogger {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StatsLogger(RequestLogOptions options);

  // Tokens of one engine step that began at `step_start` (prompt tokens counted when a request
  // gets its first token, as vLLM counts them).
  void record(Clock::time_point step_start, int64_t prompt_tokens, int64_t generation_tokens);
  // Writes the line once the interval has passed. Returns true when it wrote one (any level).
  bool tick(Clock::time_point now, const SchedulerSnapshot& s);
  // When tick() next has something to say without new work: the end of the current interval
  // while the last one was busy; nullopt when idle (the engine thread may sleep until woken).
  std::optional<Clock::time_point> next_tick() const;

  // Writes a line through the sink at `level`.
  void emit(LogLevel level, const std::string& line) const;
  const RequestLogOptions& options() const { return options_; }

 private:
  bool dormant() const;
  int64_t last_prefix_queries_ = 0, last_prefix_hits_ = 0;
  SchedulerSnapshot last_spec_;

  RequestLogOptions options_;
  std::optional<Clock::time_point> window_start_;  // none while dormant
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  double last_prompt_throughput_ = 0, last_generation_throughput_ = 0;
  int64_t last_preemptions_ = 0;
};

}  // namespace pagoda::server

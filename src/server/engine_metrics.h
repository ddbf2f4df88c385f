// The metrics of a serving engine, named as vLLM's `vllm:` set under `pagoda:` (DESIGN.md §7).
// Updated by the engine thread, read by /metrics.
#pragma once

#include <string>

#include "engine/sequence.h"
#include "server/metrics.h"

namespace pagoda::server {

struct EngineMetricsInfo {
  std::string model_name;
  int64_t num_kv_blocks = 0;
  int32_t block_size = 0;
  std::string kv_cache_dtype;
  int32_t max_model_len = 0;
  int32_t max_num_seqs = 0;
};

class EngineMetrics {
 public:
  EngineMetrics(MetricsRegistry& registry, const EngineMetricsInfo& info);

  Gauge& num_requests_running;
  Gauge& num_requests_waiting;
  Gauge& kv_cache_usage_perc;  // a fraction in [0, 1], as vLLM's gauge of the same name
  Counter& prompt_tokens_total;
  Counter& generation_tokens_total;
  Counter& num_preemptions_total;
  Histogram& time_to_first_token_seconds;
  Histogram& inter_token_latency_seconds;
  Histogram& e2e_request_latency_seconds;

  // request_success_total{finished_reason=...}: stop, length, abort.
  Counter& request_success(FinishReason reason);

 private:
  Counter& success_stop_;
  Counter& success_length_;
  Counter& success_abort_;
};

}  // namespace pagoda::server

// The metrics of a serving engine: vLLM's `vllm:` set (vllm/v1/metrics/loggers.py,
// PrometheusStatLogger) with vLLM's names, types, help, buckets and labels (model_name, engine),
// under the prefix `pagoda:` or, with --metrics-prefix vllm, `vllm:` so that dashboards,
// autoscalers and the Kubernetes inference gateway built for vLLM read pagoda unchanged.
// docs/metrics.md lists each metric and what it measures here. Updated by the engine thread
// (RequestStats), read by /metrics.
#pragma once

#include <string>
#include <vector>

#include "engine/engine_core.h"

#include "engine/sequence.h"
#include "server/metrics.h"

namespace pagoda::server {

struct EngineMetricsInfo {
  std::string model_name;
  // The `engine` label: the data-parallel rank (vLLM's engine index); one EngineMetrics per replica.
  int32_t engine_index = 0;
  // Prometheus name prefix, written before ':' (--metrics-prefix). Letters, digits and '_'.
  std::string metrics_prefix = "vllm";
  int32_t max_model_len = 0;  // sets the buckets of the token-count histograms, as vLLM's
  // vllm:cache_config_info labels (vLLM's CacheConfig field names): num_gpu_blocks, block_size,
  // cache_dtype.
  int64_t num_kv_blocks = 0;
  bool enable_prefix_caching = false;
  int32_t block_size = 0;
  std::string kv_cache_dtype;
  int32_t max_num_seqs = 0;  // not exported: vLLM's cache_config_info has no such label
  int32_t num_speculative_tokens = 0;  // > 0: the spec_decode counters exist (as vLLM's)
  // LoRA (the engine's adapters, named by id; --max-loras): vllm:lora_requests_info exists.
  std::shared_ptr<const LoraCatalog> loras;
  int32_t max_loras = 0;
};

// vLLM's build_1_2_5_buckets(max_value): 1, 2, 5, 10, 20, 50, ... up to max_value.
std::vector<double> build_1_2_5_buckets(int64_t max_value);

class EngineMetrics {
 public:
  // Throws pagoda::Error for a prefix that is not a Prometheus name.
  EngineMetrics(MetricsRegistry& registry, const EngineMetricsInfo& info);

  const std::string& prefix() const { return prefix_; }

 private:
  // Declared first: the members below are built from them.
  std::string prefix_;
  Labels labels_;  // model_name, engine
  MetricsRegistry& registry_;
  std::shared_ptr<const LoraCatalog> loras_;
  int32_t max_loras_ = 0;

 public:
  // Scheduler state.
  Gauge& num_requests_running;
  Gauge& num_requests_waiting;
  Gauge& kv_cache_usage_perc;  // a fraction in [0, 1], as vLLM's gauge of the same name
  Counter& prefix_cache_queries;  // pagoda has no prefix cache yet: stays 0 (see docs)
  Counter& prefix_cache_hits;
  // Counters.
  Counter& num_preemptions_total;
  Counter& prompt_tokens_total;
  Counter& generation_tokens_total;
  // Histograms of counts.
  Histogram& request_prompt_tokens;
  Histogram& request_generation_tokens;
  Histogram& iteration_tokens_total;
  Histogram& request_max_num_generation_tokens;
  Histogram& request_params_n;
  Histogram& request_params_max_tokens;
  // Histograms of time intervals, in seconds.
  Histogram& time_to_first_token_seconds;
  Histogram& time_per_output_token_seconds;  // deprecated by vLLM 0.11: = inter_token_latency
  Histogram& inter_token_latency_seconds;
  Histogram& request_time_per_output_token_seconds;
  Histogram& e2e_request_latency_seconds;
  Histogram& request_queue_time_seconds;
  Histogram& request_inference_time_seconds;
  Histogram& request_prefill_time_seconds;
  Histogram& request_decode_time_seconds;
  // pagoda's own (vLLM has none): engine steps that threw and failed their requests
  // (docs/faults.md). Always named pagoda:engine_step_failures_total, whatever --metrics-prefix:
  // it must not pass for a vLLM metric.
  Counter& engine_step_failures;
  // pagoda's own too: full blocks the prefix cache holds now, counted by hash (what a KV-events
  // subscriber's replay must reach), and batches of KV cache events dropped because the
  // publisher's queue was full.
  Gauge& prefix_cache_blocks;
  Counter& kv_events_dropped;

  // Speculative decoding (only with --speculative-config, as vLLM): spec_decode_num_drafts,
  // _num_draft_tokens, _num_accepted_tokens and _num_accepted_tokens_per_pos{position}.
  // Moves them to the engine's totals since start.
  void publish_spec_decode(const EngineStats& s);
  // vllm:lora_requests_info{max_lora, running_lora_adapters, waiting_lora_adapters} = now (unix
  // seconds), as vLLM sets it each step: the gateway reads the newest series. Nothing without LoRA.
  void publish_lora(const EngineStats& s);

  // request_success_total{finished_reason=...}: stop, length, abort.
  Counter& request_success(FinishReason reason);
  // request_success_total{finished_reason="error"}: failed by an engine error.
  Counter& request_error() { return success_error_; }

 private:
  Counter* spec_drafts_ = nullptr;
  Counter* spec_draft_tokens_ = nullptr;
  Counter* spec_accepted_tokens_ = nullptr;
  std::vector<Counter*> spec_accepted_per_pos_;
  EngineStats spec_last_;  // the totals published so far
  Counter& success_stop_;
  Counter& success_length_;
  Counter& success_abort_;
  Counter& success_error_;
};

}  // namespace pagoda::server

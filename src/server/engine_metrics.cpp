#include "server/engine_metrics.h"

namespace pagoda::server {
namespace {

// Bucket bounds as vLLM's.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kE2eBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,    5.0,
                                         10.0, 15.0, 20.0, 30.0, 40.0,  50.0,  60.0,   120.0,
                                         240.0, 480.0, 960.0, 1920.0, 7680.0};

Labels with_reason(const Labels& base, const char* reason) {
  Labels l = base;
  l.emplace_back("finished_reason", reason);
  return l;
}

void register_cache_info(MetricsRegistry& r, const EngineMetricsInfo& info, const Labels& model) {
  Labels l = model;
  l.emplace_back("block_size", std::to_string(info.block_size));
  l.emplace_back("num_gpu_blocks", std::to_string(info.num_kv_blocks));
  l.emplace_back("cache_dtype", info.kv_cache_dtype);
  l.emplace_back("max_model_len", std::to_string(info.max_model_len));
  l.emplace_back("max_num_seqs", std::to_string(info.max_num_seqs));
  r.gauge("pagoda:cache_config_info", "Information of the KV cache configuration.", l).set(1);
}

}  // namespace

EngineMetrics::EngineMetrics(MetricsRegistry& r, const EngineMetricsInfo& info)
    : num_requests_running(r.gauge("pagoda:num_requests_running",
                                   "Number of requests in model execution batches.",
                                   {{"model_name", info.model_name}})),
      num_requests_waiting(r.gauge("pagoda:num_requests_waiting", "Number of requests waiting to be processed.",
                                   {{"model_name", info.model_name}})),
      kv_cache_usage_perc(r.gauge("pagoda:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                                  {{"model_name", info.model_name}})),
      prompt_tokens_total(r.counter("pagoda:prompt_tokens_total", "Number of prefill tokens processed.",
                                    {{"model_name", info.model_name}})),
      generation_tokens_total(r.counter("pagoda:generation_tokens_total",
                                        "Number of generation tokens processed.",
                                        {{"model_name", info.model_name}})),
      num_preemptions_total(r.counter("pagoda:num_preemptions_total", "Cumulative number of preemptions.",
                                      {{"model_name", info.model_name}})),
      time_to_first_token_seconds(r.histogram("pagoda:time_to_first_token_seconds",
                                              "Histogram of time to first token in seconds.", kTtftBuckets,
                                              {{"model_name", info.model_name}})),
      inter_token_latency_seconds(r.histogram("pagoda:inter_token_latency_seconds",
                                              "Histogram of inter-token latency in seconds.", kItlBuckets,
                                              {{"model_name", info.model_name}})),
      e2e_request_latency_seconds(r.histogram("pagoda:e2e_request_latency_seconds",
                                              "Histogram of end to end request latency in seconds.",
                                              kE2eBuckets, {{"model_name", info.model_name}})),
      success_stop_(r.counter("pagoda:request_success_total", "Count of successfully processed requests.",
                              with_reason({{"model_name", info.model_name}}, "stop"))),
      success_length_(r.counter("pagoda:request_success_total", "Count of successfully processed requests.",
                                with_reason({{"model_name", info.model_name}}, "length"))),
      success_abort_(r.counter("pagoda:request_success_total", "Count of successfully processed requests.",
                               with_reason({{"model_name", info.model_name}}, "abort"))) {
  register_cache_info(r, info, {{"model_name", info.model_name}});
}

Counter& EngineMetrics::request_success(FinishReason reason) {
  switch (reason) {
    case FinishReason::Length: return success_length_;
    case FinishReason::Abort: return success_abort_;
    default: return success_stop_;
  }
}

}  // namespace pagoda::server

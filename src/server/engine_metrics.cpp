#include "server/engine_metrics.h"

#include <chrono>

#include "core/error.h"

namespace pagoda::server {
namespace {

// Bucket bounds as vLLM's (vllm/v1/metrics/loggers.py; docs/metrics.md).
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTpotBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestLatencyBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,    5.0,
                                                    10.0, 15.0, 20.0, 30.0, 40.0,  50.0,  60.0,   120.0,
                                                    240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kIterationTokenBuckets = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
const std::vector<double> kParamsNBuckets = {1, 2, 5, 10, 20};

std::string checked_prefix(const std::string& p) {
  bool ok = !p.empty() && !(p[0] >= '0' && p[0] <= '9');
  for (char c : p) ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
  check(ok, "metrics prefix '" + p + "' is not a Prometheus name: use letters, digits and '_' (e.g. vllm or pagoda)");
  return p + ":";
}

Labels with(const Labels& base, const char* key, const std::string& value) {
  Labels l = base;
  l.emplace_back(key, value);
  return l;
}

// vLLM's log_metrics_info("cache_config"): a gauge set to 1 whose labels carry the
// configuration. vLLM writes every CacheConfig field; pagoda the ones it has.
void register_cache_info(MetricsRegistry& r, const std::string& prefix, const EngineMetricsInfo& info) {
  Labels l = {{"block_size", std::to_string(info.block_size)},
              {"cache_dtype", info.kv_cache_dtype},
              {"enable_prefix_caching", info.enable_prefix_caching ? "True" : "False"},
              {"num_gpu_blocks", std::to_string(info.num_kv_blocks)},
              {"engine", std::to_string(info.engine_index)}};
  r.gauge(prefix + "cache_config_info", "Information of the LLMEngine CacheConfig", l).set(1);
}

// vllm:engine_sleep_state: pagoda has no sleep mode, so it is always awake.
void register_sleep_state(MetricsRegistry& r, const std::string& prefix, const Labels& labels) {
  const char* help =
      "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
      "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.";
  for (const char* state : {"awake", "weights_offloaded", "discard_all"})
    r.gauge(prefix + "engine_sleep_state", help, with(labels, "sleep_state", state)).set(state == std::string("awake"));
}

}  // namespace

std::vector<double> build_1_2_5_buckets(int64_t max_value) {
  std::vector<double> out;
  for (int64_t scale = 1;; scale *= 10)
    for (int64_t m : {1, 2, 5}) {
      if (m * scale > max_value) return out;
      out.push_back(static_cast<double>(m * scale));
    }
}

EngineMetrics::EngineMetrics(MetricsRegistry& r, const EngineMetricsInfo& info)
    : prefix_(checked_prefix(info.metrics_prefix)),
      labels_{{"model_name", info.model_name}, {"engine", std::to_string(info.engine_index)}},
      registry_(r),
      loras_(info.loras),
      max_loras_(info.max_loras),
      num_requests_running(r.gauge(prefix_ + "num_requests_running",
                                   "Number of requests in model execution batches.", labels_)),
      num_requests_waiting(r.gauge(prefix_ + "num_requests_waiting",
                                   "Number of requests waiting to be processed.", labels_)),
      kv_cache_usage_perc(r.gauge(prefix_ + "kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                                  labels_)),
      prefix_cache_queries(r.counter(prefix_ + "prefix_cache_queries",
                                     "Prefix cache queries, in terms of number of queried tokens.", labels_)),
      prefix_cache_hits(r.counter(prefix_ + "prefix_cache_hits",
                                  "Prefix cache hits, in terms of number of cached tokens.", labels_)),
      num_preemptions_total(r.counter(prefix_ + "num_preemptions",
                                      "Cumulative number of preemption from the engine.", labels_)),
      prompt_tokens_total(r.counter(prefix_ + "prompt_tokens", "Number of prefill tokens processed.", labels_)),
      generation_tokens_total(r.counter(prefix_ + "generation_tokens",
                                        "Number of generation tokens processed.", labels_)),
      request_prompt_tokens(r.histogram(prefix_ + "request_prompt_tokens", "Number of prefill tokens processed.",
                                        build_1_2_5_buckets(info.max_model_len), labels_)),
      request_generation_tokens(r.histogram(prefix_ + "request_generation_tokens",
                                            "Number of generation tokens processed.",
                                            build_1_2_5_buckets(info.max_model_len), labels_)),
      iteration_tokens_total(r.histogram(prefix_ + "iteration_tokens_total",
                                         "Histogram of number of tokens per engine_step.", kIterationTokenBuckets,
                                         labels_)),
      request_max_num_generation_tokens(r.histogram(prefix_ + "request_max_num_generation_tokens",
                                                    "Histogram of maximum number of requested generation tokens.",
                                                    build_1_2_5_buckets(info.max_model_len), labels_)),
      request_params_n(r.histogram(prefix_ + "request_params_n", "Histogram of the n request parameter.",
                                   kParamsNBuckets, labels_)),
      request_params_max_tokens(r.histogram(prefix_ + "request_params_max_tokens",
                                            "Histogram of the max_tokens request parameter.",
                                            build_1_2_5_buckets(info.max_model_len), labels_)),
      time_to_first_token_seconds(r.histogram(prefix_ + "time_to_first_token_seconds",
                                              "Histogram of time to first token in seconds.", kTtftBuckets, labels_)),
      time_per_output_token_seconds(r.histogram(prefix_ + "time_per_output_token_seconds",
                                                "Histogram of time per output token in seconds.DEPRECATED: Use " +
                                                    prefix_ + "inter_token_latency_seconds instead.",
                                                kTpotBuckets, labels_)),
      inter_token_latency_seconds(r.histogram(prefix_ + "inter_token_latency_seconds",
                                              "Histogram of inter-token latency in seconds.", kTpotBuckets, labels_)),
      request_time_per_output_token_seconds(r.histogram(prefix_ + "request_time_per_output_token_seconds",
                                                        "Histogram of time_per_output_token_seconds per request.",
                                                        kTpotBuckets, labels_)),
      e2e_request_latency_seconds(r.histogram(prefix_ + "e2e_request_latency_seconds",
                                              "Histogram of e2e request latency in seconds.", kRequestLatencyBuckets,
                                              labels_)),
      request_queue_time_seconds(r.histogram(prefix_ + "request_queue_time_seconds",
                                             "Histogram of time spent in WAITING phase for request.",
                                             kRequestLatencyBuckets, labels_)),
      request_inference_time_seconds(r.histogram(prefix_ + "request_inference_time_seconds",
                                                 "Histogram of time spent in RUNNING phase for request.",
                                                 kRequestLatencyBuckets, labels_)),
      request_prefill_time_seconds(r.histogram(prefix_ + "request_prefill_time_seconds",
                                               "Histogram of time spent in PREFILL phase for request.",
                                               kRequestLatencyBuckets, labels_)),
      request_decode_time_seconds(r.histogram(prefix_ + "request_decode_time_seconds",
                                              "Histogram of time spent in DECODE phase for request.",
                                              kRequestLatencyBuckets, labels_)),
      engine_step_failures(r.counter("pagoda:engine_step_failures",
                                     "Engine steps that failed; their requests got an error and the engine went on.",
                                     labels_)),
      prefix_cache_blocks(r.gauge("pagoda:prefix_cache_blocks", "Full KV blocks the prefix cache holds, counted by hash (as KV cache events describe them).", labels_)),
      kv_events_dropped(r.counter("pagoda:kv_events_dropped_batches",
                                  "Batches of KV cache events dropped because the publisher's queue was full.",
                                  labels_)),
      success_stop_(r.counter(prefix_ + "request_success", "Count of successfully processed requests.",
                              with(labels_, "finished_reason", "stop"))),
      success_length_(r.counter(prefix_ + "request_success", "Count of successfully processed requests.",
                                with(labels_, "finished_reason", "length"))),
      success_abort_(r.counter(prefix_ + "request_success", "Count of successfully processed requests.",
                               with(labels_, "finished_reason", "abort"))),
      success_error_(r.counter(prefix_ + "request_success", "Count of successfully processed requests.",
                               with(labels_, "finished_reason", "error"))) {
  register_sleep_state(r, prefix_, labels_);
  register_cache_info(r, prefix_, info);
  if (info.num_speculative_tokens > 0) {
    spec_drafts_ = &r.counter(prefix_ + "spec_decode_num_drafts", "Number of spec decoding drafts.", labels_);
    spec_draft_tokens_ = &r.counter(prefix_ + "spec_decode_num_draft_tokens", "Number of draft tokens.", labels_);
    spec_accepted_tokens_ =
        &r.counter(prefix_ + "spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels_);
    for (int32_t pos = 0; pos < info.num_speculative_tokens; ++pos)
      spec_accepted_per_pos_.push_back(&r.counter(prefix_ + "spec_decode_num_accepted_tokens_per_pos",
                                                  "Accepted tokens per draft position.",
                                                  with(labels_, "position", std::to_string(pos))));
    spec_last_.spec_accepted_per_pos.assign(spec_accepted_per_pos_.size(), 0);
  }
}

void EngineMetrics::publish_lora(const EngineStats& s) {
  if (!loras_) return;
  auto names = [&](const std::vector<int32_t>& ids) {
    std::string out;
    for (int32_t id : ids) {
      const std::optional<LoraEntry> e = loras_->get(id);
      if (!e) continue;
      if (!out.empty()) out += ',';
      out += e->name;
    }
    return out;
  };
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  registry_.set_gauge_series(prefix_ + "lora_requests_info", "Running stats on lora requests.",
                             {{"max_lora", std::to_string(max_loras_)},
                              {"running_lora_adapters", names(s.running_loras)},
                              {"waiting_lora_adapters", names(s.waiting_loras)}},
                             now);
}

void EngineMetrics::publish_spec_decode(const EngineStats& s) {
  if (spec_drafts_ == nullptr) return;
  spec_drafts_->inc(static_cast<double>(s.spec_num_drafts - spec_last_.spec_num_drafts));
  spec_draft_tokens_->inc(static_cast<double>(s.spec_num_draft_tokens - spec_last_.spec_num_draft_tokens));
  spec_accepted_tokens_->inc(static_cast<double>(s.spec_num_accepted_tokens - spec_last_.spec_num_accepted_tokens));
  for (size_t i = 0; i < spec_accepted_per_pos_.size() && i < s.spec_accepted_per_pos.size(); ++i) {
    spec_accepted_per_pos_[i]->inc(static_cast<double>(s.spec_accepted_per_pos[i] - spec_last_.spec_accepted_per_pos[i]));
    spec_last_.spec_accepted_per_pos[i] = s.spec_accepted_per_pos[i];
  }
  spec_last_.spec_num_drafts = s.spec_num_drafts;
  spec_last_.spec_num_draft_tokens = s.spec_num_draft_tokens;
  spec_last_.spec_num_accepted_tokens = s.spec_num_accepted_tokens;
}

Counter& EngineMetrics::request_success(FinishReason reason) {
  switch (reason) {
    case FinishReason::Length: return success_length_;
    case FinishReason::Abort: return success_abort_;
    case FinishReason::Error: return success_error_;
    default: return success_stop_;
  }
}

}  // namespace pagoda::server

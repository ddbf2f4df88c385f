// Per-request timings and counts of the engine's requests, recorded as vLLM records them
// (vllm/v1/metrics/stats.py: RequestStateStats, IterationStats, FinishedRequestStats) into
// EngineMetrics, the request log and the periodic stats line. Engine thread only.
//
// A request's moments: arrival (the HTTP thread submitted it), queued (the engine took it),
// scheduled (the first step that computed any of it began), first token, last token, finish.
//   TTFT = first token - arrival          queue   = scheduled - queued
//   ITL  = between outputs with tokens    prefill = first token - scheduled
//   e2e  = finish - arrival               decode  = last token - first token
//   TPOT (per request) = decode / (generated - 1)   inference = last token - scheduled
// A request that finishes before a moment (aborted while waiting or in prefill) takes the finish
// time for it, so none of its intervals is negative.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "server/engine_metrics.h"
#include "server/request_log.h"

namespace pagoda::server {

struct ChoiceSpec;

class RequestStats {
 public:
  using Clock = std::chrono::steady_clock;

  RequestStats(EngineMetrics& metrics, RequestLogOptions options, int32_t max_model_len);

  // One HTTP request's choices, before they are handed to the engine. vLLM's per-request n is
  // read from them: the server fans each prompt out into n choices in a row.
  struct Generation;
  std::shared_ptr<Generation> begin_generation(const std::vector<ChoiceSpec>& choices, Clock::time_point arrival);
  // Choice `choice` of `g` is engine request `id`, queued at `now`.
  void added(const std::shared_ptr<Generation>& g, size_t choice, int64_t id, Clock::time_point now);
  // The engine refused the request: forget it.
  void forget(int64_t id) { live_.erase(id); }

  // Around one engine step: `outputs` before they are delivered.
  void step_started(Clock::time_point now) { step_start_ = now; }
  void step_finished(const std::vector<RequestOutput>& outputs, const EngineStats& step, Clock::time_point now);
  // The engine failed the request (finished_reason "error").
  void failed(int64_t id, Clock::time_point now);

  // The stats line, when due.
  // `loras`: the engine's adapters (null without --enable-lora), to name those the line lists.
  void tick(const EngineStats& engine, Clock::time_point now, const LoraCatalog* loras = nullptr);
  std::optional<Clock::time_point> next_tick() const { return stats_log_.next_tick(); }

 private:
  struct Live {
    std::shared_ptr<Generation> generation;
    size_t choice = 0;
    Clock::time_point arrival, queued, scheduled, first_token, last_token;
    bool was_scheduled = false, has_first_token = false;
    int32_t generated = 0;
  };
  void mark_scheduled(const EngineStats& step, const std::vector<RequestOutput>& outputs);
  void finish(int64_t id, const char* reason, Counter& success, Clock::time_point now);

  EngineMetrics& metrics_;
  StatsLogger stats_log_;
  int32_t max_model_len_;
  std::unordered_map<int64_t, Live> live_;
  Clock::time_point step_start_{};
};

}  // namespace pagoda::server

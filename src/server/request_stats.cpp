#include "server/request_stats.h"

#include <algorithm>

#include "server/async_engine.h"

namespace pagoda::server {
namespace {

double seconds(RequestStats::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

// vLLM's ParentRequest: n and the most tokens any of its n choices generated are observed once
// all n have finished.
struct RequestStats::Generation {
  struct Group {
    int32_t n = 0;
    int32_t remaining = 0;
    int32_t max_generated = 0;
  };
  std::vector<Group> groups;
  std::vector<size_t> group_of;       // per choice
  std::vector<int32_t> prompt_tokens;  // per choice
  std::vector<int32_t> max_tokens;     // per choice: the limit in force, as vLLM's max_tokens_param
  std::vector<SamplingParams> params;  // per choice, kept only to log requests
  Clock::time_point arrival;
};

RequestStats::RequestStats(EngineMetrics& metrics, RequestLogOptions options, int32_t max_model_len)
    : metrics_(metrics), stats_log_(std::move(options)), max_model_len_(max_model_len) {}

std::shared_ptr<RequestStats::Generation> RequestStats::begin_generation(const std::vector<ChoiceSpec>& choices,
                                                                         Clock::time_point arrival) {
  auto g = std::make_shared<Generation>();
  g->arrival = arrival;
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceSpec& c = choices[i];
    // A run of equal prompts is one prompt's n choices (a prompt list that repeats a prompt
    // counts as a larger n: the only way this can miscount).
    if (i == 0 || c.prompt != choices[i - 1].prompt) g->groups.push_back({});
    g->groups.back().n++;
    g->groups.back().remaining++;
    g->group_of.push_back(g->groups.size() - 1);
    const auto prompt = static_cast<int32_t>(c.prompt.size());
    g->prompt_tokens.push_back(prompt);
    g->max_tokens.push_back(c.params.max_tokens.value_or(std::max(0, max_model_len_ - prompt)));
    if (stats_log_.options().log_requests) g->params.push_back(c.params);
  }
  return g;
}

void RequestStats::added(const std::shared_ptr<Generation>& g, size_t choice, int64_t id, Clock::time_point now) {
  Live l;
  l.generation = g;
  l.choice = choice;
  l.arrival = g->arrival;
  l.queued = now;
  live_[id] = std::move(l);
}

void RequestStats::mark_scheduled(const EngineStats& step, const std::vector<RequestOutput>& outputs) {
  // Scheduled in this step: it has an output (it may have finished already), or the step
  // computed some of it (a prefill chunk that samples nothing yet).
  auto mark = [&](int64_t id) {
    auto it = live_.find(id);
    if (it == live_.end() || it->second.was_scheduled) return;
    it->second.was_scheduled = true;
    it->second.scheduled = step_start_;
  };
  for (const RequestOutput& o : outputs)
    if (!o.finished || !o.new_token_ids.empty()) mark(o.id);
  for (int64_t id : step.step_scheduled) mark(id);
}

void RequestStats::step_finished(const std::vector<RequestOutput>& outputs, const EngineStats& step,
                                 Clock::time_point now) {
  mark_scheduled(step, outputs);
  int64_t step_prompt = 0, step_generated = 0;
  for (const RequestOutput& o : outputs) {
    auto it = live_.find(o.id);
    if (it == live_.end()) continue;
    Live& l = it->second;
    if (!o.new_token_ids.empty()) {
      const auto n = static_cast<int32_t>(o.new_token_ids.size());
      if (!l.has_first_token) {
        l.has_first_token = true;
        l.first_token = now;
        const int32_t prompt = l.generation->prompt_tokens[l.choice];
        metrics_.time_to_first_token_seconds.observe(seconds(now - l.arrival));
        metrics_.prompt_tokens_total.inc(prompt);
        step_prompt += prompt;
      } else {
        const double itl = seconds(now - l.last_token);
        metrics_.inter_token_latency_seconds.observe(itl);
        metrics_.time_per_output_token_seconds.observe(itl);
      }
      l.last_token = now;
      l.generated += n;
      step_generated += n;
    }
    if (o.finished) finish(o.id, finish_reason_name(o.finish_reason), metrics_.request_success(o.finish_reason), now);
  }
  metrics_.generation_tokens_total.inc(static_cast<double>(step_generated));
  metrics_.iteration_tokens_total.observe(static_cast<double>(step_prompt + step_generated));
  stats_log_.record(step_start_, step_prompt, step_generated);
}

void RequestStats::failed(int64_t id, Clock::time_point now) {
  if (live_.count(id)) finish(id, "error", metrics_.request_error(), now);
}

void RequestStats::finish(int64_t id, const char* reason, Counter& success, Clock::time_point now) {
  Live& l = live_.at(id);
  Generation& g = *l.generation;
  if (!l.was_scheduled) l.scheduled = now;
  if (!l.has_first_token) l.first_token = l.last_token = now;
  const double decode = seconds(l.last_token - l.first_token);
  success.inc();
  metrics_.e2e_request_latency_seconds.observe(seconds(now - l.arrival));
  metrics_.request_queue_time_seconds.observe(seconds(l.scheduled - l.queued));
  metrics_.request_prefill_time_seconds.observe(seconds(l.first_token - l.scheduled));
  metrics_.request_inference_time_seconds.observe(seconds(l.last_token - l.scheduled));
  metrics_.request_decode_time_seconds.observe(decode);
  metrics_.request_prompt_tokens.observe(g.prompt_tokens[l.choice]);
  metrics_.request_generation_tokens.observe(l.generated);
  // vLLM's mean_time_per_output_token: the first token is the prefill's.
  metrics_.request_time_per_output_token_seconds.observe(l.generated > 1 ? decode / (l.generated - 1) : 0.0);
  if (g.max_tokens[l.choice] > 0) metrics_.request_params_max_tokens.observe(g.max_tokens[l.choice]);

  Generation::Group& group = g.groups[g.group_of[l.choice]];
  group.max_generated = std::max(group.max_generated, l.generated);
  if (--group.remaining == 0) {
    metrics_.request_max_num_generation_tokens.observe(group.max_generated);
    metrics_.request_params_n.observe(group.n);
  }
  if (stats_log_.options().log_requests) {
    FinishedRequestLog r;
    r.id = id;
    r.prompt_tokens = g.prompt_tokens[l.choice];
    r.output_tokens = l.generated;
    r.params = l.choice < g.params.size() ? &g.params[l.choice] : nullptr;
    r.finish_reason = reason;
    r.e2e_s = seconds(now - l.arrival);
    stats_log_.emit(LogLevel::Info, format_request_line(r));
  }
  live_.erase(id);
}

void RequestStats::tick(const EngineStats& engine, Clock::time_point now, const LoraCatalog* loras) {
  SchedulerSnapshot s;
  s.num_running = engine.num_running;
  s.num_waiting = engine.num_waiting;
  s.kv_usage = engine.kv_usage;
  s.num_preemptions = engine.num_preemptions;
  s.prefix_cache_queries = engine.prefix_cache_queries;
  s.prefix_cache_hits = engine.prefix_cache_hits;
  s.prefix_caching = engine.prefix_caching;
  s.spec_num_drafts = engine.spec_num_drafts;
  s.spec_num_draft_tokens = engine.spec_num_draft_tokens;
  s.spec_num_accepted_tokens = engine.spec_num_accepted_tokens;
  s.spec_accepted_per_pos = engine.spec_accepted_per_pos;
  if (loras) {
    s.lora = true;
    const auto names = [&](const std::vector<int32_t>& ids) {
      std::string out;
      for (const int32_t id : ids)
        if (const std::optional<LoraEntry> e = loras->get(id)) out += (out.empty() ? "" : ",") + e->name;
      return out;
    };
    s.lora_running = names(engine.running_loras);
    s.lora_waiting = names(engine.waiting_loras);
  }
  stats_log_.tick(now, s);
}

}  // namespace pagoda::server

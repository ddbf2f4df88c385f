#include "server/async_engine.h"

#include <algorithm>

#include "core/device_error.h"
#include "core/error.h"
#include "core/log.h"
#include "server/kv_event_publisher.h"

namespace pagoda::server {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {
// Step failures are logged at most this often (the metric counts every one).
constexpr auto kFailureLogInterval = 10s;
}  // namespace

namespace {

// What the fair queue lets into the engine: all its sequences but a few kept for newcomers, and
// two steps' worth of prompt tokens not yet prefilled.
FairQueueLimits fair_limits(const ResolvedEngineConfig& c) {
  FairQueueLimits l;
  l.max_seqs = std::max(1, c.max_num_seqs);
  l.reserved_seqs = l.max_seqs > 1 ? std::max(1, l.max_seqs / 8) : 0;
  l.max_unstarted_tokens = 2 * int64_t{std::max(1, c.max_num_batched_tokens)};
  return l;
}

}  // namespace

bool GenerationChannel::next(std::vector<ChoiceOutput>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !items_.empty() || remaining_ == 0; });
  while (!items_.empty()) {
    out.push_back(std::move(items_.front()));
    items_.pop_front();
  }
  return remaining_ > 0 || !out.empty();
}

std::string GenerationChannel::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

void GenerationChannel::set_notify(std::function<void()> notify) {
  std::lock_guard lock(mu_);
  notify_ = std::move(notify);
}

void GenerationChannel::push(ChoiceOutput o) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    if (o.out.finished) {
      --remaining_;
      if (load_) --*load_;
    }
    items_.push_back(std::move(o));
    notify = notify_;
  }
  cv_.notify_all();
  if (notify) notify();
}

void GenerationChannel::fail(const std::string& message) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    error_ = message;
    if (load_) *load_ -= std::max(0, remaining_);
    remaining_ = 0;
    notify = notify_;
  }
  cv_.notify_all();
  if (notify) notify();
}

AsyncEngine::AsyncEngine(std::unique_ptr<Engine> engine, EngineMetrics& metrics, AsyncEngineOptions options)
    : engine_(std::move(engine)),
      metrics_(metrics),
      options_(options),
      limits_(options_.waiting_limits ? options_.waiting_limits
                                      : std::make_shared<WaitingLimits>(options_.max_waiting_requests,
                                                                        options_.max_waiting_tokens)),
      fair_(fair_limits(engine_->config())),
      stats_(metrics, options_.logging, engine_->config().max_model_len) {
  if (options_.kv_events) engine_->core().set_kv_event_log(&kv_event_log_);
  publish_gauges(engine_->core().stats());
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  abort_all();
  stop();
}

std::shared_ptr<GenerationChannel> AsyncEngine::submit(std::vector<ChoiceSpec> choices, std::string& why,
                                                       const std::string& client) {
  Pending p{nullptr, std::move(choices), false};
  p.client = client;
  return enqueue(std::move(p), why);
}

std::shared_ptr<GenerationChannel> AsyncEngine::submit_embedding(std::vector<std::vector<int32_t>> prompts,
                                                                 std::string& why, const std::string& client) {
  Pending p{nullptr, {}, true};
  p.client = client;
  p.choices.reserve(prompts.size());
  for (auto& prompt : prompts) p.choices.push_back(ChoiceSpec{std::move(prompt), {}});
  return enqueue(std::move(p), why);
}

std::shared_ptr<GenerationChannel> AsyncEngine::enqueue(Pending p, std::string& why) {
  const auto n = static_cast<int64_t>(p.choices.size());
  auto channel = std::make_shared<GenerationChannel>(static_cast<int32_t>(n));
  p.channel = channel;
  for (const ChoiceSpec& c : p.choices) p.work += choice_work(c, p.embed, max_model_len());
  {
    std::lock_guard lock(mu_);
    if (!accepting_) {
      why = dead_ ? "the engine hit a fatal fault and the server is restarting; retry shortly"
                  : "the server is shutting down";
      return nullptr;
    }
    if (!limits_->try_add(n, p.work, p.client, why)) return nullptr;
    p.id = next_generation_++;
    channel->generation_ = p.id;
    channel->owner_ = this;
    channel->load_ = &load_;
    load_ += n;
    ++live_generations_;
    p.arrival = Clock::now();
    pending_.push_back(std::move(p));
  }
  cv_.notify_one();
  return channel;
}

void AsyncEngine::cancel(const std::shared_ptr<GenerationChannel>& channel) {
  {
    std::lock_guard lock(mu_);
    if (channel->cancelled_) return;
    channel->cancelled_ = true;
    cancels_.push_back(channel);
  }
  cv_.notify_one();
}

void AsyncEngine::stop_accepting() {
  std::lock_guard lock(mu_);
  accepting_ = false;
}

bool AsyncEngine::serving() const {
  std::lock_guard lock(mu_);
  return accepting_ && !dead_;
}

std::string AsyncEngine::not_serving_reason() const {
  std::lock_guard lock(mu_);
  if (dead_) return "the engine hit a fatal fault (" + dead_reason_ + ") and the server is exiting for a restart";
  return accepting_ ? "" : "the server is shutting down";
}

bool AsyncEngine::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return idle_cv_.wait_for(lock, timeout, [&] { return live_generations_ == 0; });
}

int64_t AsyncEngine::num_live_generations() const {
  std::lock_guard lock(mu_);
  return live_generations_;
}

void AsyncEngine::abort_all() {
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
    abort_all_ = true;
  }
  cv_.notify_one();
}

void AsyncEngine::stop() {
  {
    std::lock_guard lock(mu_);
    accepting_ = false;
    stopping_ = true;
  }
  cv_.notify_one();
  if (!thread_.joinable()) return;
  thread_.join();
  // --profile-steps: where the steps' time went, once the engine thread is done with them.
  if (const StepProfiler* p = engine_->step_profiler()) LOG_INFO("engine " << options_.logging.engine_index << " " << p->report());
}

void AsyncEngine::finish_generation() {
  {
    std::lock_guard lock(mu_);
    --live_generations_;
  }
  idle_cv_.notify_all();
}

int64_t AsyncEngine::choice_work(const ChoiceSpec& c, bool embed, int32_t max_model_len) {
  const auto prompt = static_cast<int64_t>(c.prompt.size());
  if (embed) return std::max<int64_t>(1, prompt);
  return prompt + c.params.max_tokens.value_or(std::max<int64_t>(0, max_model_len - prompt));
}

// New generations wait in the fair queue; admit() hands their choices to the engine.
void AsyncEngine::add_pending(std::vector<Pending>& adds) {
  for (Pending& p : adds) {
    p.stats = stats_.begin_generation(p.choices, p.arrival);
    std::vector<int64_t> prompt_tokens;
    prompt_tokens.reserve(p.choices.size());
    for (const ChoiceSpec& c : p.choices) prompt_tokens.push_back(static_cast<int64_t>(c.prompt.size()));
    const int32_t priority = p.embed || p.choices.empty() ? 0 : p.choices.front().params.priority;
    fair_.push(p.id, p.client, std::move(prompt_tokens), priority);
    const uint64_t id = p.id;
    held_.emplace(id, std::move(p));
  }
}

void AsyncEngine::admit() {
  const auto now = Clock::now();
  for (const FairQueue::Admit& a : fair_.take()) {
    const auto it = held_.find(a.generation);
    if (it == held_.end()) {
      fair_.abandon(a);
      continue;
    }
    Pending& p = it->second;
    ChoiceSpec& c = p.choices[a.choice];
    const int64_t work = choice_work(c, p.embed, max_model_len());
    int64_t id = -1;
    try {
      id = p.embed ? engine_->add_embedding_request(std::move(c.prompt))
                   : engine_->add_request(std::move(c.prompt), std::move(c.params));
    } catch (const std::exception& e) {
      // Should have been caught by validation in the HTTP thread; the other choices go too.
      fair_.abandon(a);
      limits_->release_work(p.client, work);
      limits_->started();
      ++p.taken;
      fail_generation(p, e.what());
      held_.erase(it);
      continue;
    }
    fair_.admitted(a, id);
    live_[id] = Live{p.channel, static_cast<int32_t>(a.choice), false};
    stats_.added(p.stats, a.choice, id, now);
    p.channel->engine_ids_.push_back(id);
    limits_->release_work(p.client, work);
    if (++p.taken == p.choices.size()) held_.erase(it);
  }
}

// The choices of `p` still in the engine are aborted and its waiting ones dropped; the client gets
// `message`.
void AsyncEngine::fail_generation(Pending& p, const std::string& message) {
  int64_t unstarted = 0;
  for (int64_t id : p.channel->engine_ids_) {
    const auto l = live_.find(id);
    if (l == live_.end()) continue;
    engine_->abort(id);
    fair_.finished(id);
    unstarted += l->second.started ? 0 : 1;
    live_.erase(l);
    stats_.forget(id);
  }
  const size_t dropped = fair_.drop(p.id);
  int64_t dropped_work = 0;
  for (size_t i = p.choices.size() - dropped; i < p.choices.size(); ++i)
    dropped_work += choice_work(p.choices[i], p.embed, max_model_len());
  limits_->release_work(p.client, dropped_work);
  p.taken = p.choices.size();
  limits_->started(unstarted + static_cast<int64_t>(dropped));
  p.channel->fail(message);
  finish_generation();
}

size_t AsyncEngine::drop_held(uint64_t generation) {
  const auto held = held_.find(generation);
  if (held == held_.end()) return 0;
  Pending& p = held->second;
  const size_t dropped = fair_.drop(p.id);
  int64_t work = 0;
  for (size_t i = p.choices.size() - dropped; i < p.choices.size(); ++i)
    work += choice_work(p.choices[i], p.embed, max_model_len());
  limits_->release_work(p.client, work);
  limits_->started(static_cast<int64_t>(dropped));
  held_.erase(held);
  return dropped;
}

void AsyncEngine::fail_held(const std::string& message) {
  for (auto& [id, p] : held_) fail_generation(p, message);
  held_.clear();
}

bool AsyncEngine::apply_cancels(std::vector<std::shared_ptr<GenerationChannel>>& cancels, bool all) {
  bool any = false;
  if (all) {
    for (auto& [id, live] : live_) any |= engine_->abort(id);
    return any;
  }
  for (auto& channel : cancels) {
    for (int64_t id : channel->engine_ids_)
      if (live_.count(id)) any |= engine_->abort(id);
    // Choices that never reached the engine are dropped here; they count as finished.
    const size_t dropped = drop_held(channel->generation_);
    bool done;
    {
      std::lock_guard lock(channel->mu_);
      channel->remaining_ -= static_cast<int32_t>(dropped);
      load_ -= static_cast<int64_t>(dropped);
      done = channel->remaining_ <= 0;
    }
    if (done && dropped > 0) finish_generation();
  }
  return any;
}

void AsyncEngine::deliver(std::vector<RequestOutput>& outputs) {
  for (RequestOutput& o : outputs) {
    auto it = live_.find(o.id);
    if (it == live_.end()) continue;
    Live& l = it->second;
    if (!l.started) {
      l.started = true;
      limits_->started();
      fair_.started(o.id);
    }
    const bool finished = o.finished;
    std::shared_ptr<GenerationChannel> channel = l.channel;
    if (finished && o.finish_reason == FinishReason::Error) {
      fair_.finished(o.id);
      live_.erase(it);
      fail_generation(channel, o.finish_detail.empty() ? std::string("the engine failed this request") : o.finish_detail);
      continue;
    }
    channel->push(ChoiceOutput{l.choice, std::move(o)});
    if (finished) {
      fair_.finished(o.id);
      live_.erase(it);
      bool done;
      {
        std::lock_guard lock(channel->mu_);
        done = channel->remaining_ == 0;
      }
      if (done) finish_generation();
    }
  }
}

void AsyncEngine::publish_gauges(const EngineStats& s) {
  // Counters first: a scraper that sees the running gauge fall to 0 sees the last step's counts.
  metrics_.publish_spec_decode(s);
  metrics_.publish_lora(s);
  metrics_.num_requests_running.set(s.num_running);
  // Waiting = in the engine's queue or held by the fair queue before it (vLLM's gauge counts both:
  // requests not yet running).
  metrics_.num_requests_waiting.set(static_cast<double>(s.num_waiting + fair_.waiting_choices()));
  metrics_.kv_cache_usage_perc.set(s.kv_usage);
  kv_usage_ = s.kv_usage;
  if (const PrefixCache* pc = engine_->core().scheduler().kv().prefix_cache())
    metrics_.prefix_cache_blocks.set(pc->num_cached_hashes());
  if (options_.kv_events) {
    const uint64_t dropped = options_.kv_events->dropped_batches();
    metrics_.kv_events_dropped.inc(static_cast<double>(dropped - last_kv_events_dropped_));
    last_kv_events_dropped_ = dropped;
  }
  const int64_t preemptions = s.num_preemptions;
  metrics_.num_preemptions_total.inc(static_cast<double>(preemptions - last_preemptions_));
  last_preemptions_ = preemptions;
  metrics_.prefix_cache_queries.inc(static_cast<double>(s.prefix_cache_queries - last_prefix_queries_));
  metrics_.prefix_cache_hits.inc(static_cast<double>(s.prefix_cache_hits - last_prefix_hits_));
  last_prefix_queries_ = s.prefix_cache_queries;
  last_prefix_hits_ = s.prefix_cache_hits;
  metrics_.engine_step_failures.inc(static_cast<double>(s.num_step_failures - last_step_failures_));
  last_step_failures_ = s.num_step_failures;
}

void AsyncEngine::fail_generation(const std::shared_ptr<GenerationChannel>& channel, const std::string& message) {
  const auto now = Clock::now();
  for (int64_t id : channel->engine_ids_) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    engine_->abort(id);
    stats_.failed(id, now);
    if (!it->second.started) limits_->started();
    live_.erase(it);
  }
  channel->fail(message);
  finish_generation();
}

void AsyncEngine::note_step(const EngineStats& s) {
  if (!s.step_failed) {
    if (s.step_num_tokens > 0) consecutive_failures_ = 0;
    return;
  }
  ++consecutive_failures_;
  ++failures_unlogged_;
  const auto now = Clock::now();
  if (last_failure_log_ != Clock::time_point{} && now - last_failure_log_ < kFailureLogInterval) return;
  if (last_failure_log_ == Clock::time_point{})
    LOG_ERROR("engine step failed: " << s.step_error << "; its requests were answered with an error and the "
              "engine goes on (further failures are reported at most every 10 s and counted in "
              "engine_step_failures_total)");
  else
    LOG_ERROR(failures_unlogged_ << " engine step(s) failed since the last report; the last: " << s.step_error);
  failures_unlogged_ = 0;
  last_failure_log_ = now;
}

void AsyncEngine::pause_after_failures() {
  if (consecutive_failures_ == 0) return;
  // A fault that repeats (memory that stays short) must not turn into a loop that burns a core.
  const auto pause = std::min<std::chrono::milliseconds>(1000ms, 10ms * (int64_t{1} << std::min(consecutive_failures_ - 1, 7)));
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, pause, [&] { return stopping_ || abort_all_; });
}

void AsyncEngine::die(const std::string& what) {
  {
    std::lock_guard lock(mu_);
    dead_ = true;
    dead_reason_ = what;
    accepting_ = false;
  }
  LOG_ERROR("fatal engine fault: " << what << " — the device cannot be used any more; failing every request in "
            "flight and exiting with code " << kExitEngineFault << " so that a supervisor restarts the server");
  const std::string message = "the engine hit a fatal fault (" + what + ") and the server is restarting; retry shortly";
  fail_all(message);
  bool told = false;
  for (;;) {
    std::vector<Pending> adds;
    bool stop = false;
    {
      std::unique_lock lock(mu_);
      if (told) cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      adds.swap(pending_);
      cancels_.clear();
      stop = stopping_;
    }
    for (Pending& p : adds) {  // queued before accepting_ turned false
      limits_->started(static_cast<int64_t>(p.choices.size()));
      limits_->release_work(p.client, p.work);
      p.channel->fail(message);
      finish_generation();
    }
    if (!told && options_.on_fatal) options_.on_fatal(what);
    told = true;
    if (stop) return;
  }
}

void AsyncEngine::fail_all(const std::string& message) {
  std::vector<std::shared_ptr<GenerationChannel>> channels;
  const auto now = Clock::now();
  for (auto& [id, live] : live_) {
    engine_->abort(id);
    fair_.finished(id);
    stats_.failed(id, now);
    if (!live.started) limits_->started();
    bool seen = false;
    for (auto& c : channels) seen |= c == live.channel;
    if (!seen) channels.push_back(live.channel);
  }
  live_.clear();
  for (auto& c : channels) {
    drop_held(c->generation_);
    c->fail(message);
    finish_generation();
  }
}

// One step of the core, its outputs made into text by the processor; requests finished by a stop
// string are aborted in the core (their blocks freed) before the outputs are delivered.
void AsyncEngine::step() {
  stats_.step_started(Clock::now());
  EngineCoreOutputs core_out = engine_->core().step();
  OutputProcessor::Result r = engine_->processor().process(core_out.outputs);
  for (int64_t id : r.reqs_to_abort) engine_->core().abort(id);
  stats_.step_finished(r.outputs, core_out.stats, Clock::now());
  if (options_.kv_events && !kv_event_log_.empty()) options_.kv_events->publish(kv_event_log_.take());
  deliver(r.outputs);
  note_step(core_out.stats);
}

void AsyncEngine::loop() {
  // A GPU's current device is per thread: this thread's becomes the engine's own (a data-parallel
  // replica's is not device 0).
  try {
    engine_->backend().synchronize();
  } catch (const FatalDeviceError& e) {
    die(e.what());
    return;
  }
  for (;;) {
    std::vector<Pending> adds;
    std::vector<std::shared_ptr<GenerationChannel>> cancels;
    bool stopping, abort_everything;
    {
      std::unique_lock lock(mu_);
      if (!engine_->has_unfinished() && !fair_.has_waiting()) {
        auto woken = [&] { return stopping_ || abort_all_ || !pending_.empty() || !cancels_.empty(); };
        // Idle: sleep until woken, or until the stats line that closes a busy spell is due.
        if (auto due = stats_.next_tick()) cv_.wait_until(lock, *due, woken);
        else cv_.wait(lock, woken);
      }
      adds.swap(pending_);
      cancels.swap(cancels_);
      stopping = stopping_;
      abort_everything = abort_all_;
      abort_all_ = false;
    }
    add_pending(adds);
    bool aborted = apply_cancels(cancels, abort_everything || stopping);
    if (abort_everything || stopping) fail_held("the server is shutting down");
    admit();
    if (engine_->has_unfinished() || aborted) {
      // The core fails a step's own requests itself (EngineCore::step); what reaches here came from
      // outside a step (the output processor), or is fatal.
      try {
        step();
      } catch (const FatalDeviceError& e) {
        die(e.what());
        return;
      } catch (const InternalError& e) {
        LOG_ERROR("internal error after an engine step: " << e.what() << " — please report it; failing every "
                  "request in flight");
        fail_all(std::string("internal engine error: ") + e.what());
        ++consecutive_failures_;
      } catch (const std::exception& e) {
        LOG_ERROR("processing an engine step failed: " << e.what() << "; failing every request in flight");
        fail_all(std::string("internal engine error: ") + e.what());
        ++consecutive_failures_;
      }
    }
    if (!engine_->has_unfinished() && fair_.engine_idle())
      LOG_WARN("fair queue: choices were still counted in an idle engine; counts reset");
    // The state after the step and the aborts it caused (stop strings), not the step's own view.
    const EngineStats now = engine_->core().stats();
    publish_gauges(now);
    stats_.tick(now, Clock::now(), engine_->core().loras().get());
    pause_after_failures();
    if (stopping && !engine_->has_unfinished()) {
      if (!live_.empty()) fail_all("the server is shutting down");
      std::lock_guard lock(mu_);
      if (pending_.empty()) break;
    }
  }
}

}  // namespace pagoda::server

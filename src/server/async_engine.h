// The engine on a thread of its own. HTTP threads submit generations and read their outputs from a
// per-generation channel; the engine thread alone touches the Engine: it takes new requests and
// aborts between steps, runs steps while anything is unfinished and sleeps otherwise.
//
// One generation is the set of choices one HTTP request asked for (prompts x n); each choice is one
// engine request. A client that goes away cancels its generation: the engine aborts every choice
// and frees their blocks at the end of the step in flight.
//
// Faults (docs/faults.md): a choice the engine failed (finish reason error) fails its whole
// generation with the engine's message (a 500); other generations go on. Steps that keep failing
// are retried with a growing pause (10 ms to 1 s), logged once per 10 s and counted in
// pagoda:engine_step_failures_total. A FatalDeviceError ends the engine: everything in flight and
// queued fails, serving() turns false (/health 503) and on_fatal is called once.
//
// Under data parallelism (server/data_parallel_engine.h) each replica is one AsyncEngine; they share
// the waiting limits (server/waiting_limits.h) and the LoRA catalog, and each reports its load.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "kv/kv_events.h"
#include "server/engine_metrics.h"
#include "server/fair_queue.h"
#include "server/request_stats.h"
#include "server/waiting_limits.h"

namespace pagoda::server {

struct ChoiceSpec {
  std::vector<int32_t> prompt;
  SamplingParams params;  // n == 1
};

struct ChoiceOutput {
  int32_t choice = 0;  // index into the generation's choices
  RequestOutput out;
};

class AsyncEngine;

// Outputs of one generation, in the order the engine produced them.
class GenerationChannel {
 public:
  explicit GenerationChannel(int32_t num_choices) : remaining_(num_choices) {}

  // Moves what is there into `out`, waiting up to `timeout` for something to arrive. Returns false
  // once every choice has finished and everything was taken.
  bool next(std::vector<ChoiceOutput>& out, std::chrono::milliseconds timeout);
  // next() without waiting.
  bool poll(std::vector<ChoiceOutput>& out) { return next(out, std::chrono::milliseconds(0)); }
  // Called (on the engine thread, outside the channel's lock) whenever something arrives or the
  // generation fails: an asynchronous reader wakes up instead of waiting on a thread. Empty = none.
  void set_notify(std::function<void()> notify);
  // Set when the engine could not take the request (message for the client); the choices are done.
  std::string error() const;

 private:
  friend class AsyncEngine;
  void push(ChoiceOutput o);
  void fail(const std::string& message);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ChoiceOutput> items_;
  int32_t remaining_;
  std::string error_;
  // The engine's count of unfinished choices, kept with remaining_ (set before the engine thread
  // sees the channel; only that thread changes remaining_ afterwards).
  std::atomic<int64_t>* load_ = nullptr;
  AsyncEngine* owner_ = nullptr;  // the engine that took it (set once, by enqueue)
  bool cancelled_ = false;  // guarded by AsyncEngine::mu_
  std::vector<int64_t> engine_ids_;  // engine thread only
  uint64_t generation_ = 0;          // its id in the fair queue
  std::function<void()> notify_;     // guarded by mu_
};

class KvEventPublisher;

struct AsyncEngineOptions {
  // Reject new requests (503) while this many choices wait to start. 0 = no limit.
  int32_t max_waiting_requests = 0;
  // Reject new requests (503) while this many tokens of work wait to start, a choice's work being
  // its prompt plus max_tokens (an embedding input: its prompt). A named client (the request's
  // `user`) may hold half of it. 0 = no limit.
  int64_t max_waiting_tokens = 0;
  // The per-request line and the periodic stats line (--enable-log-requests, --disable-log-stats).
  RequestLogOptions logging;
  // Called once, on the engine thread, after a FatalDeviceError has failed every request: the
  // server exits (cli/cmd_serve.cpp). The engine is never stepped again.
  std::function<void(const std::string& what)> on_fatal;
  // --kv-events-config: the prefix cache's events after each step, never blocking the engine.
  std::shared_ptr<KvEventPublisher> kv_events;
  // Shared by data-parallel replicas: the server's limits, checked over all of them. Null = this
  // engine's own, from max_waiting_requests and max_waiting_tokens.
  std::shared_ptr<WaitingLimits> waiting_limits;
};

class AsyncEngine {
 public:
  AsyncEngine(std::unique_ptr<Engine> engine, EngineMetrics& metrics, AsyncEngineOptions options);
  ~AsyncEngine();  // stops the thread (aborting whatever is left)

  // Read-only engine facts, safe from any thread.
  const Tokenizer* tokenizer() const { return engine_->tokenizer(); }
  // --profile-steps' profiler (engine/step_profiler.h: thread-safe report and restart), else null.
  StepProfiler* step_profiler() { return engine_->step_profiler(); }
  const ModelConfig& model_config() const { return engine_->model_config(); }
  int32_t max_model_len() const { return engine_->config().max_model_len; }
  // Images in: the model has a vision tower and --limit-mm-per-prompt does not turn it off.
  bool takes_images() const { return engine_->config().images; }
  int32_t max_images_per_prompt() const { return engine_->config().multimodal.max_images_per_prompt; }
  // Prefix caching on a model with Gated DeltaNet layers (state snapshots need boundaries).
  bool hybrid_prefix_caching() const {
    return engine_->config().enable_prefix_caching && engine_->model_config().num_layers_of(LayerKind::LinearAttention) > 0;
  }

  // The LoRA adapters served (null without --enable-lora), and runtime loading (EngineCore's:
  // thread-safe).
  std::shared_ptr<const LoraCatalog> loras() const { return engine_->core().loras(); }
  int32_t load_lora_adapter(const std::string& name, const std::string& path) {
    return engine_->core().load_lora_adapter(name, path);
  }
  bool unload_lora_adapter(const std::string& name) { return engine_->core().unload_lora_adapter(name); }
  bool runtime_lora_updates() const { return engine_->config().lora.runtime_updates; }

  // Queues a generation. Returns null when overloaded or shutting down (`why` says which).
  // `client` groups requests for fairness (server/fair_queue.h); "" = the anonymous client.
  std::shared_ptr<GenerationChannel> submit(std::vector<ChoiceSpec> choices, std::string& why,
                                            const std::string& client = "");
  // Queues embedding requests, one per prompt (Engine::add_embedding_request): choice i's one
  // output carries the embedding of prompts[i]. Cancelled, overloaded and shut down as submit().
  std::shared_ptr<GenerationChannel> submit_embedding(std::vector<std::vector<int32_t>> prompts, std::string& why,
                                                      const std::string& client = "");
  // The client is gone: abort every choice still running. Safe to call more than once.
  void cancel(const std::shared_ptr<GenerationChannel>& channel);
  // The engine that took `channel` (a data-parallel server routes its cancel there).
  static AsyncEngine* owner_of(const GenerationChannel& channel) { return channel.owner_; }

  // Load, for a data-parallel server's balancer; safe from any thread. Choices taken and not yet
  // finished (waiting in any queue, or running); the KV cache's usage after the last step.
  int64_t load() const { return load_.load(); }
  double kv_usage() const { return kv_usage_.load(); }

  // Shutdown, in order: stop taking requests; wait for the live ones (up to `grace`); abort the rest
  // and wait for their final outputs; stop the thread.
  void stop_accepting();
  // False once the engine cannot serve: shutting down, or dead after a fatal fault (/health: 503
  // with not_serving_reason()).
  bool serving() const;
  std::string not_serving_reason() const;
  bool wait_idle(std::chrono::milliseconds timeout);
  void abort_all();
  void stop();
  int64_t num_live_generations() const;

 private:
  struct Pending {
    std::shared_ptr<GenerationChannel> channel;
    std::vector<ChoiceSpec> choices;
    bool embed = false;  // choices[i].prompt are embedding requests (their params unused)
    std::chrono::steady_clock::time_point arrival;  // submit(): the start of TTFT and e2e
    std::string client;
    uint64_t id = 0;     // in the fair queue
    int64_t work = 0;    // tokens, counted in waiting_work_ until the choices go to the engine
    size_t taken = 0;    // choices handed to the engine (engine thread)
    std::shared_ptr<RequestStats::Generation> stats;
  };
  static int64_t choice_work(const ChoiceSpec& c, bool embed, int32_t max_model_len);
  std::shared_ptr<GenerationChannel> enqueue(Pending p, std::string& why);
  // Per engine request, engine thread only.
  struct Live {
    std::shared_ptr<GenerationChannel> channel;
    int32_t choice = 0;
    bool started = false;
  };

  void loop();
  void add_pending(std::vector<Pending>& adds);
  // Hands the engine what the fair queue lets go now.
  void admit();
  void fail_generation(Pending& p, const std::string& message);
  void fail_held(const std::string& message);
  // Drops what of a generation has not reached the engine; returns how many choices.
  size_t drop_held(uint64_t generation);
  // Aborts the choices of `cancels` (or every live choice); true when anything was aborted.
  bool apply_cancels(std::vector<std::shared_ptr<GenerationChannel>>& cancels, bool all);
  void deliver(std::vector<RequestOutput>& outputs);
  void step();
  void publish_gauges(const EngineStats& stats);
  void finish_generation();
  void fail_all(const std::string& message);
  // Fails the generation of a choice the engine failed: its other choices are aborted.
  void fail_generation(const std::shared_ptr<GenerationChannel>& channel, const std::string& message);
  // A step that threw (stats.step_failed): counted, logged at most once per interval; the pause
  // before the next step grows while steps keep failing.
  void note_step(const EngineStats& stats);
  void pause_after_failures();
  // FatalDeviceError: fail everything, stop serving, tell the server, and wait for stop().
  void die(const std::string& what);

  std::unique_ptr<Engine> engine_;
  EngineMetrics& metrics_;
  AsyncEngineOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> pending_;
  std::vector<std::shared_ptr<GenerationChannel>> cancels_;
  bool accepting_ = true;
  bool stopping_ = false;
  bool abort_all_ = false;
  int64_t live_generations_ = 0;          // submitted, not yet fully finished
  std::condition_variable idle_cv_;
  std::shared_ptr<WaitingLimits> limits_;  // choices with no output yet, tokens not yet in the engine
  std::atomic<int64_t> load_{0};           // choices taken, not yet finished
  std::atomic<double> kv_usage_{0};
  uint64_t next_generation_ = 1;

  FairQueue fair_;                         // engine thread only
  std::unordered_map<uint64_t, Pending> held_;  // generations with choices not yet in the engine
  bool dead_ = false;                     // guarded by mu_: a fatal fault ended the engine
  std::string dead_reason_;               // guarded by mu_

  std::unordered_map<int64_t, Live> live_;  // engine thread only
  KvEventLog kv_event_log_;                // engine thread only (the prefix cache appends)
  uint64_t last_kv_events_dropped_ = 0;    // engine thread only
  int64_t last_preemptions_ = 0;
  int64_t last_prefix_queries_ = 0, last_prefix_hits_ = 0;
  // Step failures (engine thread only).
  int64_t last_step_failures_ = 0;
  int32_t consecutive_failures_ = 0;
  int64_t failures_unlogged_ = 0;
  std::chrono::steady_clock::time_point last_failure_log_{};
  RequestStats stats_;  // engine thread only
  std::thread thread_;
};

}  // namespace pagoda::server

// EngineCore: token ids in, token ids out (vLLM v1's EngineCore, docs/design.md §1, §7): a scheduler,
// an executor (engine/executor.h: one worker per device, each holding its backend, model, KV pool,
// recurrent state and runner) and the sampler. One step() = schedule, run the model on every
// worker, sample, update; it returns each request's new token ids, the finishes the core decides
// (stop token, length, abort; stop *strings* are the OutputProcessor's) and the step's stats. No
// text is made here.
//
// Not thread-safe: one thread drives it (the server's engine thread, or the offline loop).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/engine_config.h"
#include "engine/executor.h"
#include "engine/grammar_masks.h"
#include "engine/lora_catalog.h"
#include "engine/lora_slots.h"
#include "engine/proposer.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/speculation_controller.h"
#include "io/model_config.h"
#include "kv/memory_plan.h"

namespace pagoda {

class ThreadPool;

// What one step did for one request.
struct EngineCoreOutput {
  int64_t id = 0;
  std::vector<int32_t> new_token_ids;
  std::vector<SampleResult> samples;  // one per new token (logprobs when asked for)
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  int32_t stop_token = -1;  // the EOS / stop token id that finished it
  std::string finish_detail;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  int32_t num_cached_tokens = 0;  // prompt tokens found in the prefix cache at admission
  // An embedding request's one output (finished): the final-norm hidden state of its last prompt
  // token, fp32, neither truncated nor normalised (the caller applies the pooling head).
  std::vector<float> embedding;
};

// The engine's state after a step, and what the step did: what the server's gauges, the stats
// line and the request timings read (never the scheduler itself).
struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  // LoRA adapters (their slots) with requests running / waiting, ascending; empty without LoRA.
  std::vector<int32_t> running_loras, waiting_loras;
  double kv_usage = 0;                 // fraction of KV blocks in use
  int64_t num_preemptions = 0;         // since start
  int32_t step_preemptions = 0;        // in this step
  int32_t step_num_tokens = 0;         // tokens the step computed (prefill + decode)
  int32_t step_num_decodes = 0;
  std::vector<int64_t> step_scheduled;  // requests the step computed anything of
  double step_s = 0;                    // wall time of the step
  int64_t prefix_cache_queries = 0;     // tokens looked up in the prefix cache, since start
  int64_t prefix_cache_hits = 0;        // of those, tokens found
  bool prefix_caching = false;          // --enable-prefix-caching
  // Speculative decoding, since start (vLLM's spec_decode counters): sequences that brought
  // drafts to a step, the drafts, those accepted, and accepted by position (index 0 = first draft).
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;  // empty when speculative decoding is off
  // Steps that threw since start; whether this one did, and what (docs/faults.md).
  int64_t num_step_failures = 0;
  bool step_failed = false;
  std::string step_error;
};

struct EngineCoreOutputs {
  std::vector<EngineCoreOutput> outputs;  // every request that got tokens or finished
  EngineStats stats;
};

class EngineCore {
 public:
  // `shared_loras`: the adapter catalog of another replica of the same model (data parallelism), so
  // that an adapter loaded or unloaded at run time has one id on every replica; null: its own,
  // filled from --lora-modules.
  EngineCore(const std::string& model_dir, const EngineConfig& config,
             std::shared_ptr<LoraCatalog> shared_loras = nullptr);
  ~EngineCore();
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  const ModelConfig& model_config() const { return model_config_; }
  const ResolvedEngineConfig& config() const { return config_; }
  const MemoryPlan& memory_plan() const { return plan_; }
  Backend& backend() { return executor_->driver().backend(); }
  const Executor& executor() const { return *executor_; }
  // The LoRA adapters served (an engine with --enable-lora), by name and id; null otherwise.
  const std::shared_ptr<LoraCatalog>& loras() const { return loras_; }
  // Runtime adapters (the server's /v1/load_lora_adapter, /v1/unload_lora_adapter): reads and checks
  // `path` against the model (pagoda::Error naming the file and the fix) and serves it as `name`;
  // returns its id. Safe from any thread (the catalog locks; the checks read what loading left).
  int32_t load_lora_adapter(const std::string& name, const std::string& path);
  // No new request may name it (its running ones finish with it); false when none is served so.
  bool unload_lora_adapter(const std::string& name);
  // For tests and invariant checks; the server reads EngineStats.
  const Scheduler& scheduler() const { return *scheduler_; }
  size_t kv_cache_bytes() const { return executor_->kv_cache_bytes(); }  // the target's KV cache and a draft model's
  size_t state_bytes() const { return executor_->state_bytes(); }  // hybrid models; else 0
  size_t workspace_bytes() const { return executor_->workspace_bytes(); }
  // Where the steps' wall time went so far (bench offline prints it per decode step).
  StepTimes step_times() const;
  // --profile-steps' tables so far (engine/step_profiler.h), else null.
  const StepProfiler* step_profiler() const;
  StepProfiler* step_profiler();
  // The state now (the stats of a step with nothing in it).
  EngineStats stats() const;
  // Sets the state fields of `s` (running, waiting, KV usage, preemptions) to the state now, e.g.
  // after aborts that followed the step; the step's own fields stay.
  void refresh_state(EngineStats& s) const;

  // Queues a request under a new id. Throws pagoda::Error for an empty or too long prompt, a token
  // outside the vocabulary or bad parameters. SamplingParams::n is not expanded here.
  int64_t add_request(std::vector<int32_t> prompt, SamplingParams params);
  // An embedding request: the prompt runs through the model like any prefill and its one output
  // carries `embedding`; nothing is sampled. Throws as add_request.
  int64_t add_embedding_request(std::vector<int32_t> prompt);
  // Finishes a request with reason abort; its output comes with the next step. False for an
  // unknown or finished id.
  bool abort(int64_t id) { return scheduler_->abort(id); }
  // The prefix cache's KV cache events go to `log` (kv/kv_events.h); the caller takes them.
  void set_kv_event_log(KvEventLog* log) { scheduler_->set_kv_event_log(log); }
  bool has_unfinished() const { return scheduler_->has_unfinished(); }

  // A step that throws fails the requests it ran (finish reason error, the exception's message
  // in finish_detail) and leaves the scheduler, the KV pool, the state slots and the prefix cache
  // consistent; stats.step_failed says so and the next step runs normally. Only a
  // FatalDeviceError (the device cannot be trusted any more) leaves step() (docs/faults.md).
  EngineCoreOutputs step();

  // Test hook: with speculative decoding on, drafts come from `proposer` (the sequence's tokens
  // so far and the most drafts wanted) instead of the configured method.
  using DraftProposer = DraftFunction;
  void set_draft_proposer_for_testing(DraftProposer proposer);

 private:
  void plan_and_allocate();
  // step() without its fault handling: runs the scheduled step and appends its outputs.
  void run_scheduled(const SchedulerOutput& sched, std::vector<EngineCoreOutput>& outs);
  void check_prompt(const std::vector<int32_t>& prompt) const;
  // Runs the model on the step and samples every sampling sequence (in
  // SchedulerOutput::sampling_seqs order): its accepted drafts and one more token; `hidden` gets
  // each embedding row's hidden state.
  std::vector<std::vector<SampleResult>> execute_and_sample(const SchedulerOutput& sched,
                                                            std::vector<std::vector<float>>& hidden);
  // One sampling sequence of the step: where its logits rows start and how many drafts they verify.
  struct SamplingRows {
    Sequence* seq;
    int32_t first_row;
    int32_t num_drafts;
  };
  void sample_on_host(const StepLogits& logits, std::span<const SamplingRows> seqs,
                      std::vector<std::vector<SampleResult>>& samples);
  // After sampling, before the scheduler's update: restores the pre-step state of hybrid
  // sequences that rejected a draft, and counts drafts and accepted tokens (spec_totals_).
  void settle_drafts(const SchedulerOutput& sched, std::span<const std::vector<int32_t>> tokens);
  ThreadPool& host_pool();
  // Structured output (engine/grammar_masks.h): what the sequence may still sample, its next token
  // included; its matcher made and first mask filled on a mask worker (or the request failed, when
  // making it fails); the next masks of the step's sampling sequences, after their new tokens.
  int64_t tokens_left(const Sequence& s) const;
  void start_grammar(Sequence& s);
  void submit_grammar_job(const GrammarMaskWorkers::Job& job);
  void after_sampling(std::span<Sequence* const> rows);

  ResolvedEngineConfig config_;
  ModelConfig model_config_;
  std::shared_ptr<LoraCatalog> loras_;        // --enable-lora: before executor_, whose workers read it
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<LoraSlotTable> lora_slots_;  // which adapter each device slot holds
  MemoryPlan plan_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<ThreadPool> own_pool_;  // host sampling when the backend has no host pool
  // Finished sequences whose mask job still runs, freed once it is done. Before mask_workers_,
  // destroyed after it: its destructor waits for the running jobs.
  std::vector<std::unique_ptr<Sequence>> retired_;
  std::vector<std::pair<int64_t, std::string>> grammar_failures_;  // failed at the next step's start
  std::unique_ptr<GrammarMaskWorkers> mask_workers_;  // structured output, started at the first grammar
  EngineStats spec_totals_;    // speculative decoding's spec_* counters
  std::unique_ptr<Proposer> own_proposer_;  // n-gram or a test's
  Proposer* proposer_ = nullptr;            // speculative decoding's: own_proposer_ or the driver's draft model
  std::unique_ptr<SpeculationController> spec_control_;  // drafts per step (adaptive speculation)
  int64_t next_id_ = 0;
  int64_t steps_ = 0;
  int64_t step_failures_ = 0;
  double step_s_ = 0;
};

}  // namespace pagoda

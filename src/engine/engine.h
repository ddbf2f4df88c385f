// The engine for a single driver thread (vLLM's LLMEngine): an EngineCore (ids in, ids out) and an
// OutputProcessor (text, stop strings, responses), with the tokenizer between them. One step:
//
//   EngineCoreOutputs core_out = core.step();            // schedule, run, sample, update
//   auto [outputs, to_abort] = processor.process(core_out.outputs);
//   for (id : to_abort) core.abort(id);                   // finished by a stop string
//
// `pagoda generate`, `bench offline` and the tests use it as is; the server's engine thread drives
// core() and processor() itself to read each step's stats (server/async_engine.cpp).
// Not thread-safe: one thread drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_config.h"
#include "engine/engine_core.h"
#include "engine/output_processor.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {

class Engine {
 public:
  // `shared_loras`: EngineCore's (a data-parallel replica shares the first one's adapter catalog).
  Engine(const std::string& model_dir, const EngineConfig& config, std::shared_ptr<LoraCatalog> shared_loras = nullptr);
  ~Engine();

  EngineCore& core() { return *core_; }
  const EngineCore& core() const { return *core_; }
  OutputProcessor& processor() { return *processor_; }

  const ModelConfig& model_config() const { return core_->model_config(); }
  const ResolvedEngineConfig& config() const { return core_->config(); }
  const MemoryPlan& memory_plan() const { return core_->memory_plan(); }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }  // null without tokenizer.json
  Backend& backend() { return core_->backend(); }
  // For tests and invariant checks.
  const Scheduler& scheduler() const { return core_->scheduler(); }
  size_t kv_cache_bytes() const { return core_->kv_cache_bytes(); }
  size_t state_bytes() const { return core_->state_bytes(); }
  size_t workspace_bytes() const { return core_->workspace_bytes(); }
  StepTimes step_times() const { return core_->step_times(); }
  const StepProfiler* step_profiler() const { return core_->step_profiler(); }
  StepProfiler* step_profiler() { return core_->step_profiler(); }
  // The stats of the last step, its state fields as after the step's stop-string aborts.
  const EngineStats& stats() const { return stats_; }

  // Queues a request; throws pagoda::Error for an empty or too long prompt or bad parameters.
  // SamplingParams::n is not expanded here: callers add n requests (see fan-out in cli/server).
  int64_t add_request(std::vector<int32_t> prompt, SamplingParams params);
  // Queues an embedding request (EngineCore::add_embedding_request).
  int64_t add_embedding_request(std::vector<int32_t> prompt);
  // One engine step. Returns an output for every request that got tokens or finished.
  std::vector<RequestOutput> step();
  bool has_unfinished() const { return core_->has_unfinished(); }
  bool abort(int64_t id) { return core_->abort(id); }

 private:
  std::unique_ptr<EngineCore> core_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<OutputProcessor> processor_;
  EngineStats stats_;
};

// The tokenizer of a model directory (or of --tokenizer DIR): null when it has no tokenizer.json;
// throws pagoda::Error when --tokenizer names a directory without one.
std::unique_ptr<Tokenizer> load_engine_tokenizer(const std::string& model_dir, const std::string& tokenizer_dir);

}  // namespace pagoda

// A Worker: everything one device holds for the engine (vLLM v1's Worker + GPUModelRunner). It owns
// its backend, its part of the model (the whole model, or its rank's shard), its KV pool, its
// recurrent-state pool (hybrid models), its runner and, on the driver worker, the draft proposer.
// It never sees requests: a step reaches it as the scheduler's plain data (SchedulerOutput's
// batch and the slots to copy), and it answers with the step's logits.
//
// Sizing is two calls: plan() reserves the runner's workspace (an input of the plan) and returns
// this device's memory plan; allocate() then allocates exactly what the executor settles on.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "backend/backend.h"
#include "engine/engine_config.h"
#include "engine/lora_catalog.h"
#include "engine/model_runner.h"
#include "engine/proposer.h"
#include "engine/scheduler.h"
#include "io/model_config.h"
#include "kv/memory_plan.h"
#include "kv/paged_kv_cache.h"
#include "kv/recurrent_state.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/shard.h"

namespace pagoda {

class VisionEncoder;

class DraftModelProposer;

struct WorkerSpec {
  int32_t index = 0;    // in the executor; with the data-parallel rank, the device ordinal on a GPU
  bool driver = true;   // holds the draft proposer (speculative decoding runs its drafts once)
  ShardSpec shard;      // its tensor-parallel place; {0, 1}: the whole model
  std::shared_ptr<const LoraCatalog> loras;  // the engine's adapters, by id (LoRA engines)
};

class Worker {
 public:
  Worker(const std::string& model_dir, const ModelConfig& model_config, const ResolvedEngineConfig& config,
         const WorkerSpec& spec);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  Backend& backend() { return *backend_; }
  Model& model() { return *model_; }
  const WorkerSpec& spec() const { return spec_; }

  // Builds the runner (its workspace measured for the largest step) and returns this device's plan.
  MemoryPlan plan(const SchedulerConfig& sc);
  // Allocates the KV pool, the state slots and the draft's pools for `plan` (which may have fewer
  // blocks than this worker's own), and captures the decode graphs.
  void allocate(const MemoryPlan& plan, const SchedulerConfig& sc);

  // ---- one step -----------------------------------------------------------------------------
  // Before the forward pass: prefix-cache snapshots restored into their sequences' slots; hybrid
  // sequences that verify drafts keep a copy of their state from before the step.
  void before_forward(const SchedulerOutput& sched);
  // `profiled`: the step the driver's profiler times, eager on every rank (ModelRunner::execute_greedy).
  const StepLogits& execute(const StepBatch& batch, std::span<const uint8_t> host_rows,
                            std::span<const uint8_t> hidden_rows, const RowMaskSource& masks, bool profiled);
  // After it: snapshots taken at the step's marks.
  void after_forward(const SchedulerOutput& sched);
  // A rejected draft on a hybrid model: slot `slot` goes back to its copy from before the step.
  void restore_pre_step_state(int32_t slot);
  // The draft model / MTP head proposing drafts (driver worker only; null otherwise).
  Proposer* draft_proposer();
  // The adapter slots of a LoRA engine (null otherwise).
  const LoraSet* lora_set() const { return lora_.get(); }

  size_t kv_cache_bytes() const;  // the target's KV cache and a draft model's
  size_t state_bytes() const { return state_ ? state_->bytes() : 0; }
  size_t workspace_bytes() const { return runner_ ? runner_->workspace_bytes() : 0; }
  const StepTimes& times() const { return runner_->times(); }
  // --profile-steps' profiler (the driver's), else null.
  const StepProfiler* profiler() const { return profiler_.get(); }
  StepProfiler* profiler() { return profiler_.get(); }

 private:
  ResolvedEngineConfig config_;
  WorkerSpec spec_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LoraSet> lora_;  // the adapters the model's projections carry (before model_: they point here)
  std::unique_ptr<Model> model_;
  std::unique_ptr<VisionEncoder> vision_;  // images (ResolvedEngineConfig::images), else null
  std::unique_ptr<DraftModelProposer> draft_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<StepProfiler> profiler_;
  std::unique_ptr<PagedKvCache> kv_;
  std::unique_ptr<RecurrentState> state_;  // hybrid models only
  int32_t state_slots_ = 0;    // live slots (max_num_seqs, + 1 padding slot under decode graphs)
  int32_t spec_slots_ = 0;     // pre-step copies for speculative decoding on a hybrid model
  int32_t snapshot_base_ = 0;  // state slot of prefix-cache snapshot 0 (after the live slots)
  int32_t spec_base_ = 0;      // slot s's pre-step copy is spec_base_ + s
};

}  // namespace pagoda

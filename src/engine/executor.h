// The Executor drives one Worker per device (vLLM v1's Executor): every worker gets each step's
// plain data, runs its part, and the executor hands the engine core one set of logits — rank 0's
// under tensor parallelism, where every rank ends the step with the same logits. The memory plan is
// settled here: each worker plans its own device, and all allocate the smallest plan's block count
// (their block tables are the scheduler's, shared).
//
// Tensor parallelism (--tensor-parallel-size N): N workers, rank r holding its shard of every layer
// (model/shard.h), joined by one communicator group (backend/communicator.h). Each step runs on every
// rank at once — rank 0 on the engine thread, the others on a thread each — because every row-
// parallel projection waits for all ranks' partial sums.
//
// A data-parallel replica (serve's --data-parallel-size) is one executor of several in the process:
// its workers take the devices after those of the replicas before it (ResolvedEngineConfig::
// device_ordinal) and its log lines say its rank.
//
// A step waits on every rank, so one rank that stops answering (a hung driver, collectives that do
// not match) would hold the engine for ever: a watchdog aborts the group once a step has run
// VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS (vLLM's variable; default 300 on a GPU, off on the CPU, where a
// long prompt's step can take minutes; 0 = off), and the step ends with a FatalDeviceError — an
// aborted group cannot be used again, so the server exits and its supervisor restarts it. A step
// that fails on a rank (which aborts the group) is fatal for the same reason.
//
// A test double proves the seam: `replicated_workers` N > 1 loads the whole model on N CPU backends
// and reads each step's logits from worker (step mod N), so a worker whose caches or state went
// astray changes the tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/communicator.h"
#include "engine/worker.h"

namespace pagoda {

class Executor {
 public:
  // `loras`: the engine's LoRA adapters (an engine with --enable-lora), which every worker reads.
  Executor(const std::string& model_dir, const ModelConfig& model_config, const ResolvedEngineConfig& config,
           std::shared_ptr<const LoraCatalog> loras = nullptr);
  ~Executor();

  Worker& driver() { return *workers_.front(); }
  const Worker& driver() const { return *workers_.front(); }
  size_t num_workers() const { return workers_.size(); }
  const Model& model() const { return *model_; }

  // Plans every worker's device, allocates the settled plan on each and returns it.
  MemoryPlan plan_and_allocate(const SchedulerConfig& sc);

  // One step on every worker; the logits come from the reading worker (rank 0, or the test
  // double's rotation). `masks` may be asked once per worker: it must return the same masks.
  const StepLogits& execute(const SchedulerOutput& sched, std::span<const uint8_t> host_rows,
                            std::span<const uint8_t> hidden_rows, const RowMaskSource& masks);
  void restore_pre_step_state(int32_t slot);

  size_t kv_cache_bytes() const { return driver().kv_cache_bytes(); }
  size_t state_bytes() const { return driver().state_bytes(); }
  size_t workspace_bytes() const { return driver().workspace_bytes(); }
  StepTimes times() const { return driver().times(); }
  const StepProfiler* profiler() const { return driver().profiler(); }
  StepProfiler* profiler() { return driver().profiler(); }

 private:
  // Runs fn(rank) on every rank at once (tensor parallelism), rank 0 on this thread; rethrows the
  // first rank's error after all have stopped (a failing rank aborts the group so none waits).
  // `watched`: an engine step, which the watchdog ends once it has run too long.
  void on_every_rank(const std::function<void(size_t)>& fn, bool watched = false);

  struct RankThreads;
  std::vector<std::unique_ptr<Communicator>> comms_;  // tensor parallelism: one view per rank
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<RankThreads> threads_;  // ranks 1..N-1 under tensor parallelism
  const Model* model_ = nullptr;
  int64_t steps_ = 0;
  std::string log_prefix_;  // "DP rank r: " for a data-parallel replica's lines
};

}  // namespace pagoda

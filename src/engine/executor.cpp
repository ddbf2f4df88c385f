#include "engine/executor.h"

#include <algorithm>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/log.h"

namespace pagoda {

Executor::Executor(const std::string& model_dir, const ModelConfig& model_config, const ResolvedEngineConfig& config) {
  const int32_t n = std::max(1, config.replicated_workers);
  check(n == 1 || config.device == "cpu",
        "replicated workers (a test double of the executor) run on the cpu only, not --device " + config.device);
  ResolvedEngineConfig each = config;
  if (n > 1) {  // the cores split between the workers: they run one after the other anyway
    const int cores = config.num_threads > 0 ? config.num_threads
                                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    each.num_threads = std::max(1, cores / n);
  }
  for (int32_t i = 0; i < n; ++i)
    workers_.push_back(std::make_unique<Worker>(model_dir, model_config, each,
                                                WorkerSpec{.index = i, .driver = i == 0, .shard = {}}));
  model_ = &workers_.front()->model();
}

Executor::~Executor() = default;

MemoryPlan Executor::plan_and_allocate(const SchedulerConfig& sc) {
  MemoryPlan plan;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const MemoryPlan p = workers_[i]->plan(sc);
    if (i == 0 || p.num_blocks < plan.num_blocks) plan = p;
  }
  std::istringstream lines(plan.describe());
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) LOG_INFO(line);
  if (driver().backend().device() == Device::CPU)
    LOG_INFO("kv cache on the cpu: reserved, not resident; its pages are committed as blocks are first written, so "
             "resident memory grows with the tokens held (weights in place from the mapped checkpoint)");
  if (workers_.size() > 1) LOG_INFO(std::to_string(workers_.size()) + " workers, each with the whole model");
  for (auto& w : workers_) w->allocate(plan, sc);
  return plan;
}

const StepLogits& Executor::execute(const SchedulerOutput& sched, std::span<const uint8_t> host_rows,
                                    std::span<const uint8_t> hidden_rows, const RowMaskSource& masks) {
  const size_t reader = static_cast<size_t>(steps_++ % static_cast<int64_t>(workers_.size()));
  const StepLogits* out = nullptr;
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = *workers_[i];
    w.before_forward(sched);
    const StepLogits& logits = w.execute(sched.batch, host_rows, hidden_rows, masks);
    w.after_forward(sched);
    if (i == reader) out = &logits;
  }
  return *out;
}

void Executor::restore_pre_step_state(int32_t slot) {
  for (auto& w : workers_) w->restore_pre_step_state(slot);
}

}  // namespace pagoda

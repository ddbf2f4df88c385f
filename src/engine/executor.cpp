#include "engine/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/device_error.h"
#include "core/error.h"
#include "core/fault_injection.h"
#include "core/log.h"
#include "engine/step_profiler.h"

namespace pagoda {

namespace {

// VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS, or the default for the device (executor.h).
double step_limit_seconds(const std::string& device) {
  const char* v = std::getenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS");
  if (v == nullptr || *v == '\0') return device == "cpu" ? 0.0 : 300.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  check(end != v && *end == '\0' && s >= 0 && std::isfinite(s),
        std::string("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS must be a number of seconds >= 0 (0 = no limit), not '") + v +
            "'");
  return s;
}

}  // namespace

// Ranks 1..N-1 of a tensor-parallel group, each a thread that waits for the next job, and the
// step watchdog.
struct Executor::RankThreads {
  std::mutex mu;
  std::condition_variable wake, done;
  const std::function<void(size_t)>* job = nullptr;
  uint64_t generation = 0;
  size_t pending = 0;
  bool stop = false;
  // The first rank's failure: the others' are the group's abort that it caused, caught after it.
  std::exception_ptr first_error;
  std::vector<std::thread> threads;

  // The watchdog: armed for a step with its deadline; once past it, aborts every communicator.
  double limit_s = 0;
  std::vector<std::unique_ptr<Communicator>>* comms = nullptr;
  std::thread watchdog;
  std::condition_variable watch;
  bool armed = false;
  std::chrono::steady_clock::time_point deadline;
  std::atomic<bool> fired{false};

  void watch_steps() {
    std::unique_lock lock(mu);
    for (;;) {
      watch.wait(lock, [&] { return stop || armed; });
      if (stop) return;
      const uint64_t step = generation;
      if (watch.wait_until(lock, deadline, [&] { return stop || !armed || generation != step; })) continue;
      fired = true;
      armed = false;
      lock.unlock();
      const std::string why = "the step did not finish within " + std::to_string(static_cast<int>(limit_s)) +
                              " s (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS)";
      LOG_ERROR("tensor parallelism: " + why + "; aborting the group");
      for (auto& c : *comms) c->abort(why);
      lock.lock();
    }
  }

  // Rank r's part of a job, on its thread: a failure is kept (if first) and aborts the group, so
  // no rank waits in a collective for it.
  void run(Worker& worker, Communicator& comm, size_t r, const std::function<void(size_t)>& fn) {
    try {
      // A GPU backend's device is per thread: made current here (its stream is idle between steps,
      // so the wait is none).
      worker.backend().synchronize();
      if (r > 0 && FaultInjector::global().due(FaultSite::RankStall)) {  // a rank that stops answering
        while (!fired) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        throw Error("rank " + std::to_string(r) + " stalled (PAGODA_INJECT_FAULT rank-stall)");
      }
      if (r > 0 && FaultInjector::global().due(FaultSite::RankError))
        throw std::runtime_error("injected fault (PAGODA_INJECT_FAULT rank-error) on rank " + std::to_string(r));
      fn(r);
    } catch (const std::exception& e) {
      {
        std::lock_guard lock(mu);
        if (!first_error) first_error = std::current_exception();
      }
      comm.abort(std::string("rank ") + std::to_string(r) + " failed: " + e.what());
    }
  }
};

Executor::Executor(const std::string& model_dir, const ModelConfig& model_config, const ResolvedEngineConfig& config,
                   std::shared_ptr<const LoraCatalog> loras) {
  const int32_t tp = std::max(1, config.tensor_parallel_size);
  const int32_t n = tp > 1 ? tp : std::max(1, config.replicated_workers);
  check(config.replicated_workers <= 1 || config.device == "cpu",
        "replicated workers (a test double of the executor) run on the cpu only, not --device " + config.device);
  ResolvedEngineConfig each = config;
  // The cores split between the workers, and between the data-parallel replicas that share the host
  // (--threads counts them all): oversubscribed cores would slow every replica.
  const int32_t sharing = n * std::max(1, config.data_parallel_size);
  if (sharing > 1 && config.device == "cpu") {
    const int cores = config.num_threads > 0 ? config.num_threads
                                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    each.num_threads = std::max(1, cores / sharing);
  }
  if (config.data_parallel_size > 1) log_prefix_ = "DP rank " + std::to_string(config.data_parallel_rank) + ": ";
  if (tp > 1) comms_ = make_communicators(config.device, tp, config.device_ordinal(0), !config.disable_custom_all_reduce);
  for (int32_t i = 0; i < n; ++i) {
    ShardSpec shard;
    if (tp > 1)
      shard = ShardSpec{.rank = i, .world = tp, .comm = comms_[static_cast<size_t>(i)].get(),
                        .expert_parallel = config.enable_expert_parallel};
    workers_.push_back(
        std::make_unique<Worker>(model_dir, model_config, each,
                                 WorkerSpec{.index = i, .driver = i == 0, .shard = shard, .loras = loras}));
  }
  model_ = &workers_.front()->model();
  if (tp > 1) {
    threads_ = std::make_unique<RankThreads>();
    threads_->comms = &comms_;
    threads_->limit_s = step_limit_seconds(config.device);
    if (threads_->limit_s > 0) threads_->watchdog = std::thread([this] { threads_->watch_steps(); });
    for (size_t r = 1; r < static_cast<size_t>(tp); ++r)
      threads_->threads.emplace_back([this, r] {
        RankThreads& t = *threads_;
        uint64_t seen = 0;
        for (;;) {
          std::unique_lock lock(t.mu);
          t.wake.wait(lock, [&] { return t.stop || t.generation != seen; });
          if (t.stop) return;
          seen = t.generation;
          const std::function<void(size_t)>& fn = *t.job;
          lock.unlock();
          t.run(*workers_[r], *comms_[r], r, fn);
          lock.lock();
          if (--t.pending == 0) t.done.notify_all();
        }
      });
  }
}

Executor::~Executor() {
  if (threads_) {
    {
      std::lock_guard lock(threads_->mu);
      threads_->stop = true;
    }
    threads_->wake.notify_all();
    threads_->watch.notify_all();
    for (std::thread& t : threads_->threads) t.join();
    if (threads_->watchdog.joinable()) threads_->watchdog.join();
  }
}

void Executor::on_every_rank(const std::function<void(size_t)>& fn, bool watched) {
  RankThreads& t = *threads_;
  if (t.fired) throw FatalDeviceError("tensor parallelism: the group was aborted by the step watchdog; restart the server");
  {
    std::lock_guard lock(t.mu);
    t.job = &fn;
    t.pending = t.threads.size();
    t.first_error = nullptr;
    ++t.generation;
    if (watched && t.watchdog.joinable()) {
      t.armed = true;
      t.deadline = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(t.limit_s));
    }
  }
  t.wake.notify_all();
  t.watch.notify_all();
  t.run(*workers_[0], *comms_[0], 0, fn);
  std::unique_lock lock(t.mu);
  t.done.wait(lock, [&] { return t.pending == 0; });
  t.armed = false;
  t.watch.notify_all();
  // The ranks' own errors are the abort's echo: a rank blocked in a collective cannot tell a
  // stalled partner from a slow one.
  if (t.fired)
    throw FatalDeviceError("tensor parallelism: a step did not finish within " +
                           std::to_string(static_cast<int>(t.limit_s)) +
                           " s (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS) and the group was aborted; a rank stopped "
                           "answering (restart the server; NCCL_DEBUG=INFO shows where the ranks were)");
  if (t.first_error && watched) {
    // The failed rank aborted the group (so that no rank waited for it), and an aborted group
    // cannot sum again: a step's failure on any rank ends the engine, as a lost device does.
    try {
      std::rethrow_exception(t.first_error);
    } catch (const FatalDeviceError&) {
      throw;
    } catch (const std::exception& e) {
      throw FatalDeviceError(std::string("tensor parallelism: ") + e.what() +
                             " (the group was aborted and cannot sum again; restart the server)");
    }
  }
  if (t.first_error) std::rethrow_exception(t.first_error);
}

MemoryPlan Executor::plan_and_allocate(const SchedulerConfig& sc) {
  // Under tensor parallelism every rank at once: a CUDA graph's capture runs the step eagerly
  // first, and its all-reduces need every rank.
  auto each_worker = [&](const std::function<void(size_t)>& fn) {
    if (!comms_.empty()) return on_every_rank(fn);
    for (size_t i = 0; i < workers_.size(); ++i) fn(i);
  };
  std::vector<MemoryPlan> plans(workers_.size());
  each_worker([&](size_t r) { plans[r] = workers_[r]->plan(sc); });
  MemoryPlan plan = plans[0];
  for (const MemoryPlan& p : plans)
    if (p.num_blocks < plan.num_blocks) plan = p;
  auto log_plan = [](const MemoryPlan& p, const std::string& prefix) {
    std::istringstream lines(p.describe());
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) LOG_INFO(prefix + line);
  };
  if (comms_.empty()) {
    log_plan(plan, log_prefix_);
  } else {  // each rank's own plan: its heads, columns and caches
    for (size_t i = 0; i < plans.size(); ++i) log_plan(plans[i], log_prefix_ + "rank " + std::to_string(i) + ": ");
    LOG_INFO(log_prefix_ + "tensor parallel size " + std::to_string(workers_.size()) + ": every rank allocates " +
             std::to_string(plan.num_blocks) + " KV blocks (the smallest rank's plan)");
  }
  if (driver().backend().device() == Device::CPU)
    LOG_INFO("kv cache on the cpu: reserved, not resident; its pages are committed as blocks are first written, so "
             "resident memory grows with the tokens held (weights in place from the mapped checkpoint)");
  if (workers_.size() > 1 && comms_.empty()) LOG_INFO(std::to_string(workers_.size()) + " workers, each with the whole model");
  each_worker([&](size_t r) { workers_[r]->allocate(plan, sc); });
  return plan;
}

const StepLogits& Executor::execute(const SchedulerOutput& sched, std::span<const uint8_t> host_rows,
                                    std::span<const uint8_t> hidden_rows, const RowMaskSource& masks) {
  // Whether the driver's profiler times this step: decided once, for every rank (a profiled step is
  // eager everywhere; POST /start_profile restarts the driver's count alone).
  StepProfiler* const profiler = driver().profiler();
  const bool profiled = profiler != nullptr && profiler->due();
  if (!comms_.empty()) {
    // Every rank ends the step with the same logits; rank 0's are read, so only it takes the masks.
    const StepLogits* out = nullptr;
    on_every_rank(
        [&](size_t r) {
          Worker& w = *workers_[r];
          w.before_forward(sched);
          const StepLogits& logits =
              w.execute(sched.batch, host_rows, hidden_rows, r == 0 ? masks : RowMaskSource{}, profiled);
          w.after_forward(sched);
          if (r == 0) out = &logits;
        },
        /*watched=*/true);
    return *out;
  }
  const size_t reader = static_cast<size_t>(steps_++ % static_cast<int64_t>(workers_.size()));
  const StepLogits* out = nullptr;
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = *workers_[i];
    w.before_forward(sched);
    const StepLogits& logits = w.execute(sched.batch, host_rows, hidden_rows, masks, profiled);
    w.after_forward(sched);
    if (i == reader) out = &logits;
  }
  return *out;
}

void Executor::restore_pre_step_state(int32_t slot) {
  for (auto& w : workers_) w->restore_pre_step_state(slot);
}

}  // namespace pagoda

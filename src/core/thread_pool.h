// A small fork-join thread pool for the CPU backend's ops. The calling thread takes part in the
// work; a parallel_for issued from inside a parallel region runs inline (no nested parallelism).
//
// Small loops are not worth a fork-join: handing a range to a worker costs about a microsecond
// when it is spinning on a free core, and far more when it sleeps or when other processes keep its
// core busy (it is then preempted, and the caller waits for the range it holds). Callers pass an
// estimate of the work of one item (`cost`, in elementary operations: about one multiply-add, or
// one float read or written), and the pool decides:
//  - below kMinParallelCost of work in all, a loop runs inline on the caller;
//  - from kMaxInlineCost up (about half a millisecond of work), it is always split;
//  - in between, it is split only while the machine has a free core for every worker: the pool
//    samples the CPU time that other processes use (Linux /proc/stat, minus this process's own
//    time) every kLoadSampleSeconds. While they leave too little, these loops run inline and the
//    workers sleep instead of spinning. PAGODA_CPU_SMALL_LOOPS=split or =inline in the
//    environment fixes the choice instead.
// Split loops are cut into ranges of at least kMinChunkCost each. The caller never waits for a
// worker that has not started on a job: ranges nobody has claimed are run by the caller, and a
// worker that wakes up late finds the job closed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pagoda {

class ThreadPool {
 public:
  using RangeFn = std::function<void(int64_t, int64_t)>;

  // Least work (in `cost` units) ever split: about ten microseconds on one core, several times a
  // spinning worker's hand-off.
  static constexpr double kMinParallelCost = 32768.0;
  // Work from which a loop is split whether or not other processes keep the cores busy: about
  // half a millisecond, worth waking a sleeping worker for even on a busy machine.
  // PAGODA_CPU_MAX_INLINE_COST in the environment overrides it (read once, for tuning).
  static constexpr double kMaxInlineCost = 2097152.0;
  // Least work of one range once a loop is split.
  static constexpr double kMinChunkCost = 16384.0;
  // How often the load of other processes is sampled.
  static constexpr double kLoadSampleSeconds = 0.1;

  // num_threads <= 0: std::thread::hardware_concurrency() (at least 1). Counts the caller.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n), each a multiple of `grain` items
  // long (except possibly the last), and returns when all are done. Ranges are handed out
  // dynamically, about four per thread, each with at least kMinChunkCost of work when `cost` (the
  // work of one item) is given; cost <= 0 means unknown (always split). An exception thrown by fn
  // is rethrown here (the first one wins).
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1, double cost = 0.0);

  // The same, with at most one range per thread (for bandwidth-bound loops with even work).
  void parallel_for_static(int64_t n, const RangeFn& fn, int64_t grain = 1, double cost = 0.0);

  // How many ranges n items of `cost` each are worth cutting into, at most `most` (1: inline).
  int64_t ranges_for(int64_t n, double cost, int64_t most);

  // Whether loops between kMinParallelCost and kMaxInlineCost are split at present (the other
  // cores were free at the last sample).
  bool cores_free() const { return cores_free_.load(std::memory_order_relaxed); }

 private:
  struct Job;
  void worker_loop();
  void run(int64_t n, int64_t chunk, const RangeFn& fn);
  static void run_range(Job& job, int64_t begin, int64_t end);
  // Runs ranges of `job` until none is left.
  static void run_chunks(Job& job);
  void sample_load();  // under load_mutex_

  // state_: generation << kGenShift | closed bit | number of workers that joined the job.
  static constexpr uint64_t kJoinedMask = 0xffff;
  static constexpr uint64_t kClosed = uint64_t{1} << 16;
  static constexpr int kGenShift = 17;

  int num_threads_ = 1;
  double max_inline_cost_ = kMaxInlineCost;
  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // one parallel_for at a time per pool
  // Workers spin briefly on state_ after each job (ops come back to back in a forward pass), then
  // sleep on wake_cv_. The caller spins on finished_ for the workers that joined, then sleeps.
  std::mutex mutex_;
  std::condition_variable wake_cv_;
  std::condition_variable done_cv_;
  std::atomic<Job*> job_{nullptr};
  std::atomic<uint64_t> state_{kClosed};
  std::atomic<int> finished_{0};  // workers done with the current job
  int sleepers_ = 0;              // guarded by mutex_
  std::atomic<bool> caller_waiting_{false};
  int spin_ = 0;  // polling iterations before blocking (while cores_free_); 0 when threads
                  // outnumber cores
  std::atomic<bool> stop_{false};
  // Load sampling (see the top of this file).
  std::atomic<bool> cores_free_{true};
  std::atomic<int64_t> next_sample_ns_{0};
  std::mutex load_mutex_;
  uint64_t last_busy_ticks_ = 0, last_total_ticks_ = 0;  // /proc/stat, all CPUs
  double last_self_seconds_ = 0.0;                       // this process's CPU time
  bool have_sample_ = false;
  bool sample_load_ = true;  // false when PAGODA_CPU_SMALL_LOOPS fixes the choice
};

}  // namespace pagoda

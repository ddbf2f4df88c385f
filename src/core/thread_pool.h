// A small fork-join thread pool for the CPU backend's ops. The calling thread takes part in the
// work; a parallel_for issued from inside a parallel region runs inline (no nested parallelism).
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
  // num_threads <= 0: std::thread::hardware_concurrency() (at least 1). Counts the caller.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) on disjoint ranges covering [0, n), each a multiple of `grain` items
  // long (except possibly the last), and returns when all are done. Ranges are handed out
  // dynamically, about four per thread. An exception thrown by fn is rethrown here (the first one
  // wins).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // The same, with exactly one range per thread (for bandwidth-bound loops with even work).
  void parallel_for_static(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                           int64_t grain = 1);

 private:
  struct Job;
  void worker_loop();
  void run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn);
  static void run_chunks(Job& job);

  int num_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex submit_mutex_;  // one parallel_for at a time per pool
  // Workers spin briefly on generation_ after each job (ops come back to back in a forward pass),
  // then sleep on wake_cv_. The caller spins on active_ for the stragglers.
  std::mutex mutex_;
  std::condition_variable wake_cv_;
  std::condition_variable done_cv_;
  std::atomic<Job*> job_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};
  int sleepers_ = 0;             // guarded by mutex_
  bool caller_waiting_ = false;  // guarded by mutex_
  int spin_ = 0;       // polling iterations before blocking; 0 when threads outnumber cores
  bool stop_ = false;  // guarded by mutex_
};

}  // namespace pagoda

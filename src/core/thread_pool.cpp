#include "core/thread_pool.h"

#include <algorithm>
#include <exception>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PAGODA_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define PAGODA_CPU_RELAX() asm volatile("yield")
#else
#define PAGODA_CPU_RELAX() ((void)0)
#endif

namespace pagoda {

namespace {
thread_local bool t_in_parallel_region = false;
// About 50-100 microseconds of polling before a worker goes to sleep.
constexpr int kSpinIterations = 4000;
}  // namespace

struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  std::atomic<int64_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  num_threads_ = std::max(1, num_threads);
  const auto cores = static_cast<int>(std::thread::hardware_concurrency());
  spin_ = cores > 0 && num_threads_ > cores ? 0 : kSpinIterations;
  workers_.reserve(static_cast<size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_chunks(Job& job) {
  const bool was_in_region = t_in_parallel_region;
  t_in_parallel_region = true;
  for (;;) {
    const int64_t begin = job.next.fetch_add(job.chunk, std::memory_order_relaxed);
    if (begin >= job.n) break;
    const int64_t end = std::min(job.n, begin + job.chunk);
    try {
      (*job.fn)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lk(job.error_mutex);
      if (!job.error) job.error = std::current_exception();
    }
  }
  t_in_parallel_region = was_in_region;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < spin_; ++i) {
      PAGODA_CPU_RELAX();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lk(mutex_);
      ++sleepers_;
      wake_cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      --sleepers_;
      gen = generation_.load(std::memory_order_acquire);
    }
    {
      std::lock_guard<std::mutex> lk(mutex_);
      if (stop_) return;
    }
    seen = gen;
    run_chunks(*job_.load(std::memory_order_acquire));
    if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lk(mutex_);
      if (caller_waiting_) done_cv_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || t_in_parallel_region || chunk >= n) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> submit(submit_mutex_);
  Job job;
  job.fn = &fn;
  job.n = n;
  job.chunk = chunk;
  job_.store(&job, std::memory_order_release);
  active_.store(static_cast<int>(workers_.size()), std::memory_order_release);
  bool wake;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) wake_cv_.notify_all();
  run_chunks(job);
  // Every worker must be done with `job` (a stack object) before it goes out of scope.
  for (int i = 0; i < spin_ && active_.load(std::memory_order_acquire) != 0; ++i)
    PAGODA_CPU_RELAX();
  if (active_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lk(mutex_);
    caller_waiting_ = true;
    done_cv_.wait(lk, [&] { return active_.load(std::memory_order_acquire) == 0; });
    caller_waiting_ = false;
  }
  if (job.error) std::rethrow_exception(job.error);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  const int64_t g = std::max<int64_t>(grain, 1);
  const int64_t pieces = static_cast<int64_t>(num_threads_) * 4;
  const int64_t chunk = std::max<int64_t>(1, (n + pieces - 1) / pieces);
  run(n, (chunk + g - 1) / g * g, fn);
}

void ThreadPool::parallel_for_static(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                                     int64_t grain) {
  const int64_t g = std::max<int64_t>(grain, 1);
  int64_t chunk = (n + num_threads_ - 1) / num_threads_;
  chunk = std::max<int64_t>(g, (chunk + g - 1) / g * g);
  run(n, chunk, fn);
}

}  // namespace pagoda

#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#ifdef __linux__
#include <sys/resource.h>
#include <unistd.h>
#endif

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
// About 50-100 microseconds of polling before a worker goes to sleep; a few while other processes
// keep the cores busy (a spinning worker would take time from them and from the caller).
constexpr int kSpinIterations = 4000;
constexpr int kBusySpinDivisor = 32;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

#ifdef __linux__
// Ticks of all CPUs from /proc/stat's first line: busy (not idle, not waiting for I/O) and total.
bool read_cpu_ticks(uint64_t* busy, uint64_t* total) {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return false;
  unsigned long long v[10] = {};
  const int got = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
                              &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
  std::fclose(f);
  if (got < 4) return false;
  // user nice system idle iowait irq softirq steal (guest time is inside user already)
  *busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  *total = *busy + v[3] + v[4];
  return true;
}

double self_cpu_seconds() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}
#endif
}  // namespace

struct ThreadPool::Job {
  const RangeFn* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  std::atomic<int64_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  num_threads_ = std::clamp(num_threads, 1, static_cast<int>(kJoinedMask));
  const auto cores = static_cast<int>(std::thread::hardware_concurrency());
  spin_ = cores > 0 && num_threads_ > cores ? 0 : kSpinIterations;
  if (const char* env = std::getenv("PAGODA_CPU_MAX_INLINE_COST")) {
    const double v = std::strtod(env, nullptr);
    if (v >= 0.0) max_inline_cost_ = v;
  }
  // PAGODA_CPU_SMALL_LOOPS=split or =inline fixes the choice for loops in between (no sampling).
  if (const char* env = std::getenv("PAGODA_CPU_SMALL_LOOPS")) {
    const std::string v = env;
    if (v == "split" || v == "inline") {
      cores_free_.store(v == "split", std::memory_order_relaxed);
      sample_load_ = false;
    }
  }
#ifdef __linux__
  // Until the first sample: the one-minute load average against the cores.
  double load = 0.0;
  if (sample_load_ && cores > 0 && getloadavg(&load, 1) == 1)
    cores_free_.store(static_cast<double>(cores) - load >= num_threads_ - 0.5,
                      std::memory_order_relaxed);
  have_sample_ = sample_load_ && read_cpu_ticks(&last_busy_ticks_, &last_total_ticks_);
  last_self_seconds_ = self_cpu_seconds();
  next_sample_ns_.store(now_ns() + static_cast<int64_t>(kLoadSampleSeconds * 1e9),
                        std::memory_order_relaxed);
#endif
  workers_.reserve(static_cast<size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    stop_.store(true, std::memory_order_release);
    const uint64_t gen = (state_.load(std::memory_order_relaxed) >> kGenShift) + 1;
    state_.store(gen << kGenShift | kClosed, std::memory_order_release);
  }
  wake_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::sample_load() {
#ifdef __linux__
  uint64_t busy = 0, total = 0;
  if (!have_sample_ || !read_cpu_ticks(&busy, &total) || total <= last_total_ticks_ ||
      busy < last_busy_ticks_)
    return;
  const double self = self_cpu_seconds();
  const long hz = sysconf(_SC_CLK_TCK);
  const double tick = hz > 0 ? 1.0 / static_cast<double>(hz) : 0.01;
  // Over the interval: CPU-seconds of all cores, and those used by other processes.
  const double capacity = static_cast<double>(total - last_total_ticks_) * tick;
  const double others =
      static_cast<double>(busy - last_busy_ticks_) * tick - (self - last_self_seconds_);
  last_busy_ticks_ = busy;
  last_total_ticks_ = total;
  last_self_seconds_ = self;
  if (capacity <= 0.0) return;
  // Cores the other processes leave: only the ratio of the two matters.
  const double cores = static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
  const double free_cores = cores * (1.0 - std::max(0.0, others) / capacity);
  cores_free_.store(free_cores >= num_threads_ - 0.5, std::memory_order_relaxed);
#endif
}

void ThreadPool::run_range(Job& job, int64_t begin, int64_t end) {
  try {
    (*job.fn)(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lk(job.error_mutex);
    if (!job.error) job.error = std::current_exception();
  }
}

void ThreadPool::run_chunks(Job& job) {
  const bool was_in_region = t_in_parallel_region;
  t_in_parallel_region = true;
  for (;;) {
    const int64_t begin = job.next.fetch_add(job.chunk, std::memory_order_relaxed);
    if (begin >= job.n) break;
    run_range(job, begin, std::min(job.n, begin + job.chunk));
  }
  t_in_parallel_region = was_in_region;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;  // the generation of the last job this worker looked at
  for (;;) {
    uint64_t s = state_.load(std::memory_order_acquire);
    const int spin = cores_free_.load(std::memory_order_relaxed) ? spin_ : spin_ / kBusySpinDivisor;
    for (int i = 0; (s >> kGenShift) == seen && i < spin; ++i) {
      PAGODA_CPU_RELAX();
      s = state_.load(std::memory_order_acquire);
    }
    if ((s >> kGenShift) == seen) {
      std::unique_lock<std::mutex> lk(mutex_);
      ++sleepers_;
      wake_cv_.wait(
          lk, [&] { return (state_.load(std::memory_order_acquire) >> kGenShift) != seen; });
      --sleepers_;
      s = state_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = s >> kGenShift;
    // Join the job unless the caller has already closed it (it then needs no help). A failed
    // exchange reloads s; a newer generation is picked up on the next turn of the loop.
    bool joined = false;
    while (!joined && !(s & kClosed) && (s >> kGenShift) == seen)
      joined = state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                            std::memory_order_acquire);
    if (!joined) continue;
    run_chunks(*job_.load(std::memory_order_acquire));
    finished_.fetch_add(1, std::memory_order_seq_cst);
    if (caller_waiting_.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> lk(mutex_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t n, int64_t chunk, const RangeFn& fn) {
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
  // The first range is the caller's: a worker woken below cannot take all of them while the
  // caller is still in the wake-up call.
  job.next.store(chunk, std::memory_order_relaxed);
  finished_.store(0, std::memory_order_relaxed);
  job_.store(&job, std::memory_order_release);
  bool wake;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    const uint64_t gen = (state_.load(std::memory_order_relaxed) >> kGenShift) + 1;
    state_.store(gen << kGenShift, std::memory_order_release);  // open, nobody joined
    wake = sleepers_ > 0;
  }
  if (wake) wake_cv_.notify_all();
  t_in_parallel_region = true;
  run_range(job, 0, chunk);
  t_in_parallel_region = false;
  run_chunks(job);
  // Every range has been claimed. Close the job: a worker that has not joined yet never will, so
  // only those that did must be waited for (`job` is a stack object).
  const auto joined =
      static_cast<int>(state_.fetch_or(kClosed, std::memory_order_acq_rel) & kJoinedMask);
  for (int i = 0; i < spin_ && finished_.load(std::memory_order_acquire) != joined; ++i)
    PAGODA_CPU_RELAX();
  if (finished_.load(std::memory_order_acquire) != joined) {
    std::unique_lock<std::mutex> lk(mutex_);
    caller_waiting_.store(true, std::memory_order_seq_cst);
    done_cv_.wait(lk, [&] { return finished_.load(std::memory_order_seq_cst) == joined; });
    caller_waiting_.store(false, std::memory_order_relaxed);
  }
  if (job.error) std::rethrow_exception(job.error);
}

int64_t ThreadPool::ranges_for(int64_t n, double cost, int64_t most) {
  if (n <= 0 || most <= 1 || workers_.empty()) return 1;
  if (cost <= 0.0) return most;
  const double total = static_cast<double>(n) * cost;
  if (total < kMinParallelCost) return 1;
  if (total < max_inline_cost_) {
    const int64_t now = now_ns();
    if (now >= next_sample_ns_.load(std::memory_order_relaxed) && load_mutex_.try_lock()) {
      next_sample_ns_.store(now + static_cast<int64_t>(kLoadSampleSeconds * 1e9),
                            std::memory_order_relaxed);
      sample_load();
      load_mutex_.unlock();
    }
    if (!cores_free_.load(std::memory_order_relaxed)) return 1;
  }
  const double ranges = total / kMinChunkCost;
  return ranges >= static_cast<double>(most) ? most
                                             : std::max<int64_t>(2, static_cast<int64_t>(ranges));
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain, double cost) {
  const int64_t g = std::max<int64_t>(grain, 1);
  const int64_t pieces = ranges_for(n, cost, static_cast<int64_t>(num_threads_) * 4);
  const int64_t chunk = std::max<int64_t>(1, (n + pieces - 1) / pieces);
  run(n, (chunk + g - 1) / g * g, fn);
}

void ThreadPool::parallel_for_static(int64_t n, const RangeFn& fn, int64_t grain, double cost) {
  const int64_t g = std::max<int64_t>(grain, 1);
  const int64_t pieces = ranges_for(n, cost, num_threads_);
  int64_t chunk = (n + pieces - 1) / pieces;
  chunk = std::max<int64_t>(g, (chunk + g - 1) / g * g);
  run(n, chunk, fn);
}

}  // namespace pagoda

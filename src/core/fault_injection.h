// Test hooks that make a chosen operation throw, so that the recovery paths of the engine and the
// server can be exercised on purpose (docs/faults.md). Off unless armed: by a test through
// FaultInjector::global().arm(), or in a whole process by PAGODA_INJECT_FAULT, read once:
//
//   PAGODA_INJECT_FAULT=site:N[:TIMES][,site:N[:TIMES]...]
//
// The N-th time (1-based) the program reaches `site`, and the TIMES - 1 times after it (default 1),
// it throws. Sites:
//   step           an engine step, before its forward pass: std::runtime_error (a backend error)
//   kv-alloc       a KV slot allocation (KvCacheManager::append_slots): std::bad_alloc
//   grammar-alloc  a request's structured-output state being made: std::bad_alloc
//   fatal-step     an engine step, before its forward pass: FatalDeviceError (a device lost)
//   kernel         the CUDA backend's device-to-host copy that ends each forward pass: a kernel
//                  launched with an invalid configuration just before it, so the error is a real
//                  one the CUDA runtime reports (not sticky: the step fails, the context lives)
//   sticky-kernel  the same copy: a kernel that traps, a sticky error (the context is lost; the
//                  server exits with code 4)
//   rank-stall     a tensor-parallel rank other than 0, at the start of its part of a step: it
//                  stops answering (enters none of the step's collectives) until its group is
//                  aborted, as a rank hung in a driver would; the executor's step watchdog
//                  (engine/executor.h) must end the step
//   rank-error     the same place: the rank throws std::runtime_error, aborting the group
// The two kernel sites and the two rank sites do not throw themselves: the CUDA backend asks due() and makes the error.
// They count only inside an engine step's forward pass (a StepScope), so N does not depend on how
// many copies start-up made.
//
// When nothing is armed a site costs one relaxed atomic load.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace pagoda {

enum class FaultSite : int { Step, KvAllocation, GrammarAllocation, FatalStep, KernelError, StickyKernelError, RankStall,
                             RankError };
inline constexpr int kNumFaultSites = 8;

class FaultInjector {
 public:
  // The process's injector; armed from PAGODA_INJECT_FAULT the first time it is used. A malformed
  // value throws pagoda::Error naming it.
  static FaultInjector& global();

  // `site` throws the nth time it is reached from now on, and the `times - 1` times after that.
  void arm(FaultSite site, int64_t nth, int64_t times = 1);
  // Every site off, every count back to 0.
  void disarm();
  // Parses a PAGODA_INJECT_FAULT value and arms what it names.
  void arm_from_spec(const std::string& spec);
  // How many times `site` has thrown since it was armed.
  int64_t num_thrown(FaultSite site) const;

  // Throws when `site` is due.
  void reach(FaultSite site) {
    if (armed_.load(std::memory_order_relaxed)) reach_armed(site);
  }
  // For sites whose fault the caller makes itself (a real device error): counts the visit (only
  // inside a StepScope) and says whether the fault is due now.
  bool due(FaultSite site) {
    return armed_.load(std::memory_order_relaxed) && in_step_.load(std::memory_order_relaxed) > 0 &&
           count_visit(site);
  }

  // Marks an engine step's forward pass for due().
  class StepScope {
   public:
    StepScope() { global().in_step_.fetch_add(1, std::memory_order_relaxed); }
    ~StepScope() { global().in_step_.fetch_sub(1, std::memory_order_relaxed); }
    StepScope(const StepScope&) = delete;
    StepScope& operator=(const StepScope&) = delete;
  };

 private:
  struct Plan {
    int64_t first = 0;  // 0: not armed
    int64_t last = 0;
    int64_t reached = 0;
    int64_t thrown = 0;
  };
  void reach_armed(FaultSite site);
  bool count_visit(FaultSite site);

  std::atomic<bool> armed_{false};
  std::atomic<int> in_step_{0};
  mutable std::mutex mu_;
  std::array<Plan, kNumFaultSites> plans_{};
};

inline void fault_point(FaultSite site) { FaultInjector::global().reach(site); }
inline bool fault_due(FaultSite site) { return FaultInjector::global().due(site); }

// Test hook: PAGODA_TEST_GRAMMAR_DELAY_MS (read once; 0 when unset) is slept by every grammar
// compile and by every grammar's first mask, standing in for a grammar that is slow to compile or
// to start (tests/server/reliability_grammar_test.cpp shows that it holds no one else).
void grammar_delay_point();

}  // namespace pagoda

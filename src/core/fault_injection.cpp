#include "core/fault_injection.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <thread>

#include "core/device_error.h"
#include "core/error.h"

namespace pagoda {
namespace {

constexpr const char* kSiteNames[kNumFaultSites] = {"step",   "kv-alloc",      "grammar-alloc", "fatal-step",
                                                     "kernel", "sticky-kernel", "rank-stall",    "rank-error"};

int64_t parse_count(const std::string& text, const std::string& item) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  check(used == text.size() && v >= 1,
        "PAGODA_INJECT_FAULT: '" + item + "' needs counts >= 1 (site:N or site:N:TIMES)");
  return v;
}

}  // namespace

FaultInjector& FaultInjector::global() {
  static FaultInjector* injector = [] {
    auto* f = new FaultInjector();  // never destroyed: sites may be reached during static teardown
    if (const char* spec = std::getenv("PAGODA_INJECT_FAULT"); spec != nullptr && *spec != '\0')
      f->arm_from_spec(spec);
    return f;
  }();
  return *injector;
}

void FaultInjector::arm(FaultSite site, int64_t nth, int64_t times) {
  check(nth >= 1 && times >= 1, "FaultInjector::arm: nth and times must be >= 1");
  std::lock_guard lock(mu_);
  Plan& p = plans_[static_cast<size_t>(site)];
  p = Plan{p.reached + nth, p.reached + nth + times - 1, p.reached, 0};
  armed_.store(true, std::memory_order_relaxed);
}

void FaultInjector::disarm() {
  std::lock_guard lock(mu_);
  plans_ = {};
  armed_.store(false, std::memory_order_relaxed);
}

void FaultInjector::arm_from_spec(const std::string& spec) {
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t end = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, end - start);
    const size_t c1 = item.find(':');
    const std::string name = item.substr(0, c1);
    int site = -1;
    for (int i = 0; i < kNumFaultSites; ++i)
      if (name == kSiteNames[i]) site = i;
    check(site >= 0 && c1 != std::string::npos,
          "PAGODA_INJECT_FAULT: '" + item + "' is not site:N[:TIMES] with a site of step, kv-alloc, grammar-alloc, "
          "fatal-step, kernel, sticky-kernel, rank-stall, rank-error");
    const size_t c2 = item.find(':', c1 + 1);
    const int64_t nth = parse_count(item.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1), item);
    const int64_t times = c2 == std::string::npos ? 1 : parse_count(item.substr(c2 + 1), item);
    arm(static_cast<FaultSite>(site), nth, times);
    start = end + 1;
  }
}

int64_t FaultInjector::num_thrown(FaultSite site) const {
  std::lock_guard lock(mu_);
  return plans_[static_cast<size_t>(site)].thrown;
}

bool FaultInjector::count_visit(FaultSite site) {
  std::lock_guard lock(mu_);
  Plan& p = plans_[static_cast<size_t>(site)];
  const int64_t n = ++p.reached;
  if (p.first == 0 || n < p.first || n > p.last) return false;
  ++p.thrown;
  return true;
}

void FaultInjector::reach_armed(FaultSite site) {
  int64_t n = 0;
  {
    std::lock_guard lock(mu_);
    Plan& p = plans_[static_cast<size_t>(site)];
    n = ++p.reached;
    if (p.first == 0 || n < p.first || n > p.last) return;
    ++p.thrown;
  }
  const std::string where = std::string("injected fault (PAGODA_INJECT_FAULT ") + kSiteNames[static_cast<size_t>(site)] +
                            ", occurrence " + std::to_string(n) + ")";
  switch (site) {
    case FaultSite::Step: throw std::runtime_error(where);
    case FaultSite::FatalStep: throw FatalDeviceError(where);
    case FaultSite::KvAllocation:
    case FaultSite::GrammarAllocation: throw std::bad_alloc();
    case FaultSite::KernelError:
    case FaultSite::StickyKernelError:
    case FaultSite::RankStall:
    case FaultSite::RankError: return;  // made by the caller that asked due()
  }
}

void grammar_delay_point() {
  static const long ms = [] {
    const char* v = std::getenv("PAGODA_TEST_GRAMMAR_DELAY_MS");
    return v ? std::max(0L, std::strtol(v, nullptr, 10)) : 0L;
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace pagoda

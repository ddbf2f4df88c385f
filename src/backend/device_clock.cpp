#include "backend/device_clock.h"

#include <chrono>

#include "backend/backend.h"
#include "backend/timed_backend.h"
#if PAGODA_HAS_CUDA
#include "backend/cuda/cuda_clock.h"
#endif

namespace pagoda {
namespace {

class HostClock final : public DeviceClock {
 public:
  void mark() override { marks_.push_back(std::chrono::steady_clock::now()); }
  std::vector<double> read_ms() override {
    std::vector<double> ms;
    ms.reserve(marks_.size());
    for (const auto& m : marks_) ms.push_back(std::chrono::duration<double, std::milli>(m - marks_.front()).count());
    marks_.clear();
    return ms;
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace

std::unique_ptr<DeviceClock> make_device_clock(Backend& be) {
  Backend& inner = unwrap_timed(be);
  if (inner.device() == Device::CPU) return std::make_unique<HostClock>();
#if PAGODA_HAS_CUDA
  if (inner.device() == Device::CUDA) return cuda::make_event_clock(inner);
#endif
  return nullptr;
}

}  // namespace pagoda

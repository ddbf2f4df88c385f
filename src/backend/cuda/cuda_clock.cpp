#include "backend/cuda/cuda_clock.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_util.h"
#include "core/error.h"

namespace pagoda::cuda {
namespace {

// Events are made once and reused: a profiled step records a few hundred.
class EventClock final : public DeviceClock {
 public:
  explicit EventClock(CudaBackend& be) : be_(be) {}
  ~EventClock() override {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }
  void mark() override {
    PAGODA_CUDA_CHECK(cudaSetDevice(be_.device_index()));
    if (used_ == pool_.size()) {
      cudaEvent_t e = nullptr;
      PAGODA_CUDA_CHECK(cudaEventCreate(&e));
      pool_.push_back(e);
    }
    PAGODA_CUDA_CHECK(cudaEventRecord(pool_[used_++], be_.stream()));
  }
  std::vector<double> read_ms() override {
    std::vector<double> ms;
    if (used_ == 0) return ms;
    PAGODA_CUDA_CHECK(cudaSetDevice(be_.device_index()));
    PAGODA_CUDA_CHECK(cudaEventSynchronize(pool_[used_ - 1]));
    ms.reserve(used_);
    for (size_t i = 0; i < used_; ++i) {
      float t = 0;
      PAGODA_CUDA_CHECK(cudaEventElapsedTime(&t, pool_[0], pool_[i]));
      ms.push_back(t);
    }
    used_ = 0;
    return ms;
  }

 private:
  CudaBackend& be_;
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0;
};

}  // namespace

std::unique_ptr<DeviceClock> make_event_clock(Backend& be) {
  auto* cuda = dynamic_cast<CudaBackend*>(&be);
  check_invariant(cuda != nullptr, "make_event_clock: not a CudaBackend");
  return std::make_unique<EventClock>(*cuda);
}

}  // namespace pagoda::cuda

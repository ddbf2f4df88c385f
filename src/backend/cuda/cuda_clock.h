// The step profiler's clock on CUDA (backend/device_clock.h): events on the backend's stream.
#pragma once

#include <memory>

#include "backend/device_clock.h"

namespace pagoda {
class Backend;
namespace cuda {

// `be` must be a CudaBackend.
std::unique_ptr<DeviceClock> make_event_clock(Backend& be);

}  // namespace cuda
}  // namespace pagoda

// Timestamps on a backend's own timeline, for the step profiler (engine/step_profiler.h): marks
// are recorded where the ops are enqueued and read back once the step is done, so timing a step
// adds no host wait inside it. The CPU's ops run as they are called, so its clock is the host's;
// CUDA's marks are events on the backend's stream. Vulkan records ops into command buffers
// submitted later: no clock there (the profiler then reports phases only).
#pragma once

#include <memory>
#include <vector>

namespace pagoda {

class Backend;

class DeviceClock {
 public:
  virtual ~DeviceClock() = default;
  // Records a timestamp after everything enqueued so far.
  virtual void mark() = 0;
  // Waits for the marks recorded since the last read; milliseconds of each after the first (the
  // first is 0), then forgets them.
  virtual std::vector<double> read_ms() = 0;
};

// The clock of `be`'s device, or null where there is none.
std::unique_ptr<DeviceClock> make_device_clock(Backend& be);

}  // namespace pagoda

// The devices this build can use, as `pagoda info` lists them (the backend's own business: nothing
// above backend/ includes a concrete backend).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace pagoda {

// "0: NVIDIA H100 80GB HBM3, sm_90, 79 GiB\n" per CUDA device, or why there are none.
std::string describe_cuda_devices();
// One line per Vulkan device the loader sees ("vulkan:0 llvmpipe (cpu, Vulkan 1.3)"), or why there
// are none; every line ends with a newline and the first is prefixed with `first_prefix`, the rest
// with as many spaces.
std::string describe_vulkan_devices(const std::string& first_prefix);

// CUDA devices the driver shows this process (0 without a driver, a device, or CUDA in the build):
// what `--device auto` chooses by.
int cuda_device_count();
// Vulkan devices the loader lists (0 without a loader, a driver, or Vulkan in the build): the N of
// vulkan:N ranges over them.
int vulkan_device_count();

// The most elements one tensor may hold on `device`, 0 when nothing but memory bounds it: the
// Vulkan shaders index in 32 bits. The memory plan keeps each layer's KV cache and recurrent state
// under it.
int64_t max_tensor_elements(Device device);

}  // namespace pagoda

#include "backend/devices.h"

#include <exception>
#include <vector>

#ifdef PAGODA_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_device.h"
#endif
#ifdef PAGODA_HAS_VULKAN
#include "backend/vulkan/vulkan_context.h"
#endif

namespace pagoda {

std::string describe_cuda_devices() {
#ifdef PAGODA_HAS_CUDA
  return cuda::describe_devices();
#else
  return "(built without CUDA)\n";
#endif
}

int cuda_device_count() {
#ifdef PAGODA_HAS_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clears the error, which is not sticky: the next call must not see it
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

int vulkan_device_count() {
#ifdef PAGODA_HAS_VULKAN
  try {
    return static_cast<int>(vulkan::list_devices().size());
  } catch (const std::exception&) {
    return 0;
  }
#else
  return 0;
#endif
}

std::string describe_vulkan_devices(const std::string& first_prefix) {
#ifdef PAGODA_HAS_VULKAN
  const std::string pad(first_prefix.size(), ' ');
  try {
    const std::vector<vulkan::DeviceInfo> devs = vulkan::list_devices();
    if (devs.empty()) return first_prefix + "(none: no Vulkan driver; Debian: mesa-vulkan-drivers)\n";
    std::string out;
    for (size_t i = 0; i < devs.size(); ++i) {
      const auto& d = devs[i];
      out += (i == 0 ? first_prefix : pad) + "vulkan:" + std::to_string(i) + " " + d.name + " (" + d.type +
             ", Vulkan " + std::to_string(VK_API_VERSION_MAJOR(d.api_version)) + "." +
             std::to_string(VK_API_VERSION_MINOR(d.api_version)) + ")" +
             (d.usable ? "" : " — unusable, lacks " + d.missing) + "\n";
    }
    return out;
  } catch (const std::exception& e) {
    return first_prefix + "(none: " + e.what() + ")\n";
  }
#else
  return first_prefix + "(built without Vulkan)\n";
#endif
}

int64_t max_tensor_elements(Device device) {
  return device == Device::Vulkan ? (int64_t{1} << 32) - 1 : 0;
}

}  // namespace pagoda

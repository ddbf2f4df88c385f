// The Vulkan instance, one physical device and its compute queue (docs/design.md §3, backend/vulkan).
// What the backend needs of the device: Vulkan 1.2+, buffer device addresses (every tensor is a
// 64-bit device address, so the Backend contract's pointers carry over unchanged and shaders need
// no descriptor sets), 64- and 16-bit integers in shaders, 16-bit storage (bf16/f16 tensors).
// Every device we target has them: Mesa's lavapipe, NVIDIA, AMD, Intel, Apple through MoltenVK.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda::vulkan {

// Throws pagoda::Error "Vulkan error: <call> failed: <result>" when r is not VK_SUCCESS.
void check_vk(VkResult r, const char* call);
#define PAGODA_VK_CHECK(call) ::pagoda::vulkan::check_vk((call), #call)

struct DeviceInfo {
  std::string name;
  std::string type;  // "discrete gpu", "integrated gpu", "cpu" (lavapipe), ...
  uint32_t api_version = 0;
  bool usable = false;  // has what the backend needs (above)
  std::string missing;  // why not, when not usable
};

// Every physical device the loader sees, in its order (the N of --device vulkan:N).
std::vector<DeviceInfo> list_devices();

class Context {
 public:
  // Device `index` of list_devices(). The Khronos validation layer is enabled when
  // PAGODA_VULKAN_VALIDATION=1 (CI): every message of error severity aborts the process, so a
  // test that provokes one fails.
  explicit Context(int index);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties memory{};
  uint32_t subgroup_size = 0;
  bool validation = false;
  // A device whose memory is the host's (lavapipe, integrated GPUs, Apple): the engine sizes its
  // KV cache as on the CPU rather than filling "device memory".
  bool unified_memory = false;

 private:
  void release();
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
};

}  // namespace pagoda::vulkan

// Device memory of the Vulkan backend: one VkBuffer (with its own VkDeviceMemory) per allocation,
// known to the rest of pagoda by its 64-bit device address. A Tensor's data pointer on this backend
// IS that address (plus an offset for views); shaders read it through GL_EXT_buffer_reference, and
// copies find the VkBuffer that holds an address here.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "backend/vulkan/vulkan_context.h"

namespace pagoda::vulkan {

struct Allocation {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkDeviceAddress address = 0;
  size_t bytes = 0;
  void* mapped = nullptr;  // host pointer when the memory is host-visible (lavapipe, UMA), else null
};

// Where an address lies: its allocation and the byte offset into it.
struct Located {
  const Allocation* alloc = nullptr;
  VkDeviceSize offset = 0;
};

class Memory {
 public:
  explicit Memory(const Context& ctx) : ctx_(ctx) {}
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  // Device-local memory (host-visible too where the device has such a type: lavapipe, UMA).
  // Throws pagoda::Error naming the size when the device is out of memory.
  Allocation allocate(size_t bytes);
  // Host-visible, coherent memory for staging copies; not addressable by shaders.
  Allocation allocate_staging(size_t bytes);
  void release(const Allocation& a);
  // A device allocation by address; `bytes` from `address` must lie inside it (else InternalError).
  void* add(Allocation a);  // registers `a` and returns its address as a pointer
  Allocation remove(const void* address);
  Located locate(const void* address, size_t bytes) const;
  // Device-local heap size (0 on unified-memory devices, which the engine sizes like the CPU).
  int64_t device_local_bytes() const;

 private:
  Allocation make(size_t bytes, VkBufferUsageFlags usage, VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer);
  const Context& ctx_;
  mutable std::mutex mu_;
  std::map<uint64_t, Allocation> by_address_;
};

}  // namespace pagoda::vulkan

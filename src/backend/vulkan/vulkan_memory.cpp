#include "backend/vulkan/vulkan_memory.h"

#include <string>

#include "core/error.h"

namespace pagoda::vulkan {

namespace {

std::string mib(size_t bytes) { return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB"; }

}  // namespace

Memory::~Memory() {
  for (auto& [addr, a] : by_address_) release(a);
}

Allocation Memory::make(size_t bytes, VkBufferUsageFlags usage, VkMemoryPropertyFlags want,
                        VkMemoryPropertyFlags prefer) {
  Allocation a;
  a.bytes = bytes;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = std::max<size_t>(bytes, 16);
  bi.usage = usage;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  PAGODA_VK_CHECK(vkCreateBuffer(ctx_.device, &bi, nullptr, &a.buffer));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(ctx_.device, a.buffer, &req);
  // The first type that has `want` and `prefer`, else the first with `want`.
  uint32_t type = UINT32_MAX;
  for (int pass = 0; pass < 2 && type == UINT32_MAX; ++pass) {
    const VkMemoryPropertyFlags need = pass == 0 ? (want | prefer) : want;
    for (uint32_t i = 0; i < ctx_.memory.memoryTypeCount; ++i)
      if ((req.memoryTypeBits & (1u << i)) && (ctx_.memory.memoryTypes[i].propertyFlags & need) == need) {
        type = i;
        break;
      }
  }
  if (type == UINT32_MAX) {
    vkDestroyBuffer(ctx_.device, a.buffer, nullptr);
    throw Error("Vulkan: the device has no memory type for a buffer of " + mib(bytes));
  }
  VkMemoryAllocateFlagsInfo fi{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  fi.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.pNext = (usage & VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT) ? &fi : nullptr;
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  const VkResult r = vkAllocateMemory(ctx_.device, &ai, nullptr, &a.memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(ctx_.device, a.buffer, nullptr);
    throw Error("Vulkan: out of device memory allocating " + mib(bytes) +
                " (lower --gpu-memory-utilization or --max-model-len, or use a smaller model)");
  }
  PAGODA_VK_CHECK(vkBindBufferMemory(ctx_.device, a.buffer, a.memory, 0));
  if (ctx_.memory.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT &&
      ctx_.memory.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
    PAGODA_VK_CHECK(vkMapMemory(ctx_.device, a.memory, 0, VK_WHOLE_SIZE, 0, &a.mapped));
  if (usage & VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT) {
    VkBufferDeviceAddressInfo di{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    di.buffer = a.buffer;
    a.address = vkGetBufferDeviceAddress(ctx_.device, &di);
  }
  return a;
}

Allocation Memory::allocate(size_t bytes) {
  return make(bytes,
              VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                  VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
              VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
}

Allocation Memory::allocate_staging(size_t bytes) {
  return make(bytes, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
              VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
              VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
}

void Memory::release(const Allocation& a) {
  if (a.mapped) vkUnmapMemory(ctx_.device, a.memory);
  vkDestroyBuffer(ctx_.device, a.buffer, nullptr);
  vkFreeMemory(ctx_.device, a.memory, nullptr);
}

void* Memory::add(Allocation a) {
  std::lock_guard<std::mutex> lock(mu_);
  by_address_[a.address] = a;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(a.address));
}

Allocation Memory::remove(const void* address) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_address_.find(reinterpret_cast<uintptr_t>(address));
  if (it == by_address_.end()) throw InternalError("vulkan: freeing an address that was never allocated");
  Allocation a = it->second;
  by_address_.erase(it);
  return a;
}

Located Memory::locate(const void* address, size_t bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t addr = reinterpret_cast<uintptr_t>(address);
  auto it = by_address_.upper_bound(addr);
  if (it == by_address_.begin()) throw InternalError("vulkan: an address outside every allocation");
  --it;
  const Allocation& a = it->second;
  if (addr + bytes > a.address + a.bytes)
    throw InternalError("vulkan: a copy of " + std::to_string(bytes) + " bytes runs past its allocation");
  return {&a, addr - a.address};
}

int64_t Memory::device_local_bytes() const {
  if (ctx_.unified_memory) return 0;
  int64_t best = 0;
  for (uint32_t i = 0; i < ctx_.memory.memoryHeapCount; ++i)
    if (ctx_.memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      best = std::max<int64_t>(best, static_cast<int64_t>(ctx_.memory.memoryHeaps[i].size));
  return best;
}

}  // namespace pagoda::vulkan

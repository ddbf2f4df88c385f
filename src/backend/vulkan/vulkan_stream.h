// The Vulkan backend's one command stream (docs/design.md §3: "one command stream per step"): every op
// is recorded into the current command buffer, with a full memory barrier between commands (ops
// read what the previous one wrote); the buffer is submitted when the host needs a result
// (copy_to_host, synchronize) or when it grows long. Host→device copies go through staging memory
// owned by the batch that reads them, so an upload never waits for the device.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "backend/vulkan/vulkan_context.h"
#include "backend/vulkan/vulkan_memory.h"

namespace pagoda::vulkan {

class Stream {
 public:
  Stream(const Context& ctx, Memory& memory);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void dispatch(VkPipeline pipeline, VkPipelineLayout layout, const void* push, uint32_t push_bytes,
                uint32_t groups_x, uint32_t groups_y = 1, uint32_t groups_z = 1);
  void copy(VkBuffer src, VkDeviceSize src_offset, VkBuffer dst, VkDeviceSize dst_offset, VkDeviceSize bytes);
  // Zeroes bytes [offset, offset + bytes) of dst, in stream order.
  void fill_zero(VkBuffer dst, VkDeviceSize offset, VkDeviceSize bytes);
  // Host → device, in stream order; `src` may be reused as soon as this returns.
  void upload(VkBuffer dst, VkDeviceSize offset, const void* src, size_t bytes);
  // Device → host: submits everything recorded, waits for it, then copies.
  void download(void* dst, VkBuffer src, VkDeviceSize offset, size_t bytes);
  // Submits what is recorded (no wait).
  void flush();
  // Submits and waits until the device has done everything.
  void finish();

 private:
  struct Batch {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    std::vector<Allocation> chunks;     // staging chunks (kChunkBytes) this batch's uploads use
    std::vector<Allocation> dedicated;  // staging for uploads larger than a chunk
    size_t chunk_used = 0;              // bytes used of chunks.back()
    size_t commands = 0;
  };
  static constexpr size_t kChunkBytes = size_t{8} << 20;
  // Submit a batch once it has this many commands (PAGODA_VULKAN_BATCH overrides): small enough
  // that the device starts on a step while the host still records the rest of it. 64 against 512
  // on an H200 (0.6B shape): tg128 1.21×, B=16 1.05×, B=64 1.02×; 16 no better (docs/benchmarks.md).
  static constexpr size_t kDefaultMaxCommands = 64;
  size_t max_commands_ = kDefaultMaxCommands;
  static constexpr size_t kMaxStagedBytes = size_t{256} << 20;  // or stages this much

  Batch& recording();          // the batch being recorded (begins one if none)
  void before_command();       // the barrier after the previous command of the batch
  void after_command();
  void retire(Batch& b);       // a finished batch's staging back to the pool
  void wait_oldest();
  size_t staged_in_flight() const;

  const Context& ctx_;
  Memory& memory_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  bool recording_ = false;
  Batch current_;
  std::deque<Batch> in_flight_;
  std::vector<Batch> spare_;             // command buffers and fences to reuse
  std::vector<Allocation> free_chunks_;  // staging chunks to reuse
  Allocation readback_;                  // host-visible target of downloads
};

}  // namespace pagoda::vulkan

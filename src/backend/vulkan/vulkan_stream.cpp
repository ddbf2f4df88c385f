#include "backend/vulkan/vulkan_stream.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace pagoda::vulkan {

Stream::Stream(const Context& ctx, Memory& memory) : ctx_(ctx), memory_(memory) {
  if (const char* b = std::getenv("PAGODA_VULKAN_BATCH"); b && *b) {
    const long n = std::strtol(b, nullptr, 10);
    check(n >= 1 && n <= 65536, std::string("PAGODA_VULKAN_BATCH=") + b + ": commands per submitted batch, 1..65536");
    max_commands_ = static_cast<size_t>(n);
  }
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = ctx_.queue_family;
  PAGODA_VK_CHECK(vkCreateCommandPool(ctx_.device, &pi, nullptr, &pool_));
}

Stream::~Stream() {
  try {
    finish();
  } catch (...) {
    // A lost device at teardown: nothing more to wait for.
  }
  auto drop = [&](Batch& b) {
    if (b.fence) vkDestroyFence(ctx_.device, b.fence, nullptr);
    for (auto& a : b.chunks) memory_.release(a);
    for (auto& a : b.dedicated) memory_.release(a);
  };
  for (Batch& b : spare_) drop(b);
  for (Batch& b : in_flight_) drop(b);
  if (recording_) drop(current_);
  for (auto& a : free_chunks_) memory_.release(a);
  if (readback_.buffer) memory_.release(readback_);
  vkDestroyCommandPool(ctx_.device, pool_, nullptr);
}

Stream::Batch& Stream::recording() {
  if (recording_) return current_;
  if (!spare_.empty()) {
    current_ = std::move(spare_.back());
    spare_.pop_back();
  } else {
    current_ = Batch{};
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    PAGODA_VK_CHECK(vkAllocateCommandBuffers(ctx_.device, &ai, &current_.cmd));
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    PAGODA_VK_CHECK(vkCreateFence(ctx_.device, &fi, nullptr, &current_.fence));
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  PAGODA_VK_CHECK(vkBeginCommandBuffer(current_.cmd, &bi));
  recording_ = true;
  return current_;
}

void Stream::before_command() {
  Batch& b = recording();
  if (b.commands == 0) return;
  // Every command may read what any earlier one wrote (and the host's writes to mapped memory).
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(b.cmd, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

void Stream::after_command() {
  Batch& b = current_;
  ++b.commands;
  size_t staged = b.chunks.size() * kChunkBytes;
  for (const auto& a : b.dedicated) staged += a.bytes;
  if (b.commands >= max_commands_ || staged >= kMaxStagedBytes) flush();
}

void Stream::dispatch(VkPipeline pipeline, VkPipelineLayout layout, const void* push, uint32_t push_bytes,
                      uint32_t gx, uint32_t gy, uint32_t gz) {
  if (gx == 0 || gy == 0 || gz == 0) return;
  before_command();
  VkCommandBuffer cmd = current_.cmd;
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  vkCmdDispatch(cmd, gx, gy, gz);
  after_command();
}

void Stream::copy(VkBuffer src, VkDeviceSize src_offset, VkBuffer dst, VkDeviceSize dst_offset,
                  VkDeviceSize bytes) {
  if (bytes == 0) return;
  before_command();
  VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(current_.cmd, src, dst, 1, &region);
  after_command();
}

void Stream::fill_zero(VkBuffer dst, VkDeviceSize offset, VkDeviceSize bytes) {
  if (bytes == 0) return;
  if (offset % 4 == 0 && bytes % 4 == 0) {
    before_command();
    vkCmdFillBuffer(current_.cmd, dst, offset, bytes, 0);
    after_command();
    return;
  }
  // vkCmdFillBuffer needs 4-byte alignment: copy zeros from staging instead.
  std::vector<uint8_t> zeros(bytes, 0);
  upload(dst, offset, zeros.data(), bytes);
}

void Stream::upload(VkBuffer dst, VkDeviceSize offset, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (bytes <= 65536 && bytes % 4 == 0 && offset % 4 == 0) {
    // Small uploads (a step's metadata) travel inside the command buffer.
    before_command();
    vkCmdUpdateBuffer(current_.cmd, dst, offset, bytes, src);
    after_command();
    return;
  }
  Batch& b = recording();
  VkBuffer staging;
  VkDeviceSize staging_offset = 0;
  if (bytes > kChunkBytes) {
    b.dedicated.push_back(memory_.allocate_staging(bytes));
    std::memcpy(b.dedicated.back().mapped, src, bytes);
    staging = b.dedicated.back().buffer;
  } else {
    if (b.chunks.empty() || b.chunk_used + bytes > kChunkBytes) {
      if (!free_chunks_.empty()) {
        b.chunks.push_back(free_chunks_.back());
        free_chunks_.pop_back();
      } else {
        b.chunks.push_back(memory_.allocate_staging(kChunkBytes));
      }
      b.chunk_used = 0;
    }
    staging = b.chunks.back().buffer;
    staging_offset = b.chunk_used;
    std::memcpy(static_cast<char*>(b.chunks.back().mapped) + b.chunk_used, src, bytes);
    b.chunk_used += (bytes + 255) & ~size_t{255};
  }
  copy(staging, staging_offset, dst, offset, bytes);
}

void Stream::download(void* dst, VkBuffer src, VkDeviceSize offset, size_t bytes) {
  if (bytes == 0) return;
  if (readback_.bytes < bytes) {  // one readback buffer, grown as needed (logits every step)
    if (readback_.buffer) {
      finish();
      memory_.release(readback_);
    }
    readback_ = Allocation{};
    readback_ = memory_.allocate_staging(std::max(bytes, size_t{1} << 20));
  }
  copy(src, offset, readback_.buffer, 0, bytes);
  finish();
  std::memcpy(dst, readback_.mapped, bytes);
}

void Stream::flush() {
  if (!recording_) return;
  recording_ = false;
  Batch b = std::move(current_);
  current_ = Batch{};
  PAGODA_VK_CHECK(vkEndCommandBuffer(b.cmd));
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &b.cmd;
  PAGODA_VK_CHECK(vkQueueSubmit(ctx_.queue, 1, &si, b.fence));
  in_flight_.push_back(std::move(b));
  // Bound the staging memory held by batches the device has not reached yet.
  while (in_flight_.size() > 1 && staged_in_flight() > 2 * kMaxStagedBytes) wait_oldest();
}

size_t Stream::staged_in_flight() const {
  size_t n = 0;
  for (const Batch& b : in_flight_) {
    n += b.chunks.size() * kChunkBytes;
    for (const auto& a : b.dedicated) n += a.bytes;
  }
  return n;
}

void Stream::retire(Batch& b) {
  for (auto& a : b.chunks) free_chunks_.push_back(a);
  for (auto& a : b.dedicated) memory_.release(a);
  b.chunks.clear();
  b.dedicated.clear();
  b.chunk_used = 0;
  b.commands = 0;
  PAGODA_VK_CHECK(vkResetFences(ctx_.device, 1, &b.fence));
  PAGODA_VK_CHECK(vkResetCommandBuffer(b.cmd, 0));
  spare_.push_back(std::move(b));
}

void Stream::wait_oldest() {
  Batch& b = in_flight_.front();
  PAGODA_VK_CHECK(vkWaitForFences(ctx_.device, 1, &b.fence, VK_TRUE, UINT64_MAX));
  Batch done = std::move(b);
  in_flight_.pop_front();
  retire(done);
}

void Stream::finish() {
  flush();
  while (!in_flight_.empty()) wait_oldest();
  // Keep a few staging chunks for the next step's uploads, not every one a weight load used.
  while (free_chunks_.size() > 4) {
    memory_.release(free_chunks_.back());
    free_chunks_.pop_back();
  }
}

}  // namespace pagoda::vulkan

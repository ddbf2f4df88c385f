// Compute pipelines of the Vulkan backend, created once per shader × specialization and kept.
// Shaders are GLSL (shaders/*.comp) compiled by glslc at build time, checked by spirv-val and
// embedded in the binary (the generated vulkan_shaders.cpp). They take no descriptor sets: every
// tensor reaches a shader as a 64-bit device address in its push constants (at most 128 bytes,
// the limit every Vulkan device guarantees).
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/vulkan/vulkan_context.h"

namespace pagoda::vulkan {

constexpr uint32_t kMaxPushBytes = 128;

struct EmbeddedShader {
  const char* name;  // the .comp file's stem: "rms_norm", "paged_attention", ...
  const uint32_t* words;
  size_t count;
};
// The shaders compiled into this binary (generated at build time).
const std::vector<EmbeddedShader>& embedded_shaders();

class Pipelines {
 public:
  explicit Pipelines(const Context& ctx);
  ~Pipelines();
  Pipelines(const Pipelines&) = delete;
  Pipelines& operator=(const Pipelines&) = delete;

  // The pipeline of `shader` with specialization constants 0, 1, ... = spec (none by default).
  VkPipeline get(const std::string& shader, const std::vector<uint32_t>& spec = {});
  VkPipelineLayout layout() const { return layout_; }

 private:
  const Context& ctx_;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  std::mutex mu_;
  std::map<std::string, VkShaderModule> modules_;
  std::map<std::pair<std::string, std::vector<uint32_t>>, VkPipeline> pipelines_;
};

}  // namespace pagoda::vulkan

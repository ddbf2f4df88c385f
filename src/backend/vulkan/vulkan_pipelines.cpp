#include "backend/vulkan/vulkan_pipelines.h"

#include "core/error.h"

namespace pagoda::vulkan {

Pipelines::Pipelines(const Context& ctx) : ctx_(ctx) {
  VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, kMaxPushBytes};
  VkPipelineLayoutCreateInfo li{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  li.pushConstantRangeCount = 1;
  li.pPushConstantRanges = &range;
  PAGODA_VK_CHECK(vkCreatePipelineLayout(ctx_.device, &li, nullptr, &layout_));
}

Pipelines::~Pipelines() {
  for (auto& [key, p] : pipelines_) vkDestroyPipeline(ctx_.device, p, nullptr);
  for (auto& [name, m] : modules_) vkDestroyShaderModule(ctx_.device, m, nullptr);
  vkDestroyPipelineLayout(ctx_.device, layout_, nullptr);
}

VkPipeline Pipelines::get(const std::string& shader, const std::vector<uint32_t>& spec) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(shader, spec);
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
  VkShaderModule& module = modules_[shader];
  if (!module) {
    const EmbeddedShader* found = nullptr;
    for (const EmbeddedShader& s : embedded_shaders())
      if (shader == s.name) found = &s;
    if (!found) {
      modules_.erase(shader);
      throw InternalError("vulkan: no shader named '" + shader + "' was compiled into this binary");
    }
    VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mi.codeSize = found->count * sizeof(uint32_t);
    mi.pCode = found->words;
    PAGODA_VK_CHECK(vkCreateShaderModule(ctx_.device, &mi, nullptr, &module));
  }
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (size_t i = 0; i < spec.size(); ++i)
    entries[i] = {static_cast<uint32_t>(i), static_cast<uint32_t>(i * sizeof(uint32_t)), sizeof(uint32_t)};
  VkSpecializationInfo si{static_cast<uint32_t>(entries.size()), entries.data(), spec.size() * sizeof(uint32_t),
                          spec.data()};
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
  ci.layout = layout_;
  VkPipeline p = VK_NULL_HANDLE;
  PAGODA_VK_CHECK(vkCreateComputePipelines(ctx_.device, VK_NULL_HANDLE, 1, &ci, nullptr, &p));
  pipelines_[key] = p;
  return p;
}

}  // namespace pagoda::vulkan

#include "backend/vulkan/vulkan_context.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace pagoda::vulkan {

namespace {

const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

std::string result_name(VkResult r) {
  switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    default: return "VkResult " + std::to_string(static_cast<int>(r));
  }
}

VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                          VkDebugUtilsMessageTypeFlagsEXT,
                                          const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    std::fprintf(stderr, "vulkan validation error: %s\n", data->pMessage);
    std::abort();  // a validation error is a bug of ours: fail loudly (CI runs with the layer on)
  }
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)
    std::fprintf(stderr, "vulkan validation warning: %s\n", data->pMessage);
  return VK_FALSE;
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

VkInstance make_instance(bool validation) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "pagoda";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  std::vector<const char*> layers, extensions;
  if (validation) {
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
  }
#ifdef __APPLE__
  // MoltenVK is a "portability" driver: the loader lists it only when asked to.
  extensions.push_back(VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME);
  ci.flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
#endif
  ci.enabledLayerCount = static_cast<uint32_t>(layers.size());
  ci.ppEnabledLayerNames = layers.data();
  ci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  VkInstance instance = VK_NULL_HANDLE;
  const VkResult r = vkCreateInstance(&ci, nullptr, &instance);
  if (r != VK_SUCCESS)
    throw Error("Vulkan: cannot create an instance (" + result_name(r) +
                "); is a Vulkan driver installed? (Debian: mesa-vulkan-drivers for lavapipe; check with "
                "vulkaninfo)");
  return instance;
}

std::vector<VkPhysicalDevice> physical_devices(VkInstance instance) {
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(instance, &n, nullptr);
  std::vector<VkPhysicalDevice> out(n);
  vkEnumeratePhysicalDevices(instance, &n, out.data());
  return out;
}

const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete gpu";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual gpu";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
  }
}

struct Features {
  VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features v11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features v12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  Features() {
    f2.pNext = &v11;
    v11.pNext = &v12;
  }
};

// What the backend needs that `dev` lacks ("" when nothing).
std::string missing_features(VkPhysicalDevice dev) {
  VkPhysicalDeviceProperties p;
  vkGetPhysicalDeviceProperties(dev, &p);
  if (p.apiVersion < VK_API_VERSION_1_2) return "Vulkan 1.2";
  Features f;
  vkGetPhysicalDeviceFeatures2(dev, &f.f2);
  std::string miss;
  auto need = [&](VkBool32 have, const char* what) {
    if (!have) miss += (miss.empty() ? "" : ", ") + std::string(what);
  };
  need(f.v12.bufferDeviceAddress, "bufferDeviceAddress");
  need(f.f2.features.shaderInt64, "shaderInt64");
  need(f.f2.features.shaderInt16, "shaderInt16");
  need(f.v11.storageBuffer16BitAccess, "storageBuffer16BitAccess");
  return miss;
}

}  // namespace

void check_vk(VkResult r, const char* call) {
  if (r != VK_SUCCESS) throw Error(std::string("Vulkan error: ") + call + " failed: " + result_name(r));
}

std::vector<DeviceInfo> list_devices() {
  VkInstance instance = make_instance(false);
  std::vector<DeviceInfo> out;
  for (VkPhysicalDevice dev : physical_devices(instance)) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(dev, &p);
    DeviceInfo info;
    info.name = p.deviceName;
    info.type = type_name(p.deviceType);
    info.api_version = p.apiVersion;
    info.missing = missing_features(dev);
    info.usable = info.missing.empty();
    out.push_back(info);
  }
  vkDestroyInstance(instance, nullptr);
  return out;
}

Context::Context(int index) {
  const char* env = std::getenv("PAGODA_VULKAN_VALIDATION");
  validation = env && std::strcmp(env, "1") == 0;
  if (validation && !has_layer(kValidationLayer))
    throw Error("PAGODA_VULKAN_VALIDATION=1 but the Khronos validation layer is not installed (Debian: "
                "vulkan-validationlayers)");
  instance = make_instance(validation);
  try {
    if (validation) {
      VkDebugUtilsMessengerCreateInfoEXT mi{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
      mi.messageSeverity =
          VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
      mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
      mi.pfnUserCallback = on_message;
      auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT"));
      if (create) PAGODA_VK_CHECK(create(instance, &mi, nullptr, &messenger_));
    }
    const std::vector<VkPhysicalDevice> devs = physical_devices(instance);
    if (devs.empty())
      throw Error("Vulkan: no device found (Debian: install mesa-vulkan-drivers for the lavapipe CPU device; "
                  "check with vulkaninfo)");
    if (index < 0 || index >= static_cast<int>(devs.size()))
      throw Error("--device vulkan:" + std::to_string(index) + ": there are " + std::to_string(devs.size()) +
                  " Vulkan devices (0.." + std::to_string(devs.size() - 1) + "); `pagoda info` lists them");
    physical = devs[static_cast<size_t>(index)];
    vkGetPhysicalDeviceProperties(physical, &props);
    vkGetPhysicalDeviceMemoryProperties(physical, &memory);
    const std::string missing = missing_features(physical);
    if (!missing.empty())
      throw Error(std::string("Vulkan device '") + props.deviceName + "' lacks what pagoda needs: " + missing);

    VkPhysicalDeviceSubgroupProperties sub{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &sub;
    vkGetPhysicalDeviceProperties2(physical, &p2);
    subgroup_size = sub.subgroupSize;
    unified_memory = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
                     props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qf(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &nq, qf.data());
    queue_family = nq;
    for (uint32_t i = 0; i < nq; ++i)
      if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
        queue_family = i;
        break;
      }
    if (queue_family == nq) throw Error(std::string("Vulkan device '") + props.deviceName + "' has no compute queue");

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qi.queueFamilyIndex = queue_family;
    qi.queueCount = 1;
    qi.pQueuePriorities = &priority;
    Features want;
    want.f2.features.shaderInt64 = VK_TRUE;
    want.f2.features.shaderInt16 = VK_TRUE;
    want.v11.storageBuffer16BitAccess = VK_TRUE;
    want.v12.bufferDeviceAddress = VK_TRUE;
    VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    di.pNext = &want.f2;
    di.queueCreateInfoCount = 1;
    di.pQueueCreateInfos = &qi;
#ifdef __APPLE__
    const char* portability = "VK_KHR_portability_subset";
    di.enabledExtensionCount = 1;
    di.ppEnabledExtensionNames = &portability;
#endif
    PAGODA_VK_CHECK(vkCreateDevice(physical, &di, nullptr, &device));
    vkGetDeviceQueue(device, queue_family, 0, &queue);
  } catch (...) {
    release();
    throw;
  }
}

Context::~Context() { release(); }

void Context::release() {
  if (device) vkDestroyDevice(device, nullptr);
  device = VK_NULL_HANDLE;
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance, messenger_, nullptr);
    messenger_ = VK_NULL_HANDLE;
  }
  if (instance) vkDestroyInstance(instance, nullptr);
  instance = VK_NULL_HANDLE;
}

}  // namespace pagoda::vulkan

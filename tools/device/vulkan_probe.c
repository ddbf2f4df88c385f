/* Run ON the GPU machine by tools/device/vulkan_gpu.sh before the long build: does the Vulkan loader
 * find a driver here? Prints each physical device (name, API version, type) or the failing call's
 * VkResult, so a refused instance shows up in seconds rather than after a build. */
#include <stdio.h>
#include <vulkan/vulkan.h>

int main(void) {
  VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "pagoda-probe", 1, NULL, 0,
                           VK_API_VERSION_1_3};
  VkInstanceCreateInfo ci = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app, 0, NULL, 0, NULL};
  VkInstance inst;
  VkResult r = vkCreateInstance(&ci, NULL, &inst);
  if (r != VK_SUCCESS) {
    printf("vkCreateInstance failed: VkResult %d\n", (int)r);
    return 1;
  }
  uint32_t n = 0;
  r = vkEnumeratePhysicalDevices(inst, &n, NULL);
  printf("vkEnumeratePhysicalDevices: VkResult %d, %u device(s)\n", (int)r, n);
  VkPhysicalDevice devs[16];
  if (n > 16) n = 16;
  vkEnumeratePhysicalDevices(inst, &n, devs);
  for (uint32_t i = 0; i < n; ++i) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(devs[i], &p);
    printf("device %u: %s, API %u.%u.%u, type %d, driver %u\n", i, p.deviceName,
           VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion),
           VK_API_VERSION_PATCH(p.apiVersion), (int)p.deviceType, p.driverVersion);
  }
  vkDestroyInstance(inst, NULL);
  return n > 0 ? 0 : 2;
}

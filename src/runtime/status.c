/* Status codes and messages: the per-thread last-error text, the names of status
 * codes and of VkResults, and the version functions. */
#include "runtime/runtime.h"

#include <stdio.h>

static _Thread_local char last_error[1024];

uint32_t vkf_version(void) { return VKF_VERSION_NUMBER; }

const char *vkf_version_string(void)
{
#define VKF_STR2(x) #x
#define VKF_STR(x) VKF_STR2(x)
    return VKF_STR(VKF_VERSION_MAJOR) "." VKF_STR(VKF_VERSION_MINOR) "." VKF_STR(VKF_VERSION_PATCH);
#undef VKF_STR
#undef VKF_STR2
}

const char *vkf_status_string(vkf_status status)
{
    switch (status) {
    case VKF_OK: return "VKF_OK";
    case VKF_ERROR_INVALID_ARGUMENT: return "VKF_ERROR_INVALID_ARGUMENT";
    case VKF_ERROR_NO_VULKAN: return "VKF_ERROR_NO_VULKAN";
    case VKF_ERROR_NO_DEVICE: return "VKF_ERROR_NO_DEVICE";
    case VKF_ERROR_UNSUPPORTED: return "VKF_ERROR_UNSUPPORTED";
    case VKF_ERROR_TOO_LARGE: return "VKF_ERROR_TOO_LARGE";
    case VKF_ERROR_OUT_OF_HOST_MEMORY: return "VKF_ERROR_OUT_OF_HOST_MEMORY";
    case VKF_ERROR_OUT_OF_DEVICE_MEMORY: return "VKF_ERROR_OUT_OF_DEVICE_MEMORY";
    case VKF_ERROR_DEVICE_LOST: return "VKF_ERROR_DEVICE_LOST";
    case VKF_ERROR_VULKAN: return "VKF_ERROR_VULKAN";
    case VKF_ERROR_BAD_MODEL: return "VKF_ERROR_BAD_MODEL";
    case VKF_ERROR_IO: return "VKF_ERROR_IO";
    case VKF_ERROR_STATE: return "VKF_ERROR_STATE";
    }
    return "VKF_ERROR_UNKNOWN";
}

const char *vkf_last_error(void) { return last_error; }

vkf_status vkf_fail(vkf_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, args);
    va_end(args);
    return status;
}

const char *vkf_vk_result_name(VkResult result)
{
    switch (result) {
#define NAME(r) case r: return #r
    NAME(VK_SUCCESS);
    NAME(VK_NOT_READY);
    NAME(VK_TIMEOUT);
    NAME(VK_INCOMPLETE);
    NAME(VK_ERROR_OUT_OF_HOST_MEMORY);
    NAME(VK_ERROR_OUT_OF_DEVICE_MEMORY);
    NAME(VK_ERROR_INITIALIZATION_FAILED);
    NAME(VK_ERROR_DEVICE_LOST);
    NAME(VK_ERROR_MEMORY_MAP_FAILED);
    NAME(VK_ERROR_LAYER_NOT_PRESENT);
    NAME(VK_ERROR_EXTENSION_NOT_PRESENT);
    NAME(VK_ERROR_FEATURE_NOT_PRESENT);
    NAME(VK_ERROR_INCOMPATIBLE_DRIVER);
    NAME(VK_ERROR_TOO_MANY_OBJECTS);
    NAME(VK_ERROR_FORMAT_NOT_SUPPORTED);
    NAME(VK_ERROR_FRAGMENTED_POOL);
    NAME(VK_ERROR_UNKNOWN);
    NAME(VK_ERROR_OUT_OF_POOL_MEMORY);
    NAME(VK_ERROR_INVALID_EXTERNAL_HANDLE);
    NAME(VK_ERROR_FRAGMENTATION);
    NAME(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS);
    NAME(VK_PIPELINE_COMPILE_REQUIRED);
#undef NAME
    default: return "VkResult(unknown)";
    }
}

vkf_status vkf_fail_vk(VkResult result, const char *call)
{
    vkf_status status = VKF_ERROR_VULKAN;
    if (result == VK_ERROR_OUT_OF_HOST_MEMORY) status = VKF_ERROR_OUT_OF_HOST_MEMORY;
    else if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY) status = VKF_ERROR_OUT_OF_DEVICE_MEMORY;
    else if (result == VK_ERROR_DEVICE_LOST) status = VKF_ERROR_DEVICE_LOST;
    return vkf_fail(status, "%s failed with %s (%d)", call, vkf_vk_result_name(result), (int)result);
}

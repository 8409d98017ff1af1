/* The device: loading Vulkan at run time (volk over a dlopen'ed loader), the
 * instance with optional validation, discovery of every device's features and
 * limits, the choice of one device and its VkDevice, queue, command pool and
 * transfer fence (vkf_device_open / vkf_device_close, which context.c calls),
 * and the services every other runtime file uses: the log, Vulkan failures,
 * fault injection for tests and one-shot transfer command buffers. It calls no
 * other runtime file: context.c assembles the context above it. */
#include "runtime/runtime.h"
#include "runtime/vk_coopmat.h"

#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Loading the loader. volk keeps its entry points in process-wide variables, so
 * it is initialised once, under a mutex, and the loader library stays loaded for
 * the life of the process (those entry points point into it). Instance-level
 * functions are the loader's trampolines, valid for every instance, so they are
 * loaded once too; extension functions are kept per context. VKFORMER_VULKAN_LOADER
 * names another loader library (tests use it to simulate a machine without one). */
static pthread_mutex_t volk_mutex = PTHREAD_MUTEX_INITIALIZER;
static char volk_loader_name[512];      /* the loader volk is initialised with; "" none */
static bool volk_instance_loaded;

static vkf_status loader_open(void)
{
    const char *name = getenv("VKFORMER_VULKAN_LOADER");
    if (!name || !*name) name = "libvulkan.so.1";
    vkf_status st = VKF_OK;
    pthread_mutex_lock(&volk_mutex);
    if (strcmp(volk_loader_name, name) != 0) {
        void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        PFN_vkGetInstanceProcAddr gipa = handle ? (PFN_vkGetInstanceProcAddr)dlsym(handle, "vkGetInstanceProcAddr") : NULL;
        if (!handle) {
            st = vkf_fail(VKF_ERROR_NO_VULKAN, "the Vulkan loader (%s) could not be loaded: %s; install libvulkan1", name,
                          dlerror());
        } else if (!gipa) {
            dlclose(handle);
            st = vkf_fail(VKF_ERROR_NO_VULKAN, "%s has no vkGetInstanceProcAddr: not a Vulkan loader", name);
        } else {
            /* A first loader, or (tests only) another one: switch volk to it. The
             * previous library stays loaded. */
            volkInitializeCustom(gipa);
            volk_instance_loaded = false;
            snprintf(volk_loader_name, sizeof volk_loader_name, "%s", name);
        }
    }
    pthread_mutex_unlock(&volk_mutex);
    return st;
}

static bool has_layer(const char *layer)
{
    uint32_t count = 0;
    if (vkEnumerateInstanceLayerProperties(&count, NULL) != VK_SUCCESS || count == 0) return false;
    VkLayerProperties *props = calloc(count, sizeof *props);
    if (!props) return false;
    bool found = false;
    if (vkEnumerateInstanceLayerProperties(&count, props) == VK_SUCCESS)
        for (uint32_t i = 0; i < count && !found; i++) found = strcmp(props[i].layerName, layer) == 0;
    free(props);
    return found;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT types,
                                                     const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                     void *user)
{
    (void)types;
    vkf_context *ctx = user;
    vkf_log_level level = VKF_LOG_INFO;
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        ctx->validation_errors++;
        level = VKF_LOG_ERROR;
    } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        ctx->validation_warnings++;
        level = VKF_LOG_WARNING;
    }
    vkf_log(ctx, level, "validation: %s", data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE;
}

static void fill_messenger_info(VkDebugUtilsMessengerCreateInfoEXT *info, vkf_context *ctx)
{
    *info = (VkDebugUtilsMessengerCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = debug_callback,
        .pUserData = ctx,
    };
}

/* Creates the instance; with ctx != NULL and validation requested, also the layer
 * and messenger. */
static vkf_status instance_create(vkf_context *ctx, bool validation, VkInstance *out_instance)
{
    *out_instance = VK_NULL_HANDLE;
    uint32_t loader_version = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion) vkEnumerateInstanceVersion(&loader_version);
    if (loader_version < VK_API_VERSION_1_1)
        return vkf_fail(VKF_ERROR_NO_VULKAN, "the Vulkan loader supports only Vulkan 1.0; vkformer needs 1.1");

    const char *layers[1];
    const char *extensions[1];
    uint32_t layer_count = 0, extension_count = 0;
    VkDebugUtilsMessengerCreateInfoEXT messenger_info;
    const void *next = NULL;
    if (validation) {
        if (!has_layer("VK_LAYER_KHRONOS_validation"))
            return vkf_fail(VKF_ERROR_UNSUPPORTED,
                            "validation was requested but VK_LAYER_KHRONOS_validation is not installed "
                            "(Debian: vulkan-validationlayers)");
        layers[layer_count++] = "VK_LAYER_KHRONOS_validation";
        extensions[extension_count++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
        fill_messenger_info(&messenger_info, ctx);
        next = &messenger_info; /* also catches messages from instance creation */
    }
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "vkformer",
        .applicationVersion = VKF_VERSION_NUMBER,
        .pEngineName = "vkformer",
        .engineVersion = VKF_VERSION_NUMBER,
        .apiVersion = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : loader_version,
    };
    VkInstanceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = next,
        .pApplicationInfo = &app,
        .enabledLayerCount = layer_count,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = extension_count,
        .ppEnabledExtensionNames = extensions,
    };
    VkInstance instance;
    VkResult r = vkCreateInstance(&info, NULL, &instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
        return vkf_fail(VKF_ERROR_NO_DEVICE, "no Vulkan driver is installed (vkCreateInstance returned "
                                             "VK_ERROR_INCOMPATIBLE_DRIVER)");
    if (r != VK_SUCCESS) return vkf_fail_vk(r, "vkCreateInstance");
    pthread_mutex_lock(&volk_mutex);
    if (!volk_instance_loaded) volkLoadInstanceOnly(instance);
    volk_instance_loaded = true;
    pthread_mutex_unlock(&volk_mutex);
    *out_instance = instance;
    return VKF_OK;
}

static bool has_device_extension(const VkExtensionProperties *exts, uint32_t count, const char *name)
{
    for (uint32_t i = 0; i < count; i++)
        if (strcmp(exts[i].extensionName, name) == 0) return true;
    return false;
}

static vkf_device_type map_type(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return VKF_DEVICE_INTEGRATED_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return VKF_DEVICE_DISCRETE_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return VKF_DEVICE_VIRTUAL_GPU;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return VKF_DEVICE_CPU;
    default: return VKF_DEVICE_OTHER;
    }
}

/* Index of the first queue family with compute, or UINT32_MAX. Prefers a family
 * with timestamps. */
static uint32_t compute_family(VkPhysicalDevice pd, uint32_t *out_timestamp_bits)
{
    uint32_t count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &count, NULL);
    VkQueueFamilyProperties *fams = calloc(count ? count : 1, sizeof *fams);
    if (!fams) return UINT32_MAX;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &count, fams);
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < count; i++) {
        if (!(fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
        if (best == UINT32_MAX || (fams[best].timestampValidBits == 0 && fams[i].timestampValidBits > 0))
            best = i;
    }
    *out_timestamp_bits = best == UINT32_MAX ? 0 : fams[best].timestampValidBits;
    free(fams);
    return best;
}

/* The memory type tensors live in, whether the host may write it directly, and a
 * host-visible coherent type for staging. */
static void choose_memory_types(const VkPhysicalDeviceMemoryProperties *mp, bool allow_host_visible, uint32_t *out_device, uint32_t *out_staging,
                                bool *out_direct)
{
    const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t device = UINT32_MAX, unified = UINT32_MAX, staging = UINT32_MAX;
    uint64_t largest_local_heap = 0;
    for (uint32_t h = 0; h < mp->memoryHeapCount; h++)
        if ((mp->memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) && mp->memoryHeaps[h].size > largest_local_heap)
            largest_local_heap = mp->memoryHeaps[h].size;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        uint64_t heap = mp->memoryHeaps[mp->memoryTypes[i].heapIndex].size;
        bool local = f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
        if (local && device == UINT32_MAX) device = i;
        if (local && (f & host) == host && unified == UINT32_MAX && heap == largest_local_heap) unified = i;
        if ((f & host) == host && staging == UINT32_MAX) staging = i;
    }
    if (device == UINT32_MAX) device = staging; /* a device with no device-local type */
    /* Direct access only where the mappable device-local type sits on the largest
     * device-local heap (CPUs, integrated GPUs, discrete GPUs with resizable BAR),
     * not on a small BAR window. */
    bool direct = allow_host_visible && unified != UINT32_MAX;
    *out_device = direct ? unified : device;
    *out_staging = staging;
    *out_direct = direct;
}

static vkf_component component_from_vk(uint32_t t)
{
    return t <= VKF_COMPONENT_U64 ? (vkf_component)t : VKF_COMPONENT_OTHER;
}

const char *vkf_component_name(vkf_component c)
{
    static const char *const names[] = {"f16", "f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"};
    return (unsigned)c < sizeof names / sizeof *names ? names[c] : "other";
}

/* The cooperative-matrix shapes (VK_KHR_cooperative_matrix) and the flexible
 * f16 x f16 -> f32 dimensions of VK_NV_cooperative_matrix2, where the device has
 * the extensions and the feature. */
static void fill_coopmat_info(VkInstance instance, VkPhysicalDevice pd, bool has_khr, bool has_nv2, bool feature,
                              bool nv2_flexible, uint32_t nv2_max_dimension, vkf_device_info *info)
{
    vkf_PFN_get_coopmat_properties get_shapes =
        (vkf_PFN_get_coopmat_properties)vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    if (!has_khr || !feature || !get_shapes) return;
    vkf_vk_coopmat_properties shapes[VKF_MAX_COOPMAT_SHAPES];
    uint32_t count = VKF_MAX_COOPMAT_SHAPES;
    for (uint32_t i = 0; i < count; i++)
        shapes[i] = (vkf_vk_coopmat_properties){.sType = (VkStructureType)VKF_VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
    VkResult r = get_shapes(pd, &count, shapes);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) count = 0;
    for (uint32_t i = 0; i < count; i++)
        info->coopmat_shapes[i] = (vkf_coopmat_shape){
            .m = shapes[i].MSize, .n = shapes[i].NSize, .k = shapes[i].KSize,
            .a = component_from_vk(shapes[i].AType), .b = component_from_vk(shapes[i].BType),
            .c = component_from_vk(shapes[i].CType), .result = component_from_vk(shapes[i].ResultType),
            .saturating = shapes[i].saturatingAccumulation,
            .subgroup_scope = shapes[i].scope == VKF_VK_SCOPE_SUBGROUP,
        };
    info->coopmat_shape_count = count;

    vkf_PFN_get_coopmat_flexible_properties get_flexible = (vkf_PFN_get_coopmat_flexible_properties)vkGetInstanceProcAddr(
        instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
    if (!has_nv2 || !nv2_flexible || !get_flexible) return;
    vkf_vk_coopmat_flexible_properties flex[VKF_MAX_COOPMAT_SHAPES];
    count = VKF_MAX_COOPMAT_SHAPES;
    for (uint32_t i = 0; i < count; i++)
        flex[i] = (vkf_vk_coopmat_flexible_properties){
            .sType = (VkStructureType)VKF_VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV};
    r = get_flexible(pd, &count, flex);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) count = 0;
    for (uint32_t i = 0; i < count; i++) {
        const vkf_vk_coopmat_flexible_properties *f = &flex[i];
        bool f16_f32 = f->AType == VKF_COMPONENT_F16 && f->BType == VKF_COMPONENT_F16 && f->CType == VKF_COMPONENT_F32 &&
                       f->ResultType == VKF_COMPONENT_F32 && !f->saturatingAccumulation;
        if (f16_f32 && f->scope == VKF_VK_SCOPE_SUBGROUP && !info->cooperative_matrix2) {
            info->cooperative_matrix2 = true;
            info->coopmat2_granularity[0] = f->MGranularity;
            info->coopmat2_granularity[1] = f->NGranularity;
            info->coopmat2_granularity[2] = f->KGranularity;
            info->coopmat2_max_dimension = nv2_max_dimension;
        }
        /* workgroup scope (matmul_coopmat2_wg): the entry for 256 invocations where
         * the device lists one (the kernel's default), else the first */
        if (f16_f32 && f->scope == VKF_VK_SCOPE_WORKGROUP && f->workgroupInvocations &&
            (!info->coopmat2_wg_invocations || f->workgroupInvocations == 256)) {
            info->coopmat2_wg_granularity[0] = f->MGranularity;
            info->coopmat2_wg_granularity[1] = f->NGranularity;
            info->coopmat2_wg_granularity[2] = f->KGranularity;
            info->coopmat2_wg_invocations = f->workgroupInvocations;
        }
    }
}

static void fill_info(VkInstance instance, VkPhysicalDevice pd, uint32_t index, vkf_device_info *info)
{
    memset(info, 0, sizeof *info);
    info->index = index;

    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(pd, &base);
    uint32_t ext_count = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &ext_count, NULL);
    VkExtensionProperties *exts = calloc(ext_count ? ext_count : 1, sizeof *exts);
    if (exts) vkEnumerateDeviceExtensionProperties(pd, NULL, &ext_count, exts);
    else ext_count = 0;
    bool v12 = base.apiVersion >= VK_API_VERSION_1_2;
    bool has_driver_props = v12 || has_device_extension(exts, ext_count, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME);
    bool has_f16i8 = v12 || has_device_extension(exts, ext_count, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME);
    info->cooperative_matrix = has_device_extension(exts, ext_count, VKF_VK_KHR_COOPERATIVE_MATRIX);
    bool has_nv2 = has_device_extension(exts, ext_count, VKF_VK_NV_COOPERATIVE_MATRIX_2);
    free(exts);

    VkPhysicalDeviceDriverProperties driver = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceMaintenance3Properties maint3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties subgroup = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                                   .pNext = &maint3};
    if (has_driver_props) maint3.pNext = &driver;
    vkf_vk_coopmat2_properties nv2_props = {
        .sType = (VkStructureType)VKF_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV};
    if (has_nv2) *(has_driver_props ? &driver.pNext : &maint3.pNext) = &nv2_props;
    VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &subgroup};
    vkGetPhysicalDeviceProperties2(pd, &props);

    VkPhysicalDeviceShaderFloat16Int8Features f16i8 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceVulkanMemoryModelFeatures memory_model = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES};
    vkf_vk_coopmat_features coopmat = {.sType = (VkStructureType)VKF_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
    vkf_vk_coopmat2_features coopmat2 = {
        .sType = (VkStructureType)VKF_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
    if (has_f16i8) s16.pNext = &f16i8;
    if (v12) f16i8.pNext = &memory_model;
    if (v12 && info->cooperative_matrix) memory_model.pNext = &coopmat;
    if (v12 && info->cooperative_matrix && has_nv2) coopmat.pNext = &coopmat2;
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s16};
    vkGetPhysicalDeviceFeatures2(pd, &feats);
    /* Device scope too: once the memory model is on, every shader that uses Device
     * scope (memoryBarrierBuffer in the older kernels) needs it. */
    info->vulkan_memory_model = memory_model.vulkanMemoryModel && memory_model.vulkanMemoryModelDeviceScope;
    bool nv2_queried = v12 && info->cooperative_matrix && has_nv2;
    info->coopmat2_workgroup_scope = nv2_queried && coopmat2.cooperativeMatrixWorkgroupScope;
    info->coopmat2_tensor_addressing = nv2_queried && coopmat2.cooperativeMatrixTensorAddressing;
    info->coopmat2_per_element = nv2_queried && coopmat2.cooperativeMatrixPerElementOperations;
    fill_coopmat_info(instance, pd, v12 && info->cooperative_matrix, has_nv2, coopmat.cooperativeMatrix,
                      coopmat2.cooperativeMatrixFlexibleDimensions, nv2_props.cooperativeMatrixFlexibleDimensionsMaxDimension,
                      info);

    const VkPhysicalDeviceLimits *l = &base.limits;
    snprintf(info->name, sizeof info->name, "%s", base.deviceName);
    info->type = map_type(base.deviceType);
    info->vendor_id = base.vendorID;
    info->device_id = base.deviceID;
    info->api_version = base.apiVersion;
    info->driver_version = base.driverVersion;
    if (has_driver_props) {
        snprintf(info->driver_name, sizeof info->driver_name, "%s", driver.driverName);
        snprintf(info->driver_info, sizeof info->driver_info, "%s", driver.driverInfo);
    }
    info->subgroup_size = subgroup.subgroupSize;
    info->subgroup_shuffle = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                             (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    info->max_shared_memory = l->maxComputeSharedMemorySize;
    info->max_workgroup_invocations = l->maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; i++) {
        info->max_workgroup_size[i] = l->maxComputeWorkGroupSize[i];
        info->max_workgroup_count[i] = l->maxComputeWorkGroupCount[i];
    }
    info->max_push_constants = l->maxPushConstantsSize;
    info->storage_16bit = s16.storageBuffer16BitAccess;
    info->float16 = has_f16i8 && f16i8.shaderFloat16;
    info->int8 = has_f16i8 && f16i8.shaderInt8;
    info->max_storage_buffer_range = l->maxStorageBufferRange;
    info->max_memory_allocation_size = maint3.maxMemoryAllocationSize;
    info->min_storage_buffer_offset_alignment = (uint32_t)l->minStorageBufferOffsetAlignment;
    uint32_t ts_bits = 0;
    compute_family(pd, &ts_bits);
    info->timestamps = ts_bits > 0 && l->timestampPeriod > 0;
    info->timestamp_period_ns = l->timestampPeriod;

    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    info->heap_count = mp.memoryHeapCount < VKF_MAX_HEAPS ? mp.memoryHeapCount : VKF_MAX_HEAPS;
    for (uint32_t h = 0; h < info->heap_count; h++) {
        info->heaps[h].size = mp.memoryHeaps[h].size;
        info->heaps[h].device_local = mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
    }
    uint32_t dev_type, staging_type;
    choose_memory_types(&mp, true, &dev_type, &staging_type, &info->unified_memory);
}

static vkf_status physical_devices(VkInstance instance, VkPhysicalDevice **out_list, uint32_t *out_count)
{
    *out_list = NULL;
    *out_count = 0;
    uint32_t count = 0;
    VkResult r = vkEnumeratePhysicalDevices(instance, &count, NULL);
    if (r != VK_SUCCESS) return vkf_fail_vk(r, "vkEnumeratePhysicalDevices");
    if (count == 0) return VKF_OK;
    VkPhysicalDevice *list = calloc(count, sizeof *list);
    if (!list) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory listing devices");
    r = vkEnumeratePhysicalDevices(instance, &count, list);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(list);
        return vkf_fail_vk(r, "vkEnumeratePhysicalDevices");
    }
    *out_list = list;
    *out_count = count;
    return VKF_OK;
}

vkf_status vkf_devices_list(vkf_device_info *out_infos, uint32_t capacity, uint32_t *out_count)
{
    if (!out_count) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_devices_list: out_count is NULL");
    *out_count = 0;
    if (capacity > 0 && !out_infos)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_devices_list: out_infos is NULL with capacity %u", capacity);
    VKF_TRY(loader_open());
    VkInstance instance;
    VKF_TRY(instance_create(NULL, /*validation=*/false, &instance));
    VkPhysicalDevice *list;
    uint32_t count;
    vkf_status st = physical_devices(instance, &list, &count);
    if (st == VKF_OK) {
        for (uint32_t i = 0; i < count && i < capacity; i++) fill_info(instance, list[i], i, &out_infos[i]);
        *out_count = count;
    }
    free(list);
    vkDestroyInstance(instance, NULL);
    return st;
}

/* Rank for the default choice: discrete, integrated, virtual, CPU, other. */
static int type_rank(vkf_device_type t)
{
    switch (t) {
    case VKF_DEVICE_DISCRETE_GPU: return 0;
    case VKF_DEVICE_INTEGRATED_GPU: return 1;
    case VKF_DEVICE_VIRTUAL_GPU: return 2;
    case VKF_DEVICE_CPU: return 3;
    default: return 4;
    }
}

static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return true;
    }
    return n == 0;
}

static vkf_status choose_device(VkInstance instance, const char *request, VkPhysicalDevice *out_pd,
                                vkf_device_info *out_info)
{
    VkPhysicalDevice *list;
    uint32_t count;
    VKF_TRY(physical_devices(instance, &list, &count));
    if (count == 0) {
        free(list);
        return vkf_fail(VKF_ERROR_NO_DEVICE, "no Vulkan device found (is a driver installed? "
                                             "VK_ICD_FILENAMES may point to a missing file)");
    }
    vkf_device_info *infos = calloc(count, sizeof *infos);
    if (!infos) {
        free(list);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory listing devices");
    }
    for (uint32_t i = 0; i < count; i++) fill_info(instance, list[i], i, &infos[i]);

    int chosen = -1;
    vkf_status st = VKF_OK;
    if (request && *request) {
        char *end;
        unsigned long idx = strtoul(request, &end, 10);
        bool numeric = *end == '\0' && isdigit((unsigned char)request[0]);
        if (numeric) {
            if (idx < count) chosen = (int)idx;
            else st = vkf_fail(VKF_ERROR_NO_DEVICE, "device index %lu requested but there are %u devices", idx, count);
        } else {
            for (uint32_t i = 0; i < count && chosen < 0; i++)
                if (contains_nocase(infos[i].name, request)) chosen = (int)i;
            if (chosen < 0) {
                char names[512] = "";
                for (uint32_t i = 0; i < count; i++) {
                    size_t len = strlen(names);
                    snprintf(names + len, sizeof names - len, "%s%u: %s", i ? ", " : "", i, infos[i].name);
                }
                st = vkf_fail(VKF_ERROR_NO_DEVICE, "no device name contains \"%s\" (devices: %s)", request, names);
            }
        }
    } else {
        for (uint32_t i = 0; i < count; i++)
            if (chosen < 0 || type_rank(infos[i].type) < type_rank(infos[chosen].type)) chosen = (int)i;
    }
    if (st == VKF_OK) {
        *out_pd = list[chosen];
        *out_info = infos[chosen];
    }
    free(infos);
    free(list);
    return st;
}

void vkf_log(const vkf_context *ctx, vkf_log_level level, const char *fmt, ...)
{
    if (!ctx || !ctx->log) return;
    char msg[4096];
    va_list args;
    va_start(args, fmt);
    vsnprintf(msg, sizeof msg, fmt, args);
    va_end(args);
    ctx->log(ctx->log_user, level, msg);
}

void vkf_test_inject_fault(vkf_context *ctx, const char *call, VkResult result)
{
    ctx->inject_call = call;
    ctx->inject_result = result;
}

VkResult vkf_injected(vkf_context *ctx, const char *call)
{
    if (!ctx->inject_call || strcmp(ctx->inject_call, call) != 0) return VK_SUCCESS;
    ctx->inject_call = NULL;
    return ctx->inject_result;
}

vkf_status vkf_context_vk_fail(vkf_context *ctx, VkResult result, const char *call)
{
    if (result == VK_ERROR_DEVICE_LOST && ctx) ctx->lost = true;
    return vkf_fail_vk(result, call);
}

bool vkf_coopmat_choose_shape(const vkf_device_info *info, vkf_coopmat_shape *out)
{
    bool found = false;
    for (uint32_t i = 0; i < info->coopmat_shape_count; i++) {
        const vkf_coopmat_shape *s = &info->coopmat_shapes[i];
        if (s->a != VKF_COMPONENT_F16 || s->b != VKF_COMPONENT_F16 || s->c != VKF_COMPONENT_F32 ||
            s->result != VKF_COMPONENT_F32 || s->saturating || !s->subgroup_scope)
            continue;
        bool square16 = s->m == 16 && s->n == 16 && s->k == 16;
        if (!found || square16 || (uint64_t)s->m * s->n * s->k > (uint64_t)out->m * out->n * out->k) {
            if (found && out->m == 16 && out->n == 16 && out->k == 16) continue;
            *out = *s;
            found = true;
        }
    }
    return found;
}

/* PCI vendor ids whose coopmat drivers vkformer turns on by default: NVIDIA, AMD,
 * Intel and Mesa's software driver (lavapipe). Others need the option set to 1. */
static bool coopmat_vetted(uint32_t vendor_id)
{
    return vendor_id == 0x10de || vendor_id == 0x1002 || vendor_id == 0x8086 || vendor_id == 0x10005;
}

/* Decides ctx->coopmat / coopmat2 from the request, the build and the device. */
static void coopmat_decide(vkf_context *ctx)
{
    const vkf_device_info *d = &ctx->info;
    ctx->coopmat = ctx->coopmat2 = ctx->coopmat2_wg = false;
    if (ctx->coopmat_request == 0) return; /* context.c sets 0 where the build has no coopmat kernels */
    if (ctx->coopmat_request == -1 && !coopmat_vetted(d->vendor_id)) return;
    if (d->api_version < VK_API_VERSION_1_2 || !d->vulkan_memory_model || !d->float16 || !d->storage_16bit) return;
    if (!vkf_coopmat_choose_shape(d, &ctx->coopmat_shape)) return;
    ctx->coopmat = true;
    ctx->coopmat2 = d->cooperative_matrix2 && d->api_version >= VK_API_VERSION_1_3;
    /* matmul_coopmat2_wg: workgroup scope, tensor addressing and per-element
     * operations, and a workgroup-scope f16 entry (Mesa 26's lavapipe and NVK have
     * none of these: there the subgroup form, matmul_coopmat2, stays). */
    ctx->coopmat2_wg = ctx->coopmat2 && d->coopmat2_workgroup_scope && d->coopmat2_tensor_addressing &&
                       d->coopmat2_per_element && d->coopmat2_wg_invocations;
}

/* The device-level entry points vkformer calls, and only those, through
 * vkGetDeviceProcAddr. volk's volkLoadDeviceTable (Debian 12's volk, 1.3.239) also
 * asks for vkGetPhysicalDeviceVideoEncodeQualityLevelPropertiesKHR, an instance-level
 * function, and newer validation layers warn about that on every device (seen on an
 * NVIDIA H100 with layer 1.4.363). A function added to the code is added here: a
 * NULL entry would crash, so load_device_table fails on one the driver lacks. */
#define VKF_DEVICE_FUNCTIONS(X) \
    X(vkAllocateCommandBuffers) \
    X(vkAllocateDescriptorSets) \
    X(vkAllocateMemory) \
    X(vkBeginCommandBuffer) \
    X(vkBindBufferMemory) \
    X(vkCmdBindDescriptorSets) \
    X(vkCmdBindPipeline) \
    X(vkCmdCopyBuffer) \
    X(vkCmdDispatch) \
    X(vkCmdPipelineBarrier) \
    X(vkCmdPushConstants) \
    X(vkCmdResetQueryPool) \
    X(vkCmdWriteTimestamp) \
    X(vkCreateBuffer) \
    X(vkCreateCommandPool) \
    X(vkCreateComputePipelines) \
    X(vkCreateDescriptorPool) \
    X(vkCreateDescriptorSetLayout) \
    X(vkCreateFence) \
    X(vkCreatePipelineCache) \
    X(vkCreatePipelineLayout) \
    X(vkCreateQueryPool) \
    X(vkCreateShaderModule) \
    X(vkDestroyBuffer) \
    X(vkDestroyCommandPool) \
    X(vkDestroyDescriptorPool) \
    X(vkDestroyDescriptorSetLayout) \
    X(vkDestroyDevice) \
    X(vkDestroyFence) \
    X(vkDestroyPipeline) \
    X(vkDestroyPipelineCache) \
    X(vkDestroyPipelineLayout) \
    X(vkDestroyQueryPool) \
    X(vkDestroyShaderModule) \
    X(vkDeviceWaitIdle) \
    X(vkEndCommandBuffer) \
    X(vkFreeCommandBuffers) \
    X(vkFreeMemory) \
    X(vkGetBufferMemoryRequirements) \
    X(vkGetDeviceQueue) \
    X(vkGetPipelineCacheData) \
    X(vkGetQueryPoolResults) \
    X(vkMapMemory) \
    X(vkQueueSubmit) \
    X(vkQueueWaitIdle) \
    X(vkResetFences) \
    X(vkUpdateDescriptorSets) \
    X(vkWaitForFences)

static vkf_status load_device_table(vkf_context *ctx)
{
    memset(&ctx->vk, 0, sizeof ctx->vk);
    /* first, so that vkf_device_close can destroy the device whatever fails next */
    ctx->vk.vkDestroyDevice = (PFN_vkDestroyDevice)vkGetDeviceProcAddr(ctx->device, "vkDestroyDevice");
#define VKF_LOAD(fn)                                                                                      \
    ctx->vk.fn = (PFN_##fn)vkGetDeviceProcAddr(ctx->device, #fn);                                         \
    if (!ctx->vk.fn) return vkf_fail(VKF_ERROR_VULKAN, "vkGetDeviceProcAddr found no %s on \"%s\"", #fn, ctx->info.name);
    VKF_DEVICE_FUNCTIONS(VKF_LOAD)
#undef VKF_LOAD
    return VKF_OK;
}

/* Whether the physical device offers VK_KHR_pipeline_executable_properties with its
 * pipelineExecutableInfo feature (shader statistics, shader_stats.c). */
static bool has_executable_properties(VkPhysicalDevice physical)
{
    uint32_t count = 0;
    if (vkEnumerateDeviceExtensionProperties(physical, NULL, &count, NULL) != VK_SUCCESS || count == 0) return false;
    VkExtensionProperties *exts = calloc(count, sizeof *exts);
    if (!exts) return false;
    bool found = false;
    if (vkEnumerateDeviceExtensionProperties(physical, NULL, &count, exts) == VK_SUCCESS)
        for (uint32_t i = 0; i < count && !found; i++)
            found = strcmp(exts[i].extensionName, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME) == 0;
    free(exts);
    if (!found) return false;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR exec = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
    };
    VkPhysicalDeviceFeatures2 feats = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &exec};
    vkGetPhysicalDeviceFeatures2(physical, &feats);
    return exec.pipelineExecutableInfo == VK_TRUE;
}

static vkf_status device_create(vkf_context *ctx)
{
    uint32_t ts_bits;
    ctx->queue_family = compute_family(ctx->physical, &ts_bits);
    if (ctx->queue_family == UINT32_MAX)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "device \"%s\" has no compute queue", ctx->info.name);
    if (ctx->info.api_version < VK_API_VERSION_1_1)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "device \"%s\" supports only Vulkan 1.0; vkformer needs 1.1",
                        ctx->info.name);
    float priority = 1.0f;
    VkDeviceQueueCreateInfo queue = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = ctx->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &priority,
    };
    /* 16-bit storage lets weights stay F16 in memory (read as fp32). */
    VkPhysicalDevice16BitStorageFeatures s16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .storageBuffer16BitAccess = ctx->info.storage_16bit,
    };
    ctx->storage_16bit = ctx->info.storage_16bit;
    /* Cooperative matrix: the extension(s), f16 arithmetic and the Vulkan memory
     * model (glslang declares it in every coopmat shader). */
    coopmat_decide(ctx);
    VkPhysicalDeviceShaderFloat16Int8Features f16i8 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
        .shaderFloat16 = VK_TRUE,
    };
    VkPhysicalDeviceVulkanMemoryModelFeatures memory_model = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES,
        .vulkanMemoryModel = VK_TRUE,
        .vulkanMemoryModelDeviceScope = VK_TRUE,
    };
    vkf_vk_coopmat_features coopmat = {
        .sType = (VkStructureType)VKF_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
        .cooperativeMatrix = VK_TRUE,
    };
    vkf_vk_coopmat2_features coopmat2 = {
        .sType = (VkStructureType)VKF_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV,
        .cooperativeMatrixFlexibleDimensions = VK_TRUE,
    };
    /* NV2 shaders are SPIR-V 1.6, where local_size_x_id becomes LocalSizeId. */
    VkPhysicalDeviceMaintenance4Features maintenance4 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES,
        .maintenance4 = VK_TRUE,
    };
    const char *extensions[3];
    uint32_t extension_count = 0;
    if (ctx->coopmat) {
        s16.pNext = &f16i8;
        f16i8.pNext = &memory_model;
        memory_model.pNext = &coopmat;
        extensions[extension_count++] = VKF_VK_KHR_COOPERATIVE_MATRIX;
        if (ctx->coopmat2) {
            if (ctx->coopmat2_wg) {
                coopmat2.cooperativeMatrixWorkgroupScope = VK_TRUE;
                coopmat2.cooperativeMatrixTensorAddressing = VK_TRUE;
                coopmat2.cooperativeMatrixPerElementOperations = VK_TRUE;
            }
            coopmat.pNext = &coopmat2;
            coopmat2.pNext = &maintenance4;
            extensions[extension_count++] = VKF_VK_NV_COOPERATIVE_MATRIX_2;
        }
    }
    ctx->info.coopmat_in_use = ctx->coopmat;
    ctx->info.coopmat2_in_use = ctx->coopmat2;
    ctx->info.coopmat2_wg_in_use = ctx->coopmat2_wg;
    /* Shader statistics (shader_stats.c): the extension and its feature, at the end of
     * the chain, when the context asked for them and the device has them. */
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR executable_info = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pipelineExecutableInfo = VK_TRUE,
    };
    ctx->capture_statistics = ctx->statistics_requested && has_executable_properties(ctx->physical);
    if (ctx->capture_statistics) {
        VkBaseOutStructure *last = (VkBaseOutStructure *)&s16;
        while (last->pNext) last = last->pNext;
        last->pNext = (VkBaseOutStructure *)&executable_info;
        extensions[extension_count++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    }
    VkDeviceCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &s16,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &queue,
        .enabledExtensionCount = extension_count,
        .ppEnabledExtensionNames = extensions,
    };
    VkResult r = vkCreateDevice(ctx->physical, &info, NULL, &ctx->device);
    if (r != VK_SUCCESS) return vkf_fail_vk(r, "vkCreateDevice");
    vkf_status loaded = load_device_table(ctx);
    if (loaded != VKF_OK) return loaded;
    ctx->vk.vkGetDeviceQueue(ctx->device, ctx->queue_family, 0, &ctx->queue);

    VkCommandPoolCreateInfo pool = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = ctx->queue_family,
    };
    VKF_VK_TRY(ctx->vk.vkCreateCommandPool(ctx->device, &pool, NULL, &ctx->command_pool));
    VkFenceCreateInfo fence = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VKF_VK_TRY(ctx->vk.vkCreateFence(ctx->device, &fence, NULL, &ctx->transfer_fence));
    return VKF_OK;
}

vkf_status vkf_device_open(vkf_context *ctx, const vkf_context_options *options)
{
    vkf_status st = loader_open();
    if (st == VKF_OK) st = instance_create(ctx, ctx->validation, &ctx->instance);
    if (st == VKF_OK && ctx->validation) {
        VkDebugUtilsMessengerCreateInfoEXT mi;
        fill_messenger_info(&mi, ctx);
        PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(ctx->instance, "vkCreateDebugUtilsMessengerEXT");
        ctx->destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
            ctx->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (!create_messenger || !ctx->destroy_messenger) {
            st = vkf_fail(VKF_ERROR_UNSUPPORTED, "the Vulkan loader offers no VK_EXT_debug_utils");
        } else {
            VkResult r = create_messenger(ctx->instance, &mi, NULL, &ctx->messenger);
            if (r != VK_SUCCESS) st = vkf_fail_vk(r, "vkCreateDebugUtilsMessengerEXT");
        }
    }
    const char *request = options->device;
    if (!request || !*request) request = getenv("VKFORMER_DEVICE");
    if (st == VKF_OK) st = choose_device(ctx->instance, request, &ctx->physical, &ctx->info);
    if (st == VKF_OK) {
        /* VKFORMER_MAX_BINDING=BYTES lowers the binding limit the library plans with
         * (never raises it): tests split tensors on any driver with small models. */
        const char *env = getenv("VKFORMER_MAX_BINDING");
        if (env) {
            char *end = NULL;
            unsigned long long v = strtoull(env, &end, 10);
            if (!*env || *end || v < 1024 || v > UINT32_MAX)
                st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "VKFORMER_MAX_BINDING=\"%s\" is not a byte count in "
                              "1024..4294967295", env);
            else if (v < ctx->info.max_storage_buffer_range)
                ctx->info.max_storage_buffer_range = v;
        }
    }
    if (st == VKF_OK) {
        vkGetPhysicalDeviceMemoryProperties(ctx->physical, &ctx->memory_properties);
        choose_memory_types(&ctx->memory_properties, options->allow_host_visible,
                            &ctx->device_memory_type, &ctx->staging_memory_type, &ctx->direct_host_access);
        ctx->info.unified_memory = ctx->direct_host_access;
        if (ctx->device_memory_type == UINT32_MAX || ctx->staging_memory_type == UINT32_MAX)
            st = vkf_fail(VKF_ERROR_UNSUPPORTED, "device \"%s\" offers no usable memory type", ctx->info.name);
    }
    if (st == VKF_OK) {
        uint64_t block = options->block_size ? options->block_size : 64ull << 20;
        if (block > ctx->info.max_memory_allocation_size && ctx->info.max_memory_allocation_size)
            block = ctx->info.max_memory_allocation_size;
        ctx->block_size = block;
        uint64_t align = ctx->info.min_storage_buffer_offset_alignment;
        ctx->alignment = align > 16 ? align : 16;
        st = device_create(ctx);
    }
    return st;
}

void vkf_device_close(vkf_context *ctx)
{
    if (ctx->device) {
        if (ctx->small_staging) ctx->vk.vkDestroyBuffer(ctx->device, ctx->small_staging, NULL);
        if (ctx->small_staging_memory) ctx->vk.vkFreeMemory(ctx->device, ctx->small_staging_memory, NULL);
        ctx->small_staging = VK_NULL_HANDLE, ctx->small_staging_memory = VK_NULL_HANDLE, ctx->small_staging_mapped = NULL;
        if (ctx->transfer_fence) ctx->vk.vkDestroyFence(ctx->device, ctx->transfer_fence, NULL);
        if (ctx->command_pool) ctx->vk.vkDestroyCommandPool(ctx->device, ctx->command_pool, NULL);
        if (ctx->vk.vkDestroyDevice) ctx->vk.vkDestroyDevice(ctx->device, NULL);
        ctx->device = VK_NULL_HANDLE;
    }
    if (ctx->messenger) ctx->destroy_messenger(ctx->instance, ctx->messenger, NULL);
    if (ctx->instance) vkDestroyInstance(ctx->instance, NULL);
    ctx->messenger = VK_NULL_HANDLE, ctx->instance = VK_NULL_HANDLE;
}

vkf_status vkf_oneshot_begin(vkf_context *ctx, VkCommandBuffer *out_cb)
{
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = ctx->command_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkResult r = ctx->vk.vkAllocateCommandBuffers(ctx->device, &ai, out_cb);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    r = ctx->vk.vkBeginCommandBuffer(*out_cb, &bi);
    if (r != VK_SUCCESS) {
        ctx->vk.vkFreeCommandBuffers(ctx->device, ctx->command_pool, 1, out_cb);
        return vkf_context_vk_fail(ctx, r, "vkBeginCommandBuffer");
    }
    return VKF_OK;
}

vkf_status vkf_oneshot_end(vkf_context *ctx, VkCommandBuffer cb)
{
    VkResult r = ctx->vk.vkEndCommandBuffer(cb);
    const char *call = "vkEndCommandBuffer";
    if (r == VK_SUCCESS) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
        call = "vkQueueSubmit";
        r = vkf_injected(ctx, "vkQueueSubmit");
        if (r == VK_SUCCESS) r = ctx->vk.vkQueueSubmit(ctx->queue, 1, &si, ctx->transfer_fence);
        if (r == VK_SUCCESS) {
            call = "vkWaitForFences";
            r = ctx->vk.vkWaitForFences(ctx->device, 1, &ctx->transfer_fence, VK_TRUE, UINT64_MAX);
            if (r == VK_SUCCESS) r = vkf_injected(ctx, "vkWaitForFences");
            if (r != VK_SUCCESS && r != VK_ERROR_DEVICE_LOST) ctx->vk.vkQueueWaitIdle(ctx->queue);
            if (r != VK_ERROR_DEVICE_LOST) {
                /* The fence must be unsignalled for the next transfer. */
                VkResult reset = ctx->vk.vkResetFences(ctx->device, 1, &ctx->transfer_fence);
                if (r == VK_SUCCESS && reset != VK_SUCCESS) r = reset, call = "vkResetFences";
            }
        }
    }
    ctx->vk.vkFreeCommandBuffers(ctx->device, ctx->command_pool, 1, &cb);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, call);
    return VKF_OK;
}

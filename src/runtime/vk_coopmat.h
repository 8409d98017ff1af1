/* The parts of VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 that
 * vkformer uses, written out from the Vulkan registry because Debian 12's Vulkan
 * headers (1.3.239) predate both. Own names (vkf_vk_*), so newer headers that
 * define the real ones do not clash; layouts and values are the registry's. */
#ifndef VKF_VK_COOPMAT_H
#define VKF_VK_COOPMAT_H

#define VK_NO_PROTOTYPES
#include <volk.h>

#define VKF_VK_KHR_COOPERATIVE_MATRIX "VK_KHR_cooperative_matrix"
#define VKF_VK_NV_COOPERATIVE_MATRIX_2 "VK_NV_cooperative_matrix2"

enum {
    VKF_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR = 1000506000,
    VKF_VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR = 1000506001,
    VKF_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV = 1000593000,
    VKF_VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV = 1000593001,
    VKF_VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV = 1000593002,
};

/* VkScopeKHR */
enum { VKF_VK_SCOPE_DEVICE = 1, VKF_VK_SCOPE_WORKGROUP = 2, VKF_VK_SCOPE_SUBGROUP = 3, VKF_VK_SCOPE_QUEUE_FAMILY = 5 };

/* VkCooperativeMatrixPropertiesKHR; component types are VkComponentTypeKHR values. */
typedef struct vkf_vk_coopmat_properties {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    uint32_t AType, BType, CType, ResultType;
    VkBool32 saturatingAccumulation;
    uint32_t scope;
} vkf_vk_coopmat_properties;

/* VkPhysicalDeviceCooperativeMatrixFeaturesKHR */
typedef struct vkf_vk_coopmat_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix;
    VkBool32 cooperativeMatrixRobustBufferAccess;
} vkf_vk_coopmat_features;

/* VkPhysicalDeviceCooperativeMatrix2FeaturesNV */
typedef struct vkf_vk_coopmat2_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrixWorkgroupScope;
    VkBool32 cooperativeMatrixFlexibleDimensions;
    VkBool32 cooperativeMatrixReductions;
    VkBool32 cooperativeMatrixConversions;
    VkBool32 cooperativeMatrixPerElementOperations;
    VkBool32 cooperativeMatrixTensorAddressing;
    VkBool32 cooperativeMatrixBlockLoads;
} vkf_vk_coopmat2_features;

/* VkPhysicalDeviceCooperativeMatrix2PropertiesNV */
typedef struct vkf_vk_coopmat2_properties {
    VkStructureType sType;
    void *pNext;
    uint32_t cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
    uint32_t cooperativeMatrixFlexibleDimensionsMaxDimension;
    uint32_t cooperativeMatrixWorkgroupScopeReservedSharedMemory;
} vkf_vk_coopmat2_properties;

/* VkCooperativeMatrixFlexibleDimensionsPropertiesNV */
typedef struct vkf_vk_coopmat_flexible_properties {
    VkStructureType sType;
    void *pNext;
    uint32_t MGranularity, NGranularity, KGranularity;
    uint32_t AType, BType, CType, ResultType;
    VkBool32 saturatingAccumulation;
    uint32_t scope;
    uint32_t workgroupInvocations;
} vkf_vk_coopmat_flexible_properties;

typedef VkResult(VKAPI_PTR *vkf_PFN_get_coopmat_properties)(VkPhysicalDevice, uint32_t *, vkf_vk_coopmat_properties *);
typedef VkResult(VKAPI_PTR *vkf_PFN_get_coopmat_flexible_properties)(VkPhysicalDevice, uint32_t *,
                                                                      vkf_vk_coopmat_flexible_properties *);

#endif /* VKF_VK_COOPMAT_H */

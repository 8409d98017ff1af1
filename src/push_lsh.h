/* Push-constant structs of the LSH attention shaders (attention_lsh_*.comp). */
#ifndef VKF_PUSH_LSH_H
#define VKF_PUSH_LSH_H
#include <stdint.h>
typedef struct vkf_push_lsh_hash { uint32_t n; } vkf_push_lsh_hash;
typedef struct vkf_push_lsh_sort { uint32_t n; } vkf_push_lsh_sort;
typedef struct vkf_push_lsh_attend { uint32_t n; } vkf_push_lsh_attend;
typedef struct vkf_push_lsh_combine { uint32_t n; } vkf_push_lsh_combine;
#endif

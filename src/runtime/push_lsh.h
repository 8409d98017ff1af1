/* Push-constant structs of the LSH attention shaders (attention_lsh_*.comp),
 * mirrored from the GLSL blocks named in each comment. The static asserts keep
 * both sides the same size. Index layouts are those of attention_lsh.c: per
 * (b, h, r) slab s = (b * heads + h) * rounds + r, buckets and sorted are
 * (s, n), round outputs (s, n, head_dim) followed by their lse (s, n). */
#ifndef VKF_PUSH_LSH_H
#define VKF_PUSH_LSH_H

#include <stdint.h>

/* shaders/attention_lsh_hash.comp */
typedef struct vkf_push_lsh_hash {
    uint32_t heads, head_dim, n, rounds;
    uint32_t half_buckets;              /* nb / 2 columns of the rotation used (0 when nb == 1) */
    uint32_t rot_cols;                  /* columns of the rotations (the tensor pads them to blocks of 8) */
    uint32_t buckets;                   /* nb; padding tokens get bucket nb */
    uint32_t q_offset, q_row, q_batch;
    uint32_t flags;                     /* VKF_LSH_FLAG_LENGTHS */
    uint32_t total;                     /* batch * heads * rounds * n invocations */
} vkf_push_lsh_hash;
_Static_assert(sizeof(vkf_push_lsh_hash) == 12 * 4, "mirror of attention_lsh_hash.comp");

/* shaders/attention_lsh_sort.comp */
typedef struct vkf_push_lsh_sort {
    uint32_t n;
    uint32_t buckets;                   /* nb: keys are 0..nb */
    uint32_t slabs;                     /* batch * heads * rounds workgroups */
} vkf_push_lsh_sort;
_Static_assert(sizeof(vkf_push_lsh_sort) == 3 * 4, "mirror of attention_lsh_sort.comp");

/* shaders/attention_lsh_attend.comp */
typedef struct vkf_push_lsh_attend {
    uint32_t heads, head_dim, n, rounds;
    uint32_t chunk;                     /* min(C, n) */
    uint32_t chunks;                    /* ceil(n / chunk) */
    uint32_t q_blocks;                  /* workgroups per chunk: ceil(chunk / WG) */
    float scale;                        /* softmax scale × log2(e) */
    uint32_t q_offset, q_row, q_batch;
    uint32_t v_offset, v_row, v_batch;
    uint32_t flags;                     /* VKF_LSH_FLAG_* */
    uint32_t lse_offset;                /* element where the lse part of the round buffer starts */
    uint32_t groups;                    /* workgroups that do work (the grid may pad past it) */
} vkf_push_lsh_attend;
_Static_assert(sizeof(vkf_push_lsh_attend) == 17 * 4, "mirror of attention_lsh_attend.comp");

/* shaders/attention_lsh_combine.comp */
typedef struct vkf_push_lsh_combine {
    uint32_t heads, head_dim, n, rounds;
    uint32_t lse_offset;
    uint32_t total;                     /* batch * n * heads invocations, one per (row, head) */
} vkf_push_lsh_combine;
_Static_assert(sizeof(vkf_push_lsh_combine) == 6 * 4, "mirror of attention_lsh_combine.comp");

enum {
    VKF_LSH_FLAG_LENGTHS = 1u,
    VKF_LSH_FLAG_CAUSAL = 2u,
};

#endif /* VKF_PUSH_LSH_H */

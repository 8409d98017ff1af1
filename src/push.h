/* Push-constant structs, one per shader family, mirrored from the GLSL blocks
 * named in each comment. The static asserts keep both sides the same size. */
#ifndef VKF_PUSH_H
#define VKF_PUSH_H

#include <stdint.h>

/* A matrix view in elements: offset, row stride, two batch strides. */
typedef struct vkf_push_view {
    uint32_t offset, row, batch0, batch1;
} vkf_push_view;

/* shaders/matmul_push.glsl */
typedef struct vkf_push_matmul {
    uint32_t m, n, k;
    uint32_t flags;                     /* VKF_MATMUL_FLAG_* | activation << 4 */
    uint32_t batch_inner;
    float alpha;
    vkf_push_view a, b, c, r;           /* a_offset, a_row, ... in the GLSL block */
} vkf_push_matmul;
_Static_assert(sizeof(vkf_push_matmul) == 22 * 4, "mirror of matmul_push.glsl");

enum {
    VKF_MATMUL_FLAG_BIAS = 1u,
    VKF_MATMUL_FLAG_RESIDUAL = 2u,
    VKF_MATMUL_FLAG_B_KN = 4u,
    VKF_MATMUL_FLAG_VEC4 = 8u,
};

/* shaders/softmax.comp */
typedef struct vkf_push_softmax {
    uint32_t rows, cols;
    uint32_t has_mask;
    float scale;
    uint32_t mask_rows, mask_row_div;
    uint32_t causal_period, causal_offset;
} vkf_push_softmax;
_Static_assert(sizeof(vkf_push_softmax) == 8 * 4, "mirror of softmax.comp");

/* shaders/layernorm.comp */
typedef struct vkf_push_layernorm {
    uint32_t rows, cols;
    uint32_t flags;                     /* bit 0 residual, bit 1 write the sum */
    float eps;
} vkf_push_layernorm;
_Static_assert(sizeof(vkf_push_layernorm) == 4 * 4, "mirror of layernorm.comp");

/* shaders/embed.comp */
typedef struct vkf_push_embed {
    uint32_t tokens, d, vocab;
    uint32_t positions;                 /* rows of the PE table; 0 = no positional term */
    float scale;
    uint32_t seq_len, pos_offset;
} vkf_push_embed;
_Static_assert(sizeof(vkf_push_embed) == 7 * 4, "mirror of embed.comp");

#endif /* VKF_PUSH_H */

/* Shader variants and pipelines. The table below is the one list of every SPIR-V
 * variant built into the library (compiled by glslc at build time and embedded);
 * pipelines are made on first use for each set of specialization constants and
 * kept in the context. */
#include "runtime/runtime.h"
#include "runtime/push.h"
#include "runtime/push_lsh.h"

#include <stdlib.h>
#include <string.h>

static const uint32_t spirv_matmul_tiled[] =
#include "matmul_tiled.spv.h"
    ;
static const uint32_t spirv_matmul_tiled_f16b[] =
#include "matmul_tiled_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_direct[] =
#include "matmul_direct.spv.h"
    ;
static const uint32_t spirv_matmul_direct_f16b[] =
#include "matmul_direct_f16b.spv.h"
    ;
static const uint32_t spirv_softmax[] =
#include "softmax.spv.h"
    ;
static const uint32_t spirv_layernorm[] =
#include "layernorm.spv.h"
    ;
static const uint32_t spirv_embed[] =
#include "embed.spv.h"
    ;
static const uint32_t spirv_embed_f16[] =
#include "embed_f16.spv.h"
    ;
static const uint32_t spirv_attention_decode[] =
#include "attention_decode.spv.h"
    ;
static const uint32_t spirv_kv_append[] =
#include "kv_append.spv.h"
    ;
static const uint32_t spirv_argmax[] =
#include "argmax.spv.h"
    ;
static const uint32_t spirv_advance[] =
#include "advance.spv.h"
    ;
static const uint32_t spirv_attention_fused[] =
#include "attention_fused.spv.h"
    ;
static const uint32_t spirv_attention_fused_f16[] =
#include "attention_fused_f16.spv.h"
    ;
static const uint32_t spirv_matmul_tiled_act16[] =
#include "matmul_tiled_act16.spv.h"
    ;
static const uint32_t spirv_matmul_tiled_act16_f16b[] =
#include "matmul_tiled_act16_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_direct_act16[] =
#include "matmul_direct_act16.spv.h"
    ;
static const uint32_t spirv_matmul_direct_act16_f16b[] =
#include "matmul_direct_act16_f16b.spv.h"
    ;
static const uint32_t spirv_layernorm_act16[] =
#include "layernorm_act16.spv.h"
    ;
static const uint32_t spirv_embed_act16[] =
#include "embed_act16.spv.h"
    ;
static const uint32_t spirv_embed_f16_act16[] =
#include "embed_f16_act16.spv.h"
    ;
static const uint32_t spirv_embed_i8[] =
#include "embed_i8.spv.h"
    ;
static const uint32_t spirv_embed_i8_act16[] =
#include "embed_i8_act16.spv.h"
    ;
static const uint32_t spirv_attention_decode_act16[] =
#include "attention_decode_act16.spv.h"
    ;
static const uint32_t spirv_attention_decode_reduce[] =
#include "attention_decode_reduce.spv.h"
    ;
static const uint32_t spirv_attention_decode_reduce_act16[] =
#include "attention_decode_reduce_act16.spv.h"
    ;
static const uint32_t spirv_kv_append_act16[] =
#include "kv_append_act16.spv.h"
    ;
static const uint32_t spirv_argmax_act16[] =
#include "argmax_act16.spv.h"
    ;
static const uint32_t spirv_kv_gather[] =
#include "kv_gather.spv.h"
    ;
static const uint32_t spirv_beam_partial[] =
#include "beam_partial.spv.h"
    ;
static const uint32_t spirv_beam_partial_act16[] =
#include "beam_partial_act16.spv.h"
    ;
static const uint32_t spirv_beam_topk[] =
#include "beam_topk.spv.h"
    ;
static const uint32_t spirv_sample[] =
#include "sample.spv.h"
    ;
static const uint32_t spirv_sample_act16[] =
#include "sample_act16.spv.h"
    ;
static const uint32_t spirv_logits_process[] =
#include "logits_process.spv.h"
    ;
static const uint32_t spirv_logits_process_act16[] =
#include "logits_process_act16.spv.h"
    ;
static const uint32_t spirv_logprob_gather[] =
#include "logprob_gather.spv.h"
    ;
static const uint32_t spirv_logprob_gather_act16[] =
#include "logprob_gather_act16.spv.h"
    ;
static const uint32_t spirv_lsh_hash[] =
#include "attention_lsh_hash.spv.h"
    ;
static const uint32_t spirv_lsh_sort[] =
#include "attention_lsh_sort.spv.h"
    ;
static const uint32_t spirv_lsh_attend[] =
#include "attention_lsh_attend.spv.h"
    ;
static const uint32_t spirv_lsh_combine[] =
#include "attention_lsh_combine.spv.h"
    ;
static const uint32_t spirv_glu[] =
#include "glu.spv.h"
    ;
static const uint32_t spirv_glu_act16[] =
#include "glu_act16.spv.h"
    ;
static const uint32_t spirv_block_sum[] =
#include "block_sum.spv.h"
    ;
static const uint32_t spirv_attention_split_reduce[] =
#include "attention_split_reduce.spv.h"
    ;
static const uint32_t spirv_attention_split_reduce_f16[] =
#include "attention_split_reduce_f16.spv.h"
    ;
static const uint32_t spirv_attention_fused_splitk[] =
#include "attention_fused_splitk.spv.h"
    ;
static const uint32_t spirv_attention_fused_splitk_f16[] =
#include "attention_fused_splitk_f16.spv.h"
    ;
static const uint32_t spirv_attention_fused_lanes_splitk[] =
#include "attention_fused_lanes_splitk.spv.h"
    ;
static const uint32_t spirv_attention_fused_lanes_splitk_f16[] =
#include "attention_fused_lanes_splitk_f16.spv.h"
    ;
static const uint32_t spirv_block_sum_act16[] =
#include "block_sum_act16.spv.h"
    ;
static const uint32_t spirv_matmul_gemv[] =
#include "matmul_gemv.spv.h"
    ;
static const uint32_t spirv_matmul_gemv_f16b[] =
#include "matmul_gemv_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_gemv_act16[] =
#include "matmul_gemv_act16.spv.h"
    ;
static const uint32_t spirv_matmul_gemv_act16_f16b[] =
#include "matmul_gemv_act16_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_gemv_i8b[] =
#include "matmul_gemv_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_gemv_act16_i8b[] =
#include "matmul_gemv_act16_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_splitk[] =
#include "matmul_splitk.spv.h"
    ;
static const uint32_t spirv_matmul_splitk_act16[] =
#include "matmul_splitk_act16.spv.h"
    ;
static const uint32_t spirv_matmul_splitk_i8b[] =
#include "matmul_splitk_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_splitk_act16_i8b[] =
#include "matmul_splitk_act16_i8b.spv.h"
    ;

static const uint32_t spirv_matmul_subgroup[] =
#include "matmul_subgroup.spv.h"
    ;
static const uint32_t spirv_matmul_subgroup_f16b[] =
#include "matmul_subgroup_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_subgroup_act16[] =
#include "matmul_subgroup_act16.spv.h"
    ;
static const uint32_t spirv_matmul_subgroup_act16_f16b[] =
#include "matmul_subgroup_act16_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_tiled_i8b[] =
#include "matmul_tiled_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_tiled_act16_i8b[] =
#include "matmul_tiled_act16_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_direct_i8b[] =
#include "matmul_direct_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_direct_act16_i8b[] =
#include "matmul_direct_act16_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_subgroup_i8b[] =
#include "matmul_subgroup_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_subgroup_act16_i8b[] =
#include "matmul_subgroup_act16_i8b.spv.h"
    ;
static const uint32_t spirv_attention_fused_lanes[] =
#include "attention_fused_lanes.spv.h"
    ;
static const uint32_t spirv_attention_fused_lanes_f16[] =
#include "attention_fused_lanes_f16.spv.h"
    ;
static const uint32_t spirv_matmul_broadcast[] =
#include "matmul_broadcast.spv.h"
    ;
static const uint32_t spirv_matmul_broadcast_f16b[] =
#include "matmul_broadcast_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_broadcast_act16[] =
#include "matmul_broadcast_act16.spv.h"
    ;
static const uint32_t spirv_matmul_broadcast_act16_f16b[] =
#include "matmul_broadcast_act16_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_broadcast_i8b[] =
#include "matmul_broadcast_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_broadcast_act16_i8b[] =
#include "matmul_broadcast_act16_i8b.spv.h"
    ;

/* Cooperative-matrix variants: meson lists them only when its glslc compiles
 * GL_KHR_cooperative_matrix; a variant whose header was not generated has no
 * SPIR-V here (NULL), and asking for its pipeline fails with a message. */
#if defined(VKF_HAVE_COOPMAT) && __has_include("matmul_coopmat.spv.h")
static const uint32_t spirv_matmul_coopmat[] =
#include "matmul_coopmat.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_f16b[] =
#include "matmul_coopmat_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_act16[] =
#include "matmul_coopmat_act16.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_act16_f16b[] =
#include "matmul_coopmat_act16_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_i8b[] =
#include "matmul_coopmat_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_act16_i8b[] =
#include "matmul_coopmat_act16_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_splitk[] =
#include "matmul_coopmat_splitk.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_splitk_f16b[] =
#include "matmul_coopmat_splitk_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_splitk_act16[] =
#include "matmul_coopmat_splitk_act16.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_splitk_act16_f16b[] =
#include "matmul_coopmat_splitk_act16_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_splitk_i8b[] =
#include "matmul_coopmat_splitk_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat_splitk_act16_i8b[] =
#include "matmul_coopmat_splitk_act16_i8b.spv.h"
    ;
#define COOPMAT_SPIRV(name) name, sizeof name
#define HAVE_MATMUL_COOPMAT 1
#else
#define HAVE_MATMUL_COOPMAT 0
#endif
#if defined(VKF_HAVE_COOPMAT) && __has_include("matmul_coopmat2.spv.h")
static const uint32_t spirv_matmul_coopmat2[] =
#include "matmul_coopmat2.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat2_f16b[] =
#include "matmul_coopmat2_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat2_act16[] =
#include "matmul_coopmat2_act16.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat2_act16_f16b[] =
#include "matmul_coopmat2_act16_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat2_i8b[] =
#include "matmul_coopmat2_i8b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat2_act16_i8b[] =
#include "matmul_coopmat2_act16_i8b.spv.h"
    ;
#define MATMUL_COOPMAT2_SPIRV(name) name, sizeof name
#else
#define MATMUL_COOPMAT2_SPIRV(name) NULL, 0
#endif
#if defined(VKF_HAVE_COOPMAT) && __has_include("matmul_coopmat2_wg.spv.h")
static const uint32_t spirv_matmul_coopmat2_wg[] =
#include "matmul_coopmat2_wg.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat2_wg_f16b[] =
#include "matmul_coopmat2_wg_f16b.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat2_wg_act16[] =
#include "matmul_coopmat2_wg_act16.spv.h"
    ;
static const uint32_t spirv_matmul_coopmat2_wg_act16_f16b[] =
#include "matmul_coopmat2_wg_act16_f16b.spv.h"
    ;
#define MATMUL_COOPMAT2_WG_SPIRV(name) name, sizeof name
#else
#define MATMUL_COOPMAT2_WG_SPIRV(name) NULL, 0
#endif
#if defined(VKF_HAVE_COOPMAT) && __has_include("attention_fused_coopmat.spv.h")
static const uint32_t spirv_attention_fused_coopmat[] =
#include "attention_fused_coopmat.spv.h"
    ;
static const uint32_t spirv_attention_fused_coopmat_f16[] =
#include "attention_fused_coopmat_f16.spv.h"
    ;
static const uint32_t spirv_attention_fused_coopmat_splitk[] =
#include "attention_fused_coopmat_splitk.spv.h"
    ;
static const uint32_t spirv_attention_fused_coopmat_splitk_f16[] =
#include "attention_fused_coopmat_splitk_f16.spv.h"
    ;
#define ATTENTION_COOPMAT_SPIRV(name) name, sizeof name
#else
#define ATTENTION_COOPMAT_SPIRV(name) NULL, 0
#endif
#if !HAVE_MATMUL_COOPMAT
#define COOPMAT_SPIRV(name) NULL, 0
#endif

bool vkf_build_has_coopmat(void) { return HAVE_MATMUL_COOPMAT; }

/* One line per variant: name, SPIR-V, storage-buffer bindings, push-constant bytes. */
static const vkf_variant_desc variant_table[VKF_VARIANT_COUNT] = {
    [VKF_VARIANT_MATMUL_TILED] = {"matmul_tiled", spirv_matmul_tiled, sizeof spirv_matmul_tiled, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_DIRECT] = {"matmul_direct", spirv_matmul_direct, sizeof spirv_matmul_direct, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_TILED_F16B] = {"matmul_tiled_f16b", spirv_matmul_tiled_f16b, sizeof spirv_matmul_tiled_f16b, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_DIRECT_F16B] = {"matmul_direct_f16b", spirv_matmul_direct_f16b, sizeof spirv_matmul_direct_f16b, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_SOFTMAX] = {"softmax", spirv_softmax, sizeof spirv_softmax, 4, sizeof(vkf_push_softmax)},
    [VKF_VARIANT_LAYERNORM] = {"layernorm", spirv_layernorm, sizeof spirv_layernorm, 6, sizeof(vkf_push_layernorm)},
    [VKF_VARIANT_EMBED] = {"embed", spirv_embed, sizeof spirv_embed, 7, sizeof(vkf_push_embed)},
    [VKF_VARIANT_EMBED_F16] = {"embed_f16", spirv_embed_f16, sizeof spirv_embed_f16, 7, sizeof(vkf_push_embed)},
    [VKF_VARIANT_ATTENTION_DECODE] = {"attention_decode", spirv_attention_decode, sizeof spirv_attention_decode, 9, sizeof(vkf_push_attention_decode)},
    [VKF_VARIANT_KV_APPEND] = {"kv_append", spirv_kv_append, sizeof spirv_kv_append, 4, sizeof(vkf_push_kv_append)},
    [VKF_VARIANT_ARGMAX] = {"argmax", spirv_argmax, sizeof spirv_argmax, 4, sizeof(vkf_push_argmax)},
    [VKF_VARIANT_ADVANCE] = {"advance", spirv_advance, sizeof spirv_advance, 1, sizeof(vkf_push_advance)},
    [VKF_VARIANT_ATTENTION_FUSED_LANES] = {"attention_fused_lanes", spirv_attention_fused_lanes, sizeof spirv_attention_fused_lanes, 8, sizeof(vkf_push_attention_fused)},
    [VKF_VARIANT_ATTENTION_FUSED_LANES_F16] = {"attention_fused_lanes_f16", spirv_attention_fused_lanes_f16, sizeof spirv_attention_fused_lanes_f16, 8, sizeof(vkf_push_attention_fused)},
    [VKF_VARIANT_ATTENTION_FUSED] = {"attention_fused", spirv_attention_fused, sizeof spirv_attention_fused, 8, sizeof(vkf_push_attention_fused)},
    [VKF_VARIANT_ATTENTION_FUSED_F16] = {"attention_fused_f16", spirv_attention_fused_f16, sizeof spirv_attention_fused_f16, 8, sizeof(vkf_push_attention_fused)},
    [VKF_VARIANT_MATMUL_TILED_ACT16] = {"matmul_tiled_act16", spirv_matmul_tiled_act16, sizeof spirv_matmul_tiled_act16, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_TILED_ACT16_F16B] = {"matmul_tiled_act16_f16b", spirv_matmul_tiled_act16_f16b, sizeof spirv_matmul_tiled_act16_f16b, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_DIRECT_ACT16] = {"matmul_direct_act16", spirv_matmul_direct_act16, sizeof spirv_matmul_direct_act16, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_DIRECT_ACT16_F16B] = {"matmul_direct_act16_f16b", spirv_matmul_direct_act16_f16b, sizeof spirv_matmul_direct_act16_f16b, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_LAYERNORM_ACT16] = {"layernorm_act16", spirv_layernorm_act16, sizeof spirv_layernorm_act16, 6, sizeof(vkf_push_layernorm)},
    [VKF_VARIANT_EMBED_ACT16] = {"embed_act16", spirv_embed_act16, sizeof spirv_embed_act16, 7, sizeof(vkf_push_embed)},
    [VKF_VARIANT_EMBED_F16_ACT16] = {"embed_f16_act16", spirv_embed_f16_act16, sizeof spirv_embed_f16_act16, 7, sizeof(vkf_push_embed)},
    [VKF_VARIANT_ATTENTION_DECODE_ACT16] = {"attention_decode_act16", spirv_attention_decode_act16, sizeof spirv_attention_decode_act16, 9, sizeof(vkf_push_attention_decode)},
    [VKF_VARIANT_ATTENTION_DECODE_REDUCE] = {"attention_decode_reduce", spirv_attention_decode_reduce, sizeof spirv_attention_decode_reduce, 2, sizeof(vkf_push_attention_decode)},
    [VKF_VARIANT_ATTENTION_DECODE_REDUCE_ACT16] = {"attention_decode_reduce_act16", spirv_attention_decode_reduce_act16, sizeof spirv_attention_decode_reduce_act16, 2, sizeof(vkf_push_attention_decode)},
    [VKF_VARIANT_KV_APPEND_ACT16] = {"kv_append_act16", spirv_kv_append_act16, sizeof spirv_kv_append_act16, 4, sizeof(vkf_push_kv_append)},
    [VKF_VARIANT_ARGMAX_ACT16] = {"argmax_act16", spirv_argmax_act16, sizeof spirv_argmax_act16, 4, sizeof(vkf_push_argmax)},
    [VKF_VARIANT_LSH_HASH] = {"attention_lsh_hash", spirv_lsh_hash, sizeof spirv_lsh_hash, 5, sizeof(vkf_push_lsh_hash)},
    [VKF_VARIANT_LSH_SORT] = {"attention_lsh_sort", spirv_lsh_sort, sizeof spirv_lsh_sort, 2, sizeof(vkf_push_lsh_sort)},
    [VKF_VARIANT_LSH_ATTEND] = {"attention_lsh_attend", spirv_lsh_attend, sizeof spirv_lsh_attend, 6, sizeof(vkf_push_lsh_attend)},
    [VKF_VARIANT_LSH_COMBINE] = {"attention_lsh_combine", spirv_lsh_combine, sizeof spirv_lsh_combine, 2, sizeof(vkf_push_lsh_combine)},
    [VKF_VARIANT_MATMUL_SUBGROUP] = {"matmul_subgroup", spirv_matmul_subgroup, sizeof spirv_matmul_subgroup, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_SUBGROUP_F16B] = {"matmul_subgroup_f16b", spirv_matmul_subgroup_f16b, sizeof spirv_matmul_subgroup_f16b, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_SUBGROUP_ACT16] = {"matmul_subgroup_act16", spirv_matmul_subgroup_act16, sizeof spirv_matmul_subgroup_act16, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_SUBGROUP_ACT16_F16B] = {"matmul_subgroup_act16_f16b", spirv_matmul_subgroup_act16_f16b, sizeof spirv_matmul_subgroup_act16_f16b, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_COOPMAT] = {"matmul_coopmat", COOPMAT_SPIRV(spirv_matmul_coopmat), 5, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT_F16B] = {"matmul_coopmat_f16b", COOPMAT_SPIRV(spirv_matmul_coopmat_f16b), 5, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT_ACT16] = {"matmul_coopmat_act16", COOPMAT_SPIRV(spirv_matmul_coopmat_act16), 5, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT_ACT16_F16B] = {"matmul_coopmat_act16_f16b", COOPMAT_SPIRV(spirv_matmul_coopmat_act16_f16b), 5, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT2] = {"matmul_coopmat2", MATMUL_COOPMAT2_SPIRV(spirv_matmul_coopmat2), 5, sizeof(vkf_push_matmul), 2},
    [VKF_VARIANT_MATMUL_COOPMAT2_F16B] = {"matmul_coopmat2_f16b", MATMUL_COOPMAT2_SPIRV(spirv_matmul_coopmat2_f16b), 5, sizeof(vkf_push_matmul), 2},
    [VKF_VARIANT_MATMUL_COOPMAT2_ACT16] = {"matmul_coopmat2_act16", MATMUL_COOPMAT2_SPIRV(spirv_matmul_coopmat2_act16), 5, sizeof(vkf_push_matmul), 2},
    [VKF_VARIANT_MATMUL_COOPMAT2_ACT16_F16B] = {"matmul_coopmat2_act16_f16b", MATMUL_COOPMAT2_SPIRV(spirv_matmul_coopmat2_act16_f16b), 5, sizeof(vkf_push_matmul), 2},
    [VKF_VARIANT_ATTENTION_FUSED_COOPMAT] = {"attention_fused_coopmat", ATTENTION_COOPMAT_SPIRV(spirv_attention_fused_coopmat), 8, sizeof(vkf_push_attention_fused), 1},
    [VKF_VARIANT_ATTENTION_FUSED_COOPMAT_F16] = {"attention_fused_coopmat_f16", ATTENTION_COOPMAT_SPIRV(spirv_attention_fused_coopmat_f16), 8, sizeof(vkf_push_attention_fused), 1},
    [VKF_VARIANT_KV_GATHER] = {"kv_gather", spirv_kv_gather, sizeof spirv_kv_gather, 4, sizeof(vkf_push_kv_gather)},
    [VKF_VARIANT_BEAM_PARTIAL] = {"beam_partial", spirv_beam_partial, sizeof spirv_beam_partial, 5, sizeof(vkf_push_beam_partial)},
    [VKF_VARIANT_BEAM_PARTIAL_ACT16] = {"beam_partial_act16", spirv_beam_partial_act16, sizeof spirv_beam_partial_act16, 5, sizeof(vkf_push_beam_partial)},
    [VKF_VARIANT_BEAM_TOPK] = {"beam_topk", spirv_beam_topk, sizeof spirv_beam_topk, 7, sizeof(vkf_push_beam_topk)},
    [VKF_VARIANT_SAMPLE] = {"sample", spirv_sample, sizeof spirv_sample, 5, sizeof(vkf_push_sample)},
    [VKF_VARIANT_SAMPLE_ACT16] = {"sample_act16", spirv_sample_act16, sizeof spirv_sample_act16, 5, sizeof(vkf_push_sample)},
    [VKF_VARIANT_MATMUL_TILED_I8B] = {"matmul_tiled_i8b", spirv_matmul_tiled_i8b, sizeof spirv_matmul_tiled_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_TILED_ACT16_I8B] = {"matmul_tiled_act16_i8b", spirv_matmul_tiled_act16_i8b, sizeof spirv_matmul_tiled_act16_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_DIRECT_I8B] = {"matmul_direct_i8b", spirv_matmul_direct_i8b, sizeof spirv_matmul_direct_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_DIRECT_ACT16_I8B] = {"matmul_direct_act16_i8b", spirv_matmul_direct_act16_i8b, sizeof spirv_matmul_direct_act16_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_SUBGROUP_I8B] = {"matmul_subgroup_i8b", spirv_matmul_subgroup_i8b, sizeof spirv_matmul_subgroup_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_SUBGROUP_ACT16_I8B] = {"matmul_subgroup_act16_i8b", spirv_matmul_subgroup_act16_i8b, sizeof spirv_matmul_subgroup_act16_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_COOPMAT_I8B] = {"matmul_coopmat_i8b", COOPMAT_SPIRV(spirv_matmul_coopmat_i8b), 6, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT_ACT16_I8B] = {"matmul_coopmat_act16_i8b", COOPMAT_SPIRV(spirv_matmul_coopmat_act16_i8b), 6, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT2_I8B] = {"matmul_coopmat2_i8b", MATMUL_COOPMAT2_SPIRV(spirv_matmul_coopmat2_i8b), 6, sizeof(vkf_push_matmul), 2},
    [VKF_VARIANT_MATMUL_COOPMAT2_ACT16_I8B] = {"matmul_coopmat2_act16_i8b", MATMUL_COOPMAT2_SPIRV(spirv_matmul_coopmat2_act16_i8b), 6, sizeof(vkf_push_matmul), 2},
    [VKF_VARIANT_EMBED_I8] = {"embed_i8", spirv_embed_i8, sizeof spirv_embed_i8, 7, sizeof(vkf_push_embed)},
    [VKF_VARIANT_EMBED_I8_ACT16] = {"embed_i8_act16", spirv_embed_i8_act16, sizeof spirv_embed_i8_act16, 7, sizeof(vkf_push_embed)},
    [VKF_VARIANT_LOGITS_PROCESS] = {"logits_process", spirv_logits_process, sizeof spirv_logits_process, 8, sizeof(vkf_push_logits_process)},
    [VKF_VARIANT_LOGITS_PROCESS_ACT16] = {"logits_process_act16", spirv_logits_process_act16, sizeof spirv_logits_process_act16, 8, sizeof(vkf_push_logits_process)},
    [VKF_VARIANT_LOGPROB_GATHER] = {"logprob_gather", spirv_logprob_gather, sizeof spirv_logprob_gather, 3, sizeof(vkf_push_logprob_gather)},
    [VKF_VARIANT_LOGPROB_GATHER_ACT16] = {"logprob_gather_act16", spirv_logprob_gather_act16, sizeof spirv_logprob_gather_act16, 3, sizeof(vkf_push_logprob_gather)},
    [VKF_VARIANT_MATMUL_BROADCAST] = {"matmul_broadcast", spirv_matmul_broadcast, sizeof spirv_matmul_broadcast, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_BROADCAST_F16B] = {"matmul_broadcast_f16b", spirv_matmul_broadcast_f16b, sizeof spirv_matmul_broadcast_f16b, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_BROADCAST_ACT16] = {"matmul_broadcast_act16", spirv_matmul_broadcast_act16, sizeof spirv_matmul_broadcast_act16, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_BROADCAST_ACT16_F16B] = {"matmul_broadcast_act16_f16b", spirv_matmul_broadcast_act16_f16b, sizeof spirv_matmul_broadcast_act16_f16b, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_BROADCAST_I8B] = {"matmul_broadcast_i8b", spirv_matmul_broadcast_i8b, sizeof spirv_matmul_broadcast_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_BROADCAST_ACT16_I8B] = {"matmul_broadcast_act16_i8b", spirv_matmul_broadcast_act16_i8b, sizeof spirv_matmul_broadcast_act16_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_GLU] = {"glu", spirv_glu, sizeof spirv_glu, 1, sizeof(vkf_push_glu)},
    [VKF_VARIANT_GLU_ACT16] = {"glu_act16", spirv_glu_act16, sizeof spirv_glu_act16, 1, sizeof(vkf_push_glu)},
    [VKF_VARIANT_BLOCK_SUM] = {"block_sum", spirv_block_sum, sizeof spirv_block_sum, 3, sizeof(vkf_push_block_sum)},
    [VKF_VARIANT_BLOCK_SUM_ACT16] = {"block_sum_act16", spirv_block_sum_act16, sizeof spirv_block_sum_act16, 3, sizeof(vkf_push_block_sum)},
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK] = {"matmul_coopmat_splitk", COOPMAT_SPIRV(spirv_matmul_coopmat_splitk), 5, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK_F16B] = {"matmul_coopmat_splitk_f16b", COOPMAT_SPIRV(spirv_matmul_coopmat_splitk_f16b), 5, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16] = {"matmul_coopmat_splitk_act16", COOPMAT_SPIRV(spirv_matmul_coopmat_splitk_act16), 5, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16_F16B] = {"matmul_coopmat_splitk_act16_f16b", COOPMAT_SPIRV(spirv_matmul_coopmat_splitk_act16_f16b), 5, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK_I8B] = {"matmul_coopmat_splitk_i8b", COOPMAT_SPIRV(spirv_matmul_coopmat_splitk_i8b), 6, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16_I8B] = {"matmul_coopmat_splitk_act16_i8b", COOPMAT_SPIRV(spirv_matmul_coopmat_splitk_act16_i8b), 6, sizeof(vkf_push_matmul), 1},
    [VKF_VARIANT_MATMUL_SPLITK_REDUCE] = {"matmul_splitk", spirv_matmul_splitk, sizeof spirv_matmul_splitk, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_SPLITK_REDUCE_ACT16] = {"matmul_splitk_act16", spirv_matmul_splitk_act16, sizeof spirv_matmul_splitk_act16, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_SPLITK_REDUCE_I8B] = {"matmul_splitk_i8b", spirv_matmul_splitk_i8b, sizeof spirv_matmul_splitk_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_GEMV] = {"matmul_gemv", spirv_matmul_gemv, sizeof spirv_matmul_gemv, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_GEMV_F16B] = {"matmul_gemv_f16b", spirv_matmul_gemv_f16b, sizeof spirv_matmul_gemv_f16b, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_GEMV_ACT16] = {"matmul_gemv_act16", spirv_matmul_gemv_act16, sizeof spirv_matmul_gemv_act16, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_GEMV_ACT16_F16B] = {"matmul_gemv_act16_f16b", spirv_matmul_gemv_act16_f16b, sizeof spirv_matmul_gemv_act16_f16b, 5, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_GEMV_I8B] = {"matmul_gemv_i8b", spirv_matmul_gemv_i8b, sizeof spirv_matmul_gemv_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_GEMV_ACT16_I8B] = {"matmul_gemv_act16_i8b", spirv_matmul_gemv_act16_i8b, sizeof spirv_matmul_gemv_act16_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_SPLITK_REDUCE_ACT16_I8B] = {"matmul_splitk_act16_i8b", spirv_matmul_splitk_act16_i8b, sizeof spirv_matmul_splitk_act16_i8b, 6, sizeof(vkf_push_matmul)},
    [VKF_VARIANT_MATMUL_COOPMAT2_WG] = {"matmul_coopmat2_wg", MATMUL_COOPMAT2_WG_SPIRV(spirv_matmul_coopmat2_wg), 5, sizeof(vkf_push_matmul), 3},
    [VKF_VARIANT_MATMUL_COOPMAT2_WG_F16B] = {"matmul_coopmat2_wg_f16b", MATMUL_COOPMAT2_WG_SPIRV(spirv_matmul_coopmat2_wg_f16b), 5, sizeof(vkf_push_matmul), 3},
    [VKF_VARIANT_MATMUL_COOPMAT2_WG_ACT16] = {"matmul_coopmat2_wg_act16", MATMUL_COOPMAT2_WG_SPIRV(spirv_matmul_coopmat2_wg_act16), 5, sizeof(vkf_push_matmul), 3},
    [VKF_VARIANT_MATMUL_COOPMAT2_WG_ACT16_F16B] = {"matmul_coopmat2_wg_act16_f16b", MATMUL_COOPMAT2_WG_SPIRV(spirv_matmul_coopmat2_wg_act16_f16b), 5, sizeof(vkf_push_matmul), 3},
    [VKF_VARIANT_ATTENTION_FUSED_COOPMAT_SPLITK] = {"attention_fused_coopmat_splitk", ATTENTION_COOPMAT_SPIRV(spirv_attention_fused_coopmat_splitk), 8, sizeof(vkf_push_attention_fused), 1},
    [VKF_VARIANT_ATTENTION_FUSED_COOPMAT_SPLITK_F16] = {"attention_fused_coopmat_splitk_f16", ATTENTION_COOPMAT_SPIRV(spirv_attention_fused_coopmat_splitk_f16), 8, sizeof(vkf_push_attention_fused), 1},
    [VKF_VARIANT_ATTENTION_SPLIT_REDUCE] = {"attention_split_reduce", spirv_attention_split_reduce, sizeof spirv_attention_split_reduce, 2, sizeof(vkf_push_attention_split_reduce)},
    [VKF_VARIANT_ATTENTION_SPLIT_REDUCE_F16] = {"attention_split_reduce_f16", spirv_attention_split_reduce_f16, sizeof spirv_attention_split_reduce_f16, 2, sizeof(vkf_push_attention_split_reduce)},
    [VKF_VARIANT_ATTENTION_FUSED_SPLITK] = {"attention_fused_splitk", spirv_attention_fused_splitk, sizeof spirv_attention_fused_splitk, 8, sizeof(vkf_push_attention_fused)},
    [VKF_VARIANT_ATTENTION_FUSED_SPLITK_F16] = {"attention_fused_splitk_f16", spirv_attention_fused_splitk_f16, sizeof spirv_attention_fused_splitk_f16, 8, sizeof(vkf_push_attention_fused)},
    [VKF_VARIANT_ATTENTION_FUSED_LANES_SPLITK] = {"attention_fused_lanes_splitk", spirv_attention_fused_lanes_splitk, sizeof spirv_attention_fused_lanes_splitk, 8, sizeof(vkf_push_attention_fused)},
    [VKF_VARIANT_ATTENTION_FUSED_LANES_SPLITK_F16] = {"attention_fused_lanes_splitk_f16", spirv_attention_fused_lanes_splitk_f16, sizeof spirv_attention_fused_lanes_splitk_f16, 8, sizeof(vkf_push_attention_fused)},
};

const vkf_variant_desc *vkf_variant(vkf_variant_id id) { return &variant_table[id]; }

/* Occupancy floors, beside the table: the fewest AMD subgroups per SIMD (RADV's
 * "Subgroups per SIMD") and NVIDIA warps per SM (NVK's occupancy) a kernel may
 * compile to on a virtual GPU (tools/vgpu.sh, tests/test_vgpu.sh) without failing
 * the test. Written from what today's kernels compile to (docs/performance.md,
 * "Virtual GPUs (compile-only)"); 0: no floor. */
typedef struct occupancy_floor {
    uint8_t amd, nvidia;
} occupancy_floor;
/* GPU-class GEMM and attention (128 x 128 tiles, 64 x 64 per subgroup; a flash-attention
 * block): at least 2 AMD subgroups per SIMD and 4 NVIDIA warps per SM, so one
 * workgroup's loads overlap another's math. The scalar tiled kernels (decode
 * steps, F32): twice that. Memory-bound row and element kernels: 8 and 16. */
#define FLOOR_MATRIX {2, 4}
#define FLOOR_SCALAR {4, 8}
#define FLOOR_ROWS {8, 16}
static const occupancy_floor occupancy_floors[VKF_VARIANT_COUNT] = {
    [VKF_VARIANT_MATMUL_COOPMAT] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_F16B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_ACT16] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_ACT16_F16B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_I8B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_ACT16_I8B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK_F16B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16_F16B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK_I8B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16_I8B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT2] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT2_F16B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT2_ACT16] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT2_ACT16_F16B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT2_WG] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT2_WG_F16B] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT2_WG_ACT16] = FLOOR_MATRIX,
    [VKF_VARIANT_MATMUL_COOPMAT2_WG_ACT16_F16B] = FLOOR_MATRIX,
    [VKF_VARIANT_ATTENTION_FUSED_COOPMAT] = FLOOR_MATRIX,
    [VKF_VARIANT_ATTENTION_FUSED_COOPMAT_F16] = FLOOR_MATRIX,
    [VKF_VARIANT_ATTENTION_FUSED_COOPMAT_SPLITK] = FLOOR_MATRIX,
    [VKF_VARIANT_ATTENTION_FUSED_COOPMAT_SPLITK_F16] = FLOOR_MATRIX,
    [VKF_VARIANT_ATTENTION_SPLIT_REDUCE] = FLOOR_ROWS,
    [VKF_VARIANT_ATTENTION_SPLIT_REDUCE_F16] = FLOOR_ROWS,
    [VKF_VARIANT_ATTENTION_FUSED_SPLITK] = FLOOR_SCALAR,
    [VKF_VARIANT_ATTENTION_FUSED_SPLITK_F16] = FLOOR_SCALAR,
    [VKF_VARIANT_MATMUL_TILED] = FLOOR_SCALAR,
    [VKF_VARIANT_MATMUL_TILED_F16B] = FLOOR_SCALAR,
    [VKF_VARIANT_MATMUL_TILED_ACT16] = FLOOR_SCALAR,
    [VKF_VARIANT_MATMUL_TILED_ACT16_F16B] = FLOOR_SCALAR,
    [VKF_VARIANT_MATMUL_TILED_I8B] = FLOOR_SCALAR,
    [VKF_VARIANT_MATMUL_TILED_ACT16_I8B] = FLOOR_SCALAR,
    [VKF_VARIANT_ATTENTION_FUSED] = FLOOR_SCALAR,
    [VKF_VARIANT_ATTENTION_FUSED_F16] = FLOOR_SCALAR,
    [VKF_VARIANT_SOFTMAX] = FLOOR_ROWS,
    [VKF_VARIANT_LAYERNORM] = FLOOR_ROWS,
    [VKF_VARIANT_LAYERNORM_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_EMBED] = FLOOR_ROWS,
    [VKF_VARIANT_EMBED_F16] = FLOOR_ROWS,
    [VKF_VARIANT_EMBED_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_EMBED_F16_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_ATTENTION_DECODE] = FLOOR_ROWS,
    [VKF_VARIANT_ATTENTION_DECODE_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_ATTENTION_DECODE_REDUCE] = FLOOR_ROWS,
    [VKF_VARIANT_ATTENTION_DECODE_REDUCE_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_KV_APPEND] = FLOOR_ROWS,
    [VKF_VARIANT_KV_APPEND_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_ARGMAX] = FLOOR_ROWS,
    [VKF_VARIANT_ARGMAX_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_KV_GATHER] = FLOOR_ROWS,
    [VKF_VARIANT_BEAM_PARTIAL] = FLOOR_ROWS,
    [VKF_VARIANT_BEAM_PARTIAL_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_BEAM_TOPK] = FLOOR_ROWS,
    [VKF_VARIANT_SAMPLE] = FLOOR_ROWS,
    [VKF_VARIANT_SAMPLE_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_LOGITS_PROCESS] = FLOOR_ROWS,
    [VKF_VARIANT_LOGITS_PROCESS_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_LOGPROB_GATHER] = FLOOR_ROWS,
    [VKF_VARIANT_LOGPROB_GATHER_ACT16] = FLOOR_ROWS,
    [VKF_VARIANT_GLU] = FLOOR_ROWS,
    [VKF_VARIANT_GLU_ACT16] = FLOOR_ROWS,
};

uint32_t vkf_variant_occupancy_floor(vkf_variant_id id, uint32_t vendor_id)
{
    if ((unsigned)id >= VKF_VARIANT_COUNT) return 0;
    return vendor_id == 0x1002 ? occupancy_floors[id].amd : vendor_id == 0x10de ? occupancy_floors[id].nvidia : 0;
}

/* Module and layouts of one variant, made on first use. */
static vkf_status variant_objects(vkf_context *ctx, vkf_variant_id id, const vkf_variant_objects **out)
{
    vkf_variant_objects *o = &ctx->variants[id];
    *out = o;
    if (o->layout) return VKF_OK;
    const vkf_variant_desc *d = &variant_table[id];
    if (!d->spirv)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "shader %s is not in this build (its glslc could not compile "
                        "cooperative-matrix shaders)", d->name);
    if ((d->coopmat && !ctx->coopmat) || (d->coopmat >= 2 && !ctx->coopmat2))
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "shader %s needs cooperative matrix, which is off or missing on \"%s\"",
                        d->name, ctx->info.name);
    if (d->coopmat == 3 && !ctx->coopmat2_wg)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "shader %s needs VK_NV_cooperative_matrix2 workgroup scope, tensor "
                        "addressing and per-element operations, which \"%s\" lacks", d->name, ctx->info.name);
    if (d->push_bytes > ctx->info.max_push_constants)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "shader %s needs %u bytes of push constants; the device allows %u",
                        d->name, d->push_bytes, ctx->info.max_push_constants);
    if (!o->module) {
        VkShaderModuleCreateInfo mi = {
            .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
            .codeSize = d->spirv_bytes,
            .pCode = d->spirv,
        };
        VkResult r = ctx->vk.vkCreateShaderModule(ctx->device, &mi, NULL, &o->module);
        if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkCreateShaderModule");
    }
    if (d->bindings > VKF_MAX_BINDINGS)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "shader %s has %u bindings; this build binds at most %u", d->name, d->bindings,
                        VKF_MAX_BINDINGS);
    if (!o->set_layout) {
        VkDescriptorSetLayoutBinding b[VKF_MAX_BINDINGS];
        for (uint32_t i = 0; i < d->bindings; i++)
            b[i] = (VkDescriptorSetLayoutBinding){
                .binding = i,
                .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                .descriptorCount = 1,
                .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
            };
        VkDescriptorSetLayoutCreateInfo li = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            .bindingCount = d->bindings,
            .pBindings = b,
        };
        VkResult r = ctx->vk.vkCreateDescriptorSetLayout(ctx->device, &li, NULL, &o->set_layout);
        if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkCreateDescriptorSetLayout");
    }
    VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = d->push_bytes};
    VkPipelineLayoutCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &o->set_layout,
        .pushConstantRangeCount = d->push_bytes ? 1 : 0,
        .pPushConstantRanges = &push,
    };
    VkResult r = ctx->vk.vkCreatePipelineLayout(ctx->device, &pi, NULL, &o->layout);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkCreatePipelineLayout");
    return VKF_OK;
}

vkf_status vkf_pipeline_get(vkf_context *ctx, vkf_variant_id variant, const uint32_t *spec, uint32_t spec_count,
                            const vkf_pipeline **out_pipeline)
{
    *out_pipeline = NULL;
    if (spec_count > VKF_MAX_SPEC) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "too many specialization constants");
    for (uint32_t i = 0; i < ctx->pipeline_count; i++) {
        const vkf_pipeline *p = ctx->pipelines[i];
        if (p->variant == variant && p->spec_count == spec_count &&
            (spec_count == 0 || memcmp(p->spec, spec, spec_count * sizeof *spec) == 0)) {
            *out_pipeline = p;
            return VKF_OK;
        }
    }
    const vkf_variant_objects *o;
    VKF_TRY(variant_objects(ctx, variant, &o));
    if (ctx->pipeline_count == ctx->pipeline_capacity) {
        uint32_t cap = ctx->pipeline_capacity ? 2 * ctx->pipeline_capacity : 16;
        vkf_pipeline **grown = realloc(ctx->pipelines, cap * sizeof *grown);
        if (!grown) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for pipelines");
        ctx->pipelines = grown;
        ctx->pipeline_capacity = cap;
    }
    VkSpecializationMapEntry entries[VKF_MAX_SPEC];
    for (uint32_t i = 0; i < spec_count; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = i * 4, .size = 4};
    VkSpecializationInfo si = {
        .mapEntryCount = spec_count,
        .pMapEntries = entries,
        .dataSize = spec_count * 4,
        .pData = spec,
    };
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = o->module,
            .pName = "main",
            .pSpecializationInfo = spec_count ? &si : NULL,
        },
        .layout = o->layout,
    };
    /* Shader statistics asked for (shader_stats.c): the driver keeps them and its
     * internal representations; the pipeline cache is left out so that every
     * pipeline is compiled here and carries them. */
    VkPipelineCache cache = ctx->pipeline_cache;
    if (ctx->capture_statistics) {
        ci.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR | VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
        cache = VK_NULL_HANDLE;
    }
    /* Each pipeline has its own allocation: pointers handed out stay valid while
     * the array of them grows. */
    vkf_pipeline *p = calloc(1, sizeof *p);
    if (!p) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a pipeline");
    VkResult r = ctx->vk.vkCreateComputePipelines(ctx->device, cache, 1, &ci, NULL, &p->pipeline);
    if (r != VK_SUCCESS) {
        free(p);
        return vkf_context_vk_fail(ctx, r, "vkCreateComputePipelines");
    }
    ctx->pipelines[ctx->pipeline_count] = p;
    p->variant = variant;
    p->spec_count = spec_count;
    if (spec_count) memcpy(p->spec, spec, spec_count * sizeof *spec); /* spec may be NULL with no constants */
    ctx->pipeline_count++;
    *out_pipeline = p;
    return VKF_OK;
}

void vkf_pipelines_destroy(vkf_context *ctx)
{
    for (uint32_t i = 0; i < ctx->pipeline_count; i++) {
        ctx->vk.vkDestroyPipeline(ctx->device, ctx->pipelines[i]->pipeline, NULL);
        free(ctx->pipelines[i]);
    }
    free(ctx->pipelines);
    ctx->pipelines = NULL;
    ctx->pipeline_count = ctx->pipeline_capacity = 0;
    for (int v = 0; v < VKF_VARIANT_COUNT; v++) {
        vkf_variant_objects *o = &ctx->variants[v];
        if (o->layout) ctx->vk.vkDestroyPipelineLayout(ctx->device, o->layout, NULL);
        if (o->set_layout) ctx->vk.vkDestroyDescriptorSetLayout(ctx->device, o->set_layout, NULL);
        if (o->module) ctx->vk.vkDestroyShaderModule(ctx->device, o->module, NULL);
        memset(o, 0, sizeof *o);
    }
}

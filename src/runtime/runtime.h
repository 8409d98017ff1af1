/* The runtime layer (src/runtime/): status and errors, the context and its device,
 * memory and tensors, the shader variant table and pipelines, the pipeline cache,
 * tuning data (tile choices), and command lists (record.c). Nothing here knows
 * what a kernel computes. Private to the library and its tests. */
#ifndef VKF_RUNTIME_H
#define VKF_RUNTIME_H

#define VK_NO_PROTOTYPES
#include <volk.h>

#include "vkformer.h"

#include <stdarg.h>
#include <string.h>

/* ------------------------------------------------------------------ status.c */

/* Records the thread's last error message (printf-style) and returns `status`. */
vkf_status vkf_fail(vkf_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Turns a failing VkResult from `call` into a status and message. */
vkf_status vkf_fail_vk(VkResult result, const char *call);
const char *vkf_vk_result_name(VkResult result);

/* Evaluate a vkf_status expression; return it from the caller if not OK. */
#define VKF_TRY(expr)                                                                   \
    do {                                                                                \
        vkf_status vkf_try_status_ = (expr);                                            \
        if (vkf_try_status_ != VKF_OK) return vkf_try_status_;                          \
    } while (0)

/* Evaluate a Vulkan call through the context's device table; on failure return a
 * status naming the call. */
#define VKF_VK_TRY(call)                                                                \
    do {                                                                                \
        VkResult vkf_vk_result_ = (call);                                               \
        if (vkf_vk_result_ != VK_SUCCESS) return vkf_fail_vk(vkf_vk_result_, #call);    \
    } while (0)

/* IEEE half of x, rounded to nearest even (overflow to infinity): F16 weights
 * (model.c) and tune cases (tune.c). */
static inline uint16_t vkf_half_from_float(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xffu, mant = u & 0x7fffffu;
    if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0)); /* inf, nan */
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal half, or zero */
        if (e < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e), h = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rest > half || (rest == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++; /* may carry into the exponent: still right */
    return (uint16_t)(sign | h);
}

/* x of an IEEE half (every value exact in float). */
static inline float vkf_float_from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
    if (exp == 0x1fu) u = sign | 0x7f800000u | (mant << 13);             /* inf, nan */
    else if (exp) u = sign | ((exp + 112u) << 23) | (mant << 13);       /* normal */
    else if (!mant) u = sign;                                          /* zero */
    else {                                                             /* subnormal: normalise */
        int e = -1;
        do mant <<= 1, e++;
        while (!(mant & 0x400u));
        u = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ------------------------------------------------------------------ memory.c */

/* One free range inside a block. */
typedef struct vkf_range {
    uint64_t offset, size;
} vkf_range;

/* A device-memory allocation with one VkBuffer over all of it; tensors are
 * sub-ranges of it. */
typedef struct vkf_block {
    VkDeviceMemory memory;              /* owned */
    VkBuffer buffer;                    /* owned, covers the whole block */
    uint64_t size;                      /* bytes */
    uint64_t used;                      /* bytes handed to tensors */
    void *mapped;                       /* persistent map, or NULL when not host-visible */
    vkf_range *free;                    /* owned; sorted by offset, coalesced */
    uint32_t free_count, free_capacity;
    struct vkf_block *next;
} vkf_block;

struct vkf_tensor {
    vkf_context *ctx;                   /* borrowed */
    vkf_block *block;                   /* borrowed from ctx's block list */
    uint64_t offset;                    /* bytes into block */
    uint64_t bytes;
    vkf_dtype dtype;
    uint32_t rank;
    uint64_t shape[VKF_MAX_RANK];
    uint64_t elements;
};

void vkf_memory_destroy_all(vkf_context *ctx);
uint32_t vkf_dtype_size(vkf_dtype dtype);
/* Whether two tensors share bytes (NULL shares nothing). */
bool vkf_tensors_overlap(const vkf_tensor *a, const vkf_tensor *b);
/* count floats into the first count elements of an F32 or F16 tensor (F16:
 * rounded to nearest even), and back; count must be the tensor's element count. */
vkf_status vkf_upload_floats(vkf_tensor *t, const float *data, uint64_t count);
vkf_status vkf_download_floats(vkf_tensor *t, float *data, uint64_t count);

/* ------------------------------------------------------------------ pipeline.c */

/* Every shader variant; one entry of the table in pipeline.c each. */
typedef enum vkf_variant_id {
    VKF_VARIANT_MATMUL_TILED = 0,       /* shared-memory tiles + register blocking */
    VKF_VARIANT_MATMUL_DIRECT,          /* register blocking, no shared memory (CPUs) */
    VKF_VARIANT_MATMUL_TILED_F16B,      /* the same two with B (weights) stored as F16 */
    VKF_VARIANT_MATMUL_DIRECT_F16B,
    VKF_VARIANT_SOFTMAX,
    VKF_VARIANT_LAYERNORM,
    VKF_VARIANT_EMBED,
    VKF_VARIANT_EMBED_F16,              /* F16 embedding table */
    VKF_VARIANT_ATTENTION_DECODE,       /* one query row per (sequence, head) */
    VKF_VARIANT_KV_APPEND,
    VKF_VARIANT_ARGMAX,
    VKF_VARIANT_ADVANCE,
    VKF_VARIANT_ATTENTION_FUSED,        /* many queries, online softmax, no score matrix */
    VKF_VARIANT_ATTENTION_FUSED_F16,    /* the same with Q, K, V and out stored as F16 */
    VKF_VARIANT_ATTENTION_FUSED_LANES,  /* the same for CPU drivers: keys shared by subgroup shuffles */
    VKF_VARIANT_ATTENTION_FUSED_LANES_F16,
    VKF_VARIANT_MATMUL_TILED_ACT16,             /* -DACT_F16: activations (A, C, residual; x, y; ...) stored as F16 */
    VKF_VARIANT_MATMUL_TILED_ACT16_F16B,
    VKF_VARIANT_MATMUL_DIRECT_ACT16,
    VKF_VARIANT_MATMUL_DIRECT_ACT16_F16B,
    VKF_VARIANT_LAYERNORM_ACT16,
    VKF_VARIANT_EMBED_ACT16,
    VKF_VARIANT_EMBED_F16_ACT16,
    VKF_VARIANT_ATTENTION_DECODE_ACT16,
    VKF_VARIANT_KV_APPEND_ACT16,
    VKF_VARIANT_ARGMAX_ACT16,
    VKF_VARIANT_LSH_HASH,               /* LSH attention (attention_lsh.c): bucket of each token per round */
    VKF_VARIANT_LSH_SORT,               /* stable sort of tokens by bucket */
    VKF_VARIANT_LSH_ATTEND,             /* attention within chunks of the sorted order */
    VKF_VARIANT_LSH_COMBINE,            /* rounds combined by log-sum-exp */
    VKF_VARIANT_MATMUL_SUBGROUP,        /* rows shared by subgroup shuffles, no shared memory (CPUs) */
    VKF_VARIANT_MATMUL_SUBGROUP_F16B,
    VKF_VARIANT_MATMUL_SUBGROUP_ACT16,
    VKF_VARIANT_MATMUL_SUBGROUP_ACT16_F16B,
    /* Cooperative matrix (embedded only when the build's glslc compiles them;
     * vkf_variant(id)->spirv is NULL otherwise). KHR: f16 tiles of the device's
     * shape, staged through shared memory; NV2: flexible dimensions. */
    VKF_VARIANT_MATMUL_COOPMAT,
    VKF_VARIANT_MATMUL_COOPMAT_F16B,
    VKF_VARIANT_MATMUL_COOPMAT_ACT16,
    VKF_VARIANT_MATMUL_COOPMAT_ACT16_F16B,
    VKF_VARIANT_MATMUL_COOPMAT2,
    VKF_VARIANT_MATMUL_COOPMAT2_F16B,
    VKF_VARIANT_MATMUL_COOPMAT2_ACT16,
    VKF_VARIANT_MATMUL_COOPMAT2_ACT16_F16B,
    VKF_VARIANT_ATTENTION_FUSED_COOPMAT,
    VKF_VARIANT_ATTENTION_FUSED_COOPMAT_F16,
    VKF_VARIANT_KV_GATHER,              /* generate.c: beam search's KV-cache reorder by parent rows */
    VKF_VARIANT_BEAM_PARTIAL,           /* generate.c: each (row, vocabulary chunk)'s log_softmax part and best 2K */
    VKF_VARIANT_BEAM_PARTIAL_ACT16,
    VKF_VARIANT_BEAM_TOPK,              /* generate.c: the chunks merged, the best 2K of K*V per source */
    VKF_VARIANT_SAMPLE,                 /* generate.c: temperature, top-k, top-p, one seeded draw per row */
    VKF_VARIANT_SAMPLE_ACT16,
    /* int8 weights (B I8, packed words; b_scale at binding 5: 6 bindings) */
    VKF_VARIANT_MATMUL_TILED_I8B,
    VKF_VARIANT_MATMUL_TILED_ACT16_I8B,
    VKF_VARIANT_MATMUL_DIRECT_I8B,
    VKF_VARIANT_MATMUL_DIRECT_ACT16_I8B,
    VKF_VARIANT_MATMUL_SUBGROUP_I8B,
    VKF_VARIANT_MATMUL_SUBGROUP_ACT16_I8B,
    VKF_VARIANT_MATMUL_BROADCAST,       /* rows of A at subgroup-uniform addresses (CPU drivers with divergence analysis) */
    VKF_VARIANT_MATMUL_BROADCAST_F16B,
    VKF_VARIANT_MATMUL_BROADCAST_ACT16,
    VKF_VARIANT_MATMUL_BROADCAST_ACT16_F16B,
    VKF_VARIANT_MATMUL_BROADCAST_I8B,
    VKF_VARIANT_MATMUL_BROADCAST_ACT16_I8B,
    VKF_VARIANT_MATMUL_COOPMAT_I8B,
    VKF_VARIANT_MATMUL_COOPMAT_ACT16_I8B,
    VKF_VARIANT_MATMUL_COOPMAT2_I8B,
    VKF_VARIANT_MATMUL_COOPMAT2_ACT16_I8B,
    /* int8 embedding tables (packed words; per-row scales at binding 5: 6 bindings) */
    VKF_VARIANT_EMBED_I8,
    VKF_VARIANT_EMBED_I8_ACT16,
    /* decode: the logits processors of a step, scoring's log-softmax-and-gather */
    VKF_VARIANT_LOGITS_PROCESS,
    VKF_VARIANT_LOGITS_PROCESS_ACT16,
    VKF_VARIANT_LOGPROB_GATHER,
    VKF_VARIANT_LOGPROB_GATHER_ACT16,
    /* T5 and LongT5 (t5_ops.c) */
    VKF_VARIANT_GLU,                    /* the gated FFN's act(h0) * h1, in place */
    VKF_VARIANT_GLU_ACT16,
    VKF_VARIANT_BLOCK_SUM,              /* transient-global's block sums / means */
    VKF_VARIANT_BLOCK_SUM_ACT16,
    /* split-K matmuls (ops.c): matmul_coopmat (KHR) writing fp32 partial sums of
     * K ranges, and the pass that adds them and applies the epilogue */
    VKF_VARIANT_MATMUL_COOPMAT_SPLITK,
    VKF_VARIANT_MATMUL_COOPMAT_SPLITK_F16B,
    VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16,
    VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16_F16B,
    VKF_VARIANT_MATMUL_COOPMAT_SPLITK_I8B,
    VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16_I8B,
    VKF_VARIANT_MATMUL_SPLITK_REDUCE,
    VKF_VARIANT_MATMUL_SPLITK_REDUCE_ACT16,
    VKF_VARIANT_MATMUL_SPLITK_REDUCE_I8B,
    VKF_VARIANT_MATMUL_SPLITK_REDUCE_ACT16_I8B,
    /* decode-step matmuls of a few rows on GPUs (memory bound) */
    VKF_VARIANT_MATMUL_GEMV,
    VKF_VARIANT_MATMUL_GEMV_F16B,
    VKF_VARIANT_MATMUL_GEMV_ACT16,
    VKF_VARIANT_MATMUL_GEMV_ACT16_F16B,
    VKF_VARIANT_MATMUL_GEMV_I8B,
    VKF_VARIANT_MATMUL_GEMV_ACT16_I8B,
    /* the decode step's split-K attention (attention_decode.comp, CHUNK > 0): its partials combined */
    VKF_VARIANT_ATTENTION_DECODE_REDUCE,
    VKF_VARIANT_ATTENTION_DECODE_REDUCE_ACT16,
    /* NV2 matmul at workgroup scope with tensor layouts (matmul_coopmat2_wg.comp);
     * only where ctx->coopmat2_wg; no default rule picks it (docs/performance.md) */
    VKF_VARIANT_MATMUL_COOPMAT2_WG,
    VKF_VARIANT_MATMUL_COOPMAT2_WG_F16B,
    VKF_VARIANT_MATMUL_COOPMAT2_WG_ACT16,
    VKF_VARIANT_MATMUL_COOPMAT2_WG_ACT16_F16B,
    /* fused attention's split-K form (attention.c): attention_flash.comp -DSPLIT_K writing
     * each key run's partials, and the pass that combines them */
    VKF_VARIANT_ATTENTION_FUSED_COOPMAT_SPLITK,
    VKF_VARIANT_ATTENTION_FUSED_COOPMAT_SPLITK_F16,
    VKF_VARIANT_ATTENTION_SPLIT_REDUCE,
    VKF_VARIANT_ATTENTION_SPLIT_REDUCE_F16,
    VKF_VARIANT_ATTENTION_FUSED_SPLITK,        /* attention_fused.comp -DSPLIT_K */
    VKF_VARIANT_ATTENTION_FUSED_SPLITK_F16,
    VKF_VARIANT_ATTENTION_FUSED_LANES_SPLITK,  /* attention_fused_lanes.comp -DSPLIT_K */
    VKF_VARIANT_ATTENTION_FUSED_LANES_SPLITK_F16,
    VKF_VARIANT_COUNT
} vkf_variant_id;

#define VKF_MAX_BINDINGS 10
#define VKF_MAX_SPEC 12              /* matmul_coopmat uses 9 */

typedef struct vkf_pipeline {
    vkf_variant_id variant;
    uint32_t spec[VKF_MAX_SPEC];        /* specialization constants by constant_id */
    uint32_t spec_count;
    VkPipeline pipeline;                /* owned */
} vkf_pipeline;

/* Per-variant objects, made on first use. */
typedef struct vkf_variant_objects {
    VkShaderModule module;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
} vkf_variant_objects;

typedef struct vkf_variant_desc {
    const char *name;
    const uint32_t *spirv;
    size_t spirv_bytes;
    uint32_t bindings;                  /* storage buffers at bindings 0..n-1 */
    uint32_t push_bytes;
    uint8_t coopmat;                    /* 1: needs ctx->coopmat (KHR); 2: also ctx->coopmat2 (NV2);
                                         * 3: also ctx->coopmat2_wg (NV2 workgroup scope, tensor addressing) */
} vkf_variant_desc;

const vkf_variant_desc *vkf_variant(vkf_variant_id id);
/* The occupancy floor written for a variant on a vendor's GPUs (PCI vendor id: AMD
 * subgroups per SIMD, NVIDIA warps per SM, as their drivers report occupancy); 0:
 * none. `vkformer bench shaders --check` (tests/test_vgpu.sh) fails below it. */
uint32_t vkf_variant_occupancy_floor(vkf_variant_id id, uint32_t vendor_id);
/* Returns the pipeline of `variant` with these specialization constants, creating
 * it on first use; the context owns it. */
vkf_status vkf_pipeline_get(vkf_context *ctx, vkf_variant_id variant, const uint32_t *spec,
                            uint32_t spec_count, const vkf_pipeline **out_pipeline);
void vkf_pipelines_destroy(vkf_context *ctx);

/* ------------------------------------------------------------------ tuning (tuning.c) */

/* Specialization constants of both matmul families, in constant_id order. */
typedef struct vkf_matmul_tiles {
    uint32_t workgroup;                 /* id 0: invocations per workgroup */
    uint32_t bm, bn;                    /* ids 1, 2: output tile of one workgroup */
    uint32_t bk;                        /* id 3: K step held in shared memory (tiled only) */
    uint32_t tm, tn;                    /* ids 4, 5: outputs per invocation */
} vkf_matmul_tiles;
_Static_assert(sizeof(vkf_matmul_tiles) == 6 * sizeof(uint32_t), "spec constants are uint32");

/* Where a tuning choice came from (bench and info report it; vkf_choice_source_name). */
typedef enum vkf_choice_source {
    VKF_SOURCE_DEFAULT = 0,             /* the rule for the device's type, vendor and limits */
    VKF_SOURCE_TABLE,                   /* the built-in per-driver table (tuning.c, vkf_tuning.table_entry) */
    VKF_SOURCE_FILE,                    /* the device's tune file (`vkformer tune`) */
    VKF_SOURCE_FORCED,                  /* set by the caller (vkf_tune_force_matmul, tests, tune candidates) */
    VKF_SOURCE_ENVIRONMENT,             /* an environment variable (VKFORMER_DECODE_FORM) */
} vkf_choice_source;
const char *vkf_choice_source_name(vkf_choice_source source);

typedef struct vkf_tuning {
    vkf_variant_id matmul_variant;
    vkf_matmul_tiles matmul;
    /* Matmuls of fewer multiply-adds (m*n*k) than this run on the direct kernel
     * instead of matmul_subgroup, whose compile time (about 120 ms on lavapipe)
     * small models would pay at start-up for no gain. */
    uint64_t matmul_min_macs;
    /* matmul_subgroup tiles of one row block of 8, 16 and 32 rows per lane (128
     * columns), for matmuls of 8..bm-1 rows (decode steps of batched sources and
     * beams) where matmul_variant is matmul_subgroup; workgroup 0: none. */
    vkf_matmul_tiles subgroup_skinny[3];
    /* Cooperative-matrix matmul (ops.c): its variant (VKF_VARIANT_MATMUL_COOPMAT or
     * _COOPMAT2) and tiles, and which matmuls use it: 0 none, 1 those with an F16
     * operand (the built-in rule on GPUs, or a tune file), 2 every matmul (set by
     * vkf_tuning_set_matmul: tests, bench). The other matmuls use matmul_variant. */
    vkf_variant_id coopmat_variant;
    vkf_matmul_tiles coopmat;
    uint8_t coopmat_use;
    /* Split-K of KHR coopmat matmuls (ops.c): 0 the rule (GPUs: when the output
     * has fewer workgroup tiles than twice the compute units), 1 never, N >= 2 at
     * most N splits whenever K allows (tests, bench). compute_units: SMs / CUs
     * (VK_NV_shader_sm_builtins, VK_AMD_shader_core_properties2, else a table),
     * CPU drivers their threads (tuning.c). */
    uint32_t coopmat_split;
    uint32_t compute_units;
    /* matmul_gemv for matmuls of at most gemv.bm rows (decode steps) whose views
     * allow vec4 loads: workgroup, bm (rows at most), bn (columns per workgroup);
     * workgroup 0: never (CPU drivers, where their direct kernel's skinny tiles
     * measured well). */
    vkf_matmul_tiles gemv;
    uint32_t row_workgroup;             /* softmax / layernorm invocations per row */
    uint32_t elementwise_workgroup;
    /* The decode step's attention_decode and beam_partial in their rows form (one
     * invocation per (row, head) and per (row, chunk): no barriers, few
     * workgroups; CPU drivers) rather than a workgroup each (GPUs). The context's
     * VKFORMER_DECODE_FORM=rows|split overrides the device's rule, so the tests
     * run both forms on CPU drivers. */
    bool decode_rows;
    /* Fused-attention tiles from a tune file (tuning.c), for head_dim
     * attention_head_dim only; 0: none, vkf_attention_tiles_choose decides. The
     * values of a vkf_attention_tiles in field order. */
    uint32_t attention_head_dim;
    uint32_t attention_tiles[6];
    bool from_file;                     /* matmul / attention tiles came from a tune file */
    /* The built-in table's fused-attention shape for this CPU driver (td 1):
     * invocations, query rows per invocation (at most; fewer for wide heads), keys
     * per tile, and the lanes form (vkf_attention_tiles.lanes); workgroup 0: the
     * device rule in attention.c. */
    uint32_t attention_rows_workgroup, attention_rows_tq, attention_rows_bk;
    bool attention_lanes;
    /* The built-in table's entry for this device and driver (a static name, e.g.
     * "lavapipe, Mesa 26"), NULL when none matched; and where each choice came from. */
    const char *table_entry;
    vkf_choice_source matmul_source, attention_source, decode_source, coopmat_source;
} vkf_tuning;

/* The Mesa release of a Mesa driver as major * 100 + minor, read from its
 * driverInfo ("Mesa 26.2.6-1 (LLVM 22.1.8)"; lavapipe reports driverVersion 1 up
 * to 25.0 at least); 0 when the device does not say. */
uint32_t vkf_mesa_release(const vkf_device_info *info);
/* The LLVM major version llvmpipe/lavapipe was built with (from driverInfo or the
 * device name, "LLVM 15.0.6"); 0 when not said. */
uint32_t vkf_llvm_major(const vkf_device_info *info);

/* The built-in tiles for a device, from its type, vendor and limits (no device
 * needed: tests call it with made-up devices). */
void vkf_tuning_for_device(const vkf_device_info *info, vkf_tuning *out);
/* The direct kernel's tiles on CPU drivers (also ops.c's fallback from
 * matmul_subgroup for small matmuls). */
extern const vkf_matmul_tiles vkf_cpu_direct_tiles;
/* The matmul_subgroup tiles (bm x bn per workgroup, tm rows x tn columns per
 * lane) for d's subgroup size: false where d has no subgroup shuffles or the sizes
 * do not divide. */
bool vkf_matmul_subgroup_tiles(const vkf_device_info *d, uint32_t bm, uint32_t bn, uint32_t tm, uint32_t tn,
                               vkf_matmul_tiles *out);
/* The matmul_broadcast tiles (bm x bn per workgroup, tm rows per subgroup, tn
 * columns per lane; tm need not be a multiple of the subgroup size) for d's
 * subgroup size: false where the sizes do not divide (out untouched) or the
 * workgroup passes d's limit (out filled). */
bool vkf_matmul_broadcast_tiles(const vkf_device_info *d, uint32_t bm, uint32_t bn, uint32_t tm, uint32_t tn,
                                vkf_matmul_tiles *out);
/* Tiles of the cooperative-matrix kernel `family` (VKF_VARIANT_MATMUL_COOPMAT or
 * _COOPMAT2) on ctx: wg_m x wg_n subgroup tiles of tm x tn, K stages of bk
 * (vkf_coopmat_fragment documents the fragment shapes); false where ctx has no such
 * kernel or the tiles do not fit the device. */
bool vkf_matmul_coopmat_tiles(const vkf_context *ctx, vkf_variant_id family, uint32_t wg_m, uint32_t wg_n, uint32_t tm,
                              uint32_t tn, uint32_t bk, vkf_matmul_tiles *out);
/* The fragment shape (FM, FN, FK: spec constants 6-8) of the coopmat kernel
 * `family` with tiles t on ctx. */
void vkf_coopmat_fragment(const vkf_context *ctx, vkf_variant_id family, const vkf_matmul_tiles *t, uint32_t out[3]);
/* ctx->tuning = the built-in tiles for ctx's device. */
void vkf_tuning_choose(vkf_context *ctx);
/* Replaces the matmul kernel family and tiles (tests, `vkformer tune`); checks them
 * against the device's limits. Sets matmul_min_macs to VKF_SUBGROUP_MIN_MACS for
 * matmul_subgroup, else 0. */
#define VKF_SUBGROUP_MIN_MACS (1ull << 24)
vkf_status vkf_tuning_set_matmul(vkf_context *ctx, vkf_variant_id variant, const vkf_matmul_tiles *tiles);
/* The tuned fused-attention tiles for head_dim: true and *out_tiles
 * filled when a tune file gave tiles for this head_dim, else false. */
struct vkf_attention_tiles;
bool vkf_tuning_attention_tiles(const vkf_context *ctx, uint32_t head_dim, struct vkf_attention_tiles *out_tiles);
/* Loads the device's tune file into ctx->tuning when there is one; anything wrong
 * with it is logged and leaves the built-in choices. tune.c writes the file. */
#define VKF_TUNE_FORMAT "vkformer-tune"
#define VKF_TUNE_VERSION 1
void vkf_tune_load(vkf_context *ctx);

/* ------------------------------------------------------------------ pipeline cache (pipeline_cache.c) */

/* The directory of cache and tune files from the options and environment, in
 * ctx->cache_dir; "" when none can be found ($HOME unset). */
void vkf_cache_dir_resolve(vkf_context *ctx, const char *option);
/* Creates ctx->pipeline_cache, seeded from the device's cache file when
 * ctx->pipeline_cache_on and the file is valid. */
vkf_status vkf_pipeline_cache_create(vkf_context *ctx);
/* Writes the cache back when it changed (temp file, then rename); logs I/O errors. */
void vkf_pipeline_cache_save(vkf_context *ctx);
/* The path of the device's file named `prefix`-ids`suffix` in ctx->cache_dir;
 * false when there is no cache directory or the name does not fit. */
bool vkf_cache_file_path(const vkf_context *ctx, const char *prefix, const char *suffix, bool with_uuid, char *out,
                         size_t capacity);
/* Writes `bytes` to path atomically (temp file in the same directory, then
 * rename), creating the directory; false on failure, with a message in `error`. */
bool vkf_cache_write_file(const char *path, const void *data, size_t bytes, char *error, size_t error_capacity);

/* ------------------------------------------------------------------ context (context.c) and device (device.c) */

struct vkf_context {
    VkInstance instance;                /* owned */
    VkDebugUtilsMessengerEXT messenger; /* owned, or VK_NULL_HANDLE */
    /* Extension entry points of this instance. volk's instance-level pointers are
     * process-wide and follow the last instance loaded, so extension functions
     * (NULL on an instance without the extension) are kept per context. */
    PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;
    VkPhysicalDevice physical;
    VkDevice device;                    /* owned */
    struct VolkDeviceTable vk;          /* device-level entry points */
    VkQueue queue;
    uint32_t queue_family;
    VkCommandPool command_pool;         /* owned */
    VkFence transfer_fence;             /* owned, for uploads/downloads */
    /* owned, made on first use: the staging buffer of transfers up to
     * VKF_SMALL_STAGING bytes (a decode step's ids, positions and candidates),
     * kept so that a step's transfers allocate nothing; larger ones make their own */
    VkBuffer small_staging;
    VkDeviceMemory small_staging_memory;
    void *small_staging_mapped;
    VkPipelineCache pipeline_cache;     /* owned */
    char cache_dir[512];                /* pipeline-cache and tune files; "" none */
    bool pipeline_cache_on;             /* read at create, written at destroy */
    uint64_t pipeline_cache_loaded_hash; /* FNV-1a of the bytes read from the file */
    size_t pipeline_cache_loaded_bytes; /* 0: nothing was read */
    bool tune_on;                       /* look for a tune file */

    vkf_device_info info;
    VkPhysicalDeviceMemoryProperties memory_properties;
    uint32_t device_memory_type;        /* where tensors live */
    uint32_t staging_memory_type;       /* host-visible, coherent */
    bool direct_host_access;            /* tensors are mapped; no staging */
    uint64_t block_size;
    uint64_t alignment;                 /* of tensor offsets inside blocks */
    vkf_block *blocks;                  /* owned list */
    uint64_t allocated, peak_allocated; /* bytes in blocks, now and at most */
    uint64_t max_device_memory;         /* cap on `allocated`; 0: none */
    /* Tests only (vkf_test_inject_fault): the next call named `inject_call`
     * returns `inject_result` instead of running. */
    const char *inject_call;
    VkResult inject_result;
    vkf_tensor *dummy;                  /* owned; bound where an optional input is absent */

    vkf_variant_objects variants[VKF_VARIANT_COUNT];
    vkf_pipeline **pipelines;           /* owned array of owned pipelines (pointers stay valid) */
    uint32_t pipeline_count, pipeline_capacity;

    vkf_tuning tuning;

    bool validation;
    uint32_t validation_errors, validation_warnings;
    vkf_log_fn log;
    void *log_user;
    bool lost;                          /* a device loss was seen; unusable */
    bool storage_16bit;                 /* storageBuffer16BitAccess enabled on the device */
    /* Cooperative matrix: the request (0 off, 1 forced on, -1 vetted drivers only),
     * then what device_create enabled. coopmat: KHR kernels with f16 x f16 -> f32
     * tiles of coopmat_shape (subgroup scope); coopmat2: NV2 flexible dimensions;
     * coopmat2_wg: NV2 workgroup scope, tensor addressing and per-element
     * operations too (matmul_coopmat2_wg), with info.coopmat2_wg_* describing it. */
    int coopmat_request;
    bool coopmat, coopmat2, coopmat2_wg;
    /* VKFORMER_COOPMAT=everywhere: coopmat also where the GPU rule would use it on
     * CPU drivers (F16 matmuls and attention), so tests can run a model's coopmat
     * path on lavapipe; off by default, where the scalar kernels are faster. */
    bool coopmat_everywhere;
    vkf_coopmat_shape coopmat_shape;
    /* The device executes nothing (a virtual GPU over Mesa's drm-shim; options.compile_only
     * or VKFORMER_COMPILE_ONLY=1): pipelines build, results are meaningless. */
    bool compile_only;
    /* options.shader_statistics: VK_KHR_pipeline_executable_properties is enabled and
     * pipelines are created capturing statistics and internal representations
     * (shader_stats.c reads them); false where asked but the device lacks it. */
    bool capture_statistics;
    bool statistics_requested;
};

/* Whether this build embeds the cooperative-matrix shaders (meson found a glslc
 * that compiles them); without them no context turns coopmat on. */
bool vkf_build_has_coopmat(void);
/* The f16 x f16 -> f32 subgroup shape coopmat kernels use on this device: 16x16x16
 * where reported, else the reported one with the most multiply-adds; false when
 * there is none. */
bool vkf_coopmat_choose_shape(const vkf_device_info *info, vkf_coopmat_shape *out);

/* device.c: the instance (with the validation messenger when ctx->validation),
 * the device the options or VKFORMER_DEVICE name, its memory types and limits,
 * and the VkDevice with its queue, command pool and transfer fence, coopmat
 * enabled as ctx->coopmat_request allows. vkf_device_close undoes it (whatever
 * part was made). */
vkf_status vkf_device_open(vkf_context *ctx, const vkf_context_options *options);
void vkf_device_close(vkf_context *ctx);

void vkf_log(const vkf_context *ctx, vkf_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A status for a failed Vulkan call on this context; marks the context lost on
 * VK_ERROR_DEVICE_LOST. */
vkf_status vkf_context_vk_fail(vkf_context *ctx, VkResult result, const char *call);

/* Tests only: makes the next Vulkan call named `call` ("vkAllocateMemory",
 * "vkQueueSubmit", "vkWaitForFences") return `result`, as a failing driver would. */
void vkf_test_inject_fault(vkf_context *ctx, const char *call, VkResult result);
/* The injected result for `call`, once, or VK_SUCCESS. */
VkResult vkf_injected(vkf_context *ctx, const char *call);

/* One-time command buffer for transfers: begin, then end+submit+wait. */
vkf_status vkf_oneshot_begin(vkf_context *ctx, VkCommandBuffer *out_cb);
vkf_status vkf_oneshot_end(vkf_context *ctx, VkCommandBuffer cb);

/* ------------------------------------------------------------------ record.c */

typedef enum vkf_access { VKF_READ = 1, VKF_WRITE = 2 } vkf_access;

typedef struct vkf_binding {
    const vkf_tensor *tensor;           /* NULL: the context's dummy is bound */
    vkf_access access;
} vkf_binding;

/* Appends one dispatch of `variant` with the given bindings (count must match the
 * variant), push constants and workgroup counts. */
vkf_status vkf_cmd_dispatch(vkf_cmd *cmd, const vkf_pipeline *pipeline,
                            const vkf_binding *bindings, uint32_t binding_count,
                            const void *push, uint32_t push_bytes, const uint32_t groups[3],
                            const char *label);
vkf_context *vkf_cmd_context(vkf_cmd *cmd);
/* false once the list has been submitted (no more operations can be added). */
bool vkf_cmd_recording(const vkf_cmd *cmd);
/* Hands an object an operation made for the list (a table, a plan, scratch) to
 * the list: destroy(object) runs when the list is destroyed, in reverse order of
 * handing; bytes (its device memory) count in vkf_cmd_memory. NULL object: no-op.
 * On failure the object is destroyed at once. */
vkf_status vkf_cmd_own(vkf_cmd *cmd, void *object, void (*destroy)(void *object), uint64_t bytes);


/* Largest head_dim the fused kernel takes; larger ones fail with VKF_ERROR_UNSUPPORTED.
 * The accumulator of a query row lives in registers and its K/V rows in shared memory. */
#define VKF_ATTENTION_MAX_HEAD_DIM 256u
/* Specialization constants of attention_fused.comp, in constant_id order (id 5,
 * the vec4s per head row, follows from head_dim). workgroup * tq == bq * td, and
 * td == 1 or tq == 1: the "rows" form (td 1, for CPU drivers) gives each invocation
 * tq whole query rows; the "split" form (tq 1, GPUs) shares a row among td. */
typedef struct vkf_attention_tiles {
    uint32_t workgroup;                 /* id 0: invocations */
    uint32_t bq;                        /* id 1: queries per workgroup */
    uint32_t bk;                        /* id 2: keys per shared-memory tile */
    uint32_t td;                        /* id 3: invocations per query row */
    uint32_t tq;                        /* id 4: query rows per invocation */
    /* 1: attention_fused_lanes.comp, the CPU form without shared memory (keys reach
     * the rows by subgroup shuffles): td 1, bk the subgroup size, workgroup whole
     * subgroups, bq = workgroup * tq; its spec constants are workgroup, bq, bk, the
     * subgroup size, tq, vec4s per row. 0: attention_fused.comp. */
    uint32_t lanes;
} vkf_attention_tiles;
_Static_assert(sizeof(vkf_attention_tiles) == 6 * sizeof(uint32_t), "tiles are uint32");/* Shared memory the kernel declares with these tiles, in bytes (tuning.c, with the
 * tune file's checks). */
uint64_t vkf_attention_shared_bytes(const vkf_attention_tiles *tiles, uint32_t head_dim);
/* Why these tiles cannot run on ctx's device at head_dim (a static string), or
 * NULL (tuning.c): the tune file's check, and `vkformer tune`'s of its candidates. */
const char *vkf_attention_tiles_problem(const vkf_context *ctx, const vkf_attention_tiles *tiles, uint32_t head_dim);

/* ------------------------------------------------------------------ helpers */

static inline uint64_t vkf_div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
static inline uint64_t vkf_align_up(uint64_t a, uint64_t b) { return vkf_div_up(a, b) * b; }


#endif /* VKF_RUNTIME_H */

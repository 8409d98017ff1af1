/* LSH attention (Reformer): the plan (rotations made from a seed on the host, and
 * the scratch the four stages share), argument checks, and the recording of the
 * four dispatches: attention_lsh_hash.comp (bucket of every token per round),
 * attention_lsh_sort.comp (stable counting sort by bucket, one workgroup per
 * (b, h, r)), attention_lsh_attend.comp (online-softmax attention within chunks
 * of the sorted order) and attention_lsh_combine.comp (rounds by log-sum-exp).
 * The algorithm is described in attention_lsh.h.
 *
 * Scratch layouts, for the n of a call (packed for that n, so a smaller n uses a
 * prefix of each tensor), with slab s = (b * heads + h) * rounds + r:
 *   buckets (s, n) I32, sorted (s, n) I32, inv_norm (b * heads + h, n) F32,
 *   rounds (s, n, head_dim) F32 outputs followed by (s, n) F32 lse (log2 units). */
#include "attention/attention_lsh.h"
#include "runtime/push_lsh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct vkf_lsh_plan {
    vkf_context *ctx;                   /* borrowed */
    uint32_t batch, heads, head_dim, rounds, chunk, buckets; /* buckets as given (0: derived) */
    uint32_t max_n;
    uint32_t max_buckets;               /* nb at max_n */
    uint32_t rot_cols;                  /* nb(max_n) / 2; 0 when nb == 1 */
    float *rotations_host;              /* owned; (rounds, head_dim, rot_cols), NULL when rot_cols == 0 */
    vkf_tensor *rotations;              /* owned; the same as (rounds, ceil(rot_cols / 8), head_dim, 8) F32,
                                         * zero past rot_cols: see attention_lsh_hash.comp */
    vkf_tensor *bucket_ids;             /* owned; (batch, heads, rounds, max_n) I32 */
    vkf_tensor *sorted;                 /* owned; (batch, heads, rounds, max_n) I32 */
    vkf_tensor *inv_norm;               /* owned; (batch, heads, max_n) F32 */
    vkf_tensor *round_out;              /* owned; (batch, heads, rounds, max_n, head_dim + 1) F32 */
    /* Workgroup sizes and tiles, chosen once from the device's limits. */
    uint32_t sort_wg;                   /* sort: invocations (the histogram has max_buckets + 1 bins) */
    uint32_t attend_wg, attend_bk, attend_tq; /* attend: invocations, keys per tile, query rows per invocation */
};

/* ------------------------------------------------------------------ sizes */

static uint32_t pow2_floor(uint32_t v)
{
    uint32_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

uint32_t vkf_lsh_bucket_count(uint32_t n, uint32_t chunk, uint32_t buckets)
{
    if (buckets) return buckets;
    if (!chunk) return 2;
    uint64_t half = vkf_div_up(n, 2ull * chunk);
    return half < 1 ? 2u : half > UINT32_MAX / 2 ? UINT32_MAX - 1 : (uint32_t)(2 * half);
}

static uint32_t max_workgroup(const vkf_context *ctx)
{
    const vkf_device_info *d = &ctx->info;
    return d->max_workgroup_invocations < d->max_workgroup_size[0] ? d->max_workgroup_invocations
                                                                   : d->max_workgroup_size[0];
}

/* Shared memory of attention_lsh_attend.comp with these tiles, in bytes. */
static uint64_t attend_shared_bytes(uint32_t bq, uint32_t bk, uint32_t head_dim)
{
    uint64_t d4 = vkf_div_up(head_dim, 4);
    return 2 * (uint64_t)bk * d4 * 16   /* k_tile, v_tile */
           + (uint64_t)bk * 4           /* key_pos */
           + (uint64_t)bk * bq * 4;     /* p_tile */
}

/* Shared memory of attention_lsh_sort.comp, in bytes. */
static uint64_t sort_shared_bytes(uint32_t wg, uint32_t buckets) { return ((uint64_t)buckets + 1) * 4 + (uint64_t)wg * 4; }

/* workgroups laid out in 2-D past the x limit (the shaders undo it with
 * linear_workgroup()); fails when the device's grid cannot hold them. */
static vkf_status grid_2d(const vkf_context *ctx, uint64_t count, const char *fn, const char *stage, uint32_t groups[3])
{
    uint64_t max_x = ctx->info.max_workgroup_count[0];
    uint64_t gx = count < max_x ? count : max_x, gy = vkf_div_up(count, gx);
    if (count > UINT32_MAX || gy > ctx->info.max_workgroup_count[1])
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: the %s stage needs %llu workgroups; the device's grid holds %u x %u",
                        fn, stage, (unsigned long long)count, ctx->info.max_workgroup_count[0],
                        ctx->info.max_workgroup_count[1]);
    groups[0] = (uint32_t)gx, groups[1] = (uint32_t)gy, groups[2] = 1;
    return VKF_OK;
}

/* ------------------------------------------------------------------ rotations */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* count standard Gaussian values from seed: splitmix64 uniforms in (0, 1), Box–Muller in double. */
static void gaussians(float *out, uint64_t count, uint64_t seed)
{
    uint64_t state = seed;
    for (uint64_t i = 0; i < count; i += 2) {
        double u1 = ((splitmix64(&state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        double u2 = ((splitmix64(&state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        double radius = sqrt(-2.0 * log(u1)), angle = 6.283185307179586 * u2;
        out[i] = (float)(radius * cos(angle));
        if (i + 1 < count) out[i + 1] = (float)(radius * sin(angle));
    }
}

/* ------------------------------------------------------------------ plan */

static vkf_status make_tensor(vkf_context *ctx, vkf_dtype dtype, uint64_t elements, vkf_tensor **out)
{
    return vkf_tensor_create(ctx, dtype, 1, &elements, out);
}

/* The shape fields every call checks, with the messages naming the field. */
static vkf_status check_shape(const vkf_lsh_desc *d, const char *fn)
{
    if (!d->batch || !d->heads || !d->head_dim || !d->rounds || !d->chunk)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "%s: sizes must be positive (batch %u, heads %u, head_dim %u, rounds %u, chunk %u)", fn,
                        d->batch, d->heads, d->head_dim, d->rounds, d->chunk);
    if (d->head_dim > VKF_ATTENTION_MAX_HEAD_DIM)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: head_dim %u exceeds the LSH kernels' limit of %u", fn, d->head_dim,
                        VKF_ATTENTION_MAX_HEAD_DIM);
    if (d->buckets != 0 && d->buckets != 1 && d->buckets % 2 != 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: buckets %u must be 0 (derived), 1 or even", fn, d->buckets);
    return VKF_OK;
}

vkf_status vkf_lsh_plan_create(vkf_context *ctx, const vkf_lsh_desc *shape, uint32_t max_n, uint64_t seed,
                               vkf_lsh_plan **out_plan)
{
    static const char fn[] = "vkf_lsh_plan_create";
    if (!out_plan) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out_plan is NULL", fn);
    *out_plan = NULL;
    if (!ctx) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: context is NULL", fn);
    if (!shape) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: shape is NULL", fn);
    if (ctx->lost) return vkf_fail(VKF_ERROR_DEVICE_LOST, "the device was lost; destroy and recreate the context");
    VKF_TRY(check_shape(shape, fn));
    if (!max_n) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: max_n must be positive", fn);
    /* Positions and (c + 1) · chunk (at most 2n) are 32-bit in the shaders. */
    if (max_n > INT32_MAX) return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: max_n %u passes 2^31", fn, max_n);
    uint32_t nb = vkf_lsh_bucket_count(max_n, shape->chunk, shape->buckets);
    /* Every index of the round buffer (outputs and lse) fits 32 bits. */
    uint64_t slabs = (uint64_t)shape->batch * shape->heads * shape->rounds;
    uint64_t rows = slabs * max_n;
    if (slabs > UINT32_MAX || rows > UINT32_MAX / ((uint64_t)shape->head_dim + 1))
        return vkf_fail(VKF_ERROR_TOO_LARGE,
                        "%s: batch %u x heads %u x rounds %u x max_n %u x (head_dim %u + 1) round outputs pass 2^32 "
                        "elements", fn, shape->batch, shape->heads, shape->rounds, max_n, shape->head_dim);

    vkf_lsh_plan *p = calloc(1, sizeof *p);
    if (!p) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    p->ctx = ctx;
    p->batch = shape->batch, p->heads = shape->heads, p->head_dim = shape->head_dim;
    p->rounds = shape->rounds, p->chunk = shape->chunk, p->buckets = shape->buckets;
    p->max_n = max_n, p->max_buckets = nb, p->rot_cols = nb / 2;

    /* Sort: a CPU driver pays for every barrier and runs the tile's same-bucket
     * count lane by lane (WG² per tile), so a small workgroup there. */
    uint32_t max_wg = max_workgroup(ctx);
    uint32_t want = ctx->info.type == VKF_DEVICE_CPU ? 64u : 256u;
    p->sort_wg = pow2_floor(max_wg < want ? max_wg : want);
    while (p->sort_wg > 1 && sort_shared_bytes(p->sort_wg, nb) > ctx->info.max_shared_memory) p->sort_wg /= 2;
    if (sort_shared_bytes(p->sort_wg, nb) > ctx->info.max_shared_memory) {
        free(p);
        return vkf_fail(VKF_ERROR_UNSUPPORTED,
                        "%s: %u buckets (n %u, chunk %u) need %llu bytes of shared memory for the sort's counters; "
                        "the device has %u (at most %u buckets)", fn, nb, max_n, shape->chunk,
                        (unsigned long long)sort_shared_bytes(1, nb), ctx->info.max_shared_memory,
                        ctx->info.max_shared_memory / 4 - 2);
    }
    /* Attend. On a CPU driver, which runs a workgroup as SIMD lanes and loads
     * shared memory lane by lane: one SIMD width of invocations (at least 8) of
     * tq = 4 query rows each, so every K/V value loaded feeds 4 rows (tq · d4 <= 64
     * vec4s of q in registers, as attention_fused's rows form). Lavapipe, 8 heads
     * of 64, n 1024, H 2, C 64, attend stage: (tq 1, wg 64) 418 ms, (2, 32) 172,
     * (4, 16) 120, (4, 4) 135, (8, 4) 83 but 8 s to compile, (4, 8) 71. Elsewhere
     * 64 invocations of one row (a chunk of Reformer's usual size). Keys per
     * tile: as many (up to 32) as shared memory holds. */
    uint32_t d4 = (uint32_t)vkf_div_up(p->head_dim, 4);
    if (ctx->info.type == VKF_DEVICE_CPU) {
        uint32_t lanes = ctx->info.subgroup_size > 8 ? ctx->info.subgroup_size : 8;
        p->attend_tq = 64 / d4 >= 4 ? 4 : 64 / d4 >= 1 ? pow2_floor(64 / d4) : 1;
        p->attend_wg = pow2_floor(max_wg < lanes ? max_wg : lanes);
    } else {
        p->attend_tq = 1;
        p->attend_wg = pow2_floor(max_wg < 64 ? max_wg : 64);
    }
    p->attend_bk = 32;
    while (attend_shared_bytes(p->attend_wg * p->attend_tq, p->attend_bk, p->head_dim) > ctx->info.max_shared_memory) {
        if (p->attend_bk > 4) p->attend_bk /= 2;
        else if (p->attend_tq > 1) p->attend_tq /= 2;
        else if (p->attend_wg > 8) p->attend_wg /= 2;
        else if (p->attend_bk > 1) p->attend_bk /= 2;
        else break; /* cannot happen for head_dim <= 256 within Vulkan's 16 KiB minimum */
    }

    /* Rotations: Gaussian (rounds, head_dim, rot_cols) on the host, uploaded in
     * the hash shader's blocks of 8 columns. */
    uint64_t rot_elements = (uint64_t)p->rounds * p->head_dim * p->rot_cols;
    uint64_t blocks = vkf_div_up(p->rot_cols, 8), dev_elements = (uint64_t)p->rounds * blocks * p->head_dim * 8;
    vkf_status st = VKF_OK;
    if (rot_elements) {
        p->rotations_host = malloc(rot_elements * sizeof(float));
        float *dev = calloc(dev_elements, sizeof(float));
        if (!p->rotations_host || !dev) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory for the rotations", fn);
        if (st == VKF_OK) {
            gaussians(p->rotations_host, rot_elements, seed);
            for (uint64_t r = 0; r < p->rounds; r++)
                for (uint64_t d = 0; d < p->head_dim; d++)
                    for (uint64_t c = 0; c < p->rot_cols; c++)
                        dev[((r * blocks + c / 8) * p->head_dim + d) * 8 + c % 8] =
                            p->rotations_host[(r * p->head_dim + d) * p->rot_cols + c];
            st = make_tensor(ctx, VKF_DTYPE_F32, dev_elements, &p->rotations);
        }
        if (st == VKF_OK) st = vkf_tensor_upload(p->rotations, dev, dev_elements * sizeof(float));
        free(dev);
    }
    if (st == VKF_OK) st = make_tensor(ctx, VKF_DTYPE_I32, rows, &p->bucket_ids);
    if (st == VKF_OK) st = make_tensor(ctx, VKF_DTYPE_I32, rows, &p->sorted);
    if (st == VKF_OK) st = make_tensor(ctx, VKF_DTYPE_F32, (uint64_t)p->batch * p->heads * max_n, &p->inv_norm);
    if (st == VKF_OK) st = make_tensor(ctx, VKF_DTYPE_F32, rows * ((uint64_t)p->head_dim + 1), &p->round_out);
    if (st != VKF_OK) {
        vkf_lsh_plan_destroy(p);
        return st;
    }
    *out_plan = p;
    return VKF_OK;
}

void vkf_lsh_plan_destroy(vkf_lsh_plan *p)
{
    if (!p) return;
    vkf_tensor_destroy(p->rotations);
    vkf_tensor_destroy(p->bucket_ids);
    vkf_tensor_destroy(p->sorted);
    vkf_tensor_destroy(p->inv_norm);
    vkf_tensor_destroy(p->round_out);
    free(p->rotations_host);
    free(p);
}

uint64_t vkf_lsh_plan_bytes(const vkf_lsh_plan *p)
{
    if (!p) return 0;
    uint64_t bytes = 0;
    const vkf_tensor *all[] = {p->rotations, p->bucket_ids, p->sorted, p->inv_norm, p->round_out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) bytes += vkf_tensor_bytes(all[i]);
    return bytes;
}

vkf_tensor *vkf_lsh_plan_buckets(const vkf_lsh_plan *p) { return p ? p->bucket_ids : NULL; }
vkf_tensor *vkf_lsh_plan_sorted(const vkf_lsh_plan *p) { return p ? p->sorted : NULL; }
const float *vkf_lsh_plan_rotations(const vkf_lsh_plan *p) { return p ? p->rotations_host : NULL; }
uint32_t vkf_lsh_plan_rotation_cols(const vkf_lsh_plan *p) { return p ? p->rot_cols : 0; }

vkf_status vkf_lsh_plan_set_tiles(vkf_lsh_plan *p, uint32_t sort_wg, uint32_t attend_wg, uint32_t attend_bk,
                                  uint32_t attend_tq)
{
    static const char fn[] = "vkf_lsh_plan_set_tiles";
    if (!p) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: plan is NULL", fn);
    if (!sort_wg || !attend_wg || !attend_bk || !attend_tq)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive (sort %u, attend %u, bk %u, tq %u)", fn,
                        sort_wg, attend_wg, attend_bk, attend_tq);
    const vkf_device_info *info = &p->ctx->info;
    uint32_t max_wg = max_workgroup(p->ctx);
    if (sort_wg > max_wg || attend_wg > max_wg)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: workgroups of %u (sort) / %u (attend) exceed the device's %u", fn,
                        sort_wg, attend_wg, max_wg);
    uint64_t sort_bytes = sort_shared_bytes(sort_wg, p->max_buckets);
    uint64_t attend_bytes = attend_shared_bytes(attend_wg * attend_tq, attend_bk, p->head_dim);
    if (sort_bytes > info->max_shared_memory || attend_bytes > info->max_shared_memory)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: %llu (sort) / %llu (attend) bytes of shared memory; the device has %u",
                        fn, (unsigned long long)sort_bytes, (unsigned long long)attend_bytes, info->max_shared_memory);
    p->sort_wg = sort_wg, p->attend_wg = attend_wg, p->attend_bk = attend_bk, p->attend_tq = attend_tq;
    return VKF_OK;
}

/* ------------------------------------------------------------------ op */

vkf_status vkf_op_attention_lsh(vkf_cmd *cmd, vkf_lsh_plan *p, const vkf_lsh_desc *d)
{
    static const char fn[] = "attention_lsh";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!p) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: plan is NULL", fn);
    if (p->ctx != ctx) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: the plan belongs to another context", fn);
    VKF_TRY(check_shape(d, fn));
    if (!d->n) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: n must be positive", fn);
    if (d->batch != p->batch || d->heads != p->heads || d->head_dim != p->head_dim || d->rounds != p->rounds ||
        d->chunk != p->chunk || d->buckets != p->buckets)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "%s: desc (batch %u, heads %u, head_dim %u, rounds %u, chunk %u, buckets %u) does not match "
                        "the plan (batch %u, heads %u, head_dim %u, rounds %u, chunk %u, buckets %u)", fn, d->batch,
                        d->heads, d->head_dim, d->rounds, d->chunk, d->buckets, p->batch, p->heads, p->head_dim,
                        p->rounds, p->chunk, p->buckets);
    if (d->n > p->max_n) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: n %u exceeds the plan's max_n %u", fn, d->n, p->max_n);
    if (!isfinite(d->scale)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: scale is not finite", fn);
    float scale2 = (float)(d->scale * 1.4426950408889634); /* exp(x) = exp2(x log2 e) */
    if (!isfinite(scale2)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: scale %g is out of range", fn, d->scale);

    const uint32_t n = d->n, nb = vkf_lsh_bucket_count(n, d->chunk, d->buckets);
    /* the attend stage walks a chunk's keys and the previous chunk's in one invocation */
    uint64_t keys = 2ull * d->chunk < n ? 2ull * d->chunk : n;
    vkf_attention_tiles rows = {.workgroup = p->attend_wg, .bq = p->attend_wg * p->attend_tq, .bk = p->attend_bk,
                                .td = 1, .tq = p->attend_tq};
    if (vkf_loop_limited(ctx) &&
        vkf_attention_loop_count(&rows, d->head_dim, keys) > VKF_LOOP_BUDGET)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: chunks of %u tokens: their %llu keys are more than one invocation of "
                        "\"%s\" runs right (Mesa before 26 ends an invocation's loops after 65535 iterations)", fn,
                        d->chunk, (unsigned long long)keys, ctx->info.name);
    const uint64_t dm = (uint64_t)d->heads * d->head_dim;
    const uint64_t slabs = (uint64_t)d->batch * d->heads * d->rounds; /* fits 32 bits: plan check */
    uint64_t out_elements = (uint64_t)d->batch * n * dm;
    if (out_elements > UINT32_MAX)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: out (%llu elements) passes 2^32", fn, (unsigned long long)out_elements);
    uint32_t qv[3], vv[3];
    VKF_TRY(vkf_check_attention_view(cmd, &d->q, VKF_DTYPE_F32, d->batch, n, dm, fn, "q", qv));
    VKF_TRY(vkf_check_attention_view(cmd, &d->v, VKF_DTYPE_F32, d->batch, n, dm, fn, "v", vv));
    if (d->key_lengths) VKF_TRY(vkf_check_tensor(cmd, d->key_lengths, VKF_DTYPE_I32, d->batch, fn, "key_lengths"));
    VKF_TRY(vkf_check_tensor(cmd, d->out, VKF_DTYPE_F32, out_elements, fn, "out"));
    if (vkf_tensors_overlap(d->out, d->q.tensor) || vkf_tensors_overlap(d->out, d->v.tensor) || vkf_tensors_overlap(d->out, d->key_lengths))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out may not alias q, v or key_lengths", fn);
    uint32_t flags = (d->key_lengths ? VKF_LSH_FLAG_LENGTHS : 0u) | (d->causal ? VKF_LSH_FLAG_CAUSAL : 0u);

    /* Every grid first, so that a refused call records nothing. */
    uint32_t elementwise = ctx->tuning.elementwise_workgroup;
    uint32_t chunk = d->chunk < n ? d->chunk : n;
    uint32_t chunks = (uint32_t)vkf_div_up(n, chunk), q_blocks = (uint32_t)vkf_div_up(chunk, p->attend_wg * p->attend_tq);
    uint64_t attend_groups = slabs * chunks * q_blocks;
    uint32_t g_hash[3], g_sort[3], g_attend[3], g_combine[3];
    VKF_TRY(grid_2d(ctx, vkf_div_up(slabs * n, elementwise), fn, "hash", g_hash));
    VKF_TRY(grid_2d(ctx, slabs, fn, "sort", g_sort));
    VKF_TRY(grid_2d(ctx, attend_groups, fn, "attend", g_attend));
    VKF_TRY(grid_2d(ctx, vkf_div_up((uint64_t)d->batch * n * d->heads, elementwise), fn, "combine", g_combine));

    /* Each pipeline is looked up just before its dispatch: a lookup that creates
     * one may move the context's pipeline array, and earlier pointers with it. */
    const vkf_pipeline *pipe;
    uint32_t spec_elementwise[1] = {elementwise};
    uint32_t spec_sort[2] = {p->sort_wg, p->max_buckets + 1};
    uint32_t spec_attend[4] = {p->attend_wg, p->attend_bk, (uint32_t)vkf_div_up(d->head_dim, 4), p->attend_tq};

    /* 1. hash: buckets (slab, n), inv_norm (b * heads + h, n). */
    vkf_push_lsh_hash ph = {
        .heads = d->heads, .head_dim = d->head_dim, .n = n, .rounds = d->rounds,
        .half_buckets = nb / 2, .rot_cols = p->rot_cols, .buckets = nb,
        .q_offset = qv[0], .q_row = qv[1], .q_batch = qv[2],
        .flags = flags, .total = (uint32_t)(slabs * n),
    };
    vkf_binding bh[5] = {
        {d->q.tensor, VKF_READ}, {p->rotations, VKF_READ}, {d->key_lengths, VKF_READ},
        {p->bucket_ids, VKF_WRITE}, {p->inv_norm, VKF_WRITE},
    };
    VKF_TRY(vkf_pipeline_get(ctx, VKF_VARIANT_LSH_HASH, spec_elementwise, 1, &pipe));
    VKF_TRY(vkf_cmd_dispatch(cmd, pipe, bh, 5, &ph, sizeof ph, g_hash, "lsh_hash"));

    /* 2. sort: sorted (slab, n), stable by bucket. */
    vkf_push_lsh_sort ps = {.n = n, .buckets = nb, .slabs = (uint32_t)slabs};
    vkf_binding bs[2] = {{p->bucket_ids, VKF_READ}, {p->sorted, VKF_WRITE}};
    VKF_TRY(vkf_pipeline_get(ctx, VKF_VARIANT_LSH_SORT, spec_sort, 2, &pipe));
    VKF_TRY(vkf_cmd_dispatch(cmd, pipe, bs, 2, &ps, sizeof ps, g_sort, "lsh_sort"));

    /* 3. attend: per round o_r (slab, n, head_dim) and lse_r (slab, n). */
    uint32_t lse_offset = (uint32_t)(slabs * n * d->head_dim);
    vkf_push_lsh_attend pa = {
        .heads = d->heads, .head_dim = d->head_dim, .n = n, .rounds = d->rounds,
        .chunk = chunk, .chunks = chunks, .q_blocks = q_blocks, .scale = scale2,
        .q_offset = qv[0], .q_row = qv[1], .q_batch = qv[2],
        .v_offset = vv[0], .v_row = vv[1], .v_batch = vv[2],
        .flags = flags, .lse_offset = lse_offset, .groups = (uint32_t)attend_groups,
    };
    vkf_binding ba[6] = {
        {d->q.tensor, VKF_READ}, {d->v.tensor, VKF_READ}, {d->key_lengths, VKF_READ},
        {p->sorted, VKF_READ}, {p->inv_norm, VKF_READ}, {p->round_out, VKF_WRITE},
    };
    VKF_TRY(vkf_pipeline_get(ctx, VKF_VARIANT_LSH_ATTEND, spec_attend, 4, &pipe));
    VKF_TRY(vkf_cmd_dispatch(cmd, pipe, ba, 6, &pa, sizeof pa, g_attend, "lsh_attend"));

    /* 4. combine: out (batch * n, heads * head_dim). */
    vkf_push_lsh_combine pc = {
        .heads = d->heads, .head_dim = d->head_dim, .n = n, .rounds = d->rounds,
        .lse_offset = lse_offset, .total = (uint32_t)((uint64_t)d->batch * n * d->heads),
    };
    vkf_binding bc[2] = {{p->round_out, VKF_READ}, {d->out, VKF_WRITE}};
    VKF_TRY(vkf_pipeline_get(ctx, VKF_VARIANT_LSH_COMBINE, spec_elementwise, 1, &pipe));
    return vkf_cmd_dispatch(cmd, pipe, bc, 2, &pc, sizeof pc, g_combine, "lsh_combine");
}

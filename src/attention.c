/* Attention variants. Today: the fused kernel for many queries (shaders/
 * attention_fused.comp), FlashAttention-style — one workgroup per (batch·head,
 * block of queries) walks the keys in shared-memory tiles with an online softmax,
 * so no (lq, lk) score matrix is ever written — with key-length padding, causal
 * masking and the local / strided sparsity patterns, whose excluded key blocks are
 * skipped. This file chooses the kernel's tiles for the device, checks the
 * arguments against the tensors and limits, and records the dispatch. */
#include "internal.h"
#include "push.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ tiles */

static uint32_t pow2_floor(uint32_t v)
{
    uint32_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

uint64_t vkf_attention_shared_bytes(const vkf_attention_tiles *t, uint32_t head_dim)
{
    /* Mirrors the shared arrays of attention_fused.comp. */
    uint64_t d4 = vkf_div_up(head_dim, 4), split_rows = t->td > 1 ? t->bq : 1;
    return 2 * (uint64_t)t->bk * d4 * 16        /* k_tile, v_tile */
           + (uint64_t)t->bk * 4                /* key_slot */
           + (uint64_t)t->bq * t->bk * 4        /* p_tile */
           + split_rows * d4 * 16               /* q_tile */
           + split_rows * t->td * 4;            /* row_part */
}

void vkf_attention_tiles_choose(const vkf_context *ctx, uint32_t head_dim, vkf_attention_tiles *out)
{
    const vkf_device_info *d = &ctx->info;
    uint32_t max_wg = d->max_workgroup_invocations < d->max_workgroup_size[0] ? d->max_workgroup_invocations
                                                                             : d->max_workgroup_size[0];
    uint32_t d4 = (uint32_t)vkf_div_up(head_dim ? head_dim : 1, 4);
    vkf_attention_tiles t;
    if (d->type == VKF_DEVICE_CPU) {
        /* Rows form: every K/V value loaded from shared memory (lane by lane on a
         * CPU driver) feeds tq query rows held in registers; two barriers per tile.
         * tq * d4 <= 64 vec4s of q (and as many of accumulators) per invocation:
         * more runs faster but compiles much slower (lavapipe, head_dim 64, n 256:
         * tq 4: 29 ms, 3 s to compile; tq 8: 21 ms, 8 s; head_dim 256, tq 4: 35 s). */
        uint32_t tq = 64 / d4 >= 8 ? 8 : 64 / d4 >= 1 ? pow2_floor(64 / d4) : 1;
        t = (vkf_attention_tiles){.workgroup = 16, .bq = 16 * tq, .bk = 32, .td = 1, .tq = tq};
    } else {
        /* Split form: td invocations share a row's head_dim (each owns a few vec4s
         * of the accumulator) and its keys' scores. */
        uint32_t td = d4 < 8 ? pow2_floor(d4) : d4 < 32 ? 8 : 16;
        uint32_t wg = max_wg < 256 ? pow2_floor(max_wg) : 256;
        if (td > wg) td = wg;
        t = (vkf_attention_tiles){.workgroup = wg, .bq = wg / td, .bk = 32, .td = td, .tq = 1};
    }
    /* Fit the workgroup, then shared memory: keys per tile down to 8, then queries
     * per workgroup down to 8, then both down to 1. */
    while (t.bq * t.td / t.tq > max_wg && t.bq > t.tq) t.bq /= 2;
    for (;;) {
        if (t.bq < t.tq) t.tq = t.bq;
        t.workgroup = t.bq * t.td / t.tq;
        if (vkf_attention_shared_bytes(&t, head_dim) <= d->max_shared_memory) break;
        if (t.bk > 8) t.bk /= 2;
        else if (t.bq > 8) t.bq /= 2;
        else if (t.bk > 1) t.bk /= 2;
        else if (t.bq > 1) t.bq /= 2;
        else break; /* cannot happen for head_dim <= 256 within Vulkan's 16 KiB minimum */
    }
    *out = t;
}

/* ------------------------------------------------------------------ checks */

/* A (batch, rows, cols) view lies inside its tensor and every index fits the
 * shader's 32 bits. Fills offset, row and batch strides (defaults resolved). */
static vkf_status check_view(vkf_cmd *cmd, const vkf_attention_view *v, uint64_t batch, uint64_t rows, uint64_t cols,
                             const char *fn, const char *name, uint32_t out[3])
{
    VKF_TRY(vkf_check_tensor(cmd, v->tensor, VKF_DTYPE_F32, 1, fn, name));
    uint64_t row = v->row_stride ? v->row_stride : cols;
    if (row < cols && rows > 1)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s row_stride %llu is less than heads * head_dim = %llu", fn,
                        name, (unsigned long long)row, (unsigned long long)cols);
    uint64_t bs = v->batch_stride, last = v->offset, term;
    bool overflow = !bs && __builtin_mul_overflow(rows, row, &bs);
    overflow |= __builtin_mul_overflow(batch - 1, bs, &term) || __builtin_add_overflow(last, term, &last);
    overflow |= __builtin_mul_overflow(rows - 1, row, &term) || __builtin_add_overflow(last, term, &last);
    overflow |= __builtin_add_overflow(last, cols - 1, &last);
    if (overflow || last >= v->tensor->elements)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "%s: %s view (offset %llu, row stride %llu, batch stride %llu; %llu x %llu rows x %llu cols) "
                        "reaches past the tensor's %llu elements",
                        fn, name, (unsigned long long)v->offset, (unsigned long long)row, (unsigned long long)bs,
                        (unsigned long long)batch, (unsigned long long)rows, (unsigned long long)cols,
                        (unsigned long long)v->tensor->elements);
    if (last > UINT32_MAX || bs > UINT32_MAX || row > UINT32_MAX)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %s indices pass 2^32 elements", fn, name);
    out[0] = (uint32_t)v->offset, out[1] = (uint32_t)row, out[2] = (uint32_t)bs;
    return VKF_OK;
}

static bool same_tensor_overlap(const vkf_tensor *a, const vkf_tensor *b)
{
    return a && b && a->block == b->block && a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

static vkf_status check_tiles(const vkf_context *ctx, const vkf_attention_tiles *t, uint32_t head_dim, const char *fn)
{
    if (!t->bq || !t->bk || !t->td || !t->tq || (t->td > 1 && t->tq > 1) ||
        (uint64_t)t->workgroup * t->tq != (uint64_t)t->bq * t->td)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "%s: tiles (workgroup %u, bq %u, bk %u, td %u, tq %u) need workgroup * tq == bq * td, all "
                        "positive, and td or tq 1", fn, t->workgroup, t->bq, t->bk, t->td, t->tq);
    if (t->workgroup > ctx->info.max_workgroup_invocations || t->workgroup > ctx->info.max_workgroup_size[0])
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: workgroup %u exceeds the device's %u invocations", fn,
                        t->workgroup, ctx->info.max_workgroup_invocations);
    uint64_t shared = vkf_attention_shared_bytes(t, head_dim);
    if (shared > ctx->info.max_shared_memory)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: tiles (bq %u, bk %u, td %u, head_dim %u) need %llu bytes of shared "
                        "memory; the device has %u", fn, t->bq, t->bk, t->td, head_dim, (unsigned long long)shared,
                        ctx->info.max_shared_memory);
    return VKF_OK;
}

/* ------------------------------------------------------------------ op */

void vkf_attention_desc_init(vkf_attention_desc *d)
{
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->scale = 1.0f;
}

vkf_status vkf_op_attention_fused(vkf_cmd *cmd, const vkf_attention_desc *d)
{
    static const char fn[] = "attention_fused";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!d->batch || !d->heads || !d->head_dim || !d->lq || !d->lk)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "%s: sizes must be positive (batch %u, heads %u, head_dim %u, lq %u, lk %u)", fn, d->batch,
                        d->heads, d->head_dim, d->lq, d->lk);
    if (d->head_dim > VKF_ATTENTION_MAX_HEAD_DIM)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: head_dim %u exceeds the fused kernel's limit of %u", fn,
                        d->head_dim, VKF_ATTENTION_MAX_HEAD_DIM);
    if (!isfinite(d->scale)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: scale is not finite", fn);
    if ((unsigned)d->pattern > VKF_ATTENTION_STRIDED)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: unknown pattern %d", fn, (int)d->pattern);
    if (d->pattern == VKF_ATTENTION_STRIDED && d->stride == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: strided pattern with stride 0", fn);
    /* Positions are compared as 32-bit values in the shader (i + W + 1, i + offset + 1). */
    if (d->lq > INT32_MAX || d->lk > INT32_MAX)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: lq %u / lk %u pass 2^31", fn, d->lq, d->lk);

    uint64_t dm = (uint64_t)d->heads * d->head_dim;
    uint32_t longest = d->lq > d->lk ? d->lq : d->lk;
    vkf_push_attention_fused p = {
        .batch = d->batch,
        .heads = d->heads,
        .head_dim = d->head_dim,
        .lq = d->lq,
        .lk = d->lk,
        .scale = (float)(d->scale * 1.4426950408889634), /* exp(x) = exp2(x log2 e) */
        .flags = (d->key_lengths ? VKF_ATTENTION_FLAG_LENGTHS : 0u) | (d->causal ? VKF_ATTENTION_FLAG_CAUSAL : 0u),
        /* Past lk - 1 the causal limit excludes nothing; past max(lq, lk) the window neither. */
        .causal_offset = d->causal_offset < d->lk ? d->causal_offset : d->lk,
        .pattern = (uint32_t)d->pattern,
        .window = d->window < longest ? d->window : longest,
        .stride = d->pattern == VKF_ATTENTION_STRIDED ? d->stride : 1u,
    };
    if (!isfinite(p.scale)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: scale %g is out of range", fn, d->scale);
    uint64_t out_elements = (uint64_t)d->batch * d->lq * dm;
    if (out_elements > UINT32_MAX)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: out (%llu elements) passes 2^32", fn,
                        (unsigned long long)out_elements);

    vkf_attention_tiles tiles;
    if (d->tiles) tiles = *d->tiles;
    else vkf_attention_tiles_choose(ctx, d->head_dim, &tiles);
    VKF_TRY(check_tiles(ctx, &tiles, d->head_dim, fn));

    /* Grid: (batch · heads) × query blocks workgroups, laid out in 2-D past the x
     * limit; the shader undoes it with linear_workgroup() and skips the padding. */
    p.q_blocks = (uint32_t)vkf_div_up(d->lq, tiles.bq);
    uint64_t count = (uint64_t)p.q_blocks * d->batch * d->heads;
    uint64_t max_x = ctx->info.max_workgroup_count[0];
    uint64_t gx = count < max_x ? count : max_x, gy = vkf_div_up(count, gx);
    if (count > UINT32_MAX || gy > ctx->info.max_workgroup_count[1])
        return vkf_fail(VKF_ERROR_TOO_LARGE,
                        "%s: %llu workgroups (%u query blocks x %u batch x %u heads) exceed the device's grid of "
                        "%u x %u", fn, (unsigned long long)count, p.q_blocks, d->batch, d->heads,
                        ctx->info.max_workgroup_count[0], ctx->info.max_workgroup_count[1]);
    uint32_t groups[3] = {(uint32_t)gx, (uint32_t)gy, 1};

    uint32_t view[3];
    VKF_TRY(check_view(cmd, &d->q, d->batch, d->lq, dm, fn, "q", view));
    p.q_offset = view[0], p.q_row = view[1], p.q_batch = view[2];
    VKF_TRY(check_view(cmd, &d->k, d->batch, d->lk, dm, fn, "k", view));
    p.k_offset = view[0], p.k_row = view[1], p.k_batch = view[2];
    VKF_TRY(check_view(cmd, &d->v, d->batch, d->lk, dm, fn, "v", view));
    p.v_offset = view[0], p.v_row = view[1], p.v_batch = view[2];
    if (d->key_lengths) VKF_TRY(vkf_check_tensor(cmd, d->key_lengths, VKF_DTYPE_I32, d->batch, fn, "key_lengths"));
    VKF_TRY(vkf_check_tensor(cmd, d->out, VKF_DTYPE_F32, out_elements, fn, "out"));
    if (same_tensor_overlap(d->out, d->q.tensor) || same_tensor_overlap(d->out, d->k.tensor) ||
        same_tensor_overlap(d->out, d->v.tensor) || same_tensor_overlap(d->out, d->key_lengths))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out may not alias q, k, v or key_lengths", fn);

    uint32_t spec[6] = {tiles.workgroup, tiles.bq, tiles.bk, tiles.td, tiles.tq, (uint32_t)vkf_div_up(d->head_dim, 4)};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, VKF_VARIANT_ATTENTION_FUSED, spec, 6, &pipe));
    vkf_binding b[5] = {
        {d->q.tensor, VKF_READ}, {d->k.tensor, VKF_READ}, {d->v.tensor, VKF_READ},
        {d->key_lengths, VKF_READ}, {d->out, VKF_WRITE},
    };
    return vkf_cmd_dispatch(cmd, pipe, b, 5, &p, sizeof p, groups, "attention_fused");
}

/* Attention variants. Today: the fused kernel for many queries (shaders/
 * attention_fused.comp), FlashAttention-style — one workgroup per (batch·head,
 * block of queries) walks the keys in shared-memory tiles with an online softmax,
 * so no (lq, lk) score matrix is ever written — with key-length padding, causal
 * masking and the local / strided sparsity patterns, whose excluded key blocks are
 * skipped. The same attention runs on cooperative matrices (tensor cores,
 * shaders/attention_flash.comp, FlashAttention-2 form) for F16 inputs on GPUs with them. Calls
 * with too few workgroups for the device take a split-K form (flash decoding): each
 * workgroup's keys in runs over the grid's z, then attention_split_reduce.comp. This file
 * chooses the kernel and its tiles for the device, checks the arguments against the
 * tensors and limits, and records the dispatch(es). */
#include "attention/attention.h"
#include "runtime/push.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ tiles */

static uint32_t pow2_floor(uint32_t v)
{
    uint32_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

void vkf_attention_tiles_choose(const vkf_context *ctx, uint32_t head_dim, vkf_attention_tiles *out)
{
    if (vkf_tuning_attention_tiles(ctx, head_dim, out)) return; /* tiles from `vkformer tune` */
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
        uint32_t wg = 16, bk = 32;
        bool lanes = false;
        const vkf_tuning *tu = &ctx->tuning;
        if (tu->attention_rows_workgroup) {
            /* the built-in table's shape for this driver (tuning.c), tq capped as above */
            wg = tu->attention_rows_workgroup, bk = tu->attention_rows_bk, lanes = tu->attention_lanes;
            if (tu->attention_rows_tq < tq) tq = tu->attention_rows_tq;
        }
        t = (vkf_attention_tiles){.workgroup = wg, .bq = wg * tq, .bk = bk, .td = 1, .tq = tq, .lanes = lanes};
        if (lanes) {
            *out = t; /* no shared memory to fit */
            return;
        }
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

vkf_status vkf_attention_fused_choice(const vkf_context *ctx, uint32_t head_dim, vkf_kernel_choice *out)
{
    if (!ctx || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_attention_fused_choice: NULL argument");
    if (head_dim == 0 || head_dim > VKF_ATTENTION_MAX_HEAD_DIM)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_attention_fused_choice: head_dim %u is not in 1..%u", head_dim,
                        VKF_ATTENTION_MAX_HEAD_DIM);
    vkf_attention_tiles t;
    vkf_attention_tiles_choose(ctx, head_dim, &t);
    memset(out, 0, sizeof *out);
    out->kernel = t.lanes ? "fused-lanes" : "fused";
    out->tiles[0] = t.workgroup, out->tiles[1] = t.bq, out->tiles[2] = t.bk, out->tiles[3] = t.td, out->tiles[4] = t.tq;
    vkf_attention_tiles tuned;
    out->source = vkf_choice_source_name(vkf_tuning_attention_tiles(ctx, head_dim, &tuned) ? VKF_SOURCE_FILE
                                         : ctx->info.type == VKF_DEVICE_CPU ? ctx->tuning.attention_source
                                                                            : VKF_SOURCE_DEFAULT);
    out->table_entry = ctx->tuning.table_entry;
    return VKF_OK;
}

/* ------------------------------------------------------------------ coopmat tiles */

/* Specialization constants of attention_flash.comp (the fused coopmat kernel), in
 * constant_id order. */
typedef struct coopmat_tiles {
    uint32_t workgroup;                 /* id 0: invocations, whole subgroups */
    uint32_t bq;                        /* id 1: queries per workgroup, a multiple of cm (one row fragment
                                           per subgroup) */
    uint32_t bk;                        /* id 2: keys per tile, a multiple of cn, ck and 4 */
    uint32_t dp;                        /* id 3: head_dim rounded up to a multiple of ck, cn and 8 */
    uint32_t cm, cn, ck;                /* id 4-6: the fragment shape, ctx->coopmat_shape */
} coopmat_tiles;

/* Host-only flags of attention_flash.comp, on top of VKF_ATTENTION_FLAG_*. */
#define FLASH_FLAG_VEC4 16u             /* q, k, v offsets, strides and head_dim multiples of 4 */
#define FLASH_FLAG_DIRECT 32u           /* head_dim == dp, out rows aligned for fragment stores */

/* Mirrors the shared arrays of attention_flash.comp. */
static uint64_t coopmat_shared_bytes(const coopmat_tiles *t)
{
    uint64_t bq = t->bq, bk = t->bk, dps = t->dp + 8;
    uint64_t kv_rows = 2 * bk > bq ? 2 * bk : bq;
    return kv_rows * dps * 2            /* kv_sh (f16): K, V tiles, or the Q block */
           + bq * (bk + 4) * 4          /* s_sh (fp32) */
           + bq * (bk + 8) * 2          /* p_sh (f16) */
           + bq * t->cn * 4             /* a_sh (fp32) */
           + bq * 2 * 4                 /* m_sh, l_sh */
           + bk * 2 * 4;                /* key_slot, slot_bits */
}

static uint64_t bigbird_span(uint32_t bq, uint32_t block);
#define BIGBIRD_MAX_SPAN 32u

/* v halved, rounded down to a multiple of step, at least step. */
static uint32_t halve_multiple(uint32_t v, uint32_t step)
{
    return v / 2 >= step ? v / 2 / step * step : step;
}

static uint32_t lcm32(uint32_t a, uint32_t b)
{
    uint32_t x = a, y = b;
    while (y) {
        uint32_t t = x % y;
        x = y, y = t;
    }
    return a / x * b;
}

/* The coopmat kernel's tiles for head_dim on ctx (bigbird_block: BigBird's B, or 0),
 * or false with the reason in why ("needs ..."). GPUs: 4 subgroups of one row
 * fragment each (64 queries with 16-row fragments) and 64 keys per tile, halved
 * (keys first, down to 16) until shared memory fits; CPU drivers (where coopmat is
 * a test bed): 4 subgroups, 32 keys. */
static bool coopmat_tiles_choose(const vkf_context *ctx, uint32_t head_dim, uint32_t bigbird_block, coopmat_tiles *out,
                                 char *why, size_t why_size)
{
    const vkf_device_info *info = &ctx->info;
    if (!ctx->coopmat) {
        snprintf(why, why_size, "needs cooperative matrix, which is off or missing on \"%.150s\"", info->name);
        return false;
    }
    if (!vkf_variant(VKF_VARIANT_ATTENTION_FUSED_COOPMAT)->spirv) {
        snprintf(why, why_size, "is not in this build (its glslc could not compile cooperative-matrix shaders)");
        return false;
    }
    if (!info->subgroup_shuffle) {
        snprintf(why, why_size, "needs subgroup shuffles, which \"%.150s\" lacks", info->name);
        return false;
    }
    const vkf_coopmat_shape *sh = &ctx->coopmat_shape;
    uint32_t max_wg = info->max_workgroup_invocations < info->max_workgroup_size[0] ? info->max_workgroup_invocations
                                                                                   : info->max_workgroup_size[0];
    uint32_t sg = info->subgroup_size ? info->subgroup_size : 32;
    bool pow2 = sh->m && !(sh->m & (sh->m - 1)) && !(sg & (sg - 1));
    if (!sh->m || !sh->n || !sh->k || !pow2 || sg > max_wg || sh->m > 64 || sh->n > 64 || sh->k > 64) {
        snprintf(why, why_size, "needs a fragment shape of at most 64 with power-of-two rows and subgroup (device: "
                 "%ux%ux%u, subgroup %u)", sh->m, sh->n, sh->k, sg);
        return false;
    }
    uint32_t key_step = lcm32(lcm32(sh->n, sh->k), 4); /* bk steps */
    uint32_t dim_step = lcm32(key_step, 8);             /* dp steps */
    uint32_t h = head_dim ? head_dim : 1;
    coopmat_tiles t = {.cm = sh->m, .cn = sh->n, .ck = sh->k};
    t.dp = (uint32_t)vkf_div_up(h, dim_step) * dim_step;
    uint32_t subgroups = 4;
    while (subgroups > 1 && subgroups * sg > max_wg) subgroups /= 2;
    t.bq = subgroups * t.cm;
    uint32_t start = info->type == VKF_DEVICE_CPU ? 32 : 64;
    t.bk = (uint32_t)vkf_div_up(start, key_step) * key_step;
    while (bigbird_block && t.bq > t.cm && bigbird_span(t.bq, bigbird_block) > BIGBIRD_MAX_SPAN)
        t.bq = halve_multiple(t.bq, t.cm);
    while (coopmat_shared_bytes(&t) > info->max_shared_memory) {
        if (t.bk > 16 && t.bk > key_step) t.bk = halve_multiple(t.bk, key_step);
        else if (t.bq > t.cm) t.bq = halve_multiple(t.bq, t.cm);
        else if (t.bk > key_step) t.bk = halve_multiple(t.bk, key_step);
        else {
            snprintf(why, why_size, "needs %llu bytes of shared memory for head_dim %u at its smallest tiles (bq %u, "
                     "bk %u); the device has %u", (unsigned long long)coopmat_shared_bytes(&t), head_dim, t.bq, t.bk,
                     info->max_shared_memory);
            return false;
        }
    }
    t.workgroup = t.bq / t.cm * sg;
    if (bigbird_block && bigbird_span(t.bq, bigbird_block) > BIGBIRD_MAX_SPAN) {
        snprintf(why, why_size, "needs %u queries per workgroup, which span more than %u bigbird blocks of %u", t.bq,
                 BIGBIRD_MAX_SPAN, bigbird_block);
        return false;
    }
    *out = t;
    return true;
}

/* ------------------------------------------------------------------ bigbird */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void vkf_bigbird_random_blocks(const vkf_bigbird *bb, uint32_t qb, uint32_t key_blocks, int32_t *out)
{
    uint32_t r = bb->random < VKF_BIGBIRD_MAX_RANDOM ? bb->random : VKF_BIGBIRD_MAX_RANDOM;
    for (uint32_t t = 0; t < r; t++) out[t] = -1;
    if (qb < bb->globals) return;
    /* Candidates, in order: [G, min(hi, qb - 1)), then [max(G, qb + 2), hi). */
    uint64_t g = bb->globals, hi = bb->causal ? (qb >= 1 ? qb - 1u : 0u) : key_blocks;
    uint64_t low_end = qb >= 1 ? qb - 1u : 0u;
    if (low_end > hi) low_end = hi;
    uint64_t low_n = low_end > g ? low_end - g : 0;
    uint64_t high_start = (uint64_t)qb + 2 > g ? (uint64_t)qb + 2 : g;
    uint64_t high_n = hi > high_start ? hi - high_start : 0;
    uint64_t m = low_n + high_n;
    /* A partial Fisher-Yates shuffle of the virtual array 0 .. m - 1, its few
     * moved places kept in a small map instead of the array. */
    uint64_t map_pos[2 * VKF_BIGBIRD_MAX_RANDOM], map_val[2 * VKF_BIGBIRD_MAX_RANDOM];
    uint32_t map_n = 0;
    uint64_t state = bb->seed ^ ((uint64_t)qb * 0xd1b54a32d192ed03ull);
    for (uint32_t t = 0; t < r && t < m; t++) {
        uint64_t pick = t + splitmix64(&state) % (m - t);
        uint64_t at_t = t, at_pick = pick;
        uint32_t it = UINT32_MAX, ip = UINT32_MAX;
        for (uint32_t e = 0; e < map_n; e++) {
            if (map_pos[e] == t) at_t = map_val[e], it = e;
            if (map_pos[e] == pick) at_pick = map_val[e], ip = e;
        }
        /* swap places t and pick (place t is never read again) */
        if (ip == UINT32_MAX) map_pos[map_n] = pick, ip = map_n++;
        map_val[ip] = at_t;
        if (it == UINT32_MAX && pick != t) map_pos[map_n] = t, it = map_n++;
        if (pick != t) map_val[it] = at_pick;
        out[t] = (int32_t)(at_pick < low_n ? g + at_pick : high_start + (at_pick - low_n));
    }
}

bool vkf_bigbird_allowed(const vkf_bigbird *bb, const int32_t *random_of_qi, uint32_t i, uint32_t j)
{
    uint32_t qi = i / bb->block, kj = j / bb->block;
    if (qi < bb->globals || kj < bb->globals || (qi > kj ? qi - kj : kj - qi) <= 1) return true;
    for (uint32_t t = 0; t < bb->random && t < VKF_BIGBIRD_MAX_RANDOM; t++)
        if (random_of_qi[t] == (int32_t)kj) return true;
    return false;
}

/* Query blocks one workgroup of bq rows can touch, at the worst alignment. The
 * kernel keeps one bit per block. */
static uint64_t bigbird_span(uint32_t bq, uint32_t block)
{
    return ((uint64_t)bq + 2 * (uint64_t)block - 2) / block;
}

/* The tiles of this desc: given, or the device's, with fewer queries per
 * workgroup where BIGBIRD's blocks are small. */
static void tiles_for(const vkf_context *ctx, const vkf_attention_desc *d, vkf_attention_tiles *t)
{
    if (d->tiles) {
        *t = *d->tiles;
        return;
    }
    vkf_attention_tiles_choose(ctx, d->head_dim, t);
    if (d->pattern != VKF_ATTENTION_BIGBIRD || !d->bigbird.block) return;
    while (t->lanes && t->tq > 1 && bigbird_span(t->bq, d->bigbird.block) > BIGBIRD_MAX_SPAN) {
        t->tq /= 2; /* the lanes form keeps its workgroup of whole subgroups */
        t->bq = t->workgroup * t->tq;
    }
    while (!t->lanes && t->bq > 1 && bigbird_span(t->bq, d->bigbird.block) > BIGBIRD_MAX_SPAN) {
        t->bq /= 2;
        if (t->tq > t->bq) t->tq = t->bq;
        t->workgroup = t->bq * t->td / t->tq;
    }
}

/* Loop limits. llvmpipe before Mesa 26 (Debian 12's lavapipe, Mesa 22.3) ends
 * every loop of an invocation once 65535 iterations have run in all its loops
 * together (gallivm's loop limiter), with no error: the output is silently wrong
 * (docs/reliability.md, "Loop limits of CPU drivers"; Mesa 26.2 has no such limit).
 * The scalar forms walk all of a query block's keys in one invocation, so on such
 * a driver the keys a workgroup may visit are bounded: the shared-memory rows and
 * split forms (a tune file's or given tiles) hand long key lists to the lanes
 * form, which counts a few iterations per subgroup of keys; past its bound the op
 * fails. The counts per tile are upper bounds read from the shaders and measured
 * (attention_fused.comp, rows form, head_dim 64 in tiles of 32 keys: wrong past
 * 12,600 keys; the lanes form past 175,000 at any head_dim); half the budget is
 * kept spare (VKF_LOOP_BUDGET, vkf_loop_limited in ops.c). */
/* The most keys a workgroup of bq queries visits: the window's span (and the
 * stride or global keys) for the sparse patterns, else lk. */
static uint64_t keys_per_block(const vkf_attention_desc *d, uint32_t bq)
{
    uint64_t span = (uint64_t)bq + 2ull * d->window + 1;
    if (span > d->lk) span = d->lk;
    switch (d->pattern) {
    case VKF_ATTENTION_LOCAL: return span;
    case VKF_ATTENTION_STRIDED: return span + d->lk / (d->stride ? d->stride : 1);
    case VKF_ATTENTION_TGLOBAL: return span + d->global_max;
    default: return d->lk;
    }
}

uint64_t vkf_attention_loop_count(const vkf_attention_tiles *t, uint32_t head_dim, uint64_t keys)
{
    if (!t->bk || !t->workgroup || !t->td) return 0; /* bad tiles: check_tiles refuses them with a message */
    uint64_t d4 = vkf_div_up(head_dim, 4), tiles = vkf_div_up(keys, t->bk), per_tile;
    if (t->lanes) {
        per_tile = 4; /* the step's loop, the load's inner ones */
    } else {
        uint64_t load = 4 * vkf_div_up((uint64_t)t->bk * d4, t->workgroup); /* load_tile: its loop and inner ones */
        if (t->td == 1) {
            per_tile = 1 + load + 2ull * t->bk;                               /* + scores, P·V over the tile */
        } else {
            uint64_t spt = vkf_div_up(t->bk, t->td), acc4 = vkf_div_up(d4, t->td);
            per_tile = 1 + load + spt * (1 + d4) + t->td + spt + (uint64_t)t->bk * (1 + acc4);
        }
    }
    return tiles * per_tile;
}

/* The lanes form's tiles for this device and head_dim: one subgroup, up to 4 rows
 * per lane (fewer for wide heads, as vkf_attention_tiles_choose), keys a subgroup
 * at a time; false where the device has no subgroup shuffles. */
static bool lanes_tiles(const vkf_context *ctx, const vkf_attention_desc *d, vkf_attention_tiles *t)
{
    uint32_t sg = ctx->info.subgroup_size, d4 = (uint32_t)vkf_div_up(d->head_dim, 4);
    if (!ctx->info.subgroup_shuffle || !sg) return false;
    uint32_t tq = 64 / d4 >= 4 ? 4 : 64 / d4 >= 1 ? pow2_floor(64 / d4) : 1;
    *t = (vkf_attention_tiles){.workgroup = sg, .bq = sg * tq, .bk = sg, .td = 1, .tq = tq, .lanes = 1};
    while (d->pattern == VKF_ATTENTION_BIGBIRD && d->bigbird.block && t->tq > 1 &&
           bigbird_span(t->bq, d->bigbird.block) > BIGBIRD_MAX_SPAN) {
        t->tq /= 2;
        t->bq = t->workgroup * t->tq;
    }
    return vkf_attention_tiles_problem(ctx, t, d->head_dim) == NULL;
}

/* The kernel of a desc and its tiles. */
typedef struct fused_plan {
    bool coopmat;                       /* attention_flash.comp, else attention_fused.comp */
    vkf_attention_tiles tiles;          /* scalar kernel */
    coopmat_tiles ct;                   /* coopmat kernel */
    uint32_t bq;                        /* queries per workgroup of the chosen one */
} fused_plan;

/* Resolves desc->kernel (see vkf_attention_kernel in internal.h). Fails only where
 * the coopmat kernel is forced and cannot run, or the kernel value is unknown. */
static vkf_status plan_for(const vkf_context *ctx, const vkf_attention_desc *d, fused_plan *p, const char *fn)
{
    memset(p, 0, sizeof *p);
    if ((unsigned)d->kernel > VKF_ATTENTION_KERNEL_COOPMAT)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: unknown kernel %d", fn, (int)d->kernel);
    uint32_t block = d->pattern == VKF_ATTENTION_BIGBIRD ? d->bigbird.block : 0;
    char why[256];
    if (d->kernel == VKF_ATTENTION_KERNEL_COOPMAT) {
        if (!coopmat_tiles_choose(ctx, d->head_dim, block, &p->ct, why, sizeof why))
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: the cooperative-matrix kernel %s", fn, why);
        p->coopmat = true;
    } else if (d->kernel == VKF_ATTENTION_KERNEL_AUTO && !d->tiles && d->dtype == VKF_DTYPE_F16 &&
               (ctx->info.type != VKF_DEVICE_CPU || ctx->coopmat_everywhere)) {
        /* F16 q, k, v: the user chose f16 precision; f32 keeps the scalar kernel's
         * accuracy. CPU drivers emulate coopmat, slower than the scalar kernel. */
        p->coopmat = coopmat_tiles_choose(ctx, d->head_dim, block, &p->ct, why, sizeof why);
    }
    if (p->coopmat) {
        p->bq = p->ct.bq;
        return VKF_OK;
    }
    tiles_for(ctx, d, &p->tiles);
    if (vkf_loop_limited(ctx) &&
        vkf_attention_loop_count(&p->tiles, d->head_dim, keys_per_block(d, p->tiles.bq)) > VKF_LOOP_BUDGET) {
        vkf_attention_tiles lanes;
        if (!p->tiles.lanes && lanes_tiles(ctx, d, &lanes) &&
            vkf_attention_loop_count(&lanes, d->head_dim, keys_per_block(d, lanes.bq)) <= VKF_LOOP_BUDGET)
            p->tiles = lanes;
        else
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: %llu keys per query block: more than one invocation of \"%s\" "
                            "runs right (Mesa before 26 ends an invocation's loops after 65535 iterations)",
                            fn, (unsigned long long)keys_per_block(d, p->tiles.bq), ctx->info.name);
    }
    p->bq = p->tiles.bq;
    return VKF_OK;
}

const char *vkf_attention_kernel_name(const vkf_context *ctx, const vkf_attention_desc *d)
{
    if (!ctx || !d) return "fused";
    if (d->kernel == VKF_ATTENTION_KERNEL_COOPMAT) return "fused-coopmat";
    fused_plan p;
    return plan_for(ctx, d, &p, "vkf_attention_kernel_name") == VKF_OK && p.coopmat ? "fused-coopmat" : "fused";
}

/* Table layout (I32): [0, nqb * R) random blocks of each query block; at
 * `offsets`, q_blocks + 1 list starts; at `lists`, the lists of key blocks. */
typedef struct bigbird_layout {
    uint64_t nqb, nkb, offsets, lists, total;
} bigbird_layout;

/* Builds the table into *out (malloc'ed) and its layout. */
static vkf_status bigbird_table(const vkf_attention_desc *d, uint32_t bq, int32_t **out, bigbird_layout *lay,
                                const char *fn)
{
    const vkf_bigbird *bb = &d->bigbird;
    uint64_t B = bb->block, R = bb->random, q_blocks = vkf_div_up(d->lq, bq);
    lay->nqb = vkf_div_up(d->lq, B);
    lay->nkb = vkf_div_up(d->lk, B);
    lay->offsets = lay->nqb * R;
    lay->lists = lay->offsets + q_blocks + 1;
    /* A workgroup lists every block when one of its queries is global, else at
     * most G + span + 2 + span * R blocks, and at most all. */
    uint64_t per_wg = bb->globals + (R + 1) * bigbird_span(bq, bb->block) + 2;
    if (per_wg > lay->nkb) per_wg = lay->nkb;
    uint64_t global_wgs = vkf_div_up((uint64_t)bb->globals * B, bq);
    if (global_wgs > q_blocks) global_wgs = q_blocks;
    uint64_t cap = lay->lists + global_wgs * lay->nkb + (q_blocks - global_wgs) * per_wg;
    if (cap > UINT32_MAX / 2)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: bigbird table of %llu entries passes 2^31", fn,
                        (unsigned long long)cap);
    int32_t *t = malloc(cap * sizeof *t);
    uint8_t *mark = calloc(lay->nkb ? lay->nkb : 1, 1);
    if (!t || !mark) {
        free(t);
        free(mark);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "%s: bigbird table of %llu entries", fn, (unsigned long long)cap);
    }
    for (uint64_t qb = 0; qb < lay->nqb; qb++) vkf_bigbird_random_blocks(bb, (uint32_t)qb, (uint32_t)lay->nkb, t + qb * R);
    uint64_t n = lay->lists;
    for (uint64_t w = 0; w < q_blocks; w++) {
        t[lay->offsets + w] = (int32_t)(n - lay->lists);
        uint64_t i0 = w * bq, i_last = (i0 + bq < d->lq ? i0 + bq : d->lq) - 1;
        uint64_t qa = i0 / B, qz = i_last / B, limit = lay->nkb - 1;
        if (d->causal && (i_last + d->causal_offset) / B < limit) limit = (i_last + d->causal_offset) / B;
        /* Every block any query block qa..qz may see, up to the causal limit. */
        for (uint64_t qb = qa; qb <= qz; qb++) {
            if (qb < bb->globals) {
                memset(mark, 1, limit + 1);
                break;
            }
            for (uint64_t kb = 0; kb < bb->globals && kb <= limit; kb++) mark[kb] = 1;
            for (uint64_t kb = qb ? qb - 1 : 0; kb <= qb + 1 && kb <= limit; kb++) mark[kb] = 1;
            for (uint64_t e = 0; e < R; e++) {
                int32_t kb = t[qb * R + e];
                if (kb >= 0 && (uint64_t)kb <= limit) mark[kb] = 1;
            }
        }
        for (uint64_t kb = 0; kb <= limit; kb++)
            if (mark[kb]) t[n++] = (int32_t)kb, mark[kb] = 0;
    }
    t[lay->offsets + q_blocks] = (int32_t)(n - lay->lists);
    free(mark);
    lay->total = n;
    *out = t;
    return VKF_OK;
}

vkf_status vkf_attention_table_create(vkf_context *ctx, const vkf_attention_desc *d, vkf_tensor **out)
{
    static const char fn[] = "vkf_attention_table_create";
    if (!out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out is NULL", fn);
    *out = NULL;
    if (!ctx || !d) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: context or desc is NULL", fn);
    if (d->pattern != VKF_ATTENTION_BIGBIRD)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: only the bigbird pattern has a table", fn);
    if (!d->bigbird.block || !d->lq || !d->lk || d->bigbird.random > VKF_BIGBIRD_MAX_RANDOM)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "%s: bigbird needs block >= 1 (got %u), lq and lk >= 1, random <= %u (got %u)", fn,
                        d->bigbird.block, VKF_BIGBIRD_MAX_RANDOM, d->bigbird.random);
    fused_plan plan;
    VKF_TRY(plan_for(ctx, d, &plan, fn));
    if (!plan.bq) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: tiles with bq 0", fn);
    int32_t *host = NULL;
    bigbird_layout lay = {0};
    VKF_TRY(bigbird_table(d, plan.bq, &host, &lay, fn));
    uint64_t shape[1] = {lay.total};
    vkf_status st = vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, shape, out);
    if (st == VKF_OK) st = vkf_tensor_upload(*out, host, lay.total * sizeof *host);
    free(host);
    if (st != VKF_OK) {
        vkf_tensor_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* ------------------------------------------------------------------ variants by name */

vkf_status vkf_attention_parse(const char *spec, bool cross, vkf_attention_spec *out)
{
    vkf_attention_spec c = {0};
    unsigned long a = 0, b = 0, r = 0;
    int used = 0;
#define FULL(n_expected, n_got) ((n_got) == (n_expected) && spec[used] == '\0')
    if (!spec || strcmp(spec, "dense") == 0) {
    } else if (strcmp(spec, "dense-naive") == 0) {
        c.kind = VKF_ATTN_NAIVE;
    } else if (sscanf(spec, "lowrank:%lu%n", &a, &used) == 1 && spec[used] == '\0') {
        if (a < 1 || a > 65536)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "attention \"%s\": lowrank:K needs 1 <= K <= 65536", spec);
        c.kind = VKF_ATTN_LOWRANK, c.rank = (uint32_t)a;
    } else if (cross) {
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "unknown cross-attention \"%s\" (dense, dense-naive, lowrank:K)", spec);
    } else if (FULL(1, sscanf(spec, "local:%lu%n", &a, &used)) && a <= UINT32_MAX) {
        c.pattern = VKF_ATTENTION_LOCAL, c.window = (uint32_t)a;
    } else if (FULL(2, sscanf(spec, "strided:%lu:%lu%n", &a, &b, &used)) && b >= 1 && a <= UINT32_MAX &&
               b <= UINT32_MAX) {
        c.pattern = VKF_ATTENTION_STRIDED, c.window = (uint32_t)a, c.stride = (uint32_t)b;
    } else if (FULL(3, sscanf(spec, "bigbird:%lu:%lu:%lu%n", &a, &b, &r, &used))) {
        if (a < 1 || a > INT32_MAX || b > UINT32_MAX || r > VKF_BIGBIRD_MAX_RANDOM)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                            "attention \"%s\": bigbird:B:G:R needs block B >= 1, G >= 0 global blocks and R <= %u random "
                            "blocks", spec, VKF_BIGBIRD_MAX_RANDOM);
        c.pattern = VKF_ATTENTION_BIGBIRD, c.block = (uint32_t)a, c.globals = (uint32_t)b, c.random = (uint32_t)r;
    } else if (FULL(2, sscanf(spec, "tglobal:%lu:%lu%n", &a, &b, &used))) {
        if (a > UINT32_MAX || b < 1 || b > INT32_MAX)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "attention \"%s\": tglobal:W:G needs a window W >= 0 and a "
                            "global block of G >= 1 tokens", spec);
        c.pattern = VKF_ATTENTION_TGLOBAL, c.window = (uint32_t)a, c.block = (uint32_t)b;
    } else if (FULL(2, sscanf(spec, "lsh:%lu:%lu%n", &a, &b, &used))) {
        if (a < 1 || a > 64 || b < 1 || b > INT32_MAX)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "attention \"%s\": lsh:H:C needs 1 <= H <= 64 hash rounds and a "
                            "chunk C >= 1", spec);
        c.kind = VKF_ATTN_LSH, c.rounds = (uint32_t)a, c.chunk = (uint32_t)b;
    } else {
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "unknown attention \"%s\" (dense, dense-naive, local:W, strided:W:S with S >= 1, bigbird:B:G:R, "
                        "tglobal:W:G, lsh:H:C, lowrank:K)", spec);
    }
#undef FULL
    *out = c;
    return VKF_OK;
}

/* ------------------------------------------------------------------ lowrank */

vkf_status vkf_lowrank_projection(uint64_t seed, uint32_t K, uint32_t S, const uint32_t *lengths, uint32_t count,
                                  float *E, int32_t *rows_out)
{
    uint32_t *perm = malloc((size_t)S * sizeof *perm);
    if (!perm) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for the lowrank projection");
    memset(E, 0, (size_t)count * K * S * sizeof *E);
    for (uint32_t b = 0; b < count; b++) {
        uint32_t len = lengths[b] < S ? lengths[b] : S;
        uint64_t state = seed ^ ((uint64_t)len * 0xd1b54a32d192ed03ull);
        for (uint32_t j = 0; j < len; j++) perm[j] = j;
        for (uint32_t j = len; j > 1; j--) {
            uint32_t x = (uint32_t)(splitmix64(&state) % j), t = perm[j - 1];
            perm[j - 1] = perm[x], perm[x] = t;
        }
        float *Eb = E + (size_t)b * K * S;
        for (uint32_t r = 0; r < K && r < len; r++) {
            uint32_t count = (len - r + K - 1) / K; /* t = r, r + K, ... < len */
            for (uint32_t t = r; t < len; t += K) Eb[(size_t)r * S + perm[t]] = 1.0f / (float)count;
        }
        rows_out[b] = (int32_t)(K < len ? K : len);
    }
    free(perm);
    return VKF_OK;
}

/* ------------------------------------------------------------------ split-K */

/* How many runs of its key list each workgroup of a fused call takes in turn
 * over the grid's z (1: no split). The mode: desc->splits, else the
 * environment's VKFORMER_ATTENTION_SPLIT (0 rule, 1 never, N >= 2 forced), else
 * the rule. The rule, on GPUs only: when the call has fewer workgroups than
 * twice the compute units (few query rows: short targets against a long
 * source, a batch of one), as many runs as fill them, at most 16, each of at
 * least two key tiles (of the keys a workgroup visits at most, keys_per_block).
 * Forced, N runs even where some are empty (tests); at
 * most 64. Never where the partials (splits x batch x heads x lq rows of dp + 2
 * floats) would pass a binding, 256 MiB or 2^32 elements. */
static uint32_t split_count(const vkf_context *ctx, const vkf_attention_desc *d, uint64_t workgroups, uint64_t keys,
                            uint32_t bk, uint32_t dp)
{
    uint32_t mode = d->splits;
    const char *env = getenv("VKFORMER_ATTENTION_SPLIT");
    if (!mode && env && *env) {
        char *end = NULL;
        unsigned long v = strtoul(env, &end, 10);
        static bool warned; /* once per process: this runs for every fused call */
        if (end && *end == '\0' && v <= 64) mode = (uint32_t)v;
        else if (!warned)
            warned = true, vkf_log(ctx, VKF_LOG_WARNING, "VKFORMER_ATTENTION_SPLIT=%s ignored: it takes 0 .. 64", env);
    }
    uint64_t want;
    if (mode == 1) return 1;
    if (mode >= 2) {
        want = mode > 64 ? 64 : mode;
    } else {
        uint64_t target = 2ull * ctx->tuning.compute_units;
        if (ctx->info.type == VKF_DEVICE_CPU || workgroups >= target) return 1;
        want = vkf_div_up(target, workgroups);
        if (want > 16) want = 16;
        uint64_t tiles = vkf_div_up(keys, bk);
        if (want > tiles / 2) want = tiles / 2;
    }
    if (want < 2) return 1;
    uint64_t elements = want * d->batch * d->heads * (uint64_t)d->lq * (dp + 2ull);
    if (elements > UINT32_MAX || elements * 4 > ctx->info.max_storage_buffer_range ||
        elements * 4 > ctx->info.max_memory_allocation_size || elements * 4 > (256ull << 20) ||
        want > ctx->info.max_workgroup_count[2])
        return 1;
    return (uint32_t)want;
}

static void destroy_tensor(void *t) { vkf_tensor_destroy(t); }

/* The variant of a plan's kernel (scalar, lanes or coopmat), split-K or one pass,
 * F32 or F16 storage. */
static vkf_variant_id fused_variant(const fused_plan *plan, bool split, bool f16)
{
    static const vkf_variant_id ids[3][2][2] = {
        /* [kernel][split][f16] */
        {{VKF_VARIANT_ATTENTION_FUSED, VKF_VARIANT_ATTENTION_FUSED_F16},
         {VKF_VARIANT_ATTENTION_FUSED_SPLITK, VKF_VARIANT_ATTENTION_FUSED_SPLITK_F16}},
        {{VKF_VARIANT_ATTENTION_FUSED_LANES, VKF_VARIANT_ATTENTION_FUSED_LANES_F16},
         {VKF_VARIANT_ATTENTION_FUSED_LANES_SPLITK, VKF_VARIANT_ATTENTION_FUSED_LANES_SPLITK_F16}},
        {{VKF_VARIANT_ATTENTION_FUSED_COOPMAT, VKF_VARIANT_ATTENTION_FUSED_COOPMAT_F16},
         {VKF_VARIANT_ATTENTION_FUSED_COOPMAT_SPLITK, VKF_VARIANT_ATTENTION_FUSED_COOPMAT_SPLITK_F16}},
    };
    return ids[plan->coopmat ? 2 : plan->tiles.lanes ? 1 : 0][split][f16];
}

/* ------------------------------------------------------------------ checks */

vkf_status vkf_check_attention_view(vkf_cmd *cmd, const vkf_attention_view *v, vkf_dtype dtype, uint64_t batch,
                                    uint64_t rows, uint64_t cols, const char *fn, const char *name, uint32_t out[3])
{
    VKF_TRY(vkf_check_tensor(cmd, v->tensor, dtype, 1, fn, name));
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
    if (t->lanes) {
        const char *problem = vkf_attention_tiles_problem(ctx, t, head_dim);
        if (problem)
            return vkf_fail(t->lanes > 1 ? VKF_ERROR_INVALID_ARGUMENT : VKF_ERROR_UNSUPPORTED,
                            "%s: tiles (workgroup %u, bk %u, td %u, lanes %u) on \"%s\" (subgroup %u): %s", fn,
                            t->workgroup, t->bk, t->td, t->lanes, ctx->info.name, ctx->info.subgroup_size, problem);
    }
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
    if (d->dtype != VKF_DTYPE_F32 && d->dtype != VKF_DTYPE_F16)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: dtype must be F32 or F16", fn);
    if (d->dtype == VKF_DTYPE_F16 && !ctx->storage_16bit)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: F16 q, k, v and out need 16-bit storage buffers, which device \"%s\" "
                        "lacks", fn, ctx->info.name);
    if ((unsigned)d->pattern > VKF_ATTENTION_TGLOBAL)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: unknown pattern %d", fn, (int)d->pattern);
    const vkf_bigbird *bb = &d->bigbird;
    if (d->pattern == VKF_ATTENTION_BIGBIRD) {
        if (!bb->block || bb->block > INT32_MAX || bb->random > VKF_BIGBIRD_MAX_RANDOM)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: bigbird needs 1 <= block < 2^31 (got %u) and random <= %u "
                            "(got %u)", fn, bb->block, VKF_BIGBIRD_MAX_RANDOM, bb->random);
        if (!d->table)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: the bigbird pattern needs its table "
                            "(vkf_attention_table_create)", fn);
    }
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
        .global_block = 1,
    };
    /* T5's relative position bias: the tables (heads, 2 R + 1) of the local keys,
     * then of the global keys, in bias_table */
    uint64_t bias_need = 0;
    if (d->rel_bias || d->global_bias) {
        if (!d->bias_table)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: a relative position bias needs its table (bias_table)", fn);
        if (d->rel_radius > (1u << 20) || d->global_radius > (1u << 20))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: bias radius %u / %u passes 2^20", fn, d->rel_radius,
                            d->global_radius);
        if (d->global_bias && d->pattern != VKF_ATTENTION_TGLOBAL)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: a global bias is for the tglobal pattern", fn);
        bias_need = (d->rel_bias ? (uint64_t)d->heads * (2ull * d->rel_radius + 1) : 0) +
                    (d->global_bias ? (uint64_t)d->heads * (2ull * d->global_radius + 1) : 0);
        VKF_TRY(vkf_check_tensor(cmd, d->bias_table, VKF_DTYPE_F32, bias_need, fn, "bias_table"));
        if (bias_need > UINT32_MAX) return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: bias_table passes 2^32 elements", fn);
        p.flags |= (d->rel_bias ? VKF_ATTENTION_FLAG_REL_BIAS : 0u) | (d->global_bias ? VKF_ATTENTION_FLAG_GLOBAL_BIAS : 0u);
        p.rel_radius = d->rel_radius, p.global_radius = d->global_radius;
    }
    /* transient-global: the window's keys and each sequence's global keys */
    if (d->pattern == VKF_ATTENTION_TGLOBAL) {
        if (d->causal)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: the tglobal pattern is not causal (its global keys "
                            "summarise later tokens too)", fn);
        if (!d->global_block || d->global_block > INT32_MAX)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: tglobal needs a global block of 1 .. 2^31 - 1 tokens "
                            "(got %u)", fn, d->global_block);
        if (d->global_max) {
            uint64_t need = (uint64_t)d->batch * d->global_max * 2 * d->heads * d->head_dim;
            VKF_TRY(vkf_check_tensor(cmd, d->global_kv, d->dtype, need, fn, "global_kv"));
            if (need > UINT32_MAX) return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: global_kv passes 2^32 elements", fn);
        }
        p.global_block = d->global_block, p.global_max = d->global_max;
    }
    if (!isfinite(p.scale)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: scale %g is out of range", fn, d->scale);
    uint64_t out_elements = (uint64_t)d->batch * d->lq * dm;
    if (out_elements > UINT32_MAX)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: out (%llu elements) passes 2^32", fn,
                        (unsigned long long)out_elements);

    fused_plan plan;
    VKF_TRY(plan_for(ctx, d, &plan, fn));
    if (!plan.coopmat) VKF_TRY(check_tiles(ctx, &plan.tiles, d->head_dim, fn));
    const uint32_t bq = plan.bq;
    if (d->pattern == VKF_ATTENTION_BIGBIRD) {
        if (bigbird_span(bq, bb->block) > BIGBIRD_MAX_SPAN)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: %u queries per workgroup span more than %u bigbird blocks of %u",
                            fn, bq, BIGBIRD_MAX_SPAN, bb->block);
        uint64_t nqb = vkf_div_up(d->lq, bb->block), offsets = nqb * bb->random;
        uint64_t lists = offsets + vkf_div_up(d->lq, bq) + 1;
        VKF_TRY(vkf_check_tensor(cmd, d->table, VKF_DTYPE_I32, lists, fn, "table"));
        if (d->table->elements > UINT32_MAX)
            return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: table passes 2^32 elements", fn);
        p.bb_block = bb->block, p.bb_globals = bb->globals, p.bb_random = bb->random;
        p.bb_offsets = (uint32_t)offsets, p.bb_lists = (uint32_t)lists;
        p.table_len = (uint32_t)d->table->elements;
    } else {
        p.bb_block = 1, p.table_len = 1;
    }

    /* Grid: (batch · heads) × query blocks workgroups, laid out in 2-D past the x
     * limit; the shader undoes it with linear_workgroup() and skips the padding. */
    p.q_blocks = (uint32_t)vkf_div_up(d->lq, bq);
    uint64_t count = (uint64_t)p.q_blocks * d->batch * d->heads;
    uint64_t max_x = ctx->info.max_workgroup_count[0];
    uint64_t gx = count < max_x ? count : max_x, gy = vkf_div_up(count, gx);
    if (count > UINT32_MAX || gy > ctx->info.max_workgroup_count[1])
        return vkf_fail(VKF_ERROR_TOO_LARGE,
                        "%s: %llu workgroups (%u query blocks x %u batch x %u heads) exceed the device's grid of "
                        "%u x %u", fn, (unsigned long long)count, p.q_blocks, d->batch, d->heads,
                        ctx->info.max_workgroup_count[0], ctx->info.max_workgroup_count[1]);
    uint32_t groups[3] = {(uint32_t)gx, (uint32_t)gy, 1};
    /* Split-K: each workgroup's key list in runs over the grid's z, the partials
     * combined by attention_split_reduce */
    uint32_t dp = plan.coopmat ? plan.ct.dp : 4 * (uint32_t)vkf_div_up(d->head_dim, 4); /* floats per partial row */
    uint32_t splits = split_count(ctx, d, count, keys_per_block(d, bq), plan.coopmat ? plan.ct.bk : plan.tiles.bk, dp);
    groups[2] = splits;

    uint32_t view[3];
    VKF_TRY(vkf_check_attention_view(cmd, &d->q, d->dtype, d->batch, d->lq, dm, fn, "q", view));
    p.q_offset = view[0], p.q_row = view[1], p.q_batch = view[2];
    VKF_TRY(vkf_check_attention_view(cmd, &d->k, d->dtype, d->batch, d->lk, dm, fn, "k", view));
    p.k_offset = view[0], p.k_row = view[1], p.k_batch = view[2];
    VKF_TRY(vkf_check_attention_view(cmd, &d->v, d->dtype, d->batch, d->lk, dm, fn, "v", view));
    p.v_offset = view[0], p.v_row = view[1], p.v_batch = view[2];
    if (d->key_lengths) VKF_TRY(vkf_check_tensor(cmd, d->key_lengths, VKF_DTYPE_I32, d->batch, fn, "key_lengths"));
    VKF_TRY(vkf_check_tensor(cmd, d->out, d->dtype, out_elements, fn, "out"));
    bool with_bias = d->rel_bias || d->global_bias, with_globals = d->pattern == VKF_ATTENTION_TGLOBAL && d->global_max;
    if (vkf_tensors_overlap(d->out, d->q.tensor) || vkf_tensors_overlap(d->out, d->k.tensor) ||
        vkf_tensors_overlap(d->out, d->v.tensor) || vkf_tensors_overlap(d->out, d->key_lengths) ||
        (d->pattern == VKF_ATTENTION_BIGBIRD && vkf_tensors_overlap(d->out, d->table)) ||
        (with_bias && vkf_tensors_overlap(d->out, d->bias_table)) ||
        (with_globals && vkf_tensors_overlap(d->out, d->global_kv)))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out may not alias q, k, v, key_lengths, table, bias_table or "
                        "global_kv", fn);

    const vkf_pipeline *pipe;
    bool f16 = d->dtype == VKF_DTYPE_F16;
    if (plan.coopmat) {
        const coopmat_tiles *c = &plan.ct;
        uint32_t spec[7] = {c->workgroup, c->bq, c->bk, c->dp, c->cm, c->cn, c->ck};
        VKF_TRY(vkf_pipeline_get(ctx, fused_variant(&plan, splits > 1, f16), spec, 7, &pipe));
        /* vec4 loads where every row of q, k, v starts on 4 elements (binding
         * offsets too); fragment stores into out where its rows start on 16 bytes */
        uint32_t es = vkf_dtype_size(d->dtype);
        bool vec4 = d->head_dim % 4 == 0 && d->q.tensor->offset % (4 * es) == 0 &&
                    d->k.tensor->offset % (4 * es) == 0 && d->v.tensor->offset % (4 * es) == 0;
        uint32_t words[9] = {p.q_offset, p.q_row, p.q_batch, p.k_offset, p.k_row, p.k_batch, p.v_offset, p.v_row, p.v_batch};
        for (int w = 0; w < 9; w++) vec4 = vec4 && words[w] % 4 == 0;
        if (vec4) p.flags |= FLASH_FLAG_VEC4;
        if (d->head_dim == c->dp && d->head_dim % 8 == 0 && d->out->offset % 16 == 0) p.flags |= FLASH_FLAG_DIRECT;
    } else {
        const vkf_attention_tiles *t = &plan.tiles;
        uint32_t d4 = (uint32_t)vkf_div_up(d->head_dim, 4);
        if (t->lanes) {
            uint32_t spec[6] = {t->workgroup, t->bq, t->bk, ctx->info.subgroup_size, t->tq, d4};
            VKF_TRY(vkf_pipeline_get(ctx, fused_variant(&plan, splits > 1, f16), spec, 6, &pipe));
        } else {
            uint32_t spec[6] = {t->workgroup, t->bq, t->bk, t->td, t->tq, d4};
            VKF_TRY(vkf_pipeline_get(ctx, fused_variant(&plan, splits > 1, f16), spec, 6, &pipe));
        }
    }
    /* split-K: the partials, (splits, batch * heads * lq) rows of dp floats of O, then
     * as many [m, l] pairs, in a tensor the command list owns */
    vkf_tensor *part = NULL;
    uint64_t rows = (uint64_t)d->batch * d->heads * d->lq;
    if (splits > 1) {
        uint64_t elements = splits * rows * (dp + 2ull);
        VKF_TRY(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &elements, &part));
        vkf_status st = vkf_cmd_own(cmd, part, destroy_tensor, vkf_tensor_bytes(part));
        if (st != VKF_OK) {
            vkf_tensor_destroy(part);
            return st;
        }
    }
    vkf_binding b[8] = {
        {d->q.tensor, VKF_READ}, {d->k.tensor, VKF_READ}, {d->v.tensor, VKF_READ},
        {d->key_lengths, VKF_READ}, {part ? part : d->out, VKF_WRITE},
        {d->pattern == VKF_ATTENTION_BIGBIRD ? d->table : NULL, VKF_READ},
        {with_bias ? d->bias_table : NULL, VKF_READ},
        {with_globals ? d->global_kv : NULL, VKF_READ},
    };
    VKF_TRY(vkf_cmd_dispatch(cmd, pipe, b, 8, &p, sizeof p, groups,
                             plan.coopmat ? (part ? "attention_fused_coopmat_splitk" : "attention_fused_coopmat")
                                          : part ? "attention_fused_splitk" : "attention_fused"));
    if (!part) return VKF_OK;
    /* pass 2: out = the splits combined, row by row */
    vkf_push_attention_split_reduce r = {
        .rows = (uint32_t)rows, .lq = d->lq, .heads = d->heads, .head_dim = d->head_dim, .dp = dp, .splits = splits,
        .ml = (uint32_t)(splits * rows * dp),
    };
    const uint32_t wg = 64;
    VKF_TRY(vkf_pipeline_get(ctx, f16 ? VKF_VARIANT_ATTENTION_SPLIT_REDUCE_F16 : VKF_VARIANT_ATTENTION_SPLIT_REDUCE, &wg,
                             1, &pipe));
    uint32_t rgroups[3];
    VKF_TRY(vkf_linear_grid(ctx, vkf_div_up(rows * d->head_dim, wg), rgroups, fn));
    vkf_binding rb[2] = {{part, VKF_READ}, {d->out, VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, rb, 2, &r, sizeof r, rgroups, "attention_split_reduce");
}

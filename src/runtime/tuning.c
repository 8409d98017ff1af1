/* The tiles and workgroup sizes a context uses, per device: the built-in choice
 * from the device's type, vendor and limits (vkf_tuning_choose, at context
 * creation), checks of tiles against the device's limits, and the device's tune
 * file, loaded over the built-in choice (vkf_tune_load). Part of the runtime, with
 * device.c: it calls nothing above it. Measuring candidates and writing the tune
 * file (`vkformer tune`) is tune.c, which builds on the ops. */
#include "runtime/runtime.h"

#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ built-in tiles */

static uint32_t pow2_floor(uint32_t v)
{
    uint32_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

/* PCI vendor ids, as Vulkan reports them. */
enum { VENDOR_AMD = 0x1002, VENDOR_NVIDIA = 0x10de, VENDOR_INTEL = 0x8086, VENDOR_MESA = 0x10005 };

/* The direct kernel's tiles on CPU drivers. 8x8 outputs per invocation was the best
 * of ten shapes swept at 1024^3 on lavapipe (11.9 GFLOP/s vs 8-12 for the others). */
const vkf_matmul_tiles vkf_cpu_direct_tiles = {.workgroup = 64, .bm = 64, .bn = 64, .bk = 1, .tm = 8, .tn = 8};

/* The invocations of matmul_subgroup tiles (bm x bn, tm rows x tn columns per
 * lane) for subgroups of sg lanes; 0 where the sizes do not divide. */
static uint32_t subgroup_workgroup(uint32_t sg, uint32_t bm, uint32_t bn, uint32_t tm, uint32_t tn)
{
    if (!sg || !tm || !tn || tm % sg || bm % tm || bn % (sg * tn)) return 0;
    return (bm / tm) * (bn / (sg * tn)) * sg;
}

bool vkf_matmul_subgroup_tiles(const vkf_device_info *d, uint32_t bm, uint32_t bn, uint32_t tm, uint32_t tn,
                               vkf_matmul_tiles *out)
{
    uint32_t wg = subgroup_workgroup(d->subgroup_size, bm, bn, tm, tn);
    if (!d->subgroup_shuffle || !wg) return false;
    *out = (vkf_matmul_tiles){.workgroup = wg, .bm = bm, .bn = bn, .bk = d->subgroup_size, .tm = tm, .tn = tn};
    return wg <= d->max_workgroup_invocations && wg <= d->max_workgroup_size[0];
}

bool vkf_matmul_broadcast_tiles(const vkf_device_info *d, uint32_t bm, uint32_t bn, uint32_t tm, uint32_t tn,
                                vkf_matmul_tiles *out)
{
    uint32_t sg = d->subgroup_size;
    if (!sg || !tm || !tn || bm % tm || bn % (sg * tn)) return false;
    uint32_t wg = (bm / tm) * (bn / (sg * tn)) * sg;
    *out = (vkf_matmul_tiles){.workgroup = wg, .bm = bm, .bn = bn, .bk = sg, .tm = tm, .tn = tn};
    return wg <= d->max_workgroup_invocations && wg <= d->max_workgroup_size[0];
}

/* ------------------------------------------------------------------ the per-driver table */

const char *vkf_choice_source_name(vkf_choice_source source)
{
    switch (source) {
    case VKF_SOURCE_TABLE: return "table";
    case VKF_SOURCE_FILE: return "tune-file";
    case VKF_SOURCE_FORCED: return "forced";
    case VKF_SOURCE_ENVIRONMENT: return "environment";
    default: return "default";
    }
}

/* The first "NAME X.Y" in s as X * 100 + Y (Y below 100), 0 when none. */
static uint32_t version_after(const char *s, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = strstr(s, name); p; p = strstr(p + 1, name)) {
        const char *q = p + len;
        if (*q != ' ' || q[1] < '0' || q[1] > '9') continue;
        char *end;
        unsigned long major = strtoul(q + 1, &end, 10), minor = 0;
        if (*end == '.' && end[1] >= '0' && end[1] <= '9') minor = strtoul(end + 1, NULL, 10);
        if (major < 1000 && minor < 100) return (uint32_t)(major * 100 + minor);
    }
    return 0;
}

uint32_t vkf_mesa_release(const vkf_device_info *info) { return version_after(info->driver_info, "Mesa"); }

uint32_t vkf_llvm_major(const vkf_device_info *info)
{
    uint32_t v = version_after(info->driver_info, "LLVM");
    if (!v) v = version_after(info->name, "LLVM");
    return v / 100;
}

/* Built-in choices for lavapipe (Mesa's CPU driver, vendor 0x10005), whose code
 * generation differs enough between releases that the fastest kernel form
 * changes: an entry holds what `vkformer tune` and sweeps by hand found fastest
 * on that Mesa release (major * 100 + minor) built with that LLVM major
 * (docs/performance.md, "Per-driver choices on lavapipe"). The first entry whose
 * ranges hold the device wins; none (releases not measured, other CPU drivers):
 * the device rule below. A tune file still overrides the matmul and attention
 * tiles. */
typedef struct driver_entry {
    const char *name;                   /* reported by bench and info */
    uint32_t mesa_min, mesa_max;        /* Mesa release, major * 100 + minor, inclusive */
    uint32_t llvm_min, llvm_max;        /* LLVM major, inclusive */
    vkf_variant_id matmul;              /* VKF_VARIANT_MATMUL_SUBGROUP or _BROADCAST */
    uint32_t bm, bn, tm, tn;            /* its tiles (the subgroup size fills in the rest) */
    uint32_t skinny_tn;                 /* decode steps of 8..63 rows: one block of 8, 16 or 32 rows, tn per lane */
    /* Fused attention (td 1): the lanes form (attention_fused_lanes.comp) with
     * att_size subgroups per workgroup and keys one subgroup at a time, or the
     * shared-memory rows form with att_size invocations and att_bk keys per tile;
     * att_tq query rows per invocation at most (attention.c caps it for wide heads).
     * att_size 0: attention.c's CPU rule. */
    bool att_lanes;
    uint32_t att_size, att_tq, att_bk;
    bool decode_rows;                   /* decode kernels in their rows form (else split) */
} driver_entry;

static const driver_entry driver_table[] = {
    /* Mesa 26.2.6, LLVM 22.1.8 (Debian unstable): gallivm loads a subgroup-uniform
     * address as one scalar and other addresses with hardware gathers, so rows of
     * A read uniformly beat rows shared by shuffles 2.7x (one thread, 1024^3).
     * Measured with LLVM 22; Mesa 25.0 emits neither gathers nor FMAs in these
     * kernels with LLVM 15 or 19 alike, so the release, not LLVM, decides. */
    {"lavapipe, Mesa 26", 2600, 2699, 0, 999, VKF_VARIANT_MATMUL_BROADCAST, 64, 128, 32, 4, 4, true, 1, 4, 0, true},
    /* Mesa 25.0.7 with LLVM 15.0.6 (Debian 12's bookworm-backports) and 19.1.7
     * (Debian 13): no gathers, no FMAs; matmul_subgroup is the fastest family
     * there too (512^3, one thread, min of 2-3 under load: LLVM 15 47 ms against
     * 176 for matmul_broadcast and 86 direct; LLVM 19 121 against 168). */
    {"lavapipe, Mesa 25.0", 2500, 2500, 0, 999, VKF_VARIANT_MATMUL_SUBGROUP, 64, 128, 32, 4, 4, true, 1, 4, 0, true},
    /* Mesa 22.3.6, LLVM 15.0.6 (Debian 12): every address computed in a loop is
     * per-lane, loaded lane by lane; a shuffle is a register move. */
    {"lavapipe, Mesa 22.3", 2200, 2299, 0, 999, VKF_VARIANT_MATMUL_SUBGROUP, 64, 128, 32, 4, 4, true, 1, 4, 0, true},
};

static const driver_entry *driver_entry_for(const vkf_device_info *d)
{
    if (d->type != VKF_DEVICE_CPU || d->vendor_id != VENDOR_MESA) return NULL;
    uint32_t mesa = vkf_mesa_release(d), llvm = vkf_llvm_major(d);
    for (size_t i = 0; i < sizeof driver_table / sizeof driver_table[0]; i++) {
        const driver_entry *e = &driver_table[i];
        if (mesa >= e->mesa_min && mesa <= e->mesa_max && llvm >= e->llvm_min && llvm <= e->llvm_max) return e;
    }
    return NULL;
}

/* The matmul tiles of `family` (SUBGROUP or BROADCAST) for d; false where they do not fit. */
static bool lane_tiles(const vkf_device_info *d, vkf_variant_id family, uint32_t bm, uint32_t bn, uint32_t tm,
                       uint32_t tn, vkf_matmul_tiles *out)
{
    if (family == VKF_VARIANT_MATMUL_BROADCAST) return vkf_matmul_broadcast_tiles(d, bm, bn, tm, tn, out);
    return vkf_matmul_subgroup_tiles(d, bm, bn, tm, tn, out);
}

/* Applies the table's entry e over the device rule where its tiles fit d. */
static void apply_driver_entry(const vkf_device_info *d, const driver_entry *e, vkf_tuning *t)
{
    vkf_matmul_tiles m, skinny[3];
    bool fits = lane_tiles(d, e->matmul, e->bm, e->bn, e->tm, e->tn, &m);
    for (uint32_t i = 0; fits && i < 3; i++)
        if (!lane_tiles(d, e->matmul, 8u << i, 128, 8u << i, e->skinny_tn, &skinny[i])) skinny[i].workgroup = 0;
    t->table_entry = e->name;
    if (fits) {
        t->matmul_variant = e->matmul;
        t->matmul = m;
        t->matmul_min_macs = VKF_SUBGROUP_MIN_MACS;
        memcpy(t->subgroup_skinny, skinny, sizeof skinny);
        t->matmul_source = VKF_SOURCE_TABLE;
    }
    bool lanes = e->att_lanes && d->subgroup_shuffle && d->subgroup_size;
    uint32_t att_wg = lanes ? e->att_size * d->subgroup_size : e->att_size;
    if (e->att_size && (lanes || !e->att_lanes) && att_wg <= d->max_workgroup_invocations &&
        att_wg <= d->max_workgroup_size[0]) {
        t->attention_rows_workgroup = att_wg;
        t->attention_rows_tq = e->att_tq;
        t->attention_rows_bk = lanes ? d->subgroup_size : e->att_bk;
        t->attention_lanes = lanes;
        t->attention_source = VKF_SOURCE_TABLE;
    }
    t->decode_rows = e->decode_rows;
    t->decode_source = VKF_SOURCE_TABLE;
}

/* Shared memory of matmul_tiled: BK rows of A's and B's tiles, each padded by 4 floats. */
static uint32_t tiled_shared_bytes(const vkf_matmul_tiles *t) { return (t->bm + t->bn + 8) * t->bk * 4; }

void vkf_tuning_for_device(const vkf_device_info *d, vkf_tuning *t)
{
    memset(t, 0, sizeof *t);
    uint32_t max_wg = d->max_workgroup_invocations < d->max_workgroup_size[0] ? d->max_workgroup_invocations
                                                                             : d->max_workgroup_size[0];
    if (max_wg == 0) max_wg = 1;
    bool cpu = d->type == VKF_DEVICE_CPU;
    /* Row kernels: one workgroup per row. CPU drivers run a workgroup's
     * invocations as SIMD lanes of one thread, so fewer lanes waste less on short rows. */
    t->row_workgroup = pow2_floor(max_wg < (cpu ? 64u : 256u) ? max_wg : (cpu ? 64u : 256u));
    t->elementwise_workgroup = pow2_floor(max_wg < 256u ? max_wg : 256u);
    t->decode_rows = cpu;
    /* GPUs: decode-step matmuls (up to 8 rows) on matmul_gemv, 4 columns per
     * workgroup of 128 (32 invocations along K per column): n / 4 workgroups.
     * Not yet timed on a GPU; CPU drivers keep their measured direct kernel. */
    if (!cpu && max_wg >= 32)
        t->gemv = (vkf_matmul_tiles){.workgroup = max_wg < 128 ? pow2_floor(max_wg) : 128, .bm = 8, .bn = 4};
    if (cpu && d->vendor_id == VENDOR_MESA &&
        vkf_matmul_subgroup_tiles(d, 64, 128, 32 > d->subgroup_size ? 32 : d->subgroup_size, 4, &t->matmul)) {
        /* lavapipe: every non-uniform storage-buffer load is a loop over the SIMD
         * lanes, a shuffle is a register move. 32 rows x 4 columns per lane in
         * 64x128 tiles was the best of 30 shapes swept at 1024^3 (42 GFLOP/s; the
         * direct kernel below: 11.6). On SwiftShader it is slower than the direct
         * kernel (0.5 against 0.8 GFLOP/s), hence Mesa only. */
        t->matmul_variant = VKF_VARIANT_MATMUL_SUBGROUP;
        t->matmul_min_macs = VKF_SUBGROUP_MIN_MACS;
        /* Decode steps of 8..63 rows: one row block of 8, 16 or 32 rows instead of
         * the 64-row tile, whose clamped rows repeat work. Measured on lavapipe
         * (Mesa 22.3.6, f32, n x 512, 2026-11-25): 32 rows 1.5-2.2x the 64-row
         * tile (n = 512: 31 against 14 GFLOP/s on the direct kernel), 16 rows
         * 1.3-2.5x the direct kernel, 8 rows 1.3-2x. */
        for (uint32_t i = 0; i < 3; i++)
            if (!vkf_matmul_subgroup_tiles(d, 8u << i, 128, 8u << i, 4, &t->subgroup_skinny[i]))
                t->subgroup_skinny[i].workgroup = 0;
        /* Fused attention in its lanes form (attention_fused_lanes.comp: keys reach
         * the rows by shuffles, no shared memory), one subgroup, up to 4 rows per
         * lane: faster than the shared-memory rows form on every lavapipe measured
         * (22.3, 25.0, 26.2: 1.2-5x at n 512-1024, docs/performance.md). */
        t->attention_rows_workgroup = d->subgroup_size;
        t->attention_rows_tq = 4;
        t->attention_rows_bk = d->subgroup_size;
        t->attention_lanes = true;
    } else if (cpu) {
        /* No shared memory and no barriers: measured 3-4x faster on lavapipe
         * (DESIGN.md). */
        t->matmul_variant = VKF_VARIANT_MATMUL_DIRECT;
        t->matmul = vkf_cpu_direct_tiles;
    } else if (d->vendor_id == VENDOR_NVIDIA && d->subgroup_shuffle && d->subgroup_size == 32 &&
               vkf_matmul_subgroup_tiles(d, 64, 128, 32, 4, &t->matmul)) {
        /* NVIDIA: fp32 on matmul_subgroup, 32 rows x 4 columns per lane in 64 x 128
         * tiles, rows shared by shuffles: on the H100 (2026-11, docs/performance.md
         * "First light") it ran 4096^3 at 21.1 TFLOP/s against 15.97 for
         * matmul_tiled 64 x 64 (what `tune --quick` kept) and 1.82 (cold) for
         * the 128 x 128 tiled default this rule replaces. F16 operands take the
         * coopmat kernel (coopmat_builtin). */
        t->matmul_variant = VKF_VARIANT_MATMUL_SUBGROUP;
        t->matmul_min_macs = VKF_SUBGROUP_MIN_MACS;
        for (uint32_t i = 0; i < 3; i++)
            if (!vkf_matmul_subgroup_tiles(d, 8u << i, 128, 8u << i, 4, &t->subgroup_skinny[i]))
                t->subgroup_skinny[i].workgroup = 0;
    } else if ((d->vendor_id == VENDOR_NVIDIA || d->vendor_id == VENDOR_AMD) && d->max_shared_memory >= 32768 &&
               max_wg >= 256) {
        /* AMD (and NVIDIA without 32-lane shuffles): matmul_tiled in its GPU form,
         * 128x128 per workgroup, 8x8 per invocation in 2x2 groups of 4x4 (wide,
         * conflict-free shared reads), 16-byte global loads with the next K slice
         * in registers, 8 K steps in padded shared rows (8.25 KiB): each value read
         * from shared memory feeds 8 FMAs. RADV NAVI31 / GFX1201 compile it without
         * spills (docs/performance.md "GPU-class matmul kernels"); not yet timed on
         * such a GPU. */
        t->matmul_variant = VKF_VARIANT_MATMUL_TILED;
        t->matmul = (vkf_matmul_tiles){.workgroup = 256, .bm = 128, .bn = 128, .bk = 8, .tm = 8, .tn = 8};
    } else if (d->vendor_id == VENDOR_INTEL && d->max_shared_memory >= 32768 && max_wg >= 256) {
        /* Intel: the same GPU form with half the accumulators (8 rows x 4 columns
         * per invocation, 64x128 per workgroup, 16 K steps): fewer registers per
         * invocation than 8x8, for the wider SIMD modes. Not yet timed on an Intel GPU. */
        t->matmul_variant = VKF_VARIANT_MATMUL_TILED;
        t->matmul = (vkf_matmul_tiles){.workgroup = 256, .bm = 64, .bn = 128, .bk = 16, .tm = 8, .tn = 4};
    } else {
        /* Other GPUs (mobile, unknown, small limits): a smaller register footprint. */
        t->matmul_variant = VKF_VARIANT_MATMUL_TILED;
        t->matmul = (vkf_matmul_tiles){.workgroup = 256, .bm = 64, .bn = 64, .bk = 16, .tm = 4, .tn = 4};
    }
    /* Fit the workgroup and the shared tiles into this device's limits. */
    while (t->matmul_variant != VKF_VARIANT_MATMUL_SUBGROUP &&
           (t->matmul.workgroup > max_wg || (t->matmul_variant == VKF_VARIANT_MATMUL_TILED &&
                                            tiled_shared_bytes(&t->matmul) > d->max_shared_memory))) {
        if (t->matmul.bm > t->matmul.tm * 2) t->matmul.bm /= 2;
        else if (t->matmul.bn > t->matmul.tn) t->matmul.bn /= 2;
        else if (t->matmul.bk > 1) t->matmul.bk /= 2;
        else break;
        t->matmul.workgroup = (t->matmul.bm / t->matmul.tm) * (t->matmul.bn / t->matmul.tn);
        if (t->matmul.workgroup <= 1) break;
    }
    const driver_entry *e = driver_entry_for(d);
    if (e) apply_driver_entry(d, e, t);
}

/* ------------------------------------------------------------------ cooperative matrix */

/* The fragment shape (FM, FN, FK: spec constants 6-8 of matmul_coopmat) of a
 * coopmat kernel with these tiles: KHR uses the one shape the context chose from
 * those the device reports; NV2 (flexible dimensions) makes each subgroup tile one
 * fragment, tm x tn, bk deep. */
void vkf_coopmat_fragment(const vkf_context *ctx, vkf_variant_id family, const vkf_matmul_tiles *t, uint32_t out[3])
{
    if (family == VKF_VARIANT_MATMUL_COOPMAT2_WG) { /* one workgroup matrix: the whole tile */
        out[0] = t->bm, out[1] = t->bn, out[2] = t->bk;
        return;
    }
    if (family == VKF_VARIANT_MATMUL_COOPMAT2) {
        out[0] = t->tm, out[1] = t->tn, out[2] = t->bk;
    } else {
        out[0] = ctx->coopmat_shape.m, out[1] = ctx->coopmat_shape.n, out[2] = ctx->coopmat_shape.k;
    }
}

/* Shared memory of matmul_coopmat: fp16 A and B stages with rows padded by 8
 * halves, and per subgroup tile one fp32 fragment with rows padded by 4 floats
 * (the edges' epilogue; the shader's header). */
static uint64_t coopmat_shared_bytes(const vkf_matmul_tiles *t, const uint32_t fragment[3])
{
    return 2ull * (t->bm + t->bn) * (t->bk + 8) + 4ull * (t->bm / t->tm) * (t->bn / t->tn) * fragment[0] * (fragment[1] + 4);
}

/* Why matmul_coopmat2_wg tiles cannot run on ctx, or NULL: one workgroup-scope
 * matrix of bm x bn (tm = bm, tn = bn), bk deep, multiples of the device's
 * workgroup-scope granularity, with the workgroup size that entry names. */
static const char *coopmat2_wg_tiles_problem(const vkf_context *ctx, const vkf_matmul_tiles *t)
{
    const vkf_device_info *d = &ctx->info;
    if (!ctx->coopmat2_wg)
        return "matmul_coopmat2_wg needs VK_NV_cooperative_matrix2 workgroup scope, tensor addressing and per-element "
               "operations";
    const uint32_t *g = d->coopmat2_wg_granularity;
    if (!t->bm || !t->bn || !t->bk || t->tm != t->bm || t->tn != t->bn)
        return "matmul_coopmat2_wg tiles are one matrix: positive bm, bn, bk with tm = bm and tn = bn";
    if (!g[0] || !g[1] || !g[2] || t->bm % g[0] || t->bn % g[1] || t->bk % g[2])
        return "matmul_coopmat2_wg tiles must be multiples of the device's workgroup-scope granularity";
    if (d->coopmat2_max_dimension && (t->bm > d->coopmat2_max_dimension || t->bn > d->coopmat2_max_dimension ||
                                      t->bk > d->coopmat2_max_dimension))
        return "matmul_coopmat2_wg tiles exceed the device's largest dimension";
    if (t->workgroup != d->coopmat2_wg_invocations)
        return "matmul_coopmat2_wg workgroup must be the invocations of the device's workgroup-scope entry";
    if (t->workgroup > d->max_workgroup_invocations || t->workgroup > d->max_workgroup_size[0])
        return "coopmat workgroup exceeds the device's limit";
    return NULL;
}

/* Why coopmat tiles cannot run on ctx (a static string), or NULL. */
static const char *coopmat_tiles_problem(const vkf_context *ctx, vkf_variant_id family, const vkf_matmul_tiles *t)
{
    if (!ctx->coopmat) return "cooperative matrix is off or missing on this context";
    if (family == VKF_VARIANT_MATMUL_COOPMAT2_WG) return coopmat2_wg_tiles_problem(ctx, t);
    if (family == VKF_VARIANT_MATMUL_COOPMAT2 && !ctx->coopmat2)
        return "matmul_coopmat2 needs VK_NV_cooperative_matrix2 flexible dimensions";
    uint32_t f[3];
    vkf_coopmat_fragment(ctx, family, t, f);
    if (!f[0] || !f[1] || !f[2] || !t->tm || !t->tn || !t->bk || !t->bm || !t->bn)
        return "coopmat tiles must be positive";
    if (t->tm % f[0] || t->tn % f[1] || t->bk % f[2] || t->bk % 8 || t->bm % t->tm || t->bn % t->tn)
        return "coopmat tiles need tm, tn, bk multiples of the fragment, bk of 8, bm of tm and bn of tn";
    if (f[2] % 4) return "matmul_coopmat needs a fragment depth that is a multiple of 4"; /* f16vec4 staging */
    if (family == VKF_VARIANT_MATMUL_COOPMAT2) {
        const uint32_t *g = ctx->info.coopmat2_granularity, max = ctx->info.coopmat2_max_dimension;
        if (!g[0] || !g[1] || !g[2] || t->tm % g[0] || t->tn % g[1] || t->bk % g[2])
            return "matmul_coopmat2 fragments must be multiples of the device's granularity";
        if (t->tm > max || t->tn > max || t->bk > max) return "matmul_coopmat2 fragments exceed the device's largest";
    }
    /* Per-subgroup accumulators live in registers: more than 16 fragments (64
     * to 128 fp32 registers per lane at 16 x 16) leave too few for the rest. */
    if ((t->tm / f[0]) * (t->tn / f[1]) > 16) return "more than 16 accumulator fragments per subgroup";
    uint64_t wg = (uint64_t)(t->bm / t->tm) * (t->bn / t->tn) * ctx->info.subgroup_size;
    if (!ctx->info.subgroup_size || t->workgroup != wg) return "coopmat workgroup must be subgroup tiles x subgroup size";
    if (t->workgroup > ctx->info.max_workgroup_invocations || t->workgroup > ctx->info.max_workgroup_size[0])
        return "coopmat workgroup exceeds the device's limit";
    if (coopmat_shared_bytes(t, f) > ctx->info.max_shared_memory) return "coopmat tiles need more shared memory than the device has";
    return NULL;
}

bool vkf_matmul_coopmat_tiles(const vkf_context *ctx, vkf_variant_id family, uint32_t wg_m, uint32_t wg_n, uint32_t tm,
                              uint32_t tn, uint32_t bk, vkf_matmul_tiles *out)
{
    *out = (vkf_matmul_tiles){.workgroup = wg_m * wg_n * ctx->info.subgroup_size, .bm = wg_m * tm, .bn = wg_n * tn,
                              .bk = bk, .tm = tm, .tn = tn};
    return coopmat_tiles_problem(ctx, family, out) == NULL;
}

/* The built-in coopmat kernel: NV2 where the context has flexible dimensions, else
 * KHR; the first of these shapes that fits the device, each rounded up to the
 * fragment (KHR: the device's shape; NV2: its granularity) and bk to 8:
 *  - NVIDIA and AMD GPUs: 2 x 2 subgroups ("warps") of 64 x 64, a 128 x 128
 *    workgroup tile, K stages of 32: 16 accumulators of 16 x 16 (16 x 8 on NVK:
 *    32) per subgroup; each fp16 value staged in shared memory feeds 64 /
 *    fragment multiply-adds per subgroup, each byte loaded from global memory
 *    32 FLOPs. 128 invocations on NVIDIA (subgroups of 32), 256 on RADV
 *    (subgroups of 64); shared memory 20 KiB of stages + 5 KiB of edge scratch
 *    with 16 x 16 fragments. Not yet measured on a GPU (docs/performance.md,
 *    "GPU-class matmul kernels": compiler statistics on virtual GPUs).
 *  - Intel and other GPUs: 2 x 2 subgroups of 32 x 32 (Intel's 8 x 8 x 16
 *    fragments: 16 accumulators per subgroup);
 *  - then 2 x 2 subgroups of 32 x 32 (NV2: one 32 x 32 x 32 fragment each; CPU
 *    drivers), 1 x 1 of 32 x 32, 1 x 1 of one fragment. */
static void coopmat_builtin(vkf_context *ctx)
{
    vkf_tuning *t = &ctx->tuning;
    t->coopmat_use = 0;
    t->coopmat_source = VKF_SOURCE_DEFAULT;
    t->coopmat_variant = VKF_VARIANT_MATMUL_COOPMAT;
    memset(&t->coopmat, 0, sizeof t->coopmat);
    if (!ctx->coopmat) return;
    vkf_variant_id family = ctx->coopmat2 ? VKF_VARIANT_MATMUL_COOPMAT2 : VKF_VARIANT_MATMUL_COOPMAT;
    uint32_t fm, fn, fk;
    if (family == VKF_VARIANT_MATMUL_COOPMAT2) {
        const uint32_t *g = ctx->info.coopmat2_granularity;
        fm = g[0], fn = g[1], fk = g[2];
    } else {
        fm = ctx->coopmat_shape.m, fn = ctx->coopmat_shape.n, fk = ctx->coopmat_shape.k;
    }
    if (!fm || !fn || !fk) return;
    uint32_t kunit = fk;
    while (kunit % 8) kunit += fk;
    bool cpu = ctx->info.type == VKF_DEVICE_CPU;
    static const uint32_t shapes[][5] = {/* wg_m, wg_n, tm, tn, bk */
                                         {2, 4, 64, 32, 32}, {2, 2, 64, 64, 32}, {2, 2, 32, 32, 32},
                                         {1, 1, 32, 32, 32}, {1, 1, 1, 1, 1}};
    size_t first = cpu ? 2 : ctx->info.vendor_id == VENDOR_NVIDIA ? 0 : ctx->info.vendor_id == VENDOR_AMD ? 1 : 2;
    /* a GPU with coopmat2 still takes the KHR kernel: on the H100 KHR ran 19.6
     * TFLOP/s against NV2's 16.6 (docs/performance.md, "First light"), and only
     * the KHR kernel has the staged, double-buffered GPU form and split-K */
    if (!cpu) family = VKF_VARIANT_MATMUL_COOPMAT, fm = ctx->coopmat_shape.m, fn = ctx->coopmat_shape.n,
              fk = ctx->coopmat_shape.k;
    if (!fm || !fn || !fk) return;
    kunit = fk;
    while (kunit % 8) kunit += fk;
    for (size_t i = first; i < sizeof shapes / sizeof shapes[0]; i++) {
        const uint32_t *c = shapes[i];
        uint32_t tm = (c[2] + fm - 1) / fm * fm, tn = (c[3] + fn - 1) / fn * fn, bk = (c[4] + kunit - 1) / kunit * kunit;
        if (vkf_matmul_coopmat_tiles(ctx, family, c[0], c[1], tm, tn, bk, &t->coopmat)) {
            t->coopmat_variant = family;
            /* CPU drivers (lavapipe) keep the scalar kernels: there each fragment
             * multiply-add becomes subgroup operations, 0.2x matmul_subgroup at
             * 256^3-1024^3 f16 on Mesa 26.2; tests and `vkformer tune` select
             * coopmat explicitly. */
            t->coopmat_use = cpu && !ctx->coopmat_everywhere ? 0 : 1;
            return;
        }
    }
    memset(&t->coopmat, 0, sizeof t->coopmat);
}

/* ------------------------------------------------------------------ compute units */

/* Whether the physical device offers extension `name`. */
static bool has_extension(VkPhysicalDevice pd, const char *name)
{
    uint32_t count = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &count, NULL) != VK_SUCCESS || !count) return false;
    VkExtensionProperties *e = malloc(count * sizeof *e);
    bool found = false;
    if (e && vkEnumerateDeviceExtensionProperties(pd, NULL, &count, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < count && !found; i++) found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

/* Compute units by device name where the driver does not say (SMs, CUs, Xe
 * cores); the first name contained in the device's wins. */
static const struct {
    const char *name;
    uint32_t units;
} compute_unit_table[] = {
    {"H200", 132}, {"H100", 132}, {"A100", 108}, {"L40S", 142}, {"L4", 58}, {"RTX 4090", 128}, {"RTX 4080", 76},
    {"RTX 3090", 82}, {"RTX 3080", 68}, {"A10", 72}, {"T4", 40}, {"NAVI31", 96}, {"7900 XTX", 96}, {"7900 XT", 84},
    {"NAVI32", 60}, {"GFX1201", 64}, {"9070 XT", 64}, {"Arc(TM) A770", 32}, {"Arc(TM) A750", 28}, {"Arc(TM) B580", 20},
};

/* SMs (NVIDIA), CUs (AMD), Xe cores (Intel) of ctx's device: from
 * VK_NV_shader_sm_builtins or VK_AMD_shader_core_properties2 where present, else
 * the table by name, else a guess by device type; CPU drivers: the host's
 * threads (lavapipe's LP_NUM_THREADS where set). Split-K (ops.c) sizes its
 * splits to fill these. */
static uint32_t compute_units(const vkf_context *ctx)
{
    const vkf_device_info *d = &ctx->info;
    if (d->type == VKF_DEVICE_CPU) {
        const char *env = getenv("LP_NUM_THREADS");
        long n = env && *env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 && n < 1024 ? (uint32_t)n : 1;
    }
    if (ctx->physical && vkGetPhysicalDeviceProperties2) {
        VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
        VkPhysicalDeviceShaderCoreProperties2AMD amd = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_2_AMD};
        VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
        if (has_extension(ctx->physical, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) sm.pNext = p.pNext, p.pNext = &sm;
        if (has_extension(ctx->physical, VK_AMD_SHADER_CORE_PROPERTIES_2_EXTENSION_NAME)) amd.pNext = p.pNext, p.pNext = &amd;
        if (p.pNext) {
            vkGetPhysicalDeviceProperties2(ctx->physical, &p);
            if (sm.shaderSMCount) return sm.shaderSMCount;
            if (amd.activeComputeUnitCount) return amd.activeComputeUnitCount;
        }
    }
    for (size_t i = 0; i < sizeof compute_unit_table / sizeof compute_unit_table[0]; i++)
        if (strstr(d->name, compute_unit_table[i].name)) return compute_unit_table[i].units;
    return d->type == VKF_DEVICE_DISCRETE_GPU ? 32 : 8;
}

void vkf_tuning_choose(vkf_context *ctx)
{
    vkf_tuning_for_device(&ctx->info, &ctx->tuning);
    ctx->tuning.compute_units = compute_units(ctx);
    coopmat_builtin(ctx);
    const char *form = getenv("VKFORMER_DECODE_FORM");
    if (form && strcmp(form, "rows") == 0) ctx->tuning.decode_rows = true, ctx->tuning.decode_source = VKF_SOURCE_ENVIRONMENT;
    else if (form && strcmp(form, "split") == 0)
        ctx->tuning.decode_rows = false, ctx->tuning.decode_source = VKF_SOURCE_ENVIRONMENT;
    else if (form && *form)
        vkf_log(ctx, VKF_LOG_WARNING, "VKFORMER_DECODE_FORM=%s ignored: it takes rows or split", form);
}

vkf_status vkf_tuning_set_matmul(vkf_context *ctx, vkf_variant_id variant, const vkf_matmul_tiles *tiles)
{
    if (variant == VKF_VARIANT_MATMUL_COOPMAT || variant == VKF_VARIANT_MATMUL_COOPMAT2 ||
        variant == VKF_VARIANT_MATMUL_COOPMAT2_WG) {
        /* Every matmul on this context uses it from now on (F32 ones too). */
        const char *problem = coopmat_tiles_problem(ctx, variant, tiles);
        if (problem)
            return vkf_fail(!ctx->coopmat || (variant == VKF_VARIANT_MATMUL_COOPMAT2 && !ctx->coopmat2) ||
                                    (variant == VKF_VARIANT_MATMUL_COOPMAT2_WG && !ctx->coopmat2_wg)
                                ? VKF_ERROR_UNSUPPORTED : VKF_ERROR_INVALID_ARGUMENT,
                            "%s tiles %ux%u/%ux%u bk %u workgroup %u on \"%s\": %s", vkf_variant(variant)->name,
                            tiles->bm, tiles->bn, tiles->tm, tiles->tn, tiles->bk, tiles->workgroup, ctx->info.name,
                            problem);
        ctx->tuning.coopmat_variant = variant;
        ctx->tuning.coopmat = *tiles;
        ctx->tuning.coopmat_use = 2;
        ctx->tuning.coopmat_source = VKF_SOURCE_FORCED;
        return VKF_OK;
    }
    if (variant != VKF_VARIANT_MATMUL_TILED && variant != VKF_VARIANT_MATMUL_DIRECT &&
        variant != VKF_VARIANT_MATMUL_SUBGROUP && variant != VKF_VARIANT_MATMUL_BROADCAST)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "not a matmul variant");
    const vkf_matmul_tiles *m = tiles;
    if (variant == VKF_VARIANT_MATMUL_BROADCAST) {
        /* bk is the subgroup size; a subgroup computes tm rows x bk*tn columns. */
        if (m->bk != ctx->info.subgroup_size)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "matmul_broadcast tiles are for subgroups of %u; the device has %u",
                            m->bk, ctx->info.subgroup_size);
        vkf_matmul_tiles want = {0}; /* workgroup stays 0 where the sizes do not divide */
        (void)vkf_matmul_broadcast_tiles(&ctx->info, m->bm, m->bn, m->tm, m->tn, &want);
        if (!want.workgroup || m->workgroup != want.workgroup)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "matmul_broadcast tiles %ux%u/%ux%u (subgroup %u) do not match "
                            "workgroup %u", m->bm, m->bn, m->tm, m->tn, m->bk, m->workgroup);
    } else if (variant == VKF_VARIANT_MATMUL_SUBGROUP) {
        /* bk is the subgroup size the tiles were laid out for; a subgroup computes
         * tm rows x bk*tn columns. */
        if (!ctx->info.subgroup_shuffle)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "matmul_subgroup needs subgroup shuffles in compute shaders");
        if (m->bk != ctx->info.subgroup_size)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "matmul_subgroup tiles are for subgroups of %u; the device has %u",
                            m->bk, ctx->info.subgroup_size);
        uint32_t wg = subgroup_workgroup(m->bk, m->bm, m->bn, m->tm, m->tn);
        if (!wg || m->workgroup != wg)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "matmul_subgroup tiles %ux%u/%ux%u (subgroup %u) do not match workgroup %u",
                            m->bm, m->bn, m->tm, m->tn, m->bk, m->workgroup);
    } else if (!m->tm || !m->tn || !m->bk || m->bm % m->tm || m->bn % m->tn ||
               m->workgroup != (m->bm / m->tm) * (m->bn / m->tn))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "matmul tiles %ux%u/%ux%u do not match workgroup %u", m->bm, m->bn,
                        m->tm, m->tn, m->workgroup);
    if (m->workgroup > ctx->info.max_workgroup_invocations)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "workgroup %u exceeds the device's %u invocations", m->workgroup,
                        ctx->info.max_workgroup_invocations);
    if (variant == VKF_VARIANT_MATMUL_TILED && tiled_shared_bytes(m) > ctx->info.max_shared_memory)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "tiles need %u bytes of shared memory; the device has %u",
                        tiled_shared_bytes(m), ctx->info.max_shared_memory);
    ctx->tuning.matmul_variant = variant;
    ctx->tuning.matmul = *m;
    ctx->tuning.matmul_source = VKF_SOURCE_FORCED; /* vkf_tune_load says FILE */
    /* decode steps of 8..63 rows: one row block of the same family */
    for (uint32_t i = 0; i < 3; i++)
        if ((variant != VKF_VARIANT_MATMUL_SUBGROUP && variant != VKF_VARIANT_MATMUL_BROADCAST) ||
            !lane_tiles(&ctx->info, variant, 8u << i, 128, 8u << i, 4, &ctx->tuning.subgroup_skinny[i]))
            ctx->tuning.subgroup_skinny[i].workgroup = 0;
    ctx->tuning.matmul_min_macs =
        variant == VKF_VARIANT_MATMUL_SUBGROUP || variant == VKF_VARIANT_MATMUL_BROADCAST ? VKF_SUBGROUP_MIN_MACS : 0;
    /* A scalar kernel chosen explicitly: F16 matmuls go back to the built-in
     * coopmat rule (a forced coopmat kernel no longer applies). */
    if (ctx->tuning.coopmat_use == 2) coopmat_builtin(ctx);
    return VKF_OK;
}

/* ------------------------------------------------------------------ attention tiles */

uint64_t vkf_attention_shared_bytes(const vkf_attention_tiles *t, uint32_t head_dim)
{
    if (t->lanes) return 0; /* attention_fused_lanes.comp has none */
    /* Mirrors the shared arrays of attention_fused.comp. */
    uint64_t d4 = vkf_div_up(head_dim, 4), split_rows = t->td > 1 ? t->bq : 1;
    return 2 * (uint64_t)t->bk * d4 * 16        /* k_tile, v_tile */
           + (uint64_t)t->bk * 8                /* key_slot, slot_bits */
           + (uint64_t)t->bq * t->bk * 4        /* p_tile */
           + split_rows * d4 * 16               /* q_tile */
           + split_rows * t->td * 4;            /* row_part */
}

/* Why these attention tiles cannot run on the device (a static string), or NULL;
 * the same rules as attention.c's check before a dispatch. */
const char *vkf_attention_tiles_problem(const vkf_context *ctx, const vkf_attention_tiles *t, uint32_t head_dim)
{
    if (head_dim == 0 || head_dim > VKF_ATTENTION_MAX_HEAD_DIM) return "head_dim out of range";
    if (!t->workgroup || !t->bq || !t->bk || !t->td || !t->tq || (t->td > 1 && t->tq > 1) ||
        (uint64_t)t->workgroup * t->tq != (uint64_t)t->bq * t->td)
        return "tiles need workgroup * tq == bq * td, all positive, and td or tq 1";
    if (t->workgroup > ctx->info.max_workgroup_invocations || t->workgroup > ctx->info.max_workgroup_size[0])
        return "workgroup exceeds the device's limit";
    if (t->lanes > 1) return "lanes is 0 or 1";
    if (t->lanes) {
        uint32_t sg = ctx->info.subgroup_size;
        if (!ctx->info.subgroup_shuffle || !sg) return "the lanes form needs subgroup shuffles";
        if (t->td != 1 || t->bk != sg || t->workgroup % sg)
            return "the lanes form needs td 1, bk the subgroup size and a workgroup of whole subgroups";
    }
    if (vkf_attention_shared_bytes(t, head_dim) > ctx->info.max_shared_memory)
        return "tiles need more shared memory than the device has";
    return NULL;
}

bool vkf_tuning_attention_tiles(const vkf_context *ctx, uint32_t head_dim, struct vkf_attention_tiles *out)
{
    if (!ctx->tuning.attention_head_dim || ctx->tuning.attention_head_dim != head_dim) return false;
    const uint32_t *a = ctx->tuning.attention_tiles;
    *out = (vkf_attention_tiles){.workgroup = a[0], .bq = a[1], .bk = a[2], .td = a[3], .tq = a[4], .lanes = a[5]};
    return true;
}

/* ------------------------------------------------------------------ loading */

/* An integer member in [1, 65536]; false if absent or out of range. */
static bool get_tile(json_t *obj, const char *key, uint32_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v)) return false;
    json_int_t x = json_integer_value(v);
    if (x < 1 || x > 65536) return false;
    *out = (uint32_t)x;
    return true;
}

/* Reads the tune file into the tuning it describes; false with a reason. */
static bool parse_tune_file(vkf_context *ctx, json_t *root, vkf_variant_id *out_variant, vkf_matmul_tiles *out_matmul,
                            uint32_t *out_head_dim, vkf_attention_tiles *out_attention, char *why, size_t why_capacity)
{
    json_t *format = json_object_get(root, "format"), *version = json_object_get(root, "version");
    if (!json_is_object(root) || !json_is_string(format) || strcmp(json_string_value(format), VKF_TUNE_FORMAT) != 0) {
        snprintf(why, why_capacity, "not a vkformer tune file (no \"format\": \"%s\")", VKF_TUNE_FORMAT);
        return false;
    }
    if (!json_is_integer(version) || json_integer_value(version) != VKF_TUNE_VERSION) {
        snprintf(why, why_capacity, "unknown version (this library reads version %d)", VKF_TUNE_VERSION);
        return false;
    }
    json_t *dev = json_object_get(root, "device");
    json_t *vendor = json_object_get(dev, "vendor_id"), *device = json_object_get(dev, "device_id");
    json_t *driver = json_object_get(dev, "driver_version"), *name = json_object_get(dev, "name");
    if (!json_is_integer(vendor) || !json_is_integer(device) || !json_is_integer(driver) || !json_is_string(name)) {
        snprintf(why, why_capacity, "\"device\" needs vendor_id, device_id, driver_version and name");
        return false;
    }
    if (json_integer_value(vendor) != ctx->info.vendor_id || json_integer_value(device) != ctx->info.device_id ||
        json_integer_value(driver) != ctx->info.driver_version || strcmp(json_string_value(name), ctx->info.name) != 0) {
        snprintf(why, why_capacity, "written for another device or driver (\"%s\", driver version %lld)",
                 json_string_value(name), (long long)json_integer_value(driver));
        return false;
    }
    /* lavapipe reports driverVersion 1 from Mesa 22.3 to 25.0 at least, with the same
     * device name for the same LLVM: driverInfo tells the releases apart */
    json_t *info = json_object_get(dev, "driver_info");
    if (json_is_string(info) && strcmp(json_string_value(info), ctx->info.driver_info) != 0) {
        snprintf(why, why_capacity, "written for another driver (\"%s\")", json_string_value(info));
        return false;
    }
    json_t *mm = json_object_get(root, "matmul");
    json_t *kernel = json_object_get(mm, "kernel");
    if (!json_is_object(mm) || !json_is_string(kernel)) {
        snprintf(why, why_capacity, "\"matmul\" needs a \"kernel\"");
        return false;
    }
    if (strcmp(json_string_value(kernel), "matmul_direct") == 0) *out_variant = VKF_VARIANT_MATMUL_DIRECT;
    else if (strcmp(json_string_value(kernel), "matmul_tiled") == 0) *out_variant = VKF_VARIANT_MATMUL_TILED;
    else if (strcmp(json_string_value(kernel), "matmul_subgroup") == 0) *out_variant = VKF_VARIANT_MATMUL_SUBGROUP;
    else if (strcmp(json_string_value(kernel), "matmul_broadcast") == 0) *out_variant = VKF_VARIANT_MATMUL_BROADCAST;
    else {
        snprintf(why, why_capacity, "unknown matmul kernel \"%s\"", json_string_value(kernel));
        return false;
    }
    vkf_matmul_tiles *m = out_matmul;
    if (!get_tile(mm, "workgroup", &m->workgroup) || !get_tile(mm, "bm", &m->bm) || !get_tile(mm, "bn", &m->bn) ||
        !get_tile(mm, "bk", &m->bk) || !get_tile(mm, "tm", &m->tm) || !get_tile(mm, "tn", &m->tn)) {
        snprintf(why, why_capacity, "\"matmul\" needs workgroup, bm, bn, bk, tm, tn as integers 1..65536");
        return false;
    }
    *out_head_dim = 0;
    json_t *at = json_object_get(root, "attention");
    if (at && !json_is_null(at)) {
        vkf_attention_tiles *a = out_attention;
        if (!get_tile(at, "head_dim", out_head_dim) || !get_tile(at, "workgroup", &a->workgroup) ||
            !get_tile(at, "bq", &a->bq) || !get_tile(at, "bk", &a->bk) || !get_tile(at, "td", &a->td) ||
            !get_tile(at, "tq", &a->tq)) {
            snprintf(why, why_capacity, "\"attention\" needs head_dim, workgroup, bq, bk, td, tq as integers");
            return false;
        }
        json_t *lanes = json_object_get(at, "lanes"); /* optional: absent in files before the lanes form */
        if (lanes && (!json_is_integer(lanes) || json_integer_value(lanes) < 0 || json_integer_value(lanes) > 1)) {
            snprintf(why, why_capacity, "\"attention\": \"lanes\" is 0 or 1");
            return false;
        }
        a->lanes = lanes ? (uint32_t)json_integer_value(lanes) : 0;
        const char *problem = vkf_attention_tiles_problem(ctx, a, *out_head_dim);
        if (problem) {
            snprintf(why, why_capacity, "attention tiles: %s", problem);
            return false;
        }
    }
    return true;
}

/* The file's "matmul_coopmat" (absent: the built-in rule). A context without
 * coopmat (turned off, or a driver without it) ignores it and keeps the rest of
 * the file; so does one whose device refuses the tiles. */
static void load_coopmat(vkf_context *ctx, json_t *root, const char *path)
{
    json_t *cm = json_object_get(root, "matmul_coopmat"), *kernel = json_object_get(cm, "kernel");
    if (!cm || json_is_null(cm)) return;
    const char *name = json_is_string(kernel) ? json_string_value(kernel) : "";
    vkf_variant_id v = strcmp(name, "matmul_coopmat") == 0    ? VKF_VARIANT_MATMUL_COOPMAT
                       : strcmp(name, "matmul_coopmat2") == 0 ? VKF_VARIANT_MATMUL_COOPMAT2
                                                              : VKF_VARIANT_COUNT;
    if (strcmp(name, "none") != 0 && v == VKF_VARIANT_COUNT) {
        vkf_log(ctx, VKF_LOG_INFO, "tune file %s: unknown \"matmul_coopmat\" kernel \"%s\" ignored", path, name);
        return;
    }
    if (!ctx->coopmat) {
        vkf_log(ctx, VKF_LOG_INFO, "tune file %s: its cooperative-matrix choice is ignored (coopmat is off on this "
                "context)", path);
        return;
    }
    if (v == VKF_VARIANT_COUNT) {
        ctx->tuning.coopmat_use = 0; /* tuned: the scalar kernel was faster for F16 matmuls */
        ctx->tuning.coopmat_source = VKF_SOURCE_FILE;
        return;
    }
    vkf_matmul_tiles t;
    vkf_tuning saved = ctx->tuning;
    if (!get_tile(cm, "workgroup", &t.workgroup) || !get_tile(cm, "bm", &t.bm) || !get_tile(cm, "bn", &t.bn) ||
        !get_tile(cm, "bk", &t.bk) || !get_tile(cm, "tm", &t.tm) || !get_tile(cm, "tn", &t.tn)) {
        vkf_log(ctx, VKF_LOG_INFO, "tune file %s: \"matmul_coopmat\" ignored: it needs workgroup, bm, bn, bk, tm, tn",
                path);
        return;
    }
    if (vkf_tuning_set_matmul(ctx, v, &t) != VKF_OK) {
        vkf_log(ctx, VKF_LOG_INFO, "tune file %s: \"matmul_coopmat\" ignored: %s", path, vkf_last_error());
        ctx->tuning = saved;
        return;
    }
    ctx->tuning.coopmat_use = 1; /* matmuls with an F16 operand */
    ctx->tuning.coopmat_source = VKF_SOURCE_FILE;
}

void vkf_tune_load(vkf_context *ctx)
{
    char path[1024];
    if (!vkf_cache_file_path(ctx, "tune", ".json", /*with_uuid=*/false, path, sizeof path)) return;
    FILE *f = fopen(path, "rb");
    if (!f) return; /* no tune file: the built-in choices */
    json_error_t jerr;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (!root) {
        vkf_log(ctx, VKF_LOG_INFO, "tune file %s ignored: not valid JSON (line %d: %s)", path, jerr.line, jerr.text);
        return;
    }
    vkf_variant_id variant = VKF_VARIANT_MATMUL_DIRECT;
    vkf_matmul_tiles matmul = {0};
    vkf_attention_tiles attention = {0};
    uint32_t head_dim = 0;
    char why[512];
    bool ok = parse_tune_file(ctx, root, &variant, &matmul, &head_dim, &attention, why, sizeof why);
    if (ok) {
        vkf_tuning saved = ctx->tuning;
        if (vkf_tuning_set_matmul(ctx, variant, &matmul) != VKF_OK) {
            snprintf(why, sizeof why, "matmul: %s", vkf_last_error());
            ctx->tuning = saved;
            ok = false;
        }
    }
    if (ok) load_coopmat(ctx, root, path);
    json_decref(root);
    if (!ok) {
        vkf_log(ctx, VKF_LOG_INFO, "tune file %s ignored: %s", path, why);
        return;
    }
    ctx->tuning.attention_head_dim = head_dim;
    memcpy(ctx->tuning.attention_tiles, &attention, sizeof ctx->tuning.attention_tiles);
    ctx->tuning.from_file = true;
    ctx->tuning.matmul_source = VKF_SOURCE_FILE;
    if (head_dim) ctx->tuning.attention_source = VKF_SOURCE_FILE;
}

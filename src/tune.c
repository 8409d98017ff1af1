/* Tuning on the device and tune files (vkformer.h: vkf_tune_run). A run times each candidate
 * tile shape of the matmul kernels (direct, tiled, subgroup; with coopmat also
 * matmul_coopmat and matmul_coopmat2 on F16 matmuls) and of the fused attention
 * kernel with GPU timestamps, checks every output element against a plain host
 * computation, and keeps the fastest correct one; the file records the winners
 * and every measurement. Loading the file at context creation is tuning.c's (the
 * runtime): it checks the file's device and every tile against the device's
 * limits; anything wrong leaves the built-in choices (tuning.c, attention.c) and
 * says why in the log. A coopmat choice that this context cannot use (coopmat
 * off) is skipped alone, with an info message. */
#include "internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ file names and state */

vkf_status vkf_tune_file_path(const vkf_context *ctx, char *out, size_t capacity)
{
    if (!ctx || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_tune_file_path: NULL argument");
    if (!vkf_cache_file_path(ctx, "tune", ".json", /*with_uuid=*/false, out, capacity))
        return vkf_fail(VKF_ERROR_IO, "no cache directory for the tune file (set VKFORMER_CACHE_DIR or HOME)");
    return VKF_OK;
}

bool vkf_tune_from_file(const vkf_context *ctx) { return ctx && ctx->tuning.from_file; }

void vkf_tune_current(const vkf_context *ctx, const char **out_kernel, uint32_t out_matmul[6],
                      uint32_t *out_attention_head_dim, uint32_t out_attention[5])
{
    if (out_kernel) *out_kernel = ctx ? vkf_variant(ctx->tuning.matmul_variant)->name : NULL;
    if (out_matmul) {
        if (ctx) memcpy(out_matmul, &ctx->tuning.matmul, 6 * sizeof(uint32_t));
        else memset(out_matmul, 0, 6 * sizeof(uint32_t));
    }
    if (out_attention_head_dim) *out_attention_head_dim = ctx ? ctx->tuning.attention_head_dim : 0;
    if (out_attention) {
        if (ctx) memcpy(out_attention, ctx->tuning.attention_tiles, 5 * sizeof(uint32_t));
        else memset(out_attention, 0, 5 * sizeof(uint32_t));
    }
}

/* ------------------------------------------------------------------ cooperative matrix */

static uint32_t round_up(uint32_t v, uint32_t unit) { return unit ? (v + unit - 1) / unit * unit : v; }

/* Coopmat tiles of `family` near the targets: tm, tn rounded up to the fragment
 * (KHR: the device's shape; NV2: its granularity), bk to the fragment depth and 8;
 * wg_m x wg_n subgroups. False where they do not fit ctx. */
static bool coopmat_candidate(const vkf_context *ctx, vkf_variant_id family, uint32_t wg_m, uint32_t wg_n, uint32_t tm,
                              uint32_t tn, uint32_t bk, vkf_matmul_tiles *out)
{
    if (!ctx->coopmat) return false;
    uint32_t fm = ctx->coopmat_shape.m, fn = ctx->coopmat_shape.n, fk = ctx->coopmat_shape.k;
    if (family == VKF_VARIANT_MATMUL_COOPMAT2) {
        fm = ctx->info.coopmat2_granularity[0], fn = ctx->info.coopmat2_granularity[1];
        fk = ctx->info.coopmat2_granularity[2];
    }
    if (!fm || !fn || !fk) return false;
    uint32_t kunit = fk;
    while (kunit % 8) kunit += fk;
    return vkf_matmul_coopmat_tiles(ctx, family, wg_m, wg_n, round_up(tm, fm), round_up(tn, fn), round_up(bk, kunit),
                                    out);
}

vkf_status vkf_tune_force_matmul(vkf_context *ctx, const char *family)
{
    if (!ctx || !family) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_tune_force_matmul: NULL argument");
    if (strcmp(family, "auto") == 0) {
        vkf_tuning_choose(ctx);
        return VKF_OK;
    }
    vkf_matmul_tiles t;
    if (strcmp(family, "coopmat2wg") == 0) {
        /* NV2 at workgroup scope (matmul_coopmat2_wg): no rule picks it; one
         * 128 x 128 matrix per workgroup, 32 deep, rounded up to the device's
         * workgroup-scope granularity, with that entry's workgroup size. */
        if (!ctx->coopmat2_wg)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "matmul_coopmat2_wg: \"%s\" has no VK_NV_cooperative_matrix2 %s",
                            ctx->info.name, !ctx->coopmat2                           ? "(or cooperative matrix is off)"
                                            : !ctx->info.coopmat2_workgroup_scope    ? "workgroup scope"
                                            : !ctx->info.coopmat2_tensor_addressing  ? "tensor addressing"
                                            : !ctx->info.coopmat2_per_element        ? "per-element operations"
                                                                                     : "f16 workgroup-scope entry");
        const uint32_t *g = ctx->info.coopmat2_wg_granularity;
        uint32_t bm = round_up(128, g[0]), bn = round_up(128, g[1]), bk = round_up(32, g[2]);
        t = (vkf_matmul_tiles){.workgroup = ctx->info.coopmat2_wg_invocations, .bm = bm, .bn = bn, .bk = bk,
                               .tm = bm, .tn = bn};
        return vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_COOPMAT2_WG, &t);
    }
    if (strcmp(family, "coopmat") == 0 || strcmp(family, "coopmat2") == 0) {
        vkf_variant_id v = family[7] == '2' ? VKF_VARIANT_MATMUL_COOPMAT2 : VKF_VARIANT_MATMUL_COOPMAT;
        if (!ctx->coopmat || (v == VKF_VARIANT_MATMUL_COOPMAT2 && !ctx->coopmat2))
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: cooperative matrix%s is off or missing on \"%s\"",
                            vkf_variant(v)->name, v == VKF_VARIANT_MATMUL_COOPMAT2 ? " 2" : "", ctx->info.name);
        /* the built-in tiles when they are of this family, else the same targets */
        vkf_tuning saved = ctx->tuning;
        vkf_tuning_choose(ctx);
        vkf_tuning builtin = ctx->tuning;
        ctx->tuning = saved;
        if (builtin.coopmat_variant == v && builtin.coopmat.workgroup) t = builtin.coopmat;
        else if (!coopmat_candidate(ctx, v, 2, 2, 32, 32, 32, &t) && !coopmat_candidate(ctx, v, 1, 1, 16, 16, 16, &t))
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: no tiles fit \"%s\"", vkf_variant(v)->name, ctx->info.name);
        return vkf_tuning_set_matmul(ctx, v, &t);
    }
    if (strcmp(family, "tiled") == 0) {
        t = (vkf_matmul_tiles){.workgroup = 64, .bm = 32, .bn = 32, .bk = 16, .tm = 4, .tn = 4};
        if (ctx->info.max_workgroup_invocations >= 256)
            t = (vkf_matmul_tiles){.workgroup = 256, .bm = 64, .bn = 64, .bk = 16, .tm = 4, .tn = 4};
        return vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_TILED, &t);
    }
    if (strcmp(family, "direct") == 0) {
        t = (vkf_matmul_tiles){.workgroup = 64, .bm = 64, .bn = 64, .bk = 1, .tm = 8, .tn = 8};
        return vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_DIRECT, &t);
    }
    if (strcmp(family, "broadcast") == 0) {
        if (!vkf_matmul_broadcast_tiles(&ctx->info, 64, 128, 32, 4, &t))
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "matmul_broadcast does not run on \"%s\"", ctx->info.name);
        return vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_BROADCAST, &t);
    }
    if (strcmp(family, "subgroup") == 0) {
        uint32_t sg = ctx->info.subgroup_size;
        if (!vkf_matmul_subgroup_tiles(&ctx->info, 64, 128, 32 > sg ? 32 : sg, 4, &t))
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "matmul_subgroup does not run on \"%s\"", ctx->info.name);
        return vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_SUBGROUP, &t);
    }
    return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "unknown matmul kernel \"%s\" (auto, coopmat, coopmat2, coopmat2wg, "
                    "tiled, direct, subgroup, broadcast)", family);
}

/* ------------------------------------------------------------------ measuring */

typedef struct tune_run {
    vkf_context *ctx;
    const vkf_tune_options *o;
    uint32_t repeat;
    json_t *measurements;               /* owned array */
} tune_run;

static void progress(const tune_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(const tune_run *run, const char *fmt, ...)
{
    if (!run->o->progress) return;
    char line[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(line, sizeof line, fmt, args);
    va_end(args);
    run->o->progress(run->o->progress_user, line);
}

static double host_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Submits the recorded list once to warm up, then `repeat` times; the median GPU
 * time (host time on devices without timestamps). */
static vkf_status time_cmd(const tune_run *run, vkf_cmd *cmd, double *out_ms)
{
    VKF_TRY(vkf_cmd_submit(cmd));
    double ms[64];
    uint32_t n = run->repeat < 64 ? run->repeat : 64;
    for (uint32_t r = 0; r < n; r++) {
        double t0 = host_now_ms();
        VKF_TRY(vkf_cmd_submit(cmd));
        ms[r] = host_now_ms() - t0;
        if (run->ctx->info.timestamps) VKF_TRY(vkf_cmd_gpu_ms(cmd, &ms[r]));
    }
    qsort(ms, n, sizeof *ms, compare_doubles);
    *out_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    return VKF_OK;
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static float *random_floats(size_t n)
{
    float *v = malloc(n * sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        v[i] = (float)((rng >> 40) * (2.0 / 16777216.0) - 1.0);
    }
    return v;
}

static vkf_status tensor_from(vkf_context *ctx, const float *data, uint64_t rows, uint64_t cols, vkf_tensor **out)
{
    uint64_t shape[2] = {rows, cols};
    VKF_TRY(vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, shape, out));
    if (data) {
        vkf_status st = vkf_tensor_upload(*out, data, rows * cols * 4);
        if (st != VKF_OK) {
            vkf_tensor_destroy(*out);
            *out = NULL;
            return st;
        }
    }
    return VKF_OK;
}

/* Every element within tol + tol |ref|; the worst index otherwise. */
static bool matches(const float *got, const double *want, size_t n, double tol, size_t *out_worst)
{
    bool ok = true;
    double worst = -1;
    *out_worst = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]);
        if (!(err <= tol + tol * fabs(want[i]))) ok = false;
        if (!(err <= worst)) worst = err, *out_worst = i;
    }
    return ok;
}

static float float_from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
    if (exp == 0x1fu) u = sign | 0x7f800000u | (mant << 13);
    else if (exp) u = sign | ((exp + 112u) << 23) | (mant << 13);
    else if (!mant) u = sign;
    else { /* subnormal: normalise */
        exp = 113;
        while (!(mant & 0x400u)) mant <<= 1, exp--;
        u = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* ------------------------------------------------------------------ matmul candidates */

typedef struct matmul_case {
    uint32_t m, n, k;
    bool f16;                           /* A, B and C stored as F16 (a and b hold the rounded values) */
    float *a, *b;                       /* (m, k), (n, k) */
    double *ref;                        /* (m, n) = A·Bᵀ */
    vkf_tensor *ta, *tb, *tc;
} matmul_case;

static vkf_status tensor_from_f16(vkf_context *ctx, const float *data, uint64_t rows, uint64_t cols, vkf_tensor **out)
{
    uint64_t shape[2] = {rows, cols};
    VKF_TRY(vkf_tensor_create(ctx, VKF_DTYPE_F16, 2, shape, out));
    if (!data) return VKF_OK;
    uint16_t *h = malloc(rows * cols * 2);
    vkf_status st = h ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory tuning");
    for (uint64_t e = 0; h && e < rows * cols; e++) h[e] = vkf_half_from_float(data[e]);
    if (st == VKF_OK) st = vkf_tensor_upload(*out, h, rows * cols * 2);
    free(h);
    if (st != VKF_OK) vkf_tensor_destroy(*out), *out = NULL;
    return st;
}

static void matmul_case_free(matmul_case *c)
{
    free(c->a), free(c->b), free(c->ref);
    vkf_tensor_destroy(c->ta), vkf_tensor_destroy(c->tb), vkf_tensor_destroy(c->tc);
    memset(c, 0, sizeof *c);
}

/* f16: A, B and C F16, the inputs rounded to f16 before the reference is taken. */
static vkf_status matmul_case_make(vkf_context *ctx, uint32_t m, uint32_t n, uint32_t k, bool f16, matmul_case *c)
{
    memset(c, 0, sizeof *c);
    c->m = m, c->n = n, c->k = k, c->f16 = f16;
    c->a = random_floats((size_t)m * k);
    c->b = random_floats((size_t)n * k);
    c->ref = malloc((size_t)m * n * sizeof *c->ref);
    if (!c->a || !c->b || !c->ref) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory tuning");
    for (size_t e = 0; f16 && e < (size_t)m * k; e++) c->a[e] = float_from_half(vkf_half_from_float(c->a[e]));
    for (size_t e = 0; f16 && e < (size_t)n * k; e++) c->b[e] = float_from_half(vkf_half_from_float(c->b[e]));
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t j = 0; j < n; j++) {
            const float *x = c->a + (size_t)i * k, *y = c->b + (size_t)j * k;
            double s = 0;
            for (uint32_t p = 0; p < k; p++) s += (double)x[p] * y[p];
            c->ref[(size_t)i * n + j] = s;
        }
    if (f16) {
        VKF_TRY(tensor_from_f16(ctx, c->a, m, k, &c->ta));
        VKF_TRY(tensor_from_f16(ctx, c->b, n, k, &c->tb));
        return tensor_from_f16(ctx, NULL, m, n, &c->tc);
    }
    VKF_TRY(tensor_from(ctx, c->a, m, k, &c->ta));
    VKF_TRY(tensor_from(ctx, c->b, n, k, &c->tb));
    return tensor_from(ctx, NULL, m, n, &c->tc);
}

/* Runs the context's current matmul tiles on one case: *out_ok tells whether the
 * output matched, *out_ms the median time. A failure to record (a pipeline the
 * driver refuses) is returned. */
static vkf_status matmul_measure(const tune_run *run, matmul_case *c, bool timed, bool *out_ok, double *out_ms)
{
    *out_ok = false;
    *out_ms = 0;
    vkf_cmd *cmd;
    VKF_TRY(vkf_cmd_create(run->ctx, VKF_CMD_TIMESTAMPS, &cmd));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = c->m, d.n = c->n, d.k = c->k;
    d.a.tensor = c->ta, d.b.tensor = c->tb, d.c.tensor = c->tc;
    vkf_status st = vkf_cmd_matmul(cmd, &d);
    if (st == VKF_OK && timed) st = time_cmd(run, cmd, out_ms);
    else if (st == VKF_OK) st = vkf_cmd_submit(cmd);
    vkf_cmd_destroy(cmd);
    size_t count = (size_t)c->m * c->n;
    float *got = malloc(count * 4);
    if (st == VKF_OK && !got) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory tuning");
    if (st == VKF_OK && c->f16) {
        uint16_t *h = malloc(count * 2);
        st = h ? vkf_tensor_download(c->tc, h, (uint64_t)count * 2)
               : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory tuning");
        for (size_t e = 0; st == VKF_OK && e < count; e++) got[e] = float_from_half(h[e]);
        free(h);
    } else if (st == VKF_OK) {
        st = vkf_tensor_download(c->tc, got, (uint64_t)count * 4);
    }
    if (st == VKF_OK) {
        size_t worst;
        /* F16 C: its rounding (2^-11 relative) comes on top */
        *out_ok = matches(got, c->ref, count, c->f16 ? 3e-3 : 1e-3, &worst);
        if (!*out_ok)
            progress(run, "    wrong result at (%zu, %zu): %g, expected %g", worst / c->n, worst % c->n, got[worst],
                     c->ref[worst]);
    }
    free(got);
    return st;
}

typedef struct matmul_candidate {
    vkf_variant_id variant;
    vkf_matmul_tiles t;
} matmul_candidate;

#define MM(v, wg, bm_, bn_, bk_, tm_, tn_)                                                                     \
    {VKF_VARIANT_MATMUL_##v, {.workgroup = wg, .bm = bm_, .bn = bn_, .bk = bk_, .tm = tm_, .tn = tn_}}
/* matmul_subgroup: bm x bn per workgroup, tm x tn per lane; the workgroup and bk
 * (the subgroup size) are filled in for the device being tuned. */
#define MMS(bm_, bn_, tm_, tn_) {VKF_VARIANT_MATMUL_SUBGROUP, {.bm = bm_, .bn = bn_, .tm = tm_, .tn = tn_}}
/* matmul_broadcast: the same, tm rows per subgroup. */
#define MMB(bm_, bn_, tm_, tn_) {VKF_VARIANT_MATMUL_BROADCAST, {.bm = bm_, .bn = bn_, .tm = tm_, .tn = tn_}}
/* Candidates for CPU drivers: the kernels without shared memory. */
static const matmul_candidate cpu_matmul[] = {
    MMS(64, 128, 32, 4), MMS(64, 64, 32, 4),   MMS(64, 64, 16, 4),  MMS(128, 128, 32, 4),
    MMS(64, 128, 16, 8), MMS(64, 64, 16, 2),   MMS(64, 96, 32, 3),
    MMB(64, 128, 32, 4), MMB(64, 64, 32, 4),   MMB(96, 128, 24, 4), MMB(64, 128, 16, 8), MMB(64, 64, 64, 2),
    MM(DIRECT, 64, 64, 64, 1, 8, 8),    MM(DIRECT, 64, 32, 32, 1, 4, 4),    MM(DIRECT, 64, 128, 64, 1, 16, 8),
    MM(DIRECT, 64, 64, 128, 1, 8, 16),  MM(DIRECT, 16, 32, 32, 1, 8, 8),    MM(DIRECT, 32, 64, 32, 1, 8, 8),
    MM(DIRECT, 128, 64, 128, 1, 8, 8),  MM(DIRECT, 16, 64, 16, 1, 16, 4),   MM(DIRECT, 64, 64, 32, 1, 8, 4),
    MM(TILED, 64, 64, 64, 16, 8, 8),
};
static const matmul_candidate cpu_matmul_quick[] = {
    MMS(64, 128, 32, 4), MMS(64, 64, 16, 4), MMB(64, 128, 32, 4), MM(DIRECT, 64, 64, 64, 1, 8, 8), MM(TILED, 64, 64, 64, 16, 8, 8),
};
/* Candidates for GPUs: mostly the shared-memory kernel. */
static const matmul_candidate gpu_matmul[] = {
    MM(TILED, 256, 64, 64, 16, 4, 4),   MM(TILED, 256, 128, 128, 8, 8, 8),  MM(TILED, 256, 128, 128, 16, 8, 8),
    MM(TILED, 256, 128, 64, 16, 8, 4),  MM(TILED, 256, 64, 128, 16, 4, 8),  MM(TILED, 128, 64, 64, 16, 8, 4),
    MM(TILED, 64, 64, 64, 16, 8, 8),    MM(TILED, 256, 64, 64, 32, 4, 4),   MM(TILED, 128, 128, 64, 8, 8, 8),
    MM(DIRECT, 64, 64, 64, 1, 8, 8),    MM(DIRECT, 256, 64, 64, 1, 4, 4),
    /* more shapes of matmul_tiled's GPU form (groups of 4x4, 16-byte loads); none past
     * 8x8 per invocation: RADV keeps 8x16 accumulators in scratch memory */
    MM(TILED, 256, 64, 128, 16, 8, 4),  MM(TILED, 256, 64, 128, 8, 8, 4),   MM(TILED, 256, 128, 64, 8, 4, 8),
};
static const matmul_candidate gpu_matmul_quick[] = {
    MM(TILED, 256, 64, 64, 16, 4, 4), MM(TILED, 64, 64, 64, 16, 8, 8), MM(DIRECT, 64, 64, 64, 1, 8, 8),
    MM(TILED, 256, 128, 128, 8, 8, 8),  MM(TILED, 256, 64, 128, 16, 8, 4),
};
#undef MM
#undef MMS
#undef MMB

static void tiles_label(const matmul_candidate *c, char *out, size_t cap)
{
    if (c->variant == VKF_VARIANT_MATMUL_COOPMAT || c->variant == VKF_VARIANT_MATMUL_COOPMAT2)
        snprintf(out, cap, "%s %ux%u tile, %ux%u per subgroup, bk %u, %u invocations", vkf_variant(c->variant)->name,
                 c->t.bm, c->t.bn, c->t.tm, c->t.tn, c->t.bk, c->t.workgroup);
    else if (c->variant == VKF_VARIANT_MATMUL_SUBGROUP || c->variant == VKF_VARIANT_MATMUL_BROADCAST)
        snprintf(out, cap, "%s %ux%u tile, %u rows x %u columns per lane, subgroup %u, %u invocations",
                 vkf_variant(c->variant)->name, c->t.bm, c->t.bn, c->t.tm, c->t.tn, c->t.bk, c->t.workgroup);
    else
        snprintf(out, cap, "%s %ux%u tile, %ux%u per invocation, bk %u, %u invocations", vkf_variant(c->variant)->name,
                 c->t.bm, c->t.bn, c->t.tm, c->t.tn, c->t.bk, c->t.workgroup);
}

static json_t *matmul_tiles_json(vkf_variant_id variant, const vkf_matmul_tiles *t)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "kernel", vkf_variant(variant)->name, "workgroup",
                     (json_int_t)t->workgroup, "bm", (json_int_t)t->bm, "bn", (json_int_t)t->bn, "bk",
                     (json_int_t)t->bk, "tm", (json_int_t)t->tm, "tn", (json_int_t)t->tn);
}

static bool is_coopmat(vkf_variant_id v) { return v == VKF_VARIANT_MATMUL_COOPMAT || v == VKF_VARIANT_MATMUL_COOPMAT2; }

/* Times every candidate on every shape (square sizes; f16: A, B and C F16) after
 * an untimed odd shape; the winner has the least total time relative to the first
 * candidate (the baseline), over the shapes it ran correctly. Leaves ctx's tuning
 * as it found it. */
static vkf_status race(tune_run *run, const matmul_candidate *cands, size_t n, const uint32_t *sizes,
                       uint32_t size_count, bool f16, matmul_candidate *out_best)
{
    vkf_context *ctx = run->ctx;
    vkf_tuning saved = ctx->tuning;
    matmul_case cases[4], odd;
    vkf_status st = VKF_OK;
    uint32_t made = 0;
    for (; st == VKF_OK && made < size_count; made++)
        st = matmul_case_make(ctx, sizes[made], sizes[made], sizes[made], f16, &cases[made]);
    /* Not a multiple of any tile and K not a multiple of 4 (no vec4 loads): the edges. */
    bool odd_made = false;
    if (st == VKF_OK) st = matmul_case_make(ctx, 100, 257, 63, f16, &odd), odd_made = true;
    double *base = calloc(size_count, sizeof *base);
    double best_score = INFINITY;
    for (size_t c = 0; st == VKF_OK && c < n; c++) {
        char label[160];
        tiles_label(&cands[c], label, sizeof label);
        vkf_status set = vkf_tuning_set_matmul(ctx, cands[c].variant, &cands[c].t);
        if (set != VKF_OK) {
            progress(run, "  %s: skipped (%s)", label, vkf_last_error());
            continue;
        }
        ctx->tuning.matmul_min_macs = 0; /* the candidate itself on every case, the small odd one too */
        if (!is_coopmat(cands[c].variant)) ctx->tuning.coopmat_use = 0; /* F16 cases on the scalar kernel too */
        bool ok = true;
        double score = 0;
        vkf_status rs = matmul_measure(run, &odd, /*timed=*/false, &ok, &(double){0});
        for (uint32_t s = 0; rs == VKF_OK && ok && s < size_count; s++) {
            double ms;
            rs = matmul_measure(run, &cases[s], /*timed=*/true, &ok, &ms);
            if (rs != VKF_OK) break;
            double gflops = 2.0 * sizes[s] * sizes[s] * sizes[s] / (ms * 1e-3) / 1e9;
            progress(run, "  %s: %u^3 %s %.3f ms, %.2f GFLOP/s%s", label, sizes[s], f16 ? "f16" : "f32", ms, gflops,
                     ok ? "" : ", WRONG");
            json_t *m = matmul_tiles_json(cands[c].variant, &cands[c].t);
            json_object_set_new(m, "op", json_string("matmul"));
            json_object_set_new(m, "dtype", json_string(f16 ? "f16" : "f32"));
            json_object_set_new(m, "size", json_integer(sizes[s]));
            json_object_set_new(m, "ms", json_real(ms));
            json_object_set_new(m, "gflops", json_real(gflops));
            json_object_set_new(m, "correct", json_boolean(ok));
            json_array_append_new(run->measurements, m);
            if (c == 0) base[s] = ms;
            score += base[s] > 0 ? ms / base[s] : ms;
        }
        if (rs != VKF_OK) {
            /* The device refused this shape (e.g. a pipeline it cannot build): skip it. */
            if (ctx->lost) st = rs;
            progress(run, "  %s: failed (%s)", label, vkf_last_error());
            continue;
        }
        if (!ok) {
            progress(run, "  %s: wrong result, disqualified", label);
            continue;
        }
        /* Another candidate must beat the best so far by 5%: the baseline stays
         * unless something is clearly faster (timings on a busy machine are noisy). */
        if (score < best_score * (c == 0 ? 1.0 : 0.95)) best_score = score, *out_best = cands[c];
    }
    ctx->tuning = saved;
    if (st == VKF_OK && !isfinite(best_score))
        st = vkf_fail(VKF_ERROR_VULKAN, "tune: no matmul candidate ran correctly on \"%s\"", ctx->info.name);
    for (uint32_t s = 0; s < made; s++) matmul_case_free(&cases[s]);
    if (odd_made) matmul_case_free(&odd);
    free(base);
    return st;
}

/* The scalar kernels on F32 matmuls: the built-in choice first (the baseline). */
static vkf_status tune_matmul(tune_run *run, const uint32_t *sizes, uint32_t size_count, matmul_candidate *out_best)
{
    vkf_context *ctx = run->ctx;
    bool cpu = ctx->info.type == VKF_DEVICE_CPU;
    const matmul_candidate *list = cpu ? (run->o->quick ? cpu_matmul_quick : cpu_matmul)
                                       : (run->o->quick ? gpu_matmul_quick : gpu_matmul);
    size_t count = cpu ? (run->o->quick ? sizeof cpu_matmul_quick : sizeof cpu_matmul) / sizeof *list
                       : (run->o->quick ? sizeof gpu_matmul_quick : sizeof gpu_matmul) / sizeof *list;
    /* The built-in choice first (the baseline), unless it is on the list already. */
    matmul_candidate *cands = calloc(count + 1, sizeof *cands);
    if (!cands) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory tuning");
    const vkf_tuning *builtin = &ctx->tuning;
    size_t n = 0;
    cands[n++] = (matmul_candidate){builtin->matmul_variant, builtin->matmul};
    for (size_t i = 0; i < count; i++) {
        matmul_candidate c = list[i];
        if (c.variant == VKF_VARIANT_MATMUL_SUBGROUP &&
            !vkf_matmul_subgroup_tiles(&ctx->info, c.t.bm, c.t.bn, c.t.tm, c.t.tn, &c.t))
            continue; /* no shuffles, or not this subgroup size */
        if (c.variant == VKF_VARIANT_MATMUL_BROADCAST &&
            !vkf_matmul_broadcast_tiles(&ctx->info, c.t.bm, c.t.bn, c.t.tm, c.t.tn, &c.t))
            continue; /* not this subgroup size */
        if (c.variant != builtin->matmul_variant || memcmp(&c.t, &builtin->matmul, sizeof builtin->matmul) != 0)
            cands[n++] = c;
    }
    vkf_status st = race(run, cands, n, sizes, size_count, /*f16=*/false, out_best);
    free(cands);
    return st;
}

/* Coopmat candidates: wg_m x wg_n subgroups of tm x tn, K stages of bk (rounded up
 * to the device's fragment or granularity by coopmat_candidate). */
typedef struct coopmat_shape {
    vkf_variant_id family;
    uint32_t wg_m, wg_n, tm, tn, bk;
} coopmat_shape;
#define KHR(wm, wn, tm_, tn_, bk_) {VKF_VARIANT_MATMUL_COOPMAT, wm, wn, tm_, tn_, bk_}
#define NV2(wm, wn, tm_, tn_, bk_) {VKF_VARIANT_MATMUL_COOPMAT2, wm, wn, tm_, tn_, bk_}
static const coopmat_shape coopmat_list[] = {
    KHR(2, 2, 32, 32, 32), KHR(2, 2, 16, 16, 32), KHR(1, 1, 32, 32, 32), KHR(2, 2, 32, 32, 16),
    KHR(4, 2, 16, 32, 32), KHR(2, 2, 32, 64, 16), KHR(4, 4, 16, 16, 16),
    NV2(2, 2, 32, 32, 32), NV2(2, 2, 64, 32, 16), NV2(2, 2, 16, 16, 32), NV2(1, 1, 32, 32, 32),
    NV2(4, 2, 32, 32, 16), NV2(2, 2, 32, 64, 16), NV2(1, 1, 64, 64, 16),
};
static const coopmat_shape coopmat_list_quick[] = {KHR(2, 2, 32, 32, 32), NV2(2, 2, 32, 32, 32)};
#undef KHR
#undef NV2

/* Which kernel F16 matmuls (A, B, C F16) should run: the F32 winner `scalar` (the
 * baseline) against the coopmat candidates this context can run. *out_best is a
 * coopmat candidate, or `scalar` when none beat it. */
static vkf_status tune_coopmat(tune_run *run, const uint32_t *sizes, uint32_t size_count, const matmul_candidate *scalar,
                               matmul_candidate *out_best)
{
    vkf_context *ctx = run->ctx;
    const coopmat_shape *list = run->o->quick ? coopmat_list_quick : coopmat_list;
    size_t count = run->o->quick ? sizeof coopmat_list_quick / sizeof *list : sizeof coopmat_list / sizeof *list;
    matmul_candidate cands[1 + sizeof coopmat_list / sizeof *coopmat_list];
    size_t n = 0;
    cands[n++] = *scalar;
    for (size_t i = 0; i < count; i++) {
        const coopmat_shape *c = &list[i];
        matmul_candidate m = {c->family, {0}};
        if (coopmat_candidate(ctx, c->family, c->wg_m, c->wg_n, c->tm, c->tn, c->bk, &m.t)) cands[n++] = m;
    }
    progress(run, "F16 matmuls (A, B, C F16): the F32 winner against %zu cooperative-matrix candidates", n - 1);
    *out_best = *scalar;
    return race(run, cands, n, sizes, size_count, /*f16=*/true, out_best);
}

/* ------------------------------------------------------------------ attention candidates */

typedef struct attention_case {
    uint32_t heads, head_dim, n;
    float *q, *k, *v;                   /* (n, heads * head_dim) each */
    double *ref;                        /* (n, heads * head_dim) */
    vkf_tensor *tq, *tk, *tv, *tout;
} attention_case;

static void attention_case_free(attention_case *c)
{
    free(c->q), free(c->k), free(c->v), free(c->ref);
    vkf_tensor_destroy(c->tq), vkf_tensor_destroy(c->tk), vkf_tensor_destroy(c->tv), vkf_tensor_destroy(c->tout);
    memset(c, 0, sizeof *c);
}

static vkf_status attention_case_make(vkf_context *ctx, uint32_t n, uint32_t heads, uint32_t head_dim,
                                      attention_case *c)
{
    memset(c, 0, sizeof *c);
    c->n = n, c->heads = heads, c->head_dim = head_dim;
    size_t dm = (size_t)heads * head_dim, all = (size_t)n * dm;
    c->q = random_floats(all), c->k = random_floats(all), c->v = random_floats(all);
    c->ref = calloc(all, sizeof *c->ref);
    double *p = malloc(n * sizeof *p);
    if (!c->q || !c->k || !c->v || !c->ref || !p) {
        free(p);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory tuning");
    }
    double scale = 1.0 / sqrt((double)head_dim);
    for (uint32_t h = 0; h < heads; h++)
        for (uint32_t i = 0; i < n; i++) {
            /* ref[i, h, :] = Σ_j softmax_j(scale q_i·k_j) v_j */
            double mx = -INFINITY, sum = 0;
            for (uint32_t j = 0; j < n; j++) {
                double s = 0;
                for (uint32_t e = 0; e < head_dim; e++)
                    s += (double)c->q[i * dm + h * head_dim + e] * c->k[j * dm + h * head_dim + e];
                p[j] = s * scale;
                if (p[j] > mx) mx = p[j];
            }
            for (uint32_t j = 0; j < n; j++) sum += p[j] = exp(p[j] - mx);
            double *out = c->ref + i * dm + h * head_dim;
            for (uint32_t j = 0; j < n; j++)
                for (uint32_t e = 0; e < head_dim; e++) out[e] += p[j] / sum * c->v[j * dm + h * head_dim + e];
        }
    free(p);
    VKF_TRY(tensor_from(ctx, c->q, n, dm, &c->tq));
    VKF_TRY(tensor_from(ctx, c->k, n, dm, &c->tk));
    VKF_TRY(tensor_from(ctx, c->v, n, dm, &c->tv));
    return tensor_from(ctx, NULL, n, dm, &c->tout);
}

static vkf_status attention_measure(const tune_run *run, attention_case *c, const vkf_attention_tiles *tiles,
                                    bool *out_ok, double *out_ms)
{
    *out_ok = false;
    vkf_cmd *cmd;
    VKF_TRY(vkf_cmd_create(run->ctx, VKF_CMD_TIMESTAMPS, &cmd));
    vkf_attention_desc d;
    vkf_attention_desc_init(&d);
    d.batch = 1, d.heads = c->heads, d.head_dim = c->head_dim, d.lq = d.lk = c->n;
    d.scale = 1.0f / sqrtf((float)c->head_dim);
    d.q.tensor = c->tq, d.k.tensor = c->tk, d.v.tensor = c->tv, d.out = c->tout;
    d.tiles = tiles;
    vkf_status st = vkf_op_attention_fused(cmd, &d);
    if (st == VKF_OK) st = time_cmd(run, cmd, out_ms);
    vkf_cmd_destroy(cmd);
    size_t all = (size_t)c->n * c->heads * c->head_dim;
    float *got = malloc(all * 4);
    if (st == VKF_OK && !got) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory tuning");
    if (st == VKF_OK) st = vkf_tensor_download(c->tout, got, all * 4);
    if (st == VKF_OK) {
        size_t worst;
        *out_ok = matches(got, c->ref, all, 1e-3, &worst);
        if (!*out_ok) progress(run, "    wrong result at element %zu: %g, expected %g", worst, got[worst], c->ref[worst]);
    }
    free(got);
    return st;
}

#define AT(wg, bq_, bk_, td_, tq_) {.workgroup = wg, .bq = bq_, .bk = bk_, .td = td_, .tq = tq_}
/* The lanes form with `subgroups` subgroups of tq rows per lane: workgroup, bq and
 * bk are filled in for the device's subgroup size. */
#define ATL(subgroups, tq_) {.workgroup = subgroups, .tq = tq_, .td = 1, .lanes = 1}
/* CPU drivers: the rows form (td 1) and the lanes form. tq 8 at head_dim 64
 * compiles for many seconds on lavapipe (the lanes form 20-30 s on Mesa 22.3). */
static const vkf_attention_tiles cpu_attention[] = {
    ATL(1, 4), ATL(1, 2), ATL(2, 4),
    AT(16, 32, 32, 1, 2), AT(16, 64, 16, 1, 4), AT(16, 64, 64, 1, 4), AT(32, 128, 32, 1, 4), AT(8, 32, 32, 1, 4),
};
static const vkf_attention_tiles cpu_attention_quick[] = {ATL(1, 2), AT(16, 32, 32, 1, 2)};
/* GPUs: the split form (tq 1). */
static const vkf_attention_tiles gpu_attention[] = {
    AT(256, 32, 32, 8, 1), AT(256, 16, 32, 16, 1), AT(128, 16, 32, 8, 1), AT(256, 64, 32, 4, 1),
    AT(256, 32, 64, 8, 1), AT(128, 32, 32, 4, 1), AT(64, 16, 32, 4, 1),
};
static const vkf_attention_tiles gpu_attention_quick[] = {AT(128, 16, 32, 8, 1)};
#undef AT
#undef ATL

static vkf_status tune_attention(tune_run *run, uint32_t n, uint32_t heads, uint32_t head_dim,
                                 vkf_attention_tiles *out_best)
{
    vkf_context *ctx = run->ctx;
    bool cpu = ctx->info.type == VKF_DEVICE_CPU;
    const vkf_attention_tiles *list = cpu ? (run->o->quick ? cpu_attention_quick : cpu_attention)
                                          : (run->o->quick ? gpu_attention_quick : gpu_attention);
    size_t count = cpu ? (run->o->quick ? sizeof cpu_attention_quick : sizeof cpu_attention) / sizeof *list
                       : (run->o->quick ? sizeof gpu_attention_quick : sizeof gpu_attention) / sizeof *list;
    vkf_attention_tiles cands[16];
    size_t nc = 0;
    /* The built-in choice first (without any tuned tiles). */
    uint32_t saved_head_dim = ctx->tuning.attention_head_dim;
    ctx->tuning.attention_head_dim = 0;
    vkf_attention_tiles_choose(ctx, head_dim, &cands[nc++]);
    ctx->tuning.attention_head_dim = saved_head_dim;
    for (size_t i = 0; i < count && nc < 16; i++) {
        vkf_attention_tiles t = list[i];
        if (t.lanes) {
            uint32_t sg = ctx->info.subgroup_size;
            if (!ctx->info.subgroup_shuffle || !sg) continue;
            t.workgroup *= sg, t.bk = sg, t.bq = t.workgroup * t.tq;
        }
        if (memcmp(&t, &cands[0], sizeof cands[0]) != 0) cands[nc++] = t;
    }

    attention_case c;
    vkf_status st = attention_case_make(ctx, n, heads, head_dim, &c);
    double best = INFINITY;
    for (size_t i = 0; st == VKF_OK && i < nc; i++) {
        const vkf_attention_tiles *t = &cands[i];
        char label[160];
        snprintf(label, sizeof label, "%s %u invocations, bq %u, bk %u, td %u, tq %u",
                 t->lanes ? "attention_fused_lanes" : "attention_fused", t->workgroup, t->bq, t->bk, t->td, t->tq);
        const char *problem = vkf_attention_tiles_problem(ctx, t, head_dim);
        if (problem) {
            progress(run, "  %s: skipped (%s)", label, problem);
            continue;
        }
        bool ok;
        double ms = 0;
        vkf_status rs = attention_measure(run, &c, t, &ok, &ms);
        if (rs != VKF_OK) {
            if (ctx->lost) st = rs;
            progress(run, "  %s: failed (%s)", label, vkf_last_error());
            continue;
        }
        progress(run, "  %s: n %u, %u heads of %u: %.3f ms%s", label, n, heads, head_dim, ms, ok ? "" : ", WRONG");
        json_t *m = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:b}", "op", "attention", "n",
                              (json_int_t)n, "heads", (json_int_t)heads, "head_dim", (json_int_t)head_dim,
                              "workgroup", (json_int_t)t->workgroup, "bq", (json_int_t)t->bq, "bk", (json_int_t)t->bk,
                              "td", (json_int_t)t->td, "tq", (json_int_t)t->tq, "lanes", (json_int_t)t->lanes, "ms", ms,
                              "correct", ok);
        json_array_append_new(run->measurements, m);
        if (!ok) {
            progress(run, "  %s: wrong result, disqualified", label);
            continue;
        }
        if (ms < best * (i == 0 ? 1.0 : 0.95)) best = ms, *out_best = *t; /* 5% margin, as for matmul */
    }
    attention_case_free(&c);
    if (st == VKF_OK && !isfinite(best))
        st = vkf_fail(VKF_ERROR_VULKAN, "tune: no attention candidate ran correctly on \"%s\"", ctx->info.name);
    return st;
}

/* ------------------------------------------------------------------ the run */

vkf_status vkf_tune_run(vkf_context *ctx, const vkf_tune_options *o, char *out_path, size_t capacity)
{
    if (!ctx || !o) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_tune_run: NULL argument");
    if (out_path && capacity) out_path[0] = '\0';
    if (ctx->lost) return vkf_fail(VKF_ERROR_DEVICE_LOST, "the device was lost; destroy and recreate the context");
    if (ctx->compile_only)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "tune: \"%s\" is a compile-only device (it executes nothing), so no "
                        "candidate can be timed or checked", ctx->info.name);
    char path[1024];
    if (o->path) {
        if (snprintf(path, sizeof path, "%s", o->path) >= (int)sizeof path)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "tune: path too long");
    } else {
        VKF_TRY(vkf_tune_file_path(ctx, path, sizeof path));
    }
    tune_run run = {.ctx = ctx, .o = o, .repeat = o->repeat ? o->repeat : o->quick ? 2 : 5,
                    .measurements = json_array()};
    if (!run.measurements) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory tuning");
    /* Representative shapes: Transformer-base sized matmuls and attention. */
    static const uint32_t full_sizes[] = {512, 1024}, quick_sizes[] = {256};
    const uint32_t *sizes = o->quick ? quick_sizes : full_sizes;
    uint32_t size_count = o->quick ? 1 : 2;
    uint32_t att_n = o->quick ? 128 : 512, att_heads = o->quick ? 2 : 8, att_head_dim = 64;

    progress(&run, "tuning on %s (%s candidates, median of %u)", ctx->info.name, o->quick ? "quick" : "all",
             run.repeat);
    matmul_candidate mm = {0}, cm = {0};
    vkf_attention_tiles at = {0};
    vkf_status st = tune_matmul(&run, sizes, size_count, &mm);
    /* Cooperative matrix, where the context has it: which kernel F16 matmuls run. */
    if (st == VKF_OK && ctx->coopmat) st = tune_coopmat(&run, sizes, size_count, &mm, &cm);
    if (st == VKF_OK) st = tune_attention(&run, att_n, att_heads, att_head_dim, &at);
    if (st != VKF_OK) {
        json_decref(run.measurements);
        return st;
    }
    json_t *root = json_pack("{s:s, s:I, s:s, s:b, s:{s:I, s:I, s:I, s:s, s:s, s:s}, s:o, s:{s:I, s:I, s:I, s:I, "
                             "s:I, s:I, s:I}, s:o}",
                             "format", VKF_TUNE_FORMAT, "version", (json_int_t)VKF_TUNE_VERSION, "vkformer",
                             vkf_version_string(), "quick", o->quick, "device", "vendor_id",
                             (json_int_t)ctx->info.vendor_id, "device_id", (json_int_t)ctx->info.device_id,
                             "driver_version", (json_int_t)ctx->info.driver_version, "name", ctx->info.name,
                             "driver_name", ctx->info.driver_name, "driver_info", ctx->info.driver_info, "matmul",
                             matmul_tiles_json(mm.variant, &mm.t), "attention", "head_dim", (json_int_t)att_head_dim,
                             "workgroup", (json_int_t)at.workgroup, "bq", (json_int_t)at.bq, "bk", (json_int_t)at.bk,
                             "td", (json_int_t)at.td, "tq", (json_int_t)at.tq, "lanes", (json_int_t)at.lanes,
                             "measurements", run.measurements);
    if (!root) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory writing the tune file");
    /* "matmul_coopmat": the kernel of matmuls with an F16 operand, "none" for the
     * scalar one above; absent when coopmat was off (later contexts then use the
     * built-in rule). Readers that predate it ignore the key. */
    if (ctx->coopmat)
        json_object_set_new(root, "matmul_coopmat", is_coopmat(cm.variant) ? matmul_tiles_json(cm.variant, &cm.t)
                                                                           : json_pack("{s:s}", "kernel", "none"));
    char *text = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    if (!text) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory writing the tune file");
    char error[1300];
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps leaves room for the NUL: the newline replaces it */
    bool written = vkf_cache_write_file(path, text, len + 1, error, sizeof error);
    free(text);
    if (!written) return vkf_fail(VKF_ERROR_IO, "tune file not written: %s", error);
    /* The winners apply to this context from now on, as to later ones. */
    VKF_TRY(vkf_tuning_set_matmul(ctx, mm.variant, &mm.t));
    if (ctx->coopmat && is_coopmat(cm.variant)) {
        VKF_TRY(vkf_tuning_set_matmul(ctx, cm.variant, &cm.t));
        ctx->tuning.coopmat_use = 1; /* F16 matmuls only */
    } else if (ctx->coopmat) {
        ctx->tuning.coopmat_use = 0;
    }
    ctx->tuning.attention_head_dim = att_head_dim;
    memcpy(ctx->tuning.attention_tiles, &at, sizeof ctx->tuning.attention_tiles);
    char label[160];
    tiles_label(&mm, label, sizeof label);
    progress(&run, "matmul: %s; attention (head_dim %u): %s%u invocations, bq %u, bk %u, td %u, tq %u", label,
             att_head_dim, at.lanes ? "lanes form, " : "", at.workgroup, at.bq, at.bk, at.td, at.tq);
    if (ctx->coopmat) {
        tiles_label(&cm, label, sizeof label);
        progress(&run, "F16 matmuls: %s", is_coopmat(cm.variant) ? label : "the scalar kernel above (no coopmat)");
    }
    if (out_path && capacity) snprintf(out_path, capacity, "%s", path);
    return VKF_OK;
}

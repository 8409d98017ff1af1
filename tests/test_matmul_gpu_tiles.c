/* matmul_tiled in the tile shapes GPUs get (issue 36, fp32 scalar GEMM): the AMD
 * rule's 128x128 with 8x8 per invocation, Intel's 64x128 with 8x4, and the larger
 * `tune` candidates, forced on the software drivers here and run against the C
 * reference (ref_matmul, double accumulation) on odd shapes: every edge of the
 * workgroup tile, K not a multiple of the K slice, K a multiple of 4 or not (the
 * 16-byte loads with the next slice in registers, or the scalar loads), B (n, k)
 * and (k, n), F32, F16 and int8 B, F32 and F16 activations, offsets and padded row
 * strides, a batch, bias, activation and residual. Also: the rules that pick these
 * tiles (AMD and Intel GPUs; software drivers keep theirs) and the refusal of tiles
 * whose padded shared rows pass the device's shared memory.
 *
 * Tolerances: F32 activations abs 1e-5 + 3e-7 k, rel 2e-5 (fp32 accumulation of
 * products of values in [-1, 1), weights as test_ops's); F16 C: abs 2e-3, rel 2e-3
 * (C rounded to F16 after the epilogue). */
#include "harness.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { B_F32, B_F16, B_I8 } b_kind;

typedef struct mm_case {
    uint32_t m, n, k;
    uint32_t items;                     /* batch items (A, B, C and R batched) */
    uint32_t pad;                       /* extra elements at the start and per row of every matrix */
    bool b_kn;
} mm_case;

static void round_f16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = ref_f16_to_f32(ref_f32_to_f16(x[i]));
}

static vkf_tensor *tensor_of(vkf_context *ctx, const float *x, size_t n, bool f16)
{
    if (!f16) return harness_tensor(ctx, x, 1, n);
    uint16_t *h = harness_alloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = ref_f32_to_f16(x[i]);
    vkf_tensor *t = NULL;
    uint64_t shape = n;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &shape, &t));
    CHECK_OK(vkf_tensor_upload(t, h, n * 2));
    free(h);
    return t;
}

static float *download(vkf_tensor *t, size_t n, bool f16)
{
    if (!f16) return harness_download(t);
    uint16_t *h = harness_alloc(n * 2);
    float *out = harness_alloc(n * 4);
    CHECK_OK(vkf_tensor_download(t, h, n * 2));
    for (size_t i = 0; i < n; i++) out[i] = ref_f16_to_f32(h[i]);
    free(h);
    return out;
}

static void run_case(vkf_context *ctx, const char *tiles, const mm_case *c, b_kind bk, bool act16, uint64_t seed)
{
    size_t off = c->pad, lda = c->k + c->pad, ldb = (c->b_kn ? c->n : c->k) + c->pad, ldc = c->n + c->pad;
    size_t na = c->m * lda, nb = (c->b_kn ? c->k : c->n) * ldb, nc = c->m * ldc;
    size_t ta_n = off + na * c->items, tb_n = off + nb * c->items, tc_n = off + nc * c->items;
    float *a = harness_random(ta_n, seed), *b = harness_random(tb_n, seed + 1), *r = harness_random(tc_n, seed + 2);
    float *bias = harness_random(c->n, seed + 3), *scale = harness_random(c->n, seed + 4);
    if (act16) round_f16(a, ta_n), round_f16(r, tc_n);
    int8_t *q = NULL;
    vkf_tensor *tb = NULL, *tscale = NULL;
    if (bk == B_I8) {
        q = harness_alloc(tb_n);
        for (size_t i = 0; i < tb_n; i++) q[i] = (int8_t)lrintf(b[i] * 127.0f);
        for (uint32_t j = 0; j < c->n; j++) scale[j] = (1.0f + 0.5f * scale[j]) / 127.0f;
        uint64_t shape = tb_n;
        CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I8, 1, &shape, &tb));
        CHECK_OK(vkf_tensor_upload(tb, q, tb_n));
        tscale = harness_tensor(ctx, scale, 1, c->n);
    } else {
        if (bk == B_F16) round_f16(b, tb_n);
        tb = tensor_of(ctx, b, tb_n, bk == B_F16);
    }
    /* C starts as 1234 (exact in F16): the padding between rows must stay so */
    float *fill = harness_alloc(tc_n * 4);
    for (size_t i = 0; i < tc_n; i++) fill[i] = 1234.0f;
    vkf_tensor *ta = tensor_of(ctx, a, ta_n, act16), *tr = tensor_of(ctx, r, tc_n, act16);
    vkf_tensor *tc = tensor_of(ctx, fill, tc_n, act16), *tbias = harness_tensor(ctx, bias, 1, c->n);

    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = c->m, d.n = c->n, d.k = c->k;
    d.batch[0] = c->items;
    d.a = (vkf_matrix_view){.tensor = ta, .offset = off, .row_stride = lda, .batch_stride = {na, 0}};
    d.b = (vkf_matrix_view){.tensor = tb, .offset = off, .row_stride = ldb, .batch_stride = {nb, 0}};
    d.b_is_k_by_n = c->b_kn;
    d.c = (vkf_matrix_view){.tensor = tc, .offset = off, .row_stride = ldc, .batch_stride = {nc, 0}};
    d.residual = (vkf_matrix_view){.tensor = tr, .offset = off, .row_stride = ldc, .batch_stride = {nc, 0}};
    d.bias = tbias;
    d.b_scale = tscale;
    d.alpha = 0.75f;
    d.activation = VKF_ACTIVATION_GELU;
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    /* the kernel that ran is the one forced */
    CHECK(strcmp(vkf_matmul_kernel_family(ctx, c->m, c->n, c->k, c->items, act16, bk == B_F16), "tiled") == 0);
    float *got = download(tc, tc_n, act16);
    for (uint32_t z = 0; z < c->items; z++) {
        float *want_z = fill + off + z * nc;
        if (bk == B_I8)
            ref_matmul_i8(want_z, ldc, a + off + z * na, lda, q + off + z * nb, ldb, c->b_kn, scale, bias,
                          r + off + z * nc, ldc, c->m, c->n, c->k, d.alpha, (int)d.activation);
        else
            ref_matmul(want_z, ldc, a + off + z * na, lda, b + off + z * nb, ldb, c->b_kn, bias, r + off + z * nc,
                       ldc, c->m, c->n, c->k, d.alpha, (int)d.activation);
    }
    static const char *const b_names[] = {"F32", "F16", "I8"};
    char what[200];
    snprintf(what, sizeof what, "tiled %s: m=%u n=%u k=%u x%u pad %u, B %s%s, %s activations", tiles, c->m, c->n,
             c->k, c->items, c->pad, b_names[bk], c->b_kn ? " (k,n)" : "", act16 ? "F16" : "F32");
    double atol = act16 ? 2e-3 : 1e-5 + 3e-7 * c->k, rtol = act16 ? 2e-3 : 2e-5;
    harness_compare(what, got, fill, tc_n, atol, rtol);
    vkf_cmd_destroy(cmd);
    vkf_tensor *all[] = {ta, tb, tc, tr, tbias, tscale};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vkf_tensor_destroy(all[i]);
    free(a), free(b), free(r), free(bias), free(scale), free(q), free(fill), free(got);
}

/* The rules: AMD and Intel GPUs get the GPU tiles, the software drivers' choices
 * are unchanged. */
static void test_rules(void)
{
    struct {
        const char *name;
        vkf_device_type type;
        uint32_t vendor, subgroup, shared, max_wg;
        vkf_variant_id want;
        vkf_matmul_tiles tiles;         /* workgroup 0: not checked */
    } devices[] = {
        {"AMD RDNA-like", VKF_DEVICE_DISCRETE_GPU, 0x1002, 64, 65536, 1024, VKF_VARIANT_MATMUL_TILED,
         {.workgroup = 256, .bm = 128, .bn = 128, .bk = 8, .tm = 8, .tn = 8}},
        {"Intel Xe-like", VKF_DEVICE_INTEGRATED_GPU, 0x8086, 16, 65536, 1024, VKF_VARIANT_MATMUL_TILED,
         {.workgroup = 256, .bm = 64, .bn = 128, .bk = 16, .tm = 8, .tn = 4}},
        {"small GPU", VKF_DEVICE_INTEGRATED_GPU, 0x13b5, 16, 16384, 256, VKF_VARIANT_MATMUL_TILED,
         {.workgroup = 256, .bm = 64, .bn = 64, .bk = 16, .tm = 4, .tn = 4}},
        {"lavapipe-like", VKF_DEVICE_CPU, 0x10005, 8, 32768, 1024, VKF_VARIANT_MATMUL_SUBGROUP, {0}},
        {"SwiftShader-like", VKF_DEVICE_CPU, 0x1ae0, 4, 32768, 256, VKF_VARIANT_MATMUL_DIRECT,
         {.workgroup = 64, .bm = 64, .bn = 64, .bk = 1, .tm = 8, .tn = 8}},
    };
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        vkf_device_info d = {0};
        d.type = devices[i].type, d.vendor_id = devices[i].vendor, d.subgroup_size = devices[i].subgroup;
        d.max_shared_memory = devices[i].shared, d.max_workgroup_invocations = devices[i].max_wg;
        d.max_workgroup_size[0] = d.max_workgroup_size[1] = devices[i].max_wg, d.max_workgroup_size[2] = 64;
        d.subgroup_shuffle = true;
        vkf_tuning t;
        vkf_tuning_for_device(&d, &t);
        const vkf_matmul_tiles *m = &t.matmul;
        fprintf(stderr, "rule for %s: %s workgroup %u, %ux%u, bk %u, %ux%u per invocation\n", devices[i].name,
                vkf_variant(t.matmul_variant)->name, m->workgroup, m->bm, m->bn, m->bk, m->tm, m->tn);
        CHECK(t.matmul_variant == devices[i].want);
        if (devices[i].tiles.workgroup) CHECK(memcmp(m, &devices[i].tiles, sizeof *m) == 0);
    }
}

int main(void)
{
    vkf_context *ctx = harness_context();
    if (!ctx) return harness_result("test_matmul_gpu_tiles");
    const vkf_device_info *info = &ctx->info;
    test_rules();

    /* the driver's own choice for F32 is not the tiled kernel (software drivers keep theirs) */
    if (info->type == VKF_DEVICE_CPU)
        CHECK(strcmp(vkf_matmul_kernel_family(ctx, 512, 512, 512, 1, false, false), "tiled") != 0);

    /* padded shared rows count against the device's shared memory */
    vkf_matmul_tiles huge = {.workgroup = 256, .bm = 256, .bn = 256, .bk = 64, .tm = 16, .tn = 16};
    if (huge.workgroup <= info->max_workgroup_invocations)
        CHECK_FAIL(vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_TILED, &huge), VKF_ERROR_UNSUPPORTED,
                   "shared memory");

    struct {
        const char *name;
        vkf_matmul_tiles t;
        bool all_variants;              /* F16 and int8 B, F16 activations too; else F32 only */
    } tiles[] = {
        {"AMD 128x128 8x8 bk 8", {.workgroup = 256, .bm = 128, .bn = 128, .bk = 8, .tm = 8, .tn = 8}, true},
        {"Intel 64x128 8x4 bk 16", {.workgroup = 256, .bm = 64, .bn = 128, .bk = 16, .tm = 8, .tn = 4}, true},
        {"tune 64x128 8x4 bk 8", {.workgroup = 256, .bm = 64, .bn = 128, .bk = 8, .tm = 8, .tn = 4}, false},
        {"tune 128x64 4x8 bk 8", {.workgroup = 256, .bm = 128, .bn = 64, .bk = 8, .tm = 4, .tn = 8}, false},
        {"tune 128x128 8x8 bk 16", {.workgroup = 256, .bm = 128, .bn = 128, .bk = 16, .tm = 8, .tn = 8}, false},
        {"odd groups 48x40 6x5 bk 12", {.workgroup = 64, .bm = 48, .bn = 40, .bk = 12, .tm = 6, .tn = 5}, false},
    };
    static const mm_case cases[] = {
        {130, 137, 36, 1, 0, false},    /* edges of every tile; k % 4 == 0, not a multiple of BK: 16-byte loads */
        {67, 131, 19, 1, 0, false},     /* k odd: scalar loads */
        {129, 70, 40, 2, 4, false},     /* batch, offsets and padded rows of 4: 16-byte loads */
        {61, 133, 24, 1, 0, true},      /* B (k, n) */
        {3, 5, 4, 1, 0, false},         /* one slice shorter than BK */
    };
    uint64_t seed = 7000;
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        vkf_status st = vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_TILED, &tiles[t].t);
        if (st != VKF_OK) {
            /* only a workgroup past the device's limit may refuse; say so loudly */
            CHECK(tiles[t].t.workgroup > info->max_workgroup_invocations);
            fprintf(stderr, "NOTE: tiles %s do not fit \"%s\": %s\n", tiles[t].name, info->name, vkf_last_error());
            continue;
        }
        ctx->tuning.matmul_min_macs = 0;
        ctx->tuning.coopmat_use = 0;    /* F16 operands on the scalar kernel too */
        memset(ctx->tuning.subgroup_skinny, 0, sizeof ctx->tuning.subgroup_skinny);
        ctx->tuning.gemv.workgroup = 0; /* single rows on the forced kernel too */
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            run_case(ctx, tiles[t].name, &cases[c], B_F32, false, seed += 8);
            if (!tiles[t].all_variants) continue;
            run_case(ctx, tiles[t].name, &cases[c], B_I8, false, seed += 8);
            if (!info->storage_16bit) continue;
            run_case(ctx, tiles[t].name, &cases[c], B_F16, false, seed += 8);
            run_case(ctx, tiles[t].name, &cases[c], B_F32, true, seed += 8);
            run_case(ctx, tiles[t].name, &cases[c], B_F16, true, seed += 8);
            run_case(ctx, tiles[t].name, &cases[c], B_I8, true, seed += 8);
        }
    }
    if (!info->storage_16bit) fprintf(stderr, "NOTE: \"%s\" has no 16-bit storage: F16 variants not run\n", info->name);
    vkf_tuning_choose(ctx);
    harness_close(ctx);
    return harness_result("test_matmul_gpu_tiles");
}

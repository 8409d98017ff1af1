/* Fused attention's split-K form (flash decoding, attention.c: each workgroup's
 * key list in runs over the grid's z, then attention_split_reduce.comp) against
 * the plain-C reference, forced with desc.splits: calls of 1 to 5 query rows over
 * key counts that are no multiple of any tile (1, 7, 100, 257, 1000), causal with
 * an offset (a prefix's last rows), key padding, T5's relative position bias, the
 * local, strided, bigbird and tglobal patterns, head_dim 17, 24, 40, 64 (and 256 in
 * the scalar split form); run with 2, 3 and 7 runs (more runs than key tiles:
 * empty runs), on the scalar kernel with the device's own tiles (CPU drivers:
 * often the lanes form) and in both its forms with odd tiles (rows: CPU drivers;
 * split: GPUs) and on the cooperative-matrix kernel where the context has it,
 * with F32 and, where the device stores 16 bits, F16 q, k, v and out. Also: the
 * rule splits nothing on a CPU driver, splits = 1 never splits, and a split call
 * owns its partials. */
#include "harness.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct split_case {
    uint32_t batch, heads, head_dim, lq, lk;
    bool lengths;                       /* key lengths lk, about lk / 2, 1 */
    bool causal;                        /* query i sees keys j <= i + lk - lq (a prefix's last rows) */
    vkf_attention_pattern pattern;
    uint32_t window, stride;            /* local, strided; tglobal: window, stride = its global block */
    uint32_t bb_block, bb_globals, bb_random;
    uint32_t radius;                    /* T5's bias, radius R (tglobal: a global table too); 0: none */
} split_case;

#define L VKF_ATTENTION_LOCAL
#define S VKF_ATTENTION_STRIDED
#define B VKF_ATTENTION_BIGBIRD
#define T VKF_ATTENTION_TGLOBAL
static const split_case CASES[] = {
    {1, 1, 64, 1, 1},
    {1, 2, 64, 1, 257},
    {3, 2, 40, 3, 100, .lengths = true, .causal = true},
    {2, 3, 17, 2, 1000, .radius = 32},
    {1, 2, 64, 5, 257, .causal = true, .radius = 8},
    {2, 1, 64, 4, 300, .pattern = L, .window = 40, .lengths = true},
    {1, 2, 40, 3, 257, .pattern = S, .window = 4, .stride = 16, .causal = true},
    {1, 2, 24, 5, 100, .pattern = B, .bb_block = 4, .bb_globals = 1, .bb_random = 2},
    {2, 2, 64, 3, 200, .pattern = T, .window = 8, .stride = 16, .radius = 16, .lengths = true},
    {1, 1, 256, 2, 7},
};
#undef L
#undef S
#undef B
#undef T

static const uint32_t SPLITS[] = {2, 3, 7};

/* the scalar kernel with the device's own tiles (on CPU drivers often the lanes
 * form, attention_fused_lanes.comp), in its rows and split forms with odd tiles,
 * and the cooperative-matrix kernel */
typedef enum kernel_form { FORM_OWN, FORM_ROWS, FORM_SPLIT, FORM_COOPMAT } kernel_form;
static const char *FORM_NAMES[] = {"own tiles", "rows", "split", "coopmat"};
/* the scalar kernel's two forms with tiles that divide nothing */
static const vkf_attention_tiles ROWS_TILES = {.workgroup = 4, .bq = 8, .bk = 7, .td = 1, .tq = 2};
static const vkf_attention_tiles SPLIT_TILES = {.workgroup = 48, .bq = 8, .bk = 11, .td = 6, .tq = 1};

static double worst[4][2];              /* largest error per form and dtype */

/* n random values (rounded to f16 when `round`; *host: as floats) in a tensor of dtype. */
static vkf_tensor *input(vkf_context *ctx, vkf_dtype dtype, uint64_t n, uint64_t seed, bool round, float **host)
{
    float *x = harness_random(n, seed);
    uint16_t *h = harness_alloc(n * 2);
    for (uint64_t e = 0; e < n; e++) {
        h[e] = ref_f32_to_f16(x[e]);
        if (round) x[e] = ref_f16_to_f32(h[e]);
    }
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, dtype, 1, &n, &t));
    CHECK_OK(vkf_tensor_upload(t, dtype == VKF_DTYPE_F16 ? (void *)h : (void *)x, n * (dtype == VKF_DTYPE_F16 ? 2 : 4)));
    free(h);
    *host = x;
    return t;
}

static unsigned char *bigbird_matrix(const vkf_bigbird *bb, uint32_t lq, uint32_t lk)
{
    uint32_t nkb = (lk + bb->block - 1) / bb->block;
    unsigned char *m = harness_alloc((size_t)lq * lk);
    int32_t rnd[VKF_BIGBIRD_MAX_RANDOM];
    for (uint32_t i = 0; i < lq; i++) {
        vkf_bigbird_random_blocks(bb, i / bb->block, nkb, rnd);
        for (uint32_t j = 0; j < lk; j++) m[(size_t)i * lk + j] = vkf_bigbird_allowed(bb, rnd, i, j);
    }
    return m;
}

static void run(vkf_context *ctx, const split_case *c, kernel_form form, vkf_dtype dtype, uint32_t splits,
                uint64_t seed)
{
    bool f16 = dtype == VKF_DTYPE_F16, round = f16 || form == FORM_COOPMAT;
    uint64_t dm = (uint64_t)c->heads * c->head_dim;
    uint64_t nq = (uint64_t)c->batch * c->lq * dm, nk = (uint64_t)c->batch * c->lk * dm;
    float *q, *k, *v;
    vkf_tensor *tq = input(ctx, dtype, nq, seed, round, &q), *tk = input(ctx, dtype, nk, seed + 1, round, &k),
               *tv = input(ctx, dtype, nk, seed + 2, round, &v);
    vkf_tensor *to = NULL;
    CHECK_OK(vkf_tensor_create(ctx, dtype, 1, &nq, &to));
    int32_t lengths[3] = {(int32_t)c->lk, (int32_t)(c->lk + 1) / 2, 1};
    vkf_tensor *tl = NULL;
    if (c->lengths) {
        uint64_t n = c->batch;
        CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &n, &tl));
        CHECK_OK(vkf_tensor_upload(tl, lengths, n * 4));
    }
    uint32_t offset = c->causal ? c->lk - c->lq : 0;

    vkf_attention_desc d;
    vkf_attention_desc_init(&d);
    d.batch = c->batch, d.heads = c->heads, d.head_dim = c->head_dim, d.lq = c->lq, d.lk = c->lk;
    d.scale = 3.0f / sqrtf((float)c->head_dim); /* peaky: each run's max differs */
    d.q = (vkf_attention_view){tq, 0, 0, 0};
    d.k = (vkf_attention_view){tk, 0, 0, 0};
    d.v = (vkf_attention_view){tv, 0, 0, 0};
    d.out = to, d.dtype = dtype, d.key_lengths = tl;
    d.causal = c->causal, d.causal_offset = offset;
    d.pattern = c->pattern, d.window = c->window, d.stride = c->pattern == VKF_ATTENTION_STRIDED ? c->stride : 0;
    d.bigbird = (vkf_bigbird){c->bb_block, c->bb_globals, c->bb_random, c->causal, seed * 31};
    d.kernel = form == FORM_COOPMAT ? VKF_ATTENTION_KERNEL_COOPMAT : VKF_ATTENTION_KERNEL_SCALAR;
    d.tiles = form == FORM_ROWS ? &ROWS_TILES : form == FORM_SPLIT ? &SPLIT_TILES : NULL; /* NULL: the device's */
    d.splits = splits;
    ref_attention_mask mask = {
        .lengths = c->lengths ? lengths : NULL, .causal = c->causal, .causal_offset = offset,
        .pattern = (int)c->pattern, .window = c->window, .stride = c->stride, .allowed_cols = c->lk,
    };
    vkf_tensor *table = NULL, *t_bias = NULL, *t_gkv = NULL;
    unsigned char *bb_mask = NULL;
    float *bias = NULL, *gkv = NULL;
    if (c->pattern == VKF_ATTENTION_BIGBIRD) {
        CHECK_OK(vkf_attention_table_create(ctx, &d, &table));
        d.table = table;
        mask.allowed = bb_mask = bigbird_matrix(&d.bigbird, c->lq, c->lk);
    }
    bool tglobal = c->pattern == VKF_ATTENTION_TGLOBAL;
    if (c->radius) {
        uint64_t width = 2ull * c->radius + 1, n = c->heads * width * (tglobal ? 2 : 1);
        bias = harness_random(n, seed + 11);
        for (uint64_t e = 0; e < n; e++) bias[e] *= 3.0f;
        t_bias = harness_tensor(ctx, bias, 1, n);
        d.bias_table = t_bias, d.rel_bias = true, d.rel_radius = c->radius;
        mask.rel_bias = bias, mask.rel_radius = c->radius;
        if (tglobal) {
            d.global_bias = true, d.global_radius = c->radius;
            mask.global_bias = bias + c->heads * width, mask.global_radius = c->radius;
        }
    }
    if (tglobal) {
        uint32_t gmax = c->lk / c->stride;
        uint64_t n = (uint64_t)c->batch * gmax * 2 * dm;
        t_gkv = input(ctx, dtype, n, seed + 12, true, &gkv);
        d.global_block = c->stride, d.global_max = gmax, d.global_kv = t_gkv;
        mask.global_block = c->stride, mask.global_max = gmax, mask.global_row = 2 * dm;
        mask.global_k = gkv, mask.global_v = gkv + dm;
    }
    char what[200];
    snprintf(what, sizeof what, "split-K x%u %s %s B=%u H=%u hd=%u lq=%u lk=%u%s%s pattern %d%s", splits,
             FORM_NAMES[form], f16 ? "F16" : "F32", c->batch, c->heads, c->head_dim, c->lq, c->lk,
             c->lengths ? " lengths" : "", c->causal ? " causal" : "", (int)c->pattern, c->radius ? " bias" : "");
    vkf_cmd *cmd = NULL;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_status st = vkf_op_attention_fused(cmd, &d);
    if (st == VKF_ERROR_UNSUPPORTED && form == FORM_COOPMAT && strstr(vkf_last_error(), "shared memory")) {
        fprintf(stderr, "%s: refused: %s\n", what, vkf_last_error()); /* the widest head on a small device */
    } else if (st != VKF_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, vkf_status_string(st), vkf_last_error());
        harness_failures++;
    } else {
        /* the split form ran: the list owns the partials (bigbird's table is the caller's) */
        uint64_t owned = 0;
        CHECK_OK(vkf_cmd_memory(cmd, &owned));
        uint64_t rows = (uint64_t)c->batch * c->heads * c->lq;
        if (owned < splits * rows * (c->head_dim + 2ull) * 4) {
            fprintf(stderr, "%s: the list owns %llu bytes, less than the partials\n", what, (unsigned long long)owned);
            harness_failures++;
        }
        CHECK_OK(vkf_cmd_submit(cmd));
        float *got = f16 ? harness_download_f16(to, nq) : harness_download(to);
        float *want = harness_alloc(nq * 4);
        ref_attention(want, q, dm, c->lq * dm, k, dm, c->lk * dm, v, dm, c->lk * dm, c->batch, c->heads, c->head_dim,
                      c->lq, c->lk, d.scale, &mask);
        /* scalar fp32: summation order; coopmat: P rounded to f16 (test_attention.c) */
        double atol = form == FORM_COOPMAT ? 1.0 / 1024 + c->lk / 33554432.0 + 1e-5 : 2e-5;
        double rtol = f16 ? 1.0 / 2048 : 1e-4;
        harness_compare(what, got, want, nq, atol, rtol);
        for (uint64_t e = 0; e < nq; e++) {
            double err = fabs((double)got[e] - want[e]);
            if (err > worst[form][f16] || err != err) worst[form][f16] = err;
        }
        free(got), free(want);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tk), vkf_tensor_destroy(tv), vkf_tensor_destroy(to);
    vkf_tensor_destroy(tl), vkf_tensor_destroy(table), vkf_tensor_destroy(t_bias), vkf_tensor_destroy(t_gkv);
    free(q), free(k), free(v), free(bb_mask), free(bias), free(gkv);
}

/* Without forcing, a CPU driver's rule does not split (nothing owned), and
 * splits = 1 never does anywhere. */
static void check_rule(vkf_context *ctx)
{
    uint64_t n = 2048 * 2 * 64;
    float *x = harness_random(n, 7);
    vkf_tensor *t = harness_tensor(ctx, x, 1, n), *o = harness_tensor(ctx, NULL, 1, 2 * 64);
    vkf_attention_desc d;
    vkf_attention_desc_init(&d);
    d.batch = 1, d.heads = 2, d.head_dim = 64, d.lq = 1, d.lk = 2048, d.scale = 0.125f;
    d.q = (vkf_attention_view){t, 0, 0, 0}, d.k = d.q, d.v = d.q, d.out = o;
    vkf_device_info info;
    CHECK_OK(vkf_context_device_info(ctx, &info));
    for (uint32_t mode = 0; mode < 2; mode++) {
        d.splits = mode;
        if (mode == 0 && (info.type != VKF_DEVICE_CPU || getenv("VKFORMER_ATTENTION_SPLIT"))) continue;
        vkf_cmd *cmd = NULL;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        CHECK_OK(vkf_op_attention_fused(cmd, &d));
        uint64_t owned = 1;
        CHECK_OK(vkf_cmd_memory(cmd, &owned));
        if (owned) {
            fprintf(stderr, "splits %u on \"%s\": the call split (%llu bytes owned)\n", mode, info.name,
                    (unsigned long long)owned);
            harness_failures++;
        }
        vkf_cmd_destroy(cmd);
    }
    vkf_tensor_destroy(t), vkf_tensor_destroy(o);
    free(x);
}

int main(void)
{
    vkf_context *ctx = harness_context();
    vkf_device_info info;
    CHECK_OK(vkf_context_device_info(ctx, &info));
    check_rule(ctx);
    bool coopmat = info.coopmat_in_use, f16 = info.storage_16bit;
    uint64_t seed = 100;
    size_t count = sizeof CASES / sizeof CASES[0];
    for (size_t i = 0; i < count; i++)
        for (int form = FORM_OWN; form <= FORM_COOPMAT; form++) {
            if (form == FORM_COOPMAT && !coopmat) continue;
            /* the widest head compiles for a minute on lavapipe in the rows form and on
             * coopmat (test_attention runs it unsplit): the split form only */
            if (form != FORM_SPLIT && CASES[i].head_dim > 64) continue;
            for (int h = 0; h < (f16 && form != FORM_OWN ? 2 : 1); h++)
                run(ctx, &CASES[i], (kernel_form)form, h ? VKF_DTYPE_F16 : VKF_DTYPE_F32,
                    SPLITS[(i + (size_t)form + (size_t)h) % 3], seed += 16);
        }
    vkf_kernel_choice own;
    CHECK_OK(vkf_attention_fused_choice(ctx, 64, &own));
    fprintf(stderr, "test_attention_split on \"%s\": %zu cases; largest error own tiles (%s at head_dim 64) %.3g, rows "
            "%.3g/%.3g, split %.3g/%.3g (F32/F16)", info.name, count, own.kernel, worst[0][0], worst[1][0], worst[1][1],
            worst[2][0], worst[2][1]);
    if (coopmat) fprintf(stderr, ", coopmat %.3g/%.3g\n", worst[3][0], worst[3][1]);
    else fprintf(stderr, "; coopmat cases not run: the context has no cooperative matrix\n");
    harness_close(ctx);
    return harness_result("test_attention_split");
}

/* The public attention call, vkf_cmd_attention (issue 16: what `bench attention`
 * does, a user's program can do): every variant on separate, padded q, k, v
 * tensors with key lengths, causal and not, against the plain-C reference;
 * lowrank against its definition (keys and values projected on the host), lsh
 * against the library's own LSH path with the same seed; what the list owns
 * (vkf_cmd_memory); vkf_attention_check; and each misuse named. Only bigbird's
 * random draw and lowrank's projection come from the library's internals, as the
 * reference's input. */
#include "harness.h"
#include "internal.h"
#include "attention/attention_lsh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct layout {
    uint64_t off, row, batch, elements;
} layout;

/* A (batch, rows, dm) view with padding between rows and sequences. */
static layout padded(uint32_t batch, uint32_t rows, uint64_t dm, uint64_t off, uint64_t pad)
{
    layout l = {off, dm + pad, 0, 0};
    l.batch = rows * l.row + 3;
    l.elements = off + batch * l.batch;
    return l;
}

static unsigned char *bigbird_mask(uint32_t block, uint32_t globals, uint32_t random, bool causal, uint64_t seed,
                                   uint32_t lq, uint32_t lk)
{
    vkf_bigbird bb = {block, globals, random, causal, seed};
    unsigned char *m = harness_alloc((size_t)lq * lk);
    int32_t rnd[VKF_BIGBIRD_MAX_RANDOM];
    for (uint32_t i = 0; i < lq; i++) {
        vkf_bigbird_random_blocks(&bb, i / block, (lk + block - 1) / block, rnd);
        for (uint32_t j = 0; j < lk; j++) {
            uint32_t qi = i / block, kj = j / block;
            bool ok = qi < globals || kj < globals || (qi > kj ? qi - kj : kj - qi) <= 1;
            for (uint32_t t = 0; t < random; t++) ok |= rnd[t] == (int32_t)kj;
            m[(size_t)i * lk + j] = ok;
        }
    }
    return m;
}

typedef struct api_case {
    const char *variant;
    uint32_t batch, heads, head_dim, lq, lk;
    bool causal;
    uint32_t causal_offset;
    bool lengths;
} api_case;

static void run(vkf_context *ctx, const api_case *c, uint64_t seed)
{
    uint64_t dm = (uint64_t)c->heads * c->head_dim;
    layout lq = padded(c->batch, c->lq, dm, 5, 3), lk = padded(c->batch, c->lk, dm, 2, 1),
           lv = padded(c->batch, c->lk, dm, 7, 4);
    float *qh = harness_random(lq.elements, seed), *kh = harness_random(lk.elements, seed + 1),
          *vh = harness_random(lv.elements, seed + 2);
    vkf_tensor *tq = harness_tensor(ctx, qh, 1, lq.elements), *tk = harness_tensor(ctx, kh, 1, lk.elements),
               *tv = harness_tensor(ctx, vh, 1, lv.elements);
    uint64_t out_n = (uint64_t)c->batch * c->lq * dm;
    vkf_tensor *to = harness_tensor(ctx, NULL, 1, out_n);
    uint32_t lengths[3];
    int32_t lengths_i[3];
    for (uint32_t b = 0; b < c->batch && b < 3; b++) {
        lengths[b] = b == 0 ? c->lk : b == 1 ? (c->lk + 1) / 2 : 0;
        lengths_i[b] = (int32_t)lengths[b];
    }
    unsigned block = 0, globals = 0, random = 0, window = 0, stride = 0, K = 0;
    int pattern = 0;
    if (sscanf(c->variant, "local:%u", &window) == 1) pattern = 1;
    else if (sscanf(c->variant, "strided:%u:%u", &window, &stride) == 2) pattern = 2;
    else if (sscanf(c->variant, "bigbird:%u:%u:%u", &block, &globals, &random) == 3) pattern = 3;
    else if (sscanf(c->variant, "lowrank:%u", &K) == 1) pattern = -1;

    vkf_attention_op_desc a;
    vkf_attention_op_desc_init(&a);
    a.batch = c->batch, a.heads = c->heads, a.head_dim = c->head_dim, a.lq = c->lq, a.lk = c->lk;
    a.scale = 2.0f / sqrtf((float)c->head_dim);
    a.q = (vkf_matrix_view){tq, lq.off, lq.row, {lq.batch, 0}};
    a.k = (vkf_matrix_view){tk, lk.off, lk.row, {lk.batch, 0}};
    a.v = (vkf_matrix_view){tv, lv.off, lv.row, {lv.batch, 0}};
    a.out = to, a.variant = c->variant, a.causal = c->causal, a.causal_offset = c->causal_offset;
    a.key_lengths = c->lengths ? lengths : NULL, a.seed = seed;
    vkf_cmd *cmd;
    const char *kernel = NULL;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    char what[256];
    snprintf(what, sizeof what, "%s B=%u H=%u hd=%u lq=%u lk=%u%s%s", c->variant, c->batch, c->heads, c->head_dim, c->lq,
             c->lk, c->causal ? " causal" : "", c->lengths ? " lengths" : "");
    vkf_status st = vkf_cmd_attention(cmd, &a, &kernel);
    if (st != VKF_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, vkf_status_string(st), vkf_last_error());
        harness_failures++;
    } else {
        CHECK(kernel && (strcmp(c->variant, "dense-naive") == 0 ? strcmp(kernel, "naive") == 0
                                                                : strncmp(kernel, "fused", 5) == 0));
        uint64_t own = 0;
        CHECK_OK(vkf_cmd_memory(cmd, &own));
        CHECK((own > 0) == (pattern == 3 || pattern == -1 || c->lengths || strcmp(c->variant, "dense-naive") == 0));
        CHECK_OK(vkf_cmd_submit(cmd));
        float *got = harness_download(to), *want = harness_alloc(out_n * sizeof *want);
        if (pattern == -1) {
            /* lowrank: K' = E K, V' = E V on the host, attention over the K rows */
            uint32_t lens[3];
            int32_t rows[3];
            for (uint32_t b = 0; b < c->batch; b++) lens[b] = c->lengths ? lengths[b] : c->lk;
            float *E = harness_alloc((size_t)c->batch * K * c->lk * sizeof *E);
            float *pk = harness_alloc((size_t)c->batch * K * dm * sizeof *pk),
                  *pv = harness_alloc((size_t)c->batch * K * dm * sizeof *pv);
            CHECK_OK(vkf_lowrank_projection(seed, K, c->lk, lens, c->batch, E, rows));
            for (uint32_t b = 0; b < c->batch; b++)
                for (uint32_t r = 0; r < K; r++)
                    for (uint64_t col = 0; col < dm; col++) {
                        double sk = 0, sv = 0;
                        for (uint32_t j = 0; j < c->lk; j++) {
                            double e = E[((size_t)b * K + r) * c->lk + j];
                            sk += e * kh[lk.off + b * lk.batch + j * lk.row + col];
                            sv += e * vh[lv.off + b * lv.batch + j * lv.row + col];
                        }
                        pk[((size_t)b * K + r) * dm + col] = (float)sk, pv[((size_t)b * K + r) * dm + col] = (float)sv;
                    }
            ref_attention_mask mask = {.lengths = rows};
            ref_attention(want, qh + lq.off, lq.row, lq.batch, pk, dm, K * dm, pv, dm, K * dm, c->batch, c->heads,
                          c->head_dim, c->lq, K, a.scale, &mask);
            free(E), free(pk), free(pv);
        } else {
            unsigned char *bb = pattern == 3 ? bigbird_mask(block, globals, random, c->causal, seed, c->lq, c->lk) : NULL;
            ref_attention_mask mask = {
                .lengths = c->lengths ? lengths_i : NULL, .causal = c->causal, .causal_offset = c->causal_offset,
                .pattern = pattern, .window = window, .stride = stride, .allowed = bb, .allowed_cols = c->lk,
            };
            ref_attention(want, qh + lq.off, lq.row, lq.batch, kh + lk.off, lk.row, lk.batch, vh + lv.off, lv.row,
                          lv.batch, c->batch, c->heads, c->head_dim, c->lq, c->lk, a.scale, &mask);
            free(bb);
        }
        harness_compare(what, got, want, out_n, 1e-5, 1e-4);
        free(got), free(want);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tk), vkf_tensor_destroy(tv), vkf_tensor_destroy(to);
    free(qh), free(kh), free(vh);
}

static const api_case CASES[] = {
    {"dense", 2, 2, 8, 17, 23, false, 0, true},
    {"dense", 3, 1, 16, 9, 9, true, 0, true},
    {"dense-naive", 3, 2, 8, 13, 21, false, 0, true},
    {"dense-naive", 2, 3, 4, 7, 12, true, 5, true},
    {"dense-naive", 1, 2, 300, 5, 6, false, 0, false}, /* past the fused kernels' head_dim */
    {"local:3", 2, 2, 8, 30, 30, false, 0, true},
    {"local:2", 2, 1, 8, 19, 19, true, 0, false},
    {"strided:2:5", 3, 2, 8, 26, 26, false, 0, true},
    {"bigbird:4:1:1", 2, 2, 8, 33, 33, false, 0, true},
    {"bigbird:3:1:2", 1, 2, 8, 31, 31, true, 0, false},
    {"lowrank:6", 3, 2, 8, 20, 20, false, 0, true},
    {"lowrank:40", 2, 1, 16, 11, 29, false, 0, false}, /* cross-shaped: lq != lk */
};

/* lsh through the public call equals the library's LSH path with the same seed. */
static void test_lsh(vkf_context *ctx)
{
    uint32_t B = 2, H = 2, hd = 8, n = 40;
    uint64_t dm = (uint64_t)H * hd;
    float *qkv = harness_random((uint64_t)B * n * 3 * dm, 77);
    vkf_tensor *t = harness_tensor(ctx, qkv, (uint64_t)B * n, 3 * dm);
    vkf_tensor *o1 = harness_tensor(ctx, NULL, (uint64_t)B * n, dm), *o2 = harness_tensor(ctx, NULL, (uint64_t)B * n, dm);
    uint32_t lengths[2] = {n, 23};
    int32_t lengths_i[2] = {(int32_t)n, 23};
    vkf_attention_op_desc a;
    vkf_attention_op_desc_init(&a);
    a.batch = B, a.heads = H, a.head_dim = hd, a.lq = n, a.lk = n;
    a.q = (vkf_matrix_view){t, 0, 3 * dm, {0, 0}};
    a.k = (vkf_matrix_view){t, dm, 3 * dm, {0, 0}};
    a.v = (vkf_matrix_view){t, 2 * dm, 3 * dm, {0, 0}};
    a.out = o1, a.variant = "lsh:2:8", a.key_lengths = lengths, a.causal = true, a.seed = 5;
    vkf_cmd *cmd;
    const char *kernel;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_cmd_attention(cmd, &a, &kernel));
    CHECK(strcmp(kernel, "lsh") == 0);
    uint64_t own = 0;
    CHECK_OK(vkf_cmd_memory(cmd, &own));
    CHECK_OK(vkf_cmd_submit(cmd));

    uint64_t shape = B;
    vkf_tensor *tl;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &shape, &tl));
    CHECK_OK(vkf_tensor_upload(tl, lengths_i, sizeof lengths_i));
    vkf_lsh_desc l = {
        .batch = B, .heads = H, .head_dim = hd, .n = n, .rounds = 2, .chunk = 8, .scale = 1.0f / sqrtf((float)hd),
        .q = {t, 0, 3 * dm, 0}, .v = {t, 2 * dm, 3 * dm, 0}, .key_lengths = tl, .causal = true, .out = o2,
    };
    vkf_lsh_plan *plan;
    vkf_cmd *cmd2;
    CHECK_OK(vkf_lsh_plan_create(ctx, &l, n, 5, &plan));
    CHECK(own == vkf_lsh_plan_bytes(plan) + vkf_tensor_bytes(tl));
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd2));
    CHECK_OK(vkf_op_attention_lsh(cmd2, plan, &l));
    CHECK_OK(vkf_cmd_submit(cmd2));
    float *g1 = harness_download(o1), *g2 = harness_download(o2);
    CHECK(memcmp(g1, g2, (size_t)B * n * dm * sizeof *g1) == 0);
    bool nonzero = false;
    for (uint64_t e = 0; e < (uint64_t)B * n * dm; e++) nonzero |= g1[e] != 0;
    CHECK(nonzero);
    free(g1), free(g2), free(qkv);
    vkf_cmd_destroy(cmd2), vkf_cmd_destroy(cmd);
    vkf_lsh_plan_destroy(plan);
    vkf_tensor_destroy(tl), vkf_tensor_destroy(t), vkf_tensor_destroy(o1), vkf_tensor_destroy(o2);
}

static void test_misuse(vkf_context *ctx, const vkf_device_info *info)
{
    CHECK_OK(vkf_attention_check(NULL, false));
    CHECK_OK(vkf_attention_check("bigbird:4:1:2", false));
    CHECK_OK(vkf_attention_check("lowrank:8", true));
    CHECK_FAIL(vkf_attention_check("lsh:2:8", true), VKF_ERROR_INVALID_ARGUMENT, "lsh");
    CHECK_FAIL(vkf_attention_check("local:x", false), VKF_ERROR_INVALID_ARGUMENT, "local");
    CHECK_FAIL(vkf_attention_check("sparse", false), VKF_ERROR_INVALID_ARGUMENT, "sparse");

    uint32_t B = 2, H = 2, hd = 8, n = 12;
    uint64_t dm = (uint64_t)H * hd;
    vkf_tensor *q = harness_tensor(ctx, NULL, (uint64_t)B * n, dm), *o = harness_tensor(ctx, NULL, (uint64_t)B * n, dm);
    vkf_attention_op_desc good;
    vkf_attention_op_desc_init(&good);
    good.batch = B, good.heads = H, good.head_dim = hd, good.lq = n, good.lk = n;
    good.q = good.k = good.v = (vkf_matrix_view){q, 0, 0, {0, 0}};
    good.out = o;
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    const char *kernel = "x";
    vkf_attention_op_desc d;
    CHECK_FAIL(vkf_cmd_attention(cmd, NULL, &kernel), VKF_ERROR_INVALID_ARGUMENT, "desc");
    CHECK(kernel == NULL);
    CHECK_FAIL(vkf_cmd_attention(NULL, &good, NULL), VKF_ERROR_INVALID_ARGUMENT, "cmd");
    d = good, d.variant = "strided:3";
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "strided");
    d = good, d.lq = 0;
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "positive");
    d = good, d.dtype = VKF_DTYPE_I32;
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "dtype");
    d = good, d.dtype = VKF_DTYPE_F16, d.variant = "dense-naive";
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_UNSUPPORTED, "F16");
    uint32_t too_long[2] = {n, n + 1};
    d = good, d.key_lengths = too_long;
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "key_lengths[1]");
    d = good, d.q.batch_stride[1] = 4;
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "batch_stride[1]");
    d = good, d.scale = NAN;
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "scale");
    d = good, d.variant = "lsh:2:4", d.lk = n - 1;
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "lq");
    d = good, d.variant = "lowrank:4", d.causal = true;
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "causal");
    d = good, d.head_dim = 300, d.heads = 1;
    vkf_tensor *wide = harness_tensor(ctx, NULL, (uint64_t)B * n, 300);
    vkf_tensor *wide_out = harness_tensor(ctx, NULL, (uint64_t)B * n, 300);
    d.q = d.k = d.v = (vkf_matrix_view){wide, 0, 0, {0, 0}}, d.out = wide_out;
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_UNSUPPORTED, "head_dim");
    d = good, d.q.offset = 1; /* the view reaches one element past q */
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "past");
    d = good, d.variant = "dense-naive", d.out = q; /* every variant, naive included */
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "alias");
    d = good, d.kernel = (vkf_attention_kernel)7;
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "kernel");
    if (!info->cooperative_matrix) {
        d = good, d.kernel = VKF_ATTENTION_KERNEL_COOPMAT;
        CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_UNSUPPORTED, "cooperative");
    }
    /* dense-naive past the binding: one head's scores must fit */
    if (info->max_storage_buffer_range / 4 / n < UINT32_MAX) {
        d = good, d.variant = "dense-naive", d.lk = (uint32_t)(info->max_storage_buffer_range / 4 / n + 1);
        CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_TOO_LARGE, "binding");
    }
    uint64_t own = 1;
    CHECK_OK(vkf_cmd_memory(cmd, &own));
    CHECK(own == 0); /* nothing recorded, nothing kept */
    CHECK_FAIL(vkf_cmd_memory(NULL, &own), VKF_ERROR_INVALID_ARGUMENT, "cmd");
    CHECK_OK(vkf_cmd_attention(cmd, &good, &kernel));
    CHECK_OK(vkf_cmd_submit(cmd));
    CHECK_FAIL(vkf_cmd_attention(cmd, &good, NULL), VKF_ERROR_STATE, "submitted");
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(q), vkf_tensor_destroy(o), vkf_tensor_destroy(wide), vkf_tensor_destroy(wide_out);
}

int main(void)
{
    vkf_context *ctx = harness_context();
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    uint64_t seed = 11;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) run(ctx, &CASES[i], seed += 7);
    test_lsh(ctx);
    test_misuse(ctx, &info);
    harness_close(ctx);
    return harness_result("test_attention_api");
}

/* The blocks the T5 family adds, each against the plain-C reference: RMSNorm
 * (layernorm.comp's rms flag), the gated FFN's product (glu.comp) with every
 * activation, the tanh GELU in the matmul epilogue, T5's relative position bias
 * in dense-naive's softmax (all heads at once and in groups) and in the decode-step
 * kernel (its rows and split forms, with a sparse pattern too), transient-global's
 * block sums and means (block_sum.comp) and the tglobal variant through
 * vkf_cmd_attention, the relative position buckets and bias tables, and bad
 * arguments. The fused kernels' bias and global keys are in test_attention.c. */
#include "harness.h"
#include "internal.h"
#include "arch/arch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool f16_ok;                     /* the device has 16-bit storage */

/* A tensor of n floats as dtype (F16: rounded; *host gets the rounded values). */
static vkf_tensor *typed_tensor(vkf_context *ctx, vkf_dtype dtype, float *host, uint64_t n)
{
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, dtype, 1, &n, &t));
    if (dtype == VKF_DTYPE_F16) {
        uint16_t *h = harness_alloc(n * 2);
        for (uint64_t e = 0; e < n; e++) host[e] = ref_f16_to_f32(h[e] = ref_f32_to_f16(host[e]));
        CHECK_OK(vkf_tensor_upload(t, h, n * 2));
        free(h);
    } else {
        CHECK_OK(vkf_tensor_upload(t, host, n * 4));
    }
    return t;
}

static float *typed_download(vkf_tensor *t, uint64_t n)
{
    float *out = harness_alloc(n * 4);
    if (t->dtype == VKF_DTYPE_F16) {
        uint16_t *h = harness_alloc(n * 2);
        CHECK_OK(vkf_tensor_download(t, h, n * 2));
        for (uint64_t e = 0; e < n; e++) out[e] = ref_f16_to_f32(h[e]);
        free(h);
    } else {
        CHECK_OK(vkf_tensor_download(t, out, n * 4));
    }
    return out;
}

/* ------------------------------------------------------------------ RMSNorm */

static void run_rmsnorm(vkf_context *ctx, vkf_dtype dtype, uint32_t rows, uint32_t cols, bool residual, bool beta,
                        uint64_t seed)
{
    uint64_t n = (uint64_t)rows * cols;
    float *x = harness_random(n, seed), *r = harness_random(n, seed + 1);
    float *g = harness_random(cols, seed + 2), *b = harness_random(cols, seed + 3);
    for (uint64_t e = 0; e < n; e++) x[e] = x[e] * 3.0f + 2.0f; /* a mean RMSNorm must not subtract */
    vkf_tensor *tx = typed_tensor(ctx, dtype, x, n), *tr = typed_tensor(ctx, dtype, r, n);
    vkf_tensor *ty = typed_tensor(ctx, dtype, r, n);
    vkf_tensor *tg = harness_tensor(ctx, g, 1, cols), *tb = harness_tensor(ctx, b, 1, cols);
    vkf_layernorm_desc d;
    vkf_layernorm_desc_init(&d);
    d.rows = rows, d.cols = cols, d.x = tx, d.residual = residual ? tr : NULL, d.gamma = tg, d.beta = beta ? tb : NULL;
    d.y = ty, d.eps = 1e-6f, d.rms = true;
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_cmd_layernorm(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = typed_download(ty, n), *want = harness_alloc(n * 4);
    ref_rmsnorm(want, x, residual ? r : NULL, g, beta ? b : NULL, rows, cols, 1e-6f);
    char what[128];
    snprintf(what, sizeof what, "rmsnorm %s rows=%u cols=%u%s%s", dtype == VKF_DTYPE_F16 ? "F16" : "F32", rows, cols,
             residual ? " +residual" : "", beta ? " +beta" : "");
    harness_compare(what, got, want, n, dtype == VKF_DTYPE_F16 ? 2e-3 : 2e-5, dtype == VKF_DTYPE_F16 ? 2e-3 : 1e-4);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(tr), vkf_tensor_destroy(ty), vkf_tensor_destroy(tg);
    vkf_tensor_destroy(tb);
    free(x), free(r), free(g), free(b), free(got), free(want);
}

static void test_rmsnorm(vkf_context *ctx)
{
    uint64_t seed = 100;
    static const uint32_t shapes[][2] = {{1, 1}, {3, 17}, {100, 512}, {17, 5000}, {257, 64}};
    for (int dt = 0; dt < 2; dt++) {
        vkf_dtype dtype = dt ? VKF_DTYPE_F16 : VKF_DTYPE_F32;
        if (dt && !f16_ok) continue;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            run_rmsnorm(ctx, dtype, shapes[i][0], shapes[i][1], i % 2 == 1, i == 3, seed += 4);
    }
}

/* ------------------------------------------------------------------ gated FFN and tanh GELU */

static void run_glu(vkf_context *ctx, vkf_dtype dtype, uint32_t rows, uint32_t n, vkf_activation act, uint64_t seed)
{
    uint64_t count = (uint64_t)rows * 2 * n;
    float *h = harness_random(count, seed);
    for (uint64_t e = 0; e < count; e++) h[e] *= 6.0f; /* into every activation's curve */
    vkf_tensor *th = typed_tensor(ctx, dtype, h, count);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_op_glu(cmd, th, rows, n, act));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = typed_download(th, count);
    ref_glu(h, rows, n, (int)act);
    char what[96];
    snprintf(what, sizeof what, "glu %s rows=%u n=%u act=%d", dtype == VKF_DTYPE_F16 ? "F16" : "F32", rows, n, (int)act);
    /* the second halves are left as they were */
    harness_compare(what, got, h, count, dtype == VKF_DTYPE_F16 ? 1e-2 : 1e-5, dtype == VKF_DTYPE_F16 ? 2e-3 : 1e-5);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(th);
    free(h), free(got);
}

static void test_glu(vkf_context *ctx)
{
    uint64_t seed = 200;
    static const uint32_t shapes[][2] = {{1, 1}, {17, 100}, {64, 2048}, {3, 5000}};
    for (int dt = 0; dt < 2; dt++) {
        if (dt && !f16_ok) continue;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int act = 0; act <= VKF_ACTIVATION_GELU_TANH; act++)
                if (i < 2 || act == (int)VKF_ACTIVATION_GELU_TANH)
                    run_glu(ctx, dt ? VKF_DTYPE_F16 : VKF_DTYPE_F32, shapes[i][0], shapes[i][1], (vkf_activation)act,
                            seed++);
    }
}

/* C = gelu_tanh(A Bᵀ + bias) through the matmul epilogue, with inputs far into both tails (the tanh must not
 * turn into inf / inf). */
static void test_gelu_tanh_matmul(vkf_context *ctx)
{
    uint32_t m = 33, n = 70, k = 24;
    float *a = harness_random((size_t)m * k, 300), *b = harness_random((size_t)n * k, 301);
    float *bias = harness_random(n, 302);
    for (size_t e = 0; e < (size_t)m * k; e++) a[e] *= 40.0f; /* outputs up to hundreds */
    vkf_tensor *ta = harness_tensor(ctx, a, m, k), *tb = harness_tensor(ctx, b, n, k), *tc = harness_tensor(ctx, NULL, m, n);
    vkf_tensor *tbias = harness_tensor(ctx, bias, 1, n);
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = m, d.n = n, d.k = k, d.a.tensor = ta, d.b.tensor = tb, d.c.tensor = tc, d.bias = tbias;
    d.activation = VKF_ACTIVATION_GELU_TANH;
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(tc), *want = harness_alloc((size_t)m * n * 4);
    ref_matmul(want, n, a, k, b, k, false, bias, NULL, 0, m, n, k, 1.0f, 4);
    harness_compare("matmul + gelu_tanh (wide inputs)", got, want, (size_t)m * n, 1e-4, 1e-5);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tc), vkf_tensor_destroy(tbias);
    free(a), free(b), free(bias), free(got), free(want);
}

/* ------------------------------------------------------------------ relative position bias: softmax */

/* Dense-naive's softmax over (groups of) heads: rows = heads_in_call * lq of one (or every) sequence. */
static void run_softmax_bias(vkf_context *ctx, uint32_t batch, uint32_t heads, uint32_t head0, uint32_t lq,
                             uint32_t lk, uint32_t radius, bool causal, bool mask, uint64_t seed)
{
    uint32_t table_heads = head0 + heads, rows = batch * heads * lq, width = 2 * radius + 1;
    size_t n = (size_t)rows * lk;
    float *x = harness_random(n, seed), *table = harness_random((size_t)table_heads * width, seed + 1);
    float *m = harness_random((size_t)batch * lk, seed + 2);
    for (size_t e = 0; e < (size_t)table_heads * width; e++) table[e] *= 4.0f;
    for (size_t e = 0; e < (size_t)batch * lk; e++) m[e] = m[e] > 0.6f ? -INFINITY : 0.0f;
    vkf_tensor *tx = harness_tensor(ctx, x, rows, lk), *ty = harness_tensor(ctx, NULL, rows, lk);
    vkf_tensor *tt = harness_tensor(ctx, table, 1, (uint64_t)table_heads * width), *tm = harness_tensor(ctx, m, batch, lk);
    vkf_softmax_desc d;
    vkf_softmax_desc_init(&d);
    d.rows = rows, d.cols = lk, d.x = tx, d.y = ty, d.scale = 0.5f;
    if (mask) d.mask = tm, d.mask_rows = batch, d.mask_row_div = heads * lq;
    if (causal) d.causal_period = lq;
    d.rel_bias = tt, d.rel_radius = radius, d.rel_period = lq, d.rel_heads = heads, d.rel_head0 = head0;
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_cmd_softmax(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    /* the reference: the bias written into the scores, then the plain softmax */
    float *biased = harness_alloc(n * 4), *want = harness_alloc(n * 4), *got = harness_download(ty);
    for (uint32_t r = 0; r < rows; r++) {
        uint32_t i = r % lq, h = head0 + (r / lq) % heads;
        for (uint32_t j = 0; j < lk; j++) {
            long rel = (long)j - (long)i, R = (long)radius;
            rel = rel < -R ? -R : rel > R ? R : rel;
            biased[(size_t)r * lk + j] = 0.5f * x[(size_t)r * lk + j] + table[(size_t)h * width + (size_t)(rel + R)];
        }
    }
    ref_softmax(want, biased, rows, lk, 1.0f, mask ? m : NULL, batch, heads * lq, causal ? lq : 0, 0);
    char what[128];
    snprintf(what, sizeof what, "softmax + bias B=%u heads=%u+%u lq=%u lk=%u R=%u%s%s", batch, head0, heads, lq, lk,
             radius, causal ? " causal" : "", mask ? " mask" : "");
    harness_compare(what, got, want, n, 1e-6, 1e-4);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(ty), vkf_tensor_destroy(tt), vkf_tensor_destroy(tm);
    free(x), free(table), free(m), free(biased), free(want), free(got);
}

static void test_softmax_bias(vkf_context *ctx)
{
    run_softmax_bias(ctx, 2, 3, 0, 17, 17, 8, false, true, 400);
    run_softmax_bias(ctx, 1, 4, 0, 100, 100, 128, true, false, 401);
    run_softmax_bias(ctx, 1, 2, 3, 64, 64, 16, true, true, 402);   /* a group of heads 3..4 */
    run_softmax_bias(ctx, 3, 1, 0, 5, 300, 0, false, true, 403);   /* radius 0: one bias per head */
    run_softmax_bias(ctx, 1, 1, 5, 1, 1000, 500, false, false, 404);
}

/* ------------------------------------------------------------------ relative position bias: decode step */

/* out[b, h] = softmax_j(scale q·k_j + bias[h][clamp(j - pos, +-R)]) v_j over j <= pos (and the pattern), on both
 * forms of attention_decode (the context's VKFORMER_DECODE_FORM). */
static void run_decode_bias(vkf_context *ctx, const char *form, uint32_t batch, uint32_t heads, uint32_t hd,
                            uint32_t max_keys, uint32_t pos, uint32_t radius, uint32_t window, uint64_t seed)
{
    uint64_t inner = (uint64_t)heads * hd, width = 2ull * radius + 1;
    float *q = harness_random(batch * inner, seed), *k = harness_random(batch * max_keys * inner, seed + 1);
    float *v = harness_random(batch * max_keys * inner, seed + 2), *table = harness_random(heads * width, seed + 3);
    for (uint64_t e = 0; e < heads * width; e++) table[e] *= 4.0f;
    vkf_tensor *tq = harness_tensor(ctx, q, batch, inner), *tk = harness_tensor(ctx, k, batch * max_keys, inner);
    vkf_tensor *tv = harness_tensor(ctx, v, batch * max_keys, inner), *tt = harness_tensor(ctx, table, heads, width);
    vkf_tensor *to = harness_tensor(ctx, NULL, batch, inner), *ts = harness_tensor(ctx, NULL, batch * heads, max_keys);
    int32_t state = (int32_t)pos;
    uint64_t one = 1;
    vkf_tensor *tstate = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &one, &tstate));
    CHECK_OK(vkf_tensor_upload(tstate, &state, 4));
    vkf_attention_decode_desc d = {
        .batch = batch, .heads = heads, .head_dim = hd, .max_keys = max_keys, .scale = 0.7f,
        .q = tq, .q_batch = inner, .k = tk, .k_row = inner, .k_batch = max_keys * inner,
        .v = tv, .v_row = inner, .v_batch = max_keys * inner, .lengths = tstate, .length_from_state = true,
        .scratch = ts, .out = to, .rel_bias = tt, .rel_radius = radius,
        .pattern = window ? VKF_ATTENTION_LOCAL : VKF_ATTENTION_DENSE, .window = window,
    };
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_op_attention_decode(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(to), *want = harness_alloc(batch * inner * 4);
    double *s = harness_alloc((size_t)(pos + 1) * sizeof *s);
    for (uint32_t b = 0; b < batch; b++)
        for (uint32_t h = 0; h < heads; h++) {
            double mx = -INFINITY;
            for (uint32_t j = 0; j <= pos; j++) {
                s[j] = -INFINITY;
                if (window && pos - j > window) continue;
                double dot = 0;
                for (uint32_t c = 0; c < hd; c++)
                    dot += (double)q[b * inner + h * hd + c] * k[((size_t)b * max_keys + j) * inner + h * hd + c];
                long rel = (long)j - (long)pos, R = (long)radius;
                rel = rel < -R ? -R : rel;
                s[j] = 0.7 * dot + table[h * width + (size_t)(rel + R)];
                if (s[j] > mx) mx = s[j];
            }
            double sum = 0;
            for (uint32_t j = 0; j <= pos; j++) sum += s[j] == -INFINITY ? 0 : exp(s[j] - mx);
            for (uint32_t c = 0; c < hd; c++) {
                double o = 0;
                for (uint32_t j = 0; j <= pos; j++)
                    if (s[j] != -INFINITY) o += exp(s[j] - mx) * v[((size_t)b * max_keys + j) * inner + h * hd + c];
                want[b * inner + h * hd + c] = (float)(o / sum);
            }
        }
    char what[128];
    snprintf(what, sizeof what, "decode + bias (%s form) B=%u H=%u hd=%u pos=%u R=%u local=%u", form, batch, heads, hd,
             pos, radius, window);
    harness_compare(what, got, want, batch * inner, 1e-5, 1e-4);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tk), vkf_tensor_destroy(tv), vkf_tensor_destroy(tt);
    vkf_tensor_destroy(to), vkf_tensor_destroy(ts), vkf_tensor_destroy(tstate);
    free(q), free(k), free(v), free(table), free(got), free(want), free(s);
}

static void test_decode_bias(void)
{
    static const char *const forms[2] = {"rows", "split"};
    for (int f = 0; f < 2; f++) {
        setenv("VKFORMER_DECODE_FORM", forms[f], 1);
        vkf_context *ctx = harness_context();
        run_decode_bias(ctx, forms[f], 3, 4, 16, 40, 0, 8, 0, 500);
        run_decode_bias(ctx, forms[f], 2, 2, 64, 300, 299, 128, 0, 501);
        run_decode_bias(ctx, forms[f], 1, 3, 8, 200, 150, 32, 16, 502);
        run_decode_bias(ctx, forms[f], 2, 1, 17, 20, 19, 0, 0, 503);
        harness_close(ctx);
    }
    unsetenv("VKFORMER_DECODE_FORM");
}

/* ------------------------------------------------------------------ transient-global */

static void run_block_sum(vkf_context *ctx, vkf_dtype dtype, uint32_t batch, uint32_t lk, uint32_t cols, uint32_t block,
                          bool lengths, bool mean, uint64_t seed)
{
    /* x as columns [3, 3 + cols) of rows of cols + 5 (a strided view, as k of a fused QKV buffer) */
    uint64_t row = cols + 5, nx = (uint64_t)batch * lk * row, gmax = lk / block ? lk / block : 1;
    float *x = harness_random(nx, seed);
    vkf_tensor *tx = typed_tensor(ctx, dtype, x, nx);
    uint64_t no = batch * gmax * cols;
    float *sentinel = harness_random(no, seed + 1);
    vkf_tensor *to = typed_tensor(ctx, dtype, sentinel, no);
    int32_t lens[3] = {(int32_t)lk + 4, (int32_t)lk / 2 + 1, (int32_t)block - 1};
    uint64_t nb = batch;
    vkf_tensor *tl = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &nb, &tl));
    CHECK_OK(vkf_tensor_upload(tl, lens, batch * 4));
    vkf_block_sum_desc d = {
        .batch = batch, .lk = lk, .cols = cols, .block = block, .gmax = (uint32_t)gmax, .mean = mean, .x = tx,
        .x_offset = 3, .x_row = row, .x_batch = lk * row, .lengths = lengths ? tl : NULL, .out = to,
    };
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_op_block_sum(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = typed_download(to, no), *want = harness_alloc(no * 4);
    ref_block_sum(want, x + 3, row, lk * row, lengths ? lens : NULL, batch, lk, cols, block, gmax, mean);
    char what[128];
    snprintf(what, sizeof what, "block_sum %s B=%u lk=%u cols=%u G=%u%s%s", dtype == VKF_DTYPE_F16 ? "F16" : "F32",
             batch, lk, cols, block, lengths ? " lengths" : "", mean ? " mean" : " sum");
    harness_compare(what, got, want, no, dtype == VKF_DTYPE_F16 ? 2e-2 : 1e-5, dtype == VKF_DTYPE_F16 ? 2e-3 : 1e-5);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(to), vkf_tensor_destroy(tl);
    free(x), free(sentinel), free(got), free(want);
}

static void test_block_sum(vkf_context *ctx)
{
    uint64_t seed = 600;
    for (int dt = 0; dt < 2; dt++) {
        vkf_dtype dtype = dt ? VKF_DTYPE_F16 : VKF_DTYPE_F32;
        if (dt && !f16_ok) continue;
        run_block_sum(ctx, dtype, 3, 100, 24, 16, true, false, seed++);
        run_block_sum(ctx, dtype, 3, 100, 24, 16, true, true, seed++);
        run_block_sum(ctx, dtype, 2, 1000, 64, 16, false, false, seed++);
        run_block_sum(ctx, dtype, 1, 17, 5, 5, false, true, seed++);   /* two orphan tokens join the last block */
        run_block_sum(ctx, dtype, 3, 64, 7, 1, true, false, seed++);
        run_block_sum(ctx, dtype, 2, 10, 3, 20, false, false, seed++); /* shorter than a block: no globals */
    }
}

/* tglobal:W:G through the public call: the global keys are each sequence's block means of k and v (computed
 * here on the host), then the window and the global keys (ref_attention's pattern 4). */
static void run_tglobal_api(vkf_context *ctx, uint32_t batch, uint32_t heads, uint32_t hd, uint32_t n, uint32_t window,
                            uint32_t block, bool lengths, uint64_t seed)
{
    uint64_t inner = (uint64_t)heads * hd, rows = (uint64_t)batch * n;
    float *qkv = harness_random(rows * 3 * inner, seed);
    vkf_tensor *tqkv = harness_tensor(ctx, qkv, rows, 3 * inner), *to = harness_tensor(ctx, NULL, rows, inner);
    uint32_t lens[3] = {n, n / 2 + 3, block - 1};
    vkf_attention_op_desc d;
    vkf_attention_op_desc_init(&d);
    char variant[64];
    snprintf(variant, sizeof variant, "tglobal:%u:%u", window, block);
    d.batch = batch, d.heads = heads, d.head_dim = hd, d.lq = n, d.lk = n, d.scale = 0.9f, d.variant = variant;
    d.q = (vkf_matrix_view){tqkv, 0, 3 * inner, {0, 0}};
    d.k = (vkf_matrix_view){tqkv, inner, 3 * inner, {0, 0}};
    d.v = (vkf_matrix_view){tqkv, 2 * inner, 3 * inner, {0, 0}};
    d.out = to;
    d.key_lengths = lengths ? lens : NULL;
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    const char *kernel = NULL;
    CHECK_OK(vkf_cmd_attention(cmd, &d, &kernel));
    CHECK(kernel && strcmp(kernel, "fused") == 0);
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(to), *want = harness_alloc(rows * inner * 4);
    uint32_t gmax = n / block;
    float *gk = harness_alloc(((size_t)batch * gmax * inner + 1) * 4), *gv = harness_alloc(((size_t)batch * gmax * inner + 1) * 4);
    float *gkv = harness_alloc(((size_t)batch * gmax * 2 * inner + 1) * 4);
    int32_t ilens[3] = {(int32_t)lens[0], (int32_t)lens[1], (int32_t)lens[2]};
    ref_block_sum(gk, qkv + inner, 3 * inner, n * 3 * inner, lengths ? ilens : NULL, batch, n, inner, block, gmax, true);
    ref_block_sum(gv, qkv + 2 * inner, 3 * inner, n * 3 * inner, lengths ? ilens : NULL, batch, n, inner, block, gmax,
                  true);
    for (size_t g = 0; g < (size_t)batch * gmax; g++) {
        memcpy(gkv + g * 2 * inner, gk + g * inner, inner * 4);
        memcpy(gkv + g * 2 * inner + inner, gv + g * inner, inner * 4);
    }
    ref_attention_mask mask = {.lengths = lengths ? ilens : NULL, .pattern = 4, .window = window, .global_block = block,
                               .global_max = gmax, .global_row = 2 * inner, .global_k = gkv, .global_v = gkv + inner};
    ref_attention(want, qkv, 3 * inner, n * 3 * inner, qkv + inner, 3 * inner, n * 3 * inner, qkv + 2 * inner,
                  3 * inner, n * 3 * inner, batch, heads, hd, n, n, 0.9f, &mask);
    char what[128];
    snprintf(what, sizeof what, "vkf_cmd_attention %s B=%u H=%u hd=%u n=%u%s", variant, batch, heads, hd, n,
             lengths ? " lengths" : "");
    harness_compare(what, got, want, rows * inner, 1e-5, 1e-4);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tqkv), vkf_tensor_destroy(to);
    free(qkv), free(got), free(want), free(gk), free(gv), free(gkv);
}

static void test_tglobal_api(vkf_context *ctx)
{
    run_tglobal_api(ctx, 3, 2, 16, 100, 7, 16, true, 700);
    run_tglobal_api(ctx, 1, 4, 64, 257, 31, 16, false, 701);
    run_tglobal_api(ctx, 2, 1, 8, 10, 2, 20, false, 702);  /* no global block at all: the window alone */
    /* causal is refused: the global keys summarise later tokens */
    vkf_tensor *t = harness_tensor(ctx, NULL, 10, 8), *o = harness_tensor(ctx, NULL, 10, 8);
    vkf_attention_op_desc d;
    vkf_attention_op_desc_init(&d);
    d.batch = 1, d.heads = 1, d.head_dim = 8, d.lq = 10, d.lk = 10, d.variant = "tglobal:2:4", d.causal = true;
    d.q.tensor = t, d.k.tensor = t, d.v.tensor = t, d.out = o;
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_FAIL(vkf_cmd_attention(cmd, &d, NULL), VKF_ERROR_INVALID_ARGUMENT, "not causal");
    CHECK_FAIL(vkf_attention_check("tglobal:2:0", false), VKF_ERROR_INVALID_ARGUMENT, "tglobal");
    CHECK_FAIL(vkf_attention_check("tglobal:2", false), VKF_ERROR_INVALID_ARGUMENT, "tglobal");
    CHECK_FAIL(vkf_attention_check("tglobal:2:4", true), VKF_ERROR_INVALID_ARGUMENT, "cross");
    CHECK_OK(vkf_attention_check("tglobal:0:1", false));
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(t), vkf_tensor_destroy(o);
}

/* ------------------------------------------------------------------ buckets and tables */

static void test_buckets(void)
{
    /* T5's defaults (32 buckets, 128): exact below 8 (bidirectional) or 16 (causal), logarithmic to 128 */
    CHECK(vkf_arch_rel_bucket(0, true, 32, 128) == 0);
    CHECK(vkf_arch_rel_bucket(-7, true, 32, 128) == 7 && vkf_arch_rel_bucket(7, true, 32, 128) == 16 + 7);
    CHECK(vkf_arch_rel_bucket(-16, true, 32, 128) == 10);  /* 8 + log(2) / log(16) * 8 */
    CHECK(vkf_arch_rel_bucket(-127, true, 32, 128) == 15 && vkf_arch_rel_bucket(-128, true, 32, 128) == 15);
    CHECK(vkf_arch_rel_bucket(100000, true, 32, 128) == 31);
    CHECK(vkf_arch_rel_bucket(5, false, 32, 128) == 0);    /* causal: later keys are bucket 0 */
    CHECK(vkf_arch_rel_bucket(-15, false, 32, 128) == 15);
    CHECK(vkf_arch_rel_bucket(-32, false, 32, 128) == 21); /* 16 + log(2) / log(8) * 16 */
    CHECK(vkf_arch_rel_bucket(-5000, false, 32, 128) == 31);
    /* monotone in the distance, within range, and constant past the radius */
    vkf_arch_spec s = {.heads = 3, .max_len = 4096, .rel_buckets = 32, .rel_max_distance = 128};
    uint32_t R = vkf_arch_rel_radius(&s);
    CHECK(R >= 64 && R <= 128);
    for (int bi = 0; bi < 2; bi++) {
        uint32_t prev_pos = 0, prev_neg = 0;
        for (int32_t r = 0; r < 4096; r++) {
            uint32_t pos = vkf_arch_rel_bucket(r, bi, 32, 128), neg = vkf_arch_rel_bucket(-r, bi, 32, 128);
            CHECK(pos < 32 && neg < 32 && pos >= prev_pos && neg >= prev_neg);
            if ((uint32_t)r >= R) {
                CHECK(pos == vkf_arch_rel_bucket((int32_t)R, bi, 32, 128));
                CHECK(neg == vkf_arch_rel_bucket(-(int32_t)R, bi, 32, 128));
            }
            prev_pos = pos, prev_neg = neg;
        }
    }
    /* the table of a (buckets, heads) weight: [h][r + R] = w[bucket(r)][h] */
    float w[32 * 3], *table = harness_alloc(3 * (2 * R + 1) * sizeof *table);
    for (int e = 0; e < 32 * 3; e++) w[e] = (float)e;
    vkf_arch_rel_table(&s, w, false, R, table);
    for (uint32_t h = 0; h < 3; h++)
        for (int32_t r = -(int32_t)R; r <= (int32_t)R; r++)
            CHECK(table[h * (2 * R + 1) + (uint32_t)(r + (int32_t)R)] == w[vkf_arch_rel_bucket(r, false, 32, 128) * 3 + h]);
    free(table);
    /* a radius is never past max_len */
    vkf_arch_spec wide = {.heads = 1, .max_len = 300, .rel_buckets = 8, .rel_max_distance = 1u << 24};
    CHECK(vkf_arch_rel_radius(&wide) == 300);
}

/* ------------------------------------------------------------------ bad arguments */

static void test_bad_arguments(vkf_context *ctx)
{
    vkf_tensor *t = harness_tensor(ctx, NULL, 4, 8), *small = harness_tensor(ctx, NULL, 1, 3);
    int32_t zero = 0;
    uint64_t one = 1;
    vkf_tensor *ti = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &one, &ti));
    CHECK_OK(vkf_tensor_upload(ti, &zero, 4));
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_FAIL(vkf_op_glu(cmd, t, 0, 4, VKF_ACTIVATION_RELU), VKF_ERROR_INVALID_ARGUMENT, "positive");
    CHECK_FAIL(vkf_op_glu(cmd, t, 4, 5, VKF_ACTIVATION_RELU), VKF_ERROR_INVALID_ARGUMENT, "h");   /* 4 x 10 > 32 */
    CHECK_FAIL(vkf_op_glu(cmd, t, 4, 4, (vkf_activation)9), VKF_ERROR_INVALID_ARGUMENT, "activation");
    CHECK_FAIL(vkf_op_glu(cmd, ti, 1, 1, VKF_ACTIVATION_RELU), VKF_ERROR_INVALID_ARGUMENT, "F32");
    vkf_block_sum_desc bs = {.batch = 1, .lk = 4, .cols = 8, .block = 2, .gmax = 2, .x = t, .out = t};
    CHECK_FAIL(vkf_op_block_sum(cmd, &bs), VKF_ERROR_INVALID_ARGUMENT, "alias");
    bs.out = small;
    CHECK_FAIL(vkf_op_block_sum(cmd, &bs), VKF_ERROR_INVALID_ARGUMENT, "out view");
    bs.block = 0;
    CHECK_FAIL(vkf_op_block_sum(cmd, &bs), VKF_ERROR_INVALID_ARGUMENT, "positive");
    bs = (vkf_block_sum_desc){.batch = 1, .lk = 5, .cols = 8, .block = 2, .gmax = 2, .x = t, .out = small};
    CHECK_FAIL(vkf_op_block_sum(cmd, &bs), VKF_ERROR_INVALID_ARGUMENT, "x view");
    vkf_softmax_desc sm;
    vkf_softmax_desc_init(&sm);
    sm.rows = 4, sm.cols = 8, sm.x = t, sm.y = t, sm.rel_bias = small, sm.rel_radius = 1, sm.rel_period = 0, sm.rel_heads = 1;
    CHECK_FAIL(vkf_cmd_softmax(cmd, &sm), VKF_ERROR_INVALID_ARGUMENT, "rel_period");
    sm.rel_period = 4, sm.rel_heads = 2;  /* 2 heads x 3 > 3 entries */
    CHECK_FAIL(vkf_cmd_softmax(cmd, &sm), VKF_ERROR_INVALID_ARGUMENT, "rel_bias");
    sm.rel_heads = 1, sm.rel_bias = t;
    CHECK_FAIL(vkf_cmd_softmax(cmd, &sm), VKF_ERROR_INVALID_ARGUMENT, "alias");
    vkf_attention_decode_desc dd = {.batch = 1, .heads = 1, .head_dim = 8, .max_keys = 4, .scale = 1, .q = t,
                                    .k = t, .k_row = 8, .v = t, .v_row = 8, .lengths = ti, .scratch = t, .out = t,
                                    .rel_bias = small, .rel_radius = 1};
    CHECK_FAIL(vkf_op_attention_decode(cmd, &dd), VKF_ERROR_INVALID_ARGUMENT, "length_from_state");
    dd.length_from_state = true, dd.rel_radius = 5;
    CHECK_FAIL(vkf_op_attention_decode(cmd, &dd), VKF_ERROR_INVALID_ARGUMENT, "rel_bias");
    /* the fused kernel: a bias without its table, too small a table, a global bias off tglobal, tglobal causal */
    vkf_attention_desc a;
    vkf_attention_desc_init(&a);
    a.batch = 1, a.heads = 1, a.head_dim = 8, a.lq = 4, a.lk = 4, a.q.tensor = t, a.k.tensor = t, a.v.tensor = t;
    a.out = harness_tensor(ctx, NULL, 4, 8);
    a.rel_bias = true, a.rel_radius = 2;
    CHECK_FAIL(vkf_op_attention_fused(cmd, &a), VKF_ERROR_INVALID_ARGUMENT, "bias_table");
    a.bias_table = small;
    CHECK_FAIL(vkf_op_attention_fused(cmd, &a), VKF_ERROR_INVALID_ARGUMENT, "bias_table");
    a.rel_radius = 1, a.global_bias = true;
    CHECK_FAIL(vkf_op_attention_fused(cmd, &a), VKF_ERROR_INVALID_ARGUMENT, "tglobal");
    a.global_bias = false, a.pattern = VKF_ATTENTION_TGLOBAL, a.global_block = 2, a.causal = true;
    CHECK_FAIL(vkf_op_attention_fused(cmd, &a), VKF_ERROR_INVALID_ARGUMENT, "causal");
    a.causal = false, a.global_block = 0;
    CHECK_FAIL(vkf_op_attention_fused(cmd, &a), VKF_ERROR_INVALID_ARGUMENT, "global block");
    a.global_block = 2, a.global_max = 2, a.global_kv = small;
    CHECK_FAIL(vkf_op_attention_fused(cmd, &a), VKF_ERROR_INVALID_ARGUMENT, "global_kv");
    /* lsh and lowrank refuse a relative position bias */
    vkf_attention_call c = {.spec = {.kind = VKF_ATTN_LOWRANK, .rank = 2}, .batch = 1, .heads = 1, .head_dim = 8,
                            .lq = 4, .lk = 4, .rel_bias = true, .bias_table = t};
    CHECK_FAIL(vkf_attention_record(cmd, &c), VKF_ERROR_UNSUPPORTED, "relative position bias");
    c.spec = (vkf_attention_spec){.kind = VKF_ATTN_LSH, .rounds = 1, .chunk = 2};
    CHECK_FAIL(vkf_attention_record(cmd, &c), VKF_ERROR_UNSUPPORTED, "relative position bias");
    CHECK(vkf_cmd_op_count(cmd) == 0);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(t), vkf_tensor_destroy(small), vkf_tensor_destroy(ti), vkf_tensor_destroy(a.out);
}

int main(void)
{
    test_buckets();
    vkf_context *ctx = harness_context();
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    f16_ok = info.storage_16bit;
    if (!f16_ok) fprintf(stderr, "test_t5_ops: \"%s\" has no 16-bit storage: the F16 cases are not run\n", info.name);
    test_rmsnorm(ctx);
    test_glu(ctx);
    test_gelu_tanh_matmul(ctx);
    test_softmax_bias(ctx);
    test_block_sum(ctx);
    test_tglobal_api(ctx);
    test_bad_arguments(ctx);
    harness_close(ctx);
    test_decode_bias();
    return harness_result("test_t5_ops");
}

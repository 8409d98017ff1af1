/* Every GPU op against the plain-C reference, on sizes 1, 3, 17, 64, 100, 257 and
 * 1000 in each dimension, the scalar matmul kernel families, and every option (bias,
 * residual, activations, strided and batched views, masks, in-place). The
 * cooperative-matrix matmuls (KHR and NV2, every dtype variant) where the context
 * has them, else a line saying why and a check that asking for them fails cleanly.
 * int8 weights (I8 B with per-channel scales) on every family, against the
 * reference on the same quantized weights, and what they refuse. */
#include "harness.h"
#include "internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const uint32_t SIZES[] = {1, 3, 17, 64, 100, 257, 1000};
#define NSIZES (sizeof SIZES / sizeof SIZES[0])

/* ------------------------------------------------------------------ matmul */

typedef struct mm_case {
    uint32_t m, n, k;
    bool bias, residual, b_kn;
    vkf_activation act;
    float alpha;
    uint32_t pad;                       /* extra elements per row and at the start (unaligned views) */
} mm_case;

static void run_matmul(vkf_context *ctx, const char *family, const mm_case *c, uint64_t seed)
{
    size_t lda = c->k + c->pad, ldb = (c->b_kn ? c->n : c->k) + c->pad, ldc = c->n + c->pad;
    size_t b_rows = c->b_kn ? c->k : c->n;
    size_t off = c->pad;
    float *a = harness_random(off + c->m * lda, seed);
    float *b = harness_random(off + b_rows * ldb, seed + 1);
    float *bias = harness_random(c->n, seed + 2);
    float *r = harness_random(c->m * c->n, seed + 3);
    float *want = harness_random(off + c->m * ldc, seed + 4); /* untouched padding must stay as it was */
    vkf_tensor *ta = harness_tensor(ctx, a, 1, off + c->m * lda);
    vkf_tensor *tb = harness_tensor(ctx, b, 1, off + b_rows * ldb);
    vkf_tensor *tbias = harness_tensor(ctx, bias, 1, c->n);
    vkf_tensor *tr = harness_tensor(ctx, r, c->m, c->n);
    vkf_tensor *tc = harness_tensor(ctx, want, 1, off + c->m * ldc);

    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = c->m, d.n = c->n, d.k = c->k;
    d.a = (vkf_matrix_view){.tensor = ta, .offset = off, .row_stride = lda};
    d.b = (vkf_matrix_view){.tensor = tb, .offset = off, .row_stride = ldb};
    d.b_is_k_by_n = c->b_kn;
    d.c = (vkf_matrix_view){.tensor = tc, .offset = off, .row_stride = ldc};
    d.bias = c->bias ? tbias : NULL;
    if (c->residual) d.residual.tensor = tr;
    d.alpha = c->alpha;
    d.activation = c->act;
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(tc);
    ref_matmul(want + off, ldc, a + off, lda, b + off, ldb, c->b_kn, c->bias ? bias : NULL, c->residual ? r : NULL,
               c->n, c->m, c->n, c->k, c->alpha, (int)c->act);
    char what[160];
    snprintf(what, sizeof what, "%s matmul m=%u n=%u k=%u%s%s%s act=%d alpha=%g pad=%u", family, c->m, c->n, c->k,
             c->bias ? " bias" : "", c->residual ? " residual" : "", c->b_kn ? " B(k,n)" : "", (int)c->act, c->alpha,
             c->pad);
    /* fp32 accumulation over k terms of magnitude <= 1 */
    harness_compare(what, got, want, off + c->m * ldc, 1e-5 + 2e-7 * c->k, 1e-4);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tbias);
    vkf_tensor_destroy(tr), vkf_tensor_destroy(tc);
    free(a), free(b), free(bias), free(r), free(want), free(got);
}

/* Per-head products as attention uses them: Q, K, V (seq, heads * hd) packed; the
 * batch runs over (batch, head) with two batch strides. S = Q·Kᵀ, O = S·V. */
static void run_batched(vkf_context *ctx, const char *family, uint32_t batch, uint32_t heads, uint32_t seq,
                        uint32_t hd)
{
    size_t dm = (size_t)heads * hd;
    size_t n_qkv = (size_t)batch * seq * dm, n_s = (size_t)batch * heads * seq * seq;
    float *q = harness_random(n_qkv, 11), *k = harness_random(n_qkv, 12), *v = harness_random(n_qkv, 13);
    vkf_tensor *tq = harness_tensor(ctx, q, batch * seq, dm), *tk = harness_tensor(ctx, k, batch * seq, dm);
    vkf_tensor *tv = harness_tensor(ctx, v, batch * seq, dm);
    vkf_tensor *ts = harness_tensor(ctx, NULL, batch * heads * seq, seq);
    vkf_tensor *to = harness_tensor(ctx, NULL, batch * seq, dm);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = seq, d.n = seq, d.k = hd;
    d.batch[0] = batch, d.batch[1] = heads;
    d.a = (vkf_matrix_view){.tensor = tq, .row_stride = dm, .batch_stride = {seq * dm, hd}};
    d.b = (vkf_matrix_view){.tensor = tk, .row_stride = dm, .batch_stride = {seq * dm, hd}};
    d.c = (vkf_matrix_view){.tensor = ts, .batch_stride = {(uint64_t)heads * seq * seq, (uint64_t)seq * seq}};
    d.alpha = 1.0f / sqrtf((float)hd);
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    vkf_matmul_desc_init(&d);
    d.m = seq, d.n = hd, d.k = seq;
    d.batch[0] = batch, d.batch[1] = heads;
    d.a = (vkf_matrix_view){.tensor = ts, .batch_stride = {(uint64_t)heads * seq * seq, (uint64_t)seq * seq}};
    d.b = (vkf_matrix_view){.tensor = tv, .row_stride = dm, .batch_stride = {seq * dm, hd}};
    d.b_is_k_by_n = true;
    d.c = (vkf_matrix_view){.tensor = to, .row_stride = dm, .batch_stride = {seq * dm, hd}};
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got_s = harness_download(ts), *got_o = harness_download(to);
    float *want_s = harness_alloc(n_s * 4), *want_o = harness_alloc(n_qkv * 4);
    for (uint32_t b = 0; b < batch; b++)
        for (uint32_t h = 0; h < heads; h++) {
            size_t qo = (size_t)b * seq * dm + (size_t)h * hd, so = ((size_t)b * heads + h) * seq * seq;
            ref_matmul(want_s + so, seq, q + qo, dm, k + qo, dm, false, NULL, NULL, 0, seq, seq, hd,
                       1.0f / sqrtf((float)hd), 0);
            /* P·V from the GPU's scores, so the two products are checked separately */
            ref_matmul(want_o + qo, dm, got_s + so, seq, v + qo, dm, true, NULL, NULL, 0, seq, hd, seq, 1.0f, 0);
        }
    char what[128];
    snprintf(what, sizeof what, "%s batched Q.K^T batch=%u heads=%u seq=%u hd=%u", family, batch, heads, seq, hd);
    harness_compare(what, got_s, want_s, n_s, 1e-5, 1e-4);
    snprintf(what, sizeof what, "%s batched P.V batch=%u heads=%u seq=%u hd=%u", family, batch, heads, seq, hd);
    harness_compare(what, got_o, want_o, n_qkv, 1e-4, 1e-4);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tk), vkf_tensor_destroy(tv);
    vkf_tensor_destroy(ts), vkf_tensor_destroy(to);
    free(q), free(k), free(v), free(got_s), free(got_o), free(want_s), free(want_o);
}

static void test_matmul_family(vkf_context *ctx, const char *family)
{
    uint64_t seed = 100;
    /* Each size in each dimension, the other two from a small rotating set. */
    static const uint32_t others[] = {3, 17, 64, 100};
    for (int dim = 0; dim < 3; dim++)
        for (size_t i = 0; i < NSIZES; i++) {
            uint32_t s[3] = {others[i % 4], others[(i + 1) % 4], others[(i + 2) % 4]};
            s[dim] = SIZES[i];
            mm_case c = {.m = s[0], .n = s[1], .k = s[2], .alpha = 1.0f};
            run_matmul(ctx, family, &c, seed++);
        }
    /* Large on all sides at once, and the edge cases. */
    mm_case big[] = {
        {.m = 1000, .n = 257, .k = 100, .alpha = 1.0f},
        {.m = 257, .n = 1000, .k = 257, .alpha = 1.0f, .bias = true},
        {.m = 100, .n = 100, .k = 1000, .alpha = 1.0f},
        {.m = 1, .n = 1, .k = 1, .alpha = 1.0f},
        {.m = 64, .n = 64, .k = 64, .alpha = 1.0f},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) run_matmul(ctx, family, &big[i], seed++);
    /* Every epilogue and layout option. */
    mm_case opts[] = {
        {.m = 17, .n = 100, .k = 64, .bias = true, .act = VKF_ACTIVATION_RELU, .alpha = 1.0f},
        {.m = 100, .n = 17, .k = 257, .bias = true, .act = VKF_ACTIVATION_GELU, .alpha = 1.0f},
        {.m = 33, .n = 65, .k = 40, .bias = true, .residual = true, .act = VKF_ACTIVATION_SILU, .alpha = 1.0f},
        {.m = 64, .n = 3, .k = 17, .residual = true, .alpha = 0.125f},
        {.m = 257, .n = 64, .k = 100, .bias = true, .residual = true, .act = VKF_ACTIVATION_GELU, .alpha = 0.5f},
        {.m = 17, .n = 100, .k = 64, .b_kn = true, .alpha = 1.0f},
        {.m = 100, .n = 3, .k = 257, .b_kn = true, .bias = true, .act = VKF_ACTIVATION_RELU, .alpha = 1.0f},
        {.m = 17, .n = 64, .k = 64, .pad = 1, .alpha = 1.0f},   /* unaligned: scalar loads */
        {.m = 64, .n = 17, .k = 100, .pad = 3, .bias = true, .alpha = 1.0f},
        {.m = 64, .n = 17, .k = 100, .pad = 4, .bias = true, .alpha = 1.0f}, /* aligned with padding: vec4 */
        {.m = 3, .n = 257, .k = 17, .pad = 2, .b_kn = true, .residual = true, .alpha = 1.0f},
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) run_matmul(ctx, family, &opts[i], seed++);
    run_batched(ctx, family, 2, 3, 17, 16);
    run_batched(ctx, family, 1, 4, 100, 64);
    run_batched(ctx, family, 3, 1, 1, 3);
}

/* ------------------------------------------------------------------ softmax */

static void run_softmax(vkf_context *ctx, uint32_t rows, uint32_t cols, float scale, bool mask, uint32_t mask_rows,
                        uint32_t mask_div, uint32_t causal_period, uint32_t causal_offset, bool in_place, uint64_t seed)
{
    size_t n = (size_t)rows * cols;
    float *x = harness_random(n, seed);
    for (size_t i = 0; i < n; i++) x[i] *= 8.0f; /* wide range: exercises the max subtraction */
    float *m = harness_random((size_t)mask_rows * cols, seed + 1);
    for (size_t i = 0; i < (size_t)mask_rows * cols; i++) m[i] = m[i] > 0.5f ? -INFINITY : m[i];
    vkf_tensor *tx = harness_tensor(ctx, x, rows, cols);
    vkf_tensor *tm = harness_tensor(ctx, m, mask_rows, cols);
    vkf_tensor *ty = in_place ? tx : harness_tensor(ctx, NULL, rows, cols);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_softmax_desc d;
    vkf_softmax_desc_init(&d);
    d.rows = rows, d.cols = cols, d.x = tx, d.y = ty, d.scale = scale;
    if (mask) d.mask = tm, d.mask_rows = mask_rows, d.mask_row_div = mask_div;
    d.causal_period = causal_period, d.causal_offset = causal_offset;
    CHECK_OK(vkf_cmd_softmax(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(ty);
    float *want = harness_alloc(n * 4);
    ref_softmax(want, x, rows, cols, scale, mask ? m : NULL, mask_rows, mask_div, causal_period, causal_offset);
    char what[160];
    snprintf(what, sizeof what, "softmax rows=%u cols=%u scale=%g mask=%d/%u/%u causal=%u+%u%s", rows, cols, scale,
             mask, mask_rows, mask_div, causal_period, causal_offset, in_place ? " in-place" : "");
    harness_compare(what, got, want, n, 1e-6, 1e-4);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(tm);
    if (!in_place) vkf_tensor_destroy(ty);
    free(x), free(m), free(got), free(want);
}

static void test_softmax(vkf_context *ctx)
{
    uint64_t seed = 500;
    for (size_t i = 0; i < NSIZES; i++)
        for (size_t j = 0; j < NSIZES; j += 2) {
            uint32_t rows = SIZES[i], cols = SIZES[(i + j) % NSIZES];
            if ((uint64_t)rows * cols > 300000) continue;
            run_softmax(ctx, rows, cols, 1.0f, false, 1, 1, 0, 0, false, seed++);
        }
    run_softmax(ctx, 1000, 257, 0.125f, false, 1, 1, 0, 0, false, seed++);
    run_softmax(ctx, 3, 5000, 1.0f, false, 1, 1, 0, 0, false, seed++);          /* row >> workgroup */
    run_softmax(ctx, 100, 100, 0.5f, false, 1, 1, 100, 0, false, seed++);       /* causal */
    run_softmax(ctx, 2 * 17, 40, 1.0f, false, 1, 1, 17, 23, false, seed++);     /* causal with a cache offset */
    run_softmax(ctx, 4 * 3 * 17, 17, 1.0f, true, 4, 3 * 17, 0, 0, false, seed++); /* key padding per batch */
    run_softmax(ctx, 6 * 64, 64, 0.25f, true, 64, 1, 0, 0, false, seed++);      /* (seq, seq) mask, per row */
    run_softmax(ctx, 257, 257, 1.0f, true, 1, 1, 257, 0, true, seed++);          /* mask + causal, in place */
    run_softmax(ctx, 1, 1, 1.0f, false, 1, 1, 0, 0, true, seed++);

    /* A row with every column masked is zeros, not NaN. */
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, m[8];
    for (int i = 0; i < 8; i++) m[i] = i < 4 ? -INFINITY : 0.0f;
    vkf_tensor *tx = harness_tensor(ctx, x, 2, 4), *tm = harness_tensor(ctx, m, 2, 4);
    vkf_tensor *ty = harness_tensor(ctx, NULL, 2, 4);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_softmax_desc d;
    vkf_softmax_desc_init(&d);
    d.rows = 2, d.cols = 4, d.x = tx, d.y = ty, d.mask = tm, d.mask_rows = 2;
    CHECK_OK(vkf_cmd_softmax(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(ty), want[8];
    ref_softmax(want, x, 2, 4, 1.0f, m, 2, 1, 0, 0);
    for (int i = 0; i < 4; i++) CHECK(got[i] == 0.0f);
    harness_compare("softmax with a fully masked row", got, want, 8, 1e-6, 1e-5);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(tm), vkf_tensor_destroy(ty);
    free(got);
}

/* ------------------------------------------------------------------ layernorm */

static void run_layernorm(vkf_context *ctx, uint32_t rows, uint32_t cols, bool residual, bool sum, bool in_place,
                          float eps, uint64_t seed)
{
    size_t n = (size_t)rows * cols;
    float *x = harness_random(n, seed), *r = harness_random(n, seed + 1);
    float *g = harness_random(cols, seed + 2), *b = harness_random(cols, seed + 3);
    for (size_t i = 0; i < n; i++) x[i] = x[i] * 3.0f + 2.0f; /* non-zero mean */
    vkf_tensor *tx = harness_tensor(ctx, x, rows, cols), *tr = harness_tensor(ctx, r, rows, cols);
    vkf_tensor *tg = harness_tensor(ctx, g, 1, cols), *tb = harness_tensor(ctx, b, 1, cols);
    vkf_tensor *ty = in_place ? tx : harness_tensor(ctx, NULL, rows, cols);
    vkf_tensor *ts = harness_tensor(ctx, NULL, rows, cols);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_layernorm_desc d;
    vkf_layernorm_desc_init(&d);
    d.rows = rows, d.cols = cols, d.x = tx, d.residual = residual ? tr : NULL, d.gamma = tg, d.beta = tb;
    d.y = ty, d.sum = sum ? ts : NULL, d.eps = eps;
    CHECK_OK(vkf_cmd_layernorm(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(ty), *got_sum = harness_download(ts);
    float *want = harness_alloc(n * 4), *want_sum = harness_alloc(n * 4);
    ref_layernorm(want, want_sum, x, residual ? r : NULL, g, b, rows, cols, eps);
    char what[128];
    snprintf(what, sizeof what, "layernorm rows=%u cols=%u%s%s%s eps=%g", rows, cols, residual ? " +residual" : "",
             sum ? " sum-out" : "", in_place ? " in-place" : "", eps);
    /* one element alone in its row normalises to 0 (var 0): exact */
    harness_compare(what, got, want, n, 2e-5, 1e-4);
    if (sum) harness_compare(what, got_sum, want_sum, n, 0, 1e-6);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(tr), vkf_tensor_destroy(tg), vkf_tensor_destroy(tb);
    vkf_tensor_destroy(ts);
    if (!in_place) vkf_tensor_destroy(ty);
    free(x), free(r), free(g), free(b), free(got), free(got_sum), free(want), free(want_sum);
}

static void test_layernorm(vkf_context *ctx)
{
    uint64_t seed = 900;
    for (size_t i = 0; i < NSIZES; i++)
        for (size_t j = 0; j < NSIZES; j += 3) {
            uint32_t rows = SIZES[(i + j) % NSIZES], cols = SIZES[i];
            if ((uint64_t)rows * cols > 300000) continue;
            run_layernorm(ctx, rows, cols, (i + j) % 2 == 0, false, false, 1e-5f, seed++);
        }
    run_layernorm(ctx, 100, 1000, true, true, false, 1e-5f, seed++);
    run_layernorm(ctx, 17, 5000, false, true, false, 1e-6f, seed++);
    run_layernorm(ctx, 257, 64, true, false, true, 1e-5f, seed++);
    run_layernorm(ctx, 3, 48, true, true, true, 1e-3f, seed++);
}

/* ------------------------------------------------------------------ embedding */

/* One embedding case. The table is split into `parts` tensors of ceil(vocab /
 * parts) rows, one embed recorded per part (as models do past
 * maxStorageBufferRange). int8: an I8 table (packed four to a word) with one F32
 * scale per row, quantized by vkf_quantize_int8_rows (rows 4, 9, ... all zero:
 * scale 0), each part with its own rows' scales, against ref_embed on the
 * dequantized table q * scale; the kernel computes q * row_scale * scale (+ pe)
 * in fp32, so F32 output matches to fp32 rounding. act16: F16 output, within its
 * rounding. bad_id_at >= 0: that token's id is -1 (odd index) or vocab, and its
 * row must be NaN. */
typedef struct embed_case {
    uint32_t tokens, d, vocab;
    float scale;
    bool positional;
    uint32_t seq_len, pos_offset;
    int bad_id_at;
    uint32_t parts;                     /* 0 is read as 1 */
    bool int8, act16;
} embed_case;

static void run_embed_case(vkf_context *ctx, const embed_case *c, uint64_t seed)
{
    uint32_t tokens = c->tokens, d = c->d, vocab = c->vocab, parts = c->parts ? c->parts : 1;
    float *table = harness_random((size_t)vocab * d, seed), *row_scale = NULL;
    int8_t *q = NULL;
    if (c->int8) {
        row_scale = harness_alloc((size_t)vocab * 4);
        q = harness_alloc((size_t)vocab * d);
        for (uint32_t r = 4; r < vocab; r += 5)
            for (uint32_t col = 0; col < d; col++) table[(size_t)r * d + col] = 0.0f;
        CHECK_OK(vkf_quantize_int8_rows(table, vocab, d, q, row_scale));
        for (size_t i = 0; i < (size_t)vocab * d; i++) table[i] = (float)q[i] * row_scale[i / d]; /* what the kernel reads */
    }
    int32_t *ids = harness_alloc(tokens * sizeof *ids);
    for (uint32_t t = 0; t < tokens; t++) ids[t] = (int32_t)(((uint64_t)t * 2654435761u + seed) % vocab);
    if (c->bad_id_at >= 0) ids[c->bad_id_at] = (c->bad_id_at % 2) ? -1 : (int32_t)vocab;
    uint32_t per = (vocab + parts - 1) / parts;
    vkf_tensor *tp[8] = {0}, *ts[8] = {0}, *to = NULL, *ti = NULL, *tpe = NULL;
    uint64_t ne = (uint64_t)tokens * d;
    CHECK_OK(vkf_tensor_create(ctx, c->act16 ? VKF_DTYPE_F16 : VKF_DTYPE_F32, 1, &ne, &to));
    for (uint32_t i = 0; i < parts && i < 8; i++) {
        uint32_t r0 = i * per, n = vocab - r0 < per ? vocab - r0 : per;
        if (c->int8) {
            uint64_t shape[2] = {n, d};
            CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I8, 2, shape, &tp[i]));
            CHECK_OK(vkf_tensor_upload(tp[i], q + (size_t)r0 * d, (uint64_t)n * d));
            ts[i] = harness_tensor(ctx, row_scale + r0, 1, n);
        } else {
            tp[i] = harness_tensor(ctx, table + (size_t)r0 * d, n, d);
        }
    }
    uint32_t max_pos = (c->seq_len ? c->seq_len : tokens) + c->pos_offset;
    if (c->positional) CHECK_OK(vkf_positional_encoding_create(ctx, max_pos, d, &tpe));
    uint64_t shape = tokens;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &shape, &ti));
    CHECK_OK(vkf_tensor_upload(ti, ids, shape * 4));
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_embed_desc e;
    vkf_embed_desc_init(&e);
    e.tokens = tokens, e.d = d, e.vocab = vocab, e.ids = ti, e.out = to;
    e.scale = c->scale, e.positions = tpe, e.seq_len = c->seq_len, e.pos_offset = c->pos_offset;
    for (uint32_t i = 0; i < parts && i < 8; i++) {
        uint32_t r0 = i * per, n = vocab - r0 < per ? vocab - r0 : per;
        e.table = tp[i], e.table_scale = ts[i], e.table_row0 = r0, e.table_rows = parts > 1 ? n : 0;
        CHECK_OK(vkf_cmd_embed(cmd, &e));
    }
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = c->act16 ? harness_download_f16(to, ne) : harness_download(to), *want = harness_alloc(ne * 4);
    ref_embed(want, ids, table, tokens, d, vocab, c->scale, c->positional, c->seq_len, c->pos_offset);
    if (c->bad_id_at >= 0) {
        /* the bad row is NaN on both sides; compare the rest, then the NaNs */
        for (uint32_t col = 0; col < d; col++) {
            CHECK(isnan(got[(size_t)c->bad_id_at * d + col]));
            got[(size_t)c->bad_id_at * d + col] = want[(size_t)c->bad_id_at * d + col] = 0;
        }
    }
    char what[200];
    snprintf(what, sizeof what, "embed, %s table, %s out, tokens=%u d=%u vocab=%u scale=%g pe=%d seq=%u offset=%u "
             "bad=%d parts=%u", c->int8 ? "int8" : "F32", c->act16 ? "F16" : "F32", tokens, d, vocab, c->scale,
             c->positional, c->seq_len, c->pos_offset, c->bad_id_at, parts);
    double tol = c->act16 ? 1e-3 : 1e-6;
    harness_compare(what, got, want, ne, tol, tol);
    vkf_cmd_destroy(cmd);
    for (uint32_t i = 0; i < 8; i++) vkf_tensor_destroy(tp[i]), vkf_tensor_destroy(ts[i]);
    vkf_tensor_destroy(to), vkf_tensor_destroy(ti), vkf_tensor_destroy(tpe);
    free(table), free(row_scale), free(q), free(ids), free(got), free(want);
}

static void run_embed(vkf_context *ctx, uint32_t tokens, uint32_t d, uint32_t vocab, float scale, bool positional,
                      uint32_t seq_len, uint32_t pos_offset, int bad_id_at, uint64_t seed)
{
    run_embed_case(ctx, &(embed_case){tokens, d, vocab, scale, positional, seq_len, pos_offset, bad_id_at, 1, false, false},
                   seed);
}

static void run_embed_parts(vkf_context *ctx, uint32_t tokens, uint32_t d, uint32_t vocab, float scale,
                            bool positional, uint32_t seq_len, uint32_t pos_offset, int bad_id_at, uint64_t seed,
                            uint32_t parts)
{
    run_embed_case(ctx, &(embed_case){tokens, d, vocab, scale, positional, seq_len, pos_offset, bad_id_at, parts, false,
                                      false}, seed);
}

static void run_embed_i8(vkf_context *ctx, uint32_t tokens, uint32_t d, uint32_t vocab, float scale, bool positional,
                         uint32_t seq_len, int bad_id_at, uint64_t seed, uint32_t parts, bool act16)
{
    run_embed_case(ctx, &(embed_case){tokens, d, vocab, scale, positional, seq_len, 0, bad_id_at, parts, true, act16},
                   seed);
}

static void test_embed(vkf_context *ctx)
{
    uint64_t seed = 1300;
    for (size_t i = 0; i < NSIZES; i++) {
        uint32_t tokens = SIZES[i], d = SIZES[(i + 2) % NSIZES], vocab = SIZES[(i + 4) % NSIZES];
        if (d % 2 && d > 1) d += 1; /* models have even d_model; odd d is still checked below */
        run_embed(ctx, tokens, d, vocab, sqrtf((float)d), true, 0, 0, -1, seed++);
    }
    run_embed(ctx, 1000, 64, 257, 1.0f, true, 0, 0, -1, seed++);
    run_embed(ctx, 17, 1000, 3, 2.0f, false, 0, 0, -1, seed++);
    run_embed(ctx, 3 * 17, 17, 100, 1.0f, true, 17, 0, -1, seed++);     /* 3 sequences of 17, odd d */
    run_embed(ctx, 4, 64, 100, 8.0f, true, 1, 257, -1, seed++);         /* decode steps at position 257 */
    run_embed(ctx, 100, 64, 100, 1.0f, true, 0, 0, 7, seed++);          /* id = -1 */
    run_embed(ctx, 100, 64, 100, 1.0f, true, 0, 0, 42, seed++);         /* id = vocab */
    run_embed_parts(ctx, 300, 24, 1001, 3.0f, true, 0, 0, -1, seed++, 3);  /* split table, uneven last part */
    run_embed_parts(ctx, 64, 16, 100, 1.0f, true, 0, 0, 7, seed++, 2);     /* split, id = -1 */
    run_embed_parts(ctx, 64, 16, 100, 1.0f, false, 0, 0, 42, seed++, 7);   /* split in 7, id = vocab */
}

static void test_embed_i8(vkf_context *ctx, const vkf_device_info *info)
{
    uint64_t seed = 1400;
    for (int act16 = 0; act16 < (info->storage_16bit ? 2 : 1); act16++) {
        run_embed_i8(ctx, 100, 64, 257, 8.0f, true, 0, -1, seed++, 1, act16);
        run_embed_i8(ctx, 51, 17, 100, 1.0f, true, 17, -1, seed++, 1, act16);   /* odd d: rows start mid-word */
        run_embed_i8(ctx, 1, 1, 1, 3.0f, false, 0, -1, seed++, 1, act16);       /* one element */
        run_embed_i8(ctx, 300, 24, 1001, 3.0f, true, 0, -1, seed++, 3, act16);  /* split, uneven last part */
        run_embed_i8(ctx, 64, 13, 100, 1.0f, true, 0, 7, seed++, 2, act16);     /* split, odd d, id = -1 */
        run_embed_i8(ctx, 64, 16, 100, 1.0f, false, 0, 42, seed++, 7, act16);   /* split in 7, id = vocab */
    }
}

/* ------------------------------------------------------------------ F16 weights */

/* B (weights) and the embedding table stored as F16 where the device has 16-bit
 * storage; the reference uses the same rounded values. Elsewhere the ops refuse
 * F16 with VKF_ERROR_UNSUPPORTED. */
static void test_f16_weights(vkf_context *ctx, const vkf_device_info *info)
{
    /* The converter itself: every half survives a round trip, ties go to even. */
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = ref_f16_to_f32((uint16_t)h);
        if (!isnan(f) && ref_f32_to_f16(f) != h) {
            fprintf(stderr, "f16 round trip of 0x%04x gives 0x%04x\n", h, ref_f32_to_f16(f));
            harness_failures++;
            break;
        }
    }
    CHECK(ref_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00); /* tie, to even */
    CHECK(ref_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02);

    struct { uint32_t m, n, k; bool b_kn; } cases[] = {{17, 100, 64, false}, {64, 257, 100, false}, {3, 17, 1000, false},
                                                      {100, 64, 17, true}, {1, 1, 1, false}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        uint32_t m = cases[ci].m, n = cases[ci].n, k = cases[ci].k;
        bool kn = cases[ci].b_kn;
        float *a = harness_random((size_t)m * k, 70 + ci), *b = harness_random((size_t)n * k, 80 + ci);
        float *bias = harness_random(n, 90 + ci);
        uint16_t *bh = harness_alloc((size_t)n * k * 2);
        for (size_t i = 0; i < (size_t)n * k; i++) {
            bh[i] = ref_f32_to_f16(b[i]);
            b[i] = ref_f16_to_f32(bh[i]);
        }
        vkf_tensor *ta = harness_tensor(ctx, a, m, k), *tbias = harness_tensor(ctx, bias, 1, n);
        vkf_tensor *tc = harness_tensor(ctx, NULL, m, n), *tb;
        uint64_t shape[2] = {kn ? k : n, kn ? n : k};
        CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 2, shape, &tb));
        CHECK_OK(vkf_tensor_upload(tb, bh, (uint64_t)n * k * 2));
        vkf_cmd *cmd;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        vkf_matmul_desc d;
        vkf_matmul_desc_init(&d);
        d.m = m, d.n = n, d.k = k, d.b_is_k_by_n = kn;
        d.a.tensor = ta, d.b.tensor = tb, d.c.tensor = tc, d.bias = tbias, d.activation = VKF_ACTIVATION_GELU;
        vkf_status st = vkf_cmd_matmul(cmd, &d);
        if (!info->storage_16bit) {
            CHECK(st == VKF_ERROR_UNSUPPORTED);
        } else {
            CHECK_OK(st);
            CHECK_OK(vkf_cmd_submit(cmd));
            float *got = harness_download(tc), *want = harness_alloc((size_t)m * n * 4);
            /* A cooperative-matrix kernel (the built-in rule's choice for an F16 operand
             * on GPUs) multiplies A rounded to f16: the reference does the same. */
            bool coop = strncmp(vkf_matmul_kernel_family(ctx, m, n, k, 1, false, true), "coopmat", 7) == 0;
            float *a_ref = a;
            if (coop) {
                a_ref = harness_alloc((size_t)m * k * 4);
                for (size_t i = 0; i < (size_t)m * k; i++) a_ref[i] = ref_f16_to_f32(ref_f32_to_f16(a[i]));
            }
            ref_matmul(want, n, a_ref, k, b, kn ? n : k, kn, bias, NULL, 0, m, n, k, 1.0f, 2);
            if (coop) free(a_ref);
            char what[96];
            snprintf(what, sizeof what, "matmul with F16 B m=%u n=%u k=%u%s%s", m, n, k, kn ? " B(k,n)" : "",
                     coop ? " (coopmat: A rounded to f16)" : "");
            harness_compare(what, got, want, (size_t)m * n, 1e-5 + 2e-7 * k, 1e-4);
            free(got), free(want);
        }
        vkf_cmd_destroy(cmd);
        vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tc), vkf_tensor_destroy(tbias);
        free(a), free(b), free(bias), free(bh);
    }

    /* An F16 embedding table. */
    uint32_t tokens = 100, d = 64, vocab = 257;
    float *table = harness_random((size_t)vocab * d, 99);
    uint16_t *th = harness_alloc((size_t)vocab * d * 2);
    for (size_t i = 0; i < (size_t)vocab * d; i++) {
        th[i] = ref_f32_to_f16(table[i]);
        table[i] = ref_f16_to_f32(th[i]);
    }
    int32_t ids[100];
    for (uint32_t t = 0; t < tokens; t++) ids[t] = (int32_t)((t * 31u) % vocab);
    vkf_tensor *tt, *ti, *tpe, *to = harness_tensor(ctx, NULL, tokens, d);
    uint64_t tshape[2] = {vocab, d}, ishape = tokens;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 2, tshape, &tt));
    CHECK_OK(vkf_tensor_upload(tt, th, (uint64_t)vocab * d * 2));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &ishape, &ti));
    CHECK_OK(vkf_tensor_upload(ti, ids, sizeof ids));
    CHECK_OK(vkf_positional_encoding_create(ctx, tokens, d, &tpe));
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_embed_desc e;
    vkf_embed_desc_init(&e);
    e.tokens = tokens, e.d = d, e.vocab = vocab, e.ids = ti, e.table = tt, e.out = to, e.scale = 8.0f, e.positions = tpe;
    vkf_status st = vkf_cmd_embed(cmd, &e);
    if (!info->storage_16bit) {
        CHECK(st == VKF_ERROR_UNSUPPORTED);
    } else {
        CHECK_OK(st);
        CHECK_OK(vkf_cmd_submit(cmd));
        float *got = harness_download(to), *want = harness_alloc((size_t)tokens * d * 4);
        ref_embed(want, ids, table, tokens, d, vocab, 8.0f, true, tokens, 0);
        harness_compare("embedding with an F16 table", got, want, (size_t)tokens * d, 1e-6, 1e-6);
        free(got), free(want);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tt), vkf_tensor_destroy(ti), vkf_tensor_destroy(tpe), vkf_tensor_destroy(to);
    free(table), free(th);
}

/* ------------------------------------------------------------------ F16 activations */

/* matmul with A, C and the residual stored as F16 (B F32 or F16), in the family
 * set on ctx: against ref_matmul on the same rounded inputs, within the rounding
 * of C to F16. */
static void run_matmul_act16(vkf_context *ctx, const char *family, uint32_t m, uint32_t n, uint32_t k, bool b_f16,
                             bool b_kn, uint64_t seed)
{
    uint64_t b_rows = b_kn ? k : n, b_cols = b_kn ? n : k;
    float *a = harness_random((uint64_t)m * k, seed), *b = harness_random(b_rows * b_cols, seed + 1);
    float *bias = harness_random(n, seed + 2), *r = harness_random((uint64_t)m * n, seed + 3);
    vkf_tensor *ta = harness_f16_tensor(ctx, a, (uint64_t)m * k), *tr = harness_f16_tensor(ctx, r, (uint64_t)m * n);
    vkf_tensor *tb = b_f16 ? harness_f16_tensor(ctx, b, b_rows * b_cols) : harness_tensor(ctx, b, 1, b_rows * b_cols);
    vkf_tensor *tbias = harness_tensor(ctx, bias, 1, n), *tc = NULL;
    uint64_t cn = (uint64_t)m * n;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &cn, &tc));
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = m, d.n = n, d.k = k;
    d.a.tensor = ta, d.b.tensor = tb, d.b_is_k_by_n = b_kn, d.c.tensor = tc, d.bias = tbias;
    d.residual.tensor = tr, d.activation = VKF_ACTIVATION_GELU, d.alpha = 0.5f;
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download_f16(tc, cn), *want = harness_alloc(cn * 4);
    ref_matmul(want, n, a, k, b, b_cols, b_kn, bias, r, n, m, n, k, 0.5f, (int)VKF_ACTIVATION_GELU);
    char what[160];
    snprintf(what, sizeof what, "%s matmul, F16 activations, B %s%s, m=%u n=%u k=%u", family, b_f16 ? "F16" : "F32",
             b_kn ? " (k,n)" : "", m, n, k);
    harness_compare(what, got, want, cn, 1e-3, 1e-3);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tbias), vkf_tensor_destroy(tr);
    vkf_tensor_destroy(tc);
    free(a), free(b), free(bias), free(r), free(got), free(want);
}

/* The scalar matmul families with small tiles of each (subgroup where the device
 * has it: one subgroup's rows per lane-row block, so that 37 and 70 rows use it);
 * returns how many. */
typedef struct scalar_family {
    const char *name;
    vkf_variant_id variant;
    vkf_matmul_tiles tiles;
} scalar_family;

static size_t scalar_families(const vkf_device_info *info, scalar_family out[4])
{
    size_t n = 0;
    out[n++] = (scalar_family){"direct", VKF_VARIANT_MATMUL_DIRECT, {.workgroup = 64, .bm = 64, .bn = 64, .bk = 1, .tm = 8, .tn = 8}};
    out[n++] = (scalar_family){"tiled", VKF_VARIANT_MATMUL_TILED, {.workgroup = 256, .bm = 64, .bn = 64, .bk = 16, .tm = 4, .tn = 4}};
    out[n] = (scalar_family){"subgroup", VKF_VARIANT_MATMUL_SUBGROUP, {0}};
    if (vkf_matmul_subgroup_tiles(info, 2 * info->subgroup_size, 4 * info->subgroup_size, info->subgroup_size, 2,
                                  &out[n].tiles))
        n++;
    /* 5 rows per subgroup: not a multiple of the subgroup size, nor of 37 or 70 */
    out[n] = (scalar_family){"broadcast", VKF_VARIANT_MATMUL_BROADCAST, {0}};
    if (vkf_matmul_broadcast_tiles(info, 10, 4 * info->subgroup_size, 5, 2, &out[n].tiles)) n++;
    return n;
}

static void test_act16(vkf_context *ctx, const vkf_device_info *info)
{
    if (!info->storage_16bit) {
        /* no 16-bit storage: F16 activations are refused, naming the reason */
        float x[4] = {1, 2, 3, 4};
        uint64_t four = 4;
        vkf_tensor *t16 = NULL, *t32 = harness_tensor(ctx, x, 1, 4);
        CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &four, &t16));
        vkf_cmd *cmd;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        vkf_matmul_desc d;
        vkf_matmul_desc_init(&d);
        d.m = 2, d.n = 2, d.k = 2, d.a.tensor = t16, d.b.tensor = t32, d.c.tensor = t16;
        CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_UNSUPPORTED, "16-bit");
        vkf_cmd_destroy(cmd);
        vkf_tensor_destroy(t16), vkf_tensor_destroy(t32);
        return;
    }
    scalar_family families[4];
    size_t count = scalar_families(info, families);
    uint64_t seed = 5000;
    for (size_t f = 0; f < count; f++) {
        CHECK_OK(vkf_tuning_set_matmul(ctx, families[f].variant, &families[f].tiles));
        ctx->tuning.matmul_min_macs = 0;
        for (int b16 = 0; b16 < 2; b16++) {
            run_matmul_act16(ctx, families[f].name, 37, 50, 64, b16, false, seed += 4);   /* vec4 loads */
            run_matmul_act16(ctx, families[f].name, 5, 17, 19, b16, false, seed += 4);    /* odd sizes */
            run_matmul_act16(ctx, families[f].name, 70, 33, 48, b16, true, seed += 4);    /* B (k, n) */
            run_matmul_act16(ctx, families[f].name, 1, 130, 96, b16, false, seed += 4);   /* one row */
        }
    }
    vkf_tuning_choose(ctx);

    /* layernorm: x, residual, y and sum F16 */
    uint32_t rows = 7, cols = 100;
    uint64_t n = (uint64_t)rows * cols;
    float *x = harness_random(n, 61), *r = harness_random(n, 62), *g = harness_random(cols, 63), *b = harness_random(cols, 64);
    vkf_tensor *tx = harness_f16_tensor(ctx, x, n), *tr = harness_f16_tensor(ctx, r, n), *ty = NULL, *ts = NULL;
    vkf_tensor *tg = harness_tensor(ctx, g, 1, cols), *tb = harness_tensor(ctx, b, 1, cols);
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &n, &ty));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &n, &ts));
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_layernorm_desc ln;
    vkf_layernorm_desc_init(&ln);
    ln.rows = rows, ln.cols = cols, ln.x = tx, ln.residual = tr, ln.gamma = tg, ln.beta = tb, ln.y = ty, ln.sum = ts;
    CHECK_OK(vkf_cmd_layernorm(cmd, &ln));
    /* embed into F16, from an F32 and from an F16 table */
    uint32_t vocab = 13, d = 24, tokens = 9;
    int32_t ids[9] = {0, 12, 5, 5, 7, 1, 2, 11, 3};
    float *table = harness_random((uint64_t)vocab * d, 65), *table16 = harness_random((uint64_t)vocab * d, 66);
    vkf_tensor *tids = NULL, *tt = harness_tensor(ctx, table, vocab, d), *tt16 = harness_f16_tensor(ctx, table16, (uint64_t)vocab * d);
    uint64_t nt = tokens, ne = (uint64_t)tokens * d;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &nt, &tids));
    CHECK_OK(vkf_tensor_upload(tids, ids, sizeof ids));
    vkf_tensor *te = NULL, *te16 = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &ne, &te));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &ne, &te16));
    vkf_embed_desc e;
    vkf_embed_desc_init(&e);
    e.tokens = tokens, e.d = d, e.vocab = vocab, e.ids = tids, e.table = tt, e.out = te, e.scale = 2.0f;
    CHECK_OK(vkf_cmd_embed(cmd, &e));
    e.table = tt16, e.out = te16;
    CHECK_OK(vkf_cmd_embed(cmd, &e));
    /* mixed activation dtypes are refused, naming the tensor */
    vkf_tensor *t32 = harness_tensor(ctx, NULL, 1, n);
    ln.y = t32;
    CHECK_FAIL(vkf_cmd_layernorm(cmd, &ln), VKF_ERROR_INVALID_ARGUMENT, "y must have");
    vkf_matmul_desc mm;
    vkf_matmul_desc_init(&mm);
    mm.m = rows, mm.n = rows, mm.k = cols, mm.a.tensor = tx, mm.b.tensor = tr, mm.c.tensor = t32;
    CHECK_FAIL(vkf_cmd_matmul(cmd, &mm), VKF_ERROR_INVALID_ARGUMENT, "C must have");
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got_y = harness_download_f16(ty, n), *got_s = harness_download_f16(ts, n), *want_y = harness_alloc(n * 4),
          *want_s = harness_alloc(n * 4);
    ref_layernorm(want_y, want_s, x, r, g, b, rows, cols, 1e-5f);
    harness_compare("layernorm, F16 activations: y", got_y, want_y, n, 4e-3, 2e-3);
    harness_compare("layernorm, F16 activations: sum", got_s, want_s, n, 1e-3, 1e-3);
    float *got_e = harness_download_f16(te, ne), *got_e16 = harness_download_f16(te16, ne), *want_e = harness_alloc(ne * 4);
    ref_embed(want_e, ids, table, tokens, d, vocab, 2.0f, false, tokens, 0);
    harness_compare("embed into F16 from an F32 table", got_e, want_e, ne, 1e-3, 1e-3);
    ref_embed(want_e, ids, table16, tokens, d, vocab, 2.0f, false, tokens, 0);
    harness_compare("embed into F16 from an F16 table", got_e16, want_e, ne, 1e-3, 1e-3);
    vkf_cmd_destroy(cmd);
    vkf_tensor *all[] = {tx, tr, ty, ts, tg, tb, tids, tt, tt16, te, te16, t32};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vkf_tensor_destroy(all[i]);
    free(x), free(r), free(g), free(b), free(table), free(table16);
    free(got_y), free(got_s), free(want_y), free(want_s), free(got_e), free(got_e16), free(want_e);
}

/* ------------------------------------------------------------------ cooperative matrix */

/* Error bounds of the coopmat kernels, with A and B rounded to f16 on the host
 * first (so the kernel's conversion is exact on any driver and the reference sees
 * what the fragments hold). Products of f16 values are exact in fp32, so against
 * the double reference only fp32 accumulation differs: abs 1e-5 + 4e-7 k, rel 2e-4
 * (twice the scalar kernels' bound: hardware accumulators may round less well).
 * C stored as F16 adds its rounding, 2^-11 relative: abs 1e-3, rel 1e-3. */
#define CM_ATOL(k) (1e-5 + 4e-7 * (k))
#define CM_RTOL 2e-4
#define CM16_ATOL 1e-3
#define CM16_RTOL 1e-3

typedef struct cm_case {
    uint32_t m, n, k;
    uint32_t b0, b1;                    /* batch (0: 1) */
    bool b_kn, bias, residual;
    vkf_activation act;
    float alpha;
    uint32_t pad;                       /* every view: offset and extra row stride, in elements */
} cm_case;

/* The worst error seen, relative to the bound it had to meet, for the report. */
static double cm_worst_abs[2], cm_worst_ratio[2];  /* [C F16] */

static void round_f16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = ref_f16_to_f32(ref_f32_to_f16(x[i]));
}

/* One matmul on the coopmat kernel set on ctx: A F16 or F32 (act16: C and the
 * residual too), B F16 or F32, either layout, batches, every epilogue option. */
static void run_coopmat(vkf_context *ctx, const char *family, const cm_case *c, bool act16, bool b16, uint64_t seed,
                        const char *expect)
{
    uint32_t b0 = c->b0 ? c->b0 : 1, b1 = c->b1 ? c->b1 : 1, items = b0 * b1;
    /* views: pad elements before the first and after each row (the pads hold
     * random values the kernel must not read; C's pads must stay 0) */
    size_t off = c->pad, lda = c->k + c->pad, ldb = (c->b_kn ? c->n : c->k) + c->pad, ldc = c->n + c->pad;
    size_t na = (size_t)c->m * lda, nb = (size_t)(c->b_kn ? c->k : c->n) * ldb, nc = (size_t)c->m * ldc;
    float *a = harness_random(off + na * items, seed), *b = harness_random(off + nb * items, seed + 1);
    float *bias = harness_random(c->n, seed + 2), *r = harness_random(off + nc * items, seed + 3);
    round_f16(a, off + na * items), round_f16(b, off + nb * items);
    vkf_tensor *ta = act16 ? harness_f16_tensor(ctx, a, off + na * items) : harness_tensor(ctx, a, 1, off + na * items);
    vkf_tensor *tb = b16 ? harness_f16_tensor(ctx, b, off + nb * items) : harness_tensor(ctx, b, 1, off + nb * items);
    vkf_tensor *tr = act16 ? harness_f16_tensor(ctx, r, off + nc * items) : harness_tensor(ctx, r, 1, off + nc * items);
    vkf_tensor *tbias = harness_tensor(ctx, bias, 1, c->n), *tc = NULL;
    uint64_t cn = off + nc * items;
    float *want = harness_alloc(cn * 4);    /* C starts as 1234 everywhere: the pads must keep it */
    for (size_t i = 0; i < cn; i++) want[i] = 1234.0f;
    tc = act16 ? harness_f16_tensor(ctx, want, cn) : harness_tensor(ctx, want, 1, cn);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = c->m, d.n = c->n, d.k = c->k;
    d.batch[0] = b0, d.batch[1] = b1;
    /* batch items packed one after another: (b0, b1, rows, cols) */
    d.a = (vkf_matrix_view){.tensor = ta, .offset = off, .row_stride = lda, .batch_stride = {na * b1, na}};
    d.b = (vkf_matrix_view){.tensor = tb, .offset = off, .row_stride = ldb, .batch_stride = {nb * b1, nb}};
    d.b_is_k_by_n = c->b_kn;
    d.c = (vkf_matrix_view){.tensor = tc, .offset = off, .row_stride = ldc, .batch_stride = {nc * b1, nc}};
    if (c->residual)
        d.residual = (vkf_matrix_view){.tensor = tr, .offset = off, .row_stride = ldc, .batch_stride = {nc * b1, nc}};
    d.bias = c->bias ? tbias : NULL;
    d.alpha = c->alpha;
    d.activation = c->act;
    const char *kernel = vkf_matmul_kernel_family(ctx, c->m, c->n, c->k, items, act16, b16);
    CHECK(strncmp(kernel, expect, strlen(expect)) == 0);
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = act16 ? harness_download_f16(tc, cn) : harness_download(tc);
    for (uint32_t z = 0; z < items; z++)
        ref_matmul(want + off + z * nc, ldc, a + off + z * na, lda, b + off + z * nb, ldb, c->b_kn,
                   c->bias ? bias : NULL, c->residual ? r + off + z * nc : NULL, ldc, c->m, c->n, c->k, c->alpha,
                   (int)c->act);
    double atol = act16 ? CM16_ATOL : CM_ATOL(c->k), rtol = act16 ? CM16_RTOL : CM_RTOL;
    for (size_t i = 0; i < cn; i++) {
        double err = fabs((double)got[i] - want[i]), ratio = err / (atol + rtol * fabs(want[i]));
        if (err > cm_worst_abs[act16]) cm_worst_abs[act16] = err;
        if (!(ratio <= cm_worst_ratio[act16])) cm_worst_ratio[act16] = ratio;
    }
    char what[200];
    snprintf(what, sizeof what, "%s (%s) A %s B %s%s m=%u n=%u k=%u batch %ux%u%s%s act=%d alpha=%g pad=%u", family,
             kernel, act16 ? "F16" : "F32", b16 ? "F16" : "F32", c->b_kn ? " (k,n)" : "", c->m, c->n, c->k, b0, b1,
             c->bias ? " bias" : "", c->residual ? " residual" : "", (int)c->act, c->alpha, c->pad);
    harness_compare(what, got, want, cn, atol, rtol);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tbias), vkf_tensor_destroy(tr);
    vkf_tensor_destroy(tc);
    free(a), free(b), free(bias), free(r), free(got), free(want);
}

/* Odd sizes on every axis (1, 7, 17, 1000, 1023), both B layouts, the epilogue
 * and batches, on one coopmat variant (dtypes) with the tiles set on ctx. */
static void coopmat_cases(vkf_context *ctx, const char *family, bool act16, bool b16, uint64_t *seed)
{
    static const cm_case shapes[] = {
        {.m = 1, .n = 17, .k = 7, .alpha = 1.0f},
        {.m = 7, .n = 1000, .k = 17, .bias = true, .act = VKF_ACTIVATION_RELU, .alpha = 1.0f},
        {.m = 17, .n = 7, .k = 1023, .residual = true, .alpha = 0.5f},
        {.m = 1023, .n = 17, .k = 1000, .bias = true, .residual = true, .act = VKF_ACTIVATION_GELU, .alpha = 0.25f},
        {.m = 64, .n = 64, .k = 64, .alpha = 1.0f},                     /* whole tiles */
        {.m = 17, .n = 33, .k = 40, .b0 = 2, .b1 = 3, .bias = true, .alpha = 1.0f},   /* batched */
        /* C rows 16-byte aligned: inner fragments stored straight to C with the whole epilogue */
        {.m = 41, .n = 48, .k = 72, .bias = true, .residual = true, .act = VKF_ACTIVATION_GELU_TANH, .alpha = 0.5f},
        /* the loads of 8 k: 16 bytes where rows start on 8 elements and k % 8 == 0
         * (k 40, 64, 72, 1000 above: contiguous), with padded views (pad 8); two
         * 4-element loads where they start on 4 (pad 4; k 36: the slot at k 32
         * half past the end); scalar loads elsewhere (pad 1) */
        {.m = 24, .n = 40, .k = 72, .pad = 8, .bias = true, .residual = true, .act = VKF_ACTIVATION_SILU, .alpha = 1.0f},
        {.m = 40, .n = 24, .k = 64, .pad = 4, .bias = true, .alpha = 1.0f},
        {.m = 33, .n = 40, .k = 36, .residual = true, .act = VKF_ACTIVATION_RELU, .alpha = 1.0f},
        {.m = 9, .n = 17, .k = 40, .pad = 1, .bias = true, .alpha = 1.0f},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int kn = 0; kn < 2; kn++) {
            cm_case c = shapes[i];
            c.b_kn = kn;
            run_coopmat(ctx, family, &c, act16, b16, *seed += 4, "coopmat");
        }
}

static void split_k_int8_cases(vkf_context *ctx, const char *family, uint64_t *seed);
static void gemv_int8_cases(vkf_context *ctx, const vkf_device_info *info, uint64_t *seed);

/* Records one F16 x F16 matmul (m, n, k) on ctx and returns how many dispatches it took. */
static uint32_t matmul_dispatches(vkf_context *ctx, uint32_t m, uint32_t n, uint32_t k)
{
    uint64_t na = (uint64_t)m * k, nb = (uint64_t)n * k, nc = (uint64_t)m * n;
    vkf_tensor *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &na, &a));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &nb, &b));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &nc, &c));
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = m, d.n = n, d.k = k;
    d.a.tensor = a, d.b.tensor = b, d.c.tensor = c;
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    uint32_t ops = vkf_cmd_op_count(cmd);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(a), vkf_tensor_destroy(b), vkf_tensor_destroy(c);
    return ops;
}

/* The KHR kernel's GPU form at small sizes: 2 x 2 subgroups of 2 x 2 fragments
 * (several warp tiles, direct fragment stores, K stages of two fragments), then
 * split-K (partial sums and the reduction pass) on the F16 and the int8 variants. */
static void coopmat_fast_form_cases(vkf_context *ctx, const vkf_device_info *info, uint32_t fm, uint32_t fn,
                                    uint32_t bk, uint64_t *seed)
{
    vkf_matmul_tiles warp;
    char name[80];
    if (vkf_matmul_coopmat_tiles(ctx, VKF_VARIANT_MATMUL_COOPMAT, 2, 2, 2 * fm, 2 * fn, 2 * bk, &warp)) {
        CHECK_OK(vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_COOPMAT, &warp));
        snprintf(name, sizeof name, "coopmat-%ux%u-warp%ux%u-bk%u", warp.bm, warp.bn, warp.tm, warp.tn, warp.bk);
        coopmat_cases(ctx, name, true, true, seed);
    } else {
        fprintf(stderr, "coopmat: 2 x 2 warp tiles do not fit %s\n", info->name);
        harness_failures++;
        return;
    }
    /* split-K: forced (the rule splits only on GPUs); K of 1..N stages per split */
    ctx->tuning.coopmat_split = 1;
    CHECK(matmul_dispatches(ctx, 17, 40, 16 * warp.bk) == 1);
    ctx->tuning.coopmat_split = 3;
    CHECK(matmul_dispatches(ctx, 17, 40, 16 * warp.bk) == 2);
    CHECK(matmul_dispatches(ctx, 17, 40, warp.bk) == 1);     /* one K stage: nothing to split */
    snprintf(name, sizeof name, "coopmat-%ux%u split-K 3", warp.bm, warp.bn);
    coopmat_cases(ctx, name, false, true, seed);
    split_k_int8_cases(ctx, name, seed);
    ctx->tuning.coopmat_split = 0;
}

/* matmul_gemv (decode steps on GPUs), set on ctx as the GPU rule sets it: up to
 * 8 rows with vec4 views, every dtype variant, the epilogue, batches, and the
 * views that must fall back to the other kernels (k not a multiple of 4, B (k, n)). */
static void test_gemv(vkf_context *ctx, const vkf_device_info *info)
{
    vkf_tuning saved = ctx->tuning;
    uint32_t wg = info->max_workgroup_invocations < 128 ? 64 : 128;
    ctx->tuning.gemv = (vkf_matmul_tiles){.workgroup = wg, .bm = 8, .bn = 4};
    ctx->tuning.coopmat_use = 0;
    ctx->tuning.matmul_source = VKF_SOURCE_TABLE;
    CHECK(strcmp(vkf_matmul_kernel_family(ctx, 1, 512, 512, 1, false, false), "gemv") == 0);
    CHECK(strcmp(vkf_matmul_kernel_family(ctx, 8, 512, 512, 1, true, true), "gemv") == 0);
    CHECK(strcmp(vkf_matmul_kernel_family(ctx, 9, 512, 512, 1, false, false), "gemv") != 0);
    CHECK(strcmp(vkf_matmul_kernel_family(ctx, 1, 512, 511, 1, false, false), "gemv") != 0);
    uint64_t seed = 21000;
    static const mm_case f32[] = {
        {.m = 1, .n = 17, .k = 64, .alpha = 1.0f},
        {.m = 3, .n = 1000, .k = 100, .bias = true, .act = VKF_ACTIVATION_RELU, .alpha = 1.0f},
        {.m = 8, .n = 33, .k = 4, .residual = true, .alpha = 0.5f},
        {.m = 5, .n = 64, .k = 1028, .bias = true, .residual = true, .act = VKF_ACTIVATION_GELU, .alpha = 0.25f},
        {.m = 4, .n = 17, .k = 100, .pad = 4, .bias = true, .alpha = 1.0f},     /* aligned with padding */
        {.m = 2, .n = 17, .k = 7, .alpha = 1.0f},                                /* k % 4: another kernel */
        {.m = 3, .n = 257, .k = 16, .b_kn = true, .residual = true, .alpha = 1.0f}, /* B (k, n): another kernel */
    };
    for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++) run_matmul(ctx, "gemv", &f32[i], seed++);
    if (info->storage_16bit) {
        static const cm_case f16[] = {
            {.m = 1, .n = 17, .k = 64, .alpha = 1.0f},
            {.m = 7, .n = 100, .k = 40, .bias = true, .residual = true, .act = VKF_ACTIVATION_SILU, .alpha = 1.0f},
            {.m = 3, .n = 24, .k = 16, .b0 = 2, .b1 = 3, .bias = true, .alpha = 1.0f},   /* batched */
        };
        for (size_t i = 0; i < sizeof f16 / sizeof f16[0]; i++)
            for (int v = 0; v < 3; v++) run_coopmat(ctx, "gemv", &f16[i], v != 1, v != 0, seed += 4, "gemv");
    }
    gemv_int8_cases(ctx, info, &seed);
    ctx->tuning = saved;
}

/* Why ctx has no coopmat kernels, for the line that says so. */
static const char *coopmat_absent_reason(const vkf_device_info *info)
{
    const char *env = getenv("VKFORMER_COOPMAT");
    vkf_coopmat_shape shape;
    if (!vkf_build_has_coopmat()) return "this build has no cooperative-matrix shaders (glslc too old)";
    if (env && strcmp(env, "0") == 0) return "VKFORMER_COOPMAT=0";
    if (!info->cooperative_matrix) return "no VK_KHR_cooperative_matrix";
    if (!vkf_coopmat_choose_shape(info, &shape)) return "no f16 x f16 -> f32 subgroup shape";
    if (!info->float16 || !info->storage_16bit || !info->vulkan_memory_model)
        return "no shaderFloat16, 16-bit storage or Vulkan memory model";
    return "driver not vetted (set vkf_context_options.coopmat = 1)";
}

static void test_coopmat(vkf_context *ctx, const vkf_device_info *info)
{
    /* Any tiles: without coopmat the request fails for that reason first. */
    const vkf_matmul_tiles any = {.workgroup = 4 * info->subgroup_size, .bm = 32, .bn = 32, .bk = 32, .tm = 16, .tn = 16};
    if (!info->coopmat_in_use) {
        printf("coopmat: not available on %s (%s), coopmat cases not run\n", info->name, coopmat_absent_reason(info));
        CHECK_FAIL(vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_COOPMAT, &any), VKF_ERROR_UNSUPPORTED, "cooperative");
        CHECK_FAIL(vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_COOPMAT2, &any), VKF_ERROR_UNSUPPORTED, "cooperative");
        CHECK_FAIL(vkf_tune_force_matmul(ctx, "coopmat"), VKF_ERROR_UNSUPPORTED, "cooperative");
        /* the pipeline itself is refused too, with the reason */
        const vkf_pipeline *pipe = NULL;
        uint32_t spec[9] = {any.workgroup, any.bm, any.bn, any.bk, any.tm, any.tn, 16, 16, 16};
        CHECK_FAIL(vkf_pipeline_get(ctx, VKF_VARIANT_MATMUL_COOPMAT_ACT16_F16B, spec, 9, &pipe), VKF_ERROR_UNSUPPORTED,
                   "cooperative");
        CHECK(pipe == NULL);
        /* and the built-in rule never picks it */
        CHECK(strncmp(vkf_matmul_kernel_family(ctx, 256, 256, 256, 1, true, true), "coopmat", 7) != 0);
        return;
    }
    printf("coopmat: %s, shape %ux%ux%u, subgroup %u%s\n", info->name, ctx->coopmat_shape.m, ctx->coopmat_shape.n,
           ctx->coopmat_shape.k, info->subgroup_size, info->coopmat2_in_use ? ", NV2 flexible dimensions" : "");
    /* The built-in rule: F32 x F32 keeps the scalar kernels; F16 operands use
     * coopmat on GPUs only; a skinny (decode) matmul stays scalar. */
    vkf_tuning_choose(ctx);
    bool cpu = info->type == VKF_DEVICE_CPU && !ctx->coopmat_everywhere; /* VKFORMER_COOPMAT=everywhere: the GPU rule */
    CHECK(strncmp(vkf_matmul_kernel_family(ctx, 256, 256, 256, 1, false, false), "coopmat", 7) != 0);
    CHECK((strncmp(vkf_matmul_kernel_family(ctx, 256, 256, 256, 1, true, true), "coopmat", 7) == 0) == !cpu);
    CHECK((strncmp(vkf_matmul_kernel_family(ctx, 256, 256, 256, 1, false, true), "coopmat", 7) == 0) == !cpu);
    CHECK(strncmp(vkf_matmul_kernel_family(ctx, 1, 256, 256, 1, true, true), "coopmat", 7) != 0);

    uint64_t seed = 9000;
    const struct {
        const char *name;
        vkf_variant_id variant;
    } families[] = {{"coopmat", VKF_VARIANT_MATMUL_COOPMAT}, {"coopmat2", VKF_VARIANT_MATMUL_COOPMAT2}};
    for (int f = 0; f < 2; f++) {
        if (families[f].variant == VKF_VARIANT_MATMUL_COOPMAT2 && !info->coopmat2_in_use) {
            printf("coopmat2: not available on %s (no VK_NV_cooperative_matrix2 flexible dimensions), "
                   "coopmat2 cases not run\n", info->name);
            CHECK_FAIL(vkf_tuning_set_matmul(ctx, VKF_VARIANT_MATMUL_COOPMAT2, &any), VKF_ERROR_UNSUPPORTED, "coopmat2");
            continue;
        }
        /* Small tiles (one fragment per subgroup, two subgroups, K stages of 8) on
         * every variant (dtypes), then the family's built-in tiles on F16 x F16:
         * the dtypes do not change the tile code, and on lavapipe each big
         * pipeline costs seconds to compile. */
        uint32_t fm = ctx->coopmat_shape.m, fn = ctx->coopmat_shape.n, fk = ctx->coopmat_shape.k;
        if (families[f].variant == VKF_VARIANT_MATMUL_COOPMAT2)
            fm = info->coopmat2_granularity[0], fn = 2 * info->coopmat2_granularity[1], fk = info->coopmat2_granularity[2];
        uint32_t bk = fk;
        while (bk % 8) bk += fk;
        vkf_matmul_tiles small;
        char name[64];
        if (vkf_matmul_coopmat_tiles(ctx, families[f].variant, 1, 2, fm, fn, bk, &small)) {
            CHECK_OK(vkf_tuning_set_matmul(ctx, families[f].variant, &small));
            snprintf(name, sizeof name, "%s-%ux%u-bk%u", families[f].name, small.bm, small.bn, small.bk);
            for (int act16 = 0; act16 < 2; act16++)
                for (int b16 = 0; b16 < 2; b16++) coopmat_cases(ctx, name, act16, b16, &seed);
            /* A driver may run other subgroup sizes than it reports: fewer subgroups
             * than tiles (the shader makes two passes over K) and more (some only
             * help staging) must give the same results. Set past the checks. */
            uint32_t workgroups[2] = {small.workgroup / 2, small.workgroup * 2};
            for (int w = 0; w < 2; w++) {
                if (workgroups[w] > info->max_workgroup_invocations) continue;
                ctx->tuning.coopmat.workgroup = workgroups[w];
                snprintf(name, sizeof name, "%s-%ux%u-bk%u, %u invocations", families[f].name, small.bm, small.bn,
                         small.bk, workgroups[w]);
                coopmat_cases(ctx, name, false, true, &seed);
            }
        } else {
            fprintf(stderr, "%s: small tiles do not fit %s\n", families[f].name, info->name);
            harness_failures++;
        }
        if (families[f].variant == VKF_VARIANT_MATMUL_COOPMAT) coopmat_fast_form_cases(ctx, info, fm, fn, bk, &seed);
        CHECK_OK(vkf_tune_force_matmul(ctx, families[f].name));
        const vkf_matmul_tiles *t = &ctx->tuning.coopmat;
        fprintf(stderr, "%s tiles: workgroup %u, %ux%u, %ux%u per subgroup, bk %u\n", families[f].name, t->workgroup,
                t->bm, t->bn, t->tm, t->tn, t->bk);
        snprintf(name, sizeof name, "%s-built-in", families[f].name);
        coopmat_cases(ctx, name, true, true, &seed);
        /* tiles that do not fit are refused with the reason */
        vkf_matmul_tiles bad = *t;
        bad.workgroup += 1;
        CHECK_FAIL(vkf_tuning_set_matmul(ctx, families[f].variant, &bad), VKF_ERROR_INVALID_ARGUMENT, "workgroup");
        bad = *t;
        bad.tm += 1;
        CHECK_STATUS(vkf_tuning_set_matmul(ctx, families[f].variant, &bad), VKF_ERROR_INVALID_ARGUMENT);
    }
    printf("coopmat: worst error, C F32: %.3g abs (%.2f of the bound); C F16: %.3g abs (%.2f of the bound)\n",
           cm_worst_abs[0], cm_worst_ratio[0], cm_worst_abs[1], cm_worst_ratio[1]);
    vkf_tuning_choose(ctx);
}

/* The switch: a context with options.coopmat = 0 has no coopmat on any device;
 * with the default, a vetted device with an f16 -> f32 shape and this build's
 * shaders has it. */
static void test_coopmat_switch(const vkf_device_info *info)
{
    vkf_coopmat_shape shape;
    const char *env = getenv("VKFORMER_COOPMAT");
    bool expect = vkf_build_has_coopmat() && !(env && strcmp(env, "0") == 0) && vkf_coopmat_choose_shape(info, &shape) &&
                  info->float16 && info->storage_16bit && info->vulkan_memory_model && info->api_version >= (1u << 22 | 2u << 12) &&
                  (info->vendor_id == 0x10de || info->vendor_id == 0x1002 || info->vendor_id == 0x8086 ||
                   info->vendor_id == 0x10005);
    CHECK(info->coopmat_in_use == expect);
    vkf_context_options o;
    vkf_context_options_init(&o);
    o.coopmat = 0;
    vkf_context *off = harness_context_with(&o);
    vkf_device_info off_info;
    vkf_context_device_info(off, &off_info);
    CHECK(!off_info.coopmat_in_use && !off_info.coopmat2_in_use);
    const vkf_matmul_tiles any = {.workgroup = 4 * info->subgroup_size, .bm = 32, .bn = 32, .bk = 32, .tm = 16, .tn = 16};
    CHECK_FAIL(vkf_tuning_set_matmul(off, VKF_VARIANT_MATMUL_COOPMAT, &any), VKF_ERROR_UNSUPPORTED, "cooperative");
    CHECK_FAIL(vkf_tune_force_matmul(off, "coopmat2"), VKF_ERROR_UNSUPPORTED, "cooperative");
    CHECK(strncmp(vkf_matmul_kernel_family(off, 256, 256, 256, 1, true, true), "coopmat", 7) != 0);
    printf("coopmat switch: default %s on %s, off with options.coopmat = 0\n", info->coopmat_in_use ? "on" : "off",
           info->name);
    harness_close(off);
}

/* A tune file with a coopmat choice ("matmul_coopmat") stays valid everywhere: a
 * context with coopmat runs F16 matmuls on the file's coopmat kernel; one with
 * coopmat off (or a device without it) still takes the file's scalar kernel and
 * ignores the coopmat entry, without failing. */
static void test_coopmat_tune_file(const vkf_device_info *info)
{
    char dir[] = "/tmp/vkf_test_ops_XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp failed: coopmat tune-file test not run\n");
        harness_failures++;
        return;
    }
    vkf_context_options o;
    vkf_context_options_init(&o);
    o.cache_dir = dir, o.pipeline_cache = 0, o.tune = 1;
    vkf_context *on = NULL;
    /* the file: the scalar direct kernel, and coopmat tiles for this device (or
     * made-up KHR ones where it has none) */
    char path[1024];
    {
        vkf_context *probe = harness_context_with(&o);
        CHECK_OK(vkf_tune_file_path(probe, path, sizeof path));
        vkf_matmul_tiles t = {.workgroup = 2 * info->subgroup_size, .bm = 8, .bn = 16, .bk = 8, .tm = 8, .tn = 8};
        const char *kernel = "matmul_coopmat";
        if (probe->coopmat) {
            vkf_variant_id v = probe->coopmat2 ? VKF_VARIANT_MATMUL_COOPMAT2 : VKF_VARIANT_MATMUL_COOPMAT;
            uint32_t fm = probe->coopmat_shape.m, fn = probe->coopmat_shape.n, fk = probe->coopmat_shape.k;
            if (probe->coopmat2) /* the small tiles of test_coopmat: the driver's cache has the pipeline */
                fm = info->coopmat2_granularity[0], fn = 2 * info->coopmat2_granularity[1], fk = info->coopmat2_granularity[2];
            uint32_t bk = fk;
            while (bk % 8) bk += fk;
            CHECK(vkf_matmul_coopmat_tiles(probe, v, 1, 2, fm, fn, bk, &t));
            kernel = vkf_variant(v)->name;
        }
        json_t *root = json_pack("{s:s, s:i, s:{s:I, s:I, s:I, s:s}, s:{s:s, s:i, s:i, s:i, s:i, s:i, s:i}, "
                                 "s:{s:s, s:I, s:I, s:I, s:I, s:I, s:I}}",
                                 "format", "vkformer-tune", "version", 1, "device", "vendor_id",
                                 (json_int_t)info->vendor_id, "device_id", (json_int_t)info->device_id,
                                 "driver_version", (json_int_t)info->driver_version, "name", info->name, "matmul",
                                 "kernel", "matmul_direct", "workgroup", 64, "bm", 64, "bn", 64, "bk", 1, "tm", 8, "tn", 8,
                                 "matmul_coopmat", "kernel", kernel, "workgroup", (json_int_t)t.workgroup, "bm",
                                 (json_int_t)t.bm, "bn", (json_int_t)t.bn, "bk", (json_int_t)t.bk, "tm",
                                 (json_int_t)t.tm, "tn", (json_int_t)t.tn);
        CHECK(root && json_dump_file(root, path, 0) == 0);
        json_decref(root);
        harness_close(probe);
    }
    /* coopmat on (where the device has it) */
    on = harness_context_with(&o);
    CHECK(vkf_tune_from_file(on));
    CHECK(strcmp(vkf_matmul_kernel_family(on, 256, 256, 256, 1, false, false), "direct") == 0);
    if (on->coopmat) {
        const char *want = on->coopmat2 ? "coopmat2" : "coopmat";
        CHECK(strcmp(vkf_matmul_kernel_family(on, 256, 256, 256, 1, true, true), want) == 0);
        CHECK(strcmp(vkf_matmul_kernel_family(on, 256, 256, 256, 1, false, true), want) == 0);
        uint64_t seed = 9900;
        cm_case c = {.m = 17, .n = 33, .k = 40, .bias = true, .act = VKF_ACTIVATION_RELU, .alpha = 1.0f};
        run_coopmat(on, "coopmat from a tune file", &c, true, true, seed, "coopmat");
    } else {
        CHECK(strcmp(vkf_matmul_kernel_family(on, 256, 256, 256, 1, true, true), "direct") == 0);
    }
    harness_close(on);
    /* coopmat off: the file still applies, its coopmat entry does not */
    o.coopmat = 0;
    vkf_context *off = harness_context_with(&o);
    CHECK(vkf_tune_from_file(off));
    CHECK(strcmp(vkf_matmul_kernel_family(off, 256, 256, 256, 1, true, true), "direct") == 0);
    harness_close(off);
    remove(path);
    rmdir(dir);
}

/* The built-in tiles for made-up devices of each kind: within the device's
 * limits, consistent, and (where they fit this device) correct when run here. */
static void test_tuning_choices(vkf_context *ctx)
{
    struct {
        const char *name;
        vkf_device_type type;
        uint32_t vendor, subgroup, shared, max_wg;
        bool shuffle;
        vkf_variant_id want;
    } devices[] = {
        {"NVIDIA H100-like", VKF_DEVICE_DISCRETE_GPU, 0x10de, 32, 49152, 1024, true, VKF_VARIANT_MATMUL_SUBGROUP},
        {"AMD RDNA-like", VKF_DEVICE_DISCRETE_GPU, 0x1002, 64, 65536, 1024, true, VKF_VARIANT_MATMUL_TILED},
        {"Intel Xe-like", VKF_DEVICE_INTEGRATED_GPU, 0x8086, 16, 65536, 1024, true, VKF_VARIANT_MATMUL_TILED},
        {"small GPU", VKF_DEVICE_INTEGRATED_GPU, 0x13b5, 16, 16384, 128, false, VKF_VARIANT_MATMUL_TILED},
        {"minimal limits", VKF_DEVICE_OTHER, 0x1234, 4, 16384, 128, false, VKF_VARIANT_MATMUL_TILED},
        {"NVIDIA with little shared memory", VKF_DEVICE_DISCRETE_GPU, 0x10de, 32, 16384, 256, true, VKF_VARIANT_MATMUL_SUBGROUP},
        {"lavapipe-like", VKF_DEVICE_CPU, 0x10005, 8, 32768, 1024, true, VKF_VARIANT_MATMUL_SUBGROUP},
        {"lavapipe-like, AVX-512 lanes", VKF_DEVICE_CPU, 0x10005, 16, 32768, 1024, true, VKF_VARIANT_MATMUL_SUBGROUP},
        {"Mesa CPU driver without shuffles", VKF_DEVICE_CPU, 0x10005, 8, 32768, 1024, false, VKF_VARIANT_MATMUL_DIRECT},
        {"Mesa CPU driver with 32 invocations", VKF_DEVICE_CPU, 0x10005, 8, 32768, 32, true, VKF_VARIANT_MATMUL_DIRECT},
        {"SwiftShader-like", VKF_DEVICE_CPU, 0x1ae0, 4, 16384, 256, true, VKF_VARIANT_MATMUL_DIRECT},
    };
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        vkf_device_info d = {0};
        d.type = devices[i].type, d.vendor_id = devices[i].vendor, d.subgroup_size = devices[i].subgroup;
        d.max_shared_memory = devices[i].shared, d.max_workgroup_invocations = devices[i].max_wg;
        d.max_workgroup_size[0] = d.max_workgroup_size[1] = devices[i].max_wg, d.max_workgroup_size[2] = 64;
        d.subgroup_shuffle = devices[i].shuffle;
        vkf_tuning t;
        vkf_tuning_for_device(&d, &t);
        const vkf_matmul_tiles *m = &t.matmul;
        bool tiled = t.matmul_variant == VKF_VARIANT_MATMUL_TILED;
        fprintf(stderr, "tiles for %s: %s workgroup %u, %ux%u, bk %u, %ux%u per invocation\n", devices[i].name,
                vkf_variant(t.matmul_variant)->name, m->workgroup, m->bm, m->bn, m->bk, m->tm, m->tn);
        CHECK(t.matmul_variant == devices[i].want);
        CHECK(m->workgroup >= 1 && m->workgroup <= devices[i].max_wg);
        CHECK(t.matmul_min_macs == (t.matmul_variant == VKF_VARIANT_MATMUL_SUBGROUP ? VKF_SUBGROUP_MIN_MACS : 0));
        if (t.matmul_variant == VKF_VARIANT_MATMUL_SUBGROUP)
            CHECK(m->bk == devices[i].subgroup && m->tm % m->bk == 0 && m->bm % m->tm == 0 &&
                  m->bn % (m->bk * m->tn) == 0 && (m->bm / m->tm) * (m->bn / (m->bk * m->tn)) * m->bk == m->workgroup);
        else
            CHECK(m->bm % m->tm == 0 && m->bn % m->tn == 0 && (m->bm / m->tm) * (m->bn / m->tn) == m->workgroup);
        CHECK(!tiled || (m->bm + m->bn) * m->bk * 4 <= devices[i].shared);
        CHECK(t.row_workgroup >= 1 && t.row_workgroup <= devices[i].max_wg);
        CHECK(t.elementwise_workgroup >= 1 && t.elementwise_workgroup <= devices[i].max_wg);
        /* run the choice on this device where it fits */
        char name[96];
        snprintf(name, sizeof name, "built-in tiles of %s", devices[i].name);
        if (vkf_tuning_set_matmul(ctx, t.matmul_variant, m) == VKF_OK) test_matmul_family(ctx, name);
        else fprintf(stderr, "  (past this device's limits: %s)\n", vkf_last_error());
    }
}

/* The built-in per-driver table (tuning.c): lavapipe's Mesa release and LLVM
 * read from driverInfo, each measured release its entry, others the device rule;
 * the choice and its source as vkf_matmul_choice reports them. */
static void test_driver_table(vkf_context *ctx)
{
    vkf_device_info d = {0};
    snprintf(d.driver_info, sizeof d.driver_info, "Mesa 26.2.6-1 (LLVM 22.1.8)");
    CHECK(vkf_mesa_release(&d) == 2602 && vkf_llvm_major(&d) == 22);
    snprintf(d.driver_info, sizeof d.driver_info, "Mesa 25.0.7-2~bpo12+1 (LLVM 15.0.6)");
    CHECK(vkf_mesa_release(&d) == 2500 && vkf_llvm_major(&d) == 15);
    snprintf(d.driver_info, sizeof d.driver_info, "Mesa 22.3.6");
    snprintf(d.name, sizeof d.name, "llvmpipe (LLVM 15.0.6, 256 bits)");
    CHECK(vkf_mesa_release(&d) == 2203 && vkf_llvm_major(&d) == 15);
    snprintf(d.driver_info, sizeof d.driver_info, "NVIDIA 555.42");
    snprintf(d.name, sizeof d.name, "NVIDIA H100");
    CHECK(vkf_mesa_release(&d) == 0 && vkf_llvm_major(&d) == 0);
    struct {
        const char *driver_info;
        vkf_variant_id want;
        bool table;
    } drivers[] = {
        {"Mesa 26.2.6-1 (LLVM 22.1.8)", VKF_VARIANT_MATMUL_BROADCAST, true},
        {"Mesa 22.3.6 (LLVM 15.0.6)", VKF_VARIANT_MATMUL_SUBGROUP, true},
        {"Mesa 25.0.7-2~bpo12+1 (LLVM 15.0.6)", VKF_VARIANT_MATMUL_SUBGROUP, true},
        {"Mesa 26.0.1 (LLVM 20.1.0)", VKF_VARIANT_MATMUL_BROADCAST, true},
        {"Mesa 25.0.7-2+deb13u1 (LLVM 19.1.7)", VKF_VARIANT_MATMUL_SUBGROUP, true},
        {"Mesa 24.2.8-1 (LLVM 19.1.4)", VKF_VARIANT_MATMUL_SUBGROUP, false}, /* not measured */
        {"Mesa 21.0.1 (LLVM 11.0.1)", VKF_VARIANT_MATMUL_SUBGROUP, false}, /* not measured: the device rule */
        {"", VKF_VARIANT_MATMUL_SUBGROUP, false},
    };
    for (size_t i = 0; i < sizeof drivers / sizeof drivers[0]; i++) {
        vkf_device_info l = {0};
        l.type = VKF_DEVICE_CPU, l.vendor_id = 0x10005, l.subgroup_size = 8, l.subgroup_shuffle = true;
        l.max_shared_memory = 32768, l.max_workgroup_invocations = 1024;
        l.max_workgroup_size[0] = l.max_workgroup_size[1] = l.max_workgroup_size[2] = 1024;
        snprintf(l.driver_info, sizeof l.driver_info, "%s", drivers[i].driver_info);
        vkf_tuning t;
        vkf_tuning_for_device(&l, &t);
        fprintf(stderr, "lavapipe \"%s\": %s, table entry %s\n", drivers[i].driver_info,
                vkf_variant(t.matmul_variant)->name, t.table_entry ? t.table_entry : "none");
        CHECK(t.matmul_variant == drivers[i].want);
        CHECK((t.table_entry != NULL) == drivers[i].table);
        CHECK(t.matmul_source == (drivers[i].table ? VKF_SOURCE_TABLE : VKF_SOURCE_DEFAULT));
        CHECK(t.matmul_min_macs == VKF_SUBGROUP_MIN_MACS);
        for (int r = 0; r < 3; r++) CHECK(t.subgroup_skinny[r].workgroup && t.subgroup_skinny[r].bm == 8u << r);
        /* every lavapipe: fused attention in the lanes form, one subgroup */
        CHECK(t.attention_lanes && t.attention_rows_workgroup == 8 && t.attention_rows_bk == 8);
        CHECK(t.attention_source == (drivers[i].table ? VKF_SOURCE_TABLE : VKF_SOURCE_DEFAULT));
    }
    /* this context's own choice, reported with its source */
    vkf_tuning_choose(ctx);
    vkf_kernel_choice c;
    CHECK_OK(vkf_matmul_choice(ctx, 1024, 1024, 1024, 1, false, false, &c));
    CHECK(strcmp(c.kernel, vkf_matmul_kernel_family(ctx, 1024, 1024, 1024, 1, false, false)) == 0);
    CHECK(strcmp(c.source, ctx->tuning.table_entry ? "table" : "default") == 0);
    CHECK(c.tiles[0] == ctx->tuning.matmul.workgroup && c.tiles[1] == ctx->tuning.matmul.bm);
    /* one row on a CPU driver's lanes-sharing kernels: the direct kernel; GPUs keep their family */
    CHECK_OK(vkf_matmul_choice(ctx, 1, 64, 64, 1, false, false, &c));
    bool lanes = ctx->tuning.matmul_variant == VKF_VARIANT_MATMUL_SUBGROUP ||
                 ctx->tuning.matmul_variant == VKF_VARIANT_MATMUL_BROADCAST;
    CHECK(strcmp(c.kernel, lanes ? "direct" : vkf_matmul_kernel_family(ctx, 1, 64, 64, 1, false, false)) == 0);
    CHECK_OK(vkf_tune_force_matmul(ctx, "direct"));
    CHECK_OK(vkf_matmul_choice(ctx, 1024, 1024, 1024, 1, false, false, &c));
    CHECK(strcmp(c.kernel, "direct") == 0 && strcmp(c.source, "forced") == 0);
    CHECK_OK(vkf_attention_fused_choice(ctx, 64, &c));
    CHECK(strncmp(c.kernel, "fused", 5) == 0 && c.tiles[0] >= 1 && c.tiles[1] >= 1);
    CHECK(strcmp(c.kernel, "fused-lanes") == 0 || !ctx->tuning.attention_lanes);
    CHECK_FAIL(vkf_attention_fused_choice(ctx, 0, &c), VKF_ERROR_INVALID_ARGUMENT, "head_dim");
    CHECK_OK(vkf_decode_form_choice(ctx, &c));
    CHECK(strcmp(c.kernel, ctx->tuning.decode_rows ? "rows" : "split") == 0);
    vkf_tuning_choose(ctx);
}

/* ------------------------------------------------------------------ int8 weights */

/* B as int8 (VKF_DTYPE_I8) with one F32 scale per output channel, on every kernel
 * family: against ref_matmul_i8 on the same quantized weights. A (and for F16
 * activations the residual) is rounded to f16 on the host, so the coopmat kernels'
 * staging is exact too: the products a·q are exact in fp32 and the kernels differ
 * from the double reference only by fp32 accumulation and the one multiply by the
 * scale: abs 1e-5 + 3e-7 k, rel 2e-5 (weights up to 1.5 in magnitude); C stored as
 * F16 adds its rounding: abs 1e-3, rel 1e-3. */
typedef struct i8_case {
    uint32_t m, n, k;
    uint32_t b0;                        /* batch (0: 1); B batched too */
    bool b_kn, bias, residual;
    vkf_activation act;
    float alpha;
    uint32_t pad;                       /* extra elements per row and at the start of A, B, C */
} i8_case;

static double i8_worst_ratio[2];   /* [C F16] */

static void run_matmul_i8(vkf_context *ctx, const char *family, const i8_case *c, bool act16, uint64_t seed)
{
    uint32_t items = c->b0 ? c->b0 : 1;
    size_t off = c->pad;
    size_t lda = c->k + c->pad, ldb = (c->b_kn ? c->n : c->k) + c->pad, ldc = c->n + c->pad;
    size_t b_rows = c->b_kn ? c->k : c->n;
    size_t na = c->m * lda, nb = b_rows * ldb, nc = c->m * ldc;  /* per batch item */
    size_t ta_n = off + na * items, tb_n = off + nb * items, tc_n = off + nc * items;
    float *a = harness_random(ta_n, seed), *bias = harness_random(c->n, seed + 2);
    float *r = harness_random(tc_n, seed + 3), *scale = harness_random(c->n, seed + 5);
    float *noise = harness_random(tb_n, seed + 1);
    int8_t *q = harness_alloc(tb_n);
    for (size_t i = 0; i < tb_n; i++) q[i] = (int8_t)lrintf(noise[i] * 127.0f);
    for (uint32_t j = 0; j < c->n; j++) scale[j] = (1.0f + 0.5f * scale[j]) / 127.0f;
    round_f16(a, ta_n), round_f16(r, tc_n);
    vkf_tensor *ta = act16 ? harness_f16_tensor(ctx, a, ta_n) : harness_tensor(ctx, a, 1, ta_n);
    vkf_tensor *tr = act16 ? harness_f16_tensor(ctx, r, tc_n) : harness_tensor(ctx, r, 1, tc_n);
    vkf_tensor *tbias = harness_tensor(ctx, bias, 1, c->n), *tscale = harness_tensor(ctx, scale, 1, c->n);
    vkf_tensor *tb = NULL, *tc = NULL;
    uint64_t shape_b = tb_n, shape_c = tc_n;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I8, 1, &shape_b, &tb));
    CHECK(vkf_tensor_bytes(tb) == tb_n);
    CHECK_OK(vkf_tensor_upload(tb, q, tb_n));
    CHECK_OK(vkf_tensor_create(ctx, act16 ? VKF_DTYPE_F16 : VKF_DTYPE_F32, 1, &shape_c, &tc));
    /* C starts as 1234 (exact in F16 too): untouched padding must stay so */
    if (act16) {
        uint16_t *fill = harness_alloc(tc_n * 2);
        for (size_t i = 0; i < tc_n; i++) fill[i] = ref_f32_to_f16(1234.0f);
        CHECK_OK(vkf_tensor_upload(tc, fill, tc_n * 2));
        free(fill);
    } else {
        float *fill = harness_alloc(tc_n * 4);
        for (size_t i = 0; i < tc_n; i++) fill[i] = 1234.0f;
        CHECK_OK(vkf_tensor_upload(tc, fill, tc_n * 4));
        free(fill);
    }
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = c->m, d.n = c->n, d.k = c->k;
    d.batch[0] = items;
    d.a = (vkf_matrix_view){.tensor = ta, .offset = off, .row_stride = lda, .batch_stride = {na, 0}};
    d.b = (vkf_matrix_view){.tensor = tb, .offset = off, .row_stride = ldb, .batch_stride = {nb, 0}};
    d.b_is_k_by_n = c->b_kn;
    d.c = (vkf_matrix_view){.tensor = tc, .offset = off, .row_stride = ldc, .batch_stride = {nc, 0}};
    if (c->residual) d.residual = (vkf_matrix_view){.tensor = tr, .offset = off, .row_stride = ldc, .batch_stride = {nc, 0}};
    d.bias = c->bias ? tbias : NULL;
    d.b_scale = tscale;
    d.alpha = c->alpha;
    d.activation = c->act;
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = act16 ? harness_download_f16(tc, tc_n) : harness_download(tc);
    float *want = harness_alloc(tc_n * 4);
    for (size_t i = 0; i < tc_n; i++) want[i] = 1234.0f;
    for (uint32_t z = 0; z < items; z++)
        ref_matmul_i8(want + off + z * nc, ldc, a + off + z * na, lda, q + off + z * nb, ldb, c->b_kn, scale,
                      c->bias ? bias : NULL, c->residual ? r + off + z * nc : NULL, ldc, c->m, c->n, c->k, c->alpha,
                      (int)c->act);
    double atol = act16 ? 1e-3 : 1e-5 + 3e-7 * c->k, rtol = act16 ? 1e-3 : 2e-5;
    for (size_t i = 0; i < tc_n; i++) {
        double ratio = fabs((double)got[i] - want[i]) / (atol + rtol * fabs(want[i]));
        if (!(ratio <= i8_worst_ratio[act16])) i8_worst_ratio[act16] = ratio;
    }
    char what[200];
    snprintf(what, sizeof what, "%s int8 B%s, A %s, m=%u n=%u k=%u batch %u%s%s act=%d alpha=%g pad=%u", family,
             c->b_kn ? " (k,n)" : "", act16 ? "F16" : "F32", c->m, c->n, c->k, items, c->bias ? " bias" : "",
             c->residual ? " residual" : "", (int)c->act, c->alpha, c->pad);
    harness_compare(what, got, want, tc_n, atol, rtol);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tc), vkf_tensor_destroy(tr);
    vkf_tensor_destroy(tbias), vkf_tensor_destroy(tscale);
    free(a), free(bias), free(r), free(scale), free(noise), free(q), free(got), free(want);
}

/* Odd sizes (1, 7, 17, 1000, 1023) on each axis, both B layouts, the epilogue,
 * unaligned views and a batch, on the kernel family set on ctx. */
static void int8_cases(vkf_context *ctx, const char *family, bool act16, uint64_t *seed)
{
    static const i8_case shapes[] = {
        {.m = 1, .n = 17, .k = 7, .alpha = 1.0f},
        {.m = 7, .n = 1000, .k = 17, .bias = true, .act = VKF_ACTIVATION_RELU, .alpha = 1.0f},
        {.m = 17, .n = 7, .k = 1023, .residual = true, .alpha = 0.5f},
        {.m = 1023, .n = 17, .k = 1000, .bias = true, .residual = true, .act = VKF_ACTIVATION_GELU, .alpha = 0.25f},
        {.m = 3, .n = 1023, .k = 64, .bias = true, .alpha = 1.0f},       /* decode-like: few rows */
        {.m = 64, .n = 64, .k = 64, .alpha = 1.0f},                       /* whole tiles, aligned */
        {.m = 17, .n = 33, .k = 40, .pad = 1, .bias = true, .alpha = 1.0f},   /* unaligned bytes */
        {.m = 33, .n = 17, .k = 100, .pad = 4, .residual = true, .alpha = 1.0f}, /* aligned with padding */
        {.m = 17, .n = 33, .k = 40, .b0 = 3, .bias = true, .act = VKF_ACTIVATION_GELU, .alpha = 1.0f}, /* batched */
        {.m = 5, .n = 100, .k = 64, .bias = true, .act = VKF_ACTIVATION_SILU, .alpha = 1.0f},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int kn = 0; kn < 2; kn++) {
            i8_case c = shapes[i];
            c.b_kn = kn;
            run_matmul_i8(ctx, family, &c, act16, *seed += 8);
        }
}

/* The int8 variants of both split-K passes (split set on ctx): odd sizes, C F16,
 * the whole epilogue, a batch, aligned rows with padding. */
static void split_k_int8_cases(vkf_context *ctx, const char *family, uint64_t *seed)
{
    static const i8_case shapes[] = {
        {.m = 17, .n = 33, .k = 100, .b0 = 2, .bias = true, .residual = true, .act = VKF_ACTIVATION_GELU, .alpha = 0.5f},
        {.m = 40, .n = 48, .k = 72, .pad = 8, .bias = true, .alpha = 1.0f},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_matmul_i8(ctx, family, &shapes[i], true, *seed += 8);
}

/* matmul_gemv's int8 variants (gemv set on ctx): few rows, odd n, the epilogue, a batch. */
static void gemv_int8_cases(vkf_context *ctx, const vkf_device_info *info, uint64_t *seed)
{
    static const i8_case shapes[] = {
        {.m = 3, .n = 1023, .k = 64, .bias = true, .alpha = 1.0f},
        {.m = 1, .n = 17, .k = 100, .b0 = 3, .residual = true, .act = VKF_ACTIVATION_GELU, .alpha = 0.5f},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int act16 = 0; act16 < (info->storage_16bit ? 2 : 1); act16++)
            run_matmul_i8(ctx, "gemv", &shapes[i], act16, *seed += 8);
}

/* vkf_quantize_int8_rows: scale max|w| / 127, round to nearest, zero rows. */
static void test_quantize_int8(void)
{
    const float w[3][5] = {
        {0.5f, -1.27f, 0.0051f, 0.0049f, 1.0f},     /* scale 0.01: 50, -127, 1 (0.51 rounds up), 0, 100 */
        {0, 0, 0, 0, 0},                            /* all zero: scale 0, q 0 */
        {-2.54f, 0.03f, -0.01f, 2.54f, 1.27f},      /* scale 0.02: -127, 2 (1.5 away from 0), -1 (0.5), 127, 64 (63.5) */
    };
    int8_t q[15];
    float s[3];
    CHECK_OK(vkf_quantize_int8_rows(&w[0][0], 3, 5, q, s));
    CHECK(fabsf(s[0] - 0.01f) < 1e-8f && s[1] == 0.0f && fabsf(s[2] - 0.02f) < 1e-8f);
    static const int8_t want[15] = {50, -127, 1, 0, 100, 0, 0, 0, 0, 0, -127, 2, -1, 127, 64};
    for (int i = 0; i < 15; i++)
        if (q[i] != want[i]) {
            fprintf(stderr, "quantize: q[%d] = %d, want %d\n", i, q[i], want[i]);
            harness_failures++;
        }
    /* random rows: every q in -127..127, a row's max at +-127, |w - s q| <= s / 2 */
    float *r = harness_random(64 * 100, 777);
    int8_t *rq = harness_alloc(64 * 100);
    float rs[64];
    CHECK_OK(vkf_quantize_int8_rows(r, 64, 100, rq, rs));
    double worst = 0;
    for (int i = 0; i < 64; i++) {
        int amax = 0;
        for (int j = 0; j < 100; j++) {
            int v = rq[i * 100 + j];
            amax = abs(v) > amax ? abs(v) : amax;
            double e = fabs((double)r[i * 100 + j] - (double)rs[i] * v) / rs[i];
            worst = e > worst ? e : worst;
        }
        CHECK(amax == 127);
    }
    CHECK(worst <= 0.5 + 1e-5);
    float bad[2] = {1.0f, NAN};
    CHECK_FAIL(vkf_quantize_int8_rows(bad, 1, 2, rq, rs), VKF_ERROR_INVALID_ARGUMENT, "finite");
    CHECK_FAIL(vkf_quantize_int8_rows(r, 0, 2, rq, rs), VKF_ERROR_INVALID_ARGUMENT, "positive");
    CHECK_FAIL(vkf_quantize_int8_rows(NULL, 1, 2, rq, rs), VKF_ERROR_INVALID_ARGUMENT, "NULL");
    free(r), free(rq);
}

/* What an int8 matmul refuses, each with a one-line reason. */
static void test_int8_errors(vkf_context *ctx)
{
    uint64_t n8 = 8 * 8, n7 = 7;
    float x[64] = {0};
    vkf_tensor *a = harness_tensor(ctx, x, 8, 8), *c = harness_tensor(ctx, x, 8, 8), *q = NULL, *q2 = NULL;
    vkf_tensor *s8 = harness_tensor(ctx, x, 1, 8), *s7 = NULL, *s16 = NULL, *si = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I8, 1, &n8, &q));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I8, 1, &n8, &q2));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &n7, &s7));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &n7, &si));
    uint64_t eight = 8;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &eight, &s16));
    /* odd byte counts: the tensor holds exactly its bytes */
    uint64_t odd = 7;
    vkf_tensor *t7 = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I8, 1, &odd, &t7));
    CHECK(vkf_tensor_bytes(t7) == 7);
    int8_t seven[7] = {1, -2, 3, -4, 5, -6, 7}, back[7] = {0};
    CHECK_OK(vkf_tensor_upload(t7, seven, 7));
    CHECK_OK(vkf_tensor_download(t7, back, 7));
    CHECK(memcmp(seven, back, 7) == 0);
    CHECK_FAIL(vkf_tensor_upload(t7, seven, 8), VKF_ERROR_INVALID_ARGUMENT, "bytes");
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = d.n = d.k = 8;
    d.a.tensor = a, d.b.tensor = q, d.c.tensor = c;
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "b_scale is NULL");
    d.b_scale = s7;
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "b_scale");
    d.b_scale = si;
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "F32");
    d.b_scale = s16;
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "F32");
    d.n = 7, d.b_scale = s8;   /* 8 scales for 7 channels */
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "output channels");
    d.n = 8;
    d.a.tensor = q2;
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "only B");
    d.a.tensor = a, d.c.tensor = q2;
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "only B");
    d.c.tensor = c, d.residual.tensor = q2;
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "only B");
    d.residual.tensor = NULL;
    d.b.tensor = a;            /* F32 B with scales */
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "not I8");
    d.b.tensor = q, d.c.tensor = s8, d.m = 1;  /* C aliasing the scales */
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "alias");
    d.c.tensor = c, d.m = 8;
    d.b.offset = 1;            /* past the tensor's end */
    CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "reaches past");
    d.b.offset = 0;
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK(vkf_cmd_op_count(cmd) == 1);
    vkf_cmd_destroy(cmd);
    /* other ops do not take I8 */
    vkf_softmax_desc sd;
    vkf_softmax_desc_init(&sd);
    sd.rows = 1, sd.cols = 7, sd.x = sd.y = t7;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_FAIL(vkf_cmd_softmax(cmd, &sd), VKF_ERROR_INVALID_ARGUMENT, "F32");
    vkf_cmd_destroy(cmd);
    vkf_tensor *all[] = {a, c, q, q2, s8, s7, s16, si, t7};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vkf_tensor_destroy(all[i]);
}

static void test_int8(vkf_context *ctx, const vkf_device_info *info)
{
    test_quantize_int8();
    test_int8_errors(ctx);
    scalar_family families[4];
    size_t count = scalar_families(info, families);
    uint64_t seed = 15000;
    for (size_t f = 0; f < count; f++) {
        vkf_status st = vkf_tuning_set_matmul(ctx, families[f].variant, &families[f].tiles);
        if (st == VKF_ERROR_UNSUPPORTED) {
            fprintf(stderr, "int8: skipping %s on this device: %s\n", families[f].name, vkf_last_error());
            continue;
        }
        CHECK_OK(st);
        ctx->tuning.matmul_min_macs = 0;
        for (int act16 = 0; act16 < (info->storage_16bit ? 2 : 1); act16++) int8_cases(ctx, families[f].name, act16, &seed);
    }
    /* the device's own choice (lavapipe: subgroup, falling back to direct and its
     * skinny tiles for few rows) */
    vkf_tuning_choose(ctx);
    int8_cases(ctx, "built-in", false, &seed);
    if (info->coopmat_in_use) {
        const struct {
            const char *name;
            vkf_variant_id variant;
        } cm[] = {{"coopmat", VKF_VARIANT_MATMUL_COOPMAT}, {"coopmat2", VKF_VARIANT_MATMUL_COOPMAT2}};
        for (int f = 0; f < 2; f++) {
            if (cm[f].variant == VKF_VARIANT_MATMUL_COOPMAT2 && !info->coopmat2_in_use) continue;
            uint32_t fm = ctx->coopmat_shape.m, fn = ctx->coopmat_shape.n, fk = ctx->coopmat_shape.k;
            if (cm[f].variant == VKF_VARIANT_MATMUL_COOPMAT2)
                fm = info->coopmat2_granularity[0], fn = 2 * info->coopmat2_granularity[1], fk = info->coopmat2_granularity[2];
            uint32_t bk = fk;
            while (bk % 8) bk += fk;
            vkf_matmul_tiles small;
            if (!vkf_matmul_coopmat_tiles(ctx, cm[f].variant, 1, 2, fm, fn, bk, &small)) {
                fprintf(stderr, "int8 %s: small tiles do not fit %s\n", cm[f].name, info->name);
                harness_failures++;
                continue;
            }
            CHECK_OK(vkf_tuning_set_matmul(ctx, cm[f].variant, &small));
            CHECK(strncmp(vkf_matmul_kernel_family(ctx, 17, 33, 40, 1, false, false), "coopmat", 7) == 0);
            for (int act16 = 0; act16 < 2; act16++) int8_cases(ctx, cm[f].name, act16, &seed);
        }
    } else {
        printf("int8: coopmat not available on %s, coopmat int8 cases not run\n", info->name);
    }
    printf("int8: worst error, C F32: %.2f of the bound; C F16: %.2f of the bound\n", i8_worst_ratio[0],
           i8_worst_ratio[1]);
    vkf_tuning_choose(ctx);
}

int main(void)
{
    vkf_context *ctx = harness_context();
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);

    /* Both matmul families with the tiles this device would get, plus other tiles. */
    vkf_matmul_tiles tiled = {.workgroup = 256, .bm = 64, .bn = 64, .bk = 16, .tm = 4, .tn = 4};
    vkf_matmul_tiles tiled_small = {.workgroup = 64, .bm = 32, .bn = 16, .bk = 8, .tm = 2, .tn = 4};
    vkf_matmul_tiles direct = {.workgroup = 64, .bm = 64, .bn = 32, .bk = 1, .tm = 8, .tn = 4};
    vkf_matmul_tiles direct_small = {.workgroup = 32, .bm = 16, .bn = 16, .bk = 1, .tm = 2, .tn = 4};
    /* the lavapipe built-in shape, and one row block of a subgroup with one column per lane */
    vkf_matmul_tiles subgroup = {0}, subgroup_small = {0}, skinny[3] = {{0}};
    bool has_subgroup = vkf_matmul_subgroup_tiles(&info, 64, 128, 32, 4, &subgroup) &&
                        vkf_matmul_subgroup_tiles(&info, 2 * info.subgroup_size, 2 * info.subgroup_size,
                                                  info.subgroup_size, 1, &subgroup_small);
    /* the decode steps' one-row-block tiles (tuning.c's subgroup_skinny), each where the
     * subgroup size divides its rows (32-wide subgroups, NVIDIA's: only the 32-row one) */
    bool skinny_ok[3];
    for (uint32_t i = 0; i < 3; i++)
        skinny_ok[i] = has_subgroup && vkf_matmul_subgroup_tiles(&info, 8u << i, 128, 8u << i, 4, &skinny[i]);
    /* matmul_broadcast: the Mesa 26 built-in shape, odd row counts, one row, and a row block */
    vkf_matmul_tiles broadcast = {0}, broadcast_odd = {0}, broadcast_row = {0}, broadcast_block = {0};
    bool has_broadcast = vkf_matmul_broadcast_tiles(&info, 64, 128, 32, 4, &broadcast) &&
                         vkf_matmul_broadcast_tiles(&info, 21, 3 * info.subgroup_size, 7, 1, &broadcast_odd) &&
                         vkf_matmul_broadcast_tiles(&info, 1, 2 * info.subgroup_size, 1, 2, &broadcast_row) &&
                         vkf_matmul_broadcast_tiles(&info, 16, 128, 16, 4, &broadcast_block);
    struct {
        const char *name;
        vkf_variant_id variant;
        vkf_matmul_tiles *tiles;
    } families[] = {
        {"tiled-64x64", VKF_VARIANT_MATMUL_TILED, &tiled},
        {"tiled-32x16", VKF_VARIANT_MATMUL_TILED, &tiled_small},
        {"direct-64x32", VKF_VARIANT_MATMUL_DIRECT, &direct},
        {"direct-16x16", VKF_VARIANT_MATMUL_DIRECT, &direct_small},
        {"subgroup-64x128", VKF_VARIANT_MATMUL_SUBGROUP, &subgroup},
        {"subgroup-small", VKF_VARIANT_MATMUL_SUBGROUP, &subgroup_small},
        {"subgroup-skinny-8", VKF_VARIANT_MATMUL_SUBGROUP, &skinny[0]},
        {"subgroup-skinny-16", VKF_VARIANT_MATMUL_SUBGROUP, &skinny[1]},
        {"subgroup-skinny-32", VKF_VARIANT_MATMUL_SUBGROUP, &skinny[2]},
        {"broadcast-64x128", VKF_VARIANT_MATMUL_BROADCAST, &broadcast},
        {"broadcast-odd", VKF_VARIANT_MATMUL_BROADCAST, &broadcast_odd},
        {"broadcast-row", VKF_VARIANT_MATMUL_BROADCAST, &broadcast_row},
        {"broadcast-block-16", VKF_VARIANT_MATMUL_BROADCAST, &broadcast_block},
    };
    if (!has_subgroup) fprintf(stderr, "no subgroup shuffles (or an odd subgroup size): matmul_subgroup not tested\n");
    if (!has_broadcast) fprintf(stderr, "subgroups too large for the tiles: matmul_broadcast not tested\n");
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        if (families[f].variant == VKF_VARIANT_MATMUL_SUBGROUP && !has_subgroup) continue;
        bool skinny_tiles = families[f].tiles >= &skinny[0] && families[f].tiles <= &skinny[2];
        if (skinny_tiles && !skinny_ok[families[f].tiles - skinny]) {
            fprintf(stderr, "%s: no such tiles for subgroups of %u lanes (rows not a multiple): not tested\n",
                    families[f].name, info.subgroup_size);
            continue;
        }
        if (families[f].variant == VKF_VARIANT_MATMUL_BROADCAST && !has_broadcast) continue;
        vkf_status st = vkf_tuning_set_matmul(ctx, families[f].variant, families[f].tiles);
        if (st == VKF_ERROR_UNSUPPORTED) {
            fprintf(stderr, "skipping %s on this device: %s\n", families[f].name, vkf_last_error());
            continue;
        }
        CHECK_OK(st);
        ctx->tuning.matmul_min_macs = 0; /* small shapes on this family too */
        fprintf(stderr, "matmul family %s\n", families[f].name);
        test_matmul_family(ctx, families[f].name);
    }
    /* the built-in rule: batched decode steps (8..63 rows) take the skinny tiles
     * where the device's kernel is matmul_subgroup, fewer rows the direct kernel */
    vkf_tuning_choose(ctx);
    if (ctx->tuning.matmul_variant == VKF_VARIANT_MATMUL_SUBGROUP) {
        CHECK(ctx->tuning.subgroup_skinny[1].workgroup && ctx->tuning.subgroup_skinny[1].bm == 16);
        CHECK(strcmp(vkf_matmul_kernel_family(ctx, 16, 1024, 512, 1, false, false), "subgroup") == 0);
        CHECK(strcmp(vkf_matmul_kernel_family(ctx, 40, 2048, 512, 1, false, false), "subgroup") == 0);
        CHECK(strcmp(vkf_matmul_kernel_family(ctx, 4, 2048, 512, 1, false, false), "direct") == 0);
        CHECK(strcmp(vkf_matmul_kernel_family(ctx, 16, 64, 64, 1, false, false), "direct") == 0);
    }
    test_coopmat(ctx, &info);
    test_gemv(ctx, &info);
    test_coopmat_switch(&info);
    test_coopmat_tune_file(&info);
    test_tuning_choices(ctx);
    test_driver_table(ctx);
    test_act16(ctx, &info);
    vkf_tuning_choose(ctx);
    test_f16_weights(ctx, &info);
    test_int8(ctx, &info);
    test_softmax(ctx);
    test_layernorm(ctx);
    test_embed(ctx);
    test_embed_i8(ctx, &info);
    harness_close(ctx);
    return harness_result("test_ops");
}

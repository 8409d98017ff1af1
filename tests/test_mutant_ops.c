/* GPU ops on inputs chosen to expose one-line bugs the other op tests let through
 * (issue 38, part 4; tools/mutants.py keeps the bugs as mutants).
 *
 * The row softmax (shaders/softmax.comp) on scores far past exp's float range
 * (|x| up to 400; exp overflows past 88.7): a softmax that skips the max
 * subtraction, even only when the max is positive, gives inf / inf = NaN there,
 * while test_ops's scores (|x| <= 8) hide it. Rows all positive, all negative,
 * mixed, one huge score among small ones, with a mask and a causal limit,
 * against ref_softmax (double precision, max subtracted).
 *
 * Fused attention (vkf_op_attention_fused: the device's own tiles, a rows-form and,
 * where the device has subgroup shuffles, a lanes-form tile set) on keys whose
 * scores grow along the sequence, so that the running max moves at every key tile
 * and the running sum must be rescaled each time; causal, with key lengths (one of
 * them cutting a tile), and both, against ref_attention. test_attention covers far
 * more, but takes ten minutes on lavapipe: this is the quick check of the
 * online-softmax and mask lines.
 *
 * Greedy's argmax (argmax.comp) on rows whose maximum is tied: the lowest id must
 * win, as torch.argmax and Hugging Face's greedy search pick it (random logits
 * never tie, so the decode tests cannot tell). */
#include "harness.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>

typedef enum { MIXED, POSITIVE, NEGATIVE, ONE_HUGE } fill_kind;

static void run_case(vkf_context *ctx, const char *name, uint32_t rows, uint32_t cols, float scale, fill_kind kind,
                     bool mask, uint32_t causal_period, uint64_t seed)
{
    size_t n = (size_t)rows * cols;
    float *x = harness_random(n, seed);
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case MIXED: x[i] *= 400.0f; break;
        case POSITIVE: x[i] = 200.0f + 100.0f * x[i]; break;
        case NEGATIVE: x[i] = -200.0f + 100.0f * x[i]; break;
        case ONE_HUGE: x[i] = i % cols == (i / cols) % cols ? 300.0f : x[i]; break;
        }
    }
    float *m = harness_random(n, seed + 1);
    for (size_t i = 0; i < n; i++) m[i] = m[i] > 0.6f ? -INFINITY : 50.0f * m[i];
    vkf_tensor *tx = harness_tensor(ctx, x, rows, cols), *tm = harness_tensor(ctx, m, rows, cols);
    vkf_tensor *ty = harness_tensor(ctx, NULL, rows, cols);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_softmax_desc d;
    vkf_softmax_desc_init(&d);
    d.rows = rows, d.cols = cols, d.x = tx, d.y = ty, d.scale = scale;
    if (mask) d.mask = tm, d.mask_rows = rows, d.mask_row_div = 1;
    d.causal_period = causal_period;
    CHECK_OK(vkf_cmd_softmax(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(ty);
    float *want = harness_alloc(n * sizeof *want);
    ref_softmax(want, x, rows, cols, scale, mask ? m : NULL, rows, 1, causal_period, 0);
    size_t nan = 0;
    for (size_t i = 0; i < n; i++) nan += isnan(got[i]) || isinf(got[i]);
    if (nan) {
        fprintf(stderr, "softmax %s: %zu of %zu probabilities are NaN or inf (the max not subtracted?)\n", name, nan, n);
        harness_failures++;
    }
    char what[128];
    snprintf(what, sizeof what, "softmax %s (%u x %u, scale %g)", name, rows, cols, scale);
    harness_compare(what, got, want, n, 1e-6, 1e-4);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(tm), vkf_tensor_destroy(ty);
    free(x), free(m), free(got), free(want);
}

/* (batch * l, heads * head_dim) q, k, v; key j's vectors are j / l * 6 times q's
 * common direction plus noise, so that every query's scores grow with j. */
static void run_attention(vkf_context *ctx, const char *name, uint32_t batch, uint32_t lq, uint32_t lk, bool causal,
                          const int32_t *lengths, const vkf_attention_tiles *tiles, uint64_t seed)
{
    const uint32_t heads = 2, hd = 16, dm = heads * hd;
    size_t qn = (size_t)batch * lq * dm, kn = (size_t)batch * lk * dm;
    float *q = harness_random(qn, seed), *k = harness_random(kn, seed + 1), *v = harness_random(kn, seed + 2);
    for (size_t i = 0; i < qn; i++) q[i] = 1.0f + 0.2f * q[i];
    for (size_t i = 0; i < kn; i++) k[i] = (float)((i / dm) % lk) / (float)lk * 6.0f + 0.3f * k[i];
    vkf_tensor *tq = harness_tensor(ctx, q, 1, qn), *tk = harness_tensor(ctx, k, 1, kn), *tv = harness_tensor(ctx, v, 1, kn);
    float *sentinel = harness_random(qn, seed + 3);
    vkf_tensor *to = harness_tensor(ctx, sentinel, 1, qn), *tl = NULL;
    if (lengths) {
        uint64_t shape = batch;
        CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &shape, &tl));
        CHECK_OK(vkf_tensor_upload(tl, lengths, batch * sizeof *lengths));
    }
    vkf_attention_desc d;
    vkf_attention_desc_init(&d);
    d.batch = batch, d.heads = heads, d.head_dim = hd, d.lq = lq, d.lk = lk;
    d.scale = 1.0f / sqrtf((float)hd);
    d.q = (vkf_attention_view){tq, 0, dm, (uint64_t)lq * dm};
    d.k = (vkf_attention_view){tk, 0, dm, (uint64_t)lk * dm};
    d.v = (vkf_attention_view){tv, 0, dm, (uint64_t)lk * dm};
    d.key_lengths = tl, d.causal = causal, d.out = to, d.tiles = tiles;
    ref_attention_mask mask = {.lengths = lengths, .causal = causal, .pattern = (int)VKF_ATTENTION_DENSE};
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    char what[160];
    snprintf(what, sizeof what, "attention %s (batch %u, lq %u, lk %u%s%s), tiles %s", name, batch, lq, lk,
             causal ? ", causal" : "", lengths ? ", key lengths" : "",
             !tiles ? "auto" : tiles->lanes ? "lanes" : "rows");
    vkf_status st = vkf_op_attention_fused(cmd, &d);
    if (st != VKF_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, vkf_status_string(st), vkf_last_error());
        harness_failures++;
    } else {
        CHECK_OK(vkf_cmd_submit(cmd));
        float *got = harness_download(to), *want = harness_alloc(qn * sizeof *want);
        ref_attention(want, q, dm, (size_t)lq * dm, k, dm, (size_t)lk * dm, v, dm, (size_t)lk * dm, batch, heads, hd, lq,
                      lk, d.scale, &mask);
        harness_compare(what, got, want, qn, 1e-5, 1e-4);
        free(got), free(want);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tk), vkf_tensor_destroy(tv), vkf_tensor_destroy(to);
    vkf_tensor_destroy(tl);
    free(q), free(k), free(v), free(sentinel);
}

static vkf_tensor *i32_tensor(vkf_context *ctx, const int32_t *data, uint64_t n)
{
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &n, &t));
    if (t && data) CHECK_OK(vkf_tensor_upload(t, data, n * sizeof *data));
    return t;
}

/* Rows of `cols` logits, each with its maximum at the positions given (the rest
 * below it); ids must be the first of them. */
static void run_argmax_ties(vkf_context *ctx, uint32_t cols)
{
    enum { ROWS = 5, MAXPOS = 4 };
    const uint32_t pos[ROWS][MAXPOS] = {
        {0, 1, cols - 1, cols / 2},          /* the first column among others */
        {5, 67, 131, 0xffffffffu},           /* different invocations of a 64-wide workgroup */
        {3, 3 + 64, 3 + 128, 0xffffffffu},   /* one invocation's own columns */
        {cols - 2, cols - 1, 0xffffffffu, 0xffffffffu},
        {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},   /* every column equal */
    };
    float *x = harness_random((size_t)ROWS * cols, 77);
    int32_t want[ROWS];
    for (uint32_t r = 0; r < ROWS; r++) {
        want[r] = r == ROWS - 1 ? 0 : (int32_t)cols;
        for (uint32_t k = 0; k < MAXPOS; k++) {
            uint32_t j = pos[r][k];
            if (j < cols) {
                x[(size_t)r * cols + j] = 2.0f;
                if ((int32_t)j < want[r]) want[r] = (int32_t)j;
            }
        }
        if (r == ROWS - 1)
            for (uint32_t j = 0; j < cols; j++) x[(size_t)r * cols + j] = -1.5f;
    }
    int32_t zero = 0;
    vkf_tensor *tx = harness_tensor(ctx, x, ROWS, cols), *state = i32_tensor(ctx, &zero, 1);
    vkf_tensor *ids = i32_tensor(ctx, NULL, ROWS), *tokens = i32_tensor(ctx, NULL, ROWS);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_op_argmax(cmd, tx, state, ids, tokens, ROWS, cols, 1));
    CHECK_OK(vkf_cmd_submit(cmd));
    int32_t got[ROWS] = {0}, got_tokens[ROWS] = {0};
    CHECK_OK(vkf_tensor_download(ids, got, sizeof got));
    CHECK_OK(vkf_tensor_download(tokens, got_tokens, sizeof got_tokens));
    for (uint32_t r = 0; r < ROWS; r++)
        if (got[r] != want[r] || got_tokens[r] != want[r]) {
            fprintf(stderr, "argmax of %u columns, row %u (tied maxima): id %d (token %d), expected the first, %d\n", cols,
                    r, got[r], got_tokens[r], want[r]);
            harness_failures++;
        }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(state), vkf_tensor_destroy(ids), vkf_tensor_destroy(tokens);
    free(x);
}

int main(void)
{
    vkf_context *ctx = harness_context();
    run_case(ctx, "scores to +-400", 17, 257, 1.0f, MIXED, false, 0, 1);
    run_case(ctx, "scores 100..300", 5, 1000, 1.0f, POSITIVE, false, 0, 2);
    run_case(ctx, "scores -300..-100", 5, 1000, 1.0f, NEGATIVE, false, 0, 3);
    run_case(ctx, "one score of 300 per row", 64, 64, 1.0f, ONE_HUGE, false, 0, 4);
    run_case(ctx, "scores to +-400, scaled by 0.5, masked", 33, 100, 0.5f, MIXED, true, 0, 5);
    run_case(ctx, "scores 100..300, causal", 40, 40, 1.0f, POSITIVE, false, 40, 6);

    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    vkf_attention_tiles rows = {.workgroup = 4, .bq = 8, .bk = 8, .td = 1, .tq = 2};
    vkf_attention_tiles lanes = {.workgroup = info.subgroup_size, .bq = info.subgroup_size, .bk = info.subgroup_size,
                                 .td = 1, .tq = 1, .lanes = 1};
    const vkf_attention_tiles *sets[3] = {NULL, &rows, info.subgroup_shuffle && info.subgroup_size ? &lanes : NULL};
    int32_t lengths[3] = {70, 37, 9};
    for (int t = 0; t < 3; t++) {
        if (t == 2 && !sets[2]) {
            fprintf(stderr, "no subgroup shuffles: the lanes form is not run here\n");
            continue;
        }
        run_attention(ctx, "rising scores", 1, 70, 70, false, NULL, sets[t], 20 + t);
        run_attention(ctx, "rising scores", 2, 70, 70, true, NULL, sets[t], 30 + t);
        run_attention(ctx, "rising scores", 3, 13, 70, false, lengths, sets[t], 40 + t);
        run_attention(ctx, "rising scores", 3, 70, 70, true, lengths, sets[t], 50 + t);
    }

    run_argmax_ties(ctx, 200);
    run_argmax_ties(ctx, 1000);
    harness_close(ctx);
    return harness_result("test_mutant_ops");
}

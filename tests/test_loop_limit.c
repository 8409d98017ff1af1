/* Kernels whose invocations run long loops, at sizes past the loop limiter of
 * Debian 12's lavapipe (Mesa 22.3, LLVM 15): gallivm counts every loop iteration
 * of an invocation (all its loops together, a loop entered even once counting)
 * and, past 65535, ends every loop after one pass, with no error
 * (docs/reliability.md, "Loop limits of CPU drivers"). Each case takes few rows
 * but a long loop, past where the unfixed code broke on that driver, against a
 * plain-C oracle; where the fix is a refusal, the one-line error on lavapipe
 * before Mesa 26 and the right result elsewhere:
 *  - fused attention handed the shared-memory rows form (a tune file's tiles)
 *    over 20,000 keys (wrong past ~12,600 at head_dim 64): now the lanes form;
 *    70,000 keys per query block: refused (the lanes form was wrong past ~175,000);
 *  - beam search's stage 1, rows form (beam_partial.comp), 64 candidates over
 *    logits rising along each chunk (every token inserted at the top);
 *  - LSH attention's sort over 70,000 tokens (wrong past ~63,000), and chunks
 *    whose 40,000 keys the attend stage cannot walk in one invocation (refused);
 *  - matmul's K loop with scalar loads at k 70,001 (refused) and 65,000;
 *  - softmax and layernorm over a row of 2,000,000 (wrong past ~1.4M).
 * Run as `test_loop-limit probe KERNEL SIZE ...` it runs one case and prints the
 * worst error (VKF_PROBE_REPEAT=N: the mean time of N more submits), which is how
 * the break points in docs/reliability.md were found. */
#include "harness.h"
#include "internal.h"
#include "attention/attention.h"
#include "decode/decode.h"
#include "attention/attention_lsh.h"
#include "reference/reference_lsh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static vkf_tensor *i32_tensor(vkf_context *ctx, const int32_t *data, uint64_t n)
{
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &n, &t));
    if (t && data) CHECK_OK(vkf_tensor_upload(t, data, n * sizeof *data));
    return t;
}

/* probe only: VKF_PROBE_REPEAT=N submits the recorded list N more times and prints
 * the mean wall time (a comparison of forms by hand; tests never time). */
static void timed_repeats(vkf_cmd *cmd, const char *what)
{
    const char *env = getenv("VKF_PROBE_REPEAT");
    int n = env ? atoi(env) : 0;
    if (n <= 0) return;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) CHECK_OK(vkf_cmd_submit(cmd));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / n;
    fprintf(stderr, "%s: %.3f ms per submit (mean of %d)\n", what, ms, n);
}

/* ------------------------------------------------------------------ attention */

/* One head of head_dim hd, lq queries over lk keys, with the given tiles (NULL:
 * the device's), against ref_attention. Keys rise along the sequence so that the
 * last keys weigh most: a key loop cut short loses them. */
static void run_attention(vkf_context *ctx, const char *form, uint32_t lq, uint32_t lk, uint32_t hd,
                          const vkf_attention_tiles *tiles)
{
    const uint32_t dm = hd;
    size_t qn = (size_t)lq * dm, kn = (size_t)lk * dm;
    float *q = harness_random(qn, 11), *k = harness_random(kn, 12), *v = harness_random(kn, 13);
    for (size_t i = 0; i < qn; i++) q[i] = 1.0f + 0.2f * q[i];
    for (size_t i = 0; i < kn; i++) k[i] = (float)(i / dm) / (float)lk * 4.0f + 0.5f * k[i];
    vkf_tensor *tq = harness_tensor(ctx, q, 1, qn), *tk = harness_tensor(ctx, k, 1, kn);
    vkf_tensor *tv = harness_tensor(ctx, v, 1, kn), *to = harness_tensor(ctx, NULL, 1, qn);
    vkf_attention_desc d;
    vkf_attention_desc_init(&d);
    d.batch = 1, d.heads = 1, d.head_dim = hd, d.lq = lq, d.lk = lk;
    d.scale = 1.0f / sqrtf((float)hd);
    d.q = (vkf_attention_view){tq, 0, dm, qn};
    d.k = (vkf_attention_view){tk, 0, dm, kn};
    d.v = (vkf_attention_view){tv, 0, dm, kn};
    d.out = to, d.tiles = tiles;
    ref_attention_mask mask = {.pattern = (int)VKF_ATTENTION_DENSE};
    char what[160];
    snprintf(what, sizeof what, "attention, %s form: %u queries over %u keys, head_dim %u", form, lq, lk, hd);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_status st = vkf_op_attention_fused(cmd, &d);
    if (st != VKF_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, vkf_status_string(st), vkf_last_error());
        harness_failures++;
    } else {
        CHECK_OK(vkf_cmd_submit(cmd));
        timed_repeats(cmd, "attention");
        float *got = harness_download(to), *want = harness_alloc(qn * sizeof *want);
        ref_attention(want, q, dm, qn, k, dm, kn, v, dm, kn, 1, 1, hd, lq, lk, d.scale, &mask);
        if (harness_compare(what, got, want, qn, 1e-5, 1e-3)) fprintf(stderr, "%s: right\n", what);
        free(got), free(want);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tk), vkf_tensor_destroy(tv), vkf_tensor_destroy(to);
    free(q), free(k), free(v);
}

/* ------------------------------------------------------------------ beam search's top-k */

typedef struct scored {
    double score;
    int32_t id;
} scored;

static int by_score(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* One source of `beams` rows of `vocab` logits: random, or rising along the
 * vocabulary (every token enters stage 1's candidate list at the top); the
 * n_cand best (beam, token) pairs by beam score + log_softmax against a sort. */
static void run_beam(vkf_context *ctx, uint32_t vocab, uint32_t beams, uint32_t n_cand, uint32_t chunk, bool rising)
{
    size_t n = (size_t)beams * vocab;
    float *x = harness_random(n, 21), *bs = harness_random(beams, 22);
    if (rising)
        for (size_t i = 0; i < n; i++) x[i] = (float)(i % vocab) * (8.0f / (float)vocab) + 1e-3f * x[i];
    vkf_tensor *tx = harness_tensor(ctx, x, beams, vocab), *tbs = harness_tensor(ctx, bs, 1, beams);
    int32_t zero = 0;
    vkf_tensor *state = i32_tensor(ctx, &zero, 1);
    uint64_t parts = (uint64_t)beams * vkf_div_up(vocab, chunk);
    vkf_tensor *stats = harness_tensor(ctx, NULL, parts, 2), *cx = harness_tensor(ctx, NULL, parts, n_cand);
    vkf_tensor *cid = i32_tensor(ctx, NULL, parts * n_cand);
    vkf_tensor *cs = harness_tensor(ctx, NULL, 1, n_cand), *cids = i32_tensor(ctx, NULL, n_cand);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_op_beam_topk(cmd, tx, tbs, state, stats, cx, cid, chunk, cs, cids, 1, beams, vocab, n_cand,
                              /*eos=*/-1, /*min_new=*/0, /*force_step=*/UINT32_MAX, /*renormalize=*/0));
    CHECK_OK(vkf_cmd_submit(cmd));
    timed_repeats(cmd, "beam top-k");
    float *got = harness_download(cs);
    int32_t *got_id = harness_alloc(n_cand * sizeof *got_id);
    CHECK_OK(vkf_tensor_download(cids, got_id, n_cand * sizeof *got_id));
    scored *all = harness_alloc(n * sizeof *all);
    double *lse = harness_alloc(beams * sizeof *lse);   /* per beam: max + log(sum(exp(x - max))) */
    for (uint32_t k = 0; k < beams; k++) {
        const float *row = x + (size_t)k * vocab;
        double m = -INFINITY, s = 0;
        for (uint32_t v = 0; v < vocab; v++) m = row[v] > m ? row[v] : m;
        for (uint32_t v = 0; v < vocab; v++) s += exp((double)row[v] - m);
        lse[k] = m + log(s);
        for (uint32_t v = 0; v < vocab; v++)
            all[(size_t)k * vocab + v] = (scored){bs[k] + ((double)row[v] - lse[k]), (int32_t)(k * vocab + v)};
    }
    qsort(all, n, sizeof *all, by_score);
    float *want = harness_alloc(n_cand * sizeof *want);
    int wrong = 0;
    for (uint32_t c = 0; c < n_cand; c++) {
        want[c] = (float)all[c].score;
        /* another id is right only where its own score ties the expected one in float rounding */
        bool tie = got_id[c] >= 0 && (size_t)got_id[c] < n &&
                   fabs(bs[got_id[c] / vocab] + ((double)x[got_id[c]] - lse[got_id[c] / vocab]) - all[c].score) < 2e-6;
        if (got_id[c] != all[c].id && !tie && wrong++ == 0)
            fprintf(stderr, "beam top-k (%u beams of %u, %u candidates, chunk %u, %s logits): candidate %u is %d, "
                    "expected %d\n", beams, vocab, n_cand, chunk, rising ? "rising" : "random", c, got_id[c],
                    all[c].id);
    }
    harness_failures += wrong > 0;
    char what[160];
    snprintf(what, sizeof what, "beam top-k scores (%u beams of %u, %u candidates, chunk %u, %s logits)", beams, vocab,
             n_cand, chunk, rising ? "rising" : "random");
    if (harness_compare(what, got, want, n_cand, 1e-4, 1e-5) && !wrong) fprintf(stderr, "%s: right\n", what);
    vkf_cmd_destroy(cmd);
    vkf_tensor *ts[] = {tx, tbs, state, stats, cx, cid, cs, cids};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) vkf_tensor_destroy(ts[i]);
    free(x), free(bs), free(got), free(got_id), free(all), free(want), free(lse);
}

/* ------------------------------------------------------------------ sampling */

/* rows rows of `vocab` flat random logits; top_k 1 (or top_p tiny) leaves only
 * each row's argmax, which the draw must then return. A cut loop stopped early
 * keeps more tokens, and a draw over ~vocab flat tokens misses the argmax. */
static void run_sample(vkf_context *ctx, uint32_t vocab, uint32_t top_k, float top_p)
{
    const uint32_t rows = 4;
    size_t n = (size_t)rows * vocab;
    float *x = harness_random(n, 31);
    int32_t want[4];
    for (uint32_t r = 0; r < rows; r++) {
        want[r] = 0;
        for (uint32_t v = 1; v < vocab; v++)
            if (x[(size_t)r * vocab + v] > x[(size_t)r * vocab + want[r]]) want[r] = (int32_t)v;
        x[(size_t)r * vocab + want[r]] += 0.5f; /* a clear argmax: top_p 1e-6 keeps it alone */
    }
    int32_t zero = 0;
    vkf_tensor *tx = harness_tensor(ctx, x, rows, vocab), *state = i32_tensor(ctx, &zero, 1);
    vkf_tensor *ids = i32_tensor(ctx, NULL, rows), *tokens = i32_tensor(ctx, NULL, rows);
    vkf_generate_options o;
    vkf_generate_options_init(&o);
    o.sample = true, o.top_k = top_k, o.top_p = top_p, o.seed = 5;
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_op_sample(cmd, tx, state, ids, tokens, rows, vocab, 1, &o, /*eos=*/-1));
    CHECK_OK(vkf_cmd_submit(cmd));
    int32_t got[4] = {0};
    CHECK_OK(vkf_tensor_download(ids, got, sizeof got));
    int wrong = 0;
    for (uint32_t r = 0; r < rows; r++)
        if (got[r] != want[r]) {
            fprintf(stderr, "sample over %u tokens, top_k %u, top_p %g: row %u drew %d, expected the argmax %d\n",
                    vocab, top_k, top_p, r, got[r], want[r]);
            wrong++;
        }
    harness_failures += wrong > 0;
    if (!wrong) fprintf(stderr, "sample over %u tokens, top_k %u, top_p %g: right\n", vocab, top_k, top_p);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(state), vkf_tensor_destroy(ids), vkf_tensor_destroy(tokens);
    free(x);
}

/* ------------------------------------------------------------------ row kernels */

static void run_softmax(vkf_context *ctx, uint32_t cols)
{
    float *x = harness_random(cols, 41);
    for (uint32_t i = 0; i < cols; i++) x[i] *= 4.0f;
    vkf_tensor *tx = harness_tensor(ctx, x, 1, cols), *ty = harness_tensor(ctx, NULL, 1, cols);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_softmax_desc d;
    vkf_softmax_desc_init(&d);
    d.rows = 1, d.cols = cols, d.x = tx, d.y = ty, d.scale = 1.0f;
    CHECK_OK(vkf_cmd_softmax(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(ty), *want = harness_alloc((size_t)cols * sizeof *want);
    ref_softmax(want, x, 1, cols, 1.0f, NULL, 1, 1, 0, 0);
    char what[96];
    snprintf(what, sizeof what, "softmax of one row of %u", cols);
    if (harness_compare(what, got, want, cols, 1e-9, 1e-3)) fprintf(stderr, "%s: right\n", what);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(ty);
    free(x), free(got), free(want);
}

static void run_layernorm(vkf_context *ctx, uint32_t cols)
{
    float *x = harness_random(cols, 51), *g = harness_random(cols, 52), *b = harness_random(cols, 53);
    vkf_tensor *tx = harness_tensor(ctx, x, 1, cols), *ty = harness_tensor(ctx, NULL, 1, cols);
    vkf_tensor *tg = harness_tensor(ctx, g, 1, cols), *tb = harness_tensor(ctx, b, 1, cols);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_layernorm_desc d;
    vkf_layernorm_desc_init(&d);
    d.rows = 1, d.cols = cols, d.x = tx, d.gamma = tg, d.beta = tb, d.eps = 1e-5f, d.y = ty;
    CHECK_OK(vkf_cmd_layernorm(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(ty), *want = harness_alloc((size_t)cols * sizeof *want);
    ref_layernorm(want, NULL, x, NULL, g, b, 1, cols, 1e-5f);
    char what[96];
    snprintf(what, sizeof what, "layernorm of one row of %u", cols);
    if (harness_compare(what, got, want, cols, 1e-4, 1e-3)) fprintf(stderr, "%s: right\n", what);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(ty), vkf_tensor_destroy(tg), vkf_tensor_destroy(tb);
    free(x), free(g), free(b), free(got), free(want);
}

/* ------------------------------------------------------------------ LSH attention's sort */

/* One sequence of n tokens, one head of 4, one round, chunks of 64 (n / 64
 * buckets): the sort stage's order (attention_lsh_sort.comp, one workgroup per
 * round) against the stable sort of the GPU's own buckets. */
static void run_lsh(vkf_context *ctx, uint32_t n, uint32_t chunk)
{
    const uint32_t hd = 4;
    float *q = harness_random((size_t)n * hd, 61), *v = harness_random((size_t)n * hd, 62);
    vkf_tensor *tq = harness_tensor(ctx, q, n, hd), *tv = harness_tensor(ctx, v, n, hd);
    vkf_tensor *to = harness_tensor(ctx, NULL, n, hd);
    vkf_lsh_desc d = {.batch = 1, .heads = 1, .head_dim = hd, .n = n, .rounds = 1, .chunk = chunk, .scale = 0.5f,
                      .q = {tq, 0, hd, 0}, .v = {tv, 0, hd, 0}, .out = to};
    vkf_lsh_plan *plan = NULL;
    CHECK_OK(vkf_lsh_plan_create(ctx, &d, n, 7, &plan));
    if (plan) {
        vkf_cmd *cmd;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        CHECK_OK(vkf_op_attention_lsh(cmd, plan, &d));
        CHECK_OK(vkf_cmd_submit(cmd));
        timed_repeats(cmd, "LSH attention");
        vkf_cmd_destroy(cmd);
        int32_t *buckets = (int32_t *)harness_download(vkf_lsh_plan_buckets(plan));
        int32_t *sorted = (int32_t *)harness_download(vkf_lsh_plan_sorted(plan));
        int32_t *want = harness_alloc((size_t)n * sizeof *want);
        ref_lsh_sort(want, buckets, 1, n);
        size_t bad = 0, first = 0;
        for (size_t e = n; e-- > 0;)
            if (sorted[e] != want[e]) bad++, first = e;
        if (bad) {
            fprintf(stderr, "LSH sort of %u tokens: %zu of %u entries out of order, the first at %zu (%d, expected %d)\n",
                    n, bad, n, first, sorted[first], want[first]);
            harness_failures++;
        } else {
            fprintf(stderr, "LSH sort of %u tokens: right\n", n);
        }
        /* the attention from the GPU's own order (stages 3 and 4), where it is one */
        float *got = harness_download(to), *ref = harness_alloc((size_t)n * hd * sizeof *ref);
        if (bad) memcpy(sorted, want, (size_t)n * sizeof *sorted);
        ref_lsh_shape shape = {.batch = 1, .heads = 1, .head_dim = hd, .n = n, .rounds = 1, .chunk = chunk,
                               .buckets = vkf_lsh_bucket_count(n, chunk, 0), .scale = 0.5f, .q = q, .q_row = hd,
                               .q_batch = (size_t)n * hd, .v = v, .v_row = hd, .v_batch = (size_t)n * hd};
        ref_lsh_attend(ref, &shape, sorted);
        char what[96];
        snprintf(what, sizeof what, "LSH attention of %u tokens in chunks of %u", n, chunk);
        if (harness_compare(what, got, ref, (size_t)n * hd, 1e-4, 1e-4)) fprintf(stderr, "%s: right\n", what);
        free(buckets), free(sorted), free(want), free(got), free(ref);
        vkf_lsh_plan_destroy(plan);
    }
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tv), vkf_tensor_destroy(to);
    free(q), free(v);
}

/* ------------------------------------------------------------------ matmul */

/* C (m, n) = A (m, k) · Bᵀ (B (n, k), or (k, n) with kn) with the device's kernel
 * choice; k is the loop each invocation runs. */
static void run_matmul(vkf_context *ctx, uint32_t m, uint32_t n, uint32_t k, bool kn)
{
    float *a = harness_random((size_t)m * k, 71), *b = harness_random((size_t)n * k, 72);
    vkf_tensor *ta = harness_tensor(ctx, a, m, k), *tb = harness_tensor(ctx, b, kn ? k : n, kn ? n : k);
    vkf_tensor *tc = harness_tensor(ctx, NULL, m, n);
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = m, d.n = n, d.k = k, d.b_is_k_by_n = kn;
    d.a = (vkf_matrix_view){.tensor = ta, .row_stride = k};
    d.b = (vkf_matrix_view){.tensor = tb, .row_stride = kn ? n : k};
    d.c = (vkf_matrix_view){.tensor = tc, .row_stride = n};
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(tc), *want = harness_alloc((size_t)m * n * sizeof *want);
    ref_matmul(want, n, a, k, b, kn ? n : k, kn, NULL, NULL, 0, m, n, k, 1.0f, 0);
    char what[96];
    snprintf(what, sizeof what, "matmul %u x %u, k %u%s", m, n, k, kn ? " (B k x n)" : "");
    if (harness_compare(what, got, want, (size_t)m * n, 1e-3, 1e-3)) fprintf(stderr, "%s: right\n", what);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tc);
    free(a), free(b), free(got), free(want);
}

/* ------------------------------------------------------------------ main */

static uint32_t arg(int argc, char **argv, int i, uint32_t fallback)
{
    return i < argc ? (uint32_t)strtoul(argv[i], NULL, 10) : fallback;
}

/* probe KERNEL SIZE [...]: one case, for finding break points by hand. */
static int probe(vkf_context *ctx, int argc, char **argv)
{
    const char *k = argv[2];
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    if (strcmp(k, "attn-rows") == 0) {
        vkf_attention_tiles t = {.workgroup = 16, .bq = 16, .bk = arg(argc, argv, 6, 32), .td = 1, .tq = 1};
        run_attention(ctx, "rows", arg(argc, argv, 4, 2), arg(argc, argv, 3, 1000), arg(argc, argv, 5, 64), &t);
    } else if (strcmp(k, "attn-lanes") == 0) {
        vkf_attention_tiles t = {.workgroup = info.subgroup_size, .bq = info.subgroup_size, .bk = info.subgroup_size,
                                 .td = 1, .tq = 1, .lanes = 1};
        run_attention(ctx, "lanes", arg(argc, argv, 4, 2), arg(argc, argv, 3, 1000), arg(argc, argv, 5, 64), &t);
    } else if (strcmp(k, "attn") == 0) {
        run_attention(ctx, "device's", arg(argc, argv, 4, 2), arg(argc, argv, 3, 1000), arg(argc, argv, 5, 64), NULL);
    } else if (strcmp(k, "beam") == 0) {
        uint32_t vocab = arg(argc, argv, 3, 1000);
        run_beam(ctx, vocab, arg(argc, argv, 4, 4), arg(argc, argv, 5, 8), arg(argc, argv, 6, vkf_beam_topk_chunk(vocab)),
                 argc > 7 && strcmp(argv[7], "rising") == 0);
    } else if (strcmp(k, "sample") == 0) {
        run_sample(ctx, arg(argc, argv, 3, 1000), arg(argc, argv, 4, 1), argc > 5 ? strtof(argv[5], NULL) : 1.0f);
    } else if (strcmp(k, "lsh-sort") == 0) {
        run_lsh(ctx, arg(argc, argv, 3, 1000), arg(argc, argv, 4, 64));
    } else if (strcmp(k, "matmul") == 0) {
        run_matmul(ctx, arg(argc, argv, 3, 1), arg(argc, argv, 4, 8), arg(argc, argv, 5, 1000),
                   argc > 6 && strcmp(argv[6], "kn") == 0);
    } else if (strcmp(k, "softmax") == 0) {
        run_softmax(ctx, arg(argc, argv, 3, 1000));
    } else if (strcmp(k, "layernorm") == 0) {
        run_layernorm(ctx, arg(argc, argv, 3, 1000));
    } else {
        fprintf(stderr, "unknown probe %s\n", k);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    vkf_context *ctx = harness_context();
    if (argc > 2 && strcmp(argv[1], "probe") == 0) {
        int rc = probe(ctx, argc, argv);
        harness_close(ctx);
        return rc ? rc : harness_result("loop-limit probe");
    }
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    bool limited = vkf_loop_limited(ctx);
    fprintf(stderr, "%s: %s\n", info.name, limited ? "a loop limiter (Mesa before 26): long key lists are bounded"
                                                    : "no loop limiter expected: every case runs");

    /* fused attention handed the shared-memory rows form (a tune file's tiles):
     * wrong past ~12,600 keys at head_dim 64 before; now the lanes form there */
    vkf_attention_tiles rows = {.workgroup = 16, .bq = 16, .bk = 32, .td = 1, .tq = 1};
    run_attention(ctx, "rows", 2, 20000, 64, &rows);
    /* past the lanes form's bound (wrong past ~175,000 keys before): refused where limited */
    if (limited) {
        vkf_attention_tiles *none = NULL;
        float *x = harness_random(70000 * 4, 3);
        vkf_tensor *t = harness_tensor(ctx, x, 70000, 4), *out = harness_tensor(ctx, NULL, 2, 4);
        vkf_attention_desc d;
        vkf_attention_desc_init(&d);
        d.batch = 1, d.heads = 1, d.head_dim = 4, d.lq = 2, d.lk = 70000, d.tiles = none;
        d.q = (vkf_attention_view){t, 0, 4, 8}, d.k = d.v = (vkf_attention_view){t, 0, 4, 70000 * 4};
        d.out = out;
        vkf_cmd *cmd;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        CHECK_FAIL(vkf_op_attention_fused(cmd, &d), VKF_ERROR_UNSUPPORTED, "70000 keys");
        fprintf(stderr, "refused: %s\n", vkf_last_error());
        vkf_cmd_destroy(cmd);
        vkf_tensor_destroy(t), vkf_tensor_destroy(out);
        free(x);
    } else {
        run_attention(ctx, "device's", 2, 70000, 4, NULL);
    }

    /* beam search's stage 1, rows form: 64 candidates over logits rising along each
     * chunk of 2000 (every token inserted at the top: ~130,000 iterations before),
     * and random logits (a few insertions) */
    run_beam(ctx, 64000, 2, 64, vkf_beam_topk_chunk(64000), /*rising=*/true);
    run_beam(ctx, 64000, 2, 64, vkf_beam_topk_chunk(64000), /*rising=*/false);

    /* sampling over NLLB's vocabulary with top-k 1 and with a tiny top-p: the
     * argmax (every draw was id 0 past ~125,000 before) */
    run_sample(ctx, 256206, 1, 1.0f);
    run_sample(ctx, 256206, 0, 1e-6f);

    /* LSH attention's sort over 70,000 tokens (wrong past ~63,000 before) */
    run_lsh(ctx, 70000, 64);
    /* chunks whose keys pass the attend stage's bound: refused where limited */
    if (limited) {
        float *x = harness_random(40000 * 4, 4);
        vkf_tensor *t = harness_tensor(ctx, x, 40000, 4), *out = harness_tensor(ctx, NULL, 40000, 4);
        vkf_lsh_desc d = {.batch = 1, .heads = 1, .head_dim = 4, .n = 40000, .rounds = 1, .chunk = 20000,
                          .scale = 0.5f, .q = {t, 0, 4, 0}, .v = {t, 0, 4, 0}, .out = out};
        vkf_lsh_plan *plan = NULL;
        CHECK_OK(vkf_lsh_plan_create(ctx, &d, 40000, 7, &plan));
        vkf_cmd *cmd;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        CHECK_FAIL(vkf_op_attention_lsh(cmd, plan, &d), VKF_ERROR_UNSUPPORTED, "chunks of 20000");
        fprintf(stderr, "refused: %s\n", vkf_last_error());
        vkf_cmd_destroy(cmd);
        vkf_lsh_plan_destroy(plan);
        vkf_tensor_destroy(t), vkf_tensor_destroy(out);
        free(x);
    }
    /* matmul's K loop with scalar loads (B (k, n)): wrong past 65535 before; refused where limited */
    if (limited) {
        float *x = harness_random(70001, 5);
        vkf_tensor *a = harness_tensor(ctx, x, 1, 70001), *b = harness_tensor(ctx, x, 70001, 1);
        vkf_tensor *c = harness_tensor(ctx, NULL, 1, 1);
        vkf_matmul_desc d;
        vkf_matmul_desc_init(&d);
        d.m = 1, d.n = 1, d.k = 70001, d.b_is_k_by_n = true;
        d.a = (vkf_matrix_view){.tensor = a, .row_stride = 70001};
        d.b = (vkf_matrix_view){.tensor = b, .row_stride = 1};
        d.c = (vkf_matrix_view){.tensor = c, .row_stride = 1};
        vkf_cmd *cmd;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        CHECK_FAIL(vkf_cmd_matmul(cmd, &d), VKF_ERROR_UNSUPPORTED, "k 70001");
        fprintf(stderr, "refused: %s\n", vkf_last_error());
        vkf_cmd_destroy(cmd);
        vkf_tensor_destroy(a), vkf_tensor_destroy(b), vkf_tensor_destroy(c);
        free(x);
    } else {
        run_matmul(ctx, 3, 5, 70001, /*kn=*/true);
    }
    run_matmul(ctx, 3, 5, 65000, /*kn=*/true);   /* the last k the limited drivers run */
    /* softmax and layernorm over one row of 2,000,000 (three passes of cols / 64
     * iterations: wrong past ~1.4M before; a wider workgroup now) */
    run_softmax(ctx, 2000000);
    run_layernorm(ctx, 2000000);
    harness_close(ctx);
    return harness_result("loop-limit");
}

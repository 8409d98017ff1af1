/* Per-row positions in the decode-step kernels (the serving scheduler's slot
 * plans, issue 37): a state tensor of one position per row makes rows of one
 * step sit at different positions. Each kernel that reads the state (embed with
 * learned, fairseq-sinusoidal and sinusoidal tables, kv_append, attention_decode
 * in every form with T5's relative position bias and a local pattern,
 * logits_process with per-row prefixes, limits, min_new, forced eos and a
 * repetition penalty, argmax, sample, advance) gives each row what it gives that
 * row in a step whose one position is the row's; a row at -1 (a free slot) writes
 * nothing into the cache or the tokens, attends to nothing, stays at -1; one
 * row starting at 0 while the others are mid-way is among them. A state of the
 * wrong size is refused. */
#include "harness.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define B 4
static const int32_t POS[B] = {5, -1, 0, 13};   /* mid-way, a free slot, one that starts, near the end */
#define CAP 16                                   /* positions of the caches and tokens */

static vkf_tensor *ints(vkf_context *ctx, const int32_t *x, uint64_t n)
{
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &n, &t));
    if (t) CHECK_OK(vkf_tensor_upload(t, x, n * 4));
    return t;
}

static vkf_tensor *floats(vkf_context *ctx, const float *x, uint64_t n)
{
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &n, &t));
    if (t && x) CHECK_OK(vkf_upload_floats(t, x, n));
    return t;
}

static void submit(vkf_cmd *cmd)
{
    CHECK_OK(vkf_cmd_submit(cmd));
    vkf_cmd_destroy(cmd);
}

/* Row b of got (per-row state) against row b of want (the row's position for every row). */
static bool same_row(const char *what, uint32_t b, const float *got, const float *want, size_t cols)
{
    for (size_t c = 0; c < cols; c++)
        if (!(got[b * cols + c] == want[b * cols + c]) && !(isnan(got[b * cols + c]) && isnan(want[b * cols + c]))) {
            fprintf(stderr, "%s: row %u (position %d) column %zu: %g per row, %g alone\n", what, b, POS[b], c,
                    got[b * cols + c], want[b * cols + c]);
            return false;
        }
    return true;
}

/* embed: table (V, D), positions (P, D); kind 0 learned (offset 2), 1 fairseq (pad row), 2 sinusoidal */
static void test_embed(vkf_context *ctx, int kind)
{
    const uint32_t V = 11, D = 24, P = 24;
    float *table = harness_random((size_t)V * D, 11 + kind), *pe = harness_random((size_t)P * D, 12);
    int32_t ids[B] = {3, 1, 7, 10};             /* id 1 is the pad id in the fairseq case */
    vkf_tensor *tt = harness_tensor(ctx, table, V, D), *tp = NULL, *tid = ints(ctx, ids, B);
    if (kind == 2) CHECK_OK(vkf_positional_encoding_create(ctx, P, D, &tp));
    else tp = harness_tensor(ctx, pe, P, D);
    vkf_tensor *out = floats(ctx, NULL, (uint64_t)B * D), *rows = ints(ctx, POS, B);
    float got[B * 24], want[B * 24];
    for (int pass = -1; pass < B; pass++) { /* -1: per row; b: every row at POS[b] */
        vkf_tensor *state = pass < 0 ? rows : ints(ctx, &POS[pass], 1);
        vkf_embed_desc e;
        vkf_embed_desc_init(&e);
        e.tokens = B, e.d = D, e.vocab = V, e.ids = tid, e.table = tt, e.out = out, e.scale = 2.0f;
        e.positions = tp, e.seq_len = 1, e.position_state = state;
        if (kind == 0) e.pos_offset = 2;
        if (kind == 1) e.pos_offset = 2, e.pad_position = true, e.pad_id = 1, e.pad_row = 1;
        vkf_cmd *cmd;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        CHECK_OK(vkf_cmd_embed(cmd, &e));
        submit(cmd);
        CHECK_OK(vkf_download_floats(out, pass < 0 ? got : want, (uint64_t)B * D));
        if (pass >= 0) CHECK(same_row(kind == 0 ? "embed learned" : kind == 1 ? "embed fairseq" : "embed sinusoidal",
                                      (uint32_t)pass, got, want, D));
        if (pass >= 0) vkf_tensor_destroy(state);
    }
    /* too few positions for the rows: refused */
    int32_t two[2] = {0, 0};
    vkf_tensor *short_state = ints(ctx, two, 2);
    vkf_embed_desc e;
    vkf_embed_desc_init(&e);
    e.tokens = B, e.d = D, e.vocab = V, e.ids = tid, e.table = tt, e.out = out, e.positions = tp, e.seq_len = 1;
    e.position_state = short_state;
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_FAIL(vkf_cmd_embed(cmd, &e), VKF_ERROR_INVALID_ARGUMENT, "one per");
    vkf_cmd_destroy(cmd);
    vkf_tensor *ts[] = {tt, tp, tid, out, rows, short_state};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) vkf_tensor_destroy(ts[i]);
    free(table), free(pe);
}

/* kv_append, argmax, advance: against what the positions say directly */
static void test_append_argmax_advance(vkf_context *ctx)
{
    const uint32_t D = 8, V = 9;
    float *qkv = harness_random((size_t)B * 3 * D, 21), *logits = harness_random((size_t)B * V, 22);
    vkf_tensor *tq = floats(ctx, qkv, (uint64_t)B * 3 * D), *tl = floats(ctx, logits, (uint64_t)B * V);
    float *zeros = calloc((size_t)B * CAP * D, sizeof *zeros);
    vkf_tensor *ck = floats(ctx, zeros, (uint64_t)B * CAP * D), *cv = floats(ctx, zeros, (uint64_t)B * CAP * D);
    int32_t tokens0[B * CAP];
    for (int i = 0; i < B * CAP; i++) tokens0[i] = -7;
    int32_t ids0[B] = {0};
    vkf_tensor *state = ints(ctx, POS, B), *tok = ints(ctx, tokens0, B * CAP), *tid = ints(ctx, ids0, B);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_op_kv_append(cmd, tq, state, ck, cv, B, D, CAP));
    CHECK_OK(vkf_op_argmax(cmd, tl, state, tid, tok, B, V, CAP));
    CHECK_OK(vkf_op_advance(cmd, state));
    submit(cmd);
    float *k = harness_alloc((size_t)B * CAP * D * 4), *v = harness_alloc((size_t)B * CAP * D * 4);
    int32_t tokens[B * CAP], ids[B], pos[B];
    CHECK_OK(vkf_download_floats(ck, k, (uint64_t)B * CAP * D));
    CHECK_OK(vkf_download_floats(cv, v, (uint64_t)B * CAP * D));
    CHECK_OK(vkf_tensor_download(tok, tokens, sizeof tokens));
    CHECK_OK(vkf_tensor_download(tid, ids, sizeof ids));
    CHECK_OK(vkf_tensor_download(state, pos, sizeof pos));
    int wrong = 0;
    for (uint32_t b = 0; b < B; b++) {
        uint32_t best = 0;
        for (uint32_t j = 1; j < V; j++)
            if (logits[b * V + j] > logits[b * V + best]) best = j;
        wrong += ids[b] != (int32_t)best;
        wrong += pos[b] != (POS[b] < 0 ? POS[b] : POS[b] + 1);
        for (uint32_t t = 0; t < CAP; t++) {
            bool here = (int32_t)t == POS[b];
            wrong += tokens[b * CAP + t] != (here ? (int32_t)best : -7);
            for (uint32_t c = 0; c < D; c++) {
                size_t e = ((size_t)b * CAP + t) * D + c;
                wrong += k[e] != (here ? qkv[b * 3 * D + D + c] : 0.0f);
                wrong += v[e] != (here ? qkv[b * 3 * D + 2 * D + c] : 0.0f);
            }
        }
    }
    if (wrong) fprintf(stderr, "kv_append / argmax / advance: %d wrong values\n", wrong);
    CHECK(wrong == 0);
    /* a state of 2 positions for 4 rows: refused */
    int32_t two[2] = {0, 0};
    vkf_tensor *short_state = ints(ctx, two, 2);
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_FAIL(vkf_op_kv_append(cmd, tq, short_state, ck, cv, B, D, CAP), VKF_ERROR_INVALID_ARGUMENT, "one per row");
    CHECK_FAIL(vkf_op_argmax(cmd, tl, short_state, tid, tok, B, V, CAP), VKF_ERROR_INVALID_ARGUMENT, "one per row");
    vkf_cmd_destroy(cmd);
    vkf_tensor *ts[] = {tq, tl, ck, cv, state, tok, tid, short_state};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) vkf_tensor_destroy(ts[i]);
    free(qkv), free(logits), free(zeros), free(k), free(v);
}

/* attention_decode over a cache of `keys` positions, rows at `pos` */
static void test_attention(vkf_context *ctx, const char *form, uint32_t keys, const int32_t *pos, bool bias,
                           uint32_t pattern)
{
    const uint32_t H = 2, hd = 16, dm = H * hd, R = 8;
    float *q = harness_random((size_t)B * dm, 31), *k = harness_random((size_t)B * keys * dm, 32);
    float *v = harness_random((size_t)B * keys * dm, 33), *table = harness_random((size_t)H * (2 * R + 1), 34);
    for (uint32_t e = 0; e < B * dm; e++) q[e] *= 3.0f;
    vkf_tensor *tq = floats(ctx, q, (uint64_t)B * dm), *tk = floats(ctx, k, (uint64_t)B * keys * dm);
    vkf_tensor *tv = floats(ctx, v, (uint64_t)B * keys * dm), *to = floats(ctx, NULL, (uint64_t)B * dm);
    vkf_tensor *ts = floats(ctx, NULL, (uint64_t)B * H * keys), *tt = floats(ctx, table, (uint64_t)H * (2 * R + 1));
    vkf_tensor *rows = ints(ctx, pos, B);
    float *got = harness_alloc((size_t)B * dm * 4), *want = harness_alloc((size_t)B * dm * 4);
    char what[96];
    snprintf(what, sizeof what, "attention_decode (%s form, %u keys%s%s)", form, keys, bias ? ", T5 bias" : "",
             pattern ? ", local" : "");
    for (int pass = -1; pass < B; pass++) {
        vkf_tensor *state = pass < 0 ? rows : ints(ctx, &pos[pass], 1);
        vkf_attention_decode_desc d = {
            .batch = B, .heads = H, .head_dim = hd, .max_keys = keys, .scale = 0.25f,
            .q = tq, .q_batch = dm, .k = tk, .k_row = dm, .k_batch = (uint64_t)keys * dm,
            .v = tv, .v_row = dm, .v_batch = (uint64_t)keys * dm, .lengths = state, .length_from_state = true,
            .scratch = ts, .out = to, .rel_bias = bias ? tt : NULL, .rel_radius = R,
            .pattern = pattern, .window = 3, .stride = 1,
        };
        vkf_cmd *cmd;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        CHECK_OK(vkf_op_attention_decode(cmd, &d));
        submit(cmd);
        CHECK_OK(vkf_download_floats(to, pass < 0 ? got : want, (uint64_t)B * dm));
        if (pass >= 0 && pos[pass] >= 0) CHECK(same_row(what, (uint32_t)pass, got, want, dm));
        if (pass >= 0) vkf_tensor_destroy(state);
    }
    for (uint32_t b = 0; b < B; b++) /* a free slot attends to nothing: zeros */
        for (uint32_t c = 0; pos[b] < 0 && c < dm; c++) CHECK(got[b * dm + c] == 0.0f);
    vkf_tensor *all[] = {tq, tk, tv, to, ts, tt, rows};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vkf_tensor_destroy(all[i]);
    free(q), free(k), free(v), free(table), free(got), free(want);
}

/* logits_process (per-row prefix, limit; min_new, forced eos, penalty, an end id) and sample */
static void test_process_sample(vkf_context *ctx)
{
    const uint32_t V = 12, stride = 2 + 3;
    float *logits = harness_random((size_t)B * V, 41);
    int32_t inputs0[B * CAP], step_ids[B] = {4, 5, 1, 9};
    for (int i = 0; i < B * CAP; i++) inputs0[i] = (i * 7 + 3) % (int)V;
    /* rows: prefix length, limit, prefix ids */
    int32_t row_data[B * 5] = {2, 4, 6, 7, 0, /**/ 0, 3, 0, 0, 0, /**/ 1, 5, 8, 0, 0, /**/ 3, 11, 2, 3, 4};
    int32_t lists[1] = {2};                       /* the end id */
    vkf_tensor *tl = floats(ctx, logits, (uint64_t)B * V), *tsi = ints(ctx, step_ids, B);
    vkf_tensor *tin = ints(ctx, inputs0, B * CAP), *trd = ints(ctx, row_data, B * 5), *tli = ints(ctx, lists, 1);
    vkf_tensor *tsc = floats(ctx, NULL, (uint64_t)B * V), *rows = ints(ctx, POS, B);
    int32_t zero_ids[B] = {0}, tokens0[B * CAP] = {0};
    vkf_tensor *tid = ints(ctx, zero_ids, B), *tok = ints(ctx, tokens0, B * CAP);
    float got[B * 12], want[B * 12];
    int32_t got_in[B * CAP], want_in[B * CAP], got_id[B], want_id[B];
    vkf_generate_options so;
    vkf_generate_options_init(&so);
    so.sample = true, so.temperature = 0.7f, so.seed = 99, so.min_new = 3;
    for (int pass = -1; pass < B; pass++) {
        vkf_tensor *state = pass < 0 ? rows : ints(ctx, &POS[pass], 1);
        CHECK_OK(vkf_tensor_upload(tin, inputs0, sizeof inputs0));
        vkf_logits_process_desc d = {
            .rows = B, .vocab = V, .steps = CAP, .logits = tl, .state = state, .step_ids = tsi, .inputs = tin,
            .row_data = trd, .row_stride = stride, .lists = tli, .n_end = 1, .penalty = 1.3f, .min_new = 2,
            .forced_bos = -1, .forced_eos = true, .eos = 2, .scores = tsc};
        vkf_cmd *cmd;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        CHECK_OK(vkf_op_logits_process(cmd, &d));
        CHECK_OK(vkf_op_sample(cmd, tl, state, tid, tok, B, V, CAP, &so, 2));
        submit(cmd);
        CHECK_OK(vkf_download_floats(tsc, pass < 0 ? got : want, (uint64_t)B * V));
        CHECK_OK(vkf_tensor_download(tin, pass < 0 ? got_in : want_in, sizeof got_in));
        CHECK_OK(vkf_tensor_download(tid, pass < 0 ? got_id : want_id, sizeof got_id));
        if (pass >= 0 && POS[pass] >= 0) {
            CHECK(same_row("logits_process", (uint32_t)pass, got, want, V));
            CHECK(memcmp(got_in + pass * CAP, want_in + pass * CAP, CAP * 4) == 0);
            CHECK(got_id[pass] == want_id[pass]);
        }
        if (pass >= 0) vkf_tensor_destroy(state);
    }
    vkf_tensor *ts[] = {tl, tsi, tin, trd, tli, tsc, rows, tid, tok};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) vkf_tensor_destroy(ts[i]);
    free(logits);
}

int main(void)
{
    vkf_context *ctx = harness_context();
    for (int kind = 0; kind < 3; kind++) test_embed(ctx, kind);
    test_append_argmax_advance(ctx);
    test_attention(ctx, "device's", 24, (const int32_t[B]){5, -1, 0, 23}, false, 0);
    test_attention(ctx, "device's", 24, (const int32_t[B]){5, -1, 0, 23}, true, 0);
    test_attention(ctx, "device's", 24, (const int32_t[B]){17, -1, 0, 9}, true, VKF_ATTENTION_LOCAL);
    test_process_sample(ctx);
    harness_close(ctx);
    /* the GPUs' forms: a workgroup per (row, head), and split-K over long caches */
    setenv("VKFORMER_DECODE_FORM", "split", 1);
    ctx = harness_context();
    test_attention(ctx, "split", 24, (const int32_t[B]){5, -1, 0, 23}, true, 0);
    test_attention(ctx, "split-K", 600, (const int32_t[B]){590, -1, 0, 200}, true, 0);
    test_attention(ctx, "split-K", 600, (const int32_t[B]){300, 7, -1, 599}, false, VKF_ATTENTION_LOCAL);
    harness_close(ctx);
    return harness_result("rowpos");
}

/* LSH attention (src/attention_lsh.c) against the plain-C reference
 * (src/reference/reference_lsh.c):
 *  - stage by stage: the GPU's buckets equal the reference's (computed in double
 *    from the plan's rotations) except at near-ties; the GPU's sorted order is
 *    exactly the stable sort of the GPU's buckets; the output equals the
 *    reference's chunked attention + combine run from the GPU's sorted order;
 *  - properties: with one chunk (C >= n) the output is dense shared-QK attention
 *    for any number of rounds, and with one bucket too; the error against dense
 *    shared-QK attention falls as rounds are added; causal masks and key lengths;
 *  - odd sizes (n 1, 3, 100, 257; head_dim 1, 3, 64, 100), several batches and
 *    heads, the fused-QKV layout, a plan reused for a smaller n and twice in one
 *    command list;
 *  - bad arguments fail with a status and a message naming the problem. */
#include "harness.h"
#include "internal.h"
#include "attention/attention_lsh.h"
#include "reference/reference_lsh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Projections closer than this (normalised keys, double) may round either way in float. */
#define NEAR_TIE 1e-4

typedef struct lsh_case {
    uint32_t batch, heads, head_dim, n;
    uint32_t rounds, chunk, buckets;
    bool causal, lengths;
    bool qkv;                           /* one (batch * n, 3d) tensor: q at 0, v at 2d, row stride 3d */
    uint32_t max_n;                     /* the plan's; 0: n */
} lsh_case;

/* Workgroup sizes besides the device's own choice: a GPU's (attend: 64 invocations
 * of one row), a CPU driver's (8 of 4 rows), and odd ones that divide nothing. */
typedef struct tile_set {
    const char *name;
    uint32_t sort_wg, attend_wg, attend_bk, attend_tq;
} tile_set;
static const tile_set TILE_SETS[] = {
    {"gpu-64x1-bk32", 256, 64, 32, 1},
    {"cpu-8x4-bk32", 64, 8, 32, 4},
    {"odd-5x3-bk3", 7, 5, 3, 3},
    {"odd-1x1-bk1", 1, 1, 1, 1},
};
#define N_TILE_SETS (sizeof TILE_SETS / sizeof TILE_SETS[0])

/* Host data and device tensors of one problem. */
typedef struct problem {
    float *qh, *vh;                     /* owned; vh == qh for qkv */
    vkf_tensor *tq, *tv, *tl;           /* owned; tv == tq for qkv; tl NULL without lengths */
    int32_t lengths[4];
    ref_lsh_shape shape;
    vkf_lsh_desc desc;                  /* out not set */
} problem;

static vkf_tensor *i32_tensor(vkf_context *ctx, const int32_t *data, uint64_t count)
{
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &count, &t));
    CHECK_OK(vkf_tensor_upload(t, data, count * sizeof *data));
    return t;
}

static void problem_make(problem *p, vkf_context *ctx, const lsh_case *c, float scale, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    uint64_t dm = (uint64_t)c->heads * c->head_dim, rows = (uint64_t)c->batch * c->n;
    uint64_t row = c->qkv ? 3 * dm : dm;
    p->qh = harness_random(rows * row, seed);
    p->vh = c->qkv ? p->qh : harness_random(rows * dm, seed + 1);
    /* A zero query (a zero key: every projection 0, bucket 0). */
    if (c->n > 1)
        for (uint32_t x = 0; x < c->head_dim; x++) p->qh[1 * row + x] = 0.0f;
    p->tq = harness_tensor(ctx, p->qh, rows, row);
    p->tv = c->qkv ? p->tq : harness_tensor(ctx, p->vh, rows, dm);
    for (uint32_t b = 0; b < 4; b++) /* n, about n / 2, n / 3 (0 for n < 3), past n */
        p->lengths[b] = b == 0 ? (int32_t)c->n : b == 1 ? (int32_t)(c->n + 1) / 2 : b == 2 ? (int32_t)c->n / 3
                                                                                          : (int32_t)c->n + 7;
    if (c->lengths) p->tl = i32_tensor(ctx, p->lengths, c->batch);

    p->shape = (ref_lsh_shape){
        .batch = c->batch, .heads = c->heads, .head_dim = c->head_dim, .n = c->n,
        .rounds = c->rounds, .chunk = c->chunk, .buckets = vkf_lsh_bucket_count(c->n, c->chunk, c->buckets),
        .scale = scale, .lengths = c->lengths ? p->lengths : NULL, .causal = c->causal,
        .q = p->qh, .q_row = row, .q_batch = c->n * row,
        .v = c->qkv ? p->qh + 2 * dm : p->vh, .v_row = row, .v_batch = c->n * row,
    };
    vkf_lsh_desc *d = &p->desc;
    *d = (vkf_lsh_desc){
        .batch = c->batch, .heads = c->heads, .head_dim = c->head_dim, .n = c->n,
        .rounds = c->rounds, .chunk = c->chunk, .buckets = c->buckets, .scale = scale,
        .q = {p->tq, 0, row, 0},
        .v = {p->tv, c->qkv ? 2 * dm : 0, row, 0},
        .key_lengths = p->tl, .causal = c->causal,
    };
}

static void problem_free(problem *p)
{
    if (p->tv != p->tq) vkf_tensor_destroy(p->tv);
    vkf_tensor_destroy(p->tq), vkf_tensor_destroy(p->tl);
    if (p->vh != p->qh) free(p->vh);
    free(p->qh);
}

static void describe(char *what, size_t size, const lsh_case *c, const tile_set *ts)
{
    snprintf(what, size, "lsh%s%s B=%u heads=%u hd=%u n=%u (max %u) H=%u C=%u nb=%u%s%s%s", ts ? " tiles=" : "",
             ts ? ts->name : "", c->batch, c->heads,
             c->head_dim, c->n, c->max_n ? c->max_n : c->n, c->rounds, c->chunk,
             vkf_lsh_bucket_count(c->n, c->chunk, c->buckets), c->causal ? " causal" : "",
             c->lengths ? " lengths" : "", c->qkv ? " qkv" : "");
}

/* The GPU's buckets against the reference's (near-ties excepted), its sorted order
 * against the stable sort of its buckets, and its output against the reference's
 * stages 3-4 from that order. */
static void check_stages(const char *what, vkf_lsh_plan *plan, const problem *p, const float *got)
{
    const ref_lsh_shape *s = &p->shape;
    size_t slabs = s->batch * s->heads * s->rounds, count = slabs * s->n;
    int32_t *gpu_buckets = (int32_t *)harness_download(vkf_lsh_plan_buckets(plan));
    int32_t *gpu_sorted = (int32_t *)harness_download(vkf_lsh_plan_sorted(plan));
    const float *rot = vkf_lsh_plan_rotations(plan);
    CHECK((s->buckets == 1) == (rot == NULL));
    int32_t *want_buckets = harness_alloc(count * sizeof *want_buckets);
    double *margin = harness_alloc(count * sizeof *margin);
    ref_lsh_hash(want_buckets, margin, s, rot, vkf_lsh_plan_rotation_cols(plan));
    size_t mismatches = 0, ties = 0;
    for (size_t e = 0; e < count; e++) {
        if (gpu_buckets[e] == want_buckets[e]) continue;
        if (margin[e] < NEAR_TIE && gpu_buckets[e] >= 0 && gpu_buckets[e] < (int32_t)s->buckets) {
            ties++;
            continue;
        }
        if (mismatches++ == 0)
            fprintf(stderr, "%s: bucket of slab %zu token %zu: got %d, want %d (margin %g)\n", what, e / s->n,
                    e % s->n, gpu_buckets[e], want_buckets[e], margin[e]);
    }
    if (mismatches) {
        fprintf(stderr, "%s: %zu of %zu buckets differ\n", what, mismatches, count);
        harness_failures++;
    }
    if (ties) fprintf(stderr, "%s: %zu near-tie buckets differ (allowed)\n", what, ties);
    /* The zero query (b 0, token 1, head 0; problem_make) ties everywhere: bucket 0, the lowest index. */
    if (s->n > 1 && (!s->lengths || s->lengths[0] > 1))
        for (size_t r = 0; r < s->rounds; r++)
            if (gpu_buckets[r * s->n + 1] != 0) {
                fprintf(stderr, "%s: the zero query's bucket in round %zu is %d, not 0\n", what, r,
                        gpu_buckets[r * s->n + 1]);
                harness_failures++;
            }

    int32_t *want_sorted = harness_alloc(count * sizeof *want_sorted);
    ref_lsh_sort(want_sorted, gpu_buckets, slabs, s->n);
    for (size_t e = 0; e < count; e++)
        if (gpu_sorted[e] != want_sorted[e]) {
            fprintf(stderr, "%s: sorted slab %zu entry %zu: got %d, want %d\n", what, e / s->n, e % s->n,
                    gpu_sorted[e], want_sorted[e]);
            harness_failures++;
            break;
        }

    size_t out_n = s->batch * s->n * s->heads * s->head_dim;
    float *want = harness_alloc(out_n * sizeof *want);
    ref_lsh_attend(want, s, gpu_sorted);
    char label[256];
    snprintf(label, sizeof label, "%s vs reference from GPU order", what);
    harness_compare(label, got, want, out_n, 1e-4, 1e-4);
    free(gpu_buckets), free(gpu_sorted), free(want_buckets), free(margin), free(want_sorted), free(want);
}

/* One case through the op, checked stage by stage. Where max_n > n, the same plan
 * then runs n and a smaller n2 in one command list (its scratch reused, the second
 * call ordered after the first by the recorder's barriers). */
static void run_case(vkf_context *ctx, const lsh_case *c, const tile_set *ts, uint64_t seed)
{
    char what[192];
    describe(what, sizeof what, c, ts);
    problem p;
    float scale = 2.0f / sqrtf((float)c->head_dim);
    problem_make(&p, ctx, c, scale, seed);
    uint64_t out_n = (uint64_t)c->batch * c->n * c->heads * c->head_dim;
    vkf_tensor *to = harness_tensor(ctx, NULL, 1, out_n);
    p.desc.out = to;
    vkf_lsh_plan *plan = NULL;
    CHECK_OK(vkf_lsh_plan_create(ctx, &p.desc, c->max_n ? c->max_n : c->n, seed * 31 + 5, &plan));
    if (plan && ts) CHECK_OK(vkf_lsh_plan_set_tiles(plan, ts->sort_wg, ts->attend_wg, ts->attend_bk, ts->attend_tq));
    if (!plan) {
        problem_free(&p);
        vkf_tensor_destroy(to);
        return;
    }
    /* n2: the smaller problem (first rows of each batch, n2 tokens) run after it. */
    lsh_case c2 = *c;
    c2.n = c->max_n ? (c->n + 1) / 2 : 0;
    problem p2;
    vkf_tensor *to2 = NULL;
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_op_attention_lsh(cmd, plan, &p.desc));
    if (c2.n) {
        problem_make(&p2, ctx, &c2, scale, seed + 100);
        to2 = harness_tensor(ctx, NULL, 1, (uint64_t)c2.batch * c2.n * c2.heads * c2.head_dim);
        p2.desc.out = to2;
        CHECK_OK(vkf_op_attention_lsh(cmd, plan, &p2.desc));
    }
    CHECK_OK(vkf_cmd_submit(cmd));
    vkf_cmd_destroy(cmd);
    float *got = harness_download(to);
    if (c2.n) {
        /* The plan's scratch now holds the second call: check that one stage by
         * stage, the first against the whole reference where no bucket is near a tie. */
        float *got2 = harness_download(to2);
        char what2[192];
        describe(what2, sizeof what2, &c2, ts);
        check_stages(what2, plan, &p2, got2);
        /* A near-tie (0 < margin < NEAR_TIE; the zero query's exact tie goes to
         * bucket 0 on both sides) may round either way in float: then skip. */
        size_t count = (size_t)c->batch * c->heads * c->rounds * c->n;
        int32_t *buckets = harness_alloc(count * sizeof *buckets);
        double *margin = harness_alloc(count * sizeof *margin);
        ref_lsh_hash(buckets, margin, &p.shape, vkf_lsh_plan_rotations(plan), vkf_lsh_plan_rotation_cols(plan));
        bool near_tie = false;
        for (size_t e = 0; e < count; e++) near_tie |= margin[e] > 0 && margin[e] < NEAR_TIE;
        if (near_tie) {
            fprintf(stderr, "%s: a near-tie bucket; first call not compared with the whole reference\n", what);
        } else {
            float *want = harness_alloc(out_n * sizeof *want);
            ref_lsh_attention(want, &p.shape, vkf_lsh_plan_rotations(plan), vkf_lsh_plan_rotation_cols(plan));
            char label[256];
            snprintf(label, sizeof label, "%s (first call) vs whole reference", what);
            harness_compare(label, got, want, out_n, 1e-4, 1e-4);
            free(want);
        }
        free(got2), free(buckets), free(margin);
        problem_free(&p2);
        vkf_tensor_destroy(to2);
    } else {
        check_stages(what, plan, &p, got);
    }
    free(got);
    vkf_lsh_plan_destroy(plan);
    vkf_tensor_destroy(to);
    problem_free(&p);
}

static const lsh_case CASES[] = {
    /* odd sizes: n 1, 3, 100, 257; head_dim 1, 3, 64, 100; batches and heads */
    {1, 1, 64, 1, .rounds = 1, .chunk = 4},
    {2, 3, 3, 3, .rounds = 2, .chunk = 1},
    {1, 2, 64, 100, .rounds = 2, .chunk = 8},
    {2, 2, 100, 257, .rounds = 3, .chunk = 16},
    {3, 1, 1, 100, .rounds = 2, .chunk = 7},
    {1, 4, 64, 257, .rounds = 4, .chunk = 32, .buckets = 6},
    {2, 1, 8, 257, .rounds = 1, .chunk = 5},                       /* 52 buckets */
    {1, 1, 8, 100, .rounds = 2, .chunk = 100, .buckets = 1},        /* one bucket, one chunk */
    {1, 1, 8, 100, .rounds = 2, .chunk = 16, .buckets = 1},         /* one bucket, chunks in position order */
    {1, 1, 16, 64, .rounds = 2, .chunk = 8, .buckets = 2},
    /* causal, key lengths (one of about n / 3, one past n) */
    {1, 2, 64, 257, .rounds = 2, .chunk = 16, .causal = true},
    {3, 2, 16, 100, .rounds = 3, .chunk = 8, .lengths = true},
    {4, 1, 3, 64, .rounds = 2, .chunk = 4, .lengths = true, .causal = true},
    {3, 2, 1, 3, .rounds = 2, .chunk = 1, .lengths = true},
    /* fused QKV layout */
    {2, 4, 16, 100, .rounds = 2, .chunk = 8, .qkv = true},
    {1, 8, 64, 257, .rounds = 2, .chunk = 32, .qkv = true, .causal = true},
    /* a plan for max_n, run at n and then n / 2 in one list */
    {2, 2, 16, 100, .rounds = 2, .chunk = 8, .max_n = 257, .lengths = true},
    {1, 2, 64, 257, .rounds = 3, .chunk = 16, .max_n = 300, .qkv = true, .causal = true},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

/* ------------------------------------------------------------------ properties */

/* The op's output for case c, with seeds for data and rotations; out_shape gets
 * the reference's view of the data (its q, v point into *p, freed by the caller). */
static float *run_op(vkf_context *ctx, const lsh_case *c, float scale, uint64_t seed, uint64_t rot_seed, problem *p)
{
    problem_make(p, ctx, c, scale, seed);
    uint64_t out_n = (uint64_t)c->batch * c->n * c->heads * c->head_dim;
    vkf_tensor *to = harness_tensor(ctx, NULL, 1, out_n);
    p->desc.out = to;
    vkf_lsh_plan *plan = NULL;
    CHECK_OK(vkf_lsh_plan_create(ctx, &p->desc, c->n, rot_seed, &plan));
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_op_attention_lsh(cmd, plan, &p->desc));
    CHECK_OK(vkf_cmd_submit(cmd));
    vkf_cmd_destroy(cmd);
    float *got = harness_download(to);
    vkf_lsh_plan_destroy(plan);
    vkf_tensor_destroy(to);
    return got;
}

/* One chunk (C >= n): every query sees every key in every round, so any number
 * of rounds and buckets gives dense shared-QK attention. */
static void test_one_chunk(vkf_context *ctx)
{
    static const lsh_case cases[] = {
        {1, 2, 64, 100, .rounds = 1, .chunk = 100},
        {2, 2, 16, 100, .rounds = 3, .chunk = 128},
        {1, 1, 8, 64, .rounds = 4, .chunk = 64, .buckets = 1},
        {3, 2, 16, 64, .rounds = 2, .chunk = 70, .causal = true, .lengths = true},
        {1, 3, 100, 257, .rounds = 2, .chunk = 300, .causal = true, .qkv = true},
        {1, 1, 3, 1, .rounds = 2, .chunk = 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const lsh_case *c = &cases[i];
        problem p;
        float *got = run_op(ctx, c, 2.0f / sqrtf((float)c->head_dim), 900 + i, 17 + i, &p);
        size_t out_n = (size_t)c->batch * c->n * c->heads * c->head_dim;
        float *want = harness_alloc(out_n * sizeof *want);
        ref_shared_qk_attention(want, &p.shape);
        char what[256], label[288];
        describe(what, sizeof what, c, NULL);
        snprintf(label, sizeof label, "%s vs dense shared-QK", what);
        harness_compare(label, got, want, out_n, 1e-5, 1e-4);
        free(got), free(want);
        problem_free(&p);
    }
}

/* n 256, C 32 (8 buckets): each round sees about a quarter of the keys, the keys
 * a query is most similar to first; more rounds see more of them, so the error
 * against dense shared-QK attention falls. Mean absolute error over the rows, for
 * H = 1, 2, 4, 8 on the same data, averaged over three rotation seeds. */
static void test_rounds_reduce_error(vkf_context *ctx)
{
    static const uint32_t rounds[] = {1, 2, 4, 8};
    double err[4] = {0};
    lsh_case c = {1, 2, 32, 256, .chunk = 32};
    float scale = 4.0f / sqrtf((float)c.head_dim); /* peaky enough that the nearest keys matter */
    size_t out_n = (size_t)c.batch * c.n * c.heads * c.head_dim;
    float *dense = NULL;
    for (size_t k = 0; k < 4; k++)
        for (uint64_t rs = 0; rs < 3; rs++) {
            c.rounds = rounds[k];
            problem p;
            float *got = run_op(ctx, &c, scale, 4242, 77 + rs, &p);
            if (!dense) {
                dense = harness_alloc(out_n * sizeof *dense);
                ref_shared_qk_attention(dense, &p.shape);
            }
            double sum = 0;
            for (size_t e = 0; e < out_n; e++) sum += fabs((double)got[e] - dense[e]);
            err[k] += sum / out_n / 3;
            free(got);
            problem_free(&p);
        }
    fprintf(stderr, "lsh mean |error| vs dense shared-QK (n 256, C 32): H=1 %.4f, H=2 %.4f, H=4 %.4f, H=8 %.4f\n",
            err[0], err[1], err[2], err[3]);
    CHECK(err[1] < err[0] && err[2] < err[1] && err[3] < err[2]);
    CHECK(err[3] < 0.6 * err[0]);
    free(dense);
}

/* ------------------------------------------------------------------ bad arguments */

static void test_bad_arguments(vkf_context *ctx, const vkf_device_info *info)
{
    uint32_t B = 2, H = 2, hd = 8, n = 17, dm = H * hd;
    vkf_tensor *tq = harness_tensor(ctx, NULL, B * n, dm), *tv = harness_tensor(ctx, NULL, B * n, dm);
    vkf_tensor *to = harness_tensor(ctx, NULL, B * n, dm), *small = harness_tensor(ctx, NULL, 1, 10);
    int32_t lens[2] = {3, 17};
    vkf_tensor *tl = i32_tensor(ctx, lens, 2), *tl1 = i32_tensor(ctx, lens, 1);
    vkf_lsh_desc good = {
        .batch = B, .heads = H, .head_dim = hd, .n = n, .rounds = 2, .chunk = 4, .scale = 0.3f,
        .q = {tq, 0, 0, 0}, .v = {tv, 0, 0, 0}, .key_lengths = tl, .out = to,
    };
    vkf_lsh_plan *plan = NULL, *other = NULL, *bad = (vkf_lsh_plan *)1;
    CHECK_OK(vkf_lsh_plan_create(ctx, &good, n, 1, &plan));
    CHECK(plan && vkf_lsh_plan_bytes(plan) > 0);
    vkf_lsh_desc d;

    /* plan creation */
    CHECK_FAIL(vkf_lsh_plan_create(NULL, &good, n, 1, &bad), VKF_ERROR_INVALID_ARGUMENT, "context");
    CHECK(bad == NULL);
    CHECK_FAIL(vkf_lsh_plan_create(ctx, NULL, n, 1, &other), VKF_ERROR_INVALID_ARGUMENT, "shape");
    CHECK_FAIL(vkf_lsh_plan_create(ctx, &good, n, 1, NULL), VKF_ERROR_INVALID_ARGUMENT, "out_plan");
    CHECK_FAIL(vkf_lsh_plan_create(ctx, &good, 0, 1, &other), VKF_ERROR_INVALID_ARGUMENT, "max_n");
#define BAD_PLAN(change, status, keyword)                                                                   \
    do {                                                                                                    \
        d = good;                                                                                           \
        change;                                                                                             \
        CHECK_FAIL(vkf_lsh_plan_create(ctx, &d, n, 1, &other), status, keyword);                            \
        CHECK(other == NULL);                                                                               \
    } while (0)
    BAD_PLAN(d.batch = 0, VKF_ERROR_INVALID_ARGUMENT, "batch 0");
    BAD_PLAN(d.heads = 0, VKF_ERROR_INVALID_ARGUMENT, "heads 0");
    BAD_PLAN(d.head_dim = 0, VKF_ERROR_INVALID_ARGUMENT, "head_dim 0");
    BAD_PLAN(d.rounds = 0, VKF_ERROR_INVALID_ARGUMENT, "rounds 0");
    BAD_PLAN(d.chunk = 0, VKF_ERROR_INVALID_ARGUMENT, "chunk 0");
    BAD_PLAN(d.head_dim = 257, VKF_ERROR_UNSUPPORTED, "head_dim 257");
    BAD_PLAN(d.buckets = 3, VKF_ERROR_INVALID_ARGUMENT, "buckets 3");
    /* More buckets than the sort's shared-memory counters hold. */
    BAD_PLAN(d.buckets = info->max_shared_memory / 2, VKF_ERROR_UNSUPPORTED, "shared memory");
    d = good;
    d.chunk = 1, d.batch = 1, d.heads = 1;  /* derived: 65536 buckets for n 65536 */
    CHECK_FAIL(vkf_lsh_plan_create(ctx, &d, 65536, 1, &other), VKF_ERROR_UNSUPPORTED, "65536 buckets");
    CHECK_FAIL(vkf_lsh_plan_create(ctx, &good, 0x80000000u, 1, &other), VKF_ERROR_TOO_LARGE, "max_n");
    /* Round outputs past 2^32 elements. */
    d = good;
    d.batch = 1024, d.heads = 1024, d.head_dim = 256, d.buckets = 2;
    CHECK_FAIL(vkf_lsh_plan_create(ctx, &d, 1024, 1, &other), VKF_ERROR_TOO_LARGE, "2^32");
#undef BAD_PLAN

    /* recording */
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_FAIL(vkf_op_attention_lsh(NULL, plan, &good), VKF_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAIL(vkf_op_attention_lsh(cmd, plan, NULL), VKF_ERROR_INVALID_ARGUMENT, "NULL");
    CHECK_FAIL(vkf_op_attention_lsh(cmd, NULL, &good), VKF_ERROR_INVALID_ARGUMENT, "plan");
#define BAD(change, status, keyword)                                                                        \
    do {                                                                                                    \
        d = good;                                                                                           \
        change;                                                                                             \
        CHECK_FAIL(vkf_op_attention_lsh(cmd, plan, &d), status, keyword);                                   \
    } while (0)
    BAD(d.batch = 0, VKF_ERROR_INVALID_ARGUMENT, "batch 0");
    BAD(d.n = 0, VKF_ERROR_INVALID_ARGUMENT, "n must be positive");
    BAD(d.head_dim = 300, VKF_ERROR_UNSUPPORTED, "head_dim 300");
    BAD(d.rounds = 3, VKF_ERROR_INVALID_ARGUMENT, "does not match the plan");
    BAD(d.chunk = 5, VKF_ERROR_INVALID_ARGUMENT, "does not match the plan");
    BAD(d.buckets = 4, VKF_ERROR_INVALID_ARGUMENT, "does not match the plan");
    BAD(d.heads = 1, VKF_ERROR_INVALID_ARGUMENT, "does not match the plan");
    BAD(d.n = n + 1, VKF_ERROR_INVALID_ARGUMENT, "max_n");
    BAD(d.scale = NAN, VKF_ERROR_INVALID_ARGUMENT, "scale");
    BAD(d.scale = 3e38f, VKF_ERROR_INVALID_ARGUMENT, "scale");
    BAD(d.q.tensor = NULL, VKF_ERROR_INVALID_ARGUMENT, "q is NULL");
    BAD(d.v.tensor = small, VKF_ERROR_INVALID_ARGUMENT, "v view");
    BAD(d.q.offset = 1, VKF_ERROR_INVALID_ARGUMENT, "q view");
    BAD(d.v.row_stride = dm - 1, VKF_ERROR_INVALID_ARGUMENT, "row_stride");
    BAD(d.q.tensor = tl, VKF_ERROR_INVALID_ARGUMENT, "F32");
    BAD(d.key_lengths = tq, VKF_ERROR_INVALID_ARGUMENT, "key_lengths must be I32");
    BAD(d.key_lengths = tl1, VKF_ERROR_INVALID_ARGUMENT, "key_lengths holds");
    BAD(d.out = NULL, VKF_ERROR_INVALID_ARGUMENT, "out is NULL");
    BAD(d.out = small, VKF_ERROR_INVALID_ARGUMENT, "out holds");
    BAD(d.out = tv, VKF_ERROR_INVALID_ARGUMENT, "alias");
#undef BAD
    CHECK(vkf_cmd_op_count(cmd) == 0); /* nothing was recorded */
    CHECK_FAIL(vkf_lsh_plan_set_tiles(plan, 0, 8, 8, 1), VKF_ERROR_INVALID_ARGUMENT, "positive");
    CHECK_FAIL(vkf_lsh_plan_set_tiles(plan, 64, info->max_workgroup_invocations + 1, 8, 1), VKF_ERROR_UNSUPPORTED,
               "exceed");
    CHECK_FAIL(vkf_lsh_plan_set_tiles(plan, 64, 8, info->max_shared_memory / 64, 1), VKF_ERROR_UNSUPPORTED,
               "shared memory");
    /* A valid call still records and runs on the same list, and a submitted list refuses more. */
    vkf_tensor_destroy(to);
    to = harness_tensor(ctx, NULL, B * n, dm);
    good.out = to;
    CHECK_OK(vkf_op_attention_lsh(cmd, plan, &good));
    CHECK(vkf_cmd_op_count(cmd) == 4);
    CHECK_OK(vkf_cmd_submit(cmd));
    CHECK_FAIL(vkf_op_attention_lsh(cmd, plan, &good), VKF_ERROR_STATE, "submitted");
    vkf_cmd_destroy(cmd);
    vkf_lsh_plan_destroy(plan);
    vkf_lsh_plan_destroy(NULL);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tv), vkf_tensor_destroy(to), vkf_tensor_destroy(small);
    vkf_tensor_destroy(tl), vkf_tensor_destroy(tl1);
}

int main(void)
{
    vkf_context *ctx = harness_context();
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    for (size_t i = 0; i < N_CASES; i++) run_case(ctx, &CASES[i], NULL, 1000 + 16 * i);
    /* Each case again with one of the other tile sets, in turn (every set on
     * head_dim 64 and 100 at least). */
    for (size_t i = 0; i < N_CASES; i++) {
        const tile_set *ts = &TILE_SETS[i % N_TILE_SETS];
        if (ts->attend_tq * ((CASES[i].head_dim + 3) / 4) > 64) continue; /* slow to compile on CPU drivers */
        run_case(ctx, &CASES[i], ts, 5000 + 16 * i);
    }
    test_one_chunk(ctx);
    test_rounds_reduce_error(ctx);
    test_bad_arguments(ctx, &info);
    harness_close(ctx);
    return harness_result("test_lsh");
}

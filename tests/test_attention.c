/* The fused attention kernel (attention_fused.comp) against the plain-C reference:
 * sequence lengths 1, 3, 17, 64, 100, 257 and 1000 as queries and as keys, head_dim
 * 1..256, 1..8 heads, batches of 1..3, key padding, causal masks with and without
 * an offset, the local, strided, bigbird and tglobal (LongT5's transient-global:
 * global keys given, their count per key length) patterns, T5's relative position
 * bias (local and global tables), fused-QKV and cross-attention layouts,
 * and the CPU (one invocation per query) and GPU (several per query) forms of the
 * kernel with odd tile sizes; the cooperative-matrix kernel (attention_flash.comp)
 * on the same masks where the context has coopmat (else: that forcing it fails).
 * Then: fused equals the dense-naive path (matmul → softmax with the same mask as
 * an additive tensor → matmul), and bad arguments fail with a status and a message. */
#include "harness.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum layout {
    LAYOUT_PACKED,                      /* q, k, v separate (batch * rows, heads * head_dim) tensors */
    LAYOUT_PADDED,                      /* each at an offset, with padded rows and batches */
    LAYOUT_QKV,                         /* one (batch * rows, 3d) tensor: row stride 3d, offsets 0, d, 2d */
    LAYOUT_CROSS,                       /* q packed; k, v from one (batch * lk, 2d) tensor: row stride 2d */
};

typedef struct att_case {
    uint32_t batch, heads, head_dim, lq, lk;
    bool lengths;                       /* key padding: lengths lk + 5, about lk / 2, lk / 3 (or -1) */
    bool causal;
    uint32_t causal_offset;
    vkf_attention_pattern pattern;
    uint32_t window, stride;
    enum layout layout;
    uint32_t bb_block, bb_globals, bb_random;   /* bigbird:B:G:R */
    bool bias;                          /* T5's relative position bias, radius `radius` (tglobal: global table too) */
    uint32_t radius;
    uint32_t gblock;                    /* tglobal:window:gblock */
} att_case;

/* Tile sets the kernel is run with besides the device's own choice: the rows form
 * (td 1, CPU drivers) and the split form (td > 1, GPUs), with tiles that divide
 * nothing and with the tiles a GPU gets for head_dim 64. */
typedef struct tile_set {
    const char *name;
    vkf_attention_tiles tiles;
} tile_set;

static const tile_set TILE_SETS[] = {
    {"rows-bq5-bk3", {.workgroup = 5, .bq = 5, .bk = 3, .td = 1, .tq = 1}},
    {"rows-bq12-bk7-tq3", {.workgroup = 4, .bq = 12, .bk = 7, .td = 1, .tq = 3}},
    {"split-bq4-bk7-td3", {.workgroup = 12, .bq = 4, .bk = 7, .td = 3, .tq = 1}},
    {"split-bq8-bk8-td4", {.workgroup = 32, .bq = 8, .bk = 8, .td = 4, .tq = 1}},
    {"split-bq16-bk16-td8", {.workgroup = 128, .bq = 16, .bk = 16, .td = 8, .tq = 1}},
    {"split-bq32-bk32-td8", {.workgroup = 256, .bq = 32, .bk = 32, .td = 8, .tq = 1}}, /* a GPU's, head_dim <= 64 */
};
#define N_TILE_SETS (sizeof TILE_SETS / sizeof TILE_SETS[0])

static const char *pattern_name(vkf_attention_pattern p)
{
    return p == VKF_ATTENTION_LOCAL     ? "local"
           : p == VKF_ATTENTION_STRIDED ? "strided"
           : p == VKF_ATTENTION_BIGBIRD ? "bigbird"
           : p == VKF_ATTENTION_TGLOBAL ? "tglobal"
                                        : "dense";
}

static void describe(char *what, size_t size, const att_case *c, const char *tiles)
{
    static const char *layouts[] = {"packed", "padded", "qkv", "cross"};
    if (c->pattern == VKF_ATTENTION_BIGBIRD)
        snprintf(what, size, "attention B=%u H=%u hd=%u lq=%u lk=%u %s%s causal=%d+%u bigbird:%u:%u:%u tiles=%s",
                 c->batch, c->heads, c->head_dim, c->lq, c->lk, layouts[c->layout], c->lengths ? " lengths" : "",
                 c->causal, c->causal_offset, c->bb_block, c->bb_globals, c->bb_random, tiles);
    else
        snprintf(what, size, "attention B=%u H=%u hd=%u lq=%u lk=%u %s%s causal=%d+%u %s:%u:%u tiles=%s", c->batch,
                 c->heads, c->head_dim, c->lq, c->lk, layouts[c->layout], c->lengths ? " lengths" : "", c->causal,
                 c->causal_offset, pattern_name(c->pattern), c->window,
                 c->pattern == VKF_ATTENTION_TGLOBAL ? c->gblock : c->stride, tiles);
    if (c->bias) {
        size_t len = strlen(what);
        snprintf(what + len, size - len, " bias R=%u", c->radius);
    }
}

/* T5's bias tables and tglobal's global keys of a case (host copies in *ext). */
typedef struct extras {
    float *table;                       /* (heads, 2R + 1) local, then (heads, 2R + 1) global when tglobal */
    float *gkv;                         /* (batch, gmax, 2 dm): keys, then values */
    uint32_t gmax;
    vkf_tensor *t_table, *t_gkv;
} extras;

static void extras_make(vkf_context *ctx, const att_case *c, vkf_dtype dtype, uint64_t seed, vkf_attention_desc *d,
                        ref_attention_mask *mask, extras *ext)
{
    memset(ext, 0, sizeof *ext);
    uint64_t dm = (uint64_t)c->heads * c->head_dim;
    bool tglobal = c->pattern == VKF_ATTENTION_TGLOBAL;
    if (c->bias) {
        uint64_t width = 2ull * c->radius + 1, n = c->heads * width * (tglobal ? 2 : 1);
        ext->table = harness_random(n, seed + 11);
        for (uint64_t e = 0; e < n; e++) ext->table[e] *= 3.0f; /* a bias that moves the softmax */
        ext->t_table = harness_tensor(ctx, ext->table, 1, n);
        d->bias_table = ext->t_table, d->rel_bias = true, d->rel_radius = c->radius;
        mask->rel_bias = ext->table, mask->rel_radius = c->radius;
        if (tglobal) {
            d->global_bias = true, d->global_radius = c->radius;
            mask->global_bias = ext->table + c->heads * width, mask->global_radius = c->radius;
        }
    }
    if (tglobal) {
        ext->gmax = c->lk / c->gblock;
        d->global_block = c->gblock, d->global_max = ext->gmax;
        mask->global_block = c->gblock, mask->global_max = ext->gmax, mask->global_row = 2 * dm;
        if (ext->gmax) {
            uint64_t n = (uint64_t)c->batch * ext->gmax * 2 * dm;
            ext->gkv = harness_random(n, seed + 12);
            uint16_t *h = harness_alloc(n * 2);
            for (uint64_t e = 0; e < n; e++) ext->gkv[e] = ref_f16_to_f32(h[e] = ref_f32_to_f16(ext->gkv[e]));
            CHECK_OK(vkf_tensor_create(ctx, dtype, 1, &n, &ext->t_gkv));
            CHECK_OK(vkf_tensor_upload(ext->t_gkv, dtype == VKF_DTYPE_F16 ? (void *)h : (void *)ext->gkv,
                                       n * (dtype == VKF_DTYPE_F16 ? 2 : 4)));
            free(h);
            d->global_kv = ext->t_gkv;
            mask->global_k = ext->gkv, mask->global_v = ext->gkv + dm;
        }
    }
}

static void extras_free(extras *ext)
{
    vkf_tensor_destroy(ext->t_table), vkf_tensor_destroy(ext->t_gkv);
    free(ext->table), free(ext->gkv);
}

static vkf_tensor *lengths_tensor(vkf_context *ctx, const int32_t *lengths, uint32_t batch)
{
    uint64_t shape = batch;
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &shape, &t));
    CHECK_OK(vkf_tensor_upload(t, lengths, batch * sizeof *lengths));
    return t;
}

/* BigBird's mask as an explicit (lq, lk) matrix, from its definition: query
 * block qi sees key block kj iff they are within one block, either is one of the
 * first G, or kj is among qi's random blocks. Only the random draw comes from the
 * library. */
static unsigned char *bigbird_matrix(const vkf_bigbird *bb, uint32_t lq, uint32_t lk)
{
    uint32_t B = bb->block, nkb = (lk + B - 1) / B;
    unsigned char *m = harness_alloc((size_t)lq * lk);
    int32_t rnd[VKF_BIGBIRD_MAX_RANDOM];
    for (uint32_t i = 0; i < lq; i++) {
        uint32_t qi = i / B;
        vkf_bigbird_random_blocks(bb, qi, nkb, rnd);
        for (uint32_t j = 0; j < lk; j++) {
            uint32_t kj = j / B;
            bool ok = qi < bb->globals || kj < bb->globals || (qi > kj ? qi - kj : kj - qi) <= 1;
            for (uint32_t t = 0; t < bb->random; t++) ok |= rnd[t] == (int32_t)kj;
            m[(size_t)i * lk + j] = ok;
        }
    }
    return m;
}

/* The random draw: distinct blocks, none already seen, earlier ones only when
 * causal, the same for the same seed, other blocks for another seed. */
static void test_bigbird_random(void)
{
    vkf_bigbird bb = {.block = 4, .globals = 2, .random = 3, .seed = 11};
    int32_t a[VKF_BIGBIRD_MAX_RANDOM], b[VKF_BIGBIRD_MAX_RANDOM];
    uint32_t nkb = 40, differ = 0;
    for (uint32_t causal = 0; causal < 2; causal++) {
        bb.causal = causal;
        for (uint32_t qb = 0; qb < nkb; qb++) {
            vkf_bigbird_random_blocks(&bb, qb, nkb, a);
            uint32_t hi = causal ? (qb >= 1 ? qb - 1 : 0) : nkb;
            uint32_t candidates = 0;
            for (uint32_t kb = bb.globals; kb < hi; kb++) candidates += (kb + 1 < qb || kb > qb + 1);
            uint32_t expect = qb < bb.globals ? 0 : candidates < bb.random ? candidates : bb.random;
            for (uint32_t t = 0; t < bb.random; t++) {
                if (t >= expect) {
                    CHECK(a[t] == -1);
                    continue;
                }
                CHECK(a[t] >= (int32_t)bb.globals && a[t] < (int32_t)hi);
                CHECK(a[t] + 1 < (int32_t)qb || a[t] > (int32_t)qb + 1);
                for (uint32_t u = 0; u < t; u++) CHECK(a[u] != a[t]);
            }
            vkf_bigbird_random_blocks(&bb, qb, nkb, b);
            CHECK(memcmp(a, b, sizeof(int32_t) * bb.random) == 0);
            bb.seed = 12;
            vkf_bigbird_random_blocks(&bb, qb, nkb, b);
            bb.seed = 11;
            differ += memcmp(a, b, sizeof(int32_t) * bb.random) != 0;
        }
    }
    CHECK(differ > 20);
    /* Causal draws do not depend on the sequence length. */
    bb.causal = true;
    vkf_bigbird_random_blocks(&bb, 30, 31, a);
    vkf_bigbird_random_blocks(&bb, 30, 400, b);
    CHECK(memcmp(a, b, sizeof(int32_t) * bb.random) == 0);
}

/* Runs one case with the given tiles (NULL: the device's) and compares with the
 * reference. */
static void run_case(vkf_context *ctx, const att_case *c, const tile_set *ts, uint64_t seed)
{
    uint64_t dm = (uint64_t)c->heads * c->head_dim;
    /* Host arrays and the view of each of q, k, v into them (offsets in elements). */
    uint64_t q_off = 0, k_off = 0, v_off = 0, q_row = dm, k_row = dm, v_row = dm;
    uint64_t q_batch = c->lq * dm, k_batch = c->lk * dm, v_batch = c->lk * dm;
    uint64_t q_n, k_n, v_n;             /* elements of each tensor (shared ones counted once) */
    switch (c->layout) {
    case LAYOUT_PADDED:
        q_off = 5, k_off = 2, v_off = 7;
        q_row = dm + 3, k_row = dm + 1, v_row = dm + 4;
        q_batch = c->lq * q_row + 7, k_batch = c->lk * k_row + 2, v_batch = c->lk * v_row + 9;
        break;
    case LAYOUT_QKV:
        k_off = dm, v_off = 2 * dm;
        q_row = k_row = v_row = 3 * dm;
        q_batch = k_batch = v_batch = c->lq * 3 * dm;
        break;
    case LAYOUT_CROSS:
        v_off = dm;
        k_row = v_row = 2 * dm;
        k_batch = v_batch = c->lk * 2 * dm;
        break;
    default:
        break;
    }
    q_n = q_off + c->batch * q_batch;
    k_n = k_off + c->batch * k_batch;
    v_n = v_off + c->batch * v_batch;
    if (c->layout == LAYOUT_QKV) q_n = k_n = v_n = (uint64_t)c->batch * c->lq * 3 * dm;
    if (c->layout == LAYOUT_CROSS) k_n = v_n = (uint64_t)c->batch * c->lk * 2 * dm;

    /* Fused QKV: one buffer for all three; cross: K and V share one. */
    float *qh = harness_random(q_n, seed);
    float *kh = c->layout == LAYOUT_QKV ? qh : harness_random(k_n, seed + 1);
    float *vh = c->layout == LAYOUT_QKV ? qh : c->layout == LAYOUT_CROSS ? kh : harness_random(v_n, seed + 2);
    vkf_tensor *tq = harness_tensor(ctx, qh, 1, q_n);
    vkf_tensor *tk = c->layout == LAYOUT_QKV ? tq : harness_tensor(ctx, kh, 1, k_n);
    vkf_tensor *tv = c->layout == LAYOUT_QKV ? tq : c->layout == LAYOUT_CROSS ? tk : harness_tensor(ctx, vh, 1, v_n);
    int32_t lengths[3] = {0, 0, 0};
    for (uint32_t b = 0; b < c->batch && b < 3; b++)
        lengths[b] = b == 0 ? (int32_t)c->lk + 5 : b == 1 ? (int32_t)(c->lk + 1) / 2 : c->lk > 3 ? (int32_t)c->lk / 3 : -1;
    vkf_tensor *tl = c->lengths ? lengths_tensor(ctx, lengths, c->batch) : NULL;
    uint64_t out_n = (uint64_t)c->batch * c->lq * dm;
    float *sentinel = harness_random(out_n, seed + 3); /* an element the kernel misses shows as a mismatch */
    vkf_tensor *to = harness_tensor(ctx, sentinel, 1, out_n);

    vkf_attention_desc d;
    vkf_attention_desc_init(&d);
    d.batch = c->batch, d.heads = c->heads, d.head_dim = c->head_dim, d.lq = c->lq, d.lk = c->lk;
    d.scale = 3.0f / sqrtf((float)c->head_dim); /* peaky enough that the running max moves */
    d.q = (vkf_attention_view){tq, q_off, q_row, c->layout == LAYOUT_QKV ? 0 : q_batch};
    d.k = (vkf_attention_view){tk, k_off, k_row, k_batch};
    d.v = (vkf_attention_view){tv, v_off, v_row, v_batch};
    d.key_lengths = tl;
    d.causal = c->causal, d.causal_offset = c->causal_offset;
    d.pattern = c->pattern, d.window = c->window, d.stride = c->stride;
    d.bigbird = (vkf_bigbird){c->bb_block, c->bb_globals, c->bb_random, c->causal, seed * 31};
    d.out = to;
    d.tiles = ts ? &ts->tiles : NULL;
    vkf_tensor *table = NULL;
    unsigned char *bb_mask = NULL;
    if (c->pattern == VKF_ATTENTION_BIGBIRD) {
        CHECK_OK(vkf_attention_table_create(ctx, &d, &table));
        d.table = table;
        bb_mask = bigbird_matrix(&d.bigbird, c->lq, c->lk);
    }
    ref_attention_mask mask = {
        .lengths = c->lengths ? lengths : NULL,
        .causal = c->causal,
        .causal_offset = c->causal_offset,
        .pattern = (int)c->pattern,
        .window = c->window,
        .stride = c->stride,
        .allowed = bb_mask,
        .allowed_cols = c->lk,
    };
    extras ext;
    extras_make(ctx, c, VKF_DTYPE_F32, seed, &d, &mask, &ext);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_status st = vkf_op_attention_fused(cmd, &d);
    char what[256];
    describe(what, sizeof what, c, ts ? ts->name : "auto");
    if (st != VKF_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, vkf_status_string(st), vkf_last_error());
        harness_failures++;
    } else {
        CHECK_OK(vkf_cmd_submit(cmd));
        float *got = harness_download(to), *want = harness_alloc(out_n * 4);
        ref_attention(want, qh + q_off, q_row, q_batch, kh + k_off, k_row, k_batch, vh + v_off, v_row, v_batch, c->batch,
                      c->heads, c->head_dim, c->lq, c->lk, d.scale, &mask);
        harness_compare(what, got, want, out_n, 1e-5, 1e-4);
        free(got), free(want);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(to), vkf_tensor_destroy(tl), vkf_tensor_destroy(table);
    extras_free(&ext);
    free(bb_mask);
    if (tv != tq && tv != tk) vkf_tensor_destroy(tv);
    if (tk != tq) vkf_tensor_destroy(tk);
    vkf_tensor_destroy(tq);
    if (vh != qh && vh != kh) free(vh);
    if (kh != qh) free(kh);
    free(qh), free(sentinel);
}

#define L VKF_ATTENTION_LOCAL
#define S VKF_ATTENTION_STRIDED
#define B VKF_ATTENTION_BIGBIRD
#define T VKF_ATTENTION_TGLOBAL
static const att_case CASES[] = {
    /* dense: every length as queries and as keys, head_dim 1..256, heads 1..8, batch 1..3 */
    {1, 1, 64, 1, 1},
    {2, 3, 8, 3, 17},
    {3, 2, 100, 17, 3},
    {1, 4, 64, 64, 64},
    {2, 8, 8, 100, 257},
    {1, 2, 1, 257, 100},
    {1, 1, 64, 1000, 17},
    {1, 2, 8, 17, 1000},
    {1, 1, 100, 1000, 1000},
    {2, 1, 256, 64, 257},
    {1, 3, 256, 257, 64},
    {3, 5, 1, 1, 100},
    {1, 6, 3, 100, 64},
    {2, 7, 17, 3, 1},
    {1, 8, 64, 257, 1},
    /* key padding (one length past lk, one of 0 or -1: rows of zeros) */
    {3, 2, 64, 64, 64, .lengths = true},
    {3, 4, 8, 17, 257, .lengths = true},
    {2, 1, 100, 1000, 100, .lengths = true},
    {3, 1, 1, 3, 3, .lengths = true},
    {3, 2, 256, 100, 17, .lengths = true},
    /* causal, with and without an offset (a cache of offset earlier keys; one past lk) */
    {1, 2, 64, 257, 257, .causal = true},
    {2, 3, 8, 100, 100, .causal = true},
    {1, 2, 64, 17, 64, .causal = true, .causal_offset = 47},
    {2, 1, 8, 64, 100, .causal = true, .causal_offset = 3},
    {1, 1, 100, 1000, 1000, .causal = true},
    {3, 2, 8, 3, 1000, .causal = true, .causal_offset = 997},
    {1, 1, 8, 17, 17, .causal = true, .causal_offset = 1000},
    {2, 2, 64, 100, 100, .lengths = true, .causal = true},
    /* local:W for W 0, 1, 16, 300 */
    {1, 2, 64, 257, 257, .pattern = L, .window = 0},
    {2, 2, 8, 100, 100, .pattern = L, .window = 1, .causal = true},
    {1, 4, 64, 1000, 1000, .pattern = L, .window = 16},
    {1, 1, 100, 1000, 1000, .pattern = L, .window = 300, .causal = true},
    {3, 2, 8, 64, 257, .pattern = L, .window = 16, .lengths = true},
    {1, 1, 256, 257, 257, .pattern = L, .window = 16},
    {2, 3, 17, 1000, 64, .pattern = L, .window = 1},
    {1, 2, 8, 17, 1000, .pattern = L, .window = 300},
    {2, 1, 64, 64, 64, .pattern = L, .window = 0, .causal = true, .causal_offset = 5},
    /* strided:W:S for (0, 7), (4, 16), (16, 64) */
    {1, 2, 64, 257, 257, .pattern = S, .window = 0, .stride = 7},
    {2, 3, 8, 100, 100, .pattern = S, .window = 4, .stride = 16, .causal = true},
    {1, 2, 64, 1000, 1000, .pattern = S, .window = 16, .stride = 64},
    {2, 1, 100, 1000, 1000, .pattern = S, .window = 16, .stride = 64, .causal = true, .lengths = true},
    {1, 1, 8, 17, 1000, .pattern = S, .window = 4, .stride = 16},
    {3, 2, 1, 64, 64, .pattern = S, .window = 0, .stride = 7, .lengths = true},
    {1, 2, 256, 257, 100, .pattern = S, .window = 4, .stride = 16},
    {2, 2, 8, 1000, 3, .pattern = S, .window = 0, .stride = 7},
    {1, 1, 64, 3, 257, .pattern = S, .window = 16, .stride = 64, .causal = true, .causal_offset = 200},
    /* layouts: fused QKV (row stride 3d), cross-attention K/V (row stride 2d), padded views */
    {2, 4, 16, 100, 100, .layout = LAYOUT_QKV},
    {1, 8, 64, 257, 257, .layout = LAYOUT_QKV, .causal = true},
    {2, 2, 8, 64, 64, .layout = LAYOUT_QKV, .pattern = L, .window = 16},
    {3, 4, 16, 17, 100, .layout = LAYOUT_CROSS, .lengths = true},
    {2, 8, 64, 100, 257, .layout = LAYOUT_CROSS},
    {1, 3, 100, 1000, 17, .layout = LAYOUT_CROSS, .pattern = S, .window = 4, .stride = 16},
    {2, 3, 17, 64, 100, .layout = LAYOUT_PADDED, .pattern = S, .window = 4, .stride = 16},
    {3, 2, 100, 17, 64, .layout = LAYOUT_PADDED, .lengths = true, .causal = true},
    /* bigbird:B:G:R: blocks that divide nothing, 0 to 2 global blocks, 0 to 5 random
     * blocks, blocks of 1 (more query blocks per workgroup than fit 32 bits: the
     * tiles shrink) and blocks longer than the sequence */
    {1, 2, 64, 257, 257, .pattern = B, .bb_block = 16, .bb_globals = 1, .bb_random = 2},
    {2, 3, 8, 100, 100, .pattern = B, .bb_block = 7, .bb_globals = 2, .bb_random = 3, .causal = true},
    {1, 2, 64, 1000, 1000, .pattern = B, .bb_block = 64, .bb_globals = 1, .bb_random = 3},
    {2, 1, 100, 1000, 1000, .pattern = B, .bb_block = 32, .bb_globals = 2, .bb_random = 2, .causal = true, .lengths = true},
    {3, 2, 17, 100, 100, .pattern = B, .bb_block = 5, .bb_globals = 0, .bb_random = 5, .lengths = true},
    {1, 4, 8, 64, 64, .pattern = B, .bb_block = 1, .bb_globals = 1, .bb_random = 4},
    {1, 1, 64, 100, 100, .pattern = B, .bb_block = 200, .bb_globals = 0, .bb_random = 1},
    {2, 2, 8, 257, 64, .pattern = B, .bb_block = 16, .bb_globals = 1, .bb_random = 1},
    {1, 2, 8, 17, 300, .pattern = B, .bb_block = 8, .bb_globals = 0, .bb_random = 3, .causal = true, .causal_offset = 250},
    {2, 4, 16, 100, 100, .layout = LAYOUT_QKV, .pattern = B, .bb_block = 16, .bb_globals = 1, .bb_random = 2, .causal = true},
    {2, 3, 17, 64, 100, .layout = LAYOUT_PADDED, .pattern = B, .bb_block = 9, .bb_globals = 1, .bb_random = 2},
    /* T5's relative position bias (radius past and within the sequences) on every pattern, causal and not */
    {1, 2, 64, 100, 100, .bias = true, .radius = 16},
    {2, 3, 8, 257, 257, .bias = true, .radius = 128, .causal = true, .lengths = true},
    {1, 1, 64, 17, 1000, .bias = true, .radius = 300, .causal = true, .causal_offset = 983},
    {3, 2, 17, 64, 64, .bias = true, .radius = 0, .lengths = true},
    {1, 4, 64, 1000, 1000, .bias = true, .radius = 128, .pattern = L, .window = 127},
    {2, 2, 8, 100, 100, .bias = true, .radius = 7, .pattern = S, .window = 4, .stride = 16, .causal = true},
    {1, 2, 64, 257, 257, .bias = true, .radius = 64, .pattern = B, .bb_block = 16, .bb_globals = 1, .bb_random = 2},
    {2, 4, 16, 100, 100, .bias = true, .radius = 32, .layout = LAYOUT_QKV, .causal = true},
    /* tglobal:W:G, LongT5's transient-global: the window, global keys of each sequence's floor(len / G) blocks
     * (none where a sequence is shorter than G), with and without both bias tables */
    {1, 2, 64, 257, 257, .pattern = T, .window = 16, .gblock = 16},
    {3, 2, 8, 100, 100, .pattern = T, .window = 7, .gblock = 8, .lengths = true},
    {1, 4, 64, 1000, 1000, .pattern = T, .window = 127, .gblock = 16, .bias = true, .radius = 128},
    {3, 1, 17, 64, 64, .pattern = T, .window = 3, .gblock = 5, .lengths = true, .bias = true, .radius = 9},
    {2, 2, 16, 17, 17, .pattern = T, .window = 0, .gblock = 20},
    {2, 3, 8, 100, 100, .pattern = T, .window = 31, .gblock = 1, .layout = LAYOUT_QKV, .bias = true, .radius = 40},
};
#undef L
#undef S
#undef B
#undef T
#define N_CASES (sizeof CASES / sizeof CASES[0])

/* ------------------------------------------------------------------ dense-naive equality */

/* The same attention through the unfused path the model records: S = scale·Q·Kᵀ
 * (batched over batch × heads), softmax with the mask as an additive tensor (and
 * the causal limit), O = P·V. Local and strided are exactly dense attention under
 * that mask. */
static void run_dense_equality(vkf_context *ctx, uint32_t B, uint32_t H, uint32_t hd, uint32_t n, bool lengths,
                               bool causal, uint32_t causal_offset, vkf_attention_pattern pattern, uint32_t window,
                               uint32_t stride, uint64_t seed)
{
    uint64_t dm = (uint64_t)H * hd, rows = (uint64_t)B * n;
    float *qkv = harness_random(rows * 3 * dm, seed);
    vkf_tensor *tqkv = harness_tensor(ctx, qkv, rows, 3 * dm);
    vkf_tensor *scores = harness_tensor(ctx, NULL, (uint64_t)B * H * n, n);
    vkf_tensor *dense = harness_tensor(ctx, NULL, rows, dm), *fused = harness_tensor(ctx, NULL, rows, dm);
    int32_t lens[3] = {(int32_t)n, (int32_t)n / 2, 1};
    /* Key padding as the model masks sources: a (B, n) additive row per sequence,
     * used by every head and query (mask_row_div = H·n). The pattern: an (n, n)
     * additive mask, row i used by query i of every (b, h) (mask_rows = n). */
    uint32_t mask_rows = lengths ? B : n, mask_div = lengths ? H * n : 1;
    float *mask = harness_alloc((size_t)mask_rows * n * 4);
    ref_attention_mask pm = {.pattern = (int)pattern, .window = window, .stride = stride};
    for (uint32_t r = 0; r < mask_rows; r++)
        for (uint32_t j = 0; j < n; j++) {
            bool ok = lengths ? j < (uint32_t)lens[r] : ref_attention_allowed(&pm, 0, r, j);
            mask[(size_t)r * n + j] = ok ? 0.0f : -INFINITY;
        }
    vkf_tensor *tmask = harness_tensor(ctx, mask, mask_rows, n);
    vkf_tensor *tlens = lengths ? lengths_tensor(ctx, lens, B) : NULL;
    float scale = 2.0f / sqrtf((float)hd);

    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc s;
    vkf_matmul_desc_init(&s);
    s.m = n, s.n = n, s.k = hd, s.batch[0] = B, s.batch[1] = H;
    s.a = (vkf_matrix_view){tqkv, 0, 3 * dm, {n * 3 * dm, hd}};
    s.b = (vkf_matrix_view){tqkv, dm, 3 * dm, {n * 3 * dm, hd}};
    s.c = (vkf_matrix_view){scores, 0, 0, {(uint64_t)H * n * n, (uint64_t)n * n}};
    s.alpha = scale;
    CHECK_OK(vkf_cmd_matmul(cmd, &s));
    vkf_softmax_desc p;
    vkf_softmax_desc_init(&p);
    p.rows = B * H * n, p.cols = n, p.x = scores, p.y = scores;
    p.mask = tmask, p.mask_rows = mask_rows, p.mask_row_div = mask_div;
    if (causal) p.causal_period = n, p.causal_offset = causal_offset;
    CHECK_OK(vkf_cmd_softmax(cmd, &p));
    vkf_matmul_desc o;
    vkf_matmul_desc_init(&o);
    o.m = n, o.n = hd, o.k = n, o.batch[0] = B, o.batch[1] = H;
    o.a = (vkf_matrix_view){scores, 0, 0, {(uint64_t)H * n * n, (uint64_t)n * n}};
    o.b = (vkf_matrix_view){tqkv, 2 * dm, 3 * dm, {n * 3 * dm, hd}};
    o.b_is_k_by_n = true;
    o.c = (vkf_matrix_view){dense, 0, dm, {(uint64_t)n * dm, hd}};
    CHECK_OK(vkf_cmd_matmul(cmd, &o));

    vkf_attention_desc d;
    vkf_attention_desc_init(&d);
    d.batch = B, d.heads = H, d.head_dim = hd, d.lq = n, d.lk = n, d.scale = scale;
    d.q = (vkf_attention_view){tqkv, 0, 3 * dm, 0};
    d.k = (vkf_attention_view){tqkv, dm, 3 * dm, 0};
    d.v = (vkf_attention_view){tqkv, 2 * dm, 3 * dm, 0};
    d.key_lengths = tlens;
    d.causal = causal, d.causal_offset = causal_offset;
    d.pattern = lengths ? VKF_ATTENTION_DENSE : pattern, d.window = window, d.stride = stride;
    d.out = fused;
    CHECK_OK(vkf_op_attention_fused(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(fused), *want = harness_download(dense);
    char what[192];
    snprintf(what, sizeof what, "fused vs dense-naive B=%u H=%u hd=%u n=%u%s causal=%d+%u %s:%u:%u", B, H, hd, n,
             lengths ? " lengths" : "", causal, causal_offset, pattern_name(lengths ? VKF_ATTENTION_DENSE : pattern),
             window, stride);
    harness_compare(what, got, want, rows * dm, 1e-5, 1e-4);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tqkv), vkf_tensor_destroy(scores), vkf_tensor_destroy(dense), vkf_tensor_destroy(fused);
    vkf_tensor_destroy(tmask), vkf_tensor_destroy(tlens);
    free(qkv), free(mask), free(got), free(want);
}

static void test_dense_equality(vkf_context *ctx)
{
    uint64_t seed = 7000;
    run_dense_equality(ctx, 1, 2, 64, 100, false, false, 0, VKF_ATTENTION_DENSE, 0, 0, seed++);
    run_dense_equality(ctx, 1, 2, 64, 257, false, false, 0, VKF_ATTENTION_LOCAL, 16, 0, seed++);
    run_dense_equality(ctx, 1, 3, 8, 257, false, true, 0, VKF_ATTENTION_LOCAL, 1, 0, seed++);
    run_dense_equality(ctx, 1, 2, 64, 257, false, false, 0, VKF_ATTENTION_STRIDED, 4, 16, seed++);
    run_dense_equality(ctx, 1, 1, 100, 100, false, true, 0, VKF_ATTENTION_STRIDED, 0, 7, seed++);
    run_dense_equality(ctx, 1, 2, 17, 64, false, true, 3, VKF_ATTENTION_STRIDED, 16, 64, seed++);
    run_dense_equality(ctx, 2, 2, 64, 64, false, false, 0, VKF_ATTENTION_LOCAL, 0, 0, seed++);
    run_dense_equality(ctx, 3, 2, 64, 100, true, false, 0, VKF_ATTENTION_DENSE, 0, 0, seed++);
    run_dense_equality(ctx, 3, 4, 8, 17, true, true, 0, VKF_ATTENTION_DENSE, 0, 0, seed++);
}

/* ------------------------------------------------------------------ F16 storage */

/* Q, K, V and out stored as F16 (the fused kernel's IO_F16 variant), fp32 inside:
 * against the reference run on the same F16-rounded inputs, within the rounding
 * of the output to F16 (relative 2^-11) plus fp32 summation noise. Devices without
 * 16-bit storage refuse it. The scalar kernel, forced (AUTO would choose the coopmat
 * one on GPUs with it). */
static void run_f16(vkf_context *ctx, const vkf_device_info *info, uint32_t B, uint32_t H, uint32_t hd, uint32_t lq,
                    uint32_t lk, bool causal, vkf_attention_pattern pattern, uint32_t window, uint64_t seed)
{
    uint64_t d = (uint64_t)H * hd, nq = (uint64_t)B * lq * d, nk = (uint64_t)B * lk * d;
    float *q = harness_random(nq, seed), *k = harness_random(nk, seed + 1), *v = harness_random(nk, seed + 2);
    uint16_t *hq = harness_alloc(nq * 2), *hk = harness_alloc(nk * 2), *hv = harness_alloc(nk * 2);
    for (uint64_t e = 0; e < nq; e++) q[e] = ref_f16_to_f32(hq[e] = ref_f32_to_f16(q[e]));
    for (uint64_t e = 0; e < nk; e++) k[e] = ref_f16_to_f32(hk[e] = ref_f32_to_f16(k[e]));
    for (uint64_t e = 0; e < nk; e++) v[e] = ref_f16_to_f32(hv[e] = ref_f32_to_f16(v[e]));
    vkf_tensor *tq = NULL, *tk = NULL, *tv = NULL, *to = NULL;
    uint64_t sq = nq, sk = nk;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &sq, &tq));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &sk, &tk));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &sk, &tv));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &sq, &to));
    CHECK_OK(vkf_tensor_upload(tq, hq, nq * 2));
    CHECK_OK(vkf_tensor_upload(tk, hk, nk * 2));
    CHECK_OK(vkf_tensor_upload(tv, hv, nk * 2));
    vkf_attention_desc a;
    vkf_attention_desc_init(&a);
    a.batch = B, a.heads = H, a.head_dim = hd, a.lq = lq, a.lk = lk, a.scale = 2.0f / sqrtf((float)hd);
    a.q.tensor = tq, a.k.tensor = tk, a.v.tensor = tv, a.out = to, a.dtype = VKF_DTYPE_F16;
    a.causal = causal, a.pattern = pattern, a.window = window;
    a.kernel = VKF_ATTENTION_KERNEL_SCALAR; /* on GPUs AUTO picks coopmat for F16: tested in test_coopmat */
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    char what[128];
    snprintf(what, sizeof what, "F16 attention B=%u H=%u hd=%u lq=%u lk=%u causal=%d pattern %d:%u", B, H, hd, lq, lk,
             causal, (int)pattern, window);
    if (!info->storage_16bit) {
        CHECK_FAIL(vkf_op_attention_fused(cmd, &a), VKF_ERROR_UNSUPPORTED, "16-bit");
    } else {
        CHECK_OK(vkf_op_attention_fused(cmd, &a));
        CHECK_OK(vkf_cmd_submit(cmd));
        uint16_t *got16 = harness_alloc(nq * 2);
        float *got = harness_alloc(nq * 4), *want = harness_alloc(nq * 4);
        CHECK_OK(vkf_tensor_download(to, got16, nq * 2));
        for (uint64_t e = 0; e < nq; e++) got[e] = ref_f16_to_f32(got16[e]);
        ref_attention_mask mask = {.causal = causal, .pattern = (int)pattern, .window = window};
        ref_attention(want, q, d, lq * d, k, d, lk * d, v, d, lk * d, B, H, hd, lq, lk, a.scale, &mask);
        harness_compare(what, got, want, nq, 2e-4, 1e-3);
        /* an F32 tensor in an F16 call is refused */
        a.out = harness_tensor(ctx, NULL, 1, nq);
        CHECK_FAIL(vkf_op_attention_fused(cmd, &a), VKF_ERROR_STATE, "submitted");
        vkf_cmd *cmd2;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd2));
        CHECK_FAIL(vkf_op_attention_fused(cmd2, &a), VKF_ERROR_INVALID_ARGUMENT, "out");
        vkf_cmd_destroy(cmd2);
        vkf_tensor_destroy(a.out);
        free(got16), free(got), free(want);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tk), vkf_tensor_destroy(tv), vkf_tensor_destroy(to);
    free(q), free(k), free(v), free(hq), free(hk), free(hv);
}

static void test_f16(vkf_context *ctx, const vkf_device_info *info)
{
    run_f16(ctx, info, 1, 2, 64, 100, 100, false, VKF_ATTENTION_DENSE, 0, 951);
    run_f16(ctx, info, 2, 3, 17, 64, 257, false, VKF_ATTENTION_DENSE, 0, 952);
    run_f16(ctx, info, 1, 1, 3, 257, 257, true, VKF_ATTENTION_DENSE, 0, 953);
    run_f16(ctx, info, 2, 2, 64, 300, 300, true, VKF_ATTENTION_LOCAL, 16, 954);
    run_f16(ctx, info, 1, 4, 256, 17, 33, false, VKF_ATTENTION_DENSE, 0, 955);
}

/* ------------------------------------------------------------------ cooperative matrix */

/* The cooperative-matrix kernel (attention_flash.comp, FlashAttention-2 form, forced with
 * kernel = VKF_ATTENTION_KERNEL_COOPMAT) against the reference run on the same
 * f16-rounded q, k, v, with F32 and F16 storage. Q·Kᵀ of f16 values is exact in
 * fp32 products, and the softmax is fp32, so the differences are:
 *  - P rounded to f16 before P·V (relative u = 2^-11 per weight; l sums the rounded
 *    weights, so the output stays a convex combination of v rows and moves by at
 *    most 2u/(1-u)·max|v| <= 2^-10, as |v| < 1 here);
 *  - weights below f16's normal range (2^-14) round absolutely by 2^-25 each,
 *    against l >= 1: at most lk·2^-25;
 *  - fp32 summation order: 1e-5;
 *  - with F16 output, its rounding: relative 2^-11.
 * atol = 2^-10 + lk·2^-25 + 1e-5, rtol 2^-11 (F16 out) or 0 (F32 out). */
static double coopmat_worst[2];         /* largest error seen, F32 and F16 storage */

/* n random values rounded to f16 (*host: as floats), in a tensor of dtype. */
static vkf_tensor *rounded_tensor(vkf_context *ctx, vkf_dtype dtype, uint64_t n, uint64_t seed, float **host)
{
    float *x = harness_random(n, seed);
    uint16_t *h = harness_alloc(n * 2);
    for (uint64_t e = 0; e < n; e++) x[e] = ref_f16_to_f32(h[e] = ref_f32_to_f16(x[e]));
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, dtype, 1, &n, &t));
    CHECK_OK(vkf_tensor_upload(t, dtype == VKF_DTYPE_F16 ? (void *)h : (void *)x, n * (dtype == VKF_DTYPE_F16 ? 2 : 4)));
    free(h);
    *host = x;
    return t;
}

static void run_coopmat(vkf_context *ctx, const att_case *c, vkf_dtype dtype, uint64_t seed)
{
    uint64_t dm = (uint64_t)c->heads * c->head_dim;
    uint64_t nq = (uint64_t)c->batch * c->lq * dm, nk = (uint64_t)c->batch * c->lk * dm;
    bool f16 = dtype == VKF_DTYPE_F16;
    /* packed q, k, v; or LAYOUT_QKV: one (batch * n, 3d) tensor, offsets 0, d, 2d (lq == lk) */
    bool fused = c->layout == LAYOUT_QKV;
    uint64_t row = fused ? 3 * dm : dm, q_batch = c->lq * row, k_batch = c->lk * row;
    float *q, *k, *v;
    vkf_tensor *tq = rounded_tensor(ctx, dtype, fused ? 3 * nq : nq, seed, &q), *tk = tq, *tv = tq;
    if (fused) k = q + dm, v = q + 2 * dm;
    else tk = rounded_tensor(ctx, dtype, nk, seed + 1, &k), tv = rounded_tensor(ctx, dtype, nk, seed + 2, &v);
    vkf_tensor *to = NULL;
    CHECK_OK(vkf_tensor_create(ctx, dtype, 1, &nq, &to));
    /* a sentinel in out: an element the kernel misses shows as a mismatch */
    float *sentinel = harness_random(nq, seed + 3);
    uint16_t *sentinel16 = harness_alloc(nq * 2);
    for (uint64_t e = 0; e < nq; e++) sentinel16[e] = ref_f32_to_f16(sentinel[e] + 5.0f);
    for (uint64_t e = 0; e < nq; e++) sentinel[e] += 5.0f;
    CHECK_OK(vkf_tensor_upload(to, f16 ? (void *)sentinel16 : (void *)sentinel, nq * (f16 ? 2 : 4)));
    int32_t lengths[3] = {0, 0, 0};
    for (uint32_t b = 0; b < c->batch && b < 3; b++)
        lengths[b] = b == 0 ? (int32_t)c->lk + 5 : b == 1 ? (int32_t)(c->lk + 1) / 2 : c->lk > 3 ? (int32_t)c->lk / 3 : -1;
    vkf_tensor *tl = c->lengths ? lengths_tensor(ctx, lengths, c->batch) : NULL;

    vkf_attention_desc d;
    vkf_attention_desc_init(&d);
    d.batch = c->batch, d.heads = c->heads, d.head_dim = c->head_dim, d.lq = c->lq, d.lk = c->lk;
    d.scale = 3.0f / sqrtf((float)c->head_dim); /* peaky enough that the running max moves */
    d.q = (vkf_attention_view){tq, 0, row, q_batch};
    d.k = (vkf_attention_view){tk, fused ? dm : 0, row, k_batch};
    d.v = (vkf_attention_view){tv, fused ? 2 * dm : 0, row, k_batch};
    d.out = to, d.dtype = dtype;
    d.key_lengths = tl;
    d.causal = c->causal, d.causal_offset = c->causal_offset;
    d.pattern = c->pattern, d.window = c->window, d.stride = c->stride;
    d.bigbird = (vkf_bigbird){c->bb_block, c->bb_globals, c->bb_random, c->causal, seed * 31};
    d.kernel = VKF_ATTENTION_KERNEL_COOPMAT;
    CHECK(strcmp(vkf_attention_kernel_name(ctx, &d), "fused-coopmat") == 0);
    vkf_tensor *table = NULL;
    unsigned char *bb_mask = NULL;
    if (c->pattern == VKF_ATTENTION_BIGBIRD) {
        CHECK_OK(vkf_attention_table_create(ctx, &d, &table));
        d.table = table;
        bb_mask = bigbird_matrix(&d.bigbird, c->lq, c->lk);
    }
    ref_attention_mask mask = {
        .lengths = c->lengths ? lengths : NULL,
        .causal = c->causal,
        .causal_offset = c->causal_offset,
        .pattern = (int)c->pattern,
        .window = c->window,
        .stride = c->stride,
        .allowed = bb_mask,
        .allowed_cols = c->lk,
    };
    extras ext;
    extras_make(ctx, c, dtype, seed, &d, &mask, &ext);
    char what[256];
    describe(what, sizeof what, c, f16 ? "coopmat-f16" : "coopmat-f32");
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_status st = vkf_op_attention_fused(cmd, &d);
    if (st == VKF_ERROR_UNSUPPORTED && c->head_dim > 64 && strstr(vkf_last_error(), "shared memory")) {
        /* a wide head on a device whose shared memory its tiles do not fit: refused, as documented */
        fprintf(stderr, "%s: refused: %s\n", what, vkf_last_error());
    } else if (st != VKF_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, vkf_status_string(st), vkf_last_error());
        harness_failures++;
    } else {
        CHECK_OK(vkf_cmd_submit(cmd));
        float *got = harness_alloc(nq * 4), *want = harness_alloc(nq * 4);
        if (f16) {
            CHECK_OK(vkf_tensor_download(to, sentinel16, nq * 2));
            for (uint64_t e = 0; e < nq; e++) got[e] = ref_f16_to_f32(sentinel16[e]);
        } else {
            CHECK_OK(vkf_tensor_download(to, got, nq * 4));
        }
        ref_attention(want, q, row, q_batch, k, row, k_batch, v, row, k_batch, c->batch, c->heads, c->head_dim, c->lq,
                      c->lk, d.scale, &mask);
        double atol = 1.0 / 1024 + c->lk / 33554432.0 + 1e-5, rtol = f16 ? 1.0 / 2048 : 0.0;
        harness_compare(what, got, want, nq, atol, rtol);
        for (uint64_t e = 0; e < nq; e++) {
            double err = fabs((double)got[e] - want[e]);
            if (err > coopmat_worst[f16] || err != err) coopmat_worst[f16] = err;
        }
        free(got), free(want);
    }
    vkf_cmd_destroy(cmd);
    if (!fused) vkf_tensor_destroy(tk), vkf_tensor_destroy(tv), free(k), free(v);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(to), vkf_tensor_destroy(tl), vkf_tensor_destroy(table);
    extras_free(&ext);
    free(q), free(sentinel), free(sentinel16), free(bb_mask);
}

#define L VKF_ATTENTION_LOCAL
#define S VKF_ATTENTION_STRIDED
#define B VKF_ATTENTION_BIGBIRD
/* Lengths 1, 7, 17, 64, 100, 257, 1000; head_dim 64, 256 and the odd 40 (a multiple
 * of 8, not of 16), 24 and 17 (padded inside the kernel); packed q, k, v and a fused
 * QKV tensor. Each runs with F32 and F16 storage. */
#define T VKF_ATTENTION_TGLOBAL
static const att_case COOPMAT_CASES[] = {
    {1, 1, 64, 1, 1},
    {2, 3, 64, 7, 17},
    {1, 2, 40, 17, 7},
    {1, 2, 17, 17, 100},
    {1, 1, 64, 1000, 17},
    {1, 1, 24, 7, 1000},
    {1, 2, 64, 257, 257},
    {3, 2, 64, 64, 100, .lengths = true},
    {3, 1, 40, 17, 17, .lengths = true, .causal = true},
    {1, 2, 64, 257, 257, .causal = true},
    {1, 1, 40, 17, 100, .causal = true, .causal_offset = 47},
    {1, 1, 64, 1000, 1000, .pattern = L, .window = 16, .causal = true},
    {1, 2, 24, 100, 100, .pattern = L, .window = 0},
    {1, 2, 64, 257, 257, .pattern = S, .window = 4, .stride = 16},
    {2, 1, 40, 100, 100, .pattern = S, .window = 0, .stride = 7, .causal = true, .lengths = true},
    {1, 2, 64, 257, 257, .pattern = B, .bb_block = 16, .bb_globals = 1, .bb_random = 2},
    {2, 1, 24, 100, 100, .pattern = B, .bb_block = 7, .bb_globals = 2, .bb_random = 3, .causal = true, .lengths = true},
    {1, 2, 40, 64, 64, .pattern = B, .bb_block = 1, .bb_globals = 1, .bb_random = 4},
    {1, 1, 256, 17, 33, .causal = true, .causal_offset = 10},  /* the widest head: the smallest tiles on lavapipe */
    {2, 4, 64, 100, 100, .layout = LAYOUT_QKV, .causal = true},
    {2, 2, 40, 64, 64, .layout = LAYOUT_QKV, .pattern = L, .window = 16, .lengths = true},
    /* T5's bias and LongT5's transient-global */
    {1, 2, 64, 100, 100, .bias = true, .radius = 32, .causal = true},
    {3, 2, 40, 64, 64, .bias = true, .radius = 8, .lengths = true, .pattern = L, .window = 16},
    {1, 2, 64, 257, 257, .pattern = T, .window = 16, .gblock = 16, .bias = true, .radius = 128},
    {3, 1, 24, 100, 100, .pattern = T, .window = 7, .gblock = 8, .lengths = true},
};
#undef L
#undef S
#undef B
#undef T

/* Why a context has no coopmat kernel, for the line saying the cases are skipped. */
static const char *coopmat_absent_reason(const vkf_device_info *info)
{
    const char *env = getenv("VKFORMER_COOPMAT");
    if (env && strcmp(env, "0") == 0) return "VKFORMER_COOPMAT=0 turns it off";
    if (!vkf_build_has_coopmat()) return "this build has no cooperative-matrix shaders (its glslc is too old)";
    if (!info->coopmat_shape_count) return "the device reports no VK_KHR_cooperative_matrix shapes";
    return "the context did not enable it (a vendor not vetted, or no f16 x f16 -> f32 subgroup shape, or a missing "
           "feature)";
}

static void test_coopmat(vkf_context *ctx, const vkf_device_info *info)
{
    /* a small dense case, forced onto the coopmat kernel */
    uint32_t n = 17, dm = 2 * 64;
    vkf_tensor *tq = harness_tensor(ctx, NULL, n, dm), *tk = harness_tensor(ctx, NULL, n, dm);
    vkf_tensor *tv = harness_tensor(ctx, NULL, n, dm), *to = harness_tensor(ctx, NULL, n, dm);
    vkf_attention_desc d;
    vkf_attention_desc_init(&d);
    d.batch = 1, d.heads = 2, d.head_dim = 64, d.lq = n, d.lk = n, d.scale = 0.125f;
    d.q.tensor = tq, d.k.tensor = tk, d.v.tensor = tv, d.out = to;
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    /* The automatic choice: never coopmat for F32 storage, nor on CPU drivers. */
    CHECK(strcmp(vkf_attention_kernel_name(ctx, &d), "fused") == 0);
    d.dtype = VKF_DTYPE_F16;
    bool auto_coopmat = info->coopmat_in_use && info->type != VKF_DEVICE_CPU;
    CHECK(strcmp(vkf_attention_kernel_name(ctx, &d), auto_coopmat ? "fused-coopmat" : "fused") == 0);
    d.kernel = VKF_ATTENTION_KERNEL_SCALAR;
    CHECK(strcmp(vkf_attention_kernel_name(ctx, &d), "fused") == 0);
    d.dtype = VKF_DTYPE_F32;
    d.kernel = (vkf_attention_kernel)3;
    CHECK_FAIL(vkf_op_attention_fused(cmd, &d), VKF_ERROR_INVALID_ARGUMENT, "kernel");
    d.kernel = VKF_ATTENTION_KERNEL_COOPMAT;
    if (!info->coopmat_in_use) {
        CHECK_FAIL(vkf_op_attention_fused(cmd, &d), VKF_ERROR_UNSUPPORTED, "cooperative");
        fprintf(stderr, "test_attention: coopmat cases not run on \"%s\": %s (forcing the coopmat kernel fails as it "
                "should: %s)\n", info->name, coopmat_absent_reason(info), vkf_last_error());
        d.pattern = VKF_ATTENTION_BIGBIRD, d.bigbird = (vkf_bigbird){.block = 4, .globals = 1, .random = 1};
        vkf_tensor *none = tq;
        CHECK_FAIL(vkf_attention_table_create(ctx, &d, &none), VKF_ERROR_UNSUPPORTED, "cooperative");
        CHECK(none == NULL);
        CHECK(vkf_cmd_op_count(cmd) == 0);
    } else {
        /* head_dim past the kernel's limit is refused like the scalar kernel's */
        d.head_dim = VKF_ATTENTION_MAX_HEAD_DIM + 1;
        CHECK_FAIL(vkf_op_attention_fused(cmd, &d), VKF_ERROR_UNSUPPORTED, "head_dim");
        uint64_t seed = 5000;
        size_t count = sizeof COOPMAT_CASES / sizeof COOPMAT_CASES[0];
        for (size_t i = 0; i < count; i++) {
            run_coopmat(ctx, &COOPMAT_CASES[i], VKF_DTYPE_F32, seed += 8);
            run_coopmat(ctx, &COOPMAT_CASES[i], VKF_DTYPE_F16, seed += 8);
        }
        fprintf(stderr, "test_attention: coopmat kernel (%ux%ux%u fragments), %zu cases x F32/F16 storage: largest error "
                "%.3g (F32 storage), %.3g (F16 storage); bound 2^-10 + lk 2^-25 + 1e-5 (+ 2^-11 relative for F16)\n",
                ctx->coopmat_shape.m, ctx->coopmat_shape.n, ctx->coopmat_shape.k, count,
                coopmat_worst[0], coopmat_worst[1]);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tk), vkf_tensor_destroy(tv), vkf_tensor_destroy(to);
}

/* ------------------------------------------------------------------ lowrank */

/* The fixed projection: each of a sequence's len keys is in exactly one row, a
 * row is the mean of its keys, rows past len are empty, the same (seed, len)
 * gives the same matrix whatever the batch position, another seed another. */
static void test_lowrank_projection(void)
{
    uint32_t K = 6, S = 20, lens[3] = {20, 7, 20};
    float *E = harness_alloc(3 * K * S * sizeof *E), *E2 = harness_alloc(3 * K * S * sizeof *E);
    int32_t rows[3], rows2[3];
    CHECK_OK(vkf_lowrank_projection(5, K, S, lens, 3, E, rows));
    for (uint32_t b = 0; b < 3; b++) {
        CHECK(rows[b] == (int32_t)(lens[b] < K ? lens[b] : K));
        for (uint32_t j = 0; j < S; j++) {
            uint32_t used = 0;
            for (uint32_t r = 0; r < K; r++) used += E[((size_t)b * K + r) * S + j] != 0;
            CHECK(used == (j < lens[b] ? 1u : 0u));
        }
        for (uint32_t r = 0; r < K; r++) {
            double sum = 0;
            for (uint32_t j = 0; j < S; j++) sum += E[((size_t)b * K + r) * S + j];
            CHECK(fabs(sum - (r < lens[b] ? 1.0 : 0.0)) < 1e-6);
        }
    }
    CHECK(memcmp(E, E + 2 * K * S, K * S * sizeof *E) == 0); /* same length, other batch position */
    CHECK_OK(vkf_lowrank_projection(6, K, S, lens, 3, E2, rows2));
    CHECK(memcmp(E, E2, K * S * sizeof *E) != 0);
    free(E), free(E2);
}

/* Lowrank as the model records it (vkf_op_lowrank_project: one batched matmul
 * projecting the keys and values of a fused QKV tensor, then the fused kernel over the K rows with the
 * projection's row counts as key lengths) against the plain-C reference of the
 * same: K' = E K and V' = E V on the host, then reference attention. With K >= n
 * it must also equal dense attention. */
static void run_lowrank(vkf_context *ctx, uint32_t B, uint32_t H, uint32_t hd, uint32_t n, uint32_t K, uint64_t seed)
{
    uint64_t d = (uint64_t)H * hd, rows = (uint64_t)B * n;
    uint32_t lens[3] = {n, n / 2 + 1, 1};
    float *qkv = harness_random(rows * 3 * d, seed);
    float *E = harness_alloc((size_t)B * K * n * sizeof *E);
    int32_t proj_rows[3];
    CHECK_OK(vkf_lowrank_projection(seed, K, n, lens, B, E, proj_rows));
    vkf_tensor *tqkv = harness_tensor(ctx, qkv, rows, 3 * d), *tE = harness_tensor(ctx, E, (uint64_t)B * K, n);
    vkf_tensor *tkv = harness_tensor(ctx, NULL, (uint64_t)B * K, 2 * d), *tout = harness_tensor(ctx, NULL, rows, d);
    vkf_tensor *trows = lengths_tensor(ctx, proj_rows, B);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_attention_view kview = {tqkv, d, 3 * d, n * 3 * d}, vview = {tqkv, 2 * d, 3 * d, n * 3 * d};
    CHECK_OK(vkf_attention_lowrank_kv(cmd, tE, B, K, n, &kview, &vview, VKF_DTYPE_F32, d, tkv));
    vkf_attention_desc a;
    vkf_attention_desc_init(&a);
    a.batch = B, a.heads = H, a.head_dim = hd, a.lq = n, a.lk = K, a.scale = 1.0f / sqrtf((float)hd);
    a.q = (vkf_attention_view){tqkv, 0, 3 * d, n * 3 * d};
    a.k = (vkf_attention_view){tkv, 0, 2 * d, (uint64_t)K * 2 * d};
    a.v = (vkf_attention_view){tkv, d, 2 * d, (uint64_t)K * 2 * d};
    a.key_lengths = trows, a.out = tout;
    CHECK_OK(vkf_op_attention_fused(cmd, &a));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(tout);

    /* host: K' V' (B, K, 2d) = E · [K V], then reference attention over K' */
    float *kv = harness_alloc((size_t)B * K * 2 * d * sizeof *kv), *want = harness_alloc(rows * d * sizeof *want);
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t r = 0; r < K; r++)
            for (uint64_t c = 0; c < 2 * d; c++) {
                double acc = 0;
                for (uint32_t j = 0; j < n; j++)
                    acc += (double)E[((size_t)b * K + r) * n + j] * qkv[((size_t)b * n + j) * 3 * d + d + c];
                kv[((size_t)b * K + r) * 2 * d + c] = (float)acc;
            }
    ref_attention_mask mask = {.lengths = proj_rows};
    ref_attention(want, qkv, 3 * d, n * 3 * d, kv, 2 * d, (size_t)K * 2 * d, kv + d, 2 * d, (size_t)K * 2 * d, B, H, hd,
                  n, K, a.scale, &mask);
    char what[128];
    snprintf(what, sizeof what, "lowrank B=%u H=%u hd=%u n=%u K=%u vs reference", B, H, hd, n, K);
    harness_compare(what, got, want, rows * d, 1e-5, 1e-4);
    if (K >= n) { /* a permutation of the keys: dense attention with the sequence lengths */
        ref_attention_mask dense = {.lengths = (const int32_t *)lens};
        ref_attention(want, qkv, 3 * d, n * 3 * d, qkv + d, 3 * d, n * 3 * d, qkv + 2 * d, 3 * d, n * 3 * d, B, H, hd, n,
                      n, a.scale, &dense);
        snprintf(what, sizeof what, "lowrank B=%u H=%u hd=%u n=%u K=%u vs dense", B, H, hd, n, K);
        harness_compare(what, got, want, rows * d, 1e-5, 1e-4);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tqkv), vkf_tensor_destroy(tE), vkf_tensor_destroy(tkv), vkf_tensor_destroy(tout);
    vkf_tensor_destroy(trows);
    free(qkv), free(E), free(got), free(kv), free(want);
}

static void test_lowrank(vkf_context *ctx)
{
    test_lowrank_projection();
    run_lowrank(ctx, 3, 2, 16, 50, 8, 901);
    run_lowrank(ctx, 2, 4, 64, 100, 100, 902);
    run_lowrank(ctx, 3, 1, 8, 37, 64, 903);
    run_lowrank(ctx, 1, 2, 100, 257, 17, 904);
}

/* ------------------------------------------------------------------ bad arguments */

static void test_bad_arguments(vkf_context *ctx, const vkf_device_info *info)
{
    uint32_t B = 2, H = 2, hd = 8, n = 17, dm = H * hd;
    vkf_tensor *tq = harness_tensor(ctx, NULL, B * n, dm), *tk = harness_tensor(ctx, NULL, B * n, dm);
    vkf_tensor *tv = harness_tensor(ctx, NULL, B * n, dm), *to = harness_tensor(ctx, NULL, B * n, dm);
    vkf_tensor *small = harness_tensor(ctx, NULL, 1, 10);
    int32_t lens[2] = {3, 17};
    vkf_tensor *tl = lengths_tensor(ctx, lens, 2), *tl1 = lengths_tensor(ctx, lens, 1);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_attention_desc good;
    vkf_attention_desc_init(&good);
    good.batch = B, good.heads = H, good.head_dim = hd, good.lq = n, good.lk = n, good.scale = 0.25f;
    good.q.tensor = tq, good.k.tensor = tk, good.v.tensor = tv, good.out = to, good.key_lengths = tl;
    vkf_attention_desc d, good_bb;

    CHECK_STATUS(vkf_op_attention_fused(NULL, &good), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_op_attention_fused(cmd, NULL), VKF_ERROR_INVALID_ARGUMENT);
#define BAD(field_change, status)                                                                                \
    do {                                                                                                         \
        d = good;                                                                                                \
        field_change;                                                                                            \
        CHECK_STATUS(vkf_op_attention_fused(cmd, &d), status);                                                   \
    } while (0)
    BAD(d.batch = 0, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.heads = 0, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.head_dim = 0, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.lq = 0, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.lk = 0, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.head_dim = VKF_ATTENTION_MAX_HEAD_DIM + 1, VKF_ERROR_UNSUPPORTED);
    BAD(d.scale = NAN, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.scale = INFINITY, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.pattern = (vkf_attention_pattern)7, VKF_ERROR_INVALID_ARGUMENT);
    BAD((d.pattern = VKF_ATTENTION_STRIDED, d.stride = 0), VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.q.tensor = NULL, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.out = NULL, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.lq = n + 1, VKF_ERROR_INVALID_ARGUMENT);                 /* q view past its tensor */
    BAD(d.lk = n + 1, VKF_ERROR_INVALID_ARGUMENT);                 /* k view past its tensor */
    BAD(d.k.offset = 1, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.v.row_stride = dm - 1, VKF_ERROR_INVALID_ARGUMENT);      /* rows overlap */
    BAD(d.v.batch_stride = n * dm + 1, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.k.tensor = small, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.key_lengths = tq, VKF_ERROR_INVALID_ARGUMENT);           /* F32, not I32 */
    BAD(d.key_lengths = tl1, VKF_ERROR_INVALID_ARGUMENT);          /* fewer than batch */
    BAD(d.out = small, VKF_ERROR_INVALID_ARGUMENT);
    BAD(d.out = tq, VKF_ERROR_INVALID_ARGUMENT);                   /* aliases q */
    BAD(d.q.tensor = tl, VKF_ERROR_INVALID_ARGUMENT);              /* I32 */
    vkf_attention_tiles mismatched = {.workgroup = 64, .bq = 16, .bk = 16, .td = 2, .tq = 1};
    BAD(d.tiles = &mismatched, VKF_ERROR_INVALID_ARGUMENT);
    vkf_attention_tiles both = {.workgroup = 8, .bq = 8, .bk = 16, .td = 2, .tq = 2};
    BAD(d.tiles = &both, VKF_ERROR_INVALID_ARGUMENT);             /* td and tq both past 1 */
    vkf_attention_tiles zero = {.workgroup = 0, .bq = 0, .bk = 16, .td = 1, .tq = 1};
    BAD(d.tiles = &zero, VKF_ERROR_INVALID_ARGUMENT);
    uint32_t too_many = info->max_workgroup_invocations * 2;
    vkf_attention_tiles wide = {.workgroup = too_many, .bq = too_many, .bk = 4, .td = 1, .tq = 1};
    BAD(d.tiles = &wide, VKF_ERROR_UNSUPPORTED);
    vkf_attention_tiles big = {.workgroup = 1, .bq = 1, .bk = info->max_shared_memory / 16, .td = 1, .tq = 1};
    BAD(d.tiles = &big, VKF_ERROR_UNSUPPORTED);                   /* K/V tiles past shared memory */
    /* Past the shader's 32-bit positions and indices, and past the grid. */
    BAD(d.lq = 0x80000000u, VKF_ERROR_TOO_LARGE);
    BAD(d.lk = 0x80000000u, VKF_ERROR_TOO_LARGE);
    BAD((d.head_dim = 256, d.heads = 1, d.batch = 1, d.lq = 1u << 24), VKF_ERROR_TOO_LARGE);  /* out: 2^32 elements */
    /* 65535 x 65537 workgroups of one query: past a 65535 x 65535 grid (lavapipe's,
     * SwiftShader's) though the output fits 2^32 elements. */
    /* the lanes form: lanes 0 or 1; bk the subgroup size and whole subgroups */
    vkf_attention_tiles lanes2 = {.workgroup = 8, .bq = 8, .bk = 8, .td = 1, .tq = 1, .lanes = 2};
    BAD(d.tiles = &lanes2, VKF_ERROR_INVALID_ARGUMENT);
    uint32_t sgs = info->subgroup_size ? info->subgroup_size : 4;
    vkf_attention_tiles lanes_bk = {.workgroup = sgs, .bq = sgs, .bk = 2 * sgs, .td = 1, .tq = 1, .lanes = 1};
    BAD(d.tiles = &lanes_bk, VKF_ERROR_UNSUPPORTED);
    vkf_attention_tiles lanes_part = {.workgroup = sgs + 1, .bq = sgs + 1, .bk = sgs, .td = 1, .tq = 1, .lanes = 1};
    BAD(d.tiles = &lanes_part, VKF_ERROR_UNSUPPORTED);
    vkf_attention_tiles one = {.workgroup = 1, .bq = 1, .bk = 4, .td = 1, .tq = 1};
    bool past_grid = 65535ull * 65537 > (uint64_t)info->max_workgroup_count[0] * info->max_workgroup_count[1];
    BAD((d.tiles = &one, d.head_dim = 1, d.heads = 65537, d.batch = 1, d.lq = 65535),
        past_grid ? VKF_ERROR_TOO_LARGE : VKF_ERROR_INVALID_ARGUMENT);
    /* bigbird: parameters, its table, and tiles spanning more than 32 of its blocks */
    d = good;
    d.pattern = VKF_ATTENTION_BIGBIRD, d.bigbird = (vkf_bigbird){.block = 4, .globals = 1, .random = 2, .seed = 1};
    vkf_tensor *table = NULL;
    CHECK_OK(vkf_attention_table_create(ctx, &d, &table));
    good_bb = d;
    good_bb.table = table;
    vkf_tensor *none = tq;
    CHECK_FAIL(vkf_attention_table_create(ctx, &good, &none), VKF_ERROR_INVALID_ARGUMENT, "bigbird");
    CHECK(none == NULL);
    d.bigbird.block = 0;
    CHECK_FAIL(vkf_attention_table_create(ctx, &d, &none), VKF_ERROR_INVALID_ARGUMENT, "block");
#define BAD_BB(field_change, status, word)                                                                       \
    do {                                                                                                         \
        d = good_bb;                                                                                             \
        field_change;                                                                                            \
        CHECK_FAIL(vkf_op_attention_fused(cmd, &d), status, word);                                               \
    } while (0)
    BAD_BB(d.table = NULL, VKF_ERROR_INVALID_ARGUMENT, "table");
    BAD_BB(d.bigbird.block = 0, VKF_ERROR_INVALID_ARGUMENT, "block");
    BAD_BB(d.bigbird.random = VKF_BIGBIRD_MAX_RANDOM + 1, VKF_ERROR_INVALID_ARGUMENT, "random");
    BAD_BB(d.table = tl, VKF_ERROR_INVALID_ARGUMENT, "table");         /* too few entries */
    BAD_BB(d.table = tq, VKF_ERROR_INVALID_ARGUMENT, "table");         /* F32 */
    BAD_BB(d.out = table, VKF_ERROR_INVALID_ARGUMENT, "out");
    vkf_attention_tiles wide_bq = {.workgroup = 64, .bq = 64, .bk = 8, .td = 1, .tq = 1};
    BAD_BB((d.tiles = &wide_bq, d.bigbird.block = 1), VKF_ERROR_UNSUPPORTED, "span");
#undef BAD_BB
#undef BAD
    CHECK(vkf_cmd_op_count(cmd) == 0); /* nothing was recorded */

    /* Valid calls still work on the same list, and a pattern with a huge window or
     * causal offset is clamped, not refused. */
    d = good;
    d.pattern = VKF_ATTENTION_STRIDED, d.window = 0xffffffffu, d.stride = 0xffffffffu;
    d.causal = true, d.causal_offset = 0xffffffffu;
    CHECK_OK(vkf_op_attention_fused(cmd, &good));
    CHECK_OK(vkf_op_attention_fused(cmd, &d));
    CHECK_OK(vkf_op_attention_fused(cmd, &good_bb));
    CHECK_OK(vkf_cmd_submit(cmd));
    CHECK_STATUS(vkf_op_attention_fused(cmd, &good), VKF_ERROR_STATE);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(table);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tk), vkf_tensor_destroy(tv), vkf_tensor_destroy(to);
    vkf_tensor_destroy(small), vkf_tensor_destroy(tl), vkf_tensor_destroy(tl1);
}

int main(void)
{
    vkf_context *ctx = harness_context();
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    vkf_attention_tiles mine;
    for (uint32_t hd = 64; hd <= VKF_ATTENTION_MAX_HEAD_DIM; hd *= 4) {
        vkf_attention_tiles_choose(ctx, hd, &mine);
        fprintf(stderr, "tiles for head_dim %u: workgroup %u, bq %u, bk %u, td %u, tq %u%s (%llu bytes of shared memory)\n",
                hd, mine.workgroup, mine.bq, mine.bk, mine.td, mine.tq, mine.lanes ? ", lanes form" : "",
                (unsigned long long)vkf_attention_shared_bytes(&mine, hd));
    }

    uint64_t seed = 1;
    for (size_t i = 0; i < N_CASES; i++) run_case(ctx, &CASES[i], NULL, seed += 8);
    /* The tile sets, and where the device has subgroup shuffles the lanes form
     * (attention_fused_lanes.comp): one row per lane in two subgroups, and three
     * rows per lane in one (bq not a power of two; at most 32, as bigbird:1 needs). */
    tile_set sets[N_TILE_SETS + 2];
    size_t n_sets = 0;
    for (size_t t = 0; t < N_TILE_SETS; t++) sets[n_sets++] = TILE_SETS[t];
    uint32_t sg = info.subgroup_size;
    if (info.subgroup_shuffle && sg) {
        sets[n_sets++] =
            (tile_set){"lanes-2sg-tq1", {.workgroup = 2 * sg, .bq = 2 * sg, .bk = sg, .td = 1, .tq = 1, .lanes = 1}};
        sets[n_sets++] = (tile_set){"lanes-tq3", {.workgroup = sg, .bq = 3 * sg, .bk = sg, .td = 1, .tq = 3, .lanes = 1}};
    } else {
        fprintf(stderr, "no subgroup shuffles: the lanes form is not tested\n");
    }
    /* Both forms of the kernel with odd tiles, on every case small enough; the
     * rest on one tile set each, in turn. */
    for (size_t i = 0; i < N_CASES; i++) {
        const att_case *c = &CASES[i];
        bool small = (uint64_t)c->batch * c->heads * c->lq * c->lk * c->head_dim <= 4000000;
        for (size_t t = 0; t < n_sets; t++) {
            if (!small && t != i % n_sets) continue;
            const vkf_attention_tiles *tt = &sets[t].tiles;
            if (vkf_attention_shared_bytes(tt, c->head_dim) > info.max_shared_memory) continue;
            /* several rows of a wide head per invocation: slow to compile on CPU drivers */
            if (tt->tq * ((c->head_dim + 3) / 4) > 64) continue;
            run_case(ctx, c, &sets[t], seed += 8);
        }
    }
    test_bigbird_random();
    test_lowrank(ctx);
    test_f16(ctx, &info);
    test_coopmat(ctx, &info);
    test_dense_equality(ctx);
    test_bad_arguments(ctx, &info);
    harness_close(ctx);
    return harness_result("test_attention");
}

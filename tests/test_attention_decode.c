/* The decode step's attention (vkf_op_attention_decode, shaders/attention_decode.comp)
 * against the plain-C reference (ref_attention), in each of its forms: the rows
 * form (CPU drivers), the one-workgroup split form and the split-K form (flash
 * decoding: the keys over several workgroups, their partials combined by
 * attention_decode_reduce.comp), which VKFORMER_DECODE_FORM=split gives wherever
 * the cache is long. Long caches (up to 2000 keys) with the position in the
 * middle of a chunk, at its end and near the start (most chunks empty), head_dim
 * past the workgroup (128), T5's relative position bias, the local, strided and
 * bigbird patterns, cross-attention with per-source lengths (0, some, more than
 * the keys) and beams sharing a source (kv_div), beam search's row index, and F16
 * activations; and the rows form's bound on keys per invocation (16384: CPU drivers'
 * loop limits, see ops.c), at it and one past, where split-K takes over. */
#include "harness.h"
#include "internal.h"
#include "attention/attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct dec_case {
    uint32_t batch, heads, head_dim, max_keys;
    int32_t pos;                        /* self-attention: state[0] (keys 0..pos); -1: cross-attention */
    int32_t lengths[3];                 /* cross: per source */
    uint32_t kv_div;                    /* cross: beams per source */
    bool bias;                          /* self: T5's bias, radius 32 */
    uint32_t pattern, window, stride;   /* self */
    uint32_t bb_block, bb_globals, bb_random;
    bool indexed;                       /* self: a row index (rows' keys in other rows) */
    bool f16;                           /* F16 activations */
} dec_case;

static vkf_tensor *typed(vkf_context *ctx, const float *x, uint64_t n, bool f16)
{
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, f16 ? VKF_DTYPE_F16 : VKF_DTYPE_F32, 1, &n, &t));
    if (x) CHECK_OK(vkf_upload_floats(t, x, n));
    return t;
}

static vkf_tensor *ints(vkf_context *ctx, const int32_t *x, uint64_t n)
{
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &n, &t));
    CHECK_OK(vkf_tensor_upload(t, x, n * 4));
    return t;
}

/* x rounded through f16 where the tensor is F16, so the reference sees the same inputs. */
static void round_f16(float *x, uint64_t n, bool f16)
{
    if (f16)
        for (uint64_t e = 0; e < n; e++) x[e] = ref_f16_to_f32(ref_f32_to_f16(x[e]));
}

static void run(vkf_context *ctx, const char *form, const dec_case *c, uint64_t seed)
{
    const bool self = c->pos >= 0;
    const uint32_t B = c->batch, H = c->heads, hd = c->head_dim, S = c->max_keys;
    const uint32_t kv_div = self ? 1 : c->kv_div ? c->kv_div : 1, kv_rows = (B + kv_div - 1) / kv_div;
    const uint64_t dm = (uint64_t)H * hd;
    float *q = harness_random(B * dm, seed), *k = harness_random((uint64_t)kv_rows * S * dm, seed + 1);
    float *v = harness_random((uint64_t)kv_rows * S * dm, seed + 2);
    for (uint64_t e = 0; e < B * dm; e++) q[e] *= 3.0f; /* peaky: the chunks' maxima differ */
    round_f16(q, B * dm, c->f16), round_f16(k, (uint64_t)kv_rows * S * dm, c->f16);
    round_f16(v, (uint64_t)kv_rows * S * dm, c->f16);
    const uint32_t R = 32, width = 2 * R + 1;
    float *table = harness_random((size_t)H * width, seed + 3);
    for (uint32_t e = 0; e < H * width; e++) table[e] *= 4.0f;
    vkf_tensor *tq = typed(ctx, q, B * dm, c->f16), *tk = typed(ctx, k, (uint64_t)kv_rows * S * dm, c->f16);
    vkf_tensor *tv = typed(ctx, v, (uint64_t)kv_rows * S * dm, c->f16), *to = typed(ctx, NULL, B * dm, c->f16);
    vkf_tensor *ts = typed(ctx, NULL, (uint64_t)B * H * S, false);
    vkf_tensor *tt = c->bias ? typed(ctx, table, (uint64_t)H * width, false) : NULL;
    int32_t state = c->pos;
    vkf_tensor *tl = self ? ints(ctx, &state, 1) : ints(ctx, c->lengths, kv_rows);
    /* row index: row b's key j lives in row (b + j) % B */
    int32_t *index = NULL;
    vkf_tensor *ti = NULL;
    if (c->indexed) {
        index = harness_alloc((size_t)B * S * 4);
        for (uint32_t b = 0; b < B; b++)
            for (uint32_t j = 0; j < S; j++) index[(size_t)b * S + j] = (int32_t)((b + j) % B);
        ti = ints(ctx, index, (uint64_t)B * S);
    }
    vkf_bigbird bb = {c->bb_block, c->bb_globals, c->bb_random, true, seed};
    uint32_t nqb = c->bb_block ? (S + c->bb_block - 1) / c->bb_block : 0;
    int32_t *random = NULL;
    vkf_tensor *tr = NULL;
    if (c->pattern == VKF_ATTENTION_BIGBIRD) {
        random = harness_alloc(((size_t)nqb * c->bb_random + 1) * 4);
        for (uint32_t qb = 0; qb < nqb; qb++) vkf_bigbird_random_blocks(&bb, qb, nqb, random + (size_t)qb * c->bb_random);
        uint64_t nr = (uint64_t)nqb * c->bb_random;
        tr = ints(ctx, random, nr ? nr : 1);
    }
    vkf_attention_decode_desc d = {
        .batch = B, .heads = H, .head_dim = hd, .max_keys = S, .scale = 1.0f / sqrtf((float)hd),
        .q = tq, .q_batch = dm, .k = tk, .k_row = dm, .k_batch = (uint64_t)S * dm,
        .v = tv, .v_row = dm, .v_batch = (uint64_t)S * dm, .lengths = tl, .length_from_state = self,
        .scratch = ts, .out = to, .kv_div = kv_div, .row_index = ti, .rel_bias = tt, .rel_radius = R,
        .pattern = c->pattern, .window = c->window, .stride = c->stride, .bigbird = bb, .random_blocks = tr,
    };
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_op_attention_decode(cmd, &d));
    uint32_t ops = vkf_cmd_op_count(cmd);
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_alloc(B * dm * 4), *want = harness_alloc(B * dm * 4);
    CHECK_OK(vkf_download_floats(to, got, B * dm));

    /* The reference, per row b: its keys gathered, then ref_attention of pos + 1
     * identical query rows (q_row 0) so that the last one sits at the decode
     * position for the patterns and the bias (one row for cross-attention). */
    uint32_t lq = self ? (uint32_t)c->pos + 1 : 1;
    float *kb = harness_alloc((size_t)S * dm * 4), *vb = harness_alloc((size_t)S * dm * 4);
    float *ob = harness_alloc((size_t)lq * dm * 4);
    unsigned char *allowed = NULL;
    if (c->pattern == VKF_ATTENTION_BIGBIRD) {
        allowed = harness_alloc((size_t)lq * S);
        for (uint32_t i = 0; i < lq; i++)
            for (uint32_t j = 0; j < S; j++)
                allowed[(size_t)i * S + j] = vkf_bigbird_allowed(&bb, random + (size_t)(i / c->bb_block) * c->bb_random, i, j);
    }
    for (uint32_t b = 0; b < B; b++) {
        for (uint32_t j = 0; j < S; j++) {
            uint32_t row = c->indexed ? (uint32_t)index[(size_t)b * S + j] : b / kv_div;
            memcpy(kb + (size_t)j * dm, k + ((size_t)row * S + j) * dm, dm * 4);
            memcpy(vb + (size_t)j * dm, v + ((size_t)row * S + j) * dm, dm * 4);
        }
        int32_t len = self ? c->pos + 1 : c->lengths[b / kv_div];
        ref_attention_mask mask = {
            .lengths = &len,
            .pattern = (int)c->pattern,
            .window = c->window,
            .stride = c->stride ? c->stride : 1,
            .allowed = allowed,
            .allowed_cols = S,
            .rel_bias = c->bias ? table : NULL,
            .rel_radius = R,
        };
        ref_attention(ob, q + b * dm, 0, 0, kb, dm, 0, vb, dm, 0, 1, H, hd, lq, S, d.scale, &mask);
        memcpy(want + b * dm, ob + (size_t)(lq - 1) * dm, dm * 4);
    }
    char what[200];
    snprintf(what, sizeof what, "decode (%s form, %u dispatches) B=%u H=%u hd=%u keys=%u pos=%d kv_div=%u bias=%d "
             "pattern=%u indexed=%d %s", form, ops, B, H, hd, S, c->pos, kv_div, c->bias, c->pattern, c->indexed,
             c->f16 ? "f16" : "f32");
    harness_compare(what, got, want, B * dm, c->f16 ? 2e-3 : 2e-5, c->f16 ? 2e-3 : 1e-4);
    /* the split-K form runs where the cache is long enough for two chunks (and the partials fit) */
    if (strcmp(form, "split") == 0 && S >= 1024 && hd <= VKF_ATTENTION_MAX_HEAD_DIM) CHECK(ops == 2);
    if ((strcmp(form, "rows") == 0 && S <= 16384) || S < 128) CHECK(ops == 1);
    if (S > 16384) CHECK(ops == 2);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tq), vkf_tensor_destroy(tk), vkf_tensor_destroy(tv), vkf_tensor_destroy(to);
    vkf_tensor_destroy(ts), vkf_tensor_destroy(tt), vkf_tensor_destroy(tl), vkf_tensor_destroy(ti);
    vkf_tensor_destroy(tr);
    free(q), free(k), free(v), free(table), free(index), free(random), free(got), free(want);
    free(kb), free(vb), free(ob), free(allowed);
}

#define L VKF_ATTENTION_LOCAL
#define ST VKF_ATTENTION_STRIDED
#define BB VKF_ATTENTION_BIGBIRD
static const dec_case CASES[] = {
    {2, 2, 64, 2000, 1999},                                 /* the whole cache */
    {1, 3, 64, 2000, 1234},                                 /* the last chunk partly filled, later ones empty */
    {2, 1, 64, 1100, 2},                                    /* all but the first chunk empty */
    {1, 2, 128, 1500, 1400},                                /* head_dim past the CPU drivers' workgroup */
    {1, 2, 24, 1030, 1029, .bias = true},                   /* T5's bias */
    {1, 2, 64, 1200, 700, .bias = true, .pattern = L, .window = 100},
    {1, 1, 32, 1024, 1000, .pattern = ST, .window = 16, .stride = 64},
    {1, 2, 16, 1024, 900, .pattern = BB, .bb_block = 64, .bb_globals = 1, .bb_random = 2},
    {3, 2, 64, 1024, 1023, .indexed = true},                /* beams' keys in other rows */
    {4, 2, 64, 1300, -1, .lengths = {0, 777, 5000}, .kv_div = 2},   /* cross: an empty source, some, all */
    {2, 2, 64, 1024, 1023, .f16 = true},
    {3, 1, 40, 1100, -1, .lengths = {1100, 1, 513}, .f16 = true},
    {2, 2, 64, 40, 30},                                     /* a short cache: one workgroup per (b, h) */
    {2, 8, 64, 1500, -1, .lengths = {1500, 1500}, .kv_div = 1},     /* Whisper-base's cross-attention (30 s) */
    /* the rows form's bound (VKF_DECODE_ROWS_MAX_ITERATIONS): 16384 keys in one
     * invocation (lavapipe 22.3 cut them short past 32768, and past ~500 at
     * head_dim 64 before its head_dim loops were unrolled), then one key more,
     * where the split-K form takes over */
    {2, 1, 64, 16384, -1, .lengths = {16384, 9000}, .kv_div = 1},
    {1, 1, 32, 16385, -1, .lengths = {16385}, .kv_div = 1},
};
#undef L
#undef ST
#undef BB

/* Every case in both forms: the rows form is what CPU drivers run by default,
 * the split forms are what GPUs run (VKFORMER_DECODE_FORM=split gives them on
 * CPU drivers too). */
int main(void)
{
    static const char *const forms[2] = {"rows", "split"};
    uint64_t seed = 900;
    for (int f = 0; f < 2; f++) {
        setenv("VKFORMER_DECODE_FORM", forms[f], 1);
        vkf_context *ctx = harness_context();
        vkf_device_info info;
        vkf_context_device_info(ctx, &info);
        for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
            if (CASES[i].f16 && !info.storage_16bit) {
                fprintf(stderr, "test_attention_decode: F16 case %zu not run on \"%s\": no 16-bit storage\n", i,
                        info.name);
                continue;
            }
            run(ctx, forms[f], &CASES[i], seed += 8);
        }
        harness_close(ctx);
    }
    unsetenv("VKFORMER_DECODE_FORM");
    return harness_result("test_attention_decode");
}

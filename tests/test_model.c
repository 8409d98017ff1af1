/* Encoder-decoder models through the library API, on a post-LN and a pre-LN model
 * written by tools/export_torch.py (argv[1] is the directory holding them; the
 * build writes them, see MODELS below):
 *  (a) a batched forward of sequences of different source and target lengths gives,
 *      per sequence, the logits of a forward of that sequence alone (within 1e-5),
 *      and exactly zero rows past each target's length;
 *  (b) the recorded plan is reused: the same shape with other ids and other lengths
 *      (same maxima) still matches, also after more shapes than the plan cache holds;
 *  (c) batched greedy decoding equals decoding each source alone, also for a model
 *      whose eos bias is raised so that the sequences stop at different steps;
 *  (d) bad input fails with VKF_ERROR_INVALID_ARGUMENT and a message, and the model
 *      still works afterwards;
 *  (e) loading a missing file fails with VKF_ERROR_IO, garbage and a truncated file
 *      with VKF_ERROR_BAD_MODEL;
 *  (f) vkf_model_get_config reports the exported config;
 *  (g) text calls on a model without vocabularies fail with VKF_ERROR_UNSUPPORTED.
 * Parity with PyTorch itself is tests/test_parity.py's job. */
#include "harness.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The files and the export_torch.py options that wrote them (keep in step with
 * tests/meson.build):
 *   model_post.safetensors: --d-model 48 --heads 6 --encoder-layers 2 --decoder-layers 2
 *       --d-ff 100 --src-vocab 37 --tgt-vocab 37 --activation relu --seed 1
 *   model_pre.safetensors: --d-model 32 --heads 2 --encoder-layers 1 --decoder-layers 3
 *       --d-ff 72 --src-vocab 41 --tgt-vocab 37 --max-len 64 --activation gelu
 *       --norm-first --eps 1e-6 --embed-scale 1 --seed 2 */
typedef struct model_spec {
    const char *file;
    vkf_model_config cfg;               /* what the file must load as */
} model_spec;

static const model_spec MODELS[2] = {
    {"model_post.safetensors",
     {.d_model = 48, .n_heads = 6, .n_encoder_layers = 2, .n_decoder_layers = 2, .d_ff = 100,
      .activation = VKF_ACTIVATION_RELU, .norm_first = false, .layer_norm_eps = 1e-5f, .src_vocab_size = 37,
      .tgt_vocab_size = 37, .max_len = 128, .embed_scale = 6.92820323f /* sqrt(48) */, .pad_id = 0, .bos_id = 1,
      .eos_id = 2, .has_vocab = false}},
    {"model_pre.safetensors",
     {.d_model = 32, .n_heads = 2, .n_encoder_layers = 1, .n_decoder_layers = 3, .d_ff = 72,
      .activation = VKF_ACTIVATION_GELU, .norm_first = true, .layer_norm_eps = 1e-6f, .src_vocab_size = 41,
      .tgt_vocab_size = 37, .max_len = 64, .embed_scale = 1.0f, .pad_id = 0, .bos_id = 1, .eos_id = 2,
      .has_vocab = false}},
};

#define BATCH 3
#define MAX_NEW 12


static char *path_join(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = harness_alloc(n);
    snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static uint64_t rng = 88172645463325252ull;

static int32_t rand_id(uint32_t vocab)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int32_t)((rng >> 11) % vocab);
}

/* A batch of `count` random sequences with the given lengths; free with seq_free. */
typedef struct seqs {
    vkf_sequences s;
    int32_t *ids[BATCH];
    uint32_t lengths[BATCH];
} seqs;

static void seq_make(seqs *q, uint32_t count, const uint32_t *lengths, uint32_t vocab, int32_t first)
{
    memset(q, 0, sizeof *q);
    for (uint32_t i = 0; i < count; i++) {
        q->lengths[i] = lengths[i];
        q->ids[i] = harness_alloc(lengths[i] * sizeof(int32_t));
        for (uint32_t j = 0; j < lengths[i]; j++) q->ids[i][j] = rand_id(vocab);
        if (first >= 0) q->ids[i][0] = first;
    }
    q->s.count = count;
    q->s.ids = (const int32_t *const *)q->ids;
    q->s.lengths = q->lengths;
}

static void seq_free(seqs *q)
{
    for (uint32_t i = 0; i < BATCH; i++) free(q->ids[i]);
}

/* One sequence of a batch as a batch of one. */
static vkf_sequences seq_one(const seqs *q, uint32_t i)
{
    vkf_sequences s = {1, (const int32_t *const *)&q->ids[i], &q->lengths[i]};
    return s;
}

static uint32_t max_u32(const uint32_t *v, uint32_t n)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* Tolerances of results that should agree but may run other kernels: with F32
 * activations 1e-5; with F16 activations (auto on a GPU) a batch's rows choose
 * kernels by their count (a cooperative-matrix kernel from one fragment's rows,
 * the scalar ones below), and the two round differently at f16: a few f16 ulps
 * (seen on an H100: 1.5e-3 at 0.99, 3 ulps). */
static void activation_tolerance(vkf_model *model, double *atol, double *rtol)
{
    vkf_model_config c;
    vkf_model_get_config(model, &c);
    bool f16 = c.activations == VKF_DTYPE_F16;
    *atol = f16 ? 2e-3 : 1e-5;
    *rtol = f16 ? 4e-3 : 0;
}

/* Forward of a batch against forwards of each sequence alone. */
static void check_batched_forward(vkf_model *model, const char *name, const uint32_t *src_len, const uint32_t *tgt_len,
                                  seqs *out_src, seqs *out_tgt, float **out_logits)
{
    vkf_model_config c;
    vkf_model_get_config(model, &c);
    uint32_t V = c.tgt_vocab_size, T = max_u32(tgt_len, BATCH);
    seqs src, tgt;
    seq_make(&src, BATCH, src_len, c.src_vocab_size, -1);
    seq_make(&tgt, BATCH, tgt_len, c.tgt_vocab_size, c.bos_id);
    size_t n = (size_t)BATCH * T * V;
    float *batched = harness_alloc(n * sizeof *batched);
    for (size_t i = 0; i < n; i++) batched[i] = NAN; /* padding rows must be written */
    CHECK_OK(vkf_model_forward(model, &src.s, &tgt.s, batched, n));
    for (uint32_t i = 0; i < BATCH; i++) {
        vkf_sequences s1 = seq_one(&src, i), t1 = seq_one(&tgt, i);
        size_t n1 = (size_t)tgt_len[i] * V;
        float *single = harness_alloc(n1 * sizeof *single);
        CHECK_OK(vkf_model_forward(model, &s1, &t1, single, n1));
        char what[160];
        snprintf(what, sizeof what, "%s: batched forward, sequence %u (src %u, tgt %u of %u) vs alone", name, i,
                 src_len[i], tgt_len[i], T);
        double atol, rtol;
        activation_tolerance(model, &atol, &rtol);
        harness_compare(what, batched + (size_t)i * T * V, single, n1, atol, rtol);
        size_t nonzero = 0;
        for (size_t k = n1; k < (size_t)T * V; k++) nonzero += batched[(size_t)i * T * V + k] != 0.0f;
        if (nonzero) {
            fprintf(stderr, "%s: sequence %u: %zu of the %zu values past the target's length are not 0\n", name, i,
                    nonzero, (size_t)T * V - n1);
            harness_failures++;
        }
        free(single);
    }
    if (out_src) {
        *out_src = src, *out_tgt = tgt, *out_logits = batched;
    } else {
        seq_free(&src), seq_free(&tgt);
        free(batched);
    }
}

/* Greedy decoding of a batch against decoding each source alone. Returns the
 * generated lengths in out_lengths (may be NULL). */
static void check_batched_generate(vkf_model *model, const char *name, const seqs *src, uint32_t max_new,
                                   uint32_t *out_lengths)
{
    uint32_t B = src->s.count;
    int32_t *ids = harness_alloc((size_t)B * max_new * sizeof *ids);
    uint32_t lengths[BATCH] = {0};
    CHECK_OK(vkf_model_generate(model, &src->s, max_new, ids, lengths));
    for (uint32_t i = 0; i < B; i++) {
        vkf_sequences s1 = seq_one(src, i);
        int32_t *one = harness_alloc(max_new * sizeof *one);
        uint32_t len1 = 0;
        CHECK_OK(vkf_model_generate(model, &s1, max_new, one, &len1));
        bool same = lengths[i] == len1 && lengths[i] <= max_new &&
                    memcmp(ids + (size_t)i * max_new, one, len1 * sizeof *one) == 0;
        if (!same) {
            fprintf(stderr, "%s: batched generate, source %u (length %u): %u ids [", name, i, src->lengths[i],
                    lengths[i]);
            for (uint32_t j = 0; j < lengths[i] && j < max_new; j++)
                fprintf(stderr, "%s%d", j ? "," : "", ids[(size_t)i * max_new + j]);
            fprintf(stderr, "], alone %u ids [", len1);
            for (uint32_t j = 0; j < len1 && j < max_new; j++) fprintf(stderr, "%s%d", j ? "," : "", one[j]);
            fprintf(stderr, "]\n");
            harness_failures++;
        }
        free(one);
    }
    if (out_lengths) memcpy(out_lengths, lengths, B * sizeof *lengths);
    free(ids);
}

/* ------------------------------------------------------------------ (a), (b), (c) */

static void test_batches(vkf_model *model, const char *name)
{
    vkf_model_config c;
    vkf_model_get_config(model, &c);
    /* (a) */
    const uint32_t src_len[BATCH] = {5, 1, 9}, tgt_len[BATCH] = {4, 7, 1};
    check_batched_forward(model, name, src_len, tgt_len, NULL, NULL, NULL);
    /* (b) the same (count, longest source, longest target): other ids, then other
     * lengths with the same maxima (the masks and padding change). */
    check_batched_forward(model, name, src_len, tgt_len, NULL, NULL, NULL);
    const uint32_t src_len2[BATCH] = {9, 3, 2}, tgt_len2[BATCH] = {7, 1, 7};
    check_batched_forward(model, name, src_len2, tgt_len2, NULL, NULL, NULL);
    /* More shapes than the plan cache holds, then the first shape again. */
    for (uint32_t k = 0; k < 6; k++) {
        const uint32_t sl[BATCH] = {2 + k, 1, 3}, tl[BATCH] = {1, 2 + k, 2};
        check_batched_forward(model, name, sl, tl, NULL, NULL, NULL);
    }
    check_batched_forward(model, name, src_len, tgt_len, NULL, NULL, NULL);
    /* Longest sequences the model takes, with a length-1 neighbour. */
    const uint32_t src_len3[BATCH] = {c.max_len, 1, 2}, tgt_len3[BATCH] = {1, c.max_len, 3};
    check_batched_forward(model, name, src_len3, tgt_len3, NULL, NULL, NULL);

    /* (c) */
    const uint32_t gen_len[BATCH] = {6, 1, 11};
    seqs src;
    seq_make(&src, BATCH, gen_len, c.src_vocab_size, -1);
    check_batched_generate(model, name, &src, MAX_NEW, NULL);
    seq_free(&src);
    seq_make(&src, BATCH, gen_len, c.src_vocab_size, -1); /* same plan, other ids */
    check_batched_generate(model, name, &src, MAX_NEW, NULL);
    check_batched_generate(model, name, &src, 1, NULL);
    check_batched_generate(model, name, &src, c.max_len, NULL);
    seq_free(&src);
}

/* ------------------------------------------------------------------ (c) with eos */

static unsigned char *read_file(const char *path, size_t *out_size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = harness_alloc((size_t)n);
    size_t got = fread(data, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(data);
        return NULL;
    }
    *out_size = (size_t)n;
    return data;
}

static bool write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* Byte offset in the file of F32 tensor `name`'s data, or 0. */
static size_t tensor_offset(const unsigned char *file, size_t size, const char *name)
{
    if (size < 8) return 0;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | file[i];
    if (hlen > size - 8) return 0;
    char *header = harness_alloc(hlen + 1);
    memcpy(header, file + 8, hlen);
    header[hlen] = '\0';
    char key[128];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *p = strstr(header, key);
    const char *f32 = p ? strstr(p, "\"F32\"") : NULL;
    const char *offs = p ? strstr(p, "\"data_offsets\":[") : NULL;
    unsigned long long begin = 0;
    size_t at = 0;
    if (f32 && offs && f32 < offs && sscanf(offs + strlen("\"data_offsets\":["), "%llu", &begin) == 1)
        at = 8 + (size_t)hlen + (size_t)begin;
    free(header);
    return at;
}

static char *temp_path(const char *suffix)
{
    const char *dir = getenv("TMPDIR");
    char *path = harness_alloc(4096);
    snprintf(path, 4096, "%s/vkf-test-model-XXXXXX%s", dir && *dir ? dir : "/tmp", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    if (fd < 0) {
        perror("mkstemps");
        exit(1);
    }
    close(fd);
    return path;
}

/* Writes the model with generator.bias[eos] = bias to `tmp` and loads it. */
static vkf_model *load_with_eos_bias(vkf_context *ctx, unsigned char *file, size_t size, size_t eos_at, float bias,
                                     const char *tmp)
{
    memcpy(file + eos_at, &bias, 4);
    if (!write_file(tmp, file, size)) {
        fprintf(stderr, "cannot write %s\n", tmp);
        harness_failures++;
        return NULL;
    }
    vkf_model *model = NULL;
    vkf_status st = vkf_model_load(ctx, tmp, &model);
    if (st != VKF_OK) {
        fprintf(stderr, "loading the eos model failed: %s\n", vkf_last_error());
        harness_failures++;
        return NULL;
    }
    return model;
}

/* Copies of the post-LN model whose generator bias for eos is raised step by step
 * until, for three sources, greedy decoding alone stops at three different steps
 * (at least two before max_new, one of them after >= 2 ids; stopping at once, with
 * no id, counts); then batched
 * decoding must stop each sequence where decoding it alone does. Then a bias so
 * high that every sequence stops at once. */
static void test_eos(vkf_context *ctx, const char *path)
{
    size_t size = 0;
    unsigned char *file = read_file(path, &size);
    if (!file) {
        fprintf(stderr, "cannot read %s\n", path);
        harness_failures++;
        return;
    }
    size_t bias_at = tensor_offset(file, size, "generator.bias");
    const model_spec *spec = &MODELS[0];
    const int32_t eos = spec->cfg.eos_id;
    if (!bias_at || bias_at + 4 * (size_t)(eos + 1) > size) {
        fprintf(stderr, "%s: cannot find generator.bias (F32) in the header\n", path);
        harness_failures++;
        free(file);
        return;
    }
    size_t eos_at = bias_at + 4 * (size_t)eos;
    float base;
    memcpy(&base, file + eos_at, 4);
    char *tmp = temp_path(".safetensors");
    const uint32_t gen_len[BATCH] = {4, 1, 10};
    bool found = false;
    for (int set = 0; set < 8 && !found; set++) {
        seqs src;
        seq_make(&src, BATCH, gen_len, spec->cfg.src_vocab_size, -1);
        for (int step = 1; step <= 40 && !found; step++) {
            vkf_model *model = load_with_eos_bias(ctx, file, size, eos_at, base + 0.1f * (float)step, tmp);
            if (!model) break;
            uint32_t alone[BATCH];
            int32_t ids[MAX_NEW];
            for (uint32_t i = 0; i < BATCH; i++) {
                vkf_sequences s1 = seq_one(&src, i);
                alone[i] = MAX_NEW;
                CHECK_OK(vkf_model_generate(model, &s1, MAX_NEW, ids, &alone[i]));
            }
            int early = (alone[0] < MAX_NEW) + (alone[1] < MAX_NEW) + (alone[2] < MAX_NEW);
            bool distinct = alone[0] != alone[1] && alone[1] != alone[2] && alone[0] != alone[2];
            bool mid = (alone[0] >= 2 && alone[0] < MAX_NEW) || (alone[1] >= 2 && alone[1] < MAX_NEW) ||
                       (alone[2] >= 2 && alone[2] < MAX_NEW);
            if (early >= 2 && distinct && mid) {
                found = true;
                fprintf(stderr, "eos bias +%.1f: alone the sources stop after %u, %u, %u ids\n", 0.1 * step,
                        alone[0], alone[1], alone[2]);
                check_batched_generate(model, "eos model", &src, MAX_NEW, NULL);
                /* a longer limit: finished rows keep running on the GPU */
                check_batched_generate(model, "eos model", &src, MAX_NEW + 20, NULL);
            }
            vkf_model_destroy(model);
        }
        if (found) {
            vkf_model *model = load_with_eos_bias(ctx, file, size, eos_at, base + 100.0f, tmp);
            if (model) {
                uint32_t lengths[BATCH] = {1, 1, 1};
                check_batched_generate(model, "eos model, eos first", &src, MAX_NEW, lengths);
                CHECK(lengths[0] == 0 && lengths[1] == 0 && lengths[2] == 0);
                vkf_model_destroy(model);
            }
        }
        seq_free(&src);
    }
    if (!found) {
        fprintf(stderr, "no eos bias made three sources stop at three different steps\n");
        harness_failures++;
    }
    remove(tmp);
    free(tmp);
    free(file);
}

/* ------------------------------------------------------------------ (d) */

static void test_bad_input(vkf_model *model)
{
    vkf_model_config c;
    vkf_model_get_config(model, &c);
    uint32_t V = c.tgt_vocab_size;
    int32_t good_src[3] = {3, 4, 5}, good_tgt[2] = {c.bos_id, 6};
    uint32_t ls = 3, lt = 2;
    const int32_t *sp = good_src, *tp = good_tgt;
    vkf_sequences src = {1, &sp, &ls}, tgt = {1, &tp, &lt};
    float *logits = harness_alloc((size_t)2 * lt * V * sizeof *logits);
    int32_t out_ids[2 * 128];
    uint32_t out_len[2];
    uint64_t n = (uint64_t)lt * V;

    /* a reference result, to compare after the failures */
    float *before = harness_alloc(n * sizeof *before);
    CHECK_OK(vkf_model_forward(model, &src, &tgt, before, n));
    int32_t gen_before[8];
    uint32_t gen_before_len = 0;
    CHECK_OK(vkf_model_generate(model, &src, 8, gen_before, &gen_before_len));

    /* ids outside the vocabularies */
    int32_t bad_ids[3] = {3, (int32_t)c.src_vocab_size, 5};
    const int32_t *bp = bad_ids;
    vkf_sequences bad = {1, &bp, &ls};
    CHECK_FAIL(vkf_model_forward(model, &bad, &tgt, logits, n), VKF_ERROR_INVALID_ARGUMENT, "outside");
    CHECK_FAIL(vkf_model_generate(model, &bad, 4, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT, "outside");
    bad_ids[1] = -1;
    CHECK_FAIL(vkf_model_forward(model, &bad, &tgt, logits, n), VKF_ERROR_INVALID_ARGUMENT, "-1");
    CHECK_FAIL(vkf_model_generate(model, &bad, 4, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT, "-1");
    bad_ids[1] = INT32_MIN;
    CHECK_STATUS(vkf_model_generate(model, &bad, 4, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT);
    int32_t bad_tgt[2] = {c.bos_id, (int32_t)V};
    const int32_t *btp = bad_tgt;
    vkf_sequences badt = {1, &btp, &lt};
    CHECK_FAIL(vkf_model_forward(model, &src, &badt, logits, n), VKF_ERROR_INVALID_ARGUMENT, "target");
    bad_tgt[1] = -7;
    CHECK_FAIL(vkf_model_forward(model, &src, &badt, logits, n), VKF_ERROR_INVALID_ARGUMENT, "target");

    /* an empty sequence, and one past max_len */
    uint32_t zero = 0;
    vkf_sequences empty = {1, &sp, &zero};
    CHECK_FAIL(vkf_model_forward(model, &empty, &tgt, logits, n), VKF_ERROR_INVALID_ARGUMENT, "empty");
    CHECK_FAIL(vkf_model_forward(model, &src, &(vkf_sequences){1, &tp, &zero}, logits, 0), VKF_ERROR_INVALID_ARGUMENT,
               "empty");
    CHECK_FAIL(vkf_model_generate(model, &empty, 4, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT, "empty");
    uint32_t too_long = c.max_len + 1;
    int32_t *long_ids = calloc(too_long, sizeof *long_ids);
    const int32_t *lp = long_ids;
    vkf_sequences longs = {1, &lp, &too_long};
    CHECK_FAIL(vkf_model_forward(model, &longs, &tgt, logits, n), VKF_ERROR_INVALID_ARGUMENT, "max_len");
    CHECK_FAIL(vkf_model_forward(model, &src, &longs, logits, (uint64_t)too_long * V), VKF_ERROR_INVALID_ARGUMENT,
               "max_len");
    CHECK_FAIL(vkf_model_generate(model, &longs, 4, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT, "max_len");

    /* count 0, NULL ids, NULL lengths, a NULL sequence */
    vkf_sequences none = {0, &sp, &ls};
    CHECK_STATUS(vkf_model_forward(model, &none, &none, logits, 0), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_forward(model, &src, &(vkf_sequences){0, &tp, &lt}, logits, n), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_generate(model, &none, 4, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT);
    vkf_sequences null_ids = {1, NULL, &ls};
    CHECK_STATUS(vkf_model_forward(model, &null_ids, &tgt, logits, n), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_generate(model, &null_ids, 4, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT);
    const int32_t *null_seq = NULL;
    vkf_sequences null_one = {1, &null_seq, &ls};
    CHECK_STATUS(vkf_model_forward(model, &null_one, &tgt, logits, n), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_generate(model, &null_one, 4, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT);
    vkf_sequences null_lengths = {1, &sp, NULL};
    CHECK_STATUS(vkf_model_forward(model, &null_lengths, &tgt, logits, n), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_forward(model, NULL, &tgt, logits, n), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_forward(model, &src, NULL, logits, n), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_generate(model, NULL, 4, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT);

    /* out_floats not count * T * V; NULL outputs; NULL model */
    CHECK_FAIL(vkf_model_forward(model, &src, &tgt, logits, n - 1), VKF_ERROR_INVALID_ARGUMENT, "out_logits");
    CHECK_FAIL(vkf_model_forward(model, &src, &tgt, logits, n + 1), VKF_ERROR_INVALID_ARGUMENT, "out_logits");
    CHECK_STATUS(vkf_model_forward(model, &src, &tgt, logits, 0), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_forward(model, &src, &tgt, NULL, n), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_forward(NULL, &src, &tgt, logits, n), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_generate(model, &src, 4, NULL, out_len), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_generate(model, &src, 4, out_ids, NULL), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_generate(NULL, &src, 4, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT);

    /* max_new 0 and past max_len */
    CHECK_FAIL(vkf_model_generate(model, &src, 0, out_ids, out_len), VKF_ERROR_INVALID_ARGUMENT, "max_new");
    int32_t *big = harness_alloc(((size_t)c.max_len + 1) * sizeof *big);
    CHECK_FAIL(vkf_model_generate(model, &src, c.max_len + 1, big, out_len), VKF_ERROR_INVALID_ARGUMENT, "max_new");
    free(big);

    /* two sources, one target */
    const int32_t *two[2] = {good_src, good_src};
    uint32_t two_len[2] = {3, 3};
    vkf_sequences src2 = {2, two, two_len};
    CHECK_FAIL(vkf_model_forward(model, &src2, &tgt, logits, 2 * n), VKF_ERROR_INVALID_ARGUMENT, "target");
    CHECK_FAIL(vkf_model_forward(model, &src2, &tgt, logits, n), VKF_ERROR_INVALID_ARGUMENT, "target");
    CHECK_FAIL(vkf_model_forward(model, &src, &(vkf_sequences){2, two, two_len}, logits, 2 * (uint64_t)3 * V),
               VKF_ERROR_INVALID_ARGUMENT, "target");

    /* config NULLs */
    vkf_model_config cfg;
    CHECK_STATUS(vkf_model_get_config(NULL, &cfg), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_get_config(model, NULL), VKF_ERROR_INVALID_ARGUMENT);

    /* the model still works, and gives what it gave before */
    float *after = harness_alloc(n * sizeof *after);
    CHECK_OK(vkf_model_forward(model, &src, &tgt, after, n));
    harness_compare("forward after the failures", after, before, n, 0, 0);
    int32_t gen_after[8];
    uint32_t gen_after_len = 0;
    CHECK_OK(vkf_model_generate(model, &src, 8, gen_after, &gen_after_len));
    CHECK(gen_after_len == gen_before_len && memcmp(gen_after, gen_before, gen_after_len * sizeof(int32_t)) == 0);
    free(long_ids), free(before), free(after), free(logits);
}

/* ------------------------------------------------------------------ (e), (f), (g) */

static void test_load_errors(vkf_context *ctx, const char *dir)
{
    vkf_model *m = (vkf_model *)&rng; /* non-NULL, to see that failures clear it */
    char *missing = path_join(dir, "no-such-model.safetensors");
    CHECK_STATUS(vkf_model_load(ctx, missing, &m), VKF_ERROR_IO);
    CHECK(m == NULL);
    free(missing);

    char *garbage = temp_path(".safetensors");
    static const char junk[] = "this is not a safetensors file, just some text \x01\x02\x03\xff";
    CHECK(write_file(garbage, junk, sizeof junk));
    m = (vkf_model *)&rng;
    CHECK_STATUS(vkf_model_load(ctx, garbage, &m), VKF_ERROR_BAD_MODEL);
    CHECK(m == NULL);
    /* an empty file */
    CHECK(write_file(garbage, "", 0));
    m = (vkf_model *)&rng;
    CHECK_STATUS(vkf_model_load(ctx, garbage, &m), VKF_ERROR_BAD_MODEL);
    CHECK(m == NULL);
    /* a real model cut short (the data section ends early) */
    char *good = path_join(dir, MODELS[0].file);
    size_t size = 0;
    unsigned char *file = read_file(good, &size);
    CHECK(file != NULL);
    if (file) {
        CHECK(write_file(garbage, file, size - 100));
        m = (vkf_model *)&rng;
        CHECK_STATUS(vkf_model_load(ctx, garbage, &m), VKF_ERROR_BAD_MODEL);
        CHECK(m == NULL);
        free(file);
    }
    remove(garbage);
    free(garbage);
    free(good);

    CHECK_STATUS(vkf_model_load(ctx, NULL, &m), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_load(NULL, "x", &m), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_load(ctx, "x", NULL), VKF_ERROR_INVALID_ARGUMENT);
    vkf_model_destroy(NULL);
}

/* What precision auto means: F32 activations on CPU drivers; F16 where the
 * device's choice (or VKFORMER_AUTO_PRECISION=f16) says so and it has 16-bit
 * storage, and then the variants without F16 kernels are refused with a message. */
static void test_auto_precision(vkf_context *ctx, const char *path)
{
    vkf_device_info info;
    CHECK_OK(vkf_context_device_info(ctx, &info));
    vkf_model_config c;
    vkf_model *m = NULL;
    CHECK_OK(vkf_model_load(ctx, path, &m));
    if (m) {
        CHECK_OK(vkf_model_get_config(m, &c));
        /* VKFORMER_AUTO_PRECISION=f16|f32 (running the GPU choice on lavapipe) overrides the device's rule */
        const char *env = getenv("VKFORMER_AUTO_PRECISION");
        bool f16 = env && strcmp(env, "f16") == 0   ? info.storage_16bit
                   : env && strcmp(env, "f32") == 0 ? false
                                                    : vkf_auto_precision_f16(&info, info.storage_16bit);
        CHECK(c.activations == (f16 ? VKF_DTYPE_F16 : VKF_DTYPE_F32));
        CHECK(info.type != VKF_DEVICE_CPU || env || c.activations == VKF_DTYPE_F32);
        vkf_model_destroy(m);
    }
    vkf_model_load_options f32 = {.precision = VKF_PRECISION_F32};
    setenv("VKFORMER_AUTO_PRECISION", "f16", 1);
    CHECK_OK(vkf_model_load(ctx, path, &m));
    if (m) {
        CHECK_OK(vkf_model_get_config(m, &c));
        CHECK(c.activations == (info.storage_16bit ? VKF_DTYPE_F16 : VKF_DTYPE_F32));
        if (info.storage_16bit) CHECK_FAIL(vkf_model_set_attention(m, "lsh:1:4", "dense"), VKF_ERROR_UNSUPPORTED, "auto chose");
        else CHECK_OK(vkf_model_set_attention(m, "lsh:1:4", "dense"));
        CHECK_OK(vkf_model_set_attention(m, "local:4", "dense"));
        vkf_model_destroy(m);
    }
    /* explicit precision is not overridden */
    CHECK_OK(vkf_model_load_with(ctx, path, &f32, &m));
    if (m) {
        CHECK_OK(vkf_model_get_config(m, &c));
        CHECK(c.activations == VKF_DTYPE_F32);
        vkf_model_destroy(m);
    }
    /* int8 (weights quantized at load) takes auto's activations: F16 under the override
     * (as on a GPU with 16-bit storage), so the variants without an F16 form are refused */
    vkf_model_load_options i8 = {.precision = VKF_PRECISION_INT8};
    CHECK_OK(vkf_model_load_with(ctx, path, &i8, &m));
    if (m) {
        CHECK_OK(vkf_model_get_config(m, &c));
        CHECK(c.activations == (info.storage_16bit ? VKF_DTYPE_F16 : VKF_DTYPE_F32));
        if (info.storage_16bit) CHECK_FAIL(vkf_model_set_attention(m, "lsh:1:4", "dense"), VKF_ERROR_UNSUPPORTED, "F16");
        else CHECK_OK(vkf_model_set_attention(m, "lsh:1:4", "dense-naive"));
        vkf_model_destroy(m);
    }
    vkf_model_load_options past = {.precision = (vkf_precision)(VKF_PRECISION_INT8 + 1)};
    CHECK_FAIL(vkf_model_load_with(ctx, path, &past, &m), VKF_ERROR_INVALID_ARGUMENT, "unknown precision");
    setenv("VKFORMER_AUTO_PRECISION", "f32", 1);
    CHECK_OK(vkf_model_load(ctx, path, &m));
    if (m) {
        CHECK_OK(vkf_model_get_config(m, &c));
        CHECK(c.activations == VKF_DTYPE_F32);
        vkf_model_destroy(m);
    }
    unsetenv("VKFORMER_AUTO_PRECISION");
    /* the device rule: GPUs with 16-bit storage */
    vkf_device_info d = {0};
    for (int type = VKF_DEVICE_OTHER; type <= VKF_DEVICE_CPU; type++)
        for (int s16 = 0; s16 < 2; s16++) {
            d.type = (vkf_device_type)type;
            bool gpu = type == VKF_DEVICE_INTEGRATED_GPU || type == VKF_DEVICE_DISCRETE_GPU || type == VKF_DEVICE_VIRTUAL_GPU;
            CHECK(vkf_auto_precision_f16(&d, s16) == (gpu && s16));
        }
}

static void test_config(vkf_model *model, const model_spec *spec)
{
    vkf_model_config c;
    memset(&c, 0xa5, sizeof c);
    CHECK_OK(vkf_model_get_config(model, &c));
    const vkf_model_config *w = &spec->cfg;
#define CHECK_FIELD(f, fmt)                                                                         \
    if (c.f != w->f) {                                                                              \
        fprintf(stderr, "%s: config " #f " is " fmt ", expected " fmt "\n", spec->file, c.f, w->f);  \
        harness_failures++;                                                                         \
    }
    CHECK_FIELD(d_model, "%u");
    CHECK_FIELD(n_heads, "%u");
    CHECK_FIELD(n_encoder_layers, "%u");
    CHECK_FIELD(n_decoder_layers, "%u");
    CHECK_FIELD(d_ff, "%u");
    CHECK_FIELD(activation, "%d");
    CHECK_FIELD(norm_first, "%d");
    CHECK_FIELD(src_vocab_size, "%u");
    CHECK_FIELD(tgt_vocab_size, "%u");
    CHECK_FIELD(max_len, "%u");
    CHECK_FIELD(pad_id, "%d");
    CHECK_FIELD(bos_id, "%d");
    CHECK_FIELD(eos_id, "%d");
    CHECK_FIELD(has_vocab, "%d");
#undef CHECK_FIELD
    if (fabsf(c.layer_norm_eps - w->layer_norm_eps) > 1e-6f * w->layer_norm_eps) {
        fprintf(stderr, "%s: config layer_norm_eps is %g, expected %g\n", spec->file, c.layer_norm_eps, w->layer_norm_eps);
        harness_failures++;
    }
    if (fabsf(c.embed_scale - w->embed_scale) > 1e-6f * w->embed_scale) {
        fprintf(stderr, "%s: config embed_scale is %.9g, expected %.9g\n", spec->file, c.embed_scale, w->embed_scale);
        harness_failures++;
    }
}

static void test_text_unsupported(vkf_model *model)
{
    int32_t ids[16];
    uint32_t count = 99;
    CHECK_STATUS(vkf_model_encode_text(model, "hello world", ids, 16, &count), VKF_ERROR_UNSUPPORTED);
    CHECK(count == 0);
    char text[64];
    int32_t some[2] = {3, 4};
    CHECK_STATUS(vkf_model_decode_text(model, some, 2, text, sizeof text), VKF_ERROR_UNSUPPORTED);
}

/* ------------------------------------------------------------------ past one binding */

/* A context that plans with a 32 KiB binding limit (VKFORMER_MAX_BINDING): long
 * batches need activations past it (the FFN hidden rows, the logits), so the
 * forward pass and generation run in halves. The logits and ids must equal those
 * of the unlimited context's model; the limit's own errors name it. */
static void test_split(vkf_model *full, const char *path)
{
    setenv("VKFORMER_MAX_BINDING", "32768", 1);
    vkf_context *small = harness_context();
    unsetenv("VKFORMER_MAX_BINDING");
    vkf_device_info info;
    vkf_context_device_info(small, &info);
    CHECK(info.max_storage_buffer_range == 32768);
    vkf_model *model = NULL;
    CHECK_OK(vkf_model_load(small, path, &model));
    vkf_model_config c;
    vkf_model_get_config(full, &c);
    const uint32_t src_len[BATCH] = {40, 37, 39}, tgt_len[BATCH] = {20, 40, 2}; /* 40 rows of (3 x 48) fit 32 KiB */
    seqs src, tgt;
    seq_make(&src, BATCH, src_len, c.src_vocab_size, -1);
    seq_make(&tgt, BATCH, tgt_len, c.tgt_vocab_size, c.bos_id);
    uint32_t T = max_u32(tgt_len, BATCH), V = c.tgt_vocab_size;
    size_t n = (size_t)BATCH * T * V;
    float *want = harness_alloc(n * sizeof *want), *got = harness_alloc(n * sizeof *got);
    for (size_t i = 0; i < n; i++) got[i] = NAN;
    CHECK_OK(vkf_model_forward(full, &src.s, &tgt.s, want, n));
    if (model) CHECK_OK(vkf_model_forward(model, &src.s, &tgt.s, got, n));
    double atol, rtol;
    activation_tolerance(full, &atol, &rtol);
    harness_compare("forward of a batch run in halves under a 32 KiB binding limit", got, want, n, atol, rtol);
    int32_t *ids_want = harness_alloc((size_t)BATCH * MAX_NEW * sizeof(int32_t));
    int32_t *ids_got = harness_alloc((size_t)BATCH * MAX_NEW * sizeof(int32_t));
    uint32_t len_want[BATCH] = {0}, len_got[BATCH] = {0};
    CHECK_OK(vkf_model_generate(full, &src.s, MAX_NEW, ids_want, len_want));
    if (model) CHECK_OK(vkf_model_generate(model, &src.s, MAX_NEW, ids_got, len_got));
    CHECK(memcmp(len_want, len_got, sizeof len_want) == 0);
    CHECK(memcmp(ids_want, ids_got, (size_t)BATCH * MAX_NEW * sizeof(int32_t)) == 0);
    /* again: the model starts from the batch size it learned, with the same results */
    for (size_t i = 0; i < n; i++) got[i] = NAN;
    memset(ids_got, 0, (size_t)BATCH * MAX_NEW * sizeof(int32_t));
    if (model) CHECK_OK(vkf_model_forward(model, &src.s, &tgt.s, got, n));
    harness_compare("forward in learned chunks, a second call", got, want, n, atol, rtol);
    if (model) CHECK_OK(vkf_model_generate(model, &src.s, MAX_NEW, ids_got, len_got));
    CHECK(memcmp(ids_want, ids_got, (size_t)BATCH * MAX_NEW * sizeof(int32_t)) == 0);
    /* a bad source past the first chunk is named by its index in the call */
    int32_t keep = src.ids[2][1];
    src.ids[2][1] = (int32_t)c.src_vocab_size;
    if (model) CHECK_FAIL(vkf_model_generate(model, &src.s, MAX_NEW, ids_got, len_got), VKF_ERROR_INVALID_ARGUMENT,
                          "source sequence 2");
    if (model) CHECK_FAIL(vkf_model_forward(model, &src.s, &tgt.s, got, n), VKF_ERROR_INVALID_ARGUMENT,
                          "source sequence 2");
    src.ids[2][1] = keep;
    /* a limit below one row of a weight matrix: refused at load, naming the limit */
    setenv("VKFORMER_MAX_BINDING", "1024", 1);
    vkf_context *tiny = harness_context();
    setenv("VKFORMER_MAX_BINDING", "12", 1);
    vkf_context *bad = NULL;
    CHECK_FAIL(vkf_context_create(NULL, &bad), VKF_ERROR_INVALID_ARGUMENT, "VKFORMER_MAX_BINDING");
    unsetenv("VKFORMER_MAX_BINDING");
    vkf_model *none = NULL;
    CHECK_FAIL(vkf_model_load(tiny, path, &none), VKF_ERROR_TOO_LARGE, "maxStorageBufferRange");
    CHECK(none == NULL);
    harness_close(tiny);
    seq_free(&src), seq_free(&tgt);
    free(want), free(got), free(ids_want), free(ids_got);
    vkf_model_destroy(model);
    harness_close(small);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR  (DIR holds the model files written by tools/export_torch.py)\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    vkf_context *ctx = harness_context();
    for (int k = 0; k < 2; k++) {
        char *path = path_join(dir, MODELS[k].file);
        vkf_model *model = NULL;
        vkf_status st = vkf_model_load(ctx, path, &model);
        if (st != VKF_OK) {
            fprintf(stderr, "cannot load %s: %s: %s\n", path, vkf_status_string(st), vkf_last_error());
            harness_failures++;
            free(path);
            continue;
        }
        const char *name = MODELS[k].cfg.norm_first ? "pre-LN" : "post-LN";
        test_config(model, &MODELS[k]);
        test_batches(model, name);
        test_bad_input(model);
        test_text_unsupported(model);
        vkf_model_destroy(model);
        if (k == 0) test_eos(ctx, path);
        if (k == 0) {
            vkf_model *again = NULL;
            CHECK_OK(vkf_model_load(ctx, path, &again));
            if (again) test_split(again, path);
            vkf_model_destroy(again);
        }
        if (k == 0) test_auto_precision(ctx, path);
        free(path);
    }
    test_load_errors(ctx, dir);
    harness_close(ctx);
    return harness_result("test_model");
}

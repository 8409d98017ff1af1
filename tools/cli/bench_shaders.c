/* vkformer bench shaders: every pipeline the device's built-in rules pick for a
 * model's shapes, and what the driver's compiler says about each
 * (VK_KHR_pipeline_executable_properties): registers, spills, shared memory,
 * occupancy, instructions, the static cycle estimate, matrix instructions, and the
 * tile's arithmetic intensity. The ops are recorded through the library at the
 * model's real sizes (every matmul of the encoder, the teacher-forced decoder and
 * the decode step at 1, batch and batch x beam rows; fused attention of the
 * encoder, the decoder and cross-attention, and of a 4-token prompt; norms, softmax, embeddings; the
 * decode-step kernels and logits processing through vkf_cmd_step_kernels), so the
 * library's own rules choose; nothing is submitted. On a virtual GPU
 * (tools/vgpu.sh) these are the real compiler's statistics for that GPU. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TRY(expr)                                                                                                    \
    do {                                                                                                             \
        vkf_status try_status_ = (expr);                                                                             \
        if (try_status_ != VKF_OK) return try_status_;                                                               \
    } while (0)

/* A model's shapes: what the pipelines depend on. */
typedef struct shape_preset {
    const char *name;
    const char *about;
    unsigned d_model, heads, head_dim, d_ff, vocab, enc_layers, dec_layers;
    vkf_activation act;
    bool glu;                           /* gated FFN: ff1 is (2 d_ff, d), then act(h0) * h1 */
    bool rms;                           /* RMSNorm without bias */
    bool f32_activations;               /* activations stay F32 at every precision (T5) */
    unsigned src_len;                   /* encoder positions per source; 0: --src-len */
    unsigned audio_mels;                /* an audio stem: conv1 over 2 src_len frames of this many mels */
} shape_preset;

static const shape_preset shape_presets[] = {
    {"base", "bench model's base Transformer (tools/cli/bench_model.c)", 0, 0, 0, 0, 0, 0, 0, VKF_ACTIVATION_RELU,
     false, false, false, 0, 0},
    {"nllb", "NLLB-200 600M (M2M-100 layout)", 1024, 16, 64, 4096, 256206, 12, 12, VKF_ACTIVATION_RELU, false, false,
     false, 0, 0},
    {"flan-t5-base", "Flan-T5-base (gated-GELU FFN, RMSNorm, F32 activations)", 768, 12, 64, 2048, 32128, 12, 12,
     VKF_ACTIVATION_GELU_TANH, true, true, true, 0, 0},
    {"whisper-small", "Whisper-small (audio stem, 1500 encoder positions)", 768, 12, 64, 3072, 51865, 12, 12,
     VKF_ACTIVATION_GELU, false, false, false, 1500, 80},
};

/* Which op first built each pipeline (later ops that reuse it are not told apart). */
#define MAX_PIPES 512
typedef struct pipe_use {
    char first[96];                     /* the op that built it, with its sizes */
    double flops_per_byte;              /* the tile's arithmetic intensity (matmul, fused attention), or NAN */
} pipe_use;

typedef struct run {
    vkf_context *ctx;
    pipe_use use[MAX_PIPES];
    uint32_t seen;                      /* pipelines attributed so far */
    vkf_dtype act, weights;
    uint64_t max_binding;
} run;

static void destroy_all(vkf_tensor **t, int n)
{
    for (int i = 0; i < n; i++) vkf_tensor_destroy(t[i]);
}

static vkf_status tensor(vkf_context *ctx, vkf_dtype dtype, uint64_t rows, uint64_t cols, vkf_tensor **out)
{
    uint64_t shape[2] = {rows, cols};
    return vkf_tensor_create(ctx, dtype, 2, shape, out);
}

/* Bytes per element the variant reads A (activations) and B (weights) in, from its name. */
static void operand_bytes(const char *variant, double *a, double *b)
{
    *a = strstr(variant, "_act16") ? 2 : 4;
    *b = strstr(variant, "_f16b") ? 2 : strstr(variant, "_i8b") ? 1 : 4;
}

/* FLOPs per byte read from global memory by one workgroup's tile: a matmul tile
 * of bm x bn (spec constants 1, 2 of every matmul kernel) reads bm + bn rows of K
 * for 2 bm bn K FLOPs; the scalar fused attention's bq query rows (spec 1) read
 * each key and value row once for 4 bq head_dim FLOPs per key. */
static double tile_intensity(const vkf_pipeline_report *r, uint32_t m)
{
    double sa, sb;
    operand_bytes(r->variant, &sa, &sb);
    if (strncmp(r->variant, "matmul_", 7) == 0 && r->spec_count >= 6 && r->spec[1] && r->spec[2]) {
        double bm = r->spec[1] < m ? r->spec[1] : m, bn = r->spec[2];
        return 2.0 * bm * bn / (bm * sa + bn * sb);
    }
    if ((strcmp(r->variant, "attention_fused") == 0 || strcmp(r->variant, "attention_fused_f16") == 0) &&
        r->spec_count >= 2 && r->spec[1]) {
        double s = strstr(r->variant, "_f16") ? 2 : 4;
        return 2.0 * r->spec[1] / s;
    }
    return NAN;
}

/* Attributes the pipelines built since the last call to the op `label` of m rows. */
static vkf_status attribute(run *R, const char *label, uint32_t m)
{
    uint32_t n = vkf_context_pipeline_count(R->ctx);
    if (n > MAX_PIPES) n = MAX_PIPES;
    for (uint32_t i = R->seen; i < n; i++) {
        vkf_pipeline_report rep;
        TRY(vkf_context_pipeline_report(R->ctx, i, &rep));
        snprintf(R->use[i].first, sizeof R->use[i].first, "%s", label);
        R->use[i].flops_per_byte = tile_intensity(&rep, m);
    }
    R->seen = n;
    return VKF_OK;
}

/* C (m, n) = A (m, k) · B (n, k)ᵀ + bias, activation act. */
static vkf_status rec_matmul(run *R, const char *label, uint32_t m, uint32_t n, uint32_t k, vkf_activation act)
{
    vkf_tensor *t[4] = {0};
    vkf_cmd *cmd = NULL;
    vkf_status st = tensor(R->ctx, R->act, m, k, &t[0]);
    if (st == VKF_OK) st = tensor(R->ctx, R->weights, n, k, &t[1]);
    if (st == VKF_OK) st = tensor(R->ctx, R->act, m, n, &t[2]);
    if (st == VKF_OK) st = tensor(R->ctx, VKF_DTYPE_F32, 1, n, &t[3]);
    if (st == VKF_OK) st = vkf_cmd_create(R->ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_matmul_desc d;
        vkf_matmul_desc_init(&d);
        d.m = m, d.n = n, d.k = k;
        d.a.tensor = t[0], d.b.tensor = t[1], d.c.tensor = t[2], d.bias = t[3], d.activation = act;
        st = vkf_cmd_matmul(cmd, &d);
    }
    char what[96];
    snprintf(what, sizeof what, "%s %ux%ux%u", label, m, n, k);
    if (st == VKF_OK) st = attribute(R, what, m);
    vkf_cmd_destroy(cmd);
    destroy_all(t, 4);
    return st;
}

static vkf_status rec_attention(run *R, const char *label, const shape_preset *p, uint32_t batch, uint32_t lq,
                                uint32_t lk, bool causal)
{
    uint32_t inner = p->heads * p->head_dim;
    vkf_tensor *t[4] = {0};
    vkf_cmd *cmd = NULL;
    uint32_t *lengths = xmalloc(batch * sizeof *lengths);
    for (uint32_t b = 0; b < batch; b++) lengths[b] = lk;
    vkf_status st = tensor(R->ctx, R->act, (uint64_t)batch * lq, inner, &t[0]);
    if (st == VKF_OK) st = tensor(R->ctx, R->act, (uint64_t)batch * lk, inner, &t[1]);
    if (st == VKF_OK) st = tensor(R->ctx, R->act, (uint64_t)batch * lk, inner, &t[2]);
    if (st == VKF_OK) st = tensor(R->ctx, R->act, (uint64_t)batch * lq, inner, &t[3]);
    if (st == VKF_OK) st = vkf_cmd_create(R->ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_attention_op_desc d;
        vkf_attention_op_desc_init(&d);
        d.batch = batch, d.heads = p->heads, d.head_dim = p->head_dim, d.lq = lq, d.lk = lk;
        d.q.tensor = t[0], d.k.tensor = t[1], d.v.tensor = t[2], d.out = t[3], d.dtype = R->act;
        d.causal = causal, d.key_lengths = lengths;
        const char *kernel = NULL;
        st = vkf_cmd_attention(cmd, &d, &kernel);
    }
    char what[96];
    snprintf(what, sizeof what, "%s %ux%u keys, %u heads x %u", label, lq, lk, p->heads, p->head_dim);
    if (st == VKF_OK) st = attribute(R, what, lq);
    vkf_cmd_destroy(cmd);
    destroy_all(t, 4);
    free(lengths);
    return st;
}

static vkf_status rec_rows(run *R, const shape_preset *p, uint32_t rows, uint32_t d, uint32_t src_len,
                           uint32_t heads)
{
    vkf_tensor *t[8] = {0};
    vkf_cmd *cmd = NULL;
    vkf_status st = tensor(R->ctx, R->act, rows, d, &t[0]);
    if (st == VKF_OK) st = tensor(R->ctx, R->act, rows, d, &t[1]);
    if (st == VKF_OK) st = tensor(R->ctx, VKF_DTYPE_F32, 1, d, &t[2]);
    if (st == VKF_OK) st = tensor(R->ctx, VKF_DTYPE_F32, 1, d, &t[3]);
    if (st == VKF_OK) st = vkf_cmd_create(R->ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_layernorm_desc n;
        vkf_layernorm_desc_init(&n);
        n.rows = rows, n.cols = d, n.x = t[0], n.y = t[1], n.gamma = t[2], n.beta = p->rms ? NULL : t[3];
        n.rms = p->rms;
        st = vkf_cmd_layernorm(cmd, &n);
    }
    char what[96];
    snprintf(what, sizeof what, "%s %ux%u", p->rms ? "rmsnorm" : "layernorm", rows, d);
    if (st == VKF_OK) st = attribute(R, what, rows);
    /* softmax (dense-naive attention's scores, F32): one source's heads x queries x keys */
    if (st == VKF_OK) st = tensor(R->ctx, VKF_DTYPE_F32, (uint64_t)heads * src_len, src_len, &t[4]);
    if (st == VKF_OK) {
        vkf_softmax_desc s;
        vkf_softmax_desc_init(&s);
        s.rows = heads * src_len, s.cols = src_len, s.x = t[4], s.y = t[4];
        st = vkf_cmd_softmax(cmd, &s);
    }
    snprintf(what, sizeof what, "softmax %ux%u", heads * src_len, src_len);
    if (st == VKF_OK) st = attribute(R, what, rows);
    vkf_cmd_destroy(cmd);
    destroy_all(t, 8);
    return st;
}

/* Token embeddings (the table's part within one binding) plus sinusoidal positions. */
static vkf_status rec_embed(run *R, uint32_t tokens, uint32_t d, uint32_t vocab)
{
    vkf_tensor *t[4] = {0};
    vkf_cmd *cmd = NULL;
    vkf_status st = tensor(R->ctx, VKF_DTYPE_I32, 1, tokens, &t[0]);
    if (st == VKF_OK) st = tensor(R->ctx, R->weights, vocab, d, &t[1]);
    if (st == VKF_OK) st = tensor(R->ctx, R->act, tokens, d, &t[2]);
    if (st == VKF_OK) st = vkf_positional_encoding_create(R->ctx, tokens, d, &t[3]);
    if (st == VKF_OK) st = vkf_cmd_create(R->ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_embed_desc e;
        vkf_embed_desc_init(&e);
        e.tokens = tokens, e.d = d, e.vocab = vocab, e.ids = t[0], e.table = t[1], e.out = t[2], e.positions = t[3];
        st = vkf_cmd_embed(cmd, &e);
    }
    char what[96];
    snprintf(what, sizeof what, "embed %u tokens x %u", tokens, d);
    if (st == VKF_OK) st = attribute(R, what, tokens);
    vkf_cmd_destroy(cmd);
    destroy_all(t, 4);
    return st;
}

static vkf_status rec_step(run *R, const shape_preset *p, uint32_t rows, uint32_t beams, uint32_t steps,
                           uint32_t src_len, uint32_t vocab)
{
    vkf_cmd *cmd = NULL;
    vkf_status st = vkf_cmd_create(R->ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_step_kernels_desc d = {.rows = rows, .beams = beams, .heads = p->heads, .head_dim = p->head_dim,
                                   .keys = steps, .cross_keys = src_len, .vocab = vocab,
                                   .d_ff = p->glu ? p->d_ff : 0, .glu_activation = p->act, .dtype = R->act};
        st = vkf_cmd_step_kernels(cmd, &d);
    }
    char what[96];
    snprintf(what, sizeof what, "decode step %u rows%s", rows, beams > 1 ? " (beam)" : "");
    if (st == VKF_OK) st = attribute(R, what, rows);
    vkf_cmd_destroy(cmd);
    return st;
}

/* Every op of the model, in the order a run meets them. */
static vkf_status record_model(run *R, const shape_preset *p, uint32_t B, uint32_t S, uint32_t T, uint32_t beam)
{
    uint32_t d = p->d_model, inner = p->heads * p->head_dim, ff1 = p->glu ? 2 * p->d_ff : p->d_ff;
    /* the generator and embeddings in parts of one binding each (the loader's split) */
    uint64_t part_rows = R->max_binding / ((uint64_t)d * (R->weights == VKF_DTYPE_F16 ? 2 : 4));
    uint32_t vocab = part_rows < p->vocab ? (uint32_t)part_rows : p->vocab;
    uint32_t enc = B * S, dec = B * T;
    /* the encoder */
    if (p->audio_mels) {
        TRY(rec_matmul(R, "enc conv1", B * 2 * S, d, 3 * p->audio_mels, p->act));
        TRY(rec_matmul(R, "enc conv2", enc, d, 3 * d, p->act));
    } else {
        TRY(rec_embed(R, enc, d, vocab));
    }
    TRY(rec_rows(R, p, enc, d, S, p->heads));
    TRY(rec_matmul(R, "enc qkv", enc, 3 * inner, d, VKF_ACTIVATION_NONE));
    TRY(rec_attention(R, "enc self-attention", p, B, S, S, false));
    TRY(rec_matmul(R, "enc out", enc, d, inner, VKF_ACTIVATION_NONE));
    TRY(rec_matmul(R, "enc ffn1", enc, ff1, d, p->glu ? VKF_ACTIVATION_NONE : p->act));
    TRY(rec_matmul(R, "enc ffn2", enc, d, p->d_ff, VKF_ACTIVATION_NONE));
    /* cross-attention keys and values of the memory, once per source */
    TRY(rec_matmul(R, "cross kv", enc, 2 * inner, d, VKF_ACTIVATION_NONE));
    /* the decoder over a whole target (forward, scoring) */
    TRY(rec_embed(R, dec, d, vocab));
    TRY(rec_rows(R, p, dec, d, T, p->heads));
    TRY(rec_matmul(R, "dec qkv", dec, 3 * inner, d, VKF_ACTIVATION_NONE));
    TRY(rec_attention(R, "dec self-attention (causal)", p, B, T, T, true));
    TRY(rec_matmul(R, "dec out", dec, d, inner, VKF_ACTIVATION_NONE));
    TRY(rec_matmul(R, "dec cross q", dec, inner, d, VKF_ACTIVATION_NONE));
    TRY(rec_attention(R, "cross-attention", p, B, T, S, false));
    /* a 4-token prompt of one source (Whisper's start tokens): few query rows over
     * the whole source, where the rule may split the keys (split-K) */
    TRY(rec_attention(R, "cross-attention 4-token prompt, batch 1", p, 1, 4, S, false));
    TRY(rec_matmul(R, "dec cross out", dec, d, inner, VKF_ACTIVATION_NONE));
    TRY(rec_matmul(R, "dec ffn1", dec, ff1, d, p->glu ? VKF_ACTIVATION_NONE : p->act));
    TRY(rec_matmul(R, "dec ffn2", dec, d, p->d_ff, VKF_ACTIVATION_NONE));
    TRY(rec_matmul(R, "generator", dec, vocab, d, VKF_ACTIVATION_NONE));
    /* decode steps: one source greedy, the batch greedy, the batch's beams */
    uint32_t rows[3] = {1, B, B * beam}, beams[3] = {1, 1, beam};
    for (int i = 0; i < 3; i++) {
        if (i > 0 && rows[i] == rows[i - 1] && beams[i] == beams[i - 1]) continue;
        char what[64];
        snprintf(what, sizeof what, "step%s qkv", beams[i] > 1 ? " beam" : "");
        TRY(rec_matmul(R, what, rows[i], 3 * inner, d, VKF_ACTIVATION_NONE));
        snprintf(what, sizeof what, "step%s out", beams[i] > 1 ? " beam" : "");
        TRY(rec_matmul(R, what, rows[i], d, inner, VKF_ACTIVATION_NONE));
        snprintf(what, sizeof what, "step%s cross q", beams[i] > 1 ? " beam" : "");
        TRY(rec_matmul(R, what, rows[i], inner, d, VKF_ACTIVATION_NONE));
        snprintf(what, sizeof what, "step%s ffn1", beams[i] > 1 ? " beam" : "");
        TRY(rec_matmul(R, what, rows[i], ff1, d, p->glu ? VKF_ACTIVATION_NONE : p->act));
        snprintf(what, sizeof what, "step%s ffn2", beams[i] > 1 ? " beam" : "");
        TRY(rec_matmul(R, what, rows[i], d, p->d_ff, VKF_ACTIVATION_NONE));
        snprintf(what, sizeof what, "step%s generator", beams[i] > 1 ? " beam" : "");
        TRY(rec_matmul(R, what, rows[i], vocab, d, VKF_ACTIVATION_NONE));
        TRY(rec_rows(R, p, rows[i], d, S, p->heads));
        TRY(rec_step(R, p, rows[i], beams[i], T, S, vocab));
    }
    return VKF_OK;
}

static void print_int(int64_t v, int width)
{
    if (v < 0) printf(" %*s", width, "-");
    else printf(" %*lld", width, (long long)v);
}

static void json_int(const char *key, int64_t v)
{
    if (v < 0) printf(",\"%s\":null", key);
    else printf(",\"%s\":%lld", key, (long long)v);
}

static int run_bench_shaders(const options *o)
{
    const shape_preset *p = NULL;
    const char *name = o->preset ? o->preset : "base";
    for (size_t i = 0; i < sizeof shape_presets / sizeof shape_presets[0]; i++)
        if (strcmp(name, shape_presets[i].name) == 0) p = &shape_presets[i];
    if (!p)
        return cli_usage_error(o, "unknown --preset %s (base, nllb, flan-t5-base or whisper-small)", quoted(name));
    shape_preset base;
    if (strcmp(p->name, "base") == 0) {
        const preset *bp = find_preset("base");
        base = *p;
        base.d_model = bp->d_model, base.heads = bp->heads, base.head_dim = bp->d_model / bp->heads;
        base.d_ff = bp->d_ff, base.vocab = bp->vocab, base.enc_layers = base.dec_layers = bp->layers;
        p = &base;
    }
    uint32_t B = cli_given(o, "--batch") ? (uint32_t)o->batch : 8;
    uint32_t S = p->src_len ? p->src_len : cli_given(o, "--src-len") ? (uint32_t)o->src_len : 128;
    uint32_t T = cli_given(o, "--tgt-len") ? (uint32_t)o->tgt_len : 128;
    uint32_t beam = cli_given(o, "--beam") ? (uint32_t)o->beam : 4;
    if (p->src_len && cli_given(o, "--src-len"))
        return cli_usage_error(o, "--preset %s has %u encoder positions; --src-len does not apply", p->name, p->src_len);

    vkf_context_options co;
    context_options_from(o, &co);
    co.shader_statistics = true;
    run *R = calloc(1, sizeof *R);
    if (!R) {
        fprintf(stderr, "vkformer: out of host memory\n");
        return EXIT_ERROR;
    }
    vkf_status st = vkf_context_create(&co, &R->ctx);
    if (st != VKF_OK) {
        free(R);
        return fail(st);
    }
    vkf_device_info info;
    vkf_context_device_info(R->ctx, &info);
    bool f16 = vkf_context_auto_f16(R->ctx);
    R->weights = f16 ? VKF_DTYPE_F16 : VKF_DTYPE_F32;
    R->act = f16 && !p->f32_activations ? VKF_DTYPE_F16 : VKF_DTYPE_F32;
    R->max_binding = info.max_storage_buffer_range;
    bool stats = vkf_context_shader_statistics(R->ctx);
    /* tools/vgpu.sh names the virtual GPU it runs (NVK's name does not say the chip) */
    const char *vgpu = getenv("VKFORMER_VGPU");
    if (vgpu && !*vgpu) vgpu = NULL;
    char driver[600];
    jsonl_driver(&info, driver, sizeof driver);
    if (!stats)
        fprintf(stderr, "vkformer: bench shaders: \"%s\" (%s) has no VK_KHR_pipeline_executable_properties: pipelines "
                "are listed without statistics\n", info.name, driver);
    st = record_model(R, p, B, S, T, beam);
    /* The default batch halves until the preset's largest tensor fits one shader
     * binding (lavapipe 22.3's 128 MiB: Whisper-small's encoder FFN at batch 8),
     * on a fresh context so that no pipeline is attributed to the larger batch. */
    while (st == VKF_ERROR_TOO_LARGE && !cli_given(o, "--batch") && B > 1) {
        fprintf(stderr, "vkformer: bench shaders: batch %u: %s; trying batch %u (--batch sets it)\n", B,
                vkf_last_error(), B / 2);
        B /= 2;
        int closed = close_context(R->ctx, 0);
        memset(R, 0, sizeof *R);
        st = closed ? VKF_OK : vkf_context_create(&co, &R->ctx);
        if (closed || st != VKF_OK) {
            free(R);
            return closed ? closed : fail(st);
        }
        R->weights = f16 ? VKF_DTYPE_F16 : VKF_DTYPE_F32;
        R->act = f16 && !p->f32_activations ? VKF_DTYPE_F16 : VKF_DTYPE_F32;
        R->max_binding = info.max_storage_buffer_range;
        st = record_model(R, p, B, S, T, beam);
    }
    if (st != VKF_OK) {
        fprintf(stderr, "vkformer: bench shaders: %s\n", vkf_last_error());
        int code = exit_code_for(st);
        vkf_context *ctx = R->ctx;
        free(R);
        return close_context(ctx, code);
    }
    uint32_t count = R->seen;
    int code = 0;
    unsigned spilling = 0, below = 0;
    if (!o->json) {
        printf("bench shaders --preset %s (%s): batch %u, source %u, target %u, beam %u, %s weights, %s activations\n",
               p->name, p->about, B, S, T, beam, f16 ? "F16" : "F32", R->act == VKF_DTYPE_F16 ? "F16" : "F32");
        printf("on %s%s%s%s, %s: %u pipelines; %s%s\n", info.name, vgpu ? " (virtual GPU " : "", vgpu ? vgpu : "",
               vgpu ? ")" : "", driver, count,
               stats ? "compiler statistics, not timings" : "no statistics (the driver lacks the extension)",
               vkf_context_compile_only(R->ctx) ? "; a compile-only device: nothing executed" : "");
        printf("%-34s %5s %5s %6s %6s %5s %6s %7s %6s %7s  %s\n", "pipeline [spec constants]", "regs", "spill",
               "shared", "scratch", "waves", "instr", "cycles", "matrix", "FLOP/B", "first built by");
    }
    for (uint32_t i = 0; i < count; i++) {
        vkf_pipeline_report r;
        st = vkf_context_pipeline_report(R->ctx, i, &r);
        if (st != VKF_OK) {
            fprintf(stderr, "vkformer: bench shaders: %s\n", vkf_last_error());
            code = exit_code_for(st);
            break;
        }
        if (r.spills > 0) spilling++;
        bool low = r.waves >= 0 && r.waves_floor > 0 && r.waves < r.waves_floor;
        if (low) below++;
        double fpb = R->use[i].flops_per_byte;
        if (o->json) {
            jsonl_begin("bench shaders");
            printf(",\"bench\":\"shaders\",\"preset\":\"%s\",\"pipeline\":\"%s\",\"spec\":[", p->name, r.variant);
            for (uint32_t s = 0; s < r.spec_count; s++) printf("%s%u", s ? "," : "", r.spec[s]);
            printf("]");
            jsonl_string("first_use", R->use[i].first);
            jsonl_string("vgpu", vgpu);
            printf(",\"compile_only\":%s,\"statistics\":%s", vkf_context_compile_only(R->ctx) ? "true" : "false",
                   r.statistics ? "true" : "false");
            json_int("registers", r.registers);
            json_int("scalar_registers", r.scalar_registers);
            json_int("spills", r.spills);
            json_int("shared_bytes", r.shared_bytes);
            json_int("scratch_bytes", r.scratch_bytes);
            json_int("waves", r.waves);
            json_int("waves_floor", r.waves_floor > 0 ? r.waves_floor : -1);
            json_int("instructions", r.instructions);
            json_int("cycles", r.cycles);
            json_int("code_bytes", r.code_bytes);
            json_int("matrix_instructions", r.matrix_instructions);
            json_int("subgroup_size", r.subgroup_size ? (int64_t)r.subgroup_size : -1);
            printf(",\"flops_per_byte\":");
            jsonl_number(fpb, 4);
            printf(",\"driver_statistics\":{");
            for (uint32_t s = 0; s < r.stat_count; s++) {
                printf("%s\"", s ? "," : "");
                for (const char *c = r.stats[s].name; *c; c++)
                    if (*c == '"' || *c == '\\') printf("\\%c", *c);
                    else if ((unsigned char)*c >= 0x20) putchar(*c);
                printf("\":");
                jsonl_number(r.stats[s].value, 12);
            }
            printf("}");
            jsonl_end(&info);
        } else {
            char head[160];
            int len = snprintf(head, sizeof head, "%s [", r.variant);
            for (uint32_t s = 0; s < r.spec_count && len < (int)sizeof head - 12; s++)
                len += snprintf(head + len, sizeof head - len, "%s%u", s ? "," : "", r.spec[s]);
            snprintf(head + len, sizeof head - len, "]");
            printf("%-34s", head);
            if (strlen(head) > 34) printf("\n%-34s", "");
            print_int(r.registers, 5);
            print_int(r.spills, 5);
            print_int(r.shared_bytes, 6);
            print_int(r.scratch_bytes, 6);
            print_int(r.waves, 5);
            print_int(r.instructions, 6);
            print_int(r.cycles, 7);
            print_int(r.matrix_instructions, 6);
            if (isfinite(fpb)) printf(" %7.1f", fpb);
            else printf(" %7s", "-");
            printf("  %s%s%s\n", R->use[i].first, r.spills > 0 ? "  SPILLS" : "",
                   low ? "  BELOW OCCUPANCY FLOOR" : "");
        }
    }
    if (!o->json && code == 0) {
        printf("regs: vector registers per invocation; spill: registers spilled; shared: bytes per workgroup; scratch: "
               "private bytes per invocation; waves: "
               "occupancy as the driver counts it (RADV subgroups per SIMD, NVK warps per SM); cycles: the compiler's "
               "static estimate; matrix: matrix instructions in the final code (v_wmma, hmma); FLOP/B: the tile's "
               "FLOPs per byte read from global memory\n");
        if (spilling || below)
            printf("%u pipelines spill registers, %u fall below their occupancy floor\n", spilling, below);
    }
    if (code == 0 && o->check && (spilling || below)) {
        fprintf(stderr, "vkformer: bench shaders: %u pipelines spill registers and %u fall below their occupancy floor "
                "(docs/performance.md, \"Virtual GPUs\")\n", spilling, below);
        code = EXIT_WRONG;
    }
    if (code == 0 && o->check && !stats) {
        fprintf(stderr, "vkformer: bench shaders --check: the device reports no statistics to check\n");
        code = EXIT_ERROR;
    }
    vkf_context *ctx = R->ctx;
    free(R);
    return close_context(ctx, code);
}

int cmd_bench_shaders(int argc, char **argv)
{
    static const cli_option table[] = {
        {"--preset", CLI_STRING, CLI_OFF(preset), 0, 0, "base|nllb|flan-t5-base|whisper-small",
         "the model's shapes (default base)", NULL},
        {"--batch", CLI_COUNT, CLI_OFF(batch), 1, 256, "B",
         "sources per batch (default 8, halved until the largest tensor fits one binding)", NULL},
        {"--src-len", CLI_COUNT, CLI_OFF(src_len), 1, 4096, "S", "source tokens (default 128; Whisper: 1500 frames)",
         NULL},
        {"--tgt-len", CLI_COUNT, CLI_OFF(tgt_len), 1, 4096, "T", "target tokens and decode steps (default 128)", NULL},
        {"--beam", CLI_COUNT, CLI_OFF(beam), 1, 16, "K", "beams of the beam-search step (default 4)", NULL},
        {"--check", CLI_FLAG, CLI_OFF(check), 0, 0, NULL,
         "exit 5 when a pipeline spills registers or falls below its occupancy floor", NULL},
        {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line per pipeline", NULL},
        CLI_COMMON_OPTIONS,
        CLI_END};
    static const cli_command cmd = {
        "bench shaders", "[--preset base|nllb|flan-t5-base|whisper-small] [--json] [--check]",
        "every pipeline the device's rules pick for the model's shapes (each matmul at its sizes, the\n"
        "decode step at 1, batch and batch x beam rows, fused attention, norms, softmax, embeddings, the\n"
        "decode-step kernels and logits processing), built without running, with the driver's\n"
        "statistics (VK_KHR_pipeline_executable_properties): registers, spills, shared memory,\n"
        "occupancy, instructions, cycle estimate, matrix instructions, and each tile's FLOPs per byte.\n"
        "On a virtual GPU (tools/vgpu.sh navi31|gfx1201|strix1|ampere|ada) they are that GPU's compiler's\n"
        "statistics; nothing executes there. Where the driver lacks the extension, pipelines are listed alone.",
        table};
    options o = {0};
    int code = cli_parse(&cmd, argc, argv, &o);
    if (code < 0) code = cli_max_args(&o, 0);
    return code >= 0 ? code : run_bench_shaders(&o);
}

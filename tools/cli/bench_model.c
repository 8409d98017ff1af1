/* vkformer bench model: a random-weight model's forward pass, encoder run and decode step. */
#include "cli.h"
#include <unistd.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const preset presets[] = {
    {"small", 256, 4, 3, 1024, 1000},
    {"base", 512, 8, 6, 2048, 8000}, /* Transformer-base widths; a vocabulary of 8000 */
};

const preset *find_preset(const char *name)
{
    for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) return &presets[i];
    return NULL;
}

/* What the model's kernels are and where each choice came from (docs/json.md,
 * "Kernel choices"): the FFN's first matmul of the forward pass (rows: every
 * source token) and of a greedy decode step (rows: one per source), the fused
 * attention tiles and the decode kernels' form. */
typedef struct model_choices {
    vkf_kernel_choice forward_matmul, step_matmul, attention, decode;
    bool has_attention;
    uint32_t fm, sm, n, k;              /* the two matmuls: fm or sm rows x n x k */
} model_choices;

static void model_choices_get(vkf_context *ctx, vkf_model *model, const preset *p, unsigned long forward_rows,
                              unsigned long step_rows, model_choices *c)
{
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    bool f16 = cfg.activations == VKF_DTYPE_F16;
    memset(c, 0, sizeof *c);
    c->fm = (uint32_t)forward_rows, c->sm = (uint32_t)step_rows, c->n = p->d_ff, c->k = p->d_model;
    vkf_matmul_choice(ctx, c->fm, c->n, c->k, 1, f16, f16, &c->forward_matmul);
    vkf_matmul_choice(ctx, c->sm, c->n, c->k, 1, f16, f16, &c->step_matmul);
    c->has_attention = vkf_attention_fused_choice(ctx, p->d_model / p->heads, &c->attention) == VKF_OK;
    vkf_decode_form_choice(ctx, &c->decode);
}

static void print_choices(vkf_context *ctx, vkf_model *model, const preset *p, unsigned long forward_rows,
                          unsigned long step_rows)
{
    model_choices c;
    model_choices_get(ctx, model, p, forward_rows, step_rows, &c);
    printf("\"forward_matmul\":{\"m\":%u,\"n\":%u,\"k\":%u", c.fm, c.n, c.k);
    jsonl_choice(&c.forward_matmul, 6);
    printf("},\"step_matmul\":{\"m\":%u,\"n\":%u,\"k\":%u", c.sm, c.n, c.k);
    jsonl_choice(&c.step_matmul, 6);
    printf("},\"attention\":");
    if (c.has_attention) {
        printf("{\"head_dim\":%u", p->d_model / p->heads);
        jsonl_choice(&c.attention, 5);
        printf("}");
    } else {
        printf("null");
    }
    printf(",\"decode\":{\"what\":\"attention_decode and beam_partial\"");
    jsonl_choice(&c.decode, 0);
    printf("}");
}

static void print_choice_line(const char *what, const vkf_kernel_choice *c, uint32_t tiles)
{
    printf("  %-20s %s", what, c->kernel);
    for (uint32_t i = 0; i < tiles; i++) printf("%s%u", i ? "," : " [", c->tiles[i]);
    printf("%s from %s", tiles ? "]" : "", c->source);
    if (c->table_entry) printf(" (table entry: %s)", c->table_entry);
    printf("\n");
}

static void print_choices_text(vkf_context *ctx, vkf_model *model, const preset *p, unsigned long forward_rows,
                               unsigned long step_rows)
{
    model_choices c;
    model_choices_get(ctx, model, p, forward_rows, step_rows, &c);
    print_choice_line("forward FFN matmul", &c.forward_matmul, 6);
    print_choice_line("step FFN matmul", &c.step_matmul, 6);
    if (c.has_attention) print_choice_line("fused attention", &c.attention, 5);
    print_choice_line("decode kernels", &c.decode, 0);
}

/* Writes a random-weight model of the preset (layout of docs/file-format.md). */
bool write_random_model(const char *path, const preset *p, unsigned max_len)
{
    unsigned d = p->d_model, f = p->d_ff, v = p->vocab;
    struct { char name[96]; unsigned rows, cols; } t[512];
    int n = 0;
#define ADD(r, c, ...) (snprintf(t[n].name, sizeof t[n].name, __VA_ARGS__), t[n].rows = (r), t[n].cols = (c), n++)
    ADD(v, d, "src_embed.weight");
    ADD(v, d, "tgt_embed.weight");
    for (int side = 0; side < 2; side++)
        for (unsigned i = 0; i < p->layers; i++) {
            const char *s = side ? "decoder" : "encoder";
            const char *attn[2] = {"self_attn", "multihead_attn"};
            for (int a = 0; a < (side ? 2 : 1); a++) {
                ADD(3 * d, d, "transformer.%s.layers.%u.%s.in_proj_weight", s, i, attn[a]);
                ADD(0, 3 * d, "transformer.%s.layers.%u.%s.in_proj_bias", s, i, attn[a]);
                ADD(d, d, "transformer.%s.layers.%u.%s.out_proj.weight", s, i, attn[a]);
                ADD(0, d, "transformer.%s.layers.%u.%s.out_proj.bias", s, i, attn[a]);
            }
            ADD(f, d, "transformer.%s.layers.%u.linear1.weight", s, i);
            ADD(0, f, "transformer.%s.layers.%u.linear1.bias", s, i);
            ADD(d, f, "transformer.%s.layers.%u.linear2.weight", s, i);
            ADD(0, d, "transformer.%s.layers.%u.linear2.bias", s, i);
            for (int k = 1; k <= (side ? 3 : 2); k++) {
                ADD(0, d, "transformer.%s.layers.%u.norm%d.weight", s, i, k);
                ADD(0, d, "transformer.%s.layers.%u.norm%d.bias", s, i, k);
            }
        }
    ADD(0, d, "transformer.encoder.norm.weight");
    ADD(0, d, "transformer.encoder.norm.bias");
    ADD(0, d, "transformer.decoder.norm.weight");
    ADD(0, d, "transformer.decoder.norm.bias");
    ADD(v, d, "generator.weight");
    ADD(0, v, "generator.bias");
#undef ADD
    size_t cap = 128 * 1024, len = 0;
    char *h = xmalloc(cap);
    len += (size_t)snprintf(h + len, cap - len,
                            "{\"__metadata__\":{\"vkformer.config\":\"{\\\"d_model\\\":%u,\\\"n_heads\\\":%u,"
                            "\\\"n_encoder_layers\\\":%u,\\\"n_decoder_layers\\\":%u,\\\"d_ff\\\":%u,"
                            "\\\"activation\\\":\\\"relu\\\",\\\"norm_first\\\":false,\\\"layer_norm_eps\\\":1e-5,"
                            "\\\"src_vocab_size\\\":%u,\\\"tgt_vocab_size\\\":%u,\\\"max_len\\\":%u,"
                            "\\\"embed_scale\\\":1.0,\\\"pad_id\\\":0,\\\"bos_id\\\":1,\\\"eos_id\\\":2}\"}",
                            d, p->heads, p->layers, p->layers, f, v, v, max_len);
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bytes = (uint64_t)(t[i].rows ? t[i].rows : 1) * t[i].cols * 4;
        if (t[i].rows)
            len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%u,%u],\"data_offsets\":[%llu,%llu]}",
                                    t[i].name, t[i].rows, t[i].cols, (unsigned long long)offset,
                                    (unsigned long long)(offset + bytes));
        else
            len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[%u],\"data_offsets\":[%llu,%llu]}",
                                    t[i].name, t[i].cols, (unsigned long long)offset, (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    FILE *file = fopen(path, "wb");
    bool ok = file != NULL;
    uint64_t hlen = len;
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hlen >> (8 * i));
    ok = ok && fwrite(le, 1, 8, file) == 8 && fwrite(h, 1, len, file) == len;
    float buf[4096];
    for (int i = 0; ok && i < n; i++) {
        bool is_norm_weight = strstr(t[i].name, "norm") && strstr(t[i].name, ".weight");
        float amp = t[i].rows ? 1.0f / sqrtf((float)t[i].cols) : 0.02f;
        uint64_t count = (uint64_t)(t[i].rows ? t[i].rows : 1) * t[i].cols;
        for (uint64_t done = 0; ok && done < count; done += 4096) {
            size_t m = count - done < 4096 ? (size_t)(count - done) : 4096;
            for (size_t j = 0; j < m; j++) buf[j] = is_norm_weight ? 1.0f + 0.1f * rand_uniform() : amp * rand_uniform();
            ok = fwrite(buf, 4, m, file) == m;
        }
    }
    if (file && fclose(file) != 0) ok = false;
    free(h);
    return ok;
}

/* Sums the GPU time of each kind of operation of a timed command list. */
static void print_breakdown(const vkf_cmd *cmd, bool json)
{
    uint32_t count = 0;
    vkf_cmd_timings(cmd, NULL, 0, &count);
    double *ms = xmalloc((count ? count : 1) * sizeof *ms);
    vkf_cmd_timings(cmd, ms, count, &count);
    const char *names[16];
    double sums[16];
    unsigned ops[16];
    int kinds = 0;
    for (uint32_t i = 0; i < count; i++) {
        const char *name = vkf_cmd_op_name(cmd, i);
        int k = 0;
        while (k < kinds && strcmp(names[k], name) != 0) k++;
        if (k == kinds && kinds < 16) names[kinds] = name, sums[kinds] = 0, ops[kinds] = 0, kinds++;
        if (k < kinds) sums[k] += ms[i], ops[k]++;
    }
    for (int k = 0; k < kinds; k++) {
        if (json) printf("%s\"%s\":{\"ms\":%.4f,\"dispatches\":%u}", k ? "," : "", names[k], sums[k], ops[k]);
        else printf("    %-18s %10.3f ms  (%u dispatches)\n", names[k], sums[k], ops[k]);
    }
    free(ms);
}

/* Beam search with 4 beams over all T steps (eos held off by min_new) of the
 * bench's sources, as B x 4 rows: GPU time of the encoder run and of one step (the
 * KV-cache gather and the top-k included), wall-clock stats. */
static vkf_status bench_beam4(vkf_model *model, const vkf_sequences *ss, const char *name, unsigned long T,
                              double *enc_ms, double *step_ms, vkf_generate_stats *stats)
{
    fprintf(stderr, "bench model %s: beam search (4 beams), %lu tokens\n", name, T);
    vkf_generate_options g;
    vkf_generate_options_init(&g);
    g.beams = 4, g.max_new = (uint32_t)T, g.min_new = (uint32_t)T;
    int32_t *ids = xmalloc((size_t)ss->count * T * sizeof *ids);
    uint32_t *lens = xmalloc(ss->count * sizeof *lens);
    vkf_status st = vkf_model_generate_with(model, ss, &g, ids, lens, NULL);
    free(ids), free(lens);
    const vkf_cmd *step = NULL, *enc = NULL;
    if (st == VKF_OK) st = vkf_model_last_cmd(model, VKF_PASS_DECODE_STEP, &step);
    if (st == VKF_OK) st = vkf_cmd_gpu_ms(step, step_ms);
    if (st == VKF_OK) st = vkf_model_last_cmd(model, VKF_PASS_ENCODE, &enc);
    if (st == VKF_OK) st = vkf_cmd_gpu_ms(enc, enc_ms);
    if (st == VKF_OK) st = vkf_model_generate_stats(model, stats);
    return st;
}

static int run_bench_model(const options *o)
{
    const preset *p = find_preset(o->preset);
    if (!p) {
        if (!o->preset) return cli_usage_error(o, "needs --preset small or --preset base");
        return cli_usage_error(o, "--preset must be small or base, not %s", quoted(o->preset));
    }
    unsigned long B = o->batch, S = o->src_len, T = o->tgt_len;
    unsigned max_len = (unsigned)(S > T ? S : T);
    const char *tmpdir = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/vkformer-bench-%s-%d.safetensors", tmpdir && *tmpdir ? tmpdir : "/tmp", p->name,
             (int)getpid());
    if (!write_random_model(path, p, max_len)) {
        cli_error("cannot write the random model to %s", path);
        remove(path);
        return EXIT_ERROR;
    }
    options mo = *o;
    mo.model = path;
    vkf_context *ctx;
    vkf_model *model;
    int code = open_model(&mo, &ctx, &model);
    remove(path);
    if (code) return code;
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    uint64_t model_bytes = 0; /* device bytes of the loaded model's tensors (weights, scales, biases, norms, PE) */
    vkf_context_memory_usage(ctx, NULL, &model_bytes);
    vkf_status st = vkf_model_set_profiling(model, true);
    /* Random sources and targets (ids 3.. so no eos), full length. */
    int32_t *src = xmalloc(B * S * sizeof *src), *tgt = xmalloc(B * T * sizeof *tgt);
    const int32_t **sp = xmalloc(B * sizeof *sp), **tp = xmalloc(B * sizeof *tp);
    uint32_t *sl = xmalloc(B * sizeof *sl), *tl = xmalloc(B * sizeof *tl);
    for (unsigned long i = 0; i < B * S; i++) src[i] = 3 + (int32_t)((rng_state = rng_state * 6364136223846793005ull + 1) >> 33) % (int32_t)(p->vocab - 3);
    for (unsigned long i = 0; i < B * T; i++) tgt[i] = 3 + (int32_t)((rng_state = rng_state * 6364136223846793005ull + 1) >> 33) % (int32_t)(p->vocab - 3);
    for (unsigned long b = 0; b < B; b++) {
        sp[b] = src + b * S, tp[b] = tgt + b * T, sl[b] = (uint32_t)S, tl[b] = (uint32_t)T;
        tgt[b * T] = 1; /* bos */
    }
    vkf_sequences ss = {(uint32_t)B, sp, sl}, ts = {(uint32_t)B, tp, tl};
    uint64_t nlog = (uint64_t)B * T * p->vocab;
    float *logits = xmalloc(nlog * sizeof *logits);
    double *fwd = xmalloc(o->repeat * sizeof *fwd);
    const vkf_cmd *last = NULL;
    if (st == VKF_OK) st = vkf_model_forward(model, &ss, &ts, logits, nlog); /* warm-up */
    for (unsigned long r = 0; st == VKF_OK && r < o->repeat; r++) {
        fprintf(stderr, "bench model %s: forward %lu/%lu\n", p->name, r + 1, o->repeat);
        st = vkf_model_forward(model, &ss, &ts, logits, nlog);
        if (st == VKF_OK) st = vkf_model_last_cmd(model, VKF_PASS_FORWARD, &last);
        if (st == VKF_OK) st = vkf_cmd_gpu_ms(last, &fwd[r]);
    }
    /* Greedy decoding of T tokens (random weights rarely say eos; the step is timed
     * at its last position, where attention reads the longest cache). */
    int32_t *gen = xmalloc(B * T * sizeof *gen);
    uint32_t *gl = xmalloc(B * sizeof *gl);
    double enc_ms = 0, step_ms = 0;
    const vkf_cmd *enc = NULL, *step = NULL;
    if (st == VKF_OK) fprintf(stderr, "bench model %s: generating %lu tokens\n", p->name, T);
    if (st == VKF_OK) st = vkf_model_generate(model, &ss, (uint32_t)T, gen, gl);
    if (st == VKF_OK) st = vkf_model_last_cmd(model, VKF_PASS_ENCODE, &enc);
    if (st == VKF_OK) st = vkf_cmd_gpu_ms(enc, &enc_ms);
    if (st == VKF_OK) st = vkf_model_last_cmd(model, VKF_PASS_DECODE_STEP, &step);
    if (st == VKF_OK) st = vkf_cmd_gpu_ms(step, &step_ms);
    uint64_t peak = 0;
    vkf_generate_stats greedy_stats = {0}, beam_stats = {0};
    vkf_model_generate_stats(model, &greedy_stats);
    double beam_step_ms = 0, beam_enc_ms = 0;
    vkf_context_peak_memory(ctx, &peak);
    if (st != VKF_OK) code = fail(st);
    else {
        /* the greedy plan's command lists are read (print_breakdown) before beam search replaces them */
#define BEAM4() (st = bench_beam4(model, &ss, p->name, T, &beam_enc_ms, &beam_step_ms, &beam_stats))
        qsort(fwd, o->repeat, sizeof *fwd, compare_doubles);
        double median = o->repeat % 2 ? fwd[o->repeat / 2] : 0.5 * (fwd[o->repeat / 2 - 1] + fwd[o->repeat / 2]);
        if (o->json) {
            jsonl_begin("bench model");
            printf(",\"bench\":\"model\",\"preset\":\"%s\",\"batch\":%lu,\"src_len\":%lu,\"tgt_len\":%lu,"
                   "\"forward_ms\":%.4f,\"encode_ms\":%.4f,\"step_ms\":%.4f,\"peak_bytes\":%llu,\"model_bytes\":%llu,"
                   "\"forward_ops\":{",
                   p->name, B, S, T, median, enc_ms, step_ms, (unsigned long long)peak, (unsigned long long)model_bytes);
            print_breakdown(last, true);
            printf("},\"step_ops\":{");
            print_breakdown(step, true);
            printf("},\"choices\":{");
            print_choices(ctx, model, p, B * S, B);
            BEAM4();
            printf("},\"greedy\":{\"step_ms\":%.4f,\"tokens_per_s\":%.2f,\"first_token_ms\":%.3f,\"bytes\":%llu},"
                   "\"beam4\":{\"encode_ms\":%.4f,\"step_ms\":%.4f,\"tokens_per_s\":%.2f,\"first_token_ms\":%.3f,"
                   "\"bytes\":%llu}",
                   step_ms, greedy_stats.total_ms > 0 ? 1e3 * greedy_stats.tokens / greedy_stats.total_ms : 0.0,
                   greedy_stats.first_token_ms, (unsigned long long)greedy_stats.plan_bytes, beam_enc_ms, beam_step_ms,
                   beam_stats.total_ms > 0 ? 1e3 * beam_stats.tokens / beam_stats.total_ms : 0.0,
                   beam_stats.first_token_ms, (unsigned long long)beam_stats.plan_bytes);
            jsonl_end(&info);
        } else {
            printf("model %s (d_model %u, %u heads, %u+%u layers, d_ff %u, vocab %u), batch %lu, source %lu, target %lu, on %s\n",
                   p->name, p->d_model, p->heads, p->layers, p->layers, p->d_ff, p->vocab, B, S, T, info.name);
            printf("  forward pass         %10.3f ms GPU (median of %lu)\n", median, o->repeat);
            print_breakdown(last, false);
            printf("  generation: encoder  %10.3f ms GPU; decode step at position %lu: %.3f ms GPU per token\n", enc_ms,
                   T - 1, step_ms);
            print_breakdown(step, false);
            print_choices_text(ctx, model, p, B * S, B);
            BEAM4();
            printf("  greedy:  %8.3f ms GPU per step; %.1f tokens/s wall, first token after %.1f ms; generation plan "
                   "%.1f MiB\n", step_ms, greedy_stats.total_ms > 0 ? 1e3 * greedy_stats.tokens / greedy_stats.total_ms : 0.0,
                   greedy_stats.first_token_ms, (double)greedy_stats.plan_bytes / (1 << 20));
            printf("  beam 4:  %8.3f ms GPU per step (B x 4 rows; encoder %.3f ms); %.1f tokens/s wall (best "
                   "hypotheses), first token after %.1f ms; generation plan %.1f MiB\n", beam_step_ms, beam_enc_ms,
                   beam_stats.total_ms > 0 ? 1e3 * beam_stats.tokens / beam_stats.total_ms : 0.0,
                   beam_stats.first_token_ms, (double)beam_stats.plan_bytes / (1 << 20));
            const vkf_cmd *beam_step = NULL;
            if (st == VKF_OK && vkf_model_last_cmd(model, VKF_PASS_DECODE_STEP, &beam_step) == VKF_OK)
                print_breakdown(beam_step, false);
            printf("  peak device memory   %10.1f MiB (before beam search); model tensors %.1f MiB\n",
                   (double)peak / (1 << 20), (double)model_bytes / (1 << 20));
        }
#undef BEAM4
        if (st != VKF_OK) code = fail(st);
    }
    free(src), free(tgt), free(sp), free(tp), free(sl), free(tl), free(logits), free(fwd), free(gen), free(gl);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}


int cmd_bench_model(int argc, char **argv)
{
    static const cli_option table[] = {
        {"--preset", CLI_STRING, CLI_OFF(preset), 0, 0, "small|base", "small: d_model 256, 4 heads, 3+3 layers; "
         "base: 512, 8, 6+6", NULL},
        {"--batch", CLI_COUNT, CLI_OFF(batch), 1, 4096, "B", "sources per forward pass (default 1)", NULL},
        {"--src-len", CLI_COUNT, CLI_OFF(src_len), 1, 4096, "S", "source tokens (default 64)", NULL},
        {"--tgt-len", CLI_COUNT, CLI_OFF(tgt_len), 1, 4096, "T", "target tokens, and tokens decoded (default 64)", NULL},
        {"--repeat", CLI_COUNT, CLI_OFF(repeat), 1, 1000000, "R", "timed forward passes, the median reported "
         "(default 10)", NULL},
        {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line (docs/json.md)", NULL},
        CLI_MODEL_OPTIONS,
        CLI_COMMON_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {"bench model", "--preset small|base [--batch B --src-len S --tgt-len T] [options]",
                                    "a random-weight model: GPU time of a forward pass, of the encoder and of one "
                                    "decode step\n(greedy and 4 beams), per kind of operation, and peak device memory",
                                    table};
    options o = {.repeat = 10, .batch = 1, .src_len = 64, .tgt_len = 64};
    return cli_run_model_command(&cmd, argc, argv, &o, run_bench_model);
}

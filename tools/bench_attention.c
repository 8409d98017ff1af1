/* vkformer bench attention: dense against efficient attention on the same random
 * input and the same device.
 *
 * For each sequence length n and each variant: one command list doing the
 * variant's attention over (batch, n, heads * head_dim) queries, keys and values
 * (a fused QKV tensor, as the model holds them), timed on the GPU with
 * timestamps (median of --repeat submits after one warm-up); the device bytes the
 * case holds (input, output and the variant's own tensors); and, against the
 * fused dense kernel on the same input, the largest absolute difference and the
 * mean cosine similarity of the output rows. With --model, also the share of
 * greedy ids that each variant leaves as dense attention chose them. Sizes past
 * the device's limits are skipped with a note. Each case names the kernel that ran
 * it ("kernel": fused, fused-coopmat, naive, lsh); --kernel chooses the fused
 * kernel (auto: the library's rule; coopmat forces the cooperative-matrix one,
 * also on CPU drivers; scalar forbids it). The reference is always the scalar
 * fused kernel in fp32. */
#include "vkformer.h"
#include "cli/cli.h" /* exit codes, JSON Lines records */
#include "reference.h" /* the tool's host reference (src/reference), not the library */

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>


static const char usage[] =
    "usage: vkformer bench attention [--n N[,N...]] [--variants V[,V...]] [--heads H] [--head-dim D]\n"
    "                                [--batch B] [--repeat R] [--seed S] [--model MODEL [--text FILE]] [--json]\n"
    "                                [--plot FILE.png] [--precision f32|f16] [--device D]\n"
    "                                [--max-device-memory BYTES] [--kernel auto|coopmat|scalar] [--verbose]\n"
    "                                [--no-coopmat]\n"
    "defaults: --n 256,1024,4096,16384 --heads 8 --head-dim 64 --batch 1 --repeat 3\n"
    "          --variants dense-naive,dense,local:128,strided:128:128,bigbird:64:1:3,tglobal:127:16,lsh:2:64,\n"
    "                     lowrank:256 (tglobal:127:16 is LongT5-tglobal's own attention, local:127 LongT5-local's)\n"
    "--model MODEL (a vkformer file or a Hugging Face folder): greedy ids of each variant\n"
    "against dense, on 32 random sources, or on the lines of --text FILE|- (up to 256; models with text);\n"
    "a Whisper folder: the teacher-forced argmax of 8 synthetic audio clips against dense's\n"
    "--plot FILE.png: time, memory and error against dense vs n (with --model: greedy agreement too), titled\n"
    "with the device and driver, through gnuplot; FILE's folder must be writable (else exit 2)\n"
    "and gnuplot installed (else exit 1), both checked before the run\n"
    "--json: one JSON line per (variant, n) case, and per variant with --model (docs/json.md)\n"
    "exit codes: 0 success, 1 error, 2 usage, 3 no Vulkan loader, 4 no Vulkan device, 6 validation messages\n";

typedef struct bench_opts {
    const char *device, *n_list, *variants, *plot, *model, *precision, *kernel_name, *text;
    vkf_attention_kernel kernel;        /* --kernel: of the fused variants (the reference stays scalar) */
    bool f16;                           /* --precision f16: Q, K, V and out stored as F16 */
    unsigned long heads, head_dim, batch, repeat, seed, max_device_memory;
    bool json, verbose, max_device_memory_given;
    const vkf_device_info *info;        /* the context's device, for the JSON records */
} bench_opts;

/* One (variant, n) case. */
typedef struct result {
    const char *variant;
    const char *kernel;                 /* fused, fused-coopmat, naive, lsh; NULL: not recorded */
    uint32_t n;
    bool ran;
    double ms;
    uint64_t bytes;
    double max_abs_err, cos_sim;        /* NAN: no dense reference */
    char note[256];
    /* what ran and where the choice came from: the fused kernel's tiles (kernel
     * "fused"), or the score matmul's kernel and tiles (kernel "naive") */
    bool has_choice;
    vkf_kernel_choice choice;
} result;

static void log_cb(void *user, vkf_log_level level, const char *message)
{
    const bench_opts *o = user;
    if (level == VKF_LOG_INFO && !o->verbose) return;
    fprintf(stderr, "vkformer: %s\n", message);
}

/* splitmix64, for the input data */
static uint64_t next_random(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ------------------------------------------------------------------ one case */

/* Shape of a case: B sequences of n tokens, H heads of hd. */
typedef struct shape {
    uint32_t B, H, hd, n;
    uint64_t d;
} shape;

/* Runs one case through the library's public attention call (vkf_cmd_attention,
 * which makes and owns what the variant needs): records, warms up, times; fills
 * res (ran, ms, bytes, kernel or note). */
static void run_case(vkf_context *ctx, const bench_opts *o, const char *name, const shape *s, bool f16,
                     vkf_attention_kernel kernel, vkf_tensor *qkv, vkf_tensor *out, result *res)
{
    uint64_t d = s->d, n = s->n;
    vkf_attention_op_desc a;
    vkf_attention_op_desc_init(&a);
    a.batch = s->B, a.heads = s->H, a.head_dim = s->hd, a.lq = s->n, a.lk = s->n;
    a.q = (vkf_matrix_view){qkv, 0, 3 * d, {n * 3 * d, 0}};
    a.k = (vkf_matrix_view){qkv, d, 3 * d, {n * 3 * d, 0}};
    a.v = (vkf_matrix_view){qkv, 2 * d, 3 * d, {n * 3 * d, 0}};
    a.out = out, a.dtype = f16 ? VKF_DTYPE_F16 : VKF_DTYPE_F32;
    a.variant = name, a.seed = o->seed, a.kernel = kernel;
    vkf_cmd *cmd = NULL;
    uint64_t own = 0;
    double *ms = calloc(o->repeat, sizeof *ms);
    vkf_status st = vkf_cmd_create(ctx, VKF_CMD_TIMESTAMPS, &cmd);
    if (st == VKF_OK) st = vkf_cmd_attention(cmd, &a, &res->kernel);
    if (st == VKF_OK && res->kernel && strcmp(res->kernel, "fused") == 0)
        res->has_choice = vkf_attention_fused_choice(ctx, s->hd, &res->choice) == VKF_OK;
    else if (st == VKF_OK && res->kernel && strcmp(res->kernel, "naive") == 0)
        res->has_choice = vkf_matmul_choice(ctx, s->n, s->n, s->hd, (uint64_t)s->B * s->H, f16, f16, &res->choice) == VKF_OK;
    if (st == VKF_OK) st = vkf_cmd_memory(cmd, &own);
    if (st == VKF_OK && !ms) {
        snprintf(res->note, sizeof res->note, "out of host memory for the timings");
        st = VKF_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (st == VKF_OK) st = vkf_cmd_submit(cmd); /* warm-up: pipelines compiled, memory touched */
    for (unsigned long i = 0; st == VKF_OK && i < o->repeat; i++) {
        st = vkf_cmd_submit(cmd);
        if (st == VKF_OK) st = vkf_cmd_gpu_ms(cmd, &ms[i]);
    }
    if (st == VKF_OK) {
        qsort(ms, o->repeat, sizeof *ms, compare_doubles);
        res->ms = o->repeat % 2 ? ms[o->repeat / 2] : (ms[o->repeat / 2 - 1] + ms[o->repeat / 2]) / 2;
        res->bytes = vkf_tensor_bytes(qkv) + vkf_tensor_bytes(out) + own;
        res->ran = true;
    } else if (!res->note[0]) {
        snprintf(res->note, sizeof res->note, "%s: %s", vkf_status_string(st), vkf_last_error());
    }
    free(ms);
    vkf_cmd_destroy(cmd);
}

/* max |a - b| and the mean cosine similarity of rows of d. */
static void compare_outputs(const float *got, const float *want, uint64_t rows, uint64_t d, double *max_err,
                            double *cos_mean)
{
    double worst = 0, cos_sum = 0;
    for (uint64_t i = 0; i < rows; i++) {
        double dot = 0, na = 0, nb = 0;
        for (uint64_t c = 0; c < d; c++) {
            double a = got[i * d + c], b = want[i * d + c];
            double e = fabs(a - b);
            if (e > worst || e != e) worst = e;
            dot += a * b, na += a * a, nb += b * b;
        }
        cos_sum += na == 0 && nb == 0 ? 1.0 : na == 0 || nb == 0 ? 0.0 : dot / sqrt(na * nb);
    }
    *max_err = worst;
    *cos_mean = cos_sum / (double)rows;
}

/* ------------------------------------------------------------------ output */

static void print_result(const bench_opts *o, const shape *s, const result *r)
{
    if (o->json) {
        jsonl_begin("bench attention");
        printf(",\"bench\":\"attention\",\"record\":\"case\"");
        jsonl_string("variant", r->variant);
        printf(",\"n\":%u,\"heads\":%u,\"head_dim\":%u,\"batch\":%u,\"precision\":\"%s\"", r->n, s->H, s->hd, s->B,
               o->f16 ? "f16" : "f32");
        jsonl_string("kernel", r->kernel);
        printf(",\"choice\":");
        if (r->has_choice) {
            printf("{\"what\":\"%s\"", strcmp(r->kernel, "naive") == 0 ? "score matmul" : "fused tiles");
            jsonl_choice(&r->choice, strcmp(r->kernel, "naive") == 0 ? 6 : 5);
            printf("}");
        } else {
            printf("null");
        }
        printf(",\"ms\":");
        jsonl_number(r->ran ? r->ms : NAN, 6);
        printf(",\"bytes\":");
        if (r->ran) printf("%llu", (unsigned long long)r->bytes);
        else printf("null");
        printf(",\"max_abs_err\":");
        jsonl_number(r->ran ? r->max_abs_err : NAN, 4);
        printf(",\"cos_sim\":");
        jsonl_number(r->ran ? r->cos_sim : NAN, 7);
        jsonl_string("skipped", r->ran ? NULL : r->note);
        jsonl_end(o->info);
    } else if (r->ran) {
        char how[200] = "";
        const uint32_t *t = r->choice.tiles;
        if (r->has_choice && strcmp(r->kernel, "naive") == 0)
            snprintf(how, sizeof how, " (matmul %s %ux%u, %ux%u; %s)", r->choice.kernel, t[1], t[2], t[4], t[5],
                     r->choice.source);
        else if (r->has_choice)
            snprintf(how, sizeof how, " (workgroup %u, bq %u, bk %u, td %u, tq %u; %s)", t[0], t[1], t[2], t[3], t[4],
                     r->choice.source);
        printf("%-18s %7u %12.2f %12.1f %12.3g %10.6f  %s%s\n", r->variant, r->n, r->ms, r->bytes / 1048576.0,
               r->max_abs_err, r->cos_sim, r->kernel ? r->kernel : "", how);
    } else {
        printf("%-18s %7u   skipped: %s\n", r->variant, r->n, r->note);
    }
    fflush(stdout);
}

/* Writes text as a gnuplot single-quoted string ('' is a quote). */
static void gnuplot_string(FILE *g, const char *text)
{
    fputc('\'', g);
    for (const char *c = text; *c; c++) {
        if (*c == '\'') fputc('\'', g);
        fputc((unsigned char)*c < 0x20 ? ' ' : *c, g);
    }
    fputc('\'', g);
}

/* Through gnuplot, one series per variant against n (log-log): GPU time, device
 * memory, and the largest absolute difference from dense; with --model a fourth
 * panel, each variant's greedy agreement with dense (agreement: NULL without
 * --model, NAN where skipped). The title names the device and driver. Series that
 * coincide stay apart: each has its own point type and dash pattern, and is drawn
 * a little to the side along n (at most ±6%). */
static int write_plot(const bench_opts *o, const shape *s, const result *res, size_t count, const char *const *names,
                      size_t n_names, const double *agreement)
{
    /* a gnuplot that exits early must not kill us with SIGPIPE: writes then fail, and pclose says why */
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
    fflush(NULL);
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        signal(SIGPIPE, old_pipe);
        fprintf(stderr, "vkformer: bench attention: --plot: cannot start gnuplot (apt-get install gnuplot-nox)\n");
        return EXIT_ERROR;
    }
    int panels = agreement ? 4 : 3;
    char driver[600], title[2048];
    jsonl_driver(o->info, driver, sizeof driver);
    snprintf(title, sizeof title, "vkformer bench attention on %s (%s): batch %u, %u heads of %u, %s", o->info->name,
             driver, s->B, s->H, s->hd, o->f16 ? "f16" : "f32");
    fprintf(g, "set terminal pngcairo noenhanced size %d,600 font ',10'\nset output ", 480 * panels);
    gnuplot_string(g, o->plot);
    fprintf(g, "\nset multiplot layout 1,%d title ", panels);
    gnuplot_string(g, title);
    fprintf(g, "\nset grid\nset key top left font ',9'\nset xlabel 'sequence length n'\n");
    double spread = n_names > 1 ? 0.12 / (double)(n_names - 1) : 0;
    for (int panel = 0; panel < 3; panel++) {
        static const char *ylabels[3] = {"GPU time (ms)", "device memory (MiB)",
                                         "max |out - dense| (0 drawn at 1e-9)"};
        fprintf(g, "set logscale xy\nset ylabel '%s'\nset key %s\nplot ", ylabels[panel],
                panel == 2 ? "bottom right" : "top left");
        for (size_t v = 0; v < n_names; v++) {
            fprintf(g, "%s'-' using 1:2 with linespoints lw 2 lt %zu pt %zu dt %zu ps 1.3 title ", v ? ", " : "", v + 1,
                    v % 13 + 1, v % 5 + 1);
            gnuplot_string(g, names[v]);
        }
        fprintf(g, "\n");
        for (size_t v = 0; v < n_names; v++) {
            double shift = 1.0 + spread * ((double)v - (double)(n_names - 1) / 2.0);
            for (size_t i = 0; i < count; i++) {
                const result *r = &res[i];
                if (!r->ran || strcmp(r->variant, names[v]) != 0) continue;
                double y = panel == 0 ? r->ms : panel == 1 ? r->bytes / 1048576.0 : r->max_abs_err;
                if (panel == 2 && !isfinite(y)) continue; /* no dense reference */
                if (panel == 2 && y < 1e-9) y = 1e-9;
                fprintf(g, "%g %g\n", r->n * shift, y);
            }
            fprintf(g, "e\n");
        }
    }
    if (agreement) {
        fprintf(g, "unset logscale\nset yrange [0:100]\nset xrange [-0.5:%zu.5]\nset style fill solid 0.6\n"
                   "set boxwidth 0.7\nset xlabel 'variant (greedy ids of --model)'\nset ylabel "
                   "'greedy ids identical to dense (%%)'\nset xtics rotate by -30 (",
                n_names - 1);
        for (size_t v = 0; v < n_names; v++) {
            fprintf(g, "%s", v ? ", " : "");
            gnuplot_string(g, names[v]);
            fprintf(g, " %zu", v);
        }
        fprintf(g, ")\nplot '-' using 1:2:3 with boxes lc variable notitle\n");
        for (size_t v = 0; v < n_names; v++)
            if (isfinite(agreement[v])) fprintf(g, "%zu %g %zu\n", v, 100.0 * agreement[v], v + 1);
        fprintf(g, "e\n");
    }
    fprintf(g, "unset multiplot\n");
    bool written = fflush(g) == 0 && !ferror(g);
    int status = pclose(g);
    signal(SIGPIPE, old_pipe);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !written) {
        if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 127)
            fprintf(stderr, "vkformer: bench attention: --plot: gnuplot is not installed (apt-get install gnuplot-nox)\n");
        else if (status != -1 && WIFSIGNALED(status))
            cli_error("bench attention: --plot: gnuplot was killed by signal %d; %s not written",
                    WTERMSIG(status), o->plot);
        else if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) != 0)
            cli_error("bench attention: --plot: gnuplot failed (exit status %d); %s not written",
                    WEXITSTATUS(status), o->plot);
        else
            cli_error("bench attention: --plot: gnuplot did not take the plot; %s not written", o->plot);
        return EXIT_ERROR;
    }
    fprintf(stderr, "bench attention: plot written to %s\n", o->plot);
    return EXIT_OK;
}

/* ------------------------------------------------------------------ greedy agreement */

/* One agreement record (or line) of a variant. */
static void agreement_record(const bench_opts *o, const char *variant, int sources, bool teacher_forced, double share,
                             uint64_t same, uint64_t total, vkf_status vs)
{
    if (o->json) {
        jsonl_begin("bench attention");
        printf(",\"bench\":\"attention\",\"record\":\"agreement\"");
        jsonl_string("variant", variant);
        jsonl_string("model", o->model);
        printf(",\"sources\":%d,\"text\":%s,\"teacher_forced\":%s,\"greedy_agreement\":", sources,
               o->text ? "true" : "false", teacher_forced ? "true" : "false");
        jsonl_number(vs == VKF_OK ? share : NAN, 4);
        jsonl_string("skipped", vs == VKF_OK ? NULL : vkf_last_error());
        jsonl_end(o->info);
    } else if (vs == VKF_OK) {
        printf("%-18s %s identical to dense: %.2f%% (%llu of %llu, %d %s)\n", variant,
               teacher_forced ? "teacher-forced argmax ids" : "greedy ids", 100.0 * share, (unsigned long long)same,
               (unsigned long long)total, sources, teacher_forced ? "synthetic audio clips" : o->text ? "lines of text"
                                                                                                 : "random sources");
    } else {
        printf("%-18s greedy agreement skipped: %s\n", variant, vkf_last_error());
    }
}

/* Models that read audio (Whisper), whose generation is not implemented yet: the
 * argmax of every position of a teacher-forced target (random ids after the
 * decoder start) under each variant, against dense, on synthetic clips of one
 * window (tones, a chirp, noise bursts drawn from the seed). It is greedy's choice
 * at each position given the same prefix, so it measures how far the encoder's
 * attention moves the output; the records say teacher_forced. */
static int audio_agreement(vkf_model *model, const vkf_model_config *c, const bench_opts *o, const char *const *names,
                           size_t n_names, double *agreement)
{
    enum { CLIPS = 8 };
    uint64_t rng = o->seed ^ 0xa0d10ull;
    uint32_t n = c->audio_samples, T = c->max_len < 24 ? c->max_len : 24;
    float *pcm[CLIPS];
    int32_t *tgt[CLIPS];
    uint64_t lens[CLIPS];
    uint32_t tlen[CLIPS];
    for (int i = 0; i < CLIPS; i++) {
        pcm[i] = xmalloc((size_t)n * sizeof **pcm);
        tgt[i] = xmalloc(T * sizeof **tgt);
        lens[i] = n, tlen[i] = T;
        double f0 = 100.0 + (double)(next_random(&rng) % 3000), f1 = 100.0 + (double)(next_random(&rng) % 6000);
        for (uint32_t t = 0; t < n; t++) {
            double s = (double)t / c->sample_rate, u = (double)(next_random(&rng) % 20001) / 10000.0 - 1.0;
            double chirp = sin(2 * M_PI * (f0 * s + (f1 - f0) * s * s * c->sample_rate / (2.0 * n)));
            bool burst = (t / (c->sample_rate / 4)) % 3 == (uint32_t)i % 3;
            pcm[i][t] = (float)(0.3 * chirp + (burst ? 0.2 * u : 0.01 * u));
        }
        tgt[i][0] = c->bos_id;
        for (uint32_t j = 1; j < T; j++) tgt[i][j] = (int32_t)(next_random(&rng) % c->tgt_vocab_size);
    }
    const float *const *pp = (const float *const *)pcm;
    vkf_audio_batch audio = {CLIPS, pp, lens};
    vkf_sequences seq = {CLIPS, (const int32_t *const *)tgt, tlen};
    uint64_t count = (uint64_t)CLIPS * T * c->tgt_vocab_size;
    float *dense = xmalloc(count * sizeof *dense), *got = xmalloc(count * sizeof *got);
    vkf_model_set_seed(model, o->seed);
    vkf_status st = vkf_model_set_attention(model, "dense", "dense");
    if (st == VKF_OK) st = vkf_model_forward_audio(model, &audio, &seq, dense, count);
    for (size_t v = 0; st == VKF_OK && v < n_names; v++) {
        fprintf(stderr, "bench attention: teacher-forced argmax of %d audio clips on %s with %s\n", CLIPS, o->model,
                names[v]);
        vkf_status vs = vkf_model_set_attention(model, names[v], "dense");
        if (vs == VKF_OK) vs = vkf_model_forward_audio(model, &audio, &seq, got, count);
        uint64_t same = 0, total = (uint64_t)CLIPS * T;
        for (uint64_t r = 0; vs == VKF_OK && r < total; r++) {
            const float *a = dense + r * c->tgt_vocab_size, *b = got + r * c->tgt_vocab_size;
            uint32_t ia = 0, ib = 0;
            for (uint32_t k = 1; k < c->tgt_vocab_size; k++) {
                if (a[k] > a[ia]) ia = k;
                if (b[k] > b[ib]) ib = k;
            }
            same += ia == ib;
        }
        if (vs == VKF_OK) agreement[v] = (double)same / (double)total;
        agreement_record(o, names[v], CLIPS, true, (double)same / (double)total, same, total, vs);
    }
    if (st != VKF_OK) fprintf(stderr, "vkformer: %s\n", vkf_last_error());
    for (int i = 0; i < CLIPS; i++) free(pcm[i]), free(tgt[i]);
    free(dense), free(got);
    return st == VKF_OK ? EXIT_OK : EXIT_ERROR;
}

/* With --model: greedy ids of random sources under each variant, against dense. */
static int model_agreement(vkf_context *ctx, const bench_opts *o, const char *const *names, size_t n_names,
                           double *agreement)
{
    for (size_t v = 0; v < n_names; v++) agreement[v] = NAN;
    vkf_model *model;
    /* Explicit precision: auto would choose F16 on GPUs, where dense-naive and lsh
     * have no kernels. With --precision f16 those two are reported as skipped. */
    vkf_model_load_options load = {.precision = o->f16 ? VKF_PRECISION_F16 : VKF_PRECISION_F32};
    vkf_status st = vkf_model_load_with(ctx, o->model, &load, &model);
    if (st != VKF_OK) {
        fprintf(stderr, "vkformer: %s\n", vkf_last_error());
        return EXIT_ERROR;
    }
    vkf_model_config c;
    vkf_model_get_config(model, &c);
    if (c.audio_mels) {
        if (o->text) {
            fprintf(stderr, "vkformer: bench attention: --text: %s reads audio, not text\n", o->model);
            vkf_model_destroy(model);
            return EXIT_USAGE;
        }
        int code = audio_agreement(model, &c, o, names, n_names, agreement);
        vkf_model_destroy(model);
        return code;
    }
    enum { MAX_SOURCES = 256 };
    int SOURCES = 32;
    uint32_t max_new = c.max_len < 64 ? c.max_len : 64, lens[MAX_SOURCES];
    int32_t *ids[MAX_SOURCES] = {0};
    uint64_t rng = o->seed ^ 0x5eedull;
    if (o->text) {
        /* real text: each line (any length, checked: tools/cli/text.c) through the model's tokenizer */
        line_reader r;
        if (!lines_open(&r, o->text)) {
            vkf_model_destroy(model);
            return EXIT_ERROR;
        }
        char *line, why[128] = "";
        size_t len;
        SOURCES = 0;
        while (st == VKF_OK && SOURCES < MAX_SOURCES && lines_next(&r, &line, &len)) {
            if (strspn(line, " \t\r\v\f") == len) continue;
            if (!text_check(line, len, why, sizeof why)) break;
            ids[SOURCES] = malloc(((size_t)c.max_len + 1) * sizeof **ids);
            st = ids[SOURCES] ? vkf_model_encode_text(model, line, ids[SOURCES], c.max_len, &lens[SOURCES])
                              : VKF_ERROR_OUT_OF_HOST_MEMORY;
            SOURCES++;
        }
        unsigned long lineno = r.number;
        bool failed = r.failed || why[0] || st != VKF_OK;
        if (why[0]) cli_error("bench attention: %s line %lu: %s", r.name, lineno, why);
        else if (st != VKF_OK) cli_error("bench attention: %s line %lu: %s", r.name, lineno, vkf_last_error());
        else if (!failed && SOURCES == 0) cli_error("bench attention: %s holds no text", r.name);
        lines_close(&r);
        if (failed || SOURCES == 0) {
            for (int i = 0; i < SOURCES; i++) free(ids[i]);
            vkf_model_destroy(model);
            return EXIT_ERROR;
        }
    }
    for (int i = 0; !o->text && i < SOURCES; i++) {
        uint32_t longest = c.max_len < 64 ? c.max_len : 64;
        lens[i] = 1 + (uint32_t)(next_random(&rng) % longest);
        ids[i] = malloc(lens[i] * sizeof **ids);
        for (uint32_t j = 0; ids[i] && j < lens[i]; j++) {
            int32_t id;
            do id = (int32_t)(next_random(&rng) % c.src_vocab_size);
            while (c.src_vocab_size > 3 && (id == c.pad_id || id == c.bos_id || id == c.eos_id));
            ids[i][j] = id;
        }
    }
    vkf_sequences src = {.count = SOURCES, .ids = (const int32_t *const *)ids, .lengths = lens};
    int32_t *dense = calloc((size_t)SOURCES * max_new, sizeof *dense), *got = calloc((size_t)SOURCES * max_new, sizeof *got);
    uint32_t dense_len[MAX_SOURCES], got_len[MAX_SOURCES];
    vkf_model_set_seed(model, o->seed);
    st = dense && got ? vkf_model_set_attention(model, "dense", "dense") : VKF_ERROR_OUT_OF_HOST_MEMORY;
    if (st == VKF_OK) st = vkf_model_generate(model, &src, max_new, dense, dense_len);
    for (size_t v = 0; st == VKF_OK && v < n_names; v++) {
        fprintf(stderr, "bench attention: greedy ids of %d %s on %s with %s\n", SOURCES, o->text ? "lines" : "sources",
                o->model, names[v]);
        vkf_status vs = vkf_model_set_attention(model, names[v], "dense");
        if (vs == VKF_OK) vs = vkf_model_generate(model, &src, max_new, got, got_len);
        uint64_t same = 0, total = 0;
        for (int i = 0; vs == VKF_OK && i < SOURCES; i++) {
            uint32_t longer = dense_len[i] > got_len[i] ? dense_len[i] : got_len[i];
            total += longer ? longer : 1;
            if (!longer) same++; /* both empty */
            for (uint32_t j = 0; j < longer; j++)
                same += j < dense_len[i] && j < got_len[i] && dense[(size_t)i * max_new + j] == got[(size_t)i * max_new + j];
        }
        if (vs == VKF_OK) agreement[v] = (double)same / (double)total;
        agreement_record(o, names[v], SOURCES, false, total ? (double)same / (double)total : 0.0, same, total, vs);
    }
    if (st != VKF_OK) fprintf(stderr, "vkformer: %s\n", vkf_last_error());
    for (int i = 0; i < SOURCES; i++) free(ids[i]);
    free(dense), free(got);
    vkf_model_destroy(model);
    return st == VKF_OK ? EXIT_OK : EXIT_ERROR;
}

/* ------------------------------------------------------------------ main */

/* Splits a comma-separated list in place; returns the count (at most max). */
static size_t split_list(char *text, const char **out, size_t max)
{
    size_t n = 0;
    for (char *tok = strtok(text, ","); tok && n < max; tok = strtok(NULL, ",")) out[n++] = tok;
    return n;
}

/* A decimal integer: digits only (no sign, no spaces), no overflow. */
static bool parse_number(const char *s, unsigned long *out)
{
    if (!s || !*s) return false;
    for (const char *c = s; *c; c++)
        if (*c < '0' || *c > '9') return false;
    char *end;
    errno = 0;
    *out = strtoul(s, &end, 10);
    return errno != ERANGE && *end == '\0';
}

/* Whether an executable named name is on PATH. */
static bool on_path(const char *name)
{
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn(path, ":");
        char full[4096];
        snprintf(full, sizeof full, "%.*s/%s", (int)(len ? len : 1), len ? path : ".", name);
        struct stat sb;
        if (stat(full, &sb) == 0 && S_ISREG(sb.st_mode) && access(full, X_OK) == 0) return true;
        path += len + (path[len] == ':');
    }
    return false;
}

/* --plot FILE: its folder writable (exit 2) and gnuplot installed (exit 1), before the run. */
static int check_plot(const char *file)
{
    if (strcmp(file, "-") == 0) {
        fprintf(stderr, "vkformer: bench attention: --plot needs a FILE.png (stdout holds the results)\n");
        return EXIT_USAGE;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        cli_error("bench attention: --plot %s: the folder %s does not exist", file, dir);
        return EXIT_USAGE;
    }
    if (access(dir, W_OK | X_OK) != 0 || (stat(file, &sb) == 0 && (S_ISDIR(sb.st_mode) || access(file, W_OK) != 0))) {
        cli_error("bench attention: --plot %s: cannot write there (%s)", file,
                stat(file, &sb) == 0 && S_ISDIR(sb.st_mode) ? "a folder" : "permission denied");
        return EXIT_USAGE;
    }
    if (!on_path("gnuplot")) {
        fprintf(stderr, "vkformer: bench attention: --plot needs gnuplot, which is not on PATH (apt-get install "
                        "gnuplot-nox)\n");
        return EXIT_ERROR;
    }
    return EXIT_OK;
}

static int parse_args(int argc, char **argv, bench_opts *o)
{
    const char *seen[64];
    int n_seen = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        const char **text = NULL;
        unsigned long *number = NULL;
        if (strcmp(a, "--json") == 0) o->json = true;
        else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) o->verbose = true;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            exit(EXIT_OK);
        } else if (strcmp(a, "--n") == 0) text = &o->n_list;
        else if (strcmp(a, "--variants") == 0) text = &o->variants;
        else if (strcmp(a, "--plot") == 0) text = &o->plot;
        else if (strcmp(a, "--model") == 0) text = &o->model;
        else if (strcmp(a, "--text") == 0) text = &o->text;
        else if (strcmp(a, "--device") == 0) text = &o->device;
        else if (strcmp(a, "--precision") == 0) text = &o->precision;
        else if (strcmp(a, "--kernel") == 0) text = &o->kernel_name;
        else if (strcmp(a, "--heads") == 0) number = &o->heads;
        else if (strcmp(a, "--head-dim") == 0) number = &o->head_dim;
        else if (strcmp(a, "--batch") == 0) number = &o->batch;
        else if (strcmp(a, "--repeat") == 0) number = &o->repeat;
        else if (strcmp(a, "--seed") == 0) number = &o->seed;
        else if (strcmp(a, "--max-device-memory") == 0) number = &o->max_device_memory, o->max_device_memory_given = true;
        else {
            if (a[0] == '-')
                fprintf(stderr, "vkformer: bench attention: unknown option %s (vkformer bench attention --help lists "
                                "its options)\n", quoted(a));
            else
                fprintf(stderr, "vkformer: bench attention: unexpected argument %s\n", quoted(a));
            return EXIT_USAGE;
        }
        const char *canonical = strcmp(a, "-v") == 0 ? "--verbose" : a;
        for (int j = 0; j < n_seen; j++)
            if (strcmp(seen[j], canonical) == 0) {
                fprintf(stderr, "vkformer: bench attention: %s given twice\n", canonical);
                return EXIT_USAGE;
            }
        if (n_seen < 64) seen[n_seen++] = canonical;
        if (text || number) {
            if (!next) {
                fprintf(stderr, "vkformer: bench attention: %s needs a value\n", a);
                return EXIT_USAGE;
            }
            if (text) *text = next;
            else if (!parse_number(next, number)) {
                fprintf(stderr, "vkformer: bench attention: %s needs a non-negative integer, not %s\n", a, quoted(next));
                return EXIT_USAGE;
            }
            i++;
        }
    }
    if (o->precision && strcmp(o->precision, "f32") != 0 && strcmp(o->precision, "f16") != 0) {
        fprintf(stderr, "vkformer: bench attention: --precision must be f32 or f16, not %s\n", quoted(o->precision));
        return EXIT_USAGE;
    }
    o->f16 = o->precision && strcmp(o->precision, "f16") == 0;
    if (!o->kernel_name || strcmp(o->kernel_name, "auto") == 0) o->kernel = VKF_ATTENTION_KERNEL_AUTO;
    else if (strcmp(o->kernel_name, "coopmat") == 0) o->kernel = VKF_ATTENTION_KERNEL_COOPMAT;
    else if (strcmp(o->kernel_name, "scalar") == 0) o->kernel = VKF_ATTENTION_KERNEL_SCALAR;
    else {
        fprintf(stderr, "vkformer: bench attention: --kernel must be auto, coopmat or scalar, not %s\n",
                quoted(o->kernel_name));
        return EXIT_USAGE;
    }
    if (o->max_device_memory_given && o->max_device_memory == 0) {
        fprintf(stderr, "vkformer: bench attention: --max-device-memory needs an integer >= 1, not \"0\"\n");
        return EXIT_USAGE;
    }
    if (o->plot) {
        int code = check_plot(o->plot);
        if (code != EXIT_OK) return code;
    }
    if (!o->heads || !o->head_dim || !o->batch || !o->repeat || o->heads > 4096 || o->head_dim > 4096 ||
        o->batch > 4096 || o->repeat > 1000) {
        fprintf(stderr, "vkformer: bench attention: --heads, --head-dim, --batch (1..4096) and --repeat (1..1000) "
                        "must be positive\n");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

int cmd_bench_attention(int argc, char **argv)
{
    bench_opts o = {.heads = 8, .head_dim = 64, .batch = 1, .repeat = 3};
    int code = parse_args(argc, argv, &o);
    if (code != EXIT_OK) return code;
    if (o.text && !o.model) {
        fprintf(stderr, "vkformer: bench attention: --text needs --model\n");
        return EXIT_USAGE;
    }
    char n_text[512], v_text[1024];
    snprintf(n_text, sizeof n_text, "%s", o.n_list ? o.n_list : "256,1024,4096,16384");
    snprintf(v_text, sizeof v_text, "%s",
             o.variants ? o.variants
                        : "dense-naive,dense,local:128,strided:128:128,bigbird:64:1:3,tglobal:127:16,lsh:2:64,lowrank:256");
    const char *n_items[32], *names[32];
    size_t n_count = split_list(n_text, n_items, 32), v_count = split_list(v_text, names, 32);
    uint32_t ns[32];
    for (size_t i = 0; i < n_count; i++) {
        unsigned long x;
        if (!parse_number(n_items[i], &x) || x == 0 || x > INT32_MAX) {
            fprintf(stderr, "vkformer: bench attention: --n: %s is not a length in 1..2^31-1\n", quoted(n_items[i]));
            return EXIT_USAGE;
        }
        ns[i] = (uint32_t)x;
    }
    for (size_t v = 0; v < v_count; v++) {
        if (vkf_attention_check(names[v], false) != VKF_OK) {
            fprintf(stderr, "vkformer: bench attention: %s\n", vkf_last_error());
            return EXIT_USAGE;
        }
    }
    if (!n_count || !v_count) {
        fprintf(stderr, "vkformer: bench attention: empty --n or --variants\n");
        return EXIT_USAGE;
    }

    vkf_context_options co;
    vkf_context_options_init(&co);
    co.device = o.device;
    co.log = log_cb;
    co.log_user = &o;
    co.max_device_memory = o.max_device_memory;
    vkf_context *ctx;
    vkf_status st = vkf_context_create(&co, &ctx);
    if (st != VKF_OK) {
        fprintf(stderr, "vkformer: %s\n", vkf_last_error());
        return st == VKF_ERROR_NO_VULKAN ? 3 : st == VKF_ERROR_NO_DEVICE ? 4 : EXIT_ERROR;
    }
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    o.info = &info;
    if (!info.timestamps) {
        fprintf(stderr, "vkformer: device \"%s\" has no timestamp queries: GPU times cannot be measured\n", info.name);
        vkf_context_destroy(ctx);
        return EXIT_ERROR;
    }
    if (o.f16 && !info.storage_16bit) {
        fprintf(stderr, "vkformer: --precision f16 needs 16-bit storage buffers, which device \"%s\" lacks\n", info.name);
        vkf_context_destroy(ctx);
        return EXIT_ERROR;
    }
    fprintf(stderr, "bench attention: device %s (%s)\n", info.name, info.driver_name);
    if (!o.json)
        printf("# device: %s; batch %lu, %lu heads of %lu; GPU ms median of %lu; error against dense\n"
               "%-18s %7s %12s %12s %12s %10s  %s\n",
               info.name, o.batch, o.heads, o.head_dim, o.repeat, "variant", "n", "ms", "MiB", "max_abs_err", "cos_sim",
               "kernel");

    result *res = calloc(n_count * v_count, sizeof *res);
    size_t done = 0;
    code = res ? EXIT_OK : EXIT_ERROR;
    for (size_t ni = 0; res && ni < n_count; ni++) {
        shape s = {(uint32_t)o.batch, (uint32_t)o.heads, (uint32_t)o.head_dim, ns[ni], o.heads * o.head_dim};
        uint64_t rows = (uint64_t)s.B * s.n, elements = rows * 3 * s.d;
        vkf_tensor *qkv = NULL, *ref = NULL, *out = NULL, *qkv16 = NULL, *out16 = NULL;
        uint16_t *halves = NULL;
        const char *in_why = NULL; /* a failure of the tool's own (host memory), else vkf_last_error() */
        float *host = NULL, *ref_host = NULL, *got = NULL;
        uint64_t shape_qkv[2] = {rows, 3 * s.d}, shape_out[2] = {rows, s.d};
        vkf_status in_st = vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, shape_qkv, &qkv);
        if (in_st == VKF_OK) in_st = vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, shape_out, &ref);
        if (in_st == VKF_OK) in_st = vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, shape_out, &out);
        if (in_st == VKF_OK && o.f16) in_st = vkf_tensor_create(ctx, VKF_DTYPE_F16, 2, shape_qkv, &qkv16);
        if (in_st == VKF_OK && o.f16) in_st = vkf_tensor_create(ctx, VKF_DTYPE_F16, 2, shape_out, &out16);
        if (in_st == VKF_OK && o.f16 && !(halves = malloc(elements * sizeof *halves)))
            in_st = VKF_ERROR_OUT_OF_HOST_MEMORY, in_why = "out of host memory for host copies of the inputs";
        host = in_st == VKF_OK ? malloc(elements * sizeof *host) : NULL;
        ref_host = host ? malloc(rows * s.d * sizeof *ref_host) : NULL;
        got = ref_host ? malloc(rows * s.d * sizeof *got) : NULL;
        if (in_st == VKF_OK && !got)
            in_st = VKF_ERROR_OUT_OF_HOST_MEMORY, in_why = "out of host memory for host copies of the inputs";
        if (in_st == VKF_OK) {
            /* unit-variance inputs: softmax(q·k / sqrt(hd)) is as peaked as a trained model's */
            uint64_t rng = o.seed * 0x9e3779b97f4a7c15ull + ns[ni];
            for (uint64_t e = 0; e < elements; e++)
                host[e] = (float)(((double)(next_random(&rng) >> 11) / 9007199254740992.0 * 2.0 - 1.0) * 1.7320508);
            /* f16: the reference sees the same rounded inputs, so the error is the F16 storage's */
            for (uint64_t e = 0; o.f16 && e < elements; e++) host[e] = ref_f16_to_f32(halves[e] = ref_f32_to_f16(host[e]));
            in_st = vkf_tensor_upload(qkv, host, elements * sizeof *host);
            if (in_st == VKF_OK && o.f16) in_st = vkf_tensor_upload(qkv16, halves, elements * sizeof *halves);
        }
        /* the reference: the fused dense kernel */
        result dense_ref = {.variant = "dense", .n = ns[ni]};
        if (in_st == VKF_OK) {
            fprintf(stderr, "bench attention: n=%u: dense reference\n", ns[ni]);
            run_case(ctx, &o, "dense", &s, false, VKF_ATTENTION_KERNEL_SCALAR, qkv, ref, &dense_ref);
            if (dense_ref.ran) in_st = vkf_tensor_download(ref, ref_host, rows * s.d * sizeof *ref_host);
        }
        for (size_t v = 0; v < v_count; v++) {
            result *r = &res[done++];
            r->variant = names[v], r->n = ns[ni];
            fprintf(stderr, "bench attention: [%zu/%zu] n=%u %s\n", done, n_count * v_count, ns[ni], names[v]);
            if (in_st != VKF_OK) {
                snprintf(r->note, sizeof r->note, "inputs: %s: %s", vkf_status_string(in_st),
                         in_why ? in_why : vkf_last_error());
            } else if (strcmp(names[v], "dense") == 0 && dense_ref.ran && !o.f16 &&
                       o.kernel != VKF_ATTENTION_KERNEL_COOPMAT) {
                *r = dense_ref; /* the reference itself: timed once */
                r->max_abs_err = 0, r->cos_sim = 1;
            } else {
                run_case(ctx, &o, names[v], &s, o.f16, o.kernel, o.f16 ? qkv16 : qkv, o.f16 ? out16 : out, r);
                r->max_abs_err = r->cos_sim = NAN;
                bool fetched = false;
                if (r->ran && dense_ref.ran && !o.f16)
                    fetched = vkf_tensor_download(out, got, rows * s.d * sizeof *got) == VKF_OK;
                if (r->ran && dense_ref.ran && o.f16 &&
                    vkf_tensor_download(out16, halves, rows * s.d * sizeof *halves) == VKF_OK) {
                    for (uint64_t e = 0; e < rows * s.d; e++) got[e] = ref_f16_to_f32(halves[e]);
                    fetched = true;
                }
                if (fetched) compare_outputs(got, ref_host, rows, s.d, &r->max_abs_err, &r->cos_sim);
            }
            print_result(&o, &s, r);
        }
        vkf_tensor_destroy(qkv), vkf_tensor_destroy(ref), vkf_tensor_destroy(out);
        vkf_tensor_destroy(qkv16), vkf_tensor_destroy(out16);
        free(host), free(ref_host), free(got), free(halves);
    }
    shape s0 = {(uint32_t)o.batch, (uint32_t)o.heads, (uint32_t)o.head_dim, 0, 0};
    double agreement[32];
    bool agreed = false;
    if (code == EXIT_OK && o.model) code = model_agreement(ctx, &o, names, v_count, agreement);
    for (size_t v = 0; o.model && v < v_count; v++) agreed = agreed || isfinite(agreement[v]);
    if (code == EXIT_OK && o.plot) code = write_plot(&o, &s0, res, done, names, v_count, agreed ? agreement : NULL);
    free(res);
    uint32_t errors = 0, warnings = 0;
    vkf_context_validation_counts(ctx, &errors, &warnings, NULL);
    vkf_context_destroy(ctx);
    if (errors + warnings) {
        fprintf(stderr, "vkformer: %u validation errors, %u warnings\n", errors, warnings);
        return EXIT_VALIDATION;
    }
    return code;
}

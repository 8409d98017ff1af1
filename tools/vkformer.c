/* The vkformer command-line tool.
 *
 *   vkformer info [--json]                         every Vulkan device and what vkformer found
 *   vkformer check                                 every GPU op against the C reference
 *   vkformer bench matmul --m M --n N --k K        GPU time of C = A·Bᵀ (timestamps)
 *                  [--size S[,S...]] [--repeat R] [--json]
 *   vkformer forward --model FILE --src 5,6,7 --tgt 1,8,9 --out logits.npy
 *   vkformer generate --model FILE --src 5,6,7 [--max-new N]
 *   vkformer translate --model FILE "text" [--max-new N]
 *   vkformer translate --model FILE --input FILE [--batch B]   one text per line; "text<TAB>expected"
 *                                                               lines are scored (exact match)
 *   vkformer bench model --preset small|base [--batch B --src-len S --tgt-len T] [--repeat R] [--json]
 *   vkformer bench startup --model FILE | --preset small|base [--repeat R] [--json]
 *                                                  context + load + first forward, cold vs warm pipeline cache
 *   vkformer tune [--quick] [--out FILE] [--json]  time kernel tiles on the device, write its tune file
 *
 * Every command takes --device INDEX|NAME-SUBSTRING (else VKFORMER_DEVICE, else the
 * first discrete GPU, integrated, virtual, CPU) and --max-device-memory BYTES. VKFORMER_VALIDATE=1 turns the
 * validation layer on; any validation message then fails the command.
 *
 * Exit codes: 0 success, 1 error, 2 usage, 3 no Vulkan loader, 4 no Vulkan device,
 * 5 a check found wrong results, 6 validation messages were reported.
 */
#include "vkformer.h"
#include "reference/reference.h"
#include "tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_ERROR = 1, EXIT_USAGE = 2, EXIT_NO_VULKAN = 3, EXIT_NO_DEVICE = 4, EXIT_WRONG = 5, EXIT_VALIDATION = 6 };

static const char usage_text[] =
    "usage: vkformer COMMAND [options]\n"
    "  info [--json]                         list Vulkan devices and their limits\n"
    "  check                                 run every GPU op against the C reference\n"
    "  bench matmul [--m M --n N --k K | --size S[,S...]] [--repeat R] [--json]\n"
    "               [--dtype f32|f16|i8w|i8w-f16] [--kernel auto|coopmat|coopmat2|tiled|direct|subgroup]\n"
    "                                        f16: A, B and C stored as F16; i8w: B int8 with per-row\n"
    "                                        scales, A and C F32 (i8w-f16: F16); --kernel forces one\n"
    "                                        kernel family (default auto: the library's choice)\n"
    "  forward --model FILE --src IDS --tgt IDS --out FILE.npy\n"
    "                                        logits (len(tgt), tgt_vocab) as float32 .npy\n"
    "  generate --model FILE --src IDS [--max-new N]\n"
    "                                        greedy ids, comma-separated, without bos/eos\n"
    "  generate --src IDS [--src IDS ...] | --input FILE | -   several sources, one batch, one line\n"
    "                                        each; eos_id is appended unless the ids end with it\n"
    "                                        (as translate does; --raw-ids: as given)\n"
    "  generate|translate ... --timing       tokens/s and time to first token on stderr\n"
    "  generate|translate ... --temperature T --top-k K --top-p P [--seed N]\n"
    "                                        sampling on the GPU (any of the three turns it on)\n"
    "  generate|translate ... --beam K [--length-penalty A] [--early-stopping] [--n-best N] [--min-new N]\n"
    "                                        beam search (Hugging Face semantics); --n-best N > 1 prints\n"
    "                                        N lines \"ids<TAB>score\" per source, best first\n"
    "  translate --model FILE TEXT [--max-new N]\n"
    "                                        greedy decoding of text (models with vocabularies)\n"
    "  translate --model FILE --input FILE|- [--batch B]   (or translate --model FILE -: stdin)\n"
    "                                        one text per line, decoded B at a time; lines\n"
    "                                        \"text<TAB>expected\" are scored: accuracy at the end\n"
    "  tokenize --model MODEL TEXT | --input FILE|-   source ids (eos appended), one line per text\n"
    "  tokenize --model MODEL --decode IDS | --decode --input FILE|-   target ids to text\n"
    "MODEL (--model): a vkformer .safetensors file, or a Hugging Face Marian folder (opus-mt:\n"
    "config.json, model.safetensors, source.spm, target.spm, vocab.json, generation_config.json);\n"
    "a folder's generate/translate default to its generation_config (e.g. 4 beams, forced eos,\n"
    "pad banned, renormalised log-probs); --beam, --max-new, --min-new ... override it\n"
    "  bench model --preset small|base [--batch B --src-len S --tgt-len T] [--repeat R] [--json]\n"
    "                                        forward pass and decode step of a random-weight model\n"
    "  bench translate --model MODEL [--batch 32] [--beam K] [--src-len 32] [--max-new 64] [--repeat 3] [--json]\n"
    "                                        target tokens/s of beam search (min-new = max-new;\n"
    "                                        tools/bench_translate.py: OPUS-MT shapes beside Transformers)\n"
    "  bench startup --model FILE | --preset small|base [--repeat R] [--json]\n"
    "                                        context creation + model load + first forward, each run\n"
    "                                        in a fresh process, with an empty (cold) and a filled\n"
    "                                        (warm) pipeline cache\n"
    "  tune [--quick] [--out FILE] [--json]  time candidate kernel tiles on the device, check each\n"
    "                                        against a host reference, store the fastest in the\n"
    "                                        device's tune file (read by later runs; VKFORMER_TUNE=0: off)\n"
    "IDS: comma-separated token ids, e.g. 5,6,7\n"
    "  bench attention [--n N,...] [--variants V,...] [--heads H --head-dim D --batch B]\n"
    "                [--repeat R] [--model FILE] [--json] [--plot FILE.png]\n"
    "                                        dense vs sparse attention: GPU time, memory, error\n"
    "model commands also take --attention VARIANT (encoder and decoder self-attention):\n"
    "  dense | dense-naive | local:W | strided:W:S | bigbird:B:G:R | lsh:H:C | lowrank:K\n"
    "--cross-attention dense|dense-naive|lowrank:K, --seed N (bigbird, lsh, lowrank), and\n"
    "--verbose (say where a variant does not apply and what runs instead), and\n"
    "--precision auto|f32|f16|int8 (storage: f16 stores weights and activations as F16 and needs\n"
    "16-bit storage; int8 quantizes weight matrices at load, one scale per output channel, f32\n"
    "activations; auto is f16 on GPUs that have it, else the file's weights with f32 activations)\n"
    "common options: --device INDEX|NAME-SUBSTRING, --max-device-memory BYTES (cap on tensors),\n"
    "--no-coopmat (no cooperative-matrix kernels; the same as VKFORMER_COOPMAT=0)\n";

typedef struct options {
    const char *device;
    bool json;
    unsigned long m, n, k;
    const char *sizes;
    unsigned long repeat;
    const char *model, *src, *tgt, *out;
    unsigned long max_new;              /* 0: the model's max_len */
    const char *preset;
    const char *input;
    unsigned long max_device_memory;    /* bytes; 0: no cap */
    const char *attention, *cross_attention;
    unsigned long batch, src_len, tgt_len;
    bool quick;                         /* tune: few candidates, small shapes */
    unsigned long seed;                 /* --seed: bigbird, lsh, lowrank */
    const char *precision;              /* --precision auto|f32|f16|int8: weight storage */
    const char *dtype;                  /* bench matmul --dtype f32|f16 (NULL: f32) */
    const char *kernel;                 /* bench matmul --kernel FAMILY (NULL: auto) */
    vkf_model_load_options load;        /* from --precision */
    bool verbose;                       /* --verbose: the library's info messages too */
    unsigned long beam, n_best, min_new; /* generate/translate --beam K (0: greedy), --n-best N, --min-new N */
    double length_penalty;              /* --length-penalty A (beam; default 1) */
    bool early_stopping;                /* --early-stopping (beam) */
    bool beam_given;                    /* --beam was given (so --beam 0 is an error, not greedy) */
    const char *srcs[256];              /* generate: every --src, in order */
    unsigned n_srcs;
    bool timing;                        /* generate/translate --timing: tokens/s, time to first token */
    bool raw_ids;                       /* generate --raw-ids: the sources as given, no eos appended */
    bool sample;                        /* --temperature, --top-k or --top-p given: sampling (seeded by --seed) */
    double temperature, top_p;
    unsigned long top_k;
    bool max_new_given, min_new_given, n_best_given, lp_given; /* override a folder's generation_config */
    bool decode;                        /* tokenize --decode: ids to text */
} options;

int cmd_bench_attention(int argc, char **argv); /* tools/bench_attention.c */

static int exit_code_for(vkf_status st)
{
    if (st == VKF_ERROR_NO_VULKAN) return EXIT_NO_VULKAN;
    if (st == VKF_ERROR_NO_DEVICE) return EXIT_NO_DEVICE;
    return EXIT_ERROR;
}

static int fail(vkf_status st)
{
    fprintf(stderr, "vkformer: %s\n", vkf_last_error());
    return exit_code_for(st);
}

static void log_to_stderr(void *user, vkf_log_level level, const char *message)
{
    const options *o = user;
    if (level == VKF_LOG_INFO && !(o && o->verbose)) return;
    fprintf(stderr, "vkformer: %s: %s\n", level == VKF_LOG_ERROR ? "error" : level == VKF_LOG_WARNING ? "warning" : "info",
            message);
}

/* A context from the common options; tune: -1 the default, 0 ignore tune files. */
static vkf_status open_context_tuned(const options *o, int tune, vkf_context **out)
{
    vkf_context_options co;
    vkf_context_options_init(&co);
    co.device = o->device;
    co.log = log_to_stderr;
    co.log_user = (void *)o;
    co.max_device_memory = o->max_device_memory;
    co.tune = tune;
    return vkf_context_create(&co, out);
}

static vkf_status open_context(const options *o, vkf_context **out)
{
    return open_context_tuned(o, -1, out);
}

/* Destroys the context; turns validation messages into a failing exit code. */
static int close_context(vkf_context *ctx, int code)
{
    uint32_t errors = 0, warnings = 0;
    vkf_context_validation_counts(ctx, &errors, &warnings, NULL);
    vkf_context_destroy(ctx);
    if (code == 0 && errors + warnings > 0) {
        fprintf(stderr, "vkformer: the validation layer reported %u errors and %u warnings\n", errors, warnings);
        return EXIT_VALIDATION;
    }
    return code;
}

static bool parse_ulong(const char *s, unsigned long *out)
{
    if (!s || !*s) return false;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || s[0] == '-') return false;
    *out = v;
    return true;
}

/* Host allocation for the tool; the tool (not the library) may exit on failure. */
static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "vkformer: out of host memory (%zu bytes)\n", bytes);
        exit(EXIT_ERROR);
    }
    return p;
}

/* ------------------------------------------------------------------ info */

static const char *type_name(vkf_device_type t)
{
    switch (t) {
    case VKF_DEVICE_INTEGRATED_GPU: return "integrated-gpu";
    case VKF_DEVICE_DISCRETE_GPU: return "discrete-gpu";
    case VKF_DEVICE_VIRTUAL_GPU: return "virtual-gpu";
    case VKF_DEVICE_CPU: return "cpu";
    default: return "other";
    }
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void print_device_json(const vkf_device_info *d, bool is_default)
{
    printf("{\"index\":%u,\"name\":", d->index);
    json_string(d->name);
    printf(",\"type\":\"%s\",\"default\":%s,\"vendor_id\":%u,\"device_id\":%u,\"api_version\":\"%u.%u.%u\","
           "\"driver_version\":%u,\"driver_name\":",
           type_name(d->type), is_default ? "true" : "false", d->vendor_id, d->device_id, d->api_version >> 22,
           (d->api_version >> 12) & 0x3ff, d->api_version & 0xfff, d->driver_version);
    json_string(d->driver_name);
    printf(",\"driver_info\":");
    json_string(d->driver_info);
    printf(",\"subgroup_size\":%u,\"subgroup_shuffle\":%s,\"max_shared_memory\":%u,\"max_workgroup_invocations\":%u,"
           "\"max_workgroup_size\":[%u,%u,%u],\"max_workgroup_count\":[%u,%u,%u],\"max_push_constants\":%u,"
           "\"storage_16bit\":%s,\"float16\":%s,\"int8\":%s,\"cooperative_matrix\":%s,\"timestamps\":%s,"
           "\"timestamp_period_ns\":%g,\"max_storage_buffer_range\":%llu,\"max_memory_allocation_size\":%llu,"
           "\"unified_memory\":%s,\"heaps\":[",
           d->subgroup_size, d->subgroup_shuffle ? "true" : "false", d->max_shared_memory, d->max_workgroup_invocations,
           d->max_workgroup_size[0],
           d->max_workgroup_size[1], d->max_workgroup_size[2], d->max_workgroup_count[0], d->max_workgroup_count[1],
           d->max_workgroup_count[2], d->max_push_constants, d->storage_16bit ? "true" : "false",
           d->float16 ? "true" : "false", d->int8 ? "true" : "false", d->cooperative_matrix ? "true" : "false",
           d->timestamps ? "true" : "false", d->timestamp_period_ns, (unsigned long long)d->max_storage_buffer_range,
           (unsigned long long)d->max_memory_allocation_size, d->unified_memory ? "true" : "false");
    for (uint32_t h = 0; h < d->heap_count; h++)
        printf("%s{\"size\":%llu,\"device_local\":%s}", h ? "," : "", (unsigned long long)d->heaps[h].size,
               d->heaps[h].device_local ? "true" : "false");
    printf("],\"coopmat_shapes\":[");
    for (uint32_t i = 0; i < d->coopmat_shape_count; i++) {
        const vkf_coopmat_shape *c = &d->coopmat_shapes[i];
        printf("%s{\"m\":%u,\"n\":%u,\"k\":%u,\"a\":\"%s\",\"b\":\"%s\",\"c\":\"%s\",\"result\":\"%s\","
               "\"saturating\":%s,\"scope\":\"%s\"}",
               i ? "," : "", c->m, c->n, c->k, vkf_component_name(c->a), vkf_component_name(c->b),
               vkf_component_name(c->c), vkf_component_name(c->result), c->saturating ? "true" : "false",
               c->subgroup_scope ? "subgroup" : "other");
    }
    printf("],\"cooperative_matrix2\":%s,\"coopmat2_granularity\":[%u,%u,%u],\"coopmat2_max_dimension\":%u}",
           d->cooperative_matrix2 ? "true" : "false", d->coopmat2_granularity[0], d->coopmat2_granularity[1],
           d->coopmat2_granularity[2], d->coopmat2_max_dimension);
}

static void print_device_text(const vkf_device_info *d, bool is_default)
{
    printf("device %u: %s%s\n", d->index, d->name, is_default ? "   [default]" : "");
    printf("  type                        %s\n", type_name(d->type));
    printf("  vendor / device id          0x%04x / 0x%04x\n", d->vendor_id, d->device_id);
    printf("  Vulkan                      %u.%u.%u\n", d->api_version >> 22, (d->api_version >> 12) & 0x3ff,
           d->api_version & 0xfff);
    printf("  driver                      %s %s (version 0x%x)\n", d->driver_name, d->driver_info, d->driver_version);
    printf("  subgroup size               %u%s\n", d->subgroup_size, d->subgroup_shuffle ? " (shuffles)" : "");
    printf("  shared memory / workgroup   %u bytes\n", d->max_shared_memory);
    printf("  workgroup invocations       %u (size %u x %u x %u)\n", d->max_workgroup_invocations,
           d->max_workgroup_size[0], d->max_workgroup_size[1], d->max_workgroup_size[2]);
    printf("  workgroup count             %u x %u x %u\n", d->max_workgroup_count[0], d->max_workgroup_count[1],
           d->max_workgroup_count[2]);
    printf("  push constants              %u bytes\n", d->max_push_constants);
    printf("  16-bit storage              %s\n", d->storage_16bit ? "yes" : "no");
    printf("  float16 / int8 arithmetic   %s / %s\n", d->float16 ? "yes" : "no", d->int8 ? "yes" : "no");
    printf("  VK_KHR_cooperative_matrix   %s\n", d->cooperative_matrix ? "yes" : "no");
    for (uint32_t i = 0; i < d->coopmat_shape_count; i++) {
        const vkf_coopmat_shape *c = &d->coopmat_shapes[i];
        printf("    %2ux%2ux%2u  %s x %s + %s -> %s%s%s\n", c->m, c->n, c->k, vkf_component_name(c->a),
               vkf_component_name(c->b), vkf_component_name(c->c), vkf_component_name(c->result),
               c->saturating ? ", saturating" : "", c->subgroup_scope ? "" : ", not subgroup scope");
    }
    if (d->cooperative_matrix2)
        printf("  VK_NV_cooperative_matrix2   yes (f16 x f16 -> f32, granularity %u x %u x %u, up to %u)\n",
               d->coopmat2_granularity[0], d->coopmat2_granularity[1], d->coopmat2_granularity[2],
               d->coopmat2_max_dimension);
    else
        printf("  VK_NV_cooperative_matrix2   no\n");
    printf("  timestamps                  %s (%g ns per tick)\n", d->timestamps ? "yes" : "no", d->timestamp_period_ns);
    printf("  maxStorageBufferRange       %llu bytes\n", (unsigned long long)d->max_storage_buffer_range);
    printf("  maxMemoryAllocationSize     %llu bytes\n", (unsigned long long)d->max_memory_allocation_size);
    printf("  host writes device memory   %s\n", d->unified_memory ? "yes (no staging)" : "no (staging copies)");
    for (uint32_t h = 0; h < d->heap_count; h++)
        printf("  heap %u                      %llu MiB%s\n", h, (unsigned long long)(d->heaps[h].size >> 20),
               d->heaps[h].device_local ? " device-local" : "");
}

/* ,"tuning":{...}: where the default device's kernel tiles came from and what they are. */
static void print_tuning_json(const vkf_context *ctx)
{
    const char *kernel;
    uint32_t mm[6], head_dim, at[5];
    vkf_tune_current(ctx, &kernel, mm, &head_dim, at);
    char path[1024];
    bool has_path = vkf_tune_file_path(ctx, path, sizeof path) == VKF_OK;
    printf(",\"tuning\":{\"source\":\"%s\",\"file\":", vkf_tune_from_file(ctx) ? "file" : "built-in");
    if (has_path) json_string(path);
    else printf("null");
    printf(",\"matmul\":{\"kernel\":\"%s\",\"workgroup\":%u,\"bm\":%u,\"bn\":%u,\"bk\":%u,\"tm\":%u,\"tn\":%u}",
           kernel, mm[0], mm[1], mm[2], mm[3], mm[4], mm[5]);
    if (head_dim)
        printf(",\"attention\":{\"head_dim\":%u,\"workgroup\":%u,\"bq\":%u,\"bk\":%u,\"td\":%u,\"tq\":%u}", head_dim,
               at[0], at[1], at[2], at[3], at[4]);
    else printf(",\"attention\":null");
    printf("}");
}

static int cmd_info(const options *o)
{
    uint32_t count = 0;
    vkf_status st = vkf_devices_list(NULL, 0, &count);
    if (st != VKF_OK) return fail(st);
    if (count == 0) {
        fprintf(stderr, "vkformer: no Vulkan device found (is a driver installed? VK_ICD_FILENAMES may point to a missing file)\n");
        return EXIT_NO_DEVICE;
    }
    vkf_device_info *infos = xmalloc(count * sizeof *infos);
    st = vkf_devices_list(infos, count, &count);
    if (st != VKF_OK) {
        free(infos);
        return fail(st);
    }
    /* The device a command would run on, chosen as every other command does. */
    vkf_context *ctx;
    st = open_context(o, &ctx);
    if (st != VKF_OK) {
        free(infos);
        return fail(st);
    }
    vkf_device_info chosen;
    vkf_context_device_info(ctx, &chosen);
    if (o->json) {
        printf("{\"vkformer\":\"%s\",\"default\":%u,\"devices\":[", vkf_version_string(), chosen.index);
        for (uint32_t i = 0; i < count; i++) {
            if (i) putchar(',');
            print_device_json(&infos[i], i == chosen.index);
        }
        printf("]");
        print_tuning_json(ctx);
        printf(",\"coopmat_in_use\":%s,\"coopmat2_in_use\":%s}\n", chosen.coopmat_in_use ? "true" : "false",
               chosen.coopmat2_in_use ? "true" : "false");
    } else {
        printf("vkformer %s, %u Vulkan device%s\n", vkf_version_string(), count, count == 1 ? "" : "s");
        for (uint32_t i = 0; i < count; i++) print_device_text(&infos[i], i == chosen.index);
        printf("device %u runs cooperative-matrix kernels: %s\n", chosen.index,
               chosen.coopmat2_in_use ? "yes (KHR and NV2)" : chosen.coopmat_in_use ? "yes (KHR)" : "no");
    }
    free(infos);
    return close_context(ctx, 0);
}

/* ------------------------------------------------------------------ shared helpers */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float rand_uniform(void) /* [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (2.0 / 16777216.0) - 1.0);
}

static float *random_floats(size_t n)
{
    float *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = rand_uniform();
    return v;
}

static vkf_status tensor_from(vkf_context *ctx, const float *data, uint64_t rows, uint64_t cols, vkf_tensor **out)
{
    uint64_t shape[2] = {rows, cols};
    vkf_status st = vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, shape, out);
    if (st == VKF_OK && data) st = vkf_tensor_upload(*out, data, rows * cols * 4);
    if (st != VKF_OK) {
        vkf_tensor_destroy(*out);
        *out = NULL;
    }
    return st;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ check */

/* Max |gpu - ref| relative to tolerance: ok iff every element has
 * |gpu - ref| <= atol + rtol * |ref|. */
static bool close_enough(const float *gpu, const float *ref, size_t n, double atol, double rtol, double *out_max_err)
{
    bool ok = true;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)gpu[i] - ref[i]);
        if (!(err <= atol + rtol * fabs(ref[i]))) ok = false;
        if (err > worst || err != err) worst = err;
    }
    *out_max_err = worst;
    return ok;
}

static int check_report(const char *what, bool ok, double err, int *failures)
{
    printf("  %-44s max abs error %.3g  %s\n", what, err, ok ? "ok" : "WRONG");
    if (!ok) (*failures)++;
    return ok;
}

static vkf_status check_matmul(vkf_context *ctx, uint32_t m, uint32_t n, uint32_t k, vkf_activation act, int *failures)
{
    float *a = random_floats((size_t)m * k), *b = random_floats((size_t)n * k), *bias = random_floats(n);
    float *gpu = xmalloc((size_t)m * n * 4), *ref = xmalloc((size_t)m * n * 4);
    vkf_tensor *ta = NULL, *tb = NULL, *tbias = NULL, *tc = NULL;
    vkf_cmd *cmd = NULL;
    vkf_status st = VKF_OK;
    if (st == VKF_OK) st = tensor_from(ctx, a, m, k, &ta);
    if (st == VKF_OK) st = tensor_from(ctx, b, n, k, &tb);
    if (st == VKF_OK) st = tensor_from(ctx, bias, 1, n, &tbias);
    if (st == VKF_OK) st = tensor_from(ctx, NULL, m, n, &tc);
    if (st == VKF_OK) st = vkf_cmd_create(ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_matmul_desc d;
        vkf_matmul_desc_init(&d);
        d.m = m, d.n = n, d.k = k;
        d.a.tensor = ta, d.b.tensor = tb, d.c.tensor = tc, d.bias = tbias;
        d.activation = act;
        st = vkf_cmd_matmul(cmd, &d);
    }
    if (st == VKF_OK) st = vkf_cmd_submit(cmd);
    if (st == VKF_OK) st = vkf_tensor_download(tc, gpu, (uint64_t)m * n * 4);
    if (st == VKF_OK) {
        ref_matmul(ref, n, a, k, b, k, false, bias, NULL, 0, m, n, k, 1.0f, (int)act);
        char what[96];
        snprintf(what, sizeof what, "matmul %ux%ux%u + bias%s", m, n, k,
                 act == VKF_ACTIVATION_RELU ? " + relu" : act == VKF_ACTIVATION_GELU ? " + gelu" : act == VKF_ACTIVATION_SILU ? " + silu" : "");
        double err;
        bool ok = close_enough(gpu, ref, (size_t)m * n, 1e-4, 1e-4, &err);
        check_report(what, ok, err, failures);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta);
    vkf_tensor_destroy(tb);
    vkf_tensor_destroy(tbias);
    vkf_tensor_destroy(tc);
    free(a), free(b), free(bias), free(gpu), free(ref);
    return st;
}

static vkf_status check_rows(vkf_context *ctx, uint32_t rows, uint32_t cols, int *failures)
{
    size_t n = (size_t)rows * cols;
    float *x = random_floats(n), *r = random_floats(n), *g = random_floats(cols), *be = random_floats(cols);
    float *gpu = xmalloc(n * 4), *ref = xmalloc(n * 4);
    vkf_tensor *tx = NULL, *tr = NULL, *tg = NULL, *tb = NULL, *ty = NULL, *tp = NULL;
    vkf_cmd *cmd = NULL;
    vkf_status st = VKF_OK;
    if (st == VKF_OK) st = tensor_from(ctx, x, rows, cols, &tx);
    if (st == VKF_OK) st = tensor_from(ctx, r, rows, cols, &tr);
    if (st == VKF_OK) st = tensor_from(ctx, g, 1, cols, &tg);
    if (st == VKF_OK) st = tensor_from(ctx, be, 1, cols, &tb);
    if (st == VKF_OK) st = tensor_from(ctx, NULL, rows, cols, &ty);
    if (st == VKF_OK) st = tensor_from(ctx, NULL, rows, cols, &tp);
    if (st == VKF_OK) st = vkf_cmd_create(ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_layernorm_desc ln;
        vkf_layernorm_desc_init(&ln);
        ln.rows = rows, ln.cols = cols, ln.x = tx, ln.residual = tr, ln.gamma = tg, ln.beta = tb, ln.y = ty;
        st = vkf_cmd_layernorm(cmd, &ln);
    }
    if (st == VKF_OK) {
        vkf_softmax_desc sm;
        vkf_softmax_desc_init(&sm);
        sm.rows = rows, sm.cols = cols, sm.x = ty, sm.y = tp, sm.scale = 0.5f, sm.causal_period = rows;
        st = vkf_cmd_softmax(cmd, &sm);
    }
    if (st == VKF_OK) st = vkf_cmd_submit(cmd);
    double err = 0;
    char what[96];
    if (st == VKF_OK) st = vkf_tensor_download(ty, gpu, n * 4);
    float *ln_ref = xmalloc(n * 4);
    if (st == VKF_OK) {
        ref_layernorm(ln_ref, NULL, x, r, g, be, rows, cols, 1e-5f);
        snprintf(what, sizeof what, "layernorm(x + r) %ux%u", rows, cols);
        bool ok = close_enough(gpu, ln_ref, n, 1e-4, 1e-4, &err);
        check_report(what, ok, err, failures);
        st = vkf_tensor_download(tp, gpu, n * 4);
    }
    if (st == VKF_OK) {
        /* The softmax reads the GPU's layernorm output, as it did on the device. */
        float *ln_gpu = xmalloc(n * 4);
        st = vkf_tensor_download(ty, ln_gpu, n * 4);
        if (st == VKF_OK) {
            ref_softmax(ref, ln_gpu, rows, cols, 0.5f, NULL, 0, 0, rows, 0);
            snprintf(what, sizeof what, "causal softmax %ux%u", rows, cols);
            bool ok = close_enough(gpu, ref, n, 1e-6, 1e-4, &err);
        check_report(what, ok, err, failures);
        }
        free(ln_gpu);
    }
    free(ln_ref);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(tr), vkf_tensor_destroy(tg);
    vkf_tensor_destroy(tb), vkf_tensor_destroy(ty), vkf_tensor_destroy(tp);
    free(x), free(r), free(g), free(be), free(gpu), free(ref);
    return st;
}

static vkf_status check_embed(vkf_context *ctx, uint32_t tokens, uint32_t d, uint32_t vocab, int *failures)
{
    float *table = random_floats((size_t)vocab * d);
    int32_t *ids = xmalloc(tokens * sizeof *ids);
    float *gpu = xmalloc((size_t)tokens * d * 4), *ref = xmalloc((size_t)tokens * d * 4);
    vkf_tensor *tt = NULL, *ti = NULL, *to = NULL, *tpe = NULL;
    vkf_cmd *cmd = NULL;
    vkf_status st = VKF_OK;
    for (uint32_t t = 0; st == VKF_OK && t < tokens; t++) ids[t] = (int32_t)((t * 7919u) % vocab);
    uint64_t ntok = tokens;
    if (st == VKF_OK) st = tensor_from(ctx, table, vocab, d, &tt);
    if (st == VKF_OK) st = vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &ntok, &ti);
    if (st == VKF_OK) st = vkf_tensor_upload(ti, ids, ntok * 4);
    if (st == VKF_OK) st = tensor_from(ctx, NULL, tokens, d, &to);
    if (st == VKF_OK) st = vkf_positional_encoding_create(ctx, tokens, d, &tpe);
    if (st == VKF_OK) st = vkf_cmd_create(ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_embed_desc e;
        vkf_embed_desc_init(&e);
        e.tokens = tokens, e.d = d, e.vocab = vocab, e.ids = ti, e.table = tt, e.out = to;
        e.scale = sqrtf((float)d), e.positions = tpe;
        st = vkf_cmd_embed(cmd, &e);
    }
    if (st == VKF_OK) st = vkf_cmd_submit(cmd);
    if (st == VKF_OK) st = vkf_tensor_download(to, gpu, (uint64_t)tokens * d * 4);
    if (st == VKF_OK) {
        ref_embed(ref, ids, table, tokens, d, vocab, sqrtf((float)d), true, tokens, 0);
        char what[96];
        snprintf(what, sizeof what, "embedding + positions %u tokens x %u", tokens, d);
        double err;
        bool ok = close_enough(gpu, ref, (size_t)tokens * d, 1e-4, 1e-4, &err);
        check_report(what, ok, err, failures);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tt), vkf_tensor_destroy(ti), vkf_tensor_destroy(to), vkf_tensor_destroy(tpe);
    free(table), free(ids), free(gpu), free(ref);
    return st;
}

static int cmd_check(const options *o)
{
    vkf_context *ctx;
    vkf_status st = open_context(o, &ctx);
    if (st != VKF_OK) return fail(st);
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    printf("checking every op against the C reference on %s\n", info.name);
    int failures = 0;
    if (st == VKF_OK) st = check_matmul(ctx, 100, 257, 64, VKF_ACTIVATION_NONE, &failures);
    if (st == VKF_OK) st = check_matmul(ctx, 17, 3, 1000, VKF_ACTIVATION_RELU, &failures);
    if (st == VKF_OK) st = check_matmul(ctx, 257, 100, 17, VKF_ACTIVATION_GELU, &failures);
    if (st == VKF_OK) st = check_rows(ctx, 64, 1000, &failures);
    if (st == VKF_OK) st = check_embed(ctx, 100, 64, 1000, &failures);
    if (st != VKF_OK) {
        fprintf(stderr, "vkformer: %s\n", vkf_last_error());
        return close_context(ctx, exit_code_for(st));
    }
    printf("%s\n", failures ? "check FAILED" : "all ops match the reference");
    return close_context(ctx, failures ? EXIT_WRONG : 0);
}

/* ------------------------------------------------------------------ bench */

/* An F16 tensor (rows, cols) from data, which is rounded in place to what the GPU reads. */
static vkf_status tensor_from_f16(vkf_context *ctx, float *data, uint64_t rows, uint64_t cols, vkf_tensor **out)
{
    uint64_t shape[2] = {rows, cols};
    vkf_status st = vkf_tensor_create(ctx, VKF_DTYPE_F16, 2, shape, out);
    if (st != VKF_OK || !data) return st;
    size_t n = (size_t)rows * cols;
    uint16_t *h = xmalloc(n * 2);
    for (size_t e = 0; e < n; e++) data[e] = ref_f16_to_f32(h[e] = ref_f32_to_f16(data[e]));
    st = vkf_tensor_upload(*out, h, n * 2);
    free(h);
    if (st != VKF_OK) {
        vkf_tensor_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* bench matmul --dtype: the storage of A and C, and of B. */
typedef enum bench_dtype { BENCH_F32, BENCH_F16, BENCH_I8W, BENCH_I8W_F16 } bench_dtype;
static const char *const bench_dtype_names[] = {"f32", "f16", "i8w", "i8w-f16"};

/* An I8 tensor (rows, cols) of data quantized per row, and its (rows) F32 scales;
 * data is replaced by the dequantized weights (what the GPU multiplies by). */
static vkf_status tensor_from_i8(vkf_context *ctx, float *data, uint64_t rows, uint64_t cols, vkf_tensor **out,
                                 vkf_tensor **out_scale)
{
    size_t n = (size_t)rows * cols;
    int8_t *q = xmalloc(n);
    float *scale = xmalloc(rows * sizeof *scale);
    uint64_t shape[2] = {rows, cols};
    vkf_status st = vkf_quantize_int8_rows(data, rows, cols, q, scale);
    if (st == VKF_OK) st = vkf_tensor_create(ctx, VKF_DTYPE_I8, 2, shape, out);
    if (st == VKF_OK) st = vkf_tensor_upload(*out, q, n);
    if (st == VKF_OK) st = tensor_from(ctx, scale, rows, 1, out_scale);
    for (size_t e = 0; e < n; e++) data[e] = scale[e / cols] * (float)q[e];
    free(q), free(scale);
    return st;
}

/* Times one m×n×k matmul: a warm-up submit, then `repeat` timed submits; the GPU
 * time of each comes from timestamp queries around the dispatch. Checks 64
 * sampled outputs against dot products on the host (f16: of the f16-rounded
 * inputs, i8w: of the dequantized weights, so only the accumulation and the
 * rounding of C differ). */
static int bench_matmul_one(vkf_context *ctx, const vkf_device_info *info, unsigned long m, unsigned long n,
                            unsigned long k, unsigned long repeat, bench_dtype dtype_id, bool json)
{
    float *a = random_floats((size_t)m * k), *b = random_floats((size_t)n * k), *c = xmalloc((size_t)m * n * 4);
    double *ms = xmalloc(repeat * sizeof *ms);
    vkf_tensor *ta = NULL, *tb = NULL, *tc = NULL, *tscale = NULL;
    vkf_cmd *cmd = NULL;
    vkf_status st = VKF_OK;
    bool f16 = dtype_id == BENCH_F16 || dtype_id == BENCH_I8W_F16; /* A and C F16 */
    bool b_i8 = dtype_id == BENCH_I8W || dtype_id == BENCH_I8W_F16;
    if (f16) {
        if (st == VKF_OK) st = tensor_from_f16(ctx, a, m, k, &ta);
        if (st == VKF_OK && !b_i8) st = tensor_from_f16(ctx, b, n, k, &tb);
        if (st == VKF_OK) st = tensor_from_f16(ctx, NULL, m, n, &tc);
    } else {
        if (st == VKF_OK) st = tensor_from(ctx, a, m, k, &ta);
        if (st == VKF_OK && !b_i8) st = tensor_from(ctx, b, n, k, &tb);
        if (st == VKF_OK) st = tensor_from(ctx, NULL, m, n, &tc);
    }
    if (st == VKF_OK && b_i8) st = tensor_from_i8(ctx, b, n, k, &tb, &tscale);
    if (st == VKF_OK) st = vkf_cmd_create(ctx, VKF_CMD_TIMESTAMPS, &cmd);
    if (st == VKF_OK) {
        vkf_matmul_desc d;
        vkf_matmul_desc_init(&d);
        d.m = (uint32_t)m, d.n = (uint32_t)n, d.k = (uint32_t)k;
        d.a.tensor = ta, d.b.tensor = tb, d.c.tensor = tc, d.b_scale = tscale;
        st = vkf_cmd_matmul(cmd, &d);
    }
    /* the kernel family vkf_cmd_matmul just chose, by the same rule */
    const char *kernel = vkf_matmul_kernel_family(ctx, (uint32_t)m, (uint32_t)n, (uint32_t)k, 1, f16,
                                                  dtype_id == BENCH_F16);
    double t0 = now_s();
    if (st == VKF_OK) st = vkf_cmd_submit(cmd); /* warm-up: pipeline compile, caches */
    double warm = now_s() - t0;
    bool progress = warm * (double)repeat > 2.0;
    for (unsigned long r = 0; st == VKF_OK && r < repeat; r++) {
        if (progress) fprintf(stderr, "bench matmul %lux%lux%lu: repeat %lu/%lu\n", m, n, k, r + 1, repeat);
        st = vkf_cmd_submit(cmd);
        uint32_t count;
        if (st == VKF_OK) st = vkf_cmd_timings(cmd, &ms[r], 1, &count);
    }
    if (st == VKF_OK && f16) {
        uint16_t *h = xmalloc((size_t)m * n * 2);
        st = vkf_tensor_download(tc, h, (uint64_t)m * n * 2);
        for (size_t e = 0; e < (size_t)m * n; e++) c[e] = ref_f16_to_f32(h[e]);
        free(h);
    } else if (st == VKF_OK) {
        st = vkf_tensor_download(tc, c, (uint64_t)m * n * 4);
    }
    int code = 0;
    if (st != VKF_OK) {
        fprintf(stderr, "vkformer: %s\n", vkf_last_error());
        code = exit_code_for(st);
    } else {
        /* coopmat kernels round F32 inputs to f16 (their contract): the host does too */
        bool rounds = strncmp(kernel, "coopmat", 7) == 0 && !f16;
        for (size_t e = 0; rounds && e < (size_t)m * k; e++) a[e] = ref_f16_to_f32(ref_f32_to_f16(a[e]));
        /* (int8 weights stage exactly; their scale multiplies the fp32 sum) */
        for (size_t e = 0; rounds && !b_i8 && e < (size_t)n * k; e++) b[e] = ref_f16_to_f32(ref_f32_to_f16(b[e]));
        double max_err = 0;
        for (int s = 0; s < 64; s++) {
            size_t i = (size_t)((s * 2654435761u) % m), j = (size_t)((s * 40503u + 7) % n);
            double ref = 0;
            for (size_t p = 0; p < k; p++) ref += (double)a[i * k + p] * b[j * k + p];
            double err = fabs(ref - c[i * n + j]) / (1.0 + fabs(ref));
            if (err > max_err || err != err) max_err = err;
        }
        qsort(ms, repeat, sizeof *ms, compare_doubles);
        double median = repeat % 2 ? ms[repeat / 2] : 0.5 * (ms[repeat / 2 - 1] + ms[repeat / 2]);
        double gflops = 2.0 * m * n * k / (median * 1e-3) / 1e9;
        const char *dtype = bench_dtype_names[dtype_id];
        if (json) {
            printf("{\"op\":\"matmul\",\"m\":%lu,\"n\":%lu,\"k\":%lu,\"dtype\":\"%s\",\"kernel\":\"%s\",\"ms\":%.4f,"
                   "\"gflops\":%.3f,\"repeat\":%lu,\"max_rel_err\":%.3g,\"device\":",
                   m, n, k, dtype, kernel, median, gflops, repeat, max_err);
            json_string(info->name);
            printf("}\n");
        } else {
            printf("matmul %lux%lux%lu %s (%s): %.3f ms median of %lu, %.2f GFLOP/s on %s (sampled error %.2g)\n", m, n,
                   k, dtype, kernel, median, repeat, gflops, info->name, max_err);
        }
        /* f32: 1e-3. f16: the inputs are rounded alike on both sides; C's rounding
         * to f16 is 2^-11 relative, accumulation order adds little: 2e-3. */
        double bound = f16 ? 2e-3 : 1e-3; /* coopmat on F32: the inputs' rounding is on both sides */
        if (!(max_err < bound)) {
            fprintf(stderr, "vkformer: matmul result is wrong (sampled relative error %.3g)\n", max_err);
            code = EXIT_WRONG;
        }
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tc), vkf_tensor_destroy(tscale);
    free(a), free(b), free(c), free(ms);
    return code;
}

static int cmd_bench_model(const options *o);
static int cmd_bench_startup(const options *o);
static int cmd_bench_translate(const options *o);

static int cmd_bench(const options *o, const char *what)
{
    if (what && strcmp(what, "model") == 0) return cmd_bench_model(o);
    if (what && strcmp(what, "startup") == 0) return cmd_bench_startup(o);
    if (what && strcmp(what, "translate") == 0) return cmd_bench_translate(o);
    if (!what || strcmp(what, "matmul") != 0) {
        fprintf(stderr, "vkformer: bench: unknown benchmark \"%s\" (known: matmul, model, startup, translate, "
                "attention)\n", what ? what : "");
        return EXIT_USAGE;
    }
    unsigned long dims[64][3];
    int cases = 0;
    if (o->sizes) {
        const char *p = o->sizes;
        while (*p && cases < 64) {
            char *end;
            unsigned long s = strtoul(p, &end, 10);
            if (end == p || s == 0 || (*end && *end != ',')) {
                fprintf(stderr, "vkformer: --size takes positive integers separated by commas, not \"%s\"\n", o->sizes);
                return EXIT_USAGE;
            }
            dims[cases][0] = dims[cases][1] = dims[cases][2] = s;
            cases++;
            p = *end ? end + 1 : end;
        }
    } else {
        if (!o->m || !o->n || !o->k) {
            fprintf(stderr, "vkformer: bench matmul needs --m, --n and --k (positive), or --size\n");
            return EXIT_USAGE;
        }
        dims[0][0] = o->m, dims[0][1] = o->n, dims[0][2] = o->k;
        cases = 1;
    }
    for (int i = 0; i < cases; i++)
        for (int j = 0; j < 3; j++)
            if (dims[i][j] > UINT32_MAX) {
                fprintf(stderr, "vkformer: size %lu is too large\n", dims[i][j]);
                return EXIT_USAGE;
            }
    if (o->repeat == 0) {
        fprintf(stderr, "vkformer: --repeat must be positive\n");
        return EXIT_USAGE;
    }
    bench_dtype dtype_id = BENCH_F32;
    if (o->dtype) {
        int found = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(o->dtype, bench_dtype_names[i]) == 0) found = i;
        if (found < 0) {
            fprintf(stderr, "vkformer: --dtype must be f32, f16, i8w or i8w-f16, not \"%s\"\n", o->dtype);
            return EXIT_USAGE;
        }
        dtype_id = (bench_dtype)found;
    }
    bool f16 = dtype_id == BENCH_F16 || dtype_id == BENCH_I8W_F16;
    vkf_context *ctx;
    vkf_status st = open_context(o, &ctx);
    if (st != VKF_OK) return fail(st);
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    if (!info.timestamps) {
        fprintf(stderr, "vkformer: device \"%s\" has no timestamp queries; cannot time on the GPU\n", info.name);
        return close_context(ctx, EXIT_ERROR);
    }
    if (f16 && !info.storage_16bit) {
        fprintf(stderr, "vkformer: device \"%s\" has no 16-bit storage: --dtype %s cannot run\n", info.name,
                bench_dtype_names[dtype_id]);
        return close_context(ctx, EXIT_ERROR);
    }
    if (o->kernel && (st = vkf_tune_force_matmul(ctx, o->kernel)) != VKF_OK) {
        fprintf(stderr, "vkformer: --kernel %s: %s\n", o->kernel, vkf_last_error());
        return close_context(ctx, st == VKF_ERROR_INVALID_ARGUMENT ? EXIT_USAGE : EXIT_ERROR);
    }
    int code = 0;
    for (int i = 0; i < cases && code == 0; i++)
        code = bench_matmul_one(ctx, &info, dims[i][0], dims[i][1], dims[i][2], o->repeat, dtype_id, o->json);
    return close_context(ctx, code);
}


/* ------------------------------------------------------------------ model commands */

/* Parses "5,6,7" into ids; returns the count, or -1 (message printed). */
static long parse_ids(const char *text, const char *flag, int32_t **out)
{
    *out = NULL;
    if (!text || !*text) {
        fprintf(stderr, "vkformer: %s needs comma-separated token ids\n", flag);
        return -1;
    }
    size_t n = 1;
    for (const char *p = text; *p; p++) n += *p == ',';
    int32_t *ids = xmalloc(n * sizeof *ids);
    const char *p = text;
    for (size_t i = 0; i < n; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < INT32_MIN || v > INT32_MAX) {
            fprintf(stderr, "vkformer: %s: \"%s\" is not a comma-separated list of integers\n", flag, text);
            free(ids);
            return -1;
        }
        ids[i] = (int32_t)v;
        p = end + (*end == ',');
    }
    *out = ids;
    return (long)n;
}

/* --precision auto|f32|f16|int8 (NULL: auto); prints the usage error itself. */
static bool parse_precision(const char *text, vkf_precision *out)
{
    *out = VKF_PRECISION_AUTO;
    if (!text || strcmp(text, "auto") == 0) return true;
    if (strcmp(text, "f32") == 0) *out = VKF_PRECISION_F32;
    else if (strcmp(text, "f16") == 0) *out = VKF_PRECISION_F16;
    else if (strcmp(text, "int8") == 0) *out = VKF_PRECISION_INT8;
    else {
        fprintf(stderr, "vkformer: --precision must be auto, f32, f16 or int8, not \"%s\"\n", text);
        return false;
    }
    return true;
}

/* Loads the model with --precision, then --seed and --attention. When auto chose
 * F16 (GPUs) and the attention variant has no F16 kernels (dense-naive, lsh), the
 * model is loaded again with F32. */
static vkf_status load_model(vkf_context *ctx, const char *path, const options *o, vkf_model **out_model)
{
    vkf_model_load_options load = o->load;
    vkf_status st;
    for (;;) {
        st = vkf_model_load_with(ctx, path, &load, out_model);
        if (st != VKF_OK) return st;
        st = vkf_model_set_seed(*out_model, o->seed);
        if (st == VKF_OK) st = vkf_model_set_attention(*out_model, o->attention, o->cross_attention);
        vkf_model_config c;
        if (st != VKF_ERROR_UNSUPPORTED || load.precision != VKF_PRECISION_AUTO ||
            vkf_model_get_config(*out_model, &c) != VKF_OK || c.activations != VKF_DTYPE_F16)
            break;
        if (o->verbose) fprintf(stderr, "vkformer: %s; loading with precision f32\n", vkf_last_error());
        vkf_model_destroy(*out_model);
        load.precision = VKF_PRECISION_F32;
    }
    if (st != VKF_OK) {
        vkf_model_destroy(*out_model); /* leaves the last error alone */
        *out_model = NULL;
    }
    return st;
}

static int open_model(const options *o, vkf_context **out_ctx, vkf_model **out_model)
{
    if (!o->model) {
        fprintf(stderr, "vkformer: --model FILE is required\n");
        return EXIT_USAGE;
    }
    vkf_status st = open_context(o, out_ctx);
    if (st != VKF_OK) return fail(st);
    st = load_model(*out_ctx, o->model, o, out_model);
    if (st != VKF_OK) {
        int code = fail(st);
        vkf_context_destroy(*out_ctx);
        return code;
    }
    return 0;
}

/* Writes a float32 (rows, cols) array in NumPy's .npy format (version 1.0). */
static bool write_npy(const char *path, const float *data, uint64_t rows, uint64_t cols)
{
    char header[128];
    int len = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu, %llu), }",
                       (unsigned long long)rows, (unsigned long long)cols);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    unsigned short hlen = (unsigned short)(len + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)len, f) == (size_t)len;
    for (int i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && fwrite(data, sizeof *data, rows * cols, f) == rows * cols; /* little-endian hosts */
    return (fclose(f) == 0) && ok;
}

static int cmd_forward(const options *o)
{
    if (!o->out) {
        fprintf(stderr, "vkformer: forward needs --out FILE.npy\n");
        return EXIT_USAGE;
    }
    int32_t *src, *tgt;
    long ns = parse_ids(o->src, "--src", &src);
    if (ns < 0) return EXIT_USAGE;
    long nt = parse_ids(o->tgt, "--tgt", &tgt);
    if (nt < 0) {
        free(src);
        return EXIT_USAGE;
    }
    vkf_context *ctx = NULL;
    vkf_model *model = NULL;
    int code = open_model(o, &ctx, &model);
    if (code) {
        free(src), free(tgt);
        return code;
    }
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    uint32_t ls = (uint32_t)ns, lt = (uint32_t)nt;
    const int32_t *sp = src, *tp = tgt;
    vkf_sequences s = {1, &sp, &ls}, t = {1, &tp, &lt};
    uint64_t n = (uint64_t)lt * cfg.tgt_vocab_size;
    float *logits = xmalloc(n * sizeof *logits);
    vkf_status st = vkf_model_forward(model, &s, &t, logits, n);
    if (st != VKF_OK) code = fail(st);
    else if (!write_npy(o->out, logits, lt, cfg.tgt_vocab_size)) {
        fprintf(stderr, "vkformer: cannot write %s\n", o->out);
        code = EXIT_ERROR;
    }
    free(logits), free(src), free(tgt);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

/* Greedy decoding of one source; prints ids or text. */
/* --timing: one line on stderr about the last generation. */
static void print_timing(const options *o, const vkf_model *model, uint32_t sources)
{
    vkf_generate_stats t;
    if (!o->timing || vkf_model_generate_stats(model, &t) != VKF_OK) return;
    fprintf(stderr, "timing: %u source%s, %llu tokens in %.1f ms (%u steps): %.1f tokens/s, first token after %.1f ms\n",
            sources, sources == 1 ? "" : "s", (unsigned long long)t.tokens, t.total_ms, t.steps,
            t.total_ms > 0 ? 1e3 * (double)t.tokens / t.total_ms : 0.0, t.first_token_ms);
}

/* The decoding options: the model's defaults (a Hugging Face folder's
 * generation_config.json) under --beam, --length-penalty, --early-stopping,
 * --n-best, --min-new and the sampling options. */
static vkf_generate_options beam_options(const options *o, const vkf_model *model, uint32_t max_new)
{
    vkf_generate_options g;
    if (vkf_model_generate_defaults(model, &g) != VKF_OK) vkf_generate_options_init(&g);
    g.max_new = max_new;
    if (o->min_new_given) g.min_new = (uint32_t)(o->min_new > UINT32_MAX ? UINT32_MAX : o->min_new);
    if (!o->min_new_given && g.min_new > max_new) g.min_new = max_new; /* the defaults' min under --max-new */
    if (o->beam_given) g.beams = (uint32_t)(o->beam > UINT32_MAX ? UINT32_MAX : o->beam);
    if (o->n_best_given) g.n_best = (uint32_t)(o->n_best > UINT32_MAX ? UINT32_MAX : o->n_best);
    if (g.n_best > g.beams && !o->n_best_given) g.n_best = g.beams;
    if (o->lp_given) g.length_penalty = (float)o->length_penalty;
    if (o->early_stopping) g.early_stopping = true;
    if (o->sample) {
        if (!o->beam_given) g.beams = 1, g.n_best = 1;
        g.sample = true;
        g.temperature = (float)o->temperature;
        g.top_k = (uint32_t)(o->top_k > UINT32_MAX ? UINT32_MAX : o->top_k);
        g.top_p = (float)o->top_p;
        g.seed = o->seed;
    }
    return g;
}

/* --max-new, or the model's default: a Hugging Face folder's generation_config
 * (max_length - 1 or max_new_tokens), else max_len. */
static uint32_t default_max_new(const options *o, const vkf_model *model, const vkf_model_config *cfg)
{
    if (o->max_new) return (uint32_t)o->max_new;
    vkf_generate_options g;
    if (cfg->format == VKF_MODEL_MARIAN && vkf_model_generate_defaults(model, &g) == VKF_OK && g.max_new) return g.max_new;
    return cfg->max_len;
}

/* Whether decoding goes through vkf_model_generate_with: beam search, sampling,
 * or a folder whose generation_config sets the defaults. */
static bool use_generate_with(const options *o, const vkf_model_config *cfg)
{
    return o->beam_given || o->sample || cfg->format == VKF_MODEL_MARIAN;
}

/* Beam search of src: the best hypothesis as a line of ids (or text); with
 * --n-best N > 1, N lines "ids<TAB>score", best first. */
static int beam_and_print(const options *o, vkf_context *ctx, vkf_model *model, const vkf_sequences *s,
                          uint32_t max_new, bool as_text)
{
    vkf_generate_options g = beam_options(o, model, max_new);
    uint32_t nb = g.n_best ? g.n_best : 1;
    int32_t *out = xmalloc((size_t)s->count * nb * max_new * sizeof *out);
    uint32_t *lens = xmalloc((size_t)s->count * nb * sizeof *lens);
    float *scores = xmalloc((size_t)s->count * nb * sizeof *scores);
    vkf_status st = vkf_model_generate_with(model, s, &g, out, lens, scores);
    int code = st == VKF_OK ? 0 : fail(st);
    if (code == 0) print_timing(o, model, s->count);
    size_t cap = 64 + (size_t)max_new * 64;
    char *text = xmalloc(cap);
    for (uint32_t h = 0; code == 0 && h < s->count * nb; h++) {
        const int32_t *ids = out + (size_t)h * max_new;
        if (as_text) {
            st = vkf_model_decode_text(model, ids, lens[h], text, cap);
            if (st != VKF_OK) {
                code = fail(st);
                break;
            }
            printf("%s", text);
        } else {
            for (uint32_t i = 0; i < lens[h]; i++) printf("%s%d", i ? "," : "", ids[i]);
        }
        if (nb > 1) printf("\t%.6f", scores[h]);
        printf("\n");
    }
    free(out), free(lens), free(scores), free(text);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

static int generate_and_print(const options *o, vkf_context *ctx, vkf_model *model, const int32_t *src, uint32_t len,
                              bool as_text)
{
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    if (o->max_new > cfg.max_len) {
        fprintf(stderr, "vkformer: --max-new %lu exceeds the model's max_len %u\n", o->max_new, cfg.max_len);
        vkf_model_destroy(model);
        return close_context(ctx, EXIT_USAGE);
    }
    uint32_t max_new = default_max_new(o, model, &cfg);
    vkf_sequences s = {1, &src, &len};
    if (use_generate_with(o, &cfg)) return beam_and_print(o, ctx, model, &s, max_new, as_text);
    int32_t *out = xmalloc((size_t)max_new * sizeof *out);
    uint32_t out_len = 0;
    vkf_status st = vkf_model_generate(model, &s, max_new, out, &out_len);
    int code = 0;
    if (st != VKF_OK) code = fail(st);
    else print_timing(o, model, 1);
    if (code) {
    } else if (as_text) {
        size_t cap = 64 + (size_t)out_len * 64;
        char *text = xmalloc(cap);
        st = vkf_model_decode_text(model, out, out_len, text, cap);
        if (st != VKF_OK) code = fail(st);
        else printf("%s\n", text);
        free(text);
    } else {
        for (uint32_t i = 0; i < out_len; i++) printf("%s%d", i ? "," : "", out[i]);
        printf("\n");
    }
    free(out);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

/* Reads one id list per line (empty lines skipped) from FILE, or stdin for "-". */
static long read_id_lines(const char *path, char ***out)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        fprintf(stderr, "vkformer: cannot read %s\n", path);
        return -1;
    }
    char **lines = NULL, buf[65536];
    long n = 0;
    while (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\r\n")] = '\0';
        if (!buf[0]) continue;
        lines = realloc(lines, (size_t)(n + 1) * sizeof *lines);
        if (!lines || !(lines[n] = strdup(buf))) {
            fprintf(stderr, "vkformer: out of memory\n");
            exit(EXIT_ERROR);
        }
        n++;
    }
    if (f != stdin) fclose(f);
    *out = lines;
    return n;
}

/* generate: every source (--src repeated, or --input FILE|-: one id list per line)
 * decoded as one batch; one line of ids per source (per hypothesis with --n-best).
 * Each source ends with eos, as translate's text does: eos_id is appended unless
 * the list already ends with it (--raw-ids: the lists exactly as given). */
static int cmd_generate(const options *o)
{
    char **lines = NULL;
    long count = 0;
    if (o->input && o->n_srcs) {
        fprintf(stderr, "vkformer: generate takes --src or --input, not both\n");
        return EXIT_USAGE;
    }
    if (o->input) {
        count = read_id_lines(o->input, &lines);
        if (count < 0) return EXIT_ERROR;
        if (count == 0) {
            fprintf(stderr, "vkformer: %s holds no id lists\n", o->input);
            free(lines);
            return EXIT_USAGE;
        }
    } else if (o->n_srcs == 0) {
        fprintf(stderr, "vkformer: generate needs --src IDS (repeatable) or --input FILE|-\n");
        return EXIT_USAGE;
    }
    uint32_t n = o->input ? (uint32_t)count : o->n_srcs;
    int32_t **ids = xmalloc(n * sizeof *ids);
    uint32_t *lens = xmalloc(n * sizeof *lens);
    int code = 0;
    for (uint32_t i = 0; i < n; i++) {
        long ns = parse_ids(o->input ? lines[i] : o->srcs[i], o->input ? o->input : "--src", &ids[i]);
        if (ns < 0) {
            for (uint32_t j = 0; j < i; j++) free(ids[j]);
            code = EXIT_USAGE;
            n = 0;
            break;
        }
        lens[i] = (uint32_t)ns;
    }
    for (long i = 0; i < count; i++) free(lines[i]);
    free(lines);
    vkf_context *ctx = NULL;
    vkf_model *model = NULL;
    if (code == 0) code = open_model(o, &ctx, &model);
    vkf_model_config cfg;
    if (code == 0) {
        vkf_model_get_config(model, &cfg);
        for (uint32_t i = 0; !o->raw_ids && i < n; i++) /* end each source with eos, as translate does */
            if (lens[i] == 0 || ids[i][lens[i] - 1] != cfg.eos_id) {
                ids[i] = realloc(ids[i], (lens[i] + 1) * sizeof **ids);
                ids[i][lens[i]++] = cfg.eos_id;
            }
        if (o->max_new > cfg.max_len) {
            fprintf(stderr, "vkformer: --max-new %lu exceeds the model's max_len %u\n", o->max_new, cfg.max_len);
            vkf_model_destroy(model);
            code = close_context(ctx, EXIT_USAGE);
            model = NULL;
        }
    }
    if (code == 0 && model) {
        uint32_t max_new = default_max_new(o, model, &cfg);
        vkf_sequences s = {n, (const int32_t *const *)ids, lens};
        if (use_generate_with(o, &cfg)) {
            code = beam_and_print(o, ctx, model, &s, max_new, false);
        } else {
            int32_t *out = xmalloc((size_t)n * max_new * sizeof *out);
            uint32_t *out_lens = xmalloc(n * sizeof *out_lens);
            vkf_status st = vkf_model_generate(model, &s, max_new, out, out_lens);
            if (st != VKF_OK) code = fail(st);
            for (uint32_t b = 0; code == 0 && b < n; b++) {
                for (uint32_t i = 0; i < out_lens[b]; i++) printf("%s%d", i ? "," : "", out[(size_t)b * max_new + i]);
                printf("\n");
            }
            if (code == 0) print_timing(o, model, n);
            free(out), free(out_lens);
            vkf_model_destroy(model);
            code = close_context(ctx, code);
        }
    }
    for (uint32_t i = 0; i < n; i++) free(ids[i]);
    free(ids), free(lens);
    return code;
}

/* Translates every line of a file, `batch` lines per generate call; lines with a
 * TAB carry the expected output and are scored by exact match. */
static int translate_file(const options *o)
{
    FILE *f = strcmp(o->input, "-") == 0 ? stdin : fopen(o->input, "r");
    if (!f) {
        fprintf(stderr, "vkformer: cannot read %s\n", o->input);
        return EXIT_ERROR;
    }
    vkf_context *ctx;
    vkf_model *model;
    int code = open_model(o, &ctx, &model);
    if (code) {
        if (f != stdin) fclose(f);
        return code;
    }
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    uint32_t B = o->batch ? (uint32_t)o->batch : 64, max_new = default_max_new(o, model, &cfg);
    if (max_new > cfg.max_len || B > 4096) {
        fprintf(stderr, "vkformer: --max-new must be at most max_len (%u) and --batch at most 4096\n", cfg.max_len);
        if (f != stdin) fclose(f);
        vkf_model_destroy(model);
        return close_context(ctx, EXIT_USAGE);
    }
    char **expected = xmalloc(B * sizeof *expected);
    int32_t *ids = xmalloc((size_t)B * (cfg.max_len + 1) * sizeof *ids), *out = xmalloc((size_t)B * max_new * sizeof *out);
    const int32_t **ptrs = xmalloc(B * sizeof *ptrs);
    uint32_t *lens = xmalloc(B * sizeof *lens), *out_lens = xmalloc(B * sizeof *out_lens);
    char line[4096], *text = xmalloc((size_t)max_new * 64 + 64);
    unsigned long scored = 0, correct = 0, lineno = 0;
    vkf_generate_stats total = {0};
    uint32_t sources = 0;
    bool eof = false;
    vkf_status st = VKF_OK;
    while (st == VKF_OK && !eof) {
        uint32_t n = 0;
        while (n < B && !(eof = !fgets(line, sizeof line, f))) {
            lineno++;
            line[strcspn(line, "\r\n")] = '\0';
            char *tab = strchr(line, '\t');
            if (tab) *tab = '\0';
            expected[n] = tab ? strdup(tab + 1) : NULL;
            st = vkf_model_encode_text(model, line, ids + (size_t)n * (cfg.max_len + 1), cfg.max_len, &lens[n]);
            if (st != VKF_OK) {
                fprintf(stderr, "vkformer: %s line %lu: %s\n", o->input, lineno, vkf_last_error());
                free(expected[n]);
                code = EXIT_ERROR;
                break;
            }
            ptrs[n] = ids + (size_t)n * (cfg.max_len + 1);
            n++;
        }
        if (st != VKF_OK || n == 0) break;
        vkf_sequences s = {n, ptrs, lens};
        if (use_generate_with(o, &cfg)) {
            vkf_generate_options g = beam_options(o, model, max_new);
            g.n_best = 1;
            st = vkf_model_generate_with(model, &s, &g, out, out_lens, NULL);
        } else {
            st = vkf_model_generate(model, &s, max_new, out, out_lens);
        }
        vkf_generate_stats t;
        if (st == VKF_OK && vkf_model_generate_stats(model, &t) == VKF_OK) {
            if (sources == 0) total.first_token_ms = t.first_token_ms;
            total.total_ms += t.total_ms, total.steps += t.steps, total.tokens += t.tokens;
            sources += n;
        }
        for (uint32_t i = 0; i < n; i++) {
            if (st == VKF_OK) st = vkf_model_decode_text(model, out + (size_t)i * max_new, out_lens[i], text, (size_t)max_new * 64 + 64);
            if (st == VKF_OK) {
                printf("%s\n", text);
                if (expected[i]) scored++, correct += strcmp(text, expected[i]) == 0;
            }
            free(expected[i]);
        }
        if (st != VKF_OK) code = fail(st);
    }
    if (code == 0 && scored)
        printf("accuracy: %lu of %lu (%.2f%%) exact matches\n", correct, scored, 100.0 * correct / scored);
    if (code == 0 && o->timing)
        fprintf(stderr, "timing: %u sources in batches of %u, %llu tokens in %.1f ms (%u steps): %.1f tokens/s, first "
                "token after %.1f ms\n", sources, B, (unsigned long long)total.tokens, total.total_ms, total.steps,
                total.total_ms > 0 ? 1e3 * (double)total.tokens / total.total_ms : 0.0, total.first_token_ms);
    if (f != stdin) fclose(f);
    free(expected), free(ids), free(out), free(ptrs), free(lens), free(out_lens), free(text);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

/* tokenize: text to source ids (eos appended), one line of ids per text; with
 * --decode, target ids to text. TEXT, or --input FILE|- with one item per line. */
static int cmd_tokenize(const options *o, const char *arg)
{
    if ((arg != NULL) == (o->input != NULL)) {
        fprintf(stderr, "vkformer: tokenize takes %s or --input FILE|-, one of the two\n", o->decode ? "IDS" : "TEXT");
        return EXIT_USAGE;
    }
    char **lines = NULL;
    long count = 1;
    if (o->input) {
        count = read_id_lines(o->input, &lines);
        if (count < 0) return EXIT_ERROR;
    }
    vkf_context *ctx = NULL;
    vkf_model *model = NULL;
    int code = open_model(o, &ctx, &model);
    if (code) {
        for (long i = 0; lines && i < count; i++) free(lines[i]);
        free(lines);
        return code;
    }
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    size_t cap = 1 << 20;
    char *text = xmalloc(cap);
    int32_t *ids = NULL;
    for (long i = 0; code == 0 && i < count; i++) {
        const char *item = o->input ? lines[i] : arg;
        vkf_status st;
        if (o->decode) {
            long n = parse_ids(item, o->input ? o->input : "IDS", &ids);
            if (n < 0) {
                code = EXIT_USAGE;
                break;
            }
            st = vkf_model_decode_text(model, ids, (uint32_t)n, text, cap);
            free(ids), ids = NULL;
            if (st == VKF_OK) printf("%s\n", text);
        } else {
            uint32_t n = 0;
            ids = xmalloc(((size_t)cfg.max_len + 1) * sizeof *ids);
            st = vkf_model_encode_text(model, item, ids, cfg.max_len, &n);
            for (uint32_t j = 0; st == VKF_OK && j < n; j++) printf("%s%d", j ? "," : "", ids[j]);
            if (st == VKF_OK) printf("\n");
            free(ids), ids = NULL;
        }
        if (st != VKF_OK) code = fail(st);
    }
    for (long i = 0; lines && i < count; i++) free(lines[i]);
    free(lines), free(text);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

static int cmd_translate(const options *o, const char *text)
{
    if (o->input) {
        if (text) {
            fprintf(stderr, "vkformer: translate takes either TEXT or --input FILE\n");
            return EXIT_USAGE;
        }
        return translate_file(o);
    }
    if (!text) {
        fprintf(stderr, "vkformer: translate needs the text to translate\n");
        return EXIT_USAGE;
    }
    vkf_context *ctx;
    vkf_model *model;
    int code = open_model(o, &ctx, &model);
    if (code) return code;
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    int32_t *ids = xmalloc(((size_t)cfg.max_len + 1) * sizeof *ids);
    uint32_t n = 0;
    vkf_status st = vkf_model_encode_text(model, text, ids, cfg.max_len, &n);
    if (st != VKF_OK) {
        code = fail(st);
        vkf_model_destroy(model);
        free(ids);
        return close_context(ctx, code == EXIT_ERROR ? EXIT_ERROR : code);
    }
    code = generate_and_print(o, ctx, model, ids, n, true);
    free(ids);
    return code;
}


/* ------------------------------------------------------------------ bench model */

typedef struct preset {
    const char *name;
    unsigned d_model, heads, layers, d_ff, vocab;
} preset;

static const preset presets[] = {
    {"small", 256, 4, 3, 1024, 1000},
    {"base", 512, 8, 6, 2048, 8000}, /* Transformer-base widths; a vocabulary of 8000 */
};

/* Writes a random-weight model of the preset (layout of docs/file-format.md). */
static bool write_random_model(const char *path, const preset *p, unsigned max_len)
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

static int cmd_bench_model(const options *o)
{
    const preset *p = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (o->preset && strcmp(o->preset, presets[i].name) == 0) p = &presets[i];
    if (!p) {
        fprintf(stderr, "vkformer: bench model needs --preset small or --preset base\n");
        return EXIT_USAGE;
    }
    unsigned long B = o->batch ? o->batch : 1, S = o->src_len ? o->src_len : 64, T = o->tgt_len ? o->tgt_len : 64;
    if (B > 4096 || S > 4096 || T > 4096 || o->repeat == 0) {
        fprintf(stderr, "vkformer: --batch, --src-len and --tgt-len must be 1..4096 and --repeat positive\n");
        return EXIT_USAGE;
    }
    unsigned max_len = (unsigned)(S > T ? S : T);
    const char *tmpdir = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/vkformer-bench-%s-%d.safetensors", tmpdir && *tmpdir ? tmpdir : "/tmp", p->name,
             (int)getpid());
    if (!write_random_model(path, p, max_len)) {
        fprintf(stderr, "vkformer: cannot write the random model to %s\n", path);
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
            printf("{\"bench\":\"model\",\"preset\":\"%s\",\"batch\":%lu,\"src_len\":%lu,\"tgt_len\":%lu,"
                   "\"forward_ms\":%.4f,\"encode_ms\":%.4f,\"step_ms\":%.4f,\"peak_bytes\":%llu,\"model_bytes\":%llu,"
                   "\"forward_ops\":{",
                   p->name, B, S, T, median, enc_ms, step_ms, (unsigned long long)peak, (unsigned long long)model_bytes);
            print_breakdown(last, true);
            printf("},\"step_ops\":{");
            print_breakdown(step, true);
            BEAM4();
            printf("},\"greedy\":{\"step_ms\":%.4f,\"tokens_per_s\":%.2f,\"first_token_ms\":%.3f,\"bytes\":%llu},"
                   "\"beam4\":{\"encode_ms\":%.4f,\"step_ms\":%.4f,\"tokens_per_s\":%.2f,\"first_token_ms\":%.3f,"
                   "\"bytes\":%llu}",
                   step_ms, greedy_stats.total_ms > 0 ? 1e3 * greedy_stats.tokens / greedy_stats.total_ms : 0.0,
                   greedy_stats.first_token_ms, (unsigned long long)greedy_stats.plan_bytes, beam_enc_ms, beam_step_ms,
                   beam_stats.total_ms > 0 ? 1e3 * beam_stats.tokens / beam_stats.total_ms : 0.0,
                   beam_stats.first_token_ms, (unsigned long long)beam_stats.plan_bytes);
            printf(",\"device\":");
            json_string(info.name);
            printf("}\n");
        } else {
            printf("model %s (d_model %u, %u heads, %u+%u layers, d_ff %u, vocab %u), batch %lu, source %lu, target %lu, on %s\n",
                   p->name, p->d_model, p->heads, p->layers, p->layers, p->d_ff, p->vocab, B, S, T, info.name);
            printf("  forward pass         %10.3f ms GPU (median of %lu)\n", median, o->repeat);
            print_breakdown(last, false);
            printf("  generation: encoder  %10.3f ms GPU; decode step at position %lu: %.3f ms GPU per token\n", enc_ms,
                   T - 1, step_ms);
            print_breakdown(step, false);
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

/* ------------------------------------------------------------------ bench startup */

/* One start-up in this (child) process: context on cache_dir, model load, first
 * forward of one source and target of up to 32 tokens, destroy (which writes the
 * pipeline cache). Milliseconds of each. */
static int startup_once(const options *o, const char *model_path, const char *cache_dir, double out_ms[4])
{
    double t0 = now_s();
    vkf_context_options co;
    vkf_context_options_init(&co);
    co.device = o->device;
    co.log = log_to_stderr;
    co.log_user = (void *)o;
    co.cache_dir = cache_dir;
    co.pipeline_cache = cache_dir ? 1 : 0;
    vkf_context *ctx;
    vkf_status st = vkf_context_create(&co, &ctx);
    if (st != VKF_OK) return fail(st);
    double t1 = now_s();
    vkf_model *model = NULL;
    st = load_model(ctx, model_path, o, &model);
    double t2 = now_s();
    int code = 0;
    if (st == VKF_OK) {
        vkf_model_config cfg;
        vkf_model_get_config(model, &cfg);
        uint32_t len = cfg.max_len < 32 ? cfg.max_len : 32;
        int32_t src[32], tgt[32];
        for (uint32_t i = 0; i < len; i++) {
            src[i] = 3 + (int32_t)(i * 7u % (cfg.src_vocab_size - 3));
            tgt[i] = i ? 3 + (int32_t)(i * 5u % (cfg.tgt_vocab_size - 3)) : cfg.bos_id;
        }
        const int32_t *sp = src, *tp = tgt;
        vkf_sequences ss = {1, &sp, &len}, ts = {1, &tp, &len};
        uint64_t n = (uint64_t)len * cfg.tgt_vocab_size;
        float *logits = xmalloc(n * sizeof *logits);
        st = vkf_model_forward(model, &ss, &ts, logits, n);
        free(logits);
    }
    double t3 = now_s();
    if (st != VKF_OK) code = fail(st);
    vkf_model_destroy(model);
    code = close_context(ctx, code); /* writes the pipeline cache */
    double t4 = now_s();
    out_ms[0] = (t1 - t0) * 1e3, out_ms[1] = (t2 - t1) * 1e3, out_ms[2] = (t3 - t2) * 1e3;
    out_ms[3] = (t4 - t3) * 1e3;
    return code;
}

/* Runs startup_once in a child process, so that nothing the driver keeps in the
 * process carries over; its times come back through a pipe. */
static int startup_child(const options *o, const char *model_path, const char *cache_dir, double out_ms[4])
{
    int fds[2];
    if (pipe(fds) != 0) {
        fprintf(stderr, "vkformer: pipe failed\n");
        return EXIT_ERROR;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "vkformer: fork failed\n");
        return EXIT_ERROR;
    }
    if (pid == 0) {
        close(fds[0]);
        double ms[4] = {0, 0, 0, 0};
        int code = startup_once(o, model_path, cache_dir, ms);
        if (write(fds[1], ms, sizeof ms) != (ssize_t)sizeof ms) code = EXIT_ERROR;
        close(fds[1]);
        fflush(stdout);
        _exit(code);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], out_ms, 4 * sizeof(double));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : EXIT_ERROR;
    if (code == 0 && got != (ssize_t)(4 * sizeof(double))) code = EXIT_ERROR;
    return code;
}

static double median_of(double *v, unsigned long n)
{
    qsort(v, n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Bytes of the regular files in dir whose names start with prefix. */
static unsigned long long dir_bytes(const char *dir, const char *prefix)
{
    unsigned long long total = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        char path[1800];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) total += (unsigned long long)sb.st_size;
    }
    closedir(d);
    return total;
}

static int cmd_bench_startup(const options *o)
{
    if (!o->model == !o->preset) {
        fprintf(stderr, "vkformer: bench startup needs --model FILE or --preset small|base\n");
        return EXIT_USAGE;
    }
    if (o->repeat == 0 || o->repeat > 100) {
        fprintf(stderr, "vkformer: --repeat must be 1..100\n");
        return EXIT_USAGE;
    }
    const char *tmpdir = getenv("TMPDIR");
    char dir[512], model_path[600], cache_dir[600];
    snprintf(dir, sizeof dir, "%s/vkformer-startup-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "vkformer: cannot create a temporary directory in %s\n", tmpdir && *tmpdir ? tmpdir : "/tmp");
        return EXIT_ERROR;
    }
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", dir);
    const char *model = o->model;
    if (o->preset) {
        const preset *p = NULL;
        for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
            if (strcmp(o->preset, presets[i].name) == 0) p = &presets[i];
        snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
        if (!p || !write_random_model(model_path, p, 64)) {
            fprintf(stderr, p ? "vkformer: cannot write the random model\n" : "vkformer: --preset small or base\n");
            rmdir(dir);
            return p ? EXIT_ERROR : EXIT_USAGE;
        }
        model = model_path;
    }
    /* Per repetition: no cache at all, then cold (empty cache directory), then warm. */
    unsigned long R = o->repeat;
    double *ms = xmalloc(R * 3 * 4 * sizeof *ms), *total = xmalloc(R * 3 * sizeof *total);
    unsigned long long cache_bytes = 0;
    int code = 0;
    char rm[1300];
    for (unsigned long r = 0; r < R && code == 0; r++) {
        snprintf(rm, sizeof rm, "rm -rf '%s'", cache_dir);
        if (system(rm) != 0) code = EXIT_ERROR;
        for (int kind = 0; kind < 3 && code == 0; kind++) {
            fprintf(stderr, "bench startup: repeat %lu/%lu, %s\n", r + 1, R, kind == 0 ? "no cache" : kind == 1 ? "cold" : "warm");
            double *m = ms + (r * 3 + kind) * 4;
            code = startup_child(o, model, kind == 0 ? NULL : cache_dir, m);
            total[kind * R + r] = m[0] + m[1] + m[2];
        }
        if (code == 0) cache_bytes = dir_bytes(cache_dir, "pipelines-");
    }
    if (code == 0) {
        static const char *kinds[3] = {"off", "cold", "warm"};
        double med[3][5];
        double *col = xmalloc(R * sizeof *col);
        for (int kind = 0; kind < 3; kind++) {
            for (int phase = 0; phase < 4; phase++) {
                for (unsigned long r = 0; r < R; r++) col[r] = ms[(r * 3 + kind) * 4 + phase];
                med[kind][phase] = median_of(col, R);
            }
            med[kind][4] = median_of(total + kind * R, R);
        }
        free(col);
        if (o->json) {
            printf("{\"bench\":\"startup\",\"model\":");
            json_string(o->preset ? o->preset : o->model);
            printf(",\"repeat\":%lu,\"pipeline_cache_bytes\":%llu", R, cache_bytes);
            for (int kind = 0; kind < 3; kind++)
                printf(",\"%s\":{\"total_ms\":%.1f,\"context_ms\":%.1f,\"load_ms\":%.1f,\"first_forward_ms\":%.1f,"
                       "\"destroy_ms\":%.1f}", kinds[kind], med[kind][4], med[kind][0], med[kind][1], med[kind][2],
                       med[kind][3]);
            printf("}\n");
        } else {
            printf("start-up of %s (context + load + first forward), median of %lu runs, each a fresh process;\n"
                   "pipeline cache file %llu bytes\n", o->preset ? o->preset : o->model, R, cache_bytes);
            printf("  %-22s %10s %10s %10s %14s %10s\n", "pipeline cache", "total ms", "context", "load", "first forward",
                   "destroy");
            for (int kind = 0; kind < 3; kind++)
                printf("  %-22s %10.1f %10.1f %10.1f %14.1f %10.1f\n",
                       kind == 0 ? "off" : kind == 1 ? "cold (empty)" : "warm (filled)", med[kind][4], med[kind][0],
                       med[kind][1], med[kind][2], med[kind][3]);
        }
    }
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0) fprintf(stderr, "vkformer: could not remove %s\n", dir);
    free(ms), free(total);
    return code;
}

/* ------------------------------------------------------------------ tune */

static void tune_progress(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "%s\n", line);
}

/* ------------------------------------------------------------------ bench translate */

/* Translation throughput as translation engines report it: target tokens per
 * second of beam search over a batch of random sources, every source decoding
 * exactly max_new steps (min_new = max_new unless --min-new says otherwise),
 * wall clock around vkf_model_generate_with (encoder, every step, the host's
 * beam bookkeeping), after one untimed run that records the plans. The model's
 * generation defaults (a folder's generation_config) apply under the options. */
static int cmd_bench_translate(const options *o)
{
    if (!o->model) {
        fprintf(stderr, "vkformer: bench translate needs --model MODEL (e.g. a folder from tools/bench_translate.py)\n");
        return EXIT_USAGE;
    }
    vkf_context *ctx;
    vkf_model *model;
    int code = open_model(o, &ctx, &model);
    if (code) return code;
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    unsigned long B = o->batch ? o->batch : 32, S = o->src_len ? o->src_len : 32, N = o->max_new ? o->max_new : 64;
    unsigned long R = o->repeat ? o->repeat : 3;
    char **lines = NULL;
    long n_lines = 0;
    if (o->input) { /* the sources as id lists, one per line: the batch */
        if (o->batch || o->src_len) {
            fprintf(stderr, "vkformer: bench translate takes --input FILE or --batch/--src-len, not both\n");
            vkf_model_destroy(model);
            return close_context(ctx, EXIT_USAGE);
        }
        n_lines = read_id_lines(o->input, &lines);
        if (n_lines <= 0) {
            if (n_lines == 0) fprintf(stderr, "vkformer: %s holds no id lists\n", o->input);
            vkf_model_destroy(model);
            return close_context(ctx, n_lines == 0 ? EXIT_USAGE : EXIT_ERROR);
        }
        B = (unsigned long)n_lines, S = 1;
    }
    if (B > 4096 || S > cfg.max_len || N > cfg.max_len || (o->min_new_given && o->min_new > N)) {
        fprintf(stderr, "vkformer: bench translate: --batch is at most 4096, --src-len and --max-new at most max_len "
                "(%u), --min-new at most --max-new\n", cfg.max_len);
        vkf_model_destroy(model);
        return close_context(ctx, EXIT_USAGE);
    }
    vkf_generate_options g = beam_options(o, model, (uint32_t)N);
    if (!o->beam_given && cfg.format != VKF_MODEL_MARIAN) g.beams = 4;
    g.min_new = o->min_new_given ? (uint32_t)o->min_new : (uint32_t)N;
    g.n_best = 1;
    /* random sources: ids other than pad, eos and the decoder start, then eos */
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ o->seed;
    int32_t **ids = xmalloc(B * sizeof *ids);
    uint32_t *lens = xmalloc(B * sizeof *lens);
    for (unsigned long b = 0; lines && b < B; b++) {
        long n = parse_ids(lines[b], o->input, &ids[b]);
        if (n < 0 || (unsigned long)n > cfg.max_len) {
            if (n >= 0) fprintf(stderr, "vkformer: %s line %lu has %ld ids; max_len is %u\n", o->input, b + 1, n, cfg.max_len);
            for (unsigned long j = 0; j < B; j++) free(lines[j]);
            for (unsigned long j = 0; j < b + (n >= 0); j++) free(ids[j]);
            free(lines), free(ids), free(lens);
            vkf_model_destroy(model);
            return close_context(ctx, EXIT_USAGE);
        }
        lens[b] = (uint32_t)n;
        if ((unsigned long)n > S) S = (unsigned long)n;
    }
    for (unsigned long b = 0; lines && b < B; b++) free(lines[b]);
    free(lines);
    for (unsigned long b = 0; !o->input && b < B; b++) {
        ids[b] = xmalloc(S * sizeof **ids);
        lens[b] = (uint32_t)S;
        for (unsigned long j = 0; j + 1 < S; j++) {
            int32_t id;
            do {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                id = (int32_t)(rng % cfg.src_vocab_size);
            } while (cfg.src_vocab_size > 3 && (id == cfg.pad_id || id == cfg.eos_id || id == cfg.bos_id));
            ids[b][j] = id;
        }
        ids[b][S - 1] = cfg.eos_id;
    }
    vkf_sequences src = {(uint32_t)B, (const int32_t *const *)ids, lens};
    int32_t *out = xmalloc(B * N * sizeof *out);
    uint32_t *out_lens = xmalloc(B * sizeof *out_lens);
    double *ms = xmalloc((R + 1) * sizeof *ms);
    vkf_status st = VKF_OK;
    uint64_t steps = 0, tokens = 0;
    for (unsigned long r = 0; st == VKF_OK && r <= R; r++) {
        fprintf(stderr, "bench translate: %s run %lu/%lu\n", r ? "timed" : "warm-up", r, R);
        double t0 = now_s();
        st = vkf_model_generate_with(model, &src, &g, out, out_lens, NULL);
        ms[r] = (now_s() - t0) * 1e3;
        vkf_generate_stats t;
        if (st == VKF_OK && vkf_model_generate_stats(model, &t) == VKF_OK) steps = t.steps, tokens = t.tokens;
    }
    if (st != VKF_OK) code = fail(st);
    if (code == 0) {
        double best = ms[1];
        for (unsigned long r = 2; r <= R; r++) best = ms[r] < best ? ms[r] : best;
        double med = median_of(ms + 1, R);
        /* target tokens: B x N decoded positions (min_new = max_new: every source runs every step) */
        double target = (double)B * (double)steps;
        vkf_device_info info;
        vkf_context_device_info(ctx, &info);
        if (o->json) {
            printf("{\"bench\":\"translate\",\"model\":");
            json_string(o->model);
            printf(",\"d_model\":%u,\"layers\":[%u,%u],\"vocab\":%u,\"batch\":%lu,\"beams\":%u,\"src_len\":%lu,"
                   "\"max_new\":%lu,\"min_new\":%u,\"steps\":%llu,\"tokens_returned\":%llu,\"runs_ms\":[",
                   cfg.d_model, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.tgt_vocab_size, B, g.beams, S, N,
                   g.min_new, (unsigned long long)steps, (unsigned long long)tokens);
            for (unsigned long r = 1; r <= R; r++) printf("%s%.3f", r > 1 ? "," : "", ms[r]);
            printf("],\"median_ms\":%.3f,\"target_tokens_per_s\":%.2f,\"activations\":\"%s\",\"device\":", med,
                   1e3 * target / med, cfg.activations == VKF_DTYPE_F16 ? "f16" : "f32");
            json_string(info.name);
            printf(",\"driver\":");
            json_string(info.driver_info[0] ? info.driver_info : info.driver_name);
            printf(",\"vkformer_version\":");
            json_string(vkf_version_string());
            printf("}\n");
        } else {
            printf("translate: model %s (d_model %u, %u+%u layers, vocab %u, %s activations) on %s\n", o->model,
                   cfg.d_model, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.tgt_vocab_size,
                   cfg.activations == VKF_DTYPE_F16 ? "f16" : "f32", info.name);
            printf("  batch %lu, beam %u, source %lu tokens, %llu steps (min-new %u, max-new %lu)\n", B, g.beams, S,
                   (unsigned long long)steps, g.min_new, N);
            printf("  %.1f ms median of %lu runs (best %.1f): %.1f target tokens/s\n", med, R, best, 1e3 * target / med);
        }
    }
    for (unsigned long b = 0; b < B; b++) free(ids[b]);
    free(ids), free(lens), free(out), free(out_lens), free(ms);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

static int cmd_tune(const options *o)
{
    vkf_context *ctx;
    vkf_status st = open_context_tuned(o, 0, &ctx); /* start from the built-in choices */
    if (st != VKF_OK) return fail(st);
    vkf_tune_options to = {.quick = o->quick, .progress = tune_progress, .path = o->out};
    char path[1024];
    st = vkf_tune_run(ctx, &to, path, sizeof path);
    if (st != VKF_OK) return close_context(ctx, fail(st));
    const char *kernel;
    uint32_t mm[6], head_dim, at[5];
    vkf_tune_current(ctx, &kernel, mm, &head_dim, at);
    if (o->json) {
        printf("{\"tune_file\":");
        json_string(path);
        printf(",\"matmul\":{\"kernel\":\"%s\",\"workgroup\":%u,\"bm\":%u,\"bn\":%u,\"bk\":%u,\"tm\":%u,\"tn\":%u},"
               "\"attention\":{\"head_dim\":%u,\"workgroup\":%u,\"bq\":%u,\"bk\":%u,\"td\":%u,\"tq\":%u}}\n",
               kernel, mm[0], mm[1], mm[2], mm[3], mm[4], mm[5], head_dim, at[0], at[1], at[2], at[3], at[4]);
    } else {
        printf("wrote %s\n", path);
        if (strcmp(kernel, "matmul_subgroup") == 0)
            printf("  matmul     %s, %ux%u tile, %u rows x %u columns per lane, subgroup %u, %u invocations\n", kernel,
                   mm[1], mm[2], mm[4], mm[5], mm[3], mm[0]);
        else
            printf("  matmul     %s, %ux%u tile, %ux%u per invocation, bk %u, %u invocations\n", kernel, mm[1], mm[2],
                   mm[4], mm[5], mm[3], mm[0]);
        printf("  attention  head_dim %u: %u invocations, bq %u, bk %u, td %u, tq %u\n", head_dim, at[0], at[1], at[2],
               at[3], at[4]);
    }
    return close_context(ctx, 0);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    options o = {.repeat = 10, .length_penalty = 1.0, .temperature = 1.0, .top_p = 1.0};
    /* --no-coopmat, for every command (bench attention and bench startup's child
     * processes included): the same as VKFORMER_COOPMAT=0. */
    int kept = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-coopmat") == 0) setenv("VKFORMER_COOPMAT", "0", 1);
        else argv[kept++] = argv[i];
    }
    argc = kept;
    argv[argc] = NULL;
    /* bench attention has options of its own (tools/bench_attention.c) */
    if (argc >= 3 && strcmp(argv[1], "bench") == 0 && strcmp(argv[2], "attention") == 0)
        return cmd_bench_attention(argc - 3, argv + 3);
    const char *positional[3] = {NULL, NULL, NULL};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long *number = NULL;
        if (strcmp(a, "--json") == 0) o.json = true;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("vkformer %s\n", vkf_version_string());
            return 0;
        } else if (strcmp(a, "--device") == 0 || strcmp(a, "--size") == 0 || strcmp(a, "--model") == 0 ||
                   strcmp(a, "--src") == 0 || strcmp(a, "--tgt") == 0 || strcmp(a, "--out") == 0 ||
                   strcmp(a, "--preset") == 0 || strcmp(a, "--input") == 0 || strcmp(a, "--attention") == 0 ||
                   strcmp(a, "--cross-attention") == 0 || strcmp(a, "--precision") == 0 ||
                   strcmp(a, "--dtype") == 0 || strcmp(a, "--kernel") == 0) {
            if (!next) {
                fprintf(stderr, "vkformer: %s needs a value\n", a);
                return EXIT_USAGE;
            }
            const char **slot = strcmp(a, "--device") == 0 ? &o.device
                                : strcmp(a, "--size") == 0 ? &o.sizes
                                : strcmp(a, "--model") == 0 ? &o.model
                                : strcmp(a, "--src") == 0  ? &o.src
                                : strcmp(a, "--preset") == 0 ? &o.preset
                                : strcmp(a, "--input") == 0 ? &o.input
                                : strcmp(a, "--attention") == 0 ? &o.attention
                                : strcmp(a, "--cross-attention") == 0 ? &o.cross_attention
                                : strcmp(a, "--precision") == 0 ? &o.precision
                                : strcmp(a, "--dtype") == 0 ? &o.dtype
                                : strcmp(a, "--kernel") == 0 ? &o.kernel
                                : strcmp(a, "--tgt") == 0  ? &o.tgt
                                                           : &o.out;
            *slot = next;
            if (slot == &o.src) {
                if (o.n_srcs == sizeof o.srcs / sizeof o.srcs[0]) {
                    fprintf(stderr, "vkformer: at most %zu --src\n", sizeof o.srcs / sizeof o.srcs[0]);
                    return EXIT_USAGE;
                }
                o.srcs[o.n_srcs++] = next;
            }
            i++;
        } else if (strcmp(a, "--max-new") == 0) number = &o.max_new, o.max_new_given = true;
        else if (strcmp(a, "--batch") == 0) number = &o.batch;
        else if (strcmp(a, "--max-device-memory") == 0) number = &o.max_device_memory;
        else if (strcmp(a, "--src-len") == 0) number = &o.src_len;
        else if (strcmp(a, "--tgt-len") == 0) number = &o.tgt_len; else if (strcmp(a, "--m") == 0) number = &o.m;
        else if (strcmp(a, "--n") == 0) number = &o.n;
        else if (strcmp(a, "--k") == 0) number = &o.k;
        else if (strcmp(a, "--repeat") == 0) number = &o.repeat;
        else if (strcmp(a, "--quick") == 0) o.quick = true;
        else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) o.verbose = true;
        else if (strcmp(a, "--seed") == 0) number = &o.seed;
        else if (strcmp(a, "--beam") == 0) number = &o.beam, o.beam_given = true;
        else if (strcmp(a, "--n-best") == 0) number = &o.n_best, o.n_best_given = true;
        else if (strcmp(a, "--min-new") == 0) number = &o.min_new, o.min_new_given = true;
        else if (strcmp(a, "--decode") == 0) o.decode = true;
        else if (strcmp(a, "--early-stopping") == 0) o.early_stopping = true;
        else if (strcmp(a, "--timing") == 0) o.timing = true;
        else if (strcmp(a, "--raw-ids") == 0) o.raw_ids = true;
        else if (strcmp(a, "--top-k") == 0) number = &o.top_k, o.sample = true;
        else if (strcmp(a, "--temperature") == 0 || strcmp(a, "--top-p") == 0) {
            char *end = NULL;
            double v = next ? strtod(next, &end) : NAN;
            if (!next || end == next || *end) {
                fprintf(stderr, "vkformer: %s needs a number\n", a);
                return EXIT_USAGE;
            }
            *(strcmp(a, "--top-p") == 0 ? &o.top_p : &o.temperature) = v;
            o.sample = true;
            i++;
        }
        else if (strcmp(a, "--length-penalty") == 0) {
            char *end = NULL;
            o.length_penalty = next ? strtod(next, &end) : NAN;
            o.lp_given = true;
            if (!next || end == next || *end || !isfinite(o.length_penalty)) {
                fprintf(stderr, "vkformer: --length-penalty needs a number\n");
                return EXIT_USAGE;
            }
            i++;
        }
        else if (a[0] == '-' && a[1] && !(a[1] >= '0' && a[1] <= '9')) {
            fprintf(stderr, "vkformer: unknown option %s\n%s", a, usage_text);
            return EXIT_USAGE;
        } else if (npos < 3) positional[npos++] = a;
        else {
            fprintf(stderr, "vkformer: unexpected argument %s\n", a);
            return EXIT_USAGE;
        }
        if (number) {
            if (!parse_ulong(next, number)) {
                fprintf(stderr, "vkformer: %s needs a non-negative integer\n", a);
                return EXIT_USAGE;
            }
            i++;
        }
    }
    if (!positional[0]) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    if (!parse_precision(o.precision, &o.load.precision)) return EXIT_USAGE;
    if (strcmp(positional[0], "info") == 0) return cmd_info(&o);
    if (strcmp(positional[0], "check") == 0) return cmd_check(&o);
    if (strcmp(positional[0], "bench") == 0) return cmd_bench(&o, positional[1]);
    if (strcmp(positional[0], "forward") == 0) return cmd_forward(&o);
    if (strcmp(positional[0], "generate") == 0) {
        if (positional[1] && strcmp(positional[1], "-") == 0 && !o.input) o.input = "-"; /* ids from stdin */
        else if (positional[1]) {
            fprintf(stderr, "vkformer: unexpected argument %s\n", positional[1]);
            return EXIT_USAGE;
        }
        return cmd_generate(&o);
    }
    if (strcmp(positional[0], "translate") == 0) {
        if (positional[1] && strcmp(positional[1], "-") == 0 && !o.input) return o.input = "-", cmd_translate(&o, NULL);
        return cmd_translate(&o, positional[1]);
    }
    if (strcmp(positional[0], "tokenize") == 0) return cmd_tokenize(&o, positional[1]);
    if (strcmp(positional[0], "tune") == 0) return cmd_tune(&o);
    fprintf(stderr, "vkformer: unknown command \"%s\"\n%s", positional[0], usage_text);
    return EXIT_USAGE;
}

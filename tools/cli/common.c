/* What the commands of the vkformer tool share: the option parser (each command
 * passes its own table), context and model opening, exit codes, id lists, JSON
 * records, random data. (Reading and showing text: tools/cli/text.c.) */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ parsing */

static const cli_option help_option = {"--help", CLI_FLAG, 0, 0, 0, NULL, "this text", "-h"};

void cli_print_help(const cli_command *cmd, FILE *f)
{
    /* the synopsis: one "usage: vkformer NAME FORM" per line of cmd->synopsis */
    const char *s = cmd->synopsis;
    bool first = true;
    while (s && *s) {
        size_t len = strcspn(s, "\n");
        fprintf(f, "%s vkformer %s%s%.*s\n", first ? "usage:" : "      ", cmd->name, len ? " " : "", (int)len, s);
        first = false;
        s += len + (s[len] == '\n');
    }
    if (!cmd->synopsis) fprintf(f, "usage: vkformer %s\n", cmd->name);
    if (cmd->about) fprintf(f, "%s%s", cmd->about, cmd->about[strlen(cmd->about) - 1] == '\n' ? "" : "\n");
    fprintf(f, "options:\n");
    for (const cli_option *op = cmd->options;; op++) {
        if (!op->name) op = &help_option;
        char left[64];
        snprintf(left, sizeof left, "%s%s%s%s%s", op->alias ? op->alias : "", op->alias ? ", " : "", op->name,
                 op->arg ? " " : "", op->arg ? op->arg : "");
        fprintf(f, "  %-30s %s\n", left, op->help);
        if (op == &help_option) break;
    }
    fprintf(f, "exit codes: 0 success, 1 error, 2 usage, 3 no Vulkan loader, 4 no Vulkan device, 5 wrong results, "
               "6 validation messages\n");
}

int cli_usage_error(const options *o, const char *format, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "vkformer: %s: ", o->command);
    print_line(stderr, prefix, message); /* one line, whatever the message holds */
    return EXIT_USAGE;
}

bool cli_given(const options *o, const char *name)
{
    for (int i = 0; i < o->n_given; i++)
        if (strcmp(o->given[i], name) == 0) return true;
    return false;
}

int cli_max_args(const options *o, int max)
{
    if (o->n_args > max)
        return cli_usage_error(o, "unexpected argument %s (vkformer %s --help lists what it takes)", quoted(o->args[max]),
                               o->command);
    return -1;
}

/* A decimal integer in [min, max]: digits only (no sign, no spaces), no overflow. */
static bool parse_count(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
    if (!s || !*s) return false;
    for (const char *c = s; *c; c++)
        if (*c < '0' || *c > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || *end || v < min || v > max) return false;
    *out = (unsigned long)v;
    return true;
}

static bool parse_number(const char *s, double *out)
{
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s || errno == ERANGE || !isfinite(v)) return false;
    *out = v;
    return true;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, options *o)
{
    o->command = cmd->name;
    bool options_done = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        /* words: "-" (stdin), negative numbers, anything after "--" */
        if (options_done || a[0] != '-' || !a[1] || (a[1] >= '0' && a[1] <= '9')) {
            if (o->n_args == (int)(sizeof o->args / sizeof o->args[0]))
                return cli_usage_error(o, "too many arguments");
            o->args[o->n_args++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            options_done = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            cli_print_help(cmd, stdout);
            return EXIT_OK;
        }
        const cli_option *op = cmd->options;
        while (op->name && strcmp(a, op->name) != 0 && !(op->alias && strcmp(a, op->alias) == 0)) op++;
        if (!op->name)
            return cli_usage_error(o, "unknown option %s (vkformer %s --help lists its options)", quoted(a), o->command);
        if (op->kind != CLI_REPEAT && op->kind != CLI_LIST && cli_given(o, op->name))
            return cli_usage_error(o, "%s given twice", op->name);
        if (o->n_given < (int)(sizeof o->given / sizeof o->given[0])) o->given[o->n_given++] = op->name;
        char *field = (char *)o + op->offset;
        if (op->kind == CLI_FLAG) {
            *(bool *)field = true;
            continue;
        }
        const char *value = i + 1 < argc ? argv[++i] : NULL;
        if (!value) return cli_usage_error(o, "%s needs a value (%s)", op->name, op->arg);
        switch (op->kind) {
        case CLI_STRING:
            if (!*value) return cli_usage_error(o, "%s needs a value (%s), not \"\"", op->name, op->arg);
            *(const char **)field = value;
            break;
        case CLI_REPEAT:
            if (o->n_srcs == sizeof o->srcs / sizeof o->srcs[0])
                return cli_usage_error(o, "at most %zu %s", sizeof o->srcs / sizeof o->srcs[0], op->name);
            o->srcs[o->n_srcs++] = value;
            *(const char **)field = value;
            break;
        case CLI_COUNT:
            if (!parse_count(value, op->min, op->max, (unsigned long *)field)) {
                if (op->max == (unsigned long)-1)
                    return cli_usage_error(o, "%s needs an integer >= %lu, not %s", op->name, op->min, quoted(value));
                return cli_usage_error(o, "%s needs an integer in %lu..%lu, not %s", op->name, op->min, op->max,
                                       quoted(value));
            }
            break;
        case CLI_NUMBER:
            if (!parse_number(value, (double *)field))
                return cli_usage_error(o, "%s needs a finite number, not %s", op->name, quoted(value));
            break;
        case CLI_LIST: {
            cli_list *l = (cli_list *)field;
            if (!*value) return cli_usage_error(o, "%s needs a value (%s), not \"\"", op->name, op->arg);
            if (l->n == sizeof l->v / sizeof l->v[0])
                return cli_usage_error(o, "at most %zu %s", sizeof l->v / sizeof l->v[0], op->name);
            l->v[l->n++] = value;
            break;
        }
        case CLI_FLAG:
            break;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------ contexts and models */

int exit_code_for(vkf_status st)
{
    if (st == VKF_ERROR_NO_VULKAN) return EXIT_NO_VULKAN;
    if (st == VKF_ERROR_NO_DEVICE) return EXIT_NO_DEVICE;
    return EXIT_ERROR;
}

int fail(vkf_status st)
{
    print_line(stderr, "vkformer: ", vkf_last_error());
    return exit_code_for(st);
}

void log_to_stderr(void *user, vkf_log_level level, const char *message)
{
    const options *o = user;
    if (level == VKF_LOG_INFO && !(o && o->verbose)) return;
    print_line(stderr, level == VKF_LOG_ERROR ? "vkformer: error: " : level == VKF_LOG_WARNING ? "vkformer: warning: "
                                                                                          : "vkformer: info: ",
               message);
}

void context_options_from(const options *o, vkf_context_options *co)
{
    vkf_context_options_init(co);
    co->device = o->device;
    co->log = log_to_stderr;
    co->log_user = (void *)o;
    co->max_device_memory = o->max_device_memory;
}

vkf_status open_context_tuned(const options *o, int tune, vkf_context **out)
{
    vkf_context_options co;
    context_options_from(o, &co);
    co.tune = tune;
    return vkf_context_create(&co, out);
}

vkf_status open_context(const options *o, vkf_context **out)
{
    return open_context_tuned(o, -1, out);
}

int close_context(vkf_context *ctx, int code)
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

void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "vkformer: out of host memory (%zu bytes)\n", bytes);
        exit(EXIT_ERROR);
    }
    return p;
}

void jsonl_begin(const char *command)
{
    printf("{\"command\":");
    print_json_string(command);
}

void jsonl_driver(const vkf_device_info *info, char *out, size_t size)
{
    snprintf(out, size, "%s%s%s", info->driver_name, info->driver_name[0] && info->driver_info[0] ? " " : "",
             info->driver_info);
}

void jsonl_end(const vkf_device_info *info)
{
    char driver[600];
    jsonl_driver(info, driver, sizeof driver);
    jsonl_string("device", info->name);
    jsonl_string("driver", driver);
    jsonl_string("vkformer_version", vkf_version_string());
    printf("}\n");
    fflush(stdout);
}

void jsonl_string(const char *key, const char *value)
{
    printf(",\"%s\":", key);
    if (value) print_json_string(value);
    else printf("null");
}

void jsonl_choice(const vkf_kernel_choice *c, uint32_t tile_count)
{
    jsonl_string("kernel", c->kernel);
    printf(",\"tiles\":[");
    for (uint32_t i = 0; i < tile_count && i < 6; i++) printf("%s%u", i ? "," : "", c->tiles[i]);
    printf("]");
    jsonl_string("source", c->source);
    jsonl_string("table_entry", c->table_entry);
}

int attention_lanes(const vkf_context *ctx, uint32_t head_dim)
{
    vkf_kernel_choice c;
    return head_dim && vkf_attention_fused_choice(ctx, head_dim, &c) == VKF_OK && strcmp(c.kernel, "fused-lanes") == 0;
}

void jsonl_number(double x, int digits)
{
    if (isfinite(x)) printf("%.*g", digits, x);
    else printf("null");
}

void jsonl_ids(const int32_t *ids, uint32_t n)
{
    putchar('[');
    for (uint32_t i = 0; i < n; i++) printf("%s%d", i ? "," : "", ids[i]);
    putchar(']');
}

void jsonl_attention(const options *o, const vkf_model *model)
{
    jsonl_string("attention", o->attention ? o->attention : "dense");
    jsonl_string("cross_attention", o->cross_attention ? o->cross_attention : "dense");
    vkf_model_attention used;
    if (vkf_model_get_attention(model, &used) != VKF_OK) {
        printf(",\"attention_used\":null");
        return;
    }
    printf(",\"attention_used\":{\"encoder\":");
    print_json_string(used.encoder);
    jsonl_string("decoder", used.decoder);
    jsonl_string("cross", used.cross);
    jsonl_string("decode_self", used.decode_self);
    jsonl_string("decode_cross", used.decode_cross);
    jsonl_string("kernel", used.kernel);
    putchar('}');
}

int cli_run_model_command(const cli_command *cmd, int argc, char **argv, options *o, int (*run)(const options *o))
{
    int code = cli_parse(cmd, argc, argv, o);
    if (code < 0) code = cli_max_args(o, 0);
    if (code < 0) code = check_model_options(o);
    return code >= 0 ? code : run(o);
}

int check_model_options(options *o)
{
    o->load.precision = VKF_PRECISION_AUTO;
    if (!o->precision || strcmp(o->precision, "auto") == 0) {
    } else if (strcmp(o->precision, "f32") == 0) o->load.precision = VKF_PRECISION_F32;
    else if (strcmp(o->precision, "f16") == 0) o->load.precision = VKF_PRECISION_F16;
    else if (strcmp(o->precision, "int8") == 0) o->load.precision = VKF_PRECISION_INT8;
    else return cli_usage_error(o, "--precision must be auto, f32, f16 or int8, not %s", quoted(o->precision));
    /* a variant the library cannot read is a usage error, like any other bad value */
    if (o->attention && vkf_attention_check(o->attention, false) != VKF_OK)
        return cli_usage_error(o, "--attention: %s", vkf_last_error());
    if (o->cross_attention && vkf_attention_check(o->cross_attention, true) != VKF_OK)
        return cli_usage_error(o, "--cross-attention: %s", vkf_last_error());
    return -1;
}

/* Loads the model with --precision, then --seed and --attention. When auto chose
 * F16 (GPUs) and the attention variant has no F16 kernels (dense-naive, lsh), the
 * model is loaded again with F32. */
vkf_status load_model(vkf_context *ctx, const char *path, const options *o, vkf_model **out_model)
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

int open_model(const options *o, vkf_context **out_ctx, vkf_model **out_model)
{
    if (!o->model) {
        fprintf(stderr, "vkformer: %s: --model MODEL is required\n", o->command);
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

/* ------------------------------------------------------------------ ids and lines */

long parse_ids(const char *text, const char *flag, int32_t **out)
{
    *out = NULL;
    if (!text || !*text) {
        cli_error("%s needs comma-separated token ids", flag);
        return -1;
    }
    size_t n = 1;
    for (const char *p = text; *p; p++) n += *p == ',';
    int32_t *ids = xmalloc(n * sizeof *ids);
    const char *p = text;
    for (size_t i = 0; i < n; i++) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || errno == ERANGE || v < INT32_MIN || v > INT32_MAX) {
            cli_error("%s: %s is not a comma-separated list of integers (at byte %zu)", flag, quoted(text),
                      (size_t)(p - text) + 1);
            free(ids);
            return -1;
        }
        ids[i] = (int32_t)v;
        p = end + (*end == ',');
    }
    *out = ids;
    return (long)n;
}

const char *input_name(const char *path)
{
    return strcmp(path, "-") == 0 ? "stdin" : path;
}

/* ------------------------------------------------------------------ random data, timing */

uint64_t rng_state = 0x9e3779b97f4a7c15ull;

float rand_uniform(void) /* [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (2.0 / 16777216.0) - 1.0);
}

float *random_floats(size_t n)
{
    float *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = rand_uniform();
    return v;
}

vkf_status tensor_from(vkf_context *ctx, const float *data, uint64_t rows, uint64_t cols, vkf_tensor **out)
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

int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median_of(double *v, unsigned long n)
{
    qsort(v, n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

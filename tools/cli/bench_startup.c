/* vkformer bench startup: context, load and first forward, with a cold and a warm pipeline cache. */
#include "cli.h"
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

static int run_bench_startup(const options *o)
{
    if (!o->model == !o->preset) return cli_usage_error(o, "needs --model MODEL or --preset small|base, one of the two");
    if (o->preset && !find_preset(o->preset))
        return cli_usage_error(o, "--preset must be small or base, not %s", quoted(o->preset));
    const char *tmpdir = getenv("TMPDIR");
    char dir[512], model_path[600], cache_dir[600];
    snprintf(dir, sizeof dir, "%s/vkformer-startup-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(dir)) {
        cli_error("cannot create a temporary directory in %s", tmpdir && *tmpdir ? tmpdir : "/tmp");
        return EXIT_ERROR;
    }
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", dir);
    const char *model = o->model;
    if (o->preset) {
        const preset *p = find_preset(o->preset);
        snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
        if (!write_random_model(model_path, p, 64)) {
            fprintf(stderr, "vkformer: cannot write the random model\n");
            remove(model_path);
            rmdir(dir);
            return EXIT_ERROR;
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
            /* the device the children ran on, chosen as they chose it */
            vkf_context *ctx;
            vkf_status st = open_context(o, &ctx);
            if (st != VKF_OK) {
                code = fail(st);
            } else {
                vkf_device_info info;
                vkf_context_device_info(ctx, &info);
                jsonl_begin("bench startup");
                printf(",\"bench\":\"startup\"");
                jsonl_string("model", o->preset ? o->preset : o->model);
                printf(",\"repeat\":%lu,\"pipeline_cache_bytes\":%llu", R, cache_bytes);
                for (int kind = 0; kind < 3; kind++)
                    printf(",\"%s\":{\"total_ms\":%.1f,\"context_ms\":%.1f,\"load_ms\":%.1f,\"first_forward_ms\":%.1f,"
                           "\"destroy_ms\":%.1f}", kinds[kind], med[kind][4], med[kind][0], med[kind][1], med[kind][2],
                           med[kind][3]);
                jsonl_end(&info);
                code = close_context(ctx, 0);
            }
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


int cmd_bench_startup(int argc, char **argv)
{
    static const cli_option table[] = {
        CLI_MODEL_PATH,
        {"--preset", CLI_STRING, CLI_OFF(preset), 0, 0, "small|base", "a random-weight model (as bench model's)", NULL},
        {"--repeat", CLI_COUNT, CLI_OFF(repeat), 1, 100, "R", "runs of each kind, the median reported (default 10)",
         NULL},
        {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line (docs/json.md)", NULL},
        CLI_MODEL_OPTIONS,
        CLI_COMMON_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {"bench startup", "--model MODEL | --preset small|base [--repeat R] [options]",
                                    "context creation + model load + first forward, each run in a fresh process, with "
                                    "no,\nan empty (cold) and a filled (warm) pipeline cache", table};
    options o = {.repeat = 10};
    return cli_run_model_command(&cmd, argc, argv, &o, run_bench_startup);
}

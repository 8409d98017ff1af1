/* vkformer tune: time kernel tiles on the device and write its tune file. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void tune_progress(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "%s\n", line);
}

/* Copies the file to stdout; false after printing why not. */
static bool copy_to_stdout(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("tune: cannot read back %s", path);
        return false;
    }
    char buf[65536];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0) ok = fwrite(buf, 1, n, stdout) == n;
    ok = ok && !ferror(f) && fflush(stdout) == 0;
    fclose(f);
    if (!ok) fprintf(stderr, "vkformer: tune: cannot write the tune file to stdout\n");
    return ok;
}

static int run_tune(const options *o)
{
    /* --out -: the file is written beside the others in a temporary directory, then copied to stdout */
    bool to_stdout = o->out && strcmp(o->out, "-") == 0;
    char tmp_dir[512] = "", tmp_path[600] = "";
    if (to_stdout) {
        const char *tmpdir = getenv("TMPDIR");
        snprintf(tmp_dir, sizeof tmp_dir, "%s/vkformer-tune-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
        if (!mkdtemp(tmp_dir)) {
            cli_error("tune: cannot create a temporary directory in %s", tmpdir && *tmpdir ? tmpdir : "/tmp");
            return EXIT_ERROR;
        }
        snprintf(tmp_path, sizeof tmp_path, "%s/tune.json", tmp_dir);
    }
    vkf_context *ctx;
    vkf_status st = open_context_tuned(o, 0, &ctx); /* start from the built-in choices */
    if (st != VKF_OK) {
        if (to_stdout) rmdir(tmp_dir);
        return fail(st);
    }
    vkf_tune_options to = {.quick = o->quick, .progress = tune_progress, .path = to_stdout ? tmp_path : o->out};
    char path[1024];
    st = vkf_tune_run(ctx, &to, path, sizeof path);
    bool copied = st == VKF_OK && to_stdout && copy_to_stdout(tmp_path);
    if (to_stdout) remove(tmp_path), rmdir(tmp_dir);
    if (st != VKF_OK) return close_context(ctx, fail(st));
    if (to_stdout && !copied) return close_context(ctx, EXIT_ERROR);
    if (to_stdout) snprintf(path, sizeof path, "-");
    FILE *summary = to_stdout ? stderr : stdout; /* stdout holds the file */
    const char *kernel;
    uint32_t mm[6], head_dim, at[5];
    vkf_tune_current(ctx, &kernel, mm, &head_dim, at);
    if (o->json) {
        vkf_device_info info;
        vkf_context_device_info(ctx, &info);
        jsonl_begin("tune");
        jsonl_string("tune_file", path);
        printf(",\"matmul\":{\"kernel\":\"%s\",\"workgroup\":%u,\"bm\":%u,\"bn\":%u,\"bk\":%u,\"tm\":%u,\"tn\":%u},"
               "\"attention\":{\"head_dim\":%u,\"workgroup\":%u,\"bq\":%u,\"bk\":%u,\"td\":%u,\"tq\":%u,\"lanes\":%d}",
               kernel, mm[0], mm[1], mm[2], mm[3], mm[4], mm[5], head_dim, at[0], at[1], at[2], at[3], at[4],
               attention_lanes(ctx, head_dim));
        jsonl_end(&info);
    } else {
        fprintf(summary, "wrote %s\n", to_stdout ? "the tune file to stdout" : path);
        if (strcmp(kernel, "matmul_subgroup") == 0)
            fprintf(summary, "  matmul     %s, %ux%u tile, %u rows x %u columns per lane, subgroup %u, %u invocations\n", kernel,
                   mm[1], mm[2], mm[4], mm[5], mm[3], mm[0]);
        else
            fprintf(summary, "  matmul     %s, %ux%u tile, %ux%u per invocation, bk %u, %u invocations\n", kernel, mm[1], mm[2],
                   mm[4], mm[5], mm[3], mm[0]);
        fprintf(summary, "  attention  head_dim %u: %s%u invocations, bq %u, bk %u, td %u, tq %u\n", head_dim,
                attention_lanes(ctx, head_dim) ? "lanes form, " : "", at[0], at[1], at[2], at[3], at[4]);
    }
    return close_context(ctx, 0);
}


int cmd_tune(int argc, char **argv)
{
    static const cli_option table[] = {
        {"--quick", CLI_FLAG, CLI_OFF(quick), 0, 0, NULL, "a few candidates at small shapes", NULL},
        {"--out", CLI_STRING, CLI_OFF(out), 0, 0, "FILE|-", "the tune file to write (- : stdout; default: the device's "
         "file in the cache directory, read by later runs)", NULL},
        {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line: the file and the winning tiles (docs/json.md)", NULL},
        CLI_COMMON_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {"tune", "[--quick] [--out FILE|-] [--json]",
                                    "times candidate kernel tiles on the device, checks each against a host reference "
                                    "and stores\nthe fastest in the device's tune file (VKFORMER_TUNE=0: later runs "
                                    "ignore it)", table};
    options o = {0};
    int code = cli_parse(&cmd, argc, argv, &o);
    if (code < 0) code = cli_max_args(&o, 0);
    if (code < 0 && o.json && o.out && strcmp(o.out, "-") == 0)
        code = cli_usage_error(&o, "--json and --out - both write to stdout");
    return code >= 0 ? code : run_tune(&o);
}

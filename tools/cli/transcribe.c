/* vkformer transcribe: the text of sound files through a Whisper folder
 * (vkf_model_transcribe): one line of text per file, or with --timestamps one
 * line per segment as whisper.cpp prints them,
 *   [00:00:00.000 --> 00:00:02.500]  text
 * (a folder without a tokenizer prints the segment's ids instead of text), or
 * with --json one record per file (docs/json.md). Several files: each one's
 * output follows a "FILE:" line (not with --json). A file that cannot be read
 * is named on stderr and the others go on (exit 1 at the end). Audio longer
 * than a minute gets a progress line on stderr. With --devices, a pool
 * (vkf_pool_submit_transcribe): each file runs whole on one device, several
 * devices at once, and the output comes in the files' order. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* hh:mm:ss.mmm */
static void clock_text(double seconds, char *out, size_t cap)
{
    long long ms = llround(seconds * 1000.0);
    if (ms < 0) ms = 0;
    snprintf(out, cap, "%02lld:%02lld:%02lld.%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, ms % 1000);
}

/* The segment's text without its leading spaces, or its ids. */
static void print_segment_text(const vkf_transcript *t, const vkf_segment *s)
{
    if (s->text) {
        fputs(s->text + strspn(s->text, " "), stdout);
        return;
    }
    for (uint32_t i = 0; i < s->count; i++) printf("%s%d", i ? " " : "", t->ids[s->first + i]);
}

typedef struct progress {
    const char *file;
    bool on;
} progress;

static void on_progress(void *user, double done, double total)
{
    const progress *p = user;
    if (p->on) fprintf(stderr, "vkformer: transcribe: %s: %.0f of %.0f s\n", p->file, done, total);
}

static void print_json(const options *o, const char *file, const vkf_transcript *t, const vkf_model_config *cfg,
                       double ms, const vkf_device_info *info, const vkf_model *model)
{
    jsonl_begin("transcribe");
    jsonl_string("file", file);
    jsonl_string("model", o->model);
    printf(",\"seconds\":");
    jsonl_number(t->seconds, 9);
    jsonl_string("language", t->language[0] ? t->language : NULL);
    printf(",\"language_detected\":%s,\"task\":", t->language_detected ? "true" : "false");
    printf(o->task ? "\"%s\"" : "null", o->task);
    printf(",\"timestamps\":%s,\"prompt\":", t->timestamps ? "true" : "false");
    jsonl_ids(t->prompt, t->n_prompt);
    printf(",\"windows\":%u", t->windows);
    jsonl_string("text", t->text);
    printf(",\"ids\":");
    jsonl_ids(t->ids, t->n_ids);
    printf(",\"segments\":[");
    for (uint32_t i = 0; i < t->n_segments; i++) {
        const vkf_segment *s = &t->segments[i];
        printf("%s{\"start\":", i ? "," : "");
        jsonl_number(s->start, 9);
        printf(",\"end\":");
        jsonl_number(s->end, 9);
        printf(",\"ids\":");
        jsonl_ids(t->ids + s->first, s->count);
        jsonl_string("text", s->text);
        printf("}");
    }
    printf("],\"transcribe_ms\":");
    jsonl_number(ms, 6);
    printf(",\"realtime_factor\":");
    jsonl_number(t->seconds > 0 ? ms / 1000.0 / t->seconds : NAN, 6);
    printf(",\"activations\":\"%s\"", cfg->activations == VKF_DTYPE_F16 ? "f16" : "f32");
    jsonl_attention(o, model);
    jsonl_end(info);
}

/* One file's output: its JSON record, or its text (segments with --timestamps)
 * after a "FILE:" line where there are several files. */
static void print_transcript(const options *o, const char *file, const vkf_transcript *t, const vkf_model_config *cfg,
                             double ms, const vkf_device_info *info, const vkf_model *model)
{
    if (o->json) {
        print_json(o, file, t, cfg, ms, info, model);
        return;
    }
    if (o->n_args > 1) printf("%s:\n", file);
    if (o->timestamps) {
        for (uint32_t i = 0; i < t->n_segments; i++) {
            char a[32], b[32];
            clock_text(t->segments[i].start, a, sizeof a);
            clock_text(t->segments[i].end, b, sizeof b);
            printf("[%s --> %s]  ", a, b);
            print_segment_text(t, &t->segments[i]);
            putchar('\n');
        }
    } else if (t->text) {
        printf("%s\n", t->text + strspn(t->text, " "));
    } else {
        for (uint32_t i = 0; i < t->n_ids; i++) printf("%s%d", i ? " " : "", t->ids[i]);
        putchar('\n');
    }
    fflush(stdout);
}

static void transcribe_options(const options *o, progress *pr, vkf_transcribe_options *to)
{
    vkf_transcribe_options_init(to);
    to->language = o->language;
    to->task = o->task;
    to->timestamps = o->timestamps ? 1 : -1;
    to->beams = (uint32_t)o->beam;
    to->on_progress = on_progress, to->on_progress_user = pr;
}

static double now_ms(void)
{
    return now_s() * 1e3;
}

/* Files submitted ahead of the one being printed, per device. */
#define AHEAD_PER_DEVICE 2

/* --devices: every file read and submitted to the pool, a few per device ahead of
 * the one collected and printed. */
static int run_transcribe_pool(const options *o)
{
    vkf_pool *pool = NULL;
    int code = pool_open(o, &pool);
    if (code) return code;
    const vkf_model *model = vkf_pool_model(pool);
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    if (strcmp(cfg.family, "whisper") != 0) {
        cli_error("%s is not a Whisper model (family %s): transcribe needs one", o->model, cfg.family);
        return pool_close(pool, EXIT_ERROR, false);
    }
    uint32_t n_devices = vkf_pool_device_count(pool);
    vkf_device_info *devices = pool_devices(pool);
    int n = o->n_args;
    progress *pr = xmalloc((size_t)n * sizeof *pr);
    uint64_t *tickets = xmalloc((size_t)n * sizeof *tickets);
    int *pending = xmalloc((size_t)n * sizeof *pending); /* submitted files, in order */
    int head = 0, tail = 0, ahead = (int)(n_devices * AHEAD_PER_DEVICE);
    bool stop = false;
    for (int f = 0; f <= n && !(stop && head == tail); f++) {
        if (f < n && !stop) {
            const char *file = o->args[f];
            float *pcm = NULL;
            uint64_t count = 0;
            vkf_status st = vkf_audio_read(file, cfg.sample_rate, &pcm, &count, NULL);
            if (st != VKF_OK) {
                code = fail(st);
            } else {
                pr[f] = (progress){file, (double)count / cfg.sample_rate > 60.0};
                vkf_transcribe_options to;
                transcribe_options(o, &pr[f], &to);
                st = vkf_pool_submit_transcribe(pool, pcm, count, &to, &tickets[f]);
                vkf_audio_free(pcm);
                if (st == VKF_OK) pending[tail++] = f;
                else code = fail(st), stop = true; /* no device is left */
            }
        }
        /* collect the oldest while too many are ahead, and every one at the end */
        while (head < tail && (tail - head > ahead || f >= n || stop)) {
            int g = pending[head++];
            vkf_transcript *t = NULL;
            vkf_pool_batch info;
            vkf_status st = vkf_pool_collect_transcript(pool, tickets[g], &t, &info);
            if (st != VKF_OK) {
                /* no device left; an unknown language, a task the model lacks: the rest would fail alike
                 * (collected silently) */
                if (!stop) code = fail(st);
                if (pool_active(pool) == 0 || (st == VKF_ERROR_INVALID_ARGUMENT && (o->language || o->task))) stop = true;
                continue;
            }
            if (!stop) print_transcript(o, o->args[g], t, &cfg, info.run_ms, &devices[info.device], model);
            vkf_transcript_free(t);
        }
    }
    free(pr), free(tickets), free(pending), free(devices);
    return pool_close(pool, code, !stop);
}

static int run_transcribe(const options *o)
{
    if (o->n_args == 0) return cli_usage_error(o, "needs one or more sound files");
    if (o->task && strcmp(o->task, "transcribe") != 0 && strcmp(o->task, "translate") != 0)
        return cli_usage_error(o, "--task must be transcribe or translate");
    if (o->devices) return run_transcribe_pool(o);
    vkf_context *ctx = NULL;
    vkf_model *model = NULL;
    int code = open_model(o, &ctx, &model);
    if (code) return code;
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    if (strcmp(cfg.family, "whisper") != 0) {
        cli_error("%s is not a Whisper model (family %s): transcribe needs one", o->model, cfg.family);
        vkf_model_destroy(model);
        return close_context(ctx, EXIT_ERROR);
    }
    for (int f = 0; f < o->n_args; f++) {
        const char *file = o->args[f];
        float *pcm = NULL;
        uint64_t n = 0;
        vkf_status st = vkf_audio_read(file, cfg.sample_rate, &pcm, &n, NULL);
        if (st != VKF_OK) {
            fail(st);
            code = EXIT_ERROR;
            continue;
        }
        progress pr = {file, (double)n / cfg.sample_rate > 60.0};
        vkf_transcribe_options to;
        transcribe_options(o, &pr, &to);
        vkf_transcript *t = NULL;
        double t0 = now_ms();
        st = vkf_model_transcribe(model, pcm, n, &to, &t);
        double ms = now_ms() - t0;
        vkf_audio_free(pcm);
        if (st != VKF_OK) {
            int c = fail(st);
            if (st == VKF_ERROR_INVALID_ARGUMENT && (o->language || o->task)) {
                /* an unknown language, a task the model lacks: nothing else can succeed */
                vkf_model_destroy(model);
                return close_context(ctx, c);
            }
            code = c;
            continue;
        }
        vkf_device_info info;
        vkf_context_device_info(ctx, &info);
        print_transcript(o, file, t, &cfg, ms, &info, model);
        vkf_transcript_free(t);
    }
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

int cmd_transcribe(int argc, char **argv)
{
    static const cli_option table[] = {
        {"--model", CLI_STRING, CLI_OFF(model), 0, 0, "DIR", "a Hugging Face Whisper folder", NULL},
        {"--language", CLI_STRING, CLI_OFF(language), 0, 0, "CODE|NAME|auto",
         "the spoken language (en, german, ...); auto (default): the folder's, else detected", NULL},
        {"--task", CLI_STRING, CLI_OFF(task), 0, 0, "transcribe|translate",
         "transcribe, or translate to English (default: the folder's)", NULL},
        {"--timestamps", CLI_FLAG, CLI_OFF(timestamps), 0, 0, NULL,
         "segments with start and end times, one line each", NULL},
        {"--beam", CLI_COUNT, CLI_OFF(beam), 1, 16, "K", "beam search with K beams (default: generation_config's)",
         NULL},
        {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line per file: language, prompt, ids, segments, "
         "text, times (docs/json.md)", NULL},
        CLI_POOL_OPTIONS,
        CLI_MODEL_OPTIONS,
        CLI_COMMON_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {"transcribe",
                                    "--model DIR [--language en|auto] [--task transcribe|translate] [--timestamps] "
                                    "[--json] [--devices all|I,J,...] FILE...",
                                    "the text of sound files through a Whisper folder, as transformers' generate():\n"
                                    "audio past 30 s in windows, each starting at the last timestamp of the one before",
                                    table};
    options o = {0};
    int code = cli_parse(&cmd, argc, argv, &o);
    if (code < 0) code = check_model_options(&o);
    if (code < 0) code = check_pool_options(&o);
    return code >= 0 ? code : run_transcribe(&o);
}

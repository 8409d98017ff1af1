/* vkformer forward: the logits of every target position as a float32 .npy. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


/* Writes a float32 (rows, cols) array in NumPy's .npy format (version 1.0). */
static bool write_npy(const char *path, const float *data, uint64_t rows, uint64_t cols)
{
    char header[128];
    int len = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu, %llu), }",
                       (unsigned long long)rows, (unsigned long long)cols);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    bool to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "wb");
    if (!f) return false;
    unsigned short hlen = (unsigned short)(len + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)len, f) == (size_t)len;
    for (int i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && fwrite(data, sizeof *data, rows * cols, f) == rows * cols; /* little-endian hosts */
    if (to_stdout) return fflush(f) == 0 && !ferror(f) && ok;
    return (fclose(f) == 0) && ok;
}

static int run_forward(const options *o)
{
    if (!o->out && !o->json) return cli_usage_error(o, "needs --out FILE.npy (- : stdout), or --json");
    if (o->out && o->json && strcmp(o->out, "-") == 0)
        return cli_usage_error(o, "--json and --out - both write to stdout");
    if (!o->audio == !o->src) return cli_usage_error(o, "needs --src IDS or --audio FILE (one of them)");
    if (!o->tgt) return cli_usage_error(o, "needs --tgt IDS");
    int32_t *src = NULL, *tgt;
    long ns = o->audio ? 0 : parse_ids(o->src, "--src", &src);
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
    float *pcm = NULL;
    uint64_t samples = 0;
    vkf_status st = VKF_OK;
    if (o->audio && !cfg.audio_mels) {
        cli_error("%s reads text: --audio needs a model that reads audio (Whisper)", o->model);
        free(logits), free(tgt);
        vkf_model_destroy(model);
        return close_context(ctx, EXIT_USAGE);
    }
    if (!o->audio && cfg.audio_mels) {
        cli_error("%s reads audio: give --audio FILE instead of --src", o->model);
        free(logits), free(src), free(tgt);
        vkf_model_destroy(model);
        return close_context(ctx, EXIT_USAGE);
    }
    if (o->audio) {
        uint32_t file_rate = 0;
        st = vkf_audio_read(o->audio, cfg.sample_rate, &pcm, &samples, &file_rate);
        if (st == VKF_OK && o->verbose && samples > cfg.audio_samples)
            cli_error("note: %s is %.1f s long; forward reads its first %.1f s window", o->audio,
                      (double)samples / cfg.sample_rate, (double)cfg.audio_samples / cfg.sample_rate);
    }
    double t0 = now_s();
    if (st == VKF_OK && o->audio) {
        const float *pp = pcm;
        vkf_audio_batch a = {1, &pp, &samples};
        st = vkf_model_forward_audio(model, &a, &t, logits, n);
    } else if (st == VKF_OK) {
        st = vkf_model_forward(model, &s, &t, logits, n);
    }
    double ms = (now_s() - t0) * 1e3;
    vkf_audio_free(pcm);
    if (st != VKF_OK) code = fail(st);
    else if (o->out && !write_npy(o->out, logits, lt, cfg.tgt_vocab_size)) {
        cli_error("cannot write %s", strcmp(o->out, "-") == 0 ? "the logits to stdout" : o->out);
        code = EXIT_ERROR;
    }
    if (code == 0 && o->json) {
        /* the greedy choice at each position: argmax of its logits */
        vkf_device_info info;
        vkf_context_device_info(ctx, &info);
        jsonl_begin("forward");
        if (o->audio) {
            jsonl_string("audio", o->audio);
        } else {
            printf(",\"src\":");
            jsonl_ids(src, ls);
        }
        printf(",\"tgt\":");
        jsonl_ids(tgt, lt);
        printf(",\"argmax\":[");
        for (uint32_t r = 0; r < lt; r++) {
            const float *row = logits + (uint64_t)r * cfg.tgt_vocab_size;
            uint32_t best = 0;
            for (uint32_t c = 1; c < cfg.tgt_vocab_size; c++)
                if (row[c] > row[best]) best = c;
            printf("%s%u", r ? "," : "", best);
        }
        printf("]");
        jsonl_string("out", o->out);
        printf(",\"shape\":[%u,%u],\"forward_ms\":", lt, cfg.tgt_vocab_size);
        jsonl_number(ms, 6);
        jsonl_attention(o, model);
        printf(",\"activations\":\"%s\"", cfg.activations == VKF_DTYPE_F16 ? "f16" : "f32");
        jsonl_end(&info);
    }
    free(logits), free(src), free(tgt);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

int cmd_forward(int argc, char **argv)
{
    static const cli_option table[] = {
        CLI_MODEL_PATH,
        {"--src", CLI_STRING, CLI_OFF(src), 0, 0, "IDS", "source token ids, comma-separated (5,6,7)", NULL},
        {"--tgt", CLI_STRING, CLI_OFF(tgt), 0, 0, "IDS", "target token ids, bos first (1,8,9)", NULL},
        {"--audio", CLI_STRING, CLI_OFF(audio), 0, 0, "FILE", "the source is this sound file (models that read "
         "audio: Whisper; its first window)", NULL},
        {"--out", CLI_STRING, CLI_OFF(out), 0, 0, "FILE.npy", "where the logits go (- : stdout)", NULL},
        {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line: the ids, each position's argmax, the time, "
         "the attention (docs/json.md)", NULL},
        CLI_MODEL_OPTIONS,
        CLI_COMMON_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {"forward", "--model MODEL --src IDS --tgt IDS --out FILE.npy|- [--json] [options]\n"
                                    "--model MODEL --audio FILE --tgt IDS --out FILE.npy|- [--json] [options]",
                                    "the generator's logits for every target position: a float32 .npy of shape\n"
                                    "(len(tgt), tgt_vocab_size)", table};
    options o = {0};
    return cli_run_model_command(&cmd, argc, argv, &o, run_forward);
}

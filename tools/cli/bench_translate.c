/* vkformer bench translate: target tokens/s of beam search. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Translation throughput as translation engines report it: target tokens per
 * second of beam search over a batch of random sources, every source decoding
 * exactly max_new steps (min_new = max_new unless --min-new says otherwise),
 * wall clock around vkf_model_generate_with (encoder, every step, the host's
 * beam bookkeeping), after one untimed run that records the plans. The model's
 * generation defaults (a folder's generation_config) apply under the options. */
static int run_bench_translate(const options *o)
{
    if (!o->model) return cli_usage_error(o, "needs --model MODEL (e.g. a folder from tools/bench_translate.py)");
    if (o->input && (cli_given(o, "--batch") || cli_given(o, "--src-len")))
        return cli_usage_error(o, "takes --input FILE|- or --batch/--src-len, not both");
    vkf_context *ctx;
    vkf_model *model;
    int code = open_model(o, &ctx, &model);
    if (code) return code;
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    uint64_t model_bytes = 0, peak_bytes = 0; /* device memory: held after the load, and the most at once */
    vkf_context_memory_usage(ctx, NULL, &model_bytes);
    unsigned long B = o->batch, S = o->src_len, N = o->max_new, R = o->repeat;
    id_line *lines = NULL;
    long n_lines = 0;
    if (o->input) { /* the sources as id lists, one per line: the batch */
        n_lines = read_id_lines(o->input, &lines);
        if (n_lines <= 0) {
            if (n_lines == 0) cli_error("%s holds no id lists", input_name(o->input));
            vkf_model_destroy(model);
            return close_context(ctx, n_lines == 0 ? EXIT_USAGE : EXIT_ERROR);
        }
        B = (unsigned long)n_lines, S = 1;
    }
    if (B > 4096 && lines) {
        cli_error("bench translate: %s holds %lu id lists; a batch is at most 4096", input_name(o->input), B);
        free_id_lines(lines, n_lines);
        vkf_model_destroy(model);
        return close_context(ctx, EXIT_USAGE);
    }
    if (B > 4096 || S > cfg.max_len || N > cfg.max_len || (cli_given(o, "--min-new") && o->min_new > N)) {
        fprintf(stderr, "vkformer: bench translate: --batch is at most 4096, --src-len and --max-new at most max_len "
                "(%u), --min-new at most --max-new\n", cfg.max_len);
        vkf_model_destroy(model);
        return close_context(ctx, EXIT_USAGE);
    }
    decode_setup ds;
    int usage = decode_setup_make(o, model, false, &ds);
    if (usage >= 0) {
        free_id_lines(lines, n_lines);
        vkf_model_destroy(model);
        return close_context(ctx, usage);
    }
    vkf_generate_options g = ds.g; /* bench translate takes no list options: g points into the model only */
    decode_setup_free(&ds);
    g.max_new = (uint32_t)N;
    if (!cli_given(o, "--beam") && g.beams == 1) g.beams = 4; /* the model's num_beams where it has more */
    g.min_new = cli_given(o, "--min-new") ? (uint32_t)o->min_new : (uint32_t)N;
    g.n_best = 1;
    /* random sources: ids other than pad, eos and the decoder start, then eos */
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ o->seed;
    int32_t **ids = xmalloc(B * sizeof *ids);
    uint32_t *lens = xmalloc(B * sizeof *lens);
    for (unsigned long b = 0; lines && b < B; b++) {
        char where[512];
        snprintf(where, sizeof where, "%s line %lu", input_name(o->input), lines[b].number);
        long n = parse_ids(lines[b].text, where, &ids[b]);
        if (n < 0 || (unsigned long)n > cfg.max_len) {
            if (n >= 0) cli_error("%s: %ld ids, more than the model's %u positions (max_len)", where, n, cfg.max_len);
            free_id_lines(lines, n_lines);
            for (unsigned long j = 0; j < b + (n >= 0); j++) free(ids[j]);
            free(ids), free(lens);
            vkf_model_destroy(model);
            return close_context(ctx, EXIT_USAGE);
        }
        lens[b] = (uint32_t)n;
        if ((unsigned long)n > S) S = (unsigned long)n;
    }
    free_id_lines(lines, n_lines);
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
        vkf_context_peak_memory(ctx, &peak_bytes);
        if (o->json) {
            jsonl_begin("bench translate");
            printf(",\"bench\":\"translate\"");
            jsonl_string("model", o->model);
            printf(",\"d_model\":%u,\"layers\":[%u,%u],\"vocab\":%u,\"batch\":%lu,\"beams\":%u,\"src_len\":%lu,"
                   "\"max_new\":%lu,\"min_new\":%u,\"steps\":%llu,\"tokens_returned\":%llu,\"runs_ms\":[",
                   cfg.d_model, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.tgt_vocab_size, B, g.beams, S, N,
                   g.min_new, (unsigned long long)steps, (unsigned long long)tokens);
            for (unsigned long r = 1; r <= R; r++) printf("%s%.3f", r > 1 ? "," : "", ms[r]);
            printf("],\"median_ms\":%.3f,\"target_tokens_per_s\":%.2f,\"activations\":\"%s\"", med,
                   1e3 * target / med, cfg.activations == VKF_DTYPE_F16 ? "f16" : "f32");
            printf(",\"model_bytes\":%llu,\"peak_device_bytes\":%llu", (unsigned long long)model_bytes,
                   (unsigned long long)peak_bytes);
            jsonl_end(&info);
        } else {
            printf("translate: model %s (d_model %u, %u+%u layers, vocab %u, %s activations) on %s\n", o->model,
                   cfg.d_model, cfg.n_encoder_layers, cfg.n_decoder_layers, cfg.tgt_vocab_size,
                   cfg.activations == VKF_DTYPE_F16 ? "f16" : "f32", info.name);
            printf("  batch %lu, beam %u, source %lu tokens, %llu steps (min-new %u, max-new %lu)\n", B, g.beams, S,
                   (unsigned long long)steps, g.min_new, N);
            printf("  %.1f ms median of %lu runs (best %.1f): %.1f target tokens/s\n", med, R, best, 1e3 * target / med);
            printf("  device memory: model %.1f MiB, peak %.1f MiB\n", model_bytes / 1048576.0, peak_bytes / 1048576.0);
        }
    }
    for (unsigned long b = 0; b < B; b++) free(ids[b]);
    free(ids), free(lens), free(out), free(out_lens), free(ms);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}


int cmd_bench_translate(int argc, char **argv)
{
    static const cli_option table[] = {
        CLI_MODEL_PATH,
        {"--input", CLI_STRING, CLI_OFF(input), 0, 0, "FILE|-", "the sources as id lists, one per line (- : stdin): "
         "the batch", NULL},
        {"--batch", CLI_COUNT, CLI_OFF(batch), 1, 4096, "B", "random sources decoded together (default 32)", NULL},
        {"--src-len", CLI_COUNT, CLI_OFF(src_len), 1, CLI_U32, "S", "tokens per random source (default 32)", NULL},
        {"--repeat", CLI_COUNT, CLI_OFF(repeat), 1, 1000000, "R", "timed runs after a warm-up, the median reported "
         "(default 3)", NULL},
        {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line (docs/json.md)", NULL},
        CLI_DECODE_OPTIONS,
        CLI_MODEL_OPTIONS,
        CLI_COMMON_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {"bench translate", "--model MODEL [--batch 32] [--beam K] [--src-len 32] "
                                    "[--max-new 64] [--repeat 3] [options]\n--model MODEL --input FILE|- [options]",
                                    "target tokens/s of beam search (4 beams unless the model or --beam says "
                                    "otherwise; min-new =\nmax-new); tools/bench_translate.py: OPUS-MT shapes beside "
                                    "Transformers", table};
    options o = {.batch = 32, .src_len = 32, .max_new = 64, .repeat = 3, .length_penalty = 1.0, .temperature = 1.0,
                 .top_p = 1.0};
    int code = cli_parse(&cmd, argc, argv, &o);
    if (code < 0) code = cli_max_args(&o, 0);
    if (code < 0 && o.timing) code = cli_usage_error(&o, "--timing does not apply (the times are its output)");
    if (code < 0 && cli_given(&o, "--n-best")) code = cli_usage_error(&o, "--n-best does not apply (one hypothesis per source)");
    if (code < 0) code = check_model_options(&o);
    return code >= 0 ? code : run_bench_translate(&o);
}

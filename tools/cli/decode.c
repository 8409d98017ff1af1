/* vkformer generate and translate: decoding (greedy, beam search, sampling) of id lists
 * and of text. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BEAM_GIVEN(o) cli_given(o, "--beam")
#define SAMPLE(o) (cli_given(o, "--temperature") || cli_given(o, "--top-k") || cli_given(o, "--top-p"))

/* --timing: one line on stderr about the last generation. */
static void print_timing(const options *o, const vkf_model *model, uint32_t sources)
{
    vkf_generate_stats t;
    if (!o->timing || vkf_model_generate_stats(model, &t) != VKF_OK) return;
    fprintf(stderr, "timing: %u source%s, %llu tokens in %.1f ms (%u steps): %.1f tokens/s, first token after %.1f ms\n",
            sources, sources == 1 ? "" : "s", (unsigned long long)t.tokens, t.total_ms, t.steps,
            t.total_ms > 0 ? 1e3 * (double)t.tokens / t.total_ms : 0.0, t.first_token_ms);
}

static decode_json json_for(const options *o, vkf_context *ctx, vkf_model *model, const vkf_generate_options *g,
                            uint32_t max_new, uint32_t sources)
{
    decode_json d = {o, ctx, model, "greedy", 1, max_new, sources, {0}, NULL};
    if (g) {
        d.mode = g->sample ? "sample" : g->beams > 1 ? "beam" : "greedy";
        d.beams = g->beams ? g->beams : 1;
    }
    vkf_model_generate_stats(model, &d.stats);
    return d;
}

/* One record: source `index` (its ids src), its nb hypotheses (rows of out,
 * max_new apart; scores NULL: none), and for translate its text (and the expected
 * text of a scored line). text_buf holds decoded text (cap bytes). A blank line of
 * translate --input: src_len 0, nb 0 (no ids, translation ""). */
vkf_status print_decode_record(const decode_json *d, uint32_t index, const int32_t *src, uint32_t src_len,
                               const int32_t *out, const uint32_t *lens, const float *scores, uint32_t nb,
                               const char *text, bool translate, const char *expected, char *text_buf, size_t cap)
{
    const char *best = translate && nb == 0 ? "" : NULL;
    if (translate) { /* every hypothesis decodes before anything is printed: a failure leaves no half line */
        for (uint32_t h = nb; h-- > 0;) {
            vkf_status st = vkf_model_decode_text(d->model, out + (size_t)h * d->max_new, lens[h], text_buf, cap);
            if (st != VKF_OK) return st;
            if (h == 0) best = text_buf;
        }
    }
    jsonl_begin(translate ? "translate" : "generate");
    printf(",\"index\":%u", index);
    if (translate) jsonl_string("text", text);
    printf(",\"src\":");
    jsonl_ids(src, src_len);
    printf(",\"ids\":");
    jsonl_ids(out, nb ? lens[0] : 0);
    if (translate) {
        jsonl_string("translation", best);
        jsonl_string("expected", expected);
        printf(",\"match\":%s", !expected ? "null" : strcmp(best, expected) == 0 ? "true" : "false");
    }
    printf(",\"hypotheses\":[");
    for (uint32_t h = 0; h < nb; h++) {
        printf("%s{\"ids\":", h ? "," : "");
        jsonl_ids(out + (size_t)h * d->max_new, lens[h]);
        if (translate && h > 0) {
            if (vkf_model_decode_text(d->model, out + (size_t)h * d->max_new, lens[h], text_buf, cap) != VKF_OK)
                text_buf[0] = '\0'; /* decoded once already */
            jsonl_string("text", text_buf);
        } else if (translate) {
            jsonl_string("text", best);
        }
        printf(",\"score\":");
        jsonl_number(scores ? scores[h] : NAN, 7);
        printf("}");
    }
    printf("]");
    vkf_model_config cfg;
    vkf_model_get_config(d->model, &cfg);
    printf(",\"decoding\":\"%s\",\"beams\":%u,\"max_new\":%u", d->mode, d->beams, d->max_new);
    jsonl_attention(d->o, d->model);
    printf(",\"activations\":\"%s\"", cfg.activations == VKF_DTYPE_F16 ? "f16" : "f32");
    const vkf_generate_stats *t = &d->stats;
    printf(",\"timing\":{\"sources\":%u,\"tokens\":%llu,\"steps\":%u,\"total_ms\":", d->sources,
           (unsigned long long)t->tokens, t->steps);
    jsonl_number(t->total_ms, 6);
    printf(",\"first_token_ms\":");
    jsonl_number(t->first_token_ms, 6);
    printf(",\"tokens_per_s\":");
    jsonl_number(t->total_ms > 0 ? 1e3 * (double)t->tokens / t->total_ms : NAN, 6);
    printf(",\"plan_bytes\":%llu}", (unsigned long long)t->plan_bytes);
    vkf_device_info info;
    if (d->device) info = *d->device;
    else vkf_context_device_info(d->ctx, &info);
    jsonl_end(&info);
    return VKF_OK;
}

/* The decoding options: the model's defaults (a Hugging Face folder's
 * generation_config.json) under --beam, --length-penalty, --early-stopping,
 * --n-best, --min-new and the sampling options. */
vkf_generate_options beam_options(const options *o, const vkf_model *model, uint32_t max_new)
{
    vkf_generate_options g;
    if (vkf_model_generate_defaults(model, &g) != VKF_OK) vkf_generate_options_init(&g);
    g.max_new = max_new;
    if (cli_given(o, "--min-new")) g.min_new = (uint32_t)(o->min_new > UINT32_MAX ? UINT32_MAX : o->min_new);
    if (!cli_given(o, "--min-new") && g.min_new > max_new) g.min_new = max_new; /* the defaults' min under --max-new */
    if (BEAM_GIVEN(o)) g.beams = (uint32_t)(o->beam > UINT32_MAX ? UINT32_MAX : o->beam);
    if (cli_given(o, "--n-best")) g.n_best = (uint32_t)(o->n_best > UINT32_MAX ? UINT32_MAX : o->n_best);
    if (g.n_best > g.beams && !cli_given(o, "--n-best")) g.n_best = g.beams;
    if (cli_given(o, "--length-penalty")) g.length_penalty = (float)o->length_penalty;
    if (o->target_lang) vkf_model_set_target_language(model, o->target_lang, &g); /* checked by check_languages */
    if (o->early_stopping) g.early_stopping = true;
    if (SAMPLE(o)) {
        if (!BEAM_GIVEN(o)) g.beams = 1, g.n_best = 1;
        g.sample = true;
        g.temperature = (float)o->temperature;
        g.top_k = (uint32_t)(o->top_k > UINT32_MAX ? UINT32_MAX : o->top_k);
        g.top_p = (float)o->top_p;
        g.seed = o->seed;
    }
    return g;
}

/* --max-new, or the model's default (a Hugging Face folder's generation_config:
 * max_length - 1 or max_new_tokens), else max_len. */
uint32_t default_max_new(const options *o, const vkf_model *model, const vkf_model_config *cfg)
{
    if (o->max_new) return (uint32_t)o->max_new;
    vkf_generate_options g;
    if (vkf_model_generate_defaults(model, &g) == VKF_OK && g.max_new) return g.max_new;
    return cfg->max_len;
}

/* Whether decoding goes through vkf_model_generate_with: beam search, sampling,
 * a target language, or a model whose defaults (generation_config) are not
 * plain greedy decoding. */
bool use_generate_with(const options *o, const vkf_model *model)
{
    vkf_generate_options g, plain;
    vkf_generate_options_init(&plain);
    if (vkf_model_generate_defaults(model, &g) != VKF_OK) return true;
    bool defaults = g.beams != plain.beams || g.max_new != plain.max_new || g.min_new != plain.min_new ||
                    g.length_penalty != plain.length_penalty || g.early_stopping != plain.early_stopping ||
                    g.n_best != plain.n_best || g.forced_eos != plain.forced_eos || g.renormalize != plain.renormalize ||
                    g.forced_bos != plain.forced_bos;
    return BEAM_GIVEN(o) || SAMPLE(o) || o->target_lang || defaults;
}

/* --source-lang and --target-lang name codes the model knows, and (translate) a
 * model that needs a target language gets one: else a usage error listing a few codes. */
int check_languages(const options *o, const vkf_model *model, bool require_target)
{
    if (o->source_lang) {
        bool known = false;
        uint32_t n = 0;
        char codes[200] = "";
        for (const char *c; (c = vkf_model_language(model, n)); n++) {
            known |= strcmp(c, o->source_lang) == 0;
            if (n < 6) snprintf(codes + strlen(codes), sizeof codes - strlen(codes), "%s%s", n ? ", " : "", c);
        }
        if (n == 0) return cli_usage_error(o, "--source-lang: the model has no language codes");
        if (!known)
            return cli_usage_error(o, "--source-lang: unknown code \"%s\"; the model's codes: %s%s (%u codes)",
                                   o->source_lang, codes, n > 6 ? ", ..." : "", n);
    }
    vkf_generate_options g;
    vkf_generate_options_init(&g);
    if ((o->target_lang || require_target) && vkf_model_set_target_language(model, o->target_lang, &g) != VKF_OK)
        return cli_usage_error(o, "%s%s", o->target_lang ? "--target-lang: " : "", vkf_last_error());
    return -1;
}

/* Beam search of src: the best hypothesis as a line of ids (or text); with
 * --n-best N > 1, N lines "ids<TAB>score", best first. */
static int beam_and_print(const options *o, vkf_context *ctx, vkf_model *model, const vkf_sequences *s,
                          uint32_t max_new, bool as_text, const char *input_text)
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
    if (code == 0 && o->json) {
        decode_json d = json_for(o, ctx, model, &g, max_new, s->count);
        for (uint32_t i = 0; code == 0 && i < s->count; i++) {
            st = print_decode_record(&d, i, s->ids[i], s->lengths[i], out + (size_t)i * nb * max_new, lens + i * nb,
                                     scores + i * nb, nb, input_text, as_text, NULL, text, cap);
            if (st != VKF_OK) code = fail(st);
        }
    }
    for (uint32_t h = 0; code == 0 && !o->json && h < s->count * nb; h++) {
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
                              bool as_text, const char *input_text)
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
    if (use_generate_with(o, model)) return beam_and_print(o, ctx, model, &s, max_new, as_text, input_text);
    int32_t *out = xmalloc((size_t)max_new * sizeof *out);
    uint32_t out_len = 0;
    vkf_status st = vkf_model_generate(model, &s, max_new, out, &out_len);
    int code = 0;
    if (st != VKF_OK) code = fail(st);
    else print_timing(o, model, 1);
    if (code) {
    } else if (o->json) {
        size_t cap = 64 + (size_t)max_new * 64;
        char *text = xmalloc(cap);
        decode_json d = json_for(o, ctx, model, NULL, max_new, 1);
        st = print_decode_record(&d, 0, src, len, out, &out_len, NULL, 1, input_text, as_text, NULL, text, cap);
        if (st != VKF_OK) code = fail(st);
        free(text);
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

/* A source of generate as messages name it: "stdin line 3", "--src 2". */
static const char *source_name(const options *o, unsigned long number, char *buf, size_t cap)
{
    if (o->input) snprintf(buf, cap, "%s line %lu", input_name(o->input), number);
    else snprintf(buf, cap, "--src %lu", number);
    return buf;
}

/* generate: every source (--src repeated, or --input FILE|-: one id list per line)
 * decoded as one batch; one line of ids per source (per hypothesis with --n-best).
 * Each source ends with eos, as translate's text does: eos_id is appended unless
 * the list already ends with it (--raw-ids: the lists exactly as given). */
static int run_generate(const options *o)
{
    id_line *lines = NULL;
    long count = 0;
    if (o->input && o->n_srcs) {
        return cli_usage_error(o, "takes --src or --input (or -), not both");
    }
    if (o->input) {
        count = read_id_lines(o->input, &lines);
        if (count < 0) return EXIT_ERROR;
        if (count == 0) {
            cli_error("%s holds no id lists", input_name(o->input));
            return EXIT_USAGE;
        }
        if (count > UINT32_MAX) {
            cli_error("%s holds %ld id lists, more than one batch can hold", input_name(o->input), count);
            free_id_lines(lines, count);
            return EXIT_ERROR;
        }
    } else if (o->n_srcs == 0) {
        return cli_usage_error(o, "needs --src IDS (repeatable) or --input FILE|-");
    }
    uint32_t n = o->input ? (uint32_t)count : o->n_srcs;
    int32_t **ids = xmalloc(n * sizeof *ids);
    uint32_t *lens = xmalloc(n * sizeof *lens);
    unsigned long *numbers = xmalloc(n * sizeof *numbers); /* each source's line, or its --src */
    char where[512];                                        /* a source as messages name it */
    int code = 0;
    for (uint32_t i = 0; i < n; i++) {
        numbers[i] = o->input ? lines[i].number : i + 1;
        source_name(o, numbers[i], where, sizeof where);
        long ns = parse_ids(o->input ? lines[i].text : o->srcs[i], where, &ids[i]);
        if (ns < 0 || ns > UINT32_MAX - 1) {
            if (ns >= 0) cli_error("%s: %ld ids", where, ns), free(ids[i]);
            for (uint32_t j = 0; j < i; j++) free(ids[j]);
            code = EXIT_USAGE;
            n = 0;
            break;
        }
        lens[i] = (uint32_t)ns;
    }
    free_id_lines(lines, count);
    if (code == 0 && o->devices) { /* a device pool: tools/cli/pool.c */
        code = pool_generate(o, ids, lens, numbers, n);
        for (uint32_t i = 0; i < n; i++) free(ids[i]);
        free(ids), free(lens), free(numbers);
        return code;
    }
    vkf_context *ctx = NULL;
    vkf_model *model = NULL;
    if (code == 0) code = open_model(o, &ctx, &model);
    if (code == 0) {
        int usage = check_languages(o, model, false);
        if (usage >= 0) {
            vkf_model_destroy(model);
            code = close_context(ctx, usage);
            model = NULL;
        }
    }
    vkf_model_config cfg;
    if (code == 0 && model) {
        vkf_model_get_config(model, &cfg);
        for (uint32_t i = 0; !o->raw_ids && i < n; i++) /* end each source with eos, as translate does */
            if (lens[i] == 0 || ids[i][lens[i] - 1] != cfg.eos_id) {
                ids[i] = realloc(ids[i], (lens[i] + 1) * sizeof **ids);
                if (!ids[i]) {
                    cli_error("out of host memory");
                    exit(EXIT_ERROR);
                }
                ids[i][lens[i]++] = cfg.eos_id;
            }
        /* the library refuses them too, by their index in the batch; this names the line */
        for (uint32_t i = 0; code == 0 && i < n; i++)
            if (lens[i] > cfg.max_len) {
                cli_error("%s: %u ids%s, more than the model's %u positions (max_len)",
                          source_name(o, numbers[i], where, sizeof where), lens[i], o->raw_ids ? "" : " with eos",
                          cfg.max_len);
                vkf_model_destroy(model);
                code = close_context(ctx, EXIT_ERROR);
                model = NULL;
            }
        if (code == 0 && o->max_new > cfg.max_len) {
            fprintf(stderr, "vkformer: --max-new %lu exceeds the model's max_len %u\n", o->max_new, cfg.max_len);
            vkf_model_destroy(model);
            code = close_context(ctx, EXIT_USAGE);
            model = NULL;
        }
    }
    if (code == 0 && model) {
        uint32_t max_new = default_max_new(o, model, &cfg);
        vkf_sequences s = {n, (const int32_t *const *)ids, lens};
        if (use_generate_with(o, model)) {
            code = beam_and_print(o, ctx, model, &s, max_new, false, NULL);
        } else {
            int32_t *out = xmalloc((size_t)n * max_new * sizeof *out);
            uint32_t *out_lens = xmalloc(n * sizeof *out_lens);
            vkf_status st = vkf_model_generate(model, &s, max_new, out, out_lens);
            if (st != VKF_OK) code = fail(st);
            if (code == 0 && o->json) {
                decode_json d = json_for(o, ctx, model, NULL, max_new, n);
                for (uint32_t b = 0; code == 0 && b < n; b++) {
                    st = print_decode_record(&d, b, ids[b], lens[b], out + (size_t)b * max_new, &out_lens[b], NULL, 1,
                                             NULL, false, NULL, NULL, 0);
                    if (st != VKF_OK) code = fail(st);
                }
            }
            for (uint32_t b = 0; code == 0 && !o->json && b < n; b++) {
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
    free(ids), free(lens), free(numbers);
    return code;
}

/* One line of translate --input, from reading to printing. */
typedef struct tr_line {
    char *text;                         /* owned: the text (before a TAB); the whole line where it failed */
    size_t len;                         /* of text, which may hold NUL bytes where it failed */
    char *expected;                     /* owned, or NULL: the text after the first TAB */
    char *error;                        /* owned, or NULL: why the line is not translated (printed) */
    int32_t source;                     /* its row among the batch's sources; -1: blank or failed */
} tr_line;

static char *copy_bytes(const char *s, size_t len)
{
    char *c = xmalloc(len + 1);
    memcpy(c, s, len);
    c[len] = '\0';
    return c;
}

/* A line that will not be translated: one line on stderr now, an empty line (or
 * an error record) in its place later. */
static void line_failed(tr_line *l, const line_reader *r, const char *why)
{
    char message[1024];
    snprintf(message, sizeof message, "line %lu: %s", r->number, why);
    cli_error("%s %s", r->name, message);
    l->error = copy_bytes(message, strlen(message));
    l->source = -1;
}

/* --json: the record of a line that was not translated (docs/json.md). */
static void print_error_record(vkf_context *ctx, uint32_t index, const tr_line *l)
{
    jsonl_begin("translate");
    printf(",\"record\":\"error\",\"index\":%u,\"text\":", index);
    print_json_bytes(l->text, l->len);
    jsonl_string("error", l->error);
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    jsonl_end(&info);
}

/* Translates every line of a file, `batch` lines per generate call; lines with a
 * TAB carry the expected output and are scored by exact match. Every line gives
 * one line of output: a blank line an empty one, and a line that cannot be
 * translated (a NUL byte, invalid UTF-8, a word the model does not know, too
 * many tokens) an empty one too (with --json: an error record), after one line
 * on stderr naming it; the others still translate, and the exit status is 1. */
static int translate_file(const options *o)
{
    line_reader r;
    if (!lines_open(&r, o->input)) return EXIT_ERROR;
    vkf_context *ctx;
    vkf_model *model;
    int code = open_model(o, &ctx, &model);
    if (code) {
        lines_close(&r);
        return code;
    }
    int usage = check_languages(o, model, true);
    if (usage >= 0) {
        lines_close(&r);
        vkf_model_destroy(model);
        return close_context(ctx, usage);
    }
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    uint32_t B = o->batch ? (uint32_t)o->batch : 64, max_new = default_max_new(o, model, &cfg);
    if (max_new > cfg.max_len || B > 4096) {
        fprintf(stderr, "vkformer: --max-new must be at most max_len (%u) and --batch at most 4096\n", cfg.max_len);
        lines_close(&r);
        vkf_model_destroy(model);
        return close_context(ctx, EXIT_USAGE);
    }
    tr_line *lines = xmalloc(B * sizeof *lines);
    float *scores = xmalloc(B * sizeof *scores);
    uint32_t done = 0; /* lines read before this batch */
    int32_t *ids = xmalloc((size_t)B * (cfg.max_len + 1) * sizeof *ids), *out = xmalloc((size_t)B * max_new * sizeof *out);
    const int32_t **ptrs = xmalloc(B * sizeof *ptrs);
    uint32_t *lens = xmalloc(B * sizeof *lens), *out_lens = xmalloc(B * sizeof *out_lens);
    size_t cap = (size_t)max_new * 64 + 64;
    char *text = xmalloc(cap);
    unsigned long scored = 0, correct = 0, failed = 0;
    vkf_generate_stats total = {0};
    uint32_t sources = 0;
    vkf_status st = VKF_OK;
    bool more = true;
    while (st == VKF_OK && more) {
        uint32_t n = 0, ns = 0; /* lines, and sources among them */
        char *line;
        size_t len;
        while (n < B && (more = lines_next(&r, &line, &len))) {
            tr_line *l = &lines[n++];
            *l = (tr_line){NULL, 0, NULL, NULL, -1};
            char why[128];
            if (!text_check(line, len, why, sizeof why)) {
                l->text = copy_bytes(line, len), l->len = len;
                line_failed(l, &r, why);
                failed++;
                continue;
            }
            char *tab = strchr(line, '\t');
            l->len = tab ? (size_t)(tab - line) : len;
            l->text = copy_bytes(line, l->len);
            l->expected = tab ? copy_bytes(tab + 1, len - l->len - 1) : NULL;
            if (strspn(l->text, " \t\r\v\f") == l->len) continue; /* blank: an empty line */
            int32_t *row = ids + (size_t)ns * (cfg.max_len + 1);
            if (vkf_model_encode_text_with(model, l->text, o->source_lang, o->target_lang, row, cfg.max_len, &lens[ns]) !=
                VKF_OK) {
                line_failed(l, &r, vkf_last_error());
                failed++;
                continue;
            }
            l->source = (int32_t)ns;
            ptrs[ns++] = row;
        }
        if (n == 0) break;
        vkf_generate_options g = beam_options(o, model, max_new);
        g.n_best = 1;
        if (ns > 0) {
            vkf_sequences s = {ns, ptrs, lens};
            if (use_generate_with(o, model)) st = vkf_model_generate_with(model, &s, &g, out, out_lens, scores);
            else st = vkf_model_generate(model, &s, max_new, out, out_lens);
            vkf_generate_stats t;
            if (st == VKF_OK && vkf_model_generate_stats(model, &t) == VKF_OK) {
                if (sources == 0) total.first_token_ms = t.first_token_ms;
                total.total_ms += t.total_ms, total.steps += t.steps, total.tokens += t.tokens;
                sources += ns;
            }
        }
        decode_json d = {0};
        if (st == VKF_OK && o->json) {
            d = json_for(o, ctx, model, use_generate_with(o, model) ? &g : NULL, max_new, ns);
            if (ns == 0) d.stats = (vkf_generate_stats){0}; /* no generate call in this batch */
        }
        for (uint32_t i = 0; i < n; i++) {
            tr_line *l = &lines[i];
            int32_t b = l->source;
            const char *result = ""; /* a blank or failed line's */
            if (st == VKF_OK && l->error) {
                if (o->json) print_error_record(ctx, done + i, l);
                else printf("\n");
            } else if (st == VKF_OK && o->json) {
                uint32_t none = 0;
                st = print_decode_record(&d, done + i, b >= 0 ? ptrs[b] : NULL, b >= 0 ? lens[b] : 0,
                                         b >= 0 ? out + (size_t)b * max_new : NULL, b >= 0 ? &out_lens[b] : &none,
                                         b >= 0 && use_generate_with(o, model) ? &scores[b] : NULL, b >= 0 ? 1 : 0,
                                         l->text, true, l->expected, text, cap);
                result = b >= 0 ? text : "";
            } else if (st == VKF_OK && b >= 0) {
                st = vkf_model_decode_text(model, out + (size_t)b * max_new, out_lens[b], text, cap);
                if (st == VKF_OK) printf("%s\n", text);
                result = text;
            } else if (st == VKF_OK) {
                printf("\n");
            }
            if (st == VKF_OK && l->expected) scored++, correct += !l->error && strcmp(result, l->expected) == 0;
            free(l->text), free(l->expected), free(l->error);
        }
        done += n;
        if (st != VKF_OK) code = fail(st);
    }
    if (r.failed && code == 0) code = EXIT_ERROR;
    if (code == 0 && scored && !o->json) /* JSON: each record's "match" */
        printf("accuracy: %lu of %lu (%.2f%%) exact matches\n", correct, scored, 100.0 * correct / scored);
    if (code == 0 && o->timing)
        fprintf(stderr, "timing: %u sources in batches of %u, %llu tokens in %.1f ms (%u steps): %.1f tokens/s, first "
                "token after %.1f ms\n", sources, B, (unsigned long long)total.tokens, total.total_ms, total.steps,
                total.total_ms > 0 ? 1e3 * (double)total.tokens / total.total_ms : 0.0, total.first_token_ms);
    if (code == 0 && failed) {
        cli_error("%lu of %u lines of %s were not translated (each named above; an empty line stands for it)", failed,
                  done, r.name);
        code = EXIT_ERROR;
    }
    fflush(stdout);
    lines_close(&r);
    free(lines), free(scores), free(ids), free(out), free(ptrs), free(lens), free(out_lens), free(text);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

/* translate: TEXT, or --input FILE|- (one text per line). */
static int run_translate(const options *o, const char *text)
{
    if (o->input) {
        if (text) return cli_usage_error(o, "takes TEXT or --input FILE|- (or -), not both");
        return o->devices ? pool_translate_file(o) : translate_file(o);
    }
    if (o->devices) return cli_usage_error(o, "--devices spreads the batches of --input FILE|- over devices; one TEXT "
                                           "runs on one device (--device)");
    if (!text) return cli_usage_error(o, "needs the text to translate (TEXT, --input FILE or - : stdin)");
    if (cli_given(o, "--batch")) return cli_usage_error(o, "--batch applies to --input only");
    char why[128];
    if (!text_check(text, strlen(text), why, sizeof why)) {
        cli_error("translate: TEXT: %s", why);
        return EXIT_ERROR;
    }
    vkf_context *ctx;
    vkf_model *model;
    int code = open_model(o, &ctx, &model);
    if (code) return code;
    int usage = check_languages(o, model, true);
    if (usage >= 0) {
        vkf_model_destroy(model);
        return close_context(ctx, usage);
    }
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    int32_t *ids = xmalloc(((size_t)cfg.max_len + 1) * sizeof *ids);
    uint32_t n = 0;
    vkf_status st = vkf_model_encode_text_with(model, text, o->source_lang, o->target_lang, ids, cfg.max_len, &n);
    if (st != VKF_OK) {
        code = fail(st);
        vkf_model_destroy(model);
        free(ids);
        return close_context(ctx, code == EXIT_ERROR ? EXIT_ERROR : code);
    }
    code = generate_and_print(o, ctx, model, ids, n, true, text);
    free(ids);
    return code;
}



/* Options of generate and translate beside their own. */
#define DECODE_COMMAND_OPTIONS                                                                                       \
    CLI_MODEL_PATH,                                                                                                \
    {"--input", CLI_STRING, CLI_OFF(input), 0, 0, "FILE|-", "one source per line (- : stdin)", NULL},              \
    {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line per source: ids, text, timings, attention "        \
     "(docs/json.md)", NULL},                                                                                        \
    CLI_DECODE_OPTIONS, CLI_POOL_OPTIONS, CLI_MODEL_OPTIONS, CLI_COMMON_OPTIONS

static void decode_defaults(options *o)
{
    o->length_penalty = 1.0, o->temperature = 1.0, o->top_p = 1.0;
}

int cmd_generate(int argc, char **argv)
{
    static const cli_option table[] = {
        {"--src", CLI_REPEAT, CLI_OFF(src), 0, 0, "IDS", "a source's token ids, comma-separated; repeatable (a batch)",
         NULL},
        {"--raw-ids", CLI_FLAG, CLI_OFF(raw_ids), 0, 0, NULL, "the ids exactly as given (no eos appended)", NULL},
        {"--batch", CLI_COUNT, CLI_OFF(batch), 1, 4096, "B", "with --devices: sources per batch (default 64)", NULL},
        {"--target-lang", CLI_STRING, CLI_OFF(target_lang), 0, 0, "L", "the target language (forced as the first "
         "generated token)", NULL},
        DECODE_COMMAND_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {
        "generate", "--model MODEL --src IDS [--src IDS ...] [options]\n--model MODEL --input FILE|- [options]\n"
        "--model MODEL - [options]",
        "decodes every source as one batch (greedy; beam search with --beam, sampling with --temperature,\n"
        "--top-k, --top-p) and prints a line of ids per source, without bos and eos; eos_id is appended\n"
        "to each source unless it ends with it (--raw-ids: as given); - reads the sources from stdin", table};
    options o = {0};
    decode_defaults(&o);
    int code = cli_parse(&cmd, argc, argv, &o);
    if (code < 0 && o.n_args >= 1 && strcmp(o.args[0], "-") == 0) {
        if (o.input) code = cli_usage_error(&o, "takes --input or -, not both");
        else o.input = "-";
        if (code < 0) code = cli_max_args(&o, 1);
    } else if (code < 0) {
        code = cli_max_args(&o, 0);
    }
    if (code < 0 && o.batch && !o.devices) code = cli_usage_error(&o, "--batch applies with --devices only");
    if (code < 0) code = check_pool_options(&o);
    if (code < 0) code = check_model_options(&o);
    return code >= 0 ? code : run_generate(&o);
}

int cmd_translate(int argc, char **argv)
{
    static const cli_option table[] = {
        {"--batch", CLI_COUNT, CLI_OFF(batch), 1, 4096, "B", "with --input: lines decoded together (default 64)", NULL},
        {"--source-lang", CLI_STRING, CLI_OFF(source_lang), 0, 0, "L", "the source language as the tokenizer names it "
         "(eng_Latn, en, en_XX); default: the tokenizer's", NULL},
        {"--target-lang", CLI_STRING, CLI_OFF(target_lang), 0, 0, "L", "the target language (forced as the first "
         "token, or Marian's >>L<< in the source)", NULL},
        DECODE_COMMAND_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {
        "translate", "--model MODEL TEXT [options]\n--model MODEL --input FILE|- [--batch B] [options]\n"
        "--model MODEL - [--batch B] [options]",
        "decodes text (models with vocabularies or a Marian folder's tokenizers); quote TEXT as one\n"
        "argument. --input (or -: stdin) translates one text per line, B at a time; lines\n"
        "\"text<TAB>expected\" are scored, the accuracy printed at the end", table};
    options o = {0};
    decode_defaults(&o);
    int code = cli_parse(&cmd, argc, argv, &o);
    const char *text = o.n_args ? o.args[0] : NULL;
    if (code < 0 && o.n_args > 1) {
        /* never translate "forty" of `translate forty two` */
        char joined[256] = "";
        for (int i = 0; i < o.n_args; i++)
            snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s", i ? " " : "", o.args[i]);
        code = cli_usage_error(&o, "takes one TEXT argument, not %d (%s is extra); quote it: %s", o.n_args,
                               quoted(o.args[1]), quoted(joined));
    }
    if (code < 0 && text && strcmp(text, "-") == 0) {
        if (o.input) code = cli_usage_error(&o, "takes --input or -, not both");
        o.input = "-", text = NULL;
    }
    if (code < 0) code = check_pool_options(&o);
    if (code < 0) code = check_model_options(&o);
    return code >= 0 ? code : run_translate(&o, text);
}

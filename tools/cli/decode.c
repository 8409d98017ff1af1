/* vkformer generate and translate: decoding (greedy, beam search, sampling, with
 * the logits processors and target prefixes of decode_options.c) of id lists
 * and of text; --stream prints the output as it grows; translate --input
 * translates a file in input-order batches, or sorted by length in batches of
 * a token budget (--max-batch-tokens), one output line per input line. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --timing: one line on stderr about the last generation. */
static void print_timing(const options *o, const vkf_model *model, uint32_t sources)
{
    vkf_generate_stats t;
    if (!o->timing || vkf_model_generate_stats(model, &t) != VKF_OK) return;
    fprintf(stderr, "timing: %u source%s, %llu tokens in %.1f ms (%u steps): %.1f tokens/s, first token after %.1f ms\n",
            sources, sources == 1 ? "" : "s", (unsigned long long)t.tokens, t.total_ms, t.steps,
            t.total_ms > 0 ? 1e3 * (double)t.tokens / t.total_ms : 0.0, t.first_token_ms);
}

static decode_json json_for(const options *o, vkf_context *ctx, vkf_model *model, const decode_setup *s,
                            uint32_t sources)
{
    decode_json d = {o, ctx, model, "greedy", 1, s->max_new, sources, s->n_prefix + s->max_new, {0}, NULL, -1};
    if (s->with) {
        d.mode = s->g.sample ? "sample" : s->g.beams > 1 ? "beam" : "greedy";
        d.beams = s->g.beams ? s->g.beams : 1;
    }
    vkf_model_generate_stats(model, &d.stats);
    return d;
}

/* ------------------------------------------------------------------ generation of one batch */

/* The outputs of one generation call, the target prefix put before each hypothesis. */
typedef struct decoded {
    uint32_t count, nb, stride;         /* sources, hypotheses each, ids per row of ids */
    int32_t *ids;                       /* (count, nb, stride) owned: prefix + generated ids */
    uint32_t *lens;                     /* (count, nb) owned */
    float *scores;                      /* (count, nb) owned; NULL: none (plain greedy) */
} decoded;

static void decoded_free(decoded *r)
{
    free(r->ids), free(r->lens), free(r->scores);
    memset(r, 0, sizeof *r);
}

/* The library's outputs (rows max_new apart, without the prefix) as prefix + ids. */
static void decoded_fill(decoded *r, const decode_setup *s, const int32_t *out, const uint32_t *lens)
{
    for (size_t h = 0; h < (size_t)r->count * r->nb; h++) {
        int32_t *row = r->ids + h * r->stride;
        if (s->n_prefix) memcpy(row, s->prefix, s->n_prefix * sizeof *row);
        memcpy(row + s->n_prefix, out + h * s->max_new, lens[h] * sizeof *row);
        r->lens[h] = s->n_prefix + lens[h];
    }
}

/* Streaming (--stream): the output printed as it grows. Text: each step the
 * whole target decoded again and whatever it adds to what was printed printed
 * (an incomplete character at the end, U+FFFD, held back); ids: each new id. */
typedef struct stream_state {
    vkf_model *model;
    bool as_text;
    int32_t lead;                       /* ids: a forced first token left unprinted (forced_lead), or -1 */
    uint32_t shown;                     /* ids: how many were printed */
    int32_t *ids;                       /* (cap) the prefix and the ids so far */
    uint32_t n, cap;
    char *printed;                      /* what was printed (text) */
    size_t printed_len;
    char *buf;                          /* decoded text */
    size_t buf_cap;
} stream_state;

/* Prints what the text of the ids so far (final: the final text) adds to what
 * was printed; returns false where it does not continue what was printed. */
static bool stream_text(stream_state *s, const char *text, bool final)
{
    size_t len = strlen(text);
    if (len < s->printed_len || memcmp(text, s->printed, s->printed_len) != 0) return false;
    size_t upto = len;
    if (!final && upto >= s->printed_len + 3 && memcmp(text + upto - 3, "\xef\xbf\xbd", 3) == 0) upto -= 3;
    fwrite(text + s->printed_len, 1, upto - s->printed_len, stdout);
    fflush(stdout);
    memcpy(s->printed + s->printed_len, text + s->printed_len, upto - s->printed_len);
    s->printed_len = upto;
    return true;
}

static bool on_stream(void *user, uint32_t source, const int32_t *ids, uint32_t count)
{
    (void)source;
    stream_state *s = user;
    for (uint32_t i = 0; i < count && s->n < s->cap; i++) {
        if (!s->as_text && !(s->n == 0 && ids[i] == s->lead)) printf("%s%d", s->shown++ ? "," : "", ids[i]);
        s->ids[s->n++] = ids[i];
    }
    if (!s->as_text) {
        fflush(stdout);
    } else if (vkf_model_decode_text(s->model, s->ids, s->n, s->buf, s->buf_cap) == VKF_OK) {
        stream_text(s, s->buf, false); /* what no longer continues the printed text waits for the end */
    }
    return true;
}

/* Decodes s (generate's sources, or translate's one text) and prints each
 * source's output: a line of ids (or text), n-best lines "ids<TAB>score", or
 * JSON records; --stream prints one source's output as it grows. */
static int decode_and_print(const options *o, vkf_context *ctx, vkf_model *model, const decode_setup *ds,
                            const vkf_sequences *s, bool as_text, const char *input_text)
{
    uint32_t nb = ds->with ? ds->g.n_best : 1, max_new = ds->max_new;
    int32_t *out = xmalloc((size_t)s->count * nb * max_new * sizeof *out);
    uint32_t *lens = xmalloc((size_t)s->count * nb * sizeof *lens);
    decoded r = {s->count, nb, ds->n_prefix + max_new, NULL, NULL, NULL};
    r.ids = xmalloc((size_t)s->count * nb * r.stride * sizeof *r.ids);
    r.lens = xmalloc((size_t)s->count * nb * sizeof *r.lens);
    r.scores = ds->with ? xmalloc((size_t)s->count * nb * sizeof *r.scores) : NULL;
    size_t cap = 64 + ((size_t)ds->n_prefix + max_new) * 64;
    char *text = xmalloc(cap);
    int32_t lead = as_text ? -1 : forced_lead(model, ds);
    stream_state ss = {model, as_text, lead, 0, NULL, 0, ds->n_prefix + max_new, NULL, 0, NULL, cap};
    vkf_generate_options g = ds->g;
    bool stream = o->stream && (g.sample || g.beams == 1);
    if (o->stream && !stream)
        cli_error("--stream: beam search settles its hypotheses only at the end; the output follows then");
    if (stream) {
        ss.ids = xmalloc(ss.cap * sizeof *ss.ids);
        ss.printed = xmalloc(cap);
        ss.buf = text;
        if (ds->n_prefix) memcpy(ss.ids, ds->prefix, ds->n_prefix * sizeof *ss.ids);
        ss.n = ds->n_prefix;
        for (uint32_t i = as_text ? ds->n_prefix : lead_of(lead, ds->prefix, ds->n_prefix); i < ds->n_prefix; i++)
            printf("%s%d", ss.shown++ ? "," : "", ds->prefix[i]);
        if (as_text && ds->n_prefix && vkf_model_decode_text(model, ss.ids, ss.n, text, cap) == VKF_OK)
            stream_text(&ss, text, false);
        g.on_tokens = on_stream, g.on_tokens_user = &ss;
    }
    vkf_status st = ds->with ? vkf_model_generate_with(model, s, &g, out, lens, r.scores)
                             : vkf_model_generate(model, s, max_new, out, lens);
    int code = st == VKF_OK ? 0 : fail(st);
    if (code == 0) {
        decoded_fill(&r, ds, out, lens);
        print_timing(o, model, s->count);
    }
    if (code == 0 && stream) {
        /* the rest of the output; the text printed so far is a beginning of it */
        if (!as_text) {
            for (uint32_t i = ss.n; i < r.lens[0]; i++)
                if (i > 0 || r.ids[i] != lead) printf("%s%d", ss.shown++ ? "," : "", r.ids[i]);
        } else if ((st = vkf_model_decode_text(model, r.ids, r.lens[0], text, cap)) != VKF_OK) {
            code = fail(st);
        } else if (!stream_text(&ss, text, true)) {
            printf("\n%s", text);
            cli_error("--stream: the final text does not continue the text printed (printed again in full)");
        }
        printf("\n");
    } else if (code == 0 && o->json) {
        decode_json d = json_for(o, ctx, model, ds, s->count);
        d.lead = lead;
        for (uint32_t i = 0; code == 0 && i < s->count; i++) {
            st = print_decode_record(&d, i, s->ids[i], s->lengths[i], r.ids + (size_t)i * nb * r.stride,
                                     r.lens + i * nb, r.scores ? r.scores + i * nb : NULL, nb, input_text, as_text, NULL,
                                     text, cap);
            if (st != VKF_OK) code = fail(st);
        }
    } else {
        for (uint32_t h = 0; code == 0 && h < s->count * nb; h++) {
            const int32_t *ids = r.ids + (size_t)h * r.stride;
            if (as_text) {
                st = vkf_model_decode_text(model, ids, r.lens[h], text, cap);
                if (st != VKF_OK) {
                    code = fail(st);
                    break;
                }
                printf("%s", text);
            } else {
                uint32_t skip = lead_of(lead, ids, r.lens[h]);
                for (uint32_t i = skip; i < r.lens[h]; i++) printf("%s%d", i > skip ? "," : "", ids[i]);
            }
            if (nb > 1) printf("\t%.6f", r.scores[h]);
            printf("\n");
        }
    }
    free(out), free(lens), free(text), free(ss.ids), free(ss.printed);
    decoded_free(&r);
    return code;
}

/* A source of generate as messages name it: "stdin line 3", "--src 2". */
static const char *source_name(const options *o, unsigned long number, char *buf, size_t cap)
{
    if (o->input) snprintf(buf, cap, "%s line %lu", input_name(o->input), number);
    else snprintf(buf, cap, "--src %lu", number);
    return buf;
}

/* --stream prints one source's text, never JSON. */
static int check_stream(const options *o, uint32_t sources)
{
    if (!o->stream) return -1;
    if (o->json) return cli_usage_error(o, "--stream prints the output as it grows; --json prints records: not both");
    if (sources != 1 || o->input) return cli_usage_error(o, "--stream takes one source (TEXT, or one --src)");
    return -1;
}

/* generate: every source (--src repeated, or --input FILE|-: one id list per line)
 * decoded as one batch; one line of ids per source (per hypothesis with --n-best).
 * Each source ends with eos, as translate's text does: eos_id is appended unless
 * the list already ends with it (--raw-ids: the lists exactly as given). */
static int run_generate(const options *o)
{
    id_line *lines = NULL;
    long count = 0;
    if (o->input && o->n_srcs) return cli_usage_error(o, "takes --src or --input (or -), not both");
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
    int code = check_stream(o, n);
    if (code >= 0) {
        free_id_lines(lines, count);
        return code;
    }
    code = 0;
    int32_t **ids = xmalloc(n * sizeof *ids);
    uint32_t *lens = xmalloc(n * sizeof *lens);
    unsigned long *numbers = xmalloc(n * sizeof *numbers); /* each source's line, or its --src */
    char where[512];                                        /* a source as messages name it */
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
    decode_setup ds = {0};
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
                code = EXIT_ERROR;
            }
        int usage = code == 0 ? decode_setup_make(o, model, false, &ds) : -1;
        if (usage >= 0) code = usage;
        if (code == 0) {
            vkf_sequences s = {n, (const int32_t *const *)ids, lens};
            code = decode_and_print(o, ctx, model, &ds, &s, false, NULL);
        }
        decode_setup_free(&ds);
        vkf_model_destroy(model);
        code = close_context(ctx, code);
    }
    for (uint32_t i = 0; i < n; i++) free(ids[i]);
    free(ids), free(lens), free(numbers);
    return code;
}

/* ------------------------------------------------------------------ translate --input */


static void print_error_record(vkf_context *ctx, uint32_t index, const tr_line *l)
{
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    print_line_error(&info, index, l);
}

/* The output of lines [0, n) (numbered from `done`), whose sources' outputs are
 * in r; updates the scored / correct counts. */
static vkf_status print_lines(const options *o, vkf_context *ctx, vkf_model *model, const decode_setup *ds,
                              tr_line *lines, uint32_t n, uint32_t done, const decoded *r, const int32_t *const *ptrs,
                              const uint32_t *lens, uint32_t ns, char *text, size_t cap, unsigned long *scored,
                              unsigned long *correct)
{
    vkf_status st = VKF_OK;
    decode_json d = {0};
    if (o->json) {
        d = json_for(o, ctx, model, ds, ns);
        if (ns == 0) d.stats = (vkf_generate_stats){0}; /* no generate call in this batch */
    }
    for (uint32_t i = 0; i < n; i++) {
        tr_line *l = &lines[i];
        int32_t b = l->source;
        const char *result = ""; /* a blank or failed line's */
        const int32_t *row = b >= 0 ? r->ids + (size_t)b * r->stride : NULL;
        if (st == VKF_OK && l->error) {
            if (o->json) print_error_record(ctx, done + i, l);
            else printf("\n");
        } else if (st == VKF_OK && o->json) {
            uint32_t none = 0;
            st = print_decode_record(&d, done + i, b >= 0 ? ptrs[b] : NULL, b >= 0 ? lens[b] : 0, row,
                                     b >= 0 ? &r->lens[b] : &none, b >= 0 && r->scores ? &r->scores[b] : NULL,
                                     b >= 0 ? 1 : 0, l->text, true, l->expected, text, cap);
            result = b >= 0 ? text : "";
        } else if (st == VKF_OK && b >= 0) {
            st = vkf_model_decode_text(model, row, r->lens[b], text, cap);
            if (st == VKF_OK) printf("%s\n", text);
            result = text;
        } else if (st == VKF_OK) {
            printf("\n");
        }
        if (st == VKF_OK && l->expected) (*scored)++, *correct += !l->error && strcmp(result, l->expected) == 0;
        free(l->text), free(l->expected), free(l->error);
    }
    return st;
}

/* --progress (or stderr a terminal): sources done, tokens/s, ETA. */
typedef struct progress {
    bool on, tty;
    double t0;                          /* seconds */
    uint32_t base;                      /* sources done before the current call */
    uint64_t tokens;                    /* before the current call */
    uint32_t total;                     /* 0: not known (input order) */
} progress;

static void progress_line(progress *p, uint32_t done, uint64_t tokens, bool last)
{
    if (!p->on) return;
    double s = now_s() - p->t0, rate = s > 0 ? (double)tokens / s : 0.0;
    char eta[64] = "";
    if (p->total && done && done < p->total) snprintf(eta, sizeof eta, ", ETA %.0f s", s * (p->total - done) / done);
    char of[32] = "";
    if (p->total) snprintf(of, sizeof of, " of %u", p->total);
    fprintf(stderr, "%s%u%s sentences, %.1f target tokens/s%s%s", p->tty ? "\r\033[K" : "", done, of, rate, eta,
            p->tty && !last ? "" : "\n");
    fflush(stderr);
}

static void on_progress(void *user, uint32_t done, uint32_t total, uint64_t tokens)
{
    progress *p = user;
    (void)total;
    progress_line(p, p->base + done, p->tokens + tokens, false);
}

/* Translates every line of a file, `batch` lines per generate call, or (with
 * --max-batch-tokens) the whole input sorted by length in batches of that many
 * source tokens; lines with a TAB carry the expected output and are scored by
 * exact match. Every line gives one line of output, in input order: a blank
 * line an empty one, and a line that cannot be translated (a NUL byte, invalid
 * UTF-8, a word the model does not know, too many tokens) an empty one too
 * (with --json: an error record), after one line on stderr naming it; the
 * others still translate, and the exit status is 1. */
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
    decode_setup ds = {0};
    int usage = check_languages(o, model, true);
    if (usage < 0) usage = decode_setup_make(o, model, true, &ds);
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    bool sorted = cli_given(o, "--max-batch-tokens");
    uint32_t B = o->batch ? (uint32_t)o->batch : 64;
    if (usage >= 0) {
        lines_close(&r);
        decode_setup_free(&ds);
        vkf_model_destroy(model);
        return close_context(ctx, usage);
    }
    ds.g.n_best = 1;
    uint32_t max_new = ds.max_new, cap_lines = sorted ? 1024 : B;
    tr_line *lines = xmalloc(cap_lines * sizeof *lines);
    int32_t *ids = xmalloc((size_t)cap_lines * (cfg.max_len + 1) * sizeof *ids);
    const int32_t **ptrs = xmalloc(cap_lines * sizeof *ptrs);
    uint32_t *lens = xmalloc(cap_lines * sizeof *lens);
    size_t cap = ((size_t)ds.n_prefix + max_new) * 64 + 64;
    char *text = xmalloc(cap);
    unsigned long scored = 0, correct = 0, failed = 0;
    vkf_generate_stats total = {0};
    uint32_t sources = 0, done = 0; /* lines read before this batch */
    progress pg = {o->progress || isatty(2), isatty(2) != 0, now_s(), 0, 0, 0};
    vkf_status st = VKF_OK;
    bool more = true;
    while (st == VKF_OK && more) {
        uint32_t n = 0, ns = 0; /* lines, and sources among them */
        char *line;
        size_t len;
        while ((sorted || n < B) && (more = lines_next(&r, &line, &len))) {
            if (n == cap_lines) { /* sorted: the whole input is read first */
                cap_lines *= 2;
                lines = realloc(lines, cap_lines * sizeof *lines);
                ids = realloc(ids, (size_t)cap_lines * (cfg.max_len + 1) * sizeof *ids);
                ptrs = realloc(ptrs, cap_lines * sizeof *ptrs);
                lens = realloc(lens, cap_lines * sizeof *lens);
                if (!lines || !ids || !ptrs || !lens) {
                    cli_error("out of host memory reading %s", r.name);
                    exit(EXIT_ERROR);
                }
                for (uint32_t i = 0; i < ns; i++) ptrs[i] = ids + (size_t)i * (cfg.max_len + 1);
            }
            read_line(o, model, &cfg, &r, line, len, &lines[n++], ids, ptrs, lens, &ns, &failed);
        }
        if (n == 0) break;
        decoded out = {ns, 1, ds.n_prefix + max_new, NULL, NULL, NULL};
        if (ns > 0) {
            vkf_sequences s = {ns, ptrs, lens};
            int32_t *raw = xmalloc((size_t)ns * max_new * sizeof *raw);
            uint32_t *raw_lens = xmalloc(ns * sizeof *raw_lens);
            out.ids = xmalloc((size_t)ns * out.stride * sizeof *out.ids);
            out.lens = xmalloc(ns * sizeof *out.lens);
            out.scores = ds.with ? xmalloc(ns * sizeof *out.scores) : NULL; /* plain greedy: no scores */
            if (sorted) {
                vkf_generate_options g = ds.g;
                pg.total = ns;
                g.on_progress = on_progress, g.on_progress_user = &pg;
                st = vkf_model_generate_batched(model, &s, &g, (uint32_t)o->max_batch_tokens, raw, raw_lens, out.scores);
            } else if (ds.with) {
                st = vkf_model_generate_with(model, &s, &ds.g, raw, raw_lens, out.scores);
            } else {
                st = vkf_model_generate(model, &s, max_new, raw, raw_lens);
            }
            vkf_generate_stats t;
            if (st == VKF_OK && vkf_model_generate_stats(model, &t) == VKF_OK) {
                if (sources == 0) total.first_token_ms = t.first_token_ms;
                total.total_ms += t.total_ms, total.steps += t.steps, total.tokens += t.tokens;
                sources += ns;
            }
            if (st == VKF_OK) decoded_fill(&out, &ds, raw, raw_lens);
            free(raw), free(raw_lens);
            if (st == VKF_OK && !sorted) {
                pg.base += ns, pg.tokens = total.tokens;
                progress_line(&pg, pg.base, pg.tokens, false);
            }
        }
        if (st == VKF_OK)
            st = print_lines(o, ctx, model, &ds, lines, n, done, &out, ptrs, lens, ns, text, cap, &scored, &correct);
        decoded_free(&out);
        done += n;
        if (st != VKF_OK) code = fail(st);
    }
    if (pg.on && pg.tty && sources) fprintf(stderr, "\n");
    if (r.failed && code == 0) code = EXIT_ERROR;
    if (code == 0 && scored && !o->json) /* JSON: each record's "match" */
        printf("accuracy: %lu of %lu (%.2f%%) exact matches\n", correct, scored, 100.0 * correct / scored);
    if (code == 0 && o->timing) {
        char batches[64];
        if (sorted) snprintf(batches, sizeof batches, "sorted batches of %lu tokens", o->max_batch_tokens);
        else snprintf(batches, sizeof batches, "batches of %u", B);
        fprintf(stderr, "timing: %u sources in %s, %llu tokens in %.1f ms (%u steps): %.1f tokens/s, first "
                "token after %.1f ms\n", sources, batches, (unsigned long long)total.tokens, total.total_ms,
                total.steps, total.total_ms > 0 ? 1e3 * (double)total.tokens / total.total_ms : 0.0,
                total.first_token_ms);
    }
    if (code == 0 && failed) {
        cli_error("%lu of %u lines of %s were not translated (each named above; an empty line stands for it)", failed,
                  done, r.name);
        code = EXIT_ERROR;
    }
    fflush(stdout);
    lines_close(&r);
    free(lines), free(ids), free(ptrs), free(lens), free(text);
    decode_setup_free(&ds);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

/* translate: TEXT, or --input FILE|- (one text per line). */
static int run_translate(const options *o, const char *text)
{
    if (o->input) {
        if (text) return cli_usage_error(o, "takes TEXT or --input FILE|- (or -), not both");
        if (o->stream) return check_stream(o, 2);
        if (cli_given(o, "--batch") && cli_given(o, "--max-batch-tokens"))
            return cli_usage_error(o, "takes --batch (input order) or --max-batch-tokens (sorted), not both");
        return o->devices ? pool_translate_file(o) : translate_file(o);
    }
    if (o->devices) return cli_usage_error(o, "--devices spreads the batches of --input FILE|- over devices; one TEXT "
                                           "runs on one device (--device)");
    if (!text) return cli_usage_error(o, "needs the text to translate (TEXT, --input FILE or - : stdin)");
    if (cli_given(o, "--batch")) return cli_usage_error(o, "--batch applies to --input only");
    if (cli_given(o, "--max-batch-tokens")) return cli_usage_error(o, "--max-batch-tokens applies to --input only");
    if (o->progress) return cli_usage_error(o, "--progress applies to --input only");
    int usage = check_stream(o, 1);
    if (usage >= 0) return usage;
    char why[128];
    if (!text_check(text, strlen(text), why, sizeof why)) {
        cli_error("translate: TEXT: %s", why);
        return EXIT_ERROR;
    }
    vkf_context *ctx;
    vkf_model *model;
    int code = open_model(o, &ctx, &model);
    if (code) return code;
    decode_setup ds = {0};
    usage = check_languages(o, model, true);
    if (usage < 0) usage = decode_setup_make(o, model, true, &ds);
    if (usage >= 0) {
        decode_setup_free(&ds);
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
    } else {
        const int32_t *src = ids;
        vkf_sequences s = {1, &src, &n};
        code = decode_and_print(o, ctx, model, &ds, &s, true, text);
    }
    free(ids);
    decode_setup_free(&ds);
    vkf_model_destroy(model);
    return close_context(ctx, code);
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
    o->length_penalty = 1.0, o->temperature = 1.0, o->top_p = 1.0, o->repetition_penalty = 1.0;
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
        {"--target-prefix-ids", CLI_STRING, CLI_OFF(target_prefix), 0, 0, "IDS", "decoding continues after these "
         "target ids (printed with the output); --max-new counts the ids after them", NULL},
        DECODE_COMMAND_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {
        "generate", "--model MODEL --src IDS [--src IDS ...] [options]\n--model MODEL --input FILE|- [options]\n"
        "--model MODEL - [options]",
        "decodes every source as one batch (greedy; beam search with --beam, sampling with --temperature,\n"
        "--top-k, --top-p) and prints a line of ids per source: the ids chosen after the decoder start,\n"
        "without a forced first token (bos, target language) and without eos; eos_id is appended to each\n"
        "source unless it ends with it (--raw-ids: as given); - reads the sources from stdin", table};
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
        {"--batch", CLI_COUNT, CLI_OFF(batch), 1, 4096, "B", "with --input: lines decoded together, in input order "
         "(default 64)", NULL},
        {"--max-batch-tokens", CLI_COUNT, CLI_OFF(max_batch_tokens), 1, CLI_U32, "N", "with --input: the whole input "
         "sorted by length, in batches of at most N source tokens (count x longest); output in input order", NULL},
        {"--progress", CLI_FLAG, CLI_OFF(progress), 0, 0, NULL, "with --input: a progress line on stderr (sentences, "
         "tokens/s, ETA; on by default where stderr is a terminal)", NULL},
        {"--source-lang", CLI_STRING, CLI_OFF(source_lang), 0, 0, "L", "the source language as the tokenizer names it "
         "(eng_Latn, en, en_XX); default: the tokenizer's", NULL},
        {"--target-lang", CLI_STRING, CLI_OFF(target_lang), 0, 0, "L", "the target language (forced as the first "
         "token, or Marian's >>L<< in the source)", NULL},
        {"--target-prefix", CLI_STRING, CLI_OFF(target_prefix), 0, 0, "TEXT", "decoding continues after this target "
         "text (printed with the output); --max-new counts the tokens after it", NULL},
        DECODE_COMMAND_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {
        "translate", "--model MODEL TEXT [options]\n--model MODEL --input FILE|- [--batch B | --max-batch-tokens N] "
        "[options]\n--model MODEL - [--batch B] [options]",
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

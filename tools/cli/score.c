/* vkformer score: the log-probability a model gives a translation (CTranslate2's
 * score_batch), token by token, through vkf_model_score: --src TEXT --tgt TEXT,
 * or --input FILE of "source<TAB>target" lines (one output line per input line;
 * a line that cannot be scored is named on stderr, an empty line stands in its
 * place and the exit status is 1). --ids: sources and targets are id lists. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* One pair: its source and target ids, or why it is not scored. */
typedef struct pair {
    int32_t *src, *tgt;                 /* owned */
    uint32_t n_src, n_tgt;
    char *error;                        /* owned: "line 3: ...", or NULL */
    bool blank;                         /* a blank line: an empty line out, no error */
} pair;

static void pair_free(pair *p)
{
    free(p->src), free(p->tgt), free(p->error);
    memset(p, 0, sizeof *p);
}

/* The ids of one side: text through the model's tokenizer (the source with its
 * eos, the target without), or an id list (--ids; a source gets eos appended
 * unless it ends with it). NULL and a message in why where it cannot. */
static int32_t *side_ids(const options *o, vkf_model *model, const char *text, bool target, uint32_t *n, char *why,
                         size_t cap)
{
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    *n = 0;
    if (o->ids) {
        int32_t *ids;
        if (target && strspn(text, " ") == strlen(text)) return xmalloc(sizeof *ids); /* empty: eos alone is scored */
        long k = parse_ids(text, target ? "--tgt" : "--src", &ids);
        if (k < 0) {
            snprintf(why, cap, "%s is not a list of ids", target ? "the target" : "the source");
            return NULL;
        }
        if (!target && (k == 0 || ids[k - 1] != cfg.eos_id)) {
            ids = realloc(ids, (size_t)(k + 1) * sizeof *ids);
            if (!ids) exit(EXIT_ERROR);
            ids[k++] = cfg.eos_id;
        }
        *n = (uint32_t)k;
        return ids;
    }
    int32_t *ids = xmalloc(((size_t)cfg.max_len + 1) * sizeof *ids);
    vkf_status st = target ? vkf_model_encode_target_text(model, text, ids, cfg.max_len, n)
                           : vkf_model_encode_text(model, text, ids, cfg.max_len, n);
    if (st != VKF_OK) {
        snprintf(why, cap, "%s: %s", target ? "the target" : "the source", vkf_last_error());
        free(ids);
        return NULL;
    }
    return ids;
}

/* One pair from its two texts; errors say `where`. */
static void make_pair(const options *o, vkf_model *model, const char *src, const char *tgt, const char *where, pair *p)
{
    char why[512];
    memset(p, 0, sizeof *p);
    if ((p->src = side_ids(o, model, src, false, &p->n_src, why, sizeof why)) &&
        (p->tgt = side_ids(o, model, tgt, true, &p->n_tgt, why, sizeof why)))
        return;
    char message[700];
    snprintf(message, sizeof message, "%s: %s", where, why);
    cli_error("%s", message);
    p->error = strdup(message);
}

/* Scores pairs [0, n) (those without error, in one call) and prints a line (or a
 * record) for each; index0: the first one's index. */
static int score_and_print(const options *o, vkf_context *ctx, vkf_model *model, pair *pairs, uint32_t n,
                           uint32_t index0)
{
    uint32_t m = 0, longest = 0;
    const int32_t **src = xmalloc((n ? n : 1) * sizeof *src), **tgt = xmalloc((n ? n : 1) * sizeof *tgt);
    uint32_t *ns = xmalloc((n ? n : 1) * sizeof *ns), *nt = xmalloc((n ? n : 1) * sizeof *nt);
    for (uint32_t i = 0; i < n; i++) {
        if (pairs[i].error || pairs[i].blank) continue;
        src[m] = pairs[i].src, ns[m] = pairs[i].n_src, tgt[m] = pairs[i].tgt, nt[m] = pairs[i].n_tgt;
        if (nt[m] > longest) longest = nt[m];
        m++;
    }
    float *lp = xmalloc(((size_t)m * (longest + 1) + 1) * sizeof *lp);
    vkf_status st = VKF_OK;
    if (m) {
        vkf_sequences s = {m, src, ns}, t = {m, tgt, nt};
        st = vkf_model_score(model, &s, &t, lp, (uint64_t)m * (longest + 1));
    }
    int code = st == VKF_OK ? 0 : fail(st);
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    for (uint32_t i = 0, k = 0; code == 0 && i < n; i++) {
        pair *p = &pairs[i];
        if (p->error || p->blank) {
            if (!o->json || p->blank) {
                printf("\n");
                continue;
            }
            jsonl_begin("score");
            printf(",\"record\":\"error\",\"index\":%u", index0 + i);
            jsonl_string("error", p->error);
            jsonl_end(&info);
            continue;
        }
        const float *row = lp + (size_t)k++ * (longest + 1);
        double sum = 0;
        for (uint32_t j = 0; j <= p->n_tgt; j++) sum += row[j];
        double normalized = sum / (p->n_tgt + 1);
        if (!o->json) {
            printf("%.6f\t%.6f\t", sum, normalized);
            for (uint32_t j = 0; j <= p->n_tgt; j++) printf("%s%.6f", j ? " " : "", row[j]);
            printf("\n");
            continue;
        }
        jsonl_begin("score");
        printf(",\"index\":%u,\"src\":", index0 + i);
        jsonl_ids(p->src, p->n_src);
        printf(",\"tgt\":");
        jsonl_ids(p->tgt, p->n_tgt);
        printf(",\"logprobs\":[");
        for (uint32_t j = 0; j <= p->n_tgt; j++) {
            if (j) putchar(',');
            jsonl_number(row[j], 7);
        }
        printf("],\"sum\":");
        jsonl_number(sum, 9);
        printf(",\"normalized\":");
        jsonl_number(normalized, 9);
        printf(",\"length\":%u", p->n_tgt + 1);
        jsonl_end(&info);
    }
    free(src), free(tgt), free(ns), free(nt), free(lp);
    return code;
}

static int run_score(const options *o)
{
    if (o->input && (o->src || o->tgt)) return cli_usage_error(o, "takes --src and --tgt, or --input, not both");
    if (!o->input && (!o->src || !o->tgt)) return cli_usage_error(o, "needs --src and --tgt, or --input FILE|-");
    char why[128];
    for (int i = 0; !o->input && i < 2; i++) {
        const char *t = i ? o->tgt : o->src;
        if (!text_check(t, strlen(t), why, sizeof why)) {
            cli_error("score: %s: %s", i ? "--tgt" : "--src", why);
            return EXIT_ERROR;
        }
    }
    vkf_context *ctx;
    vkf_model *model;
    int code = open_model(o, &ctx, &model);
    if (code) return code;
    if (!o->input) {
        pair p;
        make_pair(o, model, o->src, o->tgt, "score", &p);
        code = p.error ? EXIT_ERROR : score_and_print(o, ctx, model, &p, 1, 0);
        pair_free(&p);
        vkf_model_destroy(model);
        return close_context(ctx, code);
    }
    line_reader r;
    if (!lines_open(&r, o->input)) {
        vkf_model_destroy(model);
        return close_context(ctx, EXIT_ERROR);
    }
    uint32_t B = o->batch ? (uint32_t)o->batch : 64, done = 0;
    unsigned long failed = 0;
    pair *pairs = xmalloc(B * sizeof *pairs);
    bool more = true;
    while (code == 0 && more) {
        uint32_t n = 0;
        char *line;
        size_t len;
        while (n < B && (more = lines_next(&r, &line, &len))) {
            pair *p = &pairs[n++];
            memset(p, 0, sizeof *p);
            char where[600];
            snprintf(where, sizeof where, "%s line %lu", r.name, r.number);
            char *tab = memchr(line, '\t', len);
            if (!text_check(line, len, why, sizeof why)) {
                cli_error("%s: %s", where, why);
                p->error = strdup(why);
            } else if (strspn(line, " \t\r") == len) {
                p->blank = true;
            } else if (!tab) {
                cli_error("%s: needs \"source<TAB>target\"", where);
                p->error = strdup("needs \"source<TAB>target\"");
            } else {
                *tab = '\0';
                make_pair(o, model, line, tab + 1, where, p);
            }
            failed += p->error != NULL;
        }
        if (n) code = score_and_print(o, ctx, model, pairs, n, done);
        for (uint32_t i = 0; i < n; i++) pair_free(&pairs[i]);
        done += n;
    }
    if (r.failed && code == 0) code = EXIT_ERROR;
    if (code == 0 && failed) {
        cli_error("%lu of %u lines of %s were not scored (each named above; an empty line stands for it)", failed, done,
                  r.name);
        code = EXIT_ERROR;
    }
    fflush(stdout);
    lines_close(&r);
    free(pairs);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}

int cmd_score(int argc, char **argv)
{
    static const cli_option table[] = {
        CLI_MODEL_PATH,
        {"--src", CLI_STRING, CLI_OFF(src), 0, 0, "TEXT", "the source text (--ids: its ids)", NULL},
        {"--tgt", CLI_STRING, CLI_OFF(tgt), 0, 0, "TEXT", "the target text to score (--ids: its ids, without eos)",
         NULL},
        {"--input", CLI_STRING, CLI_OFF(input), 0, 0, "FILE|-", "\"source<TAB>target\" pairs, one per line (- : stdin)",
         NULL},
        {"--ids", CLI_FLAG, CLI_OFF(ids), 0, 0, NULL, "sources and targets are comma-separated ids", NULL},
        {"--batch", CLI_COUNT, CLI_OFF(batch), 1, 4096, "B", "with --input: pairs scored together (default 64)", NULL},
        {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line per pair (docs/json.md)", NULL},
        CLI_MODEL_OPTIONS, CLI_COMMON_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {
        "score", "--model MODEL --src TEXT --tgt TEXT [options]\n--model MODEL --input FILE|- [options]",
        "prints the log-probability of each target token and of eos after it, teacher-forced after the\n"
        "decoder start (CTranslate2's score_batch), as \"sum<TAB>normalized<TAB>logprobs\": sum / the\n"
        "number of tokens scored (target tokens + 1) is the length-normalised score", table};
    options o = {0};
    return cli_run_model_command(&cmd, argc, argv, &o, run_score);
}

/* vkformer tokenize: text to source ids, and target ids to text. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* One item: its ids (or with --decode its text) as a line on stdout; 0, or the
 * exit code after one line on stderr naming the item (where: "stdin line 3",
 * "TEXT", "IDS"): 2 for ids that do not parse, 1 for what the library refused. */
static int tokenize_one(const options *o, vkf_model *model, const char *item,
                         const char *where, char *text, size_t cap)
{
    vkf_status st;
    if (o->decode) {
        int32_t *ids = NULL;
        long n = parse_ids(item, where, &ids);
        if (n < 0) return EXIT_USAGE;
        st = n > UINT32_MAX ? VKF_ERROR_INVALID_ARGUMENT : vkf_model_decode_text(model, ids, (uint32_t)n, text, cap);
        free(ids);
        if (st == VKF_OK) printf("%s\n", text);
    } else {
        /* as a tokenizer does, whatever the model's max positions: a piece covers
         * at least one byte, plus the "▁" a text may start with and the specials */
        size_t len = strlen(item), capacity = 2 * len + 16;
        uint32_t n = 0;
        if (capacity > UINT32_MAX) capacity = UINT32_MAX;
        int32_t *ids = xmalloc(capacity * sizeof *ids);
        st = vkf_model_encode_text_with(model, item, o->source_lang, o->target_lang, ids, (uint32_t)capacity, &n);
        for (uint32_t j = 0; st == VKF_OK && j < n; j++) printf("%s%d", j ? "," : "", ids[j]);
        if (st == VKF_OK) printf("\n");
        free(ids);
    }
    if (st != VKF_OK) cli_error("%s: %s", where, vkf_last_error());
    return st == VKF_OK ? 0 : exit_code_for(st);
}

/* TEXT (IDS), or every line of --input: one line of output per line of input, an
 * empty one for a blank line and for a line that fails (NUL byte, invalid UTF-8,
 * unknown word, bad id; named on stderr, exit status 1 at the end). */
static int run_tokenize(const options *o, const char *arg)
{
    if ((arg != NULL) == (o->input != NULL))
        return cli_usage_error(o, "takes %s or --input FILE|- (or -), one of the two", o->decode ? "IDS" : "TEXT");
    char why[128];
    if (arg && !text_check(arg, strlen(arg), why, sizeof why)) {
        cli_error("tokenize: %s: %s", o->decode ? "IDS" : "TEXT", why);
        return EXIT_ERROR;
    }
    line_reader r = {0};
    if (o->input && !lines_open(&r, o->input)) return EXIT_ERROR;
    vkf_context *ctx = NULL;
    vkf_model *model = NULL;
    int code = open_model(o, &ctx, &model);
    if (code) {
        lines_close(&r);
        return code;
    }
    size_t cap = 1 << 20;
    char *text = xmalloc(cap);
    if (arg) {
        code = tokenize_one(o, model, arg, o->decode ? "IDS" : "TEXT", text, cap);
    } else {
        unsigned long failed = 0;
        char *line;
        size_t len;
        while (lines_next(&r, &line, &len)) {
            char where[512];
            snprintf(where, sizeof where, "%s line %lu", r.name, r.number);
            bool ok = true;
            if (!text_check(line, len, why, sizeof why)) {
                cli_error("%s: %s", where, why);
                ok = false;
            } else if (strspn(line, " \t\r\v\f") == len) {
                printf("\n"); /* blank */
            } else {
                ok = tokenize_one(o, model, line, where, text, cap) == 0;
            }
            if (!ok) printf("\n"), failed++;
        }
        if (failed) cli_error("%lu of %lu lines of %s failed (each named above; an empty line stands for it)", failed,
                              r.number, r.name);
        if (failed || r.failed) code = EXIT_ERROR;
    }
    fflush(stdout);
    lines_close(&r);
    free(text);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}


int cmd_tokenize(int argc, char **argv)
{
    static const cli_option table[] = {
        CLI_MODEL_PATH,
        {"--decode", CLI_FLAG, CLI_OFF(decode), 0, 0, NULL, "target ids to text (IDS: comma-separated)", NULL},
        {"--source-lang", CLI_STRING, CLI_OFF(source_lang), 0, 0, "L", "the source language as the tokenizer names it "
         "(default: the tokenizer's)", NULL},
        {"--target-lang", CLI_STRING, CLI_OFF(target_lang), 0, 0, "L", "a target language that is a token of the "
         "source (Marian's >>L<<)", NULL},
        {"--input", CLI_STRING, CLI_OFF(input), 0, 0, "FILE|-", "one text (or id list) per line (- : stdin)", NULL},
        CLI_COMMON_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {
        "tokenize", "--model MODEL TEXT|--input FILE|-|-\n--model MODEL --decode IDS|--input FILE|-|-",
        "the source ids a text becomes (eos appended), one line per text; with --decode, target ids\n"
        "to text; - reads the items from stdin, one per line", table};
    options o = {0};
    int code = cli_parse(&cmd, argc, argv, &o);
    const char *arg = o.n_args ? o.args[0] : NULL;
    if (code < 0 && o.n_args > 1)
        code = cli_usage_error(&o, "takes one %s argument, not %d (%s is extra)%s", o.decode ? "IDS" : "TEXT",
                               o.n_args, quoted(o.args[1]), o.decode ? "" : "; quote the text");
    if (code < 0 && arg && strcmp(arg, "-") == 0) {
        if (o.input) code = cli_usage_error(&o, "takes --input or -, not both");
        o.input = "-", arg = NULL;
    }
    return code >= 0 ? code : run_tokenize(&o, arg);
}

/* vkformer tokenize: text to source ids, and target ids to text. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int run_tokenize(const options *o, const char *arg)
{
    if ((arg != NULL) == (o->input != NULL))
        return cli_usage_error(o, "takes %s or --input FILE|- (or -), one of the two", o->decode ? "IDS" : "TEXT");
    char **lines = NULL;
    long count = 1;
    if (o->input) {
        count = read_id_lines(o->input, &lines);
        if (count < 0) return EXIT_ERROR;
    }
    vkf_context *ctx = NULL;
    vkf_model *model = NULL;
    int code = open_model(o, &ctx, &model);
    if (code) {
        for (long i = 0; lines && i < count; i++) free(lines[i]);
        free(lines);
        return code;
    }
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    size_t cap = 1 << 20;
    char *text = xmalloc(cap);
    int32_t *ids = NULL;
    for (long i = 0; code == 0 && i < count; i++) {
        const char *item = o->input ? lines[i] : arg;
        vkf_status st;
        if (o->decode) {
            long n = parse_ids(item, o->input ? input_name(o->input) : "IDS", &ids);
            if (n < 0) {
                code = EXIT_USAGE;
                break;
            }
            st = vkf_model_decode_text(model, ids, (uint32_t)n, text, cap);
            free(ids), ids = NULL;
            if (st == VKF_OK) printf("%s\n", text);
        } else {
            uint32_t n = 0;
            ids = xmalloc(((size_t)cfg.max_len + 1) * sizeof *ids);
            st = vkf_model_encode_text(model, item, ids, cfg.max_len, &n);
            for (uint32_t j = 0; st == VKF_OK && j < n; j++) printf("%s%d", j ? "," : "", ids[j]);
            if (st == VKF_OK) printf("\n");
            free(ids), ids = NULL;
        }
        if (st != VKF_OK) code = fail(st);
    }
    for (long i = 0; lines && i < count; i++) free(lines[i]);
    free(lines), free(text);
    vkf_model_destroy(model);
    return close_context(ctx, code);
}


int cmd_tokenize(int argc, char **argv)
{
    static const cli_option table[] = {
        CLI_MODEL_PATH,
        {"--decode", CLI_FLAG, CLI_OFF(decode), 0, 0, NULL, "target ids to text (IDS: comma-separated)", NULL},
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
        code = cli_usage_error(&o, "takes one %s argument, not %d (\"%s\" is extra)%s", o.decode ? "IDS" : "TEXT",
                               o.n_args, o.args[1], o.decode ? "" : "; quote the text");
    if (code < 0 && arg && strcmp(arg, "-") == 0) {
        if (o.input) code = cli_usage_error(&o, "takes --input or -, not both");
        o.input = "-", arg = NULL;
    }
    return code >= 0 ? code : run_tokenize(&o, arg);
}

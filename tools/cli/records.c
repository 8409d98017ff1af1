/* What decoding commands print and read, one source or line at a time, shared by
 * the one-device commands (tools/cli/decode.c) and the pools (tools/cli/pool.c):
 * the --json record of a decoded source, the record of a line that failed, the
 * checks of --source-lang and --target-lang, and translate --input's reading of a
 * line (checked, split at its tab, encoded). */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One record: source `index` (its ids src), its nb hypotheses (rows of out,
 * d->stride apart, the target prefix included; scores NULL: none), and for
 * translate its text (and the expected text of a scored line). text_buf holds
 * decoded text (cap bytes). A blank line of translate --input: src_len 0, nb 0
 * (no ids, translation ""). */
vkf_status print_decode_record(const decode_json *d, uint32_t index, const int32_t *src, uint32_t src_len,
                               const int32_t *out, const uint32_t *lens, const float *scores, uint32_t nb,
                               const char *text, bool translate, const char *expected, char *text_buf, size_t cap)
{
    const char *best = translate && nb == 0 ? "" : NULL;
    if (translate) { /* every hypothesis decodes before anything is printed: a failure leaves no half line */
        for (uint32_t h = nb; h-- > 0;) {
            vkf_status st = vkf_model_decode_text(d->model, out + (size_t)h * d->stride, lens[h], text_buf, cap);
            if (st != VKF_OK) return st;
            if (h == 0) best = text_buf;
        }
    }
    jsonl_begin(translate ? "translate" : "generate");
    printf(",\"index\":%u", index);
    if (translate) jsonl_string("text", text);
    printf(",\"src\":");
    jsonl_ids(src, src_len);
    /* generate's ids leave out a forced first token (d->lead); "sequence" has it */
    uint32_t skip = !translate && nb && d->lead >= 0 && lens[0] && out[0] == d->lead;
    printf(",\"ids\":");
    jsonl_ids(nb ? out + skip : out, nb ? lens[0] - skip : 0); /* out is NULL for an empty line */
    if (!translate) {
        printf(",\"sequence\":");
        jsonl_ids(out, nb ? lens[0] : 0);
    }
    if (translate) {
        jsonl_string("translation", best);
        jsonl_string("expected", expected);
        printf(",\"match\":%s", !expected ? "null" : strcmp(best, expected) == 0 ? "true" : "false");
    }
    printf(",\"hypotheses\":[");
    for (uint32_t h = 0; h < nb; h++) {
        const int32_t *row = out + (size_t)h * d->stride;
        uint32_t lead = !translate && d->lead >= 0 && lens[h] && row[0] == d->lead;
        printf("%s{\"ids\":", h ? "," : "");
        jsonl_ids(row + lead, lens[h] - lead);
        if (translate && h > 0) {
            if (vkf_model_decode_text(d->model, out + (size_t)h * d->stride, lens[h], text_buf, cap) != VKF_OK)
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
        return cli_usage_error(o, "%s%s", o->target_lang ? "--target-lang: " : "--target-lang L is required: ", vkf_last_error());
    return -1;
}

/* ------------------------------------------------------------------ translate --input lines */

char *copy_bytes(const char *s, size_t len)
{
    char *c = xmalloc(len + 1);
    memcpy(c, s, len);
    c[len] = '\0';
    return c;
}

/* A line that will not be translated: one line on stderr now, an empty line (or
 * an error record) in its place later. */
void line_failed(tr_line *l, const line_reader *r, const char *why)
{
    char message[1024];
    snprintf(message, sizeof message, "line %lu: %s", r->number, why);
    cli_error("%s %s", r->name, message);
    l->error = copy_bytes(message, strlen(message));
    l->source = -1;
}

/* --json: the record of a line that was not translated (docs/json.md). */
void print_line_error(const vkf_device_info *device, uint32_t index, const tr_line *l)
{
    jsonl_begin("translate");
    printf(",\"record\":\"error\",\"index\":%u,\"text\":", index);
    print_json_bytes(l->text, l->len);
    jsonl_string("error", l->error);
    jsonl_end(device);
}

/* A line read, checked and encoded: its source ids go to row `*ns` of ids (rows
 * of max_len + 1) and ptrs/lens where it has any. */
void read_line(const options *o, const vkf_model *model, const vkf_model_config *cfg, const line_reader *r,
                      const char *line, size_t len, tr_line *l, int32_t *ids, const int32_t **ptrs, uint32_t *lens,
                      uint32_t *ns, unsigned long *failed)
{
    *l = (tr_line){NULL, 0, NULL, NULL, -1};
    char why[128];
    if (!text_check(line, len, why, sizeof why)) {
        l->text = copy_bytes(line, len), l->len = len;
        line_failed(l, r, why);
        (*failed)++;
        return;
    }
    const char *tab = strchr(line, '\t');
    l->len = tab ? (size_t)(tab - line) : len;
    l->text = copy_bytes(line, l->len);
    l->expected = tab ? copy_bytes(tab + 1, len - l->len - 1) : NULL;
    if (strspn(l->text, " \t\r\v\f") == l->len) return; /* blank: an empty line */
    int32_t *row = ids + (size_t)*ns * (cfg->max_len + 1);
    if (vkf_model_encode_text_with(model, l->text, o->source_lang, o->target_lang, row, cfg->max_len, &lens[*ns]) !=
        VKF_OK) {
        line_failed(l, r, vkf_last_error());
        (*failed)++;
        return;
    }
    l->source = (int32_t)*ns;
    ptrs[(*ns)++] = row;
}

/* generate and translate: the decoding options a command line asks for, on top
 * of the model's defaults (a Hugging Face folder's generation_config.json):
 * beam search, sampling, the logits processors (repetition penalty, n-grams,
 * suppressed ids and sequences, end tokens), the per-source length factor and
 * the target prefix, with the ids and token strings they name looked up in the
 * model's target vocabulary. A value the model cannot take is a usage error. */
#include "cli.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define BEAM_GIVEN(o) cli_given(o, "--beam")
#define SAMPLE(o) (cli_given(o, "--temperature") || cli_given(o, "--top-k") || cli_given(o, "--top-p"))

/* Whether text is comma-separated decimal ids ("5", "5,17"). */
static bool is_id_list(const char *text)
{
    if (!isdigit((unsigned char)*text)) return false;
    for (const char *c = text; *c; c++)
        if (!isdigit((unsigned char)*c) && !(*c == ',' && isdigit((unsigned char)c[1]))) return false;
    return true;
}

/* The ids a value names: comma-separated ids, or target tokens separated by
 * whitespace, each an entry of the target vocabulary. Appends them to *ids
 * (*n of them, grown); -1, or the exit code after one line naming the value. */
static int value_ids(const options *o, const vkf_model *model, const char *flag, const char *value, int32_t **ids,
                     uint32_t *n)
{
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    size_t cap = strlen(value) + 1; /* more than the ids or tokens it can hold */
    *ids = realloc(*ids, (*n + cap) * sizeof **ids);
    if (!*ids) {
        cli_error("out of host memory");
        exit(EXIT_ERROR);
    }
    if (is_id_list(value)) {
        int32_t *parsed;
        long k = parse_ids(value, flag, &parsed);
        if (k < 0) return EXIT_USAGE;
        for (long i = 0; i < k; i++) {
            if (parsed[i] < 0 || (uint32_t)parsed[i] >= cfg.tgt_vocab_size) {
                int32_t bad = parsed[i];
                free(parsed);
                return cli_usage_error(o, "%s: id %d is outside the target vocabulary (0..%u)", flag, bad,
                                       cfg.tgt_vocab_size - 1);
            }
            (*ids)[(*n)++] = parsed[i];
        }
        free(parsed);
        return -1;
    }
    char *copy = strdup(value);
    if (!copy) exit(EXIT_ERROR);
    int code = -1;
    uint32_t before = *n;
    for (char *save = NULL, *tok = strtok_r(copy, " \t", &save); tok && code < 0; tok = strtok_r(NULL, " \t", &save)) {
        int32_t id;
        if (vkf_model_target_token_id(model, tok, &id) != VKF_OK) code = cli_usage_error(o, "%s: %s", flag, vkf_last_error());
        else (*ids)[(*n)++] = id;
    }
    free(copy);
    if (code < 0 && *n == before) code = cli_usage_error(o, "%s needs ids or tokens, not %s", flag, quoted(value));
    return code;
}

/* --max-new, or the model's default (a Hugging Face folder's generation_config:
 * max_length - 1 or max_new_tokens), else max_len. */
uint32_t default_max_new(const options *o, const vkf_model *model)
{
    if (o->max_new) return (uint32_t)o->max_new;
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    vkf_generate_options g;
    if (vkf_model_generate_defaults(model, &g) == VKF_OK && g.max_new) return g.max_new;
    return cfg.max_len;
}

/* Whether decoding goes through vkf_model_generate_with: beam search, sampling,
 * a target language, any processor option, or a model whose defaults
 * (generation_config) are not plain greedy decoding. */
static bool use_generate_with(const options *o, const vkf_model *model)
{
    vkf_generate_options g, plain;
    vkf_generate_options_init(&plain);
    if (vkf_model_generate_defaults(model, &g) != VKF_OK) return true;
    bool defaults = g.beams != plain.beams || g.max_new != plain.max_new || g.min_new != plain.min_new ||
                    g.length_penalty != plain.length_penalty || g.early_stopping != plain.early_stopping ||
                    g.n_best != plain.n_best || g.forced_eos != plain.forced_eos || g.renormalize != plain.renormalize ||
                    g.forced_bos != plain.forced_bos || g.repetition_penalty != plain.repetition_penalty ||
                    g.no_repeat_ngram || g.n_suppress || g.bad_sequences || g.n_end_ids;
    static const char *const given[] = {"--repetition-penalty", "--no-repeat-ngram", "--suppress", "--suppress-sequence",
                                        "--end-token", "--max-new-factor", "--target-prefix", "--target-prefix-ids",
                                        "--min-new", "--n-best", "--length-penalty", "--early-stopping"};
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++)
        if (cli_given(o, given[i])) return true;
    return BEAM_GIVEN(o) || SAMPLE(o) || o->target_lang || defaults || o->stream;
}

void decode_setup_free(decode_setup *s)
{
    free(s->prefix), free(s->suppress), free(s->seq_ids), free(s->seq_lens), free(s->seq_ptrs);
    memset(s, 0, sizeof *s);
}

int decode_setup_make(const options *o, const vkf_model *model, bool text, decode_setup *s)
{
    memset(s, 0, sizeof *s);
    vkf_model_config cfg;
    vkf_model_get_config(model, &cfg);
    if (o->max_new > cfg.max_len)
        return cli_usage_error(o, "--max-new %lu exceeds the model's max_len %u", o->max_new, cfg.max_len);
    if (cli_given(o, "--repetition-penalty") && !(o->repetition_penalty > 0))
        return cli_usage_error(o, "--repetition-penalty must be above 0 (1 is off), not %g", o->repetition_penalty);
    if (cli_given(o, "--max-new-factor") && !(o->max_new_factor > 0))
        return cli_usage_error(o, "--max-new-factor must be above 0, not %g", o->max_new_factor);
    vkf_generate_options *g = &s->g;
    if (vkf_model_generate_defaults(model, g) != VKF_OK) vkf_generate_options_init(g);
    s->with = use_generate_with(o, model);
    /* the target prefix first: with the model's default length, it counts against max_length */
    int code = -1;
    if (o->target_prefix && text) {
        s->prefix = xmalloc(((size_t)cfg.max_len + 1) * sizeof *s->prefix);
        uint32_t n = 0;
        if (vkf_model_encode_target_text(model, o->target_prefix, s->prefix, cfg.max_len, &n) != VKF_OK)
            return cli_usage_error(o, "--target-prefix: %s", vkf_last_error());
        s->n_prefix = n;
    } else if (o->target_prefix) {
        code = value_ids(o, model, "--target-prefix-ids", o->target_prefix, &s->prefix, &s->n_prefix);
        if (code >= 0) return code;
    }
    uint32_t max_new = default_max_new(o, model);
    if (s->prefix && !o->max_new) {
        /* generate()'s max_length counts the decoder start and the prefix */
        if (s->n_prefix >= max_new)
            return cli_usage_error(o, "the target prefix has %u tokens, as many as the model's default length (%u new "
                                   "tokens) allows: give --max-new", s->n_prefix, max_new);
        max_new -= s->n_prefix;
    }
    if ((uint64_t)s->n_prefix + max_new > cfg.max_len)
        return cli_usage_error(o, "the target prefix (%u tokens) and --max-new %u pass the model's max_len %u",
                               s->n_prefix, max_new, cfg.max_len);
    s->max_new = max_new;
    g->max_new = max_new;
    if (cli_given(o, "--min-new")) g->min_new = (uint32_t)(o->min_new > UINT32_MAX ? UINT32_MAX : o->min_new);
    if (!cli_given(o, "--min-new") && g->min_new > max_new) g->min_new = max_new; /* the defaults' min under --max-new */
    if (BEAM_GIVEN(o)) g->beams = (uint32_t)(o->beam > UINT32_MAX ? UINT32_MAX : o->beam);
    if (cli_given(o, "--n-best")) g->n_best = (uint32_t)(o->n_best > UINT32_MAX ? UINT32_MAX : o->n_best);
    if (g->n_best > g->beams && !cli_given(o, "--n-best")) g->n_best = g->beams;
    if (cli_given(o, "--length-penalty")) g->length_penalty = (float)o->length_penalty;
    if (o->target_lang) vkf_model_set_target_language(model, o->target_lang, g); /* checked by check_languages */
    if (o->early_stopping) g->early_stopping = true;
    if (SAMPLE(o)) {
        if (!BEAM_GIVEN(o)) g->beams = 1, g->n_best = 1;
        g->sample = true;
        g->temperature = (float)o->temperature;
        g->top_k = (uint32_t)(o->top_k > UINT32_MAX ? UINT32_MAX : o->top_k);
        g->top_p = (float)o->top_p;
        g->seed = o->seed;
    }
    if (cli_given(o, "--repetition-penalty")) g->repetition_penalty = (float)o->repetition_penalty;
    if (cli_given(o, "--no-repeat-ngram")) g->no_repeat_ngram = (uint32_t)o->no_repeat_ngram;
    if (cli_given(o, "--max-new-factor")) g->max_new_factor = (float)o->max_new_factor;
    for (unsigned i = 0; code < 0 && i < o->suppress.n; i++)
        code = value_ids(o, model, "--suppress", o->suppress.v[i], &s->suppress, &s->n_suppress);
    if (o->suppress.n) g->suppress_ids = s->suppress, g->n_suppress = s->n_suppress;
    if (code < 0 && o->suppress_sequence.n) {
        /* every sequence's ids one after another, then the pointers into them */
        s->seq_lens = xmalloc(o->suppress_sequence.n * sizeof *s->seq_lens);
        s->seq_ptrs = xmalloc(o->suppress_sequence.n * sizeof *s->seq_ptrs);
        uint32_t total = 0;
        for (unsigned i = 0; code < 0 && i < o->suppress_sequence.n; i++) {
            uint32_t before = total;
            code = value_ids(o, model, "--suppress-sequence", o->suppress_sequence.v[i], &s->seq_ids, &total);
            s->seq_lens[i] = total - before;
        }
        for (unsigned i = 0, at = 0; code < 0 && i < o->suppress_sequence.n; at += s->seq_lens[i++])
            s->seq_ptrs[i] = s->seq_ids + at;
        s->seqs = (vkf_sequences){o->suppress_sequence.n, s->seq_ptrs, s->seq_lens};
        g->bad_sequences = &s->seqs;
    }
    if (code < 0 && o->end_token.n) {
        int32_t *ends = NULL;
        uint32_t n = 0;
        for (unsigned i = 0; code < 0 && i < o->end_token.n; i++)
            code = value_ids(o, model, "--end-token", o->end_token.v[i], &ends, &n);
        if (code < 0 && n > VKF_MAX_END_IDS)
            code = cli_usage_error(o, "--end-token: %u end tokens; at most %u", n, VKF_MAX_END_IDS);
        for (uint32_t i = 0; code < 0 && i < n; i++) s->ends[i] = ends[i];
        free(ends);
        if (code < 0) g->end_ids = s->ends, g->n_end_ids = n;
    }
    if (code >= 0) return code;
    if (s->prefix) {
        /* the target language of a family that forces it as the first token leads
         * the prefix (generate() forces it only after the start alone) */
        if (text && g->forced_bos) {
            if (s->n_prefix + 1 + max_new > cfg.max_len)
                return cli_usage_error(o, "the target prefix (%u tokens and the language token) and --max-new %u pass "
                                       "the model's max_len %u", s->n_prefix, max_new, cfg.max_len);
            memmove(s->prefix + 1, s->prefix, s->n_prefix * sizeof *s->prefix);
            s->prefix[0] = g->forced_bos_id, s->n_prefix++;
            g->forced_bos = false;
        }
        s->prefix_ptr = s->prefix;
        s->prefix_seq = (vkf_sequences){1, &s->prefix_ptr, &s->n_prefix};
        g->target_prefix = &s->prefix_seq;
    }
    return -1;
}

int32_t *with_prefix(const decode_setup *s, const int32_t *ids, uint32_t n, uint32_t *out_n)
{
    int32_t *all = xmalloc(((size_t)s->n_prefix + n + 1) * sizeof *all);
    if (s->n_prefix) memcpy(all, s->prefix, s->n_prefix * sizeof *all);
    if (n) memcpy(all + s->n_prefix, ids, n * sizeof *all);
    *out_n = s->n_prefix + n;
    return all;
}

/* The forced first token that generate leaves unprinted (cli.h). */
int32_t forced_lead(const vkf_model *model, const decode_setup *s)
{
    vkf_generate_options g;
    if (s->with) g = s->g;
    else if (vkf_model_generate_defaults(model, &g) != VKF_OK) return -1;
    return g.forced_bos ? g.forced_bos_id : -1;
}

uint32_t lead_of(int32_t lead, const int32_t *row, uint32_t n) { return lead >= 0 && n && row[0] == lead; }

/* Hugging Face Marian (opus-mt) model folders, read as the hub stores them:
 * config.json, model.safetensors, source.spm and target.spm, vocab.json and
 * generation_config.json. The model follows transformers' MarianMTModel: post-LN
 * layers without final norms, separate q/k/v projections, Marian's sinusoidal
 * positions (sin in the first half of the channels, cos in the second), the
 * embedding scale, shared and tied embeddings, final_logits_bias, and the
 * activation the config names. Generation defaults come from
 * generation_config.json (or the generation keys of config.json). Text goes
 * through SentencePiece (tokenizer.h) and vocab.json, as MarianTokenizer does. */
#include "internal.h"
#include "model.h"
#include "model_load.h"
#include "families/tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HF_MAX_JSON (256u << 20)        /* vocab.json of a 250k vocabulary is ~6 MB */
#define HF_MAX_BANNED 64

typedef struct vkf_hf {
    vkf_spm *src_spm, *tgt_spm;
    char **piece;                       /* (n_pieces) vocab.json's entries by id, owned */
    uint32_t n_pieces;
    uint32_t *order;                    /* ids sorted by piece, for lookups */
    int32_t unk_id;
    vkf_generate_options gen;           /* generation_config.json's choices */
    int32_t banned[HF_MAX_BANNED];      /* bad_words_ids of one token each */
    uint32_t n_banned;
    bool forced_eos, renormalize;
    bool shared_embeddings, tied;       /* share_encoder_decoder_embeddings, tie_word_embeddings */
} vkf_hf;

void vkf_hf_free(vkf_hf *hf)
{
    if (!hf) return;
    vkf_spm_free(hf->src_spm);
    vkf_spm_free(hf->tgt_spm);
    for (uint32_t i = 0; hf->piece && i < hf->n_pieces; i++) free(hf->piece[i]);
    free(hf->piece);
    free(hf->order);
    free(hf);
}

/* ------------------------------------------------------------------ files */

static bool file_exists(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* dir/name parsed as JSON; NULL with a message unless `optional` and missing. */
static vkf_status read_json(const char *dir, const char *name, bool optional, json_t **out)
{
    *out = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (optional && errno == ENOENT) return VKF_OK;
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is missing (a Hugging Face Marian folder has config.json, "
                        "model.safetensors, source.spm, target.spm and vocab.json)", name);
    }
    if (!S_ISREG(sb.st_mode)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is not a regular file", name);
    if ((uint64_t)sb.st_size > HF_MAX_JSON)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is %llu bytes, more than the %u a JSON file here may have", name,
                        (unsigned long long)sb.st_size, HF_MAX_JSON);
    json_error_t err;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (!j) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is not valid JSON: %s (line %d)", name, err.text, err.line);
    if (!json_is_object(j)) {
        json_decref(j);
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s must hold a JSON object", name);
    }
    *out = j;
    return VKF_OK;
}

/* An integer key in [min, max]; `def` (>= 0) when absent, else required. */
static vkf_status get_int(json_t *o, const char *file, const char *key, int64_t min, int64_t max, int64_t def,
                          int64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        if (def >= 0) return *out = def, VKF_OK;
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: key \"%s\" is missing", file, key);
    }
    if (!json_is_integer(v)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must be an integer", file, key);
    json_int_t x = json_integer_value(v);
    if (x < min || x > max)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" is %lld, outside %lld..%lld", file, key, (long long)x,
                        (long long)min, (long long)max);
    *out = x;
    return VKF_OK;
}

static vkf_status get_bool(json_t *o, const char *file, const char *key, bool def, bool *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return *out = def, VKF_OK;
    if (!json_is_boolean(v)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must be true or false", file, key);
    *out = json_is_true(v);
    return VKF_OK;
}

static vkf_status get_float(json_t *o, const char *file, const char *key, double def, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return *out = def, VKF_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must be a finite number", file, key);
    *out = json_number_value(v);
    return VKF_OK;
}

/* ------------------------------------------------------------------ config.json */

static vkf_status parse_config(vkf_model *m, vkf_hf *hf, json_t *c)
{
    static const char F[] = "config.json";
    vkf_model_config *cfg = &m->cfg;
    json_t *type = json_object_get(c, "model_type");
    if (!json_is_string(type))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: key \"model_type\" is missing (a Marian model says \"marian\")");
    if (strcmp(json_string_value(type), "marian") != 0)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: model_type \"%s\" is not supported: vkformer runs Hugging "
                        "Face Marian models (model_type \"marian\"); T5 and BART are not implemented yet",
                        json_string_value(type));
    int64_t d = 0, el = 0, dl = 0, eh = 1, dh = 1, ef = 0, df = 0, v = 0, dv = 0, mp = 0, pad = 0, eos = 0, start = 0;
    VKF_TRY(get_int(c, F, "d_model", 1, 65536, -1, &d));
    VKF_TRY(get_int(c, F, "encoder_layers", 1, 1024, -1, &el));
    VKF_TRY(get_int(c, F, "decoder_layers", 1, 1024, -1, &dl));
    VKF_TRY(get_int(c, F, "encoder_attention_heads", 1, 4096, -1, &eh));
    VKF_TRY(get_int(c, F, "decoder_attention_heads", 1, 4096, -1, &dh));
    VKF_TRY(get_int(c, F, "encoder_ffn_dim", 1, 1 << 20, -1, &ef));
    VKF_TRY(get_int(c, F, "decoder_ffn_dim", 1, 1 << 20, -1, &df));
    VKF_TRY(get_int(c, F, "vocab_size", 1, 1 << 24, -1, &v));
    VKF_TRY(get_int(c, F, "decoder_vocab_size", 1, 1 << 24, v, &dv));
    VKF_TRY(get_int(c, F, "max_position_embeddings", 1, 1 << 16, -1, &mp));
    VKF_TRY(get_int(c, F, "pad_token_id", 0, INT32_MAX, -1, &pad));
    VKF_TRY(get_int(c, F, "eos_token_id", 0, INT32_MAX, -1, &eos));
    VKF_TRY(get_int(c, F, "decoder_start_token_id", 0, INT32_MAX, pad, &start));
    if (eh != dh || ef != df)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: the encoder and decoder differ in heads (%lld, %lld) or "
                        "ffn_dim (%lld, %lld); vkformer runs models where they agree", (long long)eh, (long long)dh,
                        (long long)ef, (long long)df);
    if (d % eh) return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: d_model %lld is not divisible by %lld heads",
                                (long long)d, (long long)eh);
    bool scale, before = false, final_norm = false, layernorm_embedding = false;
    VKF_TRY(get_bool(c, F, "scale_embedding", false, &scale));
    VKF_TRY(get_bool(c, F, "share_encoder_decoder_embeddings", true, &hf->shared_embeddings));
    VKF_TRY(get_bool(c, F, "tie_word_embeddings", true, &hf->tied));
    VKF_TRY(get_bool(c, F, "normalize_before", false, &before));
    VKF_TRY(get_bool(c, F, "add_final_layer_norm", false, &final_norm));
    VKF_TRY(get_bool(c, F, "normalize_embedding", false, &layernorm_embedding));
    if (before || final_norm || layernorm_embedding)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: \"%s\" is true; Marian models are post-LN without "
                        "final or embedding norms, and vkformer runs only those",
                        before ? "normalize_before" : final_norm ? "add_final_layer_norm" : "normalize_embedding");
    if (hf->shared_embeddings && dv != v)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: shared embeddings but decoder_vocab_size %lld differs "
                        "from vocab_size %lld", (long long)dv, (long long)v);
    json_t *act = json_object_get(c, "activation_function");
    const char *a = json_is_string(act) ? json_string_value(act) : NULL;
    if (!a) return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: key \"activation_function\" is missing");
    if (strcmp(a, "swish") == 0 || strcmp(a, "silu") == 0) cfg->activation = VKF_ACTIVATION_SILU;
    else if (strcmp(a, "gelu") == 0) cfg->activation = VKF_ACTIVATION_GELU;
    else if (strcmp(a, "relu") == 0) cfg->activation = VKF_ACTIVATION_RELU;
    else return vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: activation_function \"%s\" is not supported (swish, "
                         "silu, gelu and relu are)", a);
    if (pad >= dv || eos >= dv || start >= dv || pad >= v || eos >= v)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: pad_token_id %lld, eos_token_id %lld and "
                        "decoder_start_token_id %lld must be below the vocabulary sizes (%lld, %lld)", (long long)pad,
                        (long long)eos, (long long)start, (long long)v, (long long)dv);
    cfg->format = VKF_MODEL_MARIAN;
    cfg->d_model = (uint32_t)d, cfg->n_heads = (uint32_t)eh;
    cfg->n_encoder_layers = (uint32_t)el, cfg->n_decoder_layers = (uint32_t)dl;
    cfg->d_ff = (uint32_t)ef;
    cfg->norm_first = false;
    cfg->layer_norm_eps = 1e-5f;        /* nn.LayerNorm's default, which Marian keeps */
    cfg->src_vocab_size = (uint32_t)v, cfg->tgt_vocab_size = (uint32_t)dv;
    cfg->max_len = (uint32_t)mp;
    cfg->embed_scale = scale ? sqrtf((float)d) : 1.0f;
    cfg->pad_id = (int32_t)pad, cfg->eos_id = (int32_t)eos, cfg->bos_id = (int32_t)start;
    return VKF_OK;
}

/* ------------------------------------------------------------------ generation_config.json */

/* HF generate's defaults for this model: generation_config.json, or (older
 * folders) the same keys in config.json. Keys that would change the result and
 * that vkformer does not implement are refused rather than ignored. */
static vkf_status parse_generation(vkf_model *m, vkf_hf *hf, json_t *g, const char *F)
{
    vkf_model_config *cfg = &m->cfg;
    vkf_generate_options *o = &hf->gen;
    vkf_generate_options_init(o);
    int64_t beams = 1, max_length = 20, max_new = 0, min_length = 0, min_new = 0, nret = 1, start = 0, eos = 0, pad = 0;
    double lp = 1.0, rep = 1.0;
    VKF_TRY(get_int(g, F, "num_beams", 1, VKF_MAX_BEAMS, 1, &beams));
    VKF_TRY(get_int(g, F, "max_length", 2, INT32_MAX, 20, &max_length)); /* transformers' default */
    VKF_TRY(get_int(g, F, "max_new_tokens", 1, INT32_MAX, 0, &max_new));
    VKF_TRY(get_int(g, F, "min_length", 0, INT32_MAX, 0, &min_length));
    VKF_TRY(get_int(g, F, "min_new_tokens", 0, INT32_MAX, 0, &min_new));
    VKF_TRY(get_int(g, F, "num_return_sequences", 1, VKF_MAX_BEAMS, 1, &nret));
    VKF_TRY(get_float(g, F, "length_penalty", 1.0, &lp));
    VKF_TRY(get_float(g, F, "repetition_penalty", 1.0, &rep));
    VKF_TRY(get_bool(g, F, "renormalize_logits", false, &hf->renormalize));
    VKF_TRY(get_int(g, F, "decoder_start_token_id", 0, cfg->tgt_vocab_size - 1, cfg->bos_id, &start));
    VKF_TRY(get_int(g, F, "pad_token_id", 0, cfg->tgt_vocab_size - 1, cfg->pad_id, &pad));
    json_t *e = json_object_get(g, "eos_token_id");
    if (json_is_array(e) && json_array_size(e) == 1) e = json_array_get(e, 0);
    if (e && !json_is_null(e) && !json_is_integer(e))
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: \"eos_token_id\" must be one id (several are not supported)", F);
    eos = e && json_is_integer(e) ? json_integer_value(e) : cfg->eos_id;
    if (eos < 0 || eos >= cfg->tgt_vocab_size)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: eos_token_id %lld is outside the vocabulary", F, (long long)eos);
    json_t *es = json_object_get(g, "early_stopping");
    if (es && json_is_string(es))
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: early_stopping \"%s\" is not supported (true or false are)", F,
                        json_string_value(es));
    VKF_TRY(get_bool(g, F, "early_stopping", false, &o->early_stopping));
    bool sample = false;
    VKF_TRY(get_bool(g, F, "do_sample", false, &sample));
    if (sample)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: do_sample true is not taken as a default (pass sampling options "
                        "explicitly)", F);
    if (rep != 1.0)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: repetition_penalty %g is not implemented", F, rep);
    int64_t ngram = 0;
    VKF_TRY(get_int(g, F, "no_repeat_ngram_size", 0, INT32_MAX, 0, &ngram));
    if (ngram) return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: no_repeat_ngram_size %lld is not implemented", F, (long long)ngram);
    json_t *fb = json_object_get(g, "forced_bos_token_id");
    if (fb && !json_is_null(fb))
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: forced_bos_token_id is not implemented (multilingual targets)", F);
    json_t *fe = json_object_get(g, "forced_eos_token_id");
    if (fe && !json_is_null(fe)) {
        if (json_is_array(fe) && json_array_size(fe) == 1) fe = json_array_get(fe, 0);
        if (!json_is_integer(fe) || json_integer_value(fe) != eos)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: forced_eos_token_id must be eos_token_id %lld", F, (long long)eos);
        hf->forced_eos = true;
    }
    json_t *bad = json_object_get(g, "bad_words_ids");
    if (bad && !json_is_null(bad)) {
        if (!json_is_array(bad))
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"bad_words_ids\" must be a list of lists of ids", F);
        for (size_t i = 0; i < json_array_size(bad); i++) {
            json_t *w = json_array_get(bad, i);
            if (!json_is_array(w) || json_array_size(w) != 1 || !json_is_integer(json_array_get(w, 0)))
                return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: bad_words_ids entry %zu is not one id (only single-token "
                                "bans are implemented)", F, i);
            json_int_t id = json_integer_value(json_array_get(w, 0));
            if (id < 0 || id >= cfg->tgt_vocab_size)
                return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: bad_words_ids holds %lld, outside the vocabulary", F,
                                (long long)id);
            if (hf->n_banned == HF_MAX_BANNED)
                return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: more than %u bad_words_ids", F, HF_MAX_BANNED);
            if (id == eos) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: bad_words_ids bans eos", F);
            hf->banned[hf->n_banned++] = (int32_t)id;
        }
    }
    cfg->bos_id = (int32_t)start, cfg->eos_id = (int32_t)eos, cfg->pad_id = (int32_t)pad;
    /* max_length counts the decoder start token, as generate() does */
    uint64_t steps = max_new ? (uint64_t)max_new : (uint64_t)max_length - 1;
    o->max_new = (uint32_t)(steps < cfg->max_len ? steps : cfg->max_len);
    uint64_t mn = min_new ? (uint64_t)min_new : (min_length > 1 ? (uint64_t)min_length - 1 : 0);
    o->min_new = (uint32_t)(mn < o->max_new ? mn : o->max_new);
    o->beams = (uint32_t)beams;
    o->n_best = (uint32_t)(nret <= beams ? nret : beams);
    o->length_penalty = (float)lp;
    o->forced_eos = hf->forced_eos;
    o->renormalize = hf->renormalize;
    return VKF_OK;
}

/* ------------------------------------------------------------------ vocab.json */

static const vkf_hf *sort_hf;

static int by_piece(const void *a, const void *b)
{
    return strcmp(sort_hf->piece[*(const uint32_t *)a], sort_hf->piece[*(const uint32_t *)b]);
}

static int32_t piece_id(const vkf_hf *hf, const char *p, size_t len)
{
    uint32_t lo = 0, hi = hf->n_pieces;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const char *q = hf->piece[hf->order[mid]];
        int c = strncmp(q, p, len);
        if (c == 0) c = q[len] ? 1 : 0;
        if (c == 0) return (int32_t)hf->order[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static vkf_status parse_vocab(vkf_model *m, vkf_hf *hf, json_t *v)
{
    uint32_t n = (uint32_t)json_object_size(v);
    if (n != m->cfg.src_vocab_size || n != m->cfg.tgt_vocab_size)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "vocab.json has %u entries; config.json says vocab_size %u%s", n,
                        m->cfg.src_vocab_size,
                        m->cfg.src_vocab_size != m->cfg.tgt_vocab_size ? " (separate target vocabularies are not "
                                                                         "supported)" : "");
    hf->piece = calloc(n, sizeof *hf->piece);
    hf->order = malloc(n * sizeof *hf->order);
    if (!hf->piece || !hf->order) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for vocab.json");
    hf->n_pieces = n;
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= n)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "vocab.json: \"%s\" maps to %s; ids must be integers 0..%u", key,
                            json_is_integer(val) ? "an id out of range" : "a non-integer", n - 1);
        uint32_t id = (uint32_t)json_integer_value(val);
        if (hf->piece[id]) return vkf_fail(VKF_ERROR_BAD_MODEL, "vocab.json: id %u is given twice", id);
        if (!(hf->piece[id] = strdup(key))) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (uint32_t i = 0; i < n; i++) hf->order[i] = i;
    sort_hf = hf;
    qsort(hf->order, n, sizeof *hf->order, by_piece);
    sort_hf = NULL;
    const struct { const char *piece; int32_t id; const char *what; } specials[] = {
        {"</s>", m->cfg.eos_id, "eos_token_id"}, {"<pad>", m->cfg.pad_id, "pad_token_id"}};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        if (piece_id(hf, specials[i].piece, strlen(specials[i].piece)) != specials[i].id)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "vocab.json: \"%s\" is not id %d, the config's %s", specials[i].piece,
                            specials[i].id, specials[i].what);
    hf->unk_id = piece_id(hf, "<unk>", 5);
    if (hf->unk_id < 0) return vkf_fail(VKF_ERROR_BAD_MODEL, "vocab.json has no \"<unk>\"");
    return VKF_OK;
}

/* Every ordinary piece of an spm must have an id in vocab.json, as in the folders
 * Marian's converter writes (vocab.json is the union of both models' pieces). */
static vkf_status check_spm(const vkf_hf *hf, const vkf_spm *s, const char *name)
{
    for (uint32_t i = 0; i < vkf_spm_size(s); i++) {
        int kind = 0;
        const char *p = vkf_spm_piece(s, i, &kind);
        if (p && kind == VKF_SPM_NORMAL && piece_id(hf, p, strlen(p)) < 0)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "vocab.json disagrees with %s: its piece \"%s\" has no id", name, p);
    }
    return VKF_OK;
}

static vkf_status load_spm(const char *dir, const char *name, vkf_spm **out)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!file_exists(dir, name)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is missing (the SentencePiece model)", name);
    *out = vkf_spm_load(path, err, sizeof err);
    if (!*out) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s", err);
    return VKF_OK;
}

/* ------------------------------------------------------------------ open */

vkf_status vkf_hf_open(vkf_model *m, const char *dir, loader *L)
{
    vkf_hf *hf = calloc(1, sizeof *hf);
    if (!hf) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    m->hf = hf;
    json_t *cfg = NULL, *gen = NULL, *vocab = NULL;
    vkf_status st = read_json(dir, "config.json", false, &cfg);
    if (st == VKF_OK) st = parse_config(m, hf, cfg);
    if (st == VKF_OK) st = read_json(dir, "generation_config.json", true, &gen);
    if (st == VKF_OK) st = parse_generation(m, hf, gen ? gen : cfg, gen ? "generation_config.json" : "config.json");
    if (st == VKF_OK) st = read_json(dir, "vocab.json", false, &vocab);
    if (st == VKF_OK) st = parse_vocab(m, hf, vocab);
    if (st == VKF_OK) st = load_spm(dir, "source.spm", &hf->src_spm);
    if (st == VKF_OK) st = load_spm(dir, "target.spm", &hf->tgt_spm);
    if (st == VKF_OK) st = check_spm(hf, hf->src_spm, "source.spm");
    if (st == VKF_OK) st = check_spm(hf, hf->tgt_spm, "target.spm");
    json_decref(cfg), json_decref(gen), json_decref(vocab);
    if (st != VKF_OK) return st;
    m->cfg.has_vocab = true;
    if (!file_exists(dir, "model.safetensors")) {
        if (file_exists(dir, "pytorch_model.bin"))
            return vkf_fail(VKF_ERROR_BAD_MODEL, "model.safetensors is missing; the folder has pytorch_model.bin: "
                            "convert it once with /usr/bin/python3 tools/convert_hf.py %s", dir);
        return vkf_fail(VKF_ERROR_BAD_MODEL, "model.safetensors is missing");
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    st = vkf_st_open(path, &L->file);
    if (st == VKF_ERROR_BAD_MODEL) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vkf_last_error());
        st = vkf_fail(st, "model.safetensors: %s", msg);
    }
    return st;
}

/* ------------------------------------------------------------------ weights */

/* The first of `names` the file holds, or NULL. */
static const char *first_present(const loader *L, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] && vkf_st_find(L->file, names[i])) return names[i];
    return NULL;
}

/* Marian's table: channel j < ceil(d/2) is sin(pos / 10000^(2j/d)), channel
 * ceil(d/2) + j is cos(pos / 10000^(2j/d)), in double, rounded once. */
static vkf_status marian_positions(loader *L, const char *name, vkf_tensor **out)
{
    const vkf_model_config *c = &L->m->cfg;
    uint32_t n = c->max_len, d = c->d_model, half = (d + 1) / 2;
    if (vkf_st_find(L->file, name)) {
        /* the checkpoint's own table, as transformers loads it */
        const vkf_st_tensor *t = NULL;
        const float *data = NULL;
        VKF_TRY(vkf_ld_find(L, name, n, d, &t));
        VKF_TRY(vkf_ld_floats(L, t, &data));
        if (L->dry_run) return VKF_OK;
        uint64_t shape[2] = {n, d};
        VKF_TRY(vkf_tensor_create(L->m->ctx, VKF_DTYPE_F32, 2, shape, out));
        return vkf_tensor_upload(*out, data, (uint64_t)n * d * sizeof *data);
    }
    if (L->dry_run) return VKF_OK;
    float *table = malloc((size_t)n * d * sizeof *table);
    if (!table) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for the positions");
    for (uint32_t pos = 0; pos < n; pos++)
        for (uint32_t j = 0; j < d; j++) {
            uint32_t k = j < half ? j : j - half;
            double angle = (double)pos / pow(10000.0, 2.0 * k / (double)d);
            table[(size_t)pos * d + j] = (float)(j < half ? sin(angle) : cos(angle));
        }
    uint64_t shape[2] = {n, d};
    vkf_status st = vkf_tensor_create(L->m->ctx, VKF_DTYPE_F32, 2, shape, out);
    if (st == VKF_OK) st = vkf_tensor_upload(*out, table, (uint64_t)n * d * sizeof *table);
    free(table);
    return st;
}

/* prefix + {q,k,v}_proj stacked (3d or 2d rows), or one of them. */
static vkf_status load_proj(loader *L, const char *prefix, const char *const *which, uint32_t n, linear *out)
{
    char w[3][256], b[3][256];
    const char *wn[3], *bn[3];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(w[i], sizeof w[i], "%s%s_proj.weight", prefix, which[i]);
        snprintf(b[i], sizeof b[i], "%s%s_proj.bias", prefix, which[i]);
        wn[i] = w[i], bn[i] = b[i];
    }
    uint32_t d = L->m->cfg.d_model;
    return vkf_ld_stacked(L, wn, bn, n, d, d, out);
}

vkf_status vkf_hf_load_weights(loader *L)
{
    vkf_model *m = L->m;
    vkf_hf *hf = m->hf;
    const vkf_model_config *c = &m->cfg;
    uint32_t d = c->d_model, f = c->d_ff, V = c->tgt_vocab_size;
    static const char *const qkv[3] = {"q", "k", "v"}, *const kv[2] = {"k", "v"}, *const o[1] = {"out"};
    /* Embeddings: transformers ties model.shared, both embed_tokens and lm_head,
     * and a saved file holds any one of the tied names. */
    const char *enc_names[] = {"model.shared.weight", "model.encoder.embed_tokens.weight",
                               hf->shared_embeddings ? "model.decoder.embed_tokens.weight" : NULL,
                               hf->shared_embeddings && hf->tied ? "lm_head.weight" : NULL};
    const char *src_name = first_present(L, enc_names, 4);
    if (!src_name)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"model.shared.weight\" is missing (nor is it stored as "
                        "model.encoder.embed_tokens.weight)");
    VKF_TRY(vkf_ld_table(L, src_name, c->src_vocab_size, d, &m->src_embed));
    for (size_t i = 0; i < 4; i++) { /* the tied copies: the same shape, not loaded twice */
        const vkf_st_tensor *t;
        if (enc_names[i] && enc_names[i] != src_name && vkf_st_find(L->file, enc_names[i]))
            VKF_TRY(vkf_ld_find(L, enc_names[i], c->src_vocab_size, d, &t));
    }
    const char *tgt_name = src_name;
    if (hf->shared_embeddings) {
        m->tgt_embed = m->src_embed;
        m->tgt_embed.part = malloc(m->src_embed.parts * sizeof *m->tgt_embed.part);
        if (!m->tgt_embed.part) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        memcpy(m->tgt_embed.part, m->src_embed.part, m->src_embed.parts * sizeof *m->tgt_embed.part);
        m->tgt_embed.scale = NULL;
        m->tgt_embed.borrowed = true;
        if (m->src_embed.scale) { /* int8: the scales are shared too */
            m->tgt_embed.scale = malloc(m->src_embed.parts * sizeof *m->tgt_embed.scale);
            if (!m->tgt_embed.scale) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
            memcpy(m->tgt_embed.scale, m->src_embed.scale, m->src_embed.parts * sizeof *m->tgt_embed.scale);
        }
    } else {
        const char *dec_names[] = {"model.decoder.embed_tokens.weight", hf->tied ? "lm_head.weight" : NULL};
        tgt_name = first_present(L, dec_names, 2);
        if (!tgt_name) return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"model.decoder.embed_tokens.weight\" is missing");
        VKF_TRY(vkf_ld_table(L, tgt_name, V, d, &m->tgt_embed));
        const vkf_st_tensor *t;
        if (tgt_name != dec_names[1] && dec_names[1] && vkf_st_find(L->file, dec_names[1]))
            VKF_TRY(vkf_ld_find(L, dec_names[1], V, d, &t));
    }
    VKF_TRY(marian_positions(L, "model.encoder.embed_positions.weight", &m->pe));
    VKF_TRY(marian_positions(L, "model.decoder.embed_positions.weight", &m->pe_dec));
    char p[160];
    for (uint32_t i = 0; i < c->n_encoder_layers; i++) {
        enc_layer *e = &m->enc[i];
        snprintf(p, sizeof p, "model.encoder.layers.%u.self_attn.", i);
        VKF_TRY(load_proj(L, p, qkv, 3, &e->qkv));
        VKF_TRY(load_proj(L, p, o, 1, &e->o));
        snprintf(p, sizeof p, "model.encoder.layers.%u.", i);
        VKF_TRY(vkf_ld_linear(L, p, "fc1.weight", "fc1.bias", f, d, 0, f, &e->ff1));
        VKF_TRY(vkf_ld_linear(L, p, "fc2.weight", "fc2.bias", d, f, 0, d, &e->ff2));
        snprintf(p, sizeof p, "model.encoder.layers.%u.self_attn_layer_norm", i);
        VKF_TRY(vkf_ld_norm(L, p, d, &e->n1));
        snprintf(p, sizeof p, "model.encoder.layers.%u.final_layer_norm", i);
        VKF_TRY(vkf_ld_norm(L, p, d, &e->n2));
    }
    for (uint32_t i = 0; i < c->n_decoder_layers; i++) {
        dec_layer *e = &m->dec[i];
        snprintf(p, sizeof p, "model.decoder.layers.%u.self_attn.", i);
        VKF_TRY(load_proj(L, p, qkv, 3, &e->qkv));
        VKF_TRY(load_proj(L, p, o, 1, &e->o));
        snprintf(p, sizeof p, "model.decoder.layers.%u.encoder_attn.", i);
        VKF_TRY(load_proj(L, p, qkv, 1, &e->cq));
        VKF_TRY(load_proj(L, p, kv, 2, &e->ckv));
        VKF_TRY(load_proj(L, p, o, 1, &e->co));
        snprintf(p, sizeof p, "model.decoder.layers.%u.", i);
        VKF_TRY(vkf_ld_linear(L, p, "fc1.weight", "fc1.bias", f, d, 0, f, &e->ff1));
        VKF_TRY(vkf_ld_linear(L, p, "fc2.weight", "fc2.bias", d, f, 0, d, &e->ff2));
        static const char *const norms[3] = {"self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"};
        norm *dst[3] = {&e->n1, &e->n2, &e->n3};
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "model.decoder.layers.%u.%s", i, norms[k]);
            VKF_TRY(vkf_ld_norm(L, p, d, dst[k]));
        }
    }
    /* The generator: lm_head (tied: the target embedding's parts) + final_logits_bias */
    const char *head = hf->tied ? tgt_name : "lm_head.weight";
    const vkf_st_tensor *bt = NULL;
    const float *bias = NULL;
    VKF_TRY(vkf_ld_find(L, "final_logits_bias", 1, V, &bt));
    float *b = malloc((size_t)V * sizeof *b);
    if (!b) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    vkf_status st = vkf_ld_floats(L, bt, &bias);
    if (st == VKF_OK) memcpy(b, bias, (size_t)V * sizeof *b);
    m->gen_parts = m->tgt_embed.parts;
    if (st == VKF_OK && !(m->gen = calloc(m->gen_parts, sizeof *m->gen)))
        st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    uint32_t per = m->tgt_embed.rows_per_part;
    for (uint32_t i = 0; st == VKF_OK && i < m->gen_parts; i++) {
        linear *g = &m->gen[i];
        uint32_t r0 = i * per, n = V - r0 < per ? V - r0 : per;
        g->out = n, g->in = d;
        if (hf->tied) {
            /* the target embedding's parts, with its per-row scales under int8 (one
             * scale per token row: the generator's output channels) */
            g->w = m->tgt_embed.part[i], g->w_borrowed = true;
            g->scale = m->tgt_embed.scale ? m->tgt_embed.scale[i] : NULL;
        } else if (L->precision == VKF_PRECISION_INT8) {
            st = vkf_ld_matrix_i8(L, head, V, d, r0, n, &g->w, &g->scale);
        } else {
            st = vkf_ld_matrix(L, head, V, d, r0, n, &g->w);
        }
        if (st == VKF_OK && !L->dry_run) {
            uint64_t shape = n;
            st = vkf_tensor_create(m->ctx, VKF_DTYPE_F32, 1, &shape, &g->b);
            if (st == VKF_OK) st = vkf_tensor_upload(g->b, b + r0, (uint64_t)n * sizeof *b);
            /* generation bans bad_words_ids: -inf before the softmax, which is
             * what HF's ban followed by renormalize_logits gives */
            bool any = false;
            for (uint32_t k = 0; k < hf->n_banned; k++)
                if ((uint32_t)hf->banned[k] >= r0 && (uint32_t)hf->banned[k] < r0 + n) any = true;
            if (st == VKF_OK && any) {
                float *bb = malloc((size_t)n * sizeof *bb);
                st = bb ? vkf_tensor_create(m->ctx, VKF_DTYPE_F32, 1, &shape, &g->b_gen)
                        : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
                if (st == VKF_OK) {
                    memcpy(bb, b + r0, (size_t)n * sizeof *bb);
                    for (uint32_t k = 0; k < hf->n_banned; k++)
                        if ((uint32_t)hf->banned[k] >= r0 && (uint32_t)hf->banned[k] < r0 + n) bb[hf->banned[k] - r0] = -INFINITY;
                    st = vkf_tensor_upload(g->b_gen, bb, (uint64_t)n * sizeof *bb);
                }
                free(bb);
            }
        }
    }
    free(b);
    VKF_TRY(st);
    if (!hf->tied) {
        const vkf_st_tensor *t;
        VKF_TRY(vkf_ld_find(L, "lm_head.weight", V, d, &t));
    }
    char hint[128];
    snprintf(hint, sizeof hint, "config.json says %u encoder and %u decoder layers of a MarianMTModel",
             c->n_encoder_layers, c->n_decoder_layers);
    return vkf_ld_check_unexpected(L, hint);
}

/* ------------------------------------------------------------------ text */

typedef struct encode_state {
    const vkf_hf *hf;
    int32_t *ids;
    uint32_t n, capacity;
} encode_state;

static int add_piece(const char *piece, size_t len, void *user)
{
    encode_state *e = user;
    if (e->n >= e->capacity) return 1;
    int32_t id = piece_id(e->hf, piece, len);
    e->ids[e->n++] = id < 0 ? e->hf->unk_id : id; /* MarianTokenizer: unknown pieces are <unk> */
    return 0;
}

vkf_status vkf_hf_encode(const vkf_model *m, const char *text, int32_t *out_ids, uint32_t capacity, uint32_t *out_count)
{
    const vkf_hf *hf = m->hf;
    char err[512];
    encode_state e = {hf, out_ids, 0, capacity};
    int rc = vkf_spm_encode(hf->src_spm, text, add_piece, &e, err, sizeof err);
    if (rc < 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "tokenizing: %s", err);
    if (rc > 0 || e.n >= capacity)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity ? capacity - 1 : 0);
    out_ids[e.n++] = m->cfg.eos_id;
    *out_count = e.n;
    return VKF_OK;
}

vkf_status vkf_hf_decode(const vkf_model *m, const int32_t *ids, uint32_t count, char *out_text, size_t capacity)
{
    const vkf_hf *hf = m->hf;
    const char **pieces = malloc((count ? count : 1) * sizeof *pieces);
    if (!pieces) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    size_t n = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= hf->n_pieces) {
            free(pieces);
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "id %d is outside the target vocabulary", ids[i]);
        }
        /* skip_special_tokens: eos, pad and unk, as MarianTokenizer.decode */
        if (ids[i] == m->cfg.eos_id || ids[i] == m->cfg.pad_id || ids[i] == hf->unk_id) continue;
        pieces[n++] = hf->piece[ids[i]];
    }
    char *text = NULL, err[512];
    int rc = vkf_spm_decode(hf->tgt_spm, pieces, n, &text, err, sizeof err);
    free(pieces);
    if (rc < 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "detokenizing: %s", err);
    /* as MarianTokenizer.convert_tokens_to_string: any "\u2581" left (pieces the
     * spm does not know come back verbatim) becomes a space, and the ends are
     * stripped of whitespace */
    size_t w = 0;
    for (size_t r = 0; text[r];) {
        if ((unsigned char)text[r] == 0xe2 && (unsigned char)text[r + 1] == 0x96 && (unsigned char)text[r + 2] == 0x81)
            text[w++] = ' ', r += 3;
        else
            text[w++] = text[r++];
    }
    text[w] = '\0';
    size_t start = 0;
    while (text[start] && strchr(" \t\n\r\f\v", text[start])) start++;
    while (w > start && strchr(" \t\n\r\f\v", text[w - 1])) text[--w] = '\0';
    memmove(text, text + start, w - start + 1);
    size_t len = strlen(text);
    vkf_status st = VKF_OK;
    if (len + 1 > capacity) st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text needs more than %zu bytes", capacity);
    else memcpy(out_text, text, len + 1);
    free(text);
    return st;
}

vkf_status vkf_hf_generate_defaults(const vkf_model *m, vkf_generate_options *out)
{
    *out = m->hf->gen;
    return VKF_OK;
}

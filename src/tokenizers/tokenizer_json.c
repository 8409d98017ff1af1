/* Hugging Face tokenizer.json: the reader (every component checked at load, each
 * refusal one line naming its JSON path) and the pipeline that runs it as
 * tokenizers 0.23 does (tokenizer_json.h says what is promised).
 *
 * How tokenizers encodes one text, and so how this file does:
 *   1. added tokens that are not `normalized` are found in the raw text (longest
 *      leftmost match, then single_word / lstrip / rstrip); the text between
 *      them forms splits;
 *   2. each split is normalized, and the `normalized` added tokens are found in
 *      the result;
 *   3. the pre-tokenizer cuts the remaining splits further (empty ones vanish);
 *   4. the model (BPE or Unigram) turns each split into ids;
 *   5. with add_special, the post-processor wraps the ids (template, RoBERTa,
 *      BERT).
 * A split is a "normalized string": its bytes and, per byte, the offset in the
 * input that it aligns to, kept the way tokenizers' NormalizedString keeps its
 * alignments. The one thing that reads them is Metaspace's prepend_scheme
 * "first", which prepends only to a split whose first byte aligns to offset 0.
 *
 * Unicode: Oniguruma (the regex engine tokenizers uses) runs every regex,
 * including the built-in ones of Whitespace and ByteLevel; utf8proc gives
 * normalization forms, grapheme clusters, general categories and lower case.
 * Decoding goes token strings -> decoder chain -> one string, as tokenizers'
 * decode_chain. */
#include "tokenizers/pipeline.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

static vkf_status load_model(const ld *L, const json_t *j, model *m)
{
    memset(m, 0, sizeof *m);
    const char *type;
    if (!j) return tj_bad(L, "model is missing");
    VKF_TRY(tj_get_type(L, j, "model", &type));
    if (strcmp(type, "BPE") == 0) return tj_load_bpe(L, j, "model", m);
    if (strcmp(type, "Unigram") == 0) return tj_load_unigram(L, j, "model", m);
    return tj_unsupported(L, "model", type);
}

/* ================================================================ tokenizer */

void vkf_hftok_free(vkf_hftok *t)
{
    if (!t) return;
    tj_model_free(&t->m);
    tj_norm_free(&t->normalizer);
    tj_pretok_free(&t->pre);
    tj_postproc_free(&t->post);
    tj_decoder_free(&t->dec);
    for (size_t i = 0; i < t->n_added; i++) free(t->added[i].content), free(t->added[i].shown);
    free(t->added);
    free(t->added_map.slots);
    free(t->added_by_id.slots);
    free(t->special.slots);
    tj_trie_free(&t->raw_trie);
    tj_trie_free(&t->norm_trie);
    free(t);
}
/* A component that may be null or absent. */
static const json_t *optional(const json_t *root, const char *key)
{
    const json_t *v = json_object_get(root, key);
    return v && !json_is_null(v) ? v : NULL;
}

static vkf_status load_root(const ld *L, const json_t *root, vkf_hftok *t)
{
    if (!json_is_object(root)) return tj_bad(L, "the file is %s, not a JSON object", tj_jtype(root));
    for (const char *const *k = (const char *const[]){"truncation", "padding", NULL}; *k; k++) {
        /* read by transformers, which turns them off unless a call asks: vkformer
         * applies neither */
        const json_t *v = optional(root, *k);
        if (v && !json_is_object(v)) return tj_bad(L, "%s is %s, not an object or null", *k, tj_jtype(v));
    }
    VKF_TRY(load_model(L, json_object_get(root, "model"), &t->m));
    const json_t *v;
    if ((v = optional(root, "normalizer"))) {
        t->has_norm = true;
        VKF_TRY(tj_load_norm(L, v, "normalizer", 0, &t->normalizer));
    }
    if ((v = optional(root, "pre_tokenizer"))) {
        t->has_pre = true;
        VKF_TRY(tj_load_pretok(L, v, "pre_tokenizer", 0, &t->pre));
    }
    if ((v = optional(root, "post_processor"))) {
        t->has_post = true;
        VKF_TRY(tj_load_postproc(L, v, "post_processor", 0, &t->post));
    }
    if ((v = optional(root, "decoder"))) {
        t->has_dec = true;
        VKF_TRY(tj_load_decoder(L, v, "decoder", 0, &t->dec));
    }
    return tj_load_added(L, root, t);
}

static vkf_status load_json(const char *name, const char *json, size_t len, vkf_hftok **out)
{
    ld L = {name};
    if (len > VKF_HFTOK_MAX_FILE_BYTES)
        return tj_bad(&L, "%zu bytes, more than the %u accepted", len, VKF_HFTOK_MAX_FILE_BYTES);
    json_error_t jerr;
    json_t *root = json_loadb(json ? json : "", len, JSON_ALLOW_NUL, &jerr);
    if (!root) {
        char qb[200];
        return tj_bad(&L, "not JSON (line %d, column %d: %s)", jerr.line, jerr.column,
                   tj_quote(qb, sizeof qb, jerr.text, strlen(jerr.text)) + 0);
    }
    vkf_hftok *t = calloc(1, sizeof *t);
    if (!t) {
        json_decref(root);
        return OOM();
    }
    vkf_status st = load_root(&L, root, t);
    json_decref(root);
    if (st != VKF_OK) {
        vkf_hftok_free(t);
        return st;
    }
    *out = t;
    return VKF_OK;
}

vkf_status vkf_hftok_load_value(const char *name, const struct json_t *root, vkf_hftok **out)
{
    if (!out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load_value: out is NULL");
    *out = NULL;
    if (!root || !name) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load_value: %s is NULL",
                                        root ? "name" : "root");
    ld L = {name};
    vkf_hftok *t = calloc(1, sizeof *t);
    if (!t) return OOM();
    vkf_status st = load_root(&L, root, t);
    if (st != VKF_OK) {
        vkf_hftok_free(t);
        return st;
    }
    *out = t;
    return VKF_OK;
}

vkf_status vkf_hftok_load_bytes(const char *json, size_t len, vkf_hftok **out)
{
    if (!out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load_bytes: out is NULL");
    *out = NULL;
    if (!json && len) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load_bytes: json is NULL");
    return load_json("tokenizer.json", json, len, out);
}

vkf_status vkf_hftok_load(const char *path, vkf_hftok **out)
{
    if (!out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load: out is NULL");
    *out = NULL;
    if (!path) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return vkf_fail(VKF_ERROR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return vkf_fail(VKF_ERROR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > VKF_HFTOK_MAX_FILE_BYTES) {
        fclose(f);
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %lld bytes, more than the %u accepted", path,
                        (long long)st.st_size, VKF_HFTOK_MAX_FILE_BYTES);
    }
    size_t size = (size_t)st.st_size;
    char *data = malloc(size ? size : 1);
    if (!data) {
        fclose(f);
        return OOM();
    }
    size_t got = fread(data, 1, size, f);
    bool err = ferror(f);
    fclose(f);
    if (err || got != size) {
        free(data);
        return vkf_fail(VKF_ERROR_IO, "%s: read failed", path);
    }
    vkf_status s = load_json(path, data, size, out);
    free(data);
    return s;
}

/* ---- encoding */

/* Splits of the split list's nstr n at the tokens of tr: a token's split carries
 * its id. Takes n. */
static vkf_status add_token_splits(const vkf_hftok *t, const trie *tr, nstr *n, splits *out, amatch **m, size_t *m_cap)
{
    size_t nm;
    vkf_status st = tj_added_matches(t->added, tr, n->s, n->len, m, &nm, m_cap);
    for (size_t i = 0; i < nm && st == VKF_OK; i++) {
        nstr part;
        if (!tj_nstr_slice(&part, n, (*m)[i].start, (*m)[i].end) ||
            !tj_splits_add(out, &part, (*m)[i].idx >= 0 ? t->added[(*m)[i].idx].id : -1)) {
            tj_nstr_free(&part);
            st = OOM();
        }
    }
    tj_nstr_free(n);
    return st;
}

static vkf_status encode_splits(const vkf_hftok *t, const char *text, size_t len, splits *s)
{
    amatch *m = NULL;
    size_t m_cap = 0;
    nstr all;
    VKF_TRY(tj_nstr_from_input(&all, text, len));
    /* 1. tokens that are not normalized, in the raw text */
    vkf_status st = add_token_splits(t, &t->raw_trie, &all, s, &m, &m_cap);
    /* 2. normalize the rest, and find the normalized tokens there */
    if (st == VKF_OK) {
        splits out = {0};
        for (size_t i = 0; i < s->n && st == VKF_OK; i++) {
            if (s->v[i].id >= 0) {
                if (!tj_grow((void **)&out.v, &out.cap, out.n + 1, sizeof *out.v)) st = OOM();
                else out.v[out.n++] = s->v[i];
                memset(&s->v[i].ns, 0, sizeof s->v[i].ns);
                continue;
            }
            if (t->has_norm) st = tj_norm_apply(&t->normalizer, &s->v[i].ns);
            if (st == VKF_OK) {
                nstr n = s->v[i].ns;
                memset(&s->v[i].ns, 0, sizeof s->v[i].ns);
                st = add_token_splits(t, &t->norm_trie, &n, &out, &m, &m_cap);
            }
        }
        tj_splits_free(s);
        *s = out;
    }
    free(m);
    /* 3. pre-tokenize */
    if (st == VKF_OK && t->has_pre) st = tj_pretok_apply(&t->pre, s);
    return st;
}

vkf_status vkf_hftok_encode(const vkf_hftok *t, const char *text, size_t len, bool add_special, int32_t **out_ids,
                            uint32_t *out_count)
{
    if (out_ids) *out_ids = NULL;
    if (out_count) *out_count = 0;
    if (!t || !out_ids || !out_count || (!text && len))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_encode: %s is NULL",
                        !t ? "the tokenizer" : !out_ids ? "out_ids" : !out_count ? "out_count" : "text");
    if (len > VKF_HFTOK_MAX_INPUT_BYTES)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "vkf_hftok_encode: %zu bytes of text, more than the %zu accepted", len,
                        VKF_HFTOK_MAX_INPUT_BYTES);
    buf clean = {0};
    if (!tj_u8_valid(text ? text : "", len)) {
        if (!tj_u8_lossy(&clean, text, len)) {
            free(clean.b);
            return OOM();
        }
        text = clean.b;
        len = clean.n;
    }
    splits s = {0};
    ids out = {0};
    vkf_status st = encode_splits(t, text ? text : "", len, &s);
    /* 4. the model */
    buf scratch = {0};
    word w = {0};
    node *best = NULL;
    size_t best_cap = 0;
    for (size_t i = 0; i < s.n && st == VKF_OK; i++) {
        if (s.v[i].id >= 0) st = tj_ids_add(&out, s.v[i].id) ? VKF_OK : OOM();
        else if (t->m.kind == M_BPE) st = tj_bpe_tokenize(&t->m, s.v[i].ns.s, s.v[i].ns.len, &out, &scratch, &w);
        else st = tj_unigram_tokenize(&t->m, s.v[i].ns.s, s.v[i].ns.len, &out, &best, &best_cap);
    }
    free(scratch.b), free(w.v), free(best);
    tj_splits_free(&s);
    free(clean.b);
    /* 5. post-process */
    if (st == VKF_OK && add_special && t->has_post) st = tj_postproc_apply(&t->post, &out);
    if (st == VKF_OK && out.n > UINT32_MAX) st = vkf_fail(VKF_ERROR_TOO_LARGE, "vkf_hftok_encode: too many tokens");
    if (st != VKF_OK) {
        free(out.v);
        return st;
    }
    if (out.n == 0) {
        free(out.v);
        out.v = NULL;
    }
    *out_ids = out.v;
    *out_count = (uint32_t)out.n;
    return VKF_OK;
}

/* ---- decoding and lookups */

static bool token_of(const vkf_hftok *t, int32_t id, const char **s, size_t *n)
{
    uint64_t k;
    if (id < 0) return false;
    if (tj_umap_get(&t->added_by_id, (uint64_t)id, &k)) {
        *s = t->added[k].shown;
        *n = t->added[k].shown_len;
        return true;
    }
    if ((size_t)id < t->m.n_ids && t->m.tok[id]) {
        *s = t->m.tok[id];
        *n = t->m.tok_len[id];
        return true;
    }
    return false;
}

vkf_status vkf_hftok_decode_n(const vkf_hftok *t, const int32_t *id_list, uint32_t n, bool skip_special,
                              char **out_text, size_t *out_len)
{
    if (out_text) *out_text = NULL;
    if (out_len) *out_len = 0;
    if (!t || !out_text || (!id_list && n))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_decode: %s is NULL",
                        !t ? "the tokenizer" : !out_text ? "out_text" : "ids");
    toks tk = {0};
    for (uint32_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if (!token_of(t, id_list[i], &s, &len)) continue;
        if (skip_special && tj_smap_get(&t->special, s, len) >= 0) continue;
        if (!tj_toks_add(&tk, s, len)) {
            tj_toks_free(&tk);
            return OOM();
        }
    }
    vkf_status st = t->has_dec ? tj_decoder_apply(&t->dec, &tk) : VKF_OK;
    buf o = {0};
    for (size_t i = 0; i < tk.n && st == VKF_OK; i++)
        if ((!t->has_dec && i > 0 && !tj_buf_put(&o, " ", 1)) || !tj_buf_put(&o, tk.v[i].b, tk.v[i].n)) st = OOM();
    tj_toks_free(&tk);
    if (st == VKF_OK && !o.b && !tj_buf_put(&o, "", 0)) st = OOM();
    if (st != VKF_OK) {
        free(o.b);
        return st;
    }
    *out_text = o.b;
    if (out_len) *out_len = o.n;
    return VKF_OK;
}

vkf_status vkf_hftok_decode(const vkf_hftok *t, const int32_t *ids, uint32_t n, bool skip_special, char **out_text)
{
    return vkf_hftok_decode_n(t, ids, n, skip_special, out_text, NULL);
}

int32_t vkf_hftok_token_id(const vkf_hftok *t, const char *token)
{
    if (!t || !token) return -1;
    size_t n = strlen(token);
    int32_t id = tj_smap_get(&t->added_map, token, n);
    return id >= 0 ? id : tj_model_token_id(&t->m, token, n);
}

const char *vkf_hftok_token(const vkf_hftok *t, int32_t id)
{
    const char *s;
    size_t n;
    return t && token_of(t, id, &s, &n) ? s : NULL;
}

uint32_t vkf_hftok_vocab_size(const vkf_hftok *t) { return t ? t->vocab_size : 0; }

bool vkf_hftok_is_special(const vkf_hftok *t, int32_t id)
{
    const char *s;
    size_t n;
    return t && token_of(t, id, &s, &n) && tj_smap_get(&t->special, s, n) >= 0;
}

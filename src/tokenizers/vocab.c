/* Vocabulary files of slow Hugging Face tokenizers (Marian's and M2M-100's
 * vocab.json): pieces by id and a sorted index for lookups by piece, and the
 * pieces-to-ids step that SentencePiece-based tokenizers share: text through an
 * spm, each piece looked up (unknown: the unk id). */
#include "tokenizers/tokenizer.h"

#include "runtime/runtime.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vkf_vocab_free(vkf_vocab *v)
{
    for (uint32_t i = 0; v->piece && i < v->n; i++) free(v->piece[i]);
    free(v->piece);
    free(v->order);
    memset(v, 0, sizeof *v);
}

static int by_piece(const void *a, const void *b, void *user)
{
    const vkf_vocab *v = user;
    return strcmp(v->piece[*(const uint32_t *)a], v->piece[*(const uint32_t *)b]);
}

int32_t vkf_vocab_id(const vkf_vocab *v, const char *p, size_t len)
{
    uint32_t lo = 0, hi = v->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const char *q = v->piece[v->order[mid]];
        int c = strncmp(q, p, len);
        if (c == 0) c = q[len] ? 1 : 0;
        if (c == 0) return (int32_t)v->order[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

vkf_status vkf_vocab_json(const char *file, json_t *j, uint32_t n, vkf_vocab *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0) n = (uint32_t)json_object_size(j);
    if (json_object_size(j) != n)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s has %zu entries; config.json says the vocabulary has %u", file,
                        json_object_size(j), n);
    if (n == 0) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is empty", file);
    out->piece = calloc(n, sizeof *out->piece);
    out->order = malloc(n * sizeof *out->order);
    if (!out->piece || !out->order) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %s", file);
    out->n = n;
    const char *key;
    json_t *val;
    json_object_foreach(j, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= n) {
            char q[VKF_QUOTE_SIZE];
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %s maps to %s; ids must be integers 0..%u", file,
                            vkf_quote(q, sizeof q, key, (size_t)-1),
                            json_is_integer(val) ? "an id out of range" : "a non-integer", n - 1);
        }
        uint32_t id = (uint32_t)json_integer_value(val);
        if (out->piece[id]) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: id %u is given twice", file, id);
        if (!(out->piece[id] = strdup(key))) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (uint32_t i = 0; i < n; i++) out->order[i] = i;
    qsort_r(out->order, n, sizeof *out->order, by_piece, out);
    out->unk_id = vkf_vocab_id(out, "<unk>", 5);
    return VKF_OK;
}

vkf_status vkf_vocab_check_specials(const char *file, const vkf_vocab *v, int32_t eos, int32_t pad)
{
    const struct { const char *piece; int32_t id; const char *what; } specials[] = {
        {"</s>", eos, "eos_token_id"}, {"<pad>", pad, "pad_token_id"}};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        if (vkf_vocab_id(v, specials[i].piece, strlen(specials[i].piece)) != specials[i].id)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" is not id %d, the config's %s", file, specials[i].piece,
                            specials[i].id, specials[i].what);
    if (v->unk_id < 0) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s has no \"<unk>\"", file);
    return VKF_OK;
}

vkf_status vkf_vocab_check_spm(const vkf_vocab *v, const char *vname, const vkf_spm *s, const char *name)
{
    for (uint32_t i = 0; i < vkf_spm_size(s); i++) {
        int kind = 0;
        const char *p = vkf_spm_piece(s, i, &kind);
        if (p && kind == VKF_SPM_NORMAL && vkf_vocab_id(v, p, strlen(p)) < 0) {
            char q[VKF_QUOTE_SIZE];
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s disagrees with %s: its piece %s has no id", vname, name,
                            vkf_quote(q, sizeof q, p, (size_t)-1));
        }
    }
    return VKF_OK;
}

vkf_status vkf_spm_open(const char *dir, const char *name, vkf_spm **out)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const char *what = NULL;
    if (!vkf_tok_file(dir, name, &what)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is %s (the SentencePiece model)", name, what);
    *out = vkf_spm_load(path, err, sizeof err);
    if (!*out) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s", err);
    return VKF_OK;
}

typedef struct piece_sink {
    const vkf_vocab *vocab;             /* NULL: the fairseq offset over the spm */
    const vkf_spm *spm;
    int32_t unk_id;
    int32_t *ids;
    uint32_t n, capacity;
} piece_sink;

static int add_piece(const char *piece, size_t len, void *user)
{
    piece_sink *e = user;
    if (e->n >= e->capacity) return 1;
    int32_t id;
    if (e->vocab) {
        id = vkf_vocab_id(e->vocab, piece, len);
    } else {
        /* fairseq: spm id + 1; spm's own unk (0) is the unk id */
        int32_t s = vkf_spm_piece_id(e->spm, piece, len);
        id = s > 0 ? s + 1 : -1;
    }
    e->ids[e->n++] = id < 0 ? e->unk_id : id;
    return 0;
}

vkf_status vkf_spm_ids(const vkf_spm *spm, const vkf_vocab *vocab, int32_t unk_id, const char *text, size_t len,
                       int32_t *out_ids, uint32_t capacity, uint32_t *out_count)
{
    piece_sink e = {vocab, spm, unk_id, out_ids, 0, capacity};
    char err[512];
    int rc = vkf_spm_encode_n(spm, text, len, add_piece, &e, err, sizeof err);
    if (rc < 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "tokenizing: %s", err);
    if (rc > 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity);
    *out_count = e.n;
    return VKF_OK;
}

vkf_status vkf_spm_text_metaspace(const char *const *pieces, size_t n, char *out_text, size_t capacity)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = pieces[i];
        for (size_t r = 0; p[r];) {
            bool meta = (unsigned char)p[r] == 0xe2 && (unsigned char)p[r + 1] == 0x96 && (unsigned char)p[r + 2] == 0x81;
            size_t k = meta ? 3 : 1;
            if (!(meta && i == 0 && r == 0)) { /* the first piece's leading space is dropped */
                if (w + 2 > capacity)
                    return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text needs more than %zu bytes", capacity);
                out_text[w++] = meta ? ' ' : p[r];
            }
            r += k;
        }
    }
    if (capacity) out_text[w] = '\0';
    return VKF_OK;
}

vkf_status vkf_spm_text(const vkf_spm *spm, const char *const *pieces, size_t n, char *out_text, size_t capacity)
{
    char *text = NULL, err[512];
    int rc = vkf_spm_decode(spm, pieces, n, &text, err, sizeof err);
    if (rc < 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "detokenizing: %s", err);
    /* the tokenizers' convert_tokens_to_string: any U+2581 left (pieces the spm does
     * not know come back verbatim) becomes a space, and the ends are stripped */
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
    size_t len = w - start;
    vkf_status st = VKF_OK;
    if (len + 1 > capacity) st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text needs more than %zu bytes", capacity);
    else memcpy(out_text, text + start, len + 1);
    free(text);
    return st;
}

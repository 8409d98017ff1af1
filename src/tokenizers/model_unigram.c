/* The Unigram model of tokenizer.json (tokenizers/src/models/unigram): pieces
 * with scores, and the best segmentation of a split by Viterbi over the piece
 * trie, unknown characters scored as tokenizers scores them, with byte_fallback. */
#include "tokenizers/pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vkf_status tj_load_unigram(const ld *L, const json_t *j, const char *path, model *m)
{
    unigram *u = &m->u;
    m->kind = M_UNIGRAM;
    json_t *a;
    VKF_TRY(tj_get_array(L, j, path, "vocab", VKF_HFTOK_MAX_VOCAB, &a));
    jpath vp = tj_jp_key(path, "vocab");
    size_t n = json_array_size(a);
    if (n == 0) return tj_bad(L, "%s is empty", vp.s);
    uint64_t unk;
    json_t *uj = json_object_get(j, "unk_id");
    u->unk_id = -1;
    if (uj && !json_is_null(uj)) {
        VKF_TRY(tj_get_uint(L, j, path, "unk_id", true, VKF_HFTOK_MAX_ID, 0, &unk));
        if (unk >= n) return tj_bad(L, "%s.unk_id %llu is not an id of the %zu pieces", path, (unsigned long long)unk, n);
        u->unk_id = (int32_t)unk;
    }
    VKF_TRY(tj_get_bool(L, j, path, "byte_fallback", false, &u->byte_fallback));
    VKF_TRY(tj_model_alloc_ids(m, n));
    m->size = n;
    if (!(u->score = malloc(n * sizeof *u->score)) || !tj_trie_init(&u->pieces)) return OOM();
    u->min_score = INFINITY;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        jpath p = tj_jp_index(vp.s, i);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
            !json_is_number(json_array_get(e, 1)))
            return tj_bad(L, "%s is %s, not a [piece, score] pair", p.s, tj_jtype(e));
        json_t *pj = json_array_get(e, 0);
        size_t len = json_string_length(pj);
        if (len > VKF_HFTOK_MAX_TOKEN_BYTES)
            return tj_bad(L, "%s: a piece of %zu bytes, more than the %u accepted", p.s, len, VKF_HFTOK_MAX_TOKEN_BYTES);
        if (!(m->tok[i] = tj_dup_bytes(json_string_value(pj), len))) return OOM();
        m->tok_len[i] = (uint32_t)len;
        u->score[i] = json_number_value(json_array_get(e, 1));
        if (u->score[i] < u->min_score) u->min_score = u->score[i];
        if (!tj_smap_set(&u->ids, m->tok[i], len, (int32_t)i, NULL) ||
            !tj_trie_add(&u->pieces, m->tok[i], len, (int32_t)i, /*keep_first=*/false))
            return OOM();
    }
    tj_find_byte_ids(&u->ids, u->byte_id);
    return VKF_OK;
}

/* ---- Unigram */

#define UNIGRAM_UNK_PENALTY 10.0

static vkf_status unigram_piece_ids(const model *m, const char *s, size_t len, ids *out)
{
    const unigram *u = &m->u;
    int32_t id = tj_smap_get(&u->ids, s, len);
    if (id >= 0) return tj_ids_add(out, id) ? VKF_OK : OOM();
    if (u->byte_fallback) {
        bool all = true;
        for (size_t k = 0; k < len && all; k++) all = u->byte_id[(unsigned char)s[k]] >= 0;
        if (all) {
            for (size_t k = 0; k < len; k++)
                if (!tj_ids_add(out, u->byte_id[(unsigned char)s[k]])) return OOM();
            return VKF_OK;
        }
    }
    if (u->unk_id < 0)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: the text has a piece that is not in the vocabulary and "
                        "the Unigram model has no unk_id");
    return tj_ids_add(out, u->unk_id) ? VKF_OK : OOM();
}

/* Unigram::encode_optimized (the best path by score, unknown characters at the
 * lowest score less 10), unknown runs fused, then the pieces to ids. */
vkf_status tj_unigram_tokenize(const model *m, const char *s, size_t len, ids *out, node **best_buf,
                                   size_t *best_cap)
{
    const unigram *u = &m->u;
    if (len == 0) return VKF_OK;
    if (!tj_grow((void **)best_buf, best_cap, len + 1, sizeof **best_buf)) return OOM();
    node *best = *best_buf;
    for (size_t i = 0; i <= len; i++) best[i] = (node){0.0, -1, 0};
    double unk_score = u->min_score - UNIGRAM_UNK_PENALTY;
    for (size_t at = 0; at < len;) {
        double here = best[at].score;
        size_t mblen = tj_u8_len((unsigned char)s[at]);
        bool single = false;
        uint64_t nd = 0;
        for (size_t k = at; k < len; k++) {
            if (!tj_trie_step(&u->pieces, &nd, (unsigned char)s[k])) break;
            int32_t id = u->pieces.value[nd];
            if (id < 0) continue;
            size_t key_pos = k + 1;
            double cand = u->score[id] + here;
            if (best[key_pos].starts_at < 0 || cand > best[key_pos].score)
                best[key_pos] = (node){cand, (int64_t)at, id};
            if (key_pos - at == mblen) single = true;
        }
        if (!single) {
            double cand = unk_score + here;
            if (u->unk_id < 0)
                return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: the text has a character that is not in the "
                                "vocabulary and the Unigram model has no unk_id");
            if (best[at + mblen].starts_at < 0 || cand > best[at + mblen].score)
                best[at + mblen] = (node){cand, (int64_t)at, u->unk_id};
        }
        at += mblen;
    }
    /* back from the end: the pieces in reverse, fused unknown runs as one */
    size_t end = len, unk_end = 0;
    bool in_unk = false;
    typedef struct span { size_t a, b; } span;
    span *sp = NULL;
    size_t nsp = 0, spcap = 0;
    while (end > 0) {
        size_t start = (size_t)best[end].starts_at;
        if (u->unk_id >= 0 && best[end].id == u->unk_id) {
            if (!in_unk) unk_end = end, in_unk = true;
        } else {
            if (in_unk) {
                if (!tj_grow((void **)&sp, &spcap, nsp + 1, sizeof *sp)) goto oom;
                sp[nsp++] = (span){end, unk_end};
                in_unk = false;
            }
            if (!tj_grow((void **)&sp, &spcap, nsp + 1, sizeof *sp)) goto oom;
            sp[nsp++] = (span){start, end};
        }
        end = start;
    }
    if (in_unk) {
        if (!tj_grow((void **)&sp, &spcap, nsp + 1, sizeof *sp)) goto oom;
        sp[nsp++] = (span){0, unk_end};
    }
    for (size_t i = nsp; i-- > 0;) {
        vkf_status st = unigram_piece_ids(m, s + sp[i].a, sp[i].b - sp[i].a, out);
        if (st != VKF_OK) {
            free(sp);
            return st;
        }
    }
    free(sp);
    return VKF_OK;
oom:
    free(sp);
    return OOM();
}

/* The BPE model of tokenizer.json (tokenizers/src/models/bpe): the vocabulary
 * and merges read and checked at load, and a word merged by rank with a heap, in
 * time linear-logarithmic in its length; unk, fuse_unk, byte_fallback,
 * continuing-subword prefix, end-of-word suffix and ignore_merges as tokenizers
 * applies them. */
#include "tokenizers/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An optional string of the BPE model (null or absent: none). */
static vkf_status bpe_opt_str(const ld *L, const json_t *j, const char *path, const char *key, bool *has, char **out,
                              size_t *out_len)
{
    const char *s;
    size_t n;
    VKF_TRY(tj_get_str(L, j, path, key, false, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
    *has = s != NULL;
    if (s && !(*out = tj_dup_bytes(s, n))) return OOM();
    *out_len = n;
    return VKF_OK;
}

vkf_status tj_load_bpe(const ld *L, const json_t *j, const char *path, model *m)
{
    bpe *b = &m->b;
    m->kind = M_BPE;
    json_t *d = json_object_get(j, "dropout");
    if (d && !json_is_null(d)) {
        if (!json_is_number(d)) return tj_bad(L, "%s.dropout is %s, not a number or null", path, tj_jtype(d));
        if (json_number_value(d) != 0.0)
            return tj_bad(L, "%s.dropout is %g: dropout makes encoding random, which is not supported", path,
                       json_number_value(d));
    }
    VKF_TRY(bpe_opt_str(L, j, path, "unk_token", &b->has_unk, &b->unk, &b->unk_len));
    VKF_TRY(bpe_opt_str(L, j, path, "continuing_subword_prefix", &b->has_prefix, &b->prefix, &b->prefix_len));
    VKF_TRY(bpe_opt_str(L, j, path, "end_of_word_suffix", &b->has_suffix, &b->suffix, &b->suffix_len));
    VKF_TRY(tj_get_bool(L, j, path, "fuse_unk", false, &b->fuse_unk));
    VKF_TRY(tj_get_bool(L, j, path, "byte_fallback", false, &b->byte_fallback));
    VKF_TRY(tj_get_bool(L, j, path, "ignore_merges", false, &b->ignore_merges));

    /* vocab: {"token": id} */
    json_t *v = json_object_get(j, "vocab");
    jpath vp = tj_jp_key(path, "vocab");
    if (!v) return tj_bad(L, "%s is missing", vp.s);
    if (!json_is_object(v)) return tj_bad(L, "%s is %s, not an object", vp.s, tj_jtype(v));
    size_t count = json_object_size(v);
    if (count > VKF_HFTOK_MAX_VOCAB)
        return tj_bad(L, "%s has %zu entries, more than the %u accepted", vp.s, count, VKF_HFTOK_MAX_VOCAB);
    uint64_t max_id = 0;
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        char qb[96];
        uint64_t id;
        jpath p;
        if (snprintf(p.s, sizeof p.s, "%s[%s]", vp.s, tj_quote(qb, sizeof qb, key, strlen(key))) >= (int)sizeof p.s)
            p.s[sizeof p.s - 2] = '~';
        VKF_TRY(tj_get_uint_v(L, val, p.s, VKF_HFTOK_MAX_ID, &id));
        if (id > max_id) max_id = id;
    }
    if (count && max_id >= 16 * (uint64_t)count + 65536)
        return tj_bad(L, "%s: its ids go up to %llu for %zu entries: too sparse", vp.s, (unsigned long long)max_id,
                   count);
    VKF_TRY(tj_model_alloc_ids(m, count ? (size_t)max_id + 1 : 0));
    m->size = count;
    const char *k2;
    size_t klen;
    json_object_keylen_foreach(v, k2, klen, val) {
        int32_t id = (int32_t)json_integer_value(val);
        char qb[96], qb2[96];
        if (klen > VKF_HFTOK_MAX_TOKEN_BYTES)
            return tj_bad(L, "%s: a token of %zu bytes, more than the %u accepted", vp.s, klen, VKF_HFTOK_MAX_TOKEN_BYTES);
        if (m->tok[id])
            return tj_bad(L, "%s: %s and %s both have id %d", vp.s, tj_quote(qb, sizeof qb, m->tok[id], m->tok_len[id]),
                       tj_quote(qb2, sizeof qb2, k2, klen), id);
        if (!(m->tok[id] = tj_dup_bytes(k2, klen))) return OOM();
        m->tok_len[id] = (uint32_t)klen;
        if (!tj_smap_set(&b->vocab, m->tok[id], klen, id, NULL)) return OOM();
    }
    tj_find_byte_ids(&b->vocab, b->byte_id);

    /* merges: ["a b", ...] or [["a", "b"], ...] */
    json_t *ms;
    VKF_TRY(tj_get_array(L, j, path, "merges", VKF_HFTOK_MAX_MERGES, &ms));
    jpath mp = tj_jp_key(path, "merges");
    size_t rank = 0;
    bool strings = json_array_size(ms) && json_is_string(json_array_get(ms, 0));
    buf joined = {0};
    vkf_status st = VKF_OK;
    for (size_t i = 0; i < json_array_size(ms) && st == VKF_OK; i++) {
        json_t *e = json_array_get(ms, i);
        jpath p = tj_jp_index(mp.s, i);
        const char *a, *c;
        size_t alen, clen;
        char qb[96], qb2[96];
        if (strings) {
            if (!json_is_string(e)) {
                st = tj_bad(L, "%s is %s, where merges[0] is a string", p.s, tj_jtype(e));
                break;
            }
            const char *s = json_string_value(e);
            size_t n = json_string_length(e);
            if (n >= 8 && memcmp(s, "#version", 8) == 0) continue;
            const char *sp = memchr(s, ' ', n);
            if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s))) {
                st = tj_bad(L, "%s %s is not two tokens separated by one space", p.s, tj_quote(qb, sizeof qb, s, n));
                break;
            }
            a = s, alen = (size_t)(sp - s), c = sp + 1, clen = n - alen - 1;
        } else {
            if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
                !json_is_string(json_array_get(e, 1))) {
                st = tj_bad(L, "%s is %s, not a pair of strings", p.s, tj_jtype(e));
                break;
            }
            a = json_string_value(json_array_get(e, 0)), alen = json_string_length(json_array_get(e, 0));
            c = json_string_value(json_array_get(e, 1)), clen = json_string_length(json_array_get(e, 1));
        }
        int32_t aid = tj_smap_get(&b->vocab, a, alen), cid = tj_smap_get(&b->vocab, c, clen);
        if (aid < 0 || cid < 0) {
            st = tj_bad(L, "%s: %s is not in the vocabulary", p.s,
                     aid < 0 ? tj_quote(qb, sizeof qb, a, alen) : tj_quote(qb, sizeof qb, c, clen));
            break;
        }
        size_t skip = b->has_prefix ? b->prefix_len : 0;
        if (skip > clen || (skip < clen && ((unsigned char)c[skip] & 0xc0) == 0x80)) {
            st = tj_bad(L, "%s: %s is shorter than the continuing_subword_prefix %s (tokenizers panics here)", p.s,
                     tj_quote(qb, sizeof qb, c, clen), tj_quote(qb2, sizeof qb2, b->prefix, b->prefix_len));
            break;
        }
        joined.n = 0;
        if (!tj_buf_put(&joined, a, alen) || !tj_buf_put(&joined, c + skip, clen - skip)) {
            st = OOM();
            break;
        }
        int32_t nid = tj_smap_get(&b->vocab, joined.b, joined.n);
        if (nid < 0) {
            st = tj_bad(L, "%s: the merged token %s is not in the vocabulary", p.s, tj_quote(qb, sizeof qb, joined.b, joined.n));
            break;
        }
        if (nid == aid || nid == cid) {
            st = tj_bad(L, "%s: merging %s and %s gives %s again: a cycle", p.s, tj_quote(qb, sizeof qb, a, alen),
                     tj_quote(qb2, sizeof qb2, c, clen), nid == aid ? "the left token" : "the right token");
            break;
        }
        if (!tj_umap_set(&b->merges, (uint64_t)aid << 32 | (uint32_t)cid, (uint64_t)rank << 32 | (uint32_t)nid))
            st = OOM();
        rank++;
    }
    free(joined.b);
    return st;
}

/* ---- BPE */

typedef struct merge_item {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
} merge_item;

/* min-heap on (rank, pos), as tokenizers' BinaryHeap of Merge */
static bool mi_less(merge_item a, merge_item b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }

static void heap_push(merge_item *h, size_t *n, merge_item x)
{
    size_t i = (*n)++;
    while (i > 0 && mi_less(x, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static merge_item heap_pop(merge_item *h, size_t *n)
{
    merge_item top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && mi_less(h[c + 1], h[c])) c++;
        if (!mi_less(h[c], x)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

static bool word_add(word *w, int32_t id, size_t len)
{
    if (!tj_grow((void **)&w->v, &w->cap, w->n + 1, sizeof *w->v)) return false;
    int32_t prev = -1;
    if (w->n) {
        w->v[w->n - 1].next = (int32_t)w->n;
        prev = (int32_t)w->n - 1;
    }
    w->v[w->n++] = (sym){id, prev, -1, (uint32_t)len};
    return true;
}

static bool bpe_pair(const bpe *b, int32_t l, int32_t r, uint32_t *rank, int32_t *new_id)
{
    uint64_t v;
    if (!tj_umap_get(&b->merges, (uint64_t)l << 32 | (uint32_t)r, &v)) return false;
    *rank = (uint32_t)(v >> 32);
    *new_id = (int32_t)(uint32_t)v;
    return true;
}

/* Word::merge_all without dropout. */
static vkf_status bpe_merge_all(const bpe *b, word *w)
{
    merge_item *h = malloc((w->n ? w->n : 1) * 2 * sizeof *h);
    size_t hn = 0, hcap = (w->n ? w->n : 1) * 2;
    if (!h) return OOM();
    uint32_t rank;
    int32_t nid;
    for (size_t i = 0; i + 1 < w->n; i++)
        if (bpe_pair(b, w->v[i].id, w->v[i + 1].id, &rank, &nid)) heap_push(h, &hn, (merge_item){rank, (uint32_t)i, nid});
    while (hn) {
        merge_item top = heap_pop(h, &hn);
        sym *cur = &w->v[top.pos];
        if (cur->len == 0 || cur->next == -1) continue;
        size_t next_pos = (size_t)cur->next;
        sym right = w->v[next_pos];
        if (!bpe_pair(b, cur->id, right.id, &rank, &nid) || nid != top.new_id) continue;
        cur->id = top.new_id;
        cur->len += right.len;
        cur->next = right.next;
        w->v[next_pos].len = 0;
        if (right.next > -1 && (size_t)right.next < w->n) w->v[right.next].prev = (int32_t)top.pos;
        if (hn + 2 > hcap) {
            merge_item *h2 = tj_xrealloc_array(h, hcap * 2, sizeof *h);
            if (!h2) {
                free(h);
                return OOM();
            }
            h = h2;
            hcap *= 2;
        }
        if (cur->prev >= 0 && bpe_pair(b, w->v[cur->prev].id, cur->id, &rank, &nid))
            heap_push(h, &hn, (merge_item){rank, (uint32_t)cur->prev, nid});
        if (cur->next >= 0 && (size_t)cur->next < w->n && bpe_pair(b, cur->id, w->v[cur->next].id, &rank, &nid))
            heap_push(h, &hn, (merge_item){rank, top.pos, nid});
    }
    free(h);
    return VKF_OK;
}

static vkf_status bpe_unk_id(const model *m, int32_t *out)
{
    *out = tj_smap_get(&m->b.vocab, m->b.unk, m->b.unk_len);
    if (*out >= 0) return VKF_OK;
    char qb[96];
    return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: the text needs the unk_token %s, which is not in the "
                    "vocabulary", tj_quote(qb, sizeof qb, m->b.unk, m->b.unk_len));
}

vkf_status tj_bpe_tokenize(const model *m, const char *s, size_t len, ids *out, buf *scratch, word *w)
{
    const bpe *b = &m->b;
    if (len == 0) return VKF_OK;
    if (b->ignore_merges) {
        int32_t id = tj_smap_get(&b->vocab, s, len);
        if (id >= 0) return tj_ids_add(out, id) ? VKF_OK : OOM();
    }
    w->n = 0;
    bool have_unk = false;
    int32_t unk_id = -1;
    size_t unk_len = 0;
    for (size_t i = 0; i < len;) {
        size_t start = i;
        tj_u8_next(s, &i);
        size_t byte_len = i - start;
        bool first = start == 0, last = i == len;
        scratch->n = 0;
        if (!first && b->has_prefix && !tj_buf_put(scratch, b->prefix, b->prefix_len)) return OOM();
        if (!tj_buf_put(scratch, s + start, byte_len)) return OOM();
        if (last && b->has_suffix && !tj_buf_put(scratch, b->suffix, b->suffix_len)) return OOM();
        int32_t id = tj_smap_get(&b->vocab, scratch->b, scratch->n);
        if (id >= 0) {
            if (have_unk) {
                if (!word_add(w, unk_id, unk_len)) return OOM();
                have_unk = false;
            }
            if (!word_add(w, id, byte_len)) return OOM();
            continue;
        }
        if (b->byte_fallback) {
            bool all = true;
            for (size_t k = 0; k < scratch->n && all; k++) all = b->byte_id[(unsigned char)scratch->b[k]] >= 0;
            if (all) {
                for (size_t k = 0; k < scratch->n; k++)
                    if (!word_add(w, b->byte_id[(unsigned char)scratch->b[k]], 1)) return OOM();
                continue;
            }
        }
        if (b->has_unk) {
            if (have_unk && b->fuse_unk) {
                unk_len += byte_len;
            } else {
                if (have_unk && !word_add(w, unk_id, unk_len)) return OOM();
                VKF_TRY(bpe_unk_id(m, &unk_id));
                have_unk = true;
                unk_len = byte_len;
            }
        }
    }
    if (have_unk && !word_add(w, unk_id, unk_len)) return OOM();
    VKF_TRY(bpe_merge_all(b, w));
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].len && !tj_ids_add(out, w->v[i].id)) return OOM();
    return VKF_OK;
}

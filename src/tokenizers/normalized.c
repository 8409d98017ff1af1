/* Normalized strings (tokenizers' NormalizedString): bytes with, per byte, the
 * input offset they align to; the transformations the normalizers make on them
 * (a list of character changes applied at once, replace, prepend), and the
 * splits a text becomes, cut by the pieces of a match with one of tokenizers'
 * SplitDelimiterBehavior values. */
#include "tokenizers/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tj_nstr_free(nstr *n)
{
    free(n->s);
    free(n->al);
    memset(n, 0, sizeof *n);
}

bool tj_nstr_reserve(nstr *n, size_t need)
{
    if (need >= SIZE_MAX / sizeof *n->al) return false;   /* need + 1 alignments past any allocation */
    if (need + 1 <= n->cap) return true;
    size_t cap = n->cap, cap2 = n->cap;
    if (!tj_grow((void **)&n->s, &cap, need + 1, 1)) return false;
    if (!tj_grow((void **)&n->al, &cap2, need + 1, sizeof *n->al)) return false;
    n->cap = cap < cap2 ? cap : cap2;
    return true;
}

bool tj_nstr_put(nstr *n, const char *s, size_t len, uint32_t al)
{
    if (!tj_nstr_reserve(n, n->len + len)) return false;
    memcpy(n->s + n->len, s, len);
    for (size_t i = 0; i < len; i++) n->al[n->len + i] = al;
    n->len += len;
    n->s[n->len] = '\0';
    return true;
}

bool tj_nstr_put_cp(nstr *n, uint32_t cp, uint32_t al)
{
    char b[4];
    return tj_nstr_put(n, b, tj_u8_encode(cp, b), al);
}

/* Bytes [a, b) with their alignments (b > a). */
bool tj_nstr_copy_range(nstr *out, const nstr *n, size_t a, size_t b)
{
    if (!tj_nstr_reserve(out, out->len + (b - a))) return false;
    memcpy(out->s + out->len, n->s + a, b - a);
    memcpy(out->al + out->len, n->al + a, (b - a) * sizeof *n->al);
    out->len += b - a;
    out->s[out->len] = '\0';
    return true;
}

/* NormalizedString::slice: a new string of bytes [a, b), whose original starts
 * where its first byte aligns. */
bool tj_nstr_slice(nstr *out, const nstr *n, size_t a, size_t b)
{
    memset(out, 0, sizeof *out);
    out->shift = a < n->len ? n->al[a] : n->shift;
    if (!tj_nstr_reserve(out, b - a)) return false;
    out->s[0] = '\0';
    return b == a || tj_nstr_copy_range(out, n, a, b);
}

/* The alignment a character inserted at byte idx of n takes (tokenizers'
 * transform: the previous byte's, or offset 0 of n's original at its start). */
static uint32_t nstr_insert_al(const nstr *n, size_t idx)
{
    return idx >= 1 ? n->al[idx - 1] : n->shift;
}

bool tj_tc_add(tchanges *t, uint32_t cp, int32_t change)
{
    if (!tj_grow((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v)) return false;
    t->v[t->n++] = (tchange){cp, change};
    return true;
}

/* NormalizedString::transform over the whole string: initial_offset characters
 * are removed first, then each change consumes original characters as above;
 * originals left over are dropped. Replaces *n. */
vkf_status tj_nstr_transform(nstr *n, const tchanges *t, size_t initial_offset)
{
    nstr out = {.shift = n->shift};
    if (!tj_nstr_reserve(&out, n->len + 4 * t->n)) return OOM();
    out.s[0] = '\0';
    size_t idx = 0;
    for (size_t k = 0; k < initial_offset && idx < n->len; k++) idx += tj_u8_len((unsigned char)n->s[idx]);
    for (size_t i = 0; i < t->n; i++) {
        int32_t change = t->v[i].change;
        uint32_t al;
        if (change > 0) al = nstr_insert_al(n, idx);
        else al = idx < n->len ? n->al[idx] : n->len ? n->al[n->len - 1] : n->shift;
        if (change <= 0 && idx < n->len) idx += tj_u8_len((unsigned char)n->s[idx]);
        for (int32_t k = 0; k < -change && idx < n->len; k++) idx += tj_u8_len((unsigned char)n->s[idx]);
        if (!tj_nstr_put_cp(&out, t->v[i].cp, al)) {
            tj_nstr_free(&out);
            return OOM();
        }
    }
    tj_nstr_free(n);
    *n = out;
    return VKF_OK;
}

/* The input itself: each byte aligns to the start of its character. */
vkf_status tj_nstr_from_input(nstr *n, const char *s, size_t len)
{
    memset(n, 0, sizeof *n);
    if (!tj_nstr_reserve(n, len)) return OOM();
    memcpy(n->s, s, len);
    n->s[len] = '\0';
    for (size_t i = 0, start = 0; i < len; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) start = i;
        n->al[i] = (uint32_t)start;
    }
    n->len = len;
    return VKF_OK;
}

void tj_splits_free(splits *s)
{
    for (size_t i = 0; i < s->n; i++) tj_nstr_free(&s->v[i].ns);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Adds a split (taking ns); empty ones vanish, as in PreTokenizedString::split. */
bool tj_splits_add(splits *s, nstr *ns, int32_t id)
{
    if (ns->len == 0) {
        tj_nstr_free(ns);
        return true;
    }
    if (!tj_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) {
        tj_nstr_free(ns);
        return false;
    }
    s->v[s->n].ns = *ns;
    s->v[s->n].id = id;
    s->n++;
    memset(ns, 0, sizeof *ns);
    return true;
}

/* NormalizedString::split: cuts n at the pieces by behavior and adds the parts
 * to out. */
vkf_status tj_split_pieces(const nstr *n, pieces *m, behavior b, splits *out)
{
    /* Rewrite m in place into the kept ranges (match now meaning "remove"). */
    size_t k = 0;
    bool prev_match = false;
    for (size_t i = 0; i < m->n; i++) {
        piece p = m->v[i];
        switch (b) {
        case B_ISOLATED: m->v[k++] = (piece){p.start, p.end, false}; break;
        case B_REMOVED: m->v[k++] = p; break;
        case B_CONTIGUOUS:
            if (p.match == prev_match && k > 0) m->v[k - 1].end = p.end;
            else m->v[k++] = (piece){p.start, p.end, false};
            break;
        case B_MERGED_WITH_PREVIOUS:
            if (p.match && !prev_match && k > 0) m->v[k - 1].end = p.end;
            else m->v[k++] = (piece){p.start, p.end, false};
            break;
        case B_MERGED_WITH_NEXT:
            if (p.match && !prev_match) m->v[k++] = (piece){p.start, p.end, false};
            else if (k > 0) m->v[k - 1].end = p.end;
            else m->v[k++] = (piece){p.start, p.end, false};
            break;
        }
        prev_match = p.match;
    }
    m->n = k;
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i].match) continue;
        nstr part;
        if (!tj_nstr_slice(&part, n, m->v[i].start, m->v[i].end) || !tj_splits_add(out, &part, -1)) {
            tj_nstr_free(&part);
            return OOM();
        }
    }
    return VKF_OK;
}

/* NormalizedString::replace: each match becomes content, its characters aligned
 * as inserted after the match. */
vkf_status tj_nstr_replace(nstr *n, const pattern *p, const char *content, size_t content_len)
{
    pieces m = {0};
    vkf_status st = tj_find_matches(p, n->s, n->len, false, &m);
    if (st != VKF_OK) {
        free(m.v);
        return st;
    }
    bool any = false;
    for (size_t i = 0; i < m.n; i++) any = any || m.v[i].match;
    if (!any) {
        free(m.v);
        return VKF_OK;
    }
    nstr out = {.shift = n->shift};
    for (size_t i = 0; i < m.n; i++) {
        piece pc = m.v[i];
        bool ok = pc.match ? tj_nstr_put(&out, content, content_len, nstr_insert_al(n, pc.end))
                           : pc.end == pc.start || tj_nstr_copy_range(&out, n, pc.start, pc.end);
        if (!ok) {
            free(m.v);
            tj_nstr_free(&out);
            return OOM();
        }
    }
    free(m.v);
    if (!out.s && !tj_nstr_reserve(&out, 0)) return OOM();
    out.s[out.len] = '\0';
    tj_nstr_free(n);
    *n = out;
    return VKF_OK;
}

/* NormalizedString::prepend: the text takes the first character's alignment. */
vkf_status tj_nstr_prepend(nstr *n, const char *text, size_t len)
{
    if (n->len == 0 || len == 0) return VKF_OK;
    nstr out = {.shift = n->shift};
    if (!tj_nstr_put(&out, text, len, n->al[0]) || !tj_nstr_copy_range(&out, n, 0, n->len)) {
        tj_nstr_free(&out);
        return OOM();
    }
    tj_nstr_free(n);
    *n = out;
    return VKF_OK;
}

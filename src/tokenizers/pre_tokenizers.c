/* The pre-tokenizers of tokenizer.json (tokenizers/src/pre_tokenizers):
 * Sequence, Metaspace, ByteLevel (GPT-2's regex and byte map), Whitespace,
 * WhitespaceSplit, Split, Punctuation, Digits and CharDelimiterSplit: each read
 * at load and run over the splits of one text. */
#include "tokenizers/pipeline.h"

#include <oniguruma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tj_pretok_free(pretok *p)
{
    for (size_t i = 0; i < p->n_kids; i++) tj_pretok_free(&p->kids[i]);
    free(p->kids);
    tj_pattern_free(&p->pat);
    memset(p, 0, sizeof *p);
}

/* GPT-2's pattern (tokenizers' ByteLevel), and Whitespace's. */
static const char gpt2_regex[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* \w with Join_Control spelled out: Oniguruma 6.9.9 added it to \w (UTS #18), and the
 * tokenizers this was checked against runs on 6.9.10, where Debian 12 has 6.9.8. */
static const char whitespace_regex[] = "[\\w\\p{Join_Control}]+|[^\\w\\s\\p{Join_Control}]+";

static vkf_status builtin_regex(const ld *L, const char *path, const char *re, pattern *out)
{
    char why[ONIG_MAX_ERROR_MESSAGE_LEN + 32];
    memset(out, 0, sizeof *out);
    if (!tj_rx_compile(&out->re, re, strlen(re), why, sizeof why)) return tj_bad(L, "%s: %s", path, why);
    out->is_regex = true;
    return VKF_OK;
}
/* tj_load_pretok for tj_load_sequence. */
static vkf_status load_pretok_item(const ld *L, const json_t *j, const char *path, int depth, void *out)
{
    return tj_load_pretok(L, j, path, depth, out);
}

vkf_status tj_load_pretok(const ld *L, const json_t *j, const char *path, int depth, pretok *out)
{
    memset(out, 0, sizeof *out);
    const char *type;
    VKF_TRY(tj_get_type(L, j, path, &type));
    if (strcmp(type, "Sequence") == 0) {
        out->kind = P_SEQUENCE;
        return tj_load_sequence(L, j, path, "pretokenizers", depth, sizeof *out->kids, load_pretok_item, (void **)&out->kids,
                                &out->n_kids);
    } else if (strcmp(type, "Metaspace") == 0) {
        out->kind = P_METASPACE;
        VKF_TRY(tj_get_char(L, j, path, "replacement", true, 0x2581, &out->repl));
        out->repl_len = tj_u8_encode(out->repl, out->repl_s);
        VKF_TRY(tj_get_scheme(L, j, path, &out->scheme));
        VKF_TRY(tj_get_bool(L, j, path, "split", true, &out->split));
    } else if (strcmp(type, "ByteLevel") == 0) {
        out->kind = P_BYTELEVEL;
        VKF_TRY(tj_get_bool(L, j, path, "add_prefix_space", true, &out->add_prefix_space));
        VKF_TRY(tj_get_bool(L, j, path, "use_regex", true, &out->use_regex));
        bool trim;
        VKF_TRY(tj_get_bool(L, j, path, "trim_offsets", true, &trim));   /* offsets only */
        VKF_TRY(builtin_regex(L, path, gpt2_regex, &out->pat));
    } else if (strcmp(type, "Whitespace") == 0) {
        out->kind = P_WHITESPACE;
        VKF_TRY(builtin_regex(L, path, whitespace_regex, &out->pat));
    } else if (strcmp(type, "WhitespaceSplit") == 0) {
        out->kind = P_WHITESPACE_SPLIT;
    } else if (strcmp(type, "Split") == 0) {
        out->kind = P_SPLIT;
        VKF_TRY(tj_load_pattern(L, j, path, "pattern", &out->pat));
        if (!json_object_get(j, "behavior")) return tj_bad(L, "%s.behavior is missing", path);
        VKF_TRY(tj_get_behavior(L, j, path, "behavior", B_REMOVED, &out->beh));
        VKF_TRY(tj_get_bool(L, j, path, "invert", false, &out->invert));
    } else if (strcmp(type, "Punctuation") == 0) {
        out->kind = P_PUNCTUATION;
        VKF_TRY(tj_get_behavior(L, j, path, "behavior", B_ISOLATED, &out->beh));
    } else if (strcmp(type, "Digits") == 0) {
        out->kind = P_DIGITS;
        VKF_TRY(tj_get_bool(L, j, path, "individual_digits", false, &out->individual));
    } else {
        return tj_unsupported(L, path, type);
    }
    return VKF_OK;
}

/* ---- applying them */

static bool cc_ws(uint32_t c, const void *arg) { (void)arg; return tj_is_ws(c); }
static bool cc_punc(uint32_t c, const void *arg) { (void)arg; return tj_is_punc(c); }
static bool cc_numeric(uint32_t c, const void *arg) { (void)arg; return tj_is_numeric(c); }
static bool cc_equal(uint32_t c, const void *arg) { return c == *(const uint32_t *)arg; }

/* Metaspace on one split: spaces become the replacement, the prefix by the
 * scheme, then a cut before each run of replacements. */
static vkf_status metaspace_split(const pretok *p, const nstr *n, splits *out, pieces *m)
{
    nstr r = {.shift = n->shift};
    if (!tj_nstr_reserve(&r, n->len)) return OOM();
    r.s[0] = '\0';
    for (size_t i = 0; i < n->len; i++) {
        bool ok = n->s[i] == ' ' ? tj_nstr_put(&r, p->repl_s, p->repl_len, n->al[i]) : tj_nstr_copy_range(&r, n, i, i + 1);
        if (!ok) {
            tj_nstr_free(&r);
            return OOM();
        }
    }
    if (p->scheme == PS_ALWAYS || (p->scheme == PS_FIRST && r.shift == 0)) {
        size_t i = 0;
        if (r.len && tj_u8_next(r.s, &i) != p->repl) {
            vkf_status st = tj_nstr_prepend(&r, p->repl_s, p->repl_len);
            if (st != VKF_OK) {
                tj_nstr_free(&r);
                return st;
            }
        }
    }
    vkf_status st = VKF_OK;
    if (p->split) {
        st = tj_find_char_matches(cc_equal, &p->repl, r.s, r.len, m);
        if (st == VKF_OK) st = tj_split_pieces(&r, m, B_MERGED_WITH_NEXT, out);
        tj_nstr_free(&r);
    } else if (!tj_splits_add(out, &r, -1)) {
        st = OOM();
    }
    return st;
}

/* One pre-tokenizer's cut of one split into out (not ByteLevel's byte mapping). */
static vkf_status pretok_split(const pretok *p, const nstr *n, splits *out, pieces *m)
{
    switch (p->kind) {
    case P_METASPACE: return metaspace_split(p, n, out, m);
    case P_BYTELEVEL: {
        nstr w;
        if (!tj_nstr_slice(&w, n, 0, n->len)) return OOM();
        w.shift = n->shift;
        vkf_status st = VKF_OK;
        if (p->add_prefix_space && w.len && w.s[0] != ' ') st = tj_nstr_prepend(&w, " ", 1);
        if (st == VKF_OK) {
            if (p->use_regex) {
                st = tj_find_matches(&p->pat, w.s, w.len, false, m);
                if (st == VKF_OK) st = tj_split_pieces(&w, m, B_ISOLATED, out);
            } else if (!tj_splits_add(out, &w, -1)) {
                st = OOM();
            }
        }
        tj_nstr_free(&w);
        return st;
    }
    case P_WHITESPACE:
        VKF_TRY(tj_find_matches(&p->pat, n->s, n->len, /*invert=*/true, m));
        return tj_split_pieces(n, m, B_REMOVED, out);
    case P_WHITESPACE_SPLIT:
        VKF_TRY(tj_find_char_matches(cc_ws, NULL, n->s, n->len, m));
        return tj_split_pieces(n, m, B_REMOVED, out);
    case P_SPLIT:
        VKF_TRY(tj_find_matches(&p->pat, n->s, n->len, p->invert, m));
        return tj_split_pieces(n, m, p->beh, out);
    case P_PUNCTUATION:
        VKF_TRY(tj_find_char_matches(cc_punc, NULL, n->s, n->len, m));
        return tj_split_pieces(n, m, p->beh, out);
    case P_DIGITS:
        VKF_TRY(tj_find_char_matches(cc_numeric, NULL, n->s, n->len, m));
        return tj_split_pieces(n, m, p->individual ? B_ISOLATED : B_CONTIGUOUS, out);
    case P_SEQUENCE: break;
    }
    return VKF_OK;
}

/* ByteLevel's second step: every byte of every split becomes its character. */
static vkf_status bytelevel_map(splits *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].id >= 0) continue;
        nstr *n = &s->v[i].ns, out = {.shift = n->shift};
        if (!tj_nstr_reserve(&out, 2 * n->len)) return OOM();
        for (size_t k = 0; k < n->len; k++)
            if (!tj_nstr_put_cp(&out, tj_byte_char((unsigned char)n->s[k]), n->al[k])) {
                tj_nstr_free(&out);
                return OOM();
            }
        tj_nstr_free(n);
        *n = out;
    }
    return VKF_OK;
}

vkf_status tj_pretok_apply(const pretok *p, splits *s)
{
    if (p->kind == P_SEQUENCE) {
        for (size_t i = 0; i < p->n_kids; i++) VKF_TRY(tj_pretok_apply(&p->kids[i], s));
        return VKF_OK;
    }
    splits out = {0};
    pieces m = {0};
    vkf_status st = VKF_OK;
    for (size_t i = 0; i < s->n && st == VKF_OK; i++) {
        if (s->v[i].id >= 0) {
            if (!tj_grow((void **)&out.v, &out.cap, out.n + 1, sizeof *out.v)) {
                st = OOM();
                break;
            }
            out.v[out.n++] = s->v[i];
            memset(&s->v[i].ns, 0, sizeof s->v[i].ns);
            continue;
        }
        st = pretok_split(p, &s->v[i].ns, &out, &m);
    }
    free(m.v);
    if (st == VKF_OK && p->kind == P_BYTELEVEL) st = bytelevel_map(&out);
    tj_splits_free(s);
    *s = out;
    return st;
}

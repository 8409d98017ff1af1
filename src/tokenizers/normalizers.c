/* The normalizers of tokenizer.json (tokenizers/src/normalizers): Sequence,
 * Precompiled (SentencePiece's charsmap, checked by charsmap.h), NFC, NFD,
 * NFKC, NFKD, Lowercase, Strip, Replace and Prepend: each read at load and
 * applied to a normalized string with tokenizers' alignments. */
#include "tokenizers/pipeline.h"
#include "tokenizers/charsmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

void tj_norm_free(norm *n)
{
    for (size_t i = 0; i < n->n_kids; i++) tj_norm_free(&n->kids[i]);
    free(n->kids);
    free(n->blob);
    tj_pattern_free(&n->pat);
    free(n->text);
    memset(n, 0, sizeof *n);
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 with padding (what tokenizers writes for precompiled_charsmap). */
static bool b64_decode(const char *s, size_t n, uint8_t **out, size_t *out_len)
{
    if (n % 4) return false;
    uint8_t *o = malloc(n / 4 * 3 + 1);
    if (!o) return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            unsigned char c = (unsigned char)s[i + j];
            if (c == '=' && i + 4 == n && j >= 2) {
                v[j] = 0;
                pad++;
                continue;
            }
            if (pad || (v[j] = b64_value(c)) < 0) goto fail;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        o[k++] = (uint8_t)(w >> 16);
        if (pad < 2) o[k++] = (uint8_t)(w >> 8);
        if (pad < 1) o[k++] = (uint8_t)w;
    }
    *out = o;
    *out_len = k;
    return true;
fail:
    free(o);
    return false;
}

/* tj_load_norm for tj_load_sequence. */
static vkf_status load_norm_item(const ld *L, const json_t *j, const char *path, int depth, void *out)
{
    return tj_load_norm(L, j, path, depth, out);
}

vkf_status tj_load_norm(const ld *L, const json_t *j, const char *path, int depth, norm *out)
{
    memset(out, 0, sizeof *out);
    const char *type;
    VKF_TRY(tj_get_type(L, j, path, &type));
    const char *s;
    size_t n;
    if (strcmp(type, "Sequence") == 0) {
        out->kind = N_SEQUENCE;
        return tj_load_sequence(L, j, path, "normalizers", depth, sizeof *out->kids, load_norm_item, (void **)&out->kids,
                                &out->n_kids);
    } else if (strcmp(type, "Precompiled") == 0) {
        out->kind = N_PRECOMPILED;
        VKF_TRY(tj_get_str(L, j, path, "precompiled_charsmap", true, 64u << 20, true, &s, &n));
        size_t blob_len;
        if (!b64_decode(s, n, &out->blob, &blob_len))
            return tj_bad(L, "%s.precompiled_charsmap is not base64", path);
        if (vkf_charsmap_parse(out->blob, blob_len, &out->map) != VKF_OK)
            return tj_bad(L, "%s.precompiled_charsmap: %s", path, vkf_last_error());
    } else if (strcmp(type, "NFC") == 0) {
        out->kind = N_NFC;
    } else if (strcmp(type, "NFD") == 0) {
        out->kind = N_NFD;
    } else if (strcmp(type, "NFKC") == 0) {
        out->kind = N_NFKC;
    } else if (strcmp(type, "NFKD") == 0) {
        out->kind = N_NFKD;
    } else if (strcmp(type, "Lowercase") == 0) {
        out->kind = N_LOWERCASE;
    } else if (strcmp(type, "Strip") == 0) {
        out->kind = N_STRIP;
        VKF_TRY(tj_get_bool(L, j, path, "strip_left", true, &out->left));
        VKF_TRY(tj_get_bool(L, j, path, "strip_right", true, &out->right));
    } else if (strcmp(type, "Replace") == 0) {
        out->kind = N_REPLACE;
        VKF_TRY(tj_load_pattern(L, j, path, "pattern", &out->pat));
        VKF_TRY(tj_get_str(L, j, path, "content", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
        if (!(out->text = tj_dup_bytes(s, n))) return OOM();
        out->text_len = n;
    } else if (strcmp(type, "Prepend") == 0) {
        out->kind = N_PREPEND;
        VKF_TRY(tj_get_str(L, j, path, "prepend", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
        if (!(out->text = tj_dup_bytes(s, n))) return OOM();
        out->text_len = n;
    } else {
        return tj_unsupported(L, path, type);
    }
    return VKF_OK;
}

/* ---- applying them */

/* tokenizers' replace() helper of the Precompiled normalizer: new_part stands for
 * old_chars characters of the original. */
static bool tc_replace(tchanges *t, size_t old_chars, const char *new_part)
{
    size_t new_chars = 0;
    for (size_t i = 0; new_part[i];) {
        if (!tj_tc_add(t, tj_u8_next(new_part, &i), 0)) return false;
        new_chars++;
    }
    if (new_chars > old_chars) {
        for (size_t k = 0; k < new_chars - old_chars; k++) t->v[t->n - 1 - k].change = 1;
    } else if (new_chars < old_chars && t->n > 0) {
        t->v[t->n - 1].change -= (int32_t)(old_chars - new_chars);
    }
    return true;
}

static vkf_status norm_precompiled(const norm *nm, nstr *n)
{
    tchanges t = {0};
    bool modified = false;
    int32_t state = 0;
    size_t gs = 0;
    vkf_status st = VKF_OK;
    while (gs < n->len) {
        /* the grapheme cluster [gs, ge) */
        size_t ge = gs;
        uint32_t prev = tj_u8_next(n->s, &ge);
        while (ge < n->len) {
            size_t k = ge;
            uint32_t c = tj_u8_next(n->s, &k);
            if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev, (utf8proc_int32_t)c, &state)) break;
            prev = c;
            ge = k;
        }
        const char *rep;
        if (ge - gs < 6 && vkf_charsmap_prefix(&nm->map, n->s + gs, ge - gs, VKF_CHARSMAP_SHORTEST, &rep)) {
            modified = true;
            if (!tc_replace(&t, tj_u8_count(n->s + gs, ge - gs), rep)) goto oom;
        } else {
            for (size_t i = gs; i < ge;) {
                size_t b = i;
                uint32_t c = tj_u8_next(n->s, &i);
                if (vkf_charsmap_prefix(&nm->map, n->s + b, i - b, VKF_CHARSMAP_SHORTEST, &rep)) {
                    modified = true;
                    if (!tc_replace(&t, 1, rep)) goto oom;
                } else if (!tj_tc_add(&t, c, 0)) {
                    goto oom;
                }
            }
        }
        gs = ge;
    }
    if (modified) st = tj_nstr_transform(n, &t, 0);
    free(t.v);
    return st;
oom:
    free(t.v);
    return OOM();
}

/* Hangul: utf8proc composes jamo algorithmically (comb_index 0xffff for them). */
static bool nf_second(uint32_t c, const utf8proc_property_t *p)
{
    if ((c >= 0x1161 && c <= 0x1175) || (c >= 0x11a8 && c <= 0x11c2)) return true;
    return p->comb_index != UINT16_MAX && (p->comb_index & 0x8000);
}

#define NF_MAX_DECOMP 32

/* Where normalization may restart: a starter that cannot compose with what
 * precedes it and whose decomposition starts with such a starter too. */
static bool nf_boundary(uint32_t c, utf8proc_option_t opt)
{
    const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)c);
    if (p->combining_class != 0 || nf_second(c, p)) return false;
    utf8proc_int32_t d[NF_MAX_DECOMP];
    int bc = 0;
    utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)c, d, NF_MAX_DECOMP, opt, &bc);
    if (k <= 0 || k > NF_MAX_DECOMP || (uint32_t)d[0] == c) return true;
    const utf8proc_property_t *q0 = utf8proc_get_property(d[0]);
    return q0->combining_class == 0 && !nf_second((uint32_t)d[0], q0);
}

/* NFC / NFD / NFKC / NFKD: decomposition of each character, canonical order by a
 * stable counting sort of each run of non-starters (linear, where utf8proc's own
 * ordering is quadratic on long runs), then composition. Run piecewise between
 * boundaries, each piece's characters aligned as tokenizers' replace() aligns a
 * replaced group. */
static vkf_status norm_unicode(nstr *n, bool compat, bool compose)
{
    utf8proc_option_t dopt = UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0);
    utf8proc_option_t copt = UTF8PROC_STABLE | UTF8PROC_COMPOSE | (compat ? UTF8PROC_COMPAT : 0);
    tchanges t = {0};
    utf8proc_int32_t *cps = NULL, *tmp = NULL;
    size_t cps_cap = 0, tmp_cap = 0;
    bool modified = false;
    size_t ps = 0;
    while (ps < n->len) {
        /* the piece [ps, pe) */
        size_t pe = ps;
        tj_u8_next(n->s, &pe);
        while (pe < n->len) {
            size_t k = pe;
            if (nf_boundary(tj_u8_next(n->s, &k), dopt)) break;
            pe = k;
        }
        size_t m = 0, old_chars = 0;
        for (size_t i = ps; i < pe;) {
            uint32_t c = tj_u8_next(n->s, &i);
            old_chars++;
            if (!tj_grow((void **)&cps, &cps_cap, m + NF_MAX_DECOMP, sizeof *cps)) goto oom;
            int bc = 0;
            utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)c, cps + m, NF_MAX_DECOMP, dopt, &bc);
            if (k <= 0 || k > NF_MAX_DECOMP) cps[m] = (utf8proc_int32_t)c, k = 1;
            m += (size_t)k;
        }
        /* canonical ordering */
        for (size_t i = 0; i < m;) {
            if (utf8proc_get_property(cps[i])->combining_class == 0) { i++; continue; }
            size_t j = i;
            while (j < m && utf8proc_get_property(cps[j])->combining_class != 0) j++;
            if (j - i > 1) {
                size_t count[256] = {0};
                if (!tj_grow((void **)&tmp, &tmp_cap, j - i, sizeof *tmp)) goto oom;
                for (size_t k = i; k < j; k++) count[utf8proc_get_property(cps[k])->combining_class]++;
                for (size_t c = 1, sum = 0; c < 256; c++) {
                    size_t x = count[c];
                    count[c] = sum;
                    sum += x;
                }
                for (size_t k = i; k < j; k++) tmp[count[utf8proc_get_property(cps[k])->combining_class]++] = cps[k];
                memcpy(cps + i, tmp, (j - i) * sizeof *tmp);
            }
            i = j;
        }
        if (compose) {
            utf8proc_ssize_t r = utf8proc_normalize_utf32(cps, (utf8proc_ssize_t)m, copt);
            if (r >= 0) m = (size_t)r;
        }
        /* unchanged? */
        bool same = m == old_chars;
        for (size_t i = ps, k = 0; same && i < pe; k++) same = tj_u8_next(n->s, &i) == (uint32_t)cps[k];
        if (same) {
            for (size_t i = ps; i < pe;)
                if (!tj_tc_add(&t, tj_u8_next(n->s, &i), 0)) goto oom;
        } else {
            modified = true;
            for (size_t k = 0; k < m; k++)
                if (!tj_tc_add(&t, (uint32_t)cps[k], 0)) goto oom;
            if (m > old_chars) {
                for (size_t k = 0; k < m - old_chars; k++) t.v[t.n - 1 - k].change = 1;
            } else if (m < old_chars && t.n > 0) {
                t.v[t.n - 1].change -= (int32_t)(old_chars - m);
            }
        }
        ps = pe;
    }
    vkf_status st = modified ? tj_nstr_transform(n, &t, 0) : VKF_OK;
    free(t.v), free(cps), free(tmp);
    return st;
oom:
    free(t.v), free(cps), free(tmp);
    return OOM();
}

static vkf_status norm_lowercase(nstr *n)
{
    tchanges t = {0};
    bool modified = false;
    for (size_t i = 0; i < n->len;) {
        uint32_t c = tj_u8_next(n->s, &i), lo[2];
        size_t k = tj_to_lower(c, lo);
        modified = modified || k != 1 || lo[0] != c;
        for (size_t j = 0; j < k; j++)
            if (!tj_tc_add(&t, lo[j], j > 0)) {
                free(t.v);
                return OOM();
            }
    }
    vkf_status st = modified ? tj_nstr_transform(n, &t, 0) : VKF_OK;
    free(t.v);
    return st;
}

static vkf_status norm_strip(nstr *n, bool left, bool right)
{
    size_t chars = 0, lead = 0, trail = 0;
    bool in_lead = true;
    for (size_t i = 0; i < n->len;) {
        uint32_t c = tj_u8_next(n->s, &i);
        chars++;
        if (in_lead && left && tj_is_ws(c)) lead++;
        else in_lead = false;
        trail = tj_is_ws(c) ? trail + 1 : 0;
    }
    if (!right) trail = 0;
    if (lead == 0 && trail == 0) return VKF_OK;
    tchanges t = {0};
    size_t k = 0;
    for (size_t i = 0; i < n->len; k++) {
        uint32_t c = tj_u8_next(n->s, &i);
        if (k < lead || k >= chars - trail) continue;
        if (!tj_tc_add(&t, c, 0)) {
            free(t.v);
            return OOM();
        }
    }
    vkf_status st = tj_nstr_transform(n, &t, lead);
    free(t.v);
    return st;
}
vkf_status tj_norm_apply(const norm *nm, nstr *n)
{
    switch (nm->kind) {
    case N_SEQUENCE:
        for (size_t i = 0; i < nm->n_kids; i++) VKF_TRY(tj_norm_apply(&nm->kids[i], n));
        return VKF_OK;
    case N_PRECOMPILED: return norm_precompiled(nm, n);
    case N_NFC: return norm_unicode(n, false, true);
    case N_NFD: return norm_unicode(n, false, false);
    case N_NFKC: return norm_unicode(n, true, true);
    case N_NFKD: return norm_unicode(n, true, false);
    case N_LOWERCASE: return norm_lowercase(n);
    case N_STRIP: return norm_strip(n, nm->left, nm->right);
    case N_REPLACE: return tj_nstr_replace(n, &nm->pat, nm->text, nm->text_len);
    case N_PREPEND: return tj_nstr_prepend(n, nm->text, nm->text_len);
    }
    return VKF_OK;
}

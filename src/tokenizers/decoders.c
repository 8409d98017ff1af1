/* The decoders of tokenizer.json (tokenizers/src/decoders): Sequence,
 * Metaspace, ByteLevel, Replace, Strip, Fuse and ByteFallback: each read at load
 * and run over the token strings of one decode, as tokenizers' decode_chain. */
#include "tokenizers/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tj_decoder_free(decoder *d)
{
    for (size_t i = 0; i < d->n_kids; i++) tj_decoder_free(&d->kids[i]);
    free(d->kids);
    tj_pattern_free(&d->pat);
    free(d->content);
    memset(d, 0, sizeof *d);
}

/* tj_load_decoder for tj_load_sequence. */
static vkf_status load_decoder_item(const ld *L, const json_t *j, const char *path, int depth, void *out)
{
    return tj_load_decoder(L, j, path, depth, out);
}

vkf_status tj_load_decoder(const ld *L, const json_t *j, const char *path, int depth, decoder *out)
{
    memset(out, 0, sizeof *out);
    const char *type;
    VKF_TRY(tj_get_type(L, j, path, &type));
    bool b;
    if (strcmp(type, "Sequence") == 0) {
        out->kind = D_SEQUENCE;
        return tj_load_sequence(L, j, path, "decoders", depth, sizeof *out->kids, load_decoder_item, (void **)&out->kids,
                                &out->n_kids);
    } else if (strcmp(type, "Metaspace") == 0) {
        out->kind = D_METASPACE;
        VKF_TRY(tj_get_char(L, j, path, "replacement", true, 0x2581, &out->ch));
        VKF_TRY(tj_get_scheme(L, j, path, &out->scheme));
        VKF_TRY(tj_get_bool(L, j, path, "split", true, &b));
    } else if (strcmp(type, "ByteLevel") == 0) {
        out->kind = D_BYTELEVEL;
        VKF_TRY(tj_get_bool(L, j, path, "add_prefix_space", true, &b));
        VKF_TRY(tj_get_bool(L, j, path, "trim_offsets", true, &b));
        VKF_TRY(tj_get_bool(L, j, path, "use_regex", true, &b));
    } else if (strcmp(type, "Replace") == 0) {
        out->kind = D_REPLACE;
        VKF_TRY(tj_load_pattern(L, j, path, "pattern", &out->pat));
        const char *s;
        size_t n;
        VKF_TRY(tj_get_str(L, j, path, "content", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
        if (!(out->content = tj_dup_bytes(s, n))) return OOM();
        out->content_len = n;
    } else if (strcmp(type, "Strip") == 0) {
        out->kind = D_STRIP;
        VKF_TRY(tj_get_char(L, j, path, "content", true, ' ', &out->ch));
        VKF_TRY(tj_get_uint(L, j, path, "start", true, UINT32_MAX, 0, &out->start));
        VKF_TRY(tj_get_uint(L, j, path, "stop", true, UINT32_MAX, 0, &out->stop));
    } else if (strcmp(type, "Fuse") == 0) {
        out->kind = D_FUSE;
    } else if (strcmp(type, "ByteFallback") == 0) {
        out->kind = D_BYTEFALLBACK;
    } else {
        return tj_unsupported(L, path, type);
    }
    return VKF_OK;
}

void tj_toks_free(toks *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->v[i].b);
    free(t->v);
    memset(t, 0, sizeof *t);
}

/* Appends an empty token and returns it. */
static buf *toks_new(toks *t)
{
    if (!tj_grow((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v)) return NULL;
    buf *b = &t->v[t->n++];
    memset(b, 0, sizeof *b);
    if (!tj_buf_put(b, "", 0)) return NULL;
    return b;
}

bool tj_toks_add(toks *t, const char *s, size_t n)
{
    buf *b = toks_new(t);
    return b && tj_buf_put(b, s, n);
}

vkf_status tj_decoder_apply(const decoder *d, toks *t)
{
    toks o = {0};
    switch (d->kind) {
    case D_SEQUENCE:
        for (size_t i = 0; i < d->n_kids; i++) VKF_TRY(tj_decoder_apply(&d->kids[i], t));
        return VKF_OK;
    case D_METASPACE:
        for (size_t i = 0; i < t->n; i++) {
            buf *b = toks_new(&o);
            if (!b) goto oom;
            for (size_t k = 0; k < t->v[i].n;) {
                size_t s0 = k;
                uint32_t c = tj_u8_next(t->v[i].b, &k);
                if (c != d->ch) {
                    if (!tj_buf_put(b, t->v[i].b + s0, k - s0)) goto oom;
                } else if (!(i == 0 && d->scheme != PS_NEVER) && !tj_buf_put(b, " ", 1)) {
                    goto oom;
                }
            }
        }
        break;
    case D_BYTELEVEL: {
        buf raw = {0};
        for (size_t i = 0; i < t->n; i++) {
            const buf *tk = &t->v[i];
            size_t start = raw.n;
            bool all = true;
            for (size_t k = 0; k < tk->n && all;) {
                uint32_t c = tj_u8_next(tk->b, &k);
                int byte = tj_char_byte(c);
                if (byte >= 0) {
                    unsigned char by = (unsigned char)byte;
                    if (!tj_buf_put(&raw, &by, 1)) goto oom_raw;
                } else {
                    all = false;
                }
            }
            if (!all) {
                raw.n = start;
                if (!tj_buf_put(&raw, tk->b, tk->n)) goto oom_raw;
            }
        }
        buf *b = toks_new(&o);
        if (!b || !tj_u8_lossy(b, raw.b ? raw.b : "", raw.n)) goto oom_raw;
        free(raw.b);
        break;
    oom_raw:
        free(raw.b);
        goto oom;
    }
    case D_REPLACE:
        for (size_t i = 0; i < t->n; i++) {
            nstr n;
            vkf_status st = tj_nstr_from_input(&n, t->v[i].b, t->v[i].n);
            if (st == VKF_OK) st = tj_nstr_replace(&n, &d->pat, d->content, d->content_len);
            if (st == VKF_OK && !tj_toks_add(&o, n.s, n.len)) st = OOM();
            tj_nstr_free(&n);
            if (st != VKF_OK) {
                tj_toks_free(&o);
                return st;
            }
        }
        break;
    case D_STRIP: {
        size_t *at = NULL, at_cap = 0;   /* byte offset of each character, and the end */
        for (size_t i = 0; i < t->n; i++) {
            const buf *tk = &t->v[i];
            size_t chars = 0;
            for (size_t k = 0;; chars++) {
                if (!tj_grow((void **)&at, &at_cap, chars + 1, sizeof *at)) goto oom_strip;
                at[chars] = k;
                if (k >= tk->n) break;
                k += tj_u8_len((unsigned char)tk->b[k]);
            }
            /* start_cut, stop_cut in characters, as tokenizers' Strip */
            size_t start_cut = 0, stop_cut = chars;
            for (size_t c = 0; c < chars && c < d->start; c++) {
                size_t k = at[c];
                if (tj_u8_next(tk->b, &k) != d->ch) break;
                start_cut = c + 1;
            }
            for (uint64_t c = 0; c < d->stop; c++) {
                if (c >= chars) {
                    free(at);
                    tj_toks_free(&o);
                    return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: the decoder Strip (stop %llu) runs past the "
                                    "start of a token of %zu characters (tokenizers panics here)",
                                    (unsigned long long)d->stop, chars);
                }
                size_t index = chars - (size_t)c - 1, k = at[index];
                if (tj_u8_next(tk->b, &k) != d->ch) break;
                stop_cut = index;
            }
            if (start_cut > stop_cut) {
                free(at);
                tj_toks_free(&o);
                return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: the decoder Strip cuts a token of %zu "
                                "characters from both ends past each other (tokenizers panics here)", chars);
            }
            if (!tj_toks_add(&o, tk->b + at[start_cut], at[stop_cut] - at[start_cut])) goto oom_strip;
        }
        free(at);
        break;
    oom_strip:
        free(at);
        goto oom;
    }
    case D_FUSE: {
        buf *b = toks_new(&o);
        if (!b) goto oom;
        for (size_t i = 0; i < t->n; i++)
            if (!tj_buf_put(b, t->v[i].b, t->v[i].n)) goto oom;
        break;
    }
    case D_BYTEFALLBACK: {
        buf pending = {0};
        size_t npending = 0;
        for (size_t i = 0; i <= t->n; i++) {
            const buf *tk = i < t->n ? &t->v[i] : NULL;
            int byte = -1;
            if (tk && tk->n == 6 && memcmp(tk->b, "<0x", 3) == 0 && tk->b[5] == '>') {
                /* u8::from_str_radix(&token[3..5], 16): an optional '+', then hex */
                const char *h = tk->b + 3;
                int v0 = -1, v1 = -1;
                if (h[0] == '+') v0 = 0;
                else if (h[0] >= '0' && h[0] <= '9') v0 = h[0] - '0';
                else if ((h[0] | 0x20) >= 'a' && (h[0] | 0x20) <= 'f') v0 = (h[0] | 0x20) - 'a' + 10;
                if (h[1] >= '0' && h[1] <= '9') v1 = h[1] - '0';
                else if ((h[1] | 0x20) >= 'a' && (h[1] | 0x20) <= 'f') v1 = (h[1] | 0x20) - 'a' + 10;
                if (v0 >= 0 && v1 >= 0) byte = (h[0] == '+' ? 0 : v0 * 16) + v1;
            }
            if (byte >= 0) {
                unsigned char by = (unsigned char)byte;
                if (!tj_buf_put(&pending, &by, 1)) goto oom_pending;
                npending++;
                continue;
            }
            if (npending) {
                if (tj_u8_valid(pending.b, pending.n)) {
                    if (!tj_toks_add(&o, pending.b, pending.n)) goto oom_pending;
                } else {
                    for (size_t k = 0; k < npending; k++)
                        if (!tj_toks_add(&o, "\xef\xbf\xbd", 3)) goto oom_pending;
                }
                pending.n = 0;
                npending = 0;
            }
            if (tk && !tj_toks_add(&o, tk->b, tk->n)) goto oom_pending;
        }
        free(pending.b);
        break;
    oom_pending:
        free(pending.b);
        goto oom;
    }
    }
    tj_toks_free(t);
    *t = o;
    return VKF_OK;
oom:
    tj_toks_free(&o);
    return OOM();
}

/* The post-processors of tokenizer.json (tokenizers/src/processors): Sequence,
 * TemplateProcessing (the single-sequence template), RobertaProcessing,
 * BertProcessing and ByteLevel: each read at load and applied to the ids of one
 * text when special tokens are added. */
#include "tokenizers/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tj_postproc_free(postproc *p)
{
    for (size_t i = 0; i < p->n_kids; i++) tj_postproc_free(&p->kids[i]);
    free(p->kids);
    for (size_t i = 0; i < p->n_single; i++) free(p->single[i].ids);
    free(p->single);
    memset(p, 0, sizeof *p);
}

/* ["token", id] of RoBERTa/BERT processing */
static vkf_status get_token_pair(const ld *L, const json_t *j, const char *path, const char *key, int32_t *id)
{
    json_t *v = json_object_get(j, key);
    jpath p = tj_jp_key(path, key);
    if (!v) return tj_bad(L, "%s is missing", p.s);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_string(json_array_get(v, 0)))
        return tj_bad(L, "%s is %s, not a [token, id] pair", p.s, tj_jtype(v));
    uint64_t x;
    VKF_TRY(tj_get_uint_v(L, json_array_get(v, 1), tj_jp_index(p.s, 1).s, VKF_HFTOK_MAX_ID, &x));
    *id = (int32_t)x;
    return VKF_OK;
}

/* Checks one template (single or pair): items of {"SpecialToken": {"id", "type_id"}}
 * naming special_tokens, or {"Sequence": {"id": "A"|"B", "type_id"}}; fills the
 * single-sequence items when out is not NULL. */
static vkf_status load_template(const ld *L, const json_t *j, const char *path, const char *key,
                                const json_t *specials, bool pair, postproc *out)
{
    json_t *a;
    VKF_TRY(tj_get_array(L, j, path, key, VKF_HFTOK_MAX_ITEMS, &a));
    jpath tp = tj_jp_key(path, key);
    if (out && json_array_size(a) && !(out->single = calloc(json_array_size(a), sizeof *out->single))) return OOM();
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *e = json_array_get(a, i);
        jpath p = tj_jp_index(tp.s, i);
        if (!json_is_object(e) || json_object_size(e) != 1)
            return tj_bad(L, "%s is %s, not {\"SpecialToken\": ...} or {\"Sequence\": ...}", p.s, tj_jtype(e));
        json_t *sp = json_object_get(e, "SpecialToken"), *sq = json_object_get(e, "Sequence");
        json_t *body = sp ? sp : sq;
        if (!body) return tj_bad(L, "%s is neither {\"SpecialToken\": ...} nor {\"Sequence\": ...}", p.s);
        jpath bp = tj_jp_key(p.s, sp ? "SpecialToken" : "Sequence");
        if (!json_is_object(body)) return tj_bad(L, "%s is %s, not an object", bp.s, tj_jtype(body));
        const char *id;
        size_t n;
        uint64_t type_id;
        VKF_TRY(tj_get_str(L, body, bp.s, "id", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &id, &n));
        VKF_TRY(tj_get_uint(L, body, bp.s, "type_id", false, UINT32_MAX, 0, &type_id));
        char qb[96];
        titem item = {0};
        if (sq) {
            if (strcmp(id, "A") != 0 && strcmp(id, "B") != 0)
                return tj_bad(L, "%s.id %s is not A or B", bp.s, tj_quote(qb, sizeof qb, id, n));
            if (!pair && strcmp(id, "B") == 0) return tj_bad(L, "%s: the single-sequence template names B", bp.s);
            item.is_sequence = true;
        } else {
            json_t *st = json_object_getn(specials, id, n);
            if (!st) return tj_bad(L, "%s.id %s is not one of special_tokens", bp.s, tj_quote(qb, sizeof qb, id, n));
            if (out) {
                json_t *ids = json_object_get(st, "ids");
                item.n = json_array_size(ids);
                if (item.n && !(item.ids = malloc(item.n * sizeof *item.ids))) return OOM();
                for (size_t k = 0; k < item.n; k++) item.ids[k] = (int32_t)json_integer_value(json_array_get(ids, k));
            }
        }
        if (out) out->single[out->n_single++] = item;
    }
    return VKF_OK;
}

/* tj_load_postproc for tj_load_sequence. */
static vkf_status load_postproc_item(const ld *L, const json_t *j, const char *path, int depth, void *out)
{
    return tj_load_postproc(L, j, path, depth, out);
}

vkf_status tj_load_postproc(const ld *L, const json_t *j, const char *path, int depth, postproc *out)
{
    memset(out, 0, sizeof *out);
    const char *type;
    VKF_TRY(tj_get_type(L, j, path, &type));
    bool b;
    if (strcmp(type, "Sequence") == 0) {
        out->kind = PP_SEQUENCE;
        return tj_load_sequence(L, j, path, "processors", depth, sizeof *out->kids, load_postproc_item, (void **)&out->kids,
                                &out->n_kids);
    } else if (strcmp(type, "TemplateProcessing") == 0) {
        out->kind = PP_TEMPLATE;
        json_t *specials = json_object_get(j, "special_tokens");
        jpath sp = tj_jp_key(path, "special_tokens");
        if (!specials) return tj_bad(L, "%s is missing", sp.s);
        if (!json_is_object(specials)) return tj_bad(L, "%s is %s, not an object", sp.s, tj_jtype(specials));
        if (json_object_size(specials) > VKF_HFTOK_MAX_ITEMS)
            return tj_bad(L, "%s has %zu entries, more than the %u accepted", sp.s, json_object_size(specials),
                       VKF_HFTOK_MAX_ITEMS);
        const char *key;
        size_t klen;
        json_t *v;
        json_object_keylen_foreach(specials, key, klen, v) {
            char qb[96];
            jpath p;
            if (snprintf(p.s, sizeof p.s, "%s[%s]", sp.s, tj_quote(qb, sizeof qb, key, klen)) >= (int)sizeof p.s)
                p.s[sizeof p.s - 2] = '~';
            if (!json_is_object(v)) return tj_bad(L, "%s is %s, not an object", p.s, tj_jtype(v));
            const char *s;
            size_t n;
            VKF_TRY(tj_get_str(L, v, p.s, "id", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
            if (n != klen || memcmp(s, key, n) != 0) return tj_bad(L, "%s.id is not its key", p.s);
            json_t *ids, *toks;
            VKF_TRY(tj_get_array(L, v, p.s, "ids", VKF_HFTOK_MAX_ITEMS, &ids));
            VKF_TRY(tj_get_array(L, v, p.s, "tokens", VKF_HFTOK_MAX_ITEMS, &toks));
            if (json_array_size(ids) != json_array_size(toks))
                return tj_bad(L, "%s has %zu ids but %zu tokens", p.s, json_array_size(ids), json_array_size(toks));
            jpath ip = tj_jp_key(p.s, "ids");
            for (size_t k = 0; k < json_array_size(ids); k++) {
                uint64_t x;
                VKF_TRY(tj_get_uint_v(L, json_array_get(ids, k), tj_jp_index(ip.s, k).s, VKF_HFTOK_MAX_ID, &x));
                if (!json_is_string(json_array_get(toks, k)))
                    return tj_bad(L, "%s.tokens[%zu] is %s, not a string", p.s, k, tj_jtype(json_array_get(toks, k)));
            }
        }
        VKF_TRY(load_template(L, j, path, "single", specials, false, out));
        if (json_object_get(j, "pair")) VKF_TRY(load_template(L, j, path, "pair", specials, true, NULL));
    } else if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
        out->kind = type[0] == 'R' ? PP_ROBERTA : PP_BERT;
        VKF_TRY(get_token_pair(L, j, path, "cls", &out->cls));
        VKF_TRY(get_token_pair(L, j, path, "sep", &out->sep));
        if (out->kind == PP_ROBERTA) {
            VKF_TRY(tj_get_bool(L, j, path, "trim_offsets", true, &b));
            VKF_TRY(tj_get_bool(L, j, path, "add_prefix_space", true, &b));
        }
    } else if (strcmp(type, "ByteLevel") == 0) {
        out->kind = PP_BYTELEVEL;   /* offsets only */
        VKF_TRY(tj_get_bool(L, j, path, "add_prefix_space", true, &b));
        VKF_TRY(tj_get_bool(L, j, path, "trim_offsets", true, &b));
        VKF_TRY(tj_get_bool(L, j, path, "use_regex", true, &b));
    } else {
        return tj_unsupported(L, path, type);
    }
    return VKF_OK;
}

/* The single-sequence post-processing of *x (add_special only). */
vkf_status tj_postproc_apply(const postproc *p, ids *x)
{
    ids o = {0};
    switch (p->kind) {
    case PP_SEQUENCE:
        for (size_t i = 0; i < p->n_kids; i++) VKF_TRY(tj_postproc_apply(&p->kids[i], x));
        return VKF_OK;
    case PP_BYTELEVEL: return VKF_OK;
    case PP_ROBERTA:
    case PP_BERT:
        if (!tj_ids_add(&o, p->cls)) goto oom;
        for (size_t i = 0; i < x->n; i++)
            if (!tj_ids_add(&o, x->v[i])) goto oom;
        if (!tj_ids_add(&o, p->sep)) goto oom;
        break;
    case PP_TEMPLATE:
        for (size_t k = 0; k < p->n_single; k++) {
            const titem *it = &p->single[k];
            const int32_t *v = it->is_sequence ? x->v : it->ids;
            size_t n = it->is_sequence ? x->n : it->n;
            for (size_t i = 0; i < n; i++)
                if (!tj_ids_add(&o, v[i])) goto oom;
        }
        break;
    }
    free(x->v);
    *x = o;
    return VKF_OK;
oom:
    free(o.v);
    return OOM();
}

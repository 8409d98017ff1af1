/* Reading tokenizer.json's components: typed getters for keys of a component
 * object, JSON paths for messages ("normalizer.normalizers[1].pattern"), and the
 * shapes several stages share (a pattern, a split behavior, Metaspace's
 * prepend_scheme). Every refusal is one line naming the JSON path. */
#include "tokenizers/pipeline.h"

#include <oniguruma.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vkf_status tj_bad(const ld *L, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %s", L->name, msg);
}

const char *tj_jtype(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

jpath tj_jp_key(const char *path, const char *key)
{
    jpath p;
    if (snprintf(p.s, sizeof p.s, "%s%s%s", path, *path ? "." : "", key) >= (int)sizeof p.s) p.s[sizeof p.s - 2] = '~';
    return p;
}

jpath tj_jp_index(const char *path, size_t i)
{
    jpath p;
    if (snprintf(p.s, sizeof p.s, "%s[%zu]", path, i) >= (int)sizeof p.s) p.s[sizeof p.s - 2] = '~';
    return p;
}

/* obj[key] as a string (no NUL byte in it unless nul_ok; at most max bytes).
 * Absent or null: *s = NULL, an error when required. */
vkf_status tj_get_str(const ld *L, const json_t *obj, const char *path, const char *key, bool required,
                          size_t max, bool nul_ok, const char **s, size_t *len)
{
    *s = NULL;
    *len = 0;
    json_t *v = json_object_get(obj, key);
    jpath p = tj_jp_key(path, key);
    if (!v || json_is_null(v)) return required ? tj_bad(L, "%s is missing", p.s) : VKF_OK;
    if (!json_is_string(v)) return tj_bad(L, "%s is %s, not a string", p.s, tj_jtype(v));
    size_t n = json_string_length(v);
    if (n > max) return tj_bad(L, "%s is %zu bytes long, more than the %zu accepted", p.s, n, max);
    if (!nul_ok && memchr(json_string_value(v), 0, n)) return tj_bad(L, "%s holds a NUL character", p.s);
    *s = json_string_value(v);
    *len = n;
    return VKF_OK;
}

vkf_status tj_get_bool(const ld *L, const json_t *obj, const char *path, const char *key, bool dflt, bool *out)
{
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v || json_is_null(v)) return VKF_OK;
    if (!json_is_boolean(v)) return tj_bad(L, "%s is %s, not true or false", tj_jp_key(path, key).s, tj_jtype(v));
    *out = json_is_true(v);
    return VKF_OK;
}

/* A whole number in [0, max]. */
vkf_status tj_get_uint_v(const ld *L, const json_t *v, const char *path, uint64_t max, uint64_t *out)
{
    if (!json_is_integer(v)) return tj_bad(L, "%s is %s, not a whole number", path, tj_jtype(v));
    json_int_t x = json_integer_value(v);
    if (x < 0 || (uint64_t)x > max)
        return tj_bad(L, "%s is %lld, outside 0..%llu", path, (long long)x, (unsigned long long)max);
    *out = (uint64_t)x;
    return VKF_OK;
}

vkf_status tj_get_uint(const ld *L, const json_t *obj, const char *path, const char *key, bool required,
                           uint64_t max, uint64_t dflt, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v || json_is_null(v)) return required ? tj_bad(L, "%s is missing", tj_jp_key(path, key).s) : VKF_OK;
    return tj_get_uint_v(L, v, tj_jp_key(path, key).s, max, out);
}

/* A component: an object with a "type" string. */
vkf_status tj_get_type(const ld *L, const json_t *obj, const char *path, const char **type)
{
    if (!json_is_object(obj)) return tj_bad(L, "%s is %s, not an object", path, tj_jtype(obj));
    size_t n;
    VKF_TRY(tj_get_str(L, obj, path, "type", true, 64, false, type, &n));
    return VKF_OK;
}

vkf_status tj_unsupported(const ld *L, const char *path, const char *type)
{
    char qb[96];
    return tj_bad(L, "%s.type %s is not supported", path, tj_quote(qb, sizeof qb, type, strlen(type)));
}

/* A list member (obj[key], an array of at most max items). */
vkf_status tj_get_array(const ld *L, const json_t *obj, const char *path, const char *key, size_t max,
                            json_t **out)
{
    json_t *v = json_object_get(obj, key);
    jpath p = tj_jp_key(path, key);
    if (!v) return tj_bad(L, "%s is missing", p.s);
    if (!json_is_array(v)) return tj_bad(L, "%s is %s, not a list", p.s, tj_jtype(v));
    if (json_array_size(v) > max)
        return tj_bad(L, "%s has %zu items, more than the %zu accepted", p.s, json_array_size(v), max);
    *out = v;
    return VKF_OK;
}

/* A single character (Metaspace's replacement, Strip's content). */
vkf_status tj_get_char(const ld *L, const json_t *obj, const char *path, const char *key, bool required,
                           uint32_t dflt, uint32_t *out)
{
    const char *s;
    size_t n;
    VKF_TRY(tj_get_str(L, obj, path, key, required, 8, true, &s, &n));
    *out = dflt;
    if (!s) return VKF_OK;
    size_t i = 0;
    if (n == 0 || (*out = tj_u8_next(s, &i), i != n)) {
        char qb[64];
        return tj_bad(L, "%s is %s, not one character", tj_jp_key(path, key).s, tj_quote(qb, sizeof qb, s, n));
    }
    return VKF_OK;
}

/* {"String": "..."} or {"Regex": "..."} */
vkf_status tj_load_pattern(const ld *L, const json_t *obj, const char *path, const char *key, pattern *out)
{
    memset(out, 0, sizeof *out);
    json_t *v = json_object_get(obj, key);
    jpath p = tj_jp_key(path, key);
    if (!v) return tj_bad(L, "%s is missing", p.s);
    if (!json_is_object(v) || json_object_size(v) != 1)
        return tj_bad(L, "%s is %s, not {\"String\": ...} or {\"Regex\": ...}", p.s, tj_jtype(v));
    const char *s;
    size_t n;
    if (json_object_get(v, "String")) {
        VKF_TRY(tj_get_str(L, v, p.s, "String", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
        if (!(out->lit = tj_dup_bytes(s, n))) return OOM();
        out->lit_len = n;
        return VKF_OK;
    }
    if (json_object_get(v, "Regex")) {
        VKF_TRY(tj_get_str(L, v, p.s, "Regex", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
        char why[ONIG_MAX_ERROR_MESSAGE_LEN + 32];
        if (!tj_rx_compile(&out->re, s, n, why, sizeof why)) {
            char qb[96];
            return tj_bad(L, "%s.Regex %s does not compile: %s", p.s, tj_quote(qb, sizeof qb, s, n), why);
        }
        out->is_regex = true;
        return VKF_OK;
    }
    return tj_bad(L, "%s is neither {\"String\": ...} nor {\"Regex\": ...}", p.s);
}

vkf_status tj_get_behavior(const ld *L, const json_t *obj, const char *path, const char *key, behavior dflt,
                               behavior *out)
{
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    const char *s;
    size_t n;
    VKF_TRY(tj_get_str(L, obj, path, key, false, 64, false, &s, &n));
    *out = dflt;
    if (!s) return VKF_OK;
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (behavior)i;
            return VKF_OK;
        }
    char qb[96];
    return tj_bad(L, "%s %s is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous",
               tj_jp_key(path, key).s, tj_quote(qb, sizeof qb, s, n));
}

vkf_status tj_get_scheme(const ld *L, const json_t *j, const char *path, prepend_scheme *out)
{
    /* add_prefix_space (older files) decides when present, as in tokenizers */
    json_t *aps = json_object_get(j, "add_prefix_space");
    if (aps && !json_is_null(aps)) {
        bool b;
        VKF_TRY(tj_get_bool(L, j, path, "add_prefix_space", true, &b));
        *out = b ? PS_ALWAYS : PS_NEVER;
        return VKF_OK;
    }
    const char *s;
    size_t n;
    VKF_TRY(tj_get_str(L, j, path, "prepend_scheme", false, 64, false, &s, &n));
    *out = PS_ALWAYS;
    if (!s || strcmp(s, "always") == 0) return VKF_OK;
    if (strcmp(s, "first") == 0) *out = PS_FIRST;
    else if (strcmp(s, "never") == 0) *out = PS_NEVER;
    else {
        char qb[96];
        return tj_bad(L, "%s.prepend_scheme %s is not always, first or never", path, tj_quote(qb, sizeof qb, s, n));
    }
    return VKF_OK;
}

vkf_status tj_load_sequence(const ld *L, const json_t *j, const char *path, const char *key, int depth, size_t size,
                            tj_load_item load, void **out_kids, size_t *out_n)
{
    if (depth >= VKF_HFTOK_MAX_DEPTH) return tj_bad(L, "%s: Sequences nest deeper than %d", path, VKF_HFTOK_MAX_DEPTH);
    json_t *a;
    VKF_TRY(tj_get_array(L, j, path, key, VKF_HFTOK_MAX_ITEMS, &a));
    size_t n = json_array_size(a);
    if (n && !(*out_kids = calloc(n, size))) return OOM();
    jpath p = tj_jp_key(path, key);
    for (size_t i = 0; i < n; i++) {
        vkf_status st = load(L, json_array_get(a, i), tj_jp_index(p.s, i).s, depth + 1, (char *)*out_kids + i * size);
        *out_n = i + 1;
        if (st != VKF_OK) return st;
    }
    return VKF_OK;
}

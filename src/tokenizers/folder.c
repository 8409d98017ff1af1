/* The files of a tokenizer's folder: whether one is there, one read as JSON with
 * a size bound and a one-line error naming it, and the extra special tokens its
 * configs declare. */
#include "tokenizers/tokenizer.h"

#include "runtime/runtime.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

vkf_status vkf_tok_read_json(const char *dir, const char *name, size_t max, size_t flags, json_t **out)
{
    *out = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return VKF_OK;
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s cannot be read: %s", name, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is not a regular file", name);
    if ((uint64_t)sb.st_size > max)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is %llu bytes, more than the %zu accepted", name,
                        (unsigned long long)sb.st_size, max);
    json_error_t err;
    json_t *j = json_load_file(path, flags, &err);
    if (!j) {
        char q[VKF_QUOTE_SIZE];
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is not valid JSON: %s (line %d)", name,
                        vkf_quote(q, sizeof q, err.text, strlen(err.text)), err.line);
    }
    *out = j;
    return VKF_OK;
}

bool vkf_tok_file(const char *dir, const char *name, const char **what)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    const char *why = stat(path, &sb) != 0 ? "missing" : !S_ISREG(sb.st_mode) ? "not a regular file" : NULL;
    if (what) *what = why;
    return why == NULL;
}

void vkf_tok_names_free(vkf_tok_names *l)
{
    if (!l) return;
    for (uint32_t i = 0; i < l->n; i++) free(l->name[i]);
    free(l->name);
    l->name = NULL, l->n = 0;
}

bool vkf_tok_names_has(const vkf_tok_names *l, const char *name)
{
    for (uint32_t i = 0; l && i < l->n; i++)
        if (strcmp(l->name[i], name) == 0) return true;
    return false;
}

/* A list of tokens (strings, or objects with a "content" string) into out. */
static vkf_status names_of(const json_t *a, const char *file, const char *key, vkf_tok_names *out)
{
    if (!json_is_array(a)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must be a list", file, key);
    size_t n = json_array_size(a);
    if (n > VKF_HFTOK_MAX_ADDED)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" has more than %u tokens", file, key, VKF_HFTOK_MAX_ADDED);
    if (n && !(out->name = calloc(n, sizeof *out->name)))
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(a, i), *c = json_is_object(e) ? json_object_get(e, "content") : e;
        if (!json_is_string(c))
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %s[%zu] must be a string or an object with a \"content\" string",
                            file, key, i);
        if (!(out->name[out->n] = strdup(json_string_value(c))))
            return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        out->n++;
    }
    return VKF_OK;
}

/* The first of keys that config (or NULL) holds, not null; NULL when none. */
static const json_t *first_key(const json_t *config, const char *const keys[2], const char **out_key)
{
    for (int k = 0; config && k < 2; k++) {
        const json_t *v = json_object_get(config, keys[k]);
        if (v && !json_is_null(v)) return *out_key = keys[k], v;
    }
    return NULL;
}

vkf_status vkf_tok_extra_specials(const char *dir, const json_t *tc, vkf_tok_names *out)
{
    static const char *const keys[2] = {"extra_special_tokens", "additional_special_tokens"};
    memset(out, 0, sizeof *out);
    const char *key = NULL;
    const json_t *list = first_key(tc, keys, &key);
    if (list) return names_of(list, "tokenizer_config.json", key, out);
    const json_t *dec = tc ? json_object_get(tc, "added_tokens_decoder") : NULL;
    if (dec && !json_is_null(dec)) return VKF_OK; /* a saved folder's config: the map is not read */
    json_t *stm = NULL;
    VKF_TRY(vkf_tok_read_json(dir, "special_tokens_map.json", VKF_HFTOK_MAX_FILE_BYTES, 0, &stm));
    list = first_key(stm, keys, &key);
    vkf_status st = list ? names_of(list, "special_tokens_map.json", key, out) : VKF_OK;
    json_decref(stm);
    if (st != VKF_OK) vkf_tok_names_free(out);
    return st;
}

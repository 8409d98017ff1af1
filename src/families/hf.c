/* What every Hugging Face hub folder shares, whatever its family: JSON files read
 * with bounds, typed config keys with one-line errors naming file and key,
 * generation_config.json applied as transformers' generate() applies it by
 * default, and model.safetensors. */
#include "families/family.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool vkf_hf_file(const char *dir, const char *name, const char **what)
{
    return vkf_tok_file(dir, name, what);
}

vkf_status vkf_hf_read_json(const char *dir, const char *name, bool optional, json_t **out)
{
    *out = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (optional && errno == ENOENT) return VKF_OK;
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is missing", name);
    }
    if (!S_ISREG(sb.st_mode)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is not a regular file", name);
    if ((uint64_t)sb.st_size > VKF_HF_MAX_JSON)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is %llu bytes, more than the %u a JSON file here may have", name,
                        (unsigned long long)sb.st_size, VKF_HF_MAX_JSON);
    json_error_t err;
    /* tokenizer_config.json holds model_max_length 1e30 written as an integer,
     * past json_int_t: its numbers are read as reals (none of its keys vkformer
     * reads is a number) */
    size_t flags = JSON_REJECT_DUPLICATES | (strcmp(name, "tokenizer_config.json") == 0 ? JSON_DECODE_INT_AS_REAL : 0);
    json_t *j = json_load_file(path, flags, &err);
    if (!j) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is not valid JSON: %s (line %d)", name, err.text, err.line);
    if (!json_is_object(j)) {
        json_decref(j);
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s must hold a JSON object", name);
    }
    *out = j;
    return VKF_OK;
}

vkf_status vkf_hf_int(json_t *o, const char *file, const char *key, int64_t min, int64_t max, int64_t def, int64_t *out)
{
    json_t *v = o ? json_object_get(o, key) : NULL;
    if (!v || json_is_null(v)) {
        if (def >= 0) return *out = def, VKF_OK;
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: key \"%s\" is missing", file, key);
    }
    if (!json_is_integer(v)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must be an integer", file, key);
    json_int_t x = json_integer_value(v);
    if (x < min || x > max)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" is %lld, outside %lld..%lld", file, key, (long long)x,
                        (long long)min, (long long)max);
    *out = x;
    return VKF_OK;
}

vkf_status vkf_hf_bool(json_t *o, const char *file, const char *key, bool def, bool *out)
{
    json_t *v = o ? json_object_get(o, key) : NULL;
    if (!v || json_is_null(v)) return *out = def, VKF_OK;
    if (!json_is_boolean(v)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must be true or false", file, key);
    *out = json_is_true(v);
    return VKF_OK;
}

vkf_status vkf_hf_float(json_t *o, const char *file, const char *key, double min, double max, double def, double *out)
{
    json_t *v = o ? json_object_get(o, key) : NULL;
    if (!v || json_is_null(v)) return *out = def, VKF_OK;
    if (!json_is_number(v) || !isfinite(json_number_value(v)))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must be a finite number", file, key);
    double x = json_number_value(v);
    if (x < min || x > max) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" is %g, outside %g..%g", file, key, x, min, max);
    *out = x;
    return VKF_OK;
}

vkf_status vkf_hf_activation(json_t *o, const char *file, vkf_activation *out)
{
    json_t *act = json_object_get(o, "activation_function");
    if (!act) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: key \"activation_function\" is missing", file);
    if (!json_is_string(act)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"activation_function\" must be a string", file);
    const char *a = json_string_value(act);
    if (strcmp(a, "swish") == 0 || strcmp(a, "silu") == 0) *out = VKF_ACTIVATION_SILU;
    else if (strcmp(a, "gelu") == 0) *out = VKF_ACTIVATION_GELU;
    else if (strcmp(a, "relu") == 0) *out = VKF_ACTIVATION_RELU;
    else {
        char q[VKF_QUOTE_SIZE];
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: activation_function %s is not supported (swish, silu, gelu and "
                        "relu are)", file, vkf_quote(q, sizeof q, a, (size_t)-1));
    }
    return VKF_OK;
}

/* One id or a list of ids (at most cap) of key: *n ids into out; *n 0 when absent or null. */
static vkf_status id_list(json_t *g, const char *F, const char *key, uint32_t vocab, int32_t *out, uint32_t cap,
                          uint32_t *n)
{
    json_t *v = json_object_get(g, key);
    *n = 0;
    if (!v || json_is_null(v)) return VKF_OK;
    size_t count = json_is_array(v) ? json_array_size(v) : 1;
    if (count == 0 || count > cap)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: \"%s\" must be one id or a list of 1..%u ids", F, key, cap);
    for (size_t i = 0; i < count; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(e)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must hold integer ids", F, key);
        json_int_t id = json_integer_value(e);
        if (id < 0 || (uint64_t)id >= vocab)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %s %lld is outside the vocabulary (%u)", F, key, (long long)id,
                            vocab);
        out[(*n)++] = (int32_t)id;
    }
    return VKF_OK;
}

/* Whether id is one of the n ids. */
static bool among(int32_t id, const int32_t *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id) return true;
    return false;
}

vkf_status vkf_hf_generation(const char *dir, json_t *config, vkf_family_model *fm)
{
    json_t *own = NULL;
    VKF_TRY(vkf_hf_read_json(dir, "generation_config.json", true, &own));
    json_t *g = own ? own : config;
    const char *F = own ? "generation_config.json" : "config.json";
    vkf_arch_spec *s = &fm->spec;
    vkf_generate_options *o = &fm->defaults;
    vkf_generate_options_init(o);
    int64_t beams = 1, max_length = 20, max_new = 0, min_length = 0, min_new = 0, nret = 1, start = 0, pad = 0;
    int64_t forced_bos = -1, ngram = 0;
    int32_t forced_eos[1] = {-1};
    uint32_t n_forced_eos = 0;
    double lp = 1.0, rep = 1.0;
    bool sample = false;
    vkf_gen_lists *lists = calloc(1, sizeof *lists);
    vkf_status st = lists ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    uint32_t n_end = 0;
    if (st == VKF_OK) st = vkf_hf_int(g, F, "num_beams", 1, VKF_MAX_BEAMS, 1, &beams);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "max_length", 2, INT32_MAX, 20, &max_length); /* transformers' default */
    if (st == VKF_OK) st = vkf_hf_int(g, F, "max_new_tokens", 1, INT32_MAX, 0, &max_new);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "min_length", 0, INT32_MAX, 0, &min_length);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "min_new_tokens", 0, INT32_MAX, 0, &min_new);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "num_return_sequences", 1, VKF_MAX_BEAMS, 1, &nret);
    /* a length penalty past +-1000 makes every score overflow to infinity */
    if (st == VKF_OK) st = vkf_hf_float(g, F, "length_penalty", -1000, 1000, 1.0, &lp);
    if (st == VKF_OK) st = vkf_hf_float(g, F, "repetition_penalty", 0, 1e30, 1.0, &rep);
    if (st == VKF_OK && !(rep > 0))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: repetition_penalty %g must be above 0", F, rep);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "no_repeat_ngram_size", 0, INT32_MAX, 0, &ngram);
    if (st == VKF_OK) st = vkf_hf_bool(g, F, "renormalize_logits", false, &o->renormalize);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "decoder_start_token_id", 0, s->tgt_vocab - 1, s->decoder_start_id, &start);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "pad_token_id", 0, s->tgt_vocab - 1, s->pad_id, &pad);
    /* eos_token_id: one id, or a list (generation ends at any of them) */
    if (st == VKF_OK) st = id_list(g, F, "eos_token_id", s->tgt_vocab, lists->end_ids, VKF_MAX_END_IDS, &n_end);
    json_t *es = json_object_get(g, "early_stopping");
    if (st == VKF_OK && es && json_is_string(es)) {
        char q[VKF_QUOTE_SIZE];
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: early_stopping %s is not supported (true or false are)", F,
                      vkf_quote(q, sizeof q, json_string_value(es), (size_t)-1));
    }
    if (st == VKF_OK) st = vkf_hf_bool(g, F, "early_stopping", false, &o->early_stopping);
    if (st == VKF_OK) st = vkf_hf_bool(g, F, "do_sample", false, &sample);
    if (st == VKF_OK && sample)
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: do_sample true is not taken as a default (pass sampling options "
                      "explicitly)", F);
    if (st == VKF_OK) {
        uint32_t n = 0;
        int32_t id[1];
        st = id_list(g, F, "forced_bos_token_id", s->tgt_vocab, id, 1, &n);
        if (n) forced_bos = id[0];
    }
    if (st == VKF_OK) st = id_list(g, F, "forced_eos_token_id", s->tgt_vocab, forced_eos, 1, &n_forced_eos);
    if (st == VKF_OK && n_end == 0) lists->end_ids[n_end++] = s->eos_id;
    if (st == VKF_OK && n_forced_eos && !among(forced_eos[0], lists->end_ids, n_end))
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: forced_eos_token_id %d must be one of eos_token_id", F, forced_eos[0]);
    /* the model's eos: the forced one, else the first of the list */
    int32_t eos = n_forced_eos ? forced_eos[0] : lists->end_ids[0];
    /* suppress_tokens: SuppressTokensLogitsProcessor */
    json_t *sup = json_object_get(g, "suppress_tokens");
    if (st == VKF_OK && sup && !json_is_null(sup)) {
        size_t n = json_is_array(sup) ? json_array_size(sup) : 0;
        if (!json_is_array(sup) || n > 65536)
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"suppress_tokens\" must be a list of at most 65536 ids", F);
        if (st == VKF_OK && n && !(lists->suppress = malloc(n * sizeof *lists->suppress)))
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (size_t i = 0; st == VKF_OK && i < n; i++) {
            json_t *e = json_array_get(sup, i);
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= s->tgt_vocab)
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: suppress_tokens entry %zu is not an id of the vocabulary", F, i);
            else
                lists->suppress[o->n_suppress++] = (int32_t)json_integer_value(e);
        }
    }
    /* bad_words_ids: one id each is banned in every generation (a generator bias of
     * -inf); longer sequences are the defaults' bad_sequences; an end id alone is
     * ignored, as NoBadWordsLogitsProcessor ignores it */
    json_t *bad = json_object_get(g, "bad_words_ids");
    if (st == VKF_OK && bad && !json_is_null(bad)) {
        size_t n = json_is_array(bad) ? json_array_size(bad) : 0, total = 0;
        if (!json_is_array(bad)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"bad_words_ids\" must be a list of lists of ids", F);
        if (st == VKF_OK && n > 4096) st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: more than 4096 bad_words_ids", F);
        for (size_t i = 0; st == VKF_OK && i < n; i++) {
            json_t *w = json_array_get(bad, i);
            size_t len = json_is_array(w) ? json_array_size(w) : 0;
            if (len == 0 || len > s->max_len)
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: bad_words_ids entry %zu is not a list of 1..%u ids", F, i,
                              s->max_len);
            for (size_t j = 0; st == VKF_OK && j < len; j++) {
                json_t *e = json_array_get(w, j);
                if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= s->tgt_vocab)
                    st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: bad_words_ids entry %zu holds an id outside the vocabulary",
                                  F, i);
            }
            total += len;
        }
        if (st == VKF_OK && n) {
            fm->banned = calloc(n, sizeof *fm->banned);
            lists->bad_ids = malloc(total * sizeof *lists->bad_ids);
            lists->bad_lengths = calloc(n, sizeof *lists->bad_lengths);
            lists->bad_ptrs = calloc(n, sizeof *lists->bad_ptrs);
            if (!fm->banned || !lists->bad_ids || !lists->bad_lengths || !lists->bad_ptrs)
                st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        }
        size_t used = 0;
        for (size_t i = 0; st == VKF_OK && i < n; i++) {
            json_t *w = json_array_get(bad, i);
            size_t len = json_array_size(w);
            int32_t first = (int32_t)json_integer_value(json_array_get(w, 0));
            if (len == 1) {
                if (!among(first, lists->end_ids, n_end)) fm->banned[fm->n_banned++] = first;
                continue;
            }
            lists->bad_ptrs[lists->bad.count] = lists->bad_ids + used;
            lists->bad_lengths[lists->bad.count++] = (uint32_t)len;
            for (size_t j = 0; j < len; j++) lists->bad_ids[used++] = (int32_t)json_integer_value(json_array_get(w, j));
        }
    }
    json_decref(own);
    if (st != VKF_OK) {
        fm->gen_lists = lists; /* freed with the family model */
        return st;
    }
    fm->gen_lists = lists;
    s->decoder_start_id = (int32_t)start, s->eos_id = eos, s->pad_id = (int32_t)pad;
    /* max_length counts the decoder start token, as generate() does */
    uint64_t steps = max_new ? (uint64_t)max_new : (uint64_t)max_length - 1;
    o->max_new = (uint32_t)(steps < s->max_len ? steps : s->max_len);
    uint64_t mn = min_new ? (uint64_t)min_new : (min_length > 1 ? (uint64_t)min_length - 1 : 0);
    o->min_new = (uint32_t)(mn < o->max_new ? mn : o->max_new);
    o->beams = (uint32_t)beams;
    o->n_best = (uint32_t)(nret <= beams ? nret : beams);
    o->length_penalty = (float)lp;
    o->forced_eos = n_forced_eos > 0;
    if (forced_bos >= 0) o->forced_bos = true, o->forced_bos_id = (int32_t)forced_bos;
    o->repetition_penalty = (float)rep;
    o->no_repeat_ngram = ngram > UINT32_MAX ? UINT32_MAX : (uint32_t)ngram;
    if (o->n_suppress) o->suppress_ids = lists->suppress;
    if (lists->bad.count) {
        lists->bad.ids = lists->bad_ptrs;
        lists->bad.lengths = lists->bad_lengths;
        o->bad_sequences = &lists->bad;
    }
    if (n_end > 1) o->end_ids = lists->end_ids, o->n_end_ids = n_end;
    return VKF_OK;
}

/* model.safetensors, prefixed to its messages */
static vkf_status open_one(const char *dir, const char *name, vkf_st_file **out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    vkf_status st = vkf_st_open(path, out);
    if (st == VKF_ERROR_BAD_MODEL) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vkf_last_error());
        st = vkf_fail(st, "%s: %s", name, msg);
    }
    return st;
}

static int by_string(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* A shard's name as an index may give it: a plain file name in the folder. */
static bool plain_shard_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255 || s[0] == '.' || strchr(s, '/')) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return false;
    return n > 12 && strcmp(s + n - 12, ".safetensors") == 0;
}

#define INDEX "model.safetensors.index.json"
#define MAX_SHARDS 4096u

/* A sharded checkpoint as save_pretrained writes one past max_shard_size (and as
 * the hub holds the larger models): model.safetensors.index.json's weight_map
 * names each tensor's shard; every shard is opened and checked, and the map must
 * say exactly where each tensor of the shards is. */
static vkf_status open_sharded(const char *dir, vkf_st_file **out)
{
    json_t *index = NULL;
    VKF_TRY(vkf_hf_read_json(dir, INDEX, false, &index));
    json_t *map = json_object_get(index, "weight_map");
    vkf_status st = VKF_OK;
    const char **names = NULL;
    vkf_st_file **shards = NULL;
    size_t n_names = 0, n_shards = 0;
    char q[VKF_QUOTE_SIZE], q2[VKF_QUOTE_SIZE];
    if (!json_is_object(map)) {
        st = vkf_fail(VKF_ERROR_BAD_MODEL, INDEX ": \"weight_map\" must be an object of tensor names and shard files");
        goto done;
    }
    names = malloc((json_object_size(map) + 1) * sizeof *names);
    if (!names) {
        st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory reading " INDEX);
        goto done;
    }
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v) {
        if (!json_is_string(v) || !plain_shard_name(json_string_value(v))) {
            st = vkf_fail(VKF_ERROR_BAD_MODEL, INDEX ": the shard of tensor %s must be a .safetensors file name in the "
                          "folder, not %s", vkf_quote(q, sizeof q, key, (size_t)-1),
                          json_is_string(v) ? vkf_quote(q2, sizeof q2, json_string_value(v), (size_t)-1) : "a non-string");
            goto done;
        }
        names[n_names++] = json_string_value(v);
    }
    if (n_names == 0) {
        st = vkf_fail(VKF_ERROR_BAD_MODEL, INDEX ": \"weight_map\" is empty");
        goto done;
    }
    /* the distinct shards, in name order (model-00001-of-00003 first) */
    qsort(names, n_names, sizeof *names, by_string);
    for (size_t i = 0; i < n_names; i++)
        if (i == 0 || strcmp(names[i], names[n_shards - 1]) != 0) names[n_shards++] = names[i];
    if (n_shards > MAX_SHARDS) {
        st = vkf_fail(VKF_ERROR_BAD_MODEL, INDEX ": %zu shards, more than the %u a checkpoint here may have", n_shards,
                      MAX_SHARDS);
        goto done;
    }
    shards = calloc(n_shards, sizeof *shards);
    if (!shards) {
        st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory reading " INDEX);
        goto done;
    }
    for (size_t i = 0; i < n_shards && st == VKF_OK; i++) {
        const char *what = NULL;
        if (!vkf_hf_file(dir, names[i], &what))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s (a shard " INDEX " names) is %s",
                          vkf_quote(q, sizeof q, names[i], (size_t)-1), what);
        else
            st = open_one(dir, names[i], &shards[i]);
    }
    if (st != VKF_OK) {
        for (size_t i = 0; i < n_shards; i++) vkf_st_close(shards[i]);
        goto done;
    }
    vkf_st_file *f = NULL;
    st = vkf_st_merge(shards, (uint32_t)n_shards, &f);   /* owns the shards now */
    if (st != VKF_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vkf_last_error());
        st = vkf_fail(st, "the shards of " INDEX ": %s", msg);
        goto done;
    }
    /* the map and the shards agree, both ways */
    json_object_foreach(map, key, v) {
        const vkf_st_tensor *t = vkf_st_find(f, key);
        if (!t || strcmp(names[t->shard], json_string_value(v)) != 0) {
            st = vkf_fail(VKF_ERROR_BAD_MODEL, INDEX " puts tensor %s in %s, %s", vkf_quote(q, sizeof q, key, (size_t)-1),
                          vkf_quote(q2, sizeof q2, json_string_value(v), (size_t)-1),
                          t ? "but it is in another shard" : "but no shard holds it");
            break;
        }
    }
    for (uint32_t i = 0; st == VKF_OK && i < vkf_st_count(f); i++) {
        const vkf_st_tensor *t = vkf_st_at(f, i);
        if (!json_object_get(map, t->name))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "shard %s holds tensor %s, which " INDEX " does not list",
                          vkf_quote(q, sizeof q, names[t->shard], (size_t)-1),
                          vkf_quote(q2, sizeof q2, t->name, (size_t)-1));
    }
    if (st == VKF_OK) *out = f;
    else vkf_st_close(f);
done:
    free(shards);
    free(names);
    json_decref(index);
    return st;
}

vkf_status vkf_hf_open_weights(const char *dir, vkf_loader *L)
{
    const char *what = NULL;
    if (vkf_hf_file(dir, "model.safetensors", &what)) return open_one(dir, "model.safetensors", &L->file);
    if (strcmp(what, "missing") != 0) return vkf_fail(VKF_ERROR_BAD_MODEL, "model.safetensors is %s", what);
    const char *iwhat = NULL;
    if (vkf_hf_file(dir, INDEX, &iwhat) || strcmp(iwhat, "missing") != 0) return open_sharded(dir, &L->file);
    if (vkf_hf_file(dir, "pytorch_model.bin", NULL) || vkf_hf_file(dir, "pytorch_model.bin.index.json", NULL))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "model.safetensors is missing; the folder has pytorch_model.bin: "
                        "convert it once with /usr/bin/python3 tools/convert_hf.py FOLDER");
    return vkf_fail(VKF_ERROR_BAD_MODEL, "model.safetensors (or " INDEX " and its shards) is missing");
}

const char *vkf_hf_first_present(const vkf_loader *L, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] && vkf_st_find(L->file, names[i])) return names[i];
    return NULL;
}

vkf_status vkf_hf_tied_table(vkf_loader *L, const char *const *names, size_t n, uint32_t rows, vkf_split_table *out,
                             const char **out_name)
{
    const char *first = vkf_hf_first_present(L, names, n);
    if (!first) return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" is missing", names[0]);
    const vkf_st_tensor *t0 = NULL;
    VKF_TRY(vkf_ld_find(L, first, rows, L->spec->d_model, &t0));
    /* the tied copies: the same shape and the same values, else the file is not
     * what its config says (which one would run?) */
    for (size_t i = 0; i < n; i++) {
        const vkf_st_tensor *t;
        if (!names[i] || names[i] == first || !vkf_st_find(L->file, names[i])) continue;
        VKF_TRY(vkf_ld_find(L, names[i], rows, L->spec->d_model, &t));
        if (t->dtype != t0->dtype || memcmp(vkf_st_data(L->file, t), vkf_st_data(L->file, t0),
                                            (size_t)t0->elements * vkf_st_dtype_size(t0->dtype)) != 0)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "tensors \"%s\" and \"%s\" differ, but the config ties them (one "
                            "embedding)", first, names[i]);
    }
    if (out_name) *out_name = first;
    return vkf_ld_table(L, first, rows, L->spec->d_model, out);
}

/* prefix + {q,k,v}_proj stacked, or some of them: (n * inner, d); k_proj
 * without a bias (zeros in its rows) when !k_bias */
static vkf_status load_proj(vkf_loader *L, const char *prefix, const char *const *which, uint32_t n, uint32_t rows_each,
                            uint32_t cols, bool k_bias, vkf_linear *out)
{
    char w[3][320], b[3][320];
    const char *wn[3], *bn[3];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(w[i], sizeof w[i], "%.256s%s_proj.weight", prefix, which[i]);
        snprintf(b[i], sizeof b[i], "%.256s%s_proj.bias", prefix, which[i]);
        wn[i] = w[i], bn[i] = !k_bias && strcmp(which[i], "k") == 0 ? NULL : b[i];
    }
    return vkf_ld_stacked(L, wn, bn, n, rows_each, cols, out);
}

static vkf_status load_layers(vkf_loader *L, const char *prefix, bool k_bias);

vkf_status vkf_hf_load_layers(vkf_loader *L, const char *prefix)
{
    return load_layers(L, prefix, true);
}

vkf_status vkf_hf_load_layers_k_unbiased(vkf_loader *L, const char *prefix)
{
    return load_layers(L, prefix, false);
}

static vkf_status load_layers(vkf_loader *L, const char *prefix, bool k_bias)
{
    const vkf_arch_spec *c = L->spec;
    vkf_arch_weights *w = L->w;
    uint32_t d = c->d_model, f = c->d_ff, inner = c->heads * c->head_dim;
    static const char *const qkv[3] = {"q", "k", "v"}, *const kv[2] = {"k", "v"}, *const o[1] = {"out"};
    char p[256];
    for (uint32_t i = 0; i < c->encoder_layers; i++) {
        vkf_enc_layer *e = &w->enc[i];
        snprintf(p, sizeof p, "%sencoder.layers.%u.self_attn.", prefix, i);
        VKF_TRY(load_proj(L, p, qkv, 3, inner, d, k_bias, &e->qkv));
        VKF_TRY(load_proj(L, p, o, 1, d, inner, k_bias, &e->o));
        snprintf(p, sizeof p, "%sencoder.layers.%u.", prefix, i);
        VKF_TRY(vkf_ld_linear(L, p, "fc1.weight", "fc1.bias", f, d, 0, f, &e->ff1));
        VKF_TRY(vkf_ld_linear(L, p, "fc2.weight", "fc2.bias", d, f, 0, d, &e->ff2));
        snprintf(p, sizeof p, "%sencoder.layers.%u.self_attn_layer_norm", prefix, i);
        VKF_TRY(vkf_ld_norm(L, p, d, &e->n1));
        snprintf(p, sizeof p, "%sencoder.layers.%u.final_layer_norm", prefix, i);
        VKF_TRY(vkf_ld_norm(L, p, d, &e->n2));
    }
    for (uint32_t i = 0; i < c->decoder_layers; i++) {
        vkf_dec_layer *e = &w->dec[i];
        snprintf(p, sizeof p, "%sdecoder.layers.%u.self_attn.", prefix, i);
        VKF_TRY(load_proj(L, p, qkv, 3, inner, d, k_bias, &e->qkv));
        VKF_TRY(load_proj(L, p, o, 1, d, inner, k_bias, &e->o));
        snprintf(p, sizeof p, "%sdecoder.layers.%u.encoder_attn.", prefix, i);
        VKF_TRY(load_proj(L, p, qkv, 1, inner, d, k_bias, &e->cq));
        VKF_TRY(load_proj(L, p, kv, 2, inner, d, k_bias, &e->ckv));
        VKF_TRY(load_proj(L, p, o, 1, d, inner, k_bias, &e->co));
        snprintf(p, sizeof p, "%sdecoder.layers.%u.", prefix, i);
        VKF_TRY(vkf_ld_linear(L, p, "fc1.weight", "fc1.bias", f, d, 0, f, &e->ff1));
        VKF_TRY(vkf_ld_linear(L, p, "fc2.weight", "fc2.bias", d, f, 0, d, &e->ff2));
        static const char *const norms[3] = {"self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"};
        vkf_norm *dst[3] = {&e->n1, &e->n2, &e->n3};
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "%sdecoder.layers.%u.%s", prefix, i, norms[k]);
            VKF_TRY(vkf_ld_norm(L, p, d, dst[k]));
        }
    }
    /* the stacks' final norms and the embedding norms, where the spec has them */
    if (c->encoder_final_norm) {
        snprintf(p, sizeof p, "%sencoder.layer_norm", prefix);
        VKF_TRY(vkf_ld_norm(L, p, d, &w->enc_norm));
    }
    if (c->decoder_final_norm) {
        snprintf(p, sizeof p, "%sdecoder.layer_norm", prefix);
        VKF_TRY(vkf_ld_norm(L, p, d, &w->dec_norm));
    }
    if (c->embedding_norm) {
        snprintf(p, sizeof p, "%sencoder.layernorm_embedding", prefix);
        VKF_TRY(vkf_ld_norm(L, p, d, &w->enc_embed_norm));
        snprintf(p, sizeof p, "%sdecoder.layernorm_embedding", prefix);
        VKF_TRY(vkf_ld_norm(L, p, d, &w->dec_embed_norm));
    }
    return VKF_OK;
}

vkf_status vkf_hf_bart_sizes(json_t *c, vkf_arch_spec *s, int64_t *out_vocab)
{
    static const char F[] = "config.json";
    int64_t d = 0, el = 0, dl = 0, eh = 1, dh = 1, ef = 0, df = 0, v = 0;
    VKF_TRY(vkf_hf_int(c, F, "d_model", 1, 65536, -1, &d));
    VKF_TRY(vkf_hf_int(c, F, "encoder_layers", 1, 1024, -1, &el));
    VKF_TRY(vkf_hf_int(c, F, "decoder_layers", 1, 1024, -1, &dl));
    VKF_TRY(vkf_hf_int(c, F, "encoder_attention_heads", 1, 4096, -1, &eh));
    VKF_TRY(vkf_hf_int(c, F, "decoder_attention_heads", 1, 4096, -1, &dh));
    VKF_TRY(vkf_hf_int(c, F, "encoder_ffn_dim", 1, 1 << 20, -1, &ef));
    VKF_TRY(vkf_hf_int(c, F, "decoder_ffn_dim", 1, 1 << 20, -1, &df));
    VKF_TRY(vkf_hf_int(c, F, "vocab_size", 1, 1 << 24, -1, &v));
    if (eh != dh || ef != df)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: the encoder and decoder differ in heads (%lld, %lld) or "
                        "ffn_dim (%lld, %lld); vkformer runs models where they agree", (long long)eh, (long long)dh,
                        (long long)ef, (long long)df);
    if (d % eh) return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: d_model %lld is not divisible by %lld heads",
                                (long long)d, (long long)eh);
    VKF_TRY(vkf_hf_activation(c, F, &s->activation));
    s->d_model = (uint32_t)d, s->heads = (uint32_t)eh, s->head_dim = (uint32_t)(d / eh);
    s->encoder_layers = (uint32_t)el, s->decoder_layers = (uint32_t)dl, s->d_ff = (uint32_t)ef;
    s->src_vocab = s->tgt_vocab = (uint32_t)v;
    *out_vocab = v;
    return VKF_OK;
}

vkf_status vkf_family_check_target_ids(const vkf_family_model *fm, const int32_t *ids, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= fm->spec.tgt_vocab)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "id %d is outside the target vocabulary", ids[i]);
    return VKF_OK;
}

vkf_status vkf_family_text_out(char *text, size_t len, char *out_text, size_t capacity)
{
    vkf_status st = VKF_OK;
    if (len + 1 > capacity)
        st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text needs more than %zu bytes", capacity);
    else if (memchr(text, '\0', len))
        st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text holds a NUL byte (%zu bytes)", len);
    else
        memcpy(out_text, text, len + 1);
    free(text);
    return st;
}

vkf_status vkf_hf_bart_config(json_t *c, vkf_arch_spec *s, int64_t start_default, bool *tied)
{
    static const char F[] = "config.json";
    int64_t v = 0, mp = 0, pad = 0, eos = 0, bos = 0, start = 0;
    VKF_TRY(vkf_hf_bart_sizes(c, s, &v));
    VKF_TRY(vkf_hf_int(c, F, "max_position_embeddings", 1, 1 << 16, -1, &mp));
    VKF_TRY(vkf_hf_int(c, F, "pad_token_id", 0, v - 1, 1, &pad));
    VKF_TRY(vkf_hf_int(c, F, "eos_token_id", 0, v - 1, 2, &eos));
    VKF_TRY(vkf_hf_int(c, F, "bos_token_id", 0, v - 1, 0, &bos));
    VKF_TRY(vkf_hf_int(c, F, "decoder_start_token_id", 0, v - 1,
                       start_default >= 0 && start_default < v ? start_default : bos, &start));
    bool scale = false;
    VKF_TRY(vkf_hf_bool(c, F, "scale_embedding", false, &scale));
    VKF_TRY(vkf_hf_bool(c, F, "tie_word_embeddings", true, tied));
    s->max_len = (uint32_t)mp;
    s->norm = VKF_NORM_LAYER, s->norm_eps = 1e-5f;
    s->embed_scale = scale ? sqrtf((float)s->d_model) : 1.0f;
    s->pad_id = (int32_t)pad, s->eos_id = (int32_t)eos, s->decoder_start_id = (int32_t)start;
    return VKF_OK;
}

vkf_status vkf_hf_biased_generator(vkf_loader *L, bool tied, const char *lm_head, bool zeros_if_absent)
{
    uint32_t V = L->spec->tgt_vocab;
    /* a copy: the generator's own reads reuse the loader's scratch */
    float *b = calloc(V, sizeof *b);
    if (!b) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    vkf_status st = VKF_OK;
    if (!zeros_if_absent || vkf_st_find(L->file, "final_logits_bias")) {
        const vkf_st_tensor *bt = NULL;
        const float *bias = NULL;
        st = vkf_ld_find(L, "final_logits_bias", 1, V, &bt);
        if (st == VKF_OK) st = vkf_ld_floats(L, bt, &bias);
        if (st == VKF_OK) memcpy(b, bias, (size_t)V * sizeof *b);
    }
    if (st == VKF_OK) st = vkf_ld_generator(L, tied, lm_head, b);
    free(b);
    return st;
}

vkf_status vkf_hf_check_unexpected(const vkf_loader *L, const char *model_class)
{
    char hint[160];
    snprintf(hint, sizeof hint, "config.json says %u encoder and %u decoder layers of %s %s",
             L->spec->encoder_layers, L->spec->decoder_layers, strchr("AEIOU", model_class[0]) ? "an" : "a",
             model_class);
    return vkf_ld_check_unexpected(L, hint);
}

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
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (stat(path, &st) != 0) {
        if (what) *what = "missing";
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        if (what) *what = "not a regular file";
        return false;
    }
    return true;
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

/* One token id, or a list holding one: *out, or -1 when absent or null. */
static vkf_status one_id(json_t *g, const char *F, const char *key, uint32_t vocab, int64_t *out)
{
    json_t *v = json_object_get(g, key);
    *out = -1;
    if (!v || json_is_null(v)) return VKF_OK;
    if (json_is_array(v) && json_array_size(v) == 1) v = json_array_get(v, 0);
    if (!json_is_integer(v))
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: \"%s\" must be one id (several are not supported)", F, key);
    json_int_t id = json_integer_value(v);
    if (id < 0 || (uint64_t)id >= vocab)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %s %lld is outside the vocabulary (%u)", F, key, (long long)id, vocab);
    *out = id;
    return VKF_OK;
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
    int64_t beams = 1, max_length = 20, max_new = 0, min_length = 0, min_new = 0, nret = 1, start = 0, eos = 0, pad = 0;
    int64_t forced_bos = -1, forced_eos = -1, ngram = 0;
    double lp = 1.0, rep = 1.0;
    bool sample = false;
    vkf_status st = vkf_hf_int(g, F, "num_beams", 1, VKF_MAX_BEAMS, 1, &beams);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "max_length", 2, INT32_MAX, 20, &max_length); /* transformers' default */
    if (st == VKF_OK) st = vkf_hf_int(g, F, "max_new_tokens", 1, INT32_MAX, 0, &max_new);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "min_length", 0, INT32_MAX, 0, &min_length);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "min_new_tokens", 0, INT32_MAX, 0, &min_new);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "num_return_sequences", 1, VKF_MAX_BEAMS, 1, &nret);
    /* a length penalty past +-1000 makes every score overflow to infinity */
    if (st == VKF_OK) st = vkf_hf_float(g, F, "length_penalty", -1000, 1000, 1.0, &lp);
    if (st == VKF_OK) st = vkf_hf_float(g, F, "repetition_penalty", 0, 1e30, 1.0, &rep);
    if (st == VKF_OK) st = vkf_hf_bool(g, F, "renormalize_logits", false, &o->renormalize);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "decoder_start_token_id", 0, s->tgt_vocab - 1, s->decoder_start_id, &start);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "pad_token_id", 0, s->tgt_vocab - 1, s->pad_id, &pad);
    if (st == VKF_OK) st = one_id(g, F, "eos_token_id", s->tgt_vocab, &eos);
    if (st == VKF_OK && eos < 0) eos = s->eos_id;
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
    if (st == VKF_OK && rep != 1.0)
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: repetition_penalty %g is not implemented", F, rep);
    if (st == VKF_OK) st = vkf_hf_int(g, F, "no_repeat_ngram_size", 0, INT32_MAX, 0, &ngram);
    if (st == VKF_OK && ngram)
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: no_repeat_ngram_size %lld is not implemented", F, (long long)ngram);
    if (st == VKF_OK) st = one_id(g, F, "forced_bos_token_id", s->tgt_vocab, &forced_bos);
    if (st == VKF_OK) st = one_id(g, F, "forced_eos_token_id", s->tgt_vocab, &forced_eos);
    if (st == VKF_OK && forced_eos >= 0 && forced_eos != eos)
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: forced_eos_token_id must be eos_token_id %lld", F, (long long)eos);
    json_t *bad = json_object_get(g, "bad_words_ids");
    if (st == VKF_OK && bad && !json_is_null(bad)) {
        if (!json_is_array(bad))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"bad_words_ids\" must be a list of lists of ids", F);
        size_t n = st == VKF_OK ? json_array_size(bad) : 0;
        if (n > 4096) st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: more than 4096 bad_words_ids", F);
        if (st == VKF_OK && n && !(fm->banned = calloc(n, sizeof *fm->banned)))
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (size_t i = 0; st == VKF_OK && i < n; i++) {
            json_t *w = json_array_get(bad, i);
            if (!json_is_array(w) || json_array_size(w) != 1 || !json_is_integer(json_array_get(w, 0))) {
                st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: bad_words_ids entry %zu is not one id (only single-token bans "
                              "are implemented)", F, i);
                break;
            }
            json_int_t id = json_integer_value(json_array_get(w, 0));
            if (id < 0 || id >= s->tgt_vocab)
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: bad_words_ids holds %lld, outside the vocabulary", F, (long long)id);
            else if (id == eos)
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: bad_words_ids bans eos", F);
            else
                fm->banned[fm->n_banned++] = (int32_t)id;
        }
    }
    json_decref(own);
    VKF_TRY(st);
    s->decoder_start_id = (int32_t)start, s->eos_id = (int32_t)eos, s->pad_id = (int32_t)pad;
    /* max_length counts the decoder start token, as generate() does */
    uint64_t steps = max_new ? (uint64_t)max_new : (uint64_t)max_length - 1;
    o->max_new = (uint32_t)(steps < s->max_len ? steps : s->max_len);
    uint64_t mn = min_new ? (uint64_t)min_new : (min_length > 1 ? (uint64_t)min_length - 1 : 0);
    o->min_new = (uint32_t)(mn < o->max_new ? mn : o->max_new);
    o->beams = (uint32_t)beams;
    o->n_best = (uint32_t)(nret <= beams ? nret : beams);
    o->length_penalty = (float)lp;
    o->forced_eos = forced_eos >= 0;
    if (forced_bos >= 0) o->forced_bos = true, o->forced_bos_id = (int32_t)forced_bos;
    return VKF_OK;
}

vkf_status vkf_hf_open_weights(const char *dir, vkf_loader *L)
{
    const char *what = NULL;
    if (!vkf_hf_file(dir, "model.safetensors", &what)) {
        if (strcmp(what, "missing") == 0 && vkf_hf_file(dir, "pytorch_model.bin", NULL))
            return vkf_fail(VKF_ERROR_BAD_MODEL, "model.safetensors is missing; the folder has pytorch_model.bin: "
                            "convert it once with /usr/bin/python3 tools/convert_hf.py FOLDER");
        return vkf_fail(VKF_ERROR_BAD_MODEL, "model.safetensors is %s", what);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    vkf_status st = vkf_st_open(path, &L->file);
    if (st == VKF_ERROR_BAD_MODEL) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vkf_last_error());
        st = vkf_fail(st, "model.safetensors: %s", msg);
    }
    return st;
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

/* prefix + {q,k,v}_proj stacked, or some of them: (n * inner, d) */
static vkf_status load_proj(vkf_loader *L, const char *prefix, const char *const *which, uint32_t n, uint32_t rows_each,
                            uint32_t cols, vkf_linear *out)
{
    char w[3][320], b[3][320];
    const char *wn[3], *bn[3];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(w[i], sizeof w[i], "%.256s%s_proj.weight", prefix, which[i]);
        snprintf(b[i], sizeof b[i], "%.256s%s_proj.bias", prefix, which[i]);
        wn[i] = w[i], bn[i] = b[i];
    }
    return vkf_ld_stacked(L, wn, bn, n, rows_each, cols, out);
}

vkf_status vkf_hf_load_layers(vkf_loader *L, const char *prefix)
{
    const vkf_arch_spec *c = L->spec;
    vkf_arch_weights *w = L->w;
    uint32_t d = c->d_model, f = c->d_ff, inner = c->heads * c->head_dim;
    static const char *const qkv[3] = {"q", "k", "v"}, *const kv[2] = {"k", "v"}, *const o[1] = {"out"};
    char p[256];
    for (uint32_t i = 0; i < c->encoder_layers; i++) {
        vkf_enc_layer *e = &w->enc[i];
        snprintf(p, sizeof p, "%sencoder.layers.%u.self_attn.", prefix, i);
        VKF_TRY(load_proj(L, p, qkv, 3, inner, d, &e->qkv));
        VKF_TRY(load_proj(L, p, o, 1, d, inner, &e->o));
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
        VKF_TRY(load_proj(L, p, qkv, 3, inner, d, &e->qkv));
        VKF_TRY(load_proj(L, p, o, 1, d, inner, &e->o));
        snprintf(p, sizeof p, "%sdecoder.layers.%u.encoder_attn.", prefix, i);
        VKF_TRY(load_proj(L, p, qkv, 1, inner, d, &e->cq));
        VKF_TRY(load_proj(L, p, kv, 2, inner, d, &e->ckv));
        VKF_TRY(load_proj(L, p, o, 1, d, inner, &e->co));
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

/* Encoder-decoder models: the config and every weight checked against the file
 * format (docs/file-format.md), weights uploaded once, the forward pass recorded
 * into one command buffer per shape, and the recording helpers that generation
 * (generate.c) shares with it. */
#include "internal.h"
#include "model.h"
#include "attention/attention_lsh.h"
#include "families/safetensors.h"
#include "model_load.h"

#include <ctype.h>
#include <jansson.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ------------------------------------------------------------------ config */

static vkf_status bad(const char *fmt, const char *key, const char *detail)
{
    return vkf_fail(VKF_ERROR_BAD_MODEL, fmt, key, detail);
}

static vkf_status get_uint(json_t *cfg, const char *key, uint64_t min, uint64_t max, uint32_t *out)
{
    json_t *v = json_object_get(cfg, key);
    if (!v) return bad("vkformer.config: key \"%s\" is missing%s", key, "");
    if (!json_is_integer(v)) return bad("vkformer.config: \"%s\" must be an integer%s", key, "");
    json_int_t x = json_integer_value(v);
    if (x < (json_int_t)min || (uint64_t)x > max) {
        char range[96];
        snprintf(range, sizeof range, " (%lld is outside %llu..%llu)", (long long)x, (unsigned long long)min,
                 (unsigned long long)max);
        return bad("vkformer.config: \"%s\" is out of range%s", key, range);
    }
    *out = (uint32_t)x;
    return VKF_OK;
}

static vkf_status get_number(json_t *cfg, const char *key, double *out)
{
    json_t *v = json_object_get(cfg, key);
    if (!v) return bad("vkformer.config: key \"%s\" is missing%s", key, "");
    if (!json_is_number(v)) return bad("vkformer.config: \"%s\" must be a number%s", key, "");
    *out = json_number_value(v);
    if (!isfinite(*out)) return bad("vkformer.config: \"%s\" is not finite%s", key, "");
    return VKF_OK;
}

static void free_vocab(char **vocab, uint32_t n)
{
    if (!vocab) return;
    for (uint32_t i = 0; i < n; i++) free(vocab[i]);
    free(vocab);
}

static vkf_status get_vocab(json_t *cfg, const char *key, uint32_t size, char ***out)
{
    *out = NULL;
    json_t *v = json_object_get(cfg, key);
    if (!v) return VKF_OK;
    if (!json_is_array(v)) return bad("vkformer.config: \"%s\" must be a list of strings%s", key, "");
    if (json_array_size(v) != size) {
        char detail[96];
        snprintf(detail, sizeof detail, " (%zu entries, the vocabulary size is %u)", json_array_size(v), size);
        return bad("vkformer.config: \"%s\" has the wrong length%s", key, detail);
    }
    char **vocab = calloc(size, sizeof *vocab);
    if (!vocab) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %s", key);
    for (uint32_t i = 0; i < size; i++) {
        json_t *s = json_array_get(v, i);
        if (!json_is_string(s)) {
            free_vocab(vocab, size);
            char detail[64];
            snprintf(detail, sizeof detail, " (entry %u is not a string)", i);
            return bad("vkformer.config: \"%s\" must be a list of strings%s", key, detail);
        }
        vocab[i] = strdup(json_string_value(s));
        if (!vocab[i]) {
            free_vocab(vocab, size);
            return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %s", key);
        }
    }
    *out = vocab;
    return VKF_OK;
}

/* Parses and checks __metadata__["vkformer.config"]. */
static vkf_status parse_config(vkf_model *m, const char *text)
{
    if (!text) return vkf_fail(VKF_ERROR_BAD_MODEL, "the file has no __metadata__ key \"vkformer.config\"");
    json_error_t err;
    json_t *cfg = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!cfg) return vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config is not valid JSON: %s (column %d)", err.text, err.column);
    vkf_status st = VKF_OK;
    vkf_model_config *c = &m->cfg;
    uint32_t pad = 0, bos = 0, eos = 0;
    double eps = 0, scale = 0;
    if (!json_is_object(cfg)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config must be a JSON object");
    /* Bounds keep every derived size inside 32-bit shader indices and sane memory. */
    if (st == VKF_OK) st = get_uint(cfg, "d_model", 1, 65536, &c->d_model);
    if (st == VKF_OK) st = get_uint(cfg, "n_heads", 1, 4096, &c->n_heads);
    if (st == VKF_OK) st = get_uint(cfg, "n_encoder_layers", 1, 1024, &c->n_encoder_layers);
    if (st == VKF_OK) st = get_uint(cfg, "n_decoder_layers", 1, 1024, &c->n_decoder_layers);
    if (st == VKF_OK) st = get_uint(cfg, "d_ff", 1, 1u << 20, &c->d_ff);
    if (st == VKF_OK) st = get_uint(cfg, "src_vocab_size", 1, 1u << 24, &c->src_vocab_size);
    if (st == VKF_OK) st = get_uint(cfg, "tgt_vocab_size", 1, 1u << 24, &c->tgt_vocab_size);
    if (st == VKF_OK) st = get_uint(cfg, "max_len", 1, 1u << 16, &c->max_len);
    if (st == VKF_OK) st = get_uint(cfg, "pad_id", 0, UINT32_MAX, &pad);
    if (st == VKF_OK) st = get_uint(cfg, "bos_id", 0, UINT32_MAX, &bos);
    if (st == VKF_OK) st = get_uint(cfg, "eos_id", 0, UINT32_MAX, &eos);
    if (st == VKF_OK) st = get_number(cfg, "layer_norm_eps", &eps);
    if (st == VKF_OK) st = get_number(cfg, "embed_scale", &scale);
    if (st == VKF_OK && c->d_model % c->n_heads)
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: d_model %u is not divisible by n_heads %u", c->d_model,
                      c->n_heads);
    if (st == VKF_OK && !(eps > 0 && eps < 1))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: layer_norm_eps %g must be in (0, 1)", eps);
    if (st == VKF_OK && (pad >= c->tgt_vocab_size || bos >= c->tgt_vocab_size || eos >= c->tgt_vocab_size))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: pad_id %u, bos_id %u and eos_id %u must be below tgt_vocab_size %u",
                      pad, bos, eos, c->tgt_vocab_size);
    if (st == VKF_OK && (pad >= c->src_vocab_size || eos >= c->src_vocab_size))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: pad_id %u and eos_id %u must be below src_vocab_size %u",
                      pad, eos, c->src_vocab_size);
    if (st == VKF_OK) {
        json_t *act = json_object_get(cfg, "activation");
        const char *a = json_is_string(act) ? json_string_value(act) : NULL;
        if (!act) st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: key \"activation\" is missing");
        else if (a && strcmp(a, "relu") == 0) c->activation = VKF_ACTIVATION_RELU;
        else if (a && strcmp(a, "gelu") == 0) c->activation = VKF_ACTIVATION_GELU;
        else if (a && strcmp(a, "silu") == 0) c->activation = VKF_ACTIVATION_SILU;
        else st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: \"activation\" must be \"relu\", \"gelu\" or \"silu\"");
    }
    if (st == VKF_OK) {
        json_t *nf = json_object_get(cfg, "norm_first");
        if (!nf) st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: key \"norm_first\" is missing");
        else if (!json_is_boolean(nf)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: \"norm_first\" must be true or false");
        else c->norm_first = json_is_true(nf);
    }
    if (st == VKF_OK) st = get_vocab(cfg, "src_vocab", c->src_vocab_size, &m->src_vocab);
    if (st == VKF_OK) st = get_vocab(cfg, "tgt_vocab", c->tgt_vocab_size, &m->tgt_vocab);
    if (st == VKF_OK) {
        json_t *split = json_object_get(cfg, "src_split");
        if (split && !(json_is_string(split) && (strcmp(json_string_value(split), "whitespace") == 0 ||
                                                 strcmp(json_string_value(split), "chars") == 0)))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: \"src_split\" must be \"whitespace\" or \"chars\"");
        else m->split_chars = split && strcmp(json_string_value(split), "chars") == 0;
    }
    if (st == VKF_OK) {
        json_t *join = json_object_get(cfg, "tgt_join");
        if (join && !json_is_string(join)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: \"tgt_join\" must be a string");
        else if (!(m->tgt_join = strdup(join ? json_string_value(join) : " ")))
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    if (st == VKF_OK) {
        c->layer_norm_eps = (float)eps;
        c->embed_scale = (float)scale;
        c->pad_id = (int32_t)pad, c->bos_id = (int32_t)bos, c->eos_id = (int32_t)eos;
        c->has_vocab = m->src_vocab && m->tgt_vocab;
    }
    json_decref(cfg);
    return st;
}

/* ------------------------------------------------------------------ weights */

/* ------------------------------------------------------------------ weights */

bool vkf_ld_name_add(name_list *l, const char *name)
{
    if (l->count == l->capacity) {
        uint32_t cap = l->capacity ? 2 * l->capacity : 64;
        char **grown = realloc(l->names, cap * sizeof *grown);
        if (!grown) return false;
        l->names = grown;
        l->capacity = cap;
    }
    return (l->names[l->count++] = strdup(name)) != NULL;
}

void vkf_ld_names_free(name_list *l)
{
    for (uint32_t i = 0; i < l->count; i++) free(l->names[i]);
    free(l->names);
}

/* Checks tensor `name` is there with shape (rows, cols) (or (cols) when rows == 0). */
vkf_status vkf_ld_find_shaped(const loader *L, const char *name, uint32_t rows, uint32_t cols,
                              const vkf_st_tensor **out)
{
    const vkf_st_tensor *t = vkf_st_find(L->file, name);
    if (!t) return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" is missing", name);
    bool shape_ok = rows == 0 ? (t->rank == 1 && t->shape[0] == cols)
                              : (t->rank == 2 && t->shape[0] == rows && t->shape[1] == cols);
    if (!shape_ok) {
        char got[128] = "(";
        for (uint32_t i = 0; i < t->rank && i < 4; i++) {
            size_t len = strlen(got);
            snprintf(got + len, sizeof got - len, "%s%llu", i ? ", " : "", (unsigned long long)t->shape[i]);
        }
        strcat(got, ")");
        if (rows == 0) return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" has shape %s, expected (%u)", name, got, cols);
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" has shape %s, expected (%u, %u)", name, got, rows, cols);
    }
    *out = t;
    return VKF_OK;
}

/* vkf_ld_find_shaped, and a float dtype; notes the name as expected. */
vkf_status vkf_ld_find(loader *L, const char *name, uint32_t rows, uint32_t cols, const vkf_st_tensor **out)
{
    const vkf_st_tensor *t = NULL;
    VKF_TRY(vkf_ld_find_shaped(L, name, rows, cols, &t));
    if (t->dtype != VKF_ST_F32 && t->dtype != VKF_ST_F16 && t->dtype != VKF_ST_BF16)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" has dtype %s; F32, F16 or BF16 expected", name,
                        vkf_st_dtype_name(t->dtype));
    if (!vkf_ld_name_add(&L->expected, name)) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    *out = t;
    return VKF_OK;
}

/* A checked tensor converted to floats in the scratch buffer. */
vkf_status vkf_ld_floats(loader *L, const vkf_st_tensor *t, const float **out)
{
    if (t->elements > L->scratch_floats) {
        float *grown = realloc(L->scratch, t->elements * sizeof *grown);
        if (!grown) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory reading \"%s\"", t->name);
        L->scratch = grown;
        L->scratch_floats = t->elements;
    }
    VKF_TRY(vkf_st_read_f32(L->file, t, L->scratch, t->elements));
    *out = L->scratch;
    return VKF_OK;
}

static vkf_status upload(loader *L, const float *data, uint32_t rows, uint32_t cols, vkf_tensor **out)
{
    if (L->dry_run) return VKF_OK;
    uint64_t shape[2] = {rows ? rows : 1, cols};
    VKF_TRY(vkf_tensor_create(L->m->ctx, VKF_DTYPE_F32, rows ? 2 : 1, rows ? shape : shape + 1, out));
    return vkf_tensor_upload(*out, data, (uint64_t)(rows ? rows : 1) * cols * sizeof(float));
}

/* A weight (rows, cols), or rows [row0, row0 + nrows) of one (rows, cols).
 * Stored F16 where the device reads 16-bit storage and the precision asks for
 * it: auto keeps the file's F16 as F16, f16 also converts F32 and BF16. */
vkf_status vkf_ld_matrix(loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0, uint32_t nrows,
                              vkf_tensor **out)
{
    const vkf_st_tensor *t = NULL;
    VKF_TRY(vkf_ld_find(L, name, rows, cols, &t));
    bool as_f16 = !L->dry_run && L->m->ctx->storage_16bit &&
                  (L->precision == VKF_PRECISION_F16 ||
                   ((L->precision == VKF_PRECISION_AUTO || L->precision == VKF_PRECISION_INT8) && t->dtype == VKF_ST_F16));
    if (as_f16) {
        uint64_t shape[2] = {nrows, cols}, count = (uint64_t)nrows * cols;
        VKF_TRY(vkf_tensor_create(L->m->ctx, VKF_DTYPE_F16, 2, shape, out));
        if (t->dtype == VKF_ST_F16) {
            const uint8_t *raw = vkf_st_data(L->file, t); /* little-endian halves, as the device reads them */
            return vkf_tensor_upload(*out, raw + (uint64_t)row0 * cols * 2, count * 2);
        }
        const float *data = NULL;
        VKF_TRY(vkf_ld_floats(L, t, &data));
        if (count > L->halves_count) {
            uint16_t *grown = realloc(L->halves, count * sizeof *grown);
            if (!grown) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory converting \"%s\"", name);
            L->halves = grown, L->halves_count = count;
        }
        for (uint64_t e = 0; e < count; e++) L->halves[e] = vkf_half_from_float(data[(uint64_t)row0 * cols + e]);
        return vkf_tensor_upload(*out, L->halves, count * 2);
    }
    const float *data = NULL;
    VKF_TRY(vkf_ld_floats(L, t, &data));
    return upload(L, data + (uint64_t)row0 * cols, nrows, cols, out);
}

/* Precision int8: rows [row0, row0 + nrows) of weight matrix `name` (rows, cols)
 * quantized to symmetric int8 with one F32 scale per row (output channel), by
 * vkf_quantize_int8_rows: *out (nrows, cols) I8, *out_scale (nrows) F32. */
vkf_status vkf_ld_matrix_i8(loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0,
                                 uint32_t nrows, vkf_tensor **out, vkf_tensor **out_scale)
{
    const vkf_st_tensor *t = NULL;
    const float *data = NULL;
    VKF_TRY(vkf_ld_find(L, name, rows, cols, &t));
    VKF_TRY(vkf_ld_floats(L, t, &data));
    if (L->dry_run) return VKF_OK;
    uint64_t count = (uint64_t)nrows * cols;
    if (count > L->quant_count) {
        int8_t *grown = realloc(L->quant, count);
        if (!grown) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory quantizing \"%s\"", name);
        L->quant = grown, L->quant_count = count;
    }
    float *sc = malloc(nrows * sizeof *sc);
    if (!sc) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory quantizing \"%s\"", name);
    vkf_status st = vkf_quantize_int8_rows(data + (uint64_t)row0 * cols, nrows, cols, L->quant, sc);
    if (st != VKF_OK) {
        char why[512]; /* vkf_fail rewrites the buffer vkf_last_error points to */
        snprintf(why, sizeof why, "%s", vkf_last_error());
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" cannot be quantized to int8: %s", name, why);
    }
    uint64_t shape[2] = {nrows, cols};
    if (st == VKF_OK) st = vkf_tensor_create(L->m->ctx, VKF_DTYPE_I8, 2, shape, out);
    if (st == VKF_OK) st = vkf_tensor_upload(*out, L->quant, count);
    if (st == VKF_OK) st = vkf_tensor_create(L->m->ctx, VKF_DTYPE_F32, 1, shape, out_scale);
    if (st == VKF_OK) st = vkf_tensor_upload(*out_scale, sc, (uint64_t)nrows * sizeof *sc);
    free(sc);
    return st;
}

/* An int8 weight matrix from the file: `name` I8 (rows, cols) with `name`_scale
 * F32 (rows), one finite non-negative scale per row (docs/file-format.md). Rows
 * [row0, row0 + nrows) are uploaded as they are (I8 + scales) with precision auto
 * or int8, and dequantized (q * scale) to F32 or F16 with f32 or f16. */
static vkf_status vkf_ld_matrix_file_i8(loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0,
                                      uint32_t nrows, vkf_tensor **out, vkf_tensor **out_scale)
{
    const vkf_st_tensor *t = NULL, *s = NULL;
    VKF_TRY(vkf_ld_find_shaped(L, name, rows, cols, &t));
    char sname[288];
    snprintf(sname, sizeof sname, "%s_scale", name);
    if (!vkf_st_find(L->file, sname))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" is I8 but its scales \"%s\" (F32, %u) are missing", name,
                        sname, rows);
    VKF_TRY(vkf_ld_find(L, sname, 0, rows, &s));
    if (s->dtype != VKF_ST_F32)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" has dtype %s; int8 scales are F32", sname,
                        vkf_st_dtype_name(s->dtype));
    if (!vkf_ld_name_add(&L->expected, name)) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    const float *all = NULL;
    VKF_TRY(vkf_ld_floats(L, s, &all));
    for (uint32_t r = 0; r < rows; r++)
        if (!(isfinite(all[r]) && all[r] >= 0.0f))
            return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\": scale %u is %g; scales must be finite and >= 0",
                            sname, r, (double)all[r]);
    if (L->dry_run) return VKF_OK;
    uint64_t count = (uint64_t)nrows * cols;
    const int8_t *q = (const int8_t *)vkf_st_data(L->file, t) + (uint64_t)row0 * cols;
    float *buf = malloc((L->precision == VKF_PRECISION_F32 || L->precision == VKF_PRECISION_F16 ? count : nrows) *
                        sizeof *buf);
    if (!buf) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory reading \"%s\"", name);
    vkf_status st = VKF_OK;
    uint64_t shape[2] = {nrows, cols};
    if (L->precision == VKF_PRECISION_AUTO || L->precision == VKF_PRECISION_INT8) {
        memcpy(buf, all + row0, nrows * sizeof *buf);
        st = vkf_tensor_create(L->m->ctx, VKF_DTYPE_I8, 2, shape, out);
        if (st == VKF_OK) st = vkf_tensor_upload(*out, q, count);
        if (st == VKF_OK) st = vkf_tensor_create(L->m->ctx, VKF_DTYPE_F32, 1, shape, out_scale);
        if (st == VKF_OK) st = vkf_tensor_upload(*out_scale, buf, (uint64_t)nrows * sizeof *buf);
        free(buf);
        return st;
    }
    for (uint64_t e = 0; e < count; e++) buf[e] = (float)q[e] * all[row0 + e / cols];
    if (L->precision == VKF_PRECISION_F16) {
        uint16_t *h = malloc(count * sizeof *h);
        st = h ? vkf_tensor_create(L->m->ctx, VKF_DTYPE_F16, 2, shape, out)
               : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory converting \"%s\"", name);
        for (uint64_t e = 0; st == VKF_OK && e < count; e++) h[e] = vkf_half_from_float(buf[e]);
        if (st == VKF_OK) st = vkf_tensor_upload(*out, h, count * sizeof *h);
        free(h);
    } else {
        st = upload(L, buf, nrows, cols, out);
    }
    free(buf);
    return st;
}

/* A vector (n), or entries [begin, begin + count) of it. */
vkf_status vkf_ld_vector(loader *L, const char *name, uint32_t n, uint32_t begin, uint32_t count, vkf_tensor **out)
{
    const vkf_st_tensor *t = NULL;
    const float *data = NULL;
    VKF_TRY(vkf_ld_find(L, name, 0, n, &t));
    VKF_TRY(vkf_ld_floats(L, t, &data));
    return upload(L, data + begin, 0, count, out);
}

vkf_status vkf_ld_linear(loader *L, const char *prefix, const char *wname, const char *bname, uint32_t rows,
                              uint32_t cols, uint32_t row0, uint32_t nrows, linear *out)
{
    char w[256], b[256];
    snprintf(w, sizeof w, "%s%s", prefix, wname);
    snprintf(b, sizeof b, "%s%s", prefix, bname);
    out->out = nrows;
    out->in = cols;
    const vkf_st_tensor *in_file = vkf_st_find(L->file, w);
    if (in_file && in_file->dtype == VKF_ST_I8)
        VKF_TRY(vkf_ld_matrix_file_i8(L, w, rows, cols, row0, nrows, &out->w, &out->scale));
    else if (L->precision == VKF_PRECISION_INT8)
        VKF_TRY(vkf_ld_matrix_i8(L, w, rows, cols, row0, nrows, &out->w, &out->scale));
    else
        VKF_TRY(vkf_ld_matrix(L, w, rows, cols, row0, nrows, &out->w));
    return vkf_ld_vector(L, b, rows, row0, nrows, &out->b);
}

vkf_status vkf_ld_norm(loader *L, const char *prefix, uint32_t d, norm *out)
{
    char g[256], b[256];
    snprintf(g, sizeof g, "%s.weight", prefix);
    snprintf(b, sizeof b, "%s.bias", prefix);
    VKF_TRY(vkf_ld_vector(L, g, d, 0, d, &out->g));
    return vkf_ld_vector(L, b, d, 0, d, &out->b);
}

/* Host floats (rows, cols) as a weight in the load's precision: int8 with per-row
 * scales (int8), F16 (f16; auto and int8 keep a file's F16 as F16), else F32. */
static vkf_status upload_weight(loader *L, const char *name, const float *data, uint32_t rows, uint32_t cols,
                                bool file_f16, vkf_tensor **out, vkf_tensor **out_scale)
{
    if (L->dry_run) return VKF_OK;
    vkf_context *ctx = L->m->ctx;
    uint64_t shape[2] = {rows, cols}, count = (uint64_t)rows * cols;
    if (L->precision == VKF_PRECISION_INT8) {
        int8_t *q = malloc(count);
        float *sc = malloc(rows * sizeof *sc);
        vkf_status st = q && sc ? vkf_quantize_int8_rows(data, rows, cols, q, sc)
                                : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory quantizing \"%s\"", name);
        if (st != VKF_OK && q && sc) {
            char why[512];
            snprintf(why, sizeof why, "%s", vkf_last_error());
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" cannot be quantized to int8: %s", name, why);
        }
        if (st == VKF_OK) st = vkf_tensor_create(ctx, VKF_DTYPE_I8, 2, shape, out);
        if (st == VKF_OK) st = vkf_tensor_upload(*out, q, count);
        if (st == VKF_OK) st = vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, shape, out_scale);
        if (st == VKF_OK) st = vkf_tensor_upload(*out_scale, sc, (uint64_t)rows * sizeof *sc);
        free(q), free(sc);
        return st;
    }
    bool as_f16 = ctx->storage_16bit && (L->precision == VKF_PRECISION_F16 || (L->precision == VKF_PRECISION_AUTO && file_f16));
    if (!as_f16) return upload(L, data, rows, cols, out);
    uint16_t *h = malloc(count * sizeof *h);
    if (!h) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory converting \"%s\"", name);
    for (uint64_t e = 0; e < count; e++) h[e] = vkf_half_from_float(data[e]);
    vkf_status st = vkf_tensor_create(ctx, VKF_DTYPE_F16, 2, shape, out);
    if (st == VKF_OK) st = vkf_tensor_upload(*out, h, count * sizeof *h);
    free(h);
    return st;
}

vkf_status vkf_ld_stacked(loader *L, const char *const *wnames, const char *const *bnames, uint32_t n,
                          uint32_t rows_each, uint32_t cols, linear *out)
{
    uint64_t per = (uint64_t)rows_each * cols, rows = (uint64_t)n * rows_each;
    float *w = malloc(rows * cols * sizeof *w), *b = malloc(rows * sizeof *b);
    vkf_status st = w && b ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory reading \"%s\"", wnames[0]);
    bool f16 = true;
    for (uint32_t i = 0; st == VKF_OK && i < n; i++) {
        const vkf_st_tensor *t = NULL;
        const float *data = NULL;
        st = vkf_ld_find(L, wnames[i], rows_each, cols, &t);
        if (st == VKF_OK) st = vkf_ld_floats(L, t, &data);
        if (st == VKF_OK) memcpy(w + i * per, data, per * sizeof *w), f16 = f16 && t->dtype == VKF_ST_F16;
        if (st == VKF_OK) st = vkf_ld_find(L, bnames[i], 0, rows_each, &t);
        if (st == VKF_OK) st = vkf_ld_floats(L, t, &data);
        if (st == VKF_OK) memcpy(b + (uint64_t)i * rows_each, data, rows_each * sizeof *b);
    }
    out->out = (uint32_t)rows, out->in = cols;
    if (st == VKF_OK) st = upload_weight(L, wnames[0], w, (uint32_t)rows, cols, f16, &out->w, &out->scale);
    if (st == VKF_OK) st = upload(L, b, 0, (uint32_t)rows, &out->b);
    free(w), free(b);
    return st;
}

vkf_status vkf_ld_table(loader *L, const char *name, uint32_t rows, uint32_t d, split_table *out)
{
    /* parts sized for 4-byte elements, so that F32 and F16 tables split alike and a
     * tied generator can take the same parts */
    uint64_t range = L->dry_run ? UINT64_MAX : L->m->ctx->info.max_storage_buffer_range;
    uint64_t per = range / ((uint64_t)d * 4);
    if (per == 0)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "tensor \"%s\": one row of %u floats exceeds the device's "
                        "maxStorageBufferRange of %llu bytes", name, d, (unsigned long long)range);
    if (per > rows) per = rows;
    uint32_t parts = (uint32_t)((rows + per - 1) / per);
    out->part = calloc(parts, sizeof *out->part);
    if (!out->part) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for \"%s\"", name);
    out->parts = parts, out->rows_per_part = (uint32_t)per, out->rows = rows, out->borrowed = false;
    /* precision int8: each part quantized by rows (tokens), its scales beside it;
     * an I8 embedding in the file is still refused (vkf_ld_find takes floats) */
    bool i8 = L->precision == VKF_PRECISION_INT8;
    if (i8 && !(out->scale = calloc(parts, sizeof *out->scale)))
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for \"%s\"", name);
    for (uint32_t i = 0; i < parts; i++) {
        uint32_t r0 = i * (uint32_t)per, n = rows - r0 < per ? rows - r0 : (uint32_t)per;
        if (i8) VKF_TRY(vkf_ld_matrix_i8(L, name, rows, d, r0, n, &out->part[i], &out->scale[i]));
        else VKF_TRY(vkf_ld_matrix(L, name, rows, d, r0, n, &out->part[i]));
    }
    if (parts > 1 && !L->dry_run)
        vkf_log(L->m->ctx, VKF_LOG_INFO, "\"%s\" (%u x %u) is held in %u parts of up to %llu rows (maxStorageBufferRange "
                "%llu bytes)", name, rows, d, parts, (unsigned long long)per, (unsigned long long)range);
    return VKF_OK;
}

vkf_status vkf_ld_check_unexpected(const loader *L, const char *hint)
{
    for (uint32_t i = 0; i < vkf_st_count(L->file); i++) {
        const char *name = vkf_st_at(L->file, i)->name;
        bool known = false;
        for (uint32_t k = 0; k < L->expected.count && !known; k++) known = strcmp(L->expected.names[k], name) == 0;
        if (!known) return vkf_fail(VKF_ERROR_BAD_MODEL, "unexpected tensor \"%s\" (%s)", name, hint);
    }
    return VKF_OK;
}

static vkf_status load_weights(loader *L)
{
    vkf_model *m = L->m;
    const vkf_model_config *c = &m->cfg;
    uint32_t d = c->d_model, f = c->d_ff;
    char p[160];
    VKF_TRY(vkf_ld_table(L, "src_embed.weight", c->src_vocab_size, d, &m->src_embed));
    VKF_TRY(vkf_ld_table(L, "tgt_embed.weight", c->tgt_vocab_size, d, &m->tgt_embed));
    for (uint32_t i = 0; i < c->n_encoder_layers; i++) {
        enc_layer *e = &m->enc[i];
        snprintf(p, sizeof p, "transformer.encoder.layers.%u.", i);
        VKF_TRY(vkf_ld_linear(L, p, "self_attn.in_proj_weight", "self_attn.in_proj_bias", 3 * d, d, 0, 3 * d, &e->qkv));
        VKF_TRY(vkf_ld_linear(L, p, "self_attn.out_proj.weight", "self_attn.out_proj.bias", d, d, 0, d, &e->o));
        VKF_TRY(vkf_ld_linear(L, p, "linear1.weight", "linear1.bias", f, d, 0, f, &e->ff1));
        VKF_TRY(vkf_ld_linear(L, p, "linear2.weight", "linear2.bias", d, f, 0, d, &e->ff2));
        snprintf(p, sizeof p, "transformer.encoder.layers.%u.norm1", i);
        VKF_TRY(vkf_ld_norm(L, p, d, &e->n1));
        snprintf(p, sizeof p, "transformer.encoder.layers.%u.norm2", i);
        VKF_TRY(vkf_ld_norm(L, p, d, &e->n2));
    }
    VKF_TRY(vkf_ld_norm(L, "transformer.encoder.norm", d, &m->enc_norm));
    for (uint32_t i = 0; i < c->n_decoder_layers; i++) {
        dec_layer *e = &m->dec[i];
        snprintf(p, sizeof p, "transformer.decoder.layers.%u.", i);
        VKF_TRY(vkf_ld_linear(L, p, "self_attn.in_proj_weight", "self_attn.in_proj_bias", 3 * d, d, 0, 3 * d, &e->qkv));
        VKF_TRY(vkf_ld_linear(L, p, "self_attn.out_proj.weight", "self_attn.out_proj.bias", d, d, 0, d, &e->o));
        VKF_TRY(vkf_ld_linear(L, p, "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias", 3 * d, d, 0, d, &e->cq));
        VKF_TRY(vkf_ld_linear(L, p, "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias", 3 * d, d, d, 2 * d,
                            &e->ckv));
        VKF_TRY(vkf_ld_linear(L, p, "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias", d, d, 0, d, &e->co));
        VKF_TRY(vkf_ld_linear(L, p, "linear1.weight", "linear1.bias", f, d, 0, f, &e->ff1));
        VKF_TRY(vkf_ld_linear(L, p, "linear2.weight", "linear2.bias", d, f, 0, d, &e->ff2));
        const char *norms[3] = {"norm1", "norm2", "norm3"};
        norm *dst[3] = {&e->n1, &e->n2, &e->n3};
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "transformer.decoder.layers.%u.%s", i, norms[k]);
            VKF_TRY(vkf_ld_norm(L, p, d, dst[k]));
        }
    }
    VKF_TRY(vkf_ld_norm(L, "transformer.decoder.norm", d, &m->dec_norm));
    /* the generator in the target embedding's parts: rows [i * per, ...) each */
    m->gen_parts = m->tgt_embed.parts;
    if (!(m->gen = calloc(m->gen_parts, sizeof *m->gen))) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < m->gen_parts; i++) {
        uint32_t per = m->tgt_embed.rows_per_part, r0 = i * per, n = c->tgt_vocab_size - r0 < per ? c->tgt_vocab_size - r0 : per;
        VKF_TRY(vkf_ld_linear(L, "", "generator.weight", "generator.bias", c->tgt_vocab_size, d, r0, n, &m->gen[i]));
    }
    /* Optional projections for lowrank:K, kept on the host (each forward masks
     * them to the sources' lengths). */
    static const char *const lr_names[2] = {"lowrank.self_proj", "lowrank.cross_proj"};
    for (int i = 0; i < 2; i++) {
        const vkf_st_tensor *t = vkf_st_find(L->file, lr_names[i]);
        if (!t) continue;
        uint32_t K = t->rank == 2 && t->shape[0] >= 1 && t->shape[0] <= 65536 ? (uint32_t)t->shape[0] : 1;
        const vkf_st_tensor *checked;
        VKF_TRY(vkf_ld_find(L, lr_names[i], K, c->max_len, &checked));
        const float *data = NULL;
        VKF_TRY(vkf_ld_floats(L, checked, &data));
        for (uint64_t e = 0; e < checked->elements; e++)
            if (!isfinite(data[e]))
                return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" holds a value that is not finite", lr_names[i]);
        if (L->dry_run) continue;
        m->lr_file[i] = malloc(checked->elements * sizeof(float));
        if (!m->lr_file[i]) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for \"%s\"", lr_names[i]);
        memcpy(m->lr_file[i], data, checked->elements * sizeof(float));
        m->lr_file_rank[i] = K;
    }
    /* Anything else in the file means it was written for another layout. */
    char hint[96];
    snprintf(hint, sizeof hint, "the config says %u encoder and %u decoder layers", c->n_encoder_layers,
             c->n_decoder_layers);
    VKF_TRY(vkf_ld_check_unexpected(L, hint));
    return L->dry_run ? VKF_OK : vkf_positional_encoding_create(m->ctx, c->max_len, d, &m->pe);
}

static void linear_free(linear *l)
{
    if (!l->w_borrowed) vkf_tensor_destroy(l->w), vkf_tensor_destroy(l->scale);
    vkf_tensor_destroy(l->b);
    vkf_tensor_destroy(l->b_gen);
}

static void table_free(split_table *t)
{
    for (uint32_t i = 0; t->part && !t->borrowed && i < t->parts; i++) vkf_tensor_destroy(t->part[i]);
    for (uint32_t i = 0; t->scale && !t->borrowed && i < t->parts; i++) vkf_tensor_destroy(t->scale[i]);
    free(t->part);
    free(t->scale);
}

static void norm_free(norm *n)
{
    vkf_tensor_destroy(n->g);
    vkf_tensor_destroy(n->b);
}

void vkf_model_destroy(vkf_model *m)
{
    if (!m) return;
    for (int i = 0; i < MAX_FORWARD_PLANS; i++) vkf_fwd_plan_free(m->plans[i]);
    vkf_gen_plan_free(m->gen_plan);
    for (uint32_t i = 0; m->enc && i < m->cfg.n_encoder_layers; i++) {
        enc_layer *e = &m->enc[i];
        linear_free(&e->qkv), linear_free(&e->o), linear_free(&e->ff1), linear_free(&e->ff2);
        norm_free(&e->n1), norm_free(&e->n2);
    }
    for (uint32_t i = 0; m->dec && i < m->cfg.n_decoder_layers; i++) {
        dec_layer *e = &m->dec[i];
        linear_free(&e->qkv), linear_free(&e->o), linear_free(&e->cq), linear_free(&e->ckv), linear_free(&e->co);
        linear_free(&e->ff1), linear_free(&e->ff2);
        norm_free(&e->n1), norm_free(&e->n2), norm_free(&e->n3);
    }
    free(m->enc);
    free(m->dec);
    norm_free(&m->enc_norm);
    norm_free(&m->dec_norm);
    for (uint32_t i = 0; m->gen && i < m->gen_parts; i++) linear_free(&m->gen[i]);
    free(m->gen);
    table_free(&m->src_embed);
    table_free(&m->tgt_embed);
    vkf_tensor_destroy(m->pe);
    vkf_tensor_destroy(m->pe_dec);
    vkf_hf_free(m->hf);
    free_vocab(m->src_vocab, m->cfg.src_vocab_size);
    free_vocab(m->tgt_vocab, m->cfg.tgt_vocab_size);
    free(m->tgt_join);
    free(m->lr_file[0]);
    free(m->lr_file[1]);
    free(m);
}

vkf_status vkf_model_load(vkf_context *ctx, const char *path, vkf_model **out_model)
{
    return vkf_model_load_with(ctx, path, NULL, out_model);
}

bool vkf_auto_precision_f16(const vkf_device_info *info, bool storage_16bit)
{
    /* GPUs move half the bytes with F16 (not yet measured on one). CPU drivers keep
     * F32: on lavapipe F16 measured no faster (base preset over five runs each:
     * forward 220-341 ms F32 against 221-324 ms F16, decode step 24.4-28.2 against
     * 25.9-44.6 ms; docs/performance.md). */
    bool gpu = info->type == VKF_DEVICE_DISCRETE_GPU || info->type == VKF_DEVICE_INTEGRATED_GPU ||
               info->type == VKF_DEVICE_VIRTUAL_GPU;
    return gpu && storage_16bit;
}

vkf_status vkf_model_load_with(vkf_context *ctx, const char *path, const vkf_model_load_options *options,
                               vkf_model **out_model)
{
    if (!out_model) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_load: out_model is NULL");
    *out_model = NULL;
    if (!ctx || !path) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_load: %s is NULL", ctx ? "path" : "context");
    if (ctx->lost) return vkf_fail(VKF_ERROR_DEVICE_LOST, "the device was lost; destroy and recreate the context");
    vkf_precision precision = options ? options->precision : VKF_PRECISION_AUTO;
    if ((unsigned)precision > VKF_PRECISION_INT8)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_load: unknown precision %d", (int)precision);
    if (precision == VKF_PRECISION_F16 && !ctx->storage_16bit)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "precision f16 needs 16-bit storage buffers (storageBuffer16BitAccess), "
                        "which device \"%s\" lacks; use f32 or auto", ctx->info.name);
    vkf_model *m = calloc(1, sizeof *m);
    if (!m) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a model");
    m->ctx = ctx;
    loader L = {.m = m, .precision = precision};
    /* a directory is a Hugging Face folder (hf_marian.c); a file is vkformer's own */
    struct stat sb;
    bool folder = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    vkf_status st = VKF_OK;
    if (folder) {
        st = vkf_hf_open(m, path, &L);
    } else {
        st = vkf_st_open(path, &L.file);
        if (st == VKF_OK) st = parse_config(m, vkf_st_metadata(L.file, "vkformer.config"));
    }
    /* VKFORMER_AUTO_PRECISION=f16|f32 overrides what auto means on this device
     * (tests run the GPU choice on lavapipe with it); f16 still needs 16-bit storage. */
    const char *auto_env = precision == VKF_PRECISION_AUTO || precision == VKF_PRECISION_INT8
                               ? getenv("VKFORMER_AUTO_PRECISION") : NULL;
    bool auto_f16 = (precision == VKF_PRECISION_AUTO || precision == VKF_PRECISION_INT8) &&
                    (auto_env && strcmp(auto_env, "f16") == 0   ? ctx->storage_16bit
                     : auto_env && strcmp(auto_env, "f32") == 0 ? false
                                                                : vkf_auto_precision_f16(&ctx->info, ctx->storage_16bit));
    /* int8 keeps its int8 weights and takes the activations auto would: F16 on GPUs
     * with 16-bit storage (as CTranslate2's int8_float16), else F32 */
    bool int8_f16 = false;
    if (st == VKF_OK && auto_f16) {
        if (m->cfg.d_model / m->cfg.n_heads <= VKF_ATTENTION_MAX_HEAD_DIM && precision == VKF_PRECISION_INT8) {
            int8_f16 = true;
            vkf_log(ctx, VKF_LOG_INFO, "precision int8: int8 weights with F16 activations on \"%s\"%s",
                    ctx->info.name, auto_env ? " (VKFORMER_AUTO_PRECISION)" : ", a GPU with 16-bit storage");
        } else if (m->cfg.d_model / m->cfg.n_heads <= VKF_ATTENTION_MAX_HEAD_DIM) {
            precision = L.precision = VKF_PRECISION_F16;
            m->precision_auto_f16 = true;
            vkf_log(ctx, VKF_LOG_INFO, "precision auto: F16 weights and activations on \"%s\"%s (f32 to keep F32)",
                    ctx->info.name, auto_env ? " (VKFORMER_AUTO_PRECISION)" : ", a GPU with 16-bit storage");
        } else {
            vkf_log(ctx, VKF_LOG_INFO, "precision auto: F32 activations, as head_dim %u passes the F16 kernels' %u",
                    m->cfg.d_model / m->cfg.n_heads, VKF_ATTENTION_MAX_HEAD_DIM);
        }
    }
    m->act = precision == VKF_PRECISION_F16 || int8_f16 ? VKF_DTYPE_F16 : VKF_DTYPE_F32;
    if (st == VKF_OK) {
        m->enc = calloc(m->cfg.n_encoder_layers, sizeof *m->enc);
        m->dec = calloc(m->cfg.n_decoder_layers, sizeof *m->dec);
        if (!m->enc || !m->dec) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for layers");
    }
    if (st == VKF_OK && m->act == VKF_DTYPE_F16 && m->cfg.d_model / m->cfg.n_heads > VKF_ATTENTION_MAX_HEAD_DIM)
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "precision f16: head_dim %u passes the fused kernel's %u, and the unfused "
                      "path has no F16 form; use f32 or auto", m->cfg.d_model / m->cfg.n_heads, VKF_ATTENTION_MAX_HEAD_DIM);
    if (st == VKF_OK) st = folder ? vkf_hf_load_weights(&L) : load_weights(&L);
    if ((st == VKF_ERROR_BAD_MODEL || (folder && st == VKF_ERROR_UNSUPPORTED)) && !strstr(vkf_last_error(), path)) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vkf_last_error());
        vkf_fail(st, "%s: %s", path, msg);
    }
    free(L.scratch);
    free(L.halves);
    free(L.quant);
    vkf_ld_names_free(&L.expected);
    vkf_st_close(L.file);
    if (st != VKF_OK) {
        vkf_model_destroy(m); /* destroy functions leave the last error alone */
        return st;
    }
    *out_model = m;
    return VKF_OK;
}

vkf_status vkf_model_check_bytes(const void *data, size_t size)
{
    vkf_model *m = calloc(1, sizeof *m);
    if (!m) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a model");
    loader L = {.m = m, .dry_run = true};
    vkf_status st = vkf_st_parse(data, size, &L.file);
    if (st == VKF_OK) st = parse_config(m, vkf_st_metadata(L.file, "vkformer.config"));
    if (st == VKF_OK) {
        m->enc = calloc(m->cfg.n_encoder_layers, sizeof *m->enc);
        m->dec = calloc(m->cfg.n_decoder_layers, sizeof *m->dec);
        if (!m->enc || !m->dec) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for layers");
    }
    if (st == VKF_OK) st = load_weights(&L);
    free(L.scratch);
    vkf_ld_names_free(&L.expected);
    vkf_st_close(L.file);
    vkf_model_destroy(m); /* holds no device objects: a dry run made none */
    return st;
}

vkf_status vkf_model_get_config(const vkf_model *m, vkf_model_config *out)
{
    if (!m || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_get_config: %s is NULL", m ? "out_config" : "model");
    *out = m->cfg;
    out->activations = m->act;
    return VKF_OK;
}

vkf_status vkf_model_generate_defaults(const vkf_model *m, vkf_generate_options *out)
{
    if (!m || !out)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate_defaults: %s is NULL", m ? "out_options" : "model");
    if (m->hf) return vkf_hf_generate_defaults(m, out);
    vkf_generate_options_init(out);
    return VKF_OK;
}

/* ------------------------------------------------------------------ recording helpers */

vkf_status vkf_tensor2(vkf_context *ctx, vkf_dtype dtype, uint64_t rows, uint64_t cols, vkf_tensor **out)
{
    uint64_t shape[2] = {rows, cols};
    return vkf_tensor_create(ctx, dtype, 2, shape, out);
}

/* The matmul of in (rows, l.in) · l.wᵀ (+ l.b): C and the epilogue left to the caller. */
static vkf_matmul_desc linear_desc(const vkf_tensor *in, uint32_t rows, const linear *l)
{
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = rows, d.n = l->out, d.k = l->in;
    d.a.tensor = (vkf_tensor *)in;
    d.b.tensor = l->w;
    d.b_scale = l->scale;
    d.bias = l->b;
    return d;
}

/* out (rows, l.out) = act(in (rows, l.in) · l.wᵀ + l.b) + residual */
vkf_status vkf_rec_linear(vkf_cmd *cmd, const vkf_tensor *in, uint32_t rows, const linear *l, vkf_tensor *out,
                          vkf_activation act, const vkf_tensor *residual)
{
    vkf_matmul_desc d = linear_desc(in, rows, l);
    d.c.tensor = out;
    d.residual.tensor = (vkf_tensor *)residual;
    d.activation = act;
    return vkf_cmd_matmul(cmd, &d);
}

vkf_status vkf_rec_norm(vkf_cmd *cmd, const vkf_model *m, const vkf_tensor *x, const vkf_tensor *residual,
                        uint32_t rows, const norm *n, vkf_tensor *y)
{
    vkf_layernorm_desc d;
    vkf_layernorm_desc_init(&d);
    d.rows = rows, d.cols = m->cfg.d_model;
    d.x = (vkf_tensor *)x, d.residual = (vkf_tensor *)residual, d.gamma = n->g, d.beta = n->b, d.y = y;
    d.eps = m->cfg.layer_norm_eps;
    return vkf_cmd_layernorm(cmd, &d);
}

/* A (rows, heads * head_dim) view of a projection output with row stride `stride`,
 * starting at column `col`; the batch runs over (sequence of `len` rows, head). */
typedef struct heads_view {
    vkf_tensor *t;
    uint64_t col, stride;
} heads_view;

/* Whether a choice runs through materialised scores: dense-naive, or a head_dim
 * past the fused kernel's limit. */
static bool needs_scores(const vkf_model *m, const attn_choice *ch)
{
    return ch->kind == VKF_ATTN_NAIVE || m->cfg.d_model / m->cfg.n_heads > VKF_ATTENTION_MAX_HEAD_DIM;
}

/* The choice at a site. Decoder self-attention is causal: lowrank cannot apply
 * there (a projection along the sequence mixes later tokens into earlier ones),
 * so it stays dense. */
attn_choice vkf_site_choice(const vkf_model *m, enum attn_site site)
{
    if (site == SITE_CROSS) return m->cross_attn;
    attn_choice c = m->self_attn;
    if (site == SITE_DEC_SELF && c.kind == VKF_ATTN_LOWRANK) c = (attn_choice){.kind = VKF_ATTN_FUSED};
    return c;
}

static float float_from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
    if (exp == 0x1fu) u = sign | 0x7f800000u | (mant << 13);             /* inf, nan */
    else if (exp) u = sign | ((exp + 112u) << 23) | (mant << 13);       /* normal */
    else if (!mant) u = sign;                                          /* zero */
    else {                                                             /* subnormal: normalise */
        int e = -1;
        do mant <<= 1, e++;
        while (!(mant & 0x400u));
        u = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* count floats into an activation tensor (F32, or F16 rounded to nearest even). */
static vkf_status upload_act(const vkf_model *m, vkf_tensor *t, const float *data, uint64_t count)
{
    if (m->act == VKF_DTYPE_F32) return vkf_tensor_upload(t, data, count * sizeof *data);
    uint16_t *h = malloc(count * sizeof *h);
    if (!h) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory converting to F16");
    for (uint64_t e = 0; e < count; e++) h[e] = vkf_half_from_float(data[e]);
    vkf_status st = vkf_tensor_upload(t, h, count * sizeof *h);
    free(h);
    return st;
}

/* count floats out of an activation tensor. */
static vkf_status download_act(const vkf_model *m, vkf_tensor *t, float *data, uint64_t count)
{
    if (m->act == VKF_DTYPE_F32) return vkf_tensor_download(t, data, count * sizeof *data);
    uint16_t *h = malloc(count * sizeof *h);
    if (!h) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory converting from F16");
    vkf_status st = vkf_tensor_download(t, h, count * sizeof *h);
    for (uint64_t e = 0; st == VKF_OK && e < count; e++) data[e] = float_from_half(h[e]);
    free(h);
    return st;
}

/* Uploads the lowrank projections of a plan for these sources. */
vkf_status vkf_upload_lowrank(const vkf_model *m, fwd_plan *p, const vkf_sequences *src)
{
    for (int i = 0; i < 2; i++) {
        if (!p->lr_proj[i]) continue;
        uint32_t K = (i == 0 ? m->self_attn : m->cross_attn).rank, S = p->src_len, B = p->batch;
        float *E = malloc((size_t)B * K * S * sizeof *E);
        int32_t *rows = malloc((size_t)B * sizeof *rows);
        vkf_status st = E && rows ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for the lowrank projection");
        if (st == VKF_OK && m->lr_file[i] && m->lr_file_rank[i] == K) {
            /* the file's projection, its columns past each source's length zeroed;
             * trailing rows left all zero hold no key and are masked (so the
             * identity with K = max_len is dense attention at every length) */
            for (uint32_t b = 0; b < B; b++) {
                rows[b] = 0;
                for (uint32_t r = 0; r < K; r++)
                    for (uint32_t j = 0; j < S; j++) {
                        float e = j < src->lengths[b] ? m->lr_file[i][(size_t)r * m->cfg.max_len + j] : 0.0f;
                        E[((size_t)b * K + r) * S + j] = e;
                        if (e != 0.0f) rows[b] = (int32_t)r + 1;
                    }
            }
        } else if (st == VKF_OK) {
            st = vkf_lowrank_projection(m->seed, K, S, src->lengths, B, E, rows);
        }
        if (st == VKF_OK) st = upload_act(m, p->lr_proj[i], E, (uint64_t)B * K * S);
        if (st == VKF_OK) st = vkf_tensor_upload(p->lr_lengths[i], rows, (uint64_t)B * sizeof *rows);
        free(E), free(rows);
        VKF_TRY(st);
    }
    return VKF_OK;
}

/* out (B*Lq, d) = softmax(Q·Kᵀ / sqrt(hd) + mask) · V per (sequence, head). Keys
 * past key_lengths[b] (fused) or with mask -inf (naive, (B, Lk) additive) are
 * masked; causal: query i sees keys j <= i. The fused kernel never writes the
 * scores; dense-naive materialises them in `scores` (B*H, Lq, Lk). */
static vkf_status rec_attention(vkf_cmd *cmd, const vkf_model *m, fwd_plan *pl, enum attn_site site, uint32_t B,
                                uint32_t Lq, uint32_t Lk, heads_view q, heads_view k, heads_view v,
                                const vkf_tensor *key_lengths, const vkf_tensor *mask, bool causal, vkf_tensor *scores,
                                vkf_tensor *out)
{
    uint32_t H = m->cfg.n_heads, hd = m->cfg.d_model / H, d = m->cfg.d_model;
    attn_choice choice = vkf_site_choice(m, site);
    const attn_choice *ch = &choice;
    if (ch->kind == VKF_ATTN_LSH) {
        /* keys are the normalised queries: k's view is not read */
        vkf_lsh_desc l = {
            .batch = B, .heads = H, .head_dim = hd, .n = Lq, .rounds = ch->rounds, .chunk = ch->chunk,
            .scale = 1.0f / sqrtf((float)hd),
            .q = (vkf_attention_view){q.t, q.col, q.stride, (uint64_t)Lq * q.stride},
            .v = (vkf_attention_view){v.t, v.col, v.stride, (uint64_t)Lq * v.stride},
            .key_lengths = key_lengths, .causal = causal, .out = out,
        };
        return vkf_op_attention_lsh(cmd, pl->lsh, &l);
    }
    if (ch->kind == VKF_ATTN_LOWRANK) {
        /* keys and values projected to K rows along the source, then dense attention over them */
        int i = site == SITE_CROSS;
        uint32_t K = ch->rank;
        VKF_TRY(vkf_op_lowrank_project(cmd, pl->lr_proj[i], B, K, Lk, d, k.t, k.col, k.stride, pl->lr_kv));
        k = (heads_view){pl->lr_kv, 0, 2 * d}, v = (heads_view){pl->lr_kv, d, 2 * d};
        Lk = K, key_lengths = pl->lr_lengths[i], causal = false;
    }
    if (!needs_scores(m, ch)) {
        vkf_attention_desc a;
        vkf_attention_desc_init(&a);
        a.batch = B, a.heads = H, a.head_dim = hd, a.lq = Lq, a.lk = Lk;
        a.scale = 1.0f / sqrtf((float)hd);
        a.q = (vkf_attention_view){q.t, q.col, q.stride, (uint64_t)Lq * q.stride};
        a.k = (vkf_attention_view){k.t, k.col, k.stride, (uint64_t)Lk * k.stride};
        a.v = (vkf_attention_view){v.t, v.col, v.stride, (uint64_t)Lk * v.stride};
        a.key_lengths = key_lengths;
        a.causal = causal;
        a.dtype = m->act;
        a.pattern = ch->kind == VKF_ATTN_FUSED ? ch->pattern : VKF_ATTENTION_DENSE;
        a.window = ch->window, a.stride = ch->stride;
        a.out = out;
        if (a.pattern == VKF_ATTENTION_BIGBIRD) {
            a.bigbird = (vkf_bigbird){ch->block, ch->globals, ch->random, causal, m->seed};
            vkf_tensor **table = &pl->bb_table[site == SITE_DEC_SELF];
            if (!*table) VKF_TRY(vkf_attention_table_create(m->ctx, &a, table));
            a.table = *table;
        }
        return vkf_op_attention_fused(cmd, &a);
    }
    vkf_matmul_desc s;
    vkf_matmul_desc_init(&s);
    s.m = Lq, s.n = Lk, s.k = hd;
    s.batch[0] = B, s.batch[1] = H;
    s.a = (vkf_matrix_view){q.t, q.col, q.stride, {Lq * q.stride, hd}};
    s.b = (vkf_matrix_view){k.t, k.col, k.stride, {Lk * k.stride, hd}};
    s.c = (vkf_matrix_view){scores, 0, 0, {(uint64_t)H * Lq * Lk, (uint64_t)Lq * Lk}};
    s.alpha = 1.0f / sqrtf((float)hd);
    VKF_TRY(vkf_cmd_matmul(cmd, &s));
    vkf_softmax_desc p;
    vkf_softmax_desc_init(&p);
    p.rows = B * H * Lq, p.cols = Lk, p.x = scores, p.y = scores;
    if (mask) p.mask = (vkf_tensor *)mask, p.mask_rows = B, p.mask_row_div = H * Lq;
    if (causal) p.causal_period = Lq;
    VKF_TRY(vkf_cmd_softmax(cmd, &p));
    vkf_matmul_desc o;
    vkf_matmul_desc_init(&o);
    o.m = Lq, o.n = hd, o.k = Lk;
    o.batch[0] = B, o.batch[1] = H;
    o.a = (vkf_matrix_view){scores, 0, 0, {(uint64_t)H * Lq * Lk, (uint64_t)Lq * Lk}};
    o.b = (vkf_matrix_view){v.t, v.col, v.stride, {Lk * v.stride, hd}};
    o.b_is_k_by_n = true;
    o.c = (vkf_matrix_view){out, 0, d, {(uint64_t)Lq * d, hd}};
    return vkf_cmd_matmul(cmd, &o);
}

vkf_status vkf_rec_embed(vkf_cmd *cmd, const vkf_model *m, const split_table *table, const vkf_tensor *ids,
                         uint32_t tokens, uint32_t seq_len, const vkf_tensor *state, bool decoder, vkf_tensor *out)
{
    vkf_embed_desc e;
    vkf_embed_desc_init(&e);
    e.tokens = tokens, e.d = m->cfg.d_model, e.vocab = table->rows;
    e.ids = (vkf_tensor *)ids, e.out = out;
    e.scale = m->cfg.embed_scale, e.positions = decoder && m->pe_dec ? m->pe_dec : m->pe, e.seq_len = seq_len;
    e.position_state = (vkf_tensor *)state;
    for (uint32_t i = 0; i < table->parts; i++) {
        e.table = table->part[i];
        e.table_scale = table->scale ? table->scale[i] : NULL;
        e.table_row0 = i * table->rows_per_part;
        e.table_rows = table->parts > 1 ? (i + 1 < table->parts ? table->rows_per_part : table->rows - e.table_row0) : 0;
        VKF_TRY(vkf_cmd_embed(cmd, &e));
    }
    return VKF_OK;
}

vkf_status vkf_rec_generator(vkf_cmd *cmd, const vkf_model *m, const vkf_tensor *in, uint32_t rows, bool generation,
                             vkf_tensor *logits)
{
    uint32_t col = 0;
    for (uint32_t i = 0; i < m->gen_parts; i++) {
        const linear *l = &m->gen[i];
        vkf_matmul_desc d = linear_desc(in, rows, l);
        d.c = (vkf_matrix_view){logits, col, m->cfg.tgt_vocab_size, {0, 0}};
        if (generation && l->b_gen) d.bias = l->b_gen;
        VKF_TRY(vkf_cmd_matmul(cmd, &d));
        col += l->out;
    }
    return VKF_OK;
}

/* ------------------------------------------------------------------ forward plans */

void vkf_fwd_plan_free(fwd_plan *p)
{
    if (!p) return;
    vkf_cmd_destroy(p->cmd);
    vkf_tensor *ts[] = {p->src_ids,     p->tgt_ids,     p->src_mask,    p->src_lengths, p->a,
                        p->b,           p->n,           p->memory,      p->qkv,         p->q,
                        p->kv,          p->attn,        p->tmp,         p->hidden,      p->scores,
                        p->logits,      p->bb_table[0], p->bb_table[1], p->lr_proj[0],  p->lr_proj[1],
                        p->lr_lengths[0], p->lr_lengths[1], p->lr_kv};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) vkf_tensor_destroy(ts[i]);
    vkf_lsh_plan_destroy(p->lsh);
    free(p);
}

/* Encoder: src ids -> memory (B*S, d). Uses a, b, n, qkv, attn, tmp, hidden, scores. */
vkf_status vkf_rec_encoder(vkf_cmd *cmd, const vkf_model *m, fwd_plan *p)
{
    const vkf_model_config *c = &m->cfg;
    uint32_t B = p->batch, S = p->src_len, rows = B * S, d = c->d_model;
    vkf_tensor *x = p->a, *alt = p->b;
    /* x = src_embed(ids) * scale + PE */
    VKF_TRY(vkf_rec_embed(cmd, m, &m->src_embed, p->src_ids, rows, S, NULL, false, x));
    for (uint32_t i = 0; i < c->n_encoder_layers; i++) {
        const enc_layer *e = &m->enc[i];
        heads_view q = {p->qkv, 0, 3 * d}, k = {p->qkv, d, 3 * d}, v = {p->qkv, 2 * d, 3 * d};
        if (!c->norm_first) {
            /* x = LN1(x + SelfAttn(x)); x = LN2(x + FFN(x)) */
            VKF_TRY(vkf_rec_linear(cmd, x, rows, &e->qkv, p->qkv, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(rec_attention(cmd, m, p, SITE_ENC_SELF, B, S, S, q, k, v, p->src_lengths, p->src_mask, false, p->scores, p->attn));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, rows, &e->o, p->tmp, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_rec_norm(cmd, m, x, p->tmp, rows, &e->n1, x));
            VKF_TRY(vkf_rec_linear(cmd, x, rows, &e->ff1, p->hidden, c->activation, NULL));
            VKF_TRY(vkf_rec_linear(cmd, p->hidden, rows, &e->ff2, p->tmp, VKF_ACTIVATION_NONE, NULL));
            /* without a final norm (Marian) the last layer writes the memory */
            bool last = i + 1 == c->n_encoder_layers && !m->enc_norm.g;
            VKF_TRY(vkf_rec_norm(cmd, m, x, p->tmp, rows, &e->n2, last ? p->memory : x));
        } else {
            /* alt = x + SelfAttn(LN1(x)); x = alt + FFN(LN2(alt)) */
            VKF_TRY(vkf_rec_norm(cmd, m, x, NULL, rows, &e->n1, p->n));
            VKF_TRY(vkf_rec_linear(cmd, p->n, rows, &e->qkv, p->qkv, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(rec_attention(cmd, m, p, SITE_ENC_SELF, B, S, S, q, k, v, p->src_lengths, p->src_mask, false, p->scores, p->attn));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, rows, &e->o, alt, VKF_ACTIVATION_NONE, x));
            VKF_TRY(vkf_rec_norm(cmd, m, alt, NULL, rows, &e->n2, p->n));
            VKF_TRY(vkf_rec_linear(cmd, p->n, rows, &e->ff1, p->hidden, c->activation, NULL));
            VKF_TRY(vkf_rec_linear(cmd, p->hidden, rows, &e->ff2, x, VKF_ACTIVATION_NONE, alt));
        }
    }
    /* memory = encoder.norm(x) */
    if (!m->enc_norm.g) {
        if (c->norm_first) return vkf_fail(VKF_ERROR_UNSUPPORTED, "a pre-LN encoder without a final norm");
        return VKF_OK;
    }
    return vkf_rec_norm(cmd, m, x, NULL, rows, &m->enc_norm, p->memory);
}

/* Decoder over a whole target (teacher forcing): tgt ids, memory -> logits. */
static vkf_status rec_decoder(vkf_cmd *cmd, const vkf_model *m, fwd_plan *p)
{
    const vkf_model_config *c = &m->cfg;
    uint32_t B = p->batch, S = p->src_len, T = p->tgt_len, rows = B * T, d = c->d_model;
    vkf_tensor *y = p->a, *alt = p->b;
    /* y = tgt_embed(ids) * scale + PE */
    VKF_TRY(vkf_rec_embed(cmd, m, &m->tgt_embed, p->tgt_ids, rows, T, NULL, true, y));
    heads_view sq = {p->qkv, 0, 3 * d}, sk = {p->qkv, d, 3 * d}, sv = {p->qkv, 2 * d, 3 * d};
    heads_view cq = {p->q, 0, d}, ck = {p->kv, 0, 2 * d}, cv = {p->kv, d, 2 * d};
    for (uint32_t i = 0; i < c->n_decoder_layers; i++) {
        const dec_layer *e = &m->dec[i];
        /* cross-attention keys and values from the encoder memory */
        VKF_TRY(vkf_rec_linear(cmd, p->memory, B * S, &e->ckv, p->kv, VKF_ACTIVATION_NONE, NULL));
        if (!c->norm_first) {
            /* y = LN1(y + CausalSelfAttn(y)); y = LN2(y + CrossAttn(y, memory)); y = LN3(y + FFN(y)) */
            VKF_TRY(vkf_rec_linear(cmd, y, rows, &e->qkv, p->qkv, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(rec_attention(cmd, m, p, SITE_DEC_SELF, B, T, T, sq, sk, sv, NULL, NULL, true, p->scores, p->attn));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, rows, &e->o, p->tmp, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_rec_norm(cmd, m, y, p->tmp, rows, &e->n1, y));
            VKF_TRY(vkf_rec_linear(cmd, y, rows, &e->cq, p->q, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(rec_attention(cmd, m, p, SITE_CROSS, B, T, S, cq, ck, cv, p->src_lengths, p->src_mask, false, p->scores, p->attn));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, rows, &e->co, p->tmp, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_rec_norm(cmd, m, y, p->tmp, rows, &e->n2, y));
            VKF_TRY(vkf_rec_linear(cmd, y, rows, &e->ff1, p->hidden, c->activation, NULL));
            VKF_TRY(vkf_rec_linear(cmd, p->hidden, rows, &e->ff2, p->tmp, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_rec_norm(cmd, m, y, p->tmp, rows, &e->n3, y));
        } else {
            /* alt = y + CausalSelfAttn(LN1(y)); y = alt + CrossAttn(LN2(alt)); alt = y + FFN(LN3(y)) */
            VKF_TRY(vkf_rec_norm(cmd, m, y, NULL, rows, &e->n1, p->n));
            VKF_TRY(vkf_rec_linear(cmd, p->n, rows, &e->qkv, p->qkv, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(rec_attention(cmd, m, p, SITE_DEC_SELF, B, T, T, sq, sk, sv, NULL, NULL, true, p->scores, p->attn));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, rows, &e->o, alt, VKF_ACTIVATION_NONE, y));
            VKF_TRY(vkf_rec_norm(cmd, m, alt, NULL, rows, &e->n2, p->n));
            VKF_TRY(vkf_rec_linear(cmd, p->n, rows, &e->cq, p->q, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(rec_attention(cmd, m, p, SITE_CROSS, B, T, S, cq, ck, cv, p->src_lengths, p->src_mask, false, p->scores, p->attn));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, rows, &e->co, y, VKF_ACTIVATION_NONE, alt));
            VKF_TRY(vkf_rec_norm(cmd, m, y, NULL, rows, &e->n3, p->n));
            VKF_TRY(vkf_rec_linear(cmd, p->n, rows, &e->ff1, p->hidden, c->activation, NULL));
            VKF_TRY(vkf_rec_linear(cmd, p->hidden, rows, &e->ff2, alt, VKF_ACTIVATION_NONE, y));
            vkf_tensor *swap = y;
            y = alt, alt = swap;
        }
    }
    /* logits = generator(decoder.norm(y)) (Marian: no final norm) */
    if (!m->dec_norm.g) return vkf_rec_generator(cmd, m, y, rows, false, p->logits);
    VKF_TRY(vkf_rec_norm(cmd, m, y, NULL, rows, &m->dec_norm, p->n));
    return vkf_rec_generator(cmd, m, p->n, rows, false, p->logits);
}

/* Activations for B sequences of S source and T target tokens. */
vkf_status vkf_fwd_plan_alloc(vkf_model *m, uint32_t B, uint32_t S, uint32_t T, fwd_plan **out)
{
    vkf_context *ctx = m->ctx;
    const vkf_model_config *c = &m->cfg;
    fwd_plan *p = calloc(1, sizeof *p);
    if (!p) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a forward plan");
    p->batch = B, p->src_len = S, p->tgt_len = T;
    uint64_t L = S > T ? S : T, rows = (uint64_t)B * L, d = c->d_model;
    uint64_t score_rows = (uint64_t)B * c->n_heads * L;
    vkf_status st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, S, &p->src_ids);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, T, &p->tgt_ids);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, B, S, &p->src_mask);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, B, &p->src_lengths);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, rows, d, &p->a);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, rows, d, &p->b);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, rows, d, &p->n);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, (uint64_t)B * S, d, &p->memory);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, rows, 3 * d, &p->qkv);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, (uint64_t)B * T, d, &p->q);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, (uint64_t)B * S, 2 * d, &p->kv);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, rows, d, &p->attn);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, rows, d, &p->tmp);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, rows, c->d_ff, &p->hidden);
    if (st == VKF_OK && (needs_scores(m, &m->self_attn) || needs_scores(m, &m->cross_attn)))
        st = vkf_tensor2(ctx, VKF_DTYPE_F32, score_rows, L, &p->scores);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, (uint64_t)B * T, c->tgt_vocab_size, &p->logits);
    if (st == VKF_OK && m->self_attn.kind == VKF_ATTN_LSH) {
        vkf_lsh_desc shape = {.batch = B, .heads = c->n_heads, .head_dim = c->d_model / c->n_heads,
                              .rounds = m->self_attn.rounds, .chunk = m->self_attn.chunk};
        st = vkf_lsh_plan_create(ctx, &shape, (uint32_t)L, m->seed, &p->lsh);
    }
    uint32_t lr_rows = 0;
    for (int i = 0; i < 2 && st == VKF_OK; i++) {
        const attn_choice *ch = i == 0 ? &m->self_attn : &m->cross_attn;
        if (ch->kind != VKF_ATTN_LOWRANK) continue;
        st = vkf_tensor2(ctx, m->act, (uint64_t)B * ch->rank, S, &p->lr_proj[i]);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, B, &p->lr_lengths[i]);
        if (ch->rank > lr_rows) lr_rows = ch->rank;
    }
    if (st == VKF_OK && lr_rows) st = vkf_tensor2(ctx, m->act, (uint64_t)B * lr_rows, 2 * d, &p->lr_kv);
    if (st != VKF_OK) {
        vkf_fwd_plan_free(p);
        return st;
    }
    *out = p;
    return VKF_OK;
}

/* The plan of this shape, recorded on first use; most recently used kept last. */
static vkf_status forward_plan(vkf_model *m, uint32_t B, uint32_t S, uint32_t T, fwd_plan **out)
{
    for (int i = 0; i < MAX_FORWARD_PLANS; i++) {
        fwd_plan *p = m->plans[i];
        if (p && p->batch == B && p->src_len == S && p->tgt_len == T) {
            memmove(&m->plans[i], &m->plans[i + 1], (MAX_FORWARD_PLANS - 1 - i) * sizeof *m->plans);
            m->plans[MAX_FORWARD_PLANS - 1] = p;
            *out = p;
            return VKF_OK;
        }
    }
    fwd_plan *p;
    VKF_TRY(vkf_fwd_plan_alloc(m, B, S, T, &p));
    vkf_status st = vkf_cmd_create(m->ctx, m->cmd_flags, &p->cmd);
    if (st == VKF_OK) st = vkf_rec_encoder(p->cmd, m, p);
    if (st == VKF_OK) st = rec_decoder(p->cmd, m, p);
    if (st != VKF_OK) {
        vkf_fwd_plan_free(p);
        return st;
    }
    if (m->plans[0] && m->last_forward == m->plans[0]->cmd) m->last_forward = NULL;
    vkf_fwd_plan_free(m->plans[0]);
    memmove(&m->plans[0], &m->plans[1], (MAX_FORWARD_PLANS - 1) * sizeof *m->plans);
    m->plans[MAX_FORWARD_PLANS - 1] = p;
    *out = p;
    return VKF_OK;
}

/* Checks a batch of sequences; returns the longest length. */
vkf_status vkf_check_sequences(const vkf_model *m, const vkf_sequences *s, uint32_t vocab, const char *what,
                               uint32_t *out_max)
{
    *out_max = 0;
    if (!s || !s->ids || !s->lengths || s->count == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: no sequences given", what);
    for (uint32_t i = 0; i < s->count; i++) {
        uint32_t n = s->lengths[i];
        if (n == 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s sequence %u is empty", what, i);
        if (n > m->cfg.max_len)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s sequence %u has %u tokens; the model's max_len is %u", what,
                            i, n, m->cfg.max_len);
        if (!s->ids[i]) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s sequence %u is NULL", what, i);
        for (uint32_t j = 0; j < n; j++)
            if (s->ids[i][j] < 0 || (uint32_t)s->ids[i][j] >= vocab)
                return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s sequence %u: id %d at position %u is outside 0..%u",
                                what, i, s->ids[i][j], j, vocab - 1);
        if (n > *out_max) *out_max = n;
    }
    return VKF_OK;
}

/* Uploads ids padded with pad_id to (count, len), and (where given) the additive
 * key mask and the lengths. */
vkf_status vkf_upload_ids(const vkf_model *m, const vkf_sequences *s, uint32_t len, vkf_tensor *ids, vkf_tensor *mask,
                          vkf_tensor *lengths)
{
    size_t n = (size_t)s->count * len;
    int32_t *h = malloc(n * sizeof *h);
    float *k = malloc(n * sizeof *k);
    if (!h || !k) {
        free(h), free(k);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for ids");
    }
    for (uint32_t i = 0; i < s->count; i++)
        for (uint32_t j = 0; j < len; j++) {
            bool real = j < s->lengths[i];
            h[(size_t)i * len + j] = real ? s->ids[i][j] : m->cfg.pad_id;
            k[(size_t)i * len + j] = real ? 0.0f : -INFINITY;
        }
    vkf_status st = vkf_tensor_upload(ids, h, n * sizeof *h);
    if (st == VKF_OK && mask) st = vkf_tensor_upload(mask, k, n * sizeof *k);
    if (st == VKF_OK && lengths) {
        for (uint32_t i = 0; i < s->count; i++) h[i] = (int32_t)s->lengths[i];
        st = vkf_tensor_upload(lengths, h, (uint64_t)s->count * sizeof *h);
    }
    free(h), free(k);
    return st;
}

/* One batch's logits into out (count, t_out, V), t_out >= the batch's longest target. */
static vkf_status forward_batch(vkf_model *m, const vkf_sequences *src, const vkf_sequences *tgt, uint32_t S, uint32_t T,
                                float *out, uint32_t t_out)
{
    uint32_t B = src->count, V = m->cfg.tgt_vocab_size;
    fwd_plan *p;
    VKF_TRY(forward_plan(m, B, S, T, &p));
    VKF_TRY(vkf_upload_ids(m, src, S, p->src_ids, p->src_mask, p->src_lengths));
    VKF_TRY(vkf_upload_ids(m, tgt, T, p->tgt_ids, NULL, NULL));
    VKF_TRY(vkf_upload_lowrank(m, p, src));
    VKF_TRY(vkf_cmd_submit(p->cmd));
    m->last_forward = p->cmd;
    uint64_t need = (uint64_t)B * T * V;
    float *dst = out;
    if (T != t_out && !(dst = malloc(need * sizeof *dst)))
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for logits");
    vkf_status st = download_act(m, p->logits, dst, need);
    if (dst != out) {
        for (uint32_t i = B; st == VKF_OK && i-- > 0;)
            memcpy(out + (uint64_t)i * t_out * V, dst + (uint64_t)i * T * V, (uint64_t)T * V * sizeof *out);
        free(dst);
    }
    for (uint32_t i = 0; st == VKF_OK && i < B; i++) /* rows past each target are padding */
        memset(out + ((uint64_t)i * t_out + tgt->lengths[i]) * V, 0,
               (uint64_t)(t_out - tgt->lengths[i]) * V * sizeof(float));
    return st;
}

vkf_status vkf_run_chunked(vkf_model *m, vkf_chunking *c, uint32_t total, const uint32_t len[2], const char *what,
                           vkf_chunk_fn fn, void *user)
{
    bool known = c->cap && len[0] >= c->len[0] && len[1] >= c->len[1];
    uint32_t size = known && c->cap < total ? c->cap : total, chunks = 0, largest = 0;
    for (uint32_t first = 0; first < total;) {
        uint32_t left = total - first, pieces = (left + size - 1) / size, n = (left + pieces - 1) / pieces;
        vkf_status st = fn(m, user, first, n);
        if (st == VKF_ERROR_TOO_LARGE) {
            if (n == 1) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", vkf_last_error());
                return vkf_fail(st, "%s (%s even one sequence at a time)", msg, what);
            }
            size = n / 2;
            c->cap = size, c->len[0] = len[0], c->len[1] = len[1];
            continue;
        }
        VKF_TRY(st);
        first += n, chunks++;
        if (n > largest) largest = n;
    }
    if (chunks > 1)
        vkf_log(m->ctx, VKF_LOG_INFO, "%s %u sequences ran as %u batches of at most %u: one batch would need a tensor "
                "past the device's limits", what, total, chunks, largest);
    return VKF_OK;
}

typedef struct forward_call {
    const vkf_sequences *src, *tgt;
    float *out;
    uint32_t t_out;
} forward_call;

/* The sequences [first, first + count) of a forward call, as one batch with its own longest lengths. */
static vkf_status forward_chunk(vkf_model *m, void *user, uint32_t first, uint32_t count)
{
    const forward_call *f = user;
    vkf_sequences s = {count, f->src->ids + first, f->src->lengths + first};
    vkf_sequences t = {count, f->tgt->ids + first, f->tgt->lengths + first};
    uint32_t S = 0, T = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (s.lengths[i] > S) S = s.lengths[i];
        if (t.lengths[i] > T) T = t.lengths[i];
    }
    return forward_batch(m, &s, &t, S, T, f->out + (uint64_t)first * f->t_out * m->cfg.tgt_vocab_size, f->t_out);
}

vkf_status vkf_model_forward(vkf_model *m, const vkf_sequences *src, const vkf_sequences *tgt, float *out_logits,
                             uint64_t out_floats)
{
    if (!m || !out_logits)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_forward: %s is NULL", m ? "out_logits" : "model");
    uint32_t S, T;
    VKF_TRY(vkf_check_sequences(m, src, m->cfg.src_vocab_size, "source", &S));
    VKF_TRY(vkf_check_sequences(m, tgt, m->cfg.tgt_vocab_size, "target", &T));
    if (src->count != tgt->count)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_forward: %u sources but %u targets", src->count, tgt->count);
    uint32_t B = src->count, V = m->cfg.tgt_vocab_size;
    uint64_t need = (uint64_t)B * T * V;
    if (out_floats != need)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_forward: out_logits holds %llu floats, %llu needed",
                        (unsigned long long)out_floats, (unsigned long long)need);
    forward_call f = {src, tgt, out_logits, T};
    return vkf_run_chunked(m, &m->fwd_chunks, B, (const uint32_t[2]){S, T}, "the forward pass of", forward_chunk, &f);
}

/* ------------------------------------------------------------------ attention variants */

/* Recorded plans bake the attention choice and seed in: drop them. */
static void drop_plans(vkf_model *m)
{
    for (int i = 0; i < MAX_FORWARD_PLANS; i++) {
        vkf_fwd_plan_free(m->plans[i]);
        m->plans[i] = NULL;
    }
    vkf_gen_plan_free(m->gen_plan);
    m->gen_plan = NULL;
    m->last_forward = NULL;
}

vkf_status vkf_model_set_attention(vkf_model *m, const char *self_attention, const char *cross_attention)
{
    if (!m) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_set_attention: model is NULL");
    attn_choice self, cross;
    VKF_TRY(vkf_attention_parse(self_attention, false, &self));
    VKF_TRY(vkf_attention_parse(cross_attention, true, &cross));
    uint32_t hd = m->cfg.d_model / m->cfg.n_heads;
    const char *fused_only = (self.kind != VKF_ATTN_FUSED || self.pattern) && self.kind != VKF_ATTN_NAIVE ? self_attention
                             : cross.kind == VKF_ATTN_LOWRANK                                        ? cross_attention
                                                                                                  : NULL;
    if (fused_only && hd > VKF_ATTENTION_MAX_HEAD_DIM)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "\"%s\" needs the fused kernels, which take head_dim up to %u (this model: %u)",
                        fused_only, VKF_ATTENTION_MAX_HEAD_DIM, hd);
    if (m->act == VKF_DTYPE_F16 && (self.kind == VKF_ATTN_NAIVE || self.kind == VKF_ATTN_LSH || cross.kind == VKF_ATTN_NAIVE))
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "\"%s\" has no F16 form (the model's activations are F16%s); use "
                        "dense, local, strided, bigbird or lowrank, or load with f32",
                        self.kind == VKF_ATTN_FUSED || self.kind == VKF_ATTN_LOWRANK ? cross_attention : self_attention,
                        m->precision_auto_f16 ? ": precision auto chose f16 on this device" : "");
    if (memcmp(&self, &m->self_attn, sizeof self) == 0 && memcmp(&cross, &m->cross_attn, sizeof cross) == 0) return VKF_OK;
    drop_plans(m);
    m->self_attn = self;
    m->cross_attn = cross;
    /* Where a variant cannot apply, say what runs instead. */
    if (self.kind == VKF_ATTN_LSH)
        vkf_log(m->ctx, VKF_LOG_INFO, "attention %s: encoder and decoder self-attention of the forward pass use LSH; a "
                "generation step has one new query, which LSH cannot hash and sort against, so decode steps attend "
                "densely over the KV cache", self_attention);
    static const char *const lr_names[2] = {"lowrank.self_proj", "lowrank.cross_proj"};
    for (int i = 0; i < 2; i++) {
        const attn_choice *ch = i == 0 ? &self : &cross;
        if (ch->kind != VKF_ATTN_LOWRANK) continue;
        if (m->lr_file[i] && m->lr_file_rank[i] == ch->rank)
            vkf_log(m->ctx, VKF_LOG_INFO, "lowrank:%u uses the model file's %s", ch->rank, lr_names[i]);
        else if (m->lr_file[i])
            vkf_log(m->ctx, VKF_LOG_INFO, "lowrank:%u: the model file's %s has %u rows, so the seeded projection is "
                    "used", ch->rank, lr_names[i], m->lr_file_rank[i]);
    }
    if (self.kind == VKF_ATTN_LOWRANK)
        vkf_log(m->ctx, VKF_LOG_INFO, "attention %s: encoder self-attention is low-rank; decoder self-attention is causal, "
                "which a projection along the sequence cannot respect, so it stays dense", self_attention);
    return VKF_OK;
}

/* The user-facing name of a choice (what vkf_attention_check takes). */
static void choice_name(const attn_choice *c, bool scores, char *out, size_t size)
{
    if (c->kind == VKF_ATTN_NAIVE || (scores && c->kind != VKF_ATTN_LSH)) snprintf(out, size, "dense-naive");
    else if (c->kind == VKF_ATTN_LSH) snprintf(out, size, "lsh:%u:%u", c->rounds, c->chunk);
    else if (c->kind == VKF_ATTN_LOWRANK) snprintf(out, size, "lowrank:%u", c->rank);
    else if (c->pattern == VKF_ATTENTION_LOCAL) snprintf(out, size, "local:%u", c->window);
    else if (c->pattern == VKF_ATTENTION_STRIDED) snprintf(out, size, "strided:%u:%u", c->window, c->stride);
    else if (c->pattern == VKF_ATTENTION_BIGBIRD) snprintf(out, size, "bigbird:%u:%u:%u", c->block, c->globals, c->random);
    else snprintf(out, size, "dense");
}

vkf_status vkf_model_get_attention(const vkf_model *m, vkf_model_attention *out)
{
    if (!m || !out)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_get_attention: %s is NULL", m ? "out" : "model");
    memset(out, 0, sizeof *out);
    attn_choice enc = vkf_site_choice(m, SITE_ENC_SELF), dec = vkf_site_choice(m, SITE_DEC_SELF),
                cross = vkf_site_choice(m, SITE_CROSS);
    choice_name(&enc, needs_scores(m, &enc), out->encoder, sizeof out->encoder);
    choice_name(&dec, needs_scores(m, &dec), out->decoder, sizeof out->decoder);
    choice_name(&cross, needs_scores(m, &cross), out->cross, sizeof out->cross);
    /* a generation step has one query row: lsh cannot hash it against the cache
     * and lowrank cannot apply to causal attention, so they attend densely; the
     * fused patterns are kept; cross-attention keeps lowrank's projected keys */
    attn_choice step = dec.kind == VKF_ATTN_FUSED ? dec : (attn_choice){.kind = VKF_ATTN_FUSED};
    attn_choice step_cross = cross.kind == VKF_ATTN_LOWRANK ? cross : (attn_choice){.kind = VKF_ATTN_FUSED};
    choice_name(&step, false, out->decode_self, sizeof out->decode_self);
    choice_name(&step_cross, false, out->decode_cross, sizeof out->decode_cross);
    uint32_t hd = m->cfg.d_model / m->cfg.n_heads;
    if (hd > VKF_ATTENTION_MAX_HEAD_DIM) {
        snprintf(out->kernel, sizeof out->kernel, "naive");
    } else {
        vkf_attention_desc a;
        vkf_attention_desc_init(&a);
        a.batch = 1, a.heads = m->cfg.n_heads, a.head_dim = hd, a.lq = a.lk = m->cfg.max_len, a.dtype = m->act;
        snprintf(out->kernel, sizeof out->kernel, "%s", vkf_attention_kernel_name(m->ctx, &a));
    }
    return VKF_OK;
}

vkf_status vkf_model_set_seed(vkf_model *m, uint64_t seed)
{
    if (!m) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_set_seed: model is NULL");
    if (seed != m->seed) drop_plans(m);
    m->seed = seed;
    return VKF_OK;
}

/* ------------------------------------------------------------------ profiling */

vkf_status vkf_model_set_profiling(vkf_model *m, bool on)
{
    if (!m) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_set_profiling: model is NULL");
    if (on && !m->ctx->info.timestamps)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "device \"%s\" has no timestamp queries", m->ctx->info.name);
    uint32_t flags = on ? VKF_CMD_TIMESTAMPS : 0;
    if (flags == m->cmd_flags) return VKF_OK;
    drop_plans(m);
    m->cmd_flags = flags;
    return VKF_OK;
}

vkf_status vkf_model_last_cmd(const vkf_model *m, vkf_model_pass pass, const vkf_cmd **out_cmd)
{
    if (!m || !out_cmd) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_last_cmd: %s is NULL", m ? "out_cmd" : "model");
    *out_cmd = NULL;
    if (pass == VKF_PASS_FORWARD) *out_cmd = m->last_forward;
    else if (pass == VKF_PASS_ENCODE) *out_cmd = m->gen_plan ? m->gen_plan->encode : NULL;
    else if (pass == VKF_PASS_DECODE_STEP) *out_cmd = m->gen_plan ? m->gen_plan->step : NULL;
    else return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_last_cmd: unknown pass %d", (int)pass);
    if (!*out_cmd) return vkf_fail(VKF_ERROR_STATE, "vkf_model_last_cmd: that pass has not run yet");
    return VKF_OK;
}

/* ------------------------------------------------------------------ text */

static int find_token(char *const *vocab, uint32_t n, const char *s, size_t len)
{
    for (uint32_t i = 0; i < n; i++)
        if (strlen(vocab[i]) == len && memcmp(vocab[i], s, len) == 0) return (int)i;
    return -1;
}

vkf_status vkf_model_encode_text(const vkf_model *m, const char *text, int32_t *out_ids, uint32_t capacity,
                                 uint32_t *out_count)
{
    if (!m || !text || !out_count || (capacity && !out_ids))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_encode_text: a required argument is NULL");
    *out_count = 0;
    if (m->hf) return vkf_hf_encode(m, text, out_ids, capacity, out_count);
    if (!m->cfg.has_vocab)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "the model has no vocabularies (src_vocab, tgt_vocab): give ids instead");
    uint32_t n = 0;
    const char *s = text;
    while (*s) {
        size_t len;
        if (m->split_chars) {
            if (isspace((unsigned char)*s)) { s++; continue; }
            len = 1;
            while ((s[len] & 0xc0) == 0x80) len++; /* one UTF-8 character */
        } else {
            while (isspace((unsigned char)*s)) s++;
            if (!*s) break;
            len = 0;
            while (s[len] && !isspace((unsigned char)s[len])) len++;
        }
        int id = find_token(m->src_vocab, m->cfg.src_vocab_size, s, len);
        if (id < 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "\"%.*s\" is not in the model's source vocabulary", (int)len, s);
        if (n >= capacity) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity);
        out_ids[n++] = id;
        s += len;
    }
    if (n == 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text is empty");
    if (n >= capacity) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity - 1);
    out_ids[n++] = m->cfg.eos_id;
    *out_count = n;
    return VKF_OK;
}

vkf_status vkf_model_decode_text(const vkf_model *m, const int32_t *ids, uint32_t count, char *out_text, size_t capacity)
{
    if (!m || (count && !ids) || !out_text || capacity == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_decode_text: a required argument is NULL or empty");
    out_text[0] = '\0';
    if (m->hf) return vkf_hf_decode(m, ids, count, out_text, capacity);
    if (!m->cfg.has_vocab)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "the model has no vocabularies (src_vocab, tgt_vocab)");
    size_t used = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= m->cfg.tgt_vocab_size)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "id %d is outside the target vocabulary", ids[i]);
        const char *sep = i ? m->tgt_join : "";
        const char *tok = m->tgt_vocab[ids[i]];
        size_t need = strlen(sep) + strlen(tok);
        if (used + need + 1 > capacity) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text needs more than %zu bytes", capacity);
        memcpy(out_text + used, sep, strlen(sep));
        memcpy(out_text + used + strlen(sep), tok, strlen(tok));
        used += need;
        out_text[used] = '\0';
    }
    return VKF_OK;
}

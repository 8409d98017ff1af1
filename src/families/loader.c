/* The weight loader every family shares: tensors found in the safetensors file
 * and checked by name, shape and dtype, converted, and uploaded in the load's
 * precision (F32, F16, or int8 with per-row scales); embeddings split in parts
 * that each fit one binding; every tensor of the file accounted for. A dry run
 * (the fuzzer's) checks and converts without a device. */
#include "families/family.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool vkf_ld_name_add(vkf_name_list *l, const char *name)
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

void vkf_ld_names_free(vkf_name_list *l)
{
    for (uint32_t i = 0; i < l->count; i++) free(l->names[i]);
    free(l->names);
}

/* Checks tensor `name` is there with shape (rows, cols) (or (cols) when rows == 0). */
vkf_status vkf_ld_find_shaped(const vkf_loader *L, const char *name, uint32_t rows, uint32_t cols,
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
vkf_status vkf_ld_find(vkf_loader *L, const char *name, uint32_t rows, uint32_t cols, const vkf_st_tensor **out)
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
vkf_status vkf_ld_floats(vkf_loader *L, const vkf_st_tensor *t, const float **out)
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

static vkf_status upload(vkf_loader *L, const float *data, uint32_t rows, uint32_t cols, vkf_tensor **out)
{
    if (L->dry_run) return VKF_OK;
    uint64_t shape[2] = {rows ? rows : 1, cols};
    VKF_TRY(vkf_tensor_create(L->ctx, VKF_DTYPE_F32, rows ? 2 : 1, rows ? shape : shape + 1, out));
    return vkf_tensor_upload(*out, data, (uint64_t)(rows ? rows : 1) * cols * sizeof(float));
}

/* A weight (rows, cols), or rows [row0, row0 + nrows) of one (rows, cols).
 * Stored F16 where the device reads 16-bit storage and the precision asks for
 * it: auto keeps the file's F16 as F16, f16 also converts F32 and BF16. */
vkf_status vkf_ld_matrix(vkf_loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0, uint32_t nrows,
                              vkf_tensor **out)
{
    const vkf_st_tensor *t = NULL;
    VKF_TRY(vkf_ld_find(L, name, rows, cols, &t));
    bool as_f16 = !L->dry_run && L->ctx->storage_16bit &&
                  (L->precision == VKF_PRECISION_F16 ||
                   ((L->precision == VKF_PRECISION_AUTO || L->precision == VKF_PRECISION_INT8) && t->dtype == VKF_ST_F16));
    if (as_f16) {
        uint64_t shape[2] = {nrows, cols}, count = (uint64_t)nrows * cols;
        VKF_TRY(vkf_tensor_create(L->ctx, VKF_DTYPE_F16, 2, shape, out));
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
vkf_status vkf_ld_matrix_i8(vkf_loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0,
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
    if (st == VKF_OK) st = vkf_tensor_create(L->ctx, VKF_DTYPE_I8, 2, shape, out);
    if (st == VKF_OK) st = vkf_tensor_upload(*out, L->quant, count);
    if (st == VKF_OK) st = vkf_tensor_create(L->ctx, VKF_DTYPE_F32, 1, shape, out_scale);
    if (st == VKF_OK) st = vkf_tensor_upload(*out_scale, sc, (uint64_t)nrows * sizeof *sc);
    free(sc);
    return st;
}

/* An int8 weight matrix from the file: `name` I8 (rows, cols) with `name`_scale
 * F32 (rows), one finite non-negative scale per row (docs/file-format.md). Rows
 * [row0, row0 + nrows) are uploaded as they are (I8 + scales) with precision auto
 * or int8, and dequantized (q * scale) to F32 or F16 with f32 or f16. */
static vkf_status matrix_file_i8(vkf_loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0,
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
        st = vkf_tensor_create(L->ctx, VKF_DTYPE_I8, 2, shape, out);
        if (st == VKF_OK) st = vkf_tensor_upload(*out, q, count);
        if (st == VKF_OK) st = vkf_tensor_create(L->ctx, VKF_DTYPE_F32, 1, shape, out_scale);
        if (st == VKF_OK) st = vkf_tensor_upload(*out_scale, buf, (uint64_t)nrows * sizeof *buf);
        free(buf);
        return st;
    }
    for (uint64_t e = 0; e < count; e++) buf[e] = (float)q[e] * all[row0 + e / cols];
    if (L->precision == VKF_PRECISION_F16) {
        uint16_t *h = malloc(count * sizeof *h);
        st = h ? vkf_tensor_create(L->ctx, VKF_DTYPE_F16, 2, shape, out)
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
vkf_status vkf_ld_vector(vkf_loader *L, const char *name, uint32_t n, uint32_t begin, uint32_t count, vkf_tensor **out)
{
    const vkf_st_tensor *t = NULL;
    const float *data = NULL;
    VKF_TRY(vkf_ld_find(L, name, 0, n, &t));
    VKF_TRY(vkf_ld_floats(L, t, &data));
    return upload(L, data + begin, 0, count, out);
}

/* A weight matrix in the load's precision: I8 in the file (with its scales),
 * quantized to int8, or F32/F16 (vkf_ld_matrix). */
static vkf_status ld_weight(vkf_loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0,
                            uint32_t nrows, vkf_tensor **out, vkf_tensor **out_scale)
{
    const vkf_st_tensor *in_file = vkf_st_find(L->file, name);
    if (in_file && in_file->dtype == VKF_ST_I8) return matrix_file_i8(L, name, rows, cols, row0, nrows, out, out_scale);
    if (L->precision == VKF_PRECISION_INT8) return vkf_ld_matrix_i8(L, name, rows, cols, row0, nrows, out, out_scale);
    return vkf_ld_matrix(L, name, rows, cols, row0, nrows, out);
}

vkf_status vkf_ld_linear(vkf_loader *L, const char *prefix, const char *wname, const char *bname, uint32_t rows,
                              uint32_t cols, uint32_t row0, uint32_t nrows, vkf_linear *out)
{
    char w[256], b[256];
    snprintf(w, sizeof w, "%s%s", prefix, wname);
    snprintf(b, sizeof b, "%s%s", prefix, bname ? bname : "");
    out->out = nrows;
    out->in = cols;
    VKF_TRY(ld_weight(L, w, rows, cols, row0, nrows, &out->w, &out->scale));
    return bname ? vkf_ld_vector(L, b, rows, row0, nrows, &out->b) : VKF_OK;
}

vkf_status vkf_ld_norm(vkf_loader *L, const char *prefix, uint32_t d, vkf_norm *out)
{
    char g[256], b[256];
    snprintf(g, sizeof g, "%s.weight", prefix);
    snprintf(b, sizeof b, "%s.bias", prefix);
    VKF_TRY(vkf_ld_vector(L, g, d, 0, d, &out->g));
    return vkf_ld_vector(L, b, d, 0, d, &out->b);
}

/* Host floats (rows, cols) as a weight in the load's precision: int8 with per-row
 * scales (int8), F16 (f16; auto and int8 keep a file's F16 as F16), else F32. */
static vkf_status upload_weight(vkf_loader *L, const char *name, const float *data, uint32_t rows, uint32_t cols,
                                bool file_f16, vkf_tensor **out, vkf_tensor **out_scale)
{
    if (L->dry_run) return VKF_OK;
    vkf_context *ctx = L->ctx;
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

vkf_status vkf_ld_stacked(vkf_loader *L, const char *const *wnames, const char *const *bnames, uint32_t n,
                          uint32_t rows_each, uint32_t cols, vkf_linear *out)
{
    uint64_t per = (uint64_t)rows_each * cols, rows = (uint64_t)n * rows_each;
    float *w = malloc(rows * cols * sizeof *w), *b = calloc(rows, sizeof *b);
    vkf_status st = w && b ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory reading \"%s\"", wnames[0]);
    bool f16 = true, any_bias = false;
    for (uint32_t i = 0; st == VKF_OK && i < n; i++) {
        const vkf_st_tensor *t = NULL;
        const float *data = NULL;
        st = vkf_ld_find(L, wnames[i], rows_each, cols, &t);
        if (st == VKF_OK) st = vkf_ld_floats(L, t, &data);
        if (st == VKF_OK) memcpy(w + i * per, data, per * sizeof *w), f16 = f16 && t->dtype == VKF_ST_F16;
        if (!bnames || !bnames[i]) continue; /* no bias: zeros in its rows */
        any_bias = true;
        if (st == VKF_OK) st = vkf_ld_find(L, bnames[i], 0, rows_each, &t);
        if (st == VKF_OK) st = vkf_ld_floats(L, t, &data);
        if (st == VKF_OK) memcpy(b + (uint64_t)i * rows_each, data, rows_each * sizeof *b);
    }
    out->out = (uint32_t)rows, out->in = cols;
    if (st == VKF_OK) st = upload_weight(L, wnames[0], w, (uint32_t)rows, cols, f16, &out->w, &out->scale);
    if (st == VKF_OK && any_bias) st = upload(L, b, 0, (uint32_t)rows, &out->b);
    free(w), free(b);
    return st;
}

vkf_status vkf_ld_table(vkf_loader *L, const char *name, uint32_t rows, uint32_t d, vkf_split_table *out)
{
    /* parts sized for 4-byte elements, so that F32 and F16 tables split alike and a
     * tied generator can take the same parts */
    uint64_t range = L->dry_run ? UINT64_MAX : L->ctx->info.max_storage_buffer_range;
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
        vkf_log(L->ctx, VKF_LOG_INFO, "\"%s\" (%u x %u) is held in %u parts of up to %llu rows (maxStorageBufferRange "
                "%llu bytes)", name, rows, d, parts, (unsigned long long)per, (unsigned long long)range);
    return VKF_OK;
}

vkf_status vkf_ld_check_unexpected(const vkf_loader *L, const char *hint)
{
    for (uint32_t i = 0; i < vkf_st_count(L->file); i++) {
        const char *name = vkf_st_at(L->file, i)->name;
        bool known = false;
        for (uint32_t k = 0; k < L->expected.count && !known; k++) known = strcmp(L->expected.names[k], name) == 0;
        if (!known) {
            char q[VKF_QUOTE_SIZE];
            return vkf_fail(VKF_ERROR_BAD_MODEL, "unexpected tensor %s (%s)", vkf_quote(q, sizeof q, name, (size_t)-1),
                            hint);
        }
    }
    return VKF_OK;
}


void vkf_loader_free(vkf_loader *L)
{
    free(L->scratch);
    free(L->halves);
    free(L->quant);
    vkf_ld_names_free(&L->expected);
    vkf_st_close(L->file);
    L->scratch = NULL, L->halves = NULL, L->quant = NULL, L->file = NULL;
    memset(&L->expected, 0, sizeof L->expected);
}

vkf_status vkf_ld_share_table(const vkf_split_table *src, vkf_split_table *tgt)
{
    *tgt = *src;
    tgt->part = NULL, tgt->scale = NULL, tgt->borrowed = true;
    if (!src->part) return VKF_OK; /* a dry run holds no parts */
    tgt->part = malloc(src->parts * sizeof *tgt->part);
    if (!tgt->part) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memcpy(tgt->part, src->part, src->parts * sizeof *tgt->part);
    if (src->scale) { /* int8: the scales are shared too */
        tgt->scale = malloc(src->parts * sizeof *tgt->scale);
        if (!tgt->scale) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        memcpy(tgt->scale, src->scale, src->parts * sizeof *tgt->scale);
    }
    return VKF_OK;
}

vkf_status vkf_ld_generator(vkf_loader *L, bool tied, const char *name, const float *bias)
{
    vkf_arch_weights *w = L->w;
    uint32_t V = L->spec->tgt_vocab, d = L->spec->d_model, per = w->tgt_embed.rows_per_part;
    w->gen_parts = w->tgt_embed.parts;
    if (!(w->gen = calloc(w->gen_parts, sizeof *w->gen))) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < w->gen_parts; i++) {
        vkf_linear *g = &w->gen[i];
        uint32_t r0 = i * per, n = V - r0 < per ? V - r0 : per;
        g->out = n, g->in = d;
        if (tied) {
            /* the target embedding's parts, with its per-row scales under int8 (one
             * scale per token row: the generator's output channels) */
            g->w = w->tgt_embed.part ? w->tgt_embed.part[i] : NULL, g->w_borrowed = true;
            g->scale = w->tgt_embed.scale ? w->tgt_embed.scale[i] : NULL;
        } else {
            VKF_TRY(ld_weight(L, name, V, d, r0, n, &g->w, &g->scale));
        }
        if (bias) VKF_TRY(upload(L, bias + r0, 0, n, &g->b));
    }
    return VKF_OK;
}

vkf_status vkf_ld_positions(vkf_loader *L, const char *name, vkf_tensor **out)
{
    const vkf_arch_spec *s = L->spec;
    *out = NULL;
    if (s->positions == VKF_POS_NONE) return VKF_OK;
    uint32_t rows = vkf_arch_position_rows(s), d = s->d_model;
    if (s->positions == VKF_POS_LEARNED || (name && vkf_st_find(L->file, name))) {
        /* the file's table (learned, or a checkpoint's copy of its sinusoids, which
         * transformers loads as they are): F32 in every precision (it is added) */
        const vkf_st_tensor *t = NULL;
        const float *data = NULL;
        VKF_TRY(vkf_ld_find(L, name, rows, d, &t));
        VKF_TRY(vkf_ld_floats(L, t, &data));
        return upload(L, data, rows, d, out);
    }
    if (L->dry_run) return VKF_OK;
    float *table = NULL;
    VKF_TRY(vkf_arch_position_table(s, &table, &rows));
    vkf_status st = upload(L, table, rows, d, out);
    free(table);
    return st;
}

vkf_status vkf_ld_conv1d(vkf_loader *L, const char *prefix, uint32_t out_ch, uint32_t in_ch, uint32_t kernel,
                         vkf_linear *out)
{
    char w[256], b[256];
    snprintf(w, sizeof w, "%s.weight", prefix);
    snprintf(b, sizeof b, "%s.bias", prefix);
    const vkf_st_tensor *t = vkf_st_find(L->file, w);
    if (!t) return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" is missing", w);
    if (t->rank != 3 || t->shape[0] != out_ch || t->shape[1] != in_ch || t->shape[2] != kernel) {
        char got[128] = "(";
        for (uint32_t i = 0; i < t->rank && i < 4; i++) {
            size_t len = strlen(got);
            snprintf(got + len, sizeof got - len, "%s%llu", i ? ", " : "", (unsigned long long)t->shape[i]);
        }
        strcat(got, ")");
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" has shape %s, expected (%u, %u, %u)", w, got, out_ch, in_ch,
                        kernel);
    }
    if (t->dtype != VKF_ST_F32 && t->dtype != VKF_ST_F16 && t->dtype != VKF_ST_BF16)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" has dtype %s; F32, F16 or BF16 expected", w,
                        vkf_st_dtype_name(t->dtype));
    if (!vkf_ld_name_add(&L->expected, w)) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    const float *data = NULL;
    VKF_TRY(vkf_ld_floats(L, t, &data));
    uint64_t cols = (uint64_t)kernel * in_ch;
    float *r = malloc((uint64_t)out_ch * cols * sizeof *r);
    if (!r) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory reading \"%s\"", w);
    /* (out, in, k) -> (out, k, in) */
    for (uint32_t o = 0; o < out_ch; o++)
        for (uint32_t c = 0; c < in_ch; c++)
            for (uint32_t k = 0; k < kernel; k++)
                r[(uint64_t)o * cols + (uint64_t)k * in_ch + c] = data[((uint64_t)o * in_ch + c) * kernel + k];
    out->out = out_ch, out->in = (uint32_t)cols;
    vkf_status st = upload_weight(L, w, r, out_ch, (uint32_t)cols, t->dtype == VKF_ST_F16, &out->w, &out->scale);
    free(r);
    VKF_TRY(st);
    return vkf_ld_vector(L, b, out_ch, 0, out_ch, &out->b);
}

vkf_status vkf_ld_act_table(vkf_loader *L, const char *name, uint32_t rows, uint32_t cols, vkf_tensor **out)
{
    const vkf_st_tensor *t = NULL;
    const float *data = NULL;
    VKF_TRY(vkf_ld_find(L, name, rows, cols, &t));
    VKF_TRY(vkf_ld_floats(L, t, &data));
    if (L->dry_run) return VKF_OK;
    VKF_TRY(vkf_tensor2(L->ctx, L->act, rows, cols, out));
    return vkf_upload_floats(*out, data, (uint64_t)rows * cols);
}

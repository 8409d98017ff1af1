/* One host function per kernel: check the arguments against the tensors, fill the
 * push constants, pick the pipeline for this device's tuning and compute the
 * workgroup grid. The per-device choice of tile and workgroup sizes these read
 * from ctx->tuning is tuning.c's. */
#include "ops/ops.h"
#include "runtime/push.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ checks */

vkf_status vkf_check_cmd(vkf_cmd *cmd, const void *desc, const char *fn)
{
    if (!cmd) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: command list is NULL", fn);
    if (!desc) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: descriptor is NULL", fn);
    if (vkf_cmd_context(cmd)->lost)
        return vkf_fail(VKF_ERROR_DEVICE_LOST, "the device was lost; destroy and recreate the context");
    if (!vkf_cmd_recording(cmd))
        return vkf_fail(VKF_ERROR_STATE, "%s: the command list was already submitted; record a new one", fn);
    return VKF_OK;
}

vkf_status vkf_check_tensor(vkf_cmd *cmd, const vkf_tensor *t, vkf_dtype dtype, uint64_t elements, const char *fn,
                               const char *name)
{
    if (!t) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
    if (t->ctx != vkf_cmd_context(cmd))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s belongs to another context", fn, name);
    if (t->dtype != dtype)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s must be %s", fn, name,
                        dtype == VKF_DTYPE_F32 ? "F32" : dtype == VKF_DTYPE_I32 ? "I32"
                        : dtype == VKF_DTYPE_I8 ? "I8" : "F16");
    if (t->elements < elements)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s holds %llu elements, %llu needed", fn, name,
                        (unsigned long long)t->elements, (unsigned long long)elements);
    return VKF_OK;
}

/* A view of batch0 × batch1 matrices of rows × cols lies inside its tensor, and
 * every offset fits the shaders' 32-bit indices. Fills the push-constant fields. */
/* The dtype a float input may have: F16 where the device reads 16-bit storage and
 * the input allows it, else F32. */
static vkf_status float_input_dtype(vkf_cmd *cmd, const vkf_tensor *t, bool allow_f16, const char *fn, const char *name,
                                    vkf_dtype *out)
{
    *out = VKF_DTYPE_F32;
    if (t && t->dtype == VKF_DTYPE_F16 && allow_f16) {
        if (!vkf_cmd_context(cmd)->storage_16bit)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: %s is F16 but device \"%s\" has no 16-bit storage", fn, name,
                            vkf_cmd_context(cmd)->info.name);
        *out = VKF_DTYPE_F16;
    }
    return VKF_OK;
}

/* The activation dtype of an op: that of `first` (F32, or F16 on devices with
 * 16-bit storage); every other activation tensor of the op must share it. */
vkf_status vkf_activation_dtype(vkf_cmd *cmd, const vkf_tensor *first, const char *fn, const char *name, vkf_dtype *out)
{
    return float_input_dtype(cmd, first, true, fn, name, out);
}

/* NULL, or a tensor of `dtype`: activations of one op share their dtype. */
static vkf_status same_dtype(const vkf_tensor *t, vkf_dtype dtype, const char *fn, const char *name, const char *first)
{
    if (t && t->dtype == VKF_DTYPE_I8)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is I8; only B (the weights, with b_scale) may be int8", fn,
                        name);
    if (t && t->dtype != dtype)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s must have %s's dtype (%s)", fn, name, first,
                        dtype == VKF_DTYPE_F16 ? "F16" : "F32");
    return VKF_OK;
}

/* Another activation of the op: first's dtype, and at least `elements` of it. */
vkf_status vkf_check_activation(vkf_cmd *cmd, const vkf_tensor *t, vkf_dtype dtype, uint64_t elements, const char *fn,
                           const char *name, const char *first)
{
    VKF_TRY(same_dtype(t, dtype, fn, name, first));
    return vkf_check_tensor(cmd, t, dtype, elements, fn, name);
}

static vkf_status check_view(vkf_cmd *cmd, const vkf_matrix_view *v, uint64_t rows, uint64_t cols, uint64_t batch0,
                             uint64_t batch1, const char *fn, const char *name, bool allow_f16, bool allow_i8,
                             bool rows_overlap, vkf_push_view *out)
{
    vkf_dtype dtype;
    VKF_TRY(float_input_dtype(cmd, v->tensor, allow_f16, fn, name, &dtype));
    /* I8 only where allowed (B, the weights; vkf_cmd_matmul checks the scales). */
    if (v->tensor && v->tensor->dtype == VKF_DTYPE_I8) {
        if (!allow_i8)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is I8; only B (the weights, with b_scale) may be int8",
                            fn, name);
        dtype = VKF_DTYPE_I8;
    }
    VKF_TRY(vkf_check_tensor(cmd, v->tensor, dtype, 1, fn, name));
    uint64_t row_stride = v->row_stride ? v->row_stride : cols;
    if (row_stride < cols && rows > 1 && !rows_overlap)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s row_stride %llu is less than its %llu columns", fn, name,
                        (unsigned long long)row_stride, (unsigned long long)cols);
    uint64_t last = v->offset, term;
    bool overflow = false;
    overflow |= __builtin_mul_overflow(batch0 - 1, v->batch_stride[0], &term) || __builtin_add_overflow(last, term, &last);
    overflow |= __builtin_mul_overflow(batch1 - 1, v->batch_stride[1], &term) || __builtin_add_overflow(last, term, &last);
    overflow |= __builtin_mul_overflow(rows - 1, row_stride, &term) || __builtin_add_overflow(last, term, &last);
    overflow |= __builtin_add_overflow(last, cols - 1, &last);
    if (overflow || last >= v->tensor->elements)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "%s: %s view (offset %llu, row stride %llu, batch strides %llu/%llu, %llux%llu x %llu rows "
                        "x %llu cols) reaches past the tensor's %llu elements",
                        fn, name, (unsigned long long)v->offset, (unsigned long long)row_stride,
                        (unsigned long long)v->batch_stride[0], (unsigned long long)v->batch_stride[1],
                        (unsigned long long)batch0, (unsigned long long)batch1, (unsigned long long)rows,
                        (unsigned long long)cols, (unsigned long long)v->tensor->elements);
    if (last > UINT32_MAX || v->batch_stride[0] > UINT32_MAX || v->batch_stride[1] > UINT32_MAX)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %s indices pass 2^32 elements", fn, name);
    *out = (vkf_push_view){(uint32_t)v->offset, (uint32_t)row_stride, (uint32_t)v->batch_stride[0],
                           (uint32_t)v->batch_stride[1]};
    return VKF_OK;
}

static vkf_status check_grid(const vkf_context *ctx, const uint32_t groups[3], const char *fn)
{
    for (int i = 0; i < 3; i++)
        if (groups[i] > ctx->info.max_workgroup_count[i])
            return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %u workgroups along axis %d exceed the device's limit of %u", fn,
                            groups[i], i, ctx->info.max_workgroup_count[i]);
    return VKF_OK;
}

/* Lays `count` workgroups out in 2-D when they pass the x limit; the shaders undo
 * it with linear_workgroup(). */
vkf_status vkf_linear_grid(const vkf_context *ctx, uint64_t count, uint32_t groups[3], const char *fn)
{
    uint64_t max_x = ctx->info.max_workgroup_count[0];
    uint64_t x = count < max_x ? count : max_x;
    uint64_t y = vkf_div_up(count, x ? x : 1);
    if (y > ctx->info.max_workgroup_count[1])
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %llu workgroups exceed the device's grid", fn, (unsigned long long)count);
    groups[0] = (uint32_t)x;
    groups[1] = (uint32_t)y;
    groups[2] = 1;
    return VKF_OK;
}


/* ------------------------------------------------------------------ ops */

void vkf_matmul_desc_init(vkf_matmul_desc *d)
{
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->batch[0] = d->batch[1] = 1;
    d->alpha = 1.0f;
}

void vkf_softmax_desc_init(vkf_softmax_desc *d)
{
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->scale = 1.0f;
}

void vkf_layernorm_desc_init(vkf_layernorm_desc *d)
{
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->eps = 1e-5f;
}

vkf_status vkf_quantize_int8_rows(const float *w, uint64_t rows, uint64_t cols, int8_t *out_q, float *out_scales)
{
    static const char fn[] = "vkf_quantize_int8_rows";
    if (!w || !out_q || !out_scales)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, !w ? "w" : !out_q ? "out_q" : "out_scales");
    if (rows == 0 || cols == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive (rows %llu, cols %llu)", fn,
                        (unsigned long long)rows, (unsigned long long)cols);
    if (rows > SIZE_MAX / cols) return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: rows x cols overflows", fn);
    for (uint64_t r = 0; r < rows; r++) {
        const float *row = w + r * cols;
        float amax = 0.0f;
        for (uint64_t c = 0; c < cols; c++) {
            if (!isfinite(row[c]))
                return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: weight (%llu, %llu) is not finite", fn,
                                (unsigned long long)r, (unsigned long long)c);
            amax = fmaxf(amax, fabsf(row[c]));
        }
        float scale = amax / 127.0f;
        out_scales[r] = scale;
        for (uint64_t c = 0; c < cols; c++) {
            float q = scale > 0.0f ? roundf(row[c] / scale) : 0.0f;
            out_q[r * cols + c] = (int8_t)(q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q);
        }
    }
    return VKF_OK;
}

void vkf_embed_desc_init(vkf_embed_desc *d)
{
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->scale = 1.0f;
}

/* The kernel family and tiles of a matmul with m rows and macs multiply-adds
 * (batches included); f16_operand: A or B is F16. fragment: the coopmat fragment
 * shape (spec constants 6-8) when the family is a coopmat one. */
static vkf_variant_id matmul_choose(const vkf_context *ctx, uint32_t m, double macs, bool f16_operand, bool vec4,
                                    const vkf_matmul_tiles **out_tiles, uint32_t fragment[3])
{
    const vkf_matmul_tiles *t = &ctx->tuning.matmul;
    vkf_variant_id family = ctx->tuning.matmul_variant;
    /* Decode steps on GPUs (at most gemv.bm rows, B (n, k) read with vec4 loads):
     * matmul_gemv, shaped for bandwidth, unless a kernel was forced (tests,
     * bench --kernel, tune candidates). */
    fragment[0] = fragment[1] = fragment[2] = 0;
    if (ctx->tuning.gemv.workgroup && m <= ctx->tuning.gemv.bm && vec4 &&
        ctx->tuning.matmul_source != VKF_SOURCE_FORCED && ctx->tuning.coopmat_use != 2) {
        *out_tiles = &ctx->tuning.gemv;
        return VKF_VARIANT_MATMUL_GEMV;
    }
    /* Fewer rows than one invocation's (decode steps: one per sequence) on a
     * CPU-driver kernel: the direct kernel with one block of 1, 2 or 4 rows (the
     * fewest that hold m, where that is fewer than the tile's) and more columns
     * per workgroup, instead of a tile whose clamped rows would repeat the same
     * work. One block, so B is read once: one-row tiles for every m < 8 made m
     * workgroup rows each read all of B (lavapipe, n = k = 2048, f32: m = 4 took
     * 23 ms on one-row tiles, 6.2 on 4-row ones, m = 8 on the 8 x 8 tiles 8.6;
     * 8-row skinny tiles were slower there, 10.0, so m = 5..7 keep the 8 x 8
     * tiles). Small matmuls leave matmul_subgroup for the direct kernel too. */
    static const vkf_matmul_tiles skinny[3] = {
        {.workgroup = 64, .bm = 1, .bn = 256, .bk = 1, .tm = 1, .tn = 4},
        {.workgroup = 64, .bm = 2, .bn = 256, .bk = 1, .tm = 2, .tn = 4},
        {.workgroup = 64, .bm = 4, .bn = 256, .bk = 1, .tm = 4, .tn = 4},
    };
    /* Batched decode steps (8 <= m < the tile's rows) on matmul_subgroup: the
     * skinny tiles of one row block (tuning.c), from a quarter of the size below
     * which small matmuls leave matmul_subgroup. */
    bool lanes_share_rows = family == VKF_VARIANT_MATMUL_SUBGROUP || family == VKF_VARIANT_MATMUL_BROADCAST;
    bool skinny_subgroup = false;
    if (lanes_share_rows && m >= 8 && m < t->bm && macs >= (double)ctx->tuning.matmul_min_macs / 4) {
        const vkf_matmul_tiles *s = &ctx->tuning.subgroup_skinny[m >= 32 ? 2 : m >= 16 ? 1 : 0];
        if (s->workgroup && s->bm < t->bm) t = s, skinny_subgroup = true;
    }
    if (lanes_share_rows && !skinny_subgroup &&
        (m < t->tm || macs < (double)ctx->tuning.matmul_min_macs) &&
        vkf_cpu_direct_tiles.workgroup <= ctx->info.max_workgroup_invocations) {
        family = VKF_VARIANT_MATMUL_DIRECT;
        t = &vkf_cpu_direct_tiles;
    }
    if (family == VKF_VARIANT_MATMUL_DIRECT && m <= 4 && skinny[0].workgroup <= ctx->info.max_workgroup_invocations) {
        const vkf_matmul_tiles *s = &skinny[m <= 1 ? 0 : m <= 2 ? 1 : 2];
        if (s->tm < t->tm) t = s;
    }

    /* Cooperative matrix (tensor cores), when:
     *  - the context has it (ctx->coopmat: never when off, missing or not built);
     *  - coopmat_use 2, set explicitly (tests, bench, tune candidates): every matmul;
     *  - coopmat_use 1 (the built-in rule on GPUs, or a tune file): matmuls with an
     *    F16 operand. The user chose f16 storage, so the kernel's rounding of A and
     *    B to f16 costs little more; F32 x F32 matmuls keep the fp32 scalar kernels
     *    and their accuracy. Not when m is below one fragment's rows (decode steps,
     *    one row per sequence): most of every fragment would multiply zero padding,
     *    where the scalar kernels above do only the real rows.
     * CPU drivers get coopmat_use 0 (coopmat_builtin): slower there than the scalar kernels. */
    const vkf_tuning *tu = &ctx->tuning;
    fragment[0] = fragment[1] = fragment[2] = 0;
    if (ctx->coopmat && tu->coopmat_use) {
        vkf_coopmat_fragment(ctx, tu->coopmat_variant, &tu->coopmat, fragment);
        if (tu->coopmat_use == 2 || (f16_operand && m >= fragment[0])) {
            family = tu->coopmat_variant;
            t = &tu->coopmat;
        }
    }
    *out_tiles = t;
    return family;
}

const char *vkf_matmul_kernel_family(const vkf_context *ctx, uint32_t m, uint32_t n, uint32_t k, uint64_t batch,
                                     bool a_f16, bool b_f16)
{
    if (!ctx) return NULL;
    const vkf_matmul_tiles *t;
    uint32_t fragment[3];
    switch (matmul_choose(ctx, m, (double)m * n * k * (double)(batch ? batch : 1), a_f16 || b_f16, k % 4 == 0, &t,
                          fragment)) {
    case VKF_VARIANT_MATMUL_GEMV: return "gemv";
    case VKF_VARIANT_MATMUL_COOPMAT: return "coopmat";
    case VKF_VARIANT_MATMUL_COOPMAT2: return "coopmat2";
    case VKF_VARIANT_MATMUL_COOPMAT2_WG: return "coopmat2wg";
    case VKF_VARIANT_MATMUL_TILED: return "tiled";
    case VKF_VARIANT_MATMUL_SUBGROUP: return "subgroup";
    case VKF_VARIANT_MATMUL_BROADCAST: return "broadcast";
    default: return "direct";
    }
}

vkf_status vkf_matmul_choice(const vkf_context *ctx, uint32_t m, uint32_t n, uint32_t k, uint64_t batch, bool a_f16,
                             bool b_f16, vkf_kernel_choice *out)
{
    if (!ctx || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_matmul_choice: NULL argument");
    const vkf_tuning *tu = &ctx->tuning;
    const vkf_matmul_tiles *t;
    uint32_t fragment[3];
    vkf_variant_id family =
        matmul_choose(ctx, m, (double)m * n * k * (double)(batch ? batch : 1), a_f16 || b_f16, k % 4 == 0, &t, fragment);
    memset(out, 0, sizeof *out);
    out->kernel = vkf_matmul_kernel_family(ctx, m, n, k, batch, a_f16, b_f16);
    memcpy(out->tiles, t, sizeof(uint32_t) * 6);
    out->table_entry = tu->table_entry;
    if (family == VKF_VARIANT_MATMUL_COOPMAT || family == VKF_VARIANT_MATMUL_COOPMAT2 ||
        family == VKF_VARIANT_MATMUL_COOPMAT2_WG)
        out->source = vkf_choice_source_name(tu->coopmat_source);
    else if (family == tu->matmul_variant)
        out->source = vkf_choice_source_name(tu->matmul_source); /* the tiles or their one-row-block form */
    else
        out->source = vkf_choice_source_name(VKF_SOURCE_DEFAULT); /* small matmuls and single rows: the direct kernel */
    return VKF_OK;
}

vkf_status vkf_decode_form_choice(const vkf_context *ctx, vkf_kernel_choice *out)
{
    if (!ctx || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_decode_form_choice: NULL argument");
    memset(out, 0, sizeof *out);
    out->kernel = ctx->tuning.decode_rows ? "rows" : "split";
    out->source = vkf_choice_source_name(ctx->tuning.decode_source);
    out->table_entry = ctx->tuning.table_entry;
    return VKF_OK;
}

/* ------------------------------------------------------------------ decode steps */

/* A matmul of at most t->bm rows on matmul_gemv: t->bn columns per workgroup, the
 * workgroups laid out in 2-D past the grid's x limit, z the batch item. */
static vkf_status matmul_gemv(vkf_cmd *cmd, const vkf_matmul_desc *d, const vkf_push_matmul *p,
                              const vkf_matmul_tiles *t, bool b_i8, vkf_dtype act, uint64_t items)
{
    static const char fn[] = "vkf_cmd_matmul";
    vkf_context *ctx = vkf_cmd_context(cmd);
    static const vkf_variant_id variants[2][3] = {
        {VKF_VARIANT_MATMUL_GEMV, VKF_VARIANT_MATMUL_GEMV_F16B, VKF_VARIANT_MATMUL_GEMV_I8B},
        {VKF_VARIANT_MATMUL_GEMV_ACT16, VKF_VARIANT_MATMUL_GEMV_ACT16_F16B, VKF_VARIANT_MATMUL_GEMV_ACT16_I8B},
    };
    const vkf_pipeline *pipe;
    /* spec constants 0-2: workgroup, rows, columns per workgroup */
    VKF_TRY(vkf_pipeline_get(ctx, variants[act == VKF_DTYPE_F16][b_i8 ? 2 : d->b.tensor->dtype == VKF_DTYPE_F16],
                             (const uint32_t *)t, 3, &pipe));
    uint32_t groups[3];
    VKF_TRY(vkf_linear_grid(ctx, vkf_div_up(d->n, t->bn), groups, fn));
    groups[2] = (uint32_t)items;
    VKF_TRY(check_grid(ctx, groups, fn));
    vkf_binding b[6] = {
        {d->a.tensor, VKF_READ}, {d->b.tensor, VKF_READ}, {d->bias, VKF_READ},
        {d->residual.tensor, VKF_READ}, {d->c.tensor, VKF_WRITE}, {d->b_scale, VKF_READ},
    };
    return vkf_cmd_dispatch(cmd, pipe, b, b_i8 ? 6 : 5, p, sizeof *p, groups, "matmul");
}

/* ------------------------------------------------------------------ split-K */

/* How many K ranges a KHR coopmat matmul splits into (1: none). The rule, on
 * GPUs: when the output has fewer workgroup tiles than twice the compute units
 * (decode-sized and narrow matmuls with long K), as many splits as fill twice the
 * units, at most 16, each of at least 4 K stages. tuning.coopmat_split 1: never;
 * N >= 2: N (tests, bench), as K allows. None where the fp32 partial sums
 * (splits x batch x m x n) would pass a binding, 256 MiB or the grid. */
static uint32_t coopmat_splits(const vkf_context *ctx, const vkf_matmul_tiles *t, uint32_t m, uint32_t n, uint32_t k,
                               uint64_t items, const uint32_t groups[3])
{
    uint32_t mode = ctx->tuning.coopmat_split, slices = (uint32_t)vkf_div_up(k, t->bk), want;
    uint64_t tiles = (uint64_t)groups[0] * groups[1] * groups[2];
    if (mode == 1) return 1;
    if (mode >= 2) {
        want = mode;
    } else {
        uint64_t target = 2ull * ctx->tuning.compute_units;
        if (ctx->info.type == VKF_DEVICE_CPU || tiles >= target) return 1;
        uint64_t fill = vkf_div_up(target, tiles);
        want = fill > 16 ? 16 : (uint32_t)fill;
        if (want > slices / 4) want = slices / 4;
    }
    if (want > slices) want = slices;
    if (want < 2) return 1;
    uint32_t k_split = (uint32_t)vkf_div_up(slices, want) * t->bk;
    uint32_t splits = (uint32_t)vkf_div_up(k, k_split);
    uint64_t elements = (uint64_t)splits * items * m * n;
    if (splits < 2 || elements > UINT32_MAX || elements * 4 > ctx->info.max_storage_buffer_range ||
        elements * 4 > ctx->info.max_memory_allocation_size || elements * 4 > (256ull << 20) ||
        items * splits > ctx->info.max_workgroup_count[2])
        return 1;
    return splits;
}

static void destroy_tensor(void *t) { vkf_tensor_destroy(t); }

/* The matmul in two dispatches: matmul_coopmat -DSPLIT_K writes the fp32 partial
 * sums of `splits` K ranges to a tensor the command list owns, (splits, batch,
 * m, n); matmul_splitk adds them and applies the epilogue. p: the push
 * constants the one-pass kernel would get. */
static vkf_status matmul_split_k(vkf_cmd *cmd, const vkf_matmul_desc *d, const vkf_push_matmul *p,
                                 const vkf_matmul_tiles *t, const uint32_t fragment[3], uint32_t splits, uint64_t b0,
                                 uint64_t b1, bool b_i8, vkf_dtype act, const uint32_t groups[3])
{
    static const char fn[] = "vkf_cmd_matmul";
    vkf_context *ctx = vkf_cmd_context(cmd);
    uint32_t slices = (uint32_t)vkf_div_up(d->k, t->bk);
    uint32_t k_split = (uint32_t)vkf_div_up(slices, splits) * t->bk;
    uint64_t items = b0 * b1, elements = (uint64_t)vkf_div_up(d->k, k_split) * items * d->m * d->n;
    vkf_tensor *part;
    VKF_TRY(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &elements, &part));
    vkf_status st = vkf_cmd_own(cmd, part, destroy_tensor, vkf_tensor_bytes(part));
    if (st != VKF_OK) {
        vkf_tensor_destroy(part);
        return st;
    }
    /* pass 1: partial sums; their rows (n floats) take whole fragments where n is a multiple of 4 */
    vkf_push_matmul p1 = *p;
    p1.k_split = k_split;
    p1.flags = (p->flags & ~(uint32_t)VKF_MATMUL_FLAG_C_ALIGNED) | (d->n % 4 == 0 ? VKF_MATMUL_FLAG_C_ALIGNED : 0);
    static const vkf_variant_id split_variants[2][3] = {
        {VKF_VARIANT_MATMUL_COOPMAT_SPLITK, VKF_VARIANT_MATMUL_COOPMAT_SPLITK_F16B, VKF_VARIANT_MATMUL_COOPMAT_SPLITK_I8B},
        {VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16, VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16_F16B,
         VKF_VARIANT_MATMUL_COOPMAT_SPLITK_ACT16_I8B},
    };
    uint32_t spec[9];
    memcpy(spec, t, sizeof *t);
    memcpy(spec + 6, fragment, 3 * sizeof *fragment);
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, split_variants[act == VKF_DTYPE_F16][b_i8 ? 2 : d->b.tensor->dtype == VKF_DTYPE_F16],
                             spec, 9, &pipe));
    uint32_t g1[3] = {groups[0], groups[1], (uint32_t)(items * splits)};
    VKF_TRY(check_grid(ctx, g1, fn));
    vkf_binding b1s[6] = {
        {d->a.tensor, VKF_READ}, {d->b.tensor, VKF_READ}, {d->bias, VKF_READ},
        {d->residual.tensor, VKF_READ}, {part, VKF_WRITE}, {d->b_scale, VKF_READ},
    };
    VKF_TRY(vkf_cmd_dispatch(cmd, pipe, b1s, b_i8 ? 6 : 5, &p1, sizeof p1, g1, "matmul_coopmat_splitk"));
    /* pass 2: one invocation per element of C; z is the outer batch index */
    vkf_push_matmul p2 = *p;
    p2.k_split = k_split;
    static const vkf_variant_id reduce_variants[2][2] = {
        {VKF_VARIANT_MATMUL_SPLITK_REDUCE, VKF_VARIANT_MATMUL_SPLITK_REDUCE_I8B},
        {VKF_VARIANT_MATMUL_SPLITK_REDUCE_ACT16, VKF_VARIANT_MATMUL_SPLITK_REDUCE_ACT16_I8B},
    };
    uint32_t wg = ctx->tuning.elementwise_workgroup;
    VKF_TRY(vkf_pipeline_get(ctx, reduce_variants[act == VKF_DTYPE_F16][b_i8], &wg, 1, &pipe));
    uint32_t g2[3];
    VKF_TRY(vkf_linear_grid(ctx, vkf_div_up(b1 * d->m * d->n, wg), g2, fn));
    g2[2] = (uint32_t)b0;
    VKF_TRY(check_grid(ctx, g2, fn));
    vkf_binding b2s[6] = {
        {part, VKF_READ}, {d->b.tensor, VKF_READ}, {d->bias, VKF_READ},
        {d->residual.tensor, VKF_READ}, {d->c.tensor, VKF_WRITE}, {d->b_scale, VKF_READ},
    };
    return vkf_cmd_dispatch(cmd, pipe, b2s, b_i8 ? 6 : 5, &p2, sizeof p2, g2, "matmul_splitk");
}

bool vkf_loop_limited(const vkf_context *ctx)
{
    uint32_t mesa = vkf_mesa_release(&ctx->info);
    return ctx->info.type == VKF_DEVICE_CPU && mesa > 0 && mesa < 2600;
}

uint32_t vkf_loop_row_workgroup(const vkf_context *ctx, uint64_t cols, uint32_t passes, uint32_t per_wg,
                                uint32_t fixed)
{
    uint32_t wg = ctx->tuning.row_workgroup;
    if (!vkf_loop_limited(ctx)) return wg;
    uint32_t max_wg = ctx->info.max_workgroup_invocations < ctx->info.max_workgroup_size[0]
                          ? ctx->info.max_workgroup_invocations : ctx->info.max_workgroup_size[0];
#define LOOPS(w) ((uint64_t)passes * vkf_div_up(cols, (w)) + (uint64_t)per_wg * (w) + fixed)
    while (LOOPS(wg) > VKF_LOOP_BUDGET && wg * 2 <= max_wg) wg *= 2;
    return LOOPS(wg) > VKF_LOOP_BUDGET ? 0 : wg;
#undef LOOPS
}

vkf_status vkf_loop_row_too_long(const vkf_context *ctx, uint32_t cols, const char *fn)
{
    return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: rows of %u columns are more than one workgroup of \"%s\" runs right "
                    "(Mesa before 26 ends an invocation's loops after 65535 iterations)", fn, cols, ctx->info.name);
}

vkf_status vkf_cmd_matmul(vkf_cmd *cmd, const vkf_matmul_desc *d)
{
    static const char fn[] = "vkf_cmd_matmul";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (d->m == 0 || d->n == 0 || d->k == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive (m %u, n %u, k %u)", fn, d->m, d->n, d->k);
    if ((unsigned)d->activation > VKF_ACTIVATION_GELU_TANH)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: unknown activation %d", fn, (int)d->activation);
    if (!isfinite(d->alpha)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: alpha is not finite", fn);
    uint64_t b0 = d->batch[0] ? d->batch[0] : 1, b1 = d->batch[1] ? d->batch[1] : 1;
    vkf_push_matmul p = {.m = d->m, .n = d->n, .k = d->k, .batch_inner = (uint32_t)b1, .alpha = d->alpha};
    vkf_dtype act;
    VKF_TRY(check_view(cmd, &d->a, d->m, d->k, b0, b1, fn, "A", /*f16=*/true, /*i8=*/false, d->a_rows_overlap, &p.a));
    VKF_TRY(vkf_activation_dtype(cmd, d->a.tensor, fn, "A", &act));
    VKF_TRY(same_dtype(d->c.tensor, act, fn, "C", "A"));
    VKF_TRY(same_dtype(d->residual.tensor, act, fn, "residual", "A"));
    if (d->b_is_k_by_n) VKF_TRY(check_view(cmd, &d->b, d->k, d->n, b0, b1, fn, "B", /*f16=*/true, /*i8=*/true, /*overlap=*/false, &p.b));
    else VKF_TRY(check_view(cmd, &d->b, d->n, d->k, b0, b1, fn, "B", /*f16=*/true, /*i8=*/true, /*overlap=*/false, &p.b));
    VKF_TRY(check_view(cmd, &d->c, d->m, d->n, b0, b1, fn, "C", /*f16=*/true, /*i8=*/false, /*overlap=*/false, &p.c));
    if (d->bias) VKF_TRY(vkf_check_tensor(cmd, d->bias, VKF_DTYPE_F32, d->n, fn, "bias"));
    /* int8 weights: one F32 scale per output channel (column n of C). */
    bool b_i8 = d->b.tensor->dtype == VKF_DTYPE_I8;
    if (b_i8) {
        if (!d->b_scale)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: B is I8 but b_scale is NULL (one F32 scale per output "
                            "channel needed)", fn);
        if (d->b_scale->dtype != VKF_DTYPE_F32)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: b_scale must be F32", fn);
        VKF_TRY(vkf_check_tensor(cmd, d->b_scale, VKF_DTYPE_F32, d->n, fn, "b_scale"));
        if (d->b_scale->elements != d->n)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: b_scale holds %llu values; B's %u output channels need %u",
                            fn, (unsigned long long)d->b_scale->elements, d->n, d->n);
        if (vkf_tensors_overlap(d->c.tensor, d->b_scale))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: C may not alias b_scale", fn);
    } else if (d->b_scale) {
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: b_scale is given but B is not I8", fn);
    }
    if (d->residual.tensor) {
        VKF_TRY(check_view(cmd, &d->residual, d->m, d->n, b0, b1, fn, "residual", /*f16=*/true, /*i8=*/false, /*overlap=*/false, &p.r));
        if (vkf_tensors_overlap(d->residual.tensor, d->c.tensor))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: residual may not alias C", fn);
    }
    if (vkf_tensors_overlap(d->c.tensor, d->a.tensor) || vkf_tensors_overlap(d->c.tensor, d->b.tensor) ||
        vkf_tensors_overlap(d->c.tensor, d->bias))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: C may not alias A, B or the bias", fn);

    p.flags = (d->bias ? VKF_MATMUL_FLAG_BIAS : 0) | (d->residual.tensor ? VKF_MATMUL_FLAG_RESIDUAL : 0) |
              (d->b_is_k_by_n ? VKF_MATMUL_FLAG_B_KN : 0) | ((uint32_t)d->activation << 4);
    /* vec4 loads along K need every row of A and B to start on 4 elements. */
    bool aligned4 = d->k % 4 == 0 && (p.a.offset | p.a.row | p.a.batch0 | p.a.batch1) % 4 == 0 &&
                    (p.b.offset | p.b.row | p.b.batch0 | p.b.batch1) % 4 == 0;
    if (aligned4 && !d->b_is_k_by_n) p.flags |= VKF_MATMUL_FLAG_VEC4;
    /* matmul_coopmat loads 8 consecutive k at once (16 bytes of F16) where an
     * operand's rows start on 8 elements and k is a multiple of 8. */
    if (d->k % 8 == 0 && (p.a.offset | p.a.row | p.a.batch0 | p.a.batch1) % 8 == 0) p.flags |= VKF_MATMUL_FLAG_A_WIDE;
    if (d->k % 8 == 0 && (p.b.offset | p.b.row | p.b.batch0 | p.b.batch1) % 8 == 0 && !d->b_is_k_by_n)
        p.flags |= VKF_MATMUL_FLAG_B_WIDE;

    if (b0 * b1 > UINT32_MAX) return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: batch count passes 2^32", fn);
    const vkf_matmul_tiles *t;
    uint32_t fragment[3];
    /* I8 B counts as no F16 operand: with F32 activations, F32 matmul accuracy. */
    vkf_variant_id family = matmul_choose(ctx, d->m, (double)d->m * d->n * d->k * (double)(b0 * b1),
                                          act == VKF_DTYPE_F16 || d->b.tensor->dtype == VKF_DTYPE_F16,
                                          (p.flags & VKF_MATMUL_FLAG_VEC4) != 0, &t, fragment);
    if (family == VKF_VARIANT_MATMUL_GEMV) return matmul_gemv(cmd, d, &p, t, b_i8, act, b0 * b1);
    /* the CPU kernels run K in one loop of an invocation: k (scalar loads) or k / 4
     * (vec4) iterations; where a loop limiter cuts them short, refuse (65535 in all,
     * 70000 measured wrong with scalar loads on lavapipe 22.3; the loop is alone) */
    bool lanes_k = family == VKF_VARIANT_MATMUL_SUBGROUP || family == VKF_VARIANT_MATMUL_BROADCAST ||
                   family == VKF_VARIANT_MATMUL_DIRECT;
    uint64_t k_steps = lanes_k && (p.flags & VKF_MATMUL_FLAG_VEC4) ? d->k / 4 : d->k;
    if (vkf_loop_limited(ctx) && k_steps > 65000)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: k %u (%s loads) is more than one invocation of \"%s\" runs right "
                        "(Mesa before 26 ends an invocation's loops after 65535 iterations)", fn, d->k,
                        (p.flags & VKF_MATMUL_FLAG_VEC4) ? "vec4" : "scalar", ctx->info.name);
    uint32_t groups[3] = {(uint32_t)vkf_div_up(d->n, t->bn), (uint32_t)vkf_div_up(d->m, t->bm), (uint32_t)(b0 * b1)};
    VKF_TRY(check_grid(ctx, groups, fn));
    /* matmul_coopmat stores whole fragments straight to C (and reads R as
     * fragments) where their rows start on 16 bytes: every offset and stride a
     * multiple of 8 elements. */
    bool c_aligned = (p.c.offset | p.c.row | p.c.batch0 | p.c.batch1) % 8 == 0 &&
                     (!d->residual.tensor || (p.r.offset | p.r.row | p.r.batch0 | p.r.batch1) % 8 == 0);
    if (c_aligned) p.flags |= VKF_MATMUL_FLAG_C_ALIGNED;
    const vkf_pipeline *pipe;
    if (family == VKF_VARIANT_MATMUL_COOPMAT) {
        uint32_t splits = coopmat_splits(ctx, t, d->m, d->n, d->k, b0 * b1, groups);
        if (splits > 1) return matmul_split_k(cmd, d, &p, t, fragment, splits, b0, b1, b_i8, act, groups);
    }
    if (family == VKF_VARIANT_MATMUL_COOPMAT2_WG) {
        /* NV2 at workgroup scope (only when forced: no rule picks it yet). F32 or
         * F16 activations and B; int8 weights would need a decode function. */
        if (b_i8)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: matmul_coopmat2_wg has no int8-weight form (use coopmat2 or "
                            "coopmat for I8 B)", fn);
        static const vkf_variant_id wg_variants[2][2] = {
            {VKF_VARIANT_MATMUL_COOPMAT2_WG, VKF_VARIANT_MATMUL_COOPMAT2_WG_F16B},
            {VKF_VARIANT_MATMUL_COOPMAT2_WG_ACT16, VKF_VARIANT_MATMUL_COOPMAT2_WG_ACT16_F16B},
        };
        /* spec constants: workgroup, BM, BN, BK */
        uint32_t spec[4] = {t->workgroup, t->bm, t->bn, t->bk};
        VKF_TRY(vkf_pipeline_get(ctx, wg_variants[act == VKF_DTYPE_F16][d->b.tensor->dtype == VKF_DTYPE_F16], spec, 4,
                                 &pipe));
    } else if (family == VKF_VARIANT_MATMUL_COOPMAT || family == VKF_VARIANT_MATMUL_COOPMAT2) {
        static const vkf_variant_id coopmat_variants[2][2][2] = {
            {{VKF_VARIANT_MATMUL_COOPMAT, VKF_VARIANT_MATMUL_COOPMAT_F16B},
             {VKF_VARIANT_MATMUL_COOPMAT_ACT16, VKF_VARIANT_MATMUL_COOPMAT_ACT16_F16B}},
            {{VKF_VARIANT_MATMUL_COOPMAT2, VKF_VARIANT_MATMUL_COOPMAT2_F16B},
             {VKF_VARIANT_MATMUL_COOPMAT2_ACT16, VKF_VARIANT_MATMUL_COOPMAT2_ACT16_F16B}},
        };
        /* spec constants: the six tiles, then the fragment FM, FN, FK */
        uint32_t spec[9];
        memcpy(spec, t, sizeof *t);
        memcpy(spec + 6, fragment, sizeof fragment);
        static const vkf_variant_id coopmat_i8_variants[2][2] = {
            {VKF_VARIANT_MATMUL_COOPMAT_I8B, VKF_VARIANT_MATMUL_COOPMAT_ACT16_I8B},
            {VKF_VARIANT_MATMUL_COOPMAT2_I8B, VKF_VARIANT_MATMUL_COOPMAT2_ACT16_I8B},
        };
        vkf_variant_id v = b_i8 ? coopmat_i8_variants[family == VKF_VARIANT_MATMUL_COOPMAT2][act == VKF_DTYPE_F16]
                                : coopmat_variants[family == VKF_VARIANT_MATMUL_COOPMAT2][act == VKF_DTYPE_F16]
                                                  [d->b.tensor->dtype == VKF_DTYPE_F16];
        VKF_TRY(vkf_pipeline_get(ctx, v, spec, 9, &pipe));
    } else {
        /* family x the activations' dtype x B's dtype */
        static const vkf_variant_id variants[4][2][2] = {
            {{VKF_VARIANT_MATMUL_DIRECT, VKF_VARIANT_MATMUL_DIRECT_F16B},
             {VKF_VARIANT_MATMUL_DIRECT_ACT16, VKF_VARIANT_MATMUL_DIRECT_ACT16_F16B}},
            {{VKF_VARIANT_MATMUL_TILED, VKF_VARIANT_MATMUL_TILED_F16B},
             {VKF_VARIANT_MATMUL_TILED_ACT16, VKF_VARIANT_MATMUL_TILED_ACT16_F16B}},
            {{VKF_VARIANT_MATMUL_SUBGROUP, VKF_VARIANT_MATMUL_SUBGROUP_F16B},
             {VKF_VARIANT_MATMUL_SUBGROUP_ACT16, VKF_VARIANT_MATMUL_SUBGROUP_ACT16_F16B}},
            {{VKF_VARIANT_MATMUL_BROADCAST, VKF_VARIANT_MATMUL_BROADCAST_F16B},
             {VKF_VARIANT_MATMUL_BROADCAST_ACT16, VKF_VARIANT_MATMUL_BROADCAST_ACT16_F16B}},
        };
        int f = family == VKF_VARIANT_MATMUL_TILED       ? 1
                : family == VKF_VARIANT_MATMUL_SUBGROUP  ? 2
                : family == VKF_VARIANT_MATMUL_BROADCAST ? 3
                                                         : 0;
        /* family x the activations' dtype, B I8 */
        static const vkf_variant_id i8_variants[4][2] = {
            {VKF_VARIANT_MATMUL_DIRECT_I8B, VKF_VARIANT_MATMUL_DIRECT_ACT16_I8B},
            {VKF_VARIANT_MATMUL_TILED_I8B, VKF_VARIANT_MATMUL_TILED_ACT16_I8B},
            {VKF_VARIANT_MATMUL_SUBGROUP_I8B, VKF_VARIANT_MATMUL_SUBGROUP_ACT16_I8B},
            {VKF_VARIANT_MATMUL_BROADCAST_I8B, VKF_VARIANT_MATMUL_BROADCAST_ACT16_I8B},
        };
        vkf_variant_id variant = b_i8 ? i8_variants[f][act == VKF_DTYPE_F16]
                                      : variants[f][act == VKF_DTYPE_F16][d->b.tensor->dtype == VKF_DTYPE_F16];
        VKF_TRY(vkf_pipeline_get(ctx, variant, (const uint32_t *)t, 6, &pipe));
    }
    /* The I8 variants read the scales at binding 5. */
    vkf_binding b[6] = {
        {d->a.tensor, VKF_READ},
        {d->b.tensor, VKF_READ},
        {d->bias, VKF_READ},
        {d->residual.tensor, VKF_READ},
        {d->c.tensor, VKF_WRITE},
        {d->b_scale, VKF_READ},
    };
    return vkf_cmd_dispatch(cmd, pipe, b, b_i8 ? 6 : 5, &p, sizeof p, groups, "matmul");
}

vkf_status vkf_cmd_softmax(vkf_cmd *cmd, const vkf_softmax_desc *d)
{
    static const char fn[] = "vkf_cmd_softmax";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (d->rows == 0 || d->cols == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive (rows %u, cols %u)", fn, d->rows, d->cols);
    if (!isfinite(d->scale)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: scale is not finite", fn);
    uint64_t n = (uint64_t)d->rows * d->cols;
    if (n > UINT32_MAX) return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: rows x cols passes 2^32 elements", fn);
    VKF_TRY(vkf_check_tensor(cmd, d->x, VKF_DTYPE_F32, n, fn, "x"));
    VKF_TRY(vkf_check_tensor(cmd, d->y, VKF_DTYPE_F32, n, fn, "y"));
    if (d->y != d->x && vkf_tensors_overlap(d->x, d->y))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: y partly overlaps x; use the same tensor or disjoint ones", fn);
    vkf_push_softmax p = {
        .rows = d->rows,
        .cols = d->cols,
        .scale = d->scale,
        .mask_rows = 1,
        .mask_row_div = 1,
        .causal_period = d->causal_period,
        .causal_offset = d->causal_offset,
    };
    if (d->mask) {
        if (d->mask_rows == 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: mask_rows is 0 with a mask", fn);
        VKF_TRY(vkf_check_tensor(cmd, d->mask, VKF_DTYPE_F32, ((uint64_t)d->mask_row0 + d->mask_rows) * d->cols, fn,
                                 "mask"));
        if (vkf_tensors_overlap(d->mask, d->y)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: mask may not alias y", fn);
        p.has_mask = 1;
        p.mask_rows = d->mask_rows;
        p.mask_row_div = d->mask_row_div ? d->mask_row_div : 1;
        p.mask_row0 = d->mask_row0;
    }
    if (d->rel_bias) {
        if (!d->rel_period || !d->rel_heads)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: rel_period and rel_heads must be positive with rel_bias", fn);
        if (d->rel_radius > (1u << 20))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: rel_radius %u passes 2^20", fn, d->rel_radius);
        uint64_t need = ((uint64_t)d->rel_head0 + d->rel_heads) * (2ull * d->rel_radius + 1);
        VKF_TRY(vkf_check_tensor(cmd, d->rel_bias, VKF_DTYPE_F32, need, fn, "rel_bias"));
        if (need > UINT32_MAX) return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: rel_bias passes 2^32 elements", fn);
        if (vkf_tensors_overlap(d->rel_bias, d->y)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: rel_bias may not alias y", fn);
        p.rel_bias = 1, p.rel_radius = d->rel_radius, p.rel_period = d->rel_period;
        p.rel_heads = d->rel_heads, p.rel_head0 = d->rel_head0;
    }
    uint32_t groups[3];
    VKF_TRY(vkf_linear_grid(ctx, d->rows, groups, fn));
    /* softmax.comp, layernorm.comp: three passes over the row, and the reductions
     * (2,000,000 columns measured wrong at 64 invocations on lavapipe 22.3) */
    uint32_t spec[1] = {vkf_loop_row_workgroup(ctx, d->cols, 3, 0, 64)};
    if (!spec[0]) return vkf_loop_row_too_long(ctx, d->cols, fn);
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, VKF_VARIANT_SOFTMAX, spec, 1, &pipe));
    vkf_binding b[4] = {{d->x, VKF_READ}, {d->mask, VKF_READ}, {d->y, VKF_WRITE}, {d->rel_bias, VKF_READ}};
    return vkf_cmd_dispatch(cmd, pipe, b, 4, &p, sizeof p, groups, "softmax");
}

vkf_status vkf_cmd_layernorm(vkf_cmd *cmd, const vkf_layernorm_desc *d)
{
    static const char fn[] = "vkf_cmd_layernorm";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (d->rows == 0 || d->cols == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive (rows %u, cols %u)", fn, d->rows, d->cols);
    if (!(d->eps > 0.0f) || !isfinite(d->eps))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: eps must be positive and finite", fn);
    uint64_t n = (uint64_t)d->rows * d->cols;
    if (n > UINT32_MAX) return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: rows x cols passes 2^32 elements", fn);
    vkf_dtype act;
    VKF_TRY(vkf_activation_dtype(cmd, d->x, fn, "x", &act));
    VKF_TRY(vkf_check_tensor(cmd, d->x, act, n, fn, "x"));
    VKF_TRY(vkf_check_activation(cmd, d->y, act, n, fn, "y", "x"));
    VKF_TRY(vkf_check_tensor(cmd, d->gamma, VKF_DTYPE_F32, d->cols, fn, "gamma"));
    /* RMSNorm (T5) has no bias: beta may be NULL there */
    if (d->beta || !d->rms) VKF_TRY(vkf_check_tensor(cmd, d->beta, VKF_DTYPE_F32, d->cols, fn, "beta"));
    if (d->residual) VKF_TRY(vkf_check_activation(cmd, d->residual, act, n, fn, "residual", "x"));
    if (d->sum) {
        VKF_TRY(vkf_check_activation(cmd, d->sum, act, n, fn, "sum", "x"));
        if (vkf_tensors_overlap(d->sum, d->x) || vkf_tensors_overlap(d->sum, d->residual) ||
            vkf_tensors_overlap(d->sum, d->y))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sum may not alias x, residual or y", fn);
    }
    if ((d->y != d->x && vkf_tensors_overlap(d->y, d->x)) ||
        (d->y != d->residual && vkf_tensors_overlap(d->y, d->residual)) || vkf_tensors_overlap(d->y, d->gamma) ||
        vkf_tensors_overlap(d->y, d->beta))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: y partly overlaps an input", fn);
    vkf_push_layernorm p = {
        .rows = d->rows,
        .cols = d->cols,
        .flags = (d->residual ? 1u : 0u) | (d->sum ? 2u : 0u) | (d->rms ? 4u : 0u) | (d->beta ? 0u : 8u),
        .eps = d->eps,
    };
    uint32_t groups[3];
    VKF_TRY(vkf_linear_grid(ctx, d->rows, groups, fn));
    /* softmax.comp, layernorm.comp: three passes over the row, and the reductions
     * (2,000,000 columns measured wrong at 64 invocations on lavapipe 22.3) */
    uint32_t spec[1] = {vkf_loop_row_workgroup(ctx, d->cols, 3, 0, 64)};
    if (!spec[0]) return vkf_loop_row_too_long(ctx, d->cols, fn);
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, act == VKF_DTYPE_F16 ? VKF_VARIANT_LAYERNORM_ACT16 : VKF_VARIANT_LAYERNORM, spec, 1,
                             &pipe));
    vkf_binding b[6] = {
        {d->x, VKF_READ}, {d->residual, VKF_READ}, {d->gamma, VKF_READ},
        {d->beta, VKF_READ}, {d->y, VKF_WRITE},   {d->sum, VKF_WRITE},
    };
    return vkf_cmd_dispatch(cmd, pipe, b, 6, &p, sizeof p, groups, "layernorm");
}

vkf_status vkf_cmd_embed(vkf_cmd *cmd, const vkf_embed_desc *d)
{
    static const char fn[] = "vkf_cmd_embed";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (d->tokens == 0 || d->d == 0 || d->vocab == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive (tokens %u, d %u, vocab %u)", fn,
                        d->tokens, d->d, d->vocab);
    if (d->vocab > INT32_MAX) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: vocab %u passes the I32 id range", fn, d->vocab);
    if (!isfinite(d->scale)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: scale is not finite", fn);
    uint64_t n = (uint64_t)d->tokens * d->d;
    if (n > UINT32_MAX || (uint64_t)d->vocab * d->d > UINT32_MAX)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: the table or output passes 2^32 elements", fn);
    VKF_TRY(vkf_check_tensor(cmd, d->ids, VKF_DTYPE_I32, d->tokens, fn, "ids"));
    vkf_dtype table_dtype;
    VKF_TRY(float_input_dtype(cmd, d->table, true, fn, "table", &table_dtype));
    bool table_i8 = d->table && d->table->dtype == VKF_DTYPE_I8;
    if (table_i8) table_dtype = VKF_DTYPE_I8;
    if (d->table_row0 >= d->vocab || d->table_rows > d->vocab - d->table_row0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: table rows %u.. (%u of them) pass the vocabulary of %u", fn,
                        d->table_row0, d->table_rows, d->vocab);
    uint32_t table_rows = d->table_rows ? d->table_rows : d->vocab - d->table_row0;
    VKF_TRY(vkf_check_tensor(cmd, d->table, table_dtype, (uint64_t)table_rows * d->d, fn, "table"));
    /* int8 tables: one F32 scale per row of this table (part) */
    if (table_i8) {
        if (!d->table_scale)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: table is I8 but table_scale is NULL (one F32 scale per "
                            "row needed)", fn);
        VKF_TRY(vkf_check_tensor(cmd, d->table_scale, VKF_DTYPE_F32, table_rows, fn, "table_scale"));
        if (d->table_scale->elements != table_rows)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: table_scale holds %llu values; the table's %u rows need %u",
                            fn, (unsigned long long)d->table_scale->elements, table_rows, table_rows);
    } else if (d->table_scale) {
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: table_scale is given but the table is not I8", fn);
    }
    vkf_dtype act;
    VKF_TRY(vkf_activation_dtype(cmd, d->out, fn, "out", &act));
    VKF_TRY(vkf_check_tensor(cmd, d->out, act, n, fn, "out"));
    if (vkf_tensors_overlap(d->out, d->table) || vkf_tensors_overlap(d->out, d->ids) ||
        vkf_tensors_overlap(d->out, d->positions) || vkf_tensors_overlap(d->out, d->table_scale))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out may not alias ids, the table, its scales or positions", fn);
    uint32_t seq_len = d->seq_len ? d->seq_len : d->tokens;
    uint32_t positions = 0;
    if (d->positions) {
        VKF_TRY(vkf_check_tensor(cmd, d->positions, VKF_DTYPE_F32, 1, fn, "positions"));
        if (d->positions->rank != 2 || d->positions->shape[1] != d->d)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: positions must be a (max_positions, %u) table", fn, d->d);
        if (!d->position_ids && (uint64_t)seq_len + d->pos_offset > d->positions->shape[0])
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                            "%s: positions up to %llu requested, the table holds %llu (max_len too small)", fn,
                            (unsigned long long)seq_len + d->pos_offset - 1,
                            (unsigned long long)d->positions->shape[0]);
        positions = (uint32_t)d->positions->shape[0];
    }
    vkf_push_embed p = {
        .tokens = d->tokens,
        .d = d->d,
        .vocab = d->vocab,
        .positions = positions,
        .scale = d->scale,
        .seq_len = seq_len,
        .pos_offset = d->pos_offset,
        .pos_from_state = !d->position_state ? 0u : d->position_state->elements > 1 ? 2u : 1u,
        .row0 = d->table_row0,
        .rows = table_rows,
        .has_position_ids = d->position_ids ? 1u : 0u,
        .pad_position = d->pad_position ? 1u : 0u,
        .pad_id = d->pad_id,
        .pad_row = d->pad_row,
    };
    if (d->position_ids) {
        VKF_TRY(vkf_check_tensor(cmd, d->position_ids, VKF_DTYPE_I32, d->tokens, fn, "position_ids"));
        if (!d->positions)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: position_ids without a positions table", fn);
        if (vkf_tensors_overlap(d->out, d->position_ids))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out may not alias position_ids", fn);
    }
    if (d->pad_position && (!d->positions || d->pad_row >= positions))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: pad_row %u is outside the positions table (%u rows)", fn,
                        d->pad_row, positions);
    if (d->position_state) {
        VKF_TRY(vkf_check_tensor(cmd, d->position_state, VKF_DTYPE_I32, 1, fn, "position_state"));
        /* more than one element: one position per sequence of seq_len tokens */
        uint64_t sequences = vkf_div_up(d->tokens, seq_len);
        if (d->position_state->elements > 1 && d->position_state->elements < sequences)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: position_state holds %llu positions: 1 or one per "
                            "sequence (%llu)", fn, (unsigned long long)d->position_state->elements,
                            (unsigned long long)sequences);
        if (!d->positions)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: position_state without a positions table", fn);
    }
    uint32_t wg = ctx->tuning.elementwise_workgroup;
    uint32_t groups[3];
    VKF_TRY(vkf_linear_grid(ctx, vkf_div_up(n, wg), groups, fn));
    uint32_t spec[1] = {wg};
    const vkf_pipeline *pipe;
    /* the table's dtype (F32, F16, I8) x the activations' */
    static const vkf_variant_id variants[3][2] = {{VKF_VARIANT_EMBED, VKF_VARIANT_EMBED_ACT16},
                                                  {VKF_VARIANT_EMBED_F16, VKF_VARIANT_EMBED_F16_ACT16},
                                                  {VKF_VARIANT_EMBED_I8, VKF_VARIANT_EMBED_I8_ACT16}};
    int tv = table_i8 ? 2 : table_dtype == VKF_DTYPE_F16 ? 1 : 0;
    VKF_TRY(vkf_pipeline_get(ctx, variants[tv][act == VKF_DTYPE_F16], spec, 1, &pipe));
    /* The I8 variants read the row scales at binding 5; every variant the position ids at 6. */
    vkf_binding b[7] = {{d->ids, VKF_READ},  {d->table, VKF_READ},          {d->positions, VKF_READ},
                        {d->out, VKF_WRITE}, {d->position_state, VKF_READ}, {d->table_scale, VKF_READ},
                        {d->position_ids, VKF_READ}};
    return vkf_cmd_dispatch(cmd, pipe, b, 7, &p, sizeof p, groups, "embed");
}

vkf_status vkf_positional_encoding_create(vkf_context *ctx, uint32_t positions, uint32_t d, vkf_tensor **out_tensor)
{
    static const char fn[] = "vkf_positional_encoding_create";
    if (!out_tensor) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out_tensor is NULL", fn);
    *out_tensor = NULL;
    if (!ctx) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: context is NULL", fn);
    if (positions == 0 || d == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive (positions %u, d %u)", fn, positions, d);
    uint64_t shape[2] = {positions, d};
    vkf_tensor *t;
    VKF_TRY(vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, shape, &t));
    float *table = malloc((size_t)positions * d * sizeof *table);
    if (!table) {
        vkf_tensor_destroy(t);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory for %u x %u", fn, positions, d);
    }
    for (uint32_t c = 0; c < d; c++) {
        double freq = exp((double)(c & ~1u) * -log(10000.0) / (double)d);
        for (uint32_t pos = 0; pos < positions; pos++)
            table[(size_t)pos * d + c] = (float)((c & 1) ? cos(pos * freq) : sin(pos * freq));
    }
    vkf_status st = vkf_tensor_upload(t, table, (uint64_t)positions * d * sizeof *table);
    free(table);
    if (st != VKF_OK) {
        vkf_tensor_destroy(t);
        return st;
    }
    *out_tensor = t;
    return VKF_OK;
}

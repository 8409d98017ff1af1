/* The kernels T5-family models add beside the shared ones: the gated FFN's
 * product (glu.comp, T5 v1.1, Flan-T5, mT5) and transient-global attention's
 * block sums (block_sum.comp, LongT5). Their norm (RMSNorm) is layernorm.comp's
 * rms flag, their relative position bias lives in the attention kernels. */
#include "ops/ops.h"
#include "runtime/push.h"

/* The activation dtype of t: F32, or F16 where the device reads 16-bit storage. */
static vkf_status act_dtype(vkf_cmd *cmd, const vkf_tensor *t, const char *fn, const char *name, vkf_dtype *out)
{
    VKF_TRY(vkf_check_tensor(cmd, t, t && t->dtype == VKF_DTYPE_F16 ? VKF_DTYPE_F16 : VKF_DTYPE_F32, 1, fn, name));
    if (t->dtype == VKF_DTYPE_F16 && !vkf_cmd_context(cmd)->storage_16bit)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: %s is F16 but device \"%s\" has no 16-bit storage", fn, name,
                        vkf_cmd_context(cmd)->info.name);
    *out = t->dtype;
    return VKF_OK;
}

/* count invocations of elementwise_workgroup each, laid out in 2-D past the x limit. */
static vkf_status grid(const vkf_context *ctx, uint64_t count, uint32_t groups[3], const char *fn)
{
    uint64_t wgs = vkf_div_up(count, ctx->tuning.elementwise_workgroup), max_x = ctx->info.max_workgroup_count[0];
    uint64_t x = wgs < max_x ? wgs : max_x, y = vkf_div_up(wgs, x ? x : 1);
    if (y > ctx->info.max_workgroup_count[1])
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %llu workgroups exceed the device's grid", fn, (unsigned long long)wgs);
    groups[0] = (uint32_t)(x ? x : 1), groups[1] = (uint32_t)(y ? y : 1), groups[2] = 1;
    return VKF_OK;
}

vkf_status vkf_op_glu(vkf_cmd *cmd, vkf_tensor *h, uint32_t rows, uint32_t n, vkf_activation act)
{
    static const char fn[] = "glu";
    VKF_TRY(vkf_check_cmd(cmd, h, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!rows || !n) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive (rows %u, n %u)", fn, rows, n);
    if ((unsigned)act > VKF_ACTIVATION_GELU_TANH)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: unknown activation %d", fn, (int)act);
    uint64_t elements = (uint64_t)rows * 2 * n;
    if (elements > UINT32_MAX) return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: rows x 2n passes 2^32 elements", fn);
    vkf_dtype dtype = VKF_DTYPE_F32;
    VKF_TRY(act_dtype(cmd, h, fn, "h", &dtype));
    VKF_TRY(vkf_check_tensor(cmd, h, dtype, elements, fn, "h"));
    vkf_push_glu p = {.rows = rows, .n = n, .act = (uint32_t)act};
    uint32_t groups[3];
    VKF_TRY(grid(ctx, (uint64_t)rows * n, groups, fn));
    uint32_t spec[1] = {ctx->tuning.elementwise_workgroup};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, dtype == VKF_DTYPE_F16 ? VKF_VARIANT_GLU_ACT16 : VKF_VARIANT_GLU, spec, 1, &pipe));
    vkf_binding b[1] = {{h, VKF_READ | VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, b, 1, &p, sizeof p, groups, "glu");
}

/* The last element a (count0, count1, cols) view with strides s0, s1 reaches, or
 * UINT64_MAX past 64 bits. */
static uint64_t view_end(uint64_t offset, uint64_t count0, uint64_t s0, uint64_t count1, uint64_t s1, uint64_t cols)
{
    uint64_t last = offset, term;
    if (__builtin_mul_overflow(count0 - 1, s0, &term) || __builtin_add_overflow(last, term, &last) ||
        __builtin_mul_overflow(count1 - 1, s1, &term) || __builtin_add_overflow(last, term, &last) ||
        __builtin_add_overflow(last, cols - 1, &last))
        return UINT64_MAX;
    return last;
}

vkf_status vkf_op_block_sum(vkf_cmd *cmd, const vkf_block_sum_desc *d)
{
    static const char fn[] = "block_sum";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!d->batch || !d->lk || !d->cols || !d->block || !d->gmax)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive (batch %u, lk %u, cols %u, block %u, "
                        "gmax %u)", fn, d->batch, d->lk, d->cols, d->block, d->gmax);
    vkf_dtype dtype = VKF_DTYPE_F32, out_dtype = VKF_DTYPE_F32;
    VKF_TRY(act_dtype(cmd, d->x, fn, "x", &dtype));
    VKF_TRY(act_dtype(cmd, d->out, fn, "out", &out_dtype));
    if (out_dtype != dtype) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out must have x's dtype", fn);
    uint64_t x_row = d->x_row ? d->x_row : d->cols, x_batch = d->x_batch ? d->x_batch : d->lk * x_row;
    uint64_t o_row = d->o_row ? d->o_row : d->cols, o_batch = d->o_batch ? d->o_batch : d->gmax * o_row;
    if (x_row < d->cols || o_row < d->cols)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: row strides must hold the %u columns", fn, d->cols);
    uint64_t x_end = view_end(d->x_offset, d->batch, x_batch, d->lk, x_row, d->cols);
    uint64_t o_end = view_end(d->o_offset, d->batch, o_batch, d->gmax, o_row, d->cols);
    if (x_end >= d->x->elements || o_end >= d->out->elements)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: the %s view reaches past its tensor", fn,
                        x_end >= d->x->elements ? "x" : "out");
    if (x_end > UINT32_MAX || o_end > UINT32_MAX || (uint64_t)d->batch * d->gmax * d->cols > UINT32_MAX)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: indices pass 2^32 elements", fn);
    if (vkf_tensors_overlap(d->out, d->x) || vkf_tensors_overlap(d->out, d->lengths))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out may not alias x or lengths", fn);
    if (d->lengths) VKF_TRY(vkf_check_tensor(cmd, d->lengths, VKF_DTYPE_I32, d->batch, fn, "lengths"));
    vkf_push_block_sum p = {
        .batch = d->batch, .gmax = d->gmax, .cols = d->cols, .block = d->block, .lk = d->lk,
        .has_lengths = d->lengths ? 1u : 0u, .mean = d->mean ? 1u : 0u,
        .x_offset = (uint32_t)d->x_offset, .x_row = (uint32_t)x_row, .x_batch = (uint32_t)x_batch,
        .o_offset = (uint32_t)d->o_offset, .o_row = (uint32_t)o_row, .o_batch = (uint32_t)o_batch,
    };
    uint32_t groups[3];
    VKF_TRY(grid(ctx, (uint64_t)d->batch * d->gmax * d->cols, groups, fn));
    uint32_t spec[1] = {ctx->tuning.elementwise_workgroup};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, dtype == VKF_DTYPE_F16 ? VKF_VARIANT_BLOCK_SUM_ACT16 : VKF_VARIANT_BLOCK_SUM, spec, 1,
                             &pipe));
    vkf_binding b[3] = {{d->x, VKF_READ}, {d->lengths, VKF_READ}, {d->out, VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, b, 3, &p, sizeof p, groups, "block_sum");
}

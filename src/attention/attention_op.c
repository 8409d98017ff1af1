/* vkf_cmd_attention: the public attention call over every variant (vkformer.h).
 * It resolves the variant name, checks the views, makes what the variant needs
 * beyond the caller's tensors (key lengths on the device, bigbird's table, lsh's
 * plan, lowrank's projection and projected rows, dense-naive's scores), hands
 * those to the command list, and records the kernels of attention.c,
 * attention_lsh.c and ops.c. */
#include "attention/attention.h"
#include "attention/attention_lsh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char fn[] = "vkf_cmd_attention";

vkf_status vkf_attention_check(const char *variant, bool cross)
{
    vkf_attention_spec spec;
    return vkf_attention_parse(variant, cross, &spec);
}

void vkf_attention_op_desc_init(vkf_attention_op_desc *desc)
{
    if (desc) memset(desc, 0, sizeof *desc);
}

static void destroy_tensor(void *t) { vkf_tensor_destroy(t); }
static void destroy_lsh(void *p) { vkf_lsh_plan_destroy(p); }

/* A new tensor the list owns. */
static vkf_status owned_tensor(vkf_cmd *cmd, vkf_dtype dtype, uint64_t rows, uint64_t cols, vkf_tensor **out)
{
    uint64_t shape[2] = {rows, cols};
    VKF_TRY(vkf_tensor_create(vkf_cmd_context(cmd), dtype, 2, shape, out));
    return vkf_cmd_own(cmd, *out, destroy_tensor, vkf_tensor_bytes(*out));
}

/* The view as attention.c takes it; batch_stride[1] has no meaning here. */
static vkf_status view_of(const vkf_matrix_view *m, const char *name, vkf_attention_view *out)
{
    if (m->batch_stride[1])
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s.batch_stride[1] must be 0 (one batch dimension)", fn, name);
    *out = (vkf_attention_view){m->tensor, m->offset, m->row_stride, m->batch_stride[0]};
    return VKF_OK;
}

/* Key lengths on the device (I32), or NULL when every sequence has lk keys. */
static vkf_status lengths_tensor(vkf_cmd *cmd, const vkf_attention_op_desc *d, vkf_tensor **out)
{
    *out = NULL;
    if (!d->key_lengths) return VKF_OK;
    int32_t *host = malloc(d->batch * sizeof *host);
    if (!host) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory for key lengths", fn);
    for (uint32_t b = 0; b < d->batch; b++) host[b] = (int32_t)d->key_lengths[b];
    vkf_status st = owned_tensor(cmd, VKF_DTYPE_I32, 1, d->batch, out);
    if (st == VKF_OK) st = vkf_tensor_upload(*out, host, d->batch * sizeof *host);
    free(host);
    return st;
}

vkf_status vkf_cmd_attention(vkf_cmd *cmd, const vkf_attention_op_desc *d, const char **out_kernel)
{
    if (out_kernel) *out_kernel = NULL;
    if (!cmd || !d) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, cmd ? "desc" : "cmd");
    vkf_attention_spec spec;
    VKF_TRY(vkf_attention_parse(d->variant, false, &spec));
    const char *name = d->variant ? d->variant : "dense";
    if (!d->batch || !d->heads || !d->head_dim || !d->lq || !d->lk)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "%s: sizes must be positive (batch %u, heads %u, head_dim %u, lq %u, lk %u)", fn, d->batch,
                        d->heads, d->head_dim, d->lq, d->lk);
    if (d->dtype != VKF_DTYPE_F32 && d->dtype != VKF_DTYPE_F16)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: dtype must be F32 or F16", fn);
    if ((unsigned)d->kernel > VKF_ATTENTION_KERNEL_COOPMAT)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: unknown kernel %d", fn, (int)d->kernel);
    if (d->dtype == VKF_DTYPE_F16 && spec.kind != VKF_ATTN_FUSED)
        return vkf_fail(VKF_ERROR_UNSUPPORTED,
                        "%s: \"%s\" has no F16 form: only the fused kernel (dense, local, strided, bigbird) has one", fn,
                        name);
    for (uint32_t b = 0; d->key_lengths && b < d->batch; b++)
        if (d->key_lengths[b] > d->lk)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: key_lengths[%u] = %u passes lk %u", fn, b,
                            d->key_lengths[b], d->lk);
    if (!isfinite(d->scale))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: scale is not finite", fn);
    float scale = d->scale != 0.0f ? d->scale : 1.0f / sqrtf((float)d->head_dim);
    vkf_attention_view q, k, v;
    VKF_TRY(view_of(&d->q, "q", &q));
    VKF_TRY(view_of(&d->k, "k", &k));
    VKF_TRY(view_of(&d->v, "v", &v));
    if (vkf_tensors_overlap(d->out, q.tensor) || vkf_tensors_overlap(d->out, k.tensor) ||
        vkf_tensors_overlap(d->out, v.tensor))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out may not alias q, k or v", fn);
    if (!vkf_cmd_recording(cmd))
        return vkf_fail(VKF_ERROR_STATE, "%s: the list was submitted; no operation can be appended", fn);

    vkf_attention_call c = {
        .spec = spec, .batch = d->batch, .heads = d->heads, .head_dim = d->head_dim, .lq = d->lq, .lk = d->lk,
        .scale = scale, .q = q, .k = k, .v = v, .out = d->out, .dtype = d->dtype, .kernel = d->kernel,
        .causal = d->causal, .causal_offset = d->causal_offset, .seed = d->seed,
    };
    uint64_t inner = (uint64_t)d->heads * d->head_dim;
    if (spec.kind == VKF_ATTN_NAIVE) {
        /* scores of as many heads at a time as one binding holds; the key mask as
         * one additive row per sequence */
        vkf_context *ctx = vkf_cmd_context(cmd);
        uint64_t per_head = (uint64_t)d->lq * d->lk * sizeof(float);
        uint64_t group = ctx->info.max_storage_buffer_range / per_head;
        if (group == 0)
            return vkf_fail(VKF_ERROR_TOO_LARGE,
                            "%s: dense-naive: one head's %ux%u scores (%.0f MiB) pass the device's %.0f MiB binding "
                            "limit", fn, d->lq, d->lk, per_head / 1048576.0, ctx->info.max_storage_buffer_range / 1048576.0);
        if (d->dtype != VKF_DTYPE_F32) return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: dense-naive takes F32 only", fn);
        uint64_t all = (uint64_t)d->batch * d->heads;
        if (group > all) group = all;
        else if (group > d->heads) group = d->heads;
        VKF_TRY(owned_tensor(cmd, VKF_DTYPE_F32, group * d->lq, d->lk, &c.scores));
        bool short_key = false;
        for (uint32_t b = 0; d->key_lengths && b < d->batch; b++) short_key |= d->key_lengths[b] < d->lk;
        if (short_key) {
            float *rows = malloc((size_t)d->batch * d->lk * sizeof *rows);
            if (!rows) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory for a mask", fn);
            for (uint32_t b = 0; b < d->batch; b++)
                for (uint32_t j = 0; j < d->lk; j++) rows[(size_t)b * d->lk + j] = j < d->key_lengths[b] ? 0.0f : -INFINITY;
            vkf_tensor *mask;
            vkf_status st = owned_tensor(cmd, VKF_DTYPE_F32, d->batch, d->lk, &mask);
            if (st == VKF_OK) st = vkf_tensor_upload(mask, rows, (uint64_t)d->batch * d->lk * sizeof *rows);
            free(rows);
            VKF_TRY(st);
            c.key_mask = mask;
        }
        VKF_TRY(vkf_attention_record(cmd, &c));
        if (out_kernel) *out_kernel = "naive";
        return VKF_OK;
    }
    if (d->head_dim > VKF_ATTENTION_MAX_HEAD_DIM)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: \"%s\" takes head_dim up to %u, not %u (dense-naive takes any)", fn,
                        name, VKF_ATTENTION_MAX_HEAD_DIM, d->head_dim);
    vkf_tensor *lengths;
    VKF_TRY(lengths_tensor(cmd, d, &lengths));
    c.key_lengths = lengths;
    if (spec.kind == VKF_ATTN_LSH) {
        if (d->lq != d->lk)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: \"%s\" is self-attention: lq %u must equal lk %u", fn, name,
                            d->lq, d->lk);
        if (d->causal && d->causal_offset)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: \"%s\" takes causal_offset 0 only", fn, name);
        vkf_lsh_desc l = {.batch = d->batch, .heads = d->heads, .head_dim = d->head_dim, .n = d->lq,
                          .rounds = spec.rounds, .chunk = spec.chunk};
        vkf_lsh_plan *plan;
        VKF_TRY(vkf_lsh_plan_create(vkf_cmd_context(cmd), &l, d->lq, d->seed, &plan));
        VKF_TRY(vkf_cmd_own(cmd, plan, destroy_lsh, vkf_lsh_plan_bytes(plan)));
        c.lsh = plan;
        VKF_TRY(vkf_attention_record(cmd, &c));
        if (out_kernel) *out_kernel = "lsh";
        return VKF_OK;
    }
    if (spec.kind == VKF_ATTN_LOWRANK && d->causal)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "%s: \"%s\" is not causal (a projection along the sequence mixes later keys in)", fn, name);
    vkf_attention_desc a;
    vkf_attention_desc_init(&a);
    a.batch = d->batch, a.heads = d->heads, a.head_dim = d->head_dim, a.lq = d->lq, a.lk = d->lk, a.scale = scale;
    a.q = q, a.k = k, a.v = v, a.out = d->out, a.dtype = d->dtype, a.kernel = d->kernel;
    a.causal = d->causal, a.causal_offset = d->causal_offset;
    const char *kernel = vkf_attention_kernel_name(vkf_cmd_context(cmd), &a);
    if (spec.kind == VKF_ATTN_LOWRANK) {
        /* the fixed seeded projection E of each sequence's keys */
        uint32_t K = spec.rank, S = d->lk;
        VKF_TRY(owned_tensor(cmd, d->dtype, (uint64_t)d->batch * K, S, &c.lowrank_proj));
        VKF_TRY(owned_tensor(cmd, VKF_DTYPE_I32, 1, d->batch, &c.lowrank_rows));
        VKF_TRY(owned_tensor(cmd, d->dtype, (uint64_t)d->batch * K, 2 * inner, &c.lowrank_kv));
        float *Eh = malloc((size_t)d->batch * K * S * sizeof *Eh);
        uint32_t *lens = malloc(d->batch * sizeof *lens);
        int32_t *rh = malloc(d->batch * sizeof *rh);
        vkf_status st = Eh && lens && rh ? VKF_OK
                                         : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory for lowrank", fn);
        for (uint32_t b = 0; st == VKF_OK && b < d->batch; b++) lens[b] = d->key_lengths ? d->key_lengths[b] : S;
        if (st == VKF_OK) st = vkf_lowrank_projection(d->seed, K, S, lens, d->batch, Eh, rh);
        if (st == VKF_OK) st = vkf_upload_floats(c.lowrank_proj, Eh, (uint64_t)d->batch * K * S);
        if (st == VKF_OK) st = vkf_tensor_upload(c.lowrank_rows, rh, d->batch * sizeof *rh);
        free(Eh), free(lens), free(rh);
        VKF_TRY(st);
    } else if (spec.kind == VKF_ATTN_FUSED && spec.pattern == VKF_ATTENTION_TGLOBAL) {
        if (d->causal)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: \"%s\" is not causal (its global keys summarise later "
                            "tokens)", fn, name);
        /* the global keys: the block means of each sequence's keys and values */
        c.global_max = vkf_tglobal_rows(d->lk, spec.block);
        if (c.global_max)
            VKF_TRY(owned_tensor(cmd, d->dtype, (uint64_t)d->batch * c.global_max, 2 * inner, &c.global_scratch));
    } else if (spec.pattern == VKF_ATTENTION_BIGBIRD) {
        vkf_tensor *table;
        VKF_TRY(vkf_attention_call_table(vkf_cmd_context(cmd), &c, &table));
        VKF_TRY(vkf_cmd_own(cmd, table, destroy_tensor, vkf_tensor_bytes(table)));
        c.bigbird_table = table;
    }
    VKF_TRY(vkf_attention_record(cmd, &c));
    if (out_kernel) *out_kernel = kernel;
    return VKF_OK;
}

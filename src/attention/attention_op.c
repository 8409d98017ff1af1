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

/* dense-naive: per sequence, S = scale Q Kᵀ for as many heads at a time as one
 * binding holds, softmax (causal and key-length masks), O = P V. */
static vkf_status record_naive(vkf_cmd *cmd, const vkf_attention_op_desc *d, const vkf_attention_view *q,
                               const vkf_attention_view *k, const vkf_attention_view *v, float scale)
{
    vkf_context *ctx = vkf_cmd_context(cmd);
    uint64_t d_model = (uint64_t)d->heads * d->head_dim, per_head = (uint64_t)d->lq * d->lk * sizeof(float);
    uint64_t group = ctx->info.max_storage_buffer_range / per_head;
    if (group == 0)
        return vkf_fail(VKF_ERROR_TOO_LARGE,
                        "%s: dense-naive: one head's %ux%u scores (%.0f MiB) pass the device's %.0f MiB binding limit",
                        fn, d->lq, d->lk, per_head / 1048576.0, ctx->info.max_storage_buffer_range / 1048576.0);
    uint32_t qs[3], ks[3], vs[3];
    VKF_TRY(vkf_check_attention_view(cmd, q, VKF_DTYPE_F32, d->batch, d->lq, d_model, fn, "q", qs));
    VKF_TRY(vkf_check_attention_view(cmd, k, VKF_DTYPE_F32, d->batch, d->lk, d_model, fn, "k", ks));
    VKF_TRY(vkf_check_attention_view(cmd, v, VKF_DTYPE_F32, d->batch, d->lk, d_model, fn, "v", vs));
    VKF_TRY(vkf_check_tensor(cmd, d->out, VKF_DTYPE_F32, d->batch * d->lq * d_model, fn, "out"));
    if (group > d->heads) group = d->heads;
    vkf_tensor *scores;
    VKF_TRY(owned_tensor(cmd, VKF_DTYPE_F32, group * d->lq, d->lk, &scores));
    uint64_t nn = (uint64_t)d->lq * d->lk;
    for (uint32_t b = 0; b < d->batch; b++) {
        vkf_tensor *mask = NULL;
        if (d->key_lengths && d->key_lengths[b] < d->lk) {
            /* one additive row: 0 for the sequence's keys, -inf past them */
            float *row = malloc(d->lk * sizeof *row);
            if (!row) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory for a mask", fn);
            for (uint32_t j = 0; j < d->lk; j++) row[j] = j < d->key_lengths[b] ? 0.0f : -INFINITY;
            vkf_status st = owned_tensor(cmd, VKF_DTYPE_F32, 1, d->lk, &mask);
            if (st == VKF_OK) st = vkf_tensor_upload(mask, row, d->lk * sizeof *row);
            free(row);
            VKF_TRY(st);
        }
        for (uint32_t h0 = 0; h0 < d->heads; h0 += (uint32_t)group) {
            uint32_t g = d->heads - h0 < group ? d->heads - h0 : (uint32_t)group;
            uint64_t head = (uint64_t)h0 * d->head_dim;
            vkf_matmul_desc m;
            vkf_matmul_desc_init(&m);
            m.m = d->lq, m.n = d->lk, m.k = d->head_dim, m.batch[0] = g;
            m.a = (vkf_matrix_view){(vkf_tensor *)q->tensor, qs[0] + (uint64_t)b * qs[2] + head, qs[1],
                                    {d->head_dim, 0}};
            m.b = (vkf_matrix_view){(vkf_tensor *)k->tensor, ks[0] + (uint64_t)b * ks[2] + head, ks[1], {d->head_dim, 0}};
            m.c = (vkf_matrix_view){scores, 0, 0, {nn, 0}};
            m.alpha = scale;
            VKF_TRY(vkf_cmd_matmul(cmd, &m));
            vkf_softmax_desc p;
            vkf_softmax_desc_init(&p);
            p.rows = g * d->lq, p.cols = d->lk, p.x = scores, p.y = scores;
            p.mask = mask, p.mask_rows = mask ? 1 : 0;
            if (d->causal) p.causal_period = d->lq, p.causal_offset = d->causal_offset;
            VKF_TRY(vkf_cmd_softmax(cmd, &p));
            vkf_matmul_desc o;
            vkf_matmul_desc_init(&o);
            o.m = d->lq, o.n = d->head_dim, o.k = d->lk, o.batch[0] = g;
            o.a = (vkf_matrix_view){scores, 0, 0, {nn, 0}};
            o.b = (vkf_matrix_view){(vkf_tensor *)v->tensor, vs[0] + (uint64_t)b * vs[2] + head, vs[1], {d->head_dim, 0}};
            o.b_is_k_by_n = true;
            o.c = (vkf_matrix_view){d->out, (uint64_t)b * d->lq * d_model + head, d_model, {d->head_dim, 0}};
            VKF_TRY(vkf_cmd_matmul(cmd, &o));
        }
    }
    return VKF_OK;
}

/* lowrank:K: keys and values projected along the sequence to K rows by the fixed
 * seeded projection E (vkf_lowrank_projection), then fused attention over them. */
static vkf_status record_lowrank(vkf_cmd *cmd, const vkf_attention_op_desc *d, uint32_t rank, vkf_attention_desc *a)
{
    uint64_t d_model = (uint64_t)d->heads * d->head_dim;
    uint32_t ks[3], vs[3];
    VKF_TRY(vkf_check_attention_view(cmd, &a->k, VKF_DTYPE_F32, d->batch, d->lk, d_model, fn, "k", ks));
    VKF_TRY(vkf_check_attention_view(cmd, &a->v, VKF_DTYPE_F32, d->batch, d->lk, d_model, fn, "v", vs));
    uint32_t K = rank, S = d->lk;
    vkf_tensor *E, *rows, *kv;
    VKF_TRY(owned_tensor(cmd, VKF_DTYPE_F32, (uint64_t)d->batch * K, S, &E));
    VKF_TRY(owned_tensor(cmd, VKF_DTYPE_I32, 1, d->batch, &rows));
    VKF_TRY(owned_tensor(cmd, VKF_DTYPE_F32, (uint64_t)d->batch * K, 2 * d_model, &kv));
    float *Eh = malloc((size_t)d->batch * K * S * sizeof *Eh);
    uint32_t *lens = malloc(d->batch * sizeof *lens);
    int32_t *rh = malloc(d->batch * sizeof *rh);
    vkf_status st = Eh && lens && rh ? VKF_OK
                                     : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory for lowrank", fn);
    for (uint32_t b = 0; st == VKF_OK && b < d->batch; b++) lens[b] = d->key_lengths ? d->key_lengths[b] : S;
    if (st == VKF_OK) st = vkf_lowrank_projection(d->seed, K, S, lens, d->batch, Eh, rh);
    if (st == VKF_OK) st = vkf_tensor_upload(E, Eh, (uint64_t)d->batch * K * S * sizeof *Eh);
    if (st == VKF_OK) st = vkf_tensor_upload(rows, rh, d->batch * sizeof *rh);
    free(Eh), free(lens), free(rh);
    VKF_TRY(st);
    /* kv[b] = E[b] · K[b] in columns 0..d-1, E[b] · V[b] in d..2d-1 */
    for (int part = 0; part < 2; part++) {
        const uint32_t *s = part ? vs : ks;
        vkf_matmul_desc pr;
        vkf_matmul_desc_init(&pr);
        pr.m = K, pr.n = (uint32_t)d_model, pr.k = S, pr.batch[0] = d->batch;
        pr.a = (vkf_matrix_view){E, 0, S, {(uint64_t)K * S, 0}};
        pr.b = (vkf_matrix_view){(vkf_tensor *)(part ? a->v : a->k).tensor, s[0], s[1], {s[2], 0}};
        pr.b_is_k_by_n = true;
        pr.c = (vkf_matrix_view){kv, part ? d_model : 0, 2 * d_model, {(uint64_t)K * 2 * d_model, 0}};
        VKF_TRY(vkf_cmd_matmul(cmd, &pr));
    }
    a->lk = K, a->key_lengths = rows;
    a->k = (vkf_attention_view){kv, 0, 2 * d_model, (uint64_t)K * 2 * d_model};
    a->v = (vkf_attention_view){kv, d_model, 2 * d_model, (uint64_t)K * 2 * d_model};
    return vkf_op_attention_fused(cmd, a);
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

    if (spec.kind == VKF_ATTN_NAIVE) {
        VKF_TRY(record_naive(cmd, d, &q, &k, &v, scale));
        if (out_kernel) *out_kernel = "naive";
        return VKF_OK;
    }
    if (d->head_dim > VKF_ATTENTION_MAX_HEAD_DIM)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: \"%s\" takes head_dim up to %u, not %u (dense-naive takes any)", fn,
                        name, VKF_ATTENTION_MAX_HEAD_DIM, d->head_dim);
    vkf_tensor *lengths;
    if (spec.kind == VKF_ATTN_LSH) {
        if (d->lq != d->lk)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: \"%s\" is self-attention: lq %u must equal lk %u", fn, name,
                            d->lq, d->lk);
        if (d->causal && d->causal_offset)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: \"%s\" takes causal_offset 0 only", fn, name);
        VKF_TRY(lengths_tensor(cmd, d, &lengths));
        vkf_lsh_desc l = {
            .batch = d->batch, .heads = d->heads, .head_dim = d->head_dim, .n = d->lq, .rounds = spec.rounds,
            .chunk = spec.chunk, .scale = scale, .q = q, .v = v, .key_lengths = lengths, .causal = d->causal,
            .out = d->out,
        };
        vkf_lsh_plan *plan;
        VKF_TRY(vkf_lsh_plan_create(vkf_cmd_context(cmd), &l, d->lq, d->seed, &plan));
        VKF_TRY(vkf_cmd_own(cmd, plan, destroy_lsh, vkf_lsh_plan_bytes(plan)));
        VKF_TRY(vkf_op_attention_lsh(cmd, plan, &l));
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
        VKF_TRY(record_lowrank(cmd, d, spec.rank, &a));
    } else {
        VKF_TRY(lengths_tensor(cmd, d, &lengths));
        a.key_lengths = lengths;
        a.pattern = spec.pattern, a.window = spec.window, a.stride = spec.stride;
        if (spec.pattern == VKF_ATTENTION_BIGBIRD) {
            a.bigbird = (vkf_bigbird){spec.block, spec.globals, spec.random, d->causal, d->seed};
            vkf_tensor *table;
            VKF_TRY(vkf_attention_table_create(vkf_cmd_context(cmd), &a, &table));
            VKF_TRY(vkf_cmd_own(cmd, table, destroy_tensor, vkf_tensor_bytes(table)));
            a.table = table;
        }
        VKF_TRY(vkf_op_attention_fused(cmd, &a));
    }
    if (out_kernel) *out_kernel = kernel;
    return VKF_OK;
}

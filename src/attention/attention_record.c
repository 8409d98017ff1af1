/* The one switch from an attention variant to its kernels (vkf_attention_record):
 * the fused kernel and its patterns (attention.c), materialised scores for
 * dense-naive (matmul, softmax, matmul), LSH (attention_lsh.c), and low-rank
 * projections followed by the fused kernel. T5's relative position bias goes
 * into the fused kernels and dense-naive's softmax; lsh and lowrank refuse it.
 * Transient-global's global keys are the caller's (LongT5) or the block means of
 * the keys and values, recorded here. Both callers go through it: the
 * public vkf_cmd_attention (attention_op.c), which makes each variant's
 * resources for its command list, and the model's graph (src/arch), whose plans
 * own theirs and reuse them on every submit. */
#include "attention/attention.h"
#include "attention/attention_lsh.h"

#include <math.h>
#include <stdio.h>

vkf_status vkf_attention_lowrank_kv(vkf_cmd *cmd, vkf_tensor *E, uint32_t batch, uint32_t K, uint32_t S,
                                    const vkf_attention_view *k, const vkf_attention_view *v, vkf_dtype dtype,
                                    uint64_t inner, vkf_tensor *out)
{
    static const char fn[] = "lowrank";
    /* out[b] = E[b] · K[b] in columns 0..inner-1, E[b] · V[b] in inner..2 inner-1 */
    for (int part = 0; part < 2; part++) {
        uint32_t s[3];
        VKF_TRY(vkf_check_attention_view(cmd, part ? v : k, dtype, batch, S, inner, fn, part ? "v" : "k", s));
        vkf_matmul_desc pr;
        vkf_matmul_desc_init(&pr);
        pr.m = K, pr.n = (uint32_t)inner, pr.k = S, pr.batch[0] = batch;
        pr.a = (vkf_matrix_view){E, 0, S, {(uint64_t)K * S, 0}};
        pr.b = (vkf_matrix_view){(vkf_tensor *)(part ? v : k)->tensor, s[0], s[1], {s[2], 0}};
        pr.b_is_k_by_n = true;
        pr.c = (vkf_matrix_view){out, part ? inner : 0, 2 * inner, {(uint64_t)K * 2 * inner, 0}};
        VKF_TRY(vkf_cmd_matmul(cmd, &pr));
    }
    return VKF_OK;
}

bool vkf_attention_materialises(const vkf_attention_spec *spec, uint32_t head_dim)
{
    return spec->kind == VKF_ATTN_NAIVE ||
           (spec->kind == VKF_ATTN_FUSED && spec->pattern == VKF_ATTENTION_DENSE && head_dim > VKF_ATTENTION_MAX_HEAD_DIM);
}

/* Scores materialised: S = scale Q Kᵀ, softmax with the causal and key masks,
 * O = P V. All batch x heads at once when c->scores holds them, else per
 * sequence in groups of as many heads as it holds. */
static vkf_status record_naive(vkf_cmd *cmd, const vkf_attention_call *c)
{
    static const char fn[] = "dense-naive";
    uint64_t inner = (uint64_t)c->heads * c->head_dim, nn = (uint64_t)c->lq * c->lk;
    uint32_t qs[3], ks[3], vs[3];
    VKF_TRY(vkf_check_attention_view(cmd, &c->q, VKF_DTYPE_F32, c->batch, c->lq, inner, fn, "q", qs));
    VKF_TRY(vkf_check_attention_view(cmd, &c->k, VKF_DTYPE_F32, c->batch, c->lk, inner, fn, "k", ks));
    VKF_TRY(vkf_check_attention_view(cmd, &c->v, VKF_DTYPE_F32, c->batch, c->lk, inner, fn, "v", vs));
    VKF_TRY(vkf_check_tensor(cmd, c->out, VKF_DTYPE_F32, c->batch * c->lq * inner, fn, "out"));
    if (!c->scores || c->scores->elements < nn)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: the scores tensor holds less than one head's %u x %u", fn,
                        c->lq, c->lk);
    uint64_t group = c->scores->elements / nn;
    bool all = group >= (uint64_t)c->batch * c->heads;
    uint32_t per_call = all ? c->heads : (uint32_t)(group < c->heads ? group : c->heads);
    uint32_t batches = all ? 1 : c->batch;
    for (uint32_t b = 0; b < batches; b++) {
        for (uint32_t h0 = 0; h0 < c->heads; h0 += per_call) {
            uint32_t g = c->heads - h0 < per_call ? c->heads - h0 : per_call;
            uint64_t head = (uint64_t)h0 * c->head_dim;
            vkf_matmul_desc s;
            vkf_matmul_desc_init(&s);
            s.m = c->lq, s.n = c->lk, s.k = c->head_dim;
            s.batch[0] = all ? c->batch : g, s.batch[1] = all ? c->heads : 1;
            s.a = (vkf_matrix_view){(vkf_tensor *)c->q.tensor, qs[0] + (uint64_t)b * qs[2] + head, qs[1],
                                    {all ? qs[2] : c->head_dim, all ? c->head_dim : 0}};
            s.b = (vkf_matrix_view){(vkf_tensor *)c->k.tensor, ks[0] + (uint64_t)b * ks[2] + head, ks[1],
                                    {all ? ks[2] : c->head_dim, all ? c->head_dim : 0}};
            s.c = (vkf_matrix_view){c->scores, 0, 0, {all ? (uint64_t)c->heads * nn : nn, all ? nn : 0}};
            s.alpha = c->scale;
            VKF_TRY(vkf_cmd_matmul(cmd, &s));
            vkf_softmax_desc p;
            vkf_softmax_desc_init(&p);
            p.rows = (all ? c->batch * c->heads : g) * c->lq, p.cols = c->lk, p.x = c->scores, p.y = c->scores;
            if (c->key_mask) {
                /* row r of the scores belongs to sequence r / (heads lq), or to b */
                p.mask = (vkf_tensor *)c->key_mask, p.mask_rows = all ? c->batch : 1;
                p.mask_row_div = all ? c->heads * c->lq : 1, p.mask_row0 = all ? 0 : b;
            }
            if (c->causal) p.causal_period = c->lq, p.causal_offset = c->causal_offset;
            if (c->rel_bias) {
                /* row r: query r % lq of head h0 + (r / lq) % heads (grouped: of g heads from h0) */
                p.rel_bias = (vkf_tensor *)c->bias_table, p.rel_radius = c->rel_radius, p.rel_period = c->lq;
                p.rel_heads = all ? c->heads : g, p.rel_head0 = all ? 0 : h0;
            }
            VKF_TRY(vkf_cmd_softmax(cmd, &p));
            vkf_matmul_desc o;
            vkf_matmul_desc_init(&o);
            o.m = c->lq, o.n = c->head_dim, o.k = c->lk;
            o.batch[0] = s.batch[0], o.batch[1] = s.batch[1];
            o.a = s.c;
            o.b = (vkf_matrix_view){(vkf_tensor *)c->v.tensor, vs[0] + (uint64_t)b * vs[2] + head, vs[1],
                                    {all ? vs[2] : c->head_dim, all ? c->head_dim : 0}};
            o.b_is_k_by_n = true;
            o.c = (vkf_matrix_view){c->out, (uint64_t)b * c->lq * inner + head, inner,
                                    {all ? (uint64_t)c->lq * inner : c->head_dim, all ? c->head_dim : 0}};
            VKF_TRY(vkf_cmd_matmul(cmd, &o));
        }
    }
    return VKF_OK;
}

/* The fused kernel's desc of a call (before lowrank's projection). */
static void call_desc(const vkf_attention_call *c, vkf_attention_desc *a)
{
    const vkf_attention_spec *sp = &c->spec;
    vkf_attention_desc_init(a);
    a->batch = c->batch, a->heads = c->heads, a->head_dim = c->head_dim, a->lq = c->lq, a->lk = c->lk;
    a->scale = c->scale;
    a->q = c->q, a->k = c->k, a->v = c->v;
    a->key_lengths = c->key_lengths;
    a->causal = c->causal, a->causal_offset = c->causal_offset;
    a->dtype = c->dtype, a->kernel = c->kernel;
    a->out = c->out;
    if (sp->kind == VKF_ATTN_FUSED) {
        a->pattern = sp->pattern, a->window = sp->window, a->stride = sp->stride;
        if (sp->pattern == VKF_ATTENTION_BIGBIRD)
            a->bigbird = (vkf_bigbird){sp->block, sp->globals, sp->random, c->causal, c->seed};
        if (sp->pattern == VKF_ATTENTION_TGLOBAL) {
            a->global_block = sp->block, a->global_max = c->global_max;
            a->global_kv = c->global_kv ? c->global_kv : c->global_scratch;
        }
    }
    a->bias_table = c->bias_table;
    a->rel_bias = c->rel_bias, a->rel_radius = c->rel_radius;
    a->global_bias = c->global_bias && a->pattern == VKF_ATTENTION_TGLOBAL, a->global_radius = c->global_radius;
}

uint32_t vkf_tglobal_rows(uint32_t lk, uint32_t block)
{
    return block ? lk / block : 0;
}

/* tglobal without the caller's global keys: the block means of k and v into
 * c->global_scratch, (batch, global_max, [keys values]). */
static vkf_status record_global_means(vkf_cmd *cmd, const vkf_attention_call *c)
{
    static const char fn[] = "tglobal";
    uint64_t inner = (uint64_t)c->heads * c->head_dim;
    if (!c->global_scratch)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: the global keys need a scratch tensor", fn);
    for (int part = 0; part < 2; part++) {
        const vkf_attention_view *src = part ? &c->v : &c->k;
        uint32_t s[3];
        VKF_TRY(vkf_check_attention_view(cmd, src, c->dtype, c->batch, c->lk, inner, fn, part ? "v" : "k", s));
        vkf_block_sum_desc m = {
            .batch = c->batch, .lk = c->lk, .cols = (uint32_t)inner, .block = c->spec.block, .gmax = c->global_max,
            .mean = true, .x = src->tensor, .x_offset = s[0], .x_row = s[1], .x_batch = s[2],
            .lengths = c->key_lengths, .out = c->global_scratch, .o_offset = part ? inner : 0, .o_row = 2 * inner,
            .o_batch = (uint64_t)c->global_max * 2 * inner,
        };
        VKF_TRY(vkf_op_block_sum(cmd, &m));
    }
    return VKF_OK;
}

vkf_status vkf_attention_call_table(vkf_context *ctx, const vkf_attention_call *c, vkf_tensor **out_table)
{
    vkf_attention_desc a;
    call_desc(c, &a);
    return vkf_attention_table_create(ctx, &a, out_table);
}

vkf_status vkf_attention_record(vkf_cmd *cmd, const vkf_attention_call *c)
{
    const vkf_attention_spec *sp = &c->spec;
    if ((c->rel_bias || c->global_bias) && (sp->kind == VKF_ATTN_LSH || sp->kind == VKF_ATTN_LOWRANK))
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s attention cannot add a relative position bias (T5's): %s",
                        sp->kind == VKF_ATTN_LSH ? "lsh" : "lowrank",
                        sp->kind == VKF_ATTN_LSH ? "its chunks of hash-sorted tokens have no fixed distances"
                                                 : "its projected keys mix many positions");
    if (vkf_attention_materialises(sp, c->head_dim)) return record_naive(cmd, c);
    if (sp->kind == VKF_ATTN_LSH) {
        /* keys are the normalised queries: k is not read */
        vkf_lsh_desc l = {
            .batch = c->batch, .heads = c->heads, .head_dim = c->head_dim, .n = c->lq, .rounds = sp->rounds,
            .chunk = sp->chunk, .scale = c->scale, .q = c->q, .v = c->v, .key_lengths = c->key_lengths,
            .causal = c->causal, .out = c->out,
        };
        return vkf_op_attention_lsh(cmd, c->lsh, &l);
    }
    vkf_attention_desc a;
    call_desc(c, &a);
    if (sp->kind == VKF_ATTN_LOWRANK) {
        /* keys and values projected to K rows along the sequence, then dense attention over them */
        uint64_t inner = (uint64_t)c->heads * c->head_dim;
        uint32_t K = sp->rank;
        VKF_TRY(vkf_attention_lowrank_kv(cmd, c->lowrank_proj, c->batch, K, c->lk, &c->k, &c->v, c->dtype, inner,
                                         c->lowrank_kv));
        a.lk = K, a.key_lengths = c->lowrank_rows, a.causal = false;
        a.k = (vkf_attention_view){c->lowrank_kv, 0, 2 * inner, (uint64_t)K * 2 * inner};
        a.v = (vkf_attention_view){c->lowrank_kv, inner, 2 * inner, (uint64_t)K * 2 * inner};
        return vkf_op_attention_fused(cmd, &a);
    }
    a.table = c->bigbird_table;
    if (sp->kind == VKF_ATTN_FUSED && sp->pattern == VKF_ATTENTION_TGLOBAL && c->global_max && !c->global_kv)
        VKF_TRY(record_global_means(cmd, c));
    return vkf_op_attention_fused(cmd, &a);
}

vkf_attention_spec vkf_attention_for_site(const vkf_attention_spec *self, const vkf_attention_spec *cross,
                                          vkf_attention_site site)
{
    vkf_attention_spec dense = {.kind = VKF_ATTN_FUSED};
    /* transient-global's global keys summarise later tokens: causal sites keep its window */
    vkf_attention_spec window = {.kind = VKF_ATTN_FUSED, .pattern = VKF_ATTENTION_LOCAL, .window = self->window};
    bool tglobal = self->kind == VKF_ATTN_FUSED && self->pattern == VKF_ATTENTION_TGLOBAL;
    switch (site) {
    case VKF_SITE_ENCODER: return *self;
    case VKF_SITE_DECODER:
        /* causal: a projection along the sequence would mix later tokens in */
        return self->kind == VKF_ATTN_LOWRANK ? dense : tglobal ? window : *self;
    case VKF_SITE_CROSS: return *cross;
    case VKF_SITE_STEP_SELF:
        /* one new query: lsh cannot hash and sort it against the cache, lowrank
         * does not apply to causal attention; the fused patterns are kept */
        return tglobal ? window : self->kind == VKF_ATTN_FUSED ? *self : dense;
    case VKF_SITE_STEP_CROSS:
        /* lowrank keeps its projected keys; dense-naive's step is the decode kernel */
        return cross->kind == VKF_ATTN_LOWRANK ? *cross : dense;
    }
    return dense;
}

void vkf_attention_spec_name(const vkf_attention_spec *c, uint32_t head_dim, char *out, size_t size)
{
    if (vkf_attention_materialises(c, head_dim)) snprintf(out, size, "dense-naive");
    else if (c->kind == VKF_ATTN_LSH) snprintf(out, size, "lsh:%u:%u", c->rounds, c->chunk);
    else if (c->kind == VKF_ATTN_LOWRANK) snprintf(out, size, "lowrank:%u", c->rank);
    else if (c->pattern == VKF_ATTENTION_LOCAL) snprintf(out, size, "local:%u", c->window);
    else if (c->pattern == VKF_ATTENTION_STRIDED) snprintf(out, size, "strided:%u:%u", c->window, c->stride);
    else if (c->pattern == VKF_ATTENTION_BIGBIRD) snprintf(out, size, "bigbird:%u:%u:%u", c->block, c->globals, c->random);
    else if (c->pattern == VKF_ATTENTION_TGLOBAL) snprintf(out, size, "tglobal:%u:%u", c->window, c->block);
    else snprintf(out, size, "dense");
}

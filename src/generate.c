/* Generation: the encoder run once per batch, then a decode step recorded once
 * and re-submitted per token, with a KV cache per decoder layer. Greedy decoding
 * picks each next token by argmax on the GPU. Beam search runs sources x beams
 * rows as one batch: the GPU scores every (beam, token) pair and keeps each
 * source's best 2K (beam_topk.comp), the host does Hugging Face's bookkeeping on
 * those 2K pairs (which beams go on, which hypotheses finish), and the next step
 * gathers each row's table of cache rows from its parent row on the GPU
 * (kv_gather.comp), which the decode attention reads through. */
#include "internal.h"
#include "model.h"
#include "runtime/push.h"

#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

void vkf_gen_plan_free(gen_plan *p)
{
    if (!p) return;
    vkf_cmd_destroy(p->step);
    vkf_cmd_destroy(p->encode);
    vkf_fwd_plan_free(p->enc);
    for (uint32_t i = 0; i < p->layers; i++) {
        if (p->cross_kv) vkf_tensor_destroy(p->cross_kv[i]);
        if (p->cache_k) vkf_tensor_destroy(p->cache_k[i]);
        if (p->cache_v) vkf_tensor_destroy(p->cache_v[i]);
    }
    vkf_cmd_destroy(p->step2);
    free(p->cross_kv);
    free(p->cache_k);
    free(p->cache_v);
    vkf_tensor *ts[] = {p->src_lengths, p->state,  p->step_ids,    p->tokens,     p->y,       p->y2,      p->yn,
                        p->qkv,         p->q,      p->attn,        p->tmp,        p->hidden,  p->scratch, p->logits,
                        p->bb_random,   p->parent, p->beam_scores, p->cand_scores, p->cand_ids,
                        p->topk_stats,  p->topk_x, p->topk_id,    p->kv_rows[0],  p->kv_rows[1]};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) vkf_tensor_destroy(ts[i]);
    free(p);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

vkf_status vkf_model_generate_stats(const vkf_model *m, vkf_generate_stats *out)
{
    if (!m || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate_stats: %s is NULL", m ? "out_stats" : "model");
    *out = m->stats;
    return VKF_OK;
}

/* One decode step for every sequence: embed the step's input tokens at the
 * position in `state`, run each decoder layer against the KV cache (`cache_k`,
 * `cache_v`) and the cross-attention keys/values, pick the next tokens, advance
 * the position. Beam plans (from_rows, rows non-NULL) first make each row's table
 * of cache rows `rows` from its parent's in `from_rows`, attend through it, and
 * end with the candidates' top-k instead of argmax. */
static vkf_status rec_step(vkf_cmd *cmd, const vkf_model *m, gen_plan *p, vkf_tensor *from_rows, vkf_tensor *rows)
{
    const vkf_model_config *c = &m->cfg;
    uint32_t B = p->batch, d = c->d_model, H = c->n_heads, hd = d / H;
    float scale = 1.0f / sqrtf((float)hd);
    vkf_tensor *y = p->y, *alt = p->y2;
    vkf_tensor **cache_k = p->cache_k, **cache_v = p->cache_v;
    /* beam search: row r's positions 0..state-1 are where its parent's were, and
     * position state (written below by row r) is in row r */
    if (from_rows)
        VKF_TRY(vkf_op_kv_gather(cmd, from_rows, p->parent, p->state, rows, B, p->steps));
    /* y (B, d) = tgt_embed(step_ids) * scale + PE(state) */
    VKF_TRY(vkf_rec_embed(cmd, m, &m->tgt_embed, p->step_ids, B, 1, p->state, true, y));
    for (uint32_t i = 0; i < c->n_decoder_layers; i++) {
        const dec_layer *e = &m->dec[i];
        /* self-attention over the cache: keys/values of positions 0..state */
        vkf_attention_decode_desc self = {
            .batch = B, .heads = H, .head_dim = hd, .max_keys = p->steps, .scale = scale,
            .q = p->qkv, .q_offset = 0, .q_batch = 3 * d,
            .k = cache_k[i], .k_offset = 0, .k_row = d, .k_batch = (uint64_t)p->steps * d,
            .v = cache_v[i], .v_offset = 0, .v_row = d, .v_batch = (uint64_t)p->steps * d,
            .lengths = p->state, .length_from_state = true, .scratch = p->scratch, .out = p->attn,
            .row_index = rows,
        };
        /* The one-token step: lsh and lowrank cannot apply (see vkf_model_set_attention); dense. */
        attn_choice sc = vkf_site_choice(m, SITE_DEC_SELF);
        if (sc.kind == VKF_ATTN_FUSED) {
            self.pattern = sc.pattern, self.window = sc.window, self.stride = sc.stride;
            self.bigbird = (vkf_bigbird){sc.block, sc.globals, sc.random, true, m->seed};
            self.random_blocks = p->bb_random;
        }
        /* cross-attention over each source's memory, masked past its length */
        vkf_attention_decode_desc cross = {
            .batch = B, .heads = H, .head_dim = hd, .max_keys = p->cross_keys, .scale = scale,
            .q = p->q, .q_offset = 0, .q_batch = d,
            .k = p->cross_kv[i], .k_offset = 0, .k_row = 2 * d, .k_batch = (uint64_t)p->cross_keys * 2 * d,
            .v = p->cross_kv[i], .v_offset = d, .v_row = 2 * d, .v_batch = (uint64_t)p->cross_keys * 2 * d,
            .lengths = m->cross_attn.kind == VKF_ATTN_LOWRANK ? p->enc->lr_lengths[1] : p->src_lengths,
            .length_from_state = false, .scratch = p->scratch, .out = p->attn, .kv_div = p->beams ? p->beams : 1,
        };
        if (!c->norm_first) {
            VKF_TRY(vkf_rec_linear(cmd, y, B, &e->qkv, p->qkv, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_op_kv_append(cmd, p->qkv, p->state, cache_k[i], cache_v[i], B, d, p->steps));
            VKF_TRY(vkf_op_attention_decode(cmd, &self));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, B, &e->o, p->tmp, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_rec_norm(cmd, m, y, p->tmp, B, &e->n1, y));
            VKF_TRY(vkf_rec_linear(cmd, y, B, &e->cq, p->q, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_op_attention_decode(cmd, &cross));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, B, &e->co, p->tmp, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_rec_norm(cmd, m, y, p->tmp, B, &e->n2, y));
            VKF_TRY(vkf_rec_linear(cmd, y, B, &e->ff1, p->hidden, c->activation, NULL));
            VKF_TRY(vkf_rec_linear(cmd, p->hidden, B, &e->ff2, p->tmp, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_rec_norm(cmd, m, y, p->tmp, B, &e->n3, y));
        } else {
            VKF_TRY(vkf_rec_norm(cmd, m, y, NULL, B, &e->n1, p->yn));
            VKF_TRY(vkf_rec_linear(cmd, p->yn, B, &e->qkv, p->qkv, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_op_kv_append(cmd, p->qkv, p->state, cache_k[i], cache_v[i], B, d, p->steps));
            VKF_TRY(vkf_op_attention_decode(cmd, &self));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, B, &e->o, alt, VKF_ACTIVATION_NONE, y));
            VKF_TRY(vkf_rec_norm(cmd, m, alt, NULL, B, &e->n2, p->yn));
            VKF_TRY(vkf_rec_linear(cmd, p->yn, B, &e->cq, p->q, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_op_attention_decode(cmd, &cross));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, B, &e->co, y, VKF_ACTIVATION_NONE, alt));
            VKF_TRY(vkf_rec_norm(cmd, m, y, NULL, B, &e->n3, p->yn));
            VKF_TRY(vkf_rec_linear(cmd, p->yn, B, &e->ff1, p->hidden, c->activation, NULL));
            VKF_TRY(vkf_rec_linear(cmd, p->hidden, B, &e->ff2, alt, VKF_ACTIVATION_NONE, y));
            vkf_tensor *swap = y;
            y = alt, alt = swap;
        }
    }
    /* logits = generator(decoder.norm(y)); next ids = argmax; position += 1 */
    if (m->dec_norm.g) {
        VKF_TRY(vkf_rec_norm(cmd, m, y, NULL, B, &m->dec_norm, p->yn));
        VKF_TRY(vkf_rec_generator(cmd, m, p->yn, B, true, p->logits));
    } else {
        VKF_TRY(vkf_rec_generator(cmd, m, y, B, true, p->logits));
    }
    if (p->beams)
        VKF_TRY(vkf_op_beam_topk(cmd, p->logits, p->beam_scores, p->state, p->topk_stats, p->topk_x, p->topk_id,
                                 p->topk_chunk, p->cand_scores, p->cand_ids, p->sources, p->beams, c->tgt_vocab_size,
                                 2 * p->beams, c->eos_id, p->min_new, p->forced_eos ? p->steps - 1 : UINT32_MAX,
                                 p->renormalize));
    else if (p->sample)
        VKF_TRY(vkf_op_sample(cmd, p->logits, p->state, p->step_ids, p->tokens, B, c->tgt_vocab_size, p->steps,
                              &p->sampling, c->eos_id));
    else
        VKF_TRY(vkf_op_argmax(cmd, p->logits, p->state, p->step_ids, p->tokens, B, c->tgt_vocab_size, p->steps));
    return vkf_op_advance(cmd, p->state);
}

/* The plan of `sources` sources of length S for up to `steps` tokens: greedy with
 * beams 0, else beam search with `beams` rows per source. */
static vkf_status gen_plan_build(vkf_model *m, uint32_t sources, uint32_t beams, uint32_t S, uint32_t steps,
                                 const vkf_generate_options *beam_opts, const vkf_generate_options *sampling,
                                 gen_plan **out)
{
    vkf_context *ctx = m->ctx;
    const vkf_model_config *c = &m->cfg;
    uint64_t d = c->d_model, L = c->n_decoder_layers;
    uint32_t B = beams ? sources * beams : sources; /* rows of the decode step */
    gen_plan *p = calloc(1, sizeof *p);
    if (!p) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a generation plan");
    p->batch = B, p->src_len = S, p->steps = steps;
    p->sources = sources, p->beams = beams;
    if (beam_opts)
        p->min_new = beam_opts->min_new, p->forced_eos = beam_opts->forced_eos, p->renormalize = beam_opts->renormalize;
    if (sampling) p->sample = true, p->sampling = *sampling;
    p->cross_kv = calloc(L, sizeof *p->cross_kv);
    p->cache_k = calloc(L, sizeof *p->cache_k);
    p->cache_v = calloc(L, sizeof *p->cache_v);
    vkf_status st = p->cross_kv && p->cache_k && p->cache_v ? VKF_OK
                                                            : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (st == VKF_OK) p->layers = (uint32_t)L;
    if (st == VKF_OK) st = vkf_fwd_plan_alloc(m, sources, S, 1, &p->enc);
    bool lowrank_cross = m->cross_attn.kind == VKF_ATTN_LOWRANK;
    p->cross_keys = lowrank_cross ? m->cross_attn.rank : S;
    for (uint32_t i = 0; st == VKF_OK && i < L; i++) {
        /* cross-attention keys and values once per source: a source's beams read them (kv_div) */
        st = vkf_tensor2(ctx, m->act, (uint64_t)sources * p->cross_keys, 2 * d, &p->cross_kv[i]);
        if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, (uint64_t)B * steps, d, &p->cache_k[i]);
        if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, (uint64_t)B * steps, d, &p->cache_v[i]);
    }
    uint64_t keys = steps > p->cross_keys ? steps : p->cross_keys;
    attn_choice sc = vkf_site_choice(m, SITE_DEC_SELF);
    if (st == VKF_OK && sc.kind == VKF_ATTN_FUSED && sc.pattern == VKF_ATTENTION_BIGBIRD) {
        /* the decode step's random blocks: causal, so the forward pass's */
        vkf_bigbird bb = {sc.block, sc.globals, sc.random, true, m->seed};
        uint64_t blocks = vkf_div_up(steps, sc.block), n = blocks * sc.random > 0 ? blocks * sc.random : 1;
        int32_t *h = calloc(n, sizeof *h);
        st = h ? vkf_tensor2(ctx, VKF_DTYPE_I32, 1, n, &p->bb_random) : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (uint64_t qb = 0; st == VKF_OK && qb < blocks; qb++) vkf_bigbird_random_blocks(&bb, (uint32_t)qb, 0, h + qb * sc.random);
        if (st == VKF_OK) st = vkf_tensor_upload(p->bb_random, h, n * sizeof *h);
        free(h);
    }
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, B, &p->src_lengths);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, 1, &p->state);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, B, &p->step_ids);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, steps, &p->tokens);
    if (st == VKF_OK && beams) {
        st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, B, &p->parent);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, steps, &p->kv_rows[0]);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, steps, &p->kv_rows[1]);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, 1, B, &p->beam_scores);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, sources, 2 * beams, &p->cand_scores);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, sources, 2 * beams, &p->cand_ids);
        /* beam_partial.comp's chunks: at most 32 per row, of at least 512 ids */
        uint32_t V = c->tgt_vocab_size, chunk = (uint32_t)vkf_div_up(V, 32);
        p->topk_chunk = chunk < 512 ? 512 : chunk;
        p->topk_chunks = (uint32_t)vkf_div_up(V, p->topk_chunk);
        uint64_t parts = (uint64_t)B * p->topk_chunks;
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, parts, 2, &p->topk_stats);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, parts, 2 * beams, &p->topk_x);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, parts, 2 * beams, &p->topk_id);
    }
    vkf_tensor **acts[] = {&p->y, &p->y2, &p->yn, &p->q, &p->attn, &p->tmp};
    for (size_t i = 0; st == VKF_OK && i < sizeof acts / sizeof acts[0]; i++) st = vkf_tensor2(ctx, m->act, B, d, acts[i]);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, B, 3 * d, &p->qkv);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, B, c->d_ff, &p->hidden);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, (uint64_t)B * c->n_heads, keys, &p->scratch);
    if (st == VKF_OK) st = vkf_tensor2(ctx, m->act, B, c->tgt_vocab_size, &p->logits);
    /* The encoder and every layer's cross-attention keys/values: once per batch
     * (per source: beam plans copy them to each source's beams on the GPU). */
    if (st == VKF_OK) st = vkf_cmd_create(ctx, m->cmd_flags, &p->encode);
    if (st == VKF_OK) st = vkf_rec_encoder(p->encode, m, p->enc);
    for (uint32_t i = 0; st == VKF_OK && i < L; i++) {
        if (!lowrank_cross) {
            st = vkf_rec_linear(p->encode, p->enc->memory, sources * S, &m->dec[i].ckv, p->cross_kv[i], VKF_ACTIVATION_NONE,
                                NULL);
            continue;
        }
        /* lowrank: the memory's keys and values, projected to K rows per source */
        st = vkf_rec_linear(p->encode, p->enc->memory, B * S, &m->dec[i].ckv, p->enc->kv, VKF_ACTIVATION_NONE, NULL);
        if (st == VKF_OK)
            st = vkf_op_lowrank_project(p->encode, p->enc->lr_proj[1], B, p->cross_keys, S, d, p->enc->kv, 0, 2 * d,
                                        p->cross_kv[i]);
    }
    if (st == VKF_OK) st = vkf_cmd_create(ctx, m->cmd_flags, &p->step);
    if (st == VKF_OK && !beams) st = rec_step(p->step, m, p, NULL, NULL);
    if (st == VKF_OK && beams) st = rec_step(p->step, m, p, p->kv_rows[0], p->kv_rows[1]);
    if (st == VKF_OK && beams) st = vkf_cmd_create(ctx, m->cmd_flags, &p->step2);
    if (st == VKF_OK && beams) st = rec_step(p->step2, m, p, p->kv_rows[1], p->kv_rows[0]);
    if (st != VKF_OK) {
        vkf_gen_plan_free(p);
        return st;
    }
    *out = p;
    return VKF_OK;
}

/* Device bytes of a plan's tensors. */
static uint64_t plan_bytes(const gen_plan *p)
{
    uint64_t n = 0;
    const fwd_plan *e = p->enc;
    const vkf_tensor *ts[] = {p->src_lengths, p->state,  p->step_ids, p->tokens,      p->y,           p->y2,
                              p->yn,          p->qkv,    p->q,        p->attn,        p->tmp,         p->hidden,
                              p->scratch,     p->logits, p->bb_random, p->parent,     p->beam_scores,
                              p->cand_scores, p->cand_ids, p->topk_stats, p->topk_x, p->topk_id,
                              e->src_ids, e->tgt_ids,    e->src_mask,    e->src_lengths,
                              e->a,           e->b,      e->n,        e->memory,      e->qkv,         e->q,
                              e->kv,          e->attn,   e->tmp,      e->hidden,      e->scores,      e->logits};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) n += ts[i] ? vkf_tensor_bytes(ts[i]) : 0;
    for (uint32_t i = 0; i < p->layers; i++) {
        n += vkf_tensor_bytes(p->cross_kv[i]) + vkf_tensor_bytes(p->cache_k[i]) + vkf_tensor_bytes(p->cache_v[i]);
    }
    return n;
}

/* Whether a plan's sampling settings are those of o. */
static bool same_sampling(const gen_plan *p, const vkf_generate_options *o)
{
    if (!o) return !p->sample;
    return p->sample && p->sampling.temperature == o->temperature && p->sampling.top_k == o->top_k &&
           p->sampling.top_p == o->top_p && p->sampling.seed == o->seed && p->sampling.min_new == o->min_new &&
           p->sampling.forced_eos == o->forced_eos;
}

static vkf_status greedy_run(vkf_model *m, const vkf_sequences *src, uint32_t max_new,
                             const vkf_generate_options *sampling, int32_t *out_ids, uint32_t *out_lengths);
static vkf_status beam_run(vkf_model *m, const vkf_sequences *src, const vkf_generate_options *o, int32_t *out_ids,
                           uint32_t *out_lengths, float *out_scores);

typedef struct generate_call {
    const vkf_sequences *src;
    uint32_t max_new;
    const vkf_generate_options *o;
    bool beam;
    int32_t *out_ids;
    uint32_t *out_lengths;
    float *out_scores;
    vkf_generate_stats total;           /* over the chunks run so far */
    uint32_t chunks;
} generate_call;

/* The sources [first, first + count) of a generation as one batch (vkf_run_chunked);
 * the call's stats sum the chunks' tokens and times. */
static vkf_status generate_chunk(vkf_model *m, void *user, uint32_t first, uint32_t count)
{
    generate_call *g = user;
    uint32_t nb = g->beam ? g->o->n_best : 1;
    vkf_sequences part = {count, g->src->ids + first, g->src->lengths + first};
    size_t rows = (size_t)first * nb;
    vkf_status st = g->beam ? beam_run(m, &part, g->o, g->out_ids + rows * g->max_new, g->out_lengths + rows,
                                       g->out_scores ? g->out_scores + rows : NULL)
                            : greedy_run(m, &part, g->max_new, g->o, g->out_ids + rows * g->max_new, g->out_lengths + rows);
    VKF_TRY(st); /* a plan too large was never kept: greedy_run and beam_run free the old one first */
    vkf_generate_stats *t = &g->total;
    if (g->chunks++ == 0) t->first_token_ms = m->stats.first_token_ms;
    t->tokens += m->stats.tokens;
    t->total_ms += m->stats.total_ms;
    if (m->stats.steps > t->steps) t->steps = m->stats.steps;
    if (m->stats.plan_bytes > t->plan_bytes) t->plan_bytes = m->stats.plan_bytes;
    return VKF_OK;
}

/* Greedy or beam generation of every source, in chunks where one batch would
 * need a tensor past the device's limits (vkf_run_chunked). */
static vkf_status run_split(vkf_model *m, const vkf_sequences *src, uint32_t max_new, const vkf_generate_options *o,
                            bool beam, int32_t *out_ids, uint32_t *out_lengths, float *out_scores)
{
    /* the whole batch checked first, so a bad source is named by its index in the call */
    uint32_t S;
    VKF_TRY(vkf_check_sequences(m, src, m->cfg.src_vocab_size, "source", &S));
    generate_call g = {src, max_new, o, beam, out_ids, out_lengths, out_scores, {0}, 0};
    vkf_status st = vkf_run_chunked(m, &m->gen_chunks, src->count, (const uint32_t[2]){S, max_new}, "generation of",
                                    generate_chunk, &g);
    if (st == VKF_OK && g.chunks > 1) m->stats = g.total;
    return st;
}

vkf_status vkf_model_generate(vkf_model *m, const vkf_sequences *src, uint32_t max_new, int32_t *out_ids,
                              uint32_t *out_lengths)
{
    if (!m || !out_ids || !out_lengths)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate: %s is NULL",
                        !m ? "model" : !out_ids ? "out_ids" : "out_lengths");
    return run_split(m, src, max_new, NULL, false, out_ids, out_lengths, NULL);
}

/* Greedy decoding, or sampling with `sampling`: one token per row and step. */
static vkf_status greedy_run(vkf_model *m, const vkf_sequences *src, uint32_t max_new,
                             const vkf_generate_options *sampling, int32_t *out_ids, uint32_t *out_lengths)
{
    uint32_t S;
    VKF_TRY(vkf_check_sequences(m, src, m->cfg.src_vocab_size, "source", &S));
    if (max_new == 0 || max_new > m->cfg.max_len)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate: max_new %u is outside 1..%u (the model's max_len)",
                        max_new, m->cfg.max_len);
    uint32_t B = src->count;
    double t0 = now_ms();
    m->stats = (vkf_generate_stats){0};
    gen_plan *p = m->gen_plan;
    if (!p || p->beams || p->batch != B || p->src_len != S || p->steps != max_new || !same_sampling(p, sampling)) {
        vkf_gen_plan_free(m->gen_plan);
        m->gen_plan = NULL;
        VKF_TRY(gen_plan_build(m, B, 0, S, max_new, NULL, sampling, &p));
        m->gen_plan = p;
    }
    VKF_TRY(vkf_upload_ids(m, src, S, p->enc->src_ids, p->enc->src_mask, p->enc->src_lengths));
    VKF_TRY(vkf_upload_lowrank(m, p->enc, src));
    int32_t *ids = malloc((size_t)B * sizeof *ids);
    int32_t *tokens = malloc((size_t)B * max_new * sizeof *tokens);
    bool *done = calloc(B, sizeof *done);
    vkf_status st = ids && tokens && done ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) {
        ids[b] = (int32_t)src->lengths[b];
        out_lengths[b] = 0;
    }
    if (st == VKF_OK) st = vkf_tensor_upload(p->src_lengths, ids, (uint64_t)B * sizeof *ids);
    if (st == VKF_OK) st = vkf_cmd_submit(p->encode);
    int32_t zero = 0;
    if (st == VKF_OK) st = vkf_tensor_upload(p->state, &zero, sizeof zero);
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) ids[b] = m->cfg.bos_id;
    if (st == VKF_OK) st = vkf_tensor_upload(p->step_ids, ids, (uint64_t)B * sizeof *ids);
    /* Each step: one submit of the same command buffer; the host only reads the
     * chosen ids to know when every sequence has reached eos. */
    uint32_t steps = 0, finished = 0;
    while (st == VKF_OK && steps < max_new && finished < B) {
        st = vkf_cmd_submit(p->step);
        if (st == VKF_OK) st = vkf_tensor_download(p->step_ids, ids, (uint64_t)B * sizeof *ids);
        if (steps == 0) m->stats.first_token_ms = now_ms() - t0;
        for (uint32_t b = 0; st == VKF_OK && b < B; b++) {
            if (done[b]) continue;
            if (ids[b] == m->cfg.eos_id) done[b] = true, finished++;
            else out_lengths[b]++;
        }
        steps++;
    }
    if (st == VKF_OK) st = vkf_tensor_download(p->tokens, tokens, (uint64_t)B * max_new * sizeof *tokens);
    for (uint32_t b = 0; st == VKF_OK && b < B; b++)
        for (uint32_t j = 0; j < max_new; j++)
            out_ids[(size_t)b * max_new + j] = j < out_lengths[b] ? tokens[(size_t)b * max_new + j] : m->cfg.pad_id;
    m->stats.steps = steps;
    m->stats.plan_bytes = plan_bytes(p);
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) m->stats.tokens += out_lengths[b];
    m->stats.total_ms = now_ms() - t0;
    free(ids), free(tokens), free(done);
    return st;
}

/* ------------------------------------------------------------------ beam search */

void vkf_generate_options_init(vkf_generate_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->beams = 1;
    o->length_penalty = 1.0f;
    o->n_best = 1;
    o->temperature = 1.0f;
    o->top_p = 1.0f;
}

/* The finished hypotheses of one source: at most `beams`, as Hugging Face's
 * BeamHypotheses (insertion order kept: ties resolve the same way). */
typedef struct hyp_set {
    uint32_t count;
    double worst;                       /* 1e9 while empty */
    double *score;                      /* (beams + 1) */
    uint32_t *len;                      /* (beams + 1) ids without eos */
    int32_t *ids;                       /* (beams + 1, steps) */
    bool done;
} hyp_set;

static void hyp_add(hyp_set *h, uint32_t beams, uint32_t steps, const int32_t *ids, uint32_t n, double sum_logprobs,
                    uint32_t generated_len, double length_penalty)
{
    double score = sum_logprobs / pow((double)generated_len, length_penalty);
    if (h->count >= beams && !(score > h->worst)) return;
    h->score[h->count] = score, h->len[h->count] = n;
    memcpy(h->ids + (size_t)h->count * steps, ids, (size_t)n * sizeof *ids);
    h->count++;
    if (h->count > beams) {
        /* drop the worst (the earliest among equals), worst = the next one */
        uint32_t w = 0;
        for (uint32_t i = 1; i < h->count; i++)
            if (h->score[i] < h->score[w]) w = i;
        for (uint32_t i = w; i + 1 < h->count; i++) {
            h->score[i] = h->score[i + 1], h->len[i] = h->len[i + 1];
            memcpy(h->ids + (size_t)i * steps, h->ids + (size_t)(i + 1) * steps, (size_t)steps * sizeof *ids);
        }
        h->count--;
        h->worst = h->score[0];
        for (uint32_t i = 1; i < h->count; i++)
            if (h->score[i] < h->worst) h->worst = h->score[i];
    } else if (score < h->worst) {
        h->worst = score;
    }
}

/* Whether no running beam can still beat the worst finished hypothesis. */
static bool hyp_is_done(const hyp_set *h, uint32_t beams, double best_sum_logprobs, uint32_t generated_len,
                        const vkf_generate_options *o)
{
    if (h->count < beams) return false;
    if (o->early_stopping) return true;
    return h->worst >= best_sum_logprobs / pow((double)generated_len, o->length_penalty);
}

static vkf_status check_options(const vkf_model *m, const vkf_generate_options *o)
{
    if (o->sample) {
        if (!(o->temperature > 0) || !isfinite(o->temperature))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "temperature %g must be a number above 0", (double)o->temperature);
        if (!(o->top_p > 0 && o->top_p <= 1))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "top_p %g is outside (0, 1]", (double)o->top_p);
        if (o->beams != 1)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "sampling takes one beam (beams %u given): beam sampling is not "
                            "implemented", o->beams);
    }
    if (o->beams == 0 || o->beams > VKF_MAX_BEAMS)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "beams %u is outside 1..%u", o->beams, VKF_MAX_BEAMS);
    if (o->n_best == 0 || o->n_best > o->beams)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "n_best %u is outside 1..%u (the number of beams)", o->n_best, o->beams);
    if (o->max_new > m->cfg.max_len)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "max_new %u is outside 1..%u (the model's max_len)", o->max_new,
                        m->cfg.max_len);
    uint32_t max_new = o->max_new ? o->max_new : m->cfg.max_len;
    if (o->min_new > max_new)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "min_new %u is more than max_new %u", o->min_new, max_new);
    if (!isfinite(o->length_penalty))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "length_penalty must be a finite number");
    if ((uint64_t)o->beams * m->cfg.tgt_vocab_size > INT32_MAX)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "beams x tgt_vocab_size must stay below 2^31");
    if (!o->sample && m->cross_attn.kind == VKF_ATTN_LOWRANK)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "beam search does not take lowrank cross-attention yet; use greedy "
                        "decoding (vkf_model_generate) or dense cross-attention");
    return VKF_OK;
}

vkf_status vkf_model_generate_with(vkf_model *m, const vkf_sequences *src, const vkf_generate_options *options,
                                   int32_t *out_ids, uint32_t *out_lengths, float *out_scores)
{
    if (!m || !out_ids || !out_lengths)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate_with: %s is NULL",
                        !m ? "model" : !out_ids ? "out_ids" : "out_lengths");
    vkf_generate_options o;
    vkf_generate_options_init(&o);
    if (options) o = *options;
    VKF_TRY(check_options(m, &o));
    if (o.sample) {
        uint32_t max_new = o.max_new ? o.max_new : m->cfg.max_len;
        VKF_TRY(run_split(m, src, max_new, &o, false, out_ids, out_lengths, NULL));
        for (uint32_t b = 0; out_scores && b < src->count; b++) out_scores[b] = NAN;
        return VKF_OK;
    }
    return run_split(m, src, o.max_new ? o.max_new : m->cfg.max_len, &o, true, out_ids, out_lengths, out_scores);
}

/* Beam search of a batch of sources (checked options). */
static vkf_status beam_run(vkf_model *m, const vkf_sequences *src, const vkf_generate_options *opts, int32_t *out_ids,
                           uint32_t *out_lengths, float *out_scores)
{
    const vkf_generate_options o = *opts;
    uint32_t S;
    VKF_TRY(vkf_check_sequences(m, src, m->cfg.src_vocab_size, "source", &S));
    const uint32_t steps = o.max_new ? o.max_new : m->cfg.max_len, K = o.beams, NB = o.n_best, NB2 = 2 * K;
    const uint32_t B = src->count, R = B * K, V = m->cfg.tgt_vocab_size;
    double t0 = now_ms();
    m->stats = (vkf_generate_stats){0};
    gen_plan *p = m->gen_plan;
    if (!p || p->beams != K || p->sources != B || p->src_len != S || p->steps != steps || p->min_new != o.min_new ||
        p->forced_eos != o.forced_eos || p->renormalize != o.renormalize) {
        vkf_gen_plan_free(m->gen_plan);
        m->gen_plan = NULL;
        VKF_TRY(gen_plan_build(m, B, K, S, steps, &o, NULL, &p));
        m->gen_plan = p;
    }
    VKF_TRY(vkf_upload_ids(m, src, S, p->enc->src_ids, p->enc->src_mask, p->enc->src_lengths));
    VKF_TRY(vkf_upload_lowrank(m, p->enc, src));
    /* host state: each row's tokens, and the finished hypotheses of each source */
    int32_t *hist = malloc((size_t)(R + 1) * steps * sizeof *hist), *next_hist = malloc((size_t)(R + 1) * steps * sizeof *hist);
    int32_t *parent = malloc((size_t)R * sizeof *parent), *tok = malloc((size_t)R * sizeof *tok);
    float *score = malloc((size_t)R * sizeof *score), *cs = malloc((size_t)B * NB2 * sizeof *cs);
    int32_t *ci = malloc((size_t)B * NB2 * sizeof *ci);
    hyp_set *hyps = calloc(B, sizeof *hyps);
    double *hscore = malloc((size_t)B * (K + 1) * sizeof *hscore);
    uint32_t *hlen = malloc((size_t)B * (K + 1) * sizeof *hlen);
    int32_t *hids = malloc((size_t)B * (K + 1) * steps * sizeof *hids);
    vkf_status st = hist && next_hist && parent && tok && score && cs && ci && hyps && hscore && hlen && hids
                        ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for beam search");
    for (uint32_t b = 0; st == VKF_OK && b < B; b++)
        hyps[b] = (hyp_set){0, 1e9, hscore + (size_t)b * (K + 1), hlen + (size_t)b * (K + 1),
                            hids + (size_t)b * (K + 1) * steps, false};
    /* every row's source length; start: bos, beam 0 of each source alone (the others at -1e9) */
    for (uint32_t r = 0; st == VKF_OK && r < R; r++) {
        parent[r] = (int32_t)src->lengths[r / K];
        tok[r] = m->cfg.bos_id;
        score[r] = r % K ? -1e9f : 0.0f;
    }
    if (st == VKF_OK) st = vkf_tensor_upload(p->src_lengths, parent, (uint64_t)R * sizeof *parent);
    for (uint32_t r = 0; r < R && parent; r++) parent[r] = (int32_t)r;
    if (st == VKF_OK) st = vkf_cmd_submit(p->encode);
    int32_t zero = 0;
    if (st == VKF_OK) st = vkf_tensor_upload(p->state, &zero, sizeof zero);
    uint32_t finished = 0;
    for (uint32_t t = 0; st == VKF_OK && t < steps && finished < B; t++) {
        st = vkf_tensor_upload(p->parent, parent, (uint64_t)R * sizeof *parent);
        if (st == VKF_OK) st = vkf_tensor_upload(p->step_ids, tok, (uint64_t)R * sizeof *tok);
        if (st == VKF_OK) st = vkf_tensor_upload(p->beam_scores, score, (uint64_t)R * sizeof *score);
        if (st == VKF_OK) st = vkf_cmd_submit(t % 2 ? p->step2 : p->step);
        if (st == VKF_OK) st = vkf_tensor_download(p->cand_scores, cs, (uint64_t)B * NB2 * sizeof *cs);
        if (st == VKF_OK) st = vkf_tensor_download(p->cand_ids, ci, (uint64_t)B * NB2 * sizeof *ci);
        if (st != VKF_OK) break;
        if (t == 0) m->stats.first_token_ms = now_ms() - t0;
        m->stats.steps = t + 1;
        /* Hugging Face's beam search (transformers 5) on each source's 2K candidates:
         * those of the first K that end in eos (all of the first K at the last step)
         * finish, the first K without eos go on */
        bool last = t + 1 == steps;
        for (uint32_t b = 0; b < B; b++) {
            hyp_set *h = &hyps[b];
            uint32_t n = 0;
            for (uint32_t rank = 0; !h->done && rank < NB2; rank++) {
                int32_t id = ci[b * NB2 + rank];
                if (id < 0) break;
                uint32_t row = b * K + (uint32_t)id / V;
                int32_t v = (int32_t)((uint32_t)id % V);
                bool eos = v == m->cfg.eos_id;
                if (rank < K && (eos || last)) {
                    int32_t *ids = next_hist + (size_t)R * steps; /* scratch row */
                    memcpy(ids, hist + (size_t)row * steps, (size_t)t * sizeof *ids);
                    ids[t] = v;
                    hyp_add(h, K, steps, ids, eos ? t : t + 1, cs[b * NB2 + rank], t + 1, o.length_penalty);
                }
                if (!eos && n < K) {
                    uint32_t r = b * K + n++;
                    parent[r] = (int32_t)row, tok[r] = v, score[r] = cs[b * NB2 + rank];
                }
            }
            for (; n < K; n++) { /* a finished source (or too few candidates): rows that lead nowhere */
                uint32_t r = b * K + n;
                parent[r] = (int32_t)r, tok[r] = m->cfg.pad_id, score[r] = h->done ? 0.0f : -INFINITY;
            }
            /* done once the best running beam cannot beat the worst finished one */
            if (!h->done && (last || hyp_is_done(h, K, score[b * K], t + 1, &o))) h->done = true, finished++;
        }
        for (uint32_t r = 0; r < R; r++) {
            memcpy(next_hist + (size_t)r * steps, hist + (size_t)parent[r] * steps, (size_t)t * sizeof *hist);
            next_hist[(size_t)r * steps + t] = tok[r];
        }
        int32_t *swap = hist;
        hist = next_hist, next_hist = swap;
    }
    /* the n_best of each source, best first (among equals the later one, as a stable sort popped from its end) */
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) {
        hyp_set *h = &hyps[b];
        bool *taken = calloc(h->count + 1, sizeof *taken);
        if (!taken) {
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
            break;
        }
        for (uint32_t j = 0; j < NB; j++) {
            int best = -1;
            for (uint32_t i = 0; i < h->count; i++)
                if (!taken[i] && (best < 0 || h->score[i] >= h->score[best])) best = (int)i;
            int32_t *dst = out_ids + ((size_t)b * NB + j) * steps;
            uint32_t n = best < 0 ? 0 : h->len[best];
            for (uint32_t i = 0; i < steps; i++) dst[i] = i < n ? h->ids[(size_t)best * steps + i] : m->cfg.pad_id;
            out_lengths[b * NB + j] = n;
            if (out_scores) out_scores[b * NB + j] = best < 0 ? -INFINITY : (float)h->score[best];
            if (best >= 0) taken[best] = true;
        }
        free(taken);
    }
    m->stats.plan_bytes = plan_bytes(p);
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) m->stats.tokens += out_lengths[b * NB];
    m->stats.total_ms = now_ms() - t0;
    free(hist), free(next_hist), free(parent), free(tok), free(score), free(cs), free(ci), free(hyps);
    free(hscore), free(hlen), free(hids);
    return st;
}

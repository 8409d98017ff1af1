/* Generation plans: the encoder run and every layer's cross-attention keys and
 * values (recorded once per batch shape), the KV caches, the buffers of one
 * decode step, and the step itself, recorded once and re-submitted per token:
 * the arch's decoder layer over one token per row, the logits processors where
 * the call has any, then the choice of the next tokens (argmax, sampling, or
 * beam search's top-k) and the position's advance.
 * Slot plans (the serving scheduler's) keep one position per row instead: rows
 * join and leave between steps, each step decodes the first rows that hold
 * requests (recorded once per row count, on first use), and each arrival's
 * cross-attention keys and values are written into its own row. */
#include "decode/decode.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double vkf_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void vkf_gen_plan_free(vkf_gen_plan *p)
{
    if (!p) return;
    vkf_cmd_destroy(p->step);
    vkf_cmd_destroy(p->step2);
    vkf_cmd_destroy(p->encode);
    for (uint32_t r = 0; p->slot_step && r < p->batch; r++) vkf_cmd_destroy(p->slot_step[r]);
    for (uint32_t r = 0; p->slot_step2 && r < p->batch; r++) vkf_cmd_destroy(p->slot_step2[r]);
    free(p->slot_step), free(p->slot_step2);
    vkf_fwd_plan_free(p->enc);
    for (uint32_t i = 0; i < p->layers; i++) {
        if (p->cross_kv) vkf_tensor_destroy(p->cross_kv[i]);
        if (p->cache_k) vkf_tensor_destroy(p->cache_k[i]);
        if (p->cache_v) vkf_tensor_destroy(p->cache_v[i]);
    }
    free(p->cross_kv);
    free(p->cache_k);
    free(p->cache_v);
    vkf_tensor *ts[] = {p->src_lengths, p->state,  p->step_ids,    p->tokens,     p->y,       p->y2,      p->yn,
                        p->qkv,         p->q,      p->attn,        p->tmp,        p->hidden,  p->scratch, p->logits,
                        p->bb_random,   p->parent, p->beam_scores, p->cand_scores, p->cand_ids,
                        p->topk_stats,  p->topk_x, p->topk_id,    p->kv_rows[0],  p->kv_rows[1],
                        p->scores,      p->inputs, p->row_data,   p->lists,     p->seeds};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) vkf_tensor_destroy(ts[i]);
    free(p);
}

void vkf_decoder_reset(vkf_decoder *d)
{
    vkf_gen_plan_free(d->plan);
    d->plan = NULL;
}

uint64_t vkf_gen_plan_bytes(const vkf_gen_plan *p)
{
    uint64_t n = 0;
    const vkf_fwd_plan *e = p->enc;
    const vkf_tensor *ts[] = {p->src_lengths, p->state,  p->step_ids, p->tokens,      p->y,           p->y2,
                              p->yn,          p->qkv,    p->q,        p->attn,        p->tmp,         p->hidden,
                              p->scratch,     p->logits, p->bb_random, p->parent,     p->beam_scores,
                              p->cand_scores, p->cand_ids, p->topk_stats, p->topk_x, p->topk_id,
                              p->kv_rows[0],  p->kv_rows[1], p->scores, p->inputs, p->row_data, p->lists, p->seeds};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) n += ts[i] ? vkf_tensor_bytes(ts[i]) : 0;
    if (e) { /* a slot plan has none: its arrivals' encoder plans are the scheduler's */
        const vkf_tensor *es[] = {e->src_ids, e->tgt_ids, e->src_pos,  e->tgt_pos, e->src_mask, e->src_lengths,
                                  e->a,       e->b,       e->n,        e->memory,  e->qkv,      e->q,
                                  e->kv,      e->attn,    e->tmp,      e->hidden,  e->scores,   e->logits,
                                  e->g_kv,    e->g_sum,   e->g_norm};
        for (size_t i = 0; i < sizeof es / sizeof es[0]; i++) n += es[i] ? vkf_tensor_bytes(es[i]) : 0;
    }
    for (uint32_t i = 0; i < p->layers; i++)
        n += vkf_tensor_bytes(p->cross_kv[i]) + vkf_tensor_bytes(p->cache_k[i]) + vkf_tensor_bytes(p->cache_v[i]);
    return n;
}

/* One decode step for the first B rows: embed the step's input tokens at the
 * position in `state` (the rows', or each row its own in a slot plan), run each
 * decoder layer against the KV cache and the cross-attention keys/values, pick
 * the next tokens, advance the position. Beam
 * plans (from_rows, rows non-NULL) first make each row's table of cache rows
 * `rows` from its parent's in `from_rows`, attend through it, and end with the
 * candidates' top-k instead of argmax. */
static vkf_status rec_step(vkf_cmd *cmd, const vkf_arch *a, vkf_gen_plan *p, uint32_t B, vkf_tensor *from_rows,
                           vkf_tensor *rows)
{
    const vkf_arch_spec *s = &a->spec;
    /* beam search: row r's positions 0..state-1 are where its parent's were, and
     * position state (written below by row r) is in row r */
    if (from_rows) VKF_TRY(vkf_op_kv_gather(cmd, from_rows, p->parent, p->state, rows, B, p->steps));
    vkf_dec_io io = {.rows = B, .x = p->y, .alt = p->y2, .n = p->yn, .qkv = p->qkv, .q = p->q, .attn = p->attn,
                     .tmp = p->tmp, .hidden = p->hidden};
    io.step.cache_k = p->cache_k, io.step.cache_v = p->cache_v, io.step.cross_kv = p->cross_kv;
    io.step.steps = p->steps, io.step.cross_keys = p->cross_keys, io.step.state = p->state;
    io.step.cross_lengths = a->cross_attn.kind == VKF_ATTN_LOWRANK ? p->enc->lr_lengths[1] : p->src_lengths;
    io.step.row_index = rows, io.step.bigbird_random = p->bb_random, io.step.kv_div = p->beams ? p->beams : 1;
    io.step.scratch = p->scratch;
    /* y (B, d) = EmbedNorm(tgt_embed(step_ids) * scale + PE(state)) */
    vkf_embed_at at = {.seq_len = 1, .state = p->state};
    VKF_TRY(vkf_rec_embed(cmd, a, true, p->step_ids, B, &at, p->yn, io.x));
    for (uint32_t i = 0; i < s->decoder_layers; i++) VKF_TRY(vkf_rec_decoder_layer(cmd, a, i, &io));
    /* logits = generator(FinalNorm(y)), banned ids -inf (unless the processors ban them) */
    VKF_TRY(vkf_rec_decoder_output(cmd, a, io.x, p->yn, B, !p->proc.unbanned_generator, p->logits));
    /* scores = the logits processors over each row's sequence so far, where the
     * call has any; they then hold min_new, forced eos and the end ids, so the
     * choice below leaves those to them */
    const vkf_proc *pr = &p->proc;
    const vkf_tensor *choose_from = p->logits;
    /* min_new and forced eos: beam search's, or sampling's own */
    bool forced_eos = p->beams ? p->forced_eos : p->sample && p->sampling.forced_eos;
    uint32_t min_new = p->beams ? p->min_new : p->sample ? p->sampling.min_new : 0;
    uint32_t force_step = forced_eos ? p->steps - 1 : UINT32_MAX;
    uint32_t renormalize = p->renormalize ? 1 : 0;
    if (pr->on) {
        vkf_logits_process_desc d = {
            .rows = B, .vocab = s->tgt_vocab, .steps = p->steps, .logits = p->logits, .state = p->state,
            .step_ids = p->step_ids, .row_index = rows, .inputs = p->inputs, .row_data = p->row_data,
            .row_stride = (pr->row_settings ? 5 : 2) + pr->prefix_max, .row_settings = pr->row_settings, .lists = p->lists, .n_suppress = pr->n_suppress, .n_end = pr->n_end,
            .n_bad = pr->n_bad, .log_probs = p->beams > 1, .penalty = pr->penalty, .ngram = pr->ngram,
            .min_new = pr->min_new, .forced_bos = pr->forced_bos, .forced_eos = pr->forced_eos, .eos = pr->eos,
            .scores = p->scores, .n_begin = pr->n_begin, .ts_begin = pr->ts_begin,
            .no_timestamps = pr->no_timestamps, .ts_max_initial = pr->ts_max_initial, .ts_eos = pr->ts_eos};
        VKF_TRY(vkf_op_logits_process(cmd, &d));
        choose_from = p->scores, min_new = 0, force_step = UINT32_MAX;
        /* beam search takes the processed log-probabilities as they are, or
         * renormalised (renormalize_logits); one beam (greedy) processed the
         * logits, whose log_softmax its scores are */
        renormalize = p->beams > 1 && !p->renormalize ? 2 : 0;
    }
    /* next ids; position += 1 */
    if (p->beams) {
        VKF_TRY(vkf_op_beam_topk(cmd, choose_from, p->beam_scores, p->state, p->topk_stats, p->topk_x, p->topk_id,
                                 p->topk_chunk, p->cand_scores, p->cand_ids, B / p->beams, p->beams, s->tgt_vocab,
                                 p->n_cand, s->eos_id, min_new, force_step, renormalize));
    } else if (p->sample) {
        vkf_generate_options so = p->sampling;
        so.min_new = min_new, so.forced_eos = force_step != UINT32_MAX;
        VKF_TRY(vkf_op_sample_seeded(cmd, choose_from, p->state, p->step_ids, p->tokens, B, s->tgt_vocab, p->steps,
                                     &so, s->eos_id, p->seeds));
    } else {
        VKF_TRY(vkf_op_argmax(cmd, choose_from, p->state, p->step_ids, p->tokens, B, s->tgt_vocab, p->steps));
    }
    return vkf_op_advance(cmd, p->state);
}

uint32_t vkf_beam_topk_chunk(uint32_t vocab)
{
    uint32_t chunk = (uint32_t)vkf_div_up(vocab, 32);
    return chunk < 512 ? 512 : chunk;
}

/* vkf_gen_plan_build, or with `slots` vkf_gen_plan_build_slots (greedy, no encoder
 * plan, one position per row, steps recorded on demand). */
static vkf_status build(vkf_arch *a, uint32_t sources, uint32_t beams, uint32_t S, uint32_t steps,
                        const vkf_generate_options *beam_opts, const vkf_generate_options *sampling,
                        const vkf_proc *proc, bool slots, vkf_gen_plan **out)
{
    vkf_context *ctx = a->ctx;
    const vkf_arch_spec *s = &a->spec;
    uint64_t d = s->d_model, inner = (uint64_t)s->heads * s->head_dim, L = s->decoder_layers;
    uint32_t B = beams ? sources * beams : sources; /* rows of the decode step */
    vkf_gen_plan *p = calloc(1, sizeof *p);
    if (!p) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a generation plan");
    p->batch = B, p->src_len = S, p->steps = steps;
    p->sources = sources, p->beams = beams, p->slots = slots;
    if (beam_opts)
        p->min_new = beam_opts->min_new, p->forced_eos = beam_opts->forced_eos, p->renormalize = beam_opts->renormalize;
    if (sampling) p->sample = true, p->sampling = *sampling;
    if (proc) p->proc = *proc;
    /* beam search keeps max(2, 1 + end ids) x beams candidates, as generate() */
    p->n_cand = beams * (proc && proc->n_end + 1 > 2 ? proc->n_end + 1 : 2);
    p->cross_kv = calloc(L, sizeof *p->cross_kv);
    p->cache_k = calloc(L, sizeof *p->cache_k);
    p->cache_v = calloc(L, sizeof *p->cache_v);
    vkf_status st = p->cross_kv && p->cache_k && p->cache_v ? VKF_OK
                                                            : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (st == VKF_OK) p->layers = (uint32_t)L;
    if (st == VKF_OK && !slots) st = vkf_fwd_plan_alloc(a, sources, S, 1, &p->enc);
    bool lowrank_cross = a->cross_attn.kind == VKF_ATTN_LOWRANK;
    if (st == VKF_OK && slots && lowrank_cross)
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "slot plans: lowrank cross-attention keeps its keys per batch, not per row");
    if (st == VKF_OK && slots) {
        p->slot_step = calloc(B, sizeof *p->slot_step);
        p->slot_step2 = beams ? calloc(B, sizeof *p->slot_step2) : NULL;
        if (!p->slot_step || (beams && !p->slot_step2)) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        if (st == VKF_OK && sampling) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, 2, &p->seeds);
    }
    p->cross_keys = lowrank_cross ? a->cross_attn.rank : S;
    for (uint32_t i = 0; st == VKF_OK && i < L; i++) {
        /* cross-attention keys and values once per source: a source's beams read them (kv_div) */
        st = vkf_tensor2(ctx, a->act, (uint64_t)sources * p->cross_keys, 2 * inner, &p->cross_kv[i]);
        if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, (uint64_t)B * steps, inner, &p->cache_k[i]);
        if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, (uint64_t)B * steps, inner, &p->cache_v[i]);
    }
    uint64_t keys = steps > p->cross_keys ? steps : p->cross_keys;
    vkf_attention_spec sc = vkf_arch_site(a, VKF_SITE_STEP_SELF);
    if (st == VKF_OK && sc.kind == VKF_ATTN_FUSED && sc.pattern == VKF_ATTENTION_BIGBIRD) {
        /* the decode step's random blocks: causal, so the forward pass's */
        vkf_bigbird bb = {sc.block, sc.globals, sc.random, true, a->seed};
        uint64_t blocks = vkf_div_up(steps, sc.block), n = blocks * sc.random > 0 ? blocks * sc.random : 1;
        int32_t *h = calloc(n, sizeof *h);
        st = h ? vkf_tensor2(ctx, VKF_DTYPE_I32, 1, n, &p->bb_random) : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (uint64_t qb = 0; st == VKF_OK && qb < blocks; qb++) vkf_bigbird_random_blocks(&bb, (uint32_t)qb, 0, h + qb * sc.random);
        if (st == VKF_OK) st = vkf_tensor_upload(p->bb_random, h, n * sizeof *h);
        free(h);
    }
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, B, &p->src_lengths);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, slots ? B : 1, &p->state);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, B, &p->step_ids);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, steps, &p->tokens);
    if (st == VKF_OK && beams) {
        st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, B, &p->parent);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, steps, &p->kv_rows[0]);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, steps, &p->kv_rows[1]);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, 1, B, &p->beam_scores);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, sources, p->n_cand, &p->cand_scores);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, sources, p->n_cand, &p->cand_ids);
        p->topk_chunk = vkf_beam_topk_chunk(s->tgt_vocab);
        p->topk_chunks = (uint32_t)vkf_div_up(s->tgt_vocab, p->topk_chunk);
        uint64_t parts = (uint64_t)B * p->topk_chunks;
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, parts, 2, &p->topk_stats);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, parts, p->n_cand, &p->topk_x);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, parts, p->n_cand, &p->topk_id);
    }
    if (st == VKF_OK && p->proc.on) {
        const vkf_proc *pr = &p->proc;
        uint32_t lists = pr->n_suppress + pr->n_end + pr->n_bad + pr->n_begin;
        st = vkf_tensor2(ctx, VKF_DTYPE_F32, B, s->tgt_vocab, &p->scores);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, steps, &p->inputs);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, (pr->row_settings ? 5 : 2) + pr->prefix_max, &p->row_data);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, lists ? lists : 1, &p->lists);
    }
    vkf_tensor **acts[] = {&p->y, &p->y2, &p->yn, &p->tmp};
    for (size_t i = 0; st == VKF_OK && i < sizeof acts / sizeof acts[0]; i++) st = vkf_tensor2(ctx, a->act, B, d, acts[i]);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, B, inner, &p->q);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, B, inner, &p->attn);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, B, 3 * inner, &p->qkv);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, B, vkf_arch_hidden_cols(s), &p->hidden);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, (uint64_t)B * s->heads, keys, &p->scratch);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, B, s->tgt_vocab, &p->logits);
    if (st == VKF_OK && slots) { /* the steps are recorded by vkf_gen_plan_slot_step */
        *out = p;
        return VKF_OK;
    }
    /* The encoder and every layer's cross-attention keys/values: once per batch,
     * once per source (a source's beams read them through kv_div). */
    if (st == VKF_OK) st = vkf_cmd_create(ctx, a->cmd_flags, &p->encode);
    if (st == VKF_OK) st = vkf_rec_encoder(p->encode, a, p->enc);
    for (uint32_t i = 0; st == VKF_OK && i < L; i++) {
        if (!lowrank_cross) {
            st = vkf_rec_linear(p->encode, p->enc->memory, sources * S, &a->w.dec[i].ckv, p->cross_kv[i],
                                VKF_ACTIVATION_NONE, NULL);
            continue;
        }
        /* lowrank: the memory's keys and values, projected to K rows per source */
        st = vkf_rec_linear(p->encode, p->enc->memory, sources * S, &a->w.dec[i].ckv, p->enc->kv, VKF_ACTIVATION_NONE,
                            NULL);
        vkf_attention_view k = {p->enc->kv, 0, 2 * inner, (uint64_t)S * 2 * inner},
                           v = {p->enc->kv, inner, 2 * inner, (uint64_t)S * 2 * inner};
        if (st == VKF_OK)
            st = vkf_attention_lowrank_kv(p->encode, p->enc->lr_proj[1], sources, p->cross_keys, S, &k, &v, a->act,
                                          inner, p->cross_kv[i]);
    }
    if (st == VKF_OK) st = vkf_cmd_create(ctx, a->cmd_flags, &p->step);
    if (st == VKF_OK && !beams) st = rec_step(p->step, a, p, B, NULL, NULL);
    if (st == VKF_OK && beams) st = rec_step(p->step, a, p, B, p->kv_rows[0], p->kv_rows[1]);
    if (st == VKF_OK && beams) st = vkf_cmd_create(ctx, a->cmd_flags, &p->step2);
    if (st == VKF_OK && beams) st = rec_step(p->step2, a, p, B, p->kv_rows[1], p->kv_rows[0]);
    if (st != VKF_OK) {
        vkf_gen_plan_free(p);
        return st;
    }
    *out = p;
    return VKF_OK;
}

vkf_status vkf_gen_plan_build(vkf_arch *a, uint32_t sources, uint32_t beams, uint32_t S, uint32_t steps,
                              const vkf_generate_options *beam_opts, const vkf_generate_options *sampling,
                              const vkf_proc *proc, vkf_gen_plan **out)
{
    return build(a, sources, beams, S, steps, beam_opts, sampling, proc, false, out);
}

vkf_status vkf_gen_plan_build_slots(vkf_arch *a, uint32_t slots, uint32_t beams, uint32_t S, uint32_t steps,
                                    const vkf_proc *proc, const vkf_generate_options *sampling, vkf_gen_plan **out)
{
    *out = NULL;
    if (!slots || !S || !steps)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "slot plans: slots, source length and steps must be positive");
    if ((beams && (beams > VKF_MAX_BEAMS || slots % beams)) || (beams && sampling))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "slot plans: %u beams (1..%u) of %u slots (a multiple), "
                        "sampling with beams 0", beams, VKF_MAX_BEAMS, slots);
    return build(a, beams ? slots / beams : slots, beams, S, steps, NULL, sampling, proc, true, out);
}

vkf_status vkf_gen_plan_slot_step(vkf_arch *a, vkf_gen_plan *p, uint32_t rows, uint32_t parity, vkf_cmd **out)
{
    if (!p->slots || rows == 0 || rows > p->batch || (p->beams && rows % p->beams))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "slot plans: a step of %u rows (1..%u, a multiple of %u)", rows,
                        p->batch, p->beams ? p->beams : 1);
    vkf_cmd **cmd = p->beams && parity % 2 ? &p->slot_step2[rows - 1] : &p->slot_step[rows - 1];
    if (!*cmd) {
        VKF_TRY(vkf_cmd_create(a->ctx, a->cmd_flags, cmd));
        vkf_tensor *from = p->beams ? p->kv_rows[parity % 2] : NULL, *to = p->beams ? p->kv_rows[1 - parity % 2] : NULL;
        vkf_status st = rec_step(*cmd, a, p, rows, from, to);
        if (st != VKF_OK) {
            vkf_cmd_destroy(*cmd);
            *cmd = NULL;
            return st;
        }
    }
    *out = *cmd;
    return VKF_OK;
}

vkf_status vkf_gen_plan_encode_slots(vkf_arch *a, vkf_gen_plan *p, vkf_fwd_plan *enc, const uint32_t *slot)
{
    const vkf_arch_spec *s = &a->spec;
    uint64_t dm = s->d_model, kv = 2ull * s->heads * s->head_dim;
    if (!p->slots || enc->src_len > p->src_len || enc->batch > p->batch)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "slot plans: %u sources of %u tokens do not fit %u rows of %u",
                        enc->batch, enc->src_len, p->batch, p->src_len);
    for (uint32_t i = 0; i < enc->batch; i++)
        if (slot[i] >= p->sources)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "slot plans: slot %u of %u", slot[i], p->sources);
    vkf_cmd *cmd;
    VKF_TRY(vkf_cmd_create(a->ctx, a->cmd_flags, &cmd));
    /* memory (n * S_enc, d) = Encoder(sources) */
    vkf_status st = vkf_rec_encoder(cmd, a, enc);
    /* each layer's cross K/V of source i (S_enc, 2 inner) = memory_i · ckvᵀ, into rows
     * slot[i] * S .. of cross_kv (the rows past S_enc are never read: lengths mask
     * them); sources in consecutive slots as one batched product */
    for (uint32_t l = 0; st == VKF_OK && l < p->layers; l++) {
        const vkf_linear *w = &a->w.dec[l].ckv;
        for (uint32_t i = 0, run; st == VKF_OK && i < enc->batch; i += run) {
            for (run = 1; i + run < enc->batch && slot[i + run] == slot[i] + run;) run++;
            vkf_matmul_desc d;
            vkf_matmul_desc_init(&d);
            d.m = enc->src_len, d.n = w->out, d.k = w->in, d.batch[0] = run;
            d.a = (vkf_matrix_view){enc->memory, (uint64_t)i * enc->src_len * dm, 0, {enc->src_len * dm, 0}};
            d.b.tensor = w->w, d.b_scale = w->scale, d.bias = w->b;
            d.c = (vkf_matrix_view){p->cross_kv[l], (uint64_t)slot[i] * p->cross_keys * kv, 0,
                                    {p->cross_keys * kv, 0}};
            st = vkf_cmd_matmul(cmd, &d);
        }
    }
    if (st == VKF_OK) st = vkf_cmd_submit(cmd);
    vkf_cmd_destroy(cmd);
    return st;
}

vkf_status vkf_gen_plan_upload_call(vkf_gen_plan *p, const vkf_decode_call *c, uint32_t rows_per_source)
{
    if (!p->proc.on) return VKF_OK;
    if (p->proc.row_settings) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "a slot plan's row data is its caller's");
    uint32_t stride = 2 + p->proc.prefix_max, B = p->batch;
    int32_t *h = calloc((size_t)B * stride, sizeof *h);
    if (!h) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t r = 0; r < B; r++) {
        uint32_t b = r / rows_per_source;
        int32_t *row = h + (size_t)r * stride;
        row[0] = (int32_t)c->prefix_len[b], row[1] = (int32_t)c->limit[b];
        for (uint32_t j = 0; j < c->prefix_len[b]; j++) row[2 + j] = c->prefix[b][j];
    }
    vkf_status st = vkf_tensor_upload(p->row_data, h, (uint64_t)B * stride * sizeof *h);
    free(h);
    if (st == VKF_OK && c->n_lists) st = vkf_tensor_upload(p->lists, c->lists, (uint64_t)c->n_lists * sizeof *c->lists);
    return st;
}

/* Beam search with Hugging Face generate's semantics (num_beams, length_penalty,
 * early_stopping, num_return_sequences): sources x beams rows decode as one
 * batch; each step the GPU scores every (beam, token) pair (after the logits
 * processors where the call has any) and keeps each source's best
 * max(2, 1 + end ids) x K (beam_partial.comp, beam_topk.comp), the host does
 * the bookkeeping on those pairs (which beams go on, which hypotheses finish),
 * and the next step gathers each row's table of cache rows from its parent row
 * on the GPU (kv_gather.comp), which the decode attention reads through. A
 * source inside its target prefix has one candidate per beam, the prefix's next
 * id scored 0 (the processor kernel's teacher forcing), so its beams go on as
 * they were, beam 0 at 0 and the others at -1e9, as after generate()'s prefill. */
#include "decode/decode.h"
#include "ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Adds a finished hypothesis (ids[0..n)) to h: kept while it is among the best
 * `beams` (insertion order kept: ties resolve as Hugging Face's). */
static void hyp_add(vkf_beam_source *h, const int32_t *ids, uint32_t n, double sum_logprobs, uint32_t generated_len,
                    double length_penalty)
{
    const uint32_t beams = h->beams, steps = h->steps;
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
static bool hyp_is_done(const vkf_beam_source *h, double best_sum_logprobs, uint32_t generated_len,
                        const vkf_generate_options *o)
{
    if (h->count < h->beams) return false;
    if (o->early_stopping) return true;
    return h->worst >= best_sum_logprobs / pow((double)generated_len, o->length_penalty);
}

vkf_status vkf_beam_source_init(vkf_beam_source *h, uint32_t beams, uint32_t steps)
{
    *h = (vkf_beam_source){.beams = beams, .steps = steps, .worst = 1e9, .device_eos_step = UINT32_MAX};
    size_t n = (size_t)(beams + 1) * steps;
    h->score = malloc((beams + 1) * sizeof *h->score);
    h->len = malloc((beams + 1) * sizeof *h->len);
    h->ids = malloc(n * sizeof *h->ids);
    h->hist = malloc(n * sizeof *h->hist);
    h->next = malloc(n * sizeof *h->next);
    if (h->score && h->len && h->ids && h->hist && h->next) return VKF_OK;
    vkf_beam_source_free(h);
    return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for beam search");
}

void vkf_beam_source_free(vkf_beam_source *h)
{
    if (!h) return;
    free(h->score), free(h->len), free(h->ids), free(h->hist), free(h->next);
    h->score = NULL, h->len = NULL, h->ids = h->hist = h->next = NULL;
}

bool vkf_beam_source_step(vkf_beam_source *h, const vkf_arch *a, const vkf_decode_call *c, uint32_t b, uint32_t t,
                          float *cs, int32_t *ci, uint32_t NC, int32_t *parent, int32_t *tok, float *score)
{
    const vkf_generate_options *o = c->o;
    const uint32_t K = h->beams, V = a->spec.tgt_vocab, steps = h->steps;
    const uint32_t P = c->prefix_len[b];
    const bool last = t + 1 == P + c->limit[b];
    int32_t *scratch = h->next + (size_t)K * steps;
    if (last && o->forced_eos && !c->proc.on && t != h->device_eos_step) {
        /* forced_eos at a source's own last step (where the device does not force
         * it: a beam plan forces it only at its last step): eos after each beam, at the beam's score, best first
         * (equal scores: the lower beam), as the device's forced step ranks them */
        for (uint32_t rank = 0; rank < NC; rank++) ci[rank] = -1, cs[rank] = -INFINITY;
        for (uint32_t k = 0; k < K; k++) {
            uint32_t rank = 0;
            for (uint32_t j = 0; j < K; j++) rank += score[j] > score[k] || (score[j] == score[k] && j < k);
            if (!isfinite(score[k])) continue;
            ci[rank] = (int32_t)(k * V + (uint32_t)a->spec.eos_id), cs[rank] = score[k];
        }
        /* ranks of beams at -inf left no entry: close the gaps */
        uint32_t w = 0;
        for (uint32_t rank = 0; rank < NC; rank++)
            if (ci[rank] >= 0) ci[w] = ci[rank], cs[w++] = cs[rank];
        for (; w < NC; w++) ci[w] = -1, cs[w] = -INFINITY;
    }
    /* Hugging Face's beam search (transformers 5) on the candidates: those of the
     * first K that end in an end id (all of the first K at the source's last
     * step) finish, the first K without one go on */
    uint32_t n = 0;
    bool first_ends = true; /* the best candidate is an end id (or there is none) */
    for (uint32_t rank = 0; !h->done && rank < NC; rank++) {
        int32_t id = ci[rank];
        if (id < 0) break;
        uint32_t k = (uint32_t)id / V;
        int32_t v = (int32_t)((uint32_t)id % V);
        bool end = vkf_is_end(c, v);
        if (rank == 0) first_ends = end;
        if (rank < K && (end || last)) {
            memcpy(scratch, h->hist + (size_t)k * steps, (size_t)t * sizeof *scratch);
            scratch[t] = v;
            hyp_add(h, scratch, end ? t : t + 1, cs[rank], t + 1 - P, o->length_penalty);
        }
        if (!end && n < K) parent[n] = (int32_t)k, tok[n] = v, score[n] = cs[rank], n++;
    }
    for (; n < K; n++) /* a finished source (or too few candidates): beams that lead nowhere */
        parent[n] = (int32_t)n, tok[n] = a->spec.pad_id, score[n] = h->done ? 0.0f : -INFINITY;
    bool ends = false;
    if (!h->done && t >= P) {
        /* done once the best running beam cannot beat the worst finished one */
        ends = last || hyp_is_done(h, score[0], t + 1 - P, o);
        /* one beam is greedy decoding (its hypothesis is its running beam),
         * streamed step by step; a stop ends the source with its running ids */
        bool go = true;
        if (K == 1 && o->on_tokens && !first_ends) go = o->on_tokens(o->on_tokens_user, c->first + b, &tok[0], 1);
        if (!go && !ends) {
            memcpy(scratch, h->hist + (size_t)parent[0] * steps, (size_t)t * sizeof *scratch);
            scratch[t] = tok[0];
            h->count = 0, h->worst = 1e9;
            hyp_add(h, scratch, t + 1, score[0], t + 1 - P, o->length_penalty);
            ends = true;
        }
        if (ends) h->done = true;
    }
    /* each beam's ids: its parent's, then its id */
    for (uint32_t k = 0; k < K; k++) {
        memcpy(h->next + (size_t)k * steps, h->hist + (size_t)parent[k] * steps, (size_t)t * sizeof *h->next);
        h->next[(size_t)k * steps + t] = tok[k];
    }
    int32_t *swap = h->hist;
    h->hist = h->next, h->next = swap;
    return ends;
}

void vkf_beam_source_result(const vkf_beam_source *h, const vkf_arch *a, uint32_t P, uint32_t NB, uint32_t stride,
                            int32_t *out_ids, uint32_t *out_lengths, float *out_scores)
{
    /* best first (among equals the later one, as a stable sort popped from its end) */
    bool taken[VKF_MAX_BEAMS + 1] = {false};
    for (uint32_t j = 0; j < NB; j++) {
        int best = -1;
        for (uint32_t i = 0; i < h->count; i++)
            if (!taken[i] && (best < 0 || h->score[i] >= h->score[best])) best = (int)i;
        int32_t *dst = out_ids + (size_t)j * stride;
        uint32_t n = best < 0 || h->len[best] < P ? 0 : h->len[best] - P;
        const int32_t *src_ids = best < 0 ? NULL : h->ids + (size_t)best * h->steps + P;
        for (uint32_t i = 0; i < stride; i++) dst[i] = i < n ? src_ids[i] : a->spec.pad_id;
        out_lengths[j] = n;
        if (out_scores) out_scores[j] = best < 0 ? -INFINITY : (float)h->score[best];
        if (best >= 0) taken[best] = true;
    }
}

vkf_status vkf_decode_beam(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, const vkf_decode_call *c,
                           uint32_t stride, int32_t *out_ids, uint32_t *out_lengths, float *out_scores)
{
    const vkf_generate_options o = *c->o;
    uint32_t S = a->spec.audio_frames / 2;
    if (!c->features) VKF_TRY(vkf_check_sequences(a, src, a->spec.src_vocab, "source", &S));
    const uint32_t steps = c->steps, K = o.beams, NB = o.n_best;
    const uint32_t B = src->count, R = B * K;
    double t0 = vkf_now_ms();
    d->stats = (vkf_generate_stats){0};
    vkf_gen_plan *p = d->plan;
    if (!p || p->beams != K || p->sources != B || p->src_len != S || p->steps != steps || p->min_new != o.min_new ||
        p->forced_eos != o.forced_eos || p->renormalize != o.renormalize ||
        memcmp(&p->proc, &c->proc, sizeof c->proc) != 0) {
        vkf_gen_plan_free(d->plan);
        d->plan = NULL;
        VKF_TRY(vkf_gen_plan_build(a, B, K, S, steps, &o, NULL, &c->proc, &p));
        d->plan = p;
    }
    const uint32_t NC = p->n_cand; /* candidates per source and step */
    if (c->features) {
        VKF_TRY(vkf_upload_features(a, p->enc, c->features));
    } else {
        VKF_TRY(vkf_upload_ids(a, src, S, p->enc->src_ids, p->enc->src_mask, p->enc->src_lengths, p->enc->src_pos));
        VKF_TRY(vkf_upload_lowrank(a, p->enc, src));
    }
    VKF_TRY(vkf_gen_plan_upload_call(p, c, K));
    /* host state: each row's parent, id and score, each source's beams and hypotheses */
    int32_t *parent = malloc((size_t)R * sizeof *parent), *tok = malloc((size_t)R * sizeof *tok);
    float *score = malloc((size_t)R * sizeof *score), *cs = malloc((size_t)B * NC * sizeof *cs);
    int32_t *ci = malloc((size_t)B * NC * sizeof *ci);
    vkf_beam_source *hyps = calloc(B, sizeof *hyps);
    vkf_status st = parent && tok && score && cs && ci && hyps
                        ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for beam search");
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) {
        st = vkf_beam_source_init(&hyps[b], K, steps);
        hyps[b].device_eos_step = steps - 1; /* the plan's forced step, where forced_eos asks for one */
    }
    /* every row's source length; start: bos, beam 0 of each source alone (the others at -1e9) */
    for (uint32_t r = 0; st == VKF_OK && r < R; r++) {
        parent[r] = r < B ? (int32_t)src->lengths[r] : 0; /* cross-attention lengths: one per source (kv_div) */
        tok[r] = a->spec.decoder_start_id;
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
        if (st == VKF_OK) st = vkf_tensor_download(p->cand_scores, cs, (uint64_t)B * NC * sizeof *cs);
        if (st == VKF_OK) st = vkf_tensor_download(p->cand_ids, ci, (uint64_t)B * NC * sizeof *ci);
        if (st != VKF_OK) break;
        if (t == 0) d->stats.first_token_ms = vkf_now_ms() - t0;
        d->stats.steps = t + 1;
        for (uint32_t b = 0; b < B; b++) {
            int32_t local[VKF_MAX_BEAMS];
            finished += vkf_beam_source_step(&hyps[b], a, c, b, t, cs + (size_t)b * NC, ci + (size_t)b * NC, NC, local,
                                             tok + (size_t)b * K, score + (size_t)b * K);
            for (uint32_t k = 0; k < K; k++) parent[b * K + k] = (int32_t)(b * K) + local[k];
        }
        if (t + 1 < steps && finished < B && d->between_steps && !d->between_steps(d->between_user))
            st = vkf_fail(VKF_ERROR_STATE, "cancelled");
    }
    /* the n_best of each source, best first; the ids after the prefix */
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) {
        vkf_beam_source_result(&hyps[b], a, c->prefix_len[b], NB, stride, out_ids + (size_t)b * NB * stride,
                               out_lengths + b * NB, out_scores ? out_scores + b * NB : NULL);
        /* streaming of beam search: each source's best hypothesis at the end */
        if (K > 1 && o.on_tokens) o.on_tokens(o.on_tokens_user, c->first + b, out_ids + (size_t)b * NB * stride, out_lengths[b * NB]);
    }
    d->stats.plan_bytes = vkf_gen_plan_bytes(p);
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) d->stats.tokens += out_lengths[b * NB];
    d->stats.total_ms = vkf_now_ms() - t0;
    for (uint32_t b = 0; hyps && b < B; b++) vkf_beam_source_free(&hyps[b]);
    free(parent), free(tok), free(score), free(cs), free(ci), free(hyps);
    return st;
}

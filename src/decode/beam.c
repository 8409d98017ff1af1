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

#include <math.h>
#include <stdlib.h>
#include <string.h>

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


vkf_status vkf_decode_beam(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, const vkf_decode_call *c,
                           uint32_t stride, int32_t *out_ids, uint32_t *out_lengths, float *out_scores)
{
    const vkf_generate_options o = *c->o;
    uint32_t S = a->spec.audio_frames / 2;
    if (!c->features) VKF_TRY(vkf_check_sequences(a, src, a->spec.src_vocab, "source", &S));
    const uint32_t steps = c->steps, K = o.beams, NB = o.n_best;
    const uint32_t B = src->count, R = B * K, V = a->spec.tgt_vocab;
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
    /* host state: each row's tokens, and the finished hypotheses of each source */
    int32_t *hist = malloc((size_t)(R + 1) * steps * sizeof *hist), *next_hist = malloc((size_t)(R + 1) * steps * sizeof *hist);
    int32_t *parent = malloc((size_t)R * sizeof *parent), *tok = malloc((size_t)R * sizeof *tok);
    float *score = malloc((size_t)R * sizeof *score), *cs = malloc((size_t)B * NC * sizeof *cs);
    int32_t *ci = malloc((size_t)B * NC * sizeof *ci);
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
        /* Hugging Face's beam search (transformers 5) on each source's candidates:
         * those of the first K that end in an end id (all of the first K at the
         * source's last step) finish, the first K without one go on */
        for (uint32_t b = 0; b < B; b++) {
            hyp_set *h = &hyps[b];
            const uint32_t P = c->prefix_len[b];
            const bool last = t + 1 == P + c->limit[b];
            if (last && o.forced_eos && !c->proc.on && t + 1 < steps) {
                /* forced_eos at a source's own last step (the step forces it only at the
                 * plan's last): eos after each beam, at the beam's score, best first
                 * (equal scores: the lower beam), as the device's forced step ranks them */
                for (uint32_t rank = 0; rank < NC; rank++) ci[b * NC + rank] = -1, cs[b * NC + rank] = -INFINITY;
                for (uint32_t k = 0; k < K; k++) {
                    uint32_t rank = 0;
                    for (uint32_t j = 0; j < K; j++)
                        rank += score[b * K + j] > score[b * K + k] || (score[b * K + j] == score[b * K + k] && j < k);
                    if (!isfinite(score[b * K + k])) continue;
                    ci[b * NC + rank] = (int32_t)(k * V + (uint32_t)a->spec.eos_id), cs[b * NC + rank] = score[b * K + k];
                }
                /* ranks of beams at -inf left no entry: close the gaps */
                uint32_t w = 0;
                for (uint32_t rank = 0; rank < NC; rank++)
                    if (ci[b * NC + rank] >= 0) ci[b * NC + w] = ci[b * NC + rank], cs[b * NC + w++] = cs[b * NC + rank];
                for (; w < NC; w++) ci[b * NC + w] = -1, cs[b * NC + w] = -INFINITY;
            }
            uint32_t n = 0;
            bool first_ends = true; /* the best candidate is an end id (or there is none) */
            for (uint32_t rank = 0; !h->done && rank < NC; rank++) {
                int32_t id = ci[b * NC + rank];
                if (id < 0) break;
                uint32_t row = b * K + (uint32_t)id / V;
                int32_t v = (int32_t)((uint32_t)id % V);
                bool end = vkf_is_end(c, v);
                if (rank == 0) first_ends = end;
                if (rank < K && (end || last)) {
                    int32_t *ids = next_hist + (size_t)R * steps; /* scratch row */
                    memcpy(ids, hist + (size_t)row * steps, (size_t)t * sizeof *ids);
                    ids[t] = v;
                    hyp_add(h, K, steps, ids, end ? t : t + 1, cs[b * NC + rank], t + 1 - P, o.length_penalty);
                }
                if (!end && n < K) {
                    uint32_t r = b * K + n++;
                    parent[r] = (int32_t)row, tok[r] = v, score[r] = cs[b * NC + rank];
                }
            }
            for (; n < K; n++) { /* a finished source (or too few candidates): rows that lead nowhere */
                uint32_t r = b * K + n;
                parent[r] = (int32_t)r, tok[r] = a->spec.pad_id, score[r] = h->done ? 0.0f : -INFINITY;
            }
            if (h->done || t < P) continue;
            /* done once the best running beam cannot beat the worst finished one */
            bool ends = last || hyp_is_done(h, K, score[b * K], t + 1 - P, &o);
            /* one beam is greedy decoding (its hypothesis is its running beam),
             * streamed step by step; a stop ends the source with its running ids */
            bool go = true;
            if (K == 1 && o.on_tokens && !first_ends) go = o.on_tokens(o.on_tokens_user, c->first + b, &tok[b], 1);
            if (!go && !ends) {
                int32_t *ids = next_hist + (size_t)R * steps;
                memcpy(ids, hist + (size_t)parent[b] * steps, (size_t)t * sizeof *ids);
                ids[t] = tok[b];
                h->count = 0, h->worst = 1e9;
                hyp_add(h, K, steps, ids, t + 1, score[b], t + 1 - P, o.length_penalty);
                ends = true;
            }
            if (ends) h->done = true, finished++;
        }
        for (uint32_t r = 0; r < R; r++) {
            memcpy(next_hist + (size_t)r * steps, hist + (size_t)parent[r] * steps, (size_t)t * sizeof *hist);
            next_hist[(size_t)r * steps + t] = tok[r];
        }
        int32_t *swap = hist;
        hist = next_hist, next_hist = swap;
        if (t + 1 < steps && finished < B && d->between_steps && !d->between_steps(d->between_user))
            st = vkf_fail(VKF_ERROR_STATE, "cancelled");
    }
    /* the n_best of each source, best first (among equals the later one, as a stable sort popped from its end);
     * the ids after the prefix */
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) {
        hyp_set *h = &hyps[b];
        const uint32_t P = c->prefix_len[b];
        bool *taken = calloc(h->count + 1, sizeof *taken);
        if (!taken) {
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
            break;
        }
        for (uint32_t j = 0; j < NB; j++) {
            int best = -1;
            for (uint32_t i = 0; i < h->count; i++)
                if (!taken[i] && (best < 0 || h->score[i] >= h->score[best])) best = (int)i;
            int32_t *dst = out_ids + ((size_t)b * NB + j) * stride;
            uint32_t n = best < 0 || h->len[best] < P ? 0 : h->len[best] - P;
            const int32_t *src_ids = best < 0 ? NULL : h->ids + (size_t)best * steps + P;
            for (uint32_t i = 0; i < stride; i++) dst[i] = i < n ? src_ids[i] : a->spec.pad_id;
            out_lengths[b * NB + j] = n;
            if (out_scores) out_scores[b * NB + j] = best < 0 ? -INFINITY : (float)h->score[best];
            if (best >= 0) taken[best] = true;
        }
        free(taken);
        /* streaming of beam search: each source's best hypothesis at the end */
        if (K > 1 && o.on_tokens) o.on_tokens(o.on_tokens_user, c->first + b, out_ids + (size_t)b * NB * stride, out_lengths[b * NB]);
    }
    d->stats.plan_bytes = vkf_gen_plan_bytes(p);
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) d->stats.tokens += out_lengths[b * NB];
    d->stats.total_ms = vkf_now_ms() - t0;
    free(hist), free(next_hist), free(parent), free(tok), free(score), free(cs), free(ci), free(hyps);
    free(hscore), free(hlen), free(hids);
    return st;
}

/* Greedy decoding and sampling: every source's encoder run once, then one
 * submit of the recorded step per token, which picks each row's next token on
 * the GPU (argmax, or a seeded draw); the host reads only the chosen ids, to
 * know when every row has reached eos. */
#include "decode/decode.h"

#include <stdlib.h>

/* Whether a plan's sampling settings are those of o. */
static bool same_sampling(const vkf_gen_plan *p, const vkf_generate_options *o)
{
    if (!o) return !p->sample;
    return p->sample && p->sampling.temperature == o->temperature && p->sampling.top_k == o->top_k &&
           p->sampling.top_p == o->top_p && p->sampling.seed == o->seed && p->sampling.min_new == o->min_new &&
           p->sampling.forced_eos == o->forced_eos;
}


/* Greedy decoding, or sampling with `sampling`: one token per row and step. */
vkf_status vkf_decode_greedy(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, uint32_t max_new,
                             const vkf_generate_options *sampling, int32_t forced_bos, int32_t *out_ids,
                             uint32_t *out_lengths)
{
    uint32_t S;
    VKF_TRY(vkf_check_sequences(a, src, a->spec.src_vocab, "source", &S));
    if (max_new == 0 || max_new > a->spec.max_len)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate: max_new %u is outside 1..%u (the model's max_len)",
                        max_new, a->spec.max_len);
    uint32_t B = src->count;
    double t0 = vkf_now_ms();
    d->stats = (vkf_generate_stats){0};
    vkf_gen_plan *p = d->plan;
    if (!p || p->beams || p->batch != B || p->src_len != S || p->steps != max_new || !same_sampling(p, sampling)) {
        vkf_gen_plan_free(d->plan);
        d->plan = NULL;
        VKF_TRY(vkf_gen_plan_build(a, B, 0, S, max_new, NULL, sampling, &p));
        d->plan = p;
    }
    VKF_TRY(vkf_upload_ids(a, src, S, p->enc->src_ids, p->enc->src_mask, p->enc->src_lengths, p->enc->src_pos));
    VKF_TRY(vkf_upload_lowrank(a, p->enc, src));
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
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) ids[b] = a->spec.decoder_start_id;
    if (st == VKF_OK) st = vkf_tensor_upload(p->step_ids, ids, (uint64_t)B * sizeof *ids);
    /* Each step: one submit of the same command buffer; the host only reads the
     * chosen ids to know when every sequence has reached eos. */
    uint32_t steps = 0, finished = 0;
    while (st == VKF_OK && steps < max_new && finished < B) {
        st = vkf_cmd_submit(p->step);
        if (st == VKF_OK) st = vkf_tensor_download(p->step_ids, ids, (uint64_t)B * sizeof *ids);
        if (steps == 0) d->stats.first_token_ms = vkf_now_ms() - t0;
        if (steps == 0 && forced_bos >= 0 && st == VKF_OK) {
            /* forced_bos_token_id: the first token is the forced one, whatever the
             * step chose; the next step reads it */
            for (uint32_t b = 0; b < B; b++) ids[b] = forced_bos;
            st = vkf_tensor_upload(p->step_ids, ids, (uint64_t)B * sizeof *ids);
        }
        for (uint32_t b = 0; st == VKF_OK && b < B; b++) {
            if (done[b]) continue;
            if (ids[b] == a->spec.eos_id) done[b] = true, finished++;
            else out_lengths[b]++;
        }
        steps++;
    }
    if (st == VKF_OK) st = vkf_tensor_download(p->tokens, tokens, (uint64_t)B * max_new * sizeof *tokens);
    for (uint32_t b = 0; st == VKF_OK && forced_bos >= 0 && b < B; b++) tokens[(size_t)b * max_new] = forced_bos;
    for (uint32_t b = 0; st == VKF_OK && b < B; b++)
        for (uint32_t j = 0; j < max_new; j++)
            out_ids[(size_t)b * max_new + j] = j < out_lengths[b] ? tokens[(size_t)b * max_new + j] : a->spec.pad_id;
    d->stats.steps = steps;
    d->stats.plan_bytes = vkf_gen_plan_bytes(p);
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) d->stats.tokens += out_lengths[b];
    d->stats.total_ms = vkf_now_ms() - t0;
    free(ids), free(tokens), free(done);
    return st;
}


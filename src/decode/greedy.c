/* Greedy decoding and sampling: every source's encoder run once, then one
 * submit of the recorded step per token, which picks each row's next token on
 * the GPU (argmax, or a seeded draw, after the logits processors where the
 * call has any); the host reads only the chosen ids, to know when every row has
 * ended and to hand new tokens to a streaming callback. Rows inside their
 * target prefix are teacher-forced by the processor kernel. */
#include "decode/decode.h"

#include <stdlib.h>
#include <string.h>

/* Whether a plan's sampling settings are those of o (NULL: argmax). */
static bool same_sampling(const vkf_gen_plan *p, const vkf_generate_options *o)
{
    if (!o) return !p->sample;
    return p->sample && p->sampling.temperature == o->temperature && p->sampling.top_k == o->top_k &&
           p->sampling.top_p == o->top_p && p->sampling.seed == o->seed && p->sampling.min_new == o->min_new &&
           p->sampling.forced_eos == o->forced_eos;
}

/* Greedy decoding, or sampling where c->o asks for it: one token per row and step. */
vkf_status vkf_decode_greedy(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, const vkf_decode_call *c,
                             uint32_t stride, int32_t *out_ids, uint32_t *out_lengths)
{
    uint32_t S = a->spec.audio_frames / 2;
    if (!c->features) VKF_TRY(vkf_check_sequences(a, src, a->spec.src_vocab, "source", &S));
    const vkf_generate_options *o = c->o, *sampling = o && o->sample ? o : NULL;
    const uint32_t steps = c->steps, B = src->count;
    if (steps == 0 || steps > a->spec.max_len)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate: max_new %u is outside 1..%u (the model's max_len)",
                        steps, a->spec.max_len);
    double t0 = vkf_now_ms();
    d->stats = (vkf_generate_stats){0};
    vkf_gen_plan *p = d->plan;
    if (!p || p->beams || p->batch != B || p->src_len != S || p->steps != steps || !same_sampling(p, sampling) ||
        memcmp(&p->proc, &c->proc, sizeof c->proc) != 0) {
        vkf_gen_plan_free(d->plan);
        d->plan = NULL;
        VKF_TRY(vkf_gen_plan_build(a, B, 0, S, steps, NULL, sampling, &c->proc, &p));
        d->plan = p;
    }
    if (c->features) {
        VKF_TRY(vkf_upload_features(a, p->enc, c->features));
    } else {
        VKF_TRY(vkf_upload_ids(a, src, S, p->enc->src_ids, p->enc->src_mask, p->enc->src_lengths, p->enc->src_pos));
        VKF_TRY(vkf_upload_lowrank(a, p->enc, src));
    }
    VKF_TRY(vkf_gen_plan_upload_call(p, c, 1));
    int32_t *ids = malloc((size_t)B * sizeof *ids);
    int32_t *tokens = malloc((size_t)B * steps * sizeof *tokens);
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
     * chosen ids to know when every sequence has ended (an end id, its limit, or
     * the streaming callback's stop). */
    uint32_t t = 0, finished = 0;
    while (st == VKF_OK && t < steps && finished < B) {
        st = vkf_cmd_submit(p->step);
        if (st == VKF_OK) st = vkf_tensor_download(p->step_ids, ids, (uint64_t)B * sizeof *ids);
        if (t == 0) d->stats.first_token_ms = vkf_now_ms() - t0;
        for (uint32_t b = 0; st == VKF_OK && b < B; b++) {
            if (done[b] || t < c->prefix_len[b]) continue; /* ended, or a prefix id */
            /* a row's last step before the plan's last one: forced_eos ends it (the
             * processor forces eos on the device where it runs; else here) */
            bool end = vkf_is_end(c, ids[b]) ||
                       (o && o->forced_eos && !c->proc.on && out_lengths[b] + 1 == c->limit[b]);
            if (!end) {
                out_lengths[b]++;
                if (o && o->on_tokens && !o->on_tokens(o->on_tokens_user, c->first + b, &ids[b], 1)) end = true;
            }
            if (end || out_lengths[b] == c->limit[b]) done[b] = true, finished++;
        }
        t++;
        if (st == VKF_OK && t < steps && finished < B && d->between_steps && !d->between_steps(d->between_user))
            st = vkf_fail(VKF_ERROR_STATE, "cancelled");
    }
    if (st == VKF_OK) st = vkf_tensor_download(p->tokens, tokens, (uint64_t)B * steps * sizeof *tokens);
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) {
        const int32_t *row = tokens + (size_t)b * steps + c->prefix_len[b];
        for (uint32_t j = 0; j < stride; j++) out_ids[(size_t)b * stride + j] = j < out_lengths[b] ? row[j] : a->spec.pad_id;
    }
    d->stats.steps = t;
    d->stats.plan_bytes = vkf_gen_plan_bytes(p);
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) d->stats.tokens += out_lengths[b];
    d->stats.total_ms = vkf_now_ms() - t0;
    free(ids), free(tokens), free(done);
    return st;
}

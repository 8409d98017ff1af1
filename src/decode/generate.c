/* A generation call over a batch of sources: the options checked, then greedy
 * decoding, sampling or beam search of every source at once, in chunks where
 * one batch would need a tensor past the device's limits (vkf_run_chunked), the
 * call's stats summed over the chunks. */
#include "decode/decode.h"

#include <math.h>

typedef struct generate_call {
    vkf_arch *a;
    vkf_decoder *d;
    const vkf_sequences *src;
    uint32_t max_new;
    const vkf_generate_options *o;      /* NULL: greedy (vkf_model_generate) */
    bool beam;
    int32_t *out_ids;
    uint32_t *out_lengths;
    float *out_scores;
    vkf_generate_stats total;           /* over the chunks run so far */
    uint32_t chunks;
} generate_call;

/* The sources [first, first + count) of a generation as one batch; the call's
 * stats sum the chunks' tokens and times. */
static vkf_status generate_chunk(void *user, uint32_t first, uint32_t count)
{
    generate_call *g = user;
    vkf_decoder *d = g->d;
    uint32_t nb = g->beam ? g->o->n_best : 1;
    vkf_sequences part = {count, g->src->ids + first, g->src->lengths + first};
    size_t rows = (size_t)first * nb;
    const vkf_generate_options *sampling = g->o && g->o->sample ? g->o : NULL;
    vkf_status st = g->beam ? vkf_decode_beam(g->a, d, &part, g->o, g->out_ids + rows * g->max_new,
                                              g->out_lengths + rows, g->out_scores ? g->out_scores + rows : NULL)
                            : vkf_decode_greedy(g->a, d, &part, g->max_new, sampling,
                                                g->o && g->o->forced_bos ? g->o->forced_bos_id : -1,
                                                g->out_ids + rows * g->max_new, g->out_lengths + rows);
    VKF_TRY(st); /* a plan too large was never kept: greedy and beam free the old one first */
    vkf_generate_stats *t = &g->total;
    if (g->chunks++ == 0) t->first_token_ms = d->stats.first_token_ms;
    t->tokens += d->stats.tokens;
    t->total_ms += d->stats.total_ms;
    if (d->stats.steps > t->steps) t->steps = d->stats.steps;
    if (d->stats.plan_bytes > t->plan_bytes) t->plan_bytes = d->stats.plan_bytes;
    return VKF_OK;
}

vkf_status vkf_decode_generate(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, uint32_t max_new,
                               const vkf_generate_options *o, int32_t *out_ids, uint32_t *out_lengths,
                               float *out_scores)
{
    bool beam = false;
    if (o) {
        VKF_TRY(vkf_decode_check_options(a, o));
        max_new = o->max_new ? o->max_new : a->spec.max_len;
        beam = !o->sample;
    } else if (max_new == 0 || max_new > a->spec.max_len) {
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate: max_new %u is outside 1..%u (the model's max_len)",
                        max_new, a->spec.max_len);
    }
    /* the whole batch checked first, so a bad source is named by its index in the call */
    uint32_t S;
    VKF_TRY(vkf_check_sequences(a, src, a->spec.src_vocab, "source", &S));
    generate_call g = {a, d, src, max_new, o, beam, out_ids, out_lengths, out_scores, {0}, 0};
    vkf_status st = vkf_run_chunked(a->ctx, &d->chunks, src->count, (const uint32_t[2]){S, max_new}, "generation of",
                                    generate_chunk, &g);
    if (st == VKF_OK && g.chunks > 1) d->stats = g.total;
    for (uint32_t b = 0; st == VKF_OK && o && o->sample && out_scores && b < src->count; b++) out_scores[b] = NAN;
    return st;
}

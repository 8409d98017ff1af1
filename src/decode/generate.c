/* A generation call over a batch of sources: the options checked, then greedy
 * decoding, sampling or beam search of every source at once, in chunks where
 * one batch would need a tensor past the device's limits (vkf_run_chunked), the
 * call's stats summed over the chunks; and vkf_model_generate_batched, which
 * sorts many sources by length and decodes them in batches of a token budget. */
#include "decode/decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct generate_call {
    vkf_arch *a;
    vkf_decoder *d;
    const vkf_sequences *src;
    uint32_t max_new;                   /* 0: each source as far as the positions go (options' max_new 0) */
    uint32_t stride;                    /* ids per row of out_ids */
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
    vkf_decode_call c;
    VKF_TRY(vkf_decode_call_make(g->a, d, g->o, &part, first, g->max_new, &c));
    vkf_status st = g->beam ? vkf_decode_beam(g->a, d, &part, &c, g->stride, g->out_ids + rows * g->stride,
                                              g->out_lengths + rows, g->out_scores ? g->out_scores + rows : NULL)
                            : vkf_decode_greedy(g->a, d, &part, &c, g->stride, g->out_ids + rows * g->stride,
                                                g->out_lengths + rows);
    vkf_decode_call_free(&c);
    VKF_TRY(st); /* a plan too large was never kept: greedy and beam free the old one first */
    vkf_generate_stats *t = &g->total;
    if (g->chunks++ == 0) t->first_token_ms = d->stats.first_token_ms;
    t->tokens += d->stats.tokens;
    t->total_ms += d->stats.total_ms;
    if (d->stats.steps > t->steps) t->steps = d->stats.steps;
    if (d->stats.plan_bytes > t->plan_bytes) t->plan_bytes = d->stats.plan_bytes;
    return VKF_OK;
}

/* The generation of src (checked options; NULL: greedy for max_new tokens) in chunks. */
static vkf_status generate_part(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src,
                                const vkf_generate_options *o, uint32_t max_new, int32_t *out_ids,
                                uint32_t *out_lengths, float *out_scores)
{
    uint32_t S, prefix_max = 0;
    VKF_TRY(vkf_check_sequences(a, src, a->spec.src_vocab, "source", &S));
    for (uint32_t i = 0; o && o->target_prefix && i < o->target_prefix->count; i++)
        if (o->target_prefix->lengths[i] > prefix_max) prefix_max = o->target_prefix->lengths[i];
    uint32_t stride = o ? (o->max_new ? o->max_new : a->spec.max_len) : max_new;
    generate_call g = {a, d, src, o ? o->max_new : max_new, stride, o, o && !o->sample, out_ids, out_lengths,
                       out_scores, {0}, 0};
    uint32_t steps = o ? (o->max_new ? o->max_new + prefix_max : a->spec.max_len) : max_new;
    vkf_status st = vkf_run_chunked(a->ctx, &d->chunks, src->count, (const uint32_t[2]){S, steps}, "generation of",
                                    generate_chunk, &g);
    if (st == VKF_OK && g.chunks > 1) d->stats = g.total;
    for (uint32_t b = 0; st == VKF_OK && o && o->sample && out_scores && b < src->count; b++) out_scores[b] = NAN;
    return st;
}

vkf_status vkf_decode_generate(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, uint32_t max_new,
                               const vkf_generate_options *o, int32_t *out_ids, uint32_t *out_lengths,
                               float *out_scores)
{
    uint32_t S;
    if (o) {
        VKF_TRY(vkf_decode_check_options(a, o, src ? src->count : 0));
    } else if (max_new == 0 || max_new > a->spec.max_len) {
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate: max_new %u is outside 1..%u (the model's max_len)",
                        max_new, a->spec.max_len);
    }
    /* the whole batch checked first, so a bad source is named by its index in the call */
    VKF_TRY(vkf_check_sequences(a, src, a->spec.src_vocab, "source", &S));
    return generate_part(a, d, src, o, max_new, out_ids, out_lengths, out_scores);
}

/* ------------------------------------------------------------------ sorted batches */

/* Sorting sources by length: longest first, equal lengths in the call's order. */
typedef struct by_length {
    uint32_t index, length;
} by_length;

static int longer_first(const void *x, const void *y)
{
    const by_length *a = x, *b = y;
    if (a->length != b->length) return a->length < b->length ? 1 : -1;
    return (a->index > b->index) - (a->index < b->index);
}

/* The streaming callback of a batch, its sources renumbered to the call's. */
typedef struct batch_stream {
    const vkf_generate_options *o;      /* the caller's */
    const uint32_t *index;              /* (batch) the call's index of each source of the batch */
} batch_stream;

static bool stream_batch(void *user, uint32_t source, const int32_t *ids, uint32_t count)
{
    const batch_stream *s = user;
    return s->o->on_tokens(s->o->on_tokens_user, s->index[source], ids, count);
}

vkf_status vkf_decode_generate_batched(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src,
                                       const vkf_generate_options *o, uint32_t max_batch_tokens, int32_t *out_ids,
                                       uint32_t *out_lengths, float *out_scores)
{
    uint32_t S;
    VKF_TRY(vkf_decode_check_options(a, o, src ? src->count : 0));
    VKF_TRY(vkf_check_sequences(a, src, a->spec.src_vocab, "source", &S));
    const uint32_t N = src->count, nb = o->sample ? 1 : o->n_best, stride = o->max_new ? o->max_new : a->spec.max_len;
    by_length *order = malloc((size_t)N * sizeof *order);
    const int32_t **ids = malloc((size_t)N * sizeof *ids);
    uint32_t *lengths = malloc((size_t)N * sizeof *lengths), *index = malloc((size_t)N * sizeof *index);
    const int32_t **pre_ids = malloc((size_t)N * sizeof *pre_ids);
    uint32_t *pre_lengths = malloc((size_t)N * sizeof *pre_lengths);
    int32_t *b_ids = malloc((size_t)N * nb * stride * sizeof *b_ids);
    uint32_t *b_lengths = malloc((size_t)N * nb * sizeof *b_lengths);
    float *b_scores = malloc((size_t)N * nb * sizeof *b_scores);
    vkf_status st = order && ids && lengths && index && pre_ids && pre_lengths && b_ids && b_lengths && b_scores
                        ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %u sources", N);
    for (uint32_t i = 0; st == VKF_OK && i < N; i++) order[i] = (by_length){i, src->lengths[i]};
    if (st == VKF_OK) qsort(order, N, sizeof *order, longer_first);
    vkf_generate_stats total = {0};
    uint64_t tokens = 0;
    for (uint32_t first = 0; st == VKF_OK && first < N;) {
        /* as many sources as keep count x longest within the budget (the first is the longest) */
        uint32_t longest = order[first].length, n = 1;
        while (max_batch_tokens && first + n < N && (uint64_t)(n + 1) * longest <= max_batch_tokens) n++;
        if (!max_batch_tokens) n = N - first;
        for (uint32_t j = 0; j < n; j++) {
            uint32_t i = order[first + j].index;
            index[j] = i, ids[j] = src->ids[i], lengths[j] = src->lengths[i];
            const vkf_sequences *pre = o->target_prefix;
            if (pre) {
                uint32_t k = pre->count > 1 ? i : 0;
                pre_ids[j] = pre->ids ? pre->ids[k] : NULL, pre_lengths[j] = pre->lengths[k];
            }
        }
        vkf_sequences part = {n, ids, lengths}, prefix = {n, pre_ids, pre_lengths};
        vkf_generate_options bo = *o;
        if (o->target_prefix && o->target_prefix->count > 1) bo.target_prefix = &prefix;
        batch_stream bs = {o, index};
        if (o->on_tokens) bo.on_tokens = stream_batch, bo.on_tokens_user = &bs;
        st = generate_part(a, d, &part, &bo, 0, b_ids, b_lengths, b_scores);
        for (uint32_t j = 0; st == VKF_OK && j < n; j++) {
            uint32_t i = index[j];
            memcpy(out_ids + (size_t)i * nb * stride, b_ids + (size_t)j * nb * stride, (size_t)nb * stride * sizeof *out_ids);
            memcpy(out_lengths + (size_t)i * nb, b_lengths + (size_t)j * nb, (size_t)nb * sizeof *out_lengths);
            if (out_scores) memcpy(out_scores + (size_t)i * nb, b_scores + (size_t)j * nb, (size_t)nb * sizeof *out_scores);
            tokens += b_lengths[(size_t)j * nb];
        }
        if (st == VKF_OK) {
            if (first == 0) total.first_token_ms = d->stats.first_token_ms;
            total.tokens += d->stats.tokens, total.total_ms += d->stats.total_ms, total.steps += d->stats.steps;
            if (d->stats.plan_bytes > total.plan_bytes) total.plan_bytes = d->stats.plan_bytes;
        }
        first += n;
        if (st == VKF_OK && o->on_progress) o->on_progress(o->on_progress_user, first, N, tokens);
    }
    if (st == VKF_OK) d->stats = total;
    free(order), free(ids), free(lengths), free(index), free(pre_ids), free(pre_lengths), free(b_ids), free(b_lengths);
    free(b_scores);
    return st;
}

/* ------------------------------------------------------------------ audio sources */

vkf_status vkf_decode_generate_audio(vkf_arch *a, vkf_decoder *d, const float *features, uint32_t count,
                                     const vkf_generate_options *o, const vkf_audio_rules *rules, int32_t *out_ids,
                                     uint32_t *out_lengths, float *out_scores)
{
    static const char fn[] = "generation from audio";
    VKF_TRY(vkf_check_features(a, features, count, fn));
    VKF_TRY(vkf_decode_check_options(a, o, count));
    const uint32_t V = a->spec.tgt_vocab;
    if (rules && rules->ts_begin) {
        if (rules->ts_begin < 0 || (uint32_t)rules->ts_begin >= V || rules->no_timestamps < 0 ||
            (uint32_t)rules->no_timestamps >= V || rules->eos < 0 || (uint32_t)rules->eos >= V)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: timestamp ids outside the vocabulary of %u", fn, V);
    }
    for (uint32_t i = 0; rules && i < rules->n_begin; i++)
        if (rules->begin_suppress[i] < 0 || (uint32_t)rules->begin_suppress[i] >= V)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: begin-suppressed id %d is outside the vocabulary of %u", fn,
                            rules->begin_suppress[i], V);
    uint32_t S = a->spec.audio_frames / 2;
    uint32_t *lengths = malloc((size_t)count * sizeof *lengths);
    if (!lengths) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < count; i++) lengths[i] = S;
    vkf_sequences src = {count, NULL, lengths};
    vkf_decode_call c;
    vkf_status st = vkf_decode_call_make(a, d, o, &src, 0, o->max_new, &c);
    if (st != VKF_OK) {
        free(lengths);
        return st;
    }
    c.features = features;
    if (rules && (rules->n_begin || rules->ts_begin)) {
        vkf_proc *p = &c.proc;
        int32_t *l = realloc(c.lists, ((size_t)c.n_lists + rules->n_begin + 1) * sizeof *l);
        if (!l) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        if (st == VKF_OK) {
            c.lists = l;
            for (uint32_t i = 0; i < rules->n_begin; i++) c.lists[c.n_lists++] = rules->begin_suppress[i];
            p->n_begin = rules->n_begin;
            p->ts_begin = rules->ts_begin, p->no_timestamps = rules->no_timestamps;
            p->ts_max_initial = rules->max_initial, p->ts_eos = rules->eos;
            p->on = true;
        }
    }
    uint32_t stride = o->max_new ? o->max_new : a->spec.max_len;
    if (st == VKF_OK)
        st = o->sample || o->beams == 1 ? vkf_decode_greedy(a, d, &src, &c, stride, out_ids, out_lengths)
                                        : vkf_decode_beam(a, d, &src, &c, stride, out_ids, out_lengths, out_scores);
    vkf_decode_call_free(&c);
    free(lengths);
    return st;
}

/* Generation options: their checks against a model (the defaults, which every
 * family's generation defaults start from, are the families layer's:
 * src/families/languages.c), and what one call (a chunk of sources) makes of them for the
 * decode step: the logits processor's settings, each source's prefix and
 * length limit, and the lists the processor reads on the device. */
#include "decode/decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Whether id is one of the call's end ids. */
bool vkf_is_end(const vkf_decode_call *c, int32_t id)
{
    for (uint32_t i = 0; i < c->n_end; i++)
        if (c->end_ids[i] == id) return true;
    return false;
}

/* The end ids the options ask for: end_ids, or the model's eos alone. */
static uint32_t end_ids(const vkf_arch *a, const vkf_generate_options *o, int32_t *out)
{
    if (!o || o->n_end_ids == 0 || !o->end_ids) {
        out[0] = a->spec.eos_id;
        return 1;
    }
    for (uint32_t i = 0; i < o->n_end_ids; i++) out[i] = o->end_ids[i];
    return o->n_end_ids;
}

/* Ids of a list all inside the target vocabulary, or an error naming the first one outside. */
static vkf_status check_ids(const vkf_arch *a, const int32_t *ids, uint32_t n, const char *what, uint32_t index)
{
    for (uint32_t j = 0; j < n; j++)
        if (ids[j] < 0 || (uint32_t)ids[j] >= a->spec.tgt_vocab)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s %u: id %d at position %u is outside the target vocabulary "
                            "(0..%u)", what, index, ids[j], j, a->spec.tgt_vocab - 1);
    return VKF_OK;
}

vkf_status vkf_decode_check_options(const vkf_arch *a, const vkf_generate_options *o, uint32_t sources)
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
    if (o->max_new > a->spec.max_len)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "max_new %u is outside 1..%u (the model's max_len)", o->max_new,
                        a->spec.max_len);
    if (!isfinite(o->length_penalty))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "length_penalty must be a finite number");
    if ((uint64_t)o->beams * a->spec.tgt_vocab > INT32_MAX)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "beams x tgt_vocab_size must stay below 2^31");
    if (o->forced_bos && (o->forced_bos_id < 0 || (uint32_t)o->forced_bos_id >= a->spec.tgt_vocab ||
                          o->forced_bos_id == a->spec.eos_id))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "forced_bos_id %d is outside the target vocabulary or is eos",
                        o->forced_bos_id);
    if (!(o->repetition_penalty > 0) || !isfinite(o->repetition_penalty))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "repetition_penalty %g must be a number above 0 (1 is off)",
                        (double)o->repetition_penalty);
    if (o->no_repeat_ngram > a->spec.max_len)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "no_repeat_ngram %u is longer than max_len %u", o->no_repeat_ngram,
                        a->spec.max_len);
    if (!(o->max_new_factor >= 0) || !isfinite(o->max_new_factor))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "max_new_factor %g must be 0 (off) or above", (double)o->max_new_factor);
    if (o->n_suppress && !o->suppress_ids)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "n_suppress is %u but suppress_ids is NULL", o->n_suppress);
    VKF_TRY(check_ids(a, o->suppress_ids, o->n_suppress, "suppress_ids", 0));
    if (o->n_end_ids > VKF_MAX_END_IDS || (o->n_end_ids && !o->end_ids))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "n_end_ids %u: at most %u end ids, and end_ids given", o->n_end_ids,
                        VKF_MAX_END_IDS);
    VKF_TRY(check_ids(a, o->end_ids, o->n_end_ids, "end_ids", 0));
    int32_t ends[VKF_MAX_END_IDS];
    uint32_t n_end = end_ids(a, o, ends);
    uint32_t keep = (n_end + 1 > 2 ? n_end + 1 : 2) * o->beams;
    if (!o->sample && o->beams > 1 && keep > VKF_MAX_CAND)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%u end ids with %u beams keep %u candidates per step; at most %u are "
                        "implemented", n_end, o->beams, keep, VKF_MAX_CAND);
    if (o->bad_sequences) {
        const vkf_sequences *b = o->bad_sequences;
        if (b->count && (!b->ids || !b->lengths))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "bad_sequences: ids or lengths is NULL");
        for (uint32_t i = 0; i < b->count; i++) {
            if (b->lengths[i] == 0 || b->lengths[i] > a->spec.max_len || !b->ids[i])
                return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "bad sequence %u must hold 1..%u ids", i, a->spec.max_len);
            VKF_TRY(check_ids(a, b->ids[i], b->lengths[i], "bad sequence", i));
        }
    }
    uint32_t max_new = o->max_new ? o->max_new : a->spec.max_len;
    if (o->target_prefix) {
        const vkf_sequences *p = o->target_prefix;
        if (p->count != 1 && p->count != sources)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "target_prefix holds %u prefixes: 1 (for every source) or one "
                            "per source (%u)", p->count, sources);
        if (!p->lengths || (!p->ids && p->count))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "target_prefix: ids or lengths is NULL");
        for (uint32_t i = 0; i < p->count; i++) {
            uint32_t n = p->lengths[i];
            if (n && !p->ids[i]) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "target prefix %u is NULL", i);
            if ((uint64_t)n + (o->max_new ? o->max_new : 1) > a->spec.max_len)
                return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "target prefix %u has %u tokens; with max_new %u that "
                                "passes the model's max_len %u", i, n, o->max_new ? o->max_new : 1, a->spec.max_len);
            VKF_TRY(check_ids(a, p->ids[i], n, "target prefix", i));
            for (uint32_t j = 0; j < n; j++)
                for (uint32_t e = 0; e < n_end; e++)
                    if (p->ids[i][j] == ends[e])
                        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "target prefix %u holds the end id %d (at position "
                                        "%u): it would end the sequence", i, ends[e], j);
        }
    }
    if (o->min_new > max_new)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "min_new %u is more than max_new %u", o->min_new, max_new);
    return VKF_OK;
}

void vkf_decode_call_free(vkf_decode_call *c)
{
    free(c->prefix_len);
    free(c->prefix);
    free(c->limit);
    free(c->lists);
    memset(c, 0, sizeof *c);
}

vkf_status vkf_decode_call_make(const vkf_arch *a, const vkf_decoder *d, const vkf_generate_options *o,
                                const vkf_sequences *src, uint32_t first, uint32_t max_new, vkf_decode_call *c)
{
    memset(c, 0, sizeof *c);
    uint32_t B = src->count;
    c->o = o;
    c->first = first;
    c->n_end = end_ids(a, o, c->end_ids);
    c->prefix_len = calloc(B, sizeof *c->prefix_len);
    c->prefix = calloc(B, sizeof *c->prefix);
    c->limit = calloc(B, sizeof *c->limit);
    if (!c->prefix_len || !c->prefix || !c->limit) {
        vkf_decode_call_free(c);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    vkf_proc *p = &c->proc;
    p->penalty = 1.0f, p->forced_bos = -1;
    bool per_row = false;
    for (uint32_t b = 0; b < B; b++) {
        const vkf_sequences *pre = o ? o->target_prefix : NULL; /* one per source of the call, or one for all */
        uint32_t i = pre && pre->count > 1 ? first + b : 0;
        c->prefix_len[b] = pre ? pre->lengths[i] : 0;
        c->prefix[b] = pre && pre->lengths[i] ? pre->ids[i] : NULL;
        /* max_new 0: as far as the model's positions go after the prefix */
        c->limit[b] = max_new ? max_new : a->spec.max_len - c->prefix_len[b];
        if (o && o->max_new_factor > 0) {
            double n = ceil((double)o->max_new_factor * src->lengths[b]);
            if (n < 1) n = 1;
            if (n < c->limit[b]) c->limit[b] = (uint32_t)n;
        }
        if (c->prefix_len[b] > p->prefix_max) p->prefix_max = c->prefix_len[b];
        if (c->prefix_len[b] + c->limit[b] > c->steps) c->steps = c->prefix_len[b] + c->limit[b];
        /* a prefix needs the processor (teacher forcing, per-row min_new); per-row
         * limits alone do not: the host forces eos at a row's last step */
        per_row |= c->prefix_len[b] > 0;
    }
    if (!o) return VKF_OK; /* plain greedy decoding */
    p->penalty = o->repetition_penalty;
    p->ngram = o->no_repeat_ngram;
    p->min_new = o->min_new;
    p->forced_eos = o->forced_eos;
    p->eos = a->spec.eos_id;
    if (o->forced_bos) p->forced_bos = o->forced_bos_id;
    p->n_suppress = o->n_suppress;
    p->n_end = c->n_end;
    /* bad sequences on the device: [length, ids...] each; a lone end id is ignored */
    const vkf_sequences *bad = o->bad_sequences;
    uint64_t n_bad = 0;
    for (uint32_t i = 0; bad && i < bad->count; i++)
        if (!(bad->lengths[i] == 1 && vkf_is_end(c, bad->ids[i][0]))) n_bad += 1 + bad->lengths[i];
    if (n_bad > (1u << 24)) {
        vkf_decode_call_free(c);
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "bad_sequences hold more than 2^24 ids");
    }
    p->on = p->penalty != 1.0f || p->ngram || p->n_suppress || n_bad || c->n_end > 1 ||
            c->end_ids[0] != a->spec.eos_id || p->forced_bos >= 0 || per_row;
    /* beam search's processors work on log-probabilities of every id: the
     * model's banned ids are in the log-softmax and banned after it, as
     * generate()'s bad_words_ids are (a -inf generator bias would leave them out) */
    p->unbanned_generator = p->on && !o->sample && o->beams > 1 && d && d->n_banned;
    if (p->unbanned_generator) n_bad += 2 * (uint64_t)d->n_banned;
    p->n_bad = (uint32_t)n_bad;
    /* the lists the processor reads: suppressed ids, end ids, bad sequences */
    c->n_lists = p->n_suppress + p->n_end + p->n_bad;
    c->lists = malloc((c->n_lists ? c->n_lists : 1) * sizeof *c->lists);
    if (!c->lists) {
        vkf_decode_call_free(c);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < p->n_suppress; i++) c->lists[k++] = o->suppress_ids[i];
    for (uint32_t i = 0; i < p->n_end; i++) c->lists[k++] = c->end_ids[i];
    for (uint32_t i = 0; bad && i < bad->count; i++) {
        if (bad->lengths[i] == 1 && vkf_is_end(c, bad->ids[i][0])) continue;
        c->lists[k++] = (int32_t)bad->lengths[i];
        for (uint32_t j = 0; j < bad->lengths[i]; j++) c->lists[k++] = bad->ids[i][j];
    }
    for (uint32_t i = 0; p->unbanned_generator && i < d->n_banned; i++) c->lists[k++] = 1, c->lists[k++] = d->banned[i];
    return VKF_OK;
}

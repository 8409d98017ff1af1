/* Scoring (vkf_model_score, CTranslate2's score_batch): the log-probability of
 * given targets, token by token. Each batch is one teacher-forced forward pass
 * of the arch (decoder input: the start id and the target; labels: the target
 * and eos), then logprob_gather.comp takes log_softmax(logits)[label] of every
 * row on the device, so only (batch, T + 1) floats come back to the host. In
 * chunks where one batch would pass the device's limits. */
#include "decode/decode.h"

#include <stdlib.h>
#include <string.h>

typedef struct score_call {
    vkf_arch *a;
    const vkf_sequences *src, *tgt;
    float *out;
    uint32_t width;                     /* T + 1: values per row of out */
} score_call;

/* The pairs [first, first + count) as one batch: forward, gather, download. */
static vkf_status score_chunk(void *user, uint32_t first, uint32_t count)
{
    const score_call *c = user;
    vkf_arch *a = c->a;
    const vkf_arch_spec *s = &a->spec;
    uint32_t S = 0, T = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (c->src->lengths[first + i] > S) S = c->src->lengths[first + i];
        if (c->tgt->lengths[first + i] + 1 > T) T = c->tgt->lengths[first + i] + 1;
    }
    /* decoder inputs [start, tgt...] and labels [tgt..., eos] (-1: padding), (count, T) */
    size_t cells = (size_t)count * T;
    int32_t *in = malloc(cells * sizeof *in), *labels = malloc(cells * sizeof *labels);
    const int32_t **rows = malloc((size_t)count * sizeof *rows);
    uint32_t *lengths = malloc((size_t)count * sizeof *lengths);
    float *lp = malloc(cells * sizeof *lp);
    vkf_status st = in && labels && rows && lengths && lp ? VKF_OK
                                                           : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; st == VKF_OK && i < count; i++) {
        uint32_t n = c->tgt->lengths[first + i];
        const int32_t *t = c->tgt->ids[first + i];
        int32_t *row = in + (size_t)i * T, *lab = labels + (size_t)i * T;
        row[0] = s->decoder_start_id;
        for (uint32_t j = 0; j < T; j++) {
            if (j > 0) row[j] = j <= n ? t[j - 1] : s->pad_id;
            lab[j] = j < n ? t[j] : j == n ? s->eos_id : -1;
        }
        rows[i] = row, lengths[i] = n + 1;
    }
    vkf_sequences src = {count, c->src->ids + first, c->src->lengths + first}, tgt = {count, rows, lengths};
    vkf_fwd_plan *p = NULL;
    vkf_tensor *t_labels = NULL, *t_out = NULL;
    vkf_cmd *cmd = NULL;
    if (st == VKF_OK) st = vkf_arch_forward_device(a, &src, &tgt, S, T, &p);
    if (st == VKF_OK) st = vkf_tensor2(a->ctx, VKF_DTYPE_I32, count, T, &t_labels);
    if (st == VKF_OK) st = vkf_tensor2(a->ctx, VKF_DTYPE_F32, count, T, &t_out);
    if (st == VKF_OK) st = vkf_tensor_upload(t_labels, labels, cells * sizeof *labels);
    if (st == VKF_OK) st = vkf_cmd_create(a->ctx, 0, &cmd);
    if (st == VKF_OK) st = vkf_op_logprob_gather(cmd, p->logits, t_labels, t_out, count * T, s->tgt_vocab);
    if (st == VKF_OK) st = vkf_cmd_submit(cmd);
    if (st == VKF_OK) st = vkf_tensor_download(t_out, lp, cells * sizeof *lp);
    for (uint32_t i = 0; st == VKF_OK && i < count; i++) {
        float *dst = c->out + (size_t)(first + i) * c->width;
        memset(dst, 0, (size_t)c->width * sizeof *dst);
        memcpy(dst, lp + (size_t)i * T, (size_t)lengths[i] * sizeof *dst);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(t_labels);
    vkf_tensor_destroy(t_out);
    free(in), free(labels), free(rows), free(lengths), free(lp);
    return st;
}

vkf_status vkf_decode_score(vkf_arch *a, const vkf_sequences *src, const vkf_sequences *tgt, float *out,
                            uint64_t out_floats)
{
    uint32_t S;
    VKF_TRY(vkf_check_sequences(a, src, a->spec.src_vocab, "source", &S));
    if (!tgt || !tgt->lengths || (tgt->count && !tgt->ids))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_score: no targets given");
    if (tgt->count != src->count)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_score: %u sources but %u targets", src->count, tgt->count);
    uint32_t T = 0;
    for (uint32_t i = 0; i < tgt->count; i++) {
        uint32_t n = tgt->lengths[i];
        if (n + 1 > a->spec.max_len)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "target %u has %u tokens; with the start token that passes the "
                            "model's max_len %u", i, n, a->spec.max_len);
        if (n && !tgt->ids[i]) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "target %u is NULL", i);
        for (uint32_t j = 0; j < n; j++)
            if (tgt->ids[i][j] < 0 || (uint32_t)tgt->ids[i][j] >= a->spec.tgt_vocab)
                return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "target %u: id %d at position %u is outside 0..%u", i,
                                tgt->ids[i][j], j, a->spec.tgt_vocab - 1);
        if (n > T) T = n;
    }
    uint64_t need = (uint64_t)src->count * (T + 1);
    if (!out || out_floats != need)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_score: out_logprobs holds %llu floats, %llu needed "
                        "(count x (longest target + 1))", (unsigned long long)out_floats, (unsigned long long)need);
    score_call c = {a, src, tgt, out, T + 1};
    return vkf_run_chunked(a->ctx, &a->fwd_chunks, src->count, (const uint32_t[2]){S, T + 1}, "scoring of", score_chunk,
                           &c);
}

/* The kernels a model runs that have no public op of their own (the decode step's
 * attention over the KV cache and the memory, the cache's append and beam
 * reorder, argmax, sampling, beam search's top-k, the logits processors, scoring's
 * gather, the step's advance, and the gated FFN's GLU), recorded once each at a
 * model's shape through the very ops the decode plans call, so that the device's
 * rules pick the pipelines they pick in a real run. For shader statistics
 * (`vkformer bench shaders`): the scratch tensors hold nothing meaningful, so the
 * list is never to be submitted for a result. */
#include "decode/decode.h"
#include "ops/ops.h"

#include <math.h>
#include <string.h>

static void destroy_tensor(void *t) { vkf_tensor_destroy(t); }

/* A (rows, cols) tensor the list owns. */
static vkf_status scratch(vkf_cmd *cmd, vkf_dtype dtype, uint64_t rows, uint64_t cols, vkf_tensor **out)
{
    uint64_t shape[2] = {rows ? rows : 1, cols ? cols : 1};
    VKF_TRY(vkf_tensor_create(vkf_cmd_context(cmd), dtype, 2, shape, out));
    return vkf_cmd_own(cmd, *out, destroy_tensor, vkf_tensor_bytes(*out));
}

vkf_status vkf_cmd_step_kernels(vkf_cmd *cmd, const vkf_step_kernels_desc *d)
{
    static const char fn[] = "vkf_cmd_step_kernels";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    if (!d->rows || !d->heads || !d->head_dim || !d->keys || !d->cross_keys || !d->vocab)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: rows, heads, head_dim, keys, cross_keys and vocab must be "
                        "positive", fn);
    uint32_t beams = d->beams ? d->beams : 1;
    if (beams > VKF_MAX_BEAMS || d->rows % beams)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %u rows are not sources x beams (1..%u beams, here %u)", fn,
                        d->rows, VKF_MAX_BEAMS, beams);
    if (d->dtype != VKF_DTYPE_F32 && d->dtype != VKF_DTYPE_F16)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: dtype must be F32 or F16", fn);
    uint32_t R = d->rows, sources = R / beams, steps = d->keys, cross = d->cross_keys, V = d->vocab;
    uint64_t inner = (uint64_t)d->heads * d->head_dim;
    vkf_dtype act = d->dtype;
    vkf_tensor *qkv, *q, *attn, *cache_k, *cache_v, *cross_kv, *state, *lengths, *scores_scratch, *logits, *ids, *tokens;
    VKF_TRY(scratch(cmd, act, R, 3 * inner, &qkv));
    VKF_TRY(scratch(cmd, act, R, inner, &q));
    VKF_TRY(scratch(cmd, act, R, inner, &attn));
    VKF_TRY(scratch(cmd, act, (uint64_t)R * steps, inner, &cache_k));
    VKF_TRY(scratch(cmd, act, (uint64_t)R * steps, inner, &cache_v));
    VKF_TRY(scratch(cmd, act, (uint64_t)sources * cross, 2 * inner, &cross_kv));
    VKF_TRY(scratch(cmd, VKF_DTYPE_I32, 1, 1, &state));
    VKF_TRY(scratch(cmd, VKF_DTYPE_I32, 1, sources, &lengths));
    VKF_TRY(scratch(cmd, VKF_DTYPE_F32, (uint64_t)R * d->heads, steps > cross ? steps : cross, &scores_scratch));
    VKF_TRY(scratch(cmd, act, R, V, &logits));
    VKF_TRY(scratch(cmd, VKF_DTYPE_I32, 1, R, &ids));
    VKF_TRY(scratch(cmd, VKF_DTYPE_I32, R, steps, &tokens));

    /* the step's K and V into the cache at state[0] */
    VKF_TRY(vkf_op_kv_append(cmd, qkv, state, cache_k, cache_v, R, (uint32_t)inner, steps));
    /* beam search: each row's cache rows from its parent's */
    vkf_tensor *kv_rows = NULL;
    if (beams > 1) {
        vkf_tensor *from, *parent;
        VKF_TRY(scratch(cmd, VKF_DTYPE_I32, R, steps, &from));
        VKF_TRY(scratch(cmd, VKF_DTYPE_I32, 1, R, &parent));
        VKF_TRY(scratch(cmd, VKF_DTYPE_I32, R, steps, &kv_rows));
        VKF_TRY(vkf_op_kv_gather(cmd, from, parent, state, kv_rows, R, steps));
    }
    /* masked self-attention of the step's query over the cache */
    vkf_attention_decode_desc self = {
        .batch = R, .heads = d->heads, .head_dim = d->head_dim, .max_keys = steps,
        .scale = 1.0f / sqrtf((float)d->head_dim), .q = qkv, .k = cache_k, .v = cache_v,
        .q_offset = 0, .q_batch = 3 * inner, .k_offset = 0, .k_row = inner, .k_batch = (uint64_t)steps * inner,
        .v_offset = 0, .v_row = inner, .v_batch = (uint64_t)steps * inner, .lengths = state, .length_from_state = true,
        .scratch = scores_scratch, .out = attn, .row_index = kv_rows};
    VKF_TRY(vkf_op_attention_decode(cmd, &self));
    /* cross-attention over the memory's keys and values, shared by a source's beams */
    vkf_attention_decode_desc crossd = {
        .batch = R, .heads = d->heads, .head_dim = d->head_dim, .max_keys = cross,
        .scale = 1.0f / sqrtf((float)d->head_dim), .q = q, .k = cross_kv, .v = cross_kv,
        .q_offset = 0, .q_batch = inner, .k_offset = 0, .k_row = 2 * inner, .k_batch = (uint64_t)cross * 2 * inner,
        .v_offset = inner, .v_row = 2 * inner, .v_batch = (uint64_t)cross * 2 * inner, .lengths = lengths,
        .scratch = scores_scratch, .out = attn, .kv_div = beams};
    VKF_TRY(vkf_op_attention_decode(cmd, &crossd));
    /* the gated FFN's act(h0) * h1 */
    if (d->d_ff) {
        vkf_tensor *h;
        VKF_TRY(scratch(cmd, act, R, 2ull * d->d_ff, &h));
        VKF_TRY(vkf_op_glu(cmd, h, R, d->d_ff, d->glu_activation));
    }
    /* the logits processors (repetition penalty; log-probabilities for beams) */
    vkf_tensor *inputs, *row_data, *lists, *scores;
    VKF_TRY(scratch(cmd, VKF_DTYPE_I32, R, steps, &inputs));
    VKF_TRY(scratch(cmd, VKF_DTYPE_I32, R, 2, &row_data));
    VKF_TRY(scratch(cmd, VKF_DTYPE_I32, 1, 1, &lists));
    VKF_TRY(scratch(cmd, VKF_DTYPE_F32, R, V, &scores));
    vkf_logits_process_desc lp = {
        .rows = R, .vocab = V, .steps = steps, .logits = logits, .state = state, .step_ids = ids,
        .row_index = kv_rows, .inputs = inputs, .row_data = row_data, .row_stride = 2, .lists = lists,
        .log_probs = beams > 1, .penalty = 1.2f, .forced_bos = -1, .eos = 0, .scores = scores};
    VKF_TRY(vkf_op_logits_process(cmd, &lp));
    /* the choice: argmax, a sample, or beam search's top 2K */
    VKF_TRY(vkf_op_argmax(cmd, logits, state, ids, tokens, R, V, steps));
    vkf_generate_options so;
    vkf_generate_options_init(&so);
    so.temperature = 0.7f, so.top_k = 50, so.top_p = 0.9f;
    VKF_TRY(vkf_op_sample(cmd, logits, state, ids, tokens, R, V, steps, &so, 0));
    if (beams > 1) {
        uint32_t chunk = vkf_beam_topk_chunk(V); /* as generation plans cut the vocabulary */
        uint64_t parts = (uint64_t)R * vkf_div_up(V, chunk);
        uint32_t n_cand = 2 * beams;
        vkf_tensor *beam_scores, *stats, *cand_x, *cand_id, *cand_scores, *cand_ids;
        VKF_TRY(scratch(cmd, VKF_DTYPE_F32, 1, R, &beam_scores));
        VKF_TRY(scratch(cmd, VKF_DTYPE_F32, parts, 2, &stats));
        VKF_TRY(scratch(cmd, VKF_DTYPE_F32, parts, n_cand, &cand_x));
        VKF_TRY(scratch(cmd, VKF_DTYPE_I32, parts, n_cand, &cand_id));
        VKF_TRY(scratch(cmd, VKF_DTYPE_F32, sources, n_cand, &cand_scores));
        VKF_TRY(scratch(cmd, VKF_DTYPE_I32, sources, n_cand, &cand_ids));
        VKF_TRY(vkf_op_beam_topk(cmd, scores, beam_scores, state, stats, cand_x, cand_id, chunk, cand_scores, cand_ids,
                                 sources, beams, V, n_cand, 0, 0, UINT32_MAX, 0));
    }
    /* scoring: log_softmax(logits)[label] */
    vkf_tensor *labels, *logprobs;
    VKF_TRY(scratch(cmd, VKF_DTYPE_I32, 1, R, &labels));
    VKF_TRY(scratch(cmd, VKF_DTYPE_F32, 1, R, &logprobs));
    VKF_TRY(vkf_op_logprob_gather(cmd, logits, labels, logprobs, R, V));
    return vkf_op_advance(cmd, state);
}

bool vkf_context_auto_f16(const vkf_context *ctx)
{
    return ctx && vkf_auto_precision_f16(&ctx->info, ctx->storage_16bit);
}

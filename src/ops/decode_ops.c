/* The decoding kernels' host functions: beam search's table of cache rows
 * (kv_gather.comp), its top-2K of each source's beams x vocabulary in two stages
 * (beam_partial.comp, beam_topk.comp), sampling (sample.comp), the logits
 * processors of a step (logits_process.comp), scoring's log-softmax-and-gather
 * (logprob_gather.comp), and the other decode-step ops: attention over the KV
 * cache (attention_decode.comp, its split-K form and attention_decode_reduce.comp),
 * the cache append, greedy decoding's argmax and the position advance. */
#include "ops/ops.h"
#include "runtime/push.h"

#include <string.h>

/* How a decode-step op reads its position tensor: one element, every row's position
 * (stride 0); more, one per row (stride 1), at least `rows` of them. */
static vkf_status state_stride(vkf_cmd *cmd, const vkf_tensor *state, uint64_t rows, const char *fn,
                               uint32_t *out)
{
    VKF_TRY(vkf_check_tensor(cmd, state, VKF_DTYPE_I32, 1, fn, "state"));
    if (state->elements == 1) {
        *out = 0;
        return VKF_OK;
    }
    if (state->elements < rows)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: state holds %llu positions: 1 (every row's) or one per row "
                        "(%llu)", fn, (unsigned long long)state->elements, (unsigned long long)rows);
    *out = 1;
    return VKF_OK;
}

/* ------------------------------------------------------------------ beam search */

vkf_status vkf_op_kv_gather(vkf_cmd *cmd, const vkf_tensor *src, const vkf_tensor *parent, const vkf_tensor *state,
                            vkf_tensor *dst, uint32_t rows, uint32_t steps)
{
    static const char fn[] = "kv_gather";
    VKF_TRY(vkf_check_cmd(cmd, src, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!rows || !steps) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive", fn);
    VKF_TRY(vkf_check_tensor(cmd, src, VKF_DTYPE_I32, (uint64_t)rows * steps, fn, "src"));
    VKF_TRY(vkf_check_tensor(cmd, dst, VKF_DTYPE_I32, (uint64_t)rows * steps, fn, "dst"));
    VKF_TRY(vkf_check_tensor(cmd, parent, VKF_DTYPE_I32, rows, fn, "parent"));
    uint32_t stride = 0;
    VKF_TRY(state_stride(cmd, state, rows, fn, &stride));
    vkf_push_kv_gather pc = {.rows = rows, .steps = steps, .state_stride = stride};
    uint32_t wg = ctx->tuning.elementwise_workgroup;
    uint32_t groups[3] = {(uint32_t)vkf_div_up(steps, wg), rows, 1};
    if (groups[0] > ctx->info.max_workgroup_count[0] || rows > ctx->info.max_workgroup_count[1])
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %u x %u workgroups exceed the device's grid", fn, groups[0], rows);
    uint32_t spec[1] = {wg};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, VKF_VARIANT_KV_GATHER, spec, 1, &pipe));
    vkf_binding b[4] = {{src, VKF_READ}, {parent, VKF_READ}, {state, VKF_READ}, {dst, VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, b, 4, &pc, sizeof pc, groups, "kv_gather");
}

/* Invocations per workgroup of beam_partial.comp's rows form. */
#define VKF_TOPK_ROWS_WG 16u

vkf_status vkf_op_beam_topk(vkf_cmd *cmd, const vkf_tensor *logits, const vkf_tensor *beam_scores,
                            const vkf_tensor *state, vkf_tensor *stats, vkf_tensor *cand_x, vkf_tensor *cand_id,
                            uint32_t chunk, vkf_tensor *cand_scores, vkf_tensor *cand_ids, uint32_t sources,
                            uint32_t beams, uint32_t vocab, uint32_t n_cand, int32_t eos, uint32_t min_new,
                            uint32_t force_step, uint32_t renormalize)
{
    static const char fn[] = "beam_topk";
    VKF_TRY(vkf_check_cmd(cmd, logits, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!logits || logits->dtype == VKF_DTYPE_I32)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: logits must be an F32 or F16 tensor", fn);
    if (beams == 0 || beams > VKF_MAX_BEAMS || (uint64_t)beams * vocab > INT32_MAX || vocab == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %u beams of %u tokens (1..%u beams, beams x vocab < 2^31)", fn,
                        beams, vocab, VKF_MAX_BEAMS);
    if (n_cand == 0 || n_cand > VKF_MAX_CAND || chunk == 0 || renormalize > 2)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: n_cand %u (1..%u), chunk %u (> 0), renormalize %u (0..2)", fn,
                        n_cand, VKF_MAX_CAND, chunk, renormalize);
    uint32_t rows = sources * beams, chunks = (uint32_t)vkf_div_up(vocab, chunk);
    uint64_t parts = (uint64_t)rows * chunks;
    VKF_TRY(vkf_check_tensor(cmd, logits, logits->dtype, (uint64_t)rows * vocab, fn, "logits"));
    VKF_TRY(vkf_check_tensor(cmd, beam_scores, VKF_DTYPE_F32, rows, fn, "beam_scores"));
    uint32_t stride = 0;
    VKF_TRY(state_stride(cmd, state, rows, fn, &stride));
    VKF_TRY(vkf_check_tensor(cmd, stats, VKF_DTYPE_F32, parts * 2, fn, "stats"));
    VKF_TRY(vkf_check_tensor(cmd, cand_x, VKF_DTYPE_F32, parts * n_cand, fn, "cand_x"));
    VKF_TRY(vkf_check_tensor(cmd, cand_id, VKF_DTYPE_I32, parts * n_cand, fn, "cand_id"));
    VKF_TRY(vkf_check_tensor(cmd, cand_scores, VKF_DTYPE_F32, (uint64_t)sources * n_cand, fn, "cand_scores"));
    VKF_TRY(vkf_check_tensor(cmd, cand_ids, VKF_DTYPE_I32, (uint64_t)sources * n_cand, fn, "cand_ids"));
    uint32_t max_x = ctx->info.max_workgroup_count[0];
    if (sources > max_x || parts > (uint64_t)max_x * ctx->info.max_workgroup_count[1])
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %u sources (%llu row chunks) exceed the device's grid", fn, sources,
                        (unsigned long long)parts);
    uint32_t spec[1] = {ctx->tuning.row_workgroup};
    /* stage 1: every (row, chunk) */
    vkf_push_beam_partial pp = {.rows = rows, .vocab = vocab, .chunk = chunk, .chunks = chunks, .n_cand = n_cand,
                                .eos = eos, .min_new = min_new, .force_step = force_step, .renormalize = renormalize,
                                .state_stride = stride};
    /* the rows form (CPU drivers): one invocation per (row, chunk), VKF_TOPK_ROWS_WG per workgroup */
    bool rows_form = ctx->tuning.decode_rows;
    uint64_t groups = rows_form ? vkf_div_up(parts, VKF_TOPK_ROWS_WG) : parts;
    uint32_t g1[3] = {groups < max_x ? (uint32_t)groups : max_x, (uint32_t)vkf_div_up(groups, max_x), 1};
    /* the rows form's candidate list: 8, 16, 32 or 64 entries, the fewest holding n_cand (its
     * insertion is unrolled over them: lavapipe 22.3's loop limiter, beam_partial.comp) */
    uint32_t width = 8;
    while (width < n_cand) width *= 2;
    uint32_t spec1[3] = {rows_form ? VKF_TOPK_ROWS_WG : ctx->tuning.row_workgroup, rows_form ? 1u : 0u,
                         rows_form ? width : VKF_MAX_CAND};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, logits->dtype == VKF_DTYPE_F16 ? VKF_VARIANT_BEAM_PARTIAL_ACT16
                                                                  : VKF_VARIANT_BEAM_PARTIAL, spec1, 3, &pipe));
    vkf_binding b1[5] = {{logits, VKF_READ}, {state, VKF_READ}, {stats, VKF_WRITE}, {cand_x, VKF_WRITE},
                         {cand_id, VKF_WRITE}};
    VKF_TRY(vkf_cmd_dispatch(cmd, pipe, b1, 5, &pp, sizeof pp, g1, "beam_topk"));
    /* stage 2: per source */
    vkf_push_beam_topk pc = {.sources = sources, .beams = beams, .vocab = vocab, .n_cand = n_cand, .chunks = chunks,
                             .force_step = force_step, .state_stride = stride};
    uint32_t g2[3] = {sources, 1, 1};
    VKF_TRY(vkf_pipeline_get(ctx, VKF_VARIANT_BEAM_TOPK, spec, 1, &pipe));
    vkf_binding b2[7] = {{stats, VKF_READ}, {cand_x, VKF_READ}, {cand_id, VKF_READ}, {beam_scores, VKF_READ},
                         {state, VKF_READ}, {cand_scores, VKF_WRITE}, {cand_ids, VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, b2, 7, &pc, sizeof pc, g2, "beam_topk");
}

/* ------------------------------------------------------------------ sampling */

vkf_status vkf_op_sample(vkf_cmd *cmd, const vkf_tensor *logits, const vkf_tensor *state, vkf_tensor *ids,
                         vkf_tensor *tokens, uint32_t rows, uint32_t cols, uint32_t token_capacity,
                         const vkf_generate_options *o, int32_t eos)
{
    return vkf_op_sample_seeded(cmd, logits, state, ids, tokens, rows, cols, token_capacity, o, eos, NULL);
}

vkf_status vkf_op_sample_seeded(vkf_cmd *cmd, const vkf_tensor *logits, const vkf_tensor *state, vkf_tensor *ids,
                                vkf_tensor *tokens, uint32_t rows, uint32_t cols, uint32_t token_capacity,
                                const vkf_generate_options *o, int32_t eos, const vkf_tensor *seeds)
{
    static const char fn[] = "sample";
    VKF_TRY(vkf_check_cmd(cmd, logits, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!logits || logits->dtype == VKF_DTYPE_I32 || !o)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: logits must be an F32 or F16 tensor, options given", fn);
    VKF_TRY(vkf_check_tensor(cmd, logits, logits->dtype, (uint64_t)rows * cols, fn, "logits"));
    uint32_t stride = 0;
    VKF_TRY(state_stride(cmd, state, rows, fn, &stride));
    VKF_TRY(vkf_check_tensor(cmd, ids, VKF_DTYPE_I32, rows, fn, "ids"));
    VKF_TRY(vkf_check_tensor(cmd, tokens, VKF_DTYPE_I32, (uint64_t)rows * token_capacity, fn, "tokens"));
    if (seeds) VKF_TRY(vkf_check_tensor(cmd, seeds, VKF_DTYPE_I32, (uint64_t)rows * 2, fn, "seeds"));
    vkf_push_sample pc = {.state_stride = stride, .row_seeds = seeds != NULL, .rows = rows, .cols = cols, .token_capacity = token_capacity,
                          .inv_temperature = 1.0f / o->temperature, .top_k = o->top_k, .top_p = o->top_p,
                          .seed_lo = (uint32_t)o->seed, .seed_hi = (uint32_t)(o->seed >> 32), .eos = eos,
                          .min_new = o->min_new, .force_step = o->forced_eos ? token_capacity - 1 : UINT32_MAX};
    if (rows > ctx->info.max_workgroup_count[0])
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %u rows exceed the device's grid", fn, rows);
    uint32_t groups[3] = {rows, 1, 1};
    /* an invocation's passes over its row: two binary searches of up to 31 passes
     * each (top-k, top-p), a few scans and the chunk walk, about 70 per column it
     * holds, plus the workgroup-wide loops (NLLB's 256k vocabulary: 1024 invocations
     * on lavapipe 22.3) */
    uint32_t spec[1] = {vkf_loop_row_workgroup(ctx, cols, 70, 3, 1024)};
    if (!spec[0]) return vkf_loop_row_too_long(ctx, cols, fn);
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, logits->dtype == VKF_DTYPE_F16 ? VKF_VARIANT_SAMPLE_ACT16 : VKF_VARIANT_SAMPLE, spec,
                             1, &pipe));
    /* without seeds the state tensor stands in at binding 4 (never read) */
    vkf_binding b[5] = {{logits, VKF_READ}, {state, VKF_READ}, {ids, VKF_WRITE}, {tokens, VKF_WRITE},
                        {seeds ? seeds : state, VKF_READ}};
    return vkf_cmd_dispatch(cmd, pipe, b, 5, &pc, sizeof pc, groups, "sample");
}

/* ------------------------------------------------------------------ logits processors, scoring */

vkf_status vkf_op_logits_process(vkf_cmd *cmd, const vkf_logits_process_desc *d)
{
    static const char fn[] = "logits_process";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!d->logits || d->logits->dtype == VKF_DTYPE_I32 || d->logits->dtype == VKF_DTYPE_I8)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: logits must be an F32 or F16 tensor", fn);
    if (!d->rows || !d->vocab || !d->steps || d->row_stride < (d->row_settings ? 5u : 2u) || !(d->penalty > 0))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: rows, vocab, steps must be positive, row_stride >= 2 (5 with "
                        "settings per row), "
                        "penalty > 0", fn);
    uint64_t cells = (uint64_t)d->rows * d->vocab;
    VKF_TRY(vkf_check_tensor(cmd, d->logits, d->logits->dtype, cells, fn, "logits"));
    uint32_t per_row = 0;
    VKF_TRY(state_stride(cmd, d->state, d->rows, fn, &per_row));
    VKF_TRY(vkf_check_tensor(cmd, d->step_ids, VKF_DTYPE_I32, d->rows, fn, "step_ids"));
    if (d->row_index)
        VKF_TRY(vkf_check_tensor(cmd, d->row_index, VKF_DTYPE_I32, (uint64_t)d->rows * d->steps, fn, "row_index"));
    VKF_TRY(vkf_check_tensor(cmd, d->inputs, VKF_DTYPE_I32, (uint64_t)d->rows * d->steps, fn, "inputs"));
    VKF_TRY(vkf_check_tensor(cmd, d->row_data, VKF_DTYPE_I32, (uint64_t)d->rows * d->row_stride, fn, "row_data"));
    uint64_t lists = (uint64_t)d->n_suppress + d->n_end + d->n_bad + d->n_begin;
    if (d->ts_begin < 0 || (uint32_t)d->ts_begin >= d->vocab || (d->ts_begin > 0 && d->ts_eos < 0))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: the first timestamp id %d is outside the vocabulary", fn,
                        d->ts_begin);
    VKF_TRY(vkf_check_tensor(cmd, d->lists, VKF_DTYPE_I32, lists ? lists : 1, fn, "lists"));
    VKF_TRY(vkf_check_tensor(cmd, d->scores, VKF_DTYPE_F32, cells, fn, "scores"));
    vkf_push_logits_process pc = {.rows = d->rows, .vocab = d->vocab, .steps = d->steps, .row_stride = d->row_stride,
                                  .flags = (d->log_probs ? 1u : 0u) | (d->row_index ? 2u : 0u) | (per_row ? 4u : 0u) |
                                           (d->row_settings ? 8u : 0u),
                                  .penalty = d->penalty,
                                  .ngram = d->ngram, .n_suppress = d->n_suppress, .n_end = d->n_end, .n_bad = d->n_bad,
                                  .min_new = d->min_new, .forced_bos = d->forced_bos,
                                  .forced_eos = d->forced_eos ? 1u : 0u, .eos = d->eos, .n_begin = d->n_begin,
                                  .ts_begin = d->ts_begin, .no_timestamps = d->no_timestamps,
                                  .ts_max_initial = d->ts_max_initial, .ts_eos = d->ts_eos};
    uint32_t groups[3];
    VKF_TRY(vkf_linear_grid(ctx, d->rows, groups, fn));
    uint32_t spec[1] = {ctx->tuning.row_workgroup};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, d->logits->dtype == VKF_DTYPE_F16 ? VKF_VARIANT_LOGITS_PROCESS_ACT16
                                                                     : VKF_VARIANT_LOGITS_PROCESS, spec, 1, &pipe));
    /* without a row index the state is bound in its place (never read) */
    vkf_binding b[8] = {{d->logits, VKF_READ}, {d->state, VKF_READ}, {d->step_ids, VKF_READ},
                        {d->row_index ? d->row_index : d->state, VKF_READ}, {d->inputs, VKF_READ | VKF_WRITE},
                        {d->row_data, VKF_READ}, {d->lists, VKF_READ}, {d->scores, VKF_READ | VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, b, 8, &pc, sizeof pc, groups, "logits_process");
}

vkf_status vkf_op_logprob_gather(vkf_cmd *cmd, const vkf_tensor *logits, const vkf_tensor *labels, vkf_tensor *out,
                                 uint32_t rows, uint32_t vocab)
{
    static const char fn[] = "logprob_gather";
    VKF_TRY(vkf_check_cmd(cmd, logits, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!logits || logits->dtype == VKF_DTYPE_I32 || logits->dtype == VKF_DTYPE_I8 || !rows || !vocab)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: logits must be an F32 or F16 tensor of positive size", fn);
    VKF_TRY(vkf_check_tensor(cmd, logits, logits->dtype, (uint64_t)rows * vocab, fn, "logits"));
    VKF_TRY(vkf_check_tensor(cmd, labels, VKF_DTYPE_I32, rows, fn, "labels"));
    VKF_TRY(vkf_check_tensor(cmd, out, VKF_DTYPE_F32, rows, fn, "out"));
    vkf_push_logprob_gather pc = {.rows = rows, .vocab = vocab};
    uint32_t groups[3];
    VKF_TRY(vkf_linear_grid(ctx, rows, groups, fn));
    uint32_t spec[1] = {ctx->tuning.row_workgroup};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, logits->dtype == VKF_DTYPE_F16 ? VKF_VARIANT_LOGPROB_GATHER_ACT16
                                                                  : VKF_VARIANT_LOGPROB_GATHER, spec, 1, &pipe));
    vkf_binding b[3] = {{logits, VKF_READ}, {labels, VKF_READ}, {out, VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, b, 3, &pc, sizeof pc, groups, "logprob_gather");
}

/* ------------------------------------------------------------------ decode-step ops */

/* The last element a (batch, rows, cols) view touches, checked against the tensor
 * and the shaders' 32-bit indices. */
static vkf_status check_span(const vkf_tensor *t, uint64_t offset, uint64_t batch, uint64_t batch_stride,
                             uint64_t rows, uint64_t row_stride, uint64_t cols, const char *fn, const char *name)
{
    if (!t) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, name);
    uint64_t last = offset + (batch - 1) * batch_stride + (rows - 1) * row_stride + cols - 1;
    if (last >= t->elements || last > UINT32_MAX)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s view reaches element %llu of %llu", fn, name,
                        (unsigned long long)last, (unsigned long long)t->elements);
    return VKF_OK;
}

/* Invocations per workgroup of attention_decode's rows form. */
#define VKF_DECODE_ROWS_WG 16u
/* The rows form's bound on max_keys x (1 + bigbird's random blocks). llvmpipe
 * (Debian 12's lavapipe, Mesa 22.3) ends every loop of a shader invocation once
 * 65535 iterations have run in all its loops together (gallivm's loop limiter,
 * LP_MAX_TGSI_LOOP_ITERATIONS): past that the invocation runs on with its loops
 * cut short and writes wrong values or none. The rows form runs all its keys in
 * one invocation; its head_dim loops are unrolled, and measured there each key
 * costs two counts (past 32768 keys the output is wrong, at any head_dim), so the
 * bound keeps half the budget spare; beyond it the split forms (split-K, or a
 * workgroup per (b, h)), a few keys per invocation, take over. */
#define VKF_DECODE_ROWS_MAX_ITERATIONS 16384u

/* attention_decode's split-K form (flash decoding) for rows (b, h) pairs of up to
 * max_keys keys: how many workgroups per pair (*splits >= 2) and keys each
 * (*chunk), or false for the one-workgroup split form. Enough workgroups to give
 * every compute unit four (rows x splits), chunks of 64 to 512 keys, and the
 * partials (splits x (head_dim + 2) floats) inside the pair's scratch row. */
static bool decode_split_k(const vkf_context *ctx, uint64_t rows, uint32_t max_keys, uint32_t head_dim,
                           uint32_t *splits, uint32_t *chunk)
{
    uint64_t cu = ctx->tuning.compute_units ? ctx->tuning.compute_units : 64;
    uint64_t want = vkf_div_up(4 * cu, rows);                  /* to fill the device */
    uint64_t most = vkf_div_up(max_keys, 64);                  /* at least 64 keys each */
    uint64_t least = vkf_div_up(max_keys, 512);                /* at most 512 keys each */
    uint64_t p = want > least ? want : least;
    if (p > most) p = most;
    while (p >= 2 && p * (head_dim + 2ull) > max_keys) p--;    /* the partials fit the scratch row */
    if (p < 2) return false;
    uint64_t c = vkf_div_up(max_keys, p);
    c = vkf_div_up(c, 4) * 4;
    p = vkf_div_up(max_keys, c);                               /* every chunk holds a key below max_keys */
    if (p < 2 || c > 4096) return false;
    *splits = (uint32_t)p, *chunk = (uint32_t)c;
    return true;
}

vkf_status vkf_op_attention_decode(vkf_cmd *cmd, const vkf_attention_decode_desc *d)
{
    static const char fn[] = "attention_decode";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!d->batch || !d->heads || !d->head_dim || !d->max_keys)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sizes must be positive", fn);
    uint64_t dm = (uint64_t)d->heads * d->head_dim;
    uint32_t kv_div = d->kv_div ? d->kv_div : 1, kv_rows = (uint32_t)vkf_div_up(d->batch, kv_div);
    if (d->kv_div > 1 && d->length_from_state)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: kv_div is for cross-attention (lengths per row)", fn);
    VKF_TRY(check_span(d->q, d->q_offset, d->batch, d->q_batch, 1, 0, dm, fn, "q"));
    VKF_TRY(check_span(d->k, d->k_offset, kv_rows, d->k_batch, d->max_keys, d->k_row, dm, fn, "k"));
    VKF_TRY(check_span(d->v, d->v_offset, kv_rows, d->v_batch, d->max_keys, d->v_row, dm, fn, "v"));
    vkf_dtype act;
    VKF_TRY(vkf_activation_dtype(cmd, d->q, fn, "q", &act));
    VKF_TRY(vkf_check_tensor(cmd, d->q, act, 1, fn, "q"));
    VKF_TRY(vkf_check_activation(cmd, d->k, act, 1, fn, "k", "q"));
    VKF_TRY(vkf_check_activation(cmd, d->v, act, 1, fn, "v", "q"));
    uint32_t per_row = 0;
    if (d->length_from_state) VKF_TRY(state_stride(cmd, d->lengths, d->batch, fn, &per_row));
    else VKF_TRY(vkf_check_tensor(cmd, d->lengths, VKF_DTYPE_I32, kv_rows, fn, "lengths"));
    VKF_TRY(vkf_check_tensor(cmd, d->scratch, VKF_DTYPE_F32, (uint64_t)d->batch * d->heads * d->max_keys, fn, "scratch"));
    VKF_TRY(vkf_check_activation(cmd, d->out, act, d->batch * dm, fn, "out", "q"));
    vkf_push_attention_decode p = {
        .heads = d->heads,
        .head_dim = d->head_dim,
        .length_from_state = d->length_from_state ? 1u + per_row : 0u,
        .scale = d->scale,
        .q_offset = (uint32_t)d->q_offset,
        .q_batch = (uint32_t)d->q_batch,
        .k_offset = (uint32_t)d->k_offset,
        .k_row = (uint32_t)d->k_row,
        .k_batch = (uint32_t)d->k_batch,
        .v_offset = (uint32_t)d->v_offset,
        .v_row = (uint32_t)d->v_row,
        .v_batch = (uint32_t)d->v_batch,
        .out_batch = (uint32_t)dm,
        .max_keys = d->max_keys,
        .pattern = d->pattern,
        .window = d->window,
        .stride = d->stride ? d->stride : 1,
        .kv_div = kv_div,
    };
    if (d->row_index) {
        if (!d->length_from_state || kv_div > 1)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: row_index is for self-attention over a cache "
                            "(length_from_state, no kv_div)", fn);
        VKF_TRY(vkf_check_tensor(cmd, d->row_index, VKF_DTYPE_I32, (uint64_t)d->batch * d->max_keys, fn, "row_index"));
        p.indexed = 1;
    }
    if (d->pattern && !d->length_from_state)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: a sparse pattern needs the query position (length_from_state)", fn);
    if (d->rel_bias) {
        if (!d->length_from_state)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: a relative position bias needs the query position "
                            "(length_from_state)", fn);
        if (d->rel_radius > (1u << 20))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: bias radius %u passes 2^20", fn, d->rel_radius);
        VKF_TRY(vkf_check_tensor(cmd, d->rel_bias, VKF_DTYPE_F32, (uint64_t)d->heads * (2ull * d->rel_radius + 1), fn,
                                 "rel_bias"));
        if (vkf_tensors_overlap(d->out, d->rel_bias) || vkf_tensors_overlap(d->scratch, d->rel_bias))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out and scratch may not alias rel_bias", fn);
        p.rel_bias = 1, p.rel_radius = d->rel_radius;
    }
    if (d->pattern > VKF_ATTENTION_BIGBIRD)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: unknown pattern %u", fn, d->pattern);
    p.bb_block = 1, p.random_len = 1;
    if (d->pattern == VKF_ATTENTION_BIGBIRD) {
        const vkf_bigbird *bb = &d->bigbird;
        if (!bb->block || bb->random > VKF_BIGBIRD_MAX_RANDOM || !bb->causal)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: bigbird needs block >= 1 (got %u), random <= %u (got %u) "
                            "and causal random blocks", fn, bb->block, VKF_BIGBIRD_MAX_RANDOM, bb->random);
        uint64_t need = vkf_div_up(d->max_keys, bb->block) * bb->random;
        VKF_TRY(vkf_check_tensor(cmd, d->random_blocks, VKF_DTYPE_I32, need ? need : 1, fn, "random_blocks"));
        if (d->random_blocks->elements > UINT32_MAX)
            return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: random_blocks passes 2^32 elements", fn);
        p.bb_block = bb->block, p.bb_globals = bb->globals, p.bb_random = bb->random;
        p.random_len = (uint32_t)d->random_blocks->elements;
    }
    /* the rows form (CPU drivers: one invocation per (b, h), VKF_DECODE_ROWS_WG per
     * workgroup) where head_dim fits its registers and the keys its loop budget
     * (VKF_DECODE_ROWS_MAX_ITERATIONS); else the split-K form where the
     * keys are many (decode_split_k), else a workgroup per (b, h) */
    uint64_t rows = (uint64_t)d->batch * d->heads;
    uint32_t per_key = 1u + (d->pattern == VKF_ATTENTION_BIGBIRD ? d->bigbird.random : 0u);
    uint64_t rows_iterations = (uint64_t)d->max_keys * per_key;
    bool rows_form = ctx->tuning.decode_rows && d->head_dim <= VKF_ATTENTION_MAX_HEAD_DIM &&
                     rows_iterations <= VKF_DECODE_ROWS_MAX_ITERATIONS;
    if (rows > UINT32_MAX) return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: batch x heads passes 2^32", fn);
    p.rows = (uint32_t)rows;
    uint32_t splits = 0, chunk = 0;
    if (!rows_form && d->head_dim <= VKF_ATTENTION_MAX_HEAD_DIM &&
        decode_split_k(ctx, rows, d->max_keys, d->head_dim, &splits, &chunk)) {
        uint32_t wg = ctx->tuning.row_workgroup;
        uint32_t groups[3];
        VKF_TRY(vkf_linear_grid(ctx, rows * splits, groups, fn));
        uint32_t spec[5] = {wg, 0u, d->head_dim, chunk, splits};
        const vkf_pipeline *pipe;
        VKF_TRY(vkf_pipeline_get(ctx, act == VKF_DTYPE_F16 ? VKF_VARIANT_ATTENTION_DECODE_ACT16 : VKF_VARIANT_ATTENTION_DECODE,
                                 spec, 5, &pipe));
        vkf_binding b[9] = {{d->q, VKF_READ},        {d->k, VKF_READ},
                            {d->v, VKF_READ},        {d->lengths, VKF_READ},
                            {d->scratch, VKF_WRITE}, {d->out, VKF_WRITE},
                            {d->pattern == VKF_ATTENTION_BIGBIRD ? d->random_blocks : NULL, VKF_READ},
                            {d->row_index, VKF_READ}, {d->rel_bias, VKF_READ}};
        VKF_TRY(vkf_cmd_dispatch(cmd, pipe, b, 9, &p, sizeof p, groups, "attention_decode"));
        VKF_TRY(vkf_linear_grid(ctx, rows, groups, fn));
        uint32_t rspec[2] = {wg, splits};
        VKF_TRY(vkf_pipeline_get(ctx, act == VKF_DTYPE_F16 ? VKF_VARIANT_ATTENTION_DECODE_REDUCE_ACT16
                                                           : VKF_VARIANT_ATTENTION_DECODE_REDUCE, rspec, 2, &pipe));
        vkf_binding rb[2] = {{d->scratch, VKF_READ}, {d->out, VKF_WRITE}};
        return vkf_cmd_dispatch(cmd, pipe, rb, 2, &p, sizeof p, groups, "attention_decode_reduce");
    }
    uint32_t groups[3];
    VKF_TRY(vkf_linear_grid(ctx, rows_form ? vkf_div_up(rows, VKF_DECODE_ROWS_WG) : rows, groups, fn));
    uint32_t spec[3] = {rows_form ? VKF_DECODE_ROWS_WG : ctx->tuning.row_workgroup, rows_form ? 1u : 0u,
                        rows_form ? d->head_dim : 1u};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, act == VKF_DTYPE_F16 ? VKF_VARIANT_ATTENTION_DECODE_ACT16 : VKF_VARIANT_ATTENTION_DECODE,
                             spec, 3, &pipe));
    vkf_binding b[9] = {{d->q, VKF_READ},        {d->k, VKF_READ},
                        {d->v, VKF_READ},        {d->lengths, VKF_READ},
                        {d->scratch, VKF_READ | VKF_WRITE}, {d->out, VKF_WRITE},
                        {d->pattern == VKF_ATTENTION_BIGBIRD ? d->random_blocks : NULL, VKF_READ},
                        {d->row_index, VKF_READ}, {d->rel_bias, VKF_READ}};
    return vkf_cmd_dispatch(cmd, pipe, b, 9, &p, sizeof p, groups, "attention_decode");
}

vkf_status vkf_op_kv_append(vkf_cmd *cmd, const vkf_tensor *qkv, const vkf_tensor *state, vkf_tensor *cache_k,
                            vkf_tensor *cache_v, uint32_t batch, uint32_t d, uint32_t capacity)
{
    static const char fn[] = "kv_append";
    VKF_TRY(vkf_check_cmd(cmd, qkv, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    vkf_dtype act;
    VKF_TRY(vkf_activation_dtype(cmd, qkv, fn, "qkv", &act));
    VKF_TRY(vkf_check_tensor(cmd, qkv, act, (uint64_t)batch * 3 * d, fn, "qkv"));
    uint32_t stride = 0;
    VKF_TRY(state_stride(cmd, state, batch, fn, &stride));
    VKF_TRY(vkf_check_activation(cmd, cache_k, act, (uint64_t)batch * capacity * d, fn, "cache_k", "qkv"));
    VKF_TRY(vkf_check_activation(cmd, cache_v, act, (uint64_t)batch * capacity * d, fn, "cache_v", "qkv"));
    vkf_push_kv_append p = {.batch = batch, .d = d, .capacity = capacity, .state_stride = stride};
    uint32_t wg = ctx->tuning.elementwise_workgroup;
    uint32_t groups[3];
    VKF_TRY(vkf_linear_grid(ctx, vkf_div_up((uint64_t)batch * d, wg), groups, fn));
    uint32_t spec[1] = {wg};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, act == VKF_DTYPE_F16 ? VKF_VARIANT_KV_APPEND_ACT16 : VKF_VARIANT_KV_APPEND, spec, 1,
                             &pipe));
    vkf_binding b[4] = {{qkv, VKF_READ}, {state, VKF_READ}, {cache_k, VKF_WRITE}, {cache_v, VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, b, 4, &p, sizeof p, groups, "kv_append");
}

vkf_status vkf_op_argmax(vkf_cmd *cmd, const vkf_tensor *logits, const vkf_tensor *state, vkf_tensor *ids,
                         vkf_tensor *tokens, uint32_t rows, uint32_t cols, uint32_t token_capacity)
{
    static const char fn[] = "argmax";
    VKF_TRY(vkf_check_cmd(cmd, logits, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    vkf_dtype act;
    VKF_TRY(vkf_activation_dtype(cmd, logits, fn, "logits", &act));
    VKF_TRY(vkf_check_tensor(cmd, logits, act, (uint64_t)rows * cols, fn, "logits"));
    uint32_t stride = 0;
    VKF_TRY(state_stride(cmd, state, rows, fn, &stride));
    VKF_TRY(vkf_check_tensor(cmd, ids, VKF_DTYPE_I32, rows, fn, "ids"));
    VKF_TRY(vkf_check_tensor(cmd, tokens, VKF_DTYPE_I32, (uint64_t)rows * token_capacity, fn, "tokens"));
    vkf_push_argmax p = {.rows = rows, .cols = cols, .token_capacity = token_capacity, .state_stride = stride};
    uint32_t groups[3];
    VKF_TRY(vkf_linear_grid(ctx, rows, groups, fn));
    uint32_t spec[1] = {ctx->tuning.row_workgroup};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, act == VKF_DTYPE_F16 ? VKF_VARIANT_ARGMAX_ACT16 : VKF_VARIANT_ARGMAX, spec, 1, &pipe));
    vkf_binding b[4] = {{logits, VKF_READ}, {state, VKF_READ}, {ids, VKF_WRITE}, {tokens, VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, b, 4, &p, sizeof p, groups, "argmax");
}

vkf_status vkf_op_advance(vkf_cmd *cmd, vkf_tensor *state)
{
    static const char fn[] = "advance";
    VKF_TRY(vkf_check_cmd(cmd, state, fn));
    VKF_TRY(vkf_check_tensor(cmd, state, VKF_DTYPE_I32, 1, fn, "state"));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (state->elements > (uint64_t)ctx->info.max_workgroup_count[0] * 64)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %llu positions exceed the device's grid", fn,
                        (unsigned long long)state->elements);
    vkf_push_advance pc = {.count = (uint32_t)state->elements};
    const vkf_pipeline *pipe;
    static const uint32_t no_spec[1] = {0};
    VKF_TRY(vkf_pipeline_get(ctx, VKF_VARIANT_ADVANCE, no_spec, 0, &pipe));
    vkf_binding b[1] = {{state, VKF_READ | VKF_WRITE}};
    uint32_t groups[3] = {(uint32_t)vkf_div_up(pc.count, 64), 1, 1};
    return vkf_cmd_dispatch(cmd, pipe, b, 1, &pc, sizeof pc, groups, "advance");
}

/* The decoding kernels' host functions: beam search's table of cache rows
 * (kv_gather.comp), its top-2K of each source's beams x vocabulary in two stages
 * (beam_partial.comp, beam_topk.comp), sampling (sample.comp), the logits
 * processors of a step (logits_process.comp) and scoring's log-softmax-and-
 * gather (logprob_gather.comp). Greedy decoding's argmax is in ops.c with the
 * other decode-step ops. */
#include "ops/ops.h"
#include "runtime/push.h"

/* A grid of `count` workgroups, laid out in 2-D past the device's x limit
 * (linear_workgroup() in the shaders). */
static vkf_status row_grid(const vkf_context *ctx, uint64_t count, uint32_t groups[3], const char *fn)
{
    uint64_t max_x = ctx->info.max_workgroup_count[0], x = count < max_x ? count : max_x;
    uint64_t y = vkf_div_up(count, x ? x : 1);
    if (y > ctx->info.max_workgroup_count[1])
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %llu workgroups exceed the device's grid", fn, (unsigned long long)count);
    groups[0] = (uint32_t)x, groups[1] = (uint32_t)y, groups[2] = 1;
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
    VKF_TRY(vkf_check_tensor(cmd, state, VKF_DTYPE_I32, 1, fn, "state"));
    vkf_push_kv_gather pc = {.rows = rows, .steps = steps};
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
    VKF_TRY(vkf_check_tensor(cmd, state, VKF_DTYPE_I32, 1, fn, "state"));
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
                                .eos = eos, .min_new = min_new, .force_step = force_step, .renormalize = renormalize};
    /* the rows form (CPU drivers): one invocation per (row, chunk), VKF_TOPK_ROWS_WG per workgroup */
    bool rows_form = ctx->tuning.decode_rows;
    uint64_t groups = rows_form ? vkf_div_up(parts, VKF_TOPK_ROWS_WG) : parts;
    uint32_t g1[3] = {groups < max_x ? (uint32_t)groups : max_x, (uint32_t)vkf_div_up(groups, max_x), 1};
    uint32_t spec1[2] = {rows_form ? VKF_TOPK_ROWS_WG : ctx->tuning.row_workgroup, rows_form ? 1u : 0u};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, logits->dtype == VKF_DTYPE_F16 ? VKF_VARIANT_BEAM_PARTIAL_ACT16
                                                                  : VKF_VARIANT_BEAM_PARTIAL, spec1, 2, &pipe));
    vkf_binding b1[5] = {{logits, VKF_READ}, {state, VKF_READ}, {stats, VKF_WRITE}, {cand_x, VKF_WRITE},
                         {cand_id, VKF_WRITE}};
    VKF_TRY(vkf_cmd_dispatch(cmd, pipe, b1, 5, &pp, sizeof pp, g1, "beam_topk"));
    /* stage 2: per source */
    vkf_push_beam_topk pc = {.sources = sources, .beams = beams, .vocab = vocab, .n_cand = n_cand, .chunks = chunks,
                             .force_step = force_step};
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
    static const char fn[] = "sample";
    VKF_TRY(vkf_check_cmd(cmd, logits, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!logits || logits->dtype == VKF_DTYPE_I32 || !o)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: logits must be an F32 or F16 tensor, options given", fn);
    VKF_TRY(vkf_check_tensor(cmd, logits, logits->dtype, (uint64_t)rows * cols, fn, "logits"));
    VKF_TRY(vkf_check_tensor(cmd, state, VKF_DTYPE_I32, 1, fn, "state"));
    VKF_TRY(vkf_check_tensor(cmd, ids, VKF_DTYPE_I32, rows, fn, "ids"));
    VKF_TRY(vkf_check_tensor(cmd, tokens, VKF_DTYPE_I32, (uint64_t)rows * token_capacity, fn, "tokens"));
    vkf_push_sample pc = {.rows = rows, .cols = cols, .token_capacity = token_capacity,
                          .inv_temperature = 1.0f / o->temperature, .top_k = o->top_k, .top_p = o->top_p,
                          .seed_lo = (uint32_t)o->seed, .seed_hi = (uint32_t)(o->seed >> 32), .eos = eos,
                          .min_new = o->min_new, .force_step = o->forced_eos ? token_capacity - 1 : UINT32_MAX};
    if (rows > ctx->info.max_workgroup_count[0])
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %u rows exceed the device's grid", fn, rows);
    uint32_t groups[3] = {rows, 1, 1};
    uint32_t spec[1] = {ctx->tuning.row_workgroup};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, logits->dtype == VKF_DTYPE_F16 ? VKF_VARIANT_SAMPLE_ACT16 : VKF_VARIANT_SAMPLE, spec,
                             1, &pipe));
    vkf_binding b[4] = {{logits, VKF_READ}, {state, VKF_READ}, {ids, VKF_WRITE}, {tokens, VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, b, 4, &pc, sizeof pc, groups, "sample");
}

/* ------------------------------------------------------------------ logits processors, scoring */

vkf_status vkf_op_logits_process(vkf_cmd *cmd, const vkf_logits_process_desc *d)
{
    static const char fn[] = "logits_process";
    VKF_TRY(vkf_check_cmd(cmd, d, fn));
    vkf_context *ctx = vkf_cmd_context(cmd);
    if (!d->logits || d->logits->dtype == VKF_DTYPE_I32 || d->logits->dtype == VKF_DTYPE_I8)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: logits must be an F32 or F16 tensor", fn);
    if (!d->rows || !d->vocab || !d->steps || d->row_stride < 2 || !(d->penalty > 0))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: rows, vocab, steps must be positive, row_stride >= 2, "
                        "penalty > 0", fn);
    uint64_t cells = (uint64_t)d->rows * d->vocab;
    VKF_TRY(vkf_check_tensor(cmd, d->logits, d->logits->dtype, cells, fn, "logits"));
    VKF_TRY(vkf_check_tensor(cmd, d->state, VKF_DTYPE_I32, 1, fn, "state"));
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
                                  .flags = (d->log_probs ? 1u : 0u) | (d->row_index ? 2u : 0u), .penalty = d->penalty,
                                  .ngram = d->ngram, .n_suppress = d->n_suppress, .n_end = d->n_end, .n_bad = d->n_bad,
                                  .min_new = d->min_new, .forced_bos = d->forced_bos,
                                  .forced_eos = d->forced_eos ? 1u : 0u, .eos = d->eos, .n_begin = d->n_begin,
                                  .ts_begin = d->ts_begin, .no_timestamps = d->no_timestamps,
                                  .ts_max_initial = d->ts_max_initial, .ts_eos = d->ts_eos};
    uint32_t groups[3];
    VKF_TRY(row_grid(ctx, d->rows, groups, fn));
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
    VKF_TRY(row_grid(ctx, rows, groups, fn));
    uint32_t spec[1] = {ctx->tuning.row_workgroup};
    const vkf_pipeline *pipe;
    VKF_TRY(vkf_pipeline_get(ctx, logits->dtype == VKF_DTYPE_F16 ? VKF_VARIANT_LOGPROB_GATHER_ACT16
                                                                  : VKF_VARIANT_LOGPROB_GATHER, spec, 1, &pipe));
    vkf_binding b[3] = {{logits, VKF_READ}, {labels, VKF_READ}, {out, VKF_WRITE}};
    return vkf_cmd_dispatch(cmd, pipe, b, 3, &pc, sizeof pc, groups, "logprob_gather");
}

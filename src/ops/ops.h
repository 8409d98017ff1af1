/* The ops layer (src/ops/): one host function per kernel, which checks its
 * arguments, fills the push constants and records the dispatch. The attention
 * kernels' host functions are in the attention layer above it. */
#ifndef VKF_OPS_H
#define VKF_OPS_H

#include "runtime/runtime.h"

/* ------------------------------------------------------------------ argument checks (ops.c) */

/* The list exists, may still record, and its context is not lost; desc is not NULL. */
vkf_status vkf_check_cmd(vkf_cmd *cmd, const void *desc, const char *fn);
/* The tensor exists, has the dtype, belongs to the list's context and holds at
 * least `elements` elements. */
vkf_status vkf_check_tensor(vkf_cmd *cmd, const vkf_tensor *t, vkf_dtype dtype, uint64_t elements, const char *fn,
                            const char *name);
/* The activation dtype of an op: that of `first` (F32, or F16 on devices with
 * 16-bit storage). */
vkf_status vkf_activation_dtype(vkf_cmd *cmd, const vkf_tensor *first, const char *fn, const char *name, vkf_dtype *out);
/* Another activation of the op: first's dtype, and at least `elements` of it. */
vkf_status vkf_check_activation(vkf_cmd *cmd, const vkf_tensor *t, vkf_dtype dtype, uint64_t elements, const char *fn,
                                const char *name, const char *first);
/* Lays `count` workgroups out in 2-D when they pass the x limit; the shaders undo
 * it with linear_workgroup(). */
vkf_status vkf_linear_grid(const vkf_context *ctx, uint64_t count, uint32_t groups[3], const char *fn);

/* Sparsity pattern of the fused kernel, on query row i and key row j. */
typedef enum vkf_attention_pattern {
    VKF_ATTENTION_DENSE = 0,            /* every key */
    VKF_ATTENTION_LOCAL = 1,            /* local:W, allowed iff |i - j| <= W */
    VKF_ATTENTION_STRIDED = 2,          /* strided:W:S, allowed iff |i - j| <= W or j % S == S - 1 */
    VKF_ATTENTION_BIGBIRD = 3,          /* bigbird:B:G:R, see vkf_bigbird_allowed */
    VKF_ATTENTION_TGLOBAL = 4,          /* tglobal:W:G (LongT5's transient-global): |i - j| <= W, plus global keys
                                           that summarise each block of G tokens (not causal) */
} vkf_attention_pattern;

/* ------------------------------------------------------------------ attention patterns (attention.c) */
/* BigBird's block pattern: query block qi = i / B may see key block kj = j / B iff
 * |qi - kj| <= 1, or qi < G or kj < G (global blocks), or kj is one of the R random
 * blocks of qi (vkf_bigbird_random_blocks). */
typedef struct vkf_bigbird {
    uint32_t block;                     /* B >= 1 tokens per block */
    uint32_t globals;                   /* G global blocks */
    uint32_t random;                    /* R random blocks per query block, at most VKF_BIGBIRD_MAX_RANDOM */
    bool causal;                        /* random blocks drawn only from earlier blocks (see below) */
    uint64_t seed;
} vkf_bigbird;
#define VKF_BIGBIRD_MAX_RANDOM 64u
/* ------------------------------------------------------------------ decode-step ops (ops.c) */

/* Attention of one query row per (b, h). q, k, v are (batch, rows, heads * head_dim)
 * views given as offset, row stride and batch stride in elements; out is
 * (batch, heads * head_dim) packed. Key count: state[0] + 1 when length_from_state,
 * else lengths[b]; at most max_keys. scratch holds (batch * heads, max_keys).
 * Per-row positions: a state of more than one element (at least batch) gives each
 * row its own, state[b] (a negative one: no key, zeros out), for the key count, the
 * patterns and the bias; a state of one element is every row's position. The
 * decode-step ops below read a state the same way. */
typedef struct vkf_attention_decode_desc {
    uint32_t batch, heads, head_dim, max_keys;
    float scale;
    const vkf_tensor *q, *k, *v;
    uint64_t q_offset, q_batch, k_offset, k_row, k_batch, v_offset, v_row, v_batch;
    const vkf_tensor *lengths;          /* (batch) I32, or the state: (1) I32, or (batch) per row */
    bool length_from_state;
    vkf_tensor *scratch;                /* (batch * heads, max_keys) */
    vkf_tensor *out;                    /* (batch, heads * head_dim) */
    uint32_t pattern;                   /* a vkf_attention_pattern, only with length_from_state: */
    uint32_t window, stride;            /* the query's row is state[0] */
    vkf_bigbird bigbird;                /* BIGBIRD (causal): parameters, and the random blocks of */
    const vkf_tensor *random_blocks;    /* query blocks 0 .. ceil(max_keys / B) - 1, (blocks, R) I32 */
    uint32_t kv_div;                    /* > 1: query row b reads the K/V and length of row b / kv_div, so a
                                           source's beams share its cross-attention keys; 0 or 1: row b */
    const vkf_tensor *row_index;        /* (batch, max_keys) I32 or NULL, only with length_from_state: key j of
                                           row b is in row row_index[b][j] of k and v (beam search: a beam's
                                           history stays in the rows its ancestors wrote; clamped to the batch) */
    const vkf_tensor *rel_bias;         /* (heads, 2 rel_radius + 1) F32 or NULL, only with length_from_state:
                                           T5's relative position bias, score (j) += [h][clamp(j - state[0], +-R) + R] */
    uint32_t rel_radius;
} vkf_attention_decode_desc;
vkf_status vkf_op_attention_decode(vkf_cmd *cmd, const vkf_attention_decode_desc *desc);
/* cache_k/v (batch, capacity, d)[b, pos] = qkv (batch, 3d) K/V parts, pos = state[0]
 * or state[b] (per row; negative or past capacity: nothing written). */
vkf_status vkf_op_kv_append(vkf_cmd *cmd, const vkf_tensor *qkv, const vkf_tensor *state, vkf_tensor *cache_k,
                            vkf_tensor *cache_v, uint32_t batch, uint32_t d, uint32_t capacity);
/* ids[b] = argmax logits[b]; tokens[b, pos] = ids[b], pos = state[0] or state[b]. */
vkf_status vkf_op_argmax(vkf_cmd *cmd, const vkf_tensor *logits, const vkf_tensor *state, vkf_tensor *ids,
                         vkf_tensor *tokens, uint32_t rows, uint32_t cols, uint32_t token_capacity);
/* state[i] += 1 for every element of state (one position, or one per row) that
 * is not negative (a free slot). */
vkf_status vkf_op_advance(vkf_cmd *cmd, vkf_tensor *state);

/* ------------------------------------------------------------------ decoding ops (decode_ops.c) */

#define VKF_MAX_BEAMS 16                /* MAX_BEAMS of beam_topk.comp */
#define VKF_MAX_CAND 64                 /* MAX_CAND of beam_partial.comp: candidates per source and step */

/* Beam search's table of cache rows (kv_gather.comp): dst[r, j] = src[parent[r], j]
 * for j < t and dst[r, t] = r, t = state[0]; src and dst (rows, steps) I32. */
vkf_status vkf_op_kv_gather(vkf_cmd *cmd, const vkf_tensor *src, const vkf_tensor *parent, const vkf_tensor *state,
                            vkf_tensor *dst, uint32_t rows, uint32_t steps);
/* ids[row] (and tokens[row, state[0]]) drawn from logits[row] with the options'
 * temperature, top_k, top_p and seed (see sample.comp). */
vkf_status vkf_op_sample(vkf_cmd *cmd, const vkf_tensor *logits, const vkf_tensor *state, vkf_tensor *ids,
                         vkf_tensor *tokens, uint32_t rows, uint32_t cols, uint32_t token_capacity,
                         const vkf_generate_options *o, int32_t eos);
/* The same with each row's own seed: seeds (rows, 2) I32 holds each row's 64-bit
 * seed (low word first), and each row draws as row 0 of a call with that seed
 * (o's seed unused); seeds NULL: vkf_op_sample. */
vkf_status vkf_op_sample_seeded(vkf_cmd *cmd, const vkf_tensor *logits, const vkf_tensor *state, vkf_tensor *ids,
                                vkf_tensor *tokens, uint32_t rows, uint32_t cols, uint32_t token_capacity,
                                const vkf_generate_options *o, int32_t eos, const vkf_tensor *seeds);
/* cand_scores/cand_ids (sources, n_cand) = the n_cand best of beam_scores[row] +
 * log_softmax(logits[row]) over each source's beams x vocab (see beam_topk.comp). */
vkf_status vkf_op_beam_topk(vkf_cmd *cmd, const vkf_tensor *logits, const vkf_tensor *beam_scores,
                            const vkf_tensor *state, vkf_tensor *stats, vkf_tensor *cand_x, vkf_tensor *cand_id,
                            uint32_t chunk, vkf_tensor *cand_scores, vkf_tensor *cand_ids, uint32_t sources,
                            uint32_t beams, uint32_t vocab, uint32_t n_cand, int32_t eos, uint32_t min_new,
                            uint32_t force_step, uint32_t renormalize);

/* The logits processors of a decode step (logits_process.comp): scores (rows,
 * vocab) F32 = the rows' logits (log_probs: their log_softmax) with the
 * repetition penalty, n-gram and bad-sequence bans, min_new, forced bos/eos and
 * suppressed ids applied, each row seeing its own sequence so far; rows inside
 * their target prefix get their next prefix id as the only choice. */
typedef struct vkf_logits_process_desc {
    uint32_t rows, vocab, steps;
    const vkf_tensor *logits;           /* (rows, vocab) F32 or F16 */
    const vkf_tensor *state;            /* (1) I32: the step's input position t */
    const vkf_tensor *step_ids;         /* (rows) I32: the step's input ids */
    const vkf_tensor *row_index;        /* (rows, steps) I32 or NULL: beam search's rows of each position */
    vkf_tensor *inputs;                 /* (rows, steps) I32: each row's input ids by position (written at t) */
    const vkf_tensor *row_data;         /* (rows, row_stride) I32: prefix length, new-token limit, prefix ids */
    uint32_t row_stride;
    const vkf_tensor *lists;            /* I32: n_suppress suppressed ids, n_end end ids, n_bad bad-sequence ints */
    uint32_t n_suppress, n_end, n_bad;
    bool log_probs;
    bool row_settings;                  /* each row's forced bos, repetition penalty (float bits) and n-gram size
                                           in row_data[2..4] (the prefix ids from [5]); the push constants' unused */
    float penalty;                      /* 1: off */
    uint32_t ngram, min_new;
    int32_t forced_bos;                 /* -1: none */
    bool forced_eos;
    int32_t eos;
    vkf_tensor *scores;                 /* (rows, vocab) F32 */
    /* Whisper (SuppressTokensAtBeginLogitsProcessor, WhisperTimeStampLogitsProcessor):
     * n_begin ids after the other lists banned at a row's first new token;
     * ts_begin > 0: the timestamp rules over each row's new tokens, then text
     * banned where the timestamps' summed probability beats every text id's */
    uint32_t n_begin;
    int32_t ts_begin, no_timestamps, ts_max_initial, ts_eos;
} vkf_logits_process_desc;
vkf_status vkf_op_logits_process(vkf_cmd *cmd, const vkf_logits_process_desc *desc);
/* out[r] (rows) F32 = log_softmax(logits[r])[labels[r]], 0 where labels[r] < 0. */
vkf_status vkf_op_logprob_gather(vkf_cmd *cmd, const vkf_tensor *logits, const vkf_tensor *labels, vkf_tensor *out,
                                 uint32_t rows, uint32_t vocab);

/* ------------------------------------------------------------------ T5 and LongT5 (t5_ops.c) */

/* The gated FFN (T5 v1.1): h (rows, 2n) of F32 or F16 activations holds x·W0ᵀ in
 * columns [0, n) and x·W1ᵀ in [n, 2n); in place, h[r, c] = act(h[r, c]) * h[r, n + c]
 * for c < n. */
vkf_status vkf_op_glu(vkf_cmd *cmd, vkf_tensor *h, uint32_t rows, uint32_t n, vkf_activation act);

/* Transient-global's global tokens (block_sum.comp): out (batch, gmax, cols) rows
 * g < n_b = min(len_b / block, gmax) are the sum (or mean) of x's rows of block g
 * of sequence b (the last one also taking the tokens past n_b * block, up to
 * len_b), the rest zero. x and out are views of one activation dtype; len_b is
 * lengths[b] (clamped to lk) or lk. */
typedef struct vkf_block_sum_desc {
    uint32_t batch, lk, cols, block, gmax;
    bool mean;
    const vkf_tensor *x;                /* element (b, t, c) at x_offset + b * x_batch + t * x_row + c */
    uint64_t x_offset, x_row, x_batch;
    const vkf_tensor *lengths;          /* (batch) I32, or NULL */
    vkf_tensor *out;                    /* element (b, g, c) at o_offset + b * o_batch + g * o_row + c */
    uint64_t o_offset, o_row, o_batch;
} vkf_block_sum_desc;
vkf_status vkf_op_block_sum(vkf_cmd *cmd, const vkf_block_sum_desc *d);

/* Whether ctx's driver is llvmpipe before Mesa 26 (Debian 12's lavapipe), which ends
 * every loop of a shader invocation once 65535 iterations have run in all its loops
 * together (gallivm's loop limiter), with no error: the output is silently wrong
 * (docs/reliability.md, "Loop limits"; Mesa 26.2 has no such limit). Kernels that
 * loop long in one invocation keep there to VKF_LOOP_BUDGET iterations (half the
 * limit, their counts being upper bounds) or fail with an error. */
#define VKF_LOOP_BUDGET 32768u
bool vkf_loop_limited(const vkf_context *ctx);
/* The workgroup of a kernel whose invocations each loop over a row of `cols`
 * (softmax, layernorm, sampling): the device's row_workgroup; where
 * vkf_loop_limited, the fewest invocations (a power of two, at most the device's
 * largest workgroup) that keep passes * cols / wg + per_wg * wg + fixed loop
 * iterations per invocation within VKF_LOOP_BUDGET; 0 where none does, which
 * vkf_loop_row_too_long reports. */
uint32_t vkf_loop_row_workgroup(const vkf_context *ctx, uint64_t cols, uint32_t passes, uint32_t per_wg,
                                uint32_t fixed);
vkf_status vkf_loop_row_too_long(const vkf_context *ctx, uint32_t cols, const char *fn);

#endif /* VKF_OPS_H */

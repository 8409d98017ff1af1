/* Push-constant structs, one per shader family, mirrored from the GLSL blocks
 * named in each comment. The static asserts keep both sides the same size. */
#ifndef VKF_PUSH_H
#define VKF_PUSH_H

#include <stdint.h>

/* A matrix view in elements: offset, row stride, two batch strides. */
typedef struct vkf_push_view {
    uint32_t offset, row, batch0, batch1;
} vkf_push_view;

/* shaders/matmul_push.glsl */
typedef struct vkf_push_matmul {
    uint32_t m, n, k;
    uint32_t flags;                     /* VKF_MATMUL_FLAG_* | activation << 4 */
    uint32_t batch_inner;
    float alpha;
    vkf_push_view a, b, c, r;           /* a_offset, a_row, ... in the GLSL block */
    uint32_t k_split;                   /* split-K: K per split (a multiple of BK), else 0 */
} vkf_push_matmul;
_Static_assert(sizeof(vkf_push_matmul) == 23 * 4, "mirror of matmul_push.glsl");

enum {
    VKF_MATMUL_FLAG_BIAS = 1u,
    VKF_MATMUL_FLAG_RESIDUAL = 2u,
    VKF_MATMUL_FLAG_B_KN = 4u,
    VKF_MATMUL_FLAG_VEC4 = 8u,
    VKF_MATMUL_FLAG_C_ALIGNED = 128u,   /* C and R rows 16-byte aligned: matmul_coopmat stores fragments directly */
    VKF_MATMUL_FLAG_A_WIDE = 256u,      /* A's rows start on 8 elements, k % 8 == 0: matmul_coopmat loads 8 k at once */
    VKF_MATMUL_FLAG_B_WIDE = 512u,      /* the same for B (n, k) */
};

/* shaders/softmax.comp */
typedef struct vkf_push_softmax {
    uint32_t rows, cols;
    uint32_t has_mask;
    float scale;
    uint32_t mask_rows, mask_row_div;
    uint32_t causal_period, causal_offset;
    uint32_t mask_row0;
    uint32_t rel_bias;                  /* 1: T5's relative position bias from binding 3 */
    uint32_t rel_radius, rel_period, rel_heads, rel_head0;
} vkf_push_softmax;
_Static_assert(sizeof(vkf_push_softmax) == 14 * 4, "mirror of softmax.comp");

/* shaders/layernorm.comp */
typedef struct vkf_push_layernorm {
    uint32_t rows, cols;
    uint32_t flags;                     /* bit 0 residual, bit 1 write the sum, bit 2 RMSNorm, bit 3 no beta */
    float eps;
} vkf_push_layernorm;
_Static_assert(sizeof(vkf_push_layernorm) == 4 * 4, "mirror of layernorm.comp");

/* shaders/embed.comp */
typedef struct vkf_push_embed {
    uint32_t tokens, d, vocab;
    uint32_t positions;                 /* rows of the PE table; 0 = no positional term */
    float scale;
    uint32_t seq_len, pos_offset;
    uint32_t pos_from_state;
    uint32_t row0, rows;                /* the vocabulary rows this table holds */
    uint32_t has_position_ids;          /* binding 6: each token's position row */
    uint32_t pad_position;              /* a pad_id token reads row pad_row */
    int32_t pad_id;
    uint32_t pad_row;
} vkf_push_embed;
_Static_assert(sizeof(vkf_push_embed) == 14 * 4, "mirror of embed.comp");

/* shaders/attention_decode.comp */
typedef struct vkf_push_attention_decode {
    uint32_t heads, head_dim;
    uint32_t length_from_state;         /* 0: lengths per row; 1: state[0] + 1; 2: state[b] + 1 */
    float scale;
    uint32_t q_offset, q_batch;
    uint32_t k_offset, k_row, k_batch;
    uint32_t v_offset, v_row, v_batch;
    uint32_t out_batch;
    uint32_t max_keys;
    uint32_t pattern, window, stride;
    uint32_t bb_block, bb_globals, bb_random;
    uint32_t random_len;
    uint32_t kv_div;                    /* K/V row of b: b / kv_div (>= 1) */
    uint32_t rows;                      /* batch * heads */
    uint32_t indexed;                   /* 1: key j of row b is in row row_index[b * max_keys + j] */
    uint32_t rel_bias;                  /* 1: T5's relative position bias from binding 8 */
    uint32_t rel_radius;
} vkf_push_attention_decode;
_Static_assert(sizeof(vkf_push_attention_decode) == 26 * 4, "mirror of attention_decode.comp");

/* shaders/kv_append.comp */
typedef struct vkf_push_kv_append {
    uint32_t batch, d, capacity;
    uint32_t state_stride;              /* 0: one position for every row; 1: one per row */
} vkf_push_kv_append;
_Static_assert(sizeof(vkf_push_kv_append) == 4 * 4, "mirror of kv_append.comp");

/* shaders/argmax.comp */
typedef struct vkf_push_argmax {
    uint32_t rows, cols;
    uint32_t token_capacity;
    uint32_t state_stride;              /* 0: one position for every row; 1: one per row */
} vkf_push_argmax;
_Static_assert(sizeof(vkf_push_argmax) == 4 * 4, "mirror of argmax.comp");

/* shaders/advance.comp */
typedef struct vkf_push_advance {
    uint32_t count;                     /* positions to move on */
} vkf_push_advance;
_Static_assert(sizeof(vkf_push_advance) == 1 * 4, "mirror of advance.comp");

/* shaders/attention_fused.comp */
typedef struct vkf_push_attention_fused {
    uint32_t batch, heads, head_dim;
    uint32_t lq, lk;
    float scale;                        /* softmax scale × log2(e) */
    uint32_t q_offset, q_row, q_batch;
    uint32_t k_offset, k_row, k_batch;
    uint32_t v_offset, v_row, v_batch;
    uint32_t flags;                     /* VKF_ATTENTION_FLAG_* */
    uint32_t causal_offset;
    uint32_t pattern;                   /* vkf_attention_pattern */
    uint32_t window, stride;
    uint32_t q_blocks;
    uint32_t bb_block, bb_globals, bb_random;
    uint32_t bb_offsets, bb_lists;
    uint32_t table_len;
    uint32_t rel_radius;                /* relative position bias (T5) */
    uint32_t global_block, global_max;  /* tglobal (LongT5) */
    uint32_t global_radius;
} vkf_push_attention_fused;
_Static_assert(sizeof(vkf_push_attention_fused) == 31 * 4, "mirror of attention_fused.comp");

/* shaders/attention_split_reduce.comp (fused attention's split-K form) */
typedef struct vkf_push_attention_split_reduce {
    uint32_t rows;                      /* batch * heads * lq */
    uint32_t lq, heads, head_dim;
    uint32_t dp;                        /* floats per partial row of O */
    uint32_t splits;
    uint32_t ml;                        /* first element of the [m, l] pairs */
} vkf_push_attention_split_reduce;
_Static_assert(sizeof(vkf_push_attention_split_reduce) == 7 * 4, "mirror of attention_split_reduce.comp");

enum {
    VKF_ATTENTION_FLAG_LENGTHS = 1u,
    VKF_ATTENTION_FLAG_CAUSAL = 2u,
    VKF_ATTENTION_FLAG_REL_BIAS = 4u,
    VKF_ATTENTION_FLAG_GLOBAL_BIAS = 8u,
};

/* shaders/kv_gather.comp */
typedef struct vkf_push_kv_gather {
    uint32_t rows, steps;
    uint32_t state_stride;              /* 0: one position for every row; 1: one per row */
} vkf_push_kv_gather;
_Static_assert(sizeof(vkf_push_kv_gather) == 3 * 4, "mirror of kv_gather.comp");

/* shaders/beam_topk.comp */
typedef struct vkf_push_beam_topk {
    uint32_t sources, beams, vocab, n_cand;
    uint32_t chunks;
    uint32_t force_step;                /* UINT32_MAX: never */
    uint32_t state_stride;              /* 0: one position for every row; 1: one per row */
} vkf_push_beam_topk;
_Static_assert(sizeof(vkf_push_beam_topk) == 7 * 4, "mirror of beam_topk.comp");

/* shaders/beam_partial.comp */
typedef struct vkf_push_beam_partial {
    uint32_t rows, vocab, chunk, chunks, n_cand;
    int32_t eos;
    uint32_t min_new;
    uint32_t force_step;                /* UINT32_MAX: never */
    uint32_t renormalize;               /* 0: log_softmax, 1: eos out of it before min_new, 2: log-probs as given */
    uint32_t state_stride;              /* 0: one position for every row; 1: one per row */
} vkf_push_beam_partial;
_Static_assert(sizeof(vkf_push_beam_partial) == 10 * 4, "mirror of beam_partial.comp");

/* shaders/sample.comp */
typedef struct vkf_push_sample {
    uint32_t rows, cols;
    uint32_t token_capacity;
    float inv_temperature;
    uint32_t top_k;                     /* 0: off */
    float top_p;                        /* 1: off */
    uint32_t seed_lo, seed_hi;
    int32_t eos;
    uint32_t min_new;
    uint32_t force_step;                /* UINT32_MAX: never */
    uint32_t state_stride;              /* 0: one position for every row; 1: one per row */
    uint32_t row_seeds;                 /* 1: each row's seed from the seeds tensor, drawn as row 0 */
} vkf_push_sample;
_Static_assert(sizeof(vkf_push_sample) == 13 * 4, "mirror of sample.comp");

/* shaders/logits_process.comp */
typedef struct vkf_push_logits_process {
    uint32_t rows, vocab;
    uint32_t steps;                     /* columns of inputs and row_index */
    uint32_t row_stride;                /* ints per row of row_data */
    uint32_t flags;                     /* 1: log-probabilities (beam search), 2: row_index bound, 4: state per row */
    float penalty;
    uint32_t ngram;
    uint32_t n_suppress, n_end, n_bad;
    uint32_t min_new;
    int32_t forced_bos;                 /* -1: none */
    uint32_t forced_eos;
    int32_t eos;
    uint32_t n_begin;                   /* begin-suppressed ids after the other lists */
    int32_t ts_begin;                   /* Whisper's timestamp rules: the first timestamp id; 0: off */
    int32_t no_timestamps;              /* <|notimestamps|> */
    int32_t ts_max_initial;             /* max_initial_timestamp_index; -1: none */
    int32_t ts_eos;                     /* the rules' eos (text ids are those below it) */
} vkf_push_logits_process;
_Static_assert(sizeof(vkf_push_logits_process) == 19 * 4, "mirror of logits_process.comp");

/* shaders/logprob_gather.comp */
typedef struct vkf_push_logprob_gather {
    uint32_t rows, vocab;
} vkf_push_logprob_gather;
_Static_assert(sizeof(vkf_push_logprob_gather) == 2 * 4, "mirror of logprob_gather.comp");
/* shaders/glu.comp */
typedef struct vkf_push_glu {
    uint32_t rows, n;
    uint32_t act;                       /* vkf_activation */
} vkf_push_glu;
_Static_assert(sizeof(vkf_push_glu) == 3 * 4, "mirror of glu.comp");

/* shaders/block_sum.comp */
typedef struct vkf_push_block_sum {
    uint32_t batch, gmax, cols;
    uint32_t block, lk;
    uint32_t has_lengths, mean;
    uint32_t x_offset, x_row, x_batch;
    uint32_t o_offset, o_row, o_batch;
} vkf_push_block_sum;
_Static_assert(sizeof(vkf_push_block_sum) == 13 * 4, "mirror of block_sum.comp");

#endif /* VKF_PUSH_H */

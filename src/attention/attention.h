/* The attention layer (src/attention/): the fused kernel and its sparse
 * patterns, BigBird's tables, low-rank projections, LSH (attention_lsh.h), the
 * one switch from a variant to its kernels, and the public vkf_cmd_attention. */
#ifndef VKF_ATTENTION_H
#define VKF_ATTENTION_H

#include "ops/ops.h"

/* BigBird (vkf_bigbird, ops.h): */

/* The random key blocks of query block qb into out[0 .. random): distinct blocks
 * drawn without replacement by a splitmix64 stream seeded from (seed, qb), among
 * the blocks a query of qb does not already see: not global, not qb - 1 .. qb + 1,
 * and below key_blocks or, causal, below qb - 1 (so the draw does not depend on
 * the sequence length, and a decode step draws what the forward pass drew). -1
 * fills the places left when there are fewer candidates, and every place of a
 * global query block (it sees everything). */
void vkf_bigbird_random_blocks(const vkf_bigbird *bb, uint32_t qb, uint32_t key_blocks, int32_t *out);
/* Whether query i may see key j under the pattern, given qi's random blocks. */
bool vkf_bigbird_allowed(const vkf_bigbird *bb, const int32_t *random_of_qi, uint32_t i, uint32_t j);

/* ------------------------------------------------------------------ fused attention (attention.c) */

/* Which fused kernel runs a vkf_attention_desc: vkf_attention_kernel (vkformer.h);
 * `tiles` apply to the scalar one. */

/* (batch, rows, heads * head_dim) inside a tensor: element (b, r, h, c) is at
 * offset + b * batch_stride + r * row_stride + h * head_dim + c (in elements).
 * row_stride 0: heads * head_dim; batch_stride 0: rows * row_stride. A fused QKV
 * projection (batch * rows, 3d) gives Q, K, V as row stride 3d, offsets 0, d, 2d. */
typedef struct vkf_attention_view {
    const vkf_tensor *tensor;           /* borrowed, F32 */
    uint64_t offset, row_stride, batch_stride;
} vkf_attention_view;

/* out[b, i, h, :] = Σ_j softmax_j(scale · q[b, i, h, :]·k[b, j, h, :] + mask) v[b, j, h, :]
 * where key j is masked for query i iff any of: j >= key_lengths[b] (when given);
 * causal and j > i + causal_offset; the pattern disallows (i, j). Positions i, j are
 * row indices of the views (the pattern does not see causal_offset). A query with
 * every key masked gets zeros. */
typedef struct vkf_attention_desc {
    uint32_t batch, heads, head_dim;    /* head_dim 1..VKF_ATTENTION_MAX_HEAD_DIM */
    uint32_t lq, lk;                    /* query rows, key rows */
    float scale;                        /* usually 1 / sqrt(head_dim) */
    vkf_attention_view q;               /* (batch, lq, heads * head_dim) */
    vkf_attention_view k;               /* (batch, lk, heads * head_dim) */
    vkf_attention_view v;               /* (batch, lk, heads * head_dim) */
    const vkf_tensor *key_lengths;      /* (batch) I32, borrowed, or NULL: all lk keys; clamped to [0, lk] */
    bool causal;
    uint32_t causal_offset;             /* query i sees keys j <= i + causal_offset */
    vkf_attention_pattern pattern;
    uint32_t window;                    /* W of local/strided */
    uint32_t stride;                    /* S of strided, >= 1 */
    vkf_bigbird bigbird;                /* the BIGBIRD pattern's parameters */
    const vkf_tensor *table;            /* BIGBIRD: from vkf_attention_table_create for this desc, borrowed */
    vkf_tensor *out;                    /* (batch * lq, heads * head_dim), packed; may not alias an input */
    const vkf_attention_tiles *tiles;   /* borrowed; NULL: vkf_attention_tiles_choose */
    vkf_dtype dtype;                    /* of q, k, v and out: F32 (0, the default) or F16 (16-bit
                                           storage only; arithmetic stays fp32) */
    vkf_attention_kernel kernel;        /* AUTO (0): see vkf_attention_kernel */
    /* T5's relative position bias and LongT5's transient-global keys (appended): */
    const vkf_tensor *bias_table;       /* F32, borrowed: the tables below, or NULL */
    bool rel_bias;                      /* score (i, j) += bias_table[h (2 rel_radius + 1) + clamp(j - i, +-R) + R] */
    uint32_t rel_radius;                /* R */
    bool global_bias;                   /* TGLOBAL: global key g of query i gets the global table's
                                           [h][clamp(g - blk(i), +-Rg) + Rg], blk(i) = min(i / G, n_glob - 1); the
                                           table (heads, 2 Rg + 1) follows the local one (or starts at 0) */
    uint32_t global_radius;             /* Rg */
    uint32_t global_block;              /* TGLOBAL: G >= 1 tokens per global block; sequence b has n_glob =
                                           min(len_b / G, global_max) global keys */
    const vkf_tensor *global_kv;        /* TGLOBAL: (batch, global_max, 2 heads * head_dim) of dtype, borrowed:
                                           each global key's key, then its value */
    uint32_t global_max;                /* TGLOBAL: rows of global_kv per sequence */
    /* Split-K (flash decoding, appended): 0 the rule (GPUs: calls of fewer workgroups
     * than twice the compute units; the environment's VKFORMER_ATTENTION_SPLIT=N
     * overrides it), 1 never, N >= 2 that many key runs, as memory allows (tests). */
    uint32_t splits;
} vkf_attention_desc;

/* Zeros everything; scale 1. */
void vkf_attention_desc_init(vkf_attention_desc *desc);
/* A (batch, rows, cols) view lies inside its tensor and every index fits the
 * shaders' 32 bits. Fills out with offset, row and batch strides (defaults resolved). */
vkf_status vkf_check_attention_view(vkf_cmd *cmd, const vkf_attention_view *view, vkf_dtype dtype, uint64_t batch,
                                    uint64_t rows, uint64_t cols, const char *fn, const char *name, uint32_t out[3]);
/* Tiles for this device and head_dim: the rows form on CPU drivers, the split form
 * elsewhere; bq and bk as large as the workgroup and shared-memory limits allow. */
void vkf_attention_tiles_choose(const vkf_context *ctx, uint32_t head_dim, vkf_attention_tiles *out_tiles);
/* Appends one fused-attention dispatch (label "attention_fused" or
 * "attention_fused_coopmat"), or in the split-K form two ("..._splitk", then
 * "attention_split_reduce") and a partials tensor the command list owns. */
vkf_status vkf_op_attention_fused(vkf_cmd *cmd, const vkf_attention_desc *desc);
/* The kernel desc->kernel resolves to on ctx: "fused-coopmat" or "fused". */
const char *vkf_attention_kernel_name(const vkf_context *ctx, const vkf_attention_desc *desc);

/* An attention variant as users name it (vkf_model_set_attention, --attention). */
typedef enum vkf_attention_kind {
    VKF_ATTN_FUSED = 0,                 /* the fused kernel with `pattern` (dense, local, strided, bigbird) */
    VKF_ATTN_NAIVE,                     /* dense-naive: scores materialised (matmul, softmax, matmul) */
    VKF_ATTN_LSH,                       /* Reformer's LSH attention (attention_lsh.c) */
    VKF_ATTN_LOWRANK,                   /* Linformer: K, V projected along the sequence to `rank` rows */
} vkf_attention_kind;

typedef struct vkf_attention_spec {
    vkf_attention_kind kind;
    vkf_attention_pattern pattern;      /* VKF_ATTN_FUSED's pattern */
    uint32_t window, stride;            /* local, strided, tglobal (its radius) */
    uint32_t block, globals, random;    /* bigbird; tglobal: block is its global block G */
    uint32_t rounds, chunk;             /* lsh */
    uint32_t rank;                      /* lowrank */
} vkf_attention_spec;

/* Parses "dense", "dense-naive", "local:W", "strided:W:S", "bigbird:B:G:R",
 * "tglobal:W:G", "lsh:H:C", "lowrank:K" (NULL: dense); for cross-attention only
 * dense, dense-naive and lowrank. VKF_ERROR_INVALID_ARGUMENT names what is wrong. */
vkf_status vkf_attention_parse(const char *spec, bool cross, vkf_attention_spec *out);

/* Lowrank's fixed projection E (count, K, S) for sequences of the given lengths
 * (each <= S): a sequence's len keys, in a seeded random order that depends on
 * the seed and len only, are dealt to the K rows in turn, and row r is the mean
 * of its keys. Rows past len stay empty: rows_out[b] = min(K, len) rows hold keys.
 * With K >= len it is a permutation, so lowrank equals dense attention. */
vkf_status vkf_lowrank_projection(uint64_t seed, uint32_t K, uint32_t S, const uint32_t *lengths, uint32_t count,
                                  float *E, int32_t *rows_out);
/* out (batch * K, 2 inner) = E (batch, K, S) · [keys values] of each sequence:
 * keys in columns 0..inner-1, values in inner..2 inner-1. k and v are (batch, S,
 * inner) views of `dtype` (E and out too). */
vkf_status vkf_attention_lowrank_kv(vkf_cmd *cmd, vkf_tensor *E, uint32_t batch, uint32_t K, uint32_t S,
                                    const vkf_attention_view *k, const vkf_attention_view *v, vkf_dtype dtype,
                                    uint64_t inner, vkf_tensor *out);
/* The I32 table the BIGBIRD pattern reads for exactly this desc (sizes, pattern,
 * tiles): each query block's random blocks, then each workgroup's list of key
 * blocks. The caller owns it, sets desc->table, and keeps it while the list runs.
 * The kernel clamps every index it reads from the table, so a wrong table gives
 * wrong numbers, never an access out of bounds. */
vkf_status vkf_attention_table_create(vkf_context *ctx, const vkf_attention_desc *desc, vkf_tensor **out_table);


/* ------------------------------------------------------------------ the variant switch (attention_record.c) */

struct vkf_lsh_plan;

/* One attention of any variant over device tensors, as vkf_attention_record
 * takes it: q, k, v (batch, rows, heads * head_dim) views, the masks, and what the
 * variant needs beyond them, made by the caller (vkf_cmd_attention makes them
 * for its list, the model's plans hold theirs). */
typedef struct vkf_attention_call {
    vkf_attention_spec spec;
    uint32_t batch, heads, head_dim, lq, lk;
    float scale;
    vkf_attention_view q, k, v;
    vkf_tensor *out;                    /* (batch * lq, heads * head_dim), packed */
    vkf_dtype dtype;                    /* of q, k, v, out (F32 for dense-naive and lsh) */
    vkf_attention_kernel kernel;
    bool causal;
    uint32_t causal_offset;
    const vkf_tensor *key_lengths;      /* (batch) I32 or NULL: all lk keys (fused, lsh) */
    const vkf_tensor *key_mask;         /* (batch, lk) F32, 0 or -inf, or NULL (dense-naive) */
    uint64_t seed;                      /* bigbird's random blocks */
    vkf_tensor *scores;                 /* dense-naive: F32 of at least lq x lk; all batch x heads at once when
                                           it holds them, else per sequence in groups of heads */
    const vkf_tensor *bigbird_table;    /* bigbird: vkf_attention_table_create's for this call */
    struct vkf_lsh_plan *lsh;           /* lsh: its plan for n >= lq */
    vkf_tensor *lowrank_proj;           /* lowrank: (batch, K, lk) E of dtype */
    vkf_tensor *lowrank_rows;           /* lowrank: (batch) I32, rows of E that hold keys */
    vkf_tensor *lowrank_kv;             /* lowrank: (batch * K, 2 heads * head_dim) of dtype */
    /* T5's relative position bias, LongT5's transient-global (appended): */
    const vkf_tensor *bias_table;       /* F32 (see vkf_attention_desc), or NULL */
    bool rel_bias, global_bias;
    uint32_t rel_radius, global_radius;
    const vkf_tensor *global_kv;        /* tglobal: (batch, global_max, 2 heads * head_dim) of dtype made by the
                                           caller (LongT5), or NULL: the block means of k and v, recorded into: */
    vkf_tensor *global_scratch;         /* tglobal without global_kv: (batch, global_max, 2 heads * head_dim) */
    uint32_t global_max;                /* tglobal: rows per sequence (0: no global keys) */
} vkf_attention_call;

/* Whether a variant runs through materialised scores: dense-naive, or dense
 * with a head_dim past the fused kernels. */
bool vkf_attention_materialises(const vkf_attention_spec *spec, uint32_t head_dim);
/* Records the variant's kernels. */
vkf_status vkf_attention_record(vkf_cmd *cmd, const vkf_attention_call *call);
/* bigbird: the table vkf_attention_record reads for this call (the caller owns it). */
vkf_status vkf_attention_call_table(vkf_context *ctx, const vkf_attention_call *call, vkf_tensor **out_table);

/* ------------------------------------------------------------------ transient-global (attention_record.c) */

/* Global keys per sequence of a tglobal:W:G call of lk keys: floor(lk / G). */
uint32_t vkf_tglobal_rows(uint32_t lk, uint32_t block);

/* Where an encoder-decoder runs attention. */
typedef enum vkf_attention_site {
    VKF_SITE_ENCODER = 0,               /* encoder self-attention */
    VKF_SITE_DECODER,                   /* decoder self-attention of a whole target (causal) */
    VKF_SITE_CROSS,                     /* cross-attention of a whole target */
    VKF_SITE_STEP_SELF,                 /* a decode step's self-attention over the KV cache */
    VKF_SITE_STEP_CROSS,                /* a decode step's cross-attention */
} vkf_attention_site;
/* What runs at a site when the user chose `self` and `cross`: the variant, or
 * dense where it cannot apply (lowrank in causal self-attention, lsh and
 * dense-naive in a decode step). */
vkf_attention_spec vkf_attention_for_site(const vkf_attention_spec *self, const vkf_attention_spec *cross,
                                          vkf_attention_site site);
/* The name vkf_attention_check takes for a spec ("dense", "local:128", ...);
 * "dense-naive" where it materialises scores at this head_dim (0: never). */
void vkf_attention_spec_name(const vkf_attention_spec *spec, uint32_t head_dim, char *out, size_t size);

/* An upper bound of the loop iterations one invocation of the scalar kernels' tiles
 * t (attention_fused*.comp, and attention_lsh_attend.comp as a rows form) runs over
 * `keys` keys, for drivers with a loop limiter (vkf_loop_limited in ops.h). */
uint64_t vkf_attention_loop_count(const vkf_attention_tiles *t, uint32_t head_dim, uint64_t keys);

#endif /* VKF_ATTENTION_H */

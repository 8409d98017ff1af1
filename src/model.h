/* What model.c (loading, forward pass) and generate.c (greedy decoding, beam
 * search, sampling) share: the model's weights and plans, and the recording
 * helpers of one decoder layer's pieces. Private to those two files. */
#ifndef VKF_MODEL_H
#define VKF_MODEL_H

#include "internal.h"
#include "attention/attention_lsh.h"

#define MAX_FORWARD_PLANS 4

typedef struct linear {
    vkf_tensor *w;                      /* (out, in), as nn.Linear.weight: F32, F16 or I8 */
    vkf_tensor *scale;                  /* (out) F32 per-output-channel scales iff w is I8, else NULL */
    vkf_tensor *b;                      /* (out) */
    vkf_tensor *b_gen;                  /* generator parts: b with -inf at banned ids, for generation; or NULL */
    uint32_t out, in;
    bool w_borrowed;                    /* w (and scale) belong to an embedding table (tied weights) */
} linear;

/* A (rows, d) embedding table in parts of rows_per_part rows (the last may be
 * shorter), each within one shader binding (maxStorageBufferRange). With
 * precision int8 the parts are I8 with per-row F32 scales (scale[i]: part i's rows). */
typedef struct split_table {
    vkf_tensor **part;                  /* (parts), owned unless borrowed */
    vkf_tensor **scale;                 /* (parts) owned unless borrowed, iff the parts are I8; else NULL */
    uint32_t parts, rows_per_part, rows;
    bool borrowed;                      /* the parts belong to another table (shared embeddings) */
} split_table;

struct vkf_hf;

typedef struct norm {
    vkf_tensor *g, *b;                  /* (d_model) each */
} norm;

typedef vkf_attention_spec attn_choice;

/* Where attention is recorded: which choice applies and which plan resources. */
enum attn_site { SITE_ENC_SELF = 0, SITE_DEC_SELF = 1, SITE_CROSS = 2 };

/* The largest batch that fit the device (0: none learned), and the longest
 * lengths it was learned at (vkf_run_chunked). */
typedef struct vkf_chunking {
    uint32_t cap;
    uint32_t len[2];
} vkf_chunking;

typedef struct enc_layer {
    linear qkv;                         /* (3d, d): self_attn.in_proj */
    linear o;                           /* (d, d): self_attn.out_proj */
    linear ff1, ff2;                    /* (d_ff, d), (d, d_ff) */
    norm n1, n2;
} enc_layer;

typedef struct dec_layer {
    linear qkv, o;                      /* self-attention */
    linear cq;                          /* (d, d): rows 0..d of multihead_attn.in_proj */
    linear ckv;                         /* (2d, d): rows d..3d */
    linear co;                          /* (d, d): multihead_attn.out_proj */
    linear ff1, ff2;
    norm n1, n2, n3;
} dec_layer;

/* Activations and the recorded command buffer of one forward shape. */
typedef struct fwd_plan {
    uint32_t batch, src_len, tgt_len;   /* B, S, T */
    vkf_cmd *cmd;                       /* owned */
    vkf_tensor *src_ids, *tgt_ids;      /* (B*S), (B*T) I32 */
    vkf_tensor *src_mask;               /* (B, S): 0 or -inf, for dense-naive */
    vkf_tensor *src_lengths;            /* (B) I32, for the fused kernel */
    vkf_tensor *a, *b, *n;              /* (B*max(S,T), d): residual stream ping-pong, normed */
    vkf_tensor *memory;                 /* (B*S, d) encoder output */
    vkf_tensor *qkv;                    /* (B*max(S,T), 3d) */
    vkf_tensor *q;                      /* (B*T, d) cross-attention queries */
    vkf_tensor *kv;                     /* (B*S, 2d) cross-attention keys and values */
    vkf_tensor *attn;                   /* (B*max(S,T), d) attention output */
    vkf_tensor *tmp;                    /* (B*max(S,T), d) sublayer output */
    vkf_tensor *hidden;                 /* (B*max(S,T), d_ff) */
    vkf_tensor *scores;                 /* (B*H, max(S,T), max(S,T)), only for dense-naive */
    vkf_tensor *logits;                 /* (B*T, V) */
    vkf_tensor *bb_table[2];            /* bigbird tables of encoder and decoder self-attention */
    vkf_lsh_plan *lsh;                  /* lsh: scratch and rotations for n <= max(S, T) */
    vkf_tensor *lr_proj[2];             /* lowrank (self, cross): (B, K, S) projection along the source */
    vkf_tensor *lr_lengths[2];          /* (B) I32: rows of the projection that hold keys */
    vkf_tensor *lr_kv;                  /* (B*K, 2d) projected keys and values */
} fwd_plan;

/* Greedy decoding of B sources of length S for up to `steps` tokens. */
typedef struct gen_plan {
    uint32_t batch, src_len, steps;
    uint32_t layers;                    /* entries of cross_kv, cache_k, cache_v */
    fwd_plan *enc;                      /* owned; encoder and cross K/V (tgt_len 1) */
    vkf_tensor **cross_kv;              /* (n_dec) each (B*S, 2d), owned */
    vkf_tensor **cache_k, **cache_v;    /* (n_dec) each (B, steps, d), owned */
    vkf_tensor *src_lengths;            /* (B) I32 */
    vkf_tensor *state;                  /* (1) I32: position of the step's input token */
    vkf_tensor *step_ids;               /* (B) I32: the step's input tokens, then its outputs */
    vkf_tensor *tokens;                 /* (B, steps) I32 */
    vkf_tensor *y, *y2, *yn, *qkv, *q, *attn, *tmp, *hidden, *scratch, *logits; /* (B, ...) */
    vkf_tensor *bb_random;              /* bigbird: (ceil(steps / B), R) random blocks of the decode step */
    uint32_t cross_keys;                /* rows of each cross_kv per sequence: S, or K for lowrank */
    vkf_cmd *step;                      /* owned, one decode step */
    vkf_cmd *encode;                    /* owned, encoder + cross K/V */
    /* Beam search (beams > 0): batch = sources * beams rows, row b*beams + k is beam k
     * of source b. Each step writes position t of every row into that row of
     * cache_k/v, which is never copied: kv_rows[][r][j] says which row holds row r's
     * position j (the row its ancestor had at step j). The tables ping-pong: step
     * (even positions) gathers kv_rows[0] by parent into kv_rows[1] (and sets
     * [r][t] = r) and attends through it, step2 (odd) the other way round. */
    uint32_t sources, beams;            /* 0 beams: a greedy plan */
    uint32_t min_new;                   /* recorded into beam_topk's push constants */
    bool forced_eos, renormalize;       /* likewise */
    vkf_tensor *kv_rows[2];             /* (B*K, steps) I32 each, owned */
    vkf_tensor *parent;                 /* (B*K) I32: the row each row continues */
    vkf_tensor *beam_scores;            /* (B*K) F32: sum of log-probabilities of each beam */
    vkf_tensor *cand_scores, *cand_ids; /* (B, 2K) F32, I32: the step's best (beam, token) pairs */
    vkf_tensor *topk_stats, *topk_x, *topk_id; /* (B*K, chunks, 2 | 2K | 2K): beam_partial.comp's results */
    uint32_t topk_chunk, topk_chunks;   /* vocabulary ids per chunk, chunks per row */
    vkf_cmd *step2;                     /* owned, the decode step of odd positions */
    bool sample;                        /* a greedy plan whose step samples (sampling below, recorded in) */
    vkf_generate_options sampling;
} gen_plan;

struct vkf_model {
    vkf_context *ctx;                   /* borrowed */
    vkf_model_config cfg;
    char **src_vocab, **tgt_vocab;      /* owned, or NULL */
    bool split_chars;                   /* src_split == "chars" */
    char *tgt_join;                     /* owned */
    split_table src_embed, tgt_embed;   /* (V, d); tgt_embed may borrow src_embed's parts */
    vkf_tensor *pe;                     /* (max_len, d): the encoder's positions */
    vkf_tensor *pe_dec;                 /* the decoder's, or NULL: pe */
    enc_layer *enc;                     /* (n_encoder_layers), owned */
    dec_layer *dec;                     /* (n_decoder_layers), owned */
    norm enc_norm, dec_norm;            /* g NULL: no final norm (Marian) */
    linear *gen;                        /* (gen_parts): rows [i * tgt_embed.rows_per_part, ...) of the generator */
    uint32_t gen_parts;
    struct vkf_hf *hf;                  /* owned: a Hugging Face folder's tokenizers and generation defaults, or NULL */
    fwd_plan *plans[MAX_FORWARD_PLANS]; /* owned; most recently used last */
    gen_plan *gen_plan;                 /* owned, or NULL */
    uint32_t cmd_flags;                 /* VKF_CMD_TIMESTAMPS when profiling */
    attn_choice self_attn;              /* encoder and (causal) decoder self-attention */
    attn_choice cross_attn;             /* decoder cross-attention */
    uint64_t seed;                      /* bigbird's random blocks, lsh's rotations, lowrank's projection */
    vkf_dtype act;                      /* activations: F32, or F16 with precision f16 */
    bool precision_auto_f16;            /* act is F16 because AUTO chose it */
    float *lr_file[2];                  /* lowrank.self_proj / cross_proj from the file, (K, max_len), or NULL */
    uint32_t lr_file_rank[2];
    const vkf_cmd *last_forward;        /* borrowed from plans */
    vkf_generate_stats stats;           /* of the last generation */
    vkf_chunking fwd_chunks, gen_chunks; /* batch sizes that fit the device, learned (vkf_run_chunked) */
};

/* ------------------------------------------------------------------ model.c */

/* Runs fn over the sequences [0, total) of a call: all at once while that fits
 * the device, else in even chunks. A chunk failing with VKF_ERROR_TOO_LARGE (a
 * plan tensor past one binding or the grid) is retried in halves; the size that
 * fit is remembered in *c with the longest lengths (len[0], len[1]) of the call,
 * and a later call whose lengths are as long or longer starts from it instead of
 * failing again. Results are per sequence, so they do not change. `what` names
 * the work in the message when even one sequence does not fit, and in the info
 * line logged when the call ran in chunks. */
typedef vkf_status (*vkf_chunk_fn)(vkf_model *m, void *user, uint32_t first, uint32_t count);
vkf_status vkf_run_chunked(vkf_model *m, vkf_chunking *c, uint32_t total, const uint32_t len[2], const char *what,
                           vkf_chunk_fn fn, void *user);

vkf_status vkf_tensor2(vkf_context *ctx, vkf_dtype dtype, uint64_t rows, uint64_t cols, vkf_tensor **out);
/* out (rows, l.out) = act(in (rows, l.in) · l.wᵀ + l.b) + residual */
vkf_status vkf_rec_linear(vkf_cmd *cmd, const vkf_tensor *in, uint32_t rows, const linear *l, vkf_tensor *out,
                          vkf_activation act, const vkf_tensor *residual);
/* y (rows, d) = LayerNorm(x + residual) */
vkf_status vkf_rec_norm(vkf_cmd *cmd, const vkf_model *m, const vkf_tensor *x, const vkf_tensor *residual,
                        uint32_t rows, const norm *n, vkf_tensor *y);
/* out (tokens, d) = table[ids] * embed_scale + PE(position, or state[0] + position),
 * PE the decoder's table when `decoder` */
vkf_status vkf_rec_embed(vkf_cmd *cmd, const vkf_model *m, const split_table *table, const vkf_tensor *ids,
                         uint32_t tokens, uint32_t seq_len, const vkf_tensor *state, bool decoder, vkf_tensor *out);
/* logits (rows, tgt_vocab) = in · generatorᵀ + bias, part by part into column
 * slices; `generation`: banned ids get -inf. */
vkf_status vkf_rec_generator(vkf_cmd *cmd, const vkf_model *m, const vkf_tensor *in, uint32_t rows, bool generation,
                             vkf_tensor *logits);
/* Encoder: p->src_ids -> p->memory (B*S, d). */
vkf_status vkf_rec_encoder(vkf_cmd *cmd, const vkf_model *m, fwd_plan *p);
attn_choice vkf_site_choice(const vkf_model *m, enum attn_site site);
vkf_status vkf_fwd_plan_alloc(vkf_model *m, uint32_t B, uint32_t S, uint32_t T, fwd_plan **out);
void vkf_fwd_plan_free(fwd_plan *p);
/* Checks a batch of sequences; returns the longest length. */
vkf_status vkf_check_sequences(const vkf_model *m, const vkf_sequences *s, uint32_t vocab, const char *what,
                               uint32_t *out_max);
vkf_status vkf_upload_ids(const vkf_model *m, const vkf_sequences *s, uint32_t len, vkf_tensor *ids, vkf_tensor *mask,
                          vkf_tensor *lengths);
vkf_status vkf_upload_lowrank(const vkf_model *m, fwd_plan *p, const vkf_sequences *src);

/* ------------------------------------------------------------------ generate.c */

void vkf_gen_plan_free(gen_plan *p);

#endif /* VKF_MODEL_H */

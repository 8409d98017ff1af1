/* The arch layer (src/arch/): one encoder-decoder Transformer built from a spec,
 * in the manner of CTranslate2's TransformerSpec. A family (src/families) reads a
 * model's config into a vkf_arch_spec and its weights into vkf_arch_weights; the
 * graph reads only these two, never the family:
 *   spec.c     the spec's checks, the position tables of every kind, precision
 *   graph.c    recording: linear, norm, embeddings + positions, the encoder, ONE
 *              decoder layer (the whole-target pass and the decode step are two
 *              uses of it), the final norm and the generator
 *   forward.c  forward plans (activations of one shape, recorded once), inputs,
 *              vkf_arch_forward and the chunking of batches past the device's limits
 *   weights.c  the weights' lifetime and the generation-only generator bias
 * Nothing here knows a file format, a tokenizer or a search strategy. */
#ifndef VKF_ARCH_H
#define VKF_ARCH_H

#include "attention/attention.h"
#include "attention/attention_lsh.h"

/* ------------------------------------------------------------------ the spec */

typedef enum vkf_norm_kind {
    VKF_NORM_LAYER = 0,                 /* LayerNorm: (x - mean) / sqrt(var + eps) * g + b */
    VKF_NORM_RMS = 1,                   /* RMSNorm (T5): x / sqrt(mean(x^2) + eps) * g, no bias */
} vkf_norm_kind;

typedef enum vkf_position_kind {
    VKF_POS_SIN_INTERLEAVED = 0,        /* nn.Transformer (vkformer files): sin at channel 2i, cos at 2i + 1 */
    VKF_POS_SIN_HALF,                   /* Marian: sin in channels [0, ceil(d/2)), cos after, 10000^(2j/d) */
    VKF_POS_SIN_FAIRSEQ,                /* fairseq / M2M-100: sin in [0, d/2), cos in [d/2, 2(d/2)), rate
                                           exp(-j log(10000) / (d/2 - 1)), a zero channel for odd d; a token at
                                           position p reads row p + pad_id + 1, a pad token the zero row pad_id */
    VKF_POS_LEARNED,                    /* the file's tables; position p reads row p + position_offset */
    VKF_POS_NONE,                       /* no absolute positions */
} vkf_position_kind;

/* Everything the graph needs to know about a model. Families fill it; sizes are
 * checked by vkf_arch_spec_check. */
typedef struct vkf_arch_spec {
    uint32_t d_model;
    uint32_t heads, head_dim;           /* heads * head_dim is the attention's inner width, which may differ
                                           from d_model */
    uint32_t encoder_layers, decoder_layers;
    uint32_t d_ff;
    uint32_t src_vocab, tgt_vocab;
    uint32_t max_len;                   /* longest source or target sequence */
    bool pre_norm;                      /* norm before each sublayer (residual around it) or after (post-LN) */
    bool encoder_final_norm, decoder_final_norm; /* a norm after the last layer */
    bool embedding_norm;                /* a norm right after embeddings + positions (layernorm_embedding) */
    vkf_norm_kind norm;
    float norm_eps;
    vkf_position_kind positions;
    uint32_t position_offset;           /* VKF_POS_LEARNED: rows before position 0 (mBART, BART: 2) */
    uint32_t position_rows;             /* rows of the position tables (>= max_len + offset); 0: max_len + offset */
    float embed_scale;                  /* token embeddings times this (sqrt(d_model) or 1) */
    vkf_activation activation;
    bool ffn_glu;                       /* gated FFN act(x W0) * (x W1) (T5 v1.1): ff1 is W0 and W1 stacked,
                                           (2 d_ff, d) */
    float attention_scale;              /* scores times this; 0: 1 / sqrt(head_dim) */
    float output_scale;                 /* logits = output_scale * h · Wᵀ + b; 0 is read as 1 */
    int32_t pad_id;                     /* padding of sources (and the fairseq positions' zero row) */
    int32_t decoder_start_id;           /* the first decoder input of a generation */
    int32_t eos_id;
    /* An audio stem (Whisper) in place of the encoder's token embedding: log-mel
     * frames (audio_frames, audio_mels) through conv1 (kernel 3, padding 1) + GELU
     * and conv2 (kernel 3, stride 2, padding 1) + GELU, plus the encoder's position
     * table (audio_frames / 2 rows, w.pe); the encoder then runs over audio_frames / 2
     * positions. audio_mels 0: token ids in (src_vocab, positions as above). */
    uint32_t audio_mels;
    uint32_t audio_frames;
    /* Appended for the T5 family (families/t5.c): */
    bool rel_bias;                      /* T5's relative position bias on self-attention scores: a learned
                                           (rel_buckets, heads) table per stack, from its first layer, the
                                           encoder's bidirectional and the decoder's causal (none in
                                           cross-attention); weights.rel_bias holds them by distance */
    uint32_t rel_buckets, rel_max_distance; /* relative_attention_num_buckets, relative_attention_max_distance */
    bool keep_f32_activations;          /* activations stay F32 at every precision (T5: its residual stream and
                                           FFN outputs pass fp16's range); weights follow the precision */
    vkf_attention_spec encoder_attention; /* the model's own encoder self-attention, run when the user names none
                                           (LongT5: local:R or tglobal:R:G); zero: dense */
    bool global_norm;                   /* LongT5 transient-global: each encoder layer makes its own global keys,
                                           RMSNorm(gnorm) of its attention input summed per block, projected by
                                           its k and v (the layer's q and kv are split: enc[i].q, enc[i].kv) */
} vkf_arch_spec;

/* Sizes in range and consistent, and only what the graph runs (BAD_MODEL or
 * UNSUPPORTED, naming the field). */
vkf_status vkf_arch_spec_check(const vkf_arch_spec *spec);

/* T5's relative position bucket of key position minus query position `rel`, as
 * transformers computes it (T5Attention._relative_position_bucket in float32):
 * half the buckets exact distances, the rest logarithmic up to max_distance;
 * bidirectional: the upper half of the buckets for rel > 0; else only rel <= 0
 * counts (rel > 0 is bucket 0). */
uint32_t vkf_arch_rel_bucket(int32_t rel, bool bidirectional, uint32_t num_buckets, uint32_t max_distance);
/* The distance R past which every bucket is the same (at most max_len), so that a
 * table over [-R, R] holds every bias. */
uint32_t vkf_arch_rel_radius(const vkf_arch_spec *spec);
/* out (heads, 2 R + 1) = weight[bucket(r)][h] at [h][r + R] for r in [-R, R];
 * weight is (rel_buckets, heads) as nn.Embedding stores it. */
void vkf_arch_rel_table(const vkf_arch_spec *spec, const float *weight, bool bidirectional, uint32_t radius,
                        float *out);

/* ------------------------------------------------------------------ weights */

typedef struct vkf_linear {
    vkf_tensor *w;                      /* (out, in), as nn.Linear.weight: F32, F16 or I8 */
    vkf_tensor *scale;                  /* (out) F32 per-output-channel scales iff w is I8, else NULL */
    vkf_tensor *b;                      /* (out) F32, or NULL: no bias */
    vkf_tensor *b_gen;                  /* generator parts: b with -inf at banned ids, for generation; or NULL */
    uint32_t out, in;
    bool w_borrowed;                    /* w (and scale) belong to an embedding table (tied weights) */
} vkf_linear;

/* A (rows, d) embedding table in parts of rows_per_part rows (the last may be
 * shorter), each within one shader binding (maxStorageBufferRange). With
 * precision int8 the parts are I8 with per-row F32 scales (scale[i]: part i's rows). */
typedef struct vkf_split_table {
    vkf_tensor **part;                  /* (parts), owned unless borrowed */
    vkf_tensor **scale;                 /* (parts) owned unless borrowed, iff the parts are I8; else NULL */
    uint32_t parts, rows_per_part, rows;
    bool borrowed;                      /* the parts belong to another table (shared embeddings) */
} vkf_split_table;

typedef struct vkf_norm {
    vkf_tensor *g, *b;                  /* (d_model) each; g NULL: no such norm; b NULL: no bias */
} vkf_norm;

typedef struct vkf_enc_layer {
    vkf_linear qkv;                     /* (3 inner, d): q, k, v projections stacked */
    vkf_linear o;                       /* (d, inner) */
    vkf_linear ff1, ff2;                /* (d_ff, d) (gated: (2 d_ff, d)), (d, d_ff) */
    vkf_norm n1, n2;                    /* before (pre-LN) or after (post-LN) attention and FFN */
    /* spec.global_norm (LongT5 transient-global), qkv.w NULL: */
    vkf_linear q, kv;                   /* (inner, d), (2 inner, d): k and v stacked, also the global keys' */
    vkf_norm gnorm;                     /* global_input_layer_norm */
} vkf_enc_layer;

typedef struct vkf_dec_layer {
    vkf_linear qkv, o;                  /* self-attention */
    vkf_linear cq;                      /* (inner, d): cross-attention queries */
    vkf_linear ckv;                     /* (2 inner, d): cross-attention keys and values of the memory */
    vkf_linear co;                      /* (d, inner) */
    vkf_linear ff1, ff2;
    vkf_norm n1, n2, n3;                /* self-attention, cross-attention, FFN */
} vkf_dec_layer;

typedef struct vkf_arch_weights {
    vkf_split_table src_embed, tgt_embed; /* (V, d); tgt_embed may borrow src_embed's parts */
    vkf_tensor *pe;                     /* (position_rows, d) F32: the encoder's positions, or NULL (NONE) */
    vkf_tensor *pe_dec;                 /* the decoder's, or NULL: pe */
    vkf_norm enc_embed_norm, dec_embed_norm; /* spec.embedding_norm */
    vkf_enc_layer *enc;                 /* (encoder_layers), owned */
    vkf_dec_layer *dec;                 /* (decoder_layers), owned */
    vkf_norm enc_norm, dec_norm;        /* spec.encoder_final_norm, decoder_final_norm */
    vkf_linear *gen;                    /* (gen_parts): rows [i * tgt_embed.rows_per_part, ...) of the generator */
    uint32_t gen_parts;
    float *lr_file[2];                  /* a file's lowrank.self_proj / cross_proj, (K, max_len), or NULL */
    uint32_t lr_file_rank[2];
    /* the audio stem (spec.audio_mels > 0): Conv1d weights (d, in, 3) stored as
     * (d, 3 * in), kernel tap major, so that a conv is one matmul over a sliding
     * view of its time-major input (in = audio_mels for conv1, d_model for conv2) */
    vkf_linear conv1, conv2;
    /* spec.rel_bias: the bias of each relative distance r = key - query of the encoder ([0]) and decoder ([1])
     * self-attention, (heads, 2 rel_radius + 1) F32 at [h][clamp(r, +-R) + R]; LongT5 transient-global: the
     * encoder's table is followed by its global keys' (heads, 2 R + 1) (rel_global) */
    vkf_tensor *rel_bias[2];
    uint32_t rel_radius;
    bool rel_global;
} vkf_arch_weights;

/* Allocates the layer arrays for the spec's layer counts. */
vkf_status vkf_arch_weights_alloc(const vkf_arch_spec *spec, vkf_arch_weights *w);
void vkf_arch_weights_free(const vkf_arch_spec *spec, vkf_arch_weights *w);
/* The generator parts' b_gen: their bias (or zeros) with -inf at the `count`
 * banned ids, used by generation only (bad_words_ids, as HF bans them before the
 * softmax). */
vkf_status vkf_arch_ban_ids(vkf_context *ctx, const vkf_arch_spec *spec, vkf_arch_weights *w, const int32_t *ids,
                            uint32_t count);
/* Rows of the position tables: position_rows, or max_len + position_offset (+ pad_id + 1 for fairseq's). */
uint32_t vkf_arch_position_rows(const vkf_arch_spec *spec);
/* Host floats of the (rows, d) position table of the spec's kind (not LEARNED or
 * NONE), computed in double and rounded once. rows = position_rows. */
vkf_status vkf_arch_position_table(const vkf_arch_spec *spec, float **out_table, uint32_t *out_rows);

/* ------------------------------------------------------------------ the model's graph state */

/* The largest batch that fit the device (0: none learned), and the longest
 * lengths it was learned at (vkf_run_chunked). */
typedef struct vkf_chunking {
    uint32_t cap;
    uint32_t len[2];
} vkf_chunking;

struct vkf_fwd_plan;
#define VKF_MAX_FORWARD_PLANS 4

typedef struct vkf_arch {
    vkf_context *ctx;                   /* borrowed */
    vkf_arch_spec spec;
    vkf_arch_weights w;
    vkf_dtype act;                      /* activations: F32, or F16 (precision f16, or int8 / auto on GPUs) */
    vkf_attention_spec self_attn;       /* encoder and (causal) decoder self-attention */
    vkf_attention_spec cross_attn;      /* decoder cross-attention */
    vkf_attention_spec encoder_attn;    /* what the encoder runs: self_attn, or the model's own
                                           (spec.encoder_attention) when the user named none */
    uint64_t seed;                      /* bigbird's random blocks, lsh's rotations, lowrank's projection */
    uint32_t cmd_flags;                 /* VKF_CMD_TIMESTAMPS when profiling */
    struct vkf_fwd_plan *plans[VKF_MAX_FORWARD_PLANS]; /* owned; most recently used last */
    const vkf_cmd *last_forward;        /* borrowed from plans */
    vkf_chunking fwd_chunks;            /* batch sizes of the forward pass that fit the device */
} vkf_arch;

/* Frees the forward plans (their recordings bake in attention, seed and flags). */
void vkf_arch_drop_plans(vkf_arch *a);
/* What runs at a site under the model's choices. */
vkf_attention_spec vkf_arch_site(const vkf_arch *a, vkf_attention_site site);

/* ------------------------------------------------------------------ recording (graph.c) */

vkf_status vkf_tensor2(vkf_context *ctx, vkf_dtype dtype, uint64_t rows, uint64_t cols, vkf_tensor **out);
/* out (rows, l.out) = act(in (rows, l.in) · l.wᵀ + l.b) + residual */
vkf_status vkf_rec_linear(vkf_cmd *cmd, const vkf_tensor *in, uint32_t rows, const vkf_linear *l, vkf_tensor *out,
                          vkf_activation act, const vkf_tensor *residual);
/* y (rows, d) = Norm(x + residual) */
vkf_status vkf_rec_norm(vkf_cmd *cmd, const vkf_arch *a, const vkf_tensor *x, const vkf_tensor *residual,
                        uint32_t rows, const vkf_norm *n, vkf_tensor *y);

/* Where an embedding reads its positions. */
typedef struct vkf_embed_at {
    const vkf_tensor *position_ids;     /* (tokens) I32 rows of the position table, or NULL: */
    uint32_t seq_len;                   /* token t is at position t % seq_len */
    const vkf_tensor *state;            /* (1) I32 added to every position (decode steps), or (tokens /
                                           seq_len) I32 each sequence its own (per-row positions), or NULL */
} vkf_embed_at;
/* out (tokens, d) = EmbedNorm(table[ids] * embed_scale + PE(position)), the
 * decoder's positions when `decoder`; `scratch` (tokens, d) is needed only when
 * spec.embedding_norm. */
vkf_status vkf_rec_embed(vkf_cmd *cmd, const vkf_arch *a, bool decoder, const vkf_tensor *ids, uint32_t tokens,
                         const vkf_embed_at *at, vkf_tensor *scratch, vkf_tensor *out);
/* logits (rows, tgt_vocab) = output_scale * in · generatorᵀ + bias, part by part
 * into column slices; `generation`: banned ids get -inf. */
vkf_status vkf_rec_generator(vkf_cmd *cmd, const vkf_arch *a, const vkf_tensor *in, uint32_t rows, bool generation,
                             vkf_tensor *logits);

/* Activations and the recorded command buffer of one forward shape. */
typedef struct vkf_fwd_plan {
    uint32_t batch, src_len, tgt_len;   /* B, S, T */
    vkf_cmd *cmd;                       /* owned */
    vkf_tensor *src_ids, *tgt_ids;      /* (B*S), (B*T) I32 */
    vkf_tensor *src_pos, *tgt_pos;      /* (B*S), (B*T) I32 position rows, VKF_POS_SIN_FAIRSEQ only */
    vkf_tensor *src_mask;               /* (B, S): 0 or -inf, for dense-naive */
    vkf_tensor *src_lengths;            /* (B) I32, for the fused kernel */
    vkf_tensor *a, *b, *n;              /* (B*max(S,T), d): residual stream ping-pong, normed */
    vkf_tensor *memory;                 /* (B*S, d) encoder output */
    vkf_tensor *qkv;                    /* (B*max(S,T), 3 inner) */
    vkf_tensor *q;                      /* (B*T, inner) cross-attention queries */
    vkf_tensor *kv;                     /* (B*S, 2 inner) cross-attention keys and values */
    vkf_tensor *attn;                   /* (B*max(S,T), inner) attention output */
    vkf_tensor *tmp;                    /* (B*max(S,T), d) sublayer output */
    vkf_tensor *hidden;                 /* (B*max(S,T), d_ff), gated FFNs: 2 d_ff */
    vkf_tensor *scores;                 /* (B*H, max(S,T), max(S,T)), only for dense-naive */
    vkf_tensor *logits;                 /* (B*T, V) */
    vkf_tensor *bb_table[2];            /* bigbird tables of encoder and decoder self-attention */
    vkf_lsh_plan *lsh;                  /* lsh: scratch and rotations for n <= max(S, T) */
    vkf_tensor *lr_proj[2];             /* lowrank (self, cross): (B, K, S) projection along the source */
    vkf_tensor *lr_lengths[2];          /* (B) I32: rows of the projection that hold keys */
    vkf_tensor *lr_kv;                  /* (B*K, 2 inner) projected keys and values */
    /* the audio stem's inputs (spec.audio_mels > 0; S = audio_frames / 2) */
    vkf_tensor *mel;                    /* (B, audio_frames + 2, audio_mels) time-major log-mel, first and last
                                           rows of each item zero (conv1's padding) */
    vkf_tensor *conv;                   /* (B, audio_frames + 2, d) conv1's output, first and last rows zero */
    bool encode_only;                   /* cmd records the encoder alone (vkf_arch_encode_features) */
    /* tglobal in the encoder: g_max = S / G global keys per source */
    uint32_t g_max;
    vkf_tensor *g_kv;                   /* (B*g_max, 2 inner) global keys and values (LongT5's, or the means) */
    vkf_tensor *g_sum, *g_norm;         /* (B*g_max, d) spec.global_norm: block sums, normed */
} vkf_fwd_plan;

/* Encoder: p->src_ids -> p->memory (B*S, d). */
vkf_status vkf_rec_encoder(vkf_cmd *cmd, const vkf_arch *a, vkf_fwd_plan *p);

/* The buffers one decoder layer works on, for `rows` rows (B*T of a whole
 * target, or B in a decode step). x and alt are the residual stream's
 * ping-pong: the layer's output is in x when it returns (pre-LN swaps them). */
typedef struct vkf_dec_io {
    uint32_t rows;
    vkf_tensor *x, *alt, *n;            /* (rows, d) */
    vkf_tensor *qkv;                    /* (rows, 3 inner) */
    vkf_tensor *q;                      /* (rows, inner) */
    vkf_tensor *attn;                   /* (rows, inner) */
    vkf_tensor *tmp;                    /* (rows, d) */
    vkf_tensor *hidden;                 /* (rows, d_ff), gated FFNs: 2 d_ff */
    /* A whole target: B sequences of T tokens against the plan's memory */
    vkf_fwd_plan *full;
    /* A decode step (full NULL): B rows, one token each at position state[0] */
    struct {
        vkf_tensor **cache_k, **cache_v; /* (layers) each (B, steps, inner) */
        vkf_tensor **cross_kv;          /* (layers) each (sources * cross_keys, 2 inner) */
        uint32_t steps, cross_keys;
        const vkf_tensor *state;        /* (1) I32 */
        const vkf_tensor *cross_lengths; /* (B or sources) I32 keys of each row's memory */
        const vkf_tensor *row_index;    /* (B, steps) I32 or NULL: beam search's cache rows */
        const vkf_tensor *bigbird_random; /* bigbird: the step's random blocks */
        uint32_t kv_div;                /* a source's beams read its cross keys: rows per source */
        vkf_tensor *scratch;            /* (B * heads, max(steps, cross_keys)) F32 */
    } step;
} vkf_dec_io;
/* Decoder layer i over io (full pass or decode step). */
vkf_status vkf_rec_decoder_layer(vkf_cmd *cmd, const vkf_arch *a, uint32_t i, vkf_dec_io *io);
/* logits (rows, V) = generator(FinalNorm(x)); n is scratch. */
vkf_status vkf_rec_decoder_output(vkf_cmd *cmd, const vkf_arch *a, const vkf_tensor *x, vkf_tensor *n, uint32_t rows,
                                  bool generation, vkf_tensor *logits);

/* ------------------------------------------------------------------ plans and inputs (forward.c) */

vkf_status vkf_fwd_plan_alloc(vkf_arch *a, uint32_t B, uint32_t S, uint32_t T, vkf_fwd_plan **out);
void vkf_fwd_plan_free(vkf_fwd_plan *p);
/* Columns of the FFN's hidden buffer: d_ff, or 2 d_ff for a gated FFN. */
uint64_t vkf_arch_hidden_cols(const vkf_arch_spec *spec);
/* Checks a batch of sequences; returns the longest length. */
vkf_status vkf_check_sequences(const vkf_arch *a, const vkf_sequences *s, uint32_t vocab, const char *what,
                               uint32_t *out_max);
/* Uploads ids padded with pad_id to (count, len), and (where given) the additive
 * key mask, the lengths and the position rows (VKF_POS_SIN_FAIRSEQ). */
vkf_status vkf_upload_ids(const vkf_arch *a, const vkf_sequences *s, uint32_t len, vkf_tensor *ids, vkf_tensor *mask,
                          vkf_tensor *lengths, vkf_tensor *positions);
/* The plan's lowrank projections for these sources. */
vkf_status vkf_upload_lowrank(const vkf_arch *a, vkf_fwd_plan *p, const vkf_sequences *src);

/* Runs fn over the sequences [0, total) of a call: all at once while that fits
 * the device, else in even chunks. A chunk failing with VKF_ERROR_TOO_LARGE (a
 * plan tensor past one binding or the grid) is retried in halves; the size that
 * fit is remembered in *c with the longest lengths (len[0], len[1]) of the call,
 * and a later call whose lengths are as long or longer starts from it instead of
 * failing again. Results are per sequence, so they do not change. `what` names
 * the work in the message when even one sequence does not fit, and in the info
 * line logged when the call ran in chunks. */
typedef vkf_status (*vkf_chunk_fn)(void *user, uint32_t first, uint32_t count);
vkf_status vkf_run_chunked(vkf_context *ctx, vkf_chunking *c, uint32_t total, const uint32_t len[2], const char *what,
                           vkf_chunk_fn fn, void *user);

/* The forward pass of one batch (checked sequences, longest S and T) run on
 * the device, its logits left in (*out_plan)->logits (B*T, V): the plan is the
 * arch's, valid until the next forward pass of another shape. */
vkf_status vkf_arch_forward_device(vkf_arch *a, const vkf_sequences *src, const vkf_sequences *tgt, uint32_t S,
                                   uint32_t T, vkf_fwd_plan **out_plan);
/* Teacher-forced logits of every target position (vkf_model_forward). */
vkf_status vkf_arch_forward(vkf_arch *a, const vkf_sequences *src, const vkf_sequences *tgt, float *out_logits,
                            uint64_t out_floats);

/* Models with an audio stem: teacher-forced logits with the log-mel features of
 * `count` windows as sources, features (count, audio_mels, audio_frames) as the
 * feature extractor lays them out (vkf_model_forward_features). */
vkf_status vkf_arch_forward_features(vkf_arch *a, const float *features, uint32_t count, const vkf_sequences *tgt,
                                     float *out_logits, uint64_t out_floats);
/* Uploads features (B, audio_mels, audio_frames) into a plan's stem inputs (and
 * its lengths, masks, lowrank projections: every source audio_frames / 2 long). */
vkf_status vkf_upload_features(const vkf_arch *a, vkf_fwd_plan *p, const float *features);
/* Features of an audio model: not NULL, count > 0, every value finite (fn names the call). */
vkf_status vkf_check_features(const vkf_arch *a, const float *features, uint32_t count, const char *fn);
/* The encoder's output (count, audio_frames / 2, d_model) of those features. */
vkf_status vkf_arch_encode_features(vkf_arch *a, const float *features, uint32_t count, float *out_hidden,
                                    uint64_t out_floats);

/* What precision AUTO means on this device: true for F16 weights and activations
 * (GPUs with 16-bit storage), false for the file's weights with F32 activations. */
bool vkf_auto_precision_f16(const vkf_device_info *info, bool storage_16bit);

#endif /* VKF_ARCH_H */

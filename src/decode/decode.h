/* The decode layer (src/decode/): generation on top of the arch's graph. The
 * encoder runs once per batch; a decode step (the arch's decoder layer over one
 * token per row, against a KV cache) is recorded once and re-submitted per token.
 *   options.c   vkf_generate_options: defaults and checks
 *   plan.c      generation plans: caches, step buffers, the recorded encoder run
 *               and decode step
 *   greedy.c    greedy decoding and sampling: one token per row and step, chosen
 *               on the GPU
 *   beam.c      beam search: each step's top 2K per source on the GPU, Hugging
 *               Face's bookkeeping on the host
 *   generate.c  a call over a batch of sources, in chunks where one batch would
 *               pass the device's limits
 * Search strategies sit on top of the step; none of them is inside the graph. */
#ifndef VKF_DECODE_H
#define VKF_DECODE_H

#include "arch/arch.h"

/* Greedy decoding (or sampling) of B sources of length S for up to `steps`
 * tokens, or beam search over sources x beams rows. */
typedef struct vkf_gen_plan {
    uint32_t batch, src_len, steps;     /* batch: rows of the decode step */
    uint32_t layers;                    /* entries of cross_kv, cache_k, cache_v */
    vkf_fwd_plan *enc;                  /* owned; encoder and cross K/V (tgt_len 1) */
    vkf_tensor **cross_kv;              /* (layers) each (sources * cross_keys, 2 inner), owned */
    vkf_tensor **cache_k, **cache_v;    /* (layers) each (B, steps, inner), owned */
    vkf_tensor *src_lengths;            /* (B) I32: each row's source length */
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
    bool sample;                        /* a greedy plan whose step samples (recorded in) */
    vkf_generate_options sampling;
} vkf_gen_plan;

/* A model's generation state: its plan (kept while calls have its shape), the
 * last call's stats and the batch sizes that fit the device. */
typedef struct vkf_decoder {
    vkf_gen_plan *plan;                 /* owned, or NULL */
    vkf_generate_stats stats;
    vkf_chunking chunks;
} vkf_decoder;

/* ------------------------------------------------------------------ options.c */

/* Options in range for this model (INVALID_ARGUMENT or UNSUPPORTED naming one). */
vkf_status vkf_decode_check_options(const vkf_arch *a, const vkf_generate_options *o);

/* ------------------------------------------------------------------ plan.c */

/* The plan of `sources` sources of length S for up to `steps` tokens: greedy
 * (or sampling with `sampling`) with beams 0, else beam search with `beams`
 * rows per source and beam_opts' min_new, forced_eos and renormalize. */
vkf_status vkf_gen_plan_build(vkf_arch *a, uint32_t sources, uint32_t beams, uint32_t S, uint32_t steps,
                              const vkf_generate_options *beam_opts, const vkf_generate_options *sampling,
                              vkf_gen_plan **out);
void vkf_gen_plan_free(vkf_gen_plan *p);
/* Device bytes of a plan's tensors. */
uint64_t vkf_gen_plan_bytes(const vkf_gen_plan *p);
/* Drops the decoder's plan (recordings bake in attention, seed and flags). */
void vkf_decoder_reset(vkf_decoder *d);

/* ------------------------------------------------------------------ greedy.c, beam.c */

/* Greedy decoding, or sampling with `sampling`, of one batch (checked sources);
 * forced_bos >= 0: the first token is that one (forced_bos_token_id). */
vkf_status vkf_decode_greedy(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, uint32_t max_new,
                             const vkf_generate_options *sampling, int32_t forced_bos, int32_t *out_ids,
                             uint32_t *out_lengths);
/* Beam search of one batch (checked options). */
vkf_status vkf_decode_beam(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, const vkf_generate_options *o,
                           int32_t *out_ids, uint32_t *out_lengths, float *out_scores);

/* ------------------------------------------------------------------ generate.c */

/* Generation of every source with options o (NULL: greedy for max_new tokens,
 * vkf_model_generate), in chunks where one batch would pass the device's limits. */
vkf_status vkf_decode_generate(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, uint32_t max_new,
                               const vkf_generate_options *o, int32_t *out_ids, uint32_t *out_lengths,
                               float *out_scores);

/* Milliseconds of a monotonic clock. */
double vkf_now_ms(void);

#endif /* VKF_DECODE_H */

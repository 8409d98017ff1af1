/* The decode layer (src/decode/): generation on top of the arch's graph. The
 * encoder runs once per batch; a decode step (the arch's decoder layer over one
 * token per row, against a KV cache) is recorded once and re-submitted per token.
 *   options.c   vkf_generate_options: defaults and checks
 *   plan.c      generation plans: caches, step buffers, the recorded encoder run
 *               and decode step; slot plans (one position per row) for serving
 *   greedy.c    greedy decoding and sampling: one token per row and step, chosen
 *               on the GPU
 *   beam.c      beam search: each step's top 2K per source on the GPU, Hugging
 *               Face's bookkeeping on the host
 *   generate.c  a call over a batch of sources, in chunks where one batch would
 *               pass the device's limits, and sorted batches of many sources
 *   score.c     teacher-forced log-probabilities of given targets
 * The logits processors (repetition penalty, n-grams, bad sequences, suppressed
 * and end ids, forced tokens, target prefixes) run in the decode step on the
 * device, before the step's choice (logits_process.comp).
 * Search strategies sit on top of the step; none of them is inside the graph. */
#ifndef VKF_DECODE_H
#define VKF_DECODE_H

#include "arch/arch.h"

/* The logits processor of a decode step (logits_process.comp), recorded into
 * it: what transformers' generate() applies to each row's scores before the
 * choice, in its order. */
typedef struct vkf_proc {
    bool on;                            /* the processor runs (else the step reads the logits as they are) */
    float penalty;                      /* repetition penalty; 1: off */
    uint32_t ngram;                     /* no-repeat n-gram size; 0: off */
    uint32_t min_new;                   /* end ids banned before this many new tokens */
    bool forced_eos;                    /* eos at each row's last step */
    int32_t eos;                        /* the model's eos (forced_eos) */
    int32_t forced_bos;                 /* the first new token after the start alone, or -1 */
    uint32_t n_suppress, n_end, n_bad;  /* lengths of the lists: suppressed ids, end ids, bad-sequence ints */
    uint32_t prefix_max;                /* longest target prefix of the batch */
    bool row_settings;                  /* slot plans: forced bos, repetition penalty and n-gram size per row (row
                                           data: prefix length, limit, forced bos or -1, penalty's float bits,
                                           n-gram size, prefix ids); forced_bos, penalty and ngram unused */
    bool unbanned_generator;            /* the step's generator leaves the model's banned ids in (beam search
                                           with processors bans them after the log-softmax, as generate()) */
    /* Whisper: begin-suppressed ids (after the other lists) and the timestamp rules (ts_begin > 0) */
    uint32_t n_begin;
    int32_t ts_begin, no_timestamps, ts_max_initial, ts_eos;
} vkf_proc;

/* One batch of a generation call: the options, and what they make of each source. */
typedef struct vkf_decode_call {
    const vkf_generate_options *o;      /* borrowed, checked; NULL: plain greedy decoding */
    vkf_proc proc;
    int32_t end_ids[VKF_MAX_END_IDS];   /* where a source ends: end_ids, or the model's eos */
    uint32_t n_end;
    uint32_t *prefix_len;               /* (sources) owned: target prefix lengths */
    const int32_t **prefix;             /* (sources) owned array of borrowed ids */
    uint32_t *limit;                    /* (sources) owned: new tokens each source may get */
    uint32_t steps;                     /* decode steps of the plan: max(prefix + limit) */
    int32_t *lists;                     /* (n_lists) owned: suppressed ids, end ids, bad sequences ([n, ids...]) */
    uint32_t n_lists;
    uint32_t first;                     /* index in the whole call of the batch's first source (callbacks) */
    const float *features;              /* audio sources: (sources, mels, frames) log-mel windows, or NULL: ids */
} vkf_decode_call;

/* Greedy decoding (or sampling) of B sources of length S for up to `steps`
 * tokens, or beam search over sources x beams rows. */
typedef struct vkf_gen_plan {
    uint32_t batch, src_len, steps;     /* batch: rows of the decode step */
    uint32_t layers;                    /* entries of cross_kv, cache_k, cache_v */
    vkf_fwd_plan *enc;                  /* owned; encoder and cross K/V (tgt_len 1) */
    vkf_tensor **cross_kv;              /* (layers) each (sources * cross_keys, 2 inner), owned */
    vkf_tensor **cache_k, **cache_v;    /* (layers) each (B, steps, inner), owned */
    vkf_tensor *src_lengths;            /* (B) I32: each row's source length */
    vkf_tensor *state;                  /* (1) I32: position of the step's input token; slot plans: (B), each row's */
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
    uint32_t n_cand;                    /* beam search's candidates per source and step */
    uint32_t min_new;                   /* recorded into beam_topk's push constants */
    bool forced_eos, renormalize;       /* likewise */
    vkf_tensor *kv_rows[2];             /* (B*K, steps) I32 each, owned */
    vkf_tensor *parent;                 /* (B*K) I32: the row each row continues */
    vkf_tensor *beam_scores;            /* (B*K) F32: sum of log-probabilities of each beam */
    vkf_tensor *cand_scores, *cand_ids; /* (B, n_cand) F32, I32: the step's best (beam, token) pairs */
    vkf_tensor *topk_stats, *topk_x, *topk_id; /* (B*K, chunks, 2 | n_cand | n_cand): beam_partial.comp's results */
    uint32_t topk_chunk, topk_chunks;   /* vocabulary ids per chunk, chunks per row */
    vkf_cmd *step2;                     /* owned, the decode step of odd positions */
    bool sample;                        /* a greedy plan whose step samples (recorded in) */
    vkf_generate_options sampling;
    /* The logits processor (proc.on): its settings, recorded into both steps */
    vkf_proc proc;
    vkf_tensor *scores;                 /* (B, V) F32: the processed scores the step's choice reads */
    vkf_tensor *inputs;                 /* (B, steps) I32: the token each row read at each position */
    vkf_tensor *row_data;               /* (B, 2 + prefix_max) I32: prefix length, limit, prefix ids */
    vkf_tensor *lists;                  /* (max(1, n_lists)) I32: suppressed ids, end ids, bad sequences */
    /* Slot plans (vkf_gen_plan_build_slots): state holds one position per row (-1: a
     * free row, which writes nothing and attends to nothing); no encoder plan or
     * encode command (vkf_gen_plan_encode_slots writes each arrival's cross K/V into
     * its row); slot_step[r - 1] decodes rows 0..r-1, recorded on first use. A
     * beam slot plan (beams > 0) holds batch / beams sources of `beams` rows each,
     * cross K/V and source lengths per source; its steps read one table of cache
     * rows and write the other (slot_step: kv_rows 0 to 1, slot_step2: 1 to 0). */
    bool slots;
    vkf_cmd **slot_step, **slot_step2;  /* (batch) owned, each NULL until used */
    vkf_tensor *seeds;                  /* (batch, 2) I32: a sampling slot plan's seed per row, or NULL */
} vkf_gen_plan;

/* A model's generation state: its plan (kept while calls have its shape), the
 * last call's stats and the batch sizes that fit the device. */
typedef struct vkf_decoder {
    vkf_gen_plan *plan;                 /* owned, or NULL */
    const int32_t *banned;              /* (n_banned) borrowed: ids no generation chooses (bad_words_ids of one id) */
    uint32_t n_banned;
    vkf_generate_stats stats;
    vkf_chunking chunks;
    /* Called between the steps of a greedy, sampling or beam run, once a step's
     * ids are handled and more steps follow (the serving scheduler decodes the
     * other requests there); false stops the run with VKF_ERROR_STATE, "cancelled".
     * The hook must not use this decoder. NULL: none. */
    bool (*between_steps)(void *user);
    void *between_user;
} vkf_decoder;

/* ------------------------------------------------------------------ options.c */

/* Options in range for this model and a call of `sources` sources
 * (INVALID_ARGUMENT or UNSUPPORTED naming one). */
vkf_status vkf_decode_check_options(const vkf_arch *a, const vkf_generate_options *o, uint32_t sources);
/* The batch src of a call (its first source at index `first` of the call) under
 * checked options o (NULL: plain greedy); max_new 0: each source as far as the
 * model's positions go after its prefix. Free with vkf_decode_call_free. */
vkf_status vkf_decode_call_make(const vkf_arch *a, const vkf_decoder *d, const vkf_generate_options *o,
                                const vkf_sequences *src, uint32_t first, uint32_t max_new, vkf_decode_call *out);
void vkf_decode_call_free(vkf_decode_call *c);
/* Whether id ends a source of the call. */
bool vkf_is_end(const vkf_decode_call *c, int32_t id);

/* ------------------------------------------------------------------ plan.c */

/* The plan of `sources` sources of length S for up to `steps` tokens: greedy
 * (or sampling with `sampling`) with beams 0, else beam search with `beams`
 * rows per source and beam_opts' min_new, forced_eos and renormalize; proc: the
 * logits processor recorded into the step. */
vkf_status vkf_gen_plan_build(vkf_arch *a, uint32_t sources, uint32_t beams, uint32_t S, uint32_t steps,
                              const vkf_generate_options *beam_opts, const vkf_generate_options *sampling,
                              const vkf_proc *proc, vkf_gen_plan **out);
/* A plan of `slots` rows with one position per row (state (slots) I32): greedy
 * (beams 0; sampling with `sampling`'s temperature, top_k and top_p, each row
 * with its own seed in `seeds`), or beam search of slots / beams sources of
 * `beams` rows each (slots a multiple of beams); sources of up to S tokens (cross-attention
 * keys), up to `steps` positions, the processor proc (NULL: none). Rows join
 * and leave between steps: the caller writes a row's position (0 to start, -1
 * to free), input id, processor row data, its source's length and cross K/V
 * (vkf_gen_plan_encode_slots), and for beams each row's parent and score.
 * UNSUPPORTED for lowrank cross-attention (keys per batch). */
vkf_status vkf_gen_plan_build_slots(vkf_arch *a, uint32_t slots, uint32_t beams, uint32_t S, uint32_t steps,
                                    const vkf_proc *proc, const vkf_generate_options *sampling, vkf_gen_plan **out);
/* The recorded step of a slot plan's first `rows` rows (1..batch, a multiple of
 * beams; owned by the plan); beam plans alternate `parity` 0 and 1 step by step
 * (which table of cache rows the step reads). */
vkf_status vkf_gen_plan_slot_step(vkf_arch *a, vkf_gen_plan *p, uint32_t rows, uint32_t parity, vkf_cmd **out);
/* Runs the encoder plan enc (its batch of sources uploaded, S_enc <= the plan's S)
 * and writes source i's cross-attention keys and values into row slot[i] of every
 * layer's cross_kv (a beam plan's: source slot[i]): one submit. */
vkf_status vkf_gen_plan_encode_slots(vkf_arch *a, vkf_gen_plan *p, vkf_fwd_plan *enc, const uint32_t *slot);
/* Uploads a call's processor data (each row's prefix and limit, the lists) into
 * a plan built with its proc; rows_per_source: beams (1 for greedy). */
vkf_status vkf_gen_plan_upload_call(vkf_gen_plan *p, const vkf_decode_call *c, uint32_t rows_per_source);
void vkf_gen_plan_free(vkf_gen_plan *p);
/* Device bytes of a plan's tensors. */
uint64_t vkf_gen_plan_bytes(const vkf_gen_plan *p);
/* Drops the decoder's plan (recordings bake in attention, seed and flags). */
void vkf_decoder_reset(vkf_decoder *d);
/* Ids per beam_partial.comp chunk for a vocabulary of `vocab`: at most 32 chunks per row,
 * of at least 512 ids. */
uint32_t vkf_beam_topk_chunk(uint32_t vocab);

/* ------------------------------------------------------------------ greedy.c, beam.c */

/* Greedy decoding, or sampling where c->o asks for it, of one batch (checked
 * sources); out_ids rows are `stride` ids apart. */
vkf_status vkf_decode_greedy(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, const vkf_decode_call *c,
                             uint32_t stride, int32_t *out_ids, uint32_t *out_lengths);
/* One source's beam search on the host (beam.c): its beams' ids so far and its
 * finished hypotheses, as Hugging Face's BeamHypotheses. The GPU scores the
 * (beam, token) pairs and keeps the best; this is what decides on them. */
typedef struct vkf_beam_source {
    uint32_t beams, steps;
    uint32_t count;                     /* finished hypotheses */
    double worst;                       /* 1e9 while none */
    double *score;                      /* (beams + 1) */
    uint32_t *len;                      /* (beams + 1) ids without eos */
    int32_t *ids;                       /* (beams + 1, steps) */
    int32_t *hist, *next;               /* (beams + 1, steps): each beam's ids so far; the last row is scratch */
    uint32_t device_eos_step;           /* the step at which the device forces eos (forced_eos without the
                                           processor: the plan's last); UINT32_MAX: none (init) */
    bool done;                          /* ended: its beams lead nowhere */
} vkf_beam_source;
vkf_status vkf_beam_source_init(vkf_beam_source *bs, uint32_t beams, uint32_t steps);
void vkf_beam_source_free(vkf_beam_source *bs);
/* Step t of source b of call c (prefix, limit, end ids, options): its n_cand best
 * candidates cs/ci (ci = k * vocab + id for beam k; -1: none; changed where
 * forced eos ends the source at its own last step) give each beam k the beam it
 * continues (parent[k], 0..beams-1), its id and its score (score[k] holds the
 * beam's score on entry). Returns true when the source ends at this step. */
bool vkf_beam_source_step(vkf_beam_source *bs, const vkf_arch *a, const vkf_decode_call *c, uint32_t b, uint32_t t,
                          float *cs, int32_t *ci, uint32_t n_cand, int32_t *parent, int32_t *tok, float *score);
/* The n_best hypotheses, best first (among equals the later one), each without
 * the first P ids (the prefix), `stride` ids apart (padded). */
void vkf_beam_source_result(const vkf_beam_source *bs, const vkf_arch *a, uint32_t P, uint32_t n_best, uint32_t stride,
                            int32_t *out_ids, uint32_t *out_lengths, float *out_scores);
/* Beam search of one batch (checked options c->o); out_ids rows are `stride` ids apart. */
vkf_status vkf_decode_beam(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, const vkf_decode_call *c,
                           uint32_t stride, int32_t *out_ids, uint32_t *out_lengths, float *out_scores);

/* ------------------------------------------------------------------ generate.c */

/* Generation of every source with options o (NULL: greedy for max_new tokens,
 * vkf_model_generate), in chunks where one batch would pass the device's limits. */
vkf_status vkf_decode_generate(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src, uint32_t max_new,
                               const vkf_generate_options *o, int32_t *out_ids, uint32_t *out_lengths,
                               float *out_scores);

/* vkf_model_generate_batched: sorted batches of at most max_batch_tokens source ids. */
vkf_status vkf_decode_generate_batched(vkf_arch *a, vkf_decoder *d, const vkf_sequences *src,
                                       const vkf_generate_options *o, uint32_t max_batch_tokens, int32_t *out_ids,
                                       uint32_t *out_lengths, float *out_scores);

/* ------------------------------------------------------------------ audio (generate.c) */

/* Generation from log-mel windows (models with an audio stem), as generate()
 * runs WhisperForConditionalGeneration on them: `count` windows (count, mels,
 * frames), options o (checked here; its target prefix follows the decoder
 * start), and Whisper's processors on the device: begin_suppress (n_begin ids)
 * at the first new token, and with ts_begin > 0 the timestamp rules
 * (WhisperTimeStampLogitsProcessor; no_timestamps, max_initial -1 for none,
 * eos the id text ids stay below). out_* as vkf_model_generate_with's. */
typedef struct vkf_audio_rules {
    const int32_t *begin_suppress;
    uint32_t n_begin;
    int32_t ts_begin, no_timestamps, max_initial, eos;
} vkf_audio_rules;
vkf_status vkf_decode_generate_audio(vkf_arch *a, vkf_decoder *d, const float *features, uint32_t count,
                                     const vkf_generate_options *o, const vkf_audio_rules *rules, int32_t *out_ids,
                                     uint32_t *out_lengths, float *out_scores);

/* ------------------------------------------------------------------ score.c */

/* vkf_model_score: teacher-forced log-probabilities of tgt (then eos) after
 * the decoder start, out (count, T + 1). */
vkf_status vkf_decode_score(vkf_arch *a, const vkf_sequences *src, const vkf_sequences *tgt, float *out,
                            uint64_t out_floats);

/* Milliseconds of a monotonic clock. */
double vkf_now_ms(void);

#endif /* VKF_DECODE_H */

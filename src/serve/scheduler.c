/* The serving scheduler (issue 37): requests that arrive one at a time, batched
 * across requests on one model by a thread of its own. The server's HTTP front
 * end (tools/cli/serve*.c) sits on top; nothing here knows of HTTP.
 *
 *   queue     requests waiting for a slot, in arrival order;
 *   group     one running batch: a slot plan (decode/plan.c) whose rows are
 *             slots, each with its own position, cross-attention keys/values,
 *             KV cache and processor row (target prefix, limit). A request is
 *             admitted at a step boundary into a free slot of a running group
 *             whose processor settings it shares and whose source length it
 *             fits: it JOINS the batch that is decoding others. Groups differ
 *             only by those, by beams and by sampling settings (temperature,
 *             top_k, top_p; each row draws with its own seed) (at most
 *             max_groups of them), so greedy
 *             requests of one model normally share one group. A beam group's
 *             slot is K rows (a request's beams): each step gathers every row's
 *             table of cache rows from its parent, the GPU keeps each slot's best
 *             (beam, token) pairs and the host decides on them (vkf_beam_source);
 *   admission the arrivals of a boundary run through the encoder in one batched
 *             pass per group, which writes each one's cross K/V into its slot;
 *   round     one decode step of every group: one submit, the rows 0..top-1
 *             (top: the highest live slot + 1; a free slot below it holds
 *             position -1 and writes nothing); a row that ends is answered at
 *             once and its slot is free at the next boundary;
 *   whole     min_new or renormalize (plan-wide settings of the step), and what a
 *             slot cannot hold (more beams than max_batch, a target prefix past
 *             PREFIX_ROOM, prefix + max_new past max_len, lowrank cross-attention)
 *             run whole through the model's own calls, one run at a time (those
 *             waiting with the same options as one batch of sources); between
 *             two of its steps a round of the others runs (requests are admitted
 *             and decoded meanwhile), and a cancel ends it at the next step;
 *   job       a transcription: one 30-second window per round
 *             (vkf_transcription_next), so that a long recording's windows are
 *             successive jobs between the others' steps.
 * A group whose rows have all ended leaves the running list; its plan is kept
 * for a later group of the same shape. */
#include "serve/scheduler.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CACHED_PLANS 8
#define MAX_CACHED_ENCODERS 8
#define MAX_BATCH 1024 /* vkf_scheduler_options.max_batch's bound: slots of a group, requests of an admission */
#define PREFIX_ROOM 16 /* target prefix ids a slot holds (the processor's row: 2 + PREFIX_ROOM ints) */
#define MIN_SOURCE 16  /* a group's source length: a power of two from this up to max_len */
#define STARVED 64     /* rounds a request may wait for a group it fits before the others wait for it */
#define WHOLE_BATCH 64 /* requests of one whole run at most (beam search of several sources at once) */

typedef struct group group;

typedef struct request {
    uint64_t id;
    struct request *next;               /* in the queue */
    bool audio, whole;                  /* a transcription; a whole run (sampling, audio, no slot form, ...) */
    bool cancelled, answered;
    int32_t *src;                       /* (n_src) owned */
    uint32_t n_src;
    vkf_generate_options o;             /* its lists point into the owned copies below */
    int32_t *prefix;                    /* (n_prefix) owned */
    uint32_t n_prefix;
    const int32_t *prefix_ptr;
    vkf_sequences prefix_seq;
    int32_t *suppress;                  /* owned */
    int32_t end_ids[VKF_MAX_END_IDS];
    int32_t *bad_ids;                   /* owned: the bad sequences one after another */
    uint32_t *bad_lengths;              /* owned */
    const int32_t **bad_ptrs;           /* owned */
    vkf_sequences bad;
    vkf_decode_call call;               /* slot requests: the call of its one source (proc, limit, lists), owned */
    vkf_proc proc;                      /* slot requests: the processor of the group it may join */
    int32_t bos;                        /* slot requests: its forced bos (a language), in its rows' data; -1: none */
    float penalty;                      /* slot requests: its repetition penalty and n-gram size, in its rows' data */
    uint32_t ngram;
    group *target;                      /* admission: the group it goes into */
    float *samples;                     /* (n_samples) owned: audio */
    uint64_t n_samples;
    vkf_transcription *tr;              /* a job's transcription in progress, owned */
    vkf_transcribe_options to;
    char language[64], task[16];
    vkf_scheduler_done_fn done;
    void *user;
    double t_submit, t_admit;
    uint64_t round_submit;              /* the scheduler's round when it was queued */
} request;

struct group {
    vkf_gen_plan *p;                    /* owned slot plan (batch = slots), or NULL until built */
    vkf_proc proc;                      /* its processor: greedy groups' always on; PREFIX_ROOM prefix ids per row */
    int32_t *lists;                     /* (n_lists) owned: the processor's lists (suppressed, end, bad) */
    uint32_t n_lists;
    uint32_t beams;                     /* 0: greedy (a slot is a row); K: beam search (a slot is K rows) */
    bool sample;                        /* greedy form: a draw instead of argmax */
    vkf_generate_options sampling;      /* sample: its temperature, top_k and top_p (no seed, min_new, forced eos) */
    int32_t *seeds;                     /* (rows, 2) sample: each row's seed, low word first */
    uint32_t unit;                      /* rows per slot: 1 or K */
    uint32_t slots, S, steps, row_stride;
    request **req;                      /* (slots) owned: the request in each slot, or NULL (under mu) */
    int32_t *pos;                       /* (rows) host copy of the positions; -1: free */
    int32_t *ids;                       /* (rows) host copy of the step's input ids */
    int32_t *src_len;                   /* (rows) each slot's source length in 0..slots-1 (1 past them) */
    int32_t *row_data;                  /* (rows, row_stride): prefix length, limit, forced bos, penalty, n-gram, prefix */
    uint32_t *len;                      /* (slots) greedy: new ids so far */
    int32_t *out;                       /* (slots, steps) greedy: new ids so far */
    vkf_beam_source *bs;                /* (slots) beams: each slot's beams and finished hypotheses */
    int32_t *parent;                    /* (rows) beams: the row each row continues */
    float *score;                       /* (rows) beams: each beam's score */
    float *cand_scores;                 /* (slots, n_cand) beams: the step's candidates */
    int32_t *cand_ids;
    uint32_t parity;                    /* beams: which table of cache rows the next step reads */
    uint32_t alive, top, reserved;      /* live slots; slots a step decodes (top x unit rows); slots promised */
    bool dirty;                         /* host copies changed since the last upload */
    group *next;
};

typedef struct enc_plan {
    vkf_fwd_plan *p;                    /* owned: an encoder over (batch, src_len) */
} enc_plan;

struct vkf_scheduler {
    vkf_model *model;                   /* borrowed */
    vkf_arch *a;                        /* borrowed from the model */
    vkf_decoder *d;
    vkf_model_config cfg;
    vkf_scheduler_options opt;
    bool slot_form;                     /* the arch's decode step runs in slot plans */
    bool wait_batch;                    /* benchmarks: a group admits only while empty (static batching) */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    uint64_t next_id;
    request *queue_head, *queue_tail;   /* waiting */
    uint32_t queued;
    group *groups;                      /* running (owned by the thread; read under mu for cancels) */
    uint32_t n_groups, active;          /* running groups; slots answering requests */
    request **whole;                    /* (n_whole) the whole run in progress (its requests), or NULL */
    uint32_t n_whole;
    request *jobs;                      /* transcriptions in progress (their `next`), in start order */
    request **starting;                 /* (n_starting) admitted, not yet in their slots */
    uint32_t n_starting;
    vkf_gen_plan *cache[MAX_CACHED_PLANS]; /* idle slot plans, oldest first */
    uint32_t n_cache;
    enc_plan enc[MAX_CACHED_ENCODERS];  /* encoder plans of arrivals, most recently used last */
    vkf_scheduler_stats stats;
    uint64_t rounds;                    /* rounds so far (under mu) */
    uint64_t fault_step;                /* tests: this decode step (from 1) fails as a lost device; 0: none */
};

/* Schedulers created in this process, for VKFORMER_SCHEDULER_FAULT. */
static atomic_uint created;

void vkf_scheduler_options_init(vkf_scheduler_options *o)
{
    if (!o) return;
    o->max_batch = 32;
    o->max_groups = 4;
    o->max_queue = 256;
}

/* ------------------------------------------------------------------ requests */

static void request_free(request *r)
{
    if (!r) return;
    free(r->src), free(r->prefix), free(r->suppress), free(r->bad_ids), free(r->bad_lengths), free(r->bad_ptrs);
    vkf_decode_call_free(&r->call);
    vkf_transcription_free(r->tr);
    free(r->samples);
    free(r);
}

/* A deep copy of o's lists into r (o checked). */
static vkf_status copy_options(request *r, const vkf_generate_options *o, uint32_t max_len)
{
    r->o = *o;
    r->o.on_progress = NULL, r->o.on_progress_user = NULL;
    r->o.target_prefix = NULL, r->o.suppress_ids = NULL, r->o.bad_sequences = NULL, r->o.end_ids = NULL;
    const vkf_sequences *pre = o->target_prefix;
    if (pre && pre->count > 1) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "a request's target_prefix holds one prefix, not %u", pre->count);
    if (pre && pre->count == 1 && pre->lengths[0]) {
        r->n_prefix = pre->lengths[0];
        r->prefix = malloc((size_t)r->n_prefix * sizeof *r->prefix);
        if (!r->prefix) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        memcpy(r->prefix, pre->ids[0], (size_t)r->n_prefix * sizeof *r->prefix);
    }
    r->prefix_ptr = r->prefix;
    r->prefix_seq = (vkf_sequences){1, &r->prefix_ptr, &r->n_prefix};
    if (r->n_prefix) r->o.target_prefix = &r->prefix_seq;
    if (o->n_suppress) {
        r->suppress = malloc((size_t)o->n_suppress * sizeof *r->suppress);
        if (!r->suppress) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        memcpy(r->suppress, o->suppress_ids, (size_t)o->n_suppress * sizeof *r->suppress);
        r->o.suppress_ids = r->suppress;
    }
    if (o->n_end_ids) {
        memcpy(r->end_ids, o->end_ids, (size_t)o->n_end_ids * sizeof *r->end_ids);
        r->o.end_ids = r->end_ids;
    }
    const vkf_sequences *bad = o->bad_sequences;
    if (bad && bad->count) {
        uint64_t n = 0;
        for (uint32_t i = 0; i < bad->count; i++) n += bad->lengths[i];
        r->bad_ids = malloc((size_t)n * sizeof *r->bad_ids);
        r->bad_lengths = malloc((size_t)bad->count * sizeof *r->bad_lengths);
        r->bad_ptrs = malloc((size_t)bad->count * sizeof *r->bad_ptrs);
        if (!r->bad_ids || !r->bad_lengths || !r->bad_ptrs)
            return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        size_t k = 0;
        for (uint32_t i = 0; i < bad->count; i++) {
            memcpy(r->bad_ids + k, bad->ids[i], (size_t)bad->lengths[i] * sizeof *r->bad_ids);
            r->bad_ptrs[i] = r->bad_ids + k, r->bad_lengths[i] = bad->lengths[i];
            k += bad->lengths[i];
        }
        r->bad = (vkf_sequences){bad->count, r->bad_ptrs, r->bad_lengths};
        r->o.bad_sequences = &r->bad;
    }
    /* max_new 0: as far as the positions go after the prefix */
    if (r->o.max_new == 0) r->o.max_new = max_len - r->n_prefix;
    return VKF_OK;
}

/* A greedy or beam request's call (one source) and the processor of the group
 * it may join; false where a slot cannot hold it (it runs whole). */
static vkf_status prepare_slot(vkf_scheduler *s, request *r, bool *out_fits)
{
    *out_fits = false;
    const int32_t *ids = r->src;
    vkf_sequences src = {1, &ids, &r->n_src};
    VKF_TRY(vkf_decode_call_make(s->a, s->d, &r->o, &src, 0, r->o.max_new, &r->call));
    const vkf_decode_call *c = &r->call;
    if (c->prefix_len[0] > PREFIX_ROOM || c->prefix_len[0] + c->limit[0] > s->a->spec.max_len) return VKF_OK;
    /* the group's processor: this one, with room for PREFIX_ROOM prefix ids.
     * Greedy groups keep it always on (a prefix, a row's limit and forced eos
     * are per row there; on greedy rows it changes no choice: argmax of the F32
     * logits either way); beam groups as the request has it (the processor's
     * log-probabilities are the beams' scores, so that a plain beam search is
     * scored as alone; the host ends a source at its limit) */
    memcpy(&r->proc, &c->proc, sizeof r->proc);
    if (r->o.beams < 2 && !r->o.sample) r->proc.on = true;
    /* a forced bos (the target language of NLLB, M2M-100, mBART-50), the
     * repetition penalty and the n-gram size are per row: requests that differ
     * in them share a group */
    r->bos = -1, r->penalty = 1.0f, r->ngram = 0;
    if (r->proc.on) {
        r->proc.prefix_max = PREFIX_ROOM, r->proc.row_settings = true;
        r->bos = r->proc.forced_bos, r->proc.forced_bos = -1;
        r->penalty = r->proc.penalty, r->proc.penalty = 1.0f;
        r->ngram = r->proc.ngram, r->proc.ngram = 0;
    }
    *out_fits = true;
    return VKF_OK;
}

/* Hands a request its answer (outside the lock); the caller frees it. */
static void answer(vkf_scheduler *s, request *r, vkf_scheduler_result *res, bool release_slot)
{
    double now = vkf_now_ms();
    res->queued_ms = (r->t_admit ? r->t_admit : now) - r->t_submit;
    res->run_ms = r->t_admit ? now - r->t_admit : 0;
    if (!res->message) res->message = "";
    /* the counters first: a caller woken by `done` sees them */
    pthread_mutex_lock(&s->mu);
    if (res->status == VKF_OK) s->stats.answered++;
    else if (r->cancelled) s->stats.cancelled++;
    else s->stats.failed++;
    for (uint32_t j = 0; res->status == VKF_OK && j < res->n_best && res->lengths; j++) s->stats.tokens += res->lengths[j];
    if (release_slot) s->active--;
    pthread_mutex_unlock(&s->mu);
    r->answered = true;
    r->done(r->user, res);
}

static void answer_error(vkf_scheduler *s, request *r, vkf_status st, const char *message, bool release_slot)
{
    vkf_scheduler_result res = {.status = st, .message = message, .group_rows = 1};
    answer(s, r, &res, release_slot);
}

static bool is_cancelled(vkf_scheduler *s, const request *r)
{
    pthread_mutex_lock(&s->mu);
    bool c = r->cancelled;
    pthread_mutex_unlock(&s->mu);
    return c;
}

/* ------------------------------------------------------------------ groups */

/* Field by field (the structs' padding is not part of their value); processors
 * that are off are equal (nothing of them is recorded: what a request's
 * settings ask of the host, as forced eos at its last step, is per request). */
static bool same_proc(const vkf_proc *x, const vkf_proc *y)
{
    if (!x->on || !y->on) return x->on == y->on;
    return x->penalty == y->penalty && x->ngram == y->ngram && x->min_new == y->min_new &&
           x->forced_eos == y->forced_eos && x->eos == y->eos && x->forced_bos == y->forced_bos &&
           x->n_suppress == y->n_suppress && x->n_end == y->n_end && x->n_bad == y->n_bad &&
           x->prefix_max == y->prefix_max && x->unbanned_generator == y->unbanned_generator &&
           x->row_settings == y->row_settings &&
           x->n_begin == y->n_begin && x->ts_begin == y->ts_begin && x->no_timestamps == y->no_timestamps &&
           x->ts_max_initial == y->ts_max_initial && x->ts_eos == y->ts_eos;
}

/* A group's source length for a source of n tokens: a power of two from
 * MIN_SOURCE, at most max_len (so that groups of a few shapes serve every source). */
static uint32_t group_source_len(const vkf_arch *a, uint32_t n)
{
    uint32_t S = MIN_SOURCE;
    while (S < n) S *= 2;
    return S < a->spec.max_len ? S : a->spec.max_len;
}

/* Whether two draws' settings are equal (sample off: argmax, nothing else read). */
static bool same_draw(bool sample_a, const vkf_generate_options *a, bool sample_b, const vkf_generate_options *b)
{
    return sample_a == sample_b && (!sample_a || (a->temperature == b->temperature && a->top_k == b->top_k &&
                                                  a->top_p == b->top_p));
}

/* Whether request r may take a slot of group g at this boundary. */
static bool fits(const vkf_scheduler *s, const group *g, const request *r)
{
    if (g->alive + g->reserved >= g->slots || r->n_src > g->S || !same_proc(&g->proc, &r->proc) ||
        g->beams != (r->o.beams > 1 ? r->o.beams : 0) || !same_draw(g->sample, &g->sampling, r->o.sample, &r->o))
        return false;
    if (s->wait_batch && g->alive) return false; /* static batching: only an empty group admits */
    return g->n_lists == r->call.n_lists &&
           (!g->n_lists || !memcmp(g->lists, r->call.lists, g->n_lists * sizeof *g->lists));
}

/* A group (no plan yet) for requests like r. */
static group *group_new(vkf_scheduler *s, const request *r)
{
    group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->proc = r->proc;
    g->beams = r->o.beams > 1 ? r->o.beams : 0;
    g->sample = r->o.sample;
    if (g->sample) { /* the draw's settings; seeds per row, min_new runs whole, forced eos is the host's */
        vkf_generate_options_init(&g->sampling);
        g->sampling.sample = true, g->sampling.temperature = r->o.temperature;
        g->sampling.top_k = r->o.top_k, g->sampling.top_p = r->o.top_p;
    }
    g->unit = g->beams ? g->beams : 1;
    g->slots = s->opt.max_batch / g->unit; /* at least 1: a beam search wider than max_batch runs whole */
    g->S = group_source_len(s->a, r->n_src);
    g->steps = s->a->spec.max_len;
    g->row_stride = 5 + PREFIX_ROOM; /* prefix length, limit, forced bos, penalty's bits, n-gram size, prefix ids */
    g->n_lists = r->call.n_lists;
    g->lists = malloc((g->n_lists ? g->n_lists : 1) * sizeof *g->lists);
    if (!g->lists) {
        free(g);
        return NULL;
    }
    if (g->n_lists) memcpy(g->lists, r->call.lists, g->n_lists * sizeof *g->lists);
    return g;
}

static void cache_plan(vkf_scheduler *s, vkf_gen_plan *p)
{
    if (!p) return;
    if (s->n_cache == MAX_CACHED_PLANS) {
        vkf_gen_plan_free(s->cache[0]);
        memmove(s->cache, s->cache + 1, (MAX_CACHED_PLANS - 1) * sizeof *s->cache);
        s->n_cache--;
    }
    s->cache[s->n_cache++] = p;
}

static void group_free(vkf_scheduler *s, group *g, bool keep_plan)
{
    if (!g) return;
    if (keep_plan) cache_plan(s, g->p);
    else vkf_gen_plan_free(g->p);
    for (uint32_t b = 0; g->req && b < g->slots; b++) request_free(g->req[b]);
    for (uint32_t b = 0; g->bs && b < g->slots; b++) vkf_beam_source_free(&g->bs[b]);
    free(g->lists), free(g->req), free(g->pos), free(g->ids), free(g->src_len), free(g->row_data), free(g->len);
    free(g->out), free(g->bs), free(g->parent), free(g->score), free(g->cand_scores), free(g->cand_ids), free(g->seeds);
    free(g);
}

/* The group's plan (a cached one of its shape, or a new one; where the device
 * has no room for `slots` rows, fewer) and host copies. */
static vkf_status group_build(vkf_scheduler *s, group *g)
{
    for (uint32_t i = 0; i < s->n_cache && !g->p; i++) {
        vkf_gen_plan *p = s->cache[i];
        if (p->batch == g->slots * g->unit && p->beams == g->beams && p->src_len == g->S && p->steps == g->steps &&
            same_proc(&p->proc, &g->proc) && same_draw(p->sample, &p->sampling, g->sample, &g->sampling)) {
            memmove(s->cache + i, s->cache + i + 1, (s->n_cache - i - 1) * sizeof *s->cache);
            s->n_cache--;
            g->p = p;
        }
    }
    vkf_status st = VKF_OK;
    while (!g->p) {
        st = vkf_gen_plan_build_slots(s->a, g->slots * g->unit, g->beams, g->S, g->steps, &g->proc,
                                      g->sample ? &g->sampling : NULL, &g->p);
        if (st == VKF_ERROR_OUT_OF_DEVICE_MEMORY && s->n_cache) {
            while (s->n_cache) vkf_gen_plan_free(s->cache[--s->n_cache]);
            continue;
        }
        if ((st == VKF_ERROR_OUT_OF_DEVICE_MEMORY || st == VKF_ERROR_TOO_LARGE) && g->slots > 1 &&
            g->slots / 2 >= g->reserved) {
            g->slots /= 2;
            continue;
        }
        if (st != VKF_OK) return st;
    }
    uint32_t n = g->slots, rows = n * g->unit, nc = g->beams ? g->p->n_cand : 1;
    g->req = calloc(n, sizeof *g->req);
    g->pos = malloc(rows * sizeof *g->pos);
    g->ids = calloc(rows, sizeof *g->ids);
    g->src_len = calloc(rows, sizeof *g->src_len);
    g->row_data = calloc((size_t)rows * g->row_stride, sizeof *g->row_data);
    g->len = calloc(n, sizeof *g->len);
    g->out = malloc((size_t)n * g->steps * sizeof *g->out);
    if (g->sample && !(g->seeds = calloc((size_t)rows * 2, sizeof *g->seeds)))
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    bool beam_ok = !g->beams || ((g->bs = calloc(n, sizeof *g->bs)) && (g->parent = malloc(rows * sizeof *g->parent)) &&
                                 (g->score = calloc(rows, sizeof *g->score)) &&
                                 (g->cand_scores = malloc((size_t)n * nc * sizeof *g->cand_scores)) &&
                                 (g->cand_ids = malloc((size_t)n * nc * sizeof *g->cand_ids)));
    if (!g->req || !g->pos || !g->ids || !g->src_len || !g->row_data || !g->len || !g->out || !beam_ok)
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t r = 0; r < rows; r++) g->pos[r] = -1;
    for (uint32_t r = 0; r < rows; r++) g->src_len[r] = 1;
    for (uint32_t r = 0; g->beams && r < rows; r++) g->parent[r] = (int32_t)r;
    if (g->proc.on)
        st = vkf_tensor_upload(g->p->lists, g->lists, (uint64_t)(g->n_lists ? g->n_lists : 1) * sizeof *g->lists);
    g->dirty = true;
    return st;
}

static uint32_t hist_bin(uint32_t rows)
{
    uint32_t bin = 0;
    for (uint32_t n = 1; n < rows && bin < 7; n *= 2) bin++;
    return bin;
}

/* An encoder plan of this shape (cached, most recently used last). */
static vkf_status take_encoder(vkf_scheduler *s, uint32_t n, uint32_t S, vkf_fwd_plan **out)
{
    enc_plan *e = s->enc;
    for (int i = 0; i < MAX_CACHED_ENCODERS; i++)
        if (e[i].p && e[i].p->batch == n && e[i].p->src_len == S) {
            enc_plan hit = e[i];
            memmove(e + i, e + i + 1, (MAX_CACHED_ENCODERS - 1 - i) * sizeof *e);
            e[MAX_CACHED_ENCODERS - 1] = hit;
            *out = hit.p;
            return VKF_OK;
        }
    vkf_fwd_plan *p;
    vkf_status st = vkf_fwd_plan_alloc(s->a, n, S, 1, &p);
    if (st != VKF_OK) return st;
    vkf_fwd_plan_free(e[0].p);
    memmove(e, e + 1, (MAX_CACHED_ENCODERS - 1) * sizeof *e);
    e[MAX_CACHED_ENCODERS - 1].p = p;
    *out = p;
    return VKF_OK;
}

/* Arrivals reqs[0..n) into free slots of g: one batched encoder pass (in
 * smaller batches where one would pass the device's limits) writing each one's
 * cross K/V into its slot, and the host copies of its position, input, source
 * length and processor row. The caller answers them on failure. */
static vkf_status group_admit(vkf_scheduler *s, group *g, request **reqs, uint32_t n)
{
    vkf_arch *a = s->a;
    uint32_t slot[MAX_BATCH], free_n = 0;
    for (uint32_t b = 0; b < g->slots && free_n < n; b++)
        if (!g->req[b]) slot[free_n++] = b;
    if (free_n < n) return vkf_fail(VKF_ERROR_STATE, "scheduler: %u arrivals for %u free slots", n, free_n);
    /* padding masked out exactly (dense attention everywhere): the encoder's length
     * a multiple of 8, so that its cached plans serve more admissions */
    bool dense = a->encoder_attn.kind == VKF_ATTN_FUSED && a->encoder_attn.pattern == VKF_ATTENTION_DENSE &&
                 !a->spec.rel_bias;
    double t0 = vkf_now_ms();
    vkf_status st = VKF_OK;
    uint32_t chunk = n;
    for (uint32_t first = 0; st == VKF_OK && first < n;) {
        uint32_t m = n - first < chunk ? n - first : chunk;
        const int32_t *ids[MAX_BATCH];
        uint32_t lens[MAX_BATCH], S = 0;
        for (uint32_t i = 0; i < m; i++) {
            ids[i] = reqs[first + i]->src, lens[i] = reqs[first + i]->n_src;
            if (lens[i] > S) S = lens[i];
        }
        if (dense && S % 8 && (S + 7) / 8 * 8 <= g->S) S = (S + 7) / 8 * 8;
        vkf_sequences src = {m, ids, lens};
        vkf_fwd_plan *enc = NULL;
        st = take_encoder(s, m, S, &enc);
        if (st == VKF_OK) st = vkf_upload_ids(a, &src, S, enc->src_ids, enc->src_mask, enc->src_lengths, enc->src_pos);
        if (st == VKF_OK) st = vkf_upload_lowrank(a, enc, &src);
        if (st == VKF_OK) st = vkf_gen_plan_encode_slots(a, g->p, enc, slot + first);
        if ((st == VKF_ERROR_TOO_LARGE || st == VKF_ERROR_OUT_OF_DEVICE_MEMORY) && m > 1) {
            chunk = m / 2, st = VKF_OK; /* the same arrivals in smaller passes */
            continue;
        }
        if (st == VKF_OK) {
            pthread_mutex_lock(&s->mu);
            s->stats.encoder_passes++;
            s->stats.batch_hist[hist_bin(m)]++;
            s->stats.batch_rows += m;
            pthread_mutex_unlock(&s->mu);
        }
        first += m;
    }
    pthread_mutex_lock(&s->mu);
    s->stats.busy_ms += vkf_now_ms() - t0;
    if (st == VKF_OK && g->alive) s->stats.joined += n;
    for (uint32_t i = 0; st == VKF_OK && g->beams && i < n; i++) /* each one's beams and hypotheses */
        st = vkf_beam_source_init(&g->bs[slot[i]], g->beams, g->steps);
    for (uint32_t i = 0; st == VKF_OK && i < n; i++) {
        request *r = reqs[i];
        const vkf_decode_call *c = &r->call;
        uint32_t b = slot[i];
        g->req[b] = r;
        g->src_len[b] = (int32_t)r->n_src, g->len[b] = 0;
        for (uint32_t k = 0; k < g->unit; k++) { /* its rows: beam 0 alone at first (the others at -1e9) */
            uint32_t rr = b * g->unit + k;
            g->pos[rr] = 0, g->ids[rr] = a->spec.decoder_start_id;
            int32_t *row = g->row_data + (size_t)rr * g->row_stride;
            row[0] = (int32_t)c->prefix_len[0], row[1] = (int32_t)c->limit[0], row[2] = r->bos;
            memcpy(&row[3], &r->penalty, sizeof r->penalty);
            row[4] = (int32_t)r->ngram;
            for (uint32_t j = 0; j < c->prefix_len[0]; j++) row[5 + j] = c->prefix[0][j];
            if (g->beams) g->parent[rr] = (int32_t)rr, g->score[rr] = k ? -1e9f : 0.0f;
            if (g->sample) g->seeds[2 * rr] = (int32_t)(uint32_t)r->o.seed, g->seeds[2 * rr + 1] = (int32_t)(uint32_t)(r->o.seed >> 32);
        }
        g->alive++;
        if (b + 1 > g->top) g->top = b + 1;
    }
    pthread_mutex_unlock(&s->mu);
    g->dirty = true;
    return st;
}

/* Answers slot b of a group (greedy: its ids so far; beams: its n_best
 * hypotheses, where it ended) and frees the slot. */
static void answer_row(vkf_scheduler *s, group *g, uint32_t b, vkf_status st, const char *message)
{
    request *r = g->req[b];
    float score = NAN;
    vkf_scheduler_result res = {.status = st, .message = message, .ids = g->out + (size_t)b * g->steps,
                                .lengths = &g->len[b], .scores = &score, .n_best = 1, .stride = g->steps,
                                .group_rows = g->alive};
    int32_t *ids = NULL;
    uint32_t lengths[VKF_MAX_BEAMS];
    float scores[VKF_MAX_BEAMS];
    if (g->beams && st == VKF_OK) {
        uint32_t nb = r->o.n_best, stride = r->o.max_new;
        ids = malloc((size_t)nb * stride * sizeof *ids);
        if (ids) {
            vkf_beam_source_result(&g->bs[b], s->a, r->call.prefix_len[0], nb, stride, ids, lengths, scores);
            res.ids = ids, res.lengths = lengths, res.scores = scores, res.n_best = nb, res.stride = stride;
            /* streaming of beam search: the best hypothesis at the end */
            if (r->o.on_tokens) r->o.on_tokens(r->o.on_tokens_user, 0, ids, lengths[0]);
        } else {
            res.status = VKF_ERROR_OUT_OF_HOST_MEMORY, res.message = "out of host memory for a request's hypotheses";
        }
    } else if (g->beams) {
        res.ids = NULL, res.lengths = NULL, res.scores = NULL, res.n_best = 0, res.stride = 0;
    }
    answer(s, r, &res, true);
    free(ids);
    pthread_mutex_lock(&s->mu);
    g->req[b] = NULL;
    pthread_mutex_unlock(&s->mu);
    request_free(r);
    if (g->beams) vkf_beam_source_free(&g->bs[b]);
    for (uint32_t k = 0; k < g->unit; k++) {
        uint32_t rr = b * g->unit + k;
        g->pos[rr] = -1;
        if (g->beams) g->parent[rr] = (int32_t)rr, g->score[rr] = 0.0f, g->ids[rr] = s->a->spec.pad_id;
    }
    g->alive--, g->dirty = true;
    while (g->top && !g->req[g->top - 1]) g->top--;
}

/* The host's part of a beam group's step: each live slot's candidates decide
 * its beams' parents, ids and scores for the next step; a slot that ends is
 * answered. */
static void beam_rows(vkf_scheduler *s, group *g, uint32_t top)
{
    const uint32_t K = g->beams, NC = g->p->n_cand;
    for (uint32_t b = 0; b < top; b++) {
        request *r = g->req[b];
        if (!r) continue;
        uint32_t t = (uint32_t)g->pos[b * K];
        for (uint32_t k = 0; k < K; k++) g->pos[b * K + k]++;
        int32_t local[VKF_MAX_BEAMS];
        bool ends = vkf_beam_source_step(&g->bs[b], s->a, &r->call, 0, t, g->cand_scores + (size_t)b * NC,
                                         g->cand_ids + (size_t)b * NC, NC, local, g->ids + (size_t)b * K,
                                         g->score + (size_t)b * K);
        for (uint32_t k = 0; k < K; k++) g->parent[b * K + k] = (int32_t)(b * K) + local[k];
        if (ends || (uint32_t)g->pos[b * K] == g->steps) answer_row(s, g, b, VKF_OK, NULL);
    }
}

/* One decode step of a group's slots 0..top-1; answers the rows that end.
 * Returns false once the group has no live row. */
static bool group_step(vkf_scheduler *s, group *g)
{
    vkf_gen_plan *p = g->p;
    /* cancelled rows first: they are answered at this boundary */
    bool cancelled[MAX_BATCH];
    pthread_mutex_lock(&s->mu);
    for (uint32_t b = 0; b < g->top; b++) cancelled[b] = g->req[b] && g->req[b]->cancelled;
    pthread_mutex_unlock(&s->mu);
    for (uint32_t b = 0; b < g->top; b++)
        if (cancelled[b] && g->req[b]) answer_row(s, g, b, VKF_ERROR_STATE, "cancelled");
    if (g->alive == 0) return false;
    uint32_t top = g->top, R = top * g->unit, rows = g->slots * g->unit;
    double t0 = vkf_now_ms();
    vkf_status st = VKF_OK;
    if (g->dirty) { /* rows joined or left: their positions, inputs, lengths and processor rows */
        st = vkf_tensor_upload(p->state, g->pos, (uint64_t)rows * sizeof *g->pos);
        if (st == VKF_OK && !g->beams) st = vkf_tensor_upload(p->step_ids, g->ids, (uint64_t)rows * sizeof *g->ids);
        if (st == VKF_OK) st = vkf_tensor_upload(p->src_lengths, g->src_len, (uint64_t)rows * sizeof *g->src_len);
        if (st == VKF_OK && g->proc.on)
            st = vkf_tensor_upload(p->row_data, g->row_data, (uint64_t)rows * g->row_stride * sizeof *g->row_data);
        if (st == VKF_OK && g->sample) st = vkf_tensor_upload(p->seeds, g->seeds, (uint64_t)rows * 2 * sizeof *g->seeds);
        g->dirty = st != VKF_OK;
    }
    if (st == VKF_OK && g->beams) { /* every step: the host's choices */
        st = vkf_tensor_upload(p->step_ids, g->ids, (uint64_t)rows * sizeof *g->ids);
        if (st == VKF_OK) st = vkf_tensor_upload(p->parent, g->parent, (uint64_t)rows * sizeof *g->parent);
        if (st == VKF_OK) st = vkf_tensor_upload(p->beam_scores, g->score, (uint64_t)rows * sizeof *g->score);
    }
    vkf_cmd *step = NULL;
    if (st == VKF_OK) st = vkf_gen_plan_slot_step(s->a, p, R, g->parity, &step);
    if (st == VKF_OK && s->fault_step && s->stats.steps + 1 == s->fault_step) /* tests: a lost device */
        vkf_test_inject_fault(s->a->ctx, "vkQueueSubmit", VK_ERROR_DEVICE_LOST);
    if (st == VKF_OK) st = vkf_cmd_submit(step);
    g->parity ^= 1;
    int32_t ids[MAX_BATCH];
    if (st == VKF_OK && !g->beams) st = vkf_tensor_download(p->step_ids, ids, (uint64_t)rows * sizeof *ids);
    uint64_t nc = g->beams ? (uint64_t)g->slots * p->n_cand : 0;
    if (st == VKF_OK && g->beams) st = vkf_tensor_download(p->cand_scores, g->cand_scores, nc * sizeof *g->cand_scores);
    if (st == VKF_OK && g->beams) st = vkf_tensor_download(p->cand_ids, g->cand_ids, nc * sizeof *g->cand_ids);
    pthread_mutex_lock(&s->mu);
    s->stats.busy_ms += vkf_now_ms() - t0;
    s->stats.steps++;
    s->stats.step_rows += R;
    if (R > s->stats.max_step_rows) s->stats.max_step_rows = R;
    pthread_mutex_unlock(&s->mu);
    if (st != VKF_OK) {
        char message[512];
        snprintf(message, sizeof message, "%s", vkf_last_error());
        for (uint32_t b = 0; b < g->slots; b++)
            if (g->req[b]) answer_row(s, g, b, st, message);
        g->dirty = true; /* the device's copies are unknown now */
        return false;
    }
    if (g->beams) {
        beam_rows(s, g, top);
        return g->alive > 0;
    }
    for (uint32_t b = 0; b < R; b++) {
        request *r = g->req[b];
        if (!r) continue;
        uint32_t t = (uint32_t)g->pos[b]++;
        g->ids[b] = ids[b];
        const vkf_decode_call *c = &r->call;
        if (t < c->prefix_len[0]) continue; /* a prefix id */
        /* forced eos is the processor's where it is on (every argmax group); else
         * the row ends at its last step without the id drawn there */
        bool end = vkf_is_end(c, ids[b]) || (r->o.forced_eos && !g->proc.on && g->len[b] + 1 == c->limit[0]);
        if (!end) {
            g->out[(size_t)b * g->steps + g->len[b]++] = ids[b];
            if (r->o.on_tokens && !r->o.on_tokens(r->o.on_tokens_user, 0, &ids[b], 1)) end = true;
        }
        if (end || g->len[b] == c->limit[0] || (uint32_t)g->pos[b] == g->steps) answer_row(s, g, b, VKF_OK, NULL);
    }
    return g->alive > 0;
}

/* Whether two lists of n ids are equal. */
static bool same_ids(const int32_t *x, const int32_t *y, uint32_t n)
{
    return n == 0 || memcmp(x, y, (size_t)n * sizeof *x) == 0;
}

/* Whether whole requests x and y may run as one batch: deterministic (no
 * sampling: a draw depends on the row), no streaming, and every option but the
 * target prefix equal (copy_options set max_new). */
static bool same_whole(const request *x, const request *y)
{
    const vkf_generate_options *a = &x->o, *b = &y->o;
    if (x->audio || y->audio || a->sample || b->sample || a->on_tokens || b->on_tokens) return false;
    if (a->max_new != b->max_new || a->min_new != b->min_new || a->beams != b->beams ||
        a->length_penalty != b->length_penalty || a->early_stopping != b->early_stopping || a->n_best != b->n_best ||
        a->forced_eos != b->forced_eos || a->renormalize != b->renormalize || a->forced_bos != b->forced_bos ||
        a->forced_bos_id != b->forced_bos_id || a->repetition_penalty != b->repetition_penalty ||
        a->no_repeat_ngram != b->no_repeat_ngram || a->max_new_factor != b->max_new_factor ||
        a->n_suppress != b->n_suppress || a->n_end_ids != b->n_end_ids || !same_ids(x->suppress, y->suppress, a->n_suppress) ||
        !same_ids(x->end_ids, y->end_ids, a->n_end_ids))
        return false;
    uint32_t nx = a->bad_sequences ? a->bad_sequences->count : 0, ny = b->bad_sequences ? b->bad_sequences->count : 0;
    if (nx != ny) return false;
    uint32_t total = 0;
    for (uint32_t i = 0; i < nx; i++) {
        if (x->bad_lengths[i] != y->bad_lengths[i]) return false;
        total += x->bad_lengths[i];
    }
    return same_ids(x->bad_ids, y->bad_ids, total);
}

/* A whole run: requests no slot holds; reqs[0..n)
 * (same_whole, n > 1) decode as one batch of sources, each with its own prefix. */
static void run_whole(vkf_scheduler *s, request **reqs, uint32_t n)
{
    double t0 = vkf_now_ms();
    const request *r0 = reqs[0];
    char message[512] = "";
    uint32_t nb = r0->o.sample ? 1 : r0->o.n_best, stride = r0->o.max_new;
    int32_t *ids = malloc((size_t)n * nb * stride * sizeof *ids);
    uint32_t *lengths = malloc((size_t)n * nb * sizeof *lengths);
    float *scores = malloc((size_t)n * nb * sizeof *scores);
    const int32_t **src_ids = malloc((size_t)n * sizeof *src_ids), **pre_ids = malloc((size_t)n * sizeof *pre_ids);
    uint32_t *src_len = malloc((size_t)n * sizeof *src_len), *pre_len = malloc((size_t)n * sizeof *pre_len);
    vkf_status st = VKF_OK;
    if (ids && lengths && scores && src_ids && pre_ids && src_len && pre_len) {
        bool prefixed = false;
        for (uint32_t i = 0; i < n; i++) {
            src_ids[i] = reqs[i]->src, src_len[i] = reqs[i]->n_src;
            pre_ids[i] = reqs[i]->prefix, pre_len[i] = reqs[i]->n_prefix;
            prefixed |= reqs[i]->n_prefix > 0;
        }
        vkf_sequences src = {n, src_ids, src_len}, prefix = {n, pre_ids, pre_len};
        vkf_generate_options o = r0->o;
        o.target_prefix = prefixed ? &prefix : NULL;
        st = vkf_model_generate_with(s->model, &src, &o, ids, lengths, scores);
        if (st != VKF_OK) snprintf(message, sizeof message, "%s", vkf_last_error());
    } else {
        st = VKF_ERROR_OUT_OF_HOST_MEMORY;
        snprintf(message, sizeof message, "out of host memory for %u requests' %u hypotheses", n, nb);
    }
    pthread_mutex_lock(&s->mu);
    s->stats.busy_ms += vkf_now_ms() - t0;
    s->stats.batch_hist[hist_bin(n)]++;
    s->stats.batch_rows += n;
    pthread_mutex_unlock(&s->mu);
    for (uint32_t i = 0; i < n; i++) {
        request *r = reqs[i];
        vkf_scheduler_result res = {.status = st, .message = message, .group_rows = n};
        if (st == VKF_OK)
            res.ids = ids + (size_t)i * nb * stride, res.lengths = lengths + (size_t)i * nb,
            res.scores = scores + (size_t)i * nb, res.n_best = nb, res.stride = stride;
        if (is_cancelled(s, r) && res.status == VKF_OK) res.status = VKF_ERROR_STATE, res.message = "cancelled";
        answer(s, r, &res, true);
        request_free(r);
    }
    free(ids), free(lengths), free(scores), free(src_ids), free(pre_ids), free(src_len), free(pre_len);
}

/* A transcription's first step (features, language, prompt): false when it was
 * answered already (an error). */
static bool job_begin(vkf_scheduler *s, request *r)
{
    double t0 = vkf_now_ms();
    vkf_transcribe_options to = r->to;
    to.on_progress = NULL, to.on_progress_user = NULL;
    to.language = r->language[0] ? r->language : NULL;
    to.task = r->task[0] ? r->task : NULL;
    vkf_status st = vkf_transcription_begin(s->model, r->samples, r->n_samples, &to, &r->tr);
    pthread_mutex_lock(&s->mu);
    s->stats.busy_ms += vkf_now_ms() - t0;
    pthread_mutex_unlock(&s->mu);
    if (st == VKF_OK) {
        free(r->samples); /* not needed after begin */
        r->samples = NULL;
        return true;
    }
    char message[512];
    snprintf(message, sizeof message, "%s", vkf_last_error());
    answer_error(s, r, st, message, true);
    request_free(r);
    return false;
}

/* One window of a transcription job; answers it once it is done, failed or
 * cancelled. Returns false then. */
static bool job_step(vkf_scheduler *s, request *r)
{
    vkf_scheduler_result res = {.group_rows = 1};
    char message[512] = "";
    bool done = false;
    if (is_cancelled(s, r)) {
        res.status = VKF_ERROR_STATE, res.message = "cancelled";
        answer(s, r, &res, true);
        return false;
    }
    double t0 = vkf_now_ms();
    res.status = vkf_transcription_next(r->tr, &done);
    if (res.status == VKF_OK && done) {
        res.status = vkf_transcription_finish(r->tr, &res.transcript);
        r->tr = NULL; /* finish frees it */
    }
    if (res.status != VKF_OK) snprintf(message, sizeof message, "%s", vkf_last_error());
    pthread_mutex_lock(&s->mu);
    s->stats.busy_ms += vkf_now_ms() - t0;
    if (res.status != VKF_OK || done) s->stats.batch_hist[0]++, s->stats.batch_rows++;
    pthread_mutex_unlock(&s->mu);
    if (res.status == VKF_OK && !done) return true;
    if (res.status == VKF_OK && is_cancelled(s, r)) {
        vkf_transcript_free(res.transcript);
        res.transcript = NULL, res.status = VKF_ERROR_STATE;
        snprintf(message, sizeof message, "cancelled");
    }
    res.message = message;
    answer(s, r, &res, true);
    return false;
}

/* ------------------------------------------------------------------ the thread */

/* Whether the waiting requests are admitted at this boundary (under mu). With
 * no group decoding: at once. Beside running groups an admission costs an
 * encoder pass (a submit) of its own: arrivals gather for up to two rounds,
 * unless an eighth of the slots' worth waits already. */
static bool admit_now(vkf_scheduler *s, const request *head)
{
    if (!s->n_groups) return true;
    uint32_t enough = s->opt.max_batch / 8 > 2 ? s->opt.max_batch / 8 : 2;
    return s->queued >= enough || s->rounds - head->round_submit >= 2;
}

/* Takes the queue's greedy requests that have room into `batch` (under mu): each
 * into a running group it fits, or a new one (in *fresh) while max_groups allows. */
static uint32_t admit(vkf_scheduler *s, request **batch, group **fresh)
{
    uint32_t n = 0, groups = s->n_groups;
    for (request **pp = &s->queue_head; *pp && s->active + n < s->opt.max_batch;) {
        request *r = *pp;
        group *g = NULL;
        if (!r->whole) {
            for (group *x = s->groups; x && !g; x = x->next)
                if (fits(s, x, r)) g = x;
            for (group *x = *fresh; x && !g; x = x->next)
                if (fits(s, x, r)) g = x;
            if (!g && groups < s->opt.max_groups && (g = group_new(s, r))) {
                g->next = *fresh, *fresh = g;
                groups++;
            }
        }
        if (!g) {
            /* one that fits no group for long (its source length or settings differ
             * from every running group's, all max_groups of them busy): nobody
             * else is admitted until a group has ended and made room for it */
            if (!r->whole && s->rounds - r->round_submit >= STARVED) break;
            pp = &r->next;
            continue;
        }
        g->reserved++;
        r->target = g;
        *pp = r->next, batch[n++] = r, s->queued--;
    }
    s->active += n;
    s->stats.admitted += n;
    s->starting = batch, s->n_starting = n;
    s->queue_tail = NULL;
    for (request *r = s->queue_head; r; r = r->next) s->queue_tail = r;
    return n;
}

/* The admitted requests into their groups (new ones built and made running);
 * a request whose group fails is answered with the error. */
static void place(vkf_scheduler *s, request **batch, uint32_t n, group *fresh)
{
    double now = vkf_now_ms();
    for (uint32_t i = 0; i < n; i++) batch[i]->t_admit = now;
    /* per group (a new one built first): its arrivals in one admission */
    request *mine[MAX_BATCH];
    bool placed[MAX_BATCH] = {false}; /* batch stays whole: cancels read it until `starting` is cleared */
    group *all[2] = {fresh, s->groups};
    for (int list = 0; list < 2; list++)
        for (group *g = all[list]; g; g = g->next) {
            uint32_t m = 0;
            for (uint32_t i = 0; i < n; i++)
                if (!placed[i] && batch[i]->target == g) mine[m++] = batch[i], placed[i] = true;
            if (!m) continue;
            vkf_status st = list == 0 ? group_build(s, g) : VKF_OK;
            if (st == VKF_OK) st = group_admit(s, g, mine, m);
            char why[512] = "";
            if (st != VKF_OK) snprintf(why, sizeof why, "%s", vkf_last_error());
            g->reserved -= m;
            for (uint32_t i = 0; i < m; i++) mine[i]->target = NULL;
            if (st == VKF_OK) continue;
            pthread_mutex_lock(&s->mu);
            s->starting = NULL, s->n_starting = 0; /* no cancel reaches them from here on */
            pthread_mutex_unlock(&s->mu);
            for (uint32_t i = 0; i < m; i++) {
                answer_error(s, mine[i], st, why, true);
                request_free(mine[i]);
            }
        }
    /* new groups with rows run from here on; the others are dropped */
    pthread_mutex_lock(&s->mu);
    s->starting = NULL, s->n_starting = 0;
    while (fresh) {
        group *g = fresh;
        fresh = g->next;
        if (g->alive) {
            g->next = s->groups, s->groups = g, s->n_groups++;
        } else {
            pthread_mutex_unlock(&s->mu);
            group_free(s, g, g->req != NULL);
            pthread_mutex_lock(&s->mu);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static bool between_whole_steps(void *user);

/* One round: cancelled requests answered, an admission at this step boundary
 * (a whole run or a transcription at the queue's head starts, or greedy
 * requests go into free slots), one window of every transcription and one step
 * of every running group. A nested round runs between the steps of a whole run
 * (between_whole_steps): it starts no whole run or transcription (they wait for
 * the one in progress) and admits the greedy requests behind them. Returns
 * false once the scheduler stops. */
static bool run_round(vkf_scheduler *s, bool nested)
{
    request *batch[MAX_BATCH], *whole[WHOLE_BATCH];
    request *dropped = NULL, *job = NULL;
    uint32_t n_whole = 0;
    group *fresh = NULL;
    uint32_t n = 0;
    pthread_mutex_lock(&s->mu);
    while (!nested && !s->stop && !s->queue_head && !s->groups && !s->jobs) pthread_cond_wait(&s->cv, &s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    /* cancelled requests leave the queue */
    for (request **pp = &s->queue_head; *pp;) {
        request *r = *pp;
        if (!r->cancelled) {
            pp = &r->next;
            continue;
        }
        *pp = r->next, r->next = dropped, dropped = r, s->queued--;
    }
    s->queue_tail = NULL;
    for (request *r = s->queue_head; r; r = r->next) s->queue_tail = r;
    /* admission at this step boundary: a whole run at the head, or greedy
     * requests into free slots (in a nested round: those behind a whole one) */
    request *head = s->queue_head;
    while (nested && head && head->whole) head = head->next;
    if (head && s->active < s->opt.max_batch) {
        if (head->whole) {
            s->queue_head = head->next, s->queued--, s->active++;
            if (head->audio) job = head;
            else whole[n_whole++] = head;
            s->stats.admitted++;
            /* the waiting requests that may share its batch go with it */
            for (request **pp = &s->queue_head; n_whole && *pp && n_whole < WHOLE_BATCH && s->active < s->opt.max_batch;) {
                request *r = *pp;
                if (!r->whole || !same_whole(head, r)) {
                    pp = &r->next;
                    continue;
                }
                *pp = r->next, s->queued--, s->active++, s->stats.admitted++;
                whole[n_whole++] = r;
            }
            s->queue_tail = NULL;
            for (request *r = s->queue_head; r; r = r->next) s->queue_tail = r;
        } else if (admit_now(s, head)) {
            n = admit(s, batch, &fresh);
        }
    }
    pthread_mutex_unlock(&s->mu);
    while (dropped) {
        request *r = dropped;
        dropped = r->next;
        answer_error(s, r, VKF_ERROR_STATE, "cancelled", false);
        request_free(r);
    }
    if (n_whole) {
        double now = vkf_now_ms();
        for (uint32_t i = 0; i < n_whole; i++) whole[i]->t_admit = now;
        pthread_mutex_lock(&s->mu);
        s->whole = whole, s->n_whole = n_whole;
        pthread_mutex_unlock(&s->mu);
        /* its steps alternate with rounds of the others (between_whole_steps) */
        s->d->between_steps = between_whole_steps, s->d->between_user = s;
        run_whole(s, whole, n_whole); /* answers and frees them */
        s->d->between_steps = NULL, s->d->between_user = NULL;
        pthread_mutex_lock(&s->mu);
        s->whole = NULL, s->n_whole = 0;
        pthread_mutex_unlock(&s->mu);
    }
    if (job) { /* a transcription starts: its windows run one per round from here on */
        job->t_admit = vkf_now_ms();
        job->next = NULL;
        pthread_mutex_lock(&s->mu);
        s->whole = &job, s->n_whole = 1; /* cancels reach it while it begins */
        pthread_mutex_unlock(&s->mu);
        bool started = job_begin(s, job);
        pthread_mutex_lock(&s->mu);
        s->whole = NULL, s->n_whole = 0;
        if (started) {
            request **tail = &s->jobs;
            while (*tail) tail = &(*tail)->next;
            *tail = job;
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (n || fresh) place(s, batch, n, fresh);
    /* one window of every transcription (not between a whole run's steps: a
     * window decodes with the model's own decoder, which the run is using) */
    for (request **jp = &s->jobs; !nested && *jp;) {
        request *r = *jp;
        if (job_step(s, r)) {
            jp = &r->next;
            continue;
        }
        pthread_mutex_lock(&s->mu);
        *jp = r->next;
        pthread_mutex_unlock(&s->mu);
        request_free(r);
    }
    /* one step of every running group: one submit each */
    bool stepped = s->groups != NULL || (!nested && s->jobs != NULL);
    for (group **gp = &s->groups; *gp;) {
        group *g = *gp;
        if (group_step(s, g)) {
            gp = &g->next;
            continue;
        }
        pthread_mutex_lock(&s->mu);
        *gp = g->next, s->n_groups--;
        pthread_mutex_unlock(&s->mu);
        group_free(s, g, true);
    }
    if (stepped) {
        pthread_mutex_lock(&s->mu);
        s->rounds++;
        pthread_mutex_unlock(&s->mu);
    }
    return true;
}

/* Between two steps of a whole run (beam search, sampling): a round of the
 * others, so that greedy requests are admitted and decoded while it runs;
 * false (the run ends, answered "cancelled") once it is cancelled or the
 * scheduler stops. */
static bool between_whole_steps(void *user)
{
    vkf_scheduler *s = user;
    pthread_mutex_lock(&s->mu);
    bool go = false; /* while one of its requests is not cancelled */
    for (uint32_t i = 0; i < s->n_whole; i++) {
        if (s->stop) s->whole[i]->cancelled = true; /* answered as cancelled, as the queue's are */
        go |= !s->whole[i]->cancelled;
    }
    pthread_mutex_unlock(&s->mu);
    return go && run_round(s, true);
}

static void *scheduler_main(void *arg)
{
    vkf_scheduler *s = arg;
    while (run_round(s, false)) {
    }
    /* stopping: everything left is cancelled */
    pthread_mutex_lock(&s->mu);
    request *left = s->queue_head;
    s->queue_head = s->queue_tail = NULL, s->queued = 0;
    pthread_mutex_unlock(&s->mu);
    while (left) {
        request *r = left;
        left = r->next;
        r->cancelled = true;
        answer_error(s, r, VKF_ERROR_STATE, "cancelled: the scheduler stopped", false);
        request_free(r);
    }
    while (s->jobs) {
        request *r = s->jobs;
        s->jobs = r->next;
        r->cancelled = true;
        answer_error(s, r, VKF_ERROR_STATE, "cancelled: the scheduler stopped", true);
        request_free(r);
    }
    while (s->groups) {
        group *g = s->groups;
        s->groups = g->next;
        for (uint32_t b = 0; b < g->slots; b++)
            if (g->req[b]) {
                g->req[b]->cancelled = true;
                answer_row(s, g, b, VKF_ERROR_STATE, "cancelled: the scheduler stopped");
            }
        group_free(s, g, false);
    }
    return NULL;
}

/* ------------------------------------------------------------------ public calls */

vkf_status vkf_scheduler_create(vkf_model *model, const vkf_scheduler_options *options, vkf_scheduler **out)
{
    if (!out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_scheduler_create: out_scheduler is NULL");
    *out = NULL;
    if (!model) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_scheduler_create: model is NULL");
    vkf_scheduler_options o;
    vkf_scheduler_options_init(&o);
    if (options) o = *options;
    if (o.max_batch < 1 || o.max_batch > MAX_BATCH || o.max_groups < 1 || o.max_groups > 64)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_scheduler_create: max_batch %u (1..1024) or max_groups %u "
                        "(1..64) out of range", o.max_batch, o.max_groups);
    vkf_scheduler *s = calloc(1, sizeof *s);
    if (!s) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a scheduler");
    s->model = model, s->opt = o, s->next_id = 1;
    const vkf_family_model *fm;
    vkf_model_parts(model, &s->a, &s->d, &fm);
    vkf_model_get_config(model, &s->cfg);
    /* lowrank cross-attention keeps K/V per batch, audio runs whole: no slots */
    s->slot_form = s->a->cross_attn.kind != VKF_ATTN_LOWRANK && !s->cfg.audio_mels;
    /* Benchmarks: VKFORMER_SCHEDULER_WAIT_BATCH=1 admits into a group only while it
     * is empty, so arrivals wait for the running batch to end (static batching). */
    const char *wb = getenv("VKFORMER_SCHEDULER_WAIT_BATCH");
    s->wait_batch = wb && strcmp(wb, "1") == 0;
    /* Tests only: VKFORMER_SCHEDULER_FAULT=K:STEP makes the K-th scheduler this
     * process creates (from 0) fail its STEP-th decode step (from 1) with
     * VKF_ERROR_DEVICE_LOST, as a lost device would (the runtime's fault injection). */
    unsigned index = atomic_fetch_add(&created, 1);
    const char *fault = getenv("VKFORMER_SCHEDULER_FAULT");
    unsigned k;
    unsigned long long step;
    if (fault && sscanf(fault, "%u:%llu", &k, &step) == 2 && k == index) s->fault_step = step;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, scheduler_main, s) != 0) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "vkf_scheduler_create: no thread could be started");
    }
    s->thread_started = true;
    *out = s;
    return VKF_OK;
}

void vkf_scheduler_destroy(vkf_scheduler *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->thread_started) pthread_join(s->thread, NULL);
    while (s->n_cache) vkf_gen_plan_free(s->cache[--s->n_cache]);
    for (int i = 0; i < MAX_CACHED_ENCODERS; i++) vkf_fwd_plan_free(s->enc[i].p);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* Queues r (owned from here on: freed on failure). */
static vkf_status enqueue(vkf_scheduler *s, request *r, uint64_t *out_id)
{
    pthread_mutex_lock(&s->mu);
    vkf_status st = VKF_OK;
    if (s->stop) st = vkf_fail(VKF_ERROR_STATE, "the scheduler is stopping");
    else if (s->queued >= s->opt.max_queue)
        st = vkf_fail(VKF_ERROR_STATE, "queue full: %u requests are waiting (max_queue)", s->queued);
    if (st == VKF_OK) {
        r->id = s->next_id++;
        r->t_submit = vkf_now_ms();
        r->round_submit = s->rounds;
        if (s->queue_tail) s->queue_tail->next = r;
        else s->queue_head = r;
        s->queue_tail = r, s->queued++;
        if (out_id) *out_id = r->id;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (st != VKF_OK) request_free(r);
    return st;
}

vkf_status vkf_scheduler_submit(vkf_scheduler *s, const int32_t *ids, uint32_t count,
                                const vkf_generate_options *options, vkf_scheduler_done_fn done, void *user,
                                uint64_t *out_id)
{
    static const char fn[] = "vkf_scheduler_submit";
    if (out_id) *out_id = 0;
    if (!s || !ids || !done) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: scheduler, ids or done is NULL", fn);
    if (s->cfg.audio_mels) return vkf_fail(VKF_ERROR_STATE, "%s: the model reads audio, not source ids", fn);
    const vkf_sequences src = {1, &ids, &count};
    uint32_t S;
    VKF_TRY(vkf_check_sequences(s->a, &src, s->a->spec.src_vocab, "source", &S));
    vkf_generate_options o;
    if (options) o = *options;
    else VKF_TRY(vkf_model_generate_defaults(s->model, &o));
    VKF_TRY(vkf_decode_check_options(s->a, &o, 1));
    request *r = calloc(1, sizeof *r);
    if (!r) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    r->done = done, r->user = user;
    /* groups run greedy steps, sampling and beam search; min_new and renormalize (plan-wide
     * settings of the step) run whole, as does a beam search wider than max_batch */
    r->whole = o.min_new > 0 || o.renormalize || !s->slot_form || o.beams > s->opt.max_batch;
    r->n_src = count;
    r->src = malloc((size_t)count * sizeof *r->src);
    vkf_status st = r->src ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (st == VKF_OK) memcpy(r->src, ids, (size_t)count * sizeof *ids);
    if (st == VKF_OK) st = copy_options(r, &o, s->a->spec.max_len);
    bool slot = false;
    if (st == VKF_OK && !r->whole) st = prepare_slot(s, r, &slot);
    if (st == VKF_OK && !slot) r->whole = true;
    if (st != VKF_OK) {
        request_free(r);
        return st;
    }
    return enqueue(s, r, out_id);
}

vkf_status vkf_scheduler_submit_audio(vkf_scheduler *s, const float *samples, uint64_t count,
                                      const vkf_transcribe_options *options, vkf_scheduler_done_fn done, void *user,
                                      uint64_t *out_id)
{
    static const char fn[] = "vkf_scheduler_submit_audio";
    if (out_id) *out_id = 0;
    if (!s || (!samples && count) || !done)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: scheduler, samples or done is NULL", fn);
    if (!s->cfg.audio_mels) return vkf_fail(VKF_ERROR_STATE, "%s: the model does not read audio", fn);
    for (uint64_t i = 0; i < count; i++)
        if (!isfinite(samples[i]))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sample %llu is not finite", fn, (unsigned long long)i);
    request *r = calloc(1, sizeof *r);
    if (!r) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    r->done = done, r->user = user, r->audio = true, r->whole = true;
    vkf_transcribe_options_init(&r->to);
    if (options) r->to = *options;
    if (r->to.language) snprintf(r->language, sizeof r->language, "%s", r->to.language);
    if (r->to.task) snprintf(r->task, sizeof r->task, "%s", r->to.task);
    if ((r->to.language && strlen(r->to.language) >= sizeof r->language) ||
        (r->to.task && strlen(r->to.task) >= sizeof r->task)) {
        request_free(r);
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: language or task is too long", fn);
    }
    r->n_samples = count;
    r->samples = malloc((count ? count : 1) * sizeof *r->samples);
    if (!r->samples) {
        request_free(r);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %llu samples", (unsigned long long)count);
    }
    if (count) memcpy(r->samples, samples, count * sizeof *samples);
    return enqueue(s, r, out_id);
}

void vkf_scheduler_cancel(vkf_scheduler *s, uint64_t id)
{
    if (!s || !id) return;
    pthread_mutex_lock(&s->mu);
    bool found = false;
    for (request *r = s->queue_head; r && !found; r = r->next)
        if (r->id == id) r->cancelled = found = true;
    for (group *g = s->groups; g && !found; g = g->next)
        for (uint32_t b = 0; b < g->slots && !found; b++)
            if (g->req[b] && g->req[b]->id == id) g->req[b]->cancelled = found = true;
    for (uint32_t i = 0; i < s->n_whole && !found; i++)
        if (s->whole[i]->id == id) s->whole[i]->cancelled = found = true;
    for (request *r = s->jobs; r && !found; r = r->next)
        if (r->id == id) r->cancelled = found = true;
    for (uint32_t i = 0; i < s->n_starting && !found; i++)
        if (s->starting[i]->id == id) s->starting[i]->cancelled = found = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

vkf_status vkf_scheduler_get_stats(vkf_scheduler *s, vkf_scheduler_stats *out)
{
    if (!s || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_scheduler_get_stats: scheduler or out is NULL");
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    out->queued = s->queued, out->active = s->active, out->groups = s->n_groups;
    pthread_mutex_unlock(&s->mu);
    return VKF_OK;
}

/* The serving scheduler (issue 37): requests that arrive one at a time, batched
 * across requests on one model by a thread of its own. The server's HTTP front
 * end (tools/cli/serve*.c) sits on top; nothing here knows of HTTP.
 *
 *   queue     requests waiting for a slot, in arrival order;
 *   group     requests admitted together at a step boundary: their sources run
 *             through the encoder in one batched pass (the decode layer's
 *             generation plan: cross-attention K/V and KV caches, one row per
 *             request), then one recorded decode step per round;
 *   round     one decode step of every running group, then admission;
 *   whole     beam search, sampling and transcriptions run whole through the
 *             model's own calls, one per round.
 *
 * The recorded decode step reads one position for all its rows (the plan's
 * `state`): rows of one group advance in lockstep, so a request admitted while
 * a group runs starts a group of its own rather than joining a running one.
 * A row that ends is answered at once and its slot counts as free; once half
 * of a group's rows have ended, the live ones move into a plan of their size
 * (compaction: KV caches, cross K/V, inputs copied byte for byte through the
 * host), so ended rows stop costing a row of every step. Plans are kept for
 * later groups of the same shape. Beside running groups, arrivals gather for
 * a few rounds' time (admit_now) so that a group is not one row per step. */
#include "serve/scheduler.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CACHED_PLANS 16
#define MAX_BATCH 1024 /* vkf_scheduler_options.max_batch's bound: rows of a group, requests of an admission */

typedef struct request {
    uint64_t id;
    struct request *next;               /* in the queue */
    bool audio, whole;                  /* a transcription; a whole run (beams, sampling, audio) */
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
    float *samples;                     /* (n_samples) owned: audio */
    uint64_t n_samples;
    vkf_transcribe_options to;
    char language[64], task[16];
    vkf_scheduler_done_fn done;
    void *user;
    double t_submit, t_admit;
} request;

typedef struct group {
    vkf_gen_plan *p;                    /* owned until the group ends, then cached */
    uint32_t rows, B;                   /* requests; plan rows (rows padded with copies of row 0) */
    request **req;                      /* (rows) owned requests */
    uint32_t *len;                      /* (rows) ids so far */
    int32_t *out;                       /* (rows, stride) ids so far */
    uint32_t stride;
    const int32_t **src_ids;            /* (B) borrowed from the requests */
    uint32_t *src_len;                  /* (B) */
    const int32_t **pre_ids;            /* (B) */
    uint32_t *pre_len;                  /* (B) */
    vkf_sequences prefix;
    vkf_generate_options o;             /* the rows' shared options, target_prefix per row */
    vkf_decode_call c;
    uint32_t t, alive;
    bool compactable;                   /* plain dense attention: rows move between plans as bytes */
    struct group *next;
} group;

struct vkf_scheduler {
    vkf_model *model;                   /* borrowed */
    vkf_arch *a;                        /* borrowed from the model */
    vkf_decoder *d;
    vkf_model_config cfg;
    vkf_scheduler_options opt;
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
    request *whole;                     /* the whole run in progress, or NULL */
    request **starting;                 /* (n_starting) admitted, their group not yet running */
    uint32_t n_starting;
    vkf_gen_plan *cache[MAX_CACHED_PLANS]; /* idle plans, oldest first */
    uint32_t n_cache;
    vkf_scheduler_stats stats;
    double round_ms;                    /* a round's wall time, averaged (EWMA) */
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

static bool same_sequences(const vkf_sequences *x, const vkf_sequences *y)
{
    uint32_t nx = x ? x->count : 0, ny = y ? y->count : 0;
    if (nx != ny) return false;
    for (uint32_t i = 0; i < nx; i++)
        if (x->lengths[i] != y->lengths[i] || memcmp(x->ids[i], y->ids[i], (size_t)x->lengths[i] * sizeof(int32_t)))
            return false;
    return true;
}

/* Whether two requests may share a group: every option but max_new, the
 * target prefix and the streaming callback equal. */
static bool compatible(const request *x, const request *y)
{
    const vkf_generate_options *a = &x->o, *b = &y->o;
    if (x->whole || y->whole) return false;
    return a->min_new == b->min_new && a->beams == b->beams && a->forced_eos == b->forced_eos &&
           a->renormalize == b->renormalize && a->forced_bos == b->forced_bos &&
           (!a->forced_bos || a->forced_bos_id == b->forced_bos_id) && a->repetition_penalty == b->repetition_penalty &&
           a->no_repeat_ngram == b->no_repeat_ngram && a->max_new_factor == b->max_new_factor &&
           a->n_suppress == b->n_suppress &&
           (!a->n_suppress || !memcmp(a->suppress_ids, b->suppress_ids, a->n_suppress * sizeof(int32_t))) &&
           a->n_end_ids == b->n_end_ids &&
           (!a->n_end_ids || !memcmp(a->end_ids, b->end_ids, a->n_end_ids * sizeof(int32_t))) &&
           same_sequences(a->bad_sequences, b->bad_sequences);
}

/* Hands a request its answer (outside the lock) and frees it unless a group holds it. */
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

static bool same_proc(const vkf_proc *x, const vkf_proc *y)
{
    return memcmp(x, y, sizeof *x) == 0;
}

/* A cached plan of this shape, or a new one (cached plans dropped to make room
 * where the device runs out of memory). */
static vkf_status take_plan(vkf_scheduler *s, uint32_t B, uint32_t S, uint32_t steps, const vkf_proc *proc,
                            vkf_gen_plan **out)
{
    for (uint32_t i = 0; i < s->n_cache; i++) {
        vkf_gen_plan *p = s->cache[i];
        if (p->batch == B && p->src_len == S && p->steps == steps && same_proc(&p->proc, proc)) {
            memmove(s->cache + i, s->cache + i + 1, (s->n_cache - i - 1) * sizeof *s->cache);
            s->n_cache--;
            *out = p;
            return VKF_OK;
        }
    }
    vkf_status st = vkf_gen_plan_build(s->a, B, 0, S, steps, NULL, NULL, proc, out);
    if (st == VKF_ERROR_OUT_OF_DEVICE_MEMORY && s->n_cache) {
        while (s->n_cache) vkf_gen_plan_free(s->cache[--s->n_cache]);
        st = vkf_gen_plan_build(s->a, B, 0, S, steps, NULL, NULL, proc, out);
    }
    return st;
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
    for (uint32_t b = 0; g->req && b < g->rows; b++) request_free(g->req[b]);
    vkf_decode_call_free(&g->c);
    free(g->req), free(g->len), free(g->out), free(g->src_ids), free(g->src_len), free(g->pre_ids), free(g->pre_len);
    free(g);
}

static uint32_t hist_bin(uint32_t rows)
{
    uint32_t bin = 0;
    for (uint32_t n = 1; n < rows && bin < 7; n *= 2) bin++;
    return bin;
}

/* The group of these requests (already out of the queue): plan, encoder pass,
 * first step's inputs. On failure every request is answered with the error. */
static group *group_start(vkf_scheduler *s, request **reqs, uint32_t n)
{
    vkf_arch *a = s->a;
    group *g = calloc(1, sizeof *g);
    /* plan rows: one per request (on CPU drivers a step's time grows with its rows, so
     * padding to fewer plan shapes would cost more than the plans it saves) */
    uint32_t B = n;
    vkf_status st = g ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (st == VKF_OK) {
        g->rows = n, g->B = B;
        g->req = calloc(n, sizeof *g->req);
        g->len = calloc(n, sizeof *g->len);
        g->src_ids = calloc(B, sizeof *g->src_ids);
        g->src_len = calloc(B, sizeof *g->src_len);
        g->pre_ids = calloc(B, sizeof *g->pre_ids);
        g->pre_len = calloc(B, sizeof *g->pre_len);
        if (!g->req || !g->len || !g->src_ids || !g->src_len || !g->pre_ids || !g->pre_len)
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    if (st == VKF_OK) {
        uint32_t max_new = 0;
        for (uint32_t b = 0; b < B; b++) {
            request *r = reqs[b < n ? b : 0];
            if (b < n) g->req[b] = r;
            g->src_ids[b] = r->src, g->src_len[b] = r->n_src;
            g->pre_ids[b] = r->prefix, g->pre_len[b] = r->n_prefix;
            if (r->o.max_new > max_new) max_new = r->o.max_new;
        }
        g->o = reqs[0]->o;
        g->o.on_tokens = NULL, g->o.on_tokens_user = NULL;
        g->o.max_new = max_new;
        g->prefix = (vkf_sequences){B, g->pre_ids, g->pre_len};
        g->o.target_prefix = &g->prefix;
        g->stride = max_new;
        g->out = malloc((size_t)n * max_new * sizeof *g->out);
        if (!g->out) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    vkf_sequences src = {B, g ? g->src_ids : NULL, g ? g->src_len : NULL};
    uint32_t S = 0;
    if (st == VKF_OK) st = vkf_check_sequences(a, &src, a->spec.src_vocab, "source", &S);
    /* the padded length rounded up to a multiple of 8 (so that cached plans fit more
     * groups) where padding is masked out exactly: dense attention everywhere */
    bool dense = a->encoder_attn.kind == VKF_ATTN_FUSED && a->encoder_attn.pattern == VKF_ATTENTION_DENSE &&
                 a->cross_attn.kind == VKF_ATTN_FUSED && a->cross_attn.pattern == VKF_ATTENTION_DENSE &&
                 !a->spec.rel_bias && !a->spec.audio_mels;
    if (g) g->compactable = dense;
    if (st == VKF_OK && dense && S % 8) {
        uint32_t padded = (S + 7) / 8 * 8;
        if (padded <= a->spec.max_len) S = padded;
    }
    if (st == VKF_OK) st = vkf_decode_call_make(a, s->d, &g->o, &src, 0, g->o.max_new, &g->c);
    if (st == VKF_OK) {
        /* each row its own limit: its max_new (and max_new_factor), the plan as long as the longest */
        vkf_decode_call *c = &g->c;
        c->steps = 0;
        for (uint32_t b = 0; b < B; b++) {
            uint32_t own = reqs[b < n ? b : 0]->o.max_new;
            if (own < c->limit[b]) c->limit[b] = own;
            if (c->prefix_len[b] + c->limit[b] > c->steps) c->steps = c->prefix_len[b] + c->limit[b];
        }
        st = take_plan(s, B, S, c->steps, &c->proc, &g->p);
    }
    double t0 = vkf_now_ms();
    vkf_gen_plan *p = st == VKF_OK ? g->p : NULL;
    if (st == VKF_OK) st = vkf_upload_ids(a, &src, S, p->enc->src_ids, p->enc->src_mask, p->enc->src_lengths, p->enc->src_pos);
    if (st == VKF_OK) st = vkf_upload_lowrank(a, p->enc, &src);
    if (st == VKF_OK) st = vkf_gen_plan_upload_call(p, &g->c, 1);
    int32_t *h = st == VKF_OK ? malloc((size_t)B * sizeof *h) : NULL;
    if (st == VKF_OK && !h) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) h[b] = (int32_t)g->src_len[b];
    if (st == VKF_OK) st = vkf_tensor_upload(p->src_lengths, h, (uint64_t)B * sizeof *h);
    if (st == VKF_OK) st = vkf_cmd_submit(p->encode);
    int32_t zero = 0;
    if (st == VKF_OK) st = vkf_tensor_upload(p->state, &zero, sizeof zero);
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) h[b] = a->spec.decoder_start_id;
    if (st == VKF_OK) st = vkf_tensor_upload(p->step_ids, h, (uint64_t)B * sizeof *h);
    free(h);
    pthread_mutex_lock(&s->mu);
    s->stats.busy_ms += vkf_now_ms() - t0;
    if (st == VKF_OK) {
        s->stats.encoder_passes++;
        s->stats.batch_hist[hist_bin(n)]++;
        s->stats.batch_rows += n;
    }
    pthread_mutex_unlock(&s->mu);
    if (st != VKF_OK) {
        char message[512];
        snprintf(message, sizeof message, "%s", vkf_last_error());
        pthread_mutex_lock(&s->mu);
        s->starting = NULL, s->n_starting = 0; /* no cancel reaches them from here on */
        pthread_mutex_unlock(&s->mu);
        for (uint32_t b = 0; b < n; b++) {
            answer_error(s, reqs[b], st, message, true);
            if (!g || !g->req || !g->req[b]) request_free(reqs[b]);
        }
        group_free(s, g, false);
        return NULL;
    }
    g->alive = n;
    return g;
}

/* Answers row b of a group with its ids so far. */
static void answer_row(vkf_scheduler *s, group *g, uint32_t b, vkf_status st, const char *message)
{
    request *r = g->req[b];
    float score = NAN;
    vkf_scheduler_result res = {.status = st, .message = message, .ids = g->out + (size_t)b * g->stride,
                                .lengths = &g->len[b], .scores = &score, .n_best = 1, .stride = g->stride,
                                .group_rows = g->rows};
    g->alive--;
    answer(s, r, &res, true);
}

/* Moves rows `idx` (m of them, in order) of a tensor of `rows` equal rows into
 * `dst` (m rows), through the host: the bytes as they are. */
static vkf_status move_rows(vkf_tensor *src, uint32_t rows, const uint32_t *idx, uint32_t m, vkf_tensor *dst)
{
    uint64_t bytes = vkf_tensor_bytes(src), row = bytes / rows;
    if (vkf_tensor_bytes(dst) != row * m) return vkf_fail(VKF_ERROR_STATE, "compaction: tensor sizes disagree");
    char *h = malloc(bytes), *o = malloc(row * m);
    vkf_status st = h && o ? vkf_tensor_download(src, h, bytes) : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; st == VKF_OK && i < m; i++) memcpy(o + row * i, h + row * idx[i], row);
    if (st == VKF_OK) st = vkf_tensor_upload(dst, o, row * m);
    free(h), free(o);
    return st;
}

/* A group whose rows have mostly ended goes on in a plan of its live rows
 * only: their KV caches, cross-attention keys/values, inputs and position are
 * moved (byte for byte) into a smaller plan, so that ended rows stop costing a
 * row of every step. The ended requests (answered) are freed. */
static vkf_status group_compact(vkf_scheduler *s, group *g)
{
    uint32_t m = 0, idx[MAX_BATCH];
    for (uint32_t b = 0; b < g->rows; b++)
        if (!g->req[b]->answered) idx[m++] = b;
    vkf_gen_plan *p = g->p, *np = NULL;
    vkf_decode_call *c = &g->c;
    /* the call's per-row lists for the live rows (the plan's row data is uploaded from them) */
    vkf_decode_call nc = *c;
    nc.prefix_len = malloc(m * sizeof *nc.prefix_len);
    nc.prefix = malloc(m * sizeof *nc.prefix);
    nc.limit = malloc(m * sizeof *nc.limit);
    vkf_status st = nc.prefix_len && nc.prefix && nc.limit ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; st == VKF_OK && i < m; i++) {
        uint32_t b = idx[i];
        nc.prefix_len[i] = c->prefix_len[b], nc.prefix[i] = c->prefix[b], nc.limit[i] = c->limit[b];
    }
    if (st == VKF_OK) st = take_plan(s, m, p->src_len, p->steps, &c->proc, &np);
    for (uint32_t l = 0; st == VKF_OK && l < p->layers; l++) {
        st = move_rows(p->cache_k[l], p->batch, idx, m, np->cache_k[l]);
        if (st == VKF_OK) st = move_rows(p->cache_v[l], p->batch, idx, m, np->cache_v[l]);
        if (st == VKF_OK) st = move_rows(p->cross_kv[l], p->batch, idx, m, np->cross_kv[l]);
    }
    if (st == VKF_OK) st = move_rows(p->src_lengths, p->batch, idx, m, np->src_lengths);
    if (st == VKF_OK) st = move_rows(p->step_ids, p->batch, idx, m, np->step_ids);
    if (st == VKF_OK) st = move_rows(p->tokens, p->batch, idx, m, np->tokens);
    if (st == VKF_OK && p->inputs) st = move_rows(p->inputs, p->batch, idx, m, np->inputs);
    int32_t t = (int32_t)g->t;
    if (st == VKF_OK) st = vkf_tensor_upload(np->state, &t, sizeof t);
    if (st == VKF_OK) st = vkf_gen_plan_upload_call(np, &nc, 1);
    if (st != VKF_OK) {
        vkf_gen_plan_free(np);
        free(nc.prefix_len), free(nc.prefix), free(nc.limit);
        return st;
    }
    free(c->prefix_len), free(c->prefix), free(c->limit);
    c->prefix_len = nc.prefix_len, c->prefix = nc.prefix, c->limit = nc.limit;
    cache_plan(s, p);
    g->p = np;
    for (uint32_t b = 0; b < g->rows; b++)
        if (g->req[b]->answered) request_free(g->req[b]);
    for (uint32_t i = 0; i < m; i++) {
        uint32_t b = idx[i];
        g->req[i] = g->req[b], g->len[i] = g->len[b];
        memmove(g->out + (size_t)i * g->stride, g->out + (size_t)b * g->stride, (size_t)g->len[b] * sizeof *g->out);
        g->src_ids[i] = g->src_ids[b], g->src_len[i] = g->src_len[b];
        g->pre_ids[i] = g->pre_ids[b], g->pre_len[i] = g->pre_len[b];
    }
    g->rows = g->B = m;
    pthread_mutex_lock(&s->mu);
    s->stats.compactions++;
    pthread_mutex_unlock(&s->mu);
    return VKF_OK;
}

/* One decode step of a group; answers the rows that end. Returns false when
 * the group has ended (every row answered). */
static bool group_step(vkf_scheduler *s, group *g)
{
    vkf_gen_plan *p = g->p;
    const vkf_decode_call *c = &g->c;
    /* cancelled rows first: they are answered at this boundary */
    bool cancelled[MAX_BATCH];
    pthread_mutex_lock(&s->mu);
    for (uint32_t b = 0; b < g->rows; b++) cancelled[b] = g->req[b]->cancelled;
    pthread_mutex_unlock(&s->mu);
    for (uint32_t b = 0; b < g->rows; b++)
        if (!g->req[b]->answered && cancelled[b]) answer_row(s, g, b, VKF_ERROR_STATE, "cancelled");
    if (g->alive == 0) return false;
    double t0 = vkf_now_ms();
    int32_t ids[MAX_BATCH];
    if (s->fault_step && s->stats.steps + 1 == s->fault_step) /* tests: a lost device */
        vkf_test_inject_fault(s->a->ctx, "vkQueueSubmit", VK_ERROR_DEVICE_LOST);
    vkf_status st = vkf_cmd_submit(p->step);
    if (st == VKF_OK) st = vkf_tensor_download(p->step_ids, ids, (uint64_t)g->B * sizeof *ids);
    pthread_mutex_lock(&s->mu);
    s->stats.busy_ms += vkf_now_ms() - t0;
    s->stats.steps++;
    pthread_mutex_unlock(&s->mu);
    if (st != VKF_OK) {
        char message[512];
        snprintf(message, sizeof message, "%s", vkf_last_error());
        for (uint32_t b = 0; b < g->rows; b++)
            if (!g->req[b]->answered) answer_row(s, g, b, st, message);
        return false;
    }
    uint32_t t = g->t++;
    for (uint32_t b = 0; b < g->rows; b++) {
        request *r = g->req[b];
        if (r->answered || t < c->prefix_len[b]) continue;
        bool end = vkf_is_end(c, ids[b]) || (g->o.forced_eos && !c->proc.on && g->len[b] + 1 == c->limit[b]);
        if (!end) {
            g->out[(size_t)b * g->stride + g->len[b]++] = ids[b];
            if (r->o.on_tokens && !r->o.on_tokens(r->o.on_tokens_user, 0, &ids[b], 1)) end = true;
        }
        if (end || g->len[b] == c->limit[b] || g->t == c->steps) answer_row(s, g, b, VKF_OK, NULL);
    }
    /* most rows ended and steps left: go on with the live ones only */
    if (g->alive && g->compactable && g->alive * 2 <= g->rows && g->rows >= 2 && g->t + 4 <= c->steps) {
        st = group_compact(s, g);
        if (st != VKF_OK) { /* the rows go on where they are: the failure cost only the try */
            pthread_mutex_lock(&s->mu);
            s->stats.compaction_failures++;
            pthread_mutex_unlock(&s->mu);
            g->compactable = false;
        }
    }
    return g->alive > 0;
}

/* A whole run: beam search, sampling, or a transcription. */
static void run_whole(vkf_scheduler *s, request *r)
{
    double t0 = vkf_now_ms();
    vkf_scheduler_result res = {.group_rows = 1};
    char message[512] = "";
    if (r->audio) {
        vkf_transcribe_options to = r->to;
        to.on_progress = NULL, to.on_progress_user = NULL;
        to.language = r->language[0] ? r->language : NULL;
        to.task = r->task[0] ? r->task : NULL;
        res.status = vkf_model_transcribe(s->model, r->samples, r->n_samples, &to, &res.transcript);
        if (res.status != VKF_OK) snprintf(message, sizeof message, "%s", vkf_last_error());
    } else {
        uint32_t nb = r->o.sample ? 1 : r->o.n_best, stride = r->o.max_new;
        int32_t *ids = malloc((size_t)nb * stride * sizeof *ids);
        uint32_t *lengths = malloc((size_t)nb * sizeof *lengths);
        float *scores = malloc((size_t)nb * sizeof *scores);
        const int32_t *ptr = r->src;
        vkf_sequences src = {1, &ptr, &r->n_src};
        if (ids && lengths && scores) {
            res.status = vkf_model_generate_with(s->model, &src, &r->o, ids, lengths, scores);
            if (res.status != VKF_OK) snprintf(message, sizeof message, "%s", vkf_last_error());
        } else {
            res.status = VKF_ERROR_OUT_OF_HOST_MEMORY;
            snprintf(message, sizeof message, "out of host memory for a request's %u hypotheses", nb);
        }
        res.ids = ids, res.lengths = lengths, res.scores = scores, res.n_best = nb, res.stride = stride;
        pthread_mutex_lock(&s->mu);
        s->stats.busy_ms += vkf_now_ms() - t0;
        s->stats.batch_hist[0]++;
    s->stats.batch_rows++;
        pthread_mutex_unlock(&s->mu);
        res.message = message;
        if (is_cancelled(s, r) && res.status == VKF_OK) res.status = VKF_ERROR_STATE, res.message = "cancelled";
        answer(s, r, &res, true);
        free(ids), free(lengths), free(scores);
        goto out;
    }
    pthread_mutex_lock(&s->mu);
    s->stats.busy_ms += vkf_now_ms() - t0;
    s->stats.batch_hist[0]++;
    s->stats.batch_rows++;
    pthread_mutex_unlock(&s->mu);
    if (is_cancelled(s, r) && res.status == VKF_OK) {
        vkf_transcript_free(res.transcript);
        res.transcript = NULL, res.status = VKF_ERROR_STATE;
        snprintf(message, sizeof message, "cancelled");
    }
    res.message = message;
    answer(s, r, &res, true);
out:
    request_free(r);
}

/* ------------------------------------------------------------------ the thread */

/* Whether the waiting requests start a group at this boundary (under mu). With
 * no group running: at once. Beside running groups, a group of one or two rows
 * costs a whole decode step per round, as a big one does: arrivals gather for
 * up to four rounds' time (1..50 ms), unless enough of them wait already. */
static bool admit_now(vkf_scheduler *s, const request *head)
{
    if (!s->n_groups) return true;
    uint32_t enough = s->opt.max_batch / 8 > 2 ? s->opt.max_batch / 8 : 2;
    if (s->queued >= enough) return true;
    double hold = 4 * s->round_ms;
    if (hold < 1) hold = 1;
    if (hold > 50) hold = 50;
    return vkf_now_ms() - head->t_submit >= hold;
}

static void *scheduler_main(void *arg)
{
    vkf_scheduler *s = arg;
    request *batch[MAX_BATCH];
    for (;;) {
        request *whole = NULL, *dropped = NULL;
        uint32_t n = 0;
        pthread_mutex_lock(&s->mu);
        while (!s->stop && !s->queue_head && !s->groups) pthread_cond_wait(&s->cv, &s->mu);
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            break;
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
        /* admission at this step boundary: a whole run, or the head's compatible followers */
        request *head = s->queue_head;
        if (head && s->active < s->opt.max_batch) {
            if (head->whole) {
                s->queue_head = head->next, whole = head, s->queued--, s->active++;
            } else if (s->n_groups < s->opt.max_groups && admit_now(s, head)) {
                uint32_t room = s->opt.max_batch - s->active;
                for (request **pp = &s->queue_head; *pp && n < room;) {
                    request *r = *pp;
                    if (!compatible(head, r)) {
                        pp = &r->next;
                        continue;
                    }
                    *pp = r->next, batch[n++] = r, s->queued--;
                }
                s->active += n, s->n_groups += n > 0;
                s->starting = batch, s->n_starting = n;
                s->stats.admitted += n;
            }
            s->queue_tail = NULL;
            for (request *r = s->queue_head; r; r = r->next) s->queue_tail = r;
        }
        if (whole) s->stats.admitted++;
        pthread_mutex_unlock(&s->mu);
        double now = vkf_now_ms();
        while (dropped) {
            request *r = dropped;
            dropped = r->next;
            answer_error(s, r, VKF_ERROR_STATE, "cancelled", false);
            request_free(r);
        }
        if (whole) {
            whole->t_admit = now;
            pthread_mutex_lock(&s->mu);
            s->whole = whole;
            pthread_mutex_unlock(&s->mu);
            run_whole(s, whole);
            pthread_mutex_lock(&s->mu);
            s->whole = NULL;
            pthread_mutex_unlock(&s->mu);
        }
        if (n) {
            for (uint32_t i = 0; i < n; i++) batch[i]->t_admit = now;
            group *g = group_start(s, batch, n);
            pthread_mutex_lock(&s->mu);
            if (g) g->next = s->groups, s->groups = g;
            else s->n_groups--;
            s->starting = NULL, s->n_starting = 0;
            pthread_mutex_unlock(&s->mu);
        }
        /* one step of every running group */
        double round_start = vkf_now_ms();
        bool stepped = s->groups != NULL;
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
            double ms = vkf_now_ms() - round_start;
            pthread_mutex_lock(&s->mu);
            s->round_ms = s->round_ms > 0 ? 0.8 * s->round_ms + 0.2 * ms : ms;
            pthread_mutex_unlock(&s->mu);
        }
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
    while (s->groups) {
        group *g = s->groups;
        s->groups = g->next;
        for (uint32_t b = 0; b < g->rows; b++)
            if (!g->req[b]->answered) {
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
    /* the groups run the greedy step, which leaves min_new and renormalize to beam search */
    r->whole = o.sample || o.beams > 1 || o.min_new > 0 || o.renormalize;
    r->n_src = count;
    r->src = malloc((size_t)count * sizeof *r->src);
    vkf_status st = r->src ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (st == VKF_OK) memcpy(r->src, ids, (size_t)count * sizeof *ids);
    if (st == VKF_OK) st = copy_options(r, &o, s->a->spec.max_len);
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
        for (uint32_t b = 0; b < g->rows && !found; b++)
            if (g->req[b]->id == id) g->req[b]->cancelled = found = true;
    if (!found && s->whole && s->whole->id == id) s->whole->cancelled = found = true;
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

/* Device pools (include/vkformer.h, "device pools"): one replica of a model per
 * Vulkan device, one thread per device, and a queue of batches between them.
 *
 * The owning thread submits batches (copied into the queue) and collects them by
 * ticket. Each slot's thread owns its context and replica: it sets them up, then
 * takes the queue's first batch whenever it is free, runs it with the model's own
 * generation call and hands the results back under the pool's lock. A device-level
 * failure (device lost, out of memory, another failing Vulkan call) takes the slot
 * out of the pool and puts its batch back at the head of the queue, so the other
 * slots run it next; a failure that belongs to the batch (bad options, a batch past
 * a limit) ends that batch only. The pool is built on the public model calls and,
 * for tests, the runtime's fault injection (vkf_pool_test_fault). */
#include "pool/pool.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_DEFAULT_BATCH 64
#define POOL_MAX_BEAMS 16
/* Queued batches it weighs (a longer queue only makes a slot take work sooner). */
#define POOL_RULE_QUEUE 1024
/* The warm-up batch of every slot at create (see slot_setup). */
#define WARMUP_SOURCES 4
#define WARMUP_TOKENS 8
#define WARMUP_STEPS 4

typedef enum batch_state { BATCH_QUEUED, BATCH_RUNNING, BATCH_DONE } batch_state;

/* What a batch asks for: generation from source ids (vkf_pool_submit), or the
 * transcription of one recording (vkf_pool_submit_transcribe). */
typedef enum batch_kind { BATCH_GENERATE, BATCH_TRANSCRIBE } batch_kind;

typedef struct pool_batch pool_batch;
struct pool_batch {
    uint64_t ticket;
    batch_kind kind;
    pool_batch *next_queued;            /* borrowed: the next batch in the queue */
    pool_batch *next_live;              /* the pool's list of uncollected batches (owned by the pool) */
    uint32_t count, max_new, n_best;
    bool greedy;                        /* plain greedy options: vkf_model_generate's path */
    vkf_generate_options options;
    int32_t *ids;                       /* owned: every source back to back */
    uint32_t *lengths;                  /* owned (count) */
    const int32_t **ptrs;               /* owned (count), into ids */
    int32_t *out_ids;                   /* owned (count, n_best, max_new) */
    uint32_t *out_lengths;              /* owned (count, n_best) */
    float *out_scores;                  /* owned (count, n_best) */
    /* a transcription: count is its windows (the dispatch rule's weight) */
    float *samples;                     /* owned (n_samples) */
    uint64_t n_samples;
    vkf_transcribe_options transcribe;  /* language and task point into the two below */
    char language[64], task[16];
    vkf_transcript *transcript;         /* owned until collected */
    batch_state state;
    vkf_status status;                  /* once done */
    char message[1024];                 /* the failing call's message */
    double submitted, started;          /* monotonic seconds */
    vkf_pool_batch info;
};

typedef struct pool_fault {
    bool armed;
    uint32_t slot, batch;
    const char *call;                   /* a static name: the context keeps the pointer */
    VkResult result;
} pool_fault;

typedef struct pool_slot {
    vkf_pool *pool;                     /* borrowed */
    uint32_t index;
    char request[256];                  /* the device as asked for (index or name) */
    pthread_t thread;
    bool thread_started;
    vkf_context *ctx;                   /* owned; used by the slot's thread, and by destroy after the join */
    vkf_model *model;                   /* owned, likewise */
    bool setup_done;                    /* guarded by the lock */
    vkf_status setup_status;
    char setup_message[1024];
    uint32_t started;                   /* attempts it began (guarded) */
    /* What the dispatch rule knows (guarded): seconds per source of this device,
     * an average over its batches (0: none finished yet), and the batch it runs. */
    double per_source_s;
    double warmup_s;                    /* seconds per source of the warm-up batch at setup (0: none) */
    uint32_t running_count;             /* sources of the running batch; 0: idle */
    double running_since;
    bool ready;                         /* warmed up: it takes batches, and others count on it */
    vkf_pool_device status;             /* guarded */
} pool_slot;

struct vkf_pool {
    pthread_mutex_t lock;
    pthread_cond_t work;                /* a batch was queued, setup ended, or the pool closes */
    pthread_cond_t done;                /* a batch finished, or a slot ended its setup */
    uint32_t n;
    pool_slot *slots;                   /* owned (n) */
    uint32_t active;                    /* slots still in the pool */
    bool go, closing;                   /* setup succeeded everywhere / destroy began */
    pool_batch *queue_head, *queue_tail;
    pool_batch *live;                   /* owned list of uncollected batches */
    uint64_t next_ticket;
    vkf_status dead_status;             /* when active reaches 0: why */
    char dead_message[1200];
    pool_fault faults[VKF_POOL_MAX_FAULTS];
    vkf_pool_dispatch dispatch;
    /* what every slot's thread sets up from (valid during vkf_pool_create only) */
    const char *path;
    const vkf_pool_options *options;
    vkf_model_config cfg;               /* slot 0's replica */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* src into dst (cap > 0 bytes), cut where it does not fit. */
static void copy_message(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}

/* A failure that is the device's, not the batch's: the slot leaves the pool. */
static bool device_level(vkf_status st)
{
    switch (st) {
    case VKF_ERROR_DEVICE_LOST:
    case VKF_ERROR_OUT_OF_DEVICE_MEMORY:
    case VKF_ERROR_OUT_OF_HOST_MEMORY:
    case VKF_ERROR_VULKAN:
    case VKF_ERROR_NO_DEVICE:
    case VKF_ERROR_NO_VULKAN:
    case VKF_ERROR_STATE:
        return true;
    default:
        return false;
    }
}

/* Options that ask for nothing but greedy decoding (any max_new). */
static bool plain_greedy(const vkf_generate_options *o)
{
    vkf_generate_options p;
    vkf_generate_options_init(&p);
    return o->min_new == p.min_new && o->beams == p.beams && o->length_penalty == p.length_penalty &&
           o->early_stopping == p.early_stopping && o->n_best == p.n_best && o->sample == p.sample &&
           o->forced_eos == p.forced_eos && o->renormalize == p.renormalize && o->forced_bos == p.forced_bos;
}

static void batch_free(pool_batch *b)
{
    if (!b) return;
    free(b->ids), free(b->lengths), free(b->ptrs), free(b->out_ids), free(b->out_lengths), free(b->out_scores);
    free(b->samples);
    vkf_transcript_free(b->transcript);
    free(b);
}

/* ------------------------------------------------------------------ the queue (lock held) */

static void queue_push_back(vkf_pool *p, pool_batch *b)
{
    b->next_queued = NULL;
    if (p->queue_tail) p->queue_tail->next_queued = b;
    else p->queue_head = b;
    p->queue_tail = b;
}

static void queue_push_front(vkf_pool *p, pool_batch *b)
{
    b->next_queued = p->queue_head;
    p->queue_head = b;
    if (!p->queue_tail) p->queue_tail = b;
}

static pool_batch *queue_pop(vkf_pool *p)
{
    pool_batch *b = p->queue_head;
    if (b) {
        p->queue_head = b->next_queued;
        if (!p->queue_head) p->queue_tail = NULL;
        b->next_queued = NULL;
    }
    return b;
}

/* No slot is left: every queued batch fails with the last slot's failure. */
static void fail_queued(vkf_pool *p)
{
    for (pool_batch *b; (b = queue_pop(p));) {
        b->state = BATCH_DONE;
        b->status = p->dead_status;
        copy_message(b->message, sizeof b->message, p->dead_message);
    }
}

/* ------------------------------------------------------------------ a slot's thread */

static void slot_setup(pool_slot *s)
{
    vkf_pool *p = s->pool;
    const vkf_pool_options *o = p->options;
    vkf_context_options co;
    if (o->context) co = *o->context;
    else vkf_context_options_init(&co);
    co.device = s->request;
    vkf_status st = vkf_context_create(&co, &s->ctx);
    if (st == VKF_OK) st = vkf_model_load_with(s->ctx, p->path, o->load, &s->model);
    if (st == VKF_OK) st = vkf_model_set_seed(s->model, o->seed);
    if (st == VKF_OK && (o->self_attention || o->cross_attention))
        st = vkf_model_set_attention(s->model, o->self_attention, o->cross_attention);
    vkf_device_info info;
    memset(&info, 0, sizeof info);
    if (s->ctx) vkf_context_device_info(s->ctx, &info);
    uint32_t errors = 0, warnings = 0;
    if (s->ctx) vkf_context_validation_counts(s->ctx, &errors, &warnings, NULL);
    char quoted[VKF_QUOTE_SIZE];
    char message[1024];
    if (st != VKF_OK) {
        if (s->ctx)
            snprintf(message, sizeof message, "device %u (%s): %s", info.index,
                     vkf_quote(quoted, sizeof quoted, info.name, (size_t)-1), vkf_last_error());
        else
            snprintf(message, sizeof message, "device %s: %s", vkf_quote(quoted, sizeof quoted, s->request, (size_t)-1),
                     vkf_last_error());
    }
    pthread_mutex_lock(&p->lock);
    s->setup_status = st;
    if (st != VKF_OK) copy_message(s->setup_message, sizeof s->setup_message, message);
    s->status.info = info;
    s->status.active = st == VKF_OK;
    s->status.validation_errors = errors, s->status.validation_warnings = warnings;
    s->setup_done = true;
    pthread_cond_broadcast(&p->done);
    pthread_mutex_unlock(&p->lock);
}

/* The pool is being destroyed: a warm-up need not go on. */
static bool pool_closing(vkf_pool *p)
{
    pthread_mutex_lock(&p->lock);
    bool closing = p->closing;
    pthread_mutex_unlock(&p->lock);
    return closing;
}

/* Warm-up, on the slot's thread once the pool runs (the other slots take batches
 * meanwhile): a small batch (WARMUP_SOURCES sources of up to WARMUP_TOKENS ids, up
 * to WARMUP_STEPS steps) generated twice. The first compiles the pipelines; the
 * second, timed, says how fast this device is against the others before its first
 * batch. (A single source mostly times dispatch latency: on this project's
 * machines it put SwiftShader 3x behind lavapipe on the demo model, where whole
 * batches run 11x slower; this batch put it 7x behind.) A model that reads audio
 * transcribes one second of silence twice instead. A failure is a device failure:
 * the slot leaves the pool. Lock not held. */
static vkf_status slot_warm_up(pool_slot *s, double *out_seconds_per_source)
{
    *out_seconds_per_source = 0;
    vkf_model_config c;
    vkf_model_get_config(s->model, &c);
    if (c.audio_mels) { /* a model that reads audio: one second of silence transcribed, greedy (one window) */
        uint32_t n = c.sample_rate ? c.sample_rate : 1;
        float *silence = calloc(n, sizeof *silence);
        if (!silence) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for the warm-up audio");
        vkf_transcribe_options to;
        vkf_transcribe_options_init(&to);
        to.beams = 1;
        vkf_status st = VKF_OK;
        for (int i = 0; i < 2 && st == VKF_OK && !pool_closing(s->pool); i++) {
            vkf_transcript *t = NULL;
            double t0 = now_s();
            st = vkf_model_transcribe(s->model, silence, n, &to, &t);
            vkf_transcript_free(t);
            if (st == VKF_OK) *out_seconds_per_source = now_s() - t0;
        }
        free(silence);
        return st;
    }
    int32_t ids[WARMUP_TOKENS], out[WARMUP_SOURCES * WARMUP_STEPS];
    uint32_t len = c.max_len < WARMUP_TOKENS ? c.max_len : WARMUP_TOKENS, lens[WARMUP_SOURCES],
             out_lens[WARMUP_SOURCES], steps = c.max_len < WARMUP_STEPS ? c.max_len : WARMUP_STEPS;
    const int32_t *ptrs[WARMUP_SOURCES];
    for (uint32_t i = 0; i < len; i++) ids[i] = c.eos_id;
    for (uint32_t i = 0; i < WARMUP_SOURCES; i++) ptrs[i] = ids, lens[i] = len;
    vkf_sequences batch = {WARMUP_SOURCES, ptrs, lens};
    for (int i = 0; i < 2 && !pool_closing(s->pool); i++) {
        double t0 = now_s();
        VKF_TRY(vkf_model_generate(s->model, &batch, steps, out, out_lens));
        *out_seconds_per_source = (now_s() - t0) / WARMUP_SOURCES;
    }
    return VKF_OK;
}

/* The slot leaves the pool after `st` (lock held); `batch`, if any, goes back to
 * the head of the queue. When it was the last, queued batches fail. */
static void slot_leave(vkf_pool *p, pool_slot *s, vkf_status st, const char *message, pool_batch *batch)
{
    s->status.active = false;
    s->status.failure = st;
    copy_message(s->status.failure_message, sizeof s->status.failure_message, message);
    p->active--;
    if (batch) {
        batch->state = BATCH_QUEUED;
        queue_push_front(p, batch);
    }
    if (p->active == 0) {
        char quoted[VKF_QUOTE_SIZE];
        p->dead_status = st;
        snprintf(p->dead_message, sizeof p->dead_message, "no device of the pool is left: the last, device %u (%s), "
                 "failed: %s", s->status.info.index, vkf_quote(quoted, sizeof quoted, s->status.info.name, (size_t)-1),
                 message);
        fail_queued(p);
    }
    pthread_cond_broadcast(&p->work);
    pthread_cond_broadcast(&p->done);
}

/* Runs one batch on the slot's replica (no lock held). */
static vkf_status slot_run(pool_slot *s, pool_batch *b)
{
    if (b->kind == BATCH_TRANSCRIBE) {
        vkf_transcript_free(b->transcript);
        b->transcript = NULL;
        return vkf_model_transcribe(s->model, b->samples, b->n_samples, &b->transcribe, &b->transcript);
    }
    vkf_sequences seq = {b->count, b->ptrs, b->lengths};
    if (b->greedy) {
        vkf_status st = vkf_model_generate(s->model, &seq, b->max_new, b->out_ids, b->out_lengths);
        for (uint32_t i = 0; i < b->count; i++) b->out_scores[i] = NAN;
        return st;
    }
    return vkf_model_generate_with(s->model, &seq, &b->options, b->out_ids, b->out_lengths, b->out_scores);
}

/* The dispatch rule (lock held): slot s, idle, takes the head of the queue only
 * if it would finish that batch no later than the other active slots would
 * finish the whole queue without it (each queued batch to whichever of them would
 * end it first, after the batches they run). A slow device then never holds the
 * last batch while fast ones wait: on a pool of equal devices every idle slot
 * takes work; a device several times slower than the others takes a batch only
 * while the queue is long enough that it ends in time. Slots without a measured
 * speed take work (that measures them); others without one count as fast as s. */
/* Seconds per source of slot s: measured on its batches; before its first, its
 * warm-up scaled by a measured slot's batches against that slot's warm-up (or the
 * bare warm-up while no slot has run a batch); 0: unknown. */
static double slot_rate(const vkf_pool *p, const pool_slot *s)
{
    if (s->per_source_s > 0) return s->per_source_s;
    if (s->warmup_s <= 0) return 0;
    for (uint32_t i = 0; i < p->n; i++) {
        const pool_slot *o = &p->slots[i];
        if (o->per_source_s > 0 && o->warmup_s > 0) return o->per_source_s * s->warmup_s / o->warmup_s;
    }
    return s->warmup_s;
}

static bool slot_takes_head(const vkf_pool *p, const pool_slot *s)
{
    if (p->dispatch == VKF_POOL_DISPATCH_ANY_FREE) { /* once every device is warm, any free one */
        for (uint32_t i = 0; i < p->n; i++)
            if (p->slots[i].status.active && !p->slots[i].ready) return false;
        return true;
    }
    double mine = slot_rate(p, s), now = now_s();
    double rates[VKF_POOL_RULE_SLOTS], free_in[VKF_POOL_RULE_SLOTS];
    uint32_t n = 0, queued = 0, counts[POOL_RULE_QUEUE];
    for (uint32_t i = 0; i < p->n && n < VKF_POOL_RULE_SLOTS; i++) {
        const pool_slot *o = &p->slots[i];
        if (o == s || !o->status.active || !o->ready) continue;
        rates[n] = slot_rate(p, o);
        double rate = rates[n] > 0 ? rates[n] : mine;
        free_in[n++] = o->running_count ? o->running_since + rate * o->running_count - now : 0;
    }
    for (const pool_batch *b = p->queue_head; b && queued < POOL_RULE_QUEUE; b = b->next_queued) counts[queued++] = b->count;
    return vkf_pool_rule_takes(mine, n, rates, free_in, queued, counts);
}

static void *slot_main(void *arg)
{
    pool_slot *s = arg;
    vkf_pool *p = s->pool;
    slot_setup(s);
    pthread_mutex_lock(&p->lock);
    while (!p->go && !p->closing) pthread_cond_wait(&p->work, &p->lock);
    if (s->status.active && !p->closing) {
        pthread_mutex_unlock(&p->lock);
        double warmup = 0;
        vkf_status st = slot_warm_up(s, &warmup);
        char message[1024] = "";
        if (st != VKF_OK) snprintf(message, sizeof message, "warm-up: %s", vkf_last_error());
        uint32_t errors = 0, warnings = 0;
        vkf_context_validation_counts(s->ctx, &errors, &warnings, NULL);
        pthread_mutex_lock(&p->lock);
        s->status.validation_errors = errors, s->status.validation_warnings = warnings;
        if (st == VKF_OK) {
            s->warmup_s = warmup;
            s->ready = true;
            s->status.ready = true;
            pthread_cond_broadcast(&p->work); /* slots that counted on it reconsider */
        } else {
            slot_leave(p, s, st, message, NULL);
        }
    }
    while (s->status.active) {
        for (;;) {
            if (p->closing || (p->queue_head && slot_takes_head(p, s))) break;
            if (!p->queue_head) {
                pthread_cond_wait(&p->work, &p->lock);
            } else { /* left to faster slots: look again when something changes, or soon (estimates can be wrong) */
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_nsec += 50 * 1000000L;
                if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
                pthread_cond_timedwait(&p->work, &p->lock, &until);
            }
        }
        if (p->closing) break;
        pool_batch *b = queue_pop(p);
        b->state = BATCH_RUNNING;
        b->started = now_s();
        s->running_count = b->count;
        s->running_since = b->started;
        b->info.device = s->index;
        b->info.attempts++;
        s->started++;
        for (int i = 0; i < VKF_POOL_MAX_FAULTS; i++) {
            pool_fault *f = &p->faults[i];
            if (f->armed && f->slot == s->index && f->batch == s->started) {
                vkf_test_inject_fault(s->ctx, f->call, f->result);
                f->armed = false;
            }
        }
        pthread_mutex_unlock(&p->lock);

        vkf_status st = slot_run(s, b);
        char message[1024] = "";
        if (st != VKF_OK) copy_message(message, sizeof message, vkf_last_error());
        vkf_generate_stats stats;
        memset(&stats, 0, sizeof stats);
        if (st == VKF_OK && b->kind == BATCH_GENERATE) vkf_model_generate_stats(s->model, &stats);
        uint32_t errors = 0, warnings = 0;
        vkf_context_validation_counts(s->ctx, &errors, &warnings, NULL);
        double ended = now_s();
        if (st == VKF_OK && b->kind == BATCH_TRANSCRIBE) { /* no generation stats: its time and its ids */
            stats.total_ms = (ended - b->started) * 1e3;
            stats.tokens = b->transcript->n_ids;
        }

        pthread_mutex_lock(&p->lock);
        s->running_count = 0;
        s->status.busy_ms += (ended - b->started) * 1e3;
        if (st == VKF_OK) { /* an average that follows the device's recent speed */
            double sample = (ended - b->started) / b->count;
            s->per_source_s = s->per_source_s > 0 ? 0.7 * s->per_source_s + 0.3 * sample : sample;
        }
        s->status.validation_errors = errors, s->status.validation_warnings = warnings;
        if (st == VKF_OK || !device_level(st)) {
            b->state = BATCH_DONE;
            b->status = st;
            copy_message(b->message, sizeof b->message, message);
            b->info.queued_ms = (b->started - b->submitted) * 1e3;
            b->info.run_ms = (ended - b->started) * 1e3;
            b->info.stats = stats;
            if (st == VKF_OK) {
                s->status.batches++;
                s->status.sources += b->count;
                s->status.tokens += stats.tokens;
            }
        } else { /* the device failed under the batch: it leaves, the batch goes back first in line */
            slot_leave(p, s, st, message, b);
        }
        pthread_cond_broadcast(&p->work); /* slots that left the head to this one reconsider */
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* ------------------------------------------------------------------ create and destroy */

void vkf_pool_options_init(vkf_pool_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
}

/* The slots' requests from options->devices: "all" (or NULL) lists the devices. */
static vkf_status parse_devices(const char *devices, pool_slot **out_slots, uint32_t *out_n)
{
    *out_slots = NULL, *out_n = 0;
    char quoted[VKF_QUOTE_SIZE];
    if (!devices || strcmp(devices, "all") == 0) {
        uint32_t count = 0;
        VKF_TRY(vkf_devices_list(NULL, 0, &count));
        if (count == 0) return vkf_fail(VKF_ERROR_NO_DEVICE, "no Vulkan device found");
        vkf_device_info *infos = calloc(count, sizeof *infos);
        pool_slot *slots = calloc(count, sizeof *slots);
        if (!infos || !slots) {
            free(infos), free(slots);
            return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory listing devices");
        }
        vkf_status st = vkf_devices_list(infos, count, &count);
        uint32_t gpus = 0, n = 0;
        for (uint32_t i = 0; st == VKF_OK && i < count; i++)
            gpus += infos[i].type == VKF_DEVICE_DISCRETE_GPU || infos[i].type == VKF_DEVICE_INTEGRATED_GPU ||
                    infos[i].type == VKF_DEVICE_VIRTUAL_GPU;
        for (uint32_t i = 0; st == VKF_OK && i < count; i++) {
            bool gpu = infos[i].type == VKF_DEVICE_DISCRETE_GPU || infos[i].type == VKF_DEVICE_INTEGRATED_GPU ||
                       infos[i].type == VKF_DEVICE_VIRTUAL_GPU;
            if (gpus && !gpu) continue;
            snprintf(slots[n++].request, sizeof slots[0].request, "%u", infos[i].index);
        }
        free(infos);
        if (st != VKF_OK) {
            free(slots);
            return st;
        }
        *out_slots = slots, *out_n = n;
        return VKF_OK;
    }
    uint32_t n = 1;
    for (const char *c = devices; *c; c++) n += *c == ',';
    pool_slot *slots = calloc(n, sizeof *slots);
    if (!slots) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %u devices", n);
    const char *item = devices;
    for (uint32_t i = 0; i < n; i++) {
        size_t len = strcspn(item, ",");
        if (len == 0 || len >= sizeof slots[i].request) {
            free(slots);
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "devices %s: item %u is %s", vkf_quote(quoted, sizeof quoted,
                            devices, (size_t)-1), i + 1, len ? "too long" : "empty");
        }
        memcpy(slots[i].request, item, len);
        slots[i].request[len] = '\0';
        item += len + (item[len] == ',');
    }
    *out_slots = slots, *out_n = n;
    return VKF_OK;
}

/* VKFORMER_POOL_FAULT=SLOT:BATCH:CALL:RESULT[,...] (tests). */
static vkf_status faults_from_env(vkf_pool *p)
{
    const char *env = getenv("VKFORMER_POOL_FAULT");
    if (!env || !*env) return VKF_OK;
    char quoted[VKF_QUOTE_SIZE];
    const char *item = env;
    while (*item) {
        size_t len = strcspn(item, ",");
        char one[128], call[64], result[64];
        unsigned slot = 0, batch = 0;
        int used = 0;
        if (len >= sizeof one) goto bad;
        memcpy(one, item, len);
        one[len] = '\0';
        if (sscanf(one, "%u:%u:%63[^:]:%63s%n", &slot, &batch, call, result, &used) != 4 || (size_t)used != len)
            goto bad;
        VkResult r;
        if (strcmp(result, "device-lost") == 0) r = VK_ERROR_DEVICE_LOST;
        else if (strcmp(result, "out-of-device-memory") == 0) r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
        else if (strcmp(result, "out-of-host-memory") == 0) r = VK_ERROR_OUT_OF_HOST_MEMORY;
        else if (strcmp(result, "unknown") == 0) r = VK_ERROR_UNKNOWN;
        else goto bad;
        VKF_TRY(vkf_pool_test_fault(p, slot, batch, call, r));
        item += len + (item[len] == ',');
    }
    return VKF_OK;
bad:
    return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "VKFORMER_POOL_FAULT=%s is not SLOT:BATCH:CALL:RESULT[,...] (RESULT: "
                    "device-lost, out-of-device-memory, out-of-host-memory or unknown)",
                    vkf_quote(quoted, sizeof quoted, env, (size_t)-1));
}

vkf_status vkf_pool_test_fault(vkf_pool *p, uint32_t slot, uint32_t batch, const char *call, VkResult result)
{
    static const char *const calls[] = {"vkQueueSubmit", "vkWaitForFences", "vkAllocateMemory"};
    const char *name = NULL;
    for (size_t i = 0; call && i < sizeof calls / sizeof calls[0]; i++)
        if (strcmp(call, calls[i]) == 0) name = calls[i];
    char quoted[VKF_QUOTE_SIZE];
    if (!p || !name || slot >= p->n || batch == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "pool fault: slot %u of %u, batch %u, call %s (vkQueueSubmit, "
                        "vkWaitForFences or vkAllocateMemory)", slot, p ? p->n : 0, batch,
                        vkf_quote(quoted, sizeof quoted, call, (size_t)-1));
    pthread_mutex_lock(&p->lock);
    vkf_status st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "pool fault: more than %d armed", VKF_POOL_MAX_FAULTS);
    for (int i = 0; i < VKF_POOL_MAX_FAULTS; i++)
        if (!p->faults[i].armed) {
            p->faults[i] = (pool_fault){true, slot, batch, name, result};
            st = VKF_OK;
            break;
        }
    pthread_mutex_unlock(&p->lock);
    return st;
}

void vkf_pool_destroy(vkf_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->closing = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (uint32_t i = 0; i < p->n; i++)
        if (p->slots[i].thread_started) pthread_join(p->slots[i].thread, NULL);
    for (pool_batch *b = p->live, *next; b; b = next) {
        next = b->next_live;
        batch_free(b);
    }
    for (uint32_t i = 0; i < p->n; i++) {
        vkf_model_destroy(p->slots[i].model);
        vkf_context_destroy(p->slots[i].ctx);
    }
    free(p->slots);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

vkf_status vkf_pool_create(const char *path, const vkf_pool_options *options, vkf_pool **out_pool)
{
    if (!out_pool) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_create: out_pool is NULL");
    *out_pool = NULL;
    if (!path) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_create: path is NULL");
    vkf_pool_options defaults;
    vkf_pool_options_init(&defaults);
    if (!options) options = &defaults;
    if ((unsigned)options->dispatch > VKF_POOL_DISPATCH_ANY_FREE)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_create: unknown dispatch %d", (int)options->dispatch);
    if (options->self_attention) VKF_TRY(vkf_attention_check(options->self_attention, false));
    if (options->cross_attention) VKF_TRY(vkf_attention_check(options->cross_attention, true));
    vkf_pool *p = calloc(1, sizeof *p);
    if (!p) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a pool");
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->next_ticket = 1;
    vkf_status st = parse_devices(options->devices, &p->slots, &p->n);
    if (st == VKF_OK) st = faults_from_env(p);
    if (st != VKF_OK) {
        vkf_pool_destroy(p);
        return st;
    }
    p->path = path;
    p->options = options;
    p->dispatch = options->dispatch;
    /* every slot sets itself up on its own thread, in parallel */
    for (uint32_t i = 0; i < p->n && st == VKF_OK; i++) {
        pool_slot *s = &p->slots[i];
        s->pool = p, s->index = i;
        if (pthread_create(&s->thread, NULL, slot_main, s) != 0)
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "cannot start a thread for device %s", s->request);
        else
            s->thread_started = true;
    }
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < p->n; i++)
        while (p->slots[i].thread_started && !p->slots[i].setup_done) pthread_cond_wait(&p->done, &p->lock);
    char message[1400] = "";
    for (uint32_t i = 0; i < p->n && st == VKF_OK; i++)
        if (p->slots[i].setup_status != VKF_OK) {
            st = p->slots[i].setup_status;
            copy_message(message, sizeof message, p->slots[i].setup_message);
        }
    for (uint32_t i = 0; i < p->n && st == VKF_OK; i++)
        for (uint32_t j = 0; j < i && st == VKF_OK; j++)
            if (p->slots[i].status.info.index == p->slots[j].status.info.index) {
                char quoted[VKF_QUOTE_SIZE];
                st = VKF_ERROR_INVALID_ARGUMENT;
                snprintf(message, sizeof message, "device %u (%s) is named twice in the pool's devices (items %u and %u)",
                         p->slots[i].status.info.index,
                         vkf_quote(quoted, sizeof quoted, p->slots[i].status.info.name, (size_t)-1), j + 1, i + 1);
            }
    if (st == VKF_OK) {
        p->active = p->n;
        p->go = true;
        pthread_cond_broadcast(&p->work);
    }
    pthread_mutex_unlock(&p->lock);
    p->path = NULL, p->options = NULL;
    if (st != VKF_OK) {
        vkf_pool_destroy(p);
        return message[0] ? vkf_fail(st, "%s", message) : st;
    }
    vkf_model_get_config(p->slots[0].model, &p->cfg);
    *out_pool = p;
    return VKF_OK;
}

/* ------------------------------------------------------------------ queries */

uint32_t vkf_pool_device_count(const vkf_pool *p)
{
    return p ? p->n : 0;
}

vkf_status vkf_pool_device_status(vkf_pool *p, uint32_t index, vkf_pool_device *out)
{
    if (!p || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_device_status: %s is NULL", p ? "out_device" : "pool");
    if (index >= p->n)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_device_status: slot %u of a pool of %u devices", index, p->n);
    pthread_mutex_lock(&p->lock);
    *out = p->slots[index].status;
    pthread_mutex_unlock(&p->lock);
    return VKF_OK;
}

const vkf_model *vkf_pool_model(const vkf_pool *p)
{
    return p ? p->slots[0].model : NULL;
}

vkf_status vkf_pool_validation_counts(vkf_pool *p, uint32_t *out_errors, uint32_t *out_warnings)
{
    if (!p) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_validation_counts: pool is NULL");
    uint32_t e = 0, w = 0;
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < p->n; i++) e += p->slots[i].status.validation_errors, w += p->slots[i].status.validation_warnings;
    pthread_mutex_unlock(&p->lock);
    if (out_errors) *out_errors = e;
    if (out_warnings) *out_warnings = w;
    return VKF_OK;
}

/* ------------------------------------------------------------------ batches */

/* The sources as the model checks them (named by their index in src), and the
 * output sizes the options ask for; *out_total: the ids of all sources. */
static vkf_status check_job(const vkf_pool *p, const vkf_sequences *src, const vkf_generate_options *options,
                            const char *what, uint64_t *out_total)
{
    const vkf_model_config *c = &p->cfg;
    if (c->audio_mels)
        return vkf_fail(VKF_ERROR_STATE, "%s: this pool's model reads audio, not source ids: vkf_pool_submit_transcribe "
                        "transcribes with it", what);
    if (src->count == 0 || !src->ids || !src->lengths)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: no sources given", what);
    uint64_t total = 0;
    for (uint32_t i = 0; i < src->count; i++) {
        uint32_t n = src->lengths[i];
        if (n == 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "source sequence %u is empty", i);
        if (n > c->max_len)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "source sequence %u has %u tokens; the model's max_len is %u", i,
                            n, c->max_len);
        if (!src->ids[i]) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "source sequence %u is NULL", i);
        for (uint32_t j = 0; j < n; j++)
            if (src->ids[i][j] < 0 || (uint32_t)src->ids[i][j] >= c->src_vocab_size)
                return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "source sequence %u: id %d at position %u is outside 0..%u",
                                i, src->ids[i][j], j, c->src_vocab_size - 1);
        total += n;
    }
    uint32_t max_new = options && options->max_new ? options->max_new : c->max_len;
    uint32_t n_best = options && options->n_best ? options->n_best : 1;
    if (max_new > c->max_len)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: max_new %u is past the model's max_len %u", what, max_new,
                        c->max_len);
    if (n_best > POOL_MAX_BEAMS) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: n_best %u is past %d", what, n_best,
                                                 POOL_MAX_BEAMS);
    *out_total = total;
    return VKF_OK;
}

/* Queues batch b (owned by the pool from here, freed on failure) at the back. */
static vkf_status enqueue(vkf_pool *p, pool_batch *b, uint64_t *out_ticket)
{
    pthread_mutex_lock(&p->lock);
    if (p->active == 0) {
        vkf_status st = p->dead_status;
        char message[sizeof p->dead_message];
        copy_message(message, sizeof message, p->dead_message);
        pthread_mutex_unlock(&p->lock);
        batch_free(b);
        return vkf_fail(st, "%s", message);
    }
    b->ticket = p->next_ticket++;
    b->submitted = now_s();
    b->state = BATCH_QUEUED;
    b->next_live = p->live;
    p->live = b;
    queue_push_back(p, b);
    pthread_cond_broadcast(&p->work); /* every idle slot: one may leave it to a faster one */
    pthread_mutex_unlock(&p->lock);
    *out_ticket = b->ticket;
    return VKF_OK;
}

vkf_status vkf_pool_submit(vkf_pool *p, const vkf_sequences *src, const vkf_generate_options *options,
                           uint64_t *out_ticket)
{
    if (out_ticket) *out_ticket = 0;
    if (!p || !src || !out_ticket)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_submit: %s is NULL", !p ? "pool" : !src ? "src" : "out_ticket");
    uint64_t total = 0;
    VKF_TRY(check_job(p, src, options, "vkf_pool_submit", &total));
    const vkf_model_config *c = &p->cfg;
    vkf_generate_options o;
    vkf_generate_options_init(&o);
    if (options) o = *options;
    uint32_t max_new = o.max_new ? o.max_new : c->max_len, n_best = o.n_best ? o.n_best : 1;
    pool_batch *b = calloc(1, sizeof *b);
    size_t outs = (size_t)src->count * n_best;
    if (b) {
        b->ids = malloc(total * sizeof *b->ids);
        b->lengths = malloc(src->count * sizeof *b->lengths);
        b->ptrs = malloc(src->count * sizeof *b->ptrs);
        b->out_ids = malloc(outs * max_new * sizeof *b->out_ids);
        b->out_lengths = malloc(outs * sizeof *b->out_lengths);
        b->out_scores = malloc(outs * sizeof *b->out_scores);
    }
    if (!b || !b->ids || !b->lengths || !b->ptrs || !b->out_ids || !b->out_lengths || !b->out_scores) {
        batch_free(b);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a batch of %u sources", src->count);
    }
    b->count = src->count, b->max_new = max_new, b->n_best = n_best;
    b->options = o;
    b->options.max_new = max_new;
    b->greedy = plain_greedy(&o);
    size_t at = 0;
    for (uint32_t i = 0; i < src->count; i++) {
        memcpy(b->ids + at, src->ids[i], src->lengths[i] * sizeof *b->ids);
        b->ptrs[i] = b->ids + at;
        b->lengths[i] = src->lengths[i];
        at += src->lengths[i];
    }
    return enqueue(p, b, out_ticket);
}

/* The uncollected batch of `ticket`, of `kind`, once it is done: taken off the
 * pool's list (the caller frees it). */
static vkf_status take_batch(vkf_pool *p, uint64_t ticket, batch_kind kind, pool_batch **out)
{
    static const char *const fn[] = {"vkf_pool_collect", "vkf_pool_collect_transcript"};
    pthread_mutex_lock(&p->lock);
    pool_batch **link = &p->live;
    while (*link && (*link)->ticket != ticket) link = &(*link)->next_live;
    pool_batch *b = *link;
    if (!b || b->kind != kind) {
        pthread_mutex_unlock(&p->lock);
        if (b) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: ticket %llu is %s: %s collects it", fn[kind],
                               (unsigned long long)ticket, kind == BATCH_GENERATE ? "a transcription" : "a batch of sources",
                               fn[b->kind]);
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: ticket %llu is not %s waiting to be collected", fn[kind],
                        (unsigned long long)ticket, kind == BATCH_GENERATE ? "a batch" : "a transcription");
    }
    while (b->state != BATCH_DONE) pthread_cond_wait(&p->done, &p->lock);
    *link = b->next_live;
    pthread_mutex_unlock(&p->lock);
    *out = b;
    return VKF_OK;
}

vkf_status vkf_pool_collect(vkf_pool *p, uint64_t ticket, int32_t *out_ids, uint32_t *out_lengths, float *out_scores,
                            vkf_pool_batch *out_batch)
{
    if (!p || !out_ids || !out_lengths)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_collect: %s is NULL",
                        !p ? "pool" : !out_ids ? "out_ids" : "out_lengths");
    pool_batch *b = NULL;
    VKF_TRY(take_batch(p, ticket, BATCH_GENERATE, &b));
    vkf_status st = b->status;
    if (st == VKF_OK) {
        size_t outs = (size_t)b->count * b->n_best;
        memcpy(out_ids, b->out_ids, outs * b->max_new * sizeof *out_ids);
        memcpy(out_lengths, b->out_lengths, outs * sizeof *out_lengths);
        if (out_scores) memcpy(out_scores, b->out_scores, outs * sizeof *out_scores);
        if (out_batch) *out_batch = b->info;
    } else {
        vkf_fail(st, "%s", b->message);
    }
    batch_free(b);
    return st;
}

vkf_status vkf_pool_generate(vkf_pool *p, const vkf_sequences *src, const vkf_generate_options *options,
                             uint32_t batch_size, int32_t *out_ids, uint32_t *out_lengths, float *out_scores)
{
    if (!p || !src || !out_ids || !out_lengths)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_generate: %s is NULL",
                        !p ? "pool" : !src ? "src" : !out_ids ? "out_ids" : "out_lengths");
    uint64_t total = 0;
    VKF_TRY(check_job(p, src, options, "vkf_pool_generate", &total));
    uint32_t B = batch_size ? batch_size : POOL_DEFAULT_BATCH;
    uint32_t batches = (src->count + B - 1) / B;
    uint64_t *tickets = calloc(batches, sizeof *tickets);
    if (!tickets) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %u batches", batches);
    uint32_t max_new = options && options->max_new ? options->max_new : p->cfg.max_len;
    uint32_t n_best = options && options->n_best ? options->n_best : 1;
    vkf_status first = VKF_OK;
    char message[1024] = "";
    uint32_t submitted = 0;
    for (; submitted < batches; submitted++) {
        uint32_t at = submitted * B, n = src->count - at < B ? src->count - at : B;
        vkf_sequences part = {n, src->ids + at, src->lengths + at};
        vkf_status st = vkf_pool_submit(p, &part, options, &tickets[submitted]);
        if (st != VKF_OK) {
            first = st;
            copy_message(message, sizeof message, vkf_last_error());
            break;
        }
    }
    for (uint32_t k = 0; k < submitted; k++) {
        size_t at = (size_t)k * B * n_best;
        vkf_status st = vkf_pool_collect(p, tickets[k], out_ids + at * max_new, out_lengths + at,
                                         out_scores ? out_scores + at : NULL, NULL);
        if (st != VKF_OK && first == VKF_OK) {
            first = st;
            snprintf(message, sizeof message, "batch %u (sources %u..): %s", k, k * B, vkf_last_error());
        }
    }
    free(tickets);
    return first == VKF_OK ? VKF_OK : vkf_fail(first, "%s", message);
}

/* ------------------------------------------------------------------ transcription */

vkf_status vkf_pool_submit_transcribe(vkf_pool *p, const float *samples, uint64_t count,
                                      const vkf_transcribe_options *options, uint64_t *out_ticket)
{
    static const char fn[] = "vkf_pool_submit_transcribe";
    if (out_ticket) *out_ticket = 0;
    if (!p || !out_ticket || (!samples && count))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, !p ? "pool" : !out_ticket ? "out_ticket" : "samples");
    const vkf_model_config *c = &p->cfg;
    if (!c->audio_mels)
        return vkf_fail(VKF_ERROR_STATE, "%s: this pool's model (family %s) does not read audio: transcription needs a "
                        "Whisper model", fn, c->family);
    vkf_transcribe_options o;
    vkf_transcribe_options_init(&o);
    if (options) o = *options;
    pool_batch *b = calloc(1, sizeof *b);
    if (b && count) b->samples = malloc(count * sizeof *b->samples);
    if (!b || (count && !b->samples)) {
        batch_free(b);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %llu samples", (unsigned long long)count);
    }
    char quoted[VKF_QUOTE_SIZE];
    const char *strings[2] = {o.language, o.task};
    char *copies[2] = {b->language, b->task};
    size_t caps[2] = {sizeof b->language, sizeof b->task};
    for (int i = 0; i < 2; i++) {
        if (!strings[i]) continue;
        if (strlen(strings[i]) >= caps[i]) {
            batch_free(b);
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s %s is not one this model knows (past %zu bytes)", fn,
                            i ? "task" : "language", vkf_quote(quoted, sizeof quoted, strings[i], 64), caps[i] - 1);
        }
        strcpy(copies[i], strings[i]);
    }
    if (count) memcpy(b->samples, samples, count * sizeof *b->samples);
    b->kind = BATCH_TRANSCRIBE;
    b->n_samples = count;
    b->transcribe = o;
    b->transcribe.language = o.language ? b->language : NULL;
    b->transcribe.task = o.task ? b->task : NULL;
    uint64_t window = c->audio_samples ? c->audio_samples : 1, windows = (count + window - 1) / window;
    b->count = windows < 1 ? 1 : windows > UINT32_MAX ? UINT32_MAX : (uint32_t)windows;
    return enqueue(p, b, out_ticket);
}

vkf_status vkf_pool_collect_transcript(vkf_pool *p, uint64_t ticket, vkf_transcript **out_transcript,
                                       vkf_pool_batch *out_batch)
{
    if (out_transcript) *out_transcript = NULL;
    if (!p || !out_transcript)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_collect_transcript: %s is NULL",
                        !p ? "pool" : "out_transcript");
    pool_batch *b = NULL;
    VKF_TRY(take_batch(p, ticket, BATCH_TRANSCRIBE, &b));
    vkf_status st = b->status;
    if (st == VKF_OK) {
        *out_transcript = b->transcript;
        b->transcript = NULL;
        if (out_batch) *out_batch = b->info;
    } else {
        vkf_fail(st, "%s", b->message);
    }
    batch_free(b);
    return st;
}

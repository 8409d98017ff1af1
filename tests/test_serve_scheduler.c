/* The serving scheduler (src/serve/scheduler.c, issue 37) on the demo model:
 * requests submitted from several threads at once are each answered exactly
 * once with the ids vkf_model_generate gives the source alone, in batched
 * encoder passes (fewer than the requests) and decode steps of several rows;
 * a short request submitted while a long one runs JOINS its batch (no step of
 * its own: the steps are the long one's) and is answered first; requests
 * submitted one after another at staggered steps all join the running batch,
 * each answered as alone; per-request max_new and target prefixes in one
 * batch; beam search and sampling in groups of their own settings (a short beam
 * search joins a running one; every hypothesis and score, every draw as alone);
 * whole runs (min_new), batched when they wait together, with greedy requests
 * admitted and decoded between their steps and a cancel that ends one; cancel
 * (queued and running), a full
 * queue, bad input, and destroy with requests left (each cancelled once).
 * usage: test_serve_scheduler MODEL.safetensors HELDOUT.tsv */
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define MAX_SOURCES 48
#define THREADS 4

typedef struct answer_slot {
    int calls;                          /* done calls: must end at 1 */
    vkf_status status;
    int32_t ids[64];
    uint32_t len;
    int order;                          /* answer order, from 1 */
    uint32_t rows;                      /* group_rows */
    uint32_t n_best;                    /* hypotheses (up to 4 kept below) */
    uint32_t hyp_len[4];
    int32_t hyp[4][64];
    float score[4];
} answer_slot;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int answered_total;

static void on_done(void *user, const vkf_scheduler_result *r)
{
    answer_slot *a = user;
    pthread_mutex_lock(&mu);
    a->calls++;
    a->status = r->status;
    a->len = 0;
    if (r->status == VKF_OK && r->n_best >= 1 && r->lengths[0] <= 64) {
        a->len = r->lengths[0];
        memcpy(a->ids, r->ids, a->len * sizeof *a->ids);
    }
    a->order = ++answered_total;
    a->rows = r->group_rows;
    a->n_best = r->status == VKF_OK ? r->n_best : 0;
    for (uint32_t j = 0; j < a->n_best && j < 4; j++) {
        a->hyp_len[j] = r->lengths[j] <= 64 ? r->lengths[j] : 0;
        memcpy(a->hyp[j], r->ids + (size_t)j * r->stride, a->hyp_len[j] * sizeof *r->ids);
        a->score[j] = r->scores[j];
    }
    if (r->status != VKF_OK && r->status != VKF_ERROR_STATE) fprintf(stderr, "answer: status %d: %s\n", r->status, r->message);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Waits until `n` answers have come in all (or 60 s pass). */
static void wait_answers(int n)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&mu);
    while (answered_total < n)
        if (pthread_cond_timedwait(&cv, &mu, &until) != 0) break;
    pthread_mutex_unlock(&mu);
}

typedef struct submitter {
    vkf_scheduler *s;
    int first, count;
    int32_t (*ids)[64];
    uint32_t *lens;
    answer_slot *slots;
    int failures;
} submitter;

static void *submit_thread(void *arg)
{
    submitter *t = arg;
    for (int i = t->first; i < t->first + t->count; i++)
        if (vkf_scheduler_submit(t->s, t->ids[i], t->lens[i], NULL, on_done, &t->slots[i], NULL) != VKF_OK)
            t->failures++;
    return NULL;
}

/* A streaming callback that holds the scheduler's thread until released. */
static bool hold;
static bool holding_stream(void *user, uint32_t source, const int32_t *ids, uint32_t count)
{
    (void)user, (void)source, (void)ids, (void)count;
    pthread_mutex_lock(&mu);
    while (hold) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return true;
}

/* A streaming callback on a long request that stops the scheduler's thread
 * after every `every`-th token (up to `stops` times) until the test has done
 * what it does there (submitted another request): arrivals then come at known
 * steps of the long one however loaded the machine is. */
typedef struct gate {
    int every, stops, tokens;
    bool stopped;                       /* the scheduler's thread waits in the callback */
} gate;
static bool gate_stream(void *user, uint32_t source, const int32_t *ids, uint32_t count)
{
    (void)source, (void)ids;
    gate *g = user;
    pthread_mutex_lock(&mu);
    g->tokens += (int)count;
    if (g->stops > 0 && g->tokens % g->every == 0) {
        g->stops--, g->stopped = true;
        pthread_cond_broadcast(&cv);
        while (g->stopped) pthread_cond_wait(&cv, &mu);
    }
    pthread_mutex_unlock(&mu);
    return true;
}
/* Waits (60 s at most) until the scheduler's thread stops at the gate. */
static bool gate_reached(gate *g)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&mu);
    while (!g->stopped)
        if (pthread_cond_timedwait(&cv, &mu, &until) != 0) break;
    bool ok = g->stopped;
    pthread_mutex_unlock(&mu);
    return ok;
}
static void gate_open(gate *g)
{
    pthread_mutex_lock(&mu);
    g->stopped = false;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* Whether answer a is what options o give the source (src, n) alone on the
 * reference model: every hypothesis kept (up to 4), and for beam search its
 * score, bit for bit (tol 0) or within tol relative (a batch of sources sums a
 * padded encoder pass in another order). Says what differs on stderr. */
static bool as_alone(vkf_model *ref, const int32_t *src, uint32_t n, const vkf_generate_options *o,
                     const answer_slot *a, double tol, const char *what, int index)
{
    const uint32_t nb = o->sample ? 1 : o->n_best, stride = o->max_new;
    int32_t *got = calloc((size_t)nb * stride, sizeof *got);
    uint32_t got_len[16] = {0};
    float score[16];
    vkf_sequences one = {1, &src, &n};
    vkf_status st = got ? vkf_model_generate_with(ref, &one, o, got, got_len, score) : VKF_ERROR_OUT_OF_HOST_MEMORY;
    bool same = st == VKF_OK && a->calls == 1 && a->status == VKF_OK && a->n_best == nb && a->len == got_len[0] &&
                !memcmp(a->ids, got, got_len[0] * 4);
    for (uint32_t j = 0; same && j < nb && j < 4; j++)
        same = a->hyp_len[j] == got_len[j] && !memcmp(a->hyp[j], got + j * stride, got_len[j] * 4) &&
               (o->beams < 2 || (tol == 0 ? memcmp(&a->score[j], &score[j], sizeof score[j]) == 0
                                          : fabs((double)a->score[j] - score[j]) <= tol * fabs((double)score[j])));
    if (!same) {
        fprintf(stderr, "%s %d: status %d, %u ids, %u hypotheses (alone: status %d, %u ids)\n", what, index, a->status,
                a->len, a->n_best, st, got_len[0]);
        for (uint32_t j = 0; got && j < nb && j < 4 && j < a->n_best; j++)
            fprintf(stderr, "  hypothesis %u: %u ids (alone %u), score %.9g (alone %.9g)\n", j, a->hyp_len[j], got_len[j],
                    a->score[j], score[j]);
    }
    free(got);
    return same;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.safetensors HELDOUT.tsv\n", argv[0]);
        return 2;
    }
    vkf_context *ctx = harness_context();
    vkf_model *m = NULL;
    CHECK_OK(vkf_model_load(ctx, argv[1], &m));
    FILE *f = fopen(argv[2], "r");
    CHECK(f != NULL);
    if (!m || !f) {
        harness_close(ctx);
        return harness_result("serve-scheduler");
    }
    /* the references while the scheduler runs: the same model on a context of
     * their own (the scheduler's model and context are its thread's alone) */
    vkf_context *ref_ctx = harness_context();
    vkf_model *ref = NULL;
    CHECK_OK(vkf_model_load(ref_ctx, argv[1], &ref));
    if (!ref) {
        vkf_model_destroy(m);
        harness_close(ref_ctx);
        harness_close(ctx);
        return harness_result("serve-scheduler");
    }
    vkf_model_config cfg;
    CHECK_OK(vkf_model_get_config(m, &cfg));
    static int32_t ids[MAX_SOURCES][64];
    static uint32_t lens[MAX_SOURCES];
    char line[512];
    int n = 0;
    while (n < MAX_SOURCES && fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (tab) *tab = 0;
        CHECK_OK(vkf_model_encode_text(m, line, ids[n], 64, &lens[n]));
        n++;
    }
    fclose(f);
    CHECK(n == MAX_SOURCES);
    /* the reference: each source alone, greedy, as far as max_len goes */
    const uint32_t max_new = cfg.max_len;
    int32_t *want = harness_alloc((size_t)n * max_new * sizeof *want);
    uint32_t want_len[MAX_SOURCES];
    for (int i = 0; i < n; i++) {
        const int32_t *p = ids[i];
        vkf_sequences one = {1, &p, &lens[i]};
        CHECK_OK(vkf_model_generate(m, &one, max_new, want + (size_t)i * max_new, &want_len[i]));
    }

    vkf_scheduler_options so;
    vkf_scheduler_options_init(&so);
    CHECK(so.max_batch == 32 && so.max_groups == 4 && so.max_queue == 256);
    so.max_batch = 16, so.max_groups = 3;
    vkf_scheduler *s = NULL;
    CHECK_OK(vkf_scheduler_create(m, &so, &s));
    if (!s) {
        vkf_model_destroy(ref);
        harness_close(ref_ctx);
        vkf_model_destroy(m);
        harness_close(ctx);
        return harness_result("serve-scheduler");
    }

    /* 1. many requests from several threads at once: each answered once, as alone */
    static answer_slot slots[MAX_SOURCES];
    submitter th[THREADS];
    pthread_t tid[THREADS];
    for (int t = 0; t < THREADS; t++) {
        th[t] = (submitter){s, t * n / THREADS, n / THREADS, ids, lens, slots, 0};
        CHECK(pthread_create(&tid[t], NULL, submit_thread, &th[t]) == 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(tid[t], NULL);
        CHECK(th[t].failures == 0);
    }
    wait_answers(n);
    int wrong = 0;
    for (int i = 0; i < n; i++) {
        CHECK(slots[i].calls == 1 && slots[i].status == VKF_OK);
        if (slots[i].len != want_len[i] || memcmp(slots[i].ids, want + (size_t)i * max_new, want_len[i] * 4)) wrong++;
    }
    if (wrong) fprintf(stderr, "%d of %d answers differ from the source decoded alone\n", wrong, n);
    CHECK(wrong == 0);
    vkf_scheduler_stats st;
    CHECK_OK(vkf_scheduler_get_stats(s, &st));
    fprintf(stderr, "batching: %d requests in %llu encoder passes, %llu steps of %llu rows (at most %u), %llu joined\n",
            n, (unsigned long long)st.encoder_passes, (unsigned long long)st.steps, (unsigned long long)st.step_rows,
            st.max_step_rows, (unsigned long long)st.joined);
    /* steps decode several rows at once; rows keep their slots */
    CHECK(st.max_step_rows >= 2 && st.step_rows > st.steps && st.compactions == 0);
    CHECK(st.answered == (uint64_t)n && st.failed == 0 && st.admitted == (uint64_t)n);
    CHECK(st.encoder_passes >= 1 && st.encoder_passes < (uint64_t)n); /* arrivals were batched */
    CHECK(st.tokens > 0 && st.active == 0 && st.queued == 0);

    /* 2. a long request (eos suppressed: it runs to max_new), then a short one
     * once the long one runs: the short one is answered first, the long one
     * still right */
    answer_slot longer = {0}, shorter = {0};
    vkf_generate_options lo;
    vkf_generate_options_init(&lo);
    int32_t eos = cfg.eos_id;
    lo.max_new = cfg.max_len, lo.suppress_ids = &eos, lo.n_suppress = 1;
    vkf_scheduler_stats before;
    CHECK_OK(vkf_scheduler_get_stats(s, &before));
    gate g2 = {.every = 1, .stops = 1};
    vkf_generate_options lg = lo;
    lg.on_tokens = gate_stream, lg.on_tokens_user = &g2;
    CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &lg, on_done, &longer, NULL));
    CHECK(gate_reached(&g2)); /* the long one has its first id */
    /* short: the long one's processor settings (so that it may join its batch), 4 ids */
    vkf_generate_options sh = lo;
    sh.max_new = 4;
    CHECK_OK(vkf_scheduler_submit(s, ids[1], lens[1], &sh, on_done, &shorter, NULL));
    gate_open(&g2);
    wait_answers(n + 2);
    CHECK(longer.calls == 1 && shorter.calls == 1 && longer.status == VKF_OK && shorter.status == VKF_OK);
    CHECK(shorter.order < longer.order);
    {
        int32_t got[4];
        uint32_t got_len;
        float score;
        const int32_t *p = ids[1];
        vkf_sequences one = {1, &p, &lens[1]};
        CHECK_OK(vkf_model_generate_with(ref, &one, &sh, got, &got_len, &score));
        CHECK(shorter.len == got_len && got_len == 4 && memcmp(shorter.ids, got, got_len * 4) == 0);
    }
    {
        int32_t got[256];
        uint32_t got_len;
        float score;
        const int32_t *p = ids[0];
        vkf_sequences one = {1, &p, &lens[0]};
        CHECK_OK(vkf_model_generate_with(ref, &one, &lo, got, &got_len, &score));
        CHECK(longer.len == got_len && longer.len == lo.max_new && memcmp(longer.ids, got, got_len * 4) == 0);
    }
    /* the short one joined the long one's batch: the steps were the long one's alone */
    CHECK_OK(vkf_scheduler_get_stats(s, &st));
    if (st.steps - before.steps != lo.max_new || st.joined == before.joined)
        fprintf(stderr, "short after long: %llu steps (want %u), %llu joined\n",
                (unsigned long long)(st.steps - before.steps), lo.max_new, (unsigned long long)(st.joined - before.joined));
    CHECK(st.steps - before.steps == lo.max_new && st.joined - before.joined == 1);

    /* 2b. requests submitted one after another, each once the running batch has
     * taken another step: every one joins it (one submit per step throughout)
     * and is answered as alone */
    {
        enum { STAGGERED = 6 };
        answer_slot lead = {0}, late[STAGGERED];
        memset(late, 0, sizeof late);
        CHECK_OK(vkf_scheduler_get_stats(s, &before));
        int base2 = answered_total;
        /* late[i] is submitted after the lead's id 3(i + 1): the last one (7 ids)
         * arrives at step 18 and ends by step 18 + 2 (admission) + 7 + 1 < max_len */
        CHECK(3 * STAGGERED + 2 + (1 + STAGGERED) + 1 < (int)lo.max_new);
        gate g3 = {.every = 3, .stops = STAGGERED};
        vkf_generate_options lg3 = lo;
        lg3.on_tokens = gate_stream, lg3.on_tokens_user = &g3;
        CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &lg3, on_done, &lead, NULL));
        uint32_t most_groups = 0;
        for (int i = 0; i < STAGGERED; i++) {
            CHECK(gate_reached(&g3));
            CHECK_OK(vkf_scheduler_get_stats(s, &st));
            if (st.groups > most_groups) most_groups = st.groups;
            vkf_generate_options lt = lo;
            lt.max_new = 2 + (uint32_t)i; /* joins the long one's batch, ends before it */
            CHECK_OK(vkf_scheduler_submit(s, ids[5 + i], lens[5 + i], &lt, on_done, &late[i], NULL));
            gate_open(&g3);
        }
        wait_answers(base2 + 1 + STAGGERED);
        int bad = 0;
        for (int i = 0; i < STAGGERED; i++) {
            CHECK(late[i].calls == 1 && late[i].status == VKF_OK);
            vkf_generate_options lt = lo;
            lt.max_new = 2 + (uint32_t)i;
            int32_t got[8];
            uint32_t got_len = 0;
            float score;
            const int32_t *p = ids[5 + i];
            vkf_sequences one = {1, &p, &lens[5 + i]};
            CHECK_OK(vkf_model_generate_with(ref, &one, &lt, got, &got_len, &score));
            bad += late[i].len != got_len || got_len != lt.max_new || memcmp(late[i].ids, got, got_len * 4);
            CHECK(late[i].order < lead.order);
        }
        CHECK(bad == 0);
        CHECK(lead.calls == 1 && lead.status == VKF_OK && lead.len == longer.len && !memcmp(lead.ids, longer.ids, lead.len * 4));
        CHECK_OK(vkf_scheduler_get_stats(s, &st));
        fprintf(stderr, "staggered: %llu steps, %llu joined, at most %u rows a step, %u groups\n",
                (unsigned long long)(st.steps - before.steps), (unsigned long long)(st.joined - before.joined),
                st.max_step_rows, most_groups);
        CHECK(st.steps - before.steps == lo.max_new && st.joined - before.joined == STAGGERED && most_groups == 1);
    }

    /* 2c. a source longer than the running batch's source length class (16) runs
     * beside it in a batch of a longer class, answered as alone */
    {
        answer_slot lead = {0}, wide = {0};
        int32_t big[24];
        uint32_t big_len = 24;
        for (uint32_t j = 0; j < big_len; j++) big[j] = ids[j % 8][0];
        int base3 = answered_total;
        gate g4 = {.every = 1, .stops = 1};
        vkf_generate_options lg4 = lo;
        lg4.on_tokens = gate_stream, lg4.on_tokens_user = &g4;
        CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &lg4, on_done, &lead, NULL));
        CHECK(gate_reached(&g4));
        vkf_generate_options wo = lo;
        wo.max_new = 5;
        CHECK_OK(vkf_scheduler_submit(s, big, big_len, &wo, on_done, &wide, NULL));
        gate_open(&g4);
        wait_answers(base3 + 2);
        int32_t got[8];
        uint32_t got_len = 0;
        float score;
        const int32_t *p = big;
        vkf_sequences one = {1, &p, &big_len};
        CHECK_OK(vkf_model_generate_with(ref, &one, &wo, got, &got_len, &score));
        CHECK(wide.calls == 1 && wide.status == VKF_OK && wide.len == got_len && !memcmp(wide.ids, got, got_len * 4));
        CHECK(lead.calls == 1 && lead.status == VKF_OK && lead.len == longer.len && wide.order < lead.order);
    }

    /* 3. per-request max_new and a target prefix in one batch of submits */
    answer_slot cut = {0}, pre = {0};
    vkf_generate_options co;
    vkf_generate_options_init(&co);
    co.max_new = 1;
    int base = answered_total;
    CHECK_OK(vkf_scheduler_submit(s, ids[2], lens[2], &co, on_done, &cut, NULL));
    vkf_generate_options po;
    vkf_generate_options_init(&po);
    const int32_t *pp = want + 3 * (size_t)max_new;
    uint32_t plen = 1;
    vkf_sequences prefix = {1, &pp, &plen};
    po.target_prefix = &prefix;
    CHECK(want_len[3] >= 2);
    CHECK_OK(vkf_scheduler_submit(s, ids[3], lens[3], &po, on_done, &pre, NULL));
    wait_answers(base + 2);
    CHECK(cut.calls == 1 && cut.status == VKF_OK && cut.len == 1 && cut.ids[0] == want[2 * (size_t)max_new]);
    /* the greedy continuation of its own first id: the rest of its greedy output */
    CHECK(pre.calls == 1 && pre.status == VKF_OK && pre.len == want_len[3] - 1 &&
          memcmp(pre.ids, want + 3 * (size_t)max_new + 1, pre.len * 4) == 0);

    /* 4. beam search in a group (plain: no processor) equals vkf_model_generate_with */
    answer_slot beam = {0};
    vkf_generate_options bo;
    vkf_generate_options_init(&bo);
    bo.beams = 3, bo.max_new = 12;
    base = answered_total;
    CHECK_OK(vkf_scheduler_submit(s, ids[4], lens[4], &bo, on_done, &beam, NULL));
    wait_answers(base + 1);
    {
        int32_t got[12];
        uint32_t got_len;
        float score;
        const int32_t *p = ids[4];
        vkf_sequences one = {1, &p, &lens[4]};
        CHECK_OK(vkf_model_generate_with(ref, &one, &bo, got, &got_len, &score));
        CHECK(beam.calls == 1 && beam.status == VKF_OK && beam.len == got_len && !memcmp(beam.ids, got, got_len * 4));
    }

    /* 4b. greedy requests are decoded between a whole run's steps (a beam
     * search with min_new runs whole): while a long greedy request holds the
     * scheduler's thread at its first id, a long whole beam search and then a
     * short greedy request arrive; the whole run starts at the next boundary,
     * the short one joins the greedy group between its steps and is answered
     * first; all three as alone */
    {
        answer_slot g1 = {0}, w = {0}, sh4 = {0};
        gate gb = {.every = 1, .stops = 1};
        vkf_generate_options l1 = lo;
        l1.on_tokens = gate_stream, l1.on_tokens_user = &gb;
        vkf_generate_options wo4 = lo; /* eos suppressed: the beams run to max_len */
        wo4.beams = 2, wo4.min_new = 1;
        vkf_generate_options so4 = lo;
        so4.max_new = 3;
        CHECK_OK(vkf_scheduler_get_stats(s, &before));
        base = answered_total;
        CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &l1, on_done, &g1, NULL));
        CHECK(gate_reached(&gb));
        CHECK_OK(vkf_scheduler_submit(s, ids[6], lens[6], &wo4, on_done, &w, NULL));
        CHECK_OK(vkf_scheduler_submit(s, ids[7], lens[7], &so4, on_done, &sh4, NULL));
        gate_open(&gb);
        wait_answers(base + 3);
        int32_t got[64];
        uint32_t got_len = 0;
        float score;
        const int32_t *p = ids[6];
        vkf_sequences one = {1, &p, &lens[6]};
        CHECK_OK(vkf_model_generate_with(ref, &one, &wo4, got, &got_len, &score));
        CHECK(w.calls == 1 && w.status == VKF_OK && w.len == got_len && !memcmp(w.ids, got, got_len * 4));
        p = ids[7], one.lengths = &lens[7];
        CHECK_OK(vkf_model_generate_with(ref, &one, &so4, got, &got_len, &score));
        CHECK(sh4.calls == 1 && sh4.status == VKF_OK && sh4.len == got_len && !memcmp(sh4.ids, got, got_len * 4));
        CHECK(g1.calls == 1 && g1.status == VKF_OK && g1.len == longer.len && !memcmp(g1.ids, longer.ids, g1.len * 4));
        if (!(sh4.order < w.order && g1.order < w.order))
            fprintf(stderr, "beside a beam run: short answered %d, long greedy %d, beams %d\n", sh4.order, g1.order, w.order);
        CHECK(sh4.order < w.order && g1.order < w.order);
        CHECK_OK(vkf_scheduler_get_stats(s, &st));
        CHECK(st.joined - before.joined == 1); /* the short one joined the long greedy one's group */
    }

    /* 4c. a cancel ends a running whole beam search at its next step: cancelled while
     * a greedy request's step between its steps holds the scheduler's thread,
     * it is answered (cancelled) long before the greedy one ends */
    {
        answer_slot g1 = {0}, w = {0};
        gate gc = {.every = 1, .stops = 2};
        vkf_generate_options l1 = lo;
        l1.on_tokens = gate_stream, l1.on_tokens_user = &gc;
        vkf_generate_options wo4 = lo;
        wo4.beams = 2, wo4.min_new = 1;
        base = answered_total;
        uint64_t w_id = 0;
        CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &l1, on_done, &g1, NULL));
        CHECK(gate_reached(&gc));
        CHECK_OK(vkf_scheduler_submit(s, ids[6], lens[6], &wo4, on_done, &w, &w_id));
        gate_open(&gc);
        CHECK(gate_reached(&gc)); /* the greedy one's second id: a round between the beams' steps */
        vkf_scheduler_cancel(s, w_id);
        gate_open(&gc);
        wait_answers(base + 2);
        CHECK(w.calls == 1 && w.status == VKF_ERROR_STATE && w.order < g1.order);
        CHECK(g1.calls == 1 && g1.status == VKF_OK && g1.len == longer.len && !memcmp(g1.ids, longer.ids, g1.len * 4));
    }

    /* 4d. whole beam searches (min_new) that wait together run as one batch of
     * sources (a target prefix each, or none), each answered as alone; a
     * sampling request beside them, in a group of its own */
    {
        enum { NW = 3 };
        answer_slot g1 = {0}, w[NW], smp = {0};
        memset(w, 0, sizeof w);
        gate gd = {.every = 1, .stops = 1};
        vkf_generate_options l1 = lo;
        l1.on_tokens = gate_stream, l1.on_tokens_user = &gd;
        vkf_generate_options wo[NW];
        int32_t pre_id[NW];
        const int32_t *pre_ptr[NW];
        uint32_t pre_len[NW];
        vkf_sequences pre_seq[NW];
        base = answered_total;
        CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &l1, on_done, &g1, NULL));
        CHECK(gate_reached(&gd));
        for (int i = 0; i < NW; i++) {
            vkf_generate_options_init(&wo[i]);
            wo[i].beams = 3, wo[i].n_best = 2, wo[i].max_new = 12, wo[i].min_new = 1;
            /* the second one continues its greedy output's first id */
            pre_id[i] = want[(size_t)(10 + i) * max_new], pre_ptr[i] = &pre_id[i], pre_len[i] = 1;
            pre_seq[i] = (vkf_sequences){1, &pre_ptr[i], &pre_len[i]};
            if (i == 1) wo[i].target_prefix = &pre_seq[i];
            CHECK_OK(vkf_scheduler_submit(s, ids[10 + i], lens[10 + i], &wo[i], on_done, &w[i], NULL));
        }
        vkf_generate_options sa;
        vkf_generate_options_init(&sa);
        sa.sample = true, sa.seed = 7, sa.max_new = 12, sa.top_k = 5;
        CHECK_OK(vkf_scheduler_submit(s, ids[13], lens[13], &sa, on_done, &smp, NULL));
        gate_open(&gd);
        wait_answers(base + NW + 2);
        for (int i = 0; i < NW; i++) {
            CHECK(as_alone(ref, ids[10 + i], lens[10 + i], &wo[i], &w[i], 1e-5, "whole beam search", i));
            if (w[i].rows != NW) fprintf(stderr, "beam request %d ran in a batch of %u\n", i, w[i].rows);
            CHECK(w[i].rows == NW);
        }
        CHECK(as_alone(ref, ids[13], lens[13], &sa, &smp, 0, "sampling beside whole runs", 0) && smp.rows == 1);
        CHECK(g1.calls == 1 && g1.status == VKF_OK && g1.len == longer.len);
    }

    /* 4e. beam searches in a group: while a greedy request holds the scheduler's
     * thread, a long beam search (eos suppressed: the processor on) arrives; once
     * it runs, a short one with the same settings JOINS its group and is answered
     * first, and one with other beams starts a group beside it; each as alone,
     * with its n_best hypotheses and scores */
    {
        answer_slot g1 = {0}, bl = {0}, bsh = {0}, bw = {0};
        gate ge = {.every = 2, .stops = 2};
        vkf_generate_options l1 = lo;
        l1.on_tokens = gate_stream, l1.on_tokens_user = &ge;
        vkf_generate_options bl_o = lo, bsh_o = lo, bw_o = lo;
        bl_o.beams = 3, bl_o.n_best = 3, bl_o.max_new = 20;
        bsh_o.beams = 3, bsh_o.n_best = 2, bsh_o.max_new = 4;
        bw_o.beams = 4, bw_o.max_new = 6;
        CHECK_OK(vkf_scheduler_get_stats(s, &before));
        base = answered_total;
        CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &l1, on_done, &g1, NULL));
        CHECK(gate_reached(&ge));
        CHECK_OK(vkf_scheduler_submit(s, ids[14], lens[14], &bl_o, on_done, &bl, NULL));
        gate_open(&ge);
        CHECK(gate_reached(&ge)); /* two rounds on: the long beam search runs */
        CHECK_OK(vkf_scheduler_submit(s, ids[15], lens[15], &bsh_o, on_done, &bsh, NULL));
        CHECK_OK(vkf_scheduler_submit(s, ids[16], lens[16], &bw_o, on_done, &bw, NULL));
        gate_open(&ge);
        wait_answers(base + 4);
        const answer_slot *got_slot[3] = {&bl, &bsh, &bw};
        const vkf_generate_options *got_o[3] = {&bl_o, &bsh_o, &bw_o};
        for (int i = 0; i < 3; i++) /* every hypothesis and its score, bit for bit */
            CHECK(as_alone(ref, ids[14 + i], lens[14 + i], got_o[i], got_slot[i], 0, "beam group request", i));
        CHECK(bsh.order < bl.order && g1.calls == 1 && g1.status == VKF_OK);
        CHECK_OK(vkf_scheduler_get_stats(s, &st));
        if (st.joined - before.joined != 1) fprintf(stderr, "beam groups: %llu joined\n", (unsigned long long)(st.joined - before.joined));
        CHECK(st.joined - before.joined == 1); /* the short beam search joined the long one's group */
    }

    /* 4g. a forced bos (a target language), the repetition penalty and the
     * n-gram size are per row: requests with other forced first ids, a penalty
     * and an n-gram size join the running group, a beam search with a forced bos
     * runs in a beam group; each as alone */
    {
        answer_slot g1 = {0}, fa = {0}, fb = {0}, fc = {0}, fd = {0}, fe = {0};
        gate gg = {.every = 1, .stops = 1};
        vkf_generate_options l1 = lo;
        l1.on_tokens = gate_stream, l1.on_tokens_user = &gg;
        vkf_generate_options oa = lo, ob = lo, oc = lo, od = lo, oe = lo;
        oa.max_new = 6, oa.forced_bos = true, oa.forced_bos_id = want[(size_t)24 * max_new];
        ob.max_new = 7, ob.forced_bos = true, ob.forced_bos_id = want[(size_t)25 * max_new + 1];
        oc.max_new = 8, oc.forced_bos = true, oc.forced_bos_id = ob.forced_bos_id, oc.beams = 2, oc.n_best = 2;
        CHECK(oa.forced_bos_id != ob.forced_bos_id);
        od.max_new = 12, od.repetition_penalty = 1.7f;
        oe.max_new = 12, oe.no_repeat_ngram = 2;
        CHECK_OK(vkf_scheduler_get_stats(s, &before));
        base = answered_total;
        CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &l1, on_done, &g1, NULL));
        CHECK(gate_reached(&gg));
        CHECK_OK(vkf_scheduler_submit(s, ids[26], lens[26], &oa, on_done, &fa, NULL));
        CHECK_OK(vkf_scheduler_submit(s, ids[27], lens[27], &ob, on_done, &fb, NULL));
        CHECK_OK(vkf_scheduler_submit(s, ids[28], lens[28], &oc, on_done, &fc, NULL));
        CHECK_OK(vkf_scheduler_submit(s, ids[29], lens[29], &od, on_done, &fd, NULL));
        CHECK_OK(vkf_scheduler_submit(s, ids[30], lens[30], &oe, on_done, &fe, NULL));
        gate_open(&gg);
        wait_answers(base + 6);
        const answer_slot *got_slot[5] = {&fa, &fb, &fc, &fd, &fe};
        const vkf_generate_options *got_o[5] = {&oa, &ob, &oc, &od, &oe};
        for (int i = 0; i < 5; i++) {
            const answer_slot *a = got_slot[i];
            CHECK(as_alone(ref, ids[26 + i], lens[26 + i], got_o[i], a, 0, "per-row settings request", i));
            CHECK(a->len >= 1 && (!got_o[i]->forced_bos || a->ids[0] == got_o[i]->forced_bos_id));
        }
        CHECK_OK(vkf_scheduler_get_stats(s, &st));
        if (st.joined - before.joined != 4) fprintf(stderr, "per-row settings: %llu joined\n", (unsigned long long)(st.joined - before.joined));
        CHECK(st.joined - before.joined == 4 && g1.calls == 1 && g1.status == VKF_OK); /* all four joined the lead */
        /* the penalty and the n-gram size changed those answers (else the test shows nothing of them) */
        const int32_t *p = ids[29];
        vkf_sequences one = {1, &p, &lens[29]};
        int32_t plain[12];
        uint32_t plain_len;
        float plain_score;
        vkf_generate_options pl = lo;
        pl.max_new = 12;
        CHECK_OK(vkf_model_generate_with(ref, &one, &pl, plain, &plain_len, &plain_score));
        bool differs_d = fd.len != plain_len || memcmp(fd.ids, plain, plain_len * 4);
        p = ids[30], one.lengths = &lens[30];
        CHECK_OK(vkf_model_generate_with(ref, &one, &pl, plain, &plain_len, &plain_score));
        bool differs_e = fe.len != plain_len || memcmp(fe.ids, plain, plain_len * 4);
        if (!differs_d || !differs_e) fprintf(stderr, "penalty changed the answer: %d, n-gram: %d\n", differs_d, differs_e);
        CHECK(differs_d && differs_e);
    }

    /* 4f. sampling in groups: each row draws with its own seed as the request
     * alone would, so two requests with the same temperature and top-k but
     * other seeds share a group, one with another temperature starts its own,
     * and forced eos without a processor ends a row at its last step; every
     * answer equals vkf_model_generate_with alone */
    {
        enum { NS = 4 };
        answer_slot g1 = {0}, sm[NS];
        memset(sm, 0, sizeof sm);
        gate gf = {.every = 1, .stops = 1};
        vkf_generate_options l1 = lo;
        l1.on_tokens = gate_stream, l1.on_tokens_user = &gf;
        vkf_generate_options so[NS];
        for (int i = 0; i < NS; i++) {
            vkf_generate_options_init(&so[i]);
            so[i].sample = true, so[i].top_k = 8, so[i].temperature = 1.5f, so[i].max_new = 12;
            so[i].seed = 1000 + (uint64_t)i * 0x100000001ull; /* both words differ */
        }
        so[2].temperature = 0.7f;                        /* a group of its own */
        so[3].forced_eos = true, so[3].max_new = 5;      /* the host ends it */
        CHECK_OK(vkf_scheduler_get_stats(s, &before));
        base = answered_total;
        CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &l1, on_done, &g1, NULL));
        CHECK(gate_reached(&gf));
        for (int i = 0; i < NS; i++) CHECK_OK(vkf_scheduler_submit(s, ids[20 + i], lens[20 + i], &so[i], on_done, &sm[i], NULL));
        gate_open(&gf);
        wait_answers(base + NS + 1);
        for (int i = 0; i < NS; i++) CHECK(as_alone(ref, ids[20 + i], lens[20 + i], &so[i], &sm[i], 0, "sampling request", i));
        /* 0, 1 and 3 share a group (forced eos and max_new are per row), 2 has its
         * own: the lead's encoder pass, then one per group */
        CHECK_OK(vkf_scheduler_get_stats(s, &st));
        uint32_t most = sm[0].rows > sm[1].rows ? sm[0].rows : sm[1].rows;
        if (sm[3].rows > most) most = sm[3].rows;
        if (st.encoder_passes - before.encoder_passes != 3 || most < 2 || sm[2].rows != 1)
            fprintf(stderr, "sampling groups: %llu encoder passes, %u and %u rows\n",
                    (unsigned long long)(st.encoder_passes - before.encoder_passes), most, sm[2].rows);
        CHECK(st.encoder_passes - before.encoder_passes == 3 && most >= 2 && sm[2].rows == 1);
        CHECK(g1.calls == 1 && g1.status == VKF_OK);
    }

    /* 5. bad input: refused at once, no done call */
    answer_slot never = {0};
    int32_t bad_id = (int32_t)cfg.src_vocab_size;
    CHECK_STATUS(vkf_scheduler_submit(s, &bad_id, 1, NULL, on_done, &never, NULL), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_scheduler_submit(s, ids[0], 0, NULL, on_done, &never, NULL), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_scheduler_submit(s, ids[0], lens[0], NULL, NULL, &never, NULL), VKF_ERROR_INVALID_ARGUMENT);
    float silence[16] = {0};
    CHECK_STATUS(vkf_scheduler_submit_audio(s, silence, 16, NULL, on_done, &never, NULL), VKF_ERROR_STATE);
    vkf_generate_options big;
    vkf_generate_options_init(&big);
    big.max_new = cfg.max_len + 1;
    CHECK_STATUS(vkf_scheduler_submit(s, ids[0], lens[0], &big, on_done, &never, NULL), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(never.calls == 0);
    vkf_scheduler_destroy(s);
    s = NULL;

    /* 6. a held scheduler: the queue fills, cancel of a queued and a running
     * request, destroy with requests left: every done call exactly once */
    so.max_queue = 2, so.max_batch = 1, so.max_groups = 1;
    CHECK_OK(vkf_scheduler_create(m, &so, &s));
    answer_slot held = {0}, q1 = {0}, q2 = {0}, q3 = {0};
    vkf_generate_options ho;
    vkf_generate_options_init(&ho);
    ho.on_tokens = holding_stream;
    hold = true;
    uint64_t held_id = 0, q1_id = 0;
    CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &ho, on_done, &held, &held_id));
    for (int spin = 0; spin < 2000; spin++) { /* until the held request runs */
        CHECK_OK(vkf_scheduler_get_stats(s, &st));
        if (st.active == 1 && st.queued == 0) break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    CHECK_OK(vkf_scheduler_submit(s, ids[1], lens[1], NULL, on_done, &q1, &q1_id));
    CHECK_OK(vkf_scheduler_submit(s, ids[2], lens[2], NULL, on_done, &q2, NULL));
    CHECK_STATUS(vkf_scheduler_submit(s, ids[3], lens[3], NULL, on_done, &q3, NULL), VKF_ERROR_STATE);
    CHECK(strstr(vkf_last_error(), "queue full") != NULL);
    vkf_scheduler_cancel(s, q1_id);
    vkf_scheduler_cancel(s, held_id);
    vkf_scheduler_cancel(s, 999999); /* unknown: ignored */
    base = answered_total;
    pthread_mutex_lock(&mu);
    hold = false;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    wait_answers(base + 3);
    if (held.status != VKF_ERROR_STATE) fprintf(stderr, "held: %d calls, status %d, %u ids\n", held.calls, held.status, held.len);
    CHECK(held.calls == 1 && held.status == VKF_ERROR_STATE);
    CHECK(q1.calls == 1 && q1.status == VKF_ERROR_STATE);
    CHECK(q2.calls == 1 && q2.status == VKF_OK && q2.len == want_len[2]);
    CHECK(q3.calls == 0);
    /* destroy with requests queued: each cancelled, once */
    hold = true;
    answer_slot left[3] = {{0}};
    CHECK_OK(vkf_scheduler_submit(s, ids[0], lens[0], &ho, on_done, &left[0], NULL));
    CHECK_OK(vkf_scheduler_submit(s, ids[1], lens[1], NULL, on_done, &left[1], NULL));
    pthread_mutex_lock(&mu);
    hold = false;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    vkf_scheduler_destroy(s);
    for (int i = 0; i < 2; i++) CHECK(left[i].calls == 1);
    vkf_scheduler_destroy(NULL);
    CHECK_STATUS(vkf_scheduler_create(NULL, NULL, &s), VKF_ERROR_INVALID_ARGUMENT);

    free(want);
    vkf_model_destroy(ref);
    harness_close(ref_ctx);
    vkf_model_destroy(m);
    harness_close(ctx);
    return harness_result("serve-scheduler");
}

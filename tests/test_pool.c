/* Device pools (include/vkformer.h, "device pools"; src/pool/pool.c) on two Vulkan
 * devices at once: lavapipe and SwiftShader, both listed in VK_ICD_FILENAMES.
 *  (a) references: every batch of the job decoded by a plain model on each device
 *      alone (greedy, and beam search with 3 beams and 2 best);
 *  (b) a pool of both devices: the batches collected in reverse order of submission
 *      each equal the reference of the device that ran it, bit for bit; both devices
 *      ran batches; the device counters add up; vkf_pool_generate gives the same
 *      in input order; a pool of one device equals that device alone;
 *  (c) a device that fails under a batch (vkQueueSubmit returning device lost, or
 *      out of device memory; the runtime's fault injection) leaves the pool, its
 *      batch goes back to the queue and runs on the other device: every result is
 *      still there and equal to the other device's reference; the failed slot says
 *      why. Both devices failing: every batch fails naming the last failure, and
 *      later submits are refused;
 *  (d) misuse: bad device lists, a device named twice, a model that does not load
 *      (the message names the device), bad sources and options, unknown and
 *      collected tickets, a batch whose options fail at run time (the device stays);
 *  (e) the balanced dispatch rule on numbers (vkf_pool_rule_takes).
 * (b) and (c) use VKF_POOL_DISPATCH_ANY_FREE, where every free device takes work;
 * (b) also runs the balanced default, where the result is the same whichever
 * device runs a batch.
 * Every context has the validation layer on; a message fails the test.
 * usage: test_pool MODEL.safetensors TEXTS.tsv */
#include "harness.h"
#include "pool/pool.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TEXTS 36
#define BATCH 4
#define BATCHES (TEXTS / BATCH)
#define MAX_NEW 12
#define BEAMS 3
#define NBEST 2

static atomic_int messages;

static void log_count(void *user, vkf_log_level level, const char *message)
{
    (void)user;
    if (level >= VKF_LOG_WARNING) atomic_fetch_add(&messages, 1);
    fprintf(stderr, "[%s] %s\n", level == VKF_LOG_ERROR ? "error" : level == VKF_LOG_WARNING ? "warning" : "info",
            message);
}

static int32_t src_ids[TEXTS][40];
static uint32_t src_lens[TEXTS];
static const int32_t *src_ptrs[TEXTS];

/* Per device (loader index 0 and 1) and batch: greedy and beam references. */
static int32_t ref_ids[2][BATCHES][BATCH * MAX_NEW];
static uint32_t ref_lens[2][BATCHES][BATCH];
static int32_t beam_ids[2][BATCHES][BATCH * NBEST * MAX_NEW];
static uint32_t beam_lens[2][BATCHES][BATCH * NBEST];
static float beam_scores[2][BATCHES][BATCH * NBEST];

static vkf_sequences batch_of(uint32_t k)
{
    return (vkf_sequences){BATCH, src_ptrs + k * BATCH, src_lens + k * BATCH};
}

static vkf_generate_options greedy_options(void)
{
    vkf_generate_options g;
    vkf_generate_options_init(&g);
    g.max_new = MAX_NEW;
    return g;
}

static vkf_generate_options beam_options(void)
{
    vkf_generate_options g = greedy_options();
    g.beams = BEAMS, g.n_best = NBEST;
    return g;
}

static vkf_context_options context_options;

/* The dispatch of the pools made next (tests that need both devices to take
 * work, or a slow device's first batch to fail, use ANY_FREE). */
static vkf_pool_dispatch dispatch = VKF_POOL_DISPATCH_ANY_FREE;

static void pool_options(vkf_pool_options *o, const char *devices)
{
    vkf_pool_options_init(o);
    o->devices = devices;
    o->dispatch = dispatch;
    vkf_context_options_init(&context_options);
    context_options.validation = 1;
    context_options.log = log_count;
    o->context = &context_options;
}

static bool read_texts(const char *path, char texts[TEXTS][128])
{
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[512];
    int n = 0;
    while (n < TEXTS && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\t\n")] = '\0';
        snprintf(texts[n++], 128, "%.127s", line);
    }
    fclose(f);
    return n == TEXTS;
}

/* (a) every batch on device `index` alone */
static void references(const char *model_path, uint32_t index)
{
    vkf_context_options co;
    vkf_context_options_init(&co);
    char request[16];
    snprintf(request, sizeof request, "%u", index);
    co.device = request;
    vkf_context *ctx = harness_context_with(&co);
    vkf_model *m = NULL;
    CHECK_OK(vkf_model_load(ctx, model_path, &m));
    vkf_generate_options b = beam_options();
    for (uint32_t k = 0; m && k < BATCHES; k++) {
        vkf_sequences s = batch_of(k);
        CHECK_OK(vkf_model_generate(m, &s, MAX_NEW, ref_ids[index][k], ref_lens[index][k]));
        CHECK_OK(vkf_model_generate_with(m, &s, &b, beam_ids[index][k], beam_lens[index][k], beam_scores[index][k]));
    }
    vkf_model_destroy(m);
    harness_close(ctx);
}

static bool same_batch(uint32_t device, uint32_t k, const int32_t *ids, const uint32_t *lens)
{
    return memcmp(ids, ref_ids[device][k], sizeof ref_ids[0][0]) == 0 &&
           memcmp(lens, ref_lens[device][k], sizeof ref_lens[0][0]) == 0;
}

/* The loader index of the device in slot `slot`. */
static uint32_t device_of(vkf_pool *p, uint32_t slot)
{
    vkf_pool_device d;
    if (vkf_pool_device_status(p, slot, &d) != VKF_OK) return UINT32_MAX;
    return d.info.index;
}

/* Submits every batch (greedy, or beam when beam), collects them last first, and
 * checks each against the reference of the device that ran it. Counts batches
 * per slot (runs[2]) and those that took more than one attempt. */
static void run_job(vkf_pool *p, bool beam, uint32_t runs[2], uint32_t *retried)
{
    uint64_t tickets[BATCHES];
    vkf_generate_options g = beam ? beam_options() : greedy_options();
    for (uint32_t k = 0; k < BATCHES; k++) {
        vkf_sequences s = batch_of(k);
        CHECK_OK(vkf_pool_submit(p, &s, &g, &tickets[k]));
    }
    for (uint32_t k = BATCHES; k-- > 0;) {
        int32_t ids[BATCH * NBEST * MAX_NEW];
        uint32_t lens[BATCH * NBEST];
        float scores[BATCH * NBEST];
        vkf_pool_batch info;
        vkf_status st = vkf_pool_collect(p, tickets[k], ids, lens, scores, &info);
        CHECK_OK(st);
        if (st != VKF_OK) continue;
        CHECK(info.device < 2 && info.attempts >= 1 && info.run_ms > 0 && info.queued_ms >= 0);
        CHECK(info.stats.steps >= 1 && info.stats.steps <= MAX_NEW);
        uint32_t dev = device_of(p, info.device);
        if (dev > 1) {
            CHECK(dev <= 1);
            continue;
        }
        runs[info.device]++;
        if (info.attempts > 1) (*retried)++;
        if (beam) {
            bool same = memcmp(ids, beam_ids[dev][k], sizeof beam_ids[0][0]) == 0 &&
                        memcmp(lens, beam_lens[dev][k], sizeof beam_lens[0][0]) == 0 &&
                        memcmp(scores, beam_scores[dev][k], sizeof beam_scores[0][0]) == 0;
            if (!same) fprintf(stderr, "beam batch %u from device %u differs from that device alone\n", k, dev);
            CHECK(same);
        } else {
            bool same = same_batch(dev, k, ids, lens);
            if (!same) fprintf(stderr, "batch %u from device %u differs from that device alone\n", k, dev);
            CHECK(same);
            for (uint32_t i = 0; i < BATCH; i++) CHECK(isnan(scores[i])); /* the greedy path has no scores */
        }
    }
}

static void check_counters(vkf_pool *p, const uint32_t runs[2])
{
    for (uint32_t s = 0; s < vkf_pool_device_count(p); s++) {
        vkf_pool_device d;
        CHECK_OK(vkf_pool_device_status(p, s, &d));
        CHECK(d.batches == runs[s] && d.sources == (uint64_t)runs[s] * BATCH);
        CHECK(d.active && (d.ready || runs[s] == 0)); /* a device that ran a batch had warmed up */
        CHECK(d.validation_errors == 0 && d.validation_warnings == 0);
    }
}

/* (b) both devices, then one */
static void test_pool_runs(const char *model_path)
{
    vkf_pool_options o;
    pool_options(&o, "0,1");
    vkf_pool *p = NULL;
    CHECK_OK(vkf_pool_create(model_path, &o, &p));
    if (!p) return;
    CHECK(vkf_pool_device_count(p) == 2 && device_of(p, 0) == 0 && device_of(p, 1) == 1);
    uint32_t runs[2] = {0, 0}, retried = 0;
    run_job(p, false, runs, &retried);
    fprintf(stderr, "two devices, greedy: slot 0 ran %u batches, slot 1 ran %u\n", runs[0], runs[1]);
    CHECK(runs[0] + runs[1] == BATCHES && runs[0] > 0 && runs[1] > 0 && retried == 0);
    check_counters(p, runs);
    uint32_t beam_runs[2] = {0, 0};
    run_job(p, true, beam_runs, &retried);
    CHECK(beam_runs[0] + beam_runs[1] == BATCHES && retried == 0);
    for (int s = 0; s < 2; s++) runs[s] += beam_runs[s];
    check_counters(p, runs);
    /* vkf_pool_generate: the whole job in input order, each batch as some device gives it */
    vkf_sequences all = {TEXTS, src_ptrs, src_lens};
    vkf_generate_options g = greedy_options();
    int32_t ids[TEXTS * MAX_NEW];
    uint32_t lens[TEXTS];
    CHECK_OK(vkf_pool_generate(p, &all, &g, BATCH, ids, lens, NULL));
    for (uint32_t k = 0; k < BATCHES; k++)
        CHECK(same_batch(0, k, ids + k * BATCH * MAX_NEW, lens + k * BATCH) ||
              same_batch(1, k, ids + k * BATCH * MAX_NEW, lens + k * BATCH));
    const vkf_model *m = vkf_pool_model(p);
    vkf_model_config c;
    CHECK(m && vkf_model_get_config(m, &c) == VKF_OK && c.max_len == 32);
    uint32_t e = 1, w = 1;
    CHECK_OK(vkf_pool_validation_counts(p, &e, &w));
    CHECK(e == 0 && w == 0);
    vkf_pool_destroy(p);

    for (uint32_t dev = 0; dev < 2; dev++) {
        char one[8];
        snprintf(one, sizeof one, "%u", dev);
        pool_options(&o, one);
        p = NULL;
        CHECK_OK(vkf_pool_create(model_path, &o, &p));
        if (!p) continue;
        CHECK(vkf_pool_device_count(p) == 1 && device_of(p, 0) == dev);
        CHECK_OK(vkf_pool_generate(p, &all, &g, BATCH, ids, lens, NULL));
        for (uint32_t k = 0; k < BATCHES; k++) CHECK(same_batch(dev, k, ids + k * BATCH * MAX_NEW, lens + k * BATCH));
        vkf_pool_destroy(p);
    }

    /* balanced dispatch: whichever device runs a batch, the job is the same, in order */
    dispatch = VKF_POOL_DISPATCH_BALANCED;
    pool_options(&o, "0,1");
    p = NULL;
    CHECK_OK(vkf_pool_create(model_path, &o, &p));
    if (p) {
        uint32_t balanced[2] = {0, 0};
        retried = 0;
        run_job(p, false, balanced, &retried);
        fprintf(stderr, "two devices, balanced: slot 0 ran %u batches, slot 1 ran %u\n", balanced[0], balanced[1]);
        CHECK(balanced[0] + balanced[1] == BATCHES && retried == 0);
        check_counters(p, balanced);
        vkf_pool_destroy(p);
    }
    dispatch = VKF_POOL_DISPATCH_ANY_FREE;

    /* "all": both CPU devices (no GPU here), in the loader's order */
    pool_options(&o, NULL);
    p = NULL;
    CHECK_OK(vkf_pool_create(model_path, &o, &p));
    CHECK(vkf_pool_device_count(p) == 2 && device_of(p, 0) == 0 && device_of(p, 1) == 1);
    vkf_pool_destroy(p);
}

/* (c) one device fails under a batch; then both */
static void test_failures(const char *model_path)
{
    static const struct {
        uint32_t slot, batch;
        VkResult result;
        vkf_status status;
    } cases[] = {
        {1, 2, VK_ERROR_DEVICE_LOST, VKF_ERROR_DEVICE_LOST},
        {0, 1, VK_ERROR_OUT_OF_DEVICE_MEMORY, VKF_ERROR_OUT_OF_DEVICE_MEMORY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vkf_pool_options o;
        pool_options(&o, "0,1");
        vkf_pool *p = NULL;
        CHECK_OK(vkf_pool_create(model_path, &o, &p));
        if (!p) continue;
        CHECK_OK(vkf_pool_test_fault(p, cases[i].slot, cases[i].batch, "vkQueueSubmit", cases[i].result));
        uint32_t runs[2] = {0, 0}, retried = 0;
        run_job(p, false, runs, &retried);
        uint32_t failed = cases[i].slot, other = 1 - failed;
        vkf_pool_device d;
        CHECK_OK(vkf_pool_device_status(p, failed, &d));
        CHECK(!d.active && d.failure == cases[i].status && strstr(d.failure_message, "vkQueueSubmit"));
        CHECK(d.batches == cases[i].batch - 1 && runs[failed] == cases[i].batch - 1);
        CHECK(runs[0] + runs[1] == BATCHES && retried == 1);
        fprintf(stderr, "slot %u failed (%s); slot %u ran %u batches, one of them returned to the queue\n", failed,
                d.failure_message, other, runs[other]);
        CHECK_OK(vkf_pool_device_status(p, other, &d));
        CHECK(d.active && d.failure == VKF_OK && d.failure_message[0] == '\0');
        /* the pool goes on with the device that is left */
        uint32_t more[2] = {0, 0};
        retried = 0;
        run_job(p, false, more, &retried);
        CHECK(more[other] == BATCHES && more[failed] == 0 && retried == 0);
        vkf_pool_destroy(p);
    }

    /* both fail: every batch fails, naming the last failure; later submits are refused */
    vkf_pool_options o;
    pool_options(&o, "0,1");
    vkf_pool *p = NULL;
    CHECK_OK(vkf_pool_create(model_path, &o, &p));
    if (!p) return;
    CHECK_OK(vkf_pool_test_fault(p, 0, 1, "vkQueueSubmit", VK_ERROR_DEVICE_LOST));
    CHECK_OK(vkf_pool_test_fault(p, 1, 1, "vkQueueSubmit", VK_ERROR_DEVICE_LOST));
    uint64_t tickets[BATCHES];
    vkf_generate_options g = greedy_options();
    for (uint32_t k = 0; k < BATCHES; k++) {
        vkf_sequences s = batch_of(k);
        CHECK_OK(vkf_pool_submit(p, &s, &g, &tickets[k]));
    }
    for (uint32_t k = 0; k < BATCHES; k++) {
        int32_t ids[BATCH * MAX_NEW];
        uint32_t lens[BATCH];
        CHECK_FAIL(vkf_pool_collect(p, tickets[k], ids, lens, NULL, NULL), VKF_ERROR_DEVICE_LOST, "no device of the pool");
    }
    vkf_sequences s = batch_of(0);
    uint64_t t = 99;
    CHECK_FAIL(vkf_pool_submit(p, &s, &g, &t), VKF_ERROR_DEVICE_LOST, "no device of the pool");
    CHECK(t == 0);
    vkf_pool_destroy(p);
}

/* (e) the balanced rule on numbers */
static void test_rule(void)
{
    static const struct {
        double mine;
        uint32_t others;
        double rates[3], free_in[3];
        uint32_t queued, counts[10];
        bool takes;
        const char *what;
    } cases[] = {
        {1, 1, {1}, {0}, 1, {4}, true, "equal devices, both free: take (a tie takes)"},
        {1, 1, {1}, {10}, 1, {4}, true, "the other busy for long: take"},
        {10, 1, {1}, {0}, 3, {4, 4, 4}, false, "ten times slower, a short queue: leave it"},
        {10, 1, {1}, {0}, 10, {4, 4, 4, 4, 4, 4, 4, 4, 4, 4}, true, "ten times slower, a queue it ends in time: take"},
        {10, 1, {1}, {0}, 9, {4, 4, 4, 4, 4, 4, 4, 4, 4}, false, "ten times slower, one batch short of that: leave"},
        {5, 2, {1, 1}, {0, 0}, 6, {4, 4, 4, 4, 4, 4}, false, "two fast others end the queue first: leave"},
        {5, 2, {1, 1}, {30, 30}, 2, {4, 4}, true, "two fast others busy for long: take"},
        {1, 1, {0}, {0}, 1, {4}, true, "the other's speed unknown (counted as equal): take"},
        {0, 1, {1}, {0}, 1, {4}, true, "own speed unknown: take (it gets measured)"},
        {3, 0, {0}, {0}, 1, {4}, true, "no other device: take"},
        {2, 1, {1}, {-5}, 2, {1, 1}, true, "a past free time counts as now"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool got = vkf_pool_rule_takes(cases[i].mine, cases[i].others, cases[i].rates, cases[i].free_in, cases[i].queued,
                                       cases[i].counts);
        if (got != cases[i].takes) fprintf(stderr, "rule: %s: got %s\n", cases[i].what, got ? "take" : "leave");
        CHECK(got == cases[i].takes);
    }
}

/* (d) */
static void test_misuse(const char *model_path)
{
    vkf_pool_options o;
    vkf_pool *p = (vkf_pool *)1;
    static const struct {
        const char *devices;
        vkf_status status;
        const char *keyword;
    } lists[] = {
        {"", VKF_ERROR_INVALID_ARGUMENT, "empty"},
        {"0,,1", VKF_ERROR_INVALID_ARGUMENT, "empty"},
        {"0,", VKF_ERROR_INVALID_ARGUMENT, "empty"},
        {"0,0", VKF_ERROR_INVALID_ARGUMENT, "named twice"},
        {"1,llvmpipe,swiftshader", VKF_ERROR_INVALID_ARGUMENT, "named twice"},
        {"0,7", VKF_ERROR_NO_DEVICE, "device index 7"},
        {"no-such-gpu", VKF_ERROR_NO_DEVICE, "no-such-gpu"},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        pool_options(&o, lists[i].devices);
        p = (vkf_pool *)1;
        CHECK_FAIL(vkf_pool_create(model_path, &o, &p), lists[i].status, lists[i].keyword);
        CHECK(p == NULL);
    }
    pool_options(&o, "0,1");
    CHECK_FAIL(vkf_pool_create(NULL, &o, &p), VKF_ERROR_INVALID_ARGUMENT, "path");
    CHECK_FAIL(vkf_pool_create(model_path, &o, NULL), VKF_ERROR_INVALID_ARGUMENT, "out_pool");
    CHECK_FAIL(vkf_pool_create("/nonexistent/model.safetensors", &o, &p), VKF_ERROR_IO, "device 0");
    o.self_attention = "local:x";
    CHECK_FAIL(vkf_pool_create(model_path, &o, &p), VKF_ERROR_INVALID_ARGUMENT, "local");
    o.self_attention = NULL;
    o.dispatch = (vkf_pool_dispatch)7;
    CHECK_FAIL(vkf_pool_create(model_path, &o, &p), VKF_ERROR_INVALID_ARGUMENT, "dispatch 7");
    o.dispatch = VKF_POOL_DISPATCH_BALANCED;
    setenv("VKFORMER_POOL_FAULT", "0:1:vkQueueSubmit:gone", 1);
    CHECK_FAIL(vkf_pool_create(model_path, &o, &p), VKF_ERROR_INVALID_ARGUMENT, "VKFORMER_POOL_FAULT");
    setenv("VKFORMER_POOL_FAULT", "2:1:vkQueueSubmit:device-lost", 1);
    CHECK_FAIL(vkf_pool_create(model_path, &o, &p), VKF_ERROR_INVALID_ARGUMENT, "slot 2 of 2");
    unsetenv("VKFORMER_POOL_FAULT");
    vkf_pool_destroy(NULL);
    CHECK(vkf_pool_device_count(NULL) == 0 && vkf_pool_model(NULL) == NULL);

    p = NULL;
    CHECK_OK(vkf_pool_create(model_path, &o, &p));
    if (!p) return;
    uint64_t t = 0;
    vkf_generate_options g = greedy_options();
    int32_t bad_id[] = {5, 34, 2}, empty[1] = {0};
    const int32_t *ptr = bad_id;
    uint32_t len = 3;
    vkf_sequences bad = {1, &ptr, &len};
    CHECK_FAIL(vkf_pool_submit(p, &bad, &g, &t), VKF_ERROR_INVALID_ARGUMENT, "outside 0..33");
    ptr = empty, len = 0;
    CHECK_FAIL(vkf_pool_submit(p, &bad, &g, &t), VKF_ERROR_INVALID_ARGUMENT, "empty");
    vkf_sequences none = {0, NULL, NULL};
    CHECK_FAIL(vkf_pool_submit(p, &none, &g, &t), VKF_ERROR_INVALID_ARGUMENT, "no sources");
    vkf_sequences s = batch_of(0);
    g.max_new = 33;
    CHECK_FAIL(vkf_pool_submit(p, &s, &g, &t), VKF_ERROR_INVALID_ARGUMENT, "max_len 32");
    CHECK_FAIL(vkf_pool_submit(p, &s, NULL, NULL), VKF_ERROR_INVALID_ARGUMENT, "out_ticket");
    /* an option the generation call refuses: that batch fails, the devices stay */
    g = greedy_options();
    g.beams = 17;
    CHECK_OK(vkf_pool_submit(p, &s, &g, &t));
    int32_t ids[BATCH * NBEST * MAX_NEW];
    uint32_t lens[BATCH * NBEST];
    CHECK_FAIL(vkf_pool_collect(p, t, ids, lens, NULL, NULL), VKF_ERROR_INVALID_ARGUMENT, "beams");
    CHECK_FAIL(vkf_pool_collect(p, t, ids, lens, NULL, NULL), VKF_ERROR_INVALID_ARGUMENT, "not a batch waiting");
    CHECK_FAIL(vkf_pool_collect(p, 12345, ids, lens, NULL, NULL), VKF_ERROR_INVALID_ARGUMENT, "ticket 12345");
    CHECK_FAIL(vkf_pool_collect(p, t, NULL, lens, NULL, NULL), VKF_ERROR_INVALID_ARGUMENT, "out_ids");
    for (uint32_t i = 0; i < 2; i++) {
        vkf_pool_device d;
        CHECK_OK(vkf_pool_device_status(p, i, &d));
        CHECK(d.active);
    }
    vkf_pool_device d;
    CHECK_FAIL(vkf_pool_device_status(p, 2, &d), VKF_ERROR_INVALID_ARGUMENT, "slot 2");
    g = greedy_options();
    CHECK_OK(vkf_pool_submit(p, &s, &g, &t));
    CHECK_OK(vkf_pool_collect(p, t, ids, lens, NULL, NULL));
    CHECK(same_batch(0, 0, ids, lens) || same_batch(1, 0, ids, lens));
    /* transcription: this model reads no audio; a ticket of one kind is not collected as the other */
    float second[16000] = {0};
    vkf_transcript *tr = (vkf_transcript *)1;
    CHECK_FAIL(vkf_pool_submit_transcribe(p, second, 16000, NULL, &t), VKF_ERROR_STATE, "does not read audio");
    CHECK_FAIL(vkf_pool_submit_transcribe(p, NULL, 16000, NULL, &t), VKF_ERROR_INVALID_ARGUMENT, "samples");
    CHECK_FAIL(vkf_pool_submit_transcribe(NULL, second, 16000, NULL, &t), VKF_ERROR_INVALID_ARGUMENT, "pool");
    CHECK_OK(vkf_pool_submit(p, &s, &g, &t));
    CHECK_FAIL(vkf_pool_collect_transcript(p, t, &tr, NULL), VKF_ERROR_INVALID_ARGUMENT, "vkf_pool_collect collects it");
    CHECK(tr == NULL);
    CHECK_FAIL(vkf_pool_collect_transcript(p, t, NULL, NULL), VKF_ERROR_INVALID_ARGUMENT, "out_transcript");
    CHECK_OK(vkf_pool_collect(p, t, ids, lens, NULL, NULL));
    CHECK_FAIL(vkf_pool_collect_transcript(p, t, &tr, NULL), VKF_ERROR_INVALID_ARGUMENT, "not a transcription");
    /* submitted, never collected: destroy drops it */
    CHECK_OK(vkf_pool_submit(p, &s, &g, &t));
    CHECK_OK(vkf_pool_submit(p, &s, &g, &t));
    vkf_pool_destroy(p);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.safetensors TEXTS.tsv\n", argv[0]);
        return 2;
    }
    uint32_t count = 0;
    CHECK_OK(vkf_devices_list(NULL, 0, &count));
    if (count < 2) {
        fprintf(stderr, "test_pool needs two Vulkan devices (lavapipe and SwiftShader both in VK_ICD_FILENAMES); "
                        "found %u\n", count);
        return 1;
    }
    static char texts[TEXTS][128];
    if (!read_texts(argv[2], texts)) {
        fprintf(stderr, "cannot read %d texts from %s\n", TEXTS, argv[2]);
        return 1;
    }
    {
        vkf_context *ctx = harness_context();
        vkf_model *m = NULL;
        CHECK_OK(vkf_model_load(ctx, argv[1], &m));
        for (int i = 0; m && i < TEXTS; i++) {
            CHECK_OK(vkf_model_encode_text(m, texts[i], src_ids[i], 40, &src_lens[i]));
            src_ptrs[i] = src_ids[i];
        }
        vkf_model_destroy(m);
        harness_close(ctx);
    }
    references(argv[1], 0);
    references(argv[1], 1);
    test_pool_runs(argv[1]);
    test_failures(argv[1]);
    test_misuse(argv[1]);
    test_rule();
    if (atomic_load(&messages)) {
        fprintf(stderr, "%d validation messages from the pools' contexts\n", atomic_load(&messages));
        harness_failures++;
    }
    return harness_result("pool");
}

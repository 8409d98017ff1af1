/* Threads: distinct contexts used from distinct threads at once (include/vkformer.h,
 * "Threads"), on the models the build writes (argv[1] is the directory holding
 * model_post.safetensors and model_pre.safetensors, as for test_model).
 *  (a) two threads, each with its own context, load the same model and run forward
 *      (a batch of 2) and generate several times at once; then the same with a
 *      different model per thread. Every result equals the same computation done
 *      on the main thread beforehand, bit for bit;
 *  (b) two threads list the devices and create and destroy contexts (with a tensor
 *      round trip and a small matmul each) concurrently; every listing equals the
 *      main thread's;
 *  (c) vkf_last_error() is per thread: a thread that has not failed reads "", and a
 *      failure on one thread never shows in another's message, also while both fail
 *      in a loop at once.
 * Every context has the validation layer on; any message it sends fails the test.
 * The threads count their own failures; the main thread adds them up. */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 2
#define BATCH 2
#define MAX_NEW 10
#define REPEATS 4
#define CONTEXT_CYCLES 8
#define ERROR_LOOPS 2000

static const char *model_dir;
static const char *const MODEL_FILES[2] = {"model_post.safetensors", "model_pre.safetensors"};

/* ------------------------------------------------------------------ helpers */

static atomic_int validation_messages;
static pthread_mutex_t print_mutex = PTHREAD_MUTEX_INITIALIZER;

static void log_counting(void *user, vkf_log_level level, const char *message)
{
    if (level >= VKF_LOG_WARNING) atomic_fetch_add(&validation_messages, 1);
    pthread_mutex_lock(&print_mutex);
    fprintf(stderr, "[%s%s%s] %s\n", user ? (const char *)user : "", user ? " " : "",
            level == VKF_LOG_ERROR ? "error" : level == VKF_LOG_WARNING ? "warning" : "info", message);
    pthread_mutex_unlock(&print_mutex);
}

/* Failures counted per thread; added to harness_failures by the main thread. */
typedef struct worker {
    int id;
    const char *tag;                    /* "thread 0", ... */
    int failures;
    /* (a) */
    const char *model_file;
    int model_index;
    /* (b) */
    uint32_t device_count;
    /* (c) */
    const char *last_error_address;
} worker;

#define TFAIL(w, ...)                                                                               \
    do {                                                                                            \
        pthread_mutex_lock(&print_mutex);                                                           \
        fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, (w)->tag);                               \
        fprintf(stderr, __VA_ARGS__);                                                               \
        fprintf(stderr, "\n");                                                                      \
        pthread_mutex_unlock(&print_mutex);                                                         \
        (w)->failures++;                                                                            \
    } while (0)

#define TCHECK(w, cond)                                                                             \
    do {                                                                                            \
        if (!(cond)) TFAIL(w, "CHECK failed: %s", #cond);                                           \
    } while (0)

#define TCHECK_OK(w, expr)                                                                          \
    do {                                                                                            \
        vkf_status tst_ = (expr);                                                                   \
        if (tst_ != VKF_OK) TFAIL(w, "%s returned %s: %s", #expr, vkf_status_string(tst_), vkf_last_error()); \
    } while (0)

/* A context with validation forced on, or NULL (counted as a failure). */
static vkf_context *open_context(worker *w)
{
    vkf_context_options o;
    vkf_context_options_init(&o);
    o.validation = 1;
    o.log = log_counting;
    o.log_user = (void *)(w ? w->tag : "main");
    vkf_context *ctx = NULL;
    vkf_status st = vkf_context_create(&o, &ctx);
    if (st != VKF_OK) {
        if (w) TFAIL(w, "cannot create a context: %s: %s", vkf_status_string(st), vkf_last_error());
        else {
            fprintf(stderr, "cannot create a context: %s: %s\n", vkf_status_string(st), vkf_last_error());
            exit(1);
        }
        return NULL;
    }
    bool on = false;
    vkf_context_validation_counts(ctx, NULL, NULL, &on);
    if (!on) {
        fprintf(stderr, "the validation layer is not active\n");
        exit(1);
    }
    return ctx;
}

static void close_context(worker *w, vkf_context *ctx)
{
    if (!ctx) return;
    uint32_t errors = 0, warnings = 0;
    vkf_context_validation_counts(ctx, &errors, &warnings, NULL);
    if (errors || warnings) {
        if (w) TFAIL(w, "the validation layer reported %u errors and %u warnings", errors, warnings);
        else {
            fprintf(stderr, "main: the validation layer reported %u errors and %u warnings\n", errors, warnings);
            harness_failures++;
        }
    }
    vkf_context_destroy(ctx); /* messages sent here are counted by validation_messages */
}

static char *model_path(const char *file)
{
    size_t n = strlen(model_dir) + strlen(file) + 2;
    char *p = harness_alloc(n);
    snprintf(p, n, "%s/%s", model_dir, file);
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------ model runs */

typedef struct result {
    float *logits;
    size_t floats;
    int32_t ids[BATCH * MAX_NEW];
    uint32_t lengths[BATCH];
} result;

static const uint32_t SRC_LEN[BATCH] = {7, 4};
static const uint32_t TGT_LEN[BATCH] = {5, 3};

/* Forward of a fixed batch of 2, then greedy generation from its sources. */
static vkf_status run_model(vkf_model *m, result *r)
{
    vkf_model_config c;
    vkf_model_get_config(m, &c);
    int32_t src_ids[BATCH][8], tgt_ids[BATCH][8];
    const int32_t *src_rows[BATCH], *tgt_rows[BATCH];
    for (uint32_t i = 0; i < BATCH; i++) {
        for (uint32_t j = 0; j < 8; j++) {
            src_ids[i][j] = (int32_t)((3 + 7 * i + 3 * j + i * j) % c.src_vocab_size);
            tgt_ids[i][j] = (int32_t)((5 + 7 * i + 3 * j + i * j) % c.tgt_vocab_size);
        }
        tgt_ids[i][0] = c.bos_id;
        src_rows[i] = src_ids[i];
        tgt_rows[i] = tgt_ids[i];
    }
    vkf_sequences src = {BATCH, src_rows, SRC_LEN}, tgt = {BATCH, tgt_rows, TGT_LEN};
    uint32_t T = TGT_LEN[0] > TGT_LEN[1] ? TGT_LEN[0] : TGT_LEN[1];
    r->floats = (size_t)BATCH * T * c.tgt_vocab_size;
    r->logits = harness_alloc(r->floats * sizeof(float));
    memset(r->ids, 0, sizeof r->ids);
    memset(r->lengths, 0, sizeof r->lengths);
    vkf_status st = vkf_model_forward(m, &src, &tgt, r->logits, r->floats);
    if (st == VKF_OK) st = vkf_model_generate(m, &src, MAX_NEW, r->ids, r->lengths);
    return st;
}

static bool same_result(const result *a, const result *b)
{
    return a->floats == b->floats && memcmp(a->logits, b->logits, a->floats * sizeof(float)) == 0 &&
           memcmp(a->ids, b->ids, sizeof a->ids) == 0 && memcmp(a->lengths, b->lengths, sizeof a->lengths) == 0;
}

/* Single-threaded results of each model, computed first. */
static result reference[2];

/* ------------------------------------------------------------------ (a) models on two threads */

static pthread_barrier_t barrier;

static void *model_worker(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(&barrier); /* create the contexts at once */
    vkf_context *ctx = open_context(w);
    char *path = model_path(w->model_file);
    vkf_model *m = NULL;
    if (ctx) {
        vkf_status st = vkf_model_load(ctx, path, &m);
        if (st != VKF_OK) TFAIL(w, "cannot load %s: %s: %s", path, vkf_status_string(st), vkf_last_error());
    }
    pthread_barrier_wait(&barrier); /* run at once */
    for (int rep = 0; m && rep < REPEATS; rep++) {
        result r;
        vkf_status st = run_model(m, &r);
        if (st != VKF_OK) TFAIL(w, "run %d: %s: %s", rep, vkf_status_string(st), vkf_last_error());
        else if (!same_result(&r, &reference[w->model_index]))
            TFAIL(w, "run %d of %s differs from the single-threaded run", rep, w->model_file);
        free(r.logits);
    }
    vkf_model_destroy(m);
    close_context(w, ctx);
    free(path);
    return NULL;
}

static void run_workers(void *(*fn)(void *), worker *w)
{
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&threads[i], NULL, fn, &w[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(1);
        }
    for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < THREADS; i++) harness_failures += w[i].failures;
}

static void test_models(void)
{
    for (int k = 0; k < 2; k++) {
        vkf_context *ctx = open_context(NULL);
        char *path = model_path(MODEL_FILES[k]);
        vkf_model *m = NULL;
        vkf_status st = vkf_model_load(ctx, path, &m);
        if (st != VKF_OK) {
            fprintf(stderr, "cannot load %s: %s: %s\n", path, vkf_status_string(st), vkf_last_error());
            exit(1);
        }
        CHECK_OK(run_model(m, &reference[k]));
        /* the same twice on one thread, to tell nondeterminism from thread trouble */
        result again;
        CHECK_OK(run_model(m, &again));
        if (!same_result(&again, &reference[k])) {
            fprintf(stderr, "%s: two runs on one thread differ\n", MODEL_FILES[k]);
            harness_failures++;
        }
        free(again.logits);
        vkf_model_destroy(m);
        close_context(NULL, ctx);
        free(path);
    }
    /* the same model on both threads, then one model each */
    for (int variant = 0; variant < 2; variant++) {
        worker w[THREADS] = {{.id = 0, .tag = "thread 0"}, {.id = 1, .tag = "thread 1"}};
        for (int i = 0; i < THREADS; i++) {
            w[i].model_index = variant == 0 ? 0 : i;
            w[i].model_file = MODEL_FILES[w[i].model_index];
        }
        double t0 = now_s();
        run_workers(model_worker, w);
        fprintf(stderr, "models on two threads (%s): %.1f s\n", variant == 0 ? "the same model" : "one model each",
                now_s() - t0);
    }
}

/* ------------------------------------------------------------------ (b) devices and contexts */

static vkf_device_info main_devices[8];
static uint32_t main_device_count;

static void check_devices(worker *w)
{
    vkf_device_info infos[8];
    uint32_t count = 0;
    memset(infos, 0, sizeof infos);
    TCHECK_OK(w, vkf_devices_list(infos, 8, &count));
    if (count != main_device_count) {
        TFAIL(w, "%u devices listed, %u on the main thread", count, main_device_count);
        return;
    }
    for (uint32_t i = 0; i < count && i < 8; i++)
        if (strcmp(infos[i].name, main_devices[i].name) != 0 || infos[i].index != main_devices[i].index ||
            infos[i].max_storage_buffer_range != main_devices[i].max_storage_buffer_range ||
            infos[i].heap_count != main_devices[i].heap_count)
            TFAIL(w, "device %u listed as \"%s\", as \"%s\" on the main thread", i, infos[i].name, main_devices[i].name);
}

/* A context, a tensor round trip and a 3x5x4 matmul against ref_matmul. */
static void context_cycle(worker *w, int cycle)
{
    vkf_context *ctx = open_context(w);
    if (!ctx) return;
    float *a = harness_random(3 * 4, 100 + cycle + 10 * w->id), *b = harness_random(5 * 4, 200 + cycle);
    float want[15], got[15];
    ref_matmul(want, 5, a, 4, b, 4, false, NULL, NULL, 0, 3, 5, 4, 1.0f, 0);
    uint64_t sa[2] = {3, 4}, sb[2] = {5, 4}, sc[2] = {3, 5};
    vkf_tensor *ta = NULL, *tb = NULL, *tc = NULL;
    vkf_cmd *cmd = NULL;
    TCHECK_OK(w, vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, sa, &ta));
    TCHECK_OK(w, vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, sb, &tb));
    TCHECK_OK(w, vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, sc, &tc));
    if (ta && tb && tc) {
        float back[12];
        TCHECK_OK(w, vkf_tensor_upload(ta, a, sizeof back));
        TCHECK_OK(w, vkf_tensor_download(ta, back, sizeof back));
        TCHECK(w, memcmp(a, back, sizeof back) == 0);
        TCHECK_OK(w, vkf_tensor_upload(tb, b, 5 * 4 * 4));
        TCHECK_OK(w, vkf_cmd_create(ctx, 0, &cmd));
        if (cmd) {
            vkf_matmul_desc d;
            vkf_matmul_desc_init(&d);
            d.m = 3, d.n = 5, d.k = 4;
            d.a.tensor = ta, d.b.tensor = tb, d.c.tensor = tc;
            TCHECK_OK(w, vkf_cmd_matmul(cmd, &d));
            TCHECK_OK(w, vkf_cmd_submit(cmd));
            TCHECK_OK(w, vkf_tensor_download(tc, got, sizeof got));
            for (int i = 0; i < 15; i++)
                if (!(got[i] - want[i] <= 1e-5f + 1e-5f * (want[i] < 0 ? -want[i] : want[i]) &&
                      want[i] - got[i] <= 1e-5f + 1e-5f * (want[i] < 0 ? -want[i] : want[i]))) {
                    TFAIL(w, "cycle %d: matmul element %d is %.9g, expected %.9g", cycle, i, got[i], want[i]);
                    break;
                }
        }
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tc);
    free(a), free(b);
    close_context(w, ctx);
}

static void *device_worker(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(&barrier);
    for (int cycle = 0; cycle < CONTEXT_CYCLES; cycle++) {
        /* the threads interleave: one lists while the other makes a context */
        if ((cycle + w->id) % 2 == 0) {
            check_devices(w);
            context_cycle(w, cycle);
        } else {
            context_cycle(w, cycle);
            check_devices(w);
            check_devices(w);
        }
    }
    return NULL;
}

static void test_devices_and_contexts(void)
{
    CHECK_OK(vkf_devices_list(main_devices, 8, &main_device_count));
    CHECK(main_device_count >= 1);
    worker w[THREADS] = {{.id = 0, .tag = "thread 0"}, {.id = 1, .tag = "thread 1"}};
    double t0 = now_s();
    run_workers(device_worker, w);
    fprintf(stderr, "device lists and contexts on two threads: %.1f s\n", now_s() - t0);
}

/* ------------------------------------------------------------------ (c) vkf_last_error per thread */

/* A failing call whose message carries the thread's own number. */
static vkf_status fail_with(uint32_t number)
{
    uint32_t count;
    return vkf_devices_list(NULL, number, &count); /* "out_infos is NULL with capacity N" */
}

static bool says(const char *message, uint32_t number)
{
    char want[32];
    snprintf(want, sizeof want, "capacity %u", number);
    return strstr(message, want) != NULL;
}

static void *error_worker(void *arg)
{
    worker *w = arg;
    uint32_t mine = 1111 * (uint32_t)(w->id + 1), theirs = 1111 * (uint32_t)(2 - w->id);
    w->last_error_address = vkf_last_error();
    /* A new thread has no failure yet, whatever the others did. */
    if (vkf_last_error()[0] != '\0') TFAIL(w, "a new thread's last error is \"%s\", not \"\"", vkf_last_error());
    if (w->id == 0) {
        TCHECK(w, fail_with(mine) == VKF_ERROR_INVALID_ARGUMENT);
        TCHECK(w, says(vkf_last_error(), mine));
    }
    pthread_barrier_wait(&barrier); /* thread 0 has failed */
    if (w->id == 1) {
        if (vkf_last_error()[0] != '\0')
            TFAIL(w, "thread 0's failure shows in thread 1's last error: \"%s\"", vkf_last_error());
        TCHECK(w, fail_with(mine) == VKF_ERROR_INVALID_ARGUMENT);
        TCHECK(w, says(vkf_last_error(), mine));
    }
    pthread_barrier_wait(&barrier); /* thread 1 has failed */
    if (!says(vkf_last_error(), mine))
        TFAIL(w, "after the other thread failed, this thread's last error is \"%s\"", vkf_last_error());
    /* A successful call leaves the message alone. */
    uint32_t count = 0;
    TCHECK_OK(w, vkf_devices_list(NULL, 0, &count));
    if (!says(vkf_last_error(), mine)) TFAIL(w, "a successful call changed the last error to \"%s\"", vkf_last_error());
    pthread_barrier_wait(&barrier);
    /* Both fail at once, many times. */
    int wrong = 0;
    for (int i = 0; i < ERROR_LOOPS; i++) {
        fail_with(mine);
        const char *msg = vkf_last_error();
        if (!says(msg, mine) || says(msg, theirs)) wrong++;
    }
    if (wrong) TFAIL(w, "%d of %d last errors were not this thread's own", wrong, ERROR_LOOPS);
    return NULL;
}

static void test_last_error(void)
{
    const uint32_t main_number = 3333;
    CHECK(fail_with(main_number) == VKF_ERROR_INVALID_ARGUMENT);
    CHECK(says(vkf_last_error(), main_number));
    worker w[THREADS] = {{.id = 0, .tag = "thread 0"}, {.id = 1, .tag = "thread 1"}};
    run_workers(error_worker, w);
    if (!says(vkf_last_error(), main_number)) {
        fprintf(stderr, "the threads' failures changed the main thread's last error to \"%s\"\n", vkf_last_error());
        harness_failures++;
    }
    if (w[0].last_error_address == w[1].last_error_address || w[0].last_error_address == vkf_last_error()) {
        fprintf(stderr, "vkf_last_error() returns the same buffer on two threads\n");
        harness_failures++;
    }
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR (the build directory holding model_post.safetensors)\n", argv[0]);
        return 2;
    }
    model_dir = argv[1];
    pthread_barrier_init(&barrier, NULL, THREADS);
    double t0 = now_s();
    test_last_error();
    test_models();
    test_devices_and_contexts();
    fprintf(stderr, "done in %.1f s\n", now_s() - t0);
    for (int k = 0; k < 2; k++) free(reference[k].logits);
    pthread_barrier_destroy(&barrier);
    int messages = atomic_load(&validation_messages);
    if (messages) {
        fprintf(stderr, "%d validation messages in all (see above)\n", messages);
        harness_failures++;
    }
    return harness_result("test_threads");
}

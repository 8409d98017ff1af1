/* Reliability: lifetimes, memory limits and failing drivers, on the models the build
 * writes (argv[1] is the directory holding model_post.safetensors and
 * model_pre.safetensors, as for test_model).
 *  (a) lifecycle, 50 times: context -> model load -> forward (batch of 2) -> generate
 *      -> model destroy -> context destroy. Every iteration gives bit-identical
 *      results; no tensor outlives its model (vkf_context_memory_usage), the
 *      validation layer reports nothing (leaked Vulkan objects are reported at
 *      vkDestroyDevice / vkDestroyInstance), the model file is not left mapped, and
 *      host memory does not grow between iteration 10 and iteration 50 (mallinfo2
 *      bytes in use, open file descriptors; RSS is printed);
 *  (b) max_device_memory: a cap far below the model fails the load with
 *      VKF_ERROR_OUT_OF_DEVICE_MEMORY naming the bytes needed and available, and the
 *      same context runs a small matmul; a cap that holds the model but not a large
 *      batch fails that forward / generate, and small ones then still work and equal
 *      an uncapped context's results;
 *  (c) a driver's vkAllocateMemory failing (vkf_test_inject_fault) fails tensor
 *      creation, a staged upload, model load, forward and generate with a status and
 *      a message naming the call and the VkResult, releases everything, and the
 *      context keeps working;
 *  (d) VK_ERROR_DEVICE_LOST from vkQueueSubmit or vkWaitForFences fails the submit
 *      naming the call, and afterwards every call on the context fails with
 *      VKF_ERROR_DEVICE_LOST saying so (never crashes); destroying it works. Other
 *      failing results name the call and the VkResult and leave the context usable.
 * Every context has the validation layer on; any message it sends, including while a
 * context is destroyed, fails the test. */
#include "harness.h"
#include "internal.h"

#include <dirent.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCH 2
#define MAX_NEW 10
#define LIFECYCLE_ITERATIONS 50
#define LIFECYCLE_FIRST_SAMPLE 10

static const char *model_dir;

/* ------------------------------------------------------------------ helpers */

static atomic_int validation_messages;

static void log_counting(void *user, vkf_log_level level, const char *message)
{
    (void)user;
    if (level >= VKF_LOG_WARNING) atomic_fetch_add(&validation_messages, 1);
    fprintf(stderr, "[%s] %s\n", level == VKF_LOG_ERROR ? "error" : level == VKF_LOG_WARNING ? "warning" : "info",
            message);
}

/* A context with validation forced on; cap and block size 0 for the defaults. */
static vkf_context *open_context_with(uint64_t cap, uint64_t block_size, bool allow_host_visible)
{
    vkf_context_options o;
    vkf_context_options_init(&o);
    o.validation = 1;
    o.log = log_counting;
    o.max_device_memory = cap;
    o.block_size = block_size;
    o.allow_host_visible = allow_host_visible;
    vkf_context *ctx = NULL;
    vkf_status st = vkf_context_create(&o, &ctx);
    if (st != VKF_OK) {
        fprintf(stderr, "cannot create a context: %s: %s\n", vkf_status_string(st), vkf_last_error());
        exit(1);
    }
    bool on = false;
    vkf_context_validation_counts(ctx, NULL, NULL, &on);
    if (!on) {
        fprintf(stderr, "the validation layer is not active\n");
        exit(1);
    }
    return ctx;
}

static vkf_context *open_context(uint64_t cap, uint64_t block_size)
{
    return open_context_with(cap, block_size, true);
}

/* Destroys the context; fails on any validation message counted while it lived or
 * sent while it was destroyed (objects left alive are reported then). */
static void close_context(vkf_context *ctx, const char *what)
{
    uint32_t errors = 0, warnings = 0;
    vkf_context_validation_counts(ctx, &errors, &warnings, NULL);
    if (errors || warnings) {
        fprintf(stderr, "%s: the validation layer reported %u errors and %u warnings\n", what, errors, warnings);
        harness_failures++;
    }
    int before = atomic_load(&validation_messages);
    vkf_context_destroy(ctx);
    int during = atomic_load(&validation_messages) - before;
    if (during) {
        fprintf(stderr, "%s: %d validation messages while the context was destroyed (objects left alive?)\n", what,
                during);
        harness_failures++;
    }
}

static char *model_path(const char *file)
{
    size_t n = strlen(model_dir) + strlen(file) + 2;
    char *p = harness_alloc(n);
    snprintf(p, n, "%s/%s", model_dir, file);
    return p;
}

static vkf_model *load_model(vkf_context *ctx, const char *file)
{
    char *path = model_path(file);
    vkf_model *m = NULL;
    vkf_status st = vkf_model_load(ctx, path, &m);
    if (st != VKF_OK) {
        fprintf(stderr, "cannot load %s: %s: %s\n", path, vkf_status_string(st), vkf_last_error());
        exit(1);
    }
    free(path);
    return m;
}

static bool contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

/* The call fails with `status` and its message contains both keywords (NULL: skip). */
#define CHECK_FAIL2(expr, status, kw1, kw2)                                                         \
    do {                                                                                            \
        vkf_fail(VKF_ERROR_STATE, "stale message");                                                 \
        int failures_before_ = harness_failures;                                                    \
        CHECK_STATUS(expr, status);                                                                 \
        const char *msg_ = vkf_last_error();                                                        \
        const char *kw1_ = (kw1), *kw2_ = (kw2);                                                    \
        if (harness_failures == failures_before_ &&                                                 \
            ((kw1_ && !contains(msg_, kw1_)) || (kw2_ && !contains(msg_, kw2_)) ||                  \
             contains(msg_, "stale message"))) {                                                    \
            fprintf(stderr, "%s:%d: %s: message \"%s\" does not mention \"%s\"%s%s%s\n", __FILE__,   \
                    __LINE__, #expr, msg_, kw1_ ? kw1_ : "", kw2_ ? " and \"" : "", kw2_ ? kw2_ : "",  \
                    kw2_ ? "\"" : "");                                                              \
            harness_failures++;                                                                     \
        }                                                                                           \
    } while (0)

/* The unsigned number right after `key` in msg. */
static bool number_after(const char *msg, const char *key, unsigned long long *out)
{
    const char *p = strstr(msg, key);
    return p && sscanf(p + strlen(key), "%llu", out) == 1;
}

/* The unsigned number right before `key` in msg. */
static bool number_before(const char *msg, const char *key, unsigned long long *out)
{
    const char *p = strstr(msg, key);
    if (!p || p == msg) return false;
    const char *q = p;
    while (q > msg && q[-1] >= '0' && q[-1] <= '9') q--;
    return q < p && sscanf(q, "%llu", out) == 1;
}

static void usage(vkf_context *ctx, uint64_t *allocated, uint64_t *used)
{
    CHECK_OK(vkf_context_memory_usage(ctx, allocated, used));
}

/* ------------------------------------------------------------------ model runs */

/* Fixed inputs: a batch of sequences of the given lengths, ids from a counter. */
typedef struct batch {
    vkf_sequences s;
    int32_t *ids[64];
    uint32_t lengths[64];
} batch;

static void batch_make(batch *b, uint32_t count, const uint32_t *lengths, uint32_t vocab, int32_t first, uint32_t seed)
{
    memset(b, 0, sizeof *b);
    for (uint32_t i = 0; i < count; i++) {
        b->lengths[i] = lengths[i];
        b->ids[i] = harness_alloc(lengths[i] * sizeof(int32_t));
        for (uint32_t j = 0; j < lengths[i]; j++) b->ids[i][j] = (int32_t)((seed + 7 * i + 3 * j + i * j) % vocab);
        if (first >= 0) b->ids[i][0] = first;
    }
    b->s.count = count;
    b->s.ids = (const int32_t *const *)b->ids;
    b->s.lengths = b->lengths;
}

static void batch_free(batch *b)
{
    for (uint32_t i = 0; i < b->s.count; i++) free(b->ids[i]);
}

static void batch_uniform(batch *b, uint32_t count, uint32_t length, uint32_t vocab, int32_t first, uint32_t seed)
{
    uint32_t lengths[64];
    for (uint32_t i = 0; i < count; i++) lengths[i] = length;
    batch_make(b, count, lengths, vocab, first, seed);
}

/* What one forward (batch of 2) and one generate (the same sources) give. */
typedef struct run_result {
    float *logits;
    size_t floats;
    int32_t ids[BATCH * MAX_NEW];
    uint32_t lengths[BATCH];
} run_result;

static const uint32_t SRC_LEN[BATCH] = {7, 4};
static const uint32_t TGT_LEN[BATCH] = {5, 3};

/* Runs forward then generate; returns the first failing status. */
static vkf_status run_model(vkf_model *m, run_result *r)
{
    vkf_model_config c;
    vkf_model_get_config(m, &c);
    batch src, tgt;
    batch_make(&src, BATCH, SRC_LEN, c.src_vocab_size, -1, 3);
    batch_make(&tgt, BATCH, TGT_LEN, c.tgt_vocab_size, c.bos_id, 5);
    uint32_t T = TGT_LEN[0] > TGT_LEN[1] ? TGT_LEN[0] : TGT_LEN[1];
    r->floats = (size_t)BATCH * T * c.tgt_vocab_size;
    r->logits = harness_alloc(r->floats * sizeof(float));
    vkf_status st = vkf_model_forward(m, &src.s, &tgt.s, r->logits, r->floats);
    if (st == VKF_OK) st = vkf_model_generate(m, &src.s, MAX_NEW, r->ids, r->lengths);
    batch_free(&src);
    batch_free(&tgt);
    return st;
}

static bool same_result(const run_result *a, const run_result *b)
{
    return a->floats == b->floats && memcmp(a->logits, b->logits, a->floats * sizeof(float)) == 0 &&
           memcmp(a->ids, b->ids, sizeof a->ids) == 0 && memcmp(a->lengths, b->lengths, sizeof a->lengths) == 0;
}

static void check_same_result(const char *what, const run_result *got, const run_result *want)
{
    if (same_result(got, want)) return;
    fprintf(stderr, "%s: results differ from the reference run\n", what);
    if (got->floats == want->floats) harness_compare(what, got->logits, want->logits, got->floats, 0, 0);
    for (int i = 0; i < BATCH; i++)
        if (got->lengths[i] != want->lengths[i] ||
            memcmp(got->ids + i * MAX_NEW, want->ids + i * MAX_NEW, MAX_NEW * sizeof(int32_t)))
            fprintf(stderr, "%s: generated sequence %d differs (length %u, want %u)\n", what, i, got->lengths[i],
                    want->lengths[i]);
    harness_failures++;
}

/* Reference results of model_post.safetensors, from a plain uncapped context. */
static run_result reference_post;

/* ------------------------------------------------------------------ small matmul */

/* C (8, 12) = A (8, 16) · B (12, 16)ᵀ + bias on the context, against ref_matmul. */
static void check_small_matmul(vkf_context *ctx, const char *what)
{
    enum { M = 8, N = 12, K = 16 };
    float *a = harness_random(M * K, 11), *b = harness_random(N * K, 12), *bias = harness_random(N, 13);
    float want[M * N];
    ref_matmul(want, N, a, K, b, K, false, bias, NULL, 0, M, N, K, 1.0f, 0);
    vkf_tensor *ta = NULL, *tb = NULL, *tbias = NULL, *tc = NULL;
    uint64_t sa[2] = {M, K}, sb[2] = {N, K}, sbias[1] = {N}, sc[2] = {M, N};
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, sa, &ta));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, sb, &tb));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, sbias, &tbias));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, sc, &tc));
    if (ta && tb && tbias && tc) {
        CHECK_OK(vkf_tensor_upload(ta, a, M * K * 4));
        CHECK_OK(vkf_tensor_upload(tb, b, N * K * 4));
        CHECK_OK(vkf_tensor_upload(tbias, bias, N * 4));
        vkf_cmd *cmd = NULL;
        CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
        if (cmd) {
            vkf_matmul_desc d;
            vkf_matmul_desc_init(&d);
            d.m = M, d.n = N, d.k = K;
            d.a.tensor = ta, d.b.tensor = tb, d.c.tensor = tc, d.bias = tbias;
            CHECK_OK(vkf_cmd_matmul(cmd, &d));
            CHECK_OK(vkf_cmd_submit(cmd));
            float got[M * N];
            CHECK_OK(vkf_tensor_download(tc, got, sizeof got));
            char label[200];
            snprintf(label, sizeof label, "%s: small matmul", what);
            harness_compare(label, got, want, M * N, 1e-5, 1e-5);
            vkf_cmd_destroy(cmd);
        }
    }
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tbias), vkf_tensor_destroy(tc);
    free(a), free(b), free(bias);
}

/* ------------------------------------------------------------------ (a) lifecycle */

typedef struct host_memory {
    size_t in_use;                      /* mallinfo2: uordblks + hblkhd */
    size_t rss;                         /* /proc/self/statm resident pages, in bytes */
    int fds;                            /* open file descriptors, memfds apart */
    int memfds;
} host_memory;

/* Open file descriptors, not counting the directory's own; driver memfds
 * ("/memfd:NAME") are counted apart, in *out_memfds. */
static int open_fds(int *out_memfds)
{
    *out_memfds = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0, self = dirfd(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == self) continue;
        char link[300], target[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(link, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        if (strncmp(target, "/memfd:", 7) == 0) (*out_memfds)++;
        else n++;
    }
    closedir(d);
    return n;
}

static host_memory host_memory_now(void)
{
    host_memory h = {0, 0, 0, 0};
    malloc_trim(0);
    struct mallinfo2 mi = mallinfo2();
    h.in_use = mi.uordblks + mi.hblkhd;
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
        fclose(f);
    }
    h.rss = (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
    h.fds = open_fds(&h.memfds);
    return h;
}

/* Whether the file is mapped into this process (vkf_model_load maps the model
 * file while it loads and must unmap it, also when it fails). */
static bool file_mapped(const char *path)
{
    char real[PATH_MAX];
    if (!realpath(path, real)) return false;
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[PATH_MAX + 256];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        size_t n = strlen(line), m = strlen(real);
        found = n >= m && strcmp(line + n - m, real) == 0;
    }
    fclose(f);
    return found;
}

static void check_not_mapped(const char *file, const char *what)
{
    char *path = model_path(file);
    if (file_mapped(path)) {
        fprintf(stderr, "%s: %s is still mapped after vkf_model_load returned\n", what, path);
        harness_failures++;
    }
    free(path);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Host-memory growth allowed from iteration 10 to iteration 50 (40 lifecycles).
 * Measured with the validation layer (mallinfo2 bytes in use, after malloc_trim):
 * lavapipe +18..42 KiB, SwiftShader +17..20 KiB. That growth is not vkformer's: a
 * loop of vkf_devices_list alone (instance create/destroy, the ICD and loader
 * loaded and unloaded) grows by ~300 (lavapipe) / ~100 (SwiftShader) bytes per
 * cycle, most of it in the first 30 cycles. A model left alive (its context
 * destroyed) grows it by ~52 KiB per iteration (2 MiB over 40), so 96 KiB catches
 * any per-iteration host leak above ~2.4 KiB. Smaller leaks of vkformer objects
 * are caught exactly by the device-memory and validation checks, a leaked
 * model-file mapping by file_mapped(), a leaked descriptor by the descriptor
 * count (which must not grow).
 * Driver memfds are counted apart and not checked: SwiftShader 153 leaves one
 * "/memfd:swiftshader_jit" open each time the loader unloads it (each last
 * vkDestroyInstance after pipelines were made), so it gains one per iteration.
 * RSS is printed but not checked: it also holds freed but unreturned pages and
 * thread stacks, and on SwiftShader it moved by -27 MiB to +8 MiB between
 * iterations 10 and 50 in runs without any leak. */
#define HOST_IN_USE_GROWTH_MAX (96u << 10)

static void test_lifecycle(void)
{
    int iterations = LIFECYCLE_ITERATIONS;
    const char *env = getenv("VKF_TEST_LIFECYCLE_ITERATIONS"); /* for quicker manual runs only */
    if (env && atoi(env) > LIFECYCLE_FIRST_SAMPLE) iterations = atoi(env);
    host_memory first = {0}, last = {0};
    double t0 = now_s();
    int done = 0;
    for (int it = 0; it < iterations; it++) {
        char what[64];
        snprintf(what, sizeof what, "lifecycle iteration %d", it + 1);
        vkf_context *ctx = open_context(0, 0);
        uint64_t used0 = 0, used1 = 0;
        usage(ctx, NULL, &used0);
        vkf_model *m = load_model(ctx, "model_post.safetensors");
        run_result r;
        vkf_status st = run_model(m, &r);
        if (st != VKF_OK) {
            fprintf(stderr, "%s: forward/generate failed: %s: %s\n", what, vkf_status_string(st), vkf_last_error());
            harness_failures++;
        } else if (it == 0) {
            reference_post = r;
            r.logits = NULL;
        } else {
            check_same_result(what, &r, &reference_post);
        }
        free(r.logits);
        check_not_mapped("model_post.safetensors", what);
        vkf_model_destroy(m);
        usage(ctx, NULL, &used1);
        if (used1 != used0) {
            fprintf(stderr, "%s: tensors hold %llu bytes after the model was destroyed, %llu before it was loaded\n",
                    what, (unsigned long long)used1, (unsigned long long)used0);
            harness_failures++;
        }
        close_context(ctx, what);
        if (it + 1 == LIFECYCLE_FIRST_SAMPLE) first = host_memory_now();
        if (it + 1 == iterations) last = host_memory_now();
        done = it + 1;
        if (harness_failures > 20) break; /* one broken iteration is enough to see */
    }
    double dt = now_s() - t0;
    if (done < iterations) {
        fprintf(stderr, "lifecycle: stopped after %d iterations of %d\n", done, iterations);
        return;
    }
    long long in_use_growth = (long long)last.in_use - (long long)first.in_use;
    long long rss_growth = (long long)last.rss - (long long)first.rss;
    fprintf(stderr,
            "lifecycle: %d iterations in %.1f s; from iteration %d to %d: host memory in use %zu -> %zu bytes "
            "(%+lld), RSS %zu -> %zu (%+lld), open descriptors %d -> %d (and driver memfds %d -> %d)\n",
            iterations, dt, LIFECYCLE_FIRST_SAMPLE, iterations, first.in_use, last.in_use, in_use_growth, first.rss,
            last.rss, rss_growth, first.fds, last.fds, first.memfds, last.memfds);
    if (in_use_growth > (long long)HOST_IN_USE_GROWTH_MAX) {
        fprintf(stderr, "lifecycle: host memory in use grew by %lld bytes (more than %u): a leak per iteration\n",
                in_use_growth, HOST_IN_USE_GROWTH_MAX);
        harness_failures++;
    }
    if (last.fds != first.fds) {
        fprintf(stderr, "lifecycle: %d descriptors open after iteration %d, %d after iteration %d\n", last.fds,
                iterations, first.fds, LIFECYCLE_FIRST_SAMPLE);
        harness_failures++;
    }
}

/* ------------------------------------------------------------------ (b) device-memory cap */

/* The cap message gives the cap, the bytes needed, the bytes tensors hold and the
 * bytes available; available = cap - held and needed > available. */
static void check_cap_message(const char *what, uint64_t cap)
{
    const char *msg = vkf_last_error();
    unsigned long long cap_got = 0, need = 0, held = 0, avail = 0;
    bool ok = number_before(msg, "-byte cap", &cap_got) && number_after(msg, "needs ", &need) &&
              number_after(msg, "tensors hold ", &held) && number_before(msg, " are available", &avail);
    if (!ok) {
        fprintf(stderr, "%s: the message does not give the cap, needed, held and available bytes: \"%s\"\n", what, msg);
        harness_failures++;
        return;
    }
    if (cap_got != cap || held > cap || avail != cap - held || need == 0) {
        fprintf(stderr, "%s: inconsistent numbers (cap %llu, set %llu): \"%s\"\n", what, cap_got,
                (unsigned long long)cap, msg);
        harness_failures++;
    }
    if (need <= avail && !contains(msg, "not in one free range")) {
        fprintf(stderr, "%s: %llu bytes needed, %llu available, yet it failed: \"%s\"\n", what, need, avail, msg);
        harness_failures++;
    }
}

static void check_under_cap(vkf_context *ctx, uint64_t cap, const char *what)
{
    uint64_t allocated = 0, peak = 0;
    usage(ctx, &allocated, NULL);
    CHECK_OK(vkf_context_peak_memory(ctx, &peak));
    if (allocated > cap || peak > cap) {
        fprintf(stderr, "%s: %llu bytes allocated, %llu at peak, over the %llu-byte cap\n", what,
                (unsigned long long)allocated, (unsigned long long)peak, (unsigned long long)cap);
        harness_failures++;
    }
}

static void test_memory_cap(void)
{
    /* An uncapped context: results to compare with, and how much a model and a
     * small forward/generate take. */
    vkf_context *ref = open_context(0, 0);
    uint64_t ref_used = 0;
    vkf_model *ref_model = load_model(ref, "model_post.safetensors");
    run_result small_ref;
    CHECK_OK(run_model(ref_model, &small_ref));
    usage(ref, NULL, &ref_used);
    /* another small shape, to need a new plan after a failure */
    vkf_model_config c;
    vkf_model_get_config(ref_model, &c);
    batch src1, tgt1;
    batch_uniform(&src1, 1, 3, c.src_vocab_size, -1, 21);
    batch_uniform(&tgt1, 1, 2, c.tgt_vocab_size, c.bos_id, 22);
    size_t one_floats = 2 * (size_t)c.tgt_vocab_size; /* 1 sequence of 2 target tokens */
    float *ref_one = harness_alloc(one_floats * sizeof *ref_one), *got_one = harness_alloc(one_floats * sizeof *got_one);
    CHECK_OK(vkf_model_forward(ref_model, &src1.s, &tgt1.s, ref_one, one_floats));
    vkf_model_destroy(ref_model);
    close_context(ref, "memory cap: uncapped reference");
    check_same_result("memory cap: uncapped reference", &small_ref, &reference_post);

    /* A cap far below the model. */
    {
        const uint64_t cap = 64 << 10;
        vkf_context *ctx = open_context(cap, 0);
        uint64_t used0 = 0, used1 = 0;
        usage(ctx, NULL, &used0);
        char *path = model_path("model_post.safetensors");
        vkf_model *m = (vkf_model *)1;
        CHECK_FAIL2(vkf_model_load(ctx, path, &m), VKF_ERROR_OUT_OF_DEVICE_MEMORY, "needs", "available");
        check_cap_message("model load under a 64 KiB cap", cap);
        check_not_mapped("model_post.safetensors", "model load under a 64 KiB cap");
        fprintf(stderr, "model load under a 64 KiB cap: %s\n", vkf_last_error());
        CHECK(m == NULL);
        usage(ctx, NULL, &used1);
        if (used1 != used0) {
            fprintf(stderr, "failed load under a cap: tensors hold %llu bytes, %llu before\n",
                    (unsigned long long)used1, (unsigned long long)used0);
            harness_failures++;
        }
        check_under_cap(ctx, cap, "model load under a 64 KiB cap");
        /* A tensor larger than the cap, then smaller work on the same context. */
        uint64_t big[1] = {cap / 4 + 1};
        vkf_tensor *t = (vkf_tensor *)1;
        CHECK_FAIL2(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, big, &t), VKF_ERROR_OUT_OF_DEVICE_MEMORY, "needs",
                    "available");
        check_cap_message("tensor over the cap", cap);
        CHECK(t == NULL);
        check_small_matmul(ctx, "after a failed load under a cap");
        check_small_matmul(ctx, "again");
        /* the same again: the failure left nothing behind */
        CHECK_FAIL2(vkf_model_load(ctx, path, &m), VKF_ERROR_OUT_OF_DEVICE_MEMORY, "needs", "available");
        check_cap_message("second model load under a 64 KiB cap", cap);
        check_small_matmul(ctx, "after a second failed load under a cap");
        check_under_cap(ctx, cap, "small work under a 64 KiB cap");
        free(path);
        close_context(ctx, "memory cap 64 KiB");
    }

    /* A cap that holds the model and small batches but not a large one. The first
     * block of a capped context is the whole cap, so tensors are laid out as in
     * `ref`; 256 KiB is room for the small plans of the checks below. */
    {
        const uint64_t cap = ref_used + (256 << 10);
        vkf_context *ctx = open_context(cap, 0);
        vkf_model *m = load_model(ctx, "model_post.safetensors");
        run_result r;
        CHECK_OK(run_model(m, &r));
        check_same_result("small forward/generate under a cap", &r, &small_ref);
        free(r.logits);
        uint64_t used0 = 0, used1 = 0;
        usage(ctx, NULL, &used0);

        /* 16 sequences of max_len source and target tokens: the scores alone are
         * 16 * 6 heads * 128 * 128 floats (6 MiB). */
        const uint32_t B = 16, L = c.max_len;
        batch src, tgt;
        batch_uniform(&src, B, L, c.src_vocab_size, -1, 31);
        batch_uniform(&tgt, B, L, c.tgt_vocab_size, c.bos_id, 32);
        size_t floats = (size_t)B * L * c.tgt_vocab_size;
        float *logits = harness_alloc(floats * sizeof *logits);
        CHECK_FAIL2(vkf_model_forward(m, &src.s, &tgt.s, logits, floats), VKF_ERROR_OUT_OF_DEVICE_MEMORY, "needs",
                    "available");
        check_cap_message("large forward under a cap", cap);
        fprintf(stderr, "large forward under a cap: %s\n", vkf_last_error());
        usage(ctx, NULL, &used1);
        if (used1 != used0) {
            fprintf(stderr, "failed forward under a cap: tensors hold %llu bytes, %llu before\n",
                    (unsigned long long)used1, (unsigned long long)used0);
            harness_failures++;
        }
        /* the cached plan of the small batch, then a new small plan */
        CHECK_OK(run_model(m, &r));
        check_same_result("small forward/generate after a failed large forward", &r, &small_ref);
        free(r.logits);
        CHECK_OK(vkf_model_forward(m, &src1.s, &tgt1.s, got_one, one_floats));
        harness_compare("new small forward after a failed large forward", got_one, ref_one, one_floats, 0, 0);

        /* generation of the large batch fails too, and drops nothing the small one needs */
        int32_t *ids = harness_alloc((size_t)B * L * sizeof *ids);
        uint32_t lengths[64];
        CHECK_FAIL2(vkf_model_generate(m, &src.s, L, ids, lengths), VKF_ERROR_OUT_OF_DEVICE_MEMORY, "needs",
                    "available");
        check_cap_message("large generate under a cap", cap);
        CHECK_OK(run_model(m, &r));
        check_same_result("small forward/generate after a failed large generate", &r, &small_ref);
        free(r.logits);
        check_under_cap(ctx, cap, "model under a cap");
        free(ids);
        free(logits);
        batch_free(&src);
        batch_free(&tgt);
        vkf_model_destroy(m);
        close_context(ctx, "memory cap fitting the model");
    }
    batch_free(&src1);
    batch_free(&tgt1);
    free(ref_one);
    free(got_one);
    free(small_ref.logits);
}

/* ------------------------------------------------------------------ (c) driver out of memory */

static void test_driver_oom(void)
{
    /* Tensors: 1 MiB blocks, so a 1 MiB tensor needs a new block. */
    {
        vkf_context *ctx = open_context(0, 1 << 20);
        uint64_t a0 = 0, u0 = 0, a1 = 0, u1 = 0;
        usage(ctx, &a0, &u0);
        uint64_t shape[1] = {1 << 18};
        struct {
            VkResult result;
            vkf_status status;
            const char *name;
        } cases[] = {
            {VK_ERROR_OUT_OF_DEVICE_MEMORY, VKF_ERROR_OUT_OF_DEVICE_MEMORY, "VK_ERROR_OUT_OF_DEVICE_MEMORY"},
            {VK_ERROR_OUT_OF_HOST_MEMORY, VKF_ERROR_OUT_OF_HOST_MEMORY, "VK_ERROR_OUT_OF_HOST_MEMORY"},
            {VK_ERROR_INVALID_EXTERNAL_HANDLE, VKF_ERROR_VULKAN, "VK_ERROR_INVALID_EXTERNAL_HANDLE"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            vkf_tensor *t = (vkf_tensor *)1;
            vkf_test_inject_fault(ctx, "vkAllocateMemory", cases[i].result);
            CHECK_FAIL2(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, shape, &t), cases[i].status, "vkAllocateMemory",
                        cases[i].name);
            CHECK(t == NULL);
            CHECK(vkf_injected(ctx, "vkAllocateMemory") == VK_SUCCESS); /* that call consumed the fault */
            usage(ctx, &a1, &u1);
            CHECK(a1 == a0 && u1 == u0);
        }
        fprintf(stderr, "injected vkAllocateMemory failure: %s\n", vkf_last_error());
        /* The same tensor now works, and so does other work. */
        vkf_tensor *t = NULL;
        CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, shape, &t));
        if (t) {
            float *data = harness_random(1 << 18, 41);
            float *back = harness_alloc((1 << 18) * sizeof *back);
            CHECK_OK(vkf_tensor_upload(t, data, (1 << 18) * 4));
            CHECK_OK(vkf_tensor_download(t, back, (1 << 18) * 4));
            CHECK(memcmp(data, back, (1 << 18) * 4) == 0);
            free(data), free(back);
            vkf_tensor_destroy(t);
        }
        check_small_matmul(ctx, "after injected vkAllocateMemory failures");
        close_context(ctx, "injected vkAllocateMemory (tensors)");
    }

    /* A staged upload (host-visible tensors off): its staging buffer's allocation
     * fails; the tensor is intact and the next upload works. */
    {
        vkf_context *ctx = open_context_with(0, 0, false);
        vkf_tensor *t = NULL;
        uint64_t shape[1] = {1000};
        CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, shape, &t));
        float *data = harness_random(1000, 42), back[1000];
        vkf_test_inject_fault(ctx, "vkAllocateMemory", VK_ERROR_OUT_OF_DEVICE_MEMORY);
        CHECK_FAIL2(vkf_tensor_upload(t, data, sizeof back), VKF_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory",
                    "VK_ERROR_OUT_OF_DEVICE_MEMORY");
        CHECK(vkf_injected(ctx, "vkAllocateMemory") == VK_SUCCESS);
        CHECK_OK(vkf_tensor_upload(t, data, sizeof back));
        CHECK_OK(vkf_tensor_download(t, back, sizeof back));
        CHECK(memcmp(data, back, sizeof back) == 0);
        free(data);
        vkf_tensor_destroy(t);
        check_small_matmul(ctx, "staged, after an injected vkAllocateMemory failure");
        close_context(ctx, "injected vkAllocateMemory (staging)");
    }

    /* Model load, forward and generate: 64 KiB blocks, so the load needs new blocks
     * after the first tensors were uploaded, and new plans need new blocks. */
    {
        vkf_context *ctx = open_context(0, 64 << 10);
        uint64_t u0 = 0, u1 = 0;
        usage(ctx, NULL, &u0);
        char *path = model_path("model_post.safetensors");
        vkf_model *m = (vkf_model *)1;
        vkf_test_inject_fault(ctx, "vkAllocateMemory", VK_ERROR_OUT_OF_DEVICE_MEMORY);
        CHECK_FAIL2(vkf_model_load(ctx, path, &m), VKF_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory",
                    "VK_ERROR_OUT_OF_DEVICE_MEMORY");
        CHECK(m == NULL);
        CHECK(vkf_injected(ctx, "vkAllocateMemory") == VK_SUCCESS);
        check_not_mapped("model_post.safetensors", "model load under an injected vkAllocateMemory failure");
        usage(ctx, NULL, &u1);
        CHECK(u1 == u0);
        m = load_model(ctx, "model_post.safetensors");

        vkf_model_config c;
        vkf_model_get_config(m, &c);
        batch src, tgt;
        batch_uniform(&src, 4, 20, c.src_vocab_size, -1, 51);
        batch_uniform(&tgt, 4, 20, c.tgt_vocab_size, c.bos_id, 52);
        size_t floats = (size_t)4 * 20 * c.tgt_vocab_size;
        float *logits = harness_alloc(floats * sizeof *logits);
        usage(ctx, NULL, &u0);
        vkf_test_inject_fault(ctx, "vkAllocateMemory", VK_ERROR_OUT_OF_DEVICE_MEMORY);
        CHECK_FAIL2(vkf_model_forward(m, &src.s, &tgt.s, logits, floats), VKF_ERROR_OUT_OF_DEVICE_MEMORY,
                    "vkAllocateMemory", "VK_ERROR_OUT_OF_DEVICE_MEMORY");
        CHECK(vkf_injected(ctx, "vkAllocateMemory") == VK_SUCCESS);
        usage(ctx, NULL, &u1);
        CHECK(u1 == u0);
        int32_t ids[4 * 20];
        uint32_t lengths[4];
        vkf_test_inject_fault(ctx, "vkAllocateMemory", VK_ERROR_OUT_OF_HOST_MEMORY);
        CHECK_FAIL2(vkf_model_generate(m, &src.s, 20, ids, lengths), VKF_ERROR_OUT_OF_HOST_MEMORY, "vkAllocateMemory",
                    "VK_ERROR_OUT_OF_HOST_MEMORY");
        CHECK(vkf_injected(ctx, "vkAllocateMemory") == VK_SUCCESS);
        usage(ctx, NULL, &u1);
        CHECK(u1 == u0);
        CHECK_OK(vkf_model_forward(m, &src.s, &tgt.s, logits, floats));
        CHECK_OK(vkf_model_generate(m, &src.s, 20, ids, lengths));
        run_result r;
        CHECK_OK(run_model(m, &r));
        check_same_result("model after injected vkAllocateMemory failures", &r, &reference_post);
        free(r.logits);
        free(logits);
        batch_free(&src);
        batch_free(&tgt);
        free(path);
        vkf_model_destroy(m);
        close_context(ctx, "injected vkAllocateMemory (model)");
    }
}

/* ------------------------------------------------------------------ (d) device loss */

/* Every call on a lost context fails with VKF_ERROR_DEVICE_LOST and says so. */
#define CHECK_LOST(expr) CHECK_FAIL2(expr, VKF_ERROR_DEVICE_LOST, "lost", NULL)

typedef struct loss_fixture {
    vkf_context *ctx;
    vkf_model *model;
    vkf_tensor *a, *b, *c;
    vkf_cmd *submitted;                 /* recorded and submitted once */
    vkf_cmd *recording;                 /* one op recorded, not submitted */
} loss_fixture;

static void record_matmul(vkf_cmd *cmd, const loss_fixture *f)
{
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = 4, d.n = 4, d.k = 4;
    d.a.tensor = f->a, d.b.tensor = f->b, d.c.tensor = f->c;
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
}

static void fixture_open(loss_fixture *f, bool allow_host_visible)
{
    memset(f, 0, sizeof *f);
    f->ctx = open_context_with(0, 0, allow_host_visible);
    f->model = load_model(f->ctx, "model_post.safetensors");
    run_result r;
    CHECK_OK(run_model(f->model, &r)); /* plans recorded and cached */
    check_same_result("device-loss fixture", &r, &reference_post);
    free(r.logits);
    float *x = harness_random(16, 61);
    f->a = harness_tensor(f->ctx, x, 4, 4);
    f->b = harness_tensor(f->ctx, x, 4, 4);
    f->c = harness_tensor(f->ctx, NULL, 4, 4);
    free(x);
    CHECK_OK(vkf_cmd_create(f->ctx, 0, &f->submitted));
    record_matmul(f->submitted, f);
    CHECK_OK(vkf_cmd_submit(f->submitted));
    CHECK_OK(vkf_cmd_create(f->ctx, 0, &f->recording));
    record_matmul(f->recording, f);
}

static void fixture_close(loss_fixture *f, const char *what)
{
    vkf_cmd_destroy(f->submitted);
    vkf_cmd_destroy(f->recording);
    vkf_tensor_destroy(f->a), vkf_tensor_destroy(f->b), vkf_tensor_destroy(f->c);
    vkf_model_destroy(f->model);
    close_context(f->ctx, what);
}

/* After a loss: every call that touches the device fails, none crashes. */
static void check_all_lost(loss_fixture *f, const char *what)
{
    fprintf(stderr, "%s: checking every call on the lost context\n", what);
    vkf_context *ctx = f->ctx;
    uint64_t shape[2] = {4, 4};
    float host[16] = {0};
    vkf_tensor *t = (vkf_tensor *)1;
    CHECK_LOST(vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, shape, &t));
    CHECK(t == NULL);
    CHECK_LOST(vkf_tensor_upload(f->a, host, sizeof host));
    CHECK_LOST(vkf_tensor_download(f->c, host, sizeof host));
    vkf_cmd *cmd = (vkf_cmd *)1;
    CHECK_LOST(vkf_cmd_create(ctx, 0, &cmd));
    CHECK(cmd == NULL);
    CHECK_LOST(vkf_cmd_submit(f->submitted));
    CHECK_LOST(vkf_cmd_submit(f->recording));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = 4, d.n = 4, d.k = 4;
    d.a.tensor = f->a, d.b.tensor = f->b, d.c.tensor = f->c;
    CHECK_LOST(vkf_cmd_matmul(f->recording, &d));
    vkf_tensor *pe = (vkf_tensor *)1;
    CHECK_LOST(vkf_positional_encoding_create(ctx, 8, 8, &pe));
    CHECK(pe == NULL);
    char *path = model_path("model_post.safetensors");
    vkf_model *m = (vkf_model *)1;
    CHECK_LOST(vkf_model_load(ctx, path, &m));
    CHECK(m == NULL);
    free(path);

    /* the model: the cached shape, a new shape, generation */
    vkf_model_config c;
    vkf_model_get_config(f->model, &c);
    batch src, tgt;
    batch_make(&src, BATCH, SRC_LEN, c.src_vocab_size, -1, 3);
    batch_make(&tgt, BATCH, TGT_LEN, c.tgt_vocab_size, c.bos_id, 5);
    size_t floats = (size_t)BATCH * TGT_LEN[0] * c.tgt_vocab_size;
    float *logits = harness_alloc(floats * sizeof *logits);
    CHECK_LOST(vkf_model_forward(f->model, &src.s, &tgt.s, logits, floats));
    vkf_sequences s1 = {1, src.s.ids, src.s.lengths}, t1 = {1, tgt.s.ids, tgt.s.lengths};
    CHECK_LOST(vkf_model_forward(f->model, &s1, &t1, logits, (size_t)TGT_LEN[0] * c.tgt_vocab_size));
    int32_t ids[BATCH * MAX_NEW];
    uint32_t lengths[BATCH];
    CHECK_LOST(vkf_model_generate(f->model, &src.s, MAX_NEW, ids, lengths));
    CHECK_LOST(vkf_model_generate(f->model, &s1, 3, ids, lengths));
    free(logits);
    batch_free(&src);
    batch_free(&tgt);

    /* Calls that only read host-side state keep answering. */
    uint64_t allocated = 0, used = 0;
    CHECK_OK(vkf_context_memory_usage(ctx, &allocated, &used));
    vkf_device_info info;
    CHECK_OK(vkf_context_device_info(ctx, &info));
    vkf_model_config cfg;
    CHECK_OK(vkf_model_get_config(f->model, &cfg));
}

static void test_device_loss(void)
{
    const char *calls[2] = {"vkQueueSubmit", "vkWaitForFences"};
    for (int i = 0; i < 2; i++) {
        char what[128];
        /* on a command list */
        snprintf(what, sizeof what, "VK_ERROR_DEVICE_LOST from %s (command list)", calls[i]);
        loss_fixture f;
        fixture_open(&f, true);
        vkf_test_inject_fault(f.ctx, calls[i], VK_ERROR_DEVICE_LOST);
        CHECK_FAIL2(vkf_cmd_submit(f.submitted), VKF_ERROR_DEVICE_LOST, calls[i], "VK_ERROR_DEVICE_LOST");
        fprintf(stderr, "%s: %s\n", what, vkf_last_error());
        check_all_lost(&f, what);
        fixture_close(&f, what);

        /* inside a model forward */
        snprintf(what, sizeof what, "VK_ERROR_DEVICE_LOST from %s (model forward)", calls[i]);
        fixture_open(&f, true);
        vkf_test_inject_fault(f.ctx, calls[i], VK_ERROR_DEVICE_LOST);
        run_result r;
        CHECK_FAIL2(run_model(f.model, &r), VKF_ERROR_DEVICE_LOST, calls[i], "VK_ERROR_DEVICE_LOST");
        free(r.logits);
        check_all_lost(&f, what);
        fixture_close(&f, what);

        /* inside a generation (its encoder submit) */
        snprintf(what, sizeof what, "VK_ERROR_DEVICE_LOST from %s (generate)", calls[i]);
        fixture_open(&f, true);
        vkf_model_config c;
        vkf_model_get_config(f.model, &c);
        batch src;
        batch_make(&src, BATCH, SRC_LEN, c.src_vocab_size, -1, 3);
        int32_t ids[BATCH * MAX_NEW];
        uint32_t lengths[BATCH];
        vkf_test_inject_fault(f.ctx, calls[i], VK_ERROR_DEVICE_LOST);
        CHECK_FAIL2(vkf_model_generate(f.model, &src.s, MAX_NEW, ids, lengths), VKF_ERROR_DEVICE_LOST, calls[i],
                    "VK_ERROR_DEVICE_LOST");
        batch_free(&src);
        check_all_lost(&f, what);
        fixture_close(&f, what);
    }

    /* A staged upload (host-visible tensors off) whose transfer submit reports the loss. */
    {
        const char *what = "VK_ERROR_DEVICE_LOST from vkQueueSubmit (staged upload)";
        loss_fixture f;
        fixture_open(&f, false);
        float host[16] = {0};
        vkf_test_inject_fault(f.ctx, "vkQueueSubmit", VK_ERROR_DEVICE_LOST);
        CHECK_FAIL2(vkf_tensor_upload(f.a, host, sizeof host), VKF_ERROR_DEVICE_LOST, "vkQueueSubmit",
                    "VK_ERROR_DEVICE_LOST");
        check_all_lost(&f, what);
        fixture_close(&f, what);
    }

    /* The same from the wait of a staged transfer. */
    {
        const char *what = "VK_ERROR_DEVICE_LOST from vkWaitForFences (staged download)";
        loss_fixture f;
        fixture_open(&f, false);
        float host[16];
        vkf_test_inject_fault(f.ctx, "vkWaitForFences", VK_ERROR_DEVICE_LOST);
        CHECK_FAIL2(vkf_tensor_download(f.c, host, sizeof host), VKF_ERROR_DEVICE_LOST, "vkWaitForFences",
                    "VK_ERROR_DEVICE_LOST");
        if (vkf_injected(f.ctx, "vkWaitForFences") != VK_SUCCESS) {
            fprintf(stderr, "%s: the staged transfer's vkWaitForFences did not take the injected fault\n", what);
            harness_failures++;
        } else {
            check_all_lost(&f, what);
        }
        fixture_close(&f, what);
    }

    /* Other failing results: a status naming the call and the VkResult; the context
     * stays usable and the failed work can be submitted again. */
    struct {
        const char *call;
        VkResult result;
        vkf_status status;
        const char *name;
    } others[] = {
        {"vkQueueSubmit", VK_ERROR_UNKNOWN, VKF_ERROR_VULKAN, "VK_ERROR_UNKNOWN"},
        {"vkQueueSubmit", VK_ERROR_OUT_OF_HOST_MEMORY, VKF_ERROR_OUT_OF_HOST_MEMORY, "VK_ERROR_OUT_OF_HOST_MEMORY"},
        {"vkQueueSubmit", VK_ERROR_OUT_OF_DEVICE_MEMORY, VKF_ERROR_OUT_OF_DEVICE_MEMORY,
         "VK_ERROR_OUT_OF_DEVICE_MEMORY"},
        {"vkWaitForFences", VK_ERROR_OUT_OF_HOST_MEMORY, VKF_ERROR_OUT_OF_HOST_MEMORY, "VK_ERROR_OUT_OF_HOST_MEMORY"},
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        char what[160];
        snprintf(what, sizeof what, "%s from %s", others[i].name, others[i].call);
        if (strcmp(others[i].call, "vkWaitForFences") == 0)
            fprintf(stderr, "%s: submitting again after the failed wait (a crash or a validation error about a "
                            "signaled fence here means vkf_cmd_submit left the list's fence signaled)\n", what);
        loss_fixture f;
        fixture_open(&f, true);
        float want[16], got[16], zero[16] = {0};
        CHECK_OK(vkf_tensor_download(f.c, want, sizeof want));
        /* a list's first submit, then one submitted before: each fails once, then runs */
        vkf_cmd *lists[2] = {f.recording, f.submitted};
        for (int k = 0; k < 2; k++) {
            CHECK_OK(vkf_tensor_upload(f.c, zero, sizeof zero));
            vkf_test_inject_fault(f.ctx, others[i].call, others[i].result);
            CHECK_FAIL2(vkf_cmd_submit(lists[k]), others[i].status, others[i].call, others[i].name);
            if (k == 0) fprintf(stderr, "%s: %s\n", what, vkf_last_error());
            CHECK_OK(vkf_tensor_upload(f.c, zero, sizeof zero));
            CHECK_OK(vkf_cmd_submit(lists[k]));
            CHECK_OK(vkf_tensor_download(f.c, got, sizeof got));
            if (memcmp(got, want, sizeof got) != 0) {
                fprintf(stderr, "%s: the list submitted again after the failure did not compute its result\n", what);
                harness_failures++;
            }
        }
        /* a model forward, then forward and generate again */
        vkf_test_inject_fault(f.ctx, others[i].call, others[i].result);
        run_result r;
        CHECK_FAIL2(run_model(f.model, &r), others[i].status, others[i].call, others[i].name);
        free(r.logits);
        CHECK_OK(run_model(f.model, &r));
        check_same_result(what, &r, &reference_post);
        free(r.logits);
        check_small_matmul(f.ctx, what);
        fixture_close(&f, what);
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
    double t0 = now_s();
    test_lifecycle();
    fprintf(stderr, "lifecycle: done at %.1f s\n", now_s() - t0);
    if (!reference_post.logits) {
        fprintf(stderr, "no reference results; stopping\n");
        return harness_result("test_reliability") ? 1 : 1;
    }
    test_memory_cap();
    fprintf(stderr, "memory cap: done at %.1f s\n", now_s() - t0);
    test_driver_oom();
    fprintf(stderr, "driver out of memory: done at %.1f s\n", now_s() - t0);
    test_device_loss();
    fprintf(stderr, "device loss: done at %.1f s\n", now_s() - t0);
    free(reference_post.logits);
    int messages = atomic_load(&validation_messages);
    if (messages) {
        fprintf(stderr, "%d validation messages in all (see above)\n", messages);
        harness_failures++;
    }
    return harness_result("test_reliability");
}

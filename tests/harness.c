/* The test harness; see harness.h. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int harness_failures = 0;
/* Validation messages seen by any harness context, including those the layer
 * sends while a context is being destroyed (leaked objects). */
static int validation_messages = 0;

static void log_stderr(void *user, vkf_log_level level, const char *message)
{
    (void)user;
    if (level >= VKF_LOG_WARNING) validation_messages++;
    fprintf(stderr, "[%s] %s\n", level == VKF_LOG_ERROR ? "error" : level == VKF_LOG_WARNING ? "warning" : "info",
            message);
}

vkf_context *harness_context_with(vkf_context_options *o)
{
    o->validation = 1;
    o->log = log_stderr;
    vkf_context *ctx;
    vkf_status st = vkf_context_create(o, &ctx);
    if (st != VKF_OK) {
        fprintf(stderr, "cannot create a context: %s: %s\n", vkf_status_string(st), vkf_last_error());
        exit(1);
    }
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    fprintf(stderr, "device: %s\n", info.name);
    return ctx;
}

vkf_context *harness_context(void)
{
    vkf_context_options o;
    vkf_context_options_init(&o);
    return harness_context_with(&o);
}

void harness_close(vkf_context *ctx)
{
    uint32_t errors = 0, warnings = 0;
    bool on = false;
    vkf_context_validation_counts(ctx, &errors, &warnings, &on);
    if (!on) {
        fprintf(stderr, "the validation layer was not active\n");
        harness_failures++;
    }
    if (errors || warnings) {
        fprintf(stderr, "the validation layer reported %u errors and %u warnings\n", errors, warnings);
        harness_failures++;
    }
    vkf_context_destroy(ctx);
}

int harness_result(const char *name)
{
    if (validation_messages) {
        fprintf(stderr, "%s: %d validation messages in all (see above)\n", name, validation_messages);
        harness_failures++;
    }
    if (harness_failures) fprintf(stderr, "%s: %d failures\n", name, harness_failures);
    else fprintf(stderr, "%s: all checks passed\n", name);
    return harness_failures ? 1 : 0;
}

void *harness_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    return p;
}

float *harness_random(size_t n, uint64_t seed)
{
    float *v = harness_alloc(n * sizeof *v);
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v[i] = (float)((s >> 40) * (2.0 / 16777216.0) - 1.0);
    }
    return v;
}

bool harness_compare(const char *what, const float *got, const float *want, size_t n, double atol, double rtol)
{
    size_t worst = 0;
    double worst_excess = -INFINITY;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        double excess = err - (atol + rtol * fabs(want[i]));
        if (isnan(err)) excess = INFINITY;
        if (excess > 0) bad++;
        if (excess > worst_excess) {
            worst_excess = excess;
            worst = i;
        }
    }
    if (bad) {
        fprintf(stderr, "MISMATCH %s: %zu of %zu elements out of tolerance; worst at index %zu: expected %.9g, got %.9g\n",
                what, bad, n, worst, want[worst], got[worst]);
        harness_failures++;
        return false;
    }
    return true;
}

vkf_tensor *harness_tensor(vkf_context *ctx, const float *data, uint64_t rows, uint64_t cols)
{
    uint64_t shape[2] = {rows, cols};
    vkf_tensor *t = NULL;
    vkf_status st = vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, shape, &t);
    if (st == VKF_OK && data) st = vkf_tensor_upload(t, data, rows * cols * 4);
    if (st != VKF_OK) {
        fprintf(stderr, "cannot make a %llux%llu tensor: %s\n", (unsigned long long)rows, (unsigned long long)cols,
                vkf_last_error());
        exit(1);
    }
    return t;
}

float *harness_download(vkf_tensor *t)
{
    uint64_t bytes = vkf_tensor_bytes(t);
    float *v = harness_alloc(bytes);
    vkf_status st = vkf_tensor_download(t, v, bytes);
    if (st != VKF_OK) {
        fprintf(stderr, "download failed: %s\n", vkf_last_error());
        harness_failures++;
        memset(v, 0, bytes);
    }
    return v;
}

vkf_tensor *harness_f16_tensor(vkf_context *ctx, float *data, uint64_t n)
{
    uint16_t *h = harness_alloc(n * 2);
    for (uint64_t e = 0; e < n; e++) data[e] = ref_f16_to_f32(h[e] = ref_f32_to_f16(data[e]));
    vkf_tensor *t = NULL;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F16, 1, &n, &t));
    CHECK_OK(vkf_tensor_upload(t, h, n * 2));
    free(h);
    return t;
}

float *harness_download_f16(vkf_tensor *t, uint64_t n)
{
    uint16_t *h = harness_alloc(n * 2);
    float *out = harness_alloc(n * 4);
    CHECK_OK(vkf_tensor_download(t, h, n * 2));
    for (uint64_t e = 0; e < n; e++) out[e] = ref_f16_to_f32(h[e]);
    free(h);
    return out;
}

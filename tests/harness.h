/* Test harness: a context with the validation layer on (a validation message
 * fails the test), random data, abs+rel comparison that prints the worst element,
 * and CHECK macros that count failures. */
#ifndef VKF_HARNESS_H
#define VKF_HARNESS_H

#include "vkformer.h"
#include "reference/reference.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern int harness_failures;

/* A context on the device the environment selects (VK_ICD_FILENAMES), with
 * validation forced on. Exits the test on failure. */
vkf_context *harness_context(void);
/* Same, with options (validation forced on, log set). */
vkf_context *harness_context_with(vkf_context_options *options);
/* Fails the test if the context's validation layer reported anything; destroys it. */
void harness_close(vkf_context *ctx);
/* Prints the summary line and returns the exit code. */
int harness_result(const char *test_name);

/* n uniform values in [-1, 1); free() them. Deterministic per seed. */
float *harness_random(size_t n, uint64_t seed);
void *harness_alloc(size_t bytes);

/* true iff |got - want| <= atol + rtol * |want| everywhere; on failure prints the
 * worst index with expected and actual values and counts a failure. */
bool harness_compare(const char *what, const float *got, const float *want, size_t n, double atol, double rtol);

/* A tensor of shape (rows, cols) filled from data (NULL: left uninitialised). */
vkf_tensor *harness_tensor(vkf_context *ctx, const float *data, uint64_t rows, uint64_t cols);
float *harness_download(vkf_tensor *t);
/* An F16 tensor of n values; data is rounded to F16 in place (the reference then
 * sees exactly what the GPU reads). */
vkf_tensor *harness_f16_tensor(vkf_context *ctx, float *data, uint64_t n);
/* n F16 values of t, widened to a float array (harness_alloc'ed). */
float *harness_download_f16(vkf_tensor *t, uint64_t n);

#define CHECK(cond)                                                                                 \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                \
            harness_failures++;                                                                     \
        }                                                                                           \
    } while (0)

/* The call must succeed; otherwise print the status and message and count a failure. */
#define CHECK_OK(expr)                                                                              \
    do {                                                                                            \
        vkf_status check_st_ = (expr);                                                              \
        if (check_st_ != VKF_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr,               \
                    vkf_status_string(check_st_), vkf_last_error());                                \
            harness_failures++;                                                                     \
        }                                                                                           \
    } while (0)

/* The call must fail with `status` and a non-empty message. */
#define CHECK_STATUS(expr, status)                                                                  \
    do {                                                                                            \
        vkf_status check_st_ = (expr);                                                              \
        if (check_st_ != (status)) {                                                                \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__, __LINE__, #expr,  \
                    vkf_status_string(check_st_), vkf_status_string(status), vkf_last_error());     \
            harness_failures++;                                                                     \
        } else if (vkf_last_error()[0] == '\0') {                                                   \
            fprintf(stderr, "%s:%d: %s failed without a message\n", __FILE__, __LINE__, #expr);     \
            harness_failures++;                                                                     \
        }                                                                                           \
    } while (0)

/* CHECK_STATUS, and the message names the reason: it contains `keyword`. */
#define CHECK_FAIL(expr, status, keyword)                                                           \
    do {                                                                                            \
        int failures_before_ = harness_failures;                                                    \
        CHECK_STATUS(expr, status);                                                                 \
        if (harness_failures == failures_before_ && !strstr(vkf_last_error(), keyword)) {           \
            fprintf(stderr, "%s:%d: %s: message \"%s\" does not mention \"%s\"\n", __FILE__, __LINE__, \
                    #expr, vkf_last_error(), keyword);                                              \
            harness_failures++;                                                                     \
        }                                                                                           \
    } while (0)

#endif

/* Bad input never crashes: NULL handles and out-pointers, zero and inconsistent
 * sizes, views past their tensors, wrong dtypes, aliasing, device limits (binding
 * range, 64-bit overflow, workgroup grid), state errors (recording after submit,
 * timings without timestamps), tensors of another context and bad context options
 * each return the fitting status with a message, hand nothing out and record
 * nothing. Afterwards the context still computes correctly. Also the status names
 * and the version functions. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A non-NULL value out-pointers are preset to, to see that failures clear them. */
static int sentinel_storage;
#define SENTINEL ((void *)&sentinel_storage)


static vkf_tensor *tensor_2d(vkf_context *ctx, vkf_dtype dtype, uint64_t rows, uint64_t cols)
{
    uint64_t shape[2] = {rows, cols};
    vkf_tensor *t = NULL;
    vkf_status st = vkf_tensor_create(ctx, dtype, 2, shape, &t);
    if (st != VKF_OK) {
        fprintf(stderr, "cannot make a %llux%llu tensor: %s\n", (unsigned long long)rows, (unsigned long long)cols,
                vkf_last_error());
        exit(1);
    }
    return t;
}

/* ------------------------------------------------------------------ NULL arguments */

static void test_null_arguments(vkf_context *ctx)
{
    CHECK_STATUS(vkf_context_create(NULL, NULL), VKF_ERROR_INVALID_ARGUMENT);

    uint64_t shape[2] = {4, 4};
    vkf_tensor *t = SENTINEL;
    CHECK_STATUS(vkf_tensor_create(NULL, VKF_DTYPE_F32, 2, shape, &t), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL);
    t = SENTINEL;
    CHECK_STATUS(vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, NULL, &t), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL);
    CHECK_STATUS(vkf_tensor_create(ctx, VKF_DTYPE_F32, 2, shape, NULL), VKF_ERROR_INVALID_ARGUMENT);

    vkf_tensor *good = tensor_2d(ctx, VKF_DTYPE_F32, 4, 4);
    float host[16] = {0};
    CHECK_STATUS(vkf_tensor_upload(NULL, host, sizeof host), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_tensor_upload(good, NULL, sizeof host), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_tensor_download(NULL, host, sizeof host), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_tensor_download(good, NULL, sizeof host), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(vkf_tensor_bytes(NULL) == 0);
    vkf_tensor_destroy(good);

    vkf_cmd *cmd = SENTINEL;
    CHECK_STATUS(vkf_cmd_create(NULL, 0, &cmd), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(cmd == NULL);
    CHECK_STATUS(vkf_cmd_create(ctx, 0, NULL), VKF_ERROR_INVALID_ARGUMENT);
    cmd = SENTINEL;
    CHECK_STATUS(vkf_cmd_create(ctx, 1u << 7, &cmd), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(cmd == NULL);
    cmd = SENTINEL;
    CHECK_STATUS(vkf_cmd_create(ctx, VKF_CMD_TIMESTAMPS | 0x80000000u, &cmd), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(cmd == NULL);
    CHECK(vkf_cmd_op_count(NULL) == 0);

    vkf_matmul_desc mm;
    vkf_softmax_desc sm;
    vkf_layernorm_desc ln;
    vkf_embed_desc em;
    vkf_matmul_desc_init(&mm);
    vkf_softmax_desc_init(&sm);
    vkf_layernorm_desc_init(&ln);
    vkf_embed_desc_init(&em);
    CHECK_STATUS(vkf_cmd_matmul(NULL, &mm), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_cmd_softmax(NULL, &sm), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_cmd_layernorm(NULL, &ln), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_cmd_embed(NULL, &em), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_STATUS(vkf_cmd_matmul(cmd, NULL), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_cmd_softmax(cmd, NULL), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_cmd_layernorm(cmd, NULL), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_cmd_embed(cmd, NULL), VKF_ERROR_INVALID_ARGUMENT);
    /* Descriptors with every tensor NULL. */
    mm.m = mm.n = mm.k = 4;
    sm.rows = sm.cols = 4;
    ln.rows = ln.cols = 4;
    em.tokens = em.d = em.vocab = 4;
    CHECK_STATUS(vkf_cmd_matmul(cmd, &mm), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_cmd_softmax(cmd, &sm), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_cmd_layernorm(cmd, &ln), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_cmd_embed(cmd, &em), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(vkf_cmd_op_count(cmd) == 0);
    CHECK_STATUS(vkf_cmd_submit(NULL), VKF_ERROR_INVALID_ARGUMENT);

    double ms[4];
    uint32_t count = 77;
    CHECK_STATUS(vkf_cmd_timings(NULL, ms, 4, &count), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_cmd_timings(cmd, ms, 4, NULL), VKF_ERROR_INVALID_ARGUMENT);
    count = 77;
    CHECK_STATUS(vkf_cmd_timings(cmd, NULL, 4, &count), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(count == 0);
    vkf_cmd_destroy(cmd);

    CHECK_STATUS(vkf_devices_list(NULL, 0, NULL), VKF_ERROR_INVALID_ARGUMENT);
    count = 77;
    CHECK_STATUS(vkf_devices_list(NULL, 2, &count), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(count == 0);

    vkf_device_info info;
    uint32_t errors, warnings;
    bool on;
    uint64_t allocated, used;
    CHECK_STATUS(vkf_context_device_info(NULL, &info), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_context_device_info(ctx, NULL), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_context_validation_counts(NULL, &errors, &warnings, &on), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_context_memory_usage(NULL, &allocated, &used), VKF_ERROR_INVALID_ARGUMENT);
    /* Every out-pointer of these two is optional. */
    CHECK_OK(vkf_context_validation_counts(ctx, NULL, NULL, NULL));
    CHECK_OK(vkf_context_memory_usage(ctx, NULL, NULL));

    vkf_tensor *pe = SENTINEL;
    CHECK_STATUS(vkf_positional_encoding_create(NULL, 4, 4, &pe), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(pe == NULL);
    CHECK_STATUS(vkf_positional_encoding_create(ctx, 4, 4, NULL), VKF_ERROR_INVALID_ARGUMENT);

    /* destroy(NULL) and init(NULL) are no-ops. */
    vkf_context_destroy(NULL);
    vkf_tensor_destroy(NULL);
    vkf_cmd_destroy(NULL);
    vkf_context_options_init(NULL);
    vkf_matmul_desc_init(NULL);
    vkf_softmax_desc_init(NULL);
    vkf_layernorm_desc_init(NULL);
    vkf_embed_desc_init(NULL);
}

/* ------------------------------------------------------------------ tensors */

static void test_tensor_errors(vkf_context *ctx, const vkf_device_info *info)
{
    uint64_t shape[VKF_MAX_RANK + 1] = {2, 2, 2, 2, 2};
    vkf_tensor *t = SENTINEL;
    CHECK_STATUS(vkf_tensor_create(ctx, VKF_DTYPE_F32, 0, shape, &t), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL);
    t = SENTINEL;
    CHECK_STATUS(vkf_tensor_create(ctx, VKF_DTYPE_F32, VKF_MAX_RANK + 1, shape, &t), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL);
    for (uint32_t i = 0; i < VKF_MAX_RANK; i++) {
        uint64_t zero[VKF_MAX_RANK] = {3, 3, 3, 3};
        zero[i] = 0;
        t = SENTINEL;
        CHECK_STATUS(vkf_tensor_create(ctx, VKF_DTYPE_F32, VKF_MAX_RANK, zero, &t), VKF_ERROR_INVALID_ARGUMENT);
        CHECK(t == NULL);
    }
    t = SENTINEL;
    CHECK_STATUS(vkf_tensor_create(ctx, (vkf_dtype)(VKF_DTYPE_I8 + 1), 2, shape, &t), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL);
    t = SENTINEL;
    CHECK_STATUS(vkf_tensor_create(ctx, (vkf_dtype)-1, 2, shape, &t), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(t == NULL);

    /* One element past what one shader binding may cover. */
    uint64_t past_range = info->max_storage_buffer_range / 4 + 1;
    t = SENTINEL;
    CHECK_STATUS(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &past_range, &t), VKF_ERROR_TOO_LARGE);
    CHECK(t == NULL);
    CHECK(strstr(vkf_last_error(), "maxStorageBufferRange") != NULL);
    uint64_t past_range_2d[2] = {past_range, 1};
    CHECK_STATUS(vkf_tensor_create(ctx, VKF_DTYPE_I32, 2, past_range_2d, &t), VKF_ERROR_TOO_LARGE);
    CHECK(strstr(vkf_last_error(), "maxStorageBufferRange") != NULL);
    /* Element counts (and byte counts) that do not fit 64 bits. */
    uint64_t overflow[3] = {1ull << 32, 1ull << 32, 2};
    t = SENTINEL;
    CHECK_STATUS(vkf_tensor_create(ctx, VKF_DTYPE_F32, 3, overflow, &t), VKF_ERROR_TOO_LARGE);
    CHECK(t == NULL);
    uint64_t overflow_max[4] = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
    CHECK_STATUS(vkf_tensor_create(ctx, VKF_DTYPE_F32, 4, overflow_max, &t), VKF_ERROR_TOO_LARGE);
    uint64_t bytes_overflow = 1ull << 62; /* fits as elements, not as bytes */
    CHECK_STATUS(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &bytes_overflow, &t), VKF_ERROR_TOO_LARGE);

    /* Transfers of the wrong size. */
    vkf_tensor *good = tensor_2d(ctx, VKF_DTYPE_F32, 4, 4);
    float host[17] = {0};
    CHECK_STATUS(vkf_tensor_upload(good, host, 16 * 4 - 4), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_tensor_upload(good, host, 16 * 4 + 4), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_tensor_upload(good, host, 0), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_tensor_download(good, host, 16 * 4 - 1), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_tensor_download(good, host, 16 * 4 + 4), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_tensor_download(good, host, 0), VKF_ERROR_INVALID_ARGUMENT);
    vkf_tensor_destroy(good);

    vkf_tensor *pe = SENTINEL;
    CHECK_STATUS(vkf_positional_encoding_create(ctx, 0, 8, &pe), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(pe == NULL);
    pe = SENTINEL;
    CHECK_STATUS(vkf_positional_encoding_create(ctx, 8, 0, &pe), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(pe == NULL);
    CHECK_STATUS(vkf_positional_encoding_create(ctx, 0, 0, &pe), VKF_ERROR_INVALID_ARGUMENT);
}

/* ------------------------------------------------------------------ ops */

/* Tensors for a valid M×K · (N×K)ᵀ product; each test breaks one thing. */
enum { M = 5, N = 6, K = 7 };

typedef struct operands {
    vkf_tensor *a, *b, *c, *bias, *r;   /* (M, K), (N, K), (M, N), (N), (M, N) */
    vkf_tensor *ids_i32, *ids_f32;      /* (M) */
    vkf_tensor *a_short, *bias_short;   /* M*K-1 and N-1 elements */
    vkf_tensor *a_i32;                  /* (M, K) I32 */
} operands;

static void operands_make(vkf_context *ctx, operands *o)
{
    o->a = tensor_2d(ctx, VKF_DTYPE_F32, M, K);
    o->b = tensor_2d(ctx, VKF_DTYPE_F32, N, K);
    o->c = tensor_2d(ctx, VKF_DTYPE_F32, M, N);
    o->bias = tensor_2d(ctx, VKF_DTYPE_F32, 1, N);
    o->r = tensor_2d(ctx, VKF_DTYPE_F32, M, N);
    o->ids_i32 = tensor_2d(ctx, VKF_DTYPE_I32, 1, M);
    o->ids_f32 = tensor_2d(ctx, VKF_DTYPE_F32, 1, M);
    o->a_short = tensor_2d(ctx, VKF_DTYPE_F32, 1, M * K - 1);
    o->bias_short = tensor_2d(ctx, VKF_DTYPE_F32, 1, N - 1);
    o->a_i32 = tensor_2d(ctx, VKF_DTYPE_I32, M, K);
}

static void operands_free(operands *o)
{
    vkf_tensor_destroy(o->a), vkf_tensor_destroy(o->b), vkf_tensor_destroy(o->c);
    vkf_tensor_destroy(o->bias), vkf_tensor_destroy(o->r), vkf_tensor_destroy(o->ids_i32);
    vkf_tensor_destroy(o->ids_f32), vkf_tensor_destroy(o->a_short), vkf_tensor_destroy(o->bias_short);
    vkf_tensor_destroy(o->a_i32);
}

static void matmul_valid(const operands *o, vkf_matmul_desc *d)
{
    vkf_matmul_desc_init(d);
    d->m = M, d->n = N, d->k = K;
    d->a.tensor = o->a, d->b.tensor = o->b, d->c.tensor = o->c;
}

static void test_matmul_errors(vkf_context *ctx, vkf_cmd *cmd, const operands *o, const vkf_device_info *info)
{
    vkf_matmul_desc d;
    /* The baseline is valid: each case fails only because of its change, with a
     * message that names the reason. A wrongly accepted case would record an op;
     * test_still_works checks that none was. */
#define MM_EXPECT(change, status, keyword)                                                          \
    do {                                                                                            \
        matmul_valid(o, &d);                                                                        \
        change;                                                                                     \
        CHECK_FAIL(vkf_cmd_matmul(cmd, &d), status, keyword);                                       \
    } while (0)

    MM_EXPECT(d.m = 0, VKF_ERROR_INVALID_ARGUMENT, "positive");
    MM_EXPECT(d.n = 0, VKF_ERROR_INVALID_ARGUMENT, "positive");
    MM_EXPECT(d.k = 0, VKF_ERROR_INVALID_ARGUMENT, "positive");
    /* Views reaching past their tensors. */
    MM_EXPECT(d.a.tensor = o->a_short, VKF_ERROR_INVALID_ARGUMENT, "A view");
    MM_EXPECT(d.a.offset = 1, VKF_ERROR_INVALID_ARGUMENT, "A view");
    MM_EXPECT(d.a.offset = 1ull << 40, VKF_ERROR_INVALID_ARGUMENT, "A view");
    MM_EXPECT(d.a.offset = UINT64_MAX, VKF_ERROR_INVALID_ARGUMENT, "A view");
    MM_EXPECT(d.a.row_stride = K + 1, VKF_ERROR_INVALID_ARGUMENT, "A view");
    MM_EXPECT(d.a.row_stride = K - 1, VKF_ERROR_INVALID_ARGUMENT, "row_stride"); /* rows would overlap */
    /* a_rows_overlap lets A's rows overlap (conv1d windows), never B's or C's */
    MM_EXPECT((d.a_rows_overlap = true, d.b.row_stride = K - 1), VKF_ERROR_INVALID_ARGUMENT, "row_stride");
    MM_EXPECT((d.a_rows_overlap = true, d.c.row_stride = N - 1), VKF_ERROR_INVALID_ARGUMENT, "row_stride");
    MM_EXPECT((d.a_rows_overlap = true, d.a.row_stride = K - 1, d.a.offset = 1ull << 20), VKF_ERROR_INVALID_ARGUMENT,
              "A view");
    MM_EXPECT(d.a.row_stride = UINT64_MAX / 2, VKF_ERROR_INVALID_ARGUMENT, "A view");
    MM_EXPECT((d.batch[0] = 2, d.a.batch_stride[0] = M * K), VKF_ERROR_INVALID_ARGUMENT, "A view");
    MM_EXPECT((d.batch[1] = 2, d.b.batch_stride[1] = 1), VKF_ERROR_INVALID_ARGUMENT, "B view");
    MM_EXPECT((d.batch[0] = 3, d.c.batch_stride[0] = UINT64_MAX / 2), VKF_ERROR_INVALID_ARGUMENT, "C view");
    MM_EXPECT(d.b.offset = 2, VKF_ERROR_INVALID_ARGUMENT, "B view");
    /* B as (K, N) with rows of K elements runs past the N*K elements. */
    MM_EXPECT((d.b_is_k_by_n = true, d.b.row_stride = K), VKF_ERROR_INVALID_ARGUMENT, "B view");
    MM_EXPECT(d.c.tensor = o->bias_short, VKF_ERROR_INVALID_ARGUMENT, "C view");
    MM_EXPECT(d.c.row_stride = N + 1, VKF_ERROR_INVALID_ARGUMENT, "C view");
    MM_EXPECT((d.residual.tensor = o->r, d.residual.offset = 1), VKF_ERROR_INVALID_ARGUMENT, "residual view");
    MM_EXPECT(d.residual.tensor = o->bias, VKF_ERROR_INVALID_ARGUMENT, "residual view");
    /* Missing or wrong tensors. */
    MM_EXPECT(d.a.tensor = NULL, VKF_ERROR_INVALID_ARGUMENT, "A is NULL");
    MM_EXPECT(d.b.tensor = NULL, VKF_ERROR_INVALID_ARGUMENT, "B is NULL");
    MM_EXPECT(d.c.tensor = NULL, VKF_ERROR_INVALID_ARGUMENT, "C is NULL");
    MM_EXPECT(d.a.tensor = o->a_i32, VKF_ERROR_INVALID_ARGUMENT, "F32");
    MM_EXPECT(d.c.tensor = o->a_i32, VKF_ERROR_INVALID_ARGUMENT, "F32");
    MM_EXPECT(d.bias = o->bias_short, VKF_ERROR_INVALID_ARGUMENT, "bias");
    MM_EXPECT(d.bias = o->ids_i32, VKF_ERROR_INVALID_ARGUMENT, "F32");
    /* Aliasing; the sizes fit, so only the aliasing is wrong. */
    MM_EXPECT(d.residual.tensor = o->c, VKF_ERROR_INVALID_ARGUMENT, "alias");
    MM_EXPECT((d.c.tensor = o->a, d.k = N), VKF_ERROR_INVALID_ARGUMENT, "alias");
    MM_EXPECT((d.c.tensor = o->b, d.k = N), VKF_ERROR_INVALID_ARGUMENT, "alias");
    MM_EXPECT(d.bias = o->c, VKF_ERROR_INVALID_ARGUMENT, "alias");
    /* Bad values. */
    MM_EXPECT(d.activation = (vkf_activation)5, VKF_ERROR_INVALID_ARGUMENT, "activation");
    MM_EXPECT(d.activation = (vkf_activation)-1, VKF_ERROR_INVALID_ARGUMENT, "activation");
    MM_EXPECT(d.alpha = NAN, VKF_ERROR_INVALID_ARGUMENT, "alpha");
    MM_EXPECT(d.alpha = INFINITY, VKF_ERROR_INVALID_ARGUMENT, "alpha");
    MM_EXPECT(d.alpha = -INFINITY, VKF_ERROR_INVALID_ARGUMENT, "alpha");

    /* A grid past the device's workgroup count: 1×1 products over small tensors
     * (every batch stride 0), in more batches than the z axis allows. */
    uint32_t max_z = info->max_workgroup_count[2];
    /* (A z limit near 2^32 is refused as a batch count past 2^32 instead.) */
    const char *grid = max_z < UINT32_MAX / 2 ? "workgroups" : "";
#define TINY (d.m = d.n = d.k = 1, d.a.tensor = o->bias_short, d.b.tensor = o->bias, d.c.tensor = o->r)
    MM_EXPECT((TINY, d.batch[0] = 2, d.batch[1] = max_z / 2 + 1), VKF_ERROR_TOO_LARGE, grid);
    MM_EXPECT((TINY, d.batch[0] = max_z, d.batch[1] = 2), VKF_ERROR_TOO_LARGE, grid);
    if (max_z < UINT32_MAX) MM_EXPECT((TINY, d.batch[0] = max_z + 1u, d.batch[1] = 1), VKF_ERROR_TOO_LARGE, grid);
    MM_EXPECT((TINY, d.batch[0] = UINT32_MAX, d.batch[1] = UINT32_MAX), VKF_ERROR_TOO_LARGE, "2^32");
    /* The limit itself is accepted (recorded into a scratch list, never submitted). */
    vkf_cmd *scratch;
    CHECK_OK(vkf_cmd_create(ctx, 0, &scratch));
    matmul_valid(o, &d);
    TINY;
    d.batch[0] = max_z;
    CHECK_OK(vkf_cmd_matmul(scratch, &d));
    CHECK(vkf_cmd_op_count(scratch) == 1);
    vkf_cmd_destroy(scratch);
#undef TINY
#undef MM_EXPECT
}

static void test_softmax_errors(vkf_cmd *cmd, const operands *o)
{
    vkf_softmax_desc d;
#define SM_EXPECT(change, status, keyword)                                                          \
    do {                                                                                            \
        vkf_softmax_desc_init(&d);                                                                  \
        d.rows = M, d.cols = N, d.x = o->c, d.y = o->r;                                             \
        change;                                                                                     \
        CHECK_FAIL(vkf_cmd_softmax(cmd, &d), status, keyword);                                      \
    } while (0)

    SM_EXPECT(d.rows = 0, VKF_ERROR_INVALID_ARGUMENT, "positive");
    SM_EXPECT(d.cols = 0, VKF_ERROR_INVALID_ARGUMENT, "positive");
    SM_EXPECT(d.rows = M + 1, VKF_ERROR_INVALID_ARGUMENT, "x holds");   /* x (and y) too small */
    SM_EXPECT(d.x = o->bias, VKF_ERROR_INVALID_ARGUMENT, "x holds");
    SM_EXPECT(d.y = o->bias, VKF_ERROR_INVALID_ARGUMENT, "y holds");
    SM_EXPECT(d.x = NULL, VKF_ERROR_INVALID_ARGUMENT, "x is NULL");
    SM_EXPECT(d.y = NULL, VKF_ERROR_INVALID_ARGUMENT, "y is NULL");
    SM_EXPECT(d.x = o->a_i32, VKF_ERROR_INVALID_ARGUMENT, "F32");
    SM_EXPECT((d.mask = o->bias, d.mask_rows = 0), VKF_ERROR_INVALID_ARGUMENT, "mask_rows");
    SM_EXPECT((d.mask = o->bias, d.mask_rows = 2), VKF_ERROR_INVALID_ARGUMENT, "mask holds");
    SM_EXPECT((d.mask = o->r, d.mask_rows = 1), VKF_ERROR_INVALID_ARGUMENT, "alias");
    SM_EXPECT(d.scale = NAN, VKF_ERROR_INVALID_ARGUMENT, "scale");
    SM_EXPECT(d.scale = INFINITY, VKF_ERROR_INVALID_ARGUMENT, "scale");
#undef SM_EXPECT
}

static void test_layernorm_errors(vkf_cmd *cmd, const operands *o)
{
    vkf_layernorm_desc d;
#define LN_EXPECT(change, status, keyword)                                                          \
    do {                                                                                            \
        vkf_layernorm_desc_init(&d);                                                                \
        d.rows = M, d.cols = N, d.x = o->c, d.gamma = o->bias, d.beta = o->bias, d.y = o->r;        \
        change;                                                                                     \
        CHECK_FAIL(vkf_cmd_layernorm(cmd, &d), status, keyword);                                    \
    } while (0)

    LN_EXPECT(d.rows = 0, VKF_ERROR_INVALID_ARGUMENT, "positive");
    LN_EXPECT(d.cols = 0, VKF_ERROR_INVALID_ARGUMENT, "positive");
    LN_EXPECT(d.eps = 0.0f, VKF_ERROR_INVALID_ARGUMENT, "eps");
    LN_EXPECT(d.eps = -1e-5f, VKF_ERROR_INVALID_ARGUMENT, "eps");
    LN_EXPECT(d.eps = NAN, VKF_ERROR_INVALID_ARGUMENT, "eps");
    LN_EXPECT(d.eps = INFINITY, VKF_ERROR_INVALID_ARGUMENT, "eps");
    LN_EXPECT(d.gamma = o->bias_short, VKF_ERROR_INVALID_ARGUMENT, "gamma holds");
    LN_EXPECT(d.beta = o->bias_short, VKF_ERROR_INVALID_ARGUMENT, "beta holds");
    LN_EXPECT(d.gamma = NULL, VKF_ERROR_INVALID_ARGUMENT, "gamma is NULL");
    LN_EXPECT(d.beta = NULL, VKF_ERROR_INVALID_ARGUMENT, "beta is NULL");
    LN_EXPECT(d.rows = M + 1, VKF_ERROR_INVALID_ARGUMENT, "x holds");
    LN_EXPECT(d.residual = o->bias, VKF_ERROR_INVALID_ARGUMENT, "residual holds");
    LN_EXPECT(d.sum = o->r, VKF_ERROR_INVALID_ARGUMENT, "alias");       /* sum is y */
    LN_EXPECT(d.sum = o->c, VKF_ERROR_INVALID_ARGUMENT, "alias");       /* sum is x */
    LN_EXPECT((d.residual = o->a, d.sum = o->a), VKF_ERROR_INVALID_ARGUMENT, "alias");
    LN_EXPECT(d.sum = o->bias, VKF_ERROR_INVALID_ARGUMENT, "sum holds");
    LN_EXPECT((d.x = o->r, d.y = o->c, d.gamma = o->c), VKF_ERROR_INVALID_ARGUMENT, "overlaps"); /* y is gamma */
    LN_EXPECT(d.x = o->a_i32, VKF_ERROR_INVALID_ARGUMENT, "F32");
#undef LN_EXPECT
}

static void test_embed_errors(vkf_context *ctx, vkf_cmd *cmd, const operands *o)
{
    /* M ids into the (N, K) table b: vocab N, d K; out is a (M, K). */
    vkf_tensor *pe_wrong_d, *pe_short, *pe_rank1;
    CHECK_OK(vkf_positional_encoding_create(ctx, 64, K + 1, &pe_wrong_d));
    CHECK_OK(vkf_positional_encoding_create(ctx, 9, K, &pe_short));
    uint64_t flat = 64 * K;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &flat, &pe_rank1));
    vkf_embed_desc d;
#define EM_BASE(d)                                                                                  \
    (vkf_embed_desc_init(&(d)), (d).tokens = M, (d).d = K, (d).vocab = N, (d).ids = o->ids_i32,     \
     (d).table = o->b, (d).out = o->a)
#define EM_EXPECT(change, status, keyword)                                                          \
    do {                                                                                            \
        EM_BASE(d);                                                                                 \
        change;                                                                                     \
        CHECK_FAIL(vkf_cmd_embed(cmd, &d), status, keyword);                                        \
    } while (0)

    EM_EXPECT(d.vocab = 0, VKF_ERROR_INVALID_ARGUMENT, "positive");
    EM_EXPECT(d.tokens = 0, VKF_ERROR_INVALID_ARGUMENT, "positive");
    EM_EXPECT(d.d = 0, VKF_ERROR_INVALID_ARGUMENT, "positive");
    EM_EXPECT(d.ids = o->ids_f32, VKF_ERROR_INVALID_ARGUMENT, "I32");
    EM_EXPECT(d.ids = NULL, VKF_ERROR_INVALID_ARGUMENT, "ids is NULL");
    EM_EXPECT(d.vocab = N + 1, VKF_ERROR_INVALID_ARGUMENT, "table holds");
    EM_EXPECT(d.tokens = M + 1, VKF_ERROR_INVALID_ARGUMENT, "ids holds");
    EM_EXPECT(d.table = o->a_i32, VKF_ERROR_INVALID_ARGUMENT, "F32");
    EM_EXPECT(d.out = o->b, VKF_ERROR_INVALID_ARGUMENT, "alias");       /* out is the table */
    EM_EXPECT(d.scale = NAN, VKF_ERROR_INVALID_ARGUMENT, "scale");
    EM_EXPECT(d.positions = pe_wrong_d, VKF_ERROR_INVALID_ARGUMENT, "positions");
    EM_EXPECT(d.positions = pe_rank1, VKF_ERROR_INVALID_ARGUMENT, "positions");
    EM_EXPECT(d.positions = o->ids_i32, VKF_ERROR_INVALID_ARGUMENT, "F32");
    /* pe_short holds positions 0..8: M = 5 tokens from offset 5 reach 9. */
    EM_EXPECT((d.positions = pe_short, d.pos_offset = 5), VKF_ERROR_INVALID_ARGUMENT, "positions");
    EM_EXPECT((d.positions = pe_short, d.seq_len = 10), VKF_ERROR_INVALID_ARGUMENT, "positions");
    EM_EXPECT((d.positions = pe_short, d.pos_offset = UINT32_MAX), VKF_ERROR_INVALID_ARGUMENT, "positions");
    EM_EXPECT(d.table_row0 = N, VKF_ERROR_INVALID_ARGUMENT, "vocabulary");          /* a part past the vocabulary */
    EM_EXPECT((d.table_row0 = 1, d.table_rows = N), VKF_ERROR_INVALID_ARGUMENT, "vocabulary");
    EM_EXPECT((d.table_rows = N, d.vocab = N + 5, d.table = o->a), VKF_ERROR_INVALID_ARGUMENT, "table holds"); /* part too small */
    /* int8 tables: one F32 scale per row of the table (part), only with an I8 table */
    vkf_tensor *t8, *sc, *sc_short, *sc_long, *sc_i32;
    uint64_t t8_shape[2] = {N, K}, n_rows = N, n_short = N - 1, n_long = N + 1;
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I8, 2, t8_shape, &t8));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &n_rows, &sc));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &n_short, &sc_short));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &n_long, &sc_long));
    CHECK_OK(vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &n_rows, &sc_i32));
    EM_EXPECT(d.table = t8, VKF_ERROR_INVALID_ARGUMENT, "table_scale is NULL");          /* missing scales */
    EM_EXPECT(d.table_scale = sc, VKF_ERROR_INVALID_ARGUMENT, "not I8");                /* scales of a float table */
    EM_EXPECT((d.table = t8, d.table_scale = sc_short), VKF_ERROR_INVALID_ARGUMENT, "table_scale holds");
    EM_EXPECT((d.table = t8, d.table_scale = sc_long), VKF_ERROR_INVALID_ARGUMENT, "table_scale holds");
    EM_EXPECT((d.table = t8, d.table_scale = sc_i32), VKF_ERROR_INVALID_ARGUMENT, "F32");
    /* a part of N - 1 rows needs N - 1 scales */
    EM_EXPECT((d.table = t8, d.table_scale = sc, d.table_rows = N - 1), VKF_ERROR_INVALID_ARGUMENT, "table_scale holds");
    EM_EXPECT((d.table = t8, d.table_scale = sc, d.vocab = N + 1), VKF_ERROR_INVALID_ARGUMENT, "table holds");
#undef EM_EXPECT
    /* The boundary is accepted: offset 4 uses positions 4..8. Recorded into a
     * scratch list, as the shared one must stay empty. */
    vkf_cmd *scratch;
    CHECK_OK(vkf_cmd_create(ctx, 0, &scratch));
    EM_BASE(d);
    d.positions = pe_short, d.pos_offset = 4;
    CHECK_OK(vkf_cmd_embed(scratch, &d));
    CHECK(vkf_cmd_op_count(scratch) == 1);
    EM_BASE(d); /* an I8 table with its scales, whole and as a part of N - 1 rows */
    d.table = t8, d.table_scale = sc;
    CHECK_OK(vkf_cmd_embed(scratch, &d));
    d.table_rows = N - 1, d.table_scale = sc_short;
    CHECK_OK(vkf_cmd_embed(scratch, &d));
    CHECK(vkf_cmd_op_count(scratch) == 3);
    vkf_cmd_destroy(scratch);
    vkf_tensor_destroy(t8), vkf_tensor_destroy(sc), vkf_tensor_destroy(sc_short), vkf_tensor_destroy(sc_long);
    vkf_tensor_destroy(sc_i32);
#undef EM_BASE
    vkf_tensor_destroy(pe_wrong_d);
    vkf_tensor_destroy(pe_short);
    vkf_tensor_destroy(pe_rank1);
}

/* ------------------------------------------------------------------ state */

static void test_state_errors(vkf_context *ctx, const operands *o, const vkf_device_info *info)
{
    vkf_matmul_desc d;
    matmul_valid(o, &d);

    /* Recording after the first submit. */
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    CHECK_STATUS(vkf_cmd_matmul(cmd, &d), VKF_ERROR_STATE);
    vkf_softmax_desc sm;
    vkf_softmax_desc_init(&sm);
    sm.rows = M, sm.cols = N, sm.x = o->c, sm.y = o->c;
    CHECK_STATUS(vkf_cmd_softmax(cmd, &sm), VKF_ERROR_STATE);
    CHECK(vkf_cmd_op_count(cmd) == 1);
    /* Timings of a list made without VKF_CMD_TIMESTAMPS, even after a submit. */
    double ms[2];
    uint32_t count = 77;
    CHECK_STATUS(vkf_cmd_timings(cmd, ms, 2, &count), VKF_ERROR_STATE);
    CHECK(count == 0);
    CHECK_OK(vkf_cmd_submit(cmd)); /* still submittable */
    vkf_cmd_destroy(cmd);

    /* Timings before the first submit. */
    if (info->timestamps) {
        CHECK_OK(vkf_cmd_create(ctx, VKF_CMD_TIMESTAMPS, &cmd));
        count = 77;
        CHECK_STATUS(vkf_cmd_timings(cmd, ms, 2, &count), VKF_ERROR_STATE);
        CHECK(count == 0);
        CHECK_OK(vkf_cmd_matmul(cmd, &d));
        CHECK_STATUS(vkf_cmd_timings(cmd, ms, 2, &count), VKF_ERROR_STATE);
        CHECK_OK(vkf_cmd_submit(cmd));
        CHECK_OK(vkf_cmd_timings(cmd, ms, 2, &count));
        CHECK(count == 1);
        vkf_cmd_destroy(cmd);
    } else {
        CHECK_STATUS(vkf_cmd_create(ctx, VKF_CMD_TIMESTAMPS, &cmd), VKF_ERROR_UNSUPPORTED);
    }

    /* A tensor of another context, in every slot of an op. */
    vkf_context *other = harness_context();
    vkf_tensor *foreign_a = tensor_2d(other, VKF_DTYPE_F32, M, K);
    vkf_tensor *foreign_c = tensor_2d(other, VKF_DTYPE_F32, M, N);
    vkf_tensor *foreign_bias = tensor_2d(other, VKF_DTYPE_F32, 1, N);
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    matmul_valid(o, &d);
    d.a.tensor = foreign_a;
    CHECK_STATUS(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT);
    matmul_valid(o, &d);
    d.c.tensor = foreign_c;
    CHECK_STATUS(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT);
    matmul_valid(o, &d);
    d.bias = foreign_bias;
    CHECK_STATUS(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT);
    matmul_valid(o, &d);
    d.residual.tensor = foreign_c;
    CHECK_STATUS(vkf_cmd_matmul(cmd, &d), VKF_ERROR_INVALID_ARGUMENT);
    sm.x = foreign_c, sm.y = o->c;
    CHECK_STATUS(vkf_cmd_softmax(cmd, &sm), VKF_ERROR_INVALID_ARGUMENT);
    vkf_layernorm_desc ln;
    vkf_layernorm_desc_init(&ln);
    ln.rows = M, ln.cols = N, ln.x = o->c, ln.gamma = foreign_bias, ln.beta = o->bias, ln.y = o->r;
    CHECK_STATUS(vkf_cmd_layernorm(cmd, &ln), VKF_ERROR_INVALID_ARGUMENT);
    CHECK(vkf_cmd_op_count(cmd) == 0);
    vkf_cmd_destroy(cmd);
    /* A list of the other context with this one's tensors. */
    vkf_cmd *other_cmd;
    CHECK_OK(vkf_cmd_create(other, 0, &other_cmd));
    matmul_valid(o, &d);
    CHECK_STATUS(vkf_cmd_matmul(other_cmd, &d), VKF_ERROR_INVALID_ARGUMENT);
    vkf_cmd_destroy(other_cmd);
    vkf_tensor_destroy(foreign_a), vkf_tensor_destroy(foreign_c), vkf_tensor_destroy(foreign_bias);
    harness_close(other);
}

/* ------------------------------------------------------------------ context options */

static void test_context_options(const vkf_device_info *info)
{
    vkf_context_options opts;
    vkf_context *ctx = SENTINEL;

    vkf_context_options_init(&opts);
    opts.device = "no-such-device-xyz";
    CHECK_STATUS(vkf_context_create(&opts, &ctx), VKF_ERROR_NO_DEVICE);
    CHECK(ctx == NULL);
    /* The message names the request and lists the devices there are. */
    CHECK(strstr(vkf_last_error(), "no-such-device-xyz") != NULL);
    CHECK(strstr(vkf_last_error(), info->name) != NULL);

    ctx = SENTINEL;
    opts.device = "99";
    CHECK_STATUS(vkf_context_create(&opts, &ctx), VKF_ERROR_NO_DEVICE);
    CHECK(ctx == NULL);
    CHECK(strstr(vkf_last_error(), "99") != NULL);

    vkf_context_options_init(&opts);
    static const int bad_validation[] = {7, 2, -2};
    for (size_t i = 0; i < sizeof bad_validation / sizeof bad_validation[0]; i++) {
        opts.validation = bad_validation[i];
        ctx = SENTINEL;
        CHECK_STATUS(vkf_context_create(&opts, &ctx), VKF_ERROR_INVALID_ARGUMENT);
        CHECK(ctx == NULL);
    }

    /* No Vulkan loader: a missing library, and a library that is not a loader. */
    uint32_t count;
    static const char *not_loaders[] = {"/nonexistent/libvulkan.so.1", "libm.so.6"};
    for (size_t i = 0; i < sizeof not_loaders / sizeof not_loaders[0]; i++) {
        setenv("VKFORMER_VULKAN_LOADER", not_loaders[i], 1);
        ctx = SENTINEL;
        CHECK_STATUS(vkf_context_create(NULL, &ctx), VKF_ERROR_NO_VULKAN);
        CHECK(ctx == NULL);
        CHECK(strstr(vkf_last_error(), not_loaders[i]) != NULL);
        count = 77;
        CHECK_STATUS(vkf_devices_list(NULL, 0, &count), VKF_ERROR_NO_VULKAN);
        CHECK(count == 0);
    }
    unsetenv("VKFORMER_VULKAN_LOADER");

    /* No Vulkan driver: the loader finds no ICD. */
    char *icd = getenv("VK_ICD_FILENAMES") ? strdup(getenv("VK_ICD_FILENAMES")) : NULL;
    char *drivers = getenv("VK_DRIVER_FILES") ? strdup(getenv("VK_DRIVER_FILES")) : NULL;
    setenv("VK_ICD_FILENAMES", "/nonexistent/icd.json", 1);
    setenv("VK_DRIVER_FILES", "/nonexistent/icd.json", 1);
    ctx = SENTINEL;
    CHECK_STATUS(vkf_context_create(NULL, &ctx), VKF_ERROR_NO_DEVICE);
    CHECK(ctx == NULL);
    count = 77;
    vkf_status st = vkf_devices_list(NULL, 0, &count);
    /* Either the instance fails (no driver) or it lists nothing. */
    CHECK(st == VKF_ERROR_NO_DEVICE || (st == VKF_OK && count == 0));
    CHECK(count == 0);
    if (icd) setenv("VK_ICD_FILENAMES", icd, 1);
    else unsetenv("VK_ICD_FILENAMES");
    if (drivers) setenv("VK_DRIVER_FILES", drivers, 1);
    else unsetenv("VK_DRIVER_FILES");
    free(icd), free(drivers);
}

/* ------------------------------------------------------------------ still working */

/* Records one valid matmul into `cmd` (which every failed call above left empty),
 * submits it and compares against the reference. */
static void test_still_works(vkf_cmd *cmd, const operands *o)
{
    CHECK(vkf_cmd_op_count(cmd) == 0);
    float *a = harness_random(M * K, 1), *b = harness_random(N * K, 2), *bias = harness_random(N, 3);
    CHECK_OK(vkf_tensor_upload(o->a, a, M * K * 4));
    CHECK_OK(vkf_tensor_upload(o->b, b, N * K * 4));
    CHECK_OK(vkf_tensor_upload(o->bias, bias, N * 4));
    vkf_matmul_desc d;
    matmul_valid(o, &d);
    d.bias = o->bias;
    d.activation = VKF_ACTIVATION_RELU;
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK(vkf_cmd_op_count(cmd) == 1);
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(o->c);
    float want[M * N];
    ref_matmul(want, N, a, K, b, K, false, bias, NULL, 0, M, N, K, 1.0f, 1);
    harness_compare("matmul after the failures", got, want, M * N, 1e-5, 1e-4);
    free(a), free(b), free(bias), free(got);
}

/* ------------------------------------------------------------------ status names, version */

static void test_names(void)
{
    const char *names[13];
    for (int s = 0; s <= 12; s++) {
        names[s] = vkf_status_string((vkf_status)s);
        CHECK(names[s] != NULL && names[s][0] != '\0');
        if (!names[s]) names[s] = "";
        for (int t = 0; t < s; t++)
            if (strcmp(names[s], names[t]) == 0) {
                fprintf(stderr, "status %d and %d are both named %s\n", t, s, names[s]);
                harness_failures++;
            }
    }
    CHECK(strcmp(vkf_status_string(VKF_OK), "VKF_OK") == 0);
    CHECK(strcmp(vkf_status_string(VKF_ERROR_TOO_LARGE), "VKF_ERROR_TOO_LARGE") == 0);
    CHECK(strcmp(vkf_status_string(VKF_ERROR_STATE), "VKF_ERROR_STATE") == 0);
    static const int unknown[] = {13, 99, -1};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *u = vkf_status_string((vkf_status)unknown[i]);
        CHECK(u != NULL && u[0] != '\0');
        for (int s = 0; u && s <= 12; s++) CHECK(strcmp(u, names[s]) != 0);
    }
    CHECK(vkf_version() == VKF_VERSION_NUMBER);
    CHECK(VKF_VERSION_NUMBER == 100);
    CHECK(strcmp(vkf_version_string(), "0.1.0") == 0);
}

int main(void)
{
    test_names();
    vkf_context *ctx = harness_context();
    vkf_device_info info;
    CHECK_OK(vkf_context_device_info(ctx, &info));

    test_null_arguments(ctx);
    test_tensor_errors(ctx, &info);
    test_context_options(&info);

    operands o;
    operands_make(ctx, &o);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    test_matmul_errors(ctx, cmd, &o, &info);
    test_softmax_errors(cmd, &o);
    test_layernorm_errors(cmd, &o);
    test_embed_errors(ctx, cmd, &o);
    test_state_errors(ctx, &o, &info);
    test_still_works(cmd, &o);
    vkf_cmd_destroy(cmd);
    operands_free(&o);

    harness_close(ctx);
    return harness_result("test_errors");
}

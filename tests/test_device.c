/* The device layer, device memory and the command recorder: device discovery and
 * choice (index, name substring, VKFORMER_DEVICE); sub-allocation of many tensors
 * with no overlap, exact accounting and reuse of freed ranges; the staging path
 * (allow_host_visible = false) and small blocks; dependent ops in one command list
 * (read-after-write, write-after-read, write-after-write), re-submission, and
 * per-op GPU timestamps past one query pool. The hazard tests run with the
 * validation layer's synchronization checks on, so a missing barrier fails them
 * even on CPU drivers that happen to run dispatches in order. */
#include "harness.h"
#include "internal.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1ull << 20)

static vkf_tensor *tensor_nd(vkf_context *ctx, vkf_dtype dtype, uint32_t rank, const uint64_t *shape)
{
    vkf_tensor *t = NULL;
    vkf_status st = vkf_tensor_create(ctx, dtype, rank, shape, &t);
    if (st != VKF_OK) {
        fprintf(stderr, "cannot make a rank-%u tensor: %s: %s\n", rank, vkf_status_string(st), vkf_last_error());
        exit(1);
    }
    return t;
}

/* A word pattern: at any index, distinct tags give distinct words. */
static uint32_t pattern(uint32_t tag, uint64_t i)
{
    return ((tag + 1u) * 0x85EBCA6Bu) ^ ((uint32_t)i * 0x9E3779B1u);
}

static void fill_pattern(uint32_t *v, uint64_t n, uint32_t tag)
{
    for (uint64_t i = 0; i < n; i++) v[i] = pattern(tag, i);
}

/* Downloads the tensor and compares it word by word with pattern `tag`. */
static bool verify_pattern(vkf_tensor *t, uint32_t tag, const char *what)
{
    uint64_t bytes = vkf_tensor_bytes(t), n = bytes / 4;
    uint32_t *v = harness_alloc(bytes);
    memset(v, 0xAB, bytes);
    vkf_status st = vkf_tensor_download(t, v, bytes);
    bool ok = st == VKF_OK;
    if (!ok) fprintf(stderr, "%s: download failed: %s\n", what, vkf_last_error());
    for (uint64_t i = 0; ok && i < n; i++)
        if (v[i] != pattern(tag, i)) {
            fprintf(stderr, "%s: word %llu of %llu is 0x%08x, expected 0x%08x\n", what, (unsigned long long)i,
                    (unsigned long long)n, v[i], pattern(tag, i));
            ok = false;
        }
    if (!ok) harness_failures++;
    free(v);
    return ok;
}

static void upload_pattern(vkf_tensor *t, uint32_t tag)
{
    uint64_t bytes = vkf_tensor_bytes(t);
    uint32_t *v = harness_alloc(bytes);
    fill_pattern(v, bytes / 4, tag);
    CHECK_OK(vkf_tensor_upload(t, v, bytes));
    free(v);
}

/* ------------------------------------------------------------------ discovery */

static void test_devices_list(const vkf_device_info *mine)
{
    uint32_t count = 0;
    CHECK_OK(vkf_devices_list(NULL, 0, &count));
    CHECK(count >= 1);
    if (count == 0) return;
    CHECK(mine->index < count);
    vkf_device_info *infos = harness_alloc((count + 1) * sizeof *infos);
    memset(infos, 0x5A, (count + 1) * sizeof *infos);
    uint32_t count2 = 0;
    CHECK_OK(vkf_devices_list(infos, count + 1, &count2));
    CHECK(count2 == count);
    /* Nothing past the devices there are is written. */
    const unsigned char *past = (const unsigned char *)&infos[count];
    bool untouched = true;
    for (size_t i = 0; i < sizeof *infos; i++) untouched &= past[i] == 0x5A;
    CHECK(untouched);
    for (uint32_t i = 0; i < count; i++) {
        const vkf_device_info *d = &infos[i];
        fprintf(stderr, "device %u: %s, subgroup %u, binding range %llu, %u heaps\n", i, d->name, d->subgroup_size,
                (unsigned long long)d->max_storage_buffer_range, d->heap_count);
        CHECK(d->index == i);
        CHECK(d->name[0] != '\0');
        CHECK(memchr(d->name, '\0', sizeof d->name) != NULL);
        CHECK(d->max_workgroup_invocations >= 64);
        CHECK(d->max_storage_buffer_range > 0);
        /* The minimums every Vulkan device guarantees. */
        CHECK(d->max_storage_buffer_range >= (1ull << 27));
        CHECK(d->max_shared_memory >= 16384);
        CHECK(d->max_push_constants >= 128);
        for (int a = 0; a < 3; a++) CHECK(d->max_workgroup_count[a] >= 65535);
        CHECK(d->max_workgroup_size[0] >= 128);
        CHECK(d->subgroup_size > 0);
        CHECK(d->heap_count >= 1 && d->heap_count <= VKF_MAX_HEAPS);
        bool local = false;
        for (uint32_t h = 0; h < d->heap_count && h < VKF_MAX_HEAPS; h++) {
            CHECK(d->heaps[h].size > 0);
            local |= d->heaps[h].device_local;
        }
        CHECK(local); /* Vulkan requires a device-local heap */
        if (d->timestamps) CHECK(d->timestamp_period_ns > 0 && isfinite(d->timestamp_period_ns));
    }
    /* The context's device as listed. */
    const vkf_device_info *listed = &infos[mine->index < count ? mine->index : 0];
    CHECK(strcmp(listed->name, mine->name) == 0);
    CHECK(listed->vendor_id == mine->vendor_id && listed->device_id == mine->device_id);
    CHECK(listed->max_storage_buffer_range == mine->max_storage_buffer_range);
    CHECK(listed->subgroup_size == mine->subgroup_size);
    CHECK(listed->unified_memory == mine->unified_memory); /* the default context may write directly */
    /* A short array gets the first entries and the full count. */
    vkf_device_info one;
    count2 = 0;
    CHECK_OK(vkf_devices_list(&one, 1, &count2));
    CHECK(count2 == count);
    CHECK(strcmp(one.name, infos[0].name) == 0);
    free(infos);
}

/* Index of the first listed device whose name contains `word`, case-insensitively. */
static uint32_t first_match(const char *word)
{
    uint32_t count = 0;
    vkf_devices_list(NULL, 0, &count);
    vkf_device_info *infos = harness_alloc((count ? count : 1) * sizeof *infos);
    vkf_devices_list(infos, count, &count);
    uint32_t found = UINT32_MAX;
    for (uint32_t i = 0; i < count && found == UINT32_MAX; i++) {
        char lower[256];
        size_t n = strlen(infos[i].name);
        for (size_t j = 0; j <= n; j++) lower[j] = (char)tolower((unsigned char)infos[i].name[j]);
        if (strstr(lower, word)) found = i;
    }
    free(infos);
    return found;
}

/* A context on the device `request` names; compares it with `want` (index). */
static void expect_device(const char *request, uint32_t want, const char *want_name)
{
    vkf_context_options o;
    vkf_context_options_init(&o);
    o.device = request;
    vkf_context *ctx = harness_context_with(&o);
    vkf_device_info info;
    CHECK_OK(vkf_context_device_info(ctx, &info));
    if (info.index != want || strcmp(info.name, want_name) != 0) {
        fprintf(stderr, "device request \"%s\" chose %u (%s), expected %u (%s)\n", request ? request : "(NULL)",
                info.index, info.name, want, want_name);
        harness_failures++;
    }
    harness_close(ctx);
}

static void test_device_choice(const vkf_device_info *mine)
{
    uint32_t count = 0;
    CHECK_OK(vkf_devices_list(NULL, 0, &count));
    vkf_device_info *infos = harness_alloc((count ? count : 1) * sizeof *infos);
    CHECK_OK(vkf_devices_list(infos, count, &count));

    /* By index. */
    expect_device("0", 0, infos[0].name);
    char index[16];
    snprintf(index, sizeof index, "%u", mine->index);
    expect_device(index, mine->index, mine->name);

    /* By a case-insensitive substring: the first word of the name, lower and upper case. */
    char word[64];
    size_t n = 0;
    while (mine->name[n] && !isspace((unsigned char)mine->name[n]) && n + 1 < sizeof word) {
        word[n] = (char)tolower((unsigned char)mine->name[n]);
        n++;
    }
    word[n] = '\0';
    uint32_t want = first_match(word);
    CHECK(want != UINT32_MAX);
    if (want != UINT32_MAX) {
        expect_device(word, want, infos[want].name);
        char upper[64];
        for (size_t i = 0; i <= n; i++) upper[i] = (char)toupper((unsigned char)word[i]);
        expect_device(upper, want, infos[want].name);
    }

    /* VKFORMER_DEVICE is used when options.device is NULL: a name that matches
     * nothing makes the create fail, a matching one picks that device. */
    vkf_context_options o;
    vkf_context_options_init(&o);
    vkf_context *ctx = NULL;
    setenv("VKFORMER_DEVICE", "no-such-device-xyz", 1);
    CHECK_STATUS(vkf_context_create(&o, &ctx), VKF_ERROR_NO_DEVICE);
    CHECK(ctx == NULL);
    CHECK(strstr(vkf_last_error(), "no-such-device-xyz") != NULL);
    vkf_context_destroy(ctx);
    /* options.device wins over the environment. */
    expect_device("0", 0, infos[0].name);
    if (want != UINT32_MAX) {
        setenv("VKFORMER_DEVICE", word, 1);
        expect_device(NULL, want, infos[want].name);
    }
    setenv("VKFORMER_DEVICE", index, 1);
    expect_device(NULL, mine->index, mine->name);
    unsetenv("VKFORMER_DEVICE");
    free(infos);
}

/* ------------------------------------------------------------------ memory */

#define NT 200

static void test_memory(vkf_context *ctx, const vkf_device_info *info)
{
    uint64_t alloc0 = 0, used0 = 0;
    CHECK_OK(vkf_context_memory_usage(ctx, &alloc0, &used0));
    /* The context holds one block from the start (with its internal placeholder);
     * its size is the block size. */
    uint64_t block = alloc0 ? alloc0 : 64 * MiB;
    /* Offsets are aligned to at most 256 bytes (Vulkan's largest
     * minStorageBufferOffsetAlignment); "used" counts the padding. */
    uint64_t align = info->min_storage_buffer_offset_alignment > 256 ? info->min_storage_buffer_offset_alignment : 256;

    vkf_tensor *t[NT];
    uint32_t tag[NT];
    uint64_t total = 0, total_aligned = 0;
    for (uint32_t i = 0; i < NT; i++) {
        /* 1 to 120k elements of either dtype, rank 1 to 4. */
        uint32_t rank = 1 + i % 4;
        uint64_t shape[4] = {1 + (i * 7919u) % 20000u, 2, 3, 1};
        uint64_t elements = 1;
        for (uint32_t r = 0; r < rank; r++) elements *= shape[r];
        t[i] = tensor_nd(ctx, i % 3 ? VKF_DTYPE_F32 : VKF_DTYPE_I32, rank, shape);
        CHECK(vkf_tensor_bytes(t[i]) == elements * 4);
        total += elements * 4;
        total_aligned += (elements * 4 + align - 1) / align * align;
        tag[i] = i;
    }
    uint64_t alloc1 = 0, used1 = 0;
    CHECK_OK(vkf_context_memory_usage(ctx, &alloc1, &used1));
    fprintf(stderr, "%u tensors of %llu bytes: %llu bytes allocated, %llu used (block %llu)\n", NT,
            (unsigned long long)total, (unsigned long long)alloc1, (unsigned long long)(used1 - used0),
            (unsigned long long)block);
    /* Sub-allocated: a couple of blocks, not one allocation per tensor. */
    CHECK(total < block); /* the sizes are chosen so */
    CHECK(alloc1 <= alloc0 + block);
    CHECK(alloc1 >= used1);
    CHECK(used1 > used0);
    CHECK(used1 - used0 >= total && used1 - used0 <= total_aligned);

    /* Every tensor holds its own data: fill all, then read all back. */
    for (uint32_t i = 0; i < NT; i++) upload_pattern(t[i], tag[i]);
    for (uint32_t i = 0; i < NT; i++) {
        char what[64];
        snprintf(what, sizeof what, "tensor %u of %u", i, NT);
        verify_pattern(t[i], tag[i], what);
    }

    /* Free half in a scrambled order, fill the holes with new tensors, check all. */
    uint32_t perm[NT];
    for (uint32_t i = 0; i < NT; i++) perm[i] = (i * 73u + 11u) % NT; /* 73 is coprime with 200 */
    for (uint32_t j = 0; j < NT; j += 2) {
        uint32_t i = perm[j];
        vkf_tensor_destroy(t[i]);
        uint64_t shape = 1 + (i * 104729u) % 30000u;
        t[i] = tensor_nd(ctx, VKF_DTYPE_F32, 1, &shape);
        tag[i] = NT + j / 2; /* distinct from every other tensor's */
        upload_pattern(t[i], tag[i]);
    }
    for (uint32_t i = 0; i < NT; i++) {
        char what[64];
        snprintf(what, sizeof what, "tensor %u after reuse", i);
        verify_pattern(t[i], tag[i], what);
    }
    uint64_t alloc2 = 0;
    CHECK_OK(vkf_context_memory_usage(ctx, &alloc2, NULL));
    CHECK(alloc2 <= alloc0 + block);

    /* Destroy everything in another scrambled order: usage returns to the start. */
    for (uint32_t j = 0; j < NT; j++) vkf_tensor_destroy(t[(j * 37u + 5u) % NT]);
    uint64_t alloc3 = 0, used3 = 0;
    CHECK_OK(vkf_context_memory_usage(ctx, &alloc3, &used3));
    CHECK(used3 == used0);
    CHECK(alloc3 <= alloc0 + block);

    /* The freed ranges were merged: a tensor of nearly a whole block fits into
     * the blocks there are (without coalescing, the first block would be cut into
     * 200 pieces). */
    uint64_t big_elements = (block - 64 * 1024) / 4;
    if (big_elements * 4 <= info->max_storage_buffer_range) {
        vkf_tensor *big = tensor_nd(ctx, VKF_DTYPE_F32, 1, &big_elements);
        uint64_t alloc4 = 0, used4 = 0;
        CHECK_OK(vkf_context_memory_usage(ctx, &alloc4, &used4));
        CHECK(alloc4 == alloc3);
        CHECK(used4 >= used0 + big_elements * 4);
        vkf_tensor_destroy(big);
        CHECK_OK(vkf_context_memory_usage(ctx, NULL, &used4));
        CHECK(used4 == used0);
    }
}

/* ------------------------------------------------------------------ matmul helper */

static void check_matmul(vkf_context *ctx, uint32_t m, uint32_t n, uint32_t k, const char *what)
{
    float *a = harness_random((size_t)m * k, m), *b = harness_random((size_t)n * k, n);
    float *bias = harness_random(n, k), *want = harness_alloc((size_t)m * n * 4);
    vkf_tensor *ta = harness_tensor(ctx, a, m, k), *tb = harness_tensor(ctx, b, n, k);
    vkf_tensor *tbias = harness_tensor(ctx, bias, 1, n), *tc = harness_tensor(ctx, NULL, m, n);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = m, d.n = n, d.k = k;
    d.a.tensor = ta, d.b.tensor = tb, d.c.tensor = tc, d.bias = tbias;
    d.activation = VKF_ACTIVATION_GELU;
    CHECK_OK(vkf_cmd_matmul(cmd, &d));
    CHECK_OK(vkf_cmd_submit(cmd));
    float *got = harness_download(tc);
    ref_matmul(want, n, a, k, b, k, false, bias, NULL, 0, m, n, k, 1.0f, 2);
    harness_compare(what, got, want, (size_t)m * n, 1e-5, 1e-4);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tbias), vkf_tensor_destroy(tc);
    free(a), free(b), free(bias), free(want), free(got);
}

/* ------------------------------------------------------------------ staging */

static void test_chain(vkf_context *ctx);

static void test_staging(void)
{
    vkf_context_options o;
    vkf_context_options_init(&o);
    o.allow_host_visible = false;
    vkf_context *ctx = harness_context_with(&o);
    vkf_device_info info;
    CHECK_OK(vkf_context_device_info(ctx, &info));
    CHECK(!info.unified_memory);

    /* Neighbours on both sides of each transfer must keep their data. */
    uint64_t small = 1000;
    vkf_tensor *before = tensor_nd(ctx, VKF_DTYPE_I32, 1, &small);
    upload_pattern(before, 201);
    /* Sizes around the 16 MiB staging chunk, and one spanning several chunks. */
    const uint64_t words[] = {1, 3, 1000, 65536 + 7, (16 * MiB) / 4, (16 * MiB) / 4 + 1, 10000003};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (words[i] * 4 > info.max_storage_buffer_range) {
            fprintf(stderr, "skipping a %llu-byte round trip: past maxStorageBufferRange\n",
                    (unsigned long long)words[i] * 4);
            continue;
        }
        vkf_tensor *t = tensor_nd(ctx, VKF_DTYPE_F32, 1, &words[i]);
        vkf_tensor *after = tensor_nd(ctx, VKF_DTYPE_I32, 1, &small);
        upload_pattern(after, 202);
        upload_pattern(t, (uint32_t)(10 + i));
        char what[64];
        snprintf(what, sizeof what, "staged round trip of %llu bytes", (unsigned long long)words[i] * 4);
        verify_pattern(t, (uint32_t)(10 + i), what);
        /* Overwrite and read again: the second upload replaces all of the first. */
        upload_pattern(t, (uint32_t)(20 + i));
        verify_pattern(t, (uint32_t)(20 + i), what);
        verify_pattern(after, 202, "neighbour after a staged upload");
        vkf_tensor_destroy(t);
        vkf_tensor_destroy(after);
    }
    verify_pattern(before, 201, "neighbour before staged uploads");
    vkf_tensor_destroy(before);

    /* Small transfers (a decode step's) reuse the context's kept staging buffer:
     * with the next vkAllocateMemory failing they still work; a large one makes
     * a buffer of its own and fails, as the driver said. */
    {
        uint64_t n = 1000, big = (2 * MiB) / 4;
        vkf_tensor *s = tensor_nd(ctx, VKF_DTYPE_I32, 1, &n), *l = tensor_nd(ctx, VKF_DTYPE_F32, 1, &big);
        upload_pattern(s, 301); /* the kept buffer exists from here on */
        vkf_test_inject_fault(ctx, "vkAllocateMemory", VK_ERROR_OUT_OF_DEVICE_MEMORY);
        upload_pattern(s, 302);
        verify_pattern(s, 302, "small staged transfers with vkAllocateMemory failing");
        float *h = calloc(big, sizeof *h);
        CHECK(h != NULL);
        if (h) CHECK_STATUS(vkf_tensor_upload(l, h, big * sizeof *h), VKF_ERROR_OUT_OF_DEVICE_MEMORY);
        free(h);
        upload_pattern(l, 303); /* the fault was one call's */
        verify_pattern(l, 303, "a large staged transfer after the fault");
        vkf_tensor_destroy(s);
        vkf_tensor_destroy(l);
    }

    check_matmul(ctx, 70, 50, 90, "matmul through staging");
    /* Dependent ops and re-submission with staged uploads in between. */
    test_chain(ctx);
    harness_close(ctx);
}

/* ------------------------------------------------------------------ small blocks */

static void test_small_blocks(void)
{
    vkf_context_options o;
    vkf_context_options_init(&o);
    o.block_size = 1 * MiB;
    vkf_context *ctx = harness_context_with(&o);
    uint64_t alloc0 = 0;
    CHECK_OK(vkf_context_memory_usage(ctx, &alloc0, NULL));
    CHECK(alloc0 <= 1 * MiB);

    /* A tensor larger than a block gets a block of its own. */
    uint64_t big_words = 3 * MiB / 4;
    vkf_tensor *big = tensor_nd(ctx, VKF_DTYPE_F32, 1, &big_words);
    uint64_t shape[2] = {600, 256}; /* 600 KiB: two of them do not fit one block */
    vkf_tensor *s1 = tensor_nd(ctx, VKF_DTYPE_F32, 2, shape), *s2 = tensor_nd(ctx, VKF_DTYPE_I32, 2, shape);
    uint64_t alloc1 = 0, used1 = 0;
    CHECK_OK(vkf_context_memory_usage(ctx, &alloc1, &used1));
    fprintf(stderr, "1 MiB blocks: %llu bytes allocated, %llu used\n", (unsigned long long)alloc1,
            (unsigned long long)used1);
    CHECK(alloc1 >= 3 * MiB + 2 * 600 * 1024);
    CHECK(alloc1 <= 3 * MiB + 3 * MiB); /* not 64 MiB blocks */
    upload_pattern(big, 31);
    upload_pattern(s1, 32);
    upload_pattern(s2, 33);
    verify_pattern(big, 31, "3 MiB tensor in 1 MiB blocks");
    verify_pattern(s1, 32, "600 KiB tensor in 1 MiB blocks");
    verify_pattern(s2, 33, "second 600 KiB tensor in 1 MiB blocks");
    vkf_tensor_destroy(big);
    vkf_tensor_destroy(s1);
    vkf_tensor_destroy(s2);
    check_matmul(ctx, 200, 300, 100, "matmul with 1 MiB blocks");
    harness_close(ctx);
}

/* ------------------------------------------------------------------ recorder hazards */

typedef struct chain {
    uint32_t m, n, k, p;
    vkf_tensor *a, *b, *c, *r, *gamma, *beta, *y, *w, *z;
} chain;

static void chain_upload(chain *ch, uint64_t seed, float **a, float **b, float **r, float **g, float **be, float **w)
{
    *a = harness_random((size_t)ch->m * ch->k, seed);
    *b = harness_random((size_t)ch->n * ch->k, seed + 1);
    *r = harness_random((size_t)ch->m * ch->n, seed + 2);
    *g = harness_random(ch->n, seed + 3);
    *be = harness_random(ch->n, seed + 4);
    *w = harness_random((size_t)ch->p * ch->n, seed + 5);
    CHECK_OK(vkf_tensor_upload(ch->a, *a, (uint64_t)ch->m * ch->k * 4));
    CHECK_OK(vkf_tensor_upload(ch->b, *b, (uint64_t)ch->n * ch->k * 4));
    CHECK_OK(vkf_tensor_upload(ch->r, *r, (uint64_t)ch->m * ch->n * 4));
    CHECK_OK(vkf_tensor_upload(ch->gamma, *g, (uint64_t)ch->n * 4));
    CHECK_OK(vkf_tensor_upload(ch->beta, *be, (uint64_t)ch->n * 4));
    CHECK_OK(vkf_tensor_upload(ch->w, *w, (uint64_t)ch->p * ch->n * 4));
}

/* Uploads fresh inputs, submits `cmd` and compares Y and Z with the reference chain. */
static void chain_run(vkf_cmd *cmd, chain *ch, uint64_t seed, const char *what)
{
    float *a, *b, *r, *g, *be, *w;
    chain_upload(ch, seed, &a, &b, &r, &g, &be, &w);
    CHECK_OK(vkf_cmd_submit(cmd));
    size_t mn = (size_t)ch->m * ch->n, mp = (size_t)ch->m * ch->p;
    float *c = harness_alloc(mn * 4), *ln = harness_alloc(mn * 4), *y = harness_alloc(mn * 4);
    float *z = harness_alloc(mp * 4);
    ref_matmul(c, ch->n, a, ch->k, b, ch->k, false, NULL, NULL, 0, ch->m, ch->n, ch->k, 1.0f, 0);
    ref_layernorm(ln, NULL, c, r, g, be, ch->m, ch->n, 1e-5f);
    ref_softmax(y, ln, ch->m, ch->n, 1.0f, NULL, 0, 0, 0, 0);
    ref_matmul(z, ch->p, y, ch->n, w, ch->n, false, NULL, NULL, 0, ch->m, ch->p, ch->n, 1.0f, 0);
    float *got_c = harness_download(ch->c), *got_y = harness_download(ch->y), *got_z = harness_download(ch->z);
    char label[128];
    snprintf(label, sizeof label, "%s: C = A.B^T", what);
    harness_compare(label, got_c, c, mn, 1e-5, 1e-4);
    snprintf(label, sizeof label, "%s: Y = softmax(layernorm(C + R))", what);
    harness_compare(label, got_y, y, mn, 1e-5, 1e-3);
    snprintf(label, sizeof label, "%s: Z = Y.W^T", what);
    harness_compare(label, got_z, z, mp, 1e-5, 1e-3);
    free(a), free(b), free(r), free(g), free(be), free(w);
    free(c), free(ln), free(y), free(z), free(got_c), free(got_y), free(got_z);
}

static void test_chain(vkf_context *ctx)
{
    chain ch = {.m = 33, .n = 48, .k = 20, .p = 17};
    ch.a = harness_tensor(ctx, NULL, ch.m, ch.k);
    ch.b = harness_tensor(ctx, NULL, ch.n, ch.k);
    ch.c = harness_tensor(ctx, NULL, ch.m, ch.n);
    ch.r = harness_tensor(ctx, NULL, ch.m, ch.n);
    ch.gamma = harness_tensor(ctx, NULL, 1, ch.n);
    ch.beta = harness_tensor(ctx, NULL, 1, ch.n);
    ch.y = harness_tensor(ctx, NULL, ch.m, ch.n);
    ch.w = harness_tensor(ctx, NULL, ch.p, ch.n);
    ch.z = harness_tensor(ctx, NULL, ch.m, ch.p);

    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc mm;
    vkf_matmul_desc_init(&mm);
    mm.m = ch.m, mm.n = ch.n, mm.k = ch.k;
    mm.a.tensor = ch.a, mm.b.tensor = ch.b, mm.c.tensor = ch.c;
    CHECK_OK(vkf_cmd_matmul(cmd, &mm));
    vkf_layernorm_desc ln;
    vkf_layernorm_desc_init(&ln);
    ln.rows = ch.m, ln.cols = ch.n, ln.x = ch.c, ln.residual = ch.r, ln.gamma = ch.gamma, ln.beta = ch.beta;
    ln.y = ch.y;
    CHECK_OK(vkf_cmd_layernorm(cmd, &ln));
    vkf_softmax_desc sm;
    vkf_softmax_desc_init(&sm);
    sm.rows = ch.m, sm.cols = ch.n, sm.x = ch.y, sm.y = ch.y;
    CHECK_OK(vkf_cmd_softmax(cmd, &sm));
    vkf_matmul_desc_init(&mm);
    mm.m = ch.m, mm.n = ch.p, mm.k = ch.n;
    mm.a.tensor = ch.y, mm.b.tensor = ch.w, mm.c.tensor = ch.z;
    CHECK_OK(vkf_cmd_matmul(cmd, &mm));
    CHECK(vkf_cmd_op_count(cmd) == 4);

    chain_run(cmd, &ch, 1000, "chain, first submit");
    /* The same list again on new inputs. */
    chain_run(cmd, &ch, 2000, "chain, second submit");
    chain_run(cmd, &ch, 3000, "chain, third submit");
    vkf_cmd_destroy(cmd);
    vkf_tensor *all[] = {ch.a, ch.b, ch.c, ch.r, ch.gamma, ch.beta, ch.y, ch.w, ch.z};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vkf_tensor_destroy(all[i]);
}

/* op1 reads X into P; op2 overwrites X (write-after-read); op3 overwrites P
 * (write-after-write with op1) with a product of the new X. */
static void test_write_after_read(vkf_context *ctx)
{
    enum { R = 40, C = 64, N2 = 24 };
    float *x_old = harness_random(R * C, 71), *a = harness_random(R * C, 72), *b = harness_random(C * C, 73);
    float *w = harness_random(N2 * C, 74);
    for (int i = 0; i < R * C; i++) x_old[i] *= 4.0f;
    vkf_tensor *tx = harness_tensor(ctx, x_old, R, C), *ta = harness_tensor(ctx, a, R, C);
    vkf_tensor *tb = harness_tensor(ctx, b, C, C), *tw = harness_tensor(ctx, w, N2, C);
    vkf_tensor *tp = harness_tensor(ctx, NULL, R, C), *tq = harness_tensor(ctx, NULL, R, N2);
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_softmax_desc sm;
    vkf_softmax_desc_init(&sm);
    sm.rows = R, sm.cols = C, sm.x = tx, sm.y = tp;
    CHECK_OK(vkf_cmd_softmax(cmd, &sm));                 /* P = softmax(X) */
    vkf_matmul_desc mm;
    vkf_matmul_desc_init(&mm);
    mm.m = R, mm.n = C, mm.k = C;
    mm.a.tensor = ta, mm.b.tensor = tb, mm.c.tensor = tx;
    CHECK_OK(vkf_cmd_matmul(cmd, &mm));                  /* X = A·Bᵀ */
    vkf_matmul_desc_init(&mm);
    mm.m = R, mm.n = N2, mm.k = C;
    mm.a.tensor = tx, mm.b.tensor = tw, mm.c.tensor = tq;
    CHECK_OK(vkf_cmd_matmul(cmd, &mm));                  /* Q = X·Wᵀ (reads the new X) */
    CHECK_OK(vkf_cmd_submit(cmd));

    float *want_p = harness_alloc(R * C * 4), *want_x = harness_alloc(R * C * 4), *want_q = harness_alloc(R * N2 * 4);
    ref_softmax(want_p, x_old, R, C, 1.0f, NULL, 0, 0, 0, 0);
    ref_matmul(want_x, C, a, C, b, C, false, NULL, NULL, 0, R, C, C, 1.0f, 0);
    float *got_p = harness_download(tp), *got_x = harness_download(tx), *got_q = harness_download(tq);
    ref_matmul(want_q, N2, got_x, C, w, C, false, NULL, NULL, 0, R, N2, C, 1.0f, 0);
    harness_compare("write-after-read: P from the old X", got_p, want_p, R * C, 1e-6, 1e-4);
    harness_compare("write-after-read: the new X", got_x, want_x, R * C, 1e-5, 1e-4);
    harness_compare("read-after-write: Q from the new X", got_q, want_q, R * N2, 1e-5, 1e-4);
    vkf_cmd_destroy(cmd);

    /* Write-after-write: two products into the same C; the second one stays. */
    CHECK_OK(vkf_cmd_create(ctx, 0, &cmd));
    vkf_matmul_desc_init(&mm);
    mm.m = R, mm.n = N2, mm.k = C;
    mm.a.tensor = ta, mm.b.tensor = tw, mm.c.tensor = tq;
    CHECK_OK(vkf_cmd_matmul(cmd, &mm));
    mm.a.tensor = tp;
    CHECK_OK(vkf_cmd_matmul(cmd, &mm));
    CHECK_OK(vkf_cmd_submit(cmd));
    free(got_q);
    got_q = harness_download(tq);
    ref_matmul(want_q, N2, got_p, C, w, C, false, NULL, NULL, 0, R, N2, C, 1.0f, 0);
    harness_compare("write-after-write: the last product stays", got_q, want_q, R * N2, 1e-5, 1e-4);
    vkf_cmd_destroy(cmd);

    vkf_tensor_destroy(tx), vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tw);
    vkf_tensor_destroy(tp), vkf_tensor_destroy(tq);
    free(x_old), free(a), free(b), free(w), free(want_p), free(want_x), free(want_q);
    free(got_p), free(got_x), free(got_q);
}

/* ------------------------------------------------------------------ timestamps */

static bool timings_sane(const double *ms, uint32_t n, const char *what)
{
    bool ok = true, positive = false;
    for (uint32_t i = 0; i < n; i++) {
        if (!(ms[i] >= 0) || !isfinite(ms[i])) {
            fprintf(stderr, "%s: timing %u is %g\n", what, i, ms[i]);
            ok = false;
        }
        positive |= ms[i] > 0;
    }
    if (!positive) fprintf(stderr, "%s: every timing is 0\n", what);
    if (!ok || !positive) harness_failures++;
    return ok && positive;
}

static void test_timestamps(vkf_context *ctx, const vkf_device_info *info)
{
    if (!info->timestamps) {
        fprintf(stderr, "skipping timestamps: the device has none\n");
        return;
    }
    /* An empty timed list submits and has no timings. */
    vkf_cmd *cmd;
    CHECK_OK(vkf_cmd_create(ctx, VKF_CMD_TIMESTAMPS, &cmd));
    CHECK_OK(vkf_cmd_submit(cmd));
    uint32_t count = 77;
    double unused = -7;
    CHECK_OK(vkf_cmd_timings(cmd, &unused, 1, &count));
    CHECK(count == 0 && unused == -7);
    vkf_cmd_destroy(cmd);

    enum { R = 16, C = 40 };
    float *x = harness_random(R * C, 91), *g = harness_random(C, 92), *b = harness_random(C, 93);
    vkf_tensor *tx = harness_tensor(ctx, x, R, C), *ty = harness_tensor(ctx, NULL, R, C);
    vkf_tensor *tg = harness_tensor(ctx, g, 1, C), *tb = harness_tensor(ctx, b, 1, C);
    vkf_tensor *tz = harness_tensor(ctx, NULL, R, R);

    CHECK_OK(vkf_cmd_create(ctx, VKF_CMD_TIMESTAMPS, &cmd));
    vkf_layernorm_desc ln;
    vkf_layernorm_desc_init(&ln);
    ln.rows = R, ln.cols = C, ln.x = tx, ln.gamma = tg, ln.beta = tb, ln.y = ty;
    CHECK_OK(vkf_cmd_layernorm(cmd, &ln));
    vkf_softmax_desc sm;
    vkf_softmax_desc_init(&sm);
    sm.rows = R, sm.cols = C, sm.x = ty, sm.y = ty;
    CHECK_OK(vkf_cmd_softmax(cmd, &sm));
    vkf_matmul_desc mm;
    vkf_matmul_desc_init(&mm);
    mm.m = R, mm.n = R, mm.k = C;
    mm.a.tensor = ty, mm.b.tensor = tx, mm.c.tensor = tz;
    CHECK_OK(vkf_cmd_matmul(cmd, &mm));
    for (int submit = 0; submit < 2; submit++) {
        CHECK_OK(vkf_cmd_submit(cmd));
        double ms[4] = {-7, -7, -7, -7};
        uint32_t count = 0;
        CHECK_OK(vkf_cmd_timings(cmd, ms, 4, &count));
        CHECK(count == 3);
        timings_sane(ms, 3, "3 timed ops");
        CHECK(ms[3] == -7); /* nothing past the op count */
        /* A short array: the first values and the full count. */
        double one[2] = {-7, -7};
        CHECK_OK(vkf_cmd_timings(cmd, one, 1, &count));
        CHECK(count == 3 && one[0] == ms[0] && one[1] == -7);
        CHECK_OK(vkf_cmd_timings(cmd, NULL, 0, &count));
        CHECK(count == 3);
    }
    /* The results are still right with the timestamps around every op. */
    float *want_y = harness_alloc(R * C * 4), *want_z = harness_alloc(R * R * 4);
    ref_layernorm(want_y, NULL, x, NULL, g, b, R, C, 1e-5f);
    ref_softmax(want_y, want_y, R, C, 1.0f, NULL, 0, 0, 0, 0);
    ref_matmul(want_z, R, want_y, C, x, C, false, NULL, NULL, 0, R, R, C, 1.0f, 0);
    float *got_y = harness_download(ty), *got_z = harness_download(tz);
    harness_compare("timed layernorm + softmax", got_y, want_y, R * C, 1e-6, 1e-4);
    harness_compare("timed matmul", got_z, want_z, R * R, 1e-5, 1e-4);
    free(got_y), free(got_z);
    vkf_cmd_destroy(cmd);

    /* 300 ops: more than one 512-query pool holds. Each softmax depends on the last. */
    enum { OPS = 300 };
    CHECK_OK(vkf_cmd_create(ctx, VKF_CMD_TIMESTAMPS, &cmd));
    CHECK_OK(vkf_tensor_upload(ty, x, R * C * 4));
    sm.scale = 3.0f;
    for (int i = 0; i < OPS; i++) CHECK_OK(vkf_cmd_softmax(cmd, &sm));
    CHECK(vkf_cmd_op_count(cmd) == OPS);
    double *ms = harness_alloc((OPS + 1) * sizeof *ms);
    for (int submit = 0; submit < 2; submit++) {
        if (submit) CHECK_OK(vkf_tensor_upload(ty, x, R * C * 4));
        CHECK_OK(vkf_cmd_submit(cmd));
        uint32_t count = 0;
        for (int i = 0; i <= OPS; i++) ms[i] = -7;
        CHECK_OK(vkf_cmd_timings(cmd, ms, OPS + 1, &count));
        CHECK(count == OPS);
        timings_sane(ms, OPS, "300 timed ops");
        CHECK(ms[OPS] == -7);
        for (int i = 0; i < R * C; i++) want_y[i] = x[i];
        for (int i = 0; i < OPS; i++) ref_softmax(want_y, want_y, R, C, 3.0f, NULL, 0, 0, 0, 0);
        got_y = harness_download(ty);
        harness_compare("300 chained softmax ops", got_y, want_y, R * C, 1e-6, 1e-4);
        free(got_y);
    }
    vkf_cmd_destroy(cmd);
    free(ms);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(ty), vkf_tensor_destroy(tg), vkf_tensor_destroy(tb);
    vkf_tensor_destroy(tz);
    free(x), free(g), free(b), free(want_y), free(want_z);
}

/* Contexts with and without validation, and device listing, in any order: each
 * context keeps its own debug-utils entry points (a regression test: destroying a
 * validating context after another instance was loaded once called NULL). */
static void test_mixed_instances(void)
{
    vkf_context_options o;
    vkf_context_options_init(&o);
    o.validation = 1;
    vkf_context *a = NULL, *b = NULL;
    CHECK_OK(vkf_context_create(&o, &a));
    uint32_t n = 0;
    CHECK_OK(vkf_devices_list(NULL, 0, &n));
    o.validation = 0;
    CHECK_OK(vkf_context_create(&o, &b));
    vkf_context_destroy(b);
    check_matmul(a, 17, 9, 33, "matmul after another instance came and went");
    vkf_context_destroy(a); /* crashed before the fix */
}

/* Every SPIR-V variant of the table makes a pipeline with its default constants,
 * under validation: a shader that declares a capability the device was not
 * created with (say Float16 arithmetic from a select of two halves, where only
 * 16-bit storage is enabled) fails here, not only when a model first uses it.
 * Variants with 16-bit storage are skipped on devices without it. */
static void test_every_variant(vkf_context *ctx, const vkf_device_info *info)
{
    uint32_t built = 0;
    for (int id = 0; id < VKF_VARIANT_COUNT; id++) {
        const vkf_variant_desc *v = vkf_variant((vkf_variant_id)id);
        CHECK(v->name != NULL);
        const vkf_pipeline *pipe = NULL;
        if (v->coopmat) {
            /* Cooperative-matrix variants: only in builds whose glslc compiles them,
             * and only on contexts with coopmat; their tile constants depend on the
             * device's shapes, so test_ops and test_attention build and run them. */
            bool usable = ctx->coopmat && (v->coopmat == 1 || (v->coopmat == 2 && ctx->coopmat2) ||
                                           (v->coopmat == 3 && ctx->coopmat2_wg));
            if (!v->spirv) {
                CHECK(vkf_pipeline_get(ctx, (vkf_variant_id)id, NULL, 0, &pipe) == VKF_ERROR_UNSUPPORTED && !pipe);
                fprintf(stderr, "variant %s: not in this build (refused: %s)\n", v->name, vkf_last_error());
            } else if (!usable) {
                CHECK(vkf_pipeline_get(ctx, (vkf_variant_id)id, NULL, 0, &pipe) == VKF_ERROR_UNSUPPORTED && !pipe);
                fprintf(stderr, "variant %s: refused without coopmat: %s\n", v->name, vkf_last_error());
            } else {
                CHECK(v->spirv_bytes > 20);
                fprintf(stderr, "variant %s: built and run by test_ops / test_attention with this device's shapes\n",
                        v->name);
            }
            continue;
        }
        CHECK(v->spirv && v->spirv_bytes > 20);
        bool needs16 = strstr(v->name, "f16") || strstr(v->name, "act16");
        if (needs16 && !info->storage_16bit) continue;
        vkf_status st = vkf_pipeline_get(ctx, (vkf_variant_id)id, NULL, 0, &pipe);
        if (st != VKF_OK) fprintf(stderr, "variant %s: %s\n", v->name, vkf_last_error());
        CHECK(st == VKF_OK && pipe);
        built += st == VKF_OK;
    }
    fprintf(stderr, "built %u of %d shader variants with their default constants\n", built, VKF_VARIANT_COUNT);
}

/* The cooperative-matrix switch: option 0 and VKFORMER_COOPMAT=0 turn it off,
 * bad option values are refused, and where the build has the kernels and the
 * device reports an f16 x f16 -> f32 subgroup shape, the default turns it on. */
static void test_coopmat_switch(const vkf_device_info *info)
{
    vkf_coopmat_shape shape;
    bool capable = vkf_build_has_coopmat() && info->api_version >= VK_API_VERSION_1_2 && info->vulkan_memory_model &&
                   info->float16 && info->storage_16bit && vkf_coopmat_choose_shape(info, &shape);
    vkf_context_options o;
    vkf_context_options_init(&o);
    CHECK(o.coopmat == -1);
    vkf_context *ctx = NULL;
    o.coopmat = 2;
    CHECK(vkf_context_create(&o, &ctx) == VKF_ERROR_INVALID_ARGUMENT && !ctx);
    CHECK(strstr(vkf_last_error(), "coopmat") != NULL);

    vkf_device_info got;
    o.coopmat = -1;
    CHECK_OK(vkf_context_create(&o, &ctx));
    CHECK_OK(vkf_context_device_info(ctx, &got));
    CHECK(got.coopmat_in_use == capable);
    CHECK(!got.coopmat2_in_use || got.coopmat_in_use);
    printf("coopmat: %s on %s (build has the kernels: %s, f16 x f16 -> f32 shape: %s)\n",
           got.coopmat_in_use ? (got.coopmat2_in_use ? "on, KHR and NV2" : "on, KHR") : "off", info->name,
           vkf_build_has_coopmat() ? "yes" : "no", capable ? "yes" : "no");
    vkf_context_destroy(ctx);

    o.coopmat = 0;
    CHECK_OK(vkf_context_create(&o, &ctx));
    CHECK_OK(vkf_context_device_info(ctx, &got));
    CHECK(!got.coopmat_in_use && !got.coopmat2_in_use && !ctx->coopmat && !ctx->coopmat2);
    const vkf_pipeline *pipe = NULL;
    CHECK(vkf_pipeline_get(ctx, VKF_VARIANT_MATMUL_COOPMAT, NULL, 0, &pipe) == VKF_ERROR_UNSUPPORTED && !pipe);
    vkf_context_destroy(ctx);

    setenv("VKFORMER_COOPMAT", "0", 1);
    o.coopmat = -1;
    CHECK_OK(vkf_context_create(&o, &ctx));
    CHECK_OK(vkf_context_device_info(ctx, &got));
    CHECK(!got.coopmat_in_use && !ctx->coopmat);
    vkf_context_destroy(ctx);
    unsetenv("VKFORMER_COOPMAT");
}

/* Turns on synchronization validation through the environment, in the form the
 * installed layer reads: VK_LAYER_VALIDATE_SYNC from the layer-settings era (SDK
 * 1.3.268) on, where the older VK_LAYER_ENABLES draws a deprecation warning. */
static void enable_sync_validation(void)
{
    uint32_t n = 0;
    CHECK_OK(vkf_devices_list(NULL, 0, &n)); /* loads the Vulkan loader through volk */
    uint32_t spec = 0, count = 0;
    vkEnumerateInstanceLayerProperties(&count, NULL);
    VkLayerProperties *layers = calloc(count ? count : 1, sizeof *layers);
    if (layers && vkEnumerateInstanceLayerProperties(&count, layers) == VK_SUCCESS)
        for (uint32_t i = 0; i < count; i++)
            if (strcmp(layers[i].layerName, "VK_LAYER_KHRONOS_validation") == 0) spec = layers[i].specVersion;
    free(layers);
    if (spec >= VK_MAKE_API_VERSION(0, 1, 3, 268)) setenv("VK_LAYER_VALIDATE_SYNC", "1", 1);
    else setenv("VK_LAYER_ENABLES", "VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT", 1);
}

int main(void)
{
    /* Synchronization validation for every context made here: a missing or wrong
     * barrier between dependent dispatches (or transfers) is a validation error,
     * which fails the test in harness_close. */
    enable_sync_validation();
    vkf_context *ctx = harness_context();
    vkf_device_info info;
    CHECK_OK(vkf_context_device_info(ctx, &info));

    test_every_variant(ctx, &info);
    test_coopmat_switch(&info);
    test_devices_list(&info);
    test_device_choice(&info);
    test_memory(ctx, &info);
    test_staging();
    test_small_blocks();
    /* An empty list submits (twice) and does nothing. */
    vkf_cmd *empty;
    CHECK_OK(vkf_cmd_create(ctx, 0, &empty));
    CHECK_OK(vkf_cmd_submit(empty));
    CHECK_OK(vkf_cmd_submit(empty));
    CHECK(vkf_cmd_op_count(empty) == 0);
    vkf_cmd_destroy(empty);
    test_chain(ctx);
    test_write_after_read(ctx);
    test_timestamps(ctx, &info);
    test_mixed_instances();

    harness_close(ctx);
    return harness_result("test_device");
}

/* libFuzzer target: every input is a model file image.
 *
 *  1. vkf_st_parse alone (the safetensors container), and, when it accepts the
 *     input, every query it offers: each tensor by index and by name, its raw
 *     bytes (read in full, so that ASan sees any out-of-bounds offset), its float
 *     conversion, and each metadata entry. The invariants safetensors.h promises
 *     are checked; a broken one is reported as a crash (fuzz_fail).
 *  2. vkf_model_check_bytes: the whole loader as a device-free dry run
 *     (container, vkformer.config, every tensor's name, shape and dtype, and the
 *     F16/BF16 -> F32 conversion).
 *
 * An error status is a fine answer; a crash, a leak, a sanitizer report, a
 * broken invariant or an error without a message is not. Built and run by
 * tools/fuzz.sh (clang -fsanitize=fuzzer,address,undefined). */
#include "internal.h"
#include "families/safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define fuzz_fail(...)                                                                  \
    do {                                                                                \
        fprintf(stderr, "fuzz_model: %s:%d: ", __FILE__, __LINE__);                     \
        fprintf(stderr, __VA_ARGS__);                                                   \
        fputc('\n', stderr);                                                            \
        abort();                                                                        \
    } while (0)

/* A failing call must leave a message (vkformer.h: "vkf_last_error() returns a
 * message naming the problem"). */
static void clear_error(void) { vkf_fail(VKF_OK, "%s", ""); }

static void check_error(vkf_status st, const char *what)
{
    if (st == VKF_OK) return;
    if ((unsigned)st > VKF_ERROR_STATE) fuzz_fail("%s returned an unknown status %d", what, (int)st);
    if (vkf_last_error()[0] == '\0') fuzz_fail("%s returned %s with an empty message", what, vkf_status_string(st));
}

static int tensor_order(const vkf_st_tensor *a, const vkf_st_tensor *b)
{
    if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
    if (a->bytes != b->bytes) return a->bytes < b->bytes ? -1 : 1;
    return strcmp(a->name, b->name);
}

static volatile uint32_t sink;

static void exercise_file(const vkf_st_file *f, const uint8_t *data, size_t size)
{
    uint32_t count = vkf_st_count(f);
    if (vkf_st_at(f, count) != NULL) fuzz_fail("vkf_st_at(count) is not NULL");
    const vkf_st_tensor *prev = NULL;
    for (uint32_t i = 0; i < count; i++) {
        const vkf_st_tensor *t = vkf_st_at(f, i);
        if (!t || !t->name) fuzz_fail("tensor %u is missing", i);
        if (t->rank > VKF_ST_MAX_RANK) fuzz_fail("tensor %u: rank %u", i, t->rank);
        uint32_t esize = vkf_st_dtype_size(t->dtype);
        if (esize == 0) fuzz_fail("tensor '%s': dtype %d out of range", t->name, (int)t->dtype);
        uint64_t elements = 1;
        for (uint32_t d = 0; d < t->rank; d++) elements *= t->shape[d];
        if (elements != t->elements || t->bytes != t->elements * esize)
            fuzz_fail("tensor '%s': elements %llu / bytes %llu disagree with its shape", t->name,
                      (unsigned long long)t->elements, (unsigned long long)t->bytes);
        if (t->offset > size || t->bytes > size - t->offset)
            fuzz_fail("tensor '%s': bytes [%llu, +%llu) lie outside the %zu-byte input", t->name,
                      (unsigned long long)t->offset, (unsigned long long)t->bytes, size);
        if (prev && tensor_order(prev, t) >= 0) fuzz_fail("tensors '%s' and '%s' are out of order", prev->name, t->name);
        prev = t;

        if (vkf_st_find(f, t->name) != t) fuzz_fail("vkf_st_find('%s') is not the tensor", t->name);

        const uint8_t *raw = vkf_st_data(f, t);
        if (!raw) fuzz_fail("vkf_st_data('%s') is NULL", t->name);
        if (raw != data + t->offset) fuzz_fail("vkf_st_data('%s') is not the input at its offset", t->name);
        uint32_t sum = 0;
        for (uint64_t b = 0; b < t->bytes; b++) sum += raw[b];
        sink += sum;

        /* The float conversion: a tensor holds at most size / 2 elements here. */
        clear_error();
        float *out = malloc((t->elements ? t->elements : 1) * sizeof *out);
        if (!out) fuzz_fail("out of memory for %llu floats", (unsigned long long)t->elements);
        vkf_status st = vkf_st_read_f32(f, t, out, t->elements);
        bool is_float = t->dtype == VKF_ST_F32 || t->dtype == VKF_ST_F16 || t->dtype == VKF_ST_BF16;
        if (is_float != (st == VKF_OK))
            fuzz_fail("vkf_st_read_f32('%s', %s) returned %s", t->name, vkf_st_dtype_name(t->dtype),
                      vkf_status_string(st));
        check_error(st, "vkf_st_read_f32");
        for (uint64_t e = 0; st == VKF_OK && e < t->elements; e++) {
            uint32_t bits;
            memcpy(&bits, &out[e], sizeof bits);
            sink += bits;
        }
        /* A wrong count is refused without touching `out`. */
        clear_error();
        st = vkf_st_read_f32(f, t, out, t->elements + 1);
        if (st != VKF_ERROR_INVALID_ARGUMENT) fuzz_fail("vkf_st_read_f32 with a wrong count returned %s", vkf_status_string(st));
        check_error(st, "vkf_st_read_f32");
        free(out);
    }

    uint32_t meta = vkf_st_metadata_count(f);
    const char *key = NULL, *value = NULL, *last = NULL;
    if (vkf_st_metadata_at(f, meta, &key, &value)) fuzz_fail("vkf_st_metadata_at(count) succeeded");
    for (uint32_t i = 0; i < meta; i++) {
        if (!vkf_st_metadata_at(f, i, &key, &value) || !key || !value) fuzz_fail("metadata entry %u is missing", i);
        if (last && strcmp(last, key) >= 0) fuzz_fail("metadata keys '%s' and '%s' are out of order", last, key);
        last = key;
        if (vkf_st_metadata(f, key) != value) fuzz_fail("vkf_st_metadata('%s') is not its entry", key);
        sink += (uint32_t)strlen(key) + (uint32_t)strlen(value);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    /* jansson seeds its hash function at random; a fixed seed keeps runs
     * reproducible (the same input takes the same path). */
    json_object_seed(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vkf_st_file *f = NULL;
    clear_error();
    vkf_status st = vkf_st_parse(data, size, &f);
    check_error(st, "vkf_st_parse");
    if ((st == VKF_OK) != (f != NULL)) fuzz_fail("vkf_st_parse returned %s with file %p", vkf_status_string(st), (void *)f);
    if (f) exercise_file(f, data, size);
    vkf_st_close(f);

    clear_error();
    st = vkf_model_check_bytes(data, size);
    check_error(st, "vkf_model_check_bytes");
    return 0;
}

/* The safetensors reader (see safetensors.h for the format): mapping the file,
 * checking the 8-byte header length, parsing the JSON header with jansson,
 * validating every tensor entry and the metadata, checking that tensors lie
 * inside the data section without overlapping, and converting F16/BF16 to float.
 *
 * Nothing in the file is trusted. Each check fails with VKF_ERROR_BAD_MODEL and a
 * message naming the tensor (or key) and the offending value or byte offset.
 * Names, keys and dtype strings from the file appear in messages through
 * vkf_quote (escaped, cut to about 80 bytes), so that a name can neither forge a
 * second line of the message nor send escapes to a terminal, and the reason
 * always fits in the message buffer. */
#include "families/safetensors.h"

#include "runtime/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define METADATA_KEY "__metadata__"

typedef struct st_meta {
    const char *key, *value;            /* in the file's string arena */
} st_meta;

struct vkf_st_file {
    const uint8_t *bytes;               /* the whole file: the mapping, or the parse buffer (borrowed) */
    size_t size;
    void *map;                          /* owned mmap of `size` bytes, or NULL */
    uint64_t data_start;                /* 8 + N: absolute offset of the data section */
    vkf_st_tensor *tensors;             /* owned; sorted by (offset, bytes, name) */
    uint32_t count;
    const vkf_st_tensor **by_name;      /* owned; the same tensors sorted by name */
    st_meta *meta;                      /* owned; sorted by key */
    uint32_t meta_count;
    char *strings;                      /* owned arena: tensor names, metadata keys and values */
    vkf_st_file **shards;               /* a merge: the owned files its tensors lie in (names in their arenas) */
    uint32_t n_shards;
};

/* ------------------------------------------------------------------ dtypes */

static const struct {
    const char *name;
    uint32_t size;
} dtypes[VKF_ST_DTYPE_COUNT] = {
    [VKF_ST_F32] = {"F32", 4},   [VKF_ST_F16] = {"F16", 2},   [VKF_ST_BF16] = {"BF16", 2},
    [VKF_ST_I32] = {"I32", 4},   [VKF_ST_I64] = {"I64", 8},   [VKF_ST_F64] = {"F64", 8},
    [VKF_ST_I16] = {"I16", 2},   [VKF_ST_I8] = {"I8", 1},     [VKF_ST_U8] = {"U8", 1},
    [VKF_ST_U16] = {"U16", 2},   [VKF_ST_U32] = {"U32", 4},   [VKF_ST_U64] = {"U64", 8},
    [VKF_ST_BOOL] = {"BOOL", 1}, [VKF_ST_F8_E4M3] = {"F8_E4M3", 1}, [VKF_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *vkf_st_dtype_name(vkf_st_dtype dtype)
{
    return (unsigned)dtype < VKF_ST_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

uint32_t vkf_st_dtype_size(vkf_st_dtype dtype)
{
    return (unsigned)dtype < VKF_ST_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

/* ------------------------------------------------------------------ helpers */

/* A name, key or dtype string from the file as a message shows it (vkf_quote, in
 * double quotes); which (0 or 1): one of two buffers, for two in one message. */
static const char *shown(int which, const char *s)
{
    static _Thread_local char buf[2][VKF_QUOTE_SIZE];
    return vkf_quote(buf[which], sizeof buf[which], s, (size_t)-1);
}

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* "an array", "a string", ...: what a JSON value is, for messages. */
static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a non-integer number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "an unknown value";
}

/* "(2, 3)" into buf; "()" for a scalar. */
static const char *shape_string(char *buf, size_t cap, uint32_t rank, const uint64_t *shape)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (uint32_t i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", i ? ", " : "", (unsigned long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, ")");
    return buf;
}

static vkf_status oom(const char *what)
{
    return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory reading a safetensors file (%s)", what);
}

/* ------------------------------------------------------------------ one tensor entry */

/* v = entry[field][index] (field: "shape" or "data_offsets") as a non-negative
 * integer. jansson has already refused integers past INT64_MAX. */
static vkf_status entry_uint(const char *name, const char *field, size_t index, const json_t *v,
                             uint64_t *out)
{
    if (!json_is_integer(v))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: %s[%zu] is %s, not a non-negative integer",
                        shown(0, name), field, index, json_kind(v));
    json_int_t i = json_integer_value(v);
    if (i < 0)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: %s[%zu] is negative (%lld)", shown(0, name), field, index,
                        (long long)i);
    *out = (uint64_t)i;
    return VKF_OK;
}

/* entry[field], which must be present and an array. */
static vkf_status entry_array(const char *name, const json_t *entry, const char *field, const json_t **out)
{
    const json_t *v = json_object_get(entry, field);
    if (!v) return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: missing \"%s\"", shown(0, name), field);
    if (!json_is_array(v))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: \"%s\" is %s, not an array", shown(0, name),
                        field, json_kind(v));
    *out = v;
    return VKF_OK;
}

/* Validates one header entry
 *   "name": {"dtype": "F32", "shape": [d0, ...], "data_offsets": [begin, end]}
 * against a data section of data_size bytes at absolute offset data_start, and
 * fills *t (whose name is left pointing into the JSON tree). Keys other than
 * these three are ignored, as the reference implementation does. */
static vkf_status parse_entry(const char *name, const json_t *entry, uint64_t data_start,
                              uint64_t data_size, vkf_st_tensor *t)
{
    memset(t, 0, sizeof *t);
    t->name = name;
    if (!json_is_object(entry))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: entry is %s, not an object", shown(0, name),
                        json_kind(entry));

    /* dtype */
    const json_t *dtype = json_object_get(entry, "dtype");
    if (!dtype) return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: missing \"dtype\"", shown(0, name));
    if (!json_is_string(dtype))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: \"dtype\" is %s, not a string", shown(0, name),
                        json_kind(dtype));
    const char *dtype_name = json_string_value(dtype);
    t->dtype = VKF_ST_DTYPE_COUNT;
    for (int i = 0; i < VKF_ST_DTYPE_COUNT; i++)
        if (strcmp(dtype_name, dtypes[i].name) == 0) t->dtype = (vkf_st_dtype)i;
    if (t->dtype == VKF_ST_DTYPE_COUNT)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: unknown dtype %s", shown(0, name), shown(1, dtype_name));
    uint32_t size = dtypes[t->dtype].size;

    /* shape: (d0, ..., d[rank-1]), rank <= 8; elements and bytes must fit 64 bits */
    const json_t *shape = NULL, *offsets = NULL;
    VKF_TRY(entry_array(name, entry, "shape", &shape));
    VKF_TRY(entry_array(name, entry, "data_offsets", &offsets));
    size_t rank = json_array_size(shape);
    if (rank > VKF_ST_MAX_RANK)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: rank %zu exceeds the maximum of %d", shown(0, name), rank,
                        VKF_ST_MAX_RANK);
    t->rank = (uint32_t)rank;
    for (size_t i = 0; i < rank; i++) VKF_TRY(entry_uint(name, "shape", i, json_array_get(shape, i), &t->shape[i]));
    /* The product of the non-zero dimensions must fit 64 bits even when another
     * dimension is 0, so that users may multiply any subset of them. */
    char dims[256];
    bool zero = false;
    uint64_t elements = 1;
    for (size_t i = 0; i < rank; i++) {
        if (t->shape[i] == 0) {
            zero = true;
        } else if (elements > UINT64_MAX / t->shape[i]) {
            return vkf_fail(VKF_ERROR_BAD_MODEL,
                            "tensor %s: shape %s overflows: the product of its non-zero dimensions exceeds "
                            "2^64-1 elements", shown(0, name), shape_string(dims, sizeof dims, t->rank, t->shape));
        } else {
            elements *= t->shape[i];
        }
    }
    if (zero) elements = 0;
    if (elements > UINT64_MAX / size)
        return vkf_fail(VKF_ERROR_BAD_MODEL,
                        "tensor %s: shape %s of %s overflows: more than 2^64-1 bytes", shown(0, name),
                        shape_string(dims, sizeof dims, t->rank, t->shape), dtypes[t->dtype].name);
    t->elements = elements;
    t->bytes = elements * size;

    /* data_offsets: [begin, end], relative to the data section */
    if (json_array_size(offsets) != 2)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: \"data_offsets\" has %zu entries, not 2 [begin, end]",
                        shown(0, name), json_array_size(offsets));
    uint64_t begin, end;
    VKF_TRY(entry_uint(name, "data_offsets", 0, json_array_get(offsets, 0), &begin));
    VKF_TRY(entry_uint(name, "data_offsets", 1, json_array_get(offsets, 1), &end));
    if (end < begin)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s: data_offsets [%llu, %llu] end is before begin",
                        shown(0, name), (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return vkf_fail(VKF_ERROR_BAD_MODEL,
                        "tensor %s: data_offsets [%llu, %llu] end is past the data section "
                        "(%llu bytes, file bytes %llu..%llu)",
                        shown(0, name), (unsigned long long)begin, (unsigned long long)end,
                        (unsigned long long)data_size, (unsigned long long)data_start,
                        (unsigned long long)(data_start + data_size));
    if (end - begin != t->bytes)
        return vkf_fail(VKF_ERROR_BAD_MODEL,
                        "tensor %s: data_offsets [%llu, %llu] hold %llu bytes, but shape %s of %s needs %llu",
                        shown(0, name), (unsigned long long)begin, (unsigned long long)end,
                        (unsigned long long)(end - begin), shape_string(dims, sizeof dims, t->rank, t->shape),
                        dtypes[t->dtype].name, (unsigned long long)t->bytes);
    t->offset = data_start + begin;
    return VKF_OK;
}

/* ------------------------------------------------------------------ the header */

static int by_offset(const void *a, const void *b)
{
    const vkf_st_tensor *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int by_name(const void *a, const void *b)
{
    const vkf_st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static int by_key(const void *a, const void *b)
{
    const st_meta *x = a, *y = b;
    return strcmp(x->key, y->key);
}

/* Any two tensors sharing a byte is an error. Tensors are sorted by begin; one
 * overlaps an earlier one iff its begin is below the largest end seen so far.
 * Empty tensors hold no bytes and overlap nothing. */
static vkf_status check_overlaps(const vkf_st_file *f)
{
    const vkf_st_tensor *reach = NULL;  /* the non-empty tensor ending furthest so far */
    for (uint32_t i = 0; i < f->count; i++) {
        const vkf_st_tensor *t = &f->tensors[i];
        if (t->bytes == 0) continue;
        if (reach && t->offset < reach->offset + reach->bytes) {
            uint64_t rb = reach->offset - f->data_start, tb = t->offset - f->data_start;
            return vkf_fail(VKF_ERROR_BAD_MODEL,
                            "tensors %s (data_offsets [%llu, %llu]) and %s (data_offsets [%llu, %llu]) overlap",
                            shown(0, reach->name), (unsigned long long)rb,
                            (unsigned long long)(rb + reach->bytes), shown(1, t->name),
                            (unsigned long long)tb, (unsigned long long)(tb + t->bytes));
        }
        if (!reach || t->offset + t->bytes > reach->offset + reach->bytes) reach = t;
    }
    return VKF_OK;
}

/* Copies tensor names and metadata strings out of the JSON tree into one arena,
 * so that the tree can be freed. */
static vkf_status copy_strings(vkf_st_file *f)
{
    size_t total = 1;
    for (uint32_t i = 0; i < f->count; i++) total += strlen(f->tensors[i].name) + 1;
    for (uint32_t i = 0; i < f->meta_count; i++) total += strlen(f->meta[i].key) + strlen(f->meta[i].value) + 2;
    f->strings = malloc(total);
    if (!f->strings) return oom("names");
    char *p = f->strings;
#define COPY(s)                                                                                     \
    do {                                                                                            \
        size_t n_ = strlen(s) + 1;                                                                  \
        memcpy(p, (s), n_);                                                                         \
        (s) = p;                                                                                    \
        p += n_;                                                                                    \
    } while (0)
    for (uint32_t i = 0; i < f->count; i++) COPY(f->tensors[i].name);
    for (uint32_t i = 0; i < f->meta_count; i++) {
        COPY(f->meta[i].key);
        COPY(f->meta[i].value);
    }
#undef COPY
    return VKF_OK;
}

/* The "__metadata__" object: string keys to string values, referenced in place. */
static vkf_status parse_metadata(vkf_st_file *f, json_t *meta)
{
    if (!json_is_object(meta))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "\"" METADATA_KEY "\" is %s, not an object of strings", json_kind(meta));
    size_t n = json_object_size(meta);
    f->meta = calloc(n ? n : 1, sizeof *f->meta);
    if (!f->meta) return oom("metadata");
    const char *key;
    json_t *value;
    json_object_foreach(meta, key, value) {
        if (!json_is_string(value))
            return vkf_fail(VKF_ERROR_BAD_MODEL, "\"" METADATA_KEY "\" key %s: value is %s, not a string",
                            shown(0, key), json_kind(value));
        f->meta[f->meta_count++] = (st_meta){key, json_string_value(value)};
    }
    return VKF_OK;
}

/* Fills f (zeroed, with bytes/size set) from the header tree `root`; strings
 * still point into the tree. */
static vkf_status parse_root(vkf_st_file *f, json_t *root, uint64_t data_size)
{
    if (!json_is_object(root))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "header is %s, not a JSON object", json_kind(root));
    json_t *meta = json_object_get(root, METADATA_KEY);
    size_t n = json_object_size(root) - (meta ? 1 : 0);
    if (n > UINT32_MAX) return vkf_fail(VKF_ERROR_BAD_MODEL, "header lists %zu tensors, too many", n);
    if (meta) VKF_TRY(parse_metadata(f, meta));

    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->by_name = calloc(n ? n : 1, sizeof *f->by_name);
    if (!f->tensors || !f->by_name) return oom("tensor table");
    const char *name;
    json_t *entry;
    json_object_foreach(root, name, entry) {
        if (strcmp(name, METADATA_KEY) == 0) continue;
        VKF_TRY(parse_entry(name, entry, f->data_start, data_size, &f->tensors[f->count]));
        f->count++;
    }
    return VKF_OK;
}

/* Validates the buffer into f (zeroed, with bytes and size set). */
static vkf_status parse_into(vkf_st_file *f)
{
    /* bytes 0..8: N */
    if (f->size < 8)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "file is %zu bytes, shorter than 8 bytes (the header length)", f->size);
    uint64_t n = load_le64(f->bytes);
    if (n > VKF_ST_MAX_HEADER)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "header length %llu (file bytes 0..8) exceeds the limit of %llu bytes",
                        (unsigned long long)n, (unsigned long long)VKF_ST_MAX_HEADER);
    if (n > f->size - 8)
        return vkf_fail(VKF_ERROR_BAD_MODEL,
                        "header length %llu (file bytes 0..8) runs past the end of the file (%zu bytes)",
                        (unsigned long long)n, f->size);
    f->data_start = 8 + n;
    uint64_t data_size = f->size - f->data_start;

    /* bytes 8..8+N: the JSON header. Duplicate keys are refused (jansson would
     * otherwise keep the last one silently); NUL bytes in strings and invalid
     * UTF-8 are refused by jansson by default. */
    json_error_t err;
    json_t *root = json_loadb((const char *)f->bytes + 8, (size_t)n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    if (!root) {
        enum json_error_code code = json_error_code(&err);
        if (code == json_error_out_of_memory) return oom("header");
        unsigned long long at = 8 + (unsigned long long)err.position;
        if (code == json_error_duplicate_key)
            return vkf_fail(VKF_ERROR_BAD_MODEL,
                            "header has a duplicate key (tensor names and keys must be unique): %s, at header "
                            "line %d column %d (file byte %llu)", err.text, err.line, err.column, at);
        return vkf_fail(VKF_ERROR_BAD_MODEL, "header is not valid JSON: %s, at header line %d column %d (file byte %llu)",
                        err.text, err.line, err.column, at);
    }
    vkf_status st = parse_root(f, root, data_size);
    if (st == VKF_OK) {
        /* Sorting before copy_strings is fine: it copies through the sorted arrays. */
        if (f->count) qsort(f->tensors, f->count, sizeof *f->tensors, by_offset);
        if (f->meta_count) qsort(f->meta, f->meta_count, sizeof *f->meta, by_key);
        st = copy_strings(f);
    }
    json_decref(root);
    VKF_TRY(st);
    VKF_TRY(check_overlaps(f));
    for (uint32_t i = 0; i < f->count; i++) f->by_name[i] = &f->tensors[i];
    if (f->count) qsort(f->by_name, f->count, sizeof *f->by_name, by_name);
    return VKF_OK;
}

/* ------------------------------------------------------------------ open / parse / close */

void vkf_st_close(vkf_st_file *f)
{
    if (!f) return;
    if (f->map) munmap(f->map, f->size);
    for (uint32_t i = 0; i < f->n_shards; i++) vkf_st_close(f->shards[i]);
    free(f->shards);
    free(f->tensors);
    free(f->by_name);
    free(f->meta);
    free(f->strings);
    free(f);
}

vkf_status vkf_st_parse(const void *data, size_t size, vkf_st_file **out_file)
{
    if (!out_file) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_st_parse: out_file is NULL");
    *out_file = NULL;
    if (!data) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_st_parse: data is NULL");
    vkf_st_file *f = calloc(1, sizeof *f);
    if (!f) return oom("file");
    f->bytes = data;
    f->size = size;
    vkf_status st = parse_into(f);
    if (st != VKF_OK) {
        vkf_st_close(f);
        return st;
    }
    *out_file = f;
    return VKF_OK;
}

vkf_status vkf_st_open(const char *path, vkf_st_file **out_file)
{
    if (!out_file) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_st_open: out_file is NULL");
    *out_file = NULL;
    if (!path) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_st_open: path is NULL");

    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return vkf_fail(VKF_ERROR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return vkf_fail(VKF_ERROR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return vkf_fail(VKF_ERROR_IO, "cannot read %s: %s", path,
                        S_ISDIR(sb.st_mode) ? strerror(EISDIR) : "not a regular file");
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return vkf_fail(VKF_ERROR_IO, "cannot map %s: %llu bytes do not fit the address space", path,
                        (unsigned long long)sb.st_size);
    }
    vkf_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        return oom("file");
    }
    f->size = (size_t)sb.st_size;
    static const uint8_t empty[1];
    f->bytes = empty;                   /* a 0-byte file cannot be mapped; parse_into refuses it */
    if (f->size > 0) {
        void *map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(f);
            return vkf_fail(e == ENOMEM ? VKF_ERROR_OUT_OF_HOST_MEMORY : VKF_ERROR_IO, "cannot map %s: %s", path,
                            strerror(e));
        }
        f->map = map;
        f->bytes = map;
    }
    close(fd);

    vkf_status st = parse_into(f);
    if (st != VKF_OK) {
        /* Prefix the message with the path. */
        char reason[1024];
        snprintf(reason, sizeof reason, "%s", vkf_last_error());
        vkf_st_close(f);
        return vkf_fail(st, "%s: %s", path, reason);
    }
    *out_file = f;
    return VKF_OK;
}

vkf_status vkf_st_merge(vkf_st_file **shards, uint32_t n, vkf_st_file **out_file)
{
    *out_file = NULL;
    vkf_st_file *f = calloc(1, sizeof *f);
    uint64_t count = 0;
    for (uint32_t i = 0; i < n; i++) count += shards[i]->count;
    if (f) {
        f->shards = malloc((n ? n : 1) * sizeof *f->shards);
        f->tensors = malloc((count ? count : 1) * sizeof *f->tensors);
        f->by_name = malloc((count ? count : 1) * sizeof *f->by_name);
    }
    if (!f || !f->shards || !f->tensors || !f->by_name || count > UINT32_MAX) {
        if (f) f->n_shards = 0;
        vkf_st_close(f);
        for (uint32_t i = 0; i < n; i++) vkf_st_close(shards[i]);
        return oom("shards");
    }
    static const uint8_t empty[1];
    f->bytes = empty;
    for (uint32_t i = 0; i < n; i++) {
        f->shards[f->n_shards++] = shards[i];
        for (uint32_t j = 0; j < shards[i]->count; j++) {
            vkf_st_tensor *t = &f->tensors[f->count++];
            *t = shards[i]->tensors[j];
            t->shard = i;
        }
    }
    for (uint32_t i = 0; i < f->count; i++) f->by_name[i] = &f->tensors[i];
    if (f->count) qsort(f->by_name, f->count, sizeof *f->by_name, by_name);
    for (uint32_t i = 1; i < f->count; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) {
            vkf_status st = vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s is in shard %u and in shard %u",
                                     shown(0, f->by_name[i]->name),
                                     f->by_name[i - 1]->shard + 1, f->by_name[i]->shard + 1);
            vkf_st_close(f);
            return st;
        }
    *out_file = f;
    return VKF_OK;
}

uint32_t vkf_st_shard_count(const vkf_st_file *f) { return f ? (f->n_shards ? f->n_shards : 1) : 0; }

/* ------------------------------------------------------------------ queries */

/* Whether t is an element of f's tensor table (not a copy, not another file's). */
static bool owns(const vkf_st_file *f, const vkf_st_tensor *t)
{
    uintptr_t p = (uintptr_t)t, lo = (uintptr_t)f->tensors, hi = (uintptr_t)(f->tensors + f->count);
    return p >= lo && p < hi && (p - lo) % sizeof *t == 0;
}

uint32_t vkf_st_count(const vkf_st_file *f) { return f ? f->count : 0; }

const vkf_st_tensor *vkf_st_at(const vkf_st_file *f, uint32_t index)
{
    return f && index < f->count ? &f->tensors[index] : NULL;
}

const vkf_st_tensor *vkf_st_find(const vkf_st_file *f, const char *name)
{
    if (!f || !name || f->count == 0) return NULL;
    vkf_st_tensor key = {.name = name};
    const vkf_st_tensor *k = &key;
    const vkf_st_tensor **hit = bsearch(&k, f->by_name, f->count, sizeof *f->by_name, by_name);
    return hit ? *hit : NULL;
}

const void *vkf_st_data(const vkf_st_file *f, const vkf_st_tensor *t)
{
    if (!f || !t || !owns(f, t)) return NULL;
    if (f->n_shards) return t->shard < f->n_shards ? f->shards[t->shard]->bytes + t->offset : NULL;
    return f->bytes + t->offset;
}

const char *vkf_st_metadata(const vkf_st_file *f, const char *key)
{
    if (!f || !key || f->meta_count == 0) return NULL;
    st_meta k = {.key = key};
    const st_meta *hit = bsearch(&k, f->meta, f->meta_count, sizeof *f->meta, by_key);
    return hit ? hit->value : NULL;
}

uint32_t vkf_st_metadata_count(const vkf_st_file *f) { return f ? f->meta_count : 0; }

bool vkf_st_metadata_at(const vkf_st_file *f, uint32_t index, const char **out_key, const char **out_value)
{
    if (!f || index >= f->meta_count) return false;
    if (out_key) *out_key = f->meta[index].key;
    if (out_value) *out_value = f->meta[index].value;
    return true;
}

/* ------------------------------------------------------------------ conversion */

static float bits_to_float(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* IEEE binary16 -> binary32, exact for every input. */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24; exact, as mant < 2^10 and 2^-24 is a normal float */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31) return bits_to_float(sign | 0x7f800000u | mant << 13); /* inf, or NaN with its payload */
    return bits_to_float(sign | (exp + 127 - 15) << 23 | mant << 13); /* rebias the exponent */
}

vkf_status vkf_st_read_f32(const vkf_st_file *f, const vkf_st_tensor *t, float *out, uint64_t count)
{
    if (!f || !t) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_st_read_f32: file or tensor is NULL");
    if (!owns(f, t))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_st_read_f32: the tensor is not one of this file's");
    if (count != t->elements)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT,
                        "vkf_st_read_f32: count %llu does not match tensor %s of %llu elements",
                        (unsigned long long)count, shown(0, t->name), (unsigned long long)t->elements);
    if (!out && count > 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_st_read_f32: out is NULL");
    const uint8_t *p = vkf_st_data(f, t);
    /* Byte by byte: the data may be unaligned, and the host need not be little-endian. */
    switch (t->dtype) {
    case VKF_ST_F32:
        for (uint64_t i = 0; i < count; i++, p += 4)
            out[i] = bits_to_float((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        return VKF_OK;
    case VKF_ST_F16:
        for (uint64_t i = 0; i < count; i++, p += 2) out[i] = half_to_float((uint16_t)(p[0] | p[1] << 8));
        return VKF_OK;
    case VKF_ST_BF16:
        for (uint64_t i = 0; i < count; i++, p += 2) out[i] = bits_to_float((uint32_t)p[0] << 16 | (uint32_t)p[1] << 24);
        return VKF_OK;
    default:
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor %s has dtype %s; only F32, F16 and BF16 convert to float",
                        shown(0, t->name), dtypes[t->dtype].name);
    }
}

/* The safetensors reader, without a Vulkan device. Usage: test_safetensors DIR,
 * where DIR holds the files and expect.txt written by tests/gen_safetensors.py.
 *
 *  - Every file of expect.txt opens (vkf_st_open) with the expected status and a
 *    message containing the expected text; good files have the listed tensors
 *    (name, dtype, shape, raw bytes, values from vkf_st_read_f32, order) and
 *    metadata.
 *  - The same files parsed from exactly-sized heap buffers (vkf_st_parse) give
 *    the same results, so that sanitizers see any read past the end (a mapping
 *    is padded to a page and would hide it).
 *  - Every prefix of the good files fails cleanly; single-byte mutations of them
 *    either load or fail with VKF_ERROR_BAD_MODEL, never crash.
 *  - F16 conversion of all 65536 bit patterns against a reference built from
 *    exact doubles.
 *  - NULL arguments, tensors of another file, count mismatches, non-float dtypes.
 * Prints "test_safetensors: N checks passed, M failed" and exits non-zero on any
 * failure. */
#include "families/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks, failures;

#define CHECK(cond)                                                                                 \
    do {                                                                                            \
        checks++;                                                                                   \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                \
            failures++;                                                                             \
        }                                                                                           \
    } while (0)

/* Like CHECK, with a printf-style explanation (`where`: the file or line). */
#define CHECK_MSG(cond, ...)                                                                        \
    do {                                                                                            \
        checks++;                                                                                   \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                \
            fprintf(stderr, __VA_ARGS__);                                                           \
            fputc('\n', stderr);                                                                    \
            failures++;                                                                             \
        }                                                                                           \
    } while (0)

/* The call must fail with `status`, a message containing `keyword`, and *out NULL. */
#define CHECK_FAIL(expr, status, keyword)                                                           \
    do {                                                                                            \
        vkf_status st_ = (expr);                                                                    \
        CHECK_MSG(st_ == (status) && strstr(vkf_last_error(), (keyword)), "%s returned %s: \"%s\", " \
                  "expected %s mentioning \"%s\"", #expr, vkf_status_string(st_), vkf_last_error(), \
                  vkf_status_string(status), (keyword));                                            \
    } while (0)

static int sentinel_storage;
#define SENTINEL ((vkf_st_file *)(void *)&sentinel_storage)

/* ------------------------------------------------------------------ helpers */

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* The whole file in an exactly-sized heap buffer; NULL if it cannot be read. */
static uint8_t *read_file(const char *path, size_t *out_size)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    size_t cap = 4096, n = 0;
    uint8_t *buf = xmalloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            uint8_t *grown = realloc(buf, cap);
            if (!grown) exit(2);
            buf = grown;
        }
    }
    bool bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        return NULL;
    }
    /* Exactly n bytes, so that a read past the end is a sanitizer error. */
    uint8_t *exact = xmalloc(n);
    memcpy(exact, buf, n);
    free(buf);
    *out_size = n;
    return exact;
}

static uint32_t float_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Splits s at `sep` in place into at most `cap` fields (the last one keeps the
 * rest of s); returns the number of fields. */
static size_t split(char *s, char sep, char **fields, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        fields[n++] = s;
        if (n == cap) break;
        char *e = strchr(s, sep);
        if (!e) break;
        *e = '\0';
        s = e + 1;
    }
    return n;
}

/* Every tensor of a file that loaded lies inside the buffer and reads back. */
static void check_sane(const vkf_st_file *f, size_t size)
{
    for (uint32_t i = 0; i < vkf_st_count(f); i++) {
        const vkf_st_tensor *t = vkf_st_at(f, i);
        CHECK(t && t->offset <= size && t->bytes <= size - t->offset);
        CHECK(vkf_st_find(f, t->name) == t);
        if (t->dtype == VKF_ST_F32 || t->dtype == VKF_ST_F16 || t->dtype == VKF_ST_BF16) {
            if (t->elements > (1u << 20)) continue;
            float *v = xmalloc(t->elements * sizeof *v);
            CHECK(vkf_st_read_f32(f, t, v, t->elements) == VKF_OK);
            free(v);
        }
    }
}

/* ------------------------------------------------------------------ expect.txt statements */

/* FILE tensor NAME DTYPE SHAPE RAW [F32] */
static void check_tensor(const vkf_st_file *f, const char *where, char *args)
{
    char *w[6] = {NULL};
    size_t n = split(args, ' ', w, 6);
    if (n < 4) {
        CHECK_MSG(false, "%s: malformed tensor statement", where);
        return;
    }
    const char *name = w[0], *dtype = w[1];
    const vkf_st_tensor *t = vkf_st_find(f, name);
    CHECK_MSG(t != NULL, "%s: no tensor '%s'", where, name);
    if (!t) return;
    CHECK_MSG(strcmp(t->name, name) == 0, "%s: found '%s' for '%s'", where, t->name, name);
    CHECK_MSG(strcmp(vkf_st_dtype_name(t->dtype), dtype) == 0, "%s: '%s' has dtype %s, expected %s", where, name,
              vkf_st_dtype_name(t->dtype), dtype);

    /* shape "2x3", "-" for rank 0 */
    uint64_t shape[VKF_ST_MAX_RANK + 1] = {0}, elements = 1;
    uint32_t rank = 0;
    if (strcmp(w[2], "-") != 0) {
        char *dims[VKF_ST_MAX_RANK + 1];
        rank = (uint32_t)split(w[2], 'x', dims, VKF_ST_MAX_RANK + 1);
        for (uint32_t i = 0; i < rank; i++) {
            shape[i] = strtoull(dims[i], NULL, 10);
            elements *= shape[i];
        }
    }
    CHECK_MSG(t->rank == rank, "%s: '%s' has rank %u, expected %u", where, name, t->rank, rank);
    for (uint32_t i = 0; i < VKF_ST_MAX_RANK; i++)
        CHECK_MSG(t->shape[i] == (i < rank ? shape[i] : 0), "%s: '%s' shape[%u] is %llu", where, name, i,
                  (unsigned long long)t->shape[i]);
    CHECK_MSG(t->elements == elements, "%s: '%s' has %llu elements, expected %llu", where, name,
              (unsigned long long)t->elements, (unsigned long long)elements);
    CHECK(t->bytes == elements * vkf_st_dtype_size(t->dtype));

    /* raw bytes */
    const char *hex = strcmp(w[3], "-") == 0 ? "" : w[3];
    size_t raw_bytes = strlen(hex) / 2;
    CHECK_MSG(raw_bytes == t->bytes, "%s: '%s' is %llu bytes, expected %zu", where, name,
              (unsigned long long)t->bytes, raw_bytes);
    const uint8_t *data = vkf_st_data(f, t);
    CHECK(data != NULL);
    if (data && raw_bytes == t->bytes)
        for (size_t i = 0; i < raw_bytes; i++) {
            int want = hex_digit(hex[2 * i]) << 4 | hex_digit(hex[2 * i + 1]);
            if (data[i] != want) {
                CHECK_MSG(false, "%s: '%s' byte %zu is 0x%02x, expected 0x%02x", where, name, i, data[i], want);
                break;
            }
        }

    /* float values */
    if (n < 5) {
        CHECK_MSG(t->dtype != VKF_ST_F32 && t->dtype != VKF_ST_F16 && t->dtype != VKF_ST_BF16,
                  "%s: no values given for float tensor '%s'", where, name);
        if (t->elements > 0) {
            CHECK_FAIL(vkf_st_read_f32(f, t, NULL, 0), VKF_ERROR_INVALID_ARGUMENT, "count");
            float *v = xmalloc(t->elements * sizeof *v);
            CHECK_FAIL(vkf_st_read_f32(f, t, v, t->elements), VKF_ERROR_BAD_MODEL, "only F32, F16 and BF16");
            free(v);
        }
        return;
    }
    float *got = xmalloc(t->elements * sizeof *got);
    vkf_status st = vkf_st_read_f32(f, t, t->elements ? got : NULL, t->elements);
    CHECK_MSG(st == VKF_OK, "%s: reading '%s': %s", where, name, vkf_last_error());
    if (st == VKF_OK && strcmp(w[4], "-") != 0) {
        char *words[4096];
        size_t count = split(w[4], ',', words, 4096);
        CHECK_MSG(count == t->elements, "%s: %zu values for '%s' of %llu elements", where, count, name,
                  (unsigned long long)t->elements);
        for (size_t i = 0; i < count && i < t->elements; i++) {
            if (strcmp(words[i], "nan") == 0) {
                CHECK_MSG(isnan(got[i]), "%s: '%s'[%zu] is 0x%08x, expected a NaN", where, name, i, float_bits(got[i]));
            } else {
                uint32_t want = (uint32_t)strtoul(words[i], NULL, 16);
                CHECK_MSG(float_bits(got[i]) == want, "%s: '%s'[%zu] is 0x%08x (%g), expected 0x%08x", where, name, i,
                          float_bits(got[i]), (double)got[i], want);
            }
        }
    }
    free(got);
}

/* One line of expect.txt about the file `f` (already opened; NULL if it failed). */
static void check_statement(const vkf_st_file *f, const char *where, const char *kind, char *args)
{
    if (!f) {
        CHECK_MSG(false, "%s: the file did not open", where);
        return;
    }
    if (strcmp(kind, "count") == 0) {
        uint32_t want = (uint32_t)strtoul(args, NULL, 10);
        CHECK_MSG(vkf_st_count(f) == want, "%s: %u tensors, expected %u", where, vkf_st_count(f), want);
        CHECK(vkf_st_at(f, want) == NULL);
    } else if (strcmp(kind, "order") == 0) {
        char *names[256];
        size_t n = strcmp(args, "-") == 0 ? 0 : split(args, ',', names, 256);
        CHECK_MSG(n == vkf_st_count(f), "%s: order lists %zu tensors, the file %u", where, n, vkf_st_count(f));
        for (size_t i = 0; i < n; i++) {
            const vkf_st_tensor *t = vkf_st_at(f, (uint32_t)i);
            CHECK_MSG(t && strcmp(t->name, names[i]) == 0, "%s: tensor %zu is '%s', expected '%s'", where, i,
                      t ? t->name : "(none)", names[i]);
        }
    } else if (strcmp(kind, "tensor") == 0) {
        check_tensor(f, where, args);
    } else if (strcmp(kind, "meta") == 0) {
        char *value = strchr(args, ' ');
        if (value) *value++ = '\0';
        else value = args + strlen(args);
        const char *got = vkf_st_metadata(f, args);
        CHECK_MSG(got && strcmp(got, value) == 0, "%s: metadata '%s' is %s%s%s, expected \"%s\"", where, args,
                  got ? "\"" : "", got ? got : "absent", got ? "\"" : "", value);
        /* and it is among the entries vkf_st_metadata_at lists */
        bool listed = false;
        const char *k, *v;
        for (uint32_t i = 0; vkf_st_metadata_at(f, i, &k, &v); i++) listed |= strcmp(k, args) == 0 && v == got;
        CHECK_MSG(listed, "%s: metadata '%s' not listed by vkf_st_metadata_at", where, args);
    } else if (strcmp(kind, "nometa") == 0) {
        CHECK_MSG(vkf_st_metadata(f, args) == NULL, "%s: unexpected metadata '%s'", where, args);
    } else {
        CHECK_MSG(false, "%s: unknown statement '%s'", where, kind);
    }
}

/* The file (from the open ok/error statement) parsed from a heap buffer gives
 * the same verdict; BAD_MODEL messages are the same but for the path prefix. */
static void check_parse_same(const char *path, bool want_ok, const char *status, const char *substring)
{
    size_t size = 0;
    uint8_t *buf = read_file(path, &size);
    if (!buf) return;                   /* missing.safetensors, dir.safetensors */
    vkf_st_file *f = SENTINEL;
    vkf_status st = vkf_st_parse(buf, size, &f);
    if (want_ok) {
        CHECK_MSG(st == VKF_OK, "%s from memory: %s", path, vkf_last_error());
        if (st == VKF_OK) check_sane(f, size);
    } else {
        CHECK_MSG(st != VKF_OK && strcmp(vkf_status_string(st), status) == 0 && strstr(vkf_last_error(), substring),
                  "%s from memory: %s \"%s\", expected %s mentioning \"%s\"", path, vkf_status_string(st),
                  vkf_last_error(), status, substring);
        CHECK(f == NULL);
    }
    vkf_st_close(f);
    free(buf);
}

/* Runs every statement of DIR/expect.txt. */
static void run_expectations(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/expect.txt", dir);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "cannot open %s (run tests/gen_safetensors.py DIR first)\n", path);
        exit(2);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned lineno = 0, files = 0;
    vkf_st_file *cur = NULL;
    char cur_name[512] = "";
    while ((len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
        if (len == 0 || line[0] == '#') continue;
        char *fields[3];
        size_t nf = split(line, ' ', fields, 3);
        if (nf < 2) {
            CHECK_MSG(false, "expect.txt:%u: malformed", lineno);
            continue;
        }
        const char *fname = fields[0], *kind = fields[1];
        char *args = nf == 3 ? fields[2] : fields[1] + strlen(fields[1]);
        char where[600];
        snprintf(where, sizeof where, "expect.txt:%u (%s)", lineno, fname);
        snprintf(path, sizeof path, "%s/%s", dir, fname);

        if (strcmp(kind, "ok") == 0 || strcmp(kind, "error") == 0) {
            vkf_st_close(cur);
            cur = NULL;
            snprintf(cur_name, sizeof cur_name, "%s", fname);
            files++;
            vkf_st_file *f = SENTINEL;
            vkf_status st = vkf_st_open(path, &f);
            if (strcmp(kind, "ok") == 0) {
                CHECK_MSG(st == VKF_OK, "%s: %s: %s", where, vkf_status_string(st), vkf_last_error());
                if (st == VKF_OK) {
                    cur = f;
                    check_sane(f, (size_t)-1);
                }
                check_parse_same(path, true, NULL, NULL);
            } else {
                char *status = args, *substring = strchr(args, ' ');
                if (substring) *substring++ = '\0';
                else substring = args + strlen(args);
                CHECK_MSG(st != VKF_OK && strcmp(vkf_status_string(st), status) == 0 &&
                              strstr(vkf_last_error(), substring) && strstr(vkf_last_error(), fname),
                          "%s: %s \"%s\", expected %s mentioning \"%s\" and the path", where,
                          vkf_status_string(st), vkf_last_error(), status, substring);
                CHECK_MSG(f == NULL, "%s: *out_file not cleared on failure", where);
                if (st == VKF_OK) vkf_st_close(f);
                check_parse_same(path, false, status, substring);
            }
        } else {
            CHECK_MSG(strcmp(fname, cur_name) == 0, "%s: statement about a file other than the last opened", where);
            check_statement(cur, where, kind, args);
        }
    }
    vkf_st_close(cur);
    free(line);
    fclose(fp);
    CHECK_MSG(files >= 40, "expect.txt lists only %u files", files);
}

/* ------------------------------------------------------------------ robustness */

/* Every proper prefix of a good file fails with BAD_MODEL and a message (when
 * `prefixes`: the file must end with tensor data, not a gap); each single-byte
 * mutation or deletion loads or fails with BAD_MODEL. */
static void run_truncations_and_mutations(const char *dir, const char *name, bool prefixes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t size = 0;
    uint8_t *whole = read_file(path, &size);
    CHECK_MSG(whole != NULL, "cannot read %s", path);
    if (!whole) return;

    unsigned prefix_failures = 0;
    for (size_t len = 0; prefixes && len < size; len++) {
        uint8_t *buf = xmalloc(len);
        memcpy(buf, whole, len);
        vkf_st_file *f = SENTINEL;
        vkf_status st = vkf_st_parse(buf, len, &f);
        if (st != VKF_ERROR_BAD_MODEL || f != NULL || vkf_last_error()[0] == '\0') {
            if (prefix_failures++ < 5)
                fprintf(stderr, "%s: prefix of %zu bytes: %s \"%s\"\n", name, len, vkf_status_string(st), vkf_last_error());
        }
        if (st == VKF_OK) vkf_st_close(f);
        free(buf);
    }
    CHECK_MSG(prefix_failures == 0, "%s: %u of %zu prefixes did not fail cleanly", name, prefix_failures, size);

    static const uint8_t values[] = {0x00, 0xff, 0x80, '"', '{', '}', '[', ']', ',', ':', '-', '0', '9', ' ', '\\', 'e'};
    unsigned loaded = 0, rejected = 0, wrong = 0;
    uint8_t *buf = xmalloc(size);
    for (size_t i = 0; i < size; i++) {
        for (size_t v = 0; v <= sizeof values; v++) {
            memcpy(buf, whole, size);
            buf[i] = v < sizeof values ? values[v] : (uint8_t)(whole[i] + 1);
            vkf_st_file *f = NULL;
            vkf_status st = vkf_st_parse(buf, size, &f);
            if (st == VKF_OK) {
                loaded++;
                check_sane(f, size);
                vkf_st_close(f);
            } else if (st == VKF_ERROR_BAD_MODEL && f == NULL && vkf_last_error()[0]) {
                rejected++;
            } else if (wrong++ < 5) {
                fprintf(stderr, "%s: byte %zu = 0x%02x: %s \"%s\"\n", name, i, buf[i], vkf_status_string(st),
                        vkf_last_error());
            }
        }
        /* and the file with byte i deleted */
        memcpy(buf, whole, i);
        memcpy(buf + i, whole + i + 1, size - i - 1);
        vkf_st_file *f = NULL;
        vkf_status st = vkf_st_parse(buf, size - 1, &f);
        if (st == VKF_OK) {
            loaded++;
            check_sane(f, size - 1);
            vkf_st_close(f);
        } else if (st == VKF_ERROR_BAD_MODEL && f == NULL && vkf_last_error()[0]) {
            rejected++;
        } else if (wrong++ < 5) {
            fprintf(stderr, "%s: byte %zu deleted: %s \"%s\"\n", name, i, vkf_status_string(st), vkf_last_error());
        }
    }
    CHECK_MSG(wrong == 0, "%s: %u mutations neither loaded nor failed with BAD_MODEL", name, wrong);
    CHECK(rejected > 0 && loaded > 0);
    fprintf(stderr, "%s: %zu prefixes rejected; mutations: %u loaded, %u rejected\n", name, prefixes ? size : 0,
            loaded, rejected);
    free(buf);
    free(whole);
}

/* ------------------------------------------------------------------ F16, exhaustively */

/* The value of binary16 pattern h as a double, built from exact operations. */
static double half_reference(uint16_t h)
{
    unsigned exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0x1f) {
        v = mant ? NAN : INFINITY;
    } else {
        /* (implicit 1 + mant / 2^10) * 2^(exp - 15), or mant * 2^-24 when subnormal */
        v = exp ? 1024 + mant : mant;
        int e = exp ? (int)exp - 25 : -24;
        for (; e < 0; e++) v *= 0.5;
        for (; e > 0; e--) v *= 2.0;
    }
    return (h & 0x8000) ? -v : v;
}

static void run_f16_exhaustive(void)
{
    /* A file with one F16 tensor "h" of all 65536 patterns; header padded to 8. */
    char header[128];
    int n = snprintf(header, sizeof header, "{\"h\":{\"dtype\":\"F16\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}");
    while (n % 8) header[n++] = ' ';
    size_t size = 8 + (size_t)n + 131072;
    uint8_t *buf = xmalloc(size);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(buf + 8, header, (size_t)n);
    for (uint32_t h = 0; h < 65536; h++) {
        buf[8 + n + 2 * h] = (uint8_t)h;
        buf[8 + n + 2 * h + 1] = (uint8_t)(h >> 8);
    }
    vkf_st_file *f = NULL;
    vkf_status st = vkf_st_parse(buf, size, &f);
    CHECK_MSG(st == VKF_OK, "F16 file: %s", vkf_last_error());
    if (st == VKF_OK) {
        const vkf_st_tensor *t = vkf_st_find(f, "h");
        float *v = xmalloc(65536 * sizeof *v);
        CHECK(t && t->elements == 65536 && vkf_st_read_f32(f, t, v, 65536) == VKF_OK);
        unsigned bad = 0;
        for (uint32_t h = 0; t && h < 65536; h++) {
            double want = half_reference((uint16_t)h);
            uint32_t bits = float_bits(v[h]);
            bool ok;
            if (isnan(want)) /* NaN: sign and payload kept */
                ok = isnan(v[h]) && (bits >> 31) == (h >> 15) && ((bits >> 13) & 0x3ff) == (h & 0x3ff) &&
                     (bits & 0x1fff) == 0;
            else /* equal as values, and -0 stays -0 */
                ok = (double)v[h] == want && (bits >> 31) == (h >> 15);
            if (!ok && bad++ < 5)
                fprintf(stderr, "F16 0x%04x -> 0x%08x (%g), expected %g\n", h, bits, (double)v[h], want);
        }
        CHECK_MSG(bad == 0, "%u of 65536 F16 patterns converted wrongly", bad);
        free(v);
    }
    vkf_st_close(f);
    free(buf);
}

/* ------------------------------------------------------------------ API misuse */

static void run_argument_checks(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/good_basic.safetensors", dir);
    vkf_st_file *f = SENTINEL, *g = NULL;
    static const uint8_t empty_header[] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};

    CHECK_FAIL(vkf_st_open(NULL, &f), VKF_ERROR_INVALID_ARGUMENT, "path");
    CHECK(f == NULL);
    CHECK_FAIL(vkf_st_open(path, NULL), VKF_ERROR_INVALID_ARGUMENT, "out_file");
    f = SENTINEL;
    CHECK_FAIL(vkf_st_parse(NULL, 10, &f), VKF_ERROR_INVALID_ARGUMENT, "data");
    CHECK(f == NULL);
    CHECK_FAIL(vkf_st_parse(NULL, 0, &f), VKF_ERROR_INVALID_ARGUMENT, "data");
    CHECK_FAIL(vkf_st_parse(empty_header, sizeof empty_header, NULL), VKF_ERROR_INVALID_ARGUMENT, "out_file");
    CHECK_FAIL(vkf_st_parse(empty_header, 0, &f), VKF_ERROR_BAD_MODEL, "shorter than 8 bytes");

    vkf_st_close(NULL);
    CHECK(vkf_st_count(NULL) == 0);
    CHECK(vkf_st_at(NULL, 0) == NULL);
    CHECK(vkf_st_find(NULL, "half") == NULL);
    CHECK(vkf_st_metadata(NULL, "format") == NULL);
    CHECK(vkf_st_metadata_count(NULL) == 0);
    CHECK(!vkf_st_metadata_at(NULL, 0, NULL, NULL));
    CHECK(vkf_st_data(NULL, NULL) == NULL);
    CHECK_FAIL(vkf_st_read_f32(NULL, NULL, NULL, 0), VKF_ERROR_INVALID_ARGUMENT, "NULL");

    CHECK(vkf_st_parse(empty_header, sizeof empty_header, &g) == VKF_OK);
    CHECK(vkf_st_count(g) == 0 && vkf_st_at(g, 0) == NULL && vkf_st_find(g, "") == NULL);
    CHECK(vkf_st_metadata(g, "") == NULL && vkf_st_metadata_count(g) == 0);

    if (vkf_st_open(path, &f) != VKF_OK) {
        CHECK_MSG(false, "%s: %s", path, vkf_last_error());
        vkf_st_close(g);
        return;
    }
    const vkf_st_tensor *half = vkf_st_find(f, "half"), *ids = vkf_st_find(f, "ids");
    CHECK(half && ids);
    if (half && ids) {
        float v[16];
        CHECK(vkf_st_find(f, NULL) == NULL);
        CHECK(vkf_st_find(f, "hal") == NULL && vkf_st_find(f, "halff") == NULL);
        CHECK(vkf_st_metadata(f, NULL) == NULL);
        CHECK(vkf_st_data(f, NULL) == NULL);
        CHECK(vkf_st_data(g, half) == NULL);            /* another file's tensor */
        vkf_st_tensor copy = *half;
        CHECK(vkf_st_data(f, &copy) == NULL);           /* a copy is not the file's */
        CHECK(vkf_st_data(f, (const vkf_st_tensor *)((const char *)half + 1)) == NULL);
        CHECK_FAIL(vkf_st_read_f32(f, NULL, v, 16), VKF_ERROR_INVALID_ARGUMENT, "NULL");
        CHECK_FAIL(vkf_st_read_f32(NULL, half, v, 16), VKF_ERROR_INVALID_ARGUMENT, "NULL");
        CHECK_FAIL(vkf_st_read_f32(g, half, v, 16), VKF_ERROR_INVALID_ARGUMENT, "not one of this file's");
        CHECK_FAIL(vkf_st_read_f32(f, &copy, v, 16), VKF_ERROR_INVALID_ARGUMENT, "not one of this file's");
        CHECK_FAIL(vkf_st_read_f32(f, half, v, 15), VKF_ERROR_INVALID_ARGUMENT, "count 15 does not match tensor \"half\"");
        CHECK_FAIL(vkf_st_read_f32(f, half, v, 17), VKF_ERROR_INVALID_ARGUMENT, "16 elements");
        CHECK_FAIL(vkf_st_read_f32(f, half, NULL, 16), VKF_ERROR_INVALID_ARGUMENT, "out is NULL");
        CHECK_FAIL(vkf_st_read_f32(f, ids, v, 4), VKF_ERROR_BAD_MODEL, "tensor \"ids\" has dtype I64");
        CHECK(vkf_st_read_f32(f, half, v, 16) == VKF_OK);
    }
    const char *k = NULL, *val = NULL;
    uint32_t mc = vkf_st_metadata_count(f);
    CHECK(mc == 4);
    CHECK(!vkf_st_metadata_at(f, mc, &k, &val) && k == NULL);
    for (uint32_t i = 1; i < mc; i++) {                 /* sorted by key */
        const char *prev;
        CHECK(vkf_st_metadata_at(f, i - 1, &prev, NULL) && vkf_st_metadata_at(f, i, &k, NULL) && strcmp(prev, k) < 0);
    }
    vkf_st_close(f);
    vkf_st_close(g);

    for (int d = 0; d < VKF_ST_DTYPE_COUNT; d++)
        CHECK(vkf_st_dtype_size((vkf_st_dtype)d) > 0 && strcmp(vkf_st_dtype_name((vkf_st_dtype)d), "?") != 0);
    CHECK(vkf_st_dtype_size(VKF_ST_DTYPE_COUNT) == 0 && strcmp(vkf_st_dtype_name(VKF_ST_DTYPE_COUNT), "?") == 0);
    CHECK(vkf_st_dtype_size(VKF_ST_F32) == 4 && vkf_st_dtype_size(VKF_ST_BF16) == 2 && vkf_st_dtype_size(VKF_ST_I64) == 8);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR  (DIR written by tests/gen_safetensors.py)\n", argv[0]);
        return 2;
    }
    run_expectations(argv[1]);
    run_truncations_and_mutations(argv[1], "good_basic.safetensors", true);
    run_truncations_and_mutations(argv[1], "good_gaps.safetensors", false); /* ends with a gap */
    run_f16_exhaustive();
    run_argument_checks(argv[1]);
    fprintf(stderr, "test_safetensors: %d checks passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}

/* The SentencePiece shim (src/tokenizers/tokenizer.h) from the command line, for
 * tests/test_spm.py, which compares it with Python's sentencepiece.
 *
 *   test_spm MODEL.spm          reads lines from stdin (split at '\n' only); for
 *                               each prints two lines: its pieces joined by one
 *                               space, then the decode of those pieces
 *   test_spm --list MODEL.spm   prints "ID<TAB>KIND<TAB>PIECE" for every piece
 *                               (KIND: 0 normal, 1 unknown, 2 control,
 *                               3 user-defined, 4 byte, 5 unused)
 *   test_spm --api MODEL.spm    the C interface's edge cases: NULL arguments,
 *                               err truncation, the callback stopping, piece ids
 *   test_spm --threads N MODEL.spm   encodes the lines of stdin on N threads at
 *                               once (one vkf_spm), each result against a
 *                               single-threaded run
 *
 * Pieces and decodes are escaped so that each stays one line: backslash as "\\",
 * newline "\n", carriage return "\r", tab "\t", and in pieces (only) a space as
 * "\s". Errors: one line on stderr, exit 1; usage errors exit 2.
 */
#include "tokenizers/tokenizer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_escaped(const char *s, size_t n, int escape_space) {
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        switch (c) {
        case '\\': fputs("\\\\", stdout); break;
        case '\n': fputs("\\n", stdout); break;
        case '\r': fputs("\\r", stdout); break;
        case '\t': fputs("\\t", stdout); break;
        case '\0': fputs("\\0", stdout); break;
        case ' ':
            fputs(escape_space ? "\\s" : " ", stdout);
            break;
        default: putchar(c); break;
        }
    }
}

typedef struct pieces {
    char **v;
    size_t *len;
    size_t n, cap;
    int failed;
} pieces;

static int collect(const char *piece, size_t len, void *user) {
    pieces *p = user;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        char **v = realloc(p->v, cap * sizeof(*v));
        if (v) p->v = v;
        size_t *l = v ? realloc(p->len, cap * sizeof(*l)) : NULL;
        if (l) p->len = l;
        if (!v || !l) {
            p->failed = 1;
            return 1;
        }
        p->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        p->failed = 1;
        return 1;
    }
    memcpy(copy, piece, len);
    copy[len] = '\0';
    p->len[p->n] = len;
    p->v[p->n++] = copy;
    return 0;
}

static void pieces_free(pieces *p) {
    for (size_t i = 0; i < p->n; i++) free(p->v[i]);
    free(p->v);
    free(p->len);
    memset(p, 0, sizeof(*p));
}

static int list(const vkf_spm *s) {
    uint32_t n = vkf_spm_size(s);
    for (uint32_t i = 0; i < n; i++) {
        int kind = -1;
        const char *piece = vkf_spm_piece(s, i, &kind);
        if (!piece) {
            fprintf(stderr, "test_spm: piece %u of %u missing\n", i, n);
            return 1;
        }
        printf("%u\t%d\t", i, kind);
        put_escaped(piece, strlen(piece), 1);
        putchar('\n');
    }
    if (vkf_spm_piece(s, n, NULL) != NULL) {
        fprintf(stderr, "test_spm: piece %u (out of range) is not NULL\n", n);
        return 1;
    }
    return 0;
}

static int encode_lines(const vkf_spm *s) {
    char err[512];
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int status = 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') len--;
        pieces p = {0};
        int r = vkf_spm_encode_n(s, line, (size_t)len, collect, &p, err, sizeof(err));
        if (r != 0 || p.failed) {
            fprintf(stderr, "test_spm: %s\n", p.failed ? "out of memory" : err);
            status = 1;
        }
        char *text = NULL;
        if (status == 0) {
            for (size_t i = 0; i < p.n; i++) {
                if (i) putchar(' ');
                put_escaped(p.v[i], p.len[i], 1);
            }
            putchar('\n');
            if (vkf_spm_decode(s, (const char *const *)p.v, p.n, &text, err, sizeof(err)) != 0) {
                fprintf(stderr, "test_spm: %s\n", err);
                status = 1;
            } else {
                put_escaped(text, strlen(text), 0);
                putchar('\n');
            }
        }
        free(text);
        pieces_free(&p);
        if (status) break;
    }
    free(line);
    return status;
}

/* ------------------------------------------------------------------ --api */
static int api_failures;
#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "test_spm --api: line %d: %s\n", __LINE__, #cond); \
            api_failures++;                                               \
        }                                                                 \
    } while (0)

static int count_calls(const char *piece, size_t len, void *user) {
    (void)piece;
    (void)len;
    int *calls = user;
    return ++*calls == 2 ? 7 : 0;
}

static int api(const char *path) {
    char err[256];
    err[0] = '\0';
    CHECK(vkf_spm_load(NULL, err, sizeof(err)) == NULL && err[0] != '\0');
    CHECK(vkf_spm_load("/nonexistent/model.spm", NULL, 0) == NULL);
    strcpy(err, "x");
    CHECK(vkf_spm_load("/nonexistent/model.spm", err, 1) == NULL && err[0] == '\0');
    CHECK(vkf_spm_load("/nonexistent/model.spm", err, 8) == NULL && strlen(err) == 7);
    vkf_spm_free(NULL);
    CHECK(vkf_spm_size(NULL) == 0);
    CHECK(vkf_spm_piece(NULL, 0, NULL) == NULL);
    CHECK(vkf_spm_piece_id(NULL, "a", 1) == -1);

    vkf_spm *s = vkf_spm_load(path, err, sizeof(err));
    if (!s) {
        fprintf(stderr, "test_spm: %s\n", err);
        return 1;
    }
    uint32_t n = vkf_spm_size(s);
    CHECK(n > 0);
    CHECK(vkf_spm_piece(s, n, NULL) == NULL);
    CHECK(vkf_spm_piece(s, UINT32_MAX, NULL) == NULL);
    for (uint32_t i = 0; i < n; i++) {
        int kind = -1;
        const char *piece = vkf_spm_piece(s, i, &kind);
        CHECK(piece != NULL && kind >= 0 && kind <= 5);
        if (piece) CHECK(vkf_spm_piece_id(s, piece, strlen(piece)) == (int32_t)i);
        CHECK(vkf_spm_piece(s, i, NULL) == piece);
    }
    CHECK(vkf_spm_piece_id(s, "no such piece \xe2\x96\x81\xe2\x96\x81", 20) == -1);
    CHECK(vkf_spm_piece_id(s, NULL, 0) == -1);
    CHECK(vkf_spm_piece_id(s, NULL, 3) == -1);

    /* encode: NULL arguments, err NULL, the callback's return value */
    err[0] = '\0';
    CHECK(vkf_spm_encode(NULL, "a", count_calls, NULL, err, sizeof(err)) == -1 && err[0] != '\0');
    err[0] = '\0';
    CHECK(vkf_spm_encode(s, NULL, count_calls, NULL, err, sizeof(err)) == -1 && err[0] != '\0');
    err[0] = '\0';
    CHECK(vkf_spm_encode(s, "a", NULL, NULL, err, sizeof(err)) == -1 && err[0] != '\0');
    CHECK(vkf_spm_encode(s, "a", NULL, NULL, NULL, 0) == -1);
    CHECK(vkf_spm_encode_n(s, NULL, 1, count_calls, NULL, NULL, 0) == -1);
    int calls = 0;
    CHECK(vkf_spm_encode_n(s, NULL, 0, count_calls, &calls, NULL, 0) == 0 && calls == 0);
    calls = 0;
    CHECK(vkf_spm_encode(s, "", count_calls, &calls, NULL, 0) == 0 && calls == 0);
    calls = 0;
    /* many pieces (each character a piece or more): stops at the second */
    CHECK(vkf_spm_encode(s, "a b c d e f g", count_calls, &calls, NULL, 0) == 7 && calls == 2);

    /* decode */
    char *out = (char *)1;
    CHECK(vkf_spm_decode(NULL, NULL, 0, &out, err, sizeof(err)) == -1 && out == NULL);
    CHECK(vkf_spm_decode(s, NULL, 0, NULL, err, sizeof(err)) == -1);
    out = (char *)1;
    CHECK(vkf_spm_decode(s, NULL, 1, &out, err, sizeof(err)) == -1 && out == NULL);
    const char *with_null[] = {"a", NULL};
    out = (char *)1;
    err[0] = '\0';
    CHECK(vkf_spm_decode(s, with_null, 2, &out, err, sizeof(err)) == -1 && out == NULL && err[0] != '\0');
    out = NULL;
    CHECK(vkf_spm_decode(s, NULL, 0, &out, err, sizeof(err)) == 0 && out != NULL && out[0] == '\0');
    free(out);
    const char *empty_piece[] = {"a", ""};
    out = (char *)1;
    err[0] = '\0';
    int r = vkf_spm_decode(s, empty_piece, 2, &out, err, sizeof(err));
    CHECK(r == 0 ? out != NULL : (out == NULL && err[0] != '\0' && strchr(err, '\n') == NULL));
    if (r == 0) free(out);
    /* round trip through the C interface alone */
    pieces p = {0};
    CHECK(vkf_spm_encode(s, "Hallo Welt, hello world", collect, &p, NULL, 0) == 0 && p.n > 0 && !p.failed);
    out = NULL;
    CHECK(vkf_spm_decode(s, (const char *const *)p.v, p.n, &out, NULL, 0) == 0 && out &&
          strcmp(out, "Hallo Welt, hello world") == 0);
    free(out);
    pieces_free(&p);
    vkf_spm_free(s);
    if (api_failures) {
        fprintf(stderr, "test_spm --api: %d check(s) failed\n", api_failures);
        return 1;
    }
    printf("api: all checks passed\n");
    return 0;
}

/* ------------------------------------------------------------------ --threads */
typedef struct job {
    const vkf_spm *s;
    char **lines;
    size_t *lens;
    char **expected;   /* pieces joined by '\x01' */
    size_t n_lines;
    int mismatches;
} job;

typedef struct joined {
    char *buf;
    size_t n, cap;
    int failed;
} joined;

static int join_piece(const char *piece, size_t len, void *user) {
    joined *j = user;
    if (j->n + len + 2 > j->cap) {
        size_t cap = (j->n + len + 2) * 2;
        char *b = realloc(j->buf, cap);
        if (!b) {
            j->failed = 1;
            return 1;
        }
        j->buf = b;
        j->cap = cap;
    }
    memcpy(j->buf + j->n, piece, len);
    j->n += len;
    j->buf[j->n++] = '\x01';
    j->buf[j->n] = '\0';
    return 0;
}

static char *encode_joined(const vkf_spm *s, const char *line, size_t len) {
    joined j = {0};
    char err[256];
    if (vkf_spm_encode_n(s, line, len, join_piece, &j, err, sizeof(err)) != 0 || j.failed) {
        free(j.buf);
        return NULL;
    }
    return j.buf ? j.buf : strdup("");
}

static void *thread_main(void *arg) {
    job *jb = arg;
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < jb->n_lines; i++) {
            char *got = encode_joined(jb->s, jb->lines[i], jb->lens[i]);
            if (!got || strcmp(got, jb->expected[i]) != 0) jb->mismatches++;
            free(got);
        }
    }
    return NULL;
}

static int threads(const vkf_spm *s, int n_threads) {
    char **lines = NULL, **expected = NULL;
    size_t *lens = NULL, n = 0, cap = 0;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    int status = 0;
    while ((len = getline(&line, &line_cap, stdin)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') len--;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            lines = realloc(lines, cap * sizeof(*lines));
            lens = realloc(lens, cap * sizeof(*lens));
            expected = realloc(expected, cap * sizeof(*expected));
            if (!lines || !lens || !expected) {
                fprintf(stderr, "test_spm: out of memory\n");
                return 1;
            }
        }
        lines[n] = malloc((size_t)len + 1);
        memcpy(lines[n], line, (size_t)len + 1);
        lens[n] = (size_t)len;
        expected[n] = encode_joined(s, lines[n], lens[n]);
        if (!expected[n]) {
            fprintf(stderr, "test_spm: encoding line %zu failed\n", n + 1);
            return 1;
        }
        n++;
    }
    free(line);
    pthread_t tid[64];
    job jobs[64];
    if (n_threads > 64) n_threads = 64;
    for (int t = 0; t < n_threads; t++) {
        jobs[t] = (job){s, lines, lens, expected, n, 0};
        if (pthread_create(&tid[t], NULL, thread_main, &jobs[t]) != 0) {
            fprintf(stderr, "test_spm: pthread_create failed\n");
            return 1;
        }
    }
    int mismatches = 0;
    for (int t = 0; t < n_threads; t++) {
        pthread_join(tid[t], NULL);
        mismatches += jobs[t].mismatches;
    }
    if (mismatches) {
        fprintf(stderr, "test_spm --threads: %d encodings differ from the single-threaded run\n", mismatches);
        status = 1;
    } else {
        printf("threads: %d threads x 20 rounds x %zu lines agree\n", n_threads, n);
    }
    for (size_t i = 0; i < n; i++) {
        free(lines[i]);
        free(expected[i]);
    }
    free(lines);
    free(lens);
    free(expected);
    return status;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--api") == 0) return api(argv[2]);
    int do_list = argc == 3 && strcmp(argv[1], "--list") == 0;
    int n_threads = argc == 4 && strcmp(argv[1], "--threads") == 0 ? atoi(argv[2]) : 0;
    if (!(argc == 2 && argv[1][0] != '-') && !do_list && n_threads <= 0) {
        fprintf(stderr, "usage: test_spm [--list | --api | --threads N] MODEL.spm\n");
        return 2;
    }
    char err[512];
    vkf_spm *s = vkf_spm_load(argv[argc - 1], err, sizeof(err));
    if (!s) {
        fprintf(stderr, "test_spm: %s\n", err);
        return 1;
    }
    int status = do_list ? list(s) : n_threads > 0 ? threads(s, n_threads) : encode_lines(s);
    vkf_spm_free(s);
    if (fflush(stdout) != 0) status = 1;
    return status;
}

/* The tokenizer.json reader (src/tokenizers/tokenizer_json.h) against Hugging Face
 * tokenizers 0.23 itself: the golden cases of tools/make_tokenizer_cases.py
 * (unpacked into the build by tests/unpack_tokenizer_cases.py), malformed files
 * (tests/gen_bad_tokenizers.py), long inputs, and the C interface's edge cases.
 *
 *   test_hftok cases DIR   every NAME.cases.json in DIR against NAME.json: ids
 *                          with and without special tokens, both decodes, random
 *                          id sequences decoded, the added tokens and vocab size;
 *                          prints the first mismatch of each tokenizer (text,
 *                          expected, got)
 *   test_hftok bad DIR     every file of DIR's MANIFEST ("FILE<TAB>words the
 *                          message must hold") fails to load with
 *                          VKF_ERROR_BAD_MODEL and one line that holds them
 *   test_hftok long DIR    a 100 kB line of one repeated character (and a few
 *                          other long lines) through every tokenizer of DIR,
 *                          each encode and decode timed and reported (a
 *                          quadratic slip shows as meson's time-out, not as a
 *                          timed assertion)
 *   test_hftok api DIR     NULL arguments, ill-formed UTF-8 input, lookups,
 *                          decode_n with NUL bytes, 8 threads on one tokenizer
 * Prints "N passed, M failed"; exits 1 on any failure.
 */
#include "tokenizers/tokenizer.h"
#include "tokenizers/tokenizer_json.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int passed, failed;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (cond) {                                                                      \
            passed++;                                                                    \
        } else {                                                                         \
            failed++;                                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                         \
            fprintf(stderr, __VA_ARGS__);                                                \
            fputc('\n', stderr);                                                         \
        }                                                                                \
    } while (0)

/* A growing byte string. */
typedef struct buf_t {
    char *s;
    size_t n;
} buf_t;

static void buf_cat(buf_t *b, const char *s, size_t n)
{
    char *p = realloc(b->s, b->n + n + 1);
    if (!p) abort();
    if (n) memcpy(p + b->n, s, n);
    b->s = p;
    b->n += n;
    b->s[b->n] = '\0';
}

static void buf_set(buf_t *b, const char *s, size_t n)
{
    b->n = 0;
    buf_cat(b, s, n);
}

static void put_escaped(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n && i < 400; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    if (n > 400) fputs("...", f);
    fputc('"', f);
}

static void put_ids(FILE *f, const int32_t *v, size_t n)
{
    fputc('[', f);
    for (size_t i = 0; i < n && i < 80; i++) fprintf(f, "%s%d", i ? ", " : "", v[i]);
    if (n > 80) fprintf(f, ", ... (%zu)", n);
    fputc(']', f);
}

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) abort();
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static json_t *load_json(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, JSON_ALLOW_NUL, &e);
    if (!j) {
        fprintf(stderr, "test_hftok: %s: %s (line %d)\n", path, e.text, e.line);
        exit(1);
    }
    return j;
}

/* ids of a JSON list into v (malloc'd); count returned. */
static size_t json_ids(const json_t *a, int32_t **v)
{
    size_t n = json_array_size(a);
    *v = malloc((n ? n : 1) * sizeof **v);
    if (!*v) abort();
    for (size_t i = 0; i < n; i++) (*v)[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return n;
}

static bool same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

/* One decode against its expectation: a string, or null (tokenizers panics: we
 * must fail). Returns whether it matched; reports the first mismatch. */
static const vkf_bpe_text *decode_bpe; /* set: check_decode runs vkf_bpe_decode on it instead */

static bool check_decode(const vkf_hftok *t, const char *name, const char *what, const int32_t *ids, size_t n,
                         bool skip, const char *want, size_t want_len, bool want_fail, bool *reported)
{
    char *got = NULL;
    size_t got_len = 0;
    vkf_status st = decode_bpe ? vkf_bpe_decode(decode_bpe, ids, (uint32_t)n, skip, &got, &got_len)
                               : vkf_hftok_decode_n(t, ids, (uint32_t)n, skip, &got, &got_len);
    bool ok = want_fail ? st != VKF_OK && vkf_last_error()[0] != '\0'
                        : st == VKF_OK && got_len == want_len && memcmp(got, want, want_len) == 0;
    if (!ok && !*reported) {
        *reported = true;
        fprintf(stderr, "%s: decode (%s, skip_special=%d) of ", name, what, skip);
        put_ids(stderr, ids, n);
        fprintf(stderr, "\n  expected: ");
        if (want_fail) fprintf(stderr, "an error (tokenizers panics)");
        else put_escaped(stderr, want, want_len);
        fprintf(stderr, "\n  got:      ");
        if (st != VKF_OK) fprintf(stderr, "error: %s", vkf_last_error());
        else put_escaped(stderr, got, got_len);
        fputc('\n', stderr);
    }
    free(got);
    return ok;
}

/* The two decodes an encode case expects (e[3], e[4]): d1 (skip_special) 0 = the
 * text, 1 = d0; d0: 0 = the text, [prefix, suffix] around d1; null = tokenizers
 * panics (*f0, *f1 true). */
static void expected_decodes(const json_t *e, const char *text, size_t text_len, buf_t *w0, bool *f0, buf_t *w1,
                             bool *f1)
{
    json_t *d0 = json_array_get(e, 3), *d1 = json_array_get(e, 4);
    *f0 = json_is_null(d0), *f1 = json_is_null(d1);
    if (json_is_integer(d1) && json_integer_value(d1) == 0) buf_set(w1, text, text_len);
    else if (json_is_string(d1)) buf_set(w1, json_string_value(d1), json_string_length(d1));
    if (json_is_integer(d0)) buf_set(w0, text, text_len);
    else if (json_is_string(d0)) buf_set(w0, json_string_value(d0), json_string_length(d0));
    else if (json_is_array(d0)) {
        json_t *pre = json_array_get(d0, 0), *post = json_array_get(d0, 1);
        buf_set(w0, json_string_value(pre), json_string_length(pre));
        buf_cat(w0, w1->s, w1->n);
        buf_cat(w0, json_string_value(post), json_string_length(post));
    }
    if (json_is_integer(d1) && json_integer_value(d1) == 1) {
        buf_set(w1, w0->s, w0->n);
        *f1 = *f0;
    }
}

/* Ids with special tokens of an encode case: e[2] whole, or [prefix, suffix]
 * around the plain ids a (na). */
static size_t expected_special(const json_t *bj, const int32_t *a, size_t na, int32_t **out)
{
    if (json_array_size(bj) == 2 && json_is_array(json_array_get(bj, 0))) {
        int32_t *pre, *post;
        size_t np = json_ids(json_array_get(bj, 0), &pre), nq = json_ids(json_array_get(bj, 1), &post);
        size_t nb = np + na + nq;
        *out = malloc((nb ? nb : 1) * sizeof **out);
        if (!*out) abort();
        memcpy(*out, pre, np * sizeof *pre);
        if (na) memcpy(*out + np, a, na * sizeof *a);
        memcpy(*out + np + na, post, nq * sizeof *post);
        free(pre), free(post);
        return nb;
    }
    return json_ids(bj, out);
}

static int run_cases(const char *dir)
{
    char *texts_path = path_join(dir, "texts.json");
    json_t *texts = load_json(texts_path);
    free(texts_path);
    static const char *const names[] = {"nllb", "mbart50", "t5", "bart", "whisper", "llama_bf", "wordpiece_bpe",
                                        "unigram_mix", "bpe_splits", "bytelevel_prefix"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        const char *name = names[k];
        char file[256];
        snprintf(file, sizeof file, "%s.json", name);
        char *tok_path = path_join(dir, file);
        snprintf(file, sizeof file, "%s.cases.json", name);
        char *cases_path = path_join(dir, file);
        vkf_hftok *t = NULL;
        vkf_status st = vkf_hftok_load(tok_path, &t);
        CHECK(st == VKF_OK, "%s: load: %s", name, vkf_last_error());
        if (st != VKF_OK) {
            free(tok_path), free(cases_path);
            continue;
        }
        json_t *c = load_json(cases_path);
        int good = 0, bad = 0;
        bool reported_enc = false, reported_dec = false;

        /* vocabulary size and added tokens */
        uint32_t want_size = (uint32_t)json_integer_value(json_object_get(c, "vocab_size"));
        if (vkf_hftok_vocab_size(t) == want_size) good++;
        else bad++, fprintf(stderr, "%s: vocab_size %u, expected %u\n", name, vkf_hftok_vocab_size(t), want_size);
        json_t *added = json_object_get(c, "added");
        for (size_t i = 0; i < json_array_size(added); i++) {
            json_t *a = json_array_get(added, i);
            const char *content = json_string_value(json_array_get(a, 0));
            int32_t id = (int32_t)json_integer_value(json_array_get(a, 1));
            bool special = json_is_true(json_array_get(a, 2));
            /* id_to_token: a normalized token's normalized form */
            const char *shown = json_string_value(json_array_get(a, 3));
            const char *tok = vkf_hftok_token(t, id);
            bool special_ok = vkf_hftok_is_special(t, id) == (special && strcmp(shown, content) == 0);
            if (vkf_hftok_token_id(t, content) == id && tok && strcmp(tok, shown) == 0 && special_ok) {
                good++;
            } else {
                bad++;
                fprintf(stderr, "%s: added token \"%s\": expected id %d, token \"%s\", special %d; got id %d, "
                        "token(%d) %s, special %d\n", name, content, id, shown, special, vkf_hftok_token_id(t, content),
                        id, tok ? tok : "(none)", vkf_hftok_is_special(t, id));
            }
        }

        /* encodes, and decodes of what was encoded */
        json_t *enc = json_object_get(c, "encode");
        for (size_t i = 0; i < json_array_size(enc); i++) {
            json_t *e = json_array_get(enc, i);
            json_t *tj = json_array_get(texts, (size_t)json_integer_value(json_array_get(e, 0)));
            const char *text = json_string_value(tj);
            size_t text_len = json_string_length(tj);
            int32_t *want_a, *want_b;
            size_t na = json_ids(json_array_get(e, 1), &want_a), nb;
            json_t *bj = json_array_get(e, 2);
            if (json_array_size(bj) == 2 && json_is_array(json_array_get(bj, 0))) {
                int32_t *pre, *post;
                size_t np = json_ids(json_array_get(bj, 0), &pre), nq = json_ids(json_array_get(bj, 1), &post);
                nb = np + na + nq;
                want_b = malloc((nb ? nb : 1) * sizeof *want_b);
                if (!want_b) abort();
                memcpy(want_b, pre, np * sizeof *pre);
                memcpy(want_b + np, want_a, na * sizeof *want_a);
                memcpy(want_b + np + na, post, nq * sizeof *post);
                free(pre), free(post);
            } else {
                nb = json_ids(bj, &want_b);
            }
            bool ok = true;
            for (int special = 0; special < 2; special++) {
                int32_t *got = NULL;
                uint32_t n = 0;
                vkf_status s = vkf_hftok_encode(t, text, text_len, special, &got, &n);
                const int32_t *want = special ? want_b : want_a;
                size_t nw = special ? nb : na;
                if (s != VKF_OK || !same_ids(got, n, want, nw)) {
                    ok = false;
                    if (!reported_enc) {
                        reported_enc = true;
                        fprintf(stderr, "%s: encode (add_special=%d) of text %zu ", name, special,
                                (size_t)json_integer_value(json_array_get(e, 0)));
                        put_escaped(stderr, text, text_len);
                        fprintf(stderr, "\n  expected: ");
                        put_ids(stderr, want, nw);
                        fprintf(stderr, "\n  got:      ");
                        if (s != VKF_OK) fprintf(stderr, "error: %s", vkf_last_error());
                        else put_ids(stderr, got, n);
                        fputc('\n', stderr);
                    }
                }
                free(got);
            }
            buf_t w0 = {0}, w1 = {0};
            bool f0, f1;
            expected_decodes(e, text, text_len, &w0, &f0, &w1, &f1);
            const char *w0s = w0.s ? w0.s : "", *w1s = w1.s ? w1.s : "";
            size_t l0 = w0.n, l1 = w1.n;
            ok &= check_decode(t, name, "of the encode", want_b, nb, false, w0s, l0, f0, &reported_dec);
            ok &= check_decode(t, name, "of the encode", want_b, nb, true, w1s, l1, f1, &reported_dec);
            free(want_a), free(want_b), free(w0.s), free(w1.s);
            if (ok) good++;
            else bad++;
        }

        /* random id sequences */
        json_t *dec = json_object_get(c, "decode");
        for (size_t i = 0; i < json_array_size(dec); i++) {
            json_t *e = json_array_get(dec, i);
            int32_t *ids;
            size_t n = json_ids(json_array_get(e, 0), &ids);
            json_t *d0 = json_array_get(e, 1), *d1 = json_array_get(e, 2);
            bool ok = check_decode(t, name, "random ids", ids, n, false, json_string_value(d0), json_string_length(d0),
                                   json_is_null(d0), &reported_dec);
            ok &= check_decode(t, name, "random ids", ids, n, true, json_string_value(d1), json_string_length(d1),
                               json_is_null(d1), &reported_dec);
            free(ids);
            if (ok) good++;
            else bad++;
        }
        printf("%-18s %5d cases match tokenizers, %d do not\n", name, good, bad);
        passed += good;
        failed += bad;
        json_decref(c);
        vkf_hftok_free(t);
        free(tok_path), free(cases_path);
    }
    json_decref(texts);
    return 0;
}

/* ------------------------------------------------------------------ byte-level BPE folders */

/* tools/make_bpe_cases.py's folders through tokenizer.h's vkf_bpe_*: each folder's
 * cases as transformers 5.12.1's AutoTokenizer gave them. */
static int run_bpe(const char *dir)
{
    static const struct {
        const char *name;
        vkf_bpe_kind kind;
    } forms[] = {{"bart_hub", VKF_BPE_BART},       {"bart_saved", VKF_BPE_BART},        {"bart_legacy", VKF_BPE_BART},
                 {"whisper_hub", VKF_BPE_WHISPER}, {"whisper_legacy", VKF_BPE_WHISPER}, {"whisper_saved", VKF_BPE_WHISPER}};
    enum { NF = sizeof forms / sizeof *forms };
    json_t *loaded[NF] = {0};
    char *texts_path = path_join(dir, "bpe_texts.json");
    json_t *texts = load_json(texts_path);
    free(texts_path);
    for (size_t f = 0; f < NF; f++) {
        const char *name = forms[f].name;
        char file[256];
        snprintf(file, sizeof file, "%s.cases.json", name);
        char *cases_path = path_join(dir, file), *folder = path_join(dir, name);
        json_t *c = loaded[f] = load_json(cases_path);
        free(cases_path);
        const json_t *base = NULL;
        const char *same_as = json_string_value(json_object_get(c, "same_as"));
        for (size_t k = 0; same_as && k < f; k++)
            if (strcmp(forms[k].name, same_as) == 0) base = json_object_get(loaded[k], "encode");
        CHECK(!same_as || base, "%s: its base %s is not loaded", name, same_as);
        vkf_bpe_text *t = NULL;
        vkf_status st = vkf_bpe_open(folder, forms[f].kind, &t);
        free(folder);
        CHECK(st == VKF_OK, "%s: open: %s", name, vkf_last_error());
        if (st != VKF_OK) continue;
        CHECK(t->from_json == (strstr(name, "_saved") != NULL), "%s: read from %s", name,
              t->from_json ? "tokenizer.json" : "the slow files");
        int good = 0, bad = 0;
        bool reported_enc = false, reported_dec = false;
        uint32_t want_size = (uint32_t)json_integer_value(json_object_get(c, "vocab_size"));
        if (vkf_bpe_size(t) == want_size) good++;
        else bad++, fprintf(stderr, "%s: size %u, expected %u\n", name, vkf_bpe_size(t), want_size);
        json_t *added = json_object_get(c, "added");
        for (size_t i = 0; i < json_array_size(added); i++) {
            json_t *a = json_array_get(added, i);
            const char *content = json_string_value(json_array_get(a, 0));
            int32_t id = (int32_t)json_integer_value(json_array_get(a, 1));
            bool special = json_is_true(json_array_get(a, 2));
            if (vkf_bpe_token_id(t, content) == id && vkf_hftok_is_special(t->tok, id) == special) {
                good++;
            } else {
                bad++;
                fprintf(stderr, "%s: added token \"%s\": expected id %d, special %d; got id %d, special %d\n", name,
                        content, id, special, vkf_bpe_token_id(t, content), vkf_hftok_is_special(t->tok, id));
            }
        }
        decode_bpe = t;
        json_t *enc = json_object_get(c, "encode");
        for (size_t i = 0; i < json_array_size(enc); i++) {
            json_t *e = json_array_get(enc, i);
            size_t ti = (size_t)json_integer_value(json_array_get(e, 0));
            json_t *tj = json_array_get(texts, ti);
            const char *text = json_string_value(tj);
            size_t text_len = json_string_length(tj);
            json_t *aj = json_array_get(e, 1);
            if (json_is_null(aj) && base) aj = json_array_get(json_array_get(base, i), 1); /* the base's ids */
            int32_t *want_a, *want_b;
            size_t na = json_ids(aj, &want_a), nb = expected_special(json_array_get(e, 2), want_a, na, &want_b);
            bool ok = true;
            for (int special = 0; special < 2; special++) {
                int32_t *got = NULL;
                uint32_t n = 0;
                vkf_status s = vkf_bpe_encode(t, text, text_len, special, &got, &n);
                const int32_t *want = special ? want_b : want_a;
                size_t nw = special ? nb : na;
                if (s != VKF_OK || !same_ids(got, n, want, nw)) {
                    ok = false;
                    if (!reported_enc) {
                        reported_enc = true;
                        fprintf(stderr, "%s: encode (add_special=%d) of text %zu ", name, special, ti);
                        put_escaped(stderr, text, text_len);
                        fprintf(stderr, "\n  expected: ");
                        put_ids(stderr, want, nw);
                        fprintf(stderr, "\n  got:      ");
                        if (s != VKF_OK) fprintf(stderr, "error: %s", vkf_last_error());
                        else put_ids(stderr, got, n);
                        fputc('\n', stderr);
                    }
                }
                free(got);
            }
            buf_t w0 = {0}, w1 = {0};
            bool f0, f1;
            expected_decodes(e, text, text_len, &w0, &f0, &w1, &f1);
            ok &= check_decode(NULL, name, "of the encode", want_b, nb, false, w0.s ? w0.s : "", w0.n, f0,
                               &reported_dec);
            ok &= check_decode(NULL, name, "of the encode", want_b, nb, true, w1.s ? w1.s : "", w1.n, f1,
                               &reported_dec);
            free(want_a), free(want_b), free(w0.s), free(w1.s);
            if (ok) good++;
            else bad++;
        }
        json_t *dec = json_object_get(c, "decode");
        for (size_t i = 0; i < json_array_size(dec); i++) {
            json_t *e = json_array_get(dec, i);
            int32_t *ids;
            size_t n = json_ids(json_array_get(e, 0), &ids);
            json_t *d0 = json_array_get(e, 1), *d1 = json_array_get(e, 2);
            bool ok = check_decode(NULL, name, "id list", ids, n, false, json_string_value(d0), json_string_length(d0),
                                   false, &reported_dec);
            ok &= check_decode(NULL, name, "id list", ids, n, true, json_string_value(d1), json_string_length(d1),
                               false, &reported_dec);
            free(ids);
            if (ok) good++;
            else bad++;
        }
        decode_bpe = NULL;
        printf("%-16s %5d cases match transformers, %d do not\n", name, good, bad);
        passed += good;
        failed += bad;
        vkf_bpe_free(t);
    }
    for (size_t f = 0; f < NF; f++) json_decref(loaded[f]);
    json_decref(texts);
    return 0;
}

/* ------------------------------------------------------------------ bad files */

/* MANIFEST_BPE: "FOLDER<TAB>bart|whisper<TAB>words" under DIR/bpe: vkf_bpe_open
 * refuses each with VKF_ERROR_BAD_MODEL and one line holding the words (no words:
 * the folder must load). */
static int run_bad_bpe(const char *dir)
{
    char *manifest = path_join(dir, "MANIFEST_BPE");
    FILE *f = fopen(manifest, "r");
    free(manifest);
    CHECK(f != NULL, "%s/MANIFEST_BPE: cannot open", dir);
    if (!f) return 0;
    char line[1024];
    int count = 0, valid = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t2) continue;
        *t1 = *t2 = '\0';
        const char *want = t2 + 1;
        vkf_bpe_kind kind = strcmp(t1 + 1, "whisper") == 0 ? VKF_BPE_WHISPER : VKF_BPE_BART;
        char sub[1100];
        snprintf(sub, sizeof sub, "bpe/%s", line);
        char *path = path_join(dir, sub);
        vkf_bpe_text *t = (vkf_bpe_text *)(uintptr_t)1;
        vkf_status st = vkf_bpe_open(path, kind, &t);
        const char *msg = vkf_last_error();
        free(path);
        if (!want[0]) {
            CHECK(st == VKF_OK && t, "%s: the valid folder does not load: %s", line, msg);
            if (st == VKF_OK) vkf_bpe_free(t);
            valid++;
            continue;
        }
        CHECK(st == VKF_ERROR_BAD_MODEL && t == NULL, "%s: opened (status %d, %s)", line, (int)st, msg);
        CHECK(msg[0] && !strchr(msg, '\n') && !strchr(msg, '\r'), "%s: not one line: %s", line, msg);
        char words[512];
        snprintf(words, sizeof words, "%s", want);
        for (char *w = strtok(words, " "); w; w = strtok(NULL, " "))
            CHECK(strstr(msg, w) != NULL, "%s: the message does not say \"%s\": %s", line, w, msg);
        if (st == VKF_OK) vkf_bpe_free(t);
        if (getenv("TEST_HFTOK_VERBOSE")) printf("%-34s %s\n", line, msg);
        count++;
    }
    fclose(f);
    CHECK(count >= 30 && valid == 2, "MANIFEST_BPE: %d malformed folders, %d valid ones", count, valid);
    printf("%d malformed byte-level BPE folders refused, %d valid ones loaded\n", count, valid);
    return 0;
}

static int run_bad(const char *dir)
{
    char *manifest = path_join(dir, "MANIFEST");
    FILE *f = fopen(manifest, "r");
    if (!f) {
        fprintf(stderr, "test_hftok: %s: cannot open\n", manifest);
        return 1;
    }
    char line[1024];
    int count = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = '\0';
        const char *want = tab + 1;
        char *path = path_join(dir, line);
        vkf_hftok *t = (vkf_hftok *)(uintptr_t)1;
        vkf_status st = vkf_hftok_load(path, &t);
        const char *msg = vkf_last_error();
        CHECK(st == VKF_ERROR_BAD_MODEL && t == NULL, "%s: loaded (status %d, %s)", line, (int)st, msg);
        CHECK(msg[0] && !strchr(msg, '\n') && !strchr(msg, '\r'), "%s: not one line: %s", line, msg);
        /* every word of want in the message */
        char words[512];
        snprintf(words, sizeof words, "%s", want);
        for (char *w = strtok(words, " "); w; w = strtok(NULL, " "))
            CHECK(strstr(msg, w) != NULL, "%s: the message does not say \"%s\": %s", line, w, msg);
        if (st == VKF_OK) vkf_hftok_free(t);
        if (getenv("TEST_HFTOK_VERBOSE")) printf("%-34s %s\n", line, msg);
        free(path);
        count++;
    }
    fclose(f);
    free(manifest);
    CHECK(count >= 20, "only %d malformed files in the manifest", count);
    printf("%d malformed files refused\n", count);
    return run_bad_bpe(dir);
}

/* ------------------------------------------------------------------ long inputs */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *const all_names[] = {"nllb", "mbart50", "t5", "bart", "whisper", "llama_bf", "wordpiece_bpe",
                                        "unigram_mix", "bpe_splits", "bytelevel_prefix"};

static int run_long(const char *dir)
{
    /* each line about 100 kB */
    static const char *const units[] = {"a", " ", "\xe6\x97\xa5" /* 日 */, "\xf0\x9f\x98\x80" /* 😀 */, "ab ", "\xcc\x81" /* U+0301 */,
                                        "\xe2\x96\x81" /* ▁ */, "1", "<s>"};
    for (size_t k = 0; k < sizeof all_names / sizeof *all_names; k++) {
        char file[64];
        snprintf(file, sizeof file, "%s.json", all_names[k]);
        char *path = path_join(dir, file);
        vkf_hftok *t = NULL;
        CHECK(vkf_hftok_load(path, &t) == VKF_OK, "%s: %s", file, vkf_last_error());
        free(path);
        if (!t) continue;
        double worst = 0;
        const char *worst_unit = "";
        for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
            size_t ul = strlen(units[u]), reps = 100000 / ul, n = reps * ul;
            char *text = malloc(n + 1);
            if (!text) abort();
            for (size_t i = 0; i < reps; i++) memcpy(text + i * ul, units[u], ul);
            text[n] = '\0';
            double t0 = now();
            int32_t *ids = NULL;
            uint32_t count = 0;
            vkf_status st = vkf_hftok_encode(t, text, n, true, &ids, &count);
            char *back = NULL;
            if (st == VKF_OK) st = vkf_hftok_decode(t, ids, count, false, &back);
            double dt = now() - t0;
            CHECK(st == VKF_OK, "%s: %zu x \"%s\": %s", all_names[k], reps, units[u], vkf_last_error());
            if (dt > worst) worst = dt, worst_unit = units[u];
            free(ids), free(back), free(text);
        }
        printf("%-18s slowest 100 kB line (encode + decode): %.3f s (\"%s\" repeated)\n", all_names[k], worst,
               worst_unit);
        vkf_hftok_free(t);
    }
    return 0;
}

/* ------------------------------------------------------------------ interface */

typedef struct thread_job {
    const vkf_hftok *t;
    const json_t *texts;
    int mismatches;
    int32_t **expect;
    uint32_t *expect_n;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    for (size_t i = 0; i < json_array_size(j->texts); i++) {
        json_t *s = json_array_get(j->texts, i);
        int32_t *ids = NULL;
        uint32_t n = 0;
        if (vkf_hftok_encode(j->t, json_string_value(s), json_string_length(s), true, &ids, &n) != VKF_OK ||
            !same_ids(ids, n, j->expect[i], j->expect_n[i]))
            j->mismatches++;
        free(ids);
    }
    return NULL;
}

static int run_api(const char *dir)
{
    char *path = path_join(dir, "whisper.json");
    vkf_hftok *t = NULL;
    CHECK(vkf_hftok_load(path, &t) == VKF_OK, "whisper.json: %s", vkf_last_error());
    free(path);
    if (!t) return 0;
    int32_t *ids = (int32_t *)(uintptr_t)1;
    uint32_t n = 7;
    char *s = (char *)(uintptr_t)1;
    vkf_hftok *other = (vkf_hftok *)(uintptr_t)1;
    CHECK(vkf_hftok_load(NULL, &other) == VKF_ERROR_INVALID_ARGUMENT && other == NULL, "load(NULL)");
    CHECK(vkf_hftok_load("/nonexistent/tokenizer.json", &(vkf_hftok *){NULL}) == VKF_ERROR_IO, "missing file");
    CHECK(vkf_hftok_load(dir, &(vkf_hftok *){NULL}) == VKF_ERROR_IO, "a directory");
    CHECK(vkf_hftok_load_bytes(NULL, 0, &(vkf_hftok *){NULL}) == VKF_ERROR_BAD_MODEL, "empty bytes");
    CHECK(vkf_hftok_encode(NULL, "a", 1, false, &ids, &n) == VKF_ERROR_INVALID_ARGUMENT && ids == NULL && n == 0,
          "encode(NULL tokenizer)");
    CHECK(vkf_hftok_encode(t, NULL, 1, false, &ids, &n) == VKF_ERROR_INVALID_ARGUMENT, "encode(NULL text)");
    CHECK(vkf_hftok_encode(t, NULL, 0, false, &ids, &n) == VKF_OK && n == 0 && ids == NULL, "encode(NULL, 0)");
    CHECK(vkf_hftok_decode(t, NULL, 1, false, &s) == VKF_ERROR_INVALID_ARGUMENT && s == NULL, "decode(NULL ids)");
    CHECK(vkf_hftok_decode(t, NULL, 0, false, &s) == VKF_OK && s && s[0] == '\0', "decode of nothing");
    free(s);
    CHECK(vkf_hftok_token(t, -1) == NULL && vkf_hftok_token(t, 1 << 30) == NULL, "token(out of range)");
    CHECK(vkf_hftok_token_id(t, "no such token, surely") == -1 && vkf_hftok_token_id(NULL, "a") == -1, "token_id");
    CHECK(vkf_hftok_vocab_size(NULL) == 0 && !vkf_hftok_is_special(NULL, 0) && !vkf_hftok_is_special(t, -5),
          "NULL lookups");
    int32_t sot = vkf_hftok_token_id(t, "<|startoftranscript|>");
    CHECK(sot >= 0 && vkf_hftok_is_special(t, sot), "<|startoftranscript|> is special");
    /* ill-formed UTF-8 reads as U+FFFD, one per maximal subpart */
    int32_t *a = NULL, *b = NULL;
    uint32_t na = 0, nb = 0;
    CHECK(vkf_hftok_encode(t, "x\xff\xe2\x82y\xc3", 6, false, &a, &na) == VKF_OK, "ill-formed UTF-8");
    CHECK(vkf_hftok_encode(t, "x\xef\xbf\xbd\xef\xbf\xbdy\xef\xbf\xbd", 11, false, &b, &nb) == VKF_OK, "U+FFFD");
    CHECK(same_ids(a, na, b, nb), "ill-formed UTF-8 encodes as U+FFFD per maximal subpart");
    free(a), free(b);
    /* a NUL byte inside the text, and through decode_n */
    CHECK(vkf_hftok_encode(t, "a\0b", 3, false, &a, &na) == VKF_OK && na >= 2, "NUL in text");
    size_t len = 0;
    CHECK(vkf_hftok_decode_n(t, a, na, false, &s, &len) == VKF_OK && len == 3 && memcmp(s, "a\0b", 3) == 0,
          "decode_n keeps the NUL");
    free(s), free(a);
    /* ids past the vocabulary are skipped, as tokenizers does */
    int32_t odd[] = {-1, (int32_t)vkf_hftok_vocab_size(t), 1 << 30};
    CHECK(vkf_hftok_decode(t, odd, 3, false, &s) == VKF_OK && s[0] == '\0', "unknown ids skipped");
    free(s);
    /* 8 threads on one tokenizer */
    char *tp = path_join(dir, "texts.json");
    json_t *texts = load_json(tp);
    free(tp);
    size_t nt = json_array_size(texts);
    thread_job job = {t, texts, 0, calloc(nt, sizeof(int32_t *)), calloc(nt, sizeof(uint32_t))};
    for (size_t i = 0; i < nt; i++) {
        json_t *x = json_array_get(texts, i);
        vkf_hftok_encode(t, json_string_value(x), json_string_length(x), true, &job.expect[i], &job.expect_n[i]);
    }
    pthread_t th[8];
    thread_job jobs[8];
    for (int i = 0; i < 8; i++) {
        jobs[i] = job;
        pthread_create(&th[i], NULL, thread_main, &jobs[i]);
    }
    int mism = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        mism += jobs[i].mismatches;
    }
    CHECK(mism == 0, "%d encodes on 8 threads differ from the single-threaded ones", mism);
    for (size_t i = 0; i < nt; i++) free(job.expect[i]);
    free(job.expect), free(job.expect_n);
    json_decref(texts);
    vkf_hftok_free(t);
    vkf_hftok_free(NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_hftok cases|bad|long|api|bpe DIR\n");
        return 2;
    }
    int rc = 2;
    if (strcmp(argv[1], "cases") == 0) rc = run_cases(argv[2]);
    else if (strcmp(argv[1], "bad") == 0) rc = run_bad(argv[2]);
    else if (strcmp(argv[1], "long") == 0) rc = run_long(argv[2]);
    else if (strcmp(argv[1], "api") == 0) rc = run_api(argv[2]);
    else if (strcmp(argv[1], "bpe") == 0) rc = run_bpe(argv[2]);
    else fprintf(stderr, "usage: test_hftok cases|bad|long|api|bpe DIR\n");
    if (rc) return rc;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

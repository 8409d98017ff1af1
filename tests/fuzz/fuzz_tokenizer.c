/* libFuzzer target: every input is a tokenizer file.
 *
 *  - An input that starts with '{' (after blanks) is a Hugging Face tokenizer.json:
 *    vkf_hftok_load_bytes, then, when it loads, a few texts (fixed ones and the
 *    input's own first bytes) encoded with and without special tokens, the ids
 *    decoded both ways, and ids drawn from the input decoded.
 *  - An input that starts with "BPEB\n" or "BPEW\n" is a byte-level BPE folder of
 *    BART or Whisper (tokenizer.h's vkf_bpe_open): files separated by 0x1e, each
 *    "NAME\n" then its bytes, NAME one of vocab.json, merges.txt,
 *    tokenizer_config.json, special_tokens_map.json, added_tokens.json,
 *    tokenizer.json (others skipped), written into a temporary folder; when it
 *    opens, the texts encoded with and without special tokens, decoded both ways,
 *    and ids from the input decoded.
 *  - Anything else is a SentencePiece model (.spm / .model): vkf_spm_load_bytes
 *    (the protobuf walk and charsmap check of src/tokenizers/spm.cc, then
 *    libsentencepiece itself), then the same texts encoded into pieces, the pieces
 *    decoded, and their ids looked up.
 *
 * An error is a fine answer; a crash, a leak, a sanitizer report, a message that
 * is empty or more than one line, or a broken invariant is not: without special
 * tokens every id is a token of the tokenizer, below vkf_hftok_vocab_size; every
 * decode is UTF-8. Built and run by tools/fuzz.sh (clang -fsanitize=fuzzer,
 * address,undefined; libsentencepiece, Oniguruma and utf8proc are Debian's, not
 * instrumented). */
#include "tokenizers/tokenizer.h"
#include "tokenizers/tokenizer_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define fuzz_fail(...)                                                                  \
    do {                                                                                \
        fprintf(stderr, "fuzz_tokenizer: %s:%d: ", __FILE__, __LINE__);                 \
        fprintf(stderr, __VA_ARGS__);                                                   \
        fputc('\n', stderr);                                                            \
        abort();                                                                        \
    } while (0)

static const char *const texts[] = {
    "Hello world, this is a test.",
    "  leading and  double  spaces\t\n",
    "Der B\xc3\xa4r l\xc3\xa4uft \xc3\xbc" "ber die Stra\xc3\x9f" "e.",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xef\xbd\x81\xef\xbd\x82 \xef\xac\x81 \xe2\x91\xa0 e\xcc\x81",
    "<s> </s> <unk> <mask> <|en|> <0x41> \xe2\x96\x81 x",
    "1234 56.78 a-b_c!?",
    "\xf0\x9f\x98\x80\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb \xff\xfe bad bytes",
    "",
};

static void check_message(const char *what, const char *msg)
{
    if (!msg || !msg[0]) fuzz_fail("%s failed with an empty message", what);
    if (strchr(msg, '\n') || strchr(msg, '\r')) fuzz_fail("%s: the message is more than one line: %s", what, msg);
}

static bool utf8_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!k || n - i < k) return false;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xc0) != 0x80) return false;
        if ((c == 0xe0 && (unsigned char)s[i + 1] < 0xa0) || (c == 0xed && (unsigned char)s[i + 1] > 0x9f) ||
            (c == 0xf0 && (unsigned char)s[i + 1] < 0x90) || (c == 0xf4 && (unsigned char)s[i + 1] > 0x8f))
            return false;
        i += k;
    }
    return true;
}

static void decode_check(const vkf_hftok *t, const int32_t *ids, uint32_t n)
{
    for (int skip = 0; skip < 2; skip++) {
        char *out = NULL;
        size_t len = 0;
        vkf_status st = vkf_hftok_decode_n(t, ids, n, skip, &out, &len);
        if (st != VKF_OK) {
            check_message("vkf_hftok_decode", vkf_last_error());
            if (out) fuzz_fail("vkf_hftok_decode failed but set out_text");
            continue;
        }
        if (!out || out[len] != '\0') fuzz_fail("vkf_hftok_decode: no NUL-terminated text");
        if (!utf8_ok(out, len)) fuzz_fail("vkf_hftok_decode gave ill-formed UTF-8");
        free(out);
    }
}

static void encode_check(const vkf_hftok *t, const char *text, size_t len)
{
    uint32_t size = vkf_hftok_vocab_size(t);
    for (int special = 0; special < 2; special++) {
        int32_t *ids = NULL;
        uint32_t n = 0;
        vkf_status st = vkf_hftok_encode(t, text, len, special, &ids, &n);
        if (st != VKF_OK) {
            check_message("vkf_hftok_encode", vkf_last_error());
            if (ids || n) fuzz_fail("vkf_hftok_encode failed but set its outputs");
            continue;
        }
        if ((n == 0) != (ids == NULL)) fuzz_fail("vkf_hftok_encode: %u ids at %p", n, (void *)ids);
        for (uint32_t i = 0; !special && i < n; i++)
            if (ids[i] < 0 || (uint32_t)ids[i] >= size || !vkf_hftok_token(t, ids[i]))
                fuzz_fail("vkf_hftok_encode gave id %d, which is no token (vocab size %u)", ids[i], size);
        decode_check(t, ids, n);
        free(ids);
    }
}

static void fuzz_json(const uint8_t *data, size_t size)
{
    vkf_hftok *t = NULL;
    vkf_status st = vkf_hftok_load_bytes((const char *)data, size, &t);
    if (st != VKF_OK) {
        check_message("vkf_hftok_load_bytes", vkf_last_error());
        if (t) fuzz_fail("vkf_hftok_load_bytes failed but set *out");
        return;
    }
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) encode_check(t, texts[i], strlen(texts[i]));
    encode_check(t, (const char *)data, size < 256 ? size : 256);
    /* ids from the input's last bytes, some past the vocabulary */
    int32_t ids[64];
    uint32_t n = 0, vs = vkf_hftok_vocab_size(t) + 3;
    for (size_t i = size; i >= 2 && n < 64; i -= 2) ids[n++] = (int32_t)(((uint32_t)data[i - 1] << 8 | data[i - 2]) % vs);
    decode_check(t, ids, n);
    for (uint32_t i = 0; i < n; i++) {
        const char *tok = vkf_hftok_token(t, ids[i]);
        if (vkf_hftok_is_special(t, ids[i]) && !tok) fuzz_fail("id %d is special but no token", ids[i]);
        if (tok) (void)vkf_hftok_token_id(t, tok);
    }
    vkf_hftok_free(t);
}

/* ---- byte-level BPE folders */

static const char *const bpe_files[] = {"vocab.json", "merges.txt", "tokenizer_config.json", "special_tokens_map.json",
                                        "added_tokens.json", "tokenizer.json"};

static void bpe_decode_check(const vkf_bpe_text *t, const int32_t *ids, uint32_t n)
{
    for (int skip = 0; skip < 2; skip++) {
        char *out = NULL;
        size_t len = 0;
        vkf_status st = vkf_bpe_decode(t, ids, n, skip, &out, &len);
        if (st != VKF_OK) {
            check_message("vkf_bpe_decode", vkf_last_error());
            if (out) fuzz_fail("vkf_bpe_decode failed but set out_text");
            continue;
        }
        if (!out || out[len] != '\0') fuzz_fail("vkf_bpe_decode: no NUL-terminated text");
        if (!utf8_ok(out, len)) fuzz_fail("vkf_bpe_decode gave ill-formed UTF-8");
        free(out);
    }
}

static void fuzz_bpe(const uint8_t *data, size_t size)
{
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/vkf-fuzz-bpe-XXXXXX");
        if (!mkdtemp(dir)) fuzz_fail("mkdtemp failed");
    }
    char path[128];
    for (size_t k = 0; k < sizeof bpe_files / sizeof *bpe_files; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, bpe_files[k]);
        unlink(path);
    }
    vkf_bpe_kind kind = data[3] == 'W' ? VKF_BPE_WHISPER : VKF_BPE_BART;
    for (size_t i = 5; i < size;) {
        const uint8_t *end = memchr(data + i, 0x1e, size - i);
        size_t n = end ? (size_t)(end - (data + i)) : size - i;
        const uint8_t *nl = memchr(data + i, '\n', n);
        if (nl) {
            size_t name_len = (size_t)(nl - (data + i));
            for (size_t k = 0; k < sizeof bpe_files / sizeof *bpe_files; k++) {
                if (strlen(bpe_files[k]) != name_len || memcmp(bpe_files[k], data + i, name_len) != 0) continue;
                snprintf(path, sizeof path, "%s/%s", dir, bpe_files[k]);
                FILE *f = fopen(path, "wb");
                if (!f) fuzz_fail("cannot write %s", path);
                size_t body = n - name_len - 1;
                if (body && fwrite(nl + 1, 1, body, f) != body) fuzz_fail("cannot write %s", path);
                fclose(f);
            }
        }
        i += n + 1;
    }
    vkf_bpe_text *t = NULL;
    vkf_status st = vkf_bpe_open(dir, kind, &t);
    if (st != VKF_OK) {
        check_message("vkf_bpe_open", vkf_last_error());
        if (t) fuzz_fail("vkf_bpe_open failed but set *out");
        return;
    }
    uint32_t vs = vkf_bpe_size(t);
    for (size_t i = 0; i < sizeof texts / sizeof *texts + 1; i++) {
        const char *text = i < sizeof texts / sizeof *texts ? texts[i] : (const char *)data;
        size_t len = i < sizeof texts / sizeof *texts ? strlen(texts[i]) : (size < 256 ? size : 256);
        for (int special = 0; special < 2; special++) {
            int32_t *ids = NULL;
            uint32_t n = 0;
            st = vkf_bpe_encode(t, text, len, special, &ids, &n);
            if (st != VKF_OK) {
                check_message("vkf_bpe_encode", vkf_last_error());
                if (ids || n) fuzz_fail("vkf_bpe_encode failed but set its outputs");
                continue;
            }
            for (uint32_t k = 0; k < n; k++)
                if (ids[k] < 0 || (uint32_t)ids[k] >= vs) fuzz_fail("vkf_bpe_encode gave id %d (size %u)", ids[k], vs);
            bpe_decode_check(t, ids, n);
            free(ids);
        }
    }
    int32_t ids[64];
    uint32_t n = 0;
    for (size_t i = size; i >= 2 && n < 64; i -= 2) ids[n++] = (int32_t)(((uint32_t)data[i - 1] << 8 | data[i - 2]) % (vs + 3));
    if (t->sot >= 0 && n > 2) ids[1] = t->sot;
    if (t->sot_prev >= 0 && n) ids[0] = t->sot_prev;
    bpe_decode_check(t, ids, n);
    vkf_bpe_free(t);
}

/* ---- SentencePiece */

typedef struct pieces {
    char *v[512];
    size_t n;
} pieces;

static int collect(const char *piece, size_t len, void *user)
{
    pieces *p = user;
    if (piece[len] != '\0') fuzz_fail("vkf_spm_encode: a piece of %zu bytes is not NUL-terminated", len);
    if (p->n == 512) return 1;
    p->v[p->n] = strdup(piece);
    if (!p->v[p->n]) return 1;
    p->n++;
    return 0;
}

static void fuzz_spm(const uint8_t *data, size_t size)
{
    char err[256];
    err[0] = '\0';
    vkf_spm *s = vkf_spm_load_bytes(data, size, "fuzz.spm", err, sizeof err);
    if (!s) {
        check_message("vkf_spm_load_bytes", err);
        return;
    }
    uint32_t n = vkf_spm_size(s);
    if (n == 0) fuzz_fail("a loaded model has no pieces");
    for (uint32_t i = 0; i < n && i < 1000; i++) {
        int kind = -1;
        const char *p = vkf_spm_piece(s, i, &kind);
        if (!p || kind < VKF_SPM_NORMAL || kind > VKF_SPM_UNUSED) fuzz_fail("piece %u: %p kind %d", i, (void *)p, kind);
        int32_t id = vkf_spm_piece_id(s, p, strlen(p));
        if (id < 0 || (uint32_t)id >= n) fuzz_fail("piece %u \"%s\" has id %d", i, p, id);
    }
    for (size_t i = 0; i < sizeof texts / sizeof *texts + 1; i++) {
        const char *text = i < sizeof texts / sizeof *texts ? texts[i] : (const char *)data;
        size_t len = i < sizeof texts / sizeof *texts ? strlen(texts[i]) : (size < 256 ? size : 256);
        pieces p = {0};
        int rc = vkf_spm_encode_n(s, text, len, collect, &p, err, sizeof err);
        if (rc < 0) check_message("vkf_spm_encode", err);
        char *out = NULL;
        if (rc == 0) {
            if (vkf_spm_decode(s, (const char *const *)p.v, p.n, &out, err, sizeof err) != 0)
                check_message("vkf_spm_decode", err);
            free(out);
        }
        for (size_t k = 0; k < p.n; k++) free(p.v[k]);
    }
    vkf_spm_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t i = 0;
    while (i < size && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r')) i++;
    if (i < size && data[i] == '{') fuzz_json(data, size);
    else if (size >= 5 && memcmp(data, "BPE", 3) == 0 && (data[3] == 'B' || data[3] == 'W') && data[4] == '\n')
        fuzz_bpe(data, size);
    else fuzz_spm(data, size);
    return 0;
}

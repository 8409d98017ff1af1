/* What every stage of the tokenizer.json pipeline works with (pipeline.h):
 * growable arrays and byte buffers, UTF-8 (decoding, encoding, the lossy read of
 * ill-formed input), quoting for messages, the string and integer hash maps, the
 * byte trie of added tokens and Unigram pieces, Unicode character classes as
 * tokenizers defines them, and GPT-2's byte <-> character map of ByteLevel. */
#include "tokenizers/pipeline.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

void *tj_xrealloc_array(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return NULL;
    return realloc(p, n && size ? n * size : 1);
}

/* Grows *v (of *cap elements of size) to hold at least need; false when out of memory. */
bool tj_grow(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 8;
    while (c < need) {
        if (c > SIZE_MAX / 2) return false;
        c *= 2;
    }
    void *p = tj_xrealloc_array(*v, c, size);
    if (!p) return false;
    *v = p;
    *cap = c;
    return true;
}

char *tj_dup_bytes(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

bool tj_buf_put(buf *o, const void *s, size_t n)
{
    if (!tj_grow((void **)&o->b, &o->cap, o->n + n + 1, 1)) return false;
    if (n) memcpy(o->b + o->n, s, n);
    o->n += n;
    o->b[o->n] = '\0';
    return true;
}

/* ----------------------------------------------------------------- UTF-8 */

/* The code point at s[*i] (valid UTF-8 known); advances *i. */
uint32_t tj_u8_next(const char *s, size_t *i)
{
    const unsigned char *p = (const unsigned char *)s + *i;
    size_t n = tj_u8_len(p[0]);
    uint32_t cp = n == 1 ? p[0] : n == 2 ? p[0] & 0x1fu : n == 3 ? p[0] & 0x0fu : p[0] & 0x07u;
    for (size_t k = 1; k < n; k++) cp = cp << 6 | (p[k] & 0x3fu);
    *i += n;
    return cp;
}

size_t tj_u8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xc0 | cp >> 6); o[1] = (unsigned char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | cp >> 12);
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Length of the well-formed UTF-8 character at s[0..n), or 0 when s starts an
 * ill-formed sequence; then *bad gets the length of its maximal subpart (the
 * bytes one U+FFFD stands for, Unicode 15 section 3.9, as Rust's from_utf8_lossy). */
static size_t u8_check(const unsigned char *s, size_t n, size_t *bad)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) need = 2;
    else if (c == 0xe0) need = 3, lo = 0xa0;
    else if (c >= 0xe1 && c <= 0xec) need = 3;
    else if (c == 0xed) need = 3, hi = 0x9f;
    else if (c >= 0xee && c <= 0xef) need = 3;
    else if (c == 0xf0) need = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) need = 4;
    else if (c == 0xf4) need = 4, hi = 0x8f;
    else { *bad = 1; return 0; }
    size_t k = 1;
    for (; k < need && k < n; k++) {
        unsigned char b = s[k];
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) break;
    }
    if (k == need) return need;
    *bad = k;
    return 0;
}

/* Appends s[0..n) to o with each ill-formed subpart replaced by U+FFFD. */
bool tj_u8_lossy(buf *o, const char *s, size_t n)
{
    size_t i = 0, run = 0;
    while (i < n) {
        size_t bad = 0, k = u8_check((const unsigned char *)s + i, n - i, &bad);
        if (k) { i += k; continue; }
        if (!tj_buf_put(o, s + run, i - run) || !tj_buf_put(o, "\xef\xbf\xbd", 3)) return false;
        i += bad;
        run = i;
    }
    return tj_buf_put(o, s + run, n - run);
}

bool tj_u8_valid(const char *s, size_t n)
{
    for (size_t i = 0, bad, k; i < n; i += k)
        if (!(k = u8_check((const unsigned char *)s + i, n - i, &bad))) return false;
    return true;
}

size_t tj_u8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* A value from the file for a message: quoted, control characters escaped, at
 * most about 60 bytes (cut at a character). */
const char *tj_quote(char *out, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    if (cap < 16) return "";
    out[o++] = '"';
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : tj_u8_len(c);
        if (i + k > n) k = n - i;
        if (o + 12 >= cap || o > 60) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c == '"' || c == '\\') out[o++] = '\\', out[o++] = (char)c;
        else if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        else memcpy(out + o, s + i, k), o += k;
        i += k;
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

/* ----------------------------------------------------------------- hash maps */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Seeded per process (from the address of a static: ASLR), so that a file cannot
 * be made of keys that collide. */
static uint64_t hash_seed(void)
{
    static const char anchor;
    return mix64((uint64_t)(uintptr_t)&anchor ^ 0x9e3779b97f4a7c15ull);
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = hash_seed() ^ (n * 0x9e3779b97f4a7c15ull);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = mix64(h ^ w) + i;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, n - i);
    return mix64(h ^ w ^ ((uint64_t)(n - i) << 56));
}

static smap_slot *smap_find_slot(const smap *m, const char *key, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        smap_slot *s = &m->slots[i];
        if (!s->key || (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)) return s;
    }
}

static bool smap_reserve(smap *m, size_t want)
{
    if (m->cap && (m->count + want) * 2 <= m->cap) return true;
    size_t cap = m->cap ? m->cap : 16;
    while ((m->count + want) * 2 > cap) {
        if (cap > SIZE_MAX / 2 / sizeof(smap_slot)) return false;
        cap *= 2;
    }
    smap_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return false;
    smap old = *m;
    m->slots = slots;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].key) *smap_find_slot(m, old.slots[i].key, old.slots[i].len, old.slots[i].hash) = old.slots[i];
    free(old.slots);
    return true;
}

/* Sets key -> value (a later set of the same key replaces it, as a Rust HashMap
 * insert). *old gets the previous value or -1. false when out of memory. */
bool tj_smap_set(smap *m, const char *key, size_t len, int32_t value, int32_t *old)
{
    if (!smap_reserve(m, 1)) return false;
    uint64_t h = hash_bytes(key, len);
    smap_slot *s = smap_find_slot(m, key, len, h);
    if (old) *old = s->key ? s->value : -1;
    if (!s->key) {
        s->key = key;
        s->len = (uint32_t)len;
        s->hash = h;
        m->count++;
    }
    s->value = value;
    return true;
}

int32_t tj_smap_get(const smap *m, const char *key, size_t len)
{
    if (!m->cap) return -1;
    smap_slot *s = smap_find_slot(m, key, len, hash_bytes(key, len));
    return s->key ? s->value : -1;
}

static umap_slot *umap_find_slot(const umap *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)mix64(key ^ hash_seed()) & mask;; i = (i + 1) & mask)
        if (m->slots[i].key == key || m->slots[i].key == UINT64_MAX) return &m->slots[i];
}

bool tj_umap_set(umap *m, uint64_t key, uint64_t value)
{
    if (!m->cap || (m->count + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        if (cap > SIZE_MAX / sizeof(umap_slot)) return false;
        umap_slot *slots = malloc(cap * sizeof *slots);
        if (!slots) return false;
        for (size_t i = 0; i < cap; i++) slots[i].key = UINT64_MAX;
        umap old = *m;
        m->slots = slots;
        m->cap = cap;
        for (size_t i = 0; i < old.cap; i++)
            if (old.slots[i].key != UINT64_MAX) *umap_find_slot(m, old.slots[i].key) = old.slots[i];
        free(old.slots);
    }
    umap_slot *s = umap_find_slot(m, key);
    if (s->key == UINT64_MAX) m->count++;
    s->key = key;
    s->value = value;
    return true;
}

bool tj_umap_get(const umap *m, uint64_t key, uint64_t *value)
{
    if (!m->cap) return false;
    umap_slot *s = umap_find_slot(m, key);
    if (s->key == UINT64_MAX) return false;
    *value = s->value;
    return true;
}

bool tj_trie_init(trie *t)
{
    memset(t, 0, sizeof *t);
    if (!tj_grow((void **)&t->value, &t->cap, 1, sizeof *t->value)) return false;
    t->value[0] = -1;
    t->nodes = 1;
    return true;
}

void tj_trie_free(trie *t)
{
    free(t->next.slots);
    free(t->value);
    memset(t, 0, sizeof *t);
}

/* Adds key -> value; when keep_first and the key is there already, keeps the
 * old value. */
bool tj_trie_add(trie *t, const char *key, size_t len, int32_t value, bool keep_first)
{
    uint64_t node = 0;
    if (len) t->first[(unsigned char)key[0] >> 3] |= (uint8_t)(1u << ((unsigned char)key[0] & 7));
    for (size_t i = 0; i < len; i++) {
        uint64_t child;
        uint64_t k = node << 8 | (unsigned char)key[i];
        if (!tj_umap_get(&t->next, k, &child)) {
            if (!tj_grow((void **)&t->value, &t->cap, t->nodes + 1, sizeof *t->value)) return false;
            child = t->nodes++;
            t->value[child] = -1;
            if (!tj_umap_set(&t->next, k, child)) return false;
        }
        node = child;
    }
    if (!keep_first || t->value[node] < 0) t->value[node] = value;
    return true;
}

bool tj_trie_step(const trie *t, uint64_t *node, unsigned char c)
{
    return tj_umap_get(&t->next, *node << 8 | c, node);
}

/* ================================================================== Unicode */

/* char::is_whitespace: the White_Space property. */
bool tj_is_ws(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
           c == 0x3000;
}

/* char::is_numeric: general category Nd, Nl or No. */
bool tj_is_numeric(uint32_t c)
{
    if (c < 0x80) return c >= '0' && c <= '9';
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

/* tokenizers' is_punc: ASCII punctuation (as char::is_ascii_punctuation, which
 * counts $+<=>^`|~ too) or a general category P*. */
bool tj_is_punc(uint32_t c)
{
    if (c < 0x80) return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) ||
                         (c >= 0x7b && c <= 0x7e);
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

/* char::to_lowercase: the simple mapping, except U+0130, the one character whose
 * unconditional lower case is two (i + U+0307). Returns the count written. */
size_t tj_to_lower(uint32_t c, uint32_t out[2])
{
    if (c == 0x130) {
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    out[0] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
    return 1;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
 * others for U+0100 onwards in order; and back (-1: no byte). */
static uint32_t byte_chars[256];
static int16_t char_bytes[0x144];
static pthread_once_t byte_chars_once = PTHREAD_ONCE_INIT;

static void byte_chars_setup(void)
{
    uint32_t k = 0;
    for (unsigned i = 0; i < 0x144; i++) char_bytes[i] = -1;
    for (unsigned b = 0; b < 256; b++) {
        bool self = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        byte_chars[b] = self ? b : 0x100 + k++;
        char_bytes[byte_chars[b]] = (int16_t)b;
    }
}

uint32_t tj_byte_char(unsigned char b)
{
    pthread_once(&byte_chars_once, byte_chars_setup);
    return byte_chars[b];
}

int tj_char_byte(uint32_t c)
{
    pthread_once(&byte_chars_once, byte_chars_setup);
    return c < 0x144 ? char_bytes[c] : -1;
}

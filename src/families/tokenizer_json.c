/* Hugging Face tokenizer.json: the reader (every component checked at load, each
 * refusal one line naming its JSON path) and the pipeline that runs it as
 * tokenizers 0.23 does (tokenizer_json.h says what is promised).
 *
 * How tokenizers encodes one text, and so how this file does:
 *   1. added tokens that are not `normalized` are found in the raw text (longest
 *      leftmost match, then single_word / lstrip / rstrip); the text between
 *      them forms splits;
 *   2. each split is normalized, and the `normalized` added tokens are found in
 *      the result;
 *   3. the pre-tokenizer cuts the remaining splits further (empty ones vanish);
 *   4. the model (BPE or Unigram) turns each split into ids;
 *   5. with add_special, the post-processor wraps the ids (template, RoBERTa,
 *      BERT).
 * A split is a "normalized string": its bytes and, per byte, the offset in the
 * input that it aligns to, kept the way tokenizers' NormalizedString keeps its
 * alignments. The one thing that reads them is Metaspace's prepend_scheme
 * "first", which prepends only to a split whose first byte aligns to offset 0.
 *
 * Unicode: Oniguruma (the regex engine tokenizers uses) runs every regex,
 * including the built-in ones of Whitespace and ByteLevel; utf8proc gives
 * normalization forms, grapheme clusters, general categories and lower case.
 * Decoding goes token strings -> decoder chain -> one string, as tokenizers'
 * decode_chain. */
#include "families/tokenizer_json.h"

#include "families/charsmap.h"
#include "runtime/runtime.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <oniguruma.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

/* ====================================================================== basics */

#define OOM() vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "tokenizer.json: out of host memory")

static void *xrealloc_array(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) return NULL;
    return realloc(p, n && size ? n * size : 1);
}

/* Grows *v (of *cap elements of size) to hold at least need; false when out of memory. */
static bool grow(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 8;
    while (c < need) {
        if (c > SIZE_MAX / 2) return false;
        c *= 2;
    }
    void *p = xrealloc_array(*v, c, size);
    if (!p) return false;
    *v = p;
    *cap = c;
    return true;
}

static char *dup_bytes(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* A byte buffer. */
typedef struct buf {
    char *b;
    size_t n, cap;
} buf;

static bool buf_put(buf *o, const void *s, size_t n)
{
    if (!grow((void **)&o->b, &o->cap, o->n + n + 1, 1)) return false;
    if (n) memcpy(o->b + o->n, s, n);
    o->n += n;
    o->b[o->n] = '\0';
    return true;
}

/* ----------------------------------------------------------------- UTF-8 */

/* Length of the UTF-8 character that starts with byte c (input known valid). */
static size_t u8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4; }

/* The code point at s[*i] (valid UTF-8 known); advances *i. */
static uint32_t u8_next(const char *s, size_t *i)
{
    const unsigned char *p = (const unsigned char *)s + *i;
    size_t n = u8_len(p[0]);
    uint32_t cp = n == 1 ? p[0] : n == 2 ? p[0] & 0x1fu : n == 3 ? p[0] & 0x0fu : p[0] & 0x07u;
    for (size_t k = 1; k < n; k++) cp = cp << 6 | (p[k] & 0x3fu);
    *i += n;
    return cp;
}

static size_t u8_encode(uint32_t cp, char *out)
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
static bool u8_lossy(buf *o, const char *s, size_t n)
{
    size_t i = 0, run = 0;
    while (i < n) {
        size_t bad = 0, k = u8_check((const unsigned char *)s + i, n - i, &bad);
        if (k) { i += k; continue; }
        if (!buf_put(o, s + run, i - run) || !buf_put(o, "\xef\xbf\xbd", 3)) return false;
        i += bad;
        run = i;
    }
    return buf_put(o, s + run, n - run);
}

static bool u8_valid(const char *s, size_t n)
{
    for (size_t i = 0, bad, k; i < n; i += k)
        if (!(k = u8_check((const unsigned char *)s + i, n - i, &bad))) return false;
    return true;
}

static size_t u8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* A value from the file for a message: quoted, control characters escaped, at
 * most about 60 bytes (cut at a character). */
static const char *q(char *out, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    if (cap < 16) return "";
    out[o++] = '"';
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : u8_len(c);
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

/* String -> int32. Keys are borrowed (they live in the tokenizer's own strings). */
typedef struct smap_slot {
    uint64_t hash;
    const char *key;    /* NULL: empty */
    uint32_t len;
    int32_t value;
} smap_slot;
typedef struct smap {
    smap_slot *slots;   /* owned */
    size_t cap, count;  /* cap: a power of two */
} smap;

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
static bool smap_set(smap *m, const char *key, size_t len, int32_t value, int32_t *old)
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

static int32_t smap_get(const smap *m, const char *key, size_t len)
{
    if (!m->cap) return -1;
    smap_slot *s = smap_find_slot(m, key, len, hash_bytes(key, len));
    return s->key ? s->value : -1;
}

/* uint64 -> uint64 (BPE merges: (left id, right id) -> (rank, new id); tries:
 * (node, byte) -> child). Key UINT64_MAX is never used. */
typedef struct umap_slot {
    uint64_t key;       /* UINT64_MAX: empty */
    uint64_t value;
} umap_slot;
typedef struct umap {
    umap_slot *slots;   /* owned */
    size_t cap, count;
} umap;

static umap_slot *umap_find_slot(const umap *m, uint64_t key)
{
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)mix64(key ^ hash_seed()) & mask;; i = (i + 1) & mask)
        if (m->slots[i].key == key || m->slots[i].key == UINT64_MAX) return &m->slots[i];
}

static bool umap_set(umap *m, uint64_t key, uint64_t value)
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

static bool umap_get(const umap *m, uint64_t key, uint64_t *value)
{
    if (!m->cap) return false;
    umap_slot *s = umap_find_slot(m, key);
    if (s->key == UINT64_MAX) return false;
    *value = s->value;
    return true;
}

/* A byte trie over strings, each (node, byte) -> child in a umap; node 0 the root. */
typedef struct trie {
    umap next;          /* (node << 8 | byte) -> child node */
    int32_t *value;     /* owned, per node: what ends there (an id or index), -1 none */
    size_t nodes, cap;
    uint8_t first[32];  /* bit set of the bytes that leave the root */
} trie;

static bool trie_init(trie *t)
{
    memset(t, 0, sizeof *t);
    if (!grow((void **)&t->value, &t->cap, 1, sizeof *t->value)) return false;
    t->value[0] = -1;
    t->nodes = 1;
    return true;
}

static void trie_free(trie *t)
{
    free(t->next.slots);
    free(t->value);
    memset(t, 0, sizeof *t);
}

/* Adds key -> value; when keep_first and the key is there already, keeps the
 * old value. */
static bool trie_add(trie *t, const char *key, size_t len, int32_t value, bool keep_first)
{
    uint64_t node = 0;
    if (len) t->first[(unsigned char)key[0] >> 3] |= (uint8_t)(1u << ((unsigned char)key[0] & 7));
    for (size_t i = 0; i < len; i++) {
        uint64_t child;
        uint64_t k = node << 8 | (unsigned char)key[i];
        if (!umap_get(&t->next, k, &child)) {
            if (!grow((void **)&t->value, &t->cap, t->nodes + 1, sizeof *t->value)) return false;
            child = t->nodes++;
            t->value[child] = -1;
            if (!umap_set(&t->next, k, child)) return false;
        }
        node = child;
    }
    if (!keep_first || t->value[node] < 0) t->value[node] = value;
    return true;
}

static bool trie_step(const trie *t, uint64_t *node, unsigned char c)
{
    return umap_get(&t->next, *node << 8 | c, node);
}

/* ================================================================== Unicode */

/* char::is_whitespace: the White_Space property. */
static bool is_ws(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
           c == 0x3000;
}

/* char::is_numeric: general category Nd, Nl or No. */
static bool is_numeric(uint32_t c)
{
    if (c < 0x80) return c >= '0' && c <= '9';
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

/* tokenizers' is_punc: ASCII punctuation (as char::is_ascii_punctuation, which
 * counts $+<=>^`|~ too) or a general category P*. */
static bool is_punc(uint32_t c)
{
    if (c < 0x80) return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) ||
                         (c >= 0x7b && c <= 0x7e);
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

/* char::to_lowercase: the simple mapping, except U+0130, the one character whose
 * unconditional lower case is two (i + U+0307). Returns the count written. */
static size_t to_lower(uint32_t c, uint32_t out[2])
{
    if (c == 0x130) {
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    out[0] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
    return 1;
}

/* ----------------------------------------------------------------- regexes */

static pthread_once_t onig_once = PTHREAD_ONCE_INIT;
static int onig_ready;
/* Oniguruma's match (backtracking) and search limits for every regex: a regex
 * from a file that backtracks past them fails the encode (VKF_ERROR_TOO_LARGE)
 * instead of running for hours. The match limit is Oniguruma's own default. */
#define RX_RETRY_LIMIT_IN_MATCH 10000000ul
#define RX_RETRY_LIMIT_IN_SEARCH 10000000ul
/* Oniguruma parses with recursion: groups and classes nested deeper than this are
 * refused before it sees them (its own limit is process-wide state, left alone). */
#define RX_MAX_NESTING 32

static void onig_setup(void)
{
    OnigEncoding enc[1] = {ONIG_ENCODING_UTF8};
    onig_ready = onig_initialize(enc, 1) == ONIG_NORMAL;
}

/* The deepest nesting of ( and [ in a pattern (escapes skipped). */
static int rx_nesting(const char *pat, size_t len)
{
    int depth = 0, deepest = 0;
    for (size_t i = 0; i < len; i++) {
        if (pat[i] == '\\') i++;
        else if (pat[i] == '(' || pat[i] == '[') deepest = ++depth > deepest ? depth : deepest;
        else if ((pat[i] == ')' || pat[i] == ']') && depth > 0) depth--;
    }
    return deepest;
}

typedef struct rx {
    regex_t *re;        /* owned */
} rx;

/* Compiles a regex (Ruby syntax, as tokenizers' onig::Regex::new); false with a
 * message in why. */
static bool rx_compile(rx *r, const char *pat, size_t len, char *why, size_t why_size)
{
    r->re = NULL;
    pthread_once(&onig_once, onig_setup);
    if (!onig_ready) {
        snprintf(why, why_size, "Oniguruma failed to initialize");
        return false;
    }
    if (rx_nesting(pat, len) > RX_MAX_NESTING) {
        snprintf(why, why_size, "groups or classes nest deeper than %d", RX_MAX_NESTING);
        return false;
    }
    OnigErrorInfo einfo;
    int rc = onig_new(&r->re, (const OnigUChar *)pat, (const OnigUChar *)pat + len, ONIG_OPTION_NONE,
                      ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY, &einfo);
    if (rc != ONIG_NORMAL) {
        OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, rc, &einfo);
        snprintf(why, why_size, "%s", (const char *)msg);
        r->re = NULL;
        return false;
    }
    return true;
}

static void rx_free(rx *r)
{
    if (r->re) onig_free(r->re);
    r->re = NULL;
}

/* ================================================================ matching */

/* One piece of a string: [start, end), and whether a pattern matched it. */
typedef struct piece {
    size_t start, end;
    bool match;
} piece;
typedef struct pieces {
    piece *v;
    size_t n, cap;
} pieces;

static bool pieces_add(pieces *p, size_t start, size_t end, bool match)
{
    if (!grow((void **)&p->v, &p->cap, p->n + 1, sizeof *p->v)) return false;
    p->v[p->n++] = (piece){start, end, match};
    return true;
}

/* A pattern of a Split pre-tokenizer or a Replace: a literal string or a regex. */
typedef struct pattern {
    bool is_regex;
    char *lit;          /* owned */
    size_t lit_len;
    rx re;
} pattern;

static void pattern_free(pattern *p)
{
    free(p->lit);
    rx_free(&p->re);
}

/* A regex match iterator with onig's FindMatches semantics (an empty match right
 * after the previous match is skipped by one character). */
typedef struct rx_iter {
    const pattern *p;
    const char *s;
    size_t len, last_end, last_match_end;
    bool have_last;
    OnigRegion *region;
    OnigMatchParam *mp;
} rx_iter;

/* Next match into [*start, *end); 1 found, 0 done, or a failing status (< 0 as -status). */
static int rx_next(rx_iter *it, size_t *start, size_t *end, vkf_status *err)
{
    const pattern *p = it->p;
    for (;;) {
        if (it->last_end > it->len) return 0;
        size_t st, en;
        if (p->is_regex) {
            const OnigUChar *s = (const OnigUChar *)it->s;
            int r = onig_search_with_param(p->re.re, s, s + it->len, s + it->last_end, s + it->len, it->region,
                                           ONIG_OPTION_NONE, it->mp);
            if (r == ONIG_MISMATCH) return 0;
            if (r < 0) {
                OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
                onig_error_code_to_str(msg, r);
                *err = vkf_fail(r == ONIGERR_RETRY_LIMIT_IN_MATCH_OVER || r == ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER
                                    ? VKF_ERROR_TOO_LARGE : VKF_ERROR_BAD_MODEL,
                                "tokenizer.json: a regex of the file failed on this text: %s", (const char *)msg);
                return -1;
            }
            st = (size_t)it->region->beg[0];
            en = (size_t)it->region->end[0];
        } else if (p->lit_len == 0) {
            st = en = it->last_end;
        } else {
            const char *f = it->len - it->last_end >= p->lit_len
                                ? memmem(it->s + it->last_end, it->len - it->last_end, p->lit, p->lit_len) : NULL;
            if (!f) return 0;
            st = (size_t)(f - it->s);
            en = st + p->lit_len;
        }
        if (en == st && it->have_last && it->last_match_end == en) {
            it->last_end += it->last_end < it->len ? u8_len((unsigned char)it->s[it->last_end]) : 1;
            continue;
        }
        it->last_end = en;
        it->last_match_end = en;
        it->have_last = true;
        *start = st;
        *end = en;
        return 1;
    }
}

static vkf_status rx_iter_init(rx_iter *it, const pattern *p, const char *s, size_t len)
{
    memset(it, 0, sizeof *it);
    it->p = p;
    it->s = s;
    it->len = len;
    if (p->is_regex) {
        it->region = onig_region_new();
        it->mp = onig_new_match_param();
        if (!it->region || !it->mp) {
            if (it->region) onig_region_free(it->region, 1);
            if (it->mp) onig_free_match_param(it->mp);
            return OOM();
        }
        onig_initialize_match_param(it->mp);
        onig_set_retry_limit_in_match_of_match_param(it->mp, RX_RETRY_LIMIT_IN_MATCH);
        onig_set_retry_limit_in_search_of_match_param(it->mp, RX_RETRY_LIMIT_IN_SEARCH);
    }
    return VKF_OK;
}

static void rx_iter_done(rx_iter *it)
{
    if (it->region) onig_region_free(it->region, 1);
    if (it->mp) onig_free_match_param(it->mp);
}

/* tokenizers' Pattern::find_matches for a regex or string: the pieces that
 * cover s, matches and the gaps between them. */
static vkf_status find_matches(const pattern *p, const char *s, size_t len, bool invert, pieces *out)
{
    out->n = 0;
    if (len == 0) return pieces_add(out, 0, 0, invert) ? VKF_OK : OOM();
    rx_iter it;
    VKF_TRY(rx_iter_init(&it, p, s, len));
    size_t prev = 0, st, en;
    vkf_status err = VKF_OK;
    int r;
    while ((r = rx_next(&it, &st, &en, &err)) == 1) {
        if (prev != st && !pieces_add(out, prev, st, invert)) goto oom;
        if (!pieces_add(out, st, en, !invert)) goto oom;
        prev = en;
    }
    rx_iter_done(&it);
    if (r < 0) return err;
    if (prev != len && !pieces_add(out, prev, len, invert)) return OOM();
    return VKF_OK;
oom:
    rx_iter_done(&it);
    return OOM();
}

/* The same for a character class (tokenizers' Fn(char) -> bool pattern): each
 * matching character is a match of its own. */
typedef bool (*char_class)(uint32_t c, const void *arg);

static vkf_status find_char_matches(char_class f, const void *arg, const char *s, size_t len, pieces *out)
{
    out->n = 0;
    if (len == 0) return pieces_add(out, 0, 0, false) ? VKF_OK : OOM();
    size_t last_offset = 0, last_seen = 0;
    for (size_t i = 0; i < len;) {
        size_t b = i;
        uint32_t c = u8_next(s, &i);
        last_seen = i;
        if (f(c, arg)) {
            if (last_offset < b && !pieces_add(out, last_offset, b, false)) return OOM();
            if (!pieces_add(out, b, i, true)) return OOM();
            last_offset = i;
        }
    }
    if (last_seen > last_offset && !pieces_add(out, last_offset, last_seen, false)) return OOM();
    return VKF_OK;
}

/* ===================================================== normalized strings */

/* A normalized string (tokenizers' NormalizedString): bytes, and per byte the
 * offset in the input its character aligns to (the start of its alignment);
 * shift: where the string's own original begins in the input. */
typedef struct nstr {
    char *s;            /* owned, NUL-terminated */
    uint32_t *al;       /* owned, len entries */
    size_t len, cap;
    uint32_t shift;
} nstr;

static void nstr_free(nstr *n)
{
    free(n->s);
    free(n->al);
    memset(n, 0, sizeof *n);
}

static bool nstr_reserve(nstr *n, size_t need)
{
    if (need + 1 <= n->cap) return true;
    size_t cap = n->cap, cap2 = n->cap;
    if (!grow((void **)&n->s, &cap, need + 1, 1)) return false;
    if (!grow((void **)&n->al, &cap2, need + 1, sizeof *n->al)) return false;
    n->cap = cap < cap2 ? cap : cap2;
    return true;
}

static bool nstr_put(nstr *n, const char *s, size_t len, uint32_t al)
{
    if (!nstr_reserve(n, n->len + len)) return false;
    memcpy(n->s + n->len, s, len);
    for (size_t i = 0; i < len; i++) n->al[n->len + i] = al;
    n->len += len;
    n->s[n->len] = '\0';
    return true;
}

static bool nstr_put_cp(nstr *n, uint32_t cp, uint32_t al)
{
    char b[4];
    return nstr_put(n, b, u8_encode(cp, b), al);
}

/* Bytes [a, b) with their alignments (b > a). */
static bool nstr_copy_range(nstr *out, const nstr *n, size_t a, size_t b)
{
    if (!nstr_reserve(out, out->len + (b - a))) return false;
    memcpy(out->s + out->len, n->s + a, b - a);
    memcpy(out->al + out->len, n->al + a, (b - a) * sizeof *n->al);
    out->len += b - a;
    out->s[out->len] = '\0';
    return true;
}

/* NormalizedString::slice: a new string of bytes [a, b), whose original starts
 * where its first byte aligns. */
static bool nstr_slice(nstr *out, const nstr *n, size_t a, size_t b)
{
    memset(out, 0, sizeof *out);
    out->shift = a < n->len ? n->al[a] : n->shift;
    if (!nstr_reserve(out, b - a)) return false;
    out->s[0] = '\0';
    return b == a || nstr_copy_range(out, n, a, b);
}

/* The alignment a character inserted at byte idx of n takes (tokenizers'
 * transform: the previous byte's, or offset 0 of n's original at its start). */
static uint32_t nstr_insert_al(const nstr *n, size_t idx)
{
    return idx >= 1 ? n->al[idx - 1] : n->shift;
}

/* One character of a transformation: change 0 replaces the next original
 * character, 1 inserts, -k replaces the next one and removes k more. */
typedef struct tchange {
    uint32_t cp;
    int32_t change;
} tchange;
typedef struct tchanges {
    tchange *v;
    size_t n, cap;
} tchanges;

static bool tc_add(tchanges *t, uint32_t cp, int32_t change)
{
    if (!grow((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v)) return false;
    t->v[t->n++] = (tchange){cp, change};
    return true;
}

/* NormalizedString::transform over the whole string: initial_offset characters
 * are removed first, then each change consumes original characters as above;
 * originals left over are dropped. Replaces *n. */
static vkf_status nstr_transform(nstr *n, const tchanges *t, size_t initial_offset)
{
    nstr out = {.shift = n->shift};
    if (!nstr_reserve(&out, n->len + 4 * t->n)) return OOM();
    out.s[0] = '\0';
    size_t idx = 0;
    for (size_t k = 0; k < initial_offset && idx < n->len; k++) idx += u8_len((unsigned char)n->s[idx]);
    for (size_t i = 0; i < t->n; i++) {
        int32_t change = t->v[i].change;
        uint32_t al;
        if (change > 0) al = nstr_insert_al(n, idx);
        else al = idx < n->len ? n->al[idx] : n->len ? n->al[n->len - 1] : n->shift;
        if (change <= 0 && idx < n->len) idx += u8_len((unsigned char)n->s[idx]);
        for (int32_t k = 0; k < -change && idx < n->len; k++) idx += u8_len((unsigned char)n->s[idx]);
        if (!nstr_put_cp(&out, t->v[i].cp, al)) {
            nstr_free(&out);
            return OOM();
        }
    }
    nstr_free(n);
    *n = out;
    return VKF_OK;
}

/* The input itself: each byte aligns to the start of its character. */
static vkf_status nstr_from_input(nstr *n, const char *s, size_t len)
{
    memset(n, 0, sizeof *n);
    if (!nstr_reserve(n, len)) return OOM();
    memcpy(n->s, s, len);
    n->s[len] = '\0';
    for (size_t i = 0, start = 0; i < len; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) start = i;
        n->al[i] = (uint32_t)start;
    }
    n->len = len;
    return VKF_OK;
}

/* The splits of one text: normalized strings, and for those an added token
 * already stands for, its id. */
typedef struct split {
    nstr ns;
    int32_t id;         /* an added token's id, or -1 */
} split;
typedef struct splits {
    split *v;
    size_t n, cap;
} splits;

static void splits_free(splits *s)
{
    for (size_t i = 0; i < s->n; i++) nstr_free(&s->v[i].ns);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Adds a split (taking ns); empty ones vanish, as in PreTokenizedString::split. */
static bool splits_add(splits *s, nstr *ns, int32_t id)
{
    if (ns->len == 0) {
        nstr_free(ns);
        return true;
    }
    if (!grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v)) {
        nstr_free(ns);
        return false;
    }
    s->v[s->n].ns = *ns;
    s->v[s->n].id = id;
    s->n++;
    memset(ns, 0, sizeof *ns);
    return true;
}

/* How a split pre-tokenizer treats what its pattern matched. */
typedef enum behavior {
    B_REMOVED = 0,
    B_ISOLATED,
    B_MERGED_WITH_PREVIOUS,
    B_MERGED_WITH_NEXT,
    B_CONTIGUOUS,
} behavior;

/* NormalizedString::split: cuts n at the pieces by behavior and adds the parts
 * to out. */
static vkf_status split_pieces(const nstr *n, pieces *m, behavior b, splits *out)
{
    /* Rewrite m in place into the kept ranges (match now meaning "remove"). */
    size_t k = 0;
    bool prev_match = false;
    for (size_t i = 0; i < m->n; i++) {
        piece p = m->v[i];
        switch (b) {
        case B_ISOLATED: m->v[k++] = (piece){p.start, p.end, false}; break;
        case B_REMOVED: m->v[k++] = p; break;
        case B_CONTIGUOUS:
            if (p.match == prev_match && k > 0) m->v[k - 1].end = p.end;
            else m->v[k++] = (piece){p.start, p.end, false};
            break;
        case B_MERGED_WITH_PREVIOUS:
            if (p.match && !prev_match && k > 0) m->v[k - 1].end = p.end;
            else m->v[k++] = (piece){p.start, p.end, false};
            break;
        case B_MERGED_WITH_NEXT:
            if (p.match && !prev_match) m->v[k++] = (piece){p.start, p.end, false};
            else if (k > 0) m->v[k - 1].end = p.end;
            else m->v[k++] = (piece){p.start, p.end, false};
            break;
        }
        prev_match = p.match;
    }
    m->n = k;
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i].match) continue;
        nstr part;
        if (!nstr_slice(&part, n, m->v[i].start, m->v[i].end) || !splits_add(out, &part, -1)) {
            nstr_free(&part);
            return OOM();
        }
    }
    return VKF_OK;
}

/* ===================================================================== loading */

/* The file's name for messages, and the JSON helpers every component uses. */
typedef struct ld {
    const char *name;
} ld;

static vkf_status bad(const ld *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static vkf_status bad(const ld *L, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %s", L->name, msg);
}

static const char *jtype(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* A path one level down: "PATH.key" or "PATH[i]". */
typedef struct jpath {
    char s[224];
} jpath;

static jpath jp_key(const char *path, const char *key)
{
    jpath p;
    if (snprintf(p.s, sizeof p.s, "%s%s%s", path, *path ? "." : "", key) >= (int)sizeof p.s) p.s[sizeof p.s - 2] = '~';
    return p;
}

static jpath jp_index(const char *path, size_t i)
{
    jpath p;
    if (snprintf(p.s, sizeof p.s, "%s[%zu]", path, i) >= (int)sizeof p.s) p.s[sizeof p.s - 2] = '~';
    return p;
}

/* obj[key] as a string (no NUL byte in it unless nul_ok; at most max bytes).
 * Absent or null: *s = NULL, an error when required. */
static vkf_status get_str(const ld *L, const json_t *obj, const char *path, const char *key, bool required,
                          size_t max, bool nul_ok, const char **s, size_t *len)
{
    *s = NULL;
    *len = 0;
    json_t *v = json_object_get(obj, key);
    jpath p = jp_key(path, key);
    if (!v || json_is_null(v)) return required ? bad(L, "%s is missing", p.s) : VKF_OK;
    if (!json_is_string(v)) return bad(L, "%s is %s, not a string", p.s, jtype(v));
    size_t n = json_string_length(v);
    if (n > max) return bad(L, "%s is %zu bytes long, more than the %zu accepted", p.s, n, max);
    if (!nul_ok && memchr(json_string_value(v), 0, n)) return bad(L, "%s holds a NUL character", p.s);
    *s = json_string_value(v);
    *len = n;
    return VKF_OK;
}

static vkf_status get_bool(const ld *L, const json_t *obj, const char *path, const char *key, bool dflt, bool *out)
{
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v || json_is_null(v)) return VKF_OK;
    if (!json_is_boolean(v)) return bad(L, "%s is %s, not true or false", jp_key(path, key).s, jtype(v));
    *out = json_is_true(v);
    return VKF_OK;
}

/* A whole number in [0, max]. */
static vkf_status get_uint_v(const ld *L, const json_t *v, const char *path, uint64_t max, uint64_t *out)
{
    if (!json_is_integer(v)) return bad(L, "%s is %s, not a whole number", path, jtype(v));
    json_int_t x = json_integer_value(v);
    if (x < 0 || (uint64_t)x > max)
        return bad(L, "%s is %lld, outside 0..%llu", path, (long long)x, (unsigned long long)max);
    *out = (uint64_t)x;
    return VKF_OK;
}

static vkf_status get_uint(const ld *L, const json_t *obj, const char *path, const char *key, bool required,
                           uint64_t max, uint64_t dflt, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v || json_is_null(v)) return required ? bad(L, "%s is missing", jp_key(path, key).s) : VKF_OK;
    return get_uint_v(L, v, jp_key(path, key).s, max, out);
}

/* A component: an object with a "type" string. */
static vkf_status get_type(const ld *L, const json_t *obj, const char *path, const char **type)
{
    if (!json_is_object(obj)) return bad(L, "%s is %s, not an object", path, jtype(obj));
    size_t n;
    VKF_TRY(get_str(L, obj, path, "type", true, 64, false, type, &n));
    return VKF_OK;
}

static vkf_status unsupported(const ld *L, const char *path, const char *type)
{
    char qb[96];
    return bad(L, "%s.type %s is not supported", path, q(qb, sizeof qb, type, strlen(type)));
}

/* A list member (obj[key], an array of at most max items). */
static vkf_status get_array(const ld *L, const json_t *obj, const char *path, const char *key, size_t max,
                            json_t **out)
{
    json_t *v = json_object_get(obj, key);
    jpath p = jp_key(path, key);
    if (!v) return bad(L, "%s is missing", p.s);
    if (!json_is_array(v)) return bad(L, "%s is %s, not a list", p.s, jtype(v));
    if (json_array_size(v) > max)
        return bad(L, "%s has %zu items, more than the %zu accepted", p.s, json_array_size(v), max);
    *out = v;
    return VKF_OK;
}

/* A single character (Metaspace's replacement, Strip's content). */
static vkf_status get_char(const ld *L, const json_t *obj, const char *path, const char *key, bool required,
                           uint32_t dflt, uint32_t *out)
{
    const char *s;
    size_t n;
    VKF_TRY(get_str(L, obj, path, key, required, 8, true, &s, &n));
    *out = dflt;
    if (!s) return VKF_OK;
    size_t i = 0;
    if (n == 0 || (*out = u8_next(s, &i), i != n)) {
        char qb[64];
        return bad(L, "%s is %s, not one character", jp_key(path, key).s, q(qb, sizeof qb, s, n));
    }
    return VKF_OK;
}

/* {"String": "..."} or {"Regex": "..."} */
static vkf_status load_pattern(const ld *L, const json_t *obj, const char *path, const char *key, pattern *out)
{
    memset(out, 0, sizeof *out);
    json_t *v = json_object_get(obj, key);
    jpath p = jp_key(path, key);
    if (!v) return bad(L, "%s is missing", p.s);
    if (!json_is_object(v) || json_object_size(v) != 1)
        return bad(L, "%s is %s, not {\"String\": ...} or {\"Regex\": ...}", p.s, jtype(v));
    const char *s;
    size_t n;
    if (json_object_get(v, "String")) {
        VKF_TRY(get_str(L, v, p.s, "String", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
        if (!(out->lit = dup_bytes(s, n))) return OOM();
        out->lit_len = n;
        return VKF_OK;
    }
    if (json_object_get(v, "Regex")) {
        VKF_TRY(get_str(L, v, p.s, "Regex", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
        char why[ONIG_MAX_ERROR_MESSAGE_LEN + 32];
        if (!rx_compile(&out->re, s, n, why, sizeof why)) {
            char qb[96];
            return bad(L, "%s.Regex %s does not compile: %s", p.s, q(qb, sizeof qb, s, n), why);
        }
        out->is_regex = true;
        return VKF_OK;
    }
    return bad(L, "%s is neither {\"String\": ...} nor {\"Regex\": ...}", p.s);
}

static vkf_status get_behavior(const ld *L, const json_t *obj, const char *path, const char *key, behavior dflt,
                               behavior *out)
{
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    const char *s;
    size_t n;
    VKF_TRY(get_str(L, obj, path, key, false, 64, false, &s, &n));
    *out = dflt;
    if (!s) return VKF_OK;
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (behavior)i;
            return VKF_OK;
        }
    char qb[96];
    return bad(L, "%s %s is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous",
               jp_key(path, key).s, q(qb, sizeof qb, s, n));
}

/* ================================================================ normalizers */

typedef enum nkind {
    N_SEQUENCE,
    N_PRECOMPILED,
    N_NFC,
    N_NFD,
    N_NFKC,
    N_NFKD,
    N_LOWERCASE,
    N_STRIP,
    N_REPLACE,
    N_PREPEND,
} nkind;

typedef struct norm {
    nkind kind;
    struct norm *kids;  /* owned: Sequence */
    size_t n_kids;
    uint8_t *blob;      /* owned: Precompiled's decoded charsmap, which map borrows */
    vkf_charsmap map;
    bool left, right;   /* Strip */
    pattern pat;        /* Replace */
    char *text;         /* owned: Replace's content, Prepend's prepend */
    size_t text_len;
} norm;

static void norm_free(norm *n)
{
    for (size_t i = 0; i < n->n_kids; i++) norm_free(&n->kids[i]);
    free(n->kids);
    free(n->blob);
    pattern_free(&n->pat);
    free(n->text);
    memset(n, 0, sizeof *n);
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Standard base64 with padding (what tokenizers writes for precompiled_charsmap). */
static bool b64_decode(const char *s, size_t n, uint8_t **out, size_t *out_len)
{
    if (n % 4) return false;
    uint8_t *o = malloc(n / 4 * 3 + 1);
    if (!o) return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            unsigned char c = (unsigned char)s[i + j];
            if (c == '=' && i + 4 == n && j >= 2) {
                v[j] = 0;
                pad++;
                continue;
            }
            if (pad || (v[j] = b64_value(c)) < 0) goto fail;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        o[k++] = (uint8_t)(w >> 16);
        if (pad < 2) o[k++] = (uint8_t)(w >> 8);
        if (pad < 1) o[k++] = (uint8_t)w;
    }
    *out = o;
    *out_len = k;
    return true;
fail:
    free(o);
    return false;
}

static vkf_status load_norm(const ld *L, const json_t *j, const char *path, int depth, norm *out)
{
    memset(out, 0, sizeof *out);
    const char *type;
    VKF_TRY(get_type(L, j, path, &type));
    const char *s;
    size_t n;
    if (strcmp(type, "Sequence") == 0) {
        if (depth >= VKF_HFTOK_MAX_DEPTH) return bad(L, "%s: Sequences nest deeper than %d", path, VKF_HFTOK_MAX_DEPTH);
        json_t *a;
        VKF_TRY(get_array(L, j, path, "normalizers", VKF_HFTOK_MAX_ITEMS, &a));
        out->kind = N_SEQUENCE;
        if (json_array_size(a) && !(out->kids = calloc(json_array_size(a), sizeof *out->kids))) return OOM();
        jpath p = jp_key(path, "normalizers");
        for (size_t i = 0; i < json_array_size(a); i++) {
            vkf_status st = load_norm(L, json_array_get(a, i), jp_index(p.s, i).s, depth + 1, &out->kids[i]);
            out->n_kids = i + 1;
            if (st != VKF_OK) return st;
        }
    } else if (strcmp(type, "Precompiled") == 0) {
        out->kind = N_PRECOMPILED;
        VKF_TRY(get_str(L, j, path, "precompiled_charsmap", true, 64u << 20, true, &s, &n));
        size_t blob_len;
        if (!b64_decode(s, n, &out->blob, &blob_len))
            return bad(L, "%s.precompiled_charsmap is not base64", path);
        if (vkf_charsmap_parse(out->blob, blob_len, &out->map) != VKF_OK)
            return bad(L, "%s.precompiled_charsmap: %s", path, vkf_last_error());
    } else if (strcmp(type, "NFC") == 0) {
        out->kind = N_NFC;
    } else if (strcmp(type, "NFD") == 0) {
        out->kind = N_NFD;
    } else if (strcmp(type, "NFKC") == 0) {
        out->kind = N_NFKC;
    } else if (strcmp(type, "NFKD") == 0) {
        out->kind = N_NFKD;
    } else if (strcmp(type, "Lowercase") == 0) {
        out->kind = N_LOWERCASE;
    } else if (strcmp(type, "Strip") == 0) {
        out->kind = N_STRIP;
        VKF_TRY(get_bool(L, j, path, "strip_left", true, &out->left));
        VKF_TRY(get_bool(L, j, path, "strip_right", true, &out->right));
    } else if (strcmp(type, "Replace") == 0) {
        out->kind = N_REPLACE;
        VKF_TRY(load_pattern(L, j, path, "pattern", &out->pat));
        VKF_TRY(get_str(L, j, path, "content", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
        if (!(out->text = dup_bytes(s, n))) return OOM();
        out->text_len = n;
    } else if (strcmp(type, "Prepend") == 0) {
        out->kind = N_PREPEND;
        VKF_TRY(get_str(L, j, path, "prepend", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
        if (!(out->text = dup_bytes(s, n))) return OOM();
        out->text_len = n;
    } else {
        return unsupported(L, path, type);
    }
    return VKF_OK;
}

/* ---- applying them */

/* tokenizers' replace() helper of the Precompiled normalizer: new_part stands for
 * old_chars characters of the original. */
static bool tc_replace(tchanges *t, size_t old_chars, const char *new_part)
{
    size_t new_chars = 0;
    for (size_t i = 0; new_part[i];) {
        if (!tc_add(t, u8_next(new_part, &i), 0)) return false;
        new_chars++;
    }
    if (new_chars > old_chars) {
        for (size_t k = 0; k < new_chars - old_chars; k++) t->v[t->n - 1 - k].change = 1;
    } else if (new_chars < old_chars && t->n > 0) {
        t->v[t->n - 1].change -= (int32_t)(old_chars - new_chars);
    }
    return true;
}

static vkf_status norm_precompiled(const norm *nm, nstr *n)
{
    tchanges t = {0};
    bool modified = false;
    int32_t state = 0;
    size_t gs = 0;
    vkf_status st = VKF_OK;
    while (gs < n->len) {
        /* the grapheme cluster [gs, ge) */
        size_t ge = gs;
        uint32_t prev = u8_next(n->s, &ge);
        while (ge < n->len) {
            size_t k = ge;
            uint32_t c = u8_next(n->s, &k);
            if (utf8proc_grapheme_break_stateful((utf8proc_int32_t)prev, (utf8proc_int32_t)c, &state)) break;
            prev = c;
            ge = k;
        }
        const char *rep;
        if (ge - gs < 6 && vkf_charsmap_prefix(&nm->map, n->s + gs, ge - gs, VKF_CHARSMAP_SHORTEST, &rep)) {
            modified = true;
            if (!tc_replace(&t, u8_count(n->s + gs, ge - gs), rep)) goto oom;
        } else {
            for (size_t i = gs; i < ge;) {
                size_t b = i;
                uint32_t c = u8_next(n->s, &i);
                if (vkf_charsmap_prefix(&nm->map, n->s + b, i - b, VKF_CHARSMAP_SHORTEST, &rep)) {
                    modified = true;
                    if (!tc_replace(&t, 1, rep)) goto oom;
                } else if (!tc_add(&t, c, 0)) {
                    goto oom;
                }
            }
        }
        gs = ge;
    }
    if (modified) st = nstr_transform(n, &t, 0);
    free(t.v);
    return st;
oom:
    free(t.v);
    return OOM();
}

/* Hangul: utf8proc composes jamo algorithmically (comb_index 0xffff for them). */
static bool nf_second(uint32_t c, const utf8proc_property_t *p)
{
    if ((c >= 0x1161 && c <= 0x1175) || (c >= 0x11a8 && c <= 0x11c2)) return true;
    return p->comb_index != UINT16_MAX && (p->comb_index & 0x8000);
}

#define NF_MAX_DECOMP 32

/* Where normalization may restart: a starter that cannot compose with what
 * precedes it and whose decomposition starts with such a starter too. */
static bool nf_boundary(uint32_t c, utf8proc_option_t opt)
{
    const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)c);
    if (p->combining_class != 0 || nf_second(c, p)) return false;
    utf8proc_int32_t d[NF_MAX_DECOMP];
    int bc = 0;
    utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)c, d, NF_MAX_DECOMP, opt, &bc);
    if (k <= 0 || k > NF_MAX_DECOMP || (uint32_t)d[0] == c) return true;
    const utf8proc_property_t *q0 = utf8proc_get_property(d[0]);
    return q0->combining_class == 0 && !nf_second((uint32_t)d[0], q0);
}

/* NFC / NFD / NFKC / NFKD: decomposition of each character, canonical order by a
 * stable counting sort of each run of non-starters (linear, where utf8proc's own
 * ordering is quadratic on long runs), then composition. Run piecewise between
 * boundaries, each piece's characters aligned as tokenizers' replace() aligns a
 * replaced group. */
static vkf_status norm_unicode(nstr *n, bool compat, bool compose)
{
    utf8proc_option_t dopt = UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0);
    utf8proc_option_t copt = UTF8PROC_STABLE | UTF8PROC_COMPOSE | (compat ? UTF8PROC_COMPAT : 0);
    tchanges t = {0};
    utf8proc_int32_t *cps = NULL, *tmp = NULL;
    size_t cps_cap = 0, tmp_cap = 0;
    bool modified = false;
    size_t ps = 0;
    while (ps < n->len) {
        /* the piece [ps, pe) */
        size_t pe = ps;
        u8_next(n->s, &pe);
        while (pe < n->len) {
            size_t k = pe;
            if (nf_boundary(u8_next(n->s, &k), dopt)) break;
            pe = k;
        }
        size_t m = 0, old_chars = 0;
        for (size_t i = ps; i < pe;) {
            uint32_t c = u8_next(n->s, &i);
            old_chars++;
            if (!grow((void **)&cps, &cps_cap, m + NF_MAX_DECOMP, sizeof *cps)) goto oom;
            int bc = 0;
            utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)c, cps + m, NF_MAX_DECOMP, dopt, &bc);
            if (k <= 0 || k > NF_MAX_DECOMP) cps[m] = (utf8proc_int32_t)c, k = 1;
            m += (size_t)k;
        }
        /* canonical ordering */
        for (size_t i = 0; i < m;) {
            if (utf8proc_get_property(cps[i])->combining_class == 0) { i++; continue; }
            size_t j = i;
            while (j < m && utf8proc_get_property(cps[j])->combining_class != 0) j++;
            if (j - i > 1) {
                size_t count[256] = {0};
                if (!grow((void **)&tmp, &tmp_cap, j - i, sizeof *tmp)) goto oom;
                for (size_t k = i; k < j; k++) count[utf8proc_get_property(cps[k])->combining_class]++;
                for (size_t c = 1, sum = 0; c < 256; c++) {
                    size_t x = count[c];
                    count[c] = sum;
                    sum += x;
                }
                for (size_t k = i; k < j; k++) tmp[count[utf8proc_get_property(cps[k])->combining_class]++] = cps[k];
                memcpy(cps + i, tmp, (j - i) * sizeof *tmp);
            }
            i = j;
        }
        if (compose) {
            utf8proc_ssize_t r = utf8proc_normalize_utf32(cps, (utf8proc_ssize_t)m, copt);
            if (r >= 0) m = (size_t)r;
        }
        /* unchanged? */
        bool same = m == old_chars;
        for (size_t i = ps, k = 0; same && i < pe; k++) same = u8_next(n->s, &i) == (uint32_t)cps[k];
        if (same) {
            for (size_t i = ps; i < pe;)
                if (!tc_add(&t, u8_next(n->s, &i), 0)) goto oom;
        } else {
            modified = true;
            for (size_t k = 0; k < m; k++)
                if (!tc_add(&t, (uint32_t)cps[k], 0)) goto oom;
            if (m > old_chars) {
                for (size_t k = 0; k < m - old_chars; k++) t.v[t.n - 1 - k].change = 1;
            } else if (m < old_chars && t.n > 0) {
                t.v[t.n - 1].change -= (int32_t)(old_chars - m);
            }
        }
        ps = pe;
    }
    vkf_status st = modified ? nstr_transform(n, &t, 0) : VKF_OK;
    free(t.v), free(cps), free(tmp);
    return st;
oom:
    free(t.v), free(cps), free(tmp);
    return OOM();
}

static vkf_status norm_lowercase(nstr *n)
{
    tchanges t = {0};
    bool modified = false;
    for (size_t i = 0; i < n->len;) {
        uint32_t c = u8_next(n->s, &i), lo[2];
        size_t k = to_lower(c, lo);
        modified = modified || k != 1 || lo[0] != c;
        for (size_t j = 0; j < k; j++)
            if (!tc_add(&t, lo[j], j > 0)) {
                free(t.v);
                return OOM();
            }
    }
    vkf_status st = modified ? nstr_transform(n, &t, 0) : VKF_OK;
    free(t.v);
    return st;
}

static vkf_status norm_strip(nstr *n, bool left, bool right)
{
    size_t chars = 0, lead = 0, trail = 0;
    bool in_lead = true;
    for (size_t i = 0; i < n->len;) {
        uint32_t c = u8_next(n->s, &i);
        chars++;
        if (in_lead && left && is_ws(c)) lead++;
        else in_lead = false;
        trail = is_ws(c) ? trail + 1 : 0;
    }
    if (!right) trail = 0;
    if (lead == 0 && trail == 0) return VKF_OK;
    tchanges t = {0};
    size_t k = 0;
    for (size_t i = 0; i < n->len; k++) {
        uint32_t c = u8_next(n->s, &i);
        if (k < lead || k >= chars - trail) continue;
        if (!tc_add(&t, c, 0)) {
            free(t.v);
            return OOM();
        }
    }
    vkf_status st = nstr_transform(n, &t, lead);
    free(t.v);
    return st;
}

/* NormalizedString::replace: each match becomes content, its characters aligned
 * as inserted after the match. */
static vkf_status nstr_replace(nstr *n, const pattern *p, const char *content, size_t content_len)
{
    pieces m = {0};
    vkf_status st = find_matches(p, n->s, n->len, false, &m);
    if (st != VKF_OK) {
        free(m.v);
        return st;
    }
    bool any = false;
    for (size_t i = 0; i < m.n; i++) any = any || m.v[i].match;
    if (!any) {
        free(m.v);
        return VKF_OK;
    }
    nstr out = {.shift = n->shift};
    for (size_t i = 0; i < m.n; i++) {
        piece pc = m.v[i];
        bool ok = pc.match ? nstr_put(&out, content, content_len, nstr_insert_al(n, pc.end))
                           : pc.end == pc.start || nstr_copy_range(&out, n, pc.start, pc.end);
        if (!ok) {
            free(m.v);
            nstr_free(&out);
            return OOM();
        }
    }
    free(m.v);
    if (!out.s && !nstr_reserve(&out, 0)) return OOM();
    out.s[out.len] = '\0';
    nstr_free(n);
    *n = out;
    return VKF_OK;
}

/* NormalizedString::prepend: the text takes the first character's alignment. */
static vkf_status nstr_prepend(nstr *n, const char *text, size_t len)
{
    if (n->len == 0 || len == 0) return VKF_OK;
    nstr out = {.shift = n->shift};
    if (!nstr_put(&out, text, len, n->al[0]) || !nstr_copy_range(&out, n, 0, n->len)) {
        nstr_free(&out);
        return OOM();
    }
    nstr_free(n);
    *n = out;
    return VKF_OK;
}

static vkf_status norm_apply(const norm *nm, nstr *n)
{
    switch (nm->kind) {
    case N_SEQUENCE:
        for (size_t i = 0; i < nm->n_kids; i++) VKF_TRY(norm_apply(&nm->kids[i], n));
        return VKF_OK;
    case N_PRECOMPILED: return norm_precompiled(nm, n);
    case N_NFC: return norm_unicode(n, false, true);
    case N_NFD: return norm_unicode(n, false, false);
    case N_NFKC: return norm_unicode(n, true, true);
    case N_NFKD: return norm_unicode(n, true, false);
    case N_LOWERCASE: return norm_lowercase(n);
    case N_STRIP: return norm_strip(n, nm->left, nm->right);
    case N_REPLACE: return nstr_replace(n, &nm->pat, nm->text, nm->text_len);
    case N_PREPEND: return nstr_prepend(n, nm->text, nm->text_len);
    }
    return VKF_OK;
}

/* ============================================================ pre-tokenizers */

typedef enum pkind {
    P_SEQUENCE,
    P_METASPACE,
    P_BYTELEVEL,
    P_WHITESPACE,
    P_WHITESPACE_SPLIT,
    P_SPLIT,
    P_PUNCTUATION,
    P_DIGITS,
} pkind;

/* Metaspace's prepend_scheme */
typedef enum prepend_scheme { PS_ALWAYS = 0, PS_FIRST, PS_NEVER } prepend_scheme;

typedef struct pretok {
    pkind kind;
    struct pretok *kids;        /* owned: Sequence */
    size_t n_kids;
    uint32_t repl;              /* Metaspace: replacement character, */
    char repl_s[4];             /* its UTF-8 */
    size_t repl_len;
    prepend_scheme scheme;
    bool split;
    bool add_prefix_space;      /* ByteLevel */
    bool use_regex;
    pattern pat;                /* Split; Whitespace and ByteLevel: their built-in regex */
    behavior beh;               /* Split, Punctuation */
    bool invert;                /* Split */
    bool individual;            /* Digits */
} pretok;

static void pretok_free(pretok *p)
{
    for (size_t i = 0; i < p->n_kids; i++) pretok_free(&p->kids[i]);
    free(p->kids);
    pattern_free(&p->pat);
    memset(p, 0, sizeof *p);
}

/* GPT-2's pattern (tokenizers' ByteLevel), and Whitespace's. */
static const char gpt2_regex[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* \w with Join_Control spelled out: Oniguruma 6.9.9 added it to \w (UTS #18), and the
 * tokenizers this was checked against runs on 6.9.10, where Debian 12 has 6.9.8. */
static const char whitespace_regex[] = "[\\w\\p{Join_Control}]+|[^\\w\\s\\p{Join_Control}]+";

static vkf_status builtin_regex(const ld *L, const char *path, const char *re, pattern *out)
{
    char why[ONIG_MAX_ERROR_MESSAGE_LEN + 32];
    memset(out, 0, sizeof *out);
    if (!rx_compile(&out->re, re, strlen(re), why, sizeof why)) return bad(L, "%s: %s", path, why);
    out->is_regex = true;
    return VKF_OK;
}

static vkf_status get_scheme(const ld *L, const json_t *j, const char *path, prepend_scheme *out)
{
    /* add_prefix_space (older files) decides when present, as in tokenizers */
    json_t *aps = json_object_get(j, "add_prefix_space");
    if (aps && !json_is_null(aps)) {
        bool b;
        VKF_TRY(get_bool(L, j, path, "add_prefix_space", true, &b));
        *out = b ? PS_ALWAYS : PS_NEVER;
        return VKF_OK;
    }
    const char *s;
    size_t n;
    VKF_TRY(get_str(L, j, path, "prepend_scheme", false, 64, false, &s, &n));
    *out = PS_ALWAYS;
    if (!s || strcmp(s, "always") == 0) return VKF_OK;
    if (strcmp(s, "first") == 0) *out = PS_FIRST;
    else if (strcmp(s, "never") == 0) *out = PS_NEVER;
    else {
        char qb[96];
        return bad(L, "%s.prepend_scheme %s is not always, first or never", path, q(qb, sizeof qb, s, n));
    }
    return VKF_OK;
}

static vkf_status load_pretok(const ld *L, const json_t *j, const char *path, int depth, pretok *out)
{
    memset(out, 0, sizeof *out);
    const char *type;
    VKF_TRY(get_type(L, j, path, &type));
    if (strcmp(type, "Sequence") == 0) {
        if (depth >= VKF_HFTOK_MAX_DEPTH) return bad(L, "%s: Sequences nest deeper than %d", path, VKF_HFTOK_MAX_DEPTH);
        json_t *a;
        VKF_TRY(get_array(L, j, path, "pretokenizers", VKF_HFTOK_MAX_ITEMS, &a));
        out->kind = P_SEQUENCE;
        if (json_array_size(a) && !(out->kids = calloc(json_array_size(a), sizeof *out->kids))) return OOM();
        jpath p = jp_key(path, "pretokenizers");
        for (size_t i = 0; i < json_array_size(a); i++) {
            vkf_status st = load_pretok(L, json_array_get(a, i), jp_index(p.s, i).s, depth + 1, &out->kids[i]);
            out->n_kids = i + 1;
            if (st != VKF_OK) return st;
        }
    } else if (strcmp(type, "Metaspace") == 0) {
        out->kind = P_METASPACE;
        VKF_TRY(get_char(L, j, path, "replacement", true, 0x2581, &out->repl));
        out->repl_len = u8_encode(out->repl, out->repl_s);
        VKF_TRY(get_scheme(L, j, path, &out->scheme));
        VKF_TRY(get_bool(L, j, path, "split", true, &out->split));
    } else if (strcmp(type, "ByteLevel") == 0) {
        out->kind = P_BYTELEVEL;
        VKF_TRY(get_bool(L, j, path, "add_prefix_space", true, &out->add_prefix_space));
        VKF_TRY(get_bool(L, j, path, "use_regex", true, &out->use_regex));
        bool trim;
        VKF_TRY(get_bool(L, j, path, "trim_offsets", true, &trim));   /* offsets only */
        VKF_TRY(builtin_regex(L, path, gpt2_regex, &out->pat));
    } else if (strcmp(type, "Whitespace") == 0) {
        out->kind = P_WHITESPACE;
        VKF_TRY(builtin_regex(L, path, whitespace_regex, &out->pat));
    } else if (strcmp(type, "WhitespaceSplit") == 0) {
        out->kind = P_WHITESPACE_SPLIT;
    } else if (strcmp(type, "Split") == 0) {
        out->kind = P_SPLIT;
        VKF_TRY(load_pattern(L, j, path, "pattern", &out->pat));
        if (!json_object_get(j, "behavior")) return bad(L, "%s.behavior is missing", path);
        VKF_TRY(get_behavior(L, j, path, "behavior", B_REMOVED, &out->beh));
        VKF_TRY(get_bool(L, j, path, "invert", false, &out->invert));
    } else if (strcmp(type, "Punctuation") == 0) {
        out->kind = P_PUNCTUATION;
        VKF_TRY(get_behavior(L, j, path, "behavior", B_ISOLATED, &out->beh));
    } else if (strcmp(type, "Digits") == 0) {
        out->kind = P_DIGITS;
        VKF_TRY(get_bool(L, j, path, "individual_digits", false, &out->individual));
    } else {
        return unsupported(L, path, type);
    }
    return VKF_OK;
}

/* ---- applying them */

static bool cc_ws(uint32_t c, const void *arg) { (void)arg; return is_ws(c); }
static bool cc_punc(uint32_t c, const void *arg) { (void)arg; return is_punc(c); }
static bool cc_numeric(uint32_t c, const void *arg) { (void)arg; return is_numeric(c); }
static bool cc_equal(uint32_t c, const void *arg) { return c == *(const uint32_t *)arg; }

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

/* Metaspace on one split: spaces become the replacement, the prefix by the
 * scheme, then a cut before each run of replacements. */
static vkf_status metaspace_split(const pretok *p, const nstr *n, splits *out, pieces *m)
{
    nstr r = {.shift = n->shift};
    if (!nstr_reserve(&r, n->len)) return OOM();
    r.s[0] = '\0';
    for (size_t i = 0; i < n->len; i++) {
        bool ok = n->s[i] == ' ' ? nstr_put(&r, p->repl_s, p->repl_len, n->al[i]) : nstr_copy_range(&r, n, i, i + 1);
        if (!ok) {
            nstr_free(&r);
            return OOM();
        }
    }
    if (p->scheme == PS_ALWAYS || (p->scheme == PS_FIRST && r.shift == 0)) {
        size_t i = 0;
        if (r.len && u8_next(r.s, &i) != p->repl) {
            vkf_status st = nstr_prepend(&r, p->repl_s, p->repl_len);
            if (st != VKF_OK) {
                nstr_free(&r);
                return st;
            }
        }
    }
    vkf_status st = VKF_OK;
    if (p->split) {
        st = find_char_matches(cc_equal, &p->repl, r.s, r.len, m);
        if (st == VKF_OK) st = split_pieces(&r, m, B_MERGED_WITH_NEXT, out);
        nstr_free(&r);
    } else if (!splits_add(out, &r, -1)) {
        st = OOM();
    }
    return st;
}

/* One pre-tokenizer's cut of one split into out (not ByteLevel's byte mapping). */
static vkf_status pretok_split(const pretok *p, const nstr *n, splits *out, pieces *m)
{
    switch (p->kind) {
    case P_METASPACE: return metaspace_split(p, n, out, m);
    case P_BYTELEVEL: {
        nstr w;
        if (!nstr_slice(&w, n, 0, n->len)) return OOM();
        w.shift = n->shift;
        vkf_status st = VKF_OK;
        if (p->add_prefix_space && w.len && w.s[0] != ' ') st = nstr_prepend(&w, " ", 1);
        if (st == VKF_OK) {
            if (p->use_regex) {
                st = find_matches(&p->pat, w.s, w.len, false, m);
                if (st == VKF_OK) st = split_pieces(&w, m, B_ISOLATED, out);
            } else if (!splits_add(out, &w, -1)) {
                st = OOM();
            }
        }
        nstr_free(&w);
        return st;
    }
    case P_WHITESPACE:
        VKF_TRY(find_matches(&p->pat, n->s, n->len, /*invert=*/true, m));
        return split_pieces(n, m, B_REMOVED, out);
    case P_WHITESPACE_SPLIT:
        VKF_TRY(find_char_matches(cc_ws, NULL, n->s, n->len, m));
        return split_pieces(n, m, B_REMOVED, out);
    case P_SPLIT:
        VKF_TRY(find_matches(&p->pat, n->s, n->len, p->invert, m));
        return split_pieces(n, m, p->beh, out);
    case P_PUNCTUATION:
        VKF_TRY(find_char_matches(cc_punc, NULL, n->s, n->len, m));
        return split_pieces(n, m, p->beh, out);
    case P_DIGITS:
        VKF_TRY(find_char_matches(cc_numeric, NULL, n->s, n->len, m));
        return split_pieces(n, m, p->individual ? B_ISOLATED : B_CONTIGUOUS, out);
    case P_SEQUENCE: break;
    }
    return VKF_OK;
}

/* ByteLevel's second step: every byte of every split becomes its character. */
static vkf_status bytelevel_map(splits *s)
{
    pthread_once(&byte_chars_once, byte_chars_setup);
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].id >= 0) continue;
        nstr *n = &s->v[i].ns, out = {.shift = n->shift};
        if (!nstr_reserve(&out, 2 * n->len)) return OOM();
        for (size_t k = 0; k < n->len; k++)
            if (!nstr_put_cp(&out, byte_chars[(unsigned char)n->s[k]], n->al[k])) {
                nstr_free(&out);
                return OOM();
            }
        nstr_free(n);
        *n = out;
    }
    return VKF_OK;
}

static vkf_status pretok_apply(const pretok *p, splits *s)
{
    if (p->kind == P_SEQUENCE) {
        for (size_t i = 0; i < p->n_kids; i++) VKF_TRY(pretok_apply(&p->kids[i], s));
        return VKF_OK;
    }
    splits out = {0};
    pieces m = {0};
    vkf_status st = VKF_OK;
    for (size_t i = 0; i < s->n && st == VKF_OK; i++) {
        if (s->v[i].id >= 0) {
            if (!grow((void **)&out.v, &out.cap, out.n + 1, sizeof *out.v)) {
                st = OOM();
                break;
            }
            out.v[out.n++] = s->v[i];
            memset(&s->v[i].ns, 0, sizeof s->v[i].ns);
            continue;
        }
        st = pretok_split(p, &s->v[i].ns, &out, &m);
    }
    free(m.v);
    if (st == VKF_OK && p->kind == P_BYTELEVEL) st = bytelevel_map(&out);
    splits_free(s);
    *s = out;
    return st;
}

/* ===================================================================== models */

/* Ids of the byte tokens "<0x00>".."<0xFF>" (byte_fallback), -1 where missing. */
static void find_byte_ids(const smap *vocab, int32_t out[256])
{
    for (unsigned b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        out[b] = smap_get(vocab, name, 6);
    }
}

typedef struct bpe {
    smap vocab;                 /* token -> id; keys borrow tok[] */
    size_t entries;             /* vocabulary entries (tokenizers' get_vocab_size) */
    umap merges;                /* left id << 32 | right id -> rank << 32 | new id */
    bool has_unk, has_prefix, has_suffix;
    char *unk, *prefix, *suffix;        /* owned */
    size_t unk_len, prefix_len, suffix_len;
    bool fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_id[256];
} bpe;

typedef struct unigram {
    double *score;              /* owned, per id */
    smap ids;                   /* piece -> its last id; keys borrow tok[] */
    trie pieces;                /* value: the piece's last id */
    int32_t unk_id;             /* -1: none */
    bool byte_fallback;
    double min_score;
    int32_t byte_id[256];
} unigram;

typedef enum mkind { M_BPE, M_UNIGRAM } mkind;

typedef struct model {
    mkind kind;
    char **tok;                 /* owned: per id, the token (NULL: none) */
    uint32_t *tok_len;          /* owned */
    size_t n_ids;               /* highest id + 1 */
    size_t size;                /* tokenizers' model.get_vocab_size() */
    bpe b;
    unigram u;
} model;

static void model_free(model *m)
{
    for (size_t i = 0; i < m->n_ids; i++) free(m->tok[i]);
    free(m->tok);
    free(m->tok_len);
    free(m->b.vocab.slots);
    free(m->b.merges.slots);
    free(m->b.unk), free(m->b.prefix), free(m->b.suffix);
    free(m->u.score);
    free(m->u.ids.slots);
    trie_free(&m->u.pieces);
    memset(m, 0, sizeof *m);
}

static vkf_status model_alloc_ids(model *m, size_t n)
{
    m->tok = calloc(n ? n : 1, sizeof *m->tok);
    m->tok_len = calloc(n ? n : 1, sizeof *m->tok_len);
    if (!m->tok || !m->tok_len) return OOM();
    m->n_ids = n;
    return VKF_OK;
}

/* An optional string of the BPE model (null or absent: none). */
static vkf_status bpe_opt_str(const ld *L, const json_t *j, const char *path, const char *key, bool *has, char **out,
                              size_t *out_len)
{
    const char *s;
    size_t n;
    VKF_TRY(get_str(L, j, path, key, false, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
    *has = s != NULL;
    if (s && !(*out = dup_bytes(s, n))) return OOM();
    *out_len = n;
    return VKF_OK;
}

static vkf_status load_bpe(const ld *L, const json_t *j, const char *path, model *m)
{
    bpe *b = &m->b;
    m->kind = M_BPE;
    json_t *d = json_object_get(j, "dropout");
    if (d && !json_is_null(d)) {
        if (!json_is_number(d)) return bad(L, "%s.dropout is %s, not a number or null", path, jtype(d));
        if (json_number_value(d) != 0.0)
            return bad(L, "%s.dropout is %g: dropout makes encoding random, which is not supported", path,
                       json_number_value(d));
    }
    VKF_TRY(bpe_opt_str(L, j, path, "unk_token", &b->has_unk, &b->unk, &b->unk_len));
    VKF_TRY(bpe_opt_str(L, j, path, "continuing_subword_prefix", &b->has_prefix, &b->prefix, &b->prefix_len));
    VKF_TRY(bpe_opt_str(L, j, path, "end_of_word_suffix", &b->has_suffix, &b->suffix, &b->suffix_len));
    VKF_TRY(get_bool(L, j, path, "fuse_unk", false, &b->fuse_unk));
    VKF_TRY(get_bool(L, j, path, "byte_fallback", false, &b->byte_fallback));
    VKF_TRY(get_bool(L, j, path, "ignore_merges", false, &b->ignore_merges));

    /* vocab: {"token": id} */
    json_t *v = json_object_get(j, "vocab");
    jpath vp = jp_key(path, "vocab");
    if (!v) return bad(L, "%s is missing", vp.s);
    if (!json_is_object(v)) return bad(L, "%s is %s, not an object", vp.s, jtype(v));
    size_t count = json_object_size(v);
    if (count > VKF_HFTOK_MAX_VOCAB)
        return bad(L, "%s has %zu entries, more than the %u accepted", vp.s, count, VKF_HFTOK_MAX_VOCAB);
    uint64_t max_id = 0;
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        char qb[96];
        uint64_t id;
        jpath p;
        if (snprintf(p.s, sizeof p.s, "%s[%s]", vp.s, q(qb, sizeof qb, key, strlen(key))) >= (int)sizeof p.s)
            p.s[sizeof p.s - 2] = '~';
        VKF_TRY(get_uint_v(L, val, p.s, VKF_HFTOK_MAX_ID, &id));
        if (id > max_id) max_id = id;
    }
    if (count && max_id >= 16 * (uint64_t)count + 65536)
        return bad(L, "%s: its ids go up to %llu for %zu entries: too sparse", vp.s, (unsigned long long)max_id,
                   count);
    VKF_TRY(model_alloc_ids(m, count ? (size_t)max_id + 1 : 0));
    m->size = count;
    const char *k2;
    size_t klen;
    json_object_keylen_foreach(v, k2, klen, val) {
        int32_t id = (int32_t)json_integer_value(val);
        char qb[96], qb2[96];
        if (klen > VKF_HFTOK_MAX_TOKEN_BYTES)
            return bad(L, "%s: a token of %zu bytes, more than the %u accepted", vp.s, klen, VKF_HFTOK_MAX_TOKEN_BYTES);
        if (m->tok[id])
            return bad(L, "%s: %s and %s both have id %d", vp.s, q(qb, sizeof qb, m->tok[id], m->tok_len[id]),
                       q(qb2, sizeof qb2, k2, klen), id);
        if (!(m->tok[id] = dup_bytes(k2, klen))) return OOM();
        m->tok_len[id] = (uint32_t)klen;
        if (!smap_set(&b->vocab, m->tok[id], klen, id, NULL)) return OOM();
    }
    find_byte_ids(&b->vocab, b->byte_id);

    /* merges: ["a b", ...] or [["a", "b"], ...] */
    json_t *ms;
    VKF_TRY(get_array(L, j, path, "merges", VKF_HFTOK_MAX_MERGES, &ms));
    jpath mp = jp_key(path, "merges");
    size_t rank = 0;
    bool strings = json_array_size(ms) && json_is_string(json_array_get(ms, 0));
    buf joined = {0};
    vkf_status st = VKF_OK;
    for (size_t i = 0; i < json_array_size(ms) && st == VKF_OK; i++) {
        json_t *e = json_array_get(ms, i);
        jpath p = jp_index(mp.s, i);
        const char *a, *c;
        size_t alen, clen;
        char qb[96], qb2[96];
        if (strings) {
            if (!json_is_string(e)) {
                st = bad(L, "%s is %s, where merges[0] is a string", p.s, jtype(e));
                break;
            }
            const char *s = json_string_value(e);
            size_t n = json_string_length(e);
            if (n >= 8 && memcmp(s, "#version", 8) == 0) continue;
            const char *sp = memchr(s, ' ', n);
            if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s))) {
                st = bad(L, "%s %s is not two tokens separated by one space", p.s, q(qb, sizeof qb, s, n));
                break;
            }
            a = s, alen = (size_t)(sp - s), c = sp + 1, clen = n - alen - 1;
        } else {
            if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
                !json_is_string(json_array_get(e, 1))) {
                st = bad(L, "%s is %s, not a pair of strings", p.s, jtype(e));
                break;
            }
            a = json_string_value(json_array_get(e, 0)), alen = json_string_length(json_array_get(e, 0));
            c = json_string_value(json_array_get(e, 1)), clen = json_string_length(json_array_get(e, 1));
        }
        int32_t aid = smap_get(&b->vocab, a, alen), cid = smap_get(&b->vocab, c, clen);
        if (aid < 0 || cid < 0) {
            st = bad(L, "%s: %s is not in the vocabulary", p.s,
                     aid < 0 ? q(qb, sizeof qb, a, alen) : q(qb, sizeof qb, c, clen));
            break;
        }
        size_t skip = b->has_prefix ? b->prefix_len : 0;
        if (skip > clen || (skip < clen && ((unsigned char)c[skip] & 0xc0) == 0x80)) {
            st = bad(L, "%s: %s is shorter than the continuing_subword_prefix %s (tokenizers panics here)", p.s,
                     q(qb, sizeof qb, c, clen), q(qb2, sizeof qb2, b->prefix, b->prefix_len));
            break;
        }
        joined.n = 0;
        if (!buf_put(&joined, a, alen) || !buf_put(&joined, c + skip, clen - skip)) {
            st = OOM();
            break;
        }
        int32_t nid = smap_get(&b->vocab, joined.b, joined.n);
        if (nid < 0) {
            st = bad(L, "%s: the merged token %s is not in the vocabulary", p.s, q(qb, sizeof qb, joined.b, joined.n));
            break;
        }
        if (nid == aid || nid == cid) {
            st = bad(L, "%s: merging %s and %s gives %s again: a cycle", p.s, q(qb, sizeof qb, a, alen),
                     q(qb2, sizeof qb2, c, clen), nid == aid ? "the left token" : "the right token");
            break;
        }
        if (!umap_set(&b->merges, (uint64_t)aid << 32 | (uint32_t)cid, (uint64_t)rank << 32 | (uint32_t)nid))
            st = OOM();
        rank++;
    }
    free(joined.b);
    return st;
}

static vkf_status load_unigram(const ld *L, const json_t *j, const char *path, model *m)
{
    unigram *u = &m->u;
    m->kind = M_UNIGRAM;
    json_t *a;
    VKF_TRY(get_array(L, j, path, "vocab", VKF_HFTOK_MAX_VOCAB, &a));
    jpath vp = jp_key(path, "vocab");
    size_t n = json_array_size(a);
    if (n == 0) return bad(L, "%s is empty", vp.s);
    uint64_t unk;
    json_t *uj = json_object_get(j, "unk_id");
    u->unk_id = -1;
    if (uj && !json_is_null(uj)) {
        VKF_TRY(get_uint(L, j, path, "unk_id", true, VKF_HFTOK_MAX_ID, 0, &unk));
        if (unk >= n) return bad(L, "%s.unk_id %llu is not an id of the %zu pieces", path, (unsigned long long)unk, n);
        u->unk_id = (int32_t)unk;
    }
    VKF_TRY(get_bool(L, j, path, "byte_fallback", false, &u->byte_fallback));
    VKF_TRY(model_alloc_ids(m, n));
    m->size = n;
    if (!(u->score = malloc(n * sizeof *u->score)) || !trie_init(&u->pieces)) return OOM();
    u->min_score = INFINITY;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        jpath p = jp_index(vp.s, i);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
            !json_is_number(json_array_get(e, 1)))
            return bad(L, "%s is %s, not a [piece, score] pair", p.s, jtype(e));
        json_t *pj = json_array_get(e, 0);
        size_t len = json_string_length(pj);
        if (len > VKF_HFTOK_MAX_TOKEN_BYTES)
            return bad(L, "%s: a piece of %zu bytes, more than the %u accepted", p.s, len, VKF_HFTOK_MAX_TOKEN_BYTES);
        if (!(m->tok[i] = dup_bytes(json_string_value(pj), len))) return OOM();
        m->tok_len[i] = (uint32_t)len;
        u->score[i] = json_number_value(json_array_get(e, 1));
        if (u->score[i] < u->min_score) u->min_score = u->score[i];
        if (!smap_set(&u->ids, m->tok[i], len, (int32_t)i, NULL) ||
            !trie_add(&u->pieces, m->tok[i], len, (int32_t)i, /*keep_first=*/false))
            return OOM();
    }
    find_byte_ids(&u->ids, u->byte_id);
    return VKF_OK;
}

static vkf_status load_model(const ld *L, const json_t *j, model *m)
{
    memset(m, 0, sizeof *m);
    const char *type;
    if (!j) return bad(L, "model is missing");
    VKF_TRY(get_type(L, j, "model", &type));
    if (strcmp(type, "BPE") == 0) return load_bpe(L, j, "model", m);
    if (strcmp(type, "Unigram") == 0) return load_unigram(L, j, "model", m);
    return unsupported(L, "model", type);
}

/* An id list under construction. */
typedef struct ids {
    int32_t *v;
    size_t n, cap;
} ids;

static bool ids_add(ids *o, int32_t id)
{
    if (!grow((void **)&o->v, &o->cap, o->n + 1, sizeof *o->v)) return false;
    o->v[o->n++] = id;
    return true;
}

/* ---- BPE */

typedef struct sym {
    int32_t id;
    int32_t prev, next;         /* -1: none */
    uint32_t len;               /* bytes; 0: merged away */
} sym;

typedef struct merge_item {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
} merge_item;

/* min-heap on (rank, pos), as tokenizers' BinaryHeap of Merge */
static bool mi_less(merge_item a, merge_item b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }

static void heap_push(merge_item *h, size_t *n, merge_item x)
{
    size_t i = (*n)++;
    while (i > 0 && mi_less(x, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static merge_item heap_pop(merge_item *h, size_t *n)
{
    merge_item top = h[0], x = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && mi_less(h[c + 1], h[c])) c++;
        if (!mi_less(h[c], x)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

typedef struct word {
    sym *v;
    size_t n, cap;
} word;

static bool word_add(word *w, int32_t id, size_t len)
{
    if (!grow((void **)&w->v, &w->cap, w->n + 1, sizeof *w->v)) return false;
    int32_t prev = -1;
    if (w->n) {
        w->v[w->n - 1].next = (int32_t)w->n;
        prev = (int32_t)w->n - 1;
    }
    w->v[w->n++] = (sym){id, prev, -1, (uint32_t)len};
    return true;
}

static bool bpe_pair(const bpe *b, int32_t l, int32_t r, uint32_t *rank, int32_t *new_id)
{
    uint64_t v;
    if (!umap_get(&b->merges, (uint64_t)l << 32 | (uint32_t)r, &v)) return false;
    *rank = (uint32_t)(v >> 32);
    *new_id = (int32_t)(uint32_t)v;
    return true;
}

/* Word::merge_all without dropout. */
static vkf_status bpe_merge_all(const bpe *b, word *w)
{
    merge_item *h = malloc((w->n ? w->n : 1) * 2 * sizeof *h);
    size_t hn = 0, hcap = (w->n ? w->n : 1) * 2;
    if (!h) return OOM();
    uint32_t rank;
    int32_t nid;
    for (size_t i = 0; i + 1 < w->n; i++)
        if (bpe_pair(b, w->v[i].id, w->v[i + 1].id, &rank, &nid)) heap_push(h, &hn, (merge_item){rank, (uint32_t)i, nid});
    while (hn) {
        merge_item top = heap_pop(h, &hn);
        sym *cur = &w->v[top.pos];
        if (cur->len == 0 || cur->next == -1) continue;
        size_t next_pos = (size_t)cur->next;
        sym right = w->v[next_pos];
        if (!bpe_pair(b, cur->id, right.id, &rank, &nid) || nid != top.new_id) continue;
        cur->id = top.new_id;
        cur->len += right.len;
        cur->next = right.next;
        w->v[next_pos].len = 0;
        if (right.next > -1 && (size_t)right.next < w->n) w->v[right.next].prev = (int32_t)top.pos;
        if (hn + 2 > hcap) {
            merge_item *h2 = xrealloc_array(h, hcap * 2, sizeof *h);
            if (!h2) {
                free(h);
                return OOM();
            }
            h = h2;
            hcap *= 2;
        }
        if (cur->prev >= 0 && bpe_pair(b, w->v[cur->prev].id, cur->id, &rank, &nid))
            heap_push(h, &hn, (merge_item){rank, (uint32_t)cur->prev, nid});
        if (cur->next >= 0 && (size_t)cur->next < w->n && bpe_pair(b, cur->id, w->v[cur->next].id, &rank, &nid))
            heap_push(h, &hn, (merge_item){rank, top.pos, nid});
    }
    free(h);
    return VKF_OK;
}

static vkf_status bpe_unk_id(const model *m, int32_t *out)
{
    *out = smap_get(&m->b.vocab, m->b.unk, m->b.unk_len);
    if (*out >= 0) return VKF_OK;
    char qb[96];
    return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: the text needs the unk_token %s, which is not in the "
                    "vocabulary", q(qb, sizeof qb, m->b.unk, m->b.unk_len));
}

static vkf_status bpe_tokenize(const model *m, const char *s, size_t len, ids *out, buf *scratch, word *w)
{
    const bpe *b = &m->b;
    if (len == 0) return VKF_OK;
    if (b->ignore_merges) {
        int32_t id = smap_get(&b->vocab, s, len);
        if (id >= 0) return ids_add(out, id) ? VKF_OK : OOM();
    }
    w->n = 0;
    bool have_unk = false;
    int32_t unk_id = -1;
    size_t unk_len = 0;
    for (size_t i = 0; i < len;) {
        size_t start = i;
        u8_next(s, &i);
        size_t byte_len = i - start;
        bool first = start == 0, last = i == len;
        scratch->n = 0;
        if (!first && b->has_prefix && !buf_put(scratch, b->prefix, b->prefix_len)) return OOM();
        if (!buf_put(scratch, s + start, byte_len)) return OOM();
        if (last && b->has_suffix && !buf_put(scratch, b->suffix, b->suffix_len)) return OOM();
        int32_t id = smap_get(&b->vocab, scratch->b, scratch->n);
        if (id >= 0) {
            if (have_unk) {
                if (!word_add(w, unk_id, unk_len)) return OOM();
                have_unk = false;
            }
            if (!word_add(w, id, byte_len)) return OOM();
            continue;
        }
        if (b->byte_fallback) {
            bool all = true;
            for (size_t k = 0; k < scratch->n && all; k++) all = b->byte_id[(unsigned char)scratch->b[k]] >= 0;
            if (all) {
                for (size_t k = 0; k < scratch->n; k++)
                    if (!word_add(w, b->byte_id[(unsigned char)scratch->b[k]], 1)) return OOM();
                continue;
            }
        }
        if (b->has_unk) {
            if (have_unk && b->fuse_unk) {
                unk_len += byte_len;
            } else {
                if (have_unk && !word_add(w, unk_id, unk_len)) return OOM();
                VKF_TRY(bpe_unk_id(m, &unk_id));
                have_unk = true;
                unk_len = byte_len;
            }
        }
    }
    if (have_unk && !word_add(w, unk_id, unk_len)) return OOM();
    VKF_TRY(bpe_merge_all(b, w));
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].len && !ids_add(out, w->v[i].id)) return OOM();
    return VKF_OK;
}

/* ---- Unigram */

#define UNIGRAM_UNK_PENALTY 10.0

typedef struct node {
    double score;
    int64_t starts_at;          /* -1: none */
    int32_t id;
} node;

static vkf_status unigram_piece_ids(const model *m, const char *s, size_t len, ids *out)
{
    const unigram *u = &m->u;
    int32_t id = smap_get(&u->ids, s, len);
    if (id >= 0) return ids_add(out, id) ? VKF_OK : OOM();
    if (u->byte_fallback) {
        bool all = true;
        for (size_t k = 0; k < len && all; k++) all = u->byte_id[(unsigned char)s[k]] >= 0;
        if (all) {
            for (size_t k = 0; k < len; k++)
                if (!ids_add(out, u->byte_id[(unsigned char)s[k]])) return OOM();
            return VKF_OK;
        }
    }
    if (u->unk_id < 0)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: the text has a piece that is not in the vocabulary and "
                        "the Unigram model has no unk_id");
    return ids_add(out, u->unk_id) ? VKF_OK : OOM();
}

/* Unigram::encode_optimized (the best path by score, unknown characters at the
 * lowest score less 10), unknown runs fused, then the pieces to ids. */
static vkf_status unigram_tokenize(const model *m, const char *s, size_t len, ids *out, node **best_buf,
                                   size_t *best_cap)
{
    const unigram *u = &m->u;
    if (len == 0) return VKF_OK;
    if (!grow((void **)best_buf, best_cap, len + 1, sizeof **best_buf)) return OOM();
    node *best = *best_buf;
    for (size_t i = 0; i <= len; i++) best[i] = (node){0.0, -1, 0};
    double unk_score = u->min_score - UNIGRAM_UNK_PENALTY;
    for (size_t at = 0; at < len;) {
        double here = best[at].score;
        size_t mblen = u8_len((unsigned char)s[at]);
        bool single = false;
        uint64_t nd = 0;
        for (size_t k = at; k < len; k++) {
            if (!trie_step(&u->pieces, &nd, (unsigned char)s[k])) break;
            int32_t id = u->pieces.value[nd];
            if (id < 0) continue;
            size_t key_pos = k + 1;
            double cand = u->score[id] + here;
            if (best[key_pos].starts_at < 0 || cand > best[key_pos].score)
                best[key_pos] = (node){cand, (int64_t)at, id};
            if (key_pos - at == mblen) single = true;
        }
        if (!single) {
            double cand = unk_score + here;
            if (u->unk_id < 0)
                return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: the text has a character that is not in the "
                                "vocabulary and the Unigram model has no unk_id");
            if (best[at + mblen].starts_at < 0 || cand > best[at + mblen].score)
                best[at + mblen] = (node){cand, (int64_t)at, u->unk_id};
        }
        at += mblen;
    }
    /* back from the end: the pieces in reverse, fused unknown runs as one */
    size_t end = len, unk_end = 0;
    bool in_unk = false;
    typedef struct span { size_t a, b; } span;
    span *sp = NULL;
    size_t nsp = 0, spcap = 0;
    while (end > 0) {
        size_t start = (size_t)best[end].starts_at;
        if (u->unk_id >= 0 && best[end].id == u->unk_id) {
            if (!in_unk) unk_end = end, in_unk = true;
        } else {
            if (in_unk) {
                if (!grow((void **)&sp, &spcap, nsp + 1, sizeof *sp)) goto oom;
                sp[nsp++] = (span){end, unk_end};
                in_unk = false;
            }
            if (!grow((void **)&sp, &spcap, nsp + 1, sizeof *sp)) goto oom;
            sp[nsp++] = (span){start, end};
        }
        end = start;
    }
    if (in_unk) {
        if (!grow((void **)&sp, &spcap, nsp + 1, sizeof *sp)) goto oom;
        sp[nsp++] = (span){0, unk_end};
    }
    for (size_t i = nsp; i-- > 0;) {
        vkf_status st = unigram_piece_ids(m, s + sp[i].a, sp[i].b - sp[i].a, out);
        if (st != VKF_OK) {
            free(sp);
            return st;
        }
    }
    free(sp);
    return VKF_OK;
oom:
    free(sp);
    return OOM();
}

/* ============================================================= added tokens */

typedef struct added {
    char *content;              /* owned */
    size_t len;
    char *shown;                /* owned: what id_to_token gives (a normalized token: its normalized form) */
    size_t shown_len;
    int32_t id;
    bool single_word, lstrip, rstrip, normalized, special;
} added;

/* regex's \w (Alphabetic, marks, decimal digits, connector punctuation,
 * Join_Control): what single_word tokens may not touch. */
static regex_t *word_re;
static pthread_once_t word_re_once = PTHREAD_ONCE_INIT;

static void word_re_setup(void)
{
    pthread_once(&onig_once, onig_setup);
    if (!onig_ready) return;
    static const char pat[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
    OnigErrorInfo einfo;
    if (onig_new(&word_re, (const OnigUChar *)pat, (const OnigUChar *)pat + sizeof pat - 1, ONIG_OPTION_NONE,
                 ONIG_ENCODING_UTF8, ONIG_SYNTAX_RUBY, &einfo) != ONIG_NORMAL)
        word_re = NULL;
}

static bool is_word_char(const char *s, size_t len)
{
    pthread_once(&word_re_once, word_re_setup);
    if (!word_re || len == 0) return false;
    return onig_match(word_re, (const OnigUChar *)s, (const OnigUChar *)s + len, (const OnigUChar *)s, NULL,
                      ONIG_OPTION_NONE) > 0;
}

/* The first match of the tokens of trie tr in s at or after from, leftmost then
 * longest (Aho-Corasick's LeftmostLongest); false when none. */
static bool added_find(const trie *tr, const char *s, size_t len, size_t from, size_t *ms, size_t *me, int32_t *idx)
{
    for (size_t i = from; i < len; i++) {
        unsigned char c0 = (unsigned char)s[i];
        if (!(tr->first[c0 >> 3] & (1u << (c0 & 7)))) continue;
        uint64_t nd = 0;
        bool found = false;
        for (size_t k = i; k < len; k++) {
            if (!trie_step(tr, &nd, (unsigned char)s[k])) break;
            if (tr->value[nd] >= 0) {
                found = true;
                *me = k + 1;
                *idx = tr->value[nd];
            }
        }
        if (found) {
            *ms = i;
            return true;
        }
    }
    return false;
}

/* AddedVocabulary::find_matches: splits of s [start, end) with an added token's
 * index or -1. */
typedef struct amatch {
    size_t start, end;
    int32_t idx;
} amatch;

static vkf_status added_matches(const added *tokens, const trie *tr, const char *s, size_t len, amatch **out,
                                size_t *n, size_t *cap)
{
    *n = 0;
    size_t start_offset = 0, from = 0, ms, me;
    int32_t idx;
    while (tr->nodes > 1 && added_find(tr, s, len, from, &ms, &me, &idx)) {
        from = me;
        const added *a = &tokens[idx];
        size_t start = ms, stop = me;
        if (a->single_word) {
            bool start_space = start == 0;
            if (!start_space) {
                size_t b = start - 1;
                while (b > 0 && ((unsigned char)s[b] & 0xc0) == 0x80) b--;
                start_space = !is_word_char(s + b, start - b);
            }
            bool stop_space = stop == len || !is_word_char(s + stop, u8_len((unsigned char)s[stop]));
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t b = ns - 1;
                while (b > 0 && ((unsigned char)s[b] & 0xc0) == 0x80) b--;
                size_t k = b;
                if (!is_ws(u8_next(s, &k))) break;
                ns = b;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            while (stop < len) {
                size_t k = stop;
                if (!is_ws(u8_next(s, &k))) break;
                stop = k;
            }
        }
        if (!grow((void **)out, cap, *n + 2, sizeof **out)) return OOM();
        if (start > start_offset) (*out)[(*n)++] = (amatch){start_offset, start, -1};
        (*out)[(*n)++] = (amatch){start, stop, idx};
        start_offset = stop;
    }
    if (start_offset != len) {
        if (!grow((void **)out, cap, *n + 1, sizeof **out)) return OOM();
        (*out)[(*n)++] = (amatch){start_offset, len, -1};
    }
    return VKF_OK;
}

/* ========================================================== post-processors */

typedef enum ppkind { PP_SEQUENCE, PP_TEMPLATE, PP_ROBERTA, PP_BERT, PP_BYTELEVEL } ppkind;

typedef struct titem {
    bool is_sequence;           /* $A */
    int32_t *ids;               /* owned: a special token's ids */
    size_t n;
} titem;

typedef struct postproc {
    ppkind kind;
    struct postproc *kids;      /* owned: Sequence */
    size_t n_kids;
    titem *single;              /* owned: Template's single-sequence items */
    size_t n_single;
    int32_t cls, sep;           /* RoBERTa, BERT */
} postproc;

static void postproc_free(postproc *p)
{
    for (size_t i = 0; i < p->n_kids; i++) postproc_free(&p->kids[i]);
    free(p->kids);
    for (size_t i = 0; i < p->n_single; i++) free(p->single[i].ids);
    free(p->single);
    memset(p, 0, sizeof *p);
}

/* ["token", id] of RoBERTa/BERT processing */
static vkf_status get_token_pair(const ld *L, const json_t *j, const char *path, const char *key, int32_t *id)
{
    json_t *v = json_object_get(j, key);
    jpath p = jp_key(path, key);
    if (!v) return bad(L, "%s is missing", p.s);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_string(json_array_get(v, 0)))
        return bad(L, "%s is %s, not a [token, id] pair", p.s, jtype(v));
    uint64_t x;
    VKF_TRY(get_uint_v(L, json_array_get(v, 1), jp_index(p.s, 1).s, VKF_HFTOK_MAX_ID, &x));
    *id = (int32_t)x;
    return VKF_OK;
}

/* Checks one template (single or pair): items of {"SpecialToken": {"id", "type_id"}}
 * naming special_tokens, or {"Sequence": {"id": "A"|"B", "type_id"}}; fills the
 * single-sequence items when out is not NULL. */
static vkf_status load_template(const ld *L, const json_t *j, const char *path, const char *key,
                                const json_t *specials, bool pair, postproc *out)
{
    json_t *a;
    VKF_TRY(get_array(L, j, path, key, VKF_HFTOK_MAX_ITEMS, &a));
    jpath tp = jp_key(path, key);
    if (out && json_array_size(a) && !(out->single = calloc(json_array_size(a), sizeof *out->single))) return OOM();
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *e = json_array_get(a, i);
        jpath p = jp_index(tp.s, i);
        if (!json_is_object(e) || json_object_size(e) != 1)
            return bad(L, "%s is %s, not {\"SpecialToken\": ...} or {\"Sequence\": ...}", p.s, jtype(e));
        json_t *sp = json_object_get(e, "SpecialToken"), *sq = json_object_get(e, "Sequence");
        json_t *body = sp ? sp : sq;
        if (!body) return bad(L, "%s is neither {\"SpecialToken\": ...} nor {\"Sequence\": ...}", p.s);
        jpath bp = jp_key(p.s, sp ? "SpecialToken" : "Sequence");
        if (!json_is_object(body)) return bad(L, "%s is %s, not an object", bp.s, jtype(body));
        const char *id;
        size_t n;
        uint64_t type_id;
        VKF_TRY(get_str(L, body, bp.s, "id", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &id, &n));
        VKF_TRY(get_uint(L, body, bp.s, "type_id", false, UINT32_MAX, 0, &type_id));
        char qb[96];
        titem item = {0};
        if (sq) {
            if (strcmp(id, "A") != 0 && strcmp(id, "B") != 0)
                return bad(L, "%s.id %s is not A or B", bp.s, q(qb, sizeof qb, id, n));
            if (!pair && strcmp(id, "B") == 0) return bad(L, "%s: the single-sequence template names B", bp.s);
            item.is_sequence = true;
        } else {
            json_t *st = json_object_getn(specials, id, n);
            if (!st) return bad(L, "%s.id %s is not one of special_tokens", bp.s, q(qb, sizeof qb, id, n));
            if (out) {
                json_t *ids = json_object_get(st, "ids");
                item.n = json_array_size(ids);
                if (item.n && !(item.ids = malloc(item.n * sizeof *item.ids))) return OOM();
                for (size_t k = 0; k < item.n; k++) item.ids[k] = (int32_t)json_integer_value(json_array_get(ids, k));
            }
        }
        if (out) out->single[out->n_single++] = item;
    }
    return VKF_OK;
}

static vkf_status load_postproc(const ld *L, const json_t *j, const char *path, int depth, postproc *out)
{
    memset(out, 0, sizeof *out);
    const char *type;
    VKF_TRY(get_type(L, j, path, &type));
    bool b;
    if (strcmp(type, "Sequence") == 0) {
        if (depth >= VKF_HFTOK_MAX_DEPTH) return bad(L, "%s: Sequences nest deeper than %d", path, VKF_HFTOK_MAX_DEPTH);
        json_t *a;
        VKF_TRY(get_array(L, j, path, "processors", VKF_HFTOK_MAX_ITEMS, &a));
        out->kind = PP_SEQUENCE;
        if (json_array_size(a) && !(out->kids = calloc(json_array_size(a), sizeof *out->kids))) return OOM();
        jpath p = jp_key(path, "processors");
        for (size_t i = 0; i < json_array_size(a); i++) {
            vkf_status st = load_postproc(L, json_array_get(a, i), jp_index(p.s, i).s, depth + 1, &out->kids[i]);
            out->n_kids = i + 1;
            if (st != VKF_OK) return st;
        }
    } else if (strcmp(type, "TemplateProcessing") == 0) {
        out->kind = PP_TEMPLATE;
        json_t *specials = json_object_get(j, "special_tokens");
        jpath sp = jp_key(path, "special_tokens");
        if (!specials) return bad(L, "%s is missing", sp.s);
        if (!json_is_object(specials)) return bad(L, "%s is %s, not an object", sp.s, jtype(specials));
        if (json_object_size(specials) > VKF_HFTOK_MAX_ITEMS)
            return bad(L, "%s has %zu entries, more than the %u accepted", sp.s, json_object_size(specials),
                       VKF_HFTOK_MAX_ITEMS);
        const char *key;
        size_t klen;
        json_t *v;
        json_object_keylen_foreach(specials, key, klen, v) {
            char qb[96];
            jpath p;
            if (snprintf(p.s, sizeof p.s, "%s[%s]", sp.s, q(qb, sizeof qb, key, klen)) >= (int)sizeof p.s)
                p.s[sizeof p.s - 2] = '~';
            if (!json_is_object(v)) return bad(L, "%s is %s, not an object", p.s, jtype(v));
            const char *s;
            size_t n;
            VKF_TRY(get_str(L, v, p.s, "id", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
            if (n != klen || memcmp(s, key, n) != 0) return bad(L, "%s.id is not its key", p.s);
            json_t *ids, *toks;
            VKF_TRY(get_array(L, v, p.s, "ids", VKF_HFTOK_MAX_ITEMS, &ids));
            VKF_TRY(get_array(L, v, p.s, "tokens", VKF_HFTOK_MAX_ITEMS, &toks));
            if (json_array_size(ids) != json_array_size(toks))
                return bad(L, "%s has %zu ids but %zu tokens", p.s, json_array_size(ids), json_array_size(toks));
            jpath ip = jp_key(p.s, "ids");
            for (size_t k = 0; k < json_array_size(ids); k++) {
                uint64_t x;
                VKF_TRY(get_uint_v(L, json_array_get(ids, k), jp_index(ip.s, k).s, VKF_HFTOK_MAX_ID, &x));
                if (!json_is_string(json_array_get(toks, k)))
                    return bad(L, "%s.tokens[%zu] is %s, not a string", p.s, k, jtype(json_array_get(toks, k)));
            }
        }
        VKF_TRY(load_template(L, j, path, "single", specials, false, out));
        if (json_object_get(j, "pair")) VKF_TRY(load_template(L, j, path, "pair", specials, true, NULL));
    } else if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
        out->kind = type[0] == 'R' ? PP_ROBERTA : PP_BERT;
        VKF_TRY(get_token_pair(L, j, path, "cls", &out->cls));
        VKF_TRY(get_token_pair(L, j, path, "sep", &out->sep));
        if (out->kind == PP_ROBERTA) {
            VKF_TRY(get_bool(L, j, path, "trim_offsets", true, &b));
            VKF_TRY(get_bool(L, j, path, "add_prefix_space", true, &b));
        }
    } else if (strcmp(type, "ByteLevel") == 0) {
        out->kind = PP_BYTELEVEL;   /* offsets only */
        VKF_TRY(get_bool(L, j, path, "add_prefix_space", true, &b));
        VKF_TRY(get_bool(L, j, path, "trim_offsets", true, &b));
        VKF_TRY(get_bool(L, j, path, "use_regex", true, &b));
    } else {
        return unsupported(L, path, type);
    }
    return VKF_OK;
}

/* The single-sequence post-processing of *x (add_special only). */
static vkf_status postproc_apply(const postproc *p, ids *x)
{
    ids o = {0};
    switch (p->kind) {
    case PP_SEQUENCE:
        for (size_t i = 0; i < p->n_kids; i++) VKF_TRY(postproc_apply(&p->kids[i], x));
        return VKF_OK;
    case PP_BYTELEVEL: return VKF_OK;
    case PP_ROBERTA:
    case PP_BERT:
        if (!ids_add(&o, p->cls)) goto oom;
        for (size_t i = 0; i < x->n; i++)
            if (!ids_add(&o, x->v[i])) goto oom;
        if (!ids_add(&o, p->sep)) goto oom;
        break;
    case PP_TEMPLATE:
        for (size_t k = 0; k < p->n_single; k++) {
            const titem *it = &p->single[k];
            const int32_t *v = it->is_sequence ? x->v : it->ids;
            size_t n = it->is_sequence ? x->n : it->n;
            for (size_t i = 0; i < n; i++)
                if (!ids_add(&o, v[i])) goto oom;
        }
        break;
    }
    free(x->v);
    *x = o;
    return VKF_OK;
oom:
    free(o.v);
    return OOM();
}

/* ================================================================ decoders */

typedef enum dkind { D_SEQUENCE, D_METASPACE, D_BYTELEVEL, D_REPLACE, D_STRIP, D_FUSE, D_BYTEFALLBACK } dkind;

typedef struct decoder {
    dkind kind;
    struct decoder *kids;       /* owned: Sequence */
    size_t n_kids;
    uint32_t ch;                /* Metaspace's replacement, Strip's content */
    prepend_scheme scheme;      /* Metaspace */
    pattern pat;                /* Replace */
    char *content;              /* owned: Replace */
    size_t content_len;
    uint64_t start, stop;       /* Strip */
} decoder;

static void decoder_free(decoder *d)
{
    for (size_t i = 0; i < d->n_kids; i++) decoder_free(&d->kids[i]);
    free(d->kids);
    pattern_free(&d->pat);
    free(d->content);
    memset(d, 0, sizeof *d);
}

static vkf_status load_decoder(const ld *L, const json_t *j, const char *path, int depth, decoder *out)
{
    memset(out, 0, sizeof *out);
    const char *type;
    VKF_TRY(get_type(L, j, path, &type));
    bool b;
    if (strcmp(type, "Sequence") == 0) {
        if (depth >= VKF_HFTOK_MAX_DEPTH) return bad(L, "%s: Sequences nest deeper than %d", path, VKF_HFTOK_MAX_DEPTH);
        json_t *a;
        VKF_TRY(get_array(L, j, path, "decoders", VKF_HFTOK_MAX_ITEMS, &a));
        out->kind = D_SEQUENCE;
        if (json_array_size(a) && !(out->kids = calloc(json_array_size(a), sizeof *out->kids))) return OOM();
        jpath p = jp_key(path, "decoders");
        for (size_t i = 0; i < json_array_size(a); i++) {
            vkf_status st = load_decoder(L, json_array_get(a, i), jp_index(p.s, i).s, depth + 1, &out->kids[i]);
            out->n_kids = i + 1;
            if (st != VKF_OK) return st;
        }
    } else if (strcmp(type, "Metaspace") == 0) {
        out->kind = D_METASPACE;
        VKF_TRY(get_char(L, j, path, "replacement", true, 0x2581, &out->ch));
        VKF_TRY(get_scheme(L, j, path, &out->scheme));
        VKF_TRY(get_bool(L, j, path, "split", true, &b));
    } else if (strcmp(type, "ByteLevel") == 0) {
        out->kind = D_BYTELEVEL;
        VKF_TRY(get_bool(L, j, path, "add_prefix_space", true, &b));
        VKF_TRY(get_bool(L, j, path, "trim_offsets", true, &b));
        VKF_TRY(get_bool(L, j, path, "use_regex", true, &b));
    } else if (strcmp(type, "Replace") == 0) {
        out->kind = D_REPLACE;
        VKF_TRY(load_pattern(L, j, path, "pattern", &out->pat));
        const char *s;
        size_t n;
        VKF_TRY(get_str(L, j, path, "content", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &s, &n));
        if (!(out->content = dup_bytes(s, n))) return OOM();
        out->content_len = n;
    } else if (strcmp(type, "Strip") == 0) {
        out->kind = D_STRIP;
        VKF_TRY(get_char(L, j, path, "content", true, ' ', &out->ch));
        VKF_TRY(get_uint(L, j, path, "start", true, UINT32_MAX, 0, &out->start));
        VKF_TRY(get_uint(L, j, path, "stop", true, UINT32_MAX, 0, &out->stop));
    } else if (strcmp(type, "Fuse") == 0) {
        out->kind = D_FUSE;
    } else if (strcmp(type, "ByteFallback") == 0) {
        out->kind = D_BYTEFALLBACK;
    } else {
        return unsupported(L, path, type);
    }
    return VKF_OK;
}

/* A list of token strings (each owned, NUL-terminated). */
typedef struct toks {
    buf *v;
    size_t n, cap;
} toks;

static void toks_free(toks *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->v[i].b);
    free(t->v);
    memset(t, 0, sizeof *t);
}

/* Appends an empty token and returns it. */
static buf *toks_new(toks *t)
{
    if (!grow((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v)) return NULL;
    buf *b = &t->v[t->n++];
    memset(b, 0, sizeof *b);
    if (!buf_put(b, "", 0)) return NULL;
    return b;
}

static bool toks_add(toks *t, const char *s, size_t n)
{
    buf *b = toks_new(t);
    return b && buf_put(b, s, n);
}

static vkf_status decoder_apply(const decoder *d, toks *t)
{
    toks o = {0};
    switch (d->kind) {
    case D_SEQUENCE:
        for (size_t i = 0; i < d->n_kids; i++) VKF_TRY(decoder_apply(&d->kids[i], t));
        return VKF_OK;
    case D_METASPACE:
        for (size_t i = 0; i < t->n; i++) {
            buf *b = toks_new(&o);
            if (!b) goto oom;
            for (size_t k = 0; k < t->v[i].n;) {
                size_t s0 = k;
                uint32_t c = u8_next(t->v[i].b, &k);
                if (c != d->ch) {
                    if (!buf_put(b, t->v[i].b + s0, k - s0)) goto oom;
                } else if (!(i == 0 && d->scheme != PS_NEVER) && !buf_put(b, " ", 1)) {
                    goto oom;
                }
            }
        }
        break;
    case D_BYTELEVEL: {
        pthread_once(&byte_chars_once, byte_chars_setup);
        buf raw = {0};
        for (size_t i = 0; i < t->n; i++) {
            const buf *tk = &t->v[i];
            size_t start = raw.n;
            bool all = true;
            for (size_t k = 0; k < tk->n && all;) {
                uint32_t c = u8_next(tk->b, &k);
                if (c < 0x144 && char_bytes[c] >= 0) {
                    unsigned char by = (unsigned char)char_bytes[c];
                    if (!buf_put(&raw, &by, 1)) goto oom_raw;
                } else {
                    all = false;
                }
            }
            if (!all) {
                raw.n = start;
                if (!buf_put(&raw, tk->b, tk->n)) goto oom_raw;
            }
        }
        buf *b = toks_new(&o);
        if (!b || !u8_lossy(b, raw.b ? raw.b : "", raw.n)) goto oom_raw;
        free(raw.b);
        break;
    oom_raw:
        free(raw.b);
        goto oom;
    }
    case D_REPLACE:
        for (size_t i = 0; i < t->n; i++) {
            nstr n;
            vkf_status st = nstr_from_input(&n, t->v[i].b, t->v[i].n);
            if (st == VKF_OK) st = nstr_replace(&n, &d->pat, d->content, d->content_len);
            if (st == VKF_OK && !toks_add(&o, n.s, n.len)) st = OOM();
            nstr_free(&n);
            if (st != VKF_OK) {
                toks_free(&o);
                return st;
            }
        }
        break;
    case D_STRIP: {
        size_t *at = NULL, at_cap = 0;   /* byte offset of each character, and the end */
        for (size_t i = 0; i < t->n; i++) {
            const buf *tk = &t->v[i];
            size_t chars = 0;
            for (size_t k = 0;; chars++) {
                if (!grow((void **)&at, &at_cap, chars + 1, sizeof *at)) goto oom_strip;
                at[chars] = k;
                if (k >= tk->n) break;
                k += u8_len((unsigned char)tk->b[k]);
            }
            /* start_cut, stop_cut in characters, as tokenizers' Strip */
            size_t start_cut = 0, stop_cut = chars;
            for (size_t c = 0; c < chars && c < d->start; c++) {
                size_t k = at[c];
                if (u8_next(tk->b, &k) != d->ch) break;
                start_cut = c + 1;
            }
            for (uint64_t c = 0; c < d->stop; c++) {
                if (c >= chars) {
                    free(at);
                    toks_free(&o);
                    return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: the decoder Strip (stop %llu) runs past the "
                                    "start of a token of %zu characters (tokenizers panics here)",
                                    (unsigned long long)d->stop, chars);
                }
                size_t index = chars - (size_t)c - 1, k = at[index];
                if (u8_next(tk->b, &k) != d->ch) break;
                stop_cut = index;
            }
            if (start_cut > stop_cut) {
                free(at);
                toks_free(&o);
                return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: the decoder Strip cuts a token of %zu "
                                "characters from both ends past each other (tokenizers panics here)", chars);
            }
            if (!toks_add(&o, tk->b + at[start_cut], at[stop_cut] - at[start_cut])) goto oom_strip;
        }
        free(at);
        break;
    oom_strip:
        free(at);
        goto oom;
    }
    case D_FUSE: {
        buf *b = toks_new(&o);
        if (!b) goto oom;
        for (size_t i = 0; i < t->n; i++)
            if (!buf_put(b, t->v[i].b, t->v[i].n)) goto oom;
        break;
    }
    case D_BYTEFALLBACK: {
        buf pending = {0};
        size_t npending = 0;
        for (size_t i = 0; i <= t->n; i++) {
            const buf *tk = i < t->n ? &t->v[i] : NULL;
            int byte = -1;
            if (tk && tk->n == 6 && memcmp(tk->b, "<0x", 3) == 0 && tk->b[5] == '>') {
                /* u8::from_str_radix(&token[3..5], 16): an optional '+', then hex */
                const char *h = tk->b + 3;
                int v0 = -1, v1 = -1;
                if (h[0] == '+') v0 = 0;
                else if (h[0] >= '0' && h[0] <= '9') v0 = h[0] - '0';
                else if ((h[0] | 0x20) >= 'a' && (h[0] | 0x20) <= 'f') v0 = (h[0] | 0x20) - 'a' + 10;
                if (h[1] >= '0' && h[1] <= '9') v1 = h[1] - '0';
                else if ((h[1] | 0x20) >= 'a' && (h[1] | 0x20) <= 'f') v1 = (h[1] | 0x20) - 'a' + 10;
                if (v0 >= 0 && v1 >= 0) byte = (h[0] == '+' ? 0 : v0 * 16) + v1;
            }
            if (byte >= 0) {
                unsigned char by = (unsigned char)byte;
                if (!buf_put(&pending, &by, 1)) goto oom_pending;
                npending++;
                continue;
            }
            if (npending) {
                if (u8_valid(pending.b, pending.n)) {
                    if (!toks_add(&o, pending.b, pending.n)) goto oom_pending;
                } else {
                    for (size_t k = 0; k < npending; k++)
                        if (!toks_add(&o, "\xef\xbf\xbd", 3)) goto oom_pending;
                }
                pending.n = 0;
                npending = 0;
            }
            if (tk && !toks_add(&o, tk->b, tk->n)) goto oom_pending;
        }
        free(pending.b);
        break;
    oom_pending:
        free(pending.b);
        goto oom;
    }
    }
    toks_free(t);
    *t = o;
    return VKF_OK;
oom:
    toks_free(&o);
    return OOM();
}

/* ================================================================ tokenizer */

struct vkf_hftok {
    model m;
    bool has_norm, has_pre, has_post, has_dec;
    norm normalizer;
    pretok pre;
    postproc post;
    decoder dec;
    added *added;               /* owned: the added tokens kept, in file order */
    size_t n_added;
    smap added_map;             /* content -> id (keys borrow added[].content) */
    umap added_by_id;           /* id -> index in added */
    smap special;               /* contents of the special tokens -> index */
    trie raw_trie, norm_trie;   /* token patterns (not normalized / normalized) -> index */
    uint32_t vocab_size;        /* highest id + 1 */
};

void vkf_hftok_free(vkf_hftok *t)
{
    if (!t) return;
    model_free(&t->m);
    norm_free(&t->normalizer);
    pretok_free(&t->pre);
    postproc_free(&t->post);
    decoder_free(&t->dec);
    for (size_t i = 0; i < t->n_added; i++) free(t->added[i].content), free(t->added[i].shown);
    free(t->added);
    free(t->added_map.slots);
    free(t->added_by_id.slots);
    free(t->special.slots);
    trie_free(&t->raw_trie);
    trie_free(&t->norm_trie);
    free(t);
}

static int32_t model_token_id(const model *m, const char *s, size_t n)
{
    return smap_get(m->kind == M_BPE ? &m->b.vocab : &m->u.ids, s, n);
}

/* The added tokens: ids as tokenizers' AddedVocabulary::add_tokens assigns them
 * (the id in the file is not read back: a token of the model's vocabulary keeps
 * its id there, others take the next id past the vocabulary and the added ones),
 * and the two tries. */
static vkf_status load_added(const ld *L, const json_t *root, vkf_hftok *t)
{
    json_t *a = json_object_get(root, "added_tokens");
    if (!a || json_is_null(a)) a = NULL;
    else if (!json_is_array(a)) return bad(L, "added_tokens is %s, not a list", jtype(a));
    size_t n = a ? json_array_size(a) : 0;
    if (n > VKF_HFTOK_MAX_ADDED) return bad(L, "added_tokens has %zu items, more than the %u accepted", n,
                                            VKF_HFTOK_MAX_ADDED);
    if (n && !(t->added = calloc(n, sizeof *t->added))) return OOM();
    bool any = false;
    int64_t max_added = -1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        jpath p = jp_index("added_tokens", i);
        if (!json_is_object(e)) return bad(L, "%s is %s, not an object", p.s, jtype(e));
        const char *c;
        size_t clen;
        uint64_t file_id;
        added tk = {0};
        VKF_TRY(get_uint(L, e, p.s, "id", true, VKF_HFTOK_MAX_ID, 0, &file_id));
        VKF_TRY(get_str(L, e, p.s, "content", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &c, &clen));
        VKF_TRY(get_bool(L, e, p.s, "single_word", false, &tk.single_word));
        VKF_TRY(get_bool(L, e, p.s, "lstrip", false, &tk.lstrip));
        VKF_TRY(get_bool(L, e, p.s, "rstrip", false, &tk.rstrip));
        VKF_TRY(get_bool(L, e, p.s, "special", false, &tk.special));
        VKF_TRY(get_bool(L, e, p.s, "normalized", !tk.special, &tk.normalized));
        if (clen == 0) continue;   /* tokenizers ignores empty tokens */
        int32_t id = smap_get(&t->added_map, c, clen);
        char qb[96];
        if (id >= 0) return bad(L, "%s: %s is an added token already", p.s, q(qb, sizeof qb, c, clen));
        id = model_token_id(&t->m, c, clen);
        if (id < 0) {
            uint64_t next = !any ? t->m.size
                            : ((uint64_t)max_added >= t->m.size || t->m.size == 0) ? (uint64_t)max_added + 1 : t->m.size;
            if (next > VKF_HFTOK_MAX_ID) return bad(L, "%s: its id would pass %u", p.s, VKF_HFTOK_MAX_ID);
            id = (int32_t)next;
        }
        if (!(tk.content = dup_bytes(c, clen))) return OOM();
        tk.len = clen;
        tk.id = id;
        size_t k = t->n_added++;
        t->added[k] = tk;
        if (!smap_set(&t->added_map, tk.content, clen, id, NULL) || !umap_set(&t->added_by_id, (uint64_t)id, k))
            return OOM();
        if (tk.special && !smap_set(&t->special, tk.content, clen, (int32_t)k, NULL)) return OOM();
        any = true;
        if (id > max_added) max_added = id;
    }
    /* patterns: the special tokens first, then the others (tokenizers' order) */
    if (!trie_init(&t->raw_trie) || !trie_init(&t->norm_trie)) return OOM();
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < t->n_added; k++) {
            const added *tk = &t->added[k];
            if (tk->special != (pass == 0)) continue;
            if (!tk->normalized || !t->has_norm) {
                if (!(t->added[k].shown = dup_bytes(tk->content, tk->len))) return OOM();
                t->added[k].shown_len = tk->len;
            }
            if (!tk->normalized) {
                if (!trie_add(&t->raw_trie, tk->content, tk->len, (int32_t)k, /*keep_first=*/true)) return OOM();
                continue;
            }
            nstr ns;
            VKF_TRY(nstr_from_input(&ns, tk->content, tk->len));
            vkf_status st = t->has_norm ? norm_apply(&t->normalizer, &ns) : VKF_OK;
            if (st == VKF_OK && ns.len == 0) {
                char qb[96];
                st = bad(L, "added token %s normalizes to an empty string", q(qb, sizeof qb, tk->content, tk->len));
            }
            if (st == VKF_OK && ns.len > VKF_HFTOK_MAX_TOKEN_BYTES) {
                char qb[96];
                st = bad(L, "added token %s normalizes to more than %u bytes", q(qb, sizeof qb, tk->content, tk->len),
                         VKF_HFTOK_MAX_TOKEN_BYTES);
            }
            if (st == VKF_OK && !trie_add(&t->norm_trie, ns.s, ns.len, (int32_t)k, /*keep_first=*/true)) st = OOM();
            if (st == VKF_OK && !t->added[k].shown) {
                /* tokenizers' id_to_token gives a normalized token's normalized form */
                t->added[k].shown = ns.s;
                t->added[k].shown_len = ns.len;
                ns.s = NULL;
            }
            nstr_free(&ns);
            if (st != VKF_OK) return st;
        }
    }
    t->vocab_size = (uint32_t)t->m.n_ids;
    if (max_added >= 0 && (uint32_t)max_added + 1 > t->vocab_size) t->vocab_size = (uint32_t)max_added + 1;
    return VKF_OK;
}

/* A component that may be null or absent. */
static const json_t *optional(const json_t *root, const char *key)
{
    const json_t *v = json_object_get(root, key);
    return v && !json_is_null(v) ? v : NULL;
}

static vkf_status load_root(const ld *L, const json_t *root, vkf_hftok *t)
{
    if (!json_is_object(root)) return bad(L, "the file is %s, not a JSON object", jtype(root));
    for (const char *const *k = (const char *const[]){"truncation", "padding", NULL}; *k; k++) {
        /* read by transformers, which turns them off unless a call asks: vkformer
         * applies neither */
        const json_t *v = optional(root, *k);
        if (v && !json_is_object(v)) return bad(L, "%s is %s, not an object or null", *k, jtype(v));
    }
    VKF_TRY(load_model(L, json_object_get(root, "model"), &t->m));
    const json_t *v;
    if ((v = optional(root, "normalizer"))) {
        t->has_norm = true;
        VKF_TRY(load_norm(L, v, "normalizer", 0, &t->normalizer));
    }
    if ((v = optional(root, "pre_tokenizer"))) {
        t->has_pre = true;
        VKF_TRY(load_pretok(L, v, "pre_tokenizer", 0, &t->pre));
    }
    if ((v = optional(root, "post_processor"))) {
        t->has_post = true;
        VKF_TRY(load_postproc(L, v, "post_processor", 0, &t->post));
    }
    if ((v = optional(root, "decoder"))) {
        t->has_dec = true;
        VKF_TRY(load_decoder(L, v, "decoder", 0, &t->dec));
    }
    return load_added(L, root, t);
}

static vkf_status load_json(const char *name, const char *json, size_t len, vkf_hftok **out)
{
    ld L = {name};
    if (len > VKF_HFTOK_MAX_FILE_BYTES)
        return bad(&L, "%zu bytes, more than the %u accepted", len, VKF_HFTOK_MAX_FILE_BYTES);
    json_error_t jerr;
    json_t *root = json_loadb(json ? json : "", len, JSON_ALLOW_NUL, &jerr);
    if (!root) {
        char qb[200];
        return bad(&L, "not JSON (line %d, column %d: %s)", jerr.line, jerr.column,
                   q(qb, sizeof qb, jerr.text, strlen(jerr.text)) + 0);
    }
    vkf_hftok *t = calloc(1, sizeof *t);
    if (!t) {
        json_decref(root);
        return OOM();
    }
    vkf_status st = load_root(&L, root, t);
    json_decref(root);
    if (st != VKF_OK) {
        vkf_hftok_free(t);
        return st;
    }
    *out = t;
    return VKF_OK;
}

vkf_status vkf_hftok_load_value(const char *name, const struct json_t *root, vkf_hftok **out)
{
    if (!out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load_value: out is NULL");
    *out = NULL;
    if (!root || !name) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load_value: %s is NULL",
                                        root ? "name" : "root");
    ld L = {name};
    vkf_hftok *t = calloc(1, sizeof *t);
    if (!t) return OOM();
    vkf_status st = load_root(&L, root, t);
    if (st != VKF_OK) {
        vkf_hftok_free(t);
        return st;
    }
    *out = t;
    return VKF_OK;
}

vkf_status vkf_hftok_load_bytes(const char *json, size_t len, vkf_hftok **out)
{
    if (!out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load_bytes: out is NULL");
    *out = NULL;
    if (!json && len) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load_bytes: json is NULL");
    return load_json("tokenizer.json", json, len, out);
}

vkf_status vkf_hftok_load(const char *path, vkf_hftok **out)
{
    if (!out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load: out is NULL");
    *out = NULL;
    if (!path) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_load: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return vkf_fail(VKF_ERROR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return vkf_fail(VKF_ERROR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > VKF_HFTOK_MAX_FILE_BYTES) {
        fclose(f);
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %lld bytes, more than the %u accepted", path,
                        (long long)st.st_size, VKF_HFTOK_MAX_FILE_BYTES);
    }
    size_t size = (size_t)st.st_size;
    char *data = malloc(size ? size : 1);
    if (!data) {
        fclose(f);
        return OOM();
    }
    size_t got = fread(data, 1, size, f);
    bool err = ferror(f);
    fclose(f);
    if (err || got != size) {
        free(data);
        return vkf_fail(VKF_ERROR_IO, "%s: read failed", path);
    }
    vkf_status s = load_json(path, data, size, out);
    free(data);
    return s;
}

/* ---- encoding */

/* Splits of the split list's nstr n at the tokens of tr: a token's split carries
 * its id. Takes n. */
static vkf_status add_token_splits(const vkf_hftok *t, const trie *tr, nstr *n, splits *out, amatch **m, size_t *m_cap)
{
    size_t nm;
    vkf_status st = added_matches(t->added, tr, n->s, n->len, m, &nm, m_cap);
    for (size_t i = 0; i < nm && st == VKF_OK; i++) {
        nstr part;
        if (!nstr_slice(&part, n, (*m)[i].start, (*m)[i].end) ||
            !splits_add(out, &part, (*m)[i].idx >= 0 ? t->added[(*m)[i].idx].id : -1)) {
            nstr_free(&part);
            st = OOM();
        }
    }
    nstr_free(n);
    return st;
}

static vkf_status encode_splits(const vkf_hftok *t, const char *text, size_t len, splits *s)
{
    amatch *m = NULL;
    size_t m_cap = 0;
    nstr all;
    VKF_TRY(nstr_from_input(&all, text, len));
    /* 1. tokens that are not normalized, in the raw text */
    vkf_status st = add_token_splits(t, &t->raw_trie, &all, s, &m, &m_cap);
    /* 2. normalize the rest, and find the normalized tokens there */
    if (st == VKF_OK) {
        splits out = {0};
        for (size_t i = 0; i < s->n && st == VKF_OK; i++) {
            if (s->v[i].id >= 0) {
                if (!grow((void **)&out.v, &out.cap, out.n + 1, sizeof *out.v)) st = OOM();
                else out.v[out.n++] = s->v[i];
                memset(&s->v[i].ns, 0, sizeof s->v[i].ns);
                continue;
            }
            if (t->has_norm) st = norm_apply(&t->normalizer, &s->v[i].ns);
            if (st == VKF_OK) {
                nstr n = s->v[i].ns;
                memset(&s->v[i].ns, 0, sizeof s->v[i].ns);
                st = add_token_splits(t, &t->norm_trie, &n, &out, &m, &m_cap);
            }
        }
        splits_free(s);
        *s = out;
    }
    free(m);
    /* 3. pre-tokenize */
    if (st == VKF_OK && t->has_pre) st = pretok_apply(&t->pre, s);
    return st;
}

vkf_status vkf_hftok_encode(const vkf_hftok *t, const char *text, size_t len, bool add_special, int32_t **out_ids,
                            uint32_t *out_count)
{
    if (out_ids) *out_ids = NULL;
    if (out_count) *out_count = 0;
    if (!t || !out_ids || !out_count || (!text && len))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_encode: %s is NULL",
                        !t ? "the tokenizer" : !out_ids ? "out_ids" : !out_count ? "out_count" : "text");
    if (len > VKF_HFTOK_MAX_INPUT_BYTES)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "vkf_hftok_encode: %zu bytes of text, more than the %zu accepted", len,
                        VKF_HFTOK_MAX_INPUT_BYTES);
    buf clean = {0};
    if (!u8_valid(text ? text : "", len)) {
        if (!u8_lossy(&clean, text, len)) {
            free(clean.b);
            return OOM();
        }
        text = clean.b;
        len = clean.n;
    }
    splits s = {0};
    ids out = {0};
    vkf_status st = encode_splits(t, text ? text : "", len, &s);
    /* 4. the model */
    buf scratch = {0};
    word w = {0};
    node *best = NULL;
    size_t best_cap = 0;
    for (size_t i = 0; i < s.n && st == VKF_OK; i++) {
        if (s.v[i].id >= 0) st = ids_add(&out, s.v[i].id) ? VKF_OK : OOM();
        else if (t->m.kind == M_BPE) st = bpe_tokenize(&t->m, s.v[i].ns.s, s.v[i].ns.len, &out, &scratch, &w);
        else st = unigram_tokenize(&t->m, s.v[i].ns.s, s.v[i].ns.len, &out, &best, &best_cap);
    }
    free(scratch.b), free(w.v), free(best);
    splits_free(&s);
    free(clean.b);
    /* 5. post-process */
    if (st == VKF_OK && add_special && t->has_post) st = postproc_apply(&t->post, &out);
    if (st == VKF_OK && out.n > UINT32_MAX) st = vkf_fail(VKF_ERROR_TOO_LARGE, "vkf_hftok_encode: too many tokens");
    if (st != VKF_OK) {
        free(out.v);
        return st;
    }
    if (out.n == 0) {
        free(out.v);
        out.v = NULL;
    }
    *out_ids = out.v;
    *out_count = (uint32_t)out.n;
    return VKF_OK;
}

/* ---- decoding and lookups */

static bool token_of(const vkf_hftok *t, int32_t id, const char **s, size_t *n)
{
    uint64_t k;
    if (id < 0) return false;
    if (umap_get(&t->added_by_id, (uint64_t)id, &k)) {
        *s = t->added[k].shown;
        *n = t->added[k].shown_len;
        return true;
    }
    if ((size_t)id < t->m.n_ids && t->m.tok[id]) {
        *s = t->m.tok[id];
        *n = t->m.tok_len[id];
        return true;
    }
    return false;
}

vkf_status vkf_hftok_decode_n(const vkf_hftok *t, const int32_t *id_list, uint32_t n, bool skip_special,
                              char **out_text, size_t *out_len)
{
    if (out_text) *out_text = NULL;
    if (out_len) *out_len = 0;
    if (!t || !out_text || (!id_list && n))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_hftok_decode: %s is NULL",
                        !t ? "the tokenizer" : !out_text ? "out_text" : "ids");
    toks tk = {0};
    for (uint32_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        if (!token_of(t, id_list[i], &s, &len)) continue;
        if (skip_special && smap_get(&t->special, s, len) >= 0) continue;
        if (!toks_add(&tk, s, len)) {
            toks_free(&tk);
            return OOM();
        }
    }
    vkf_status st = t->has_dec ? decoder_apply(&t->dec, &tk) : VKF_OK;
    buf o = {0};
    for (size_t i = 0; i < tk.n && st == VKF_OK; i++)
        if ((!t->has_dec && i > 0 && !buf_put(&o, " ", 1)) || !buf_put(&o, tk.v[i].b, tk.v[i].n)) st = OOM();
    toks_free(&tk);
    if (st == VKF_OK && !o.b && !buf_put(&o, "", 0)) st = OOM();
    if (st != VKF_OK) {
        free(o.b);
        return st;
    }
    *out_text = o.b;
    if (out_len) *out_len = o.n;
    return VKF_OK;
}

vkf_status vkf_hftok_decode(const vkf_hftok *t, const int32_t *ids, uint32_t n, bool skip_special, char **out_text)
{
    return vkf_hftok_decode_n(t, ids, n, skip_special, out_text, NULL);
}

int32_t vkf_hftok_token_id(const vkf_hftok *t, const char *token)
{
    if (!t || !token) return -1;
    size_t n = strlen(token);
    int32_t id = smap_get(&t->added_map, token, n);
    return id >= 0 ? id : model_token_id(&t->m, token, n);
}

const char *vkf_hftok_token(const vkf_hftok *t, int32_t id)
{
    const char *s;
    size_t n;
    return t && token_of(t, id, &s, &n) ? s : NULL;
}

uint32_t vkf_hftok_vocab_size(const vkf_hftok *t) { return t ? t->vocab_size : 0; }

bool vkf_hftok_is_special(const vkf_hftok *t, int32_t id)
{
    const char *s;
    size_t n;
    return t && token_of(t, id, &s, &n) && smap_get(&t->special, s, n) >= 0;
}

/* Regexes and matches for the tokenizer.json pipeline: Oniguruma (the regex
 * engine tokenizers itself uses) under retry and nesting limits, a `pattern`
 * (a regex or a plain string, as the file's {"Regex": ...} / {"String": ...}),
 * and the matches of a pattern or a character class over a string, as pieces
 * that did or did not match. */
#include "tokenizers/pipeline.h"

#include <oniguruma.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

bool tj_onig_ready(void)
{
    pthread_once(&onig_once, onig_setup);
    return onig_ready;
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

/* Compiles a regex (Ruby syntax, as tokenizers' onig::Regex::new); false with a
 * message in why. */
bool tj_rx_compile(rx *r, const char *pat, size_t len, char *why, size_t why_size)
{
    r->re = NULL;
    if (!tj_onig_ready()) {
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

static bool pieces_add(pieces *p, size_t start, size_t end, bool match)
{
    if (!tj_grow((void **)&p->v, &p->cap, p->n + 1, sizeof *p->v)) return false;
    p->v[p->n++] = (piece){start, end, match};
    return true;
}

void tj_pattern_free(pattern *p)
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
            it->last_end += it->last_end < it->len ? tj_u8_len((unsigned char)it->s[it->last_end]) : 1;
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
vkf_status tj_find_matches(const pattern *p, const char *s, size_t len, bool invert, pieces *out)
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

vkf_status tj_find_char_matches(char_class f, const void *arg, const char *s, size_t len, pieces *out)
{
    out->n = 0;
    if (len == 0) return pieces_add(out, 0, 0, false) ? VKF_OK : OOM();
    size_t last_offset = 0, last_seen = 0;
    for (size_t i = 0; i < len;) {
        size_t b = i;
        uint32_t c = tj_u8_next(s, &i);
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

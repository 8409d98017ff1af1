/* Added tokens of tokenizer.json (tokenizers' AddedVocabulary): their ids as
 * add_tokens assigns them, the tries of normalized and raw tokens, and their
 * matches in a text (leftmost longest, then single_word, lstrip, rstrip). */
#include "tokenizers/pipeline.h"

#include <oniguruma.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* regex's \w (Alphabetic, marks, decimal digits, connector punctuation,
 * Join_Control): what single_word tokens may not touch. */
static regex_t *word_re;
static pthread_once_t word_re_once = PTHREAD_ONCE_INIT;

static void word_re_setup(void)
{
    if (!tj_onig_ready()) return;
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
            if (!tj_trie_step(tr, &nd, (unsigned char)s[k])) break;
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

vkf_status tj_added_matches(const added *tokens, const trie *tr, const char *s, size_t len, amatch **out,
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
            bool stop_space = stop == len || !is_word_char(s + stop, tj_u8_len((unsigned char)s[stop]));
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t b = ns - 1;
                while (b > 0 && ((unsigned char)s[b] & 0xc0) == 0x80) b--;
                size_t k = b;
                if (!tj_is_ws(tj_u8_next(s, &k))) break;
                ns = b;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            while (stop < len) {
                size_t k = stop;
                if (!tj_is_ws(tj_u8_next(s, &k))) break;
                stop = k;
            }
        }
        if (!tj_grow((void **)out, cap, *n + 2, sizeof **out)) return OOM();
        if (start > start_offset) (*out)[(*n)++] = (amatch){start_offset, start, -1};
        (*out)[(*n)++] = (amatch){start, stop, idx};
        start_offset = stop;
    }
    if (start_offset != len) {
        if (!tj_grow((void **)out, cap, *n + 1, sizeof **out)) return OOM();
        (*out)[(*n)++] = (amatch){start_offset, len, -1};
    }
    return VKF_OK;
}

/* The added tokens: ids as tokenizers' AddedVocabulary::add_tokens assigns them
 * (the id in the file is not read back: a token of the model's vocabulary keeps
 * its id there, others take the next id past the vocabulary and the added ones),
 * and the two tries. */
vkf_status tj_load_added(const ld *L, const json_t *root, vkf_hftok *t)
{
    json_t *a = json_object_get(root, "added_tokens");
    if (!a || json_is_null(a)) a = NULL;
    else if (!json_is_array(a)) return tj_bad(L, "added_tokens is %s, not a list", tj_jtype(a));
    size_t n = a ? json_array_size(a) : 0;
    if (n > VKF_HFTOK_MAX_ADDED) return tj_bad(L, "added_tokens has %zu items, more than the %u accepted", n,
                                            VKF_HFTOK_MAX_ADDED);
    if (n && !(t->added = calloc(n, sizeof *t->added))) return OOM();
    bool any = false;
    int64_t max_added = -1;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(a, i);
        jpath p = tj_jp_index("added_tokens", i);
        if (!json_is_object(e)) return tj_bad(L, "%s is %s, not an object", p.s, tj_jtype(e));
        const char *c;
        size_t clen;
        uint64_t file_id;
        added tk = {0};
        VKF_TRY(tj_get_uint(L, e, p.s, "id", true, VKF_HFTOK_MAX_ID, 0, &file_id));
        VKF_TRY(tj_get_str(L, e, p.s, "content", true, VKF_HFTOK_MAX_TOKEN_BYTES, true, &c, &clen));
        VKF_TRY(tj_get_bool(L, e, p.s, "single_word", false, &tk.single_word));
        VKF_TRY(tj_get_bool(L, e, p.s, "lstrip", false, &tk.lstrip));
        VKF_TRY(tj_get_bool(L, e, p.s, "rstrip", false, &tk.rstrip));
        VKF_TRY(tj_get_bool(L, e, p.s, "special", false, &tk.special));
        VKF_TRY(tj_get_bool(L, e, p.s, "normalized", !tk.special, &tk.normalized));
        if (clen == 0) continue;   /* tokenizers ignores empty tokens */
        int32_t id = tj_smap_get(&t->added_map, c, clen);
        char qb[96];
        if (id >= 0) return tj_bad(L, "%s: %s is an added token already", p.s, tj_quote(qb, sizeof qb, c, clen));
        id = tj_model_token_id(&t->m, c, clen);
        if (id < 0) {
            uint64_t next = !any ? t->m.size
                            : ((uint64_t)max_added >= t->m.size || t->m.size == 0) ? (uint64_t)max_added + 1 : t->m.size;
            if (next > VKF_HFTOK_MAX_ID) return tj_bad(L, "%s: its id would pass %u", p.s, VKF_HFTOK_MAX_ID);
            id = (int32_t)next;
        }
        if (!(tk.content = tj_dup_bytes(c, clen))) return OOM();
        tk.len = clen;
        tk.id = id;
        size_t k = t->n_added++;
        t->added[k] = tk;
        if (!tj_smap_set(&t->added_map, tk.content, clen, id, NULL) || !tj_umap_set(&t->added_by_id, (uint64_t)id, k))
            return OOM();
        if (tk.special && !tj_smap_set(&t->special, tk.content, clen, (int32_t)k, NULL)) return OOM();
        any = true;
        if (id > max_added) max_added = id;
    }
    /* patterns: the special tokens first, then the others (tokenizers' order) */
    if (!tj_trie_init(&t->raw_trie) || !tj_trie_init(&t->norm_trie)) return OOM();
    for (int pass = 0; pass < 2; pass++) {
        for (size_t k = 0; k < t->n_added; k++) {
            const added *tk = &t->added[k];
            if (tk->special != (pass == 0)) continue;
            if (!tk->normalized || !t->has_norm) {
                if (!(t->added[k].shown = tj_dup_bytes(tk->content, tk->len))) return OOM();
                t->added[k].shown_len = tk->len;
            }
            if (!tk->normalized) {
                if (!tj_trie_add(&t->raw_trie, tk->content, tk->len, (int32_t)k, /*keep_first=*/true)) return OOM();
                continue;
            }
            nstr ns;
            VKF_TRY(tj_nstr_from_input(&ns, tk->content, tk->len));
            vkf_status st = t->has_norm ? tj_norm_apply(&t->normalizer, &ns) : VKF_OK;
            if (st == VKF_OK && ns.len == 0) {
                char qb[96];
                st = tj_bad(L, "added token %s normalizes to an empty string", tj_quote(qb, sizeof qb, tk->content, tk->len));
            }
            if (st == VKF_OK && ns.len > VKF_HFTOK_MAX_TOKEN_BYTES) {
                char qb[96];
                st = tj_bad(L, "added token %s normalizes to more than %u bytes", tj_quote(qb, sizeof qb, tk->content, tk->len),
                         VKF_HFTOK_MAX_TOKEN_BYTES);
            }
            if (st == VKF_OK && !tj_trie_add(&t->norm_trie, ns.s, ns.len, (int32_t)k, /*keep_first=*/true)) st = OOM();
            if (st == VKF_OK && !t->added[k].shown) {
                /* tokenizers' id_to_token gives a normalized token's normalized form */
                t->added[k].shown = ns.s;
                t->added[k].shown_len = ns.len;
                ns.s = NULL;
            }
            tj_nstr_free(&ns);
            if (st != VKF_OK) return st;
        }
    }
    t->vocab_size = (uint32_t)t->m.n_ids;
    if (max_added >= 0 && (uint32_t)max_added + 1 > t->vocab_size) t->vocab_size = (uint32_t)max_added + 1;
    return VKF_OK;
}

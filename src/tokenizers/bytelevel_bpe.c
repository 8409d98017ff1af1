/* GPT-2-style byte-level BPE of BART and Whisper folders, as Hugging Face
 * transformers 5.12 builds it (tokenizer.h says what is promised).
 *
 * transformers 5.x has one tokenizer class per family, backed by the tokenizers
 * library: RobertaTokenizer (BartTokenizer is an alias) and WhisperTokenizer each
 * build their own tokenizers.Tokenizer from a vocabulary and merges, whichever
 * file those come from (tokenizer.json, or vocab.json + merges.txt), and put
 * their own parts around them. This file does the same and hands the result to
 * the tokenizer.json reader (tokenizer_json.c) as one JSON document:
 *   model          BPE(vocab, merges) with no unk token, no prefix or suffix,
 *                  fuse_unk and byte_fallback off;
 *   pre-tokenizer  ByteLevel(add_prefix_space from tokenizer_config.json, GPT-2's
 *                  regex); decoder ByteLevel; no normalizer;
 *   added tokens   tokenizer_config.json's added_tokens_decoder, or (older folders)
 *                  added_tokens.json, special only if named in the configs, and a
 *                  tokenizer.json's own added tokens; then the named special tokens
 *                  (bos, eos, unk, sep, pad, cls, mask; tokenizer_config.json, else
 *                  special_tokens_map.json, else the class's defaults) and
 *                  extra_special_tokens that are not there yet, as
 *                  TokenizersBackend.__init__ adds them;
 *   special ids    BART: <s> text </s> (RobertaProcessing); Whisper: the prefix of
 *                  set_prefix_tokens (language, task, predict_timestamps from
 *                  tokenizer_config.json) and <|endoftext|>.
 * Whisper's decode also strips a <|startofprev|> prompt (with skip_special) and
 * removes text that reads like a timestamp, <|1.00|>, as WhisperTokenizer.decode.
 * The slow files are checked here with messages naming file and line; the rest
 * by the reader. */
#include "tokenizers/tokenizer.h"
#include "tokenizers/tokenizer_json.h"
#include "runtime/runtime.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

#define OOM() vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory")

/* ------------------------------------------------------------------ Whisper's languages */

/* transformers' LANGUAGES, in the order of the language tokens. */
static const char *const whisper_langs[][2] = {
    {"en", "english"}, {"zh", "chinese"}, {"de", "german"}, {"es", "spanish"}, {"ru", "russian"},
    {"ko", "korean"}, {"fr", "french"}, {"ja", "japanese"}, {"pt", "portuguese"}, {"tr", "turkish"},
    {"pl", "polish"}, {"ca", "catalan"}, {"nl", "dutch"}, {"ar", "arabic"}, {"sv", "swedish"},
    {"it", "italian"}, {"id", "indonesian"}, {"hi", "hindi"}, {"fi", "finnish"}, {"vi", "vietnamese"},
    {"he", "hebrew"}, {"uk", "ukrainian"}, {"el", "greek"}, {"ms", "malay"}, {"cs", "czech"},
    {"ro", "romanian"}, {"da", "danish"}, {"hu", "hungarian"}, {"ta", "tamil"}, {"no", "norwegian"},
    {"th", "thai"}, {"ur", "urdu"}, {"hr", "croatian"}, {"bg", "bulgarian"}, {"lt", "lithuanian"},
    {"la", "latin"}, {"mi", "maori"}, {"ml", "malayalam"}, {"cy", "welsh"}, {"sk", "slovak"},
    {"te", "telugu"}, {"fa", "persian"}, {"lv", "latvian"}, {"bn", "bengali"}, {"sr", "serbian"},
    {"az", "azerbaijani"}, {"sl", "slovenian"}, {"kn", "kannada"}, {"et", "estonian"}, {"mk", "macedonian"},
    {"br", "breton"}, {"eu", "basque"}, {"is", "icelandic"}, {"hy", "armenian"}, {"ne", "nepali"},
    {"mn", "mongolian"}, {"bs", "bosnian"}, {"kk", "kazakh"}, {"sq", "albanian"}, {"sw", "swahili"},
    {"gl", "galician"}, {"mr", "marathi"}, {"pa", "punjabi"}, {"si", "sinhala"}, {"km", "khmer"},
    {"sn", "shona"}, {"yo", "yoruba"}, {"so", "somali"}, {"af", "afrikaans"}, {"oc", "occitan"},
    {"ka", "georgian"}, {"be", "belarusian"}, {"tg", "tajik"}, {"sd", "sindhi"}, {"gu", "gujarati"},
    {"am", "amharic"}, {"yi", "yiddish"}, {"lo", "lao"}, {"uz", "uzbek"}, {"fo", "faroese"},
    {"ht", "haitian creole"}, {"ps", "pashto"}, {"tk", "turkmen"}, {"nn", "nynorsk"}, {"mt", "maltese"},
    {"sa", "sanskrit"}, {"lb", "luxembourgish"}, {"my", "myanmar"}, {"bo", "tibetan"}, {"tl", "tagalog"},
    {"mg", "malagasy"}, {"as", "assamese"}, {"tt", "tatar"}, {"haw", "hawaiian"}, {"ln", "lingala"},
    {"ha", "hausa"}, {"ba", "bashkir"}, {"jw", "javanese"}, {"su", "sundanese"}, {"yue", "cantonese"},
};
/* TO_LANGUAGE_CODE's aliases. */
static const char *const whisper_aliases[][2] = {
    {"burmese", "my"}, {"valencian", "ca"}, {"flemish", "nl"}, {"haitian", "ht"}, {"letzeburgesch", "lb"},
    {"pushto", "ps"}, {"panjabi", "pa"}, {"moldavian", "ro"}, {"moldovan", "ro"}, {"sinhalese", "si"},
    {"castilian", "es"}, {"mandarin", "zh"},
};
#define N_LANGS (sizeof whisper_langs / sizeof *whisper_langs)

uint32_t vkf_whisper_language_count(void) { return (uint32_t)N_LANGS; }
const char *vkf_whisper_language_code(uint32_t i) { return i < N_LANGS ? whisper_langs[i][0] : NULL; }
const char *vkf_whisper_language_name(uint32_t i) { return i < N_LANGS ? whisper_langs[i][1] : NULL; }

int32_t vkf_whisper_language_index(const char *s)
{
    if (!s) return -1;
    char low[32];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof low) return -1;
    for (size_t i = 0; i <= n; i++) low[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
    for (size_t i = 0; i < sizeof whisper_aliases / sizeof *whisper_aliases; i++)
        if (strcmp(low, whisper_aliases[i][0]) == 0) return vkf_whisper_language_index(whisper_aliases[i][1]);
    for (uint32_t i = 0; i < N_LANGS; i++)
        if (strcmp(low, whisper_langs[i][0]) == 0 || strcmp(low, whisper_langs[i][1]) == 0) return (int32_t)i;
    return -1;
}

/* ------------------------------------------------------------------ reading the folder */

/* A value from a file for a message. */
static const char *quoted(char *buf, size_t cap, const char *s, size_t n) { return vkf_quote(buf, cap, s, n); }

/* A boolean key of a config (absent or null: def). */
static vkf_status config_bool(const json_t *o, const char *file, const char *key, bool def, bool *out)
{
    const json_t *v = o ? json_object_get(o, key) : NULL;
    *out = def;
    if (!v || json_is_null(v)) return VKF_OK;
    if (!json_is_boolean(v)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must be true or false", file, key);
    *out = json_is_true(v);
    return VKF_OK;
}

/* Config files: JSON objects of at most this many bytes. */
#define MAX_CONFIG_BYTES VKF_HFTOK_MAX_FILE_BYTES

/* merges.txt as tokenizers' BPE::read_file reads it: lines split at '\n' (a
 * '\r' before it dropped), "#version" lines skipped, every other line exactly two
 * tokens separated by one space, both in the vocabulary and so their join. Into
 * out, a JSON list of [left, right] pairs. */
static vkf_status read_merges(const char *dir, const json_t *vocab, json_t *out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return vkf_fail(VKF_ERROR_BAD_MODEL, "merges.txt cannot be read: %s", strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return vkf_fail(VKF_ERROR_BAD_MODEL, "merges.txt is not a regular file");
    }
    if ((uint64_t)sb.st_size > VKF_HFTOK_MAX_FILE_BYTES) {
        fclose(f);
        return vkf_fail(VKF_ERROR_BAD_MODEL, "merges.txt is %llu bytes, more than the %u accepted",
                        (unsigned long long)sb.st_size, VKF_HFTOK_MAX_FILE_BYTES);
    }
    size_t size = (size_t)sb.st_size;
    char *data = malloc(size + 1);
    if (!data) {
        fclose(f);
        return OOM();
    }
    size_t got = fread(data, 1, size, f);
    bool err = ferror(f) != 0;
    fclose(f);
    if (err || got != size) {
        free(data);
        return vkf_fail(VKF_ERROR_BAD_MODEL, "merges.txt: read failed");
    }
    data[size] = '\0';
    vkf_status st = VKF_OK;
    char *joined = NULL;
    size_t jcap = 0, count = 0, line = 0;
    for (size_t pos = 0; pos < size && st == VKF_OK;) {
        char *s = data + pos, *nl = memchr(s, '\n', size - pos);
        size_t n = nl ? (size_t)(nl - s) : size - pos;
        pos += n + (nl ? 1 : 0);
        line++;
        if (nl && n && s[n - 1] == '\r') n--;
        char q[VKF_QUOTE_SIZE], q2[VKF_QUOTE_SIZE];
        /* UTF-8, or Rust's lines() fails */
        bool utf8 = true;
        for (size_t k = 0; k < n && utf8;) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + k, (utf8proc_ssize_t)(n - k), &cp);
            utf8 = l > 0;
            k += utf8 ? (size_t)l : 0;
        }
        if (!utf8) {
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "merges.txt line %zu is not UTF-8", line);
            break;
        }
        if (n >= 8 && memcmp(s, "#version", 8) == 0) continue;
        char *sp = memchr(s, ' ', n);
        if (!sp || sp == s || sp == s + n - 1 || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s))) {
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "merges.txt line %zu (%s) is not two tokens separated by one space",
                          line, quoted(q, sizeof q, s, n));
            break;
        }
        if (++count > VKF_HFTOK_MAX_MERGES) {
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "merges.txt has more than %u merges", VKF_HFTOK_MAX_MERGES);
            break;
        }
        size_t an = (size_t)(sp - s), bn = n - an - 1;
        const json_t *a = json_object_getn(vocab, s, an), *b = json_object_getn(vocab, sp + 1, bn);
        if (!a || !b) {
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "merges.txt line %zu: %s is not in vocab.json", line,
                          !a ? quoted(q, sizeof q, s, an) : quoted(q, sizeof q, sp + 1, bn));
            break;
        }
        if (an + bn > jcap) {
            char *p = realloc(joined, an + bn);
            if (!p) {
                st = OOM();
                break;
            }
            joined = p, jcap = an + bn;
        }
        memcpy(joined, s, an);
        memcpy(joined + an, sp + 1, bn);
        const json_t *c = json_object_getn(vocab, joined, an + bn);
        if (!c) {
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "merges.txt line %zu: the merged token %s is not in vocab.json", line,
                          quoted(q, sizeof q, joined, an + bn));
            break;
        }
        if (json_equal(c, a) || json_equal(c, b)) {
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "merges.txt line %zu: merging %s and %s gives one of them again "
                          "(two tokens with one id)", line, quoted(q, sizeof q, s, an),
                          quoted(q2, sizeof q2, sp + 1, bn));
            break;
        }
        json_t *pair = json_pack("[s#s#]", s, (int)an, sp + 1, (int)bn);
        if (!pair || json_array_append_new(out, pair) != 0) st = OOM();
    }
    free(joined);
    free(data);
    return st;
}

/* ------------------------------------------------------------------ added and special tokens */

/* An added token as transformers' AddedToken holds it. */
typedef struct tok_spec {
    char *content;              /* owned */
    size_t len;
    bool single_word, lstrip, rstrip, normalized, special;
    int64_t id;                 /* the id a file gave it (sorting only), -1: none */
} tok_spec;

typedef struct tok_list {
    tok_spec *v;
    size_t n, cap;
} tok_list;

static void tok_list_free(tok_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i].content);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static vkf_status tok_list_add(tok_list *l, const tok_spec *t)
{
    if (l->n == l->cap) {
        size_t c = l->cap ? 2 * l->cap : 16;
        tok_spec *p = realloc(l->v, c * sizeof *p);
        if (!p) return OOM();
        l->v = p, l->cap = c;
    }
    tok_spec x = *t;
    if (!(x.content = malloc(t->len + 1))) return OOM();
    memcpy(x.content, t->content, t->len);
    x.content[t->len] = '\0';
    l->v[l->n++] = x;
    return VKF_OK;
}

static long tok_list_find(const tok_list *l, const char *s, size_t n)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].len == n && memcmp(l->v[i].content, s, n) == 0) return (long)i;
    return -1;
}

/* A token from a config file: a string (as_special: AddedToken(s, special=True),
 * normalized then false), or an object {"content", "lstrip", ...} (AddedToken(**d);
 * force_special sets special). *out->content borrows j. what names it for messages. */
static vkf_status parse_token(const json_t *j, const char *file, const char *what, bool as_special, bool force_special,
                              tok_spec *out)
{
    memset(out, 0, sizeof *out);
    out->id = -1;
    if (json_is_string(j)) {
        out->content = (char *)json_string_value(j);
        out->len = json_string_length(j);
        out->special = as_special;
        out->normalized = !as_special;
        return VKF_OK;
    }
    if (!json_is_object(j))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %s must be a string or an object with \"content\"", file, what);
    const json_t *c = json_object_get(j, "content");
    if (!json_is_string(c)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %s.content must be a string", file, what);
    out->content = (char *)json_string_value(c);
    out->len = json_string_length(c);
    static const char *const keys[] = {"single_word", "lstrip", "rstrip", "special"};
    bool *dst[] = {&out->single_word, &out->lstrip, &out->rstrip, &out->special};
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(j, keys[k]);
        if (v && !json_is_null(v) && !json_is_boolean(v))
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %s.%s must be true or false", file, what, keys[k]);
        *dst[k] = json_is_true(v);
    }
    if (force_special) out->special = true;
    const json_t *nv = json_object_get(j, "normalized");
    if (nv && !json_is_null(nv) && !json_is_boolean(nv))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: %s.normalized must be true or false", file, what);
    out->normalized = nv && !json_is_null(nv) ? json_is_true(nv) : !out->special;
    return VKF_OK;
}

/* The names of transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order. */
static const char *const named_keys[7] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

/* What a folder says about its added tokens, resolved as transformers 5.12's
 * from_pretrained and TokenizersBackend.__init__ resolve it. */
typedef struct added_plan {
    tok_list added;             /* in the order added (ids as tokenizers assigns them) */
    tok_spec named[7];          /* content borrowed from the configs or static strings; len 0: none */
    bool has_named[7];
} added_plan;

/* The extra special tokens (a list) into l. */
static vkf_status parse_extra(const json_t *a, const char *file, const char *key, tok_list *l)
{
    if (!a || json_is_null(a)) return VKF_OK;
    if (!json_is_array(a)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must be a list", file, key);
    if (json_array_size(a) > VKF_HFTOK_MAX_ADDED)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" has more than %u tokens", file, key, VKF_HFTOK_MAX_ADDED);
    for (size_t i = 0; i < json_array_size(a); i++) {
        char what[96];
        snprintf(what, sizeof what, "%s[%zu]", key, i);
        tok_spec t;
        /* a string is AddedToken(s, special=True); an object keeps its own flags */
        VKF_TRY(parse_token(json_array_get(a, i), file, what, true, false, &t));
        VKF_TRY(tok_list_add(l, &t));
    }
    return VKF_OK;
}

static int by_id(const void *a, const void *b)
{
    int64_t x = ((const tok_spec *)a)->id, y = ((const tok_spec *)b)->id;
    return x < y ? -1 : x > y;
}

/* An id key of added_tokens_decoder ("50257") or a value of added_tokens.json. */
static vkf_status parse_id_key(const char *file, const char *key, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(key, &end, 10);
    if (!*key || *end || errno || v < 0 || v > (long long)VKF_HFTOK_MAX_ID) {
        char q[VKF_QUOTE_SIZE];
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: added_tokens_decoder key %s is not an id in 0..%u", file,
                        quoted(q, sizeof q, key, strlen(key)), VKF_HFTOK_MAX_ID);
    }
    *out = v;
    return VKF_OK;
}

/* tc: tokenizer_config.json (or NULL), stm: special_tokens_map.json, atj:
 * added_tokens.json, file_added: a tokenizer.json's "added_tokens" (NULL: none). */
static vkf_status plan_added(vkf_bpe_kind kind, const json_t *tc, const json_t *stm, const json_t *atj,
                             const json_t *file_added, added_plan *P)
{
    static const char TC[] = "tokenizer_config.json", STM[] = "special_tokens_map.json", ATJ[] = "added_tokens.json";
    /* the class's defaults */
    static const char *const roberta[7] = {"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>", "<mask>"};
    for (int k = 0; k < 7; k++) {
        const char *d = kind == VKF_BPE_BART ? roberta[k] : k < 3 ? "<|endoftext|>" : NULL;
        if (!d) continue;
        P->has_named[k] = true;
        P->named[k] = (tok_spec){.content = (char *)d, .len = strlen(d), .special = true, .id = -1};
    }
    /* tokenizer_config.json's named tokens */
    for (int k = 0; tc && k < 7; k++) {
        const json_t *v = json_object_get(tc, named_keys[k]);
        if (!v) continue;
        if (json_is_null(v)) {
            P->has_named[k] = false;
            continue;
        }
        VKF_TRY(parse_token(v, TC, named_keys[k], true, false, &P->named[k]));
        P->has_named[k] = true;
    }
    tok_list extra = {0}, decoder = {0};
    vkf_status st = VKF_OK;
    const json_t *ex = tc ? json_object_get(tc, "extra_special_tokens") : NULL;
    bool tc_extra = ex && json_is_array(ex);
    if (!tc_extra) {
        ex = tc ? json_object_get(tc, "additional_special_tokens") : NULL;
        tc_extra = ex && json_is_array(ex);
        st = parse_extra(ex, TC, "additional_special_tokens", &extra);
    } else {
        st = parse_extra(ex, TC, "extra_special_tokens", &extra);
    }
    const json_t *dec = tc ? json_object_get(tc, "added_tokens_decoder") : NULL;
    if (st == VKF_OK && dec && !json_is_null(dec)) {
        if (!json_is_object(dec)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"added_tokens_decoder\" must be an object", TC);
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)dec, key, val) {
            if (st != VKF_OK) break;
            tok_spec t;
            char what[96];
            snprintf(what, sizeof what, "added_tokens_decoder[%.40s]", key);
            st = parse_id_key(TC, key, &t.id);
            int64_t id = t.id;
            if (st == VKF_OK) st = parse_token(val, TC, what, false, false, &t);
            t.id = id;
            if (st == VKF_OK) st = tok_list_add(&decoder, &t);
        }
    } else if (st == VKF_OK) {
        /* older folders: special_tokens_map.json's named tokens win over
         * tokenizer_config.json's; added_tokens.json's tokens are special only when
         * named (or tokenizer_config.json's extra ones) */
        for (int k = 0; stm && k < 7 && st == VKF_OK; k++) {
            const json_t *v = json_object_get(stm, named_keys[k]);
            if (!v || json_is_null(v)) continue;
            st = parse_token(v, STM, named_keys[k], true, true, &P->named[k]);
            P->has_named[k] = true;
        }
        tok_list legacy_extra = {0};
        if (st == VKF_OK && stm) st = parse_extra(json_object_get(stm, "extra_special_tokens"), STM,
                                                 "extra_special_tokens", &legacy_extra);
        if (st == VKF_OK && atj) {
            if (!json_is_object(atj)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s must hold an object", ATJ);
            if (st == VKF_OK && json_object_size(atj) > VKF_HFTOK_MAX_ADDED)
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s has more than %u tokens", ATJ, VKF_HFTOK_MAX_ADDED);
            const char *key;
            size_t klen;
            json_t *val;
            json_object_keylen_foreach((json_t *)atj, key, klen, val) {
                if (st != VKF_OK) break;
                if (!json_is_integer(val) || json_integer_value(val) < 0 ||
                    json_integer_value(val) > (json_int_t)VKF_HFTOK_MAX_ID) {
                    char q[VKF_QUOTE_SIZE];
                    st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: the id of %s is not a whole number in 0..%u", ATJ,
                                  quoted(q, sizeof q, key, klen), VKF_HFTOK_MAX_ID);
                    break;
                }
                bool special = tok_list_find(&extra, key, klen) >= 0 || tok_list_find(&legacy_extra, key, klen) >= 0;
                for (int k = 0; k < 7 && !special; k++)
                    special = P->has_named[k] && P->named[k].len == klen && memcmp(P->named[k].content, key, klen) == 0;
                tok_spec t = {.content = (char *)key, .len = klen, .normalized = !special, .special = special,
                              .id = json_integer_value(val)};
                st = tok_list_add(&decoder, &t);
            }
        }
        /* the map's additional tokens become the extra ones where tokenizer_config.json has none */
        if (st == VKF_OK && stm && !tc_extra)
            st = parse_extra(json_object_get(stm, "additional_special_tokens"), STM, "additional_special_tokens",
                             &extra);
        for (size_t i = 0; st == VKF_OK && i < legacy_extra.n; i++)
            if (tok_list_find(&extra, legacy_extra.v[i].content, legacy_extra.v[i].len) < 0)
                st = tok_list_add(&extra, &legacy_extra.v[i]);
        tok_list_free(&legacy_extra);
        /* a tokenizer.json's own added tokens, by id */
        for (size_t i = 0; st == VKF_OK && file_added && i < json_array_size(file_added); i++) {
            const json_t *e = json_array_get(file_added, i);
            char what[64];
            snprintf(what, sizeof what, "added_tokens[%zu]", i);
            const json_t *idv = json_is_object(e) ? json_object_get(e, "id") : NULL;
            if (!json_is_integer(idv) || json_integer_value(idv) < 0 ||
                json_integer_value(idv) > (json_int_t)VKF_HFTOK_MAX_ID) {
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: %s.id is not a whole number in 0..%u", what,
                              VKF_HFTOK_MAX_ID);
                break;
            }
            tok_spec t;
            st = parse_token(e, "tokenizer.json", what, false, false, &t);
            t.id = json_integer_value(idv);
            for (size_t k = 0; st == VKF_OK && k < decoder.n; k++)
                if (decoder.v[k].id == t.id) { /* replaced */
                    free(decoder.v[k].content);
                    decoder.v[k] = decoder.v[--decoder.n];
                    break;
                }
            if (st == VKF_OK) st = tok_list_add(&decoder, &t);
        }
    }
    /* TokenizersBackend.__init__: the decoder's tokens by id (named ones made
     * special), then the named and the extra special tokens not among them */
    if (st == VKF_OK && decoder.n) qsort(decoder.v, decoder.n, sizeof *decoder.v, by_id);
    for (size_t i = 0; st == VKF_OK && i < decoder.n; i++) {
        tok_spec t = decoder.v[i];
        for (int k = 0; k < 7; k++)
            if (P->has_named[k] && P->named[k].len == t.len && memcmp(P->named[k].content, t.content, t.len) == 0)
                t.special = true;
        if (tok_list_find(&P->added, t.content, t.len) < 0) st = tok_list_add(&P->added, &t);
    }
    for (int k = 0; st == VKF_OK && k < 7; k++) {
        if (!P->has_named[k] || tok_list_find(&P->added, P->named[k].content, P->named[k].len) >= 0) continue;
        tok_spec t = P->named[k];
        t.special = true; /* a named token is made special, whatever its flag said */
        st = tok_list_add(&P->added, &t);
    }
    for (size_t i = 0; st == VKF_OK && i < extra.n; i++)
        if (tok_list_find(&P->added, extra.v[i].content, extra.v[i].len) < 0) st = tok_list_add(&P->added, &extra.v[i]);
    tok_list_free(&extra);
    tok_list_free(&decoder);
    return st;
}

static json_t *token_json(const tok_spec *t, size_t id)
{
    return json_pack("{s:I, s:s#, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)id, "content", t->content, (int)t->len,
                     "single_word", t->single_word, "lstrip", t->lstrip, "rstrip", t->rstrip, "normalized",
                     t->normalized, "special", t->special);
}

/* ------------------------------------------------------------------ opening */

void vkf_bpe_free(vkf_bpe_text *t)
{
    if (!t) return;
    vkf_hftok_free(t->tok);
    free(t->prefix), free(t->suffix);
    free(t);
}

/* A string key of tokenizer_config.json, or NULL. */
static vkf_status config_string(const json_t *tc, const char *key, const char **out)
{
    *out = NULL;
    const json_t *v = tc ? json_object_get(tc, key) : NULL;
    if (!v || json_is_null(v)) return VKF_OK;
    if (!json_is_string(v)) return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer_config.json: \"%s\" must be a string", key);
    *out = json_string_value(v);
    return VKF_OK;
}

/* transformers' convert_tokens_to_ids: the token's id, else the unk token's. */
static int32_t lookup(const vkf_bpe_text *t, const char *token)
{
    int32_t id = vkf_hftok_token_id(t->tok, token);
    return id >= 0 ? id : t->unk;
}

static vkf_status set_ids(vkf_bpe_text *t, int32_t *pre, uint32_t np, int32_t *post, uint32_t nq)
{
    t->prefix = malloc((np ? np : 1) * sizeof *pre);
    t->suffix = malloc((nq ? nq : 1) * sizeof *post);
    if (!t->prefix || !t->suffix) return OOM();
    memcpy(t->prefix, pre, np * sizeof *pre);
    memcpy(t->suffix, post, nq * sizeof *post);
    t->n_prefix = np, t->n_suffix = nq;
    return VKF_OK;
}

/* The special ids: RobertaProcessing's, or set_prefix_tokens' of Whisper. */
static vkf_status special_ids(vkf_bpe_text *t, const added_plan *P, const json_t *tc)
{
    int32_t ids[7];
    for (int k = 0; k < 7; k++) {
        ids[k] = -1;
        if (P->has_named[k]) {
            char *s = P->named[k].content;
            if (memchr(s, '\0', P->named[k].len)) continue;
            ids[k] = vkf_hftok_token_id(t->tok, s);
        }
    }
    t->bos = ids[0], t->eos = ids[1], t->unk = ids[2], t->pad = ids[4], t->mask = ids[6];
    if (t->kind == VKF_BPE_BART) {
        if (ids[5] < 0 || ids[3] < 0)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "the tokenizer has no %s token (%s)", ids[5] < 0 ? "cls" : "sep",
                            ids[5] < 0 ? "<s>" : "</s>");
        return set_ids(t, &ids[5], 1, &ids[3], 1);
    }
    t->sot = vkf_hftok_token_id(t->tok, "<|startoftranscript|>");
    t->sot_prev = vkf_hftok_token_id(t->tok, "<|startofprev|>");
    t->sot_lm = vkf_hftok_token_id(t->tok, "<|startoflm|>");
    t->no_speech = vkf_hftok_token_id(t->tok, "<|nospeech|>");
    if (t->no_speech < 0) t->no_speech = vkf_hftok_token_id(t->tok, "<|nocaptions|>");
    t->no_timestamps = vkf_hftok_token_id(t->tok, "<|notimestamps|>");
    t->transcribe = vkf_hftok_token_id(t->tok, "<|transcribe|>");
    t->translate = vkf_hftok_token_id(t->tok, "<|translate|>");
    t->timestamp_begin = vkf_hftok_token_id(t->tok, "<|0.00|>");
    t->n_timestamps = 0;
    if (t->timestamp_begin >= 0) {
        for (uint32_t i = 1; i <= 1500; i++) {
            char s[16];
            snprintf(s, sizeof s, "<|%u.%02u|>", (2 * i) / 100, (2 * i) % 100);
            if (vkf_hftok_token_id(t->tok, s) != t->timestamp_begin + (int32_t)i) break;
            t->n_timestamps = i + 1;
        }
        if (!t->n_timestamps) t->n_timestamps = 1;
    }
    if (t->sot < 0) return vkf_fail(VKF_ERROR_BAD_MODEL, "the tokenizer has no <|startoftranscript|> token: not Whisper's");
    if (t->eos < 0) return vkf_fail(VKF_ERROR_BAD_MODEL, "the tokenizer has no eos token (<|endoftext|>)");
    const char *lang = NULL, *task = NULL;
    bool predict = false;
    VKF_TRY(config_string(tc, "language", &lang));
    VKF_TRY(config_string(tc, "task", &task));
    VKF_TRY(config_bool(tc, "tokenizer_config.json", "predict_timestamps", false, &predict));
    int32_t pre[4], np = 0;
    pre[np++] = lookup(t, "<|startoftranscript|>");
    if (lang) {
        int32_t i = vkf_whisper_language_index(lang);
        if (i < 0) {
            char q[VKF_QUOTE_SIZE];
            return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer_config.json: language %s is not one of Whisper's",
                            quoted(q, sizeof q, lang, strlen(lang)));
        }
        pre[np++] = pre[0] + 1 + i;
    }
    if (task) {
        if (strcmp(task, "transcribe") != 0 && strcmp(task, "translate") != 0) {
            char q[VKF_QUOTE_SIZE];
            return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer_config.json: task %s is neither transcribe nor translate",
                            quoted(q, sizeof q, task, strlen(task)));
        }
        pre[np++] = lookup(t, strcmp(task, "transcribe") == 0 ? "<|transcribe|>" : "<|translate|>");
    }
    if (!predict) pre[np++] = lookup(t, "<|notimestamps|>");
    for (int32_t i = 0; i < np; i++)
        if (pre[i] < 0 || (uint32_t)pre[i] >= vkf_hftok_vocab_size(t->tok))
            return vkf_fail(VKF_ERROR_BAD_MODEL, "the tokenizer's prefix token %d (language, task or <|notimestamps|>) "
                            "is not one of its ids", pre[i]);
    return set_ids(t, pre, (uint32_t)np, &t->eos, 1);
}

vkf_status vkf_bpe_open(const char *dir, vkf_bpe_kind kind, vkf_bpe_text **out)
{
    if (!out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_bpe_open: out is NULL");
    *out = NULL;
    if (!dir) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_bpe_open: dir is NULL");
    json_t *tc = NULL, *stm = NULL, *atj = NULL, *root = NULL, *vocab = NULL;
    added_plan P = {0};
    vkf_bpe_text *t = calloc(1, sizeof *t);
    if (!t) return OOM();
    t->kind = kind;
    t->sot = t->sot_prev = t->sot_lm = t->no_speech = t->no_timestamps = t->transcribe = t->translate = -1;
    t->timestamp_begin = -1;
    const char *what = NULL;
    /* tokenizer_config.json holds model_max_length 1e30 written as an integer, past
     * json_int_t: its numbers are read as reals (none of its keys read here is one) */
    vkf_status st = vkf_tok_read_json(dir, "tokenizer_config.json", MAX_CONFIG_BYTES, JSON_DECODE_INT_AS_REAL, &tc);
    if (st == VKF_OK && tc && !json_is_object(tc))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer_config.json must hold a JSON object");
    if (st == VKF_OK) {
        t->from_json = vkf_tok_file(dir, "tokenizer.json", &what);
        if (!t->from_json && strcmp(what, "missing") != 0)
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json is %s", what);
    }
    if (st == VKF_OK && t->from_json) {
        st = vkf_tok_read_json(dir, "tokenizer.json", VKF_HFTOK_MAX_FILE_BYTES, JSON_ALLOW_NUL, &root);
        if (st == VKF_OK && !json_is_object(root))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json must hold a JSON object");
        const json_t *m = st == VKF_OK ? json_object_get(root, "model") : NULL;
        const json_t *type = json_is_object(m) ? json_object_get(m, "type") : NULL;
        if (st == VKF_OK && (!json_is_string(type) || strcmp(json_string_value(type), "BPE") != 0))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: model.type must be \"BPE\" for a %s tokenizer",
                          kind == VKF_BPE_BART ? "BART" : "Whisper");
    } else if (st == VKF_OK) {
        const char *bad_file = !vkf_tok_file(dir, "vocab.json", &what) ? "vocab.json"
                               : !vkf_tok_file(dir, "merges.txt", &what) ? "merges.txt" : NULL;
        if (bad_file) st = vkf_fail(VKF_ERROR_BAD_MODEL, "the folder has no tokenizer.json, and %s is %s", bad_file, what);
        if (st == VKF_OK) st = vkf_tok_read_json(dir, "vocab.json", MAX_CONFIG_BYTES, JSON_REJECT_DUPLICATES, &vocab);
        if (st == VKF_OK && !json_is_object(vocab))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "vocab.json must hold an object (token -> id)");
        json_t *merges = st == VKF_OK ? json_array() : NULL;
        if (st == VKF_OK && !merges) st = OOM();
        if (st == VKF_OK) st = read_merges(dir, vocab, merges);
        if (st == VKF_OK) {
            root = json_pack("{s:{s:s, s:O, s:o}}", "model", "type", "BPE", "vocab", vocab, "merges", merges);
            merges = NULL;
            if (!root) st = OOM();
        }
        json_decref(merges);
        if (st == VKF_OK) st = vkf_tok_read_json(dir, "special_tokens_map.json", MAX_CONFIG_BYTES, 0, &stm);
        if (st == VKF_OK && stm && !json_is_object(stm))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "special_tokens_map.json must hold an object");
        if (st == VKF_OK) st = vkf_tok_read_json(dir, "added_tokens.json", MAX_CONFIG_BYTES, JSON_REJECT_DUPLICATES, &atj);
    }
    if (st == VKF_OK) {
        const json_t *fa = t->from_json ? json_object_get(root, "added_tokens") : NULL;
        if (fa && !json_is_null(fa) && !json_is_array(fa))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: added_tokens must be a list");
        if (st == VKF_OK) st = plan_added(kind, tc, stm, atj, json_is_array(fa) ? fa : NULL, &P);
    }
    /* the class's parts around the vocabulary and merges */
    json_t *added = st == VKF_OK ? json_array() : NULL;
    for (size_t i = 0; added && i < P.added.n; i++)
        if (json_array_append_new(added, token_json(&P.added.v[i], i)) != 0) st = OOM();
    bool aps = false;
    if (st == VKF_OK) st = config_bool(tc, "tokenizer_config.json", "add_prefix_space", false, &aps);
    if (st == VKF_OK) {
        json_t *model = json_object_get(root, "model");
        int bad = json_object_set_new(root, "added_tokens", added);
        added = NULL;
        bad |= json_object_set_new(root, "normalizer", json_null());
        bad |= json_object_set_new(root, "pre_tokenizer", json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel",
                                                                    "add_prefix_space", aps, "trim_offsets", 1,
                                                                    "use_regex", 1));
        bad |= json_object_set_new(root, "post_processor", json_null());
        bad |= json_object_set_new(root, "decoder", json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel",
                                                              "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1));
        bad |= json_object_set_new(model, "dropout", json_null());
        bad |= json_object_set_new(model, "unk_token", json_null());
        bad |= json_object_set_new(model, "continuing_subword_prefix", json_string(""));
        bad |= json_object_set_new(model, "end_of_word_suffix", json_string(""));
        bad |= json_object_set_new(model, "fuse_unk", json_false());
        bad |= json_object_set_new(model, "byte_fallback", json_false());
        bad |= json_object_set_new(model, "ignore_merges", json_false());
        if (bad) st = OOM();
    }
    json_decref(added);
    if (st == VKF_OK) st = vkf_hftok_load_value(t->from_json ? "tokenizer.json" : "vocab.json", root, &t->tok);
    if (st == VKF_OK) st = special_ids(t, &P, tc);
    tok_list_free(&P.added);
    json_decref(root), json_decref(vocab), json_decref(tc), json_decref(stm), json_decref(atj);
    if (st != VKF_OK) {
        vkf_bpe_free(t);
        return st;
    }
    *out = t;
    return VKF_OK;
}

/* ------------------------------------------------------------------ running */

vkf_status vkf_bpe_encode(const vkf_bpe_text *t, const char *text, size_t len, bool add_special, int32_t **out_ids,
                          uint32_t *out_count)
{
    if (!out_ids || !out_count) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_bpe_encode: an output is NULL");
    *out_ids = NULL, *out_count = 0;
    if (!t) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_bpe_encode: the tokenizer is NULL");
    int32_t *ids = NULL;
    uint32_t n = 0;
    VKF_TRY(vkf_hftok_encode(t->tok, text, len, false, &ids, &n));
    if (!add_special) {
        *out_ids = ids, *out_count = n;
        return VKF_OK;
    }
    size_t total = (size_t)t->n_prefix + n + t->n_suffix;
    if (total > UINT32_MAX) {
        free(ids);
        return vkf_fail(VKF_ERROR_TOO_LARGE, "the text has more than %u tokens", UINT32_MAX);
    }
    int32_t *all = malloc(total * sizeof *all);
    if (!all) {
        free(ids);
        return OOM();
    }
    memcpy(all, t->prefix, t->n_prefix * sizeof *all);
    if (n) memcpy(all + t->n_prefix, ids, n * sizeof *all);
    memcpy(all + t->n_prefix + n, t->suffix, t->n_suffix * sizeof *all);
    free(ids);
    *out_ids = all, *out_count = (uint32_t)total;
    return VKF_OK;
}

/* Length of a match of <\|(\d+\.\d+)\|> at s[i..n) (\d: any Unicode decimal
 * digit, as Python's re on str), 0 if none. */
static size_t timestamp_at(const char *s, size_t n, size_t i)
{
    if (i + 2 > n || s[i] != '<' || s[i + 1] != '|') return 0;
    size_t k = i + 2;
    for (int part = 0; part < 2; part++) {
        size_t digits = 0;
        while (k < n) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + k, (utf8proc_ssize_t)(n - k), &cp);
            if (l <= 0 || utf8proc_category(cp) != UTF8PROC_CATEGORY_ND) break;
            k += (size_t)l, digits++;
        }
        if (!digits) return 0;
        if (part == 0) {
            if (k >= n || s[k] != '.') return 0;
            k++;
        }
    }
    if (k + 2 > n || s[k] != '|' || s[k + 1] != '>') return 0;
    return k + 2 - i;
}

vkf_status vkf_bpe_decode(const vkf_bpe_text *t, const int32_t *ids, uint32_t n, bool skip_special, char **out_text,
                          size_t *out_len)
{
    if (!out_text) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_bpe_decode: out_text is NULL");
    *out_text = NULL;
    if (out_len) *out_len = 0;
    if (!t || (n && !ids)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_bpe_decode: %s is NULL",
                                           t ? "ids" : "the tokenizer");
    if (t->kind == VKF_BPE_WHISPER && skip_special && n) {
        /* _strip_prompt: <|startofprev|> ... up to the first <|startoftranscript|> */
        int32_t prev = lookup(t, "<|startofprev|>"), sot = lookup(t, "<|startoftranscript|>");
        if (ids[0] == prev) {
            uint32_t k = 0;
            while (k < n && ids[k] != sot) k++;
            ids += k, n -= k;
        }
    }
    char *text = NULL;
    size_t len = 0;
    VKF_TRY(vkf_hftok_decode_n(t->tok, ids, n, skip_special, &text, &len));
    if (t->kind == VKF_BPE_WHISPER) {
        size_t o = 0;
        for (size_t i = 0; i < len;) {
            size_t m = timestamp_at(text, len, i);
            if (m) {
                i += m;
                continue;
            }
            text[o++] = text[i++];
        }
        text[o] = '\0';
        len = o;
    }
    *out_text = text;
    if (out_len) *out_len = len;
    return VKF_OK;
}

int32_t vkf_bpe_token_id(const vkf_bpe_text *t, const char *token)
{
    return t && token ? vkf_hftok_token_id(t->tok, token) : -1;
}

uint32_t vkf_bpe_size(const vkf_bpe_text *t) { return t ? vkf_hftok_vocab_size(t->tok) : 0; }

/* The parts of the tokenizer.json pipeline (tokenizer_json.h is its face),
 * shared by the files that hold them; private to src/tokenizers/. The files
 * follow Hugging Face tokenizers' own stages, one file each:
 *   normalizers.c      Sequence, Precompiled, NFC/NFD/NFKC/NFKD, Lowercase, Strip, Replace, Prepend
 *   pre_tokenizers.c   Sequence, Metaspace, ByteLevel, Whitespace(Split), Split, Punctuation, Digits, ...
 *   model_bpe.c        the BPE model        model_unigram.c   the Unigram model (models.c: what they share)
 *   added_tokens.c     AddedVocabulary: added and special tokens, found before the stages run
 *   post_processors.c  Sequence, TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel
 *   decoders.c         Sequence, Metaspace, ByteLevel, Replace, Strip, Fuse, ByteFallback
 *   tokenizer_json.c   the pipeline: loads each stage in turn, encodes and decodes through them
 * on what every stage works with: text.c (buffers, UTF-8, maps, trie, character
 * classes), patterns.c (regexes and matches), normalized.c (normalized strings
 * and splits), json_read.c (component getters with JSON paths). A stage is a
 * small type with load / apply / free; a new one is one case in its file.
 * Names that leave a file carry the prefix tj_ (tokenizer.json). */
#ifndef VKF_TOKENIZERS_PIPELINE_H
#define VKF_TOKENIZERS_PIPELINE_H

#include "tokenizers/charsmap.h"
#include "tokenizers/tokenizer_json.h"
#include "runtime/runtime.h"

#include <jansson.h>
#include <oniguruma.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OOM() vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "tokenizer.json: out of host memory")

/* ---- text.c: arrays, byte buffers, UTF-8, quoting, hash maps, the byte trie, character classes */
/* A byte buffer. */
typedef struct buf {
    char *b;
    size_t n, cap;
} buf;
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
/* A byte trie over strings, each (node, byte) -> child in a umap; node 0 the root. */
typedef struct trie {
    umap next;          /* (node << 8 | byte) -> child node */
    int32_t *value;     /* owned, per node: what ends there (an id or index), -1 none */
    size_t nodes, cap;
    uint8_t first[32];  /* bit set of the bytes that leave the root */
} trie;

void *tj_xrealloc_array(void *p, size_t n, size_t size);
bool tj_grow(void **v, size_t *cap, size_t need, size_t size);
char *tj_dup_bytes(const char *s, size_t n);
bool tj_buf_put(buf *o, const void *s, size_t n);
/* Length of the UTF-8 character that starts with byte c (input known valid). */
static inline size_t tj_u8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4; }
uint32_t tj_u8_next(const char *s, size_t *i);
size_t tj_u8_encode(uint32_t cp, char *out);
bool tj_u8_lossy(buf *o, const char *s, size_t n);
bool tj_u8_valid(const char *s, size_t n);
size_t tj_u8_count(const char *s, size_t n);
const char *tj_quote(char *out, size_t cap, const char *s, size_t n);
bool tj_smap_set(smap *m, const char *key, size_t len, int32_t value, int32_t *old);
int32_t tj_smap_get(const smap *m, const char *key, size_t len);
bool tj_umap_set(umap *m, uint64_t key, uint64_t value);
bool tj_umap_get(const umap *m, uint64_t key, uint64_t *value);
bool tj_trie_init(trie *t);
void tj_trie_free(trie *t);
bool tj_trie_add(trie *t, const char *key, size_t len, int32_t value, bool keep_first);
bool tj_trie_step(const trie *t, uint64_t *node, unsigned char c);
bool tj_is_ws(uint32_t c);
bool tj_is_numeric(uint32_t c);
bool tj_is_punc(uint32_t c);
size_t tj_to_lower(uint32_t c, uint32_t out[2]);
/* GPT-2's bytes_to_unicode (ByteLevel): the character that stands for byte b, and
 * the byte a character stands for (-1: none). */
uint32_t tj_byte_char(unsigned char b);
int tj_char_byte(uint32_t c);

/* ------------------------------------------------------- patterns.c: regexes and their matches */
typedef struct rx {
    regex_t *re;        /* owned */
} rx;
/* One piece of a string: [start, end), and whether a pattern matched it. */
typedef struct piece {
    size_t start, end;
    bool match;
} piece;
typedef struct pieces {
    piece *v;
    size_t n, cap;
} pieces;
/* A pattern of a Split pre-tokenizer or a Replace: a literal string or a regex. */
typedef struct pattern {
    bool is_regex;
    char *lit;          /* owned */
    size_t lit_len;
    rx re;
} pattern;

/* Oniguruma initialised (once per process); false when it failed. */
bool tj_onig_ready(void);
bool tj_rx_compile(rx *r, const char *pat, size_t len, char *why, size_t why_size);
void tj_pattern_free(pattern *p);
typedef bool (*char_class)(uint32_t c, const void *arg);
vkf_status tj_find_matches(const pattern *p, const char *s, size_t len, bool invert, pieces *out);
vkf_status tj_find_char_matches(char_class f, const void *arg, const char *s, size_t len, pieces *out);

/* ------------------------------------------------- normalized.c: normalized strings and splits */
/* A normalized string (tokenizers' NormalizedString): bytes, and per byte the
 * offset in the input its character aligns to (the start of its alignment);
 * shift: where the string's own original begins in the input. */
typedef struct nstr {
    char *s;            /* owned, NUL-terminated */
    uint32_t *al;       /* owned, len entries */
    size_t len, cap;
    uint32_t shift;
} nstr;
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
/* How a split pre-tokenizer treats what its pattern matched. */
typedef enum behavior {
    B_REMOVED = 0,
    B_ISOLATED,
    B_MERGED_WITH_PREVIOUS,
    B_MERGED_WITH_NEXT,
    B_CONTIGUOUS,
} behavior;

void tj_nstr_free(nstr *n);
bool tj_nstr_reserve(nstr *n, size_t need);
bool tj_nstr_put(nstr *n, const char *s, size_t len, uint32_t al);
bool tj_nstr_put_cp(nstr *n, uint32_t cp, uint32_t al);
bool tj_nstr_copy_range(nstr *out, const nstr *n, size_t a, size_t b);
bool tj_nstr_slice(nstr *out, const nstr *n, size_t a, size_t b);
bool tj_tc_add(tchanges *t, uint32_t cp, int32_t change);
vkf_status tj_nstr_transform(nstr *n, const tchanges *t, size_t initial_offset);
vkf_status tj_nstr_from_input(nstr *n, const char *s, size_t len);
void tj_splits_free(splits *s);
bool tj_splits_add(splits *s, nstr *ns, int32_t id);
vkf_status tj_split_pieces(const nstr *n, pieces *m, behavior b, splits *out);
vkf_status tj_nstr_replace(nstr *n, const pattern *p, const char *content, size_t content_len);
vkf_status tj_nstr_prepend(nstr *n, const char *text, size_t len);

/* ------------------------------------------------------------- json_read.c: reading components */
/* The file's name for messages, and the JSON helpers every component uses. */
typedef struct ld {
    const char *name;
} ld;
/* A path one level down: "PATH.key" or "PATH[i]". */
typedef struct jpath {
    char s[224];
} jpath;
/* Metaspace's prepend_scheme */
typedef enum prepend_scheme { PS_ALWAYS = 0, PS_FIRST, PS_NEVER } prepend_scheme;

vkf_status tj_bad(const ld *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *tj_jtype(const json_t *j);
jpath tj_jp_key(const char *path, const char *key);
jpath tj_jp_index(const char *path, size_t i);
vkf_status tj_get_str(const ld *L, const json_t *obj, const char *path, const char *key, bool required, size_t max, bool nul_ok, const char **s, size_t *len);
vkf_status tj_get_bool(const ld *L, const json_t *obj, const char *path, const char *key, bool dflt, bool *out);
vkf_status tj_get_uint_v(const ld *L, const json_t *v, const char *path, uint64_t max, uint64_t *out);
vkf_status tj_get_uint(const ld *L, const json_t *obj, const char *path, const char *key, bool required, uint64_t max, uint64_t dflt, uint64_t *out);
vkf_status tj_get_type(const ld *L, const json_t *obj, const char *path, const char **type);
vkf_status tj_unsupported(const ld *L, const char *path, const char *type);
vkf_status tj_get_array(const ld *L, const json_t *obj, const char *path, const char *key, size_t max, json_t **out);
vkf_status tj_get_char(const ld *L, const json_t *obj, const char *path, const char *key, bool required, uint32_t dflt, uint32_t *out);
vkf_status tj_load_pattern(const ld *L, const json_t *obj, const char *path, const char *key, pattern *out);
vkf_status tj_get_behavior(const ld *L, const json_t *obj, const char *path, const char *key, behavior dflt, behavior *out);
vkf_status tj_get_scheme(const ld *L, const json_t *j, const char *path, prepend_scheme *out);
/* A Sequence component: the list j[key] (at most VKF_HFTOK_MAX_ITEMS, nested at
 * most VKF_HFTOK_MAX_DEPTH deep) loaded item by item with load into *out_kids
 * (calloc'd, items of `size` bytes); *out_n counts the items begun, a failed one
 * included, so that the stage's free() frees what was loaded. */
typedef vkf_status (*tj_load_item)(const ld *L, const json_t *j, const char *path, int depth, void *out);
vkf_status tj_load_sequence(const ld *L, const json_t *j, const char *path, const char *key, int depth, size_t size,
                            tj_load_item load, void **out_kids, size_t *out_n);

/* ------------------------------------------------------------------------------- normalizers.c */
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

void tj_norm_free(norm *n);
vkf_status tj_load_norm(const ld *L, const json_t *j, const char *path, int depth, norm *out);
vkf_status tj_norm_apply(const norm *nm, nstr *n);

/* ---------------------------------------------------------------------------- pre_tokenizers.c */
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

void tj_pretok_free(pretok *p);
vkf_status tj_load_pretok(const ld *L, const json_t *j, const char *path, int depth, pretok *out);
vkf_status tj_pretok_apply(const pretok *p, splits *s);

/* ------------------------------------------------------ models.c, model_bpe.c, model_unigram.c */
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
/* An id list under construction. */
typedef struct ids {
    int32_t *v;
    size_t n, cap;
} ids;
typedef struct sym {
    int32_t id;
    int32_t prev, next;         /* -1: none */
    uint32_t len;               /* bytes; 0: merged away */
} sym;
typedef struct word {
    sym *v;
    size_t n, cap;
} word;
typedef struct node {
    double score;
    int64_t starts_at;          /* -1: none */
    int32_t id;
} node;

void tj_find_byte_ids(const smap *vocab, int32_t out[256]);
void tj_model_free(model *m);
vkf_status tj_model_alloc_ids(model *m, size_t n);
bool tj_ids_add(ids *o, int32_t id);
int32_t tj_model_token_id(const model *m, const char *s, size_t n);
vkf_status tj_load_bpe(const ld *L, const json_t *j, const char *path, model *m);
vkf_status tj_bpe_tokenize(const model *m, const char *s, size_t len, ids *out, buf *scratch, word *w);
vkf_status tj_load_unigram(const ld *L, const json_t *j, const char *path, model *m);
vkf_status tj_unigram_tokenize(const model *m, const char *s, size_t len, ids *out, node **best_buf, size_t *best_cap);

/* ------------------------------------------------------------------------------ added_tokens.c */
typedef struct added {
    char *content;              /* owned */
    size_t len;
    char *shown;                /* owned: what id_to_token gives (a normalized token: its normalized form) */
    size_t shown_len;
    int32_t id;
    bool single_word, lstrip, rstrip, normalized, special;
} added;
/* AddedVocabulary::find_matches: splits of s [start, end) with an added token's
 * index or -1. */
typedef struct amatch {
    size_t start, end;
    int32_t idx;
} amatch;

vkf_status tj_added_matches(const added *tokens, const trie *tr, const char *s, size_t len, amatch **out, size_t *n, size_t *cap);
vkf_status tj_load_added(const ld *L, const json_t *root, vkf_hftok *t);

/* --------------------------------------------------------------------------- post_processors.c */
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

void tj_postproc_free(postproc *p);
vkf_status tj_load_postproc(const ld *L, const json_t *j, const char *path, int depth, postproc *out);
vkf_status tj_postproc_apply(const postproc *p, ids *x);

/* ---------------------------------------------------------------------------------- decoders.c */
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
/* A list of token strings (each owned, NUL-terminated). */
typedef struct toks {
    buf *v;
    size_t n, cap;
} toks;

void tj_decoder_free(decoder *d);
vkf_status tj_load_decoder(const ld *L, const json_t *j, const char *path, int depth, decoder *out);
void tj_toks_free(toks *t);
bool tj_toks_add(toks *t, const char *s, size_t n);
vkf_status tj_decoder_apply(const decoder *d, toks *t);

/* ---------------------------------------------------------------------------- tokenizer_json.c: the pipeline */
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

#endif

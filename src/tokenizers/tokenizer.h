/* The tokenizers layer (src/tokenizers/), the one interface the families call
 * (internal, not public: every symbol here is hidden in libvkformer.so):
 *   spm.cc            SentencePiece (the source.spm / target.spm of Marian, the
 *                     sentencepiece.bpe.model of fairseq's families) behind a C
 *                     interface: a thin C++ shim over the system's libsentencepiece
 *                     (Debian 12: 0.1.97); charsmap.c checks its precompiled maps
 *   vocab.c           vocab.json of slow tokenizers, and spm text through a vocabulary
 *   folder.c          a tokenizer folder's files
 *   bytelevel_bpe.c   byte-level BPE of BART and Whisper folders (vkf_bpe_*)
 *   tokenizer_json.h  Hugging Face tokenizer.json (vkf_hftok_*), run in the stages
 *                     of Hugging Face tokenizers, one file each (pipeline.h lists them)
 * The families see these functions and the structs below, never a stage's insides.
 *
 * Untrusted files: the protobuf is walked before sentencepiece sees it, and every
 * precompiled charsmap in it (normalizer_spec and denormalizer_spec) must pass
 * vkf_charsmap_parse (charsmap.h), since sentencepiece follows the charsmap's
 * offsets unchecked; pieces must be non-empty, without NUL, with finite scores.
 *
 * Rules of the shim: it never prints, never exits, never throws into C. Every C++
 * exception (std::bad_alloc included) becomes -1 / NULL with a one-line message in
 * err; sentencepiece's own logging is turned off (see vkf_spm_load). Model files
 * come from anywhere: a missing, empty, truncated or garbage file, or a directory,
 * is an error naming the path. err may be NULL (or err_size 0) when the caller
 * does not want the message; otherwise it is always NUL-terminated, truncated to
 * err_size.
 *
 * Thread safety: a loaded vkf_spm is immutable; vkf_spm_size, vkf_spm_piece,
 * vkf_spm_encode and vkf_spm_decode may be called on one vkf_spm from several
 * threads at once (they call only const methods of SentencePieceProcessor).
 */
#ifndef VKF_TOKENIZER_H
#define VKF_TOKENIZER_H

#include "vkformer.h"
#include "tokenizers/tokenizer_json.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vkf_spm vkf_spm;
struct json_t;

/* Kinds of piece (SentencePiece's ModelProto.SentencePiece.Type). */
enum {
    VKF_SPM_NORMAL = 0,
    VKF_SPM_UNKNOWN = 1,
    VKF_SPM_CONTROL = 2,
    VKF_SPM_USER_DEFINED = 3,
    VKF_SPM_BYTE = 4,
    VKF_SPM_UNUSED = 5,
};

/* Loads a SentencePiece model file. NULL on failure with a one-line reason
 * (naming the file) in err. Each call first sets sentencepiece's process-wide
 * minimum log level to FATAL, so that the library (which logs to std::cerr) prints
 * nothing; that also applies to other users of libsentencepiece in the process. */
vkf_spm *vkf_spm_load(const char *path, char *err, size_t err_size);
/* The same for a model file image in memory (size bytes; copied, the caller keeps
 * data); name stands for the path in messages (NULL: "(buffer)"). The fuzzer's
 * entry. */
vkf_spm *vkf_spm_load_bytes(const void *data, size_t size, const char *name, char *err, size_t err_size);
/* NULL is fine. */
void vkf_spm_free(vkf_spm *s);

/* Number of pieces (0 for NULL), and piece i (NUL-terminated, owned by s; NULL
 * for NULL s or i out of range); *kind (if kind is not NULL): one of VKF_SPM_*. */
uint32_t vkf_spm_size(const vkf_spm *s);
const char *vkf_spm_piece(const vkf_spm *s, uint32_t i, int *kind);
/* The score of piece i (its unigram log-probability; 0 for NULL s or i out of range). */
float vkf_spm_score(const vkf_spm *s, uint32_t i);
/* The normalizer's precompiled charsmap (owned by s, *len bytes; NULL and 0 when the
 * model has none), as transformers copies it into a tokenizer.json's Precompiled. */
const char *vkf_spm_charsmap(const vkf_spm *s, size_t *len);
/* trainer_spec.model_type: 1 unigram, 2 BPE, 3 word, 4 char (0 for NULL). */
int vkf_spm_model_type(const vkf_spm *s);
/* The id of a piece (exact bytes), or -1 when it is not one of the model's. */
int32_t vkf_spm_piece_id(const vkf_spm *s, const char *piece, size_t len);

/* Encodes UTF-8 text into pieces (as SentencePieceProcessor::Encode(text,
 * &pieces)); calls fn(piece, len, user) for each piece in order (piece is
 * NUL-terminated, valid during the call only); a non-zero return from fn stops
 * the encoding and is returned. Returns 0, or -1 with err set. Invalid UTF-8 is
 * handled as sentencepiece does (each bad byte becomes U+FFFD). */
int vkf_spm_encode(const vkf_spm *s, const char *text,
                   int (*fn)(const char *piece, size_t len, void *user), void *user,
                   char *err, size_t err_size);
/* The same for text of len bytes (which may hold NUL bytes). */
int vkf_spm_encode_n(const vkf_spm *s, const char *text, size_t len,
                     int (*fn)(const char *piece, size_t len, void *user), void *user,
                     char *err, size_t err_size);

/* Decodes pieces into text (as DecodePieces); *out is malloc'd and NUL-terminated,
 * the caller frees it. Returns 0, or -1 with err set (and *out NULL). */
int vkf_spm_decode(const vkf_spm *s, const char *const *pieces, size_t n, char **out,
                   char *err, size_t err_size);

/* ------------------------------------------------------------------ vocabularies and spm text (vocab.c) */

/* A vocab.json: pieces by id and a sorted index for lookups by piece. */
typedef struct vkf_vocab {
    char **piece;                       /* (n) owned */
    uint32_t *order;                    /* (n) owned: ids sorted by piece */
    uint32_t n;
    int32_t unk_id;                     /* "<unk>"'s id, or -1 */
} vkf_vocab;
/* JSON object piece -> id for ids 0..n-1, each once (n 0: as many as it holds). */
vkf_status vkf_vocab_json(const char *file, struct json_t *j, uint32_t n, vkf_vocab *out);
int32_t vkf_vocab_id(const vkf_vocab *v, const char *piece, size_t len);
void vkf_vocab_free(vkf_vocab *v);
/* "</s>" is eos, "<pad>" is pad and "<unk>" is there. */
vkf_status vkf_vocab_check_specials(const char *file, const vkf_vocab *v, int32_t eos, int32_t pad);
/* Every ordinary piece of the spm has an id in v. */
vkf_status vkf_vocab_check_spm(const vkf_vocab *v, const char *vname, const vkf_spm *s, const char *name);
/* dir/name loaded as a SentencePiece model. */
vkf_status vkf_spm_open(const char *dir, const char *name, vkf_spm **out);
/* text (len bytes) -> spm pieces -> ids: through vocab (NULL: the fairseq offset,
 * spm id + 1), an unknown piece as unk_id; at most capacity ids. */
vkf_status vkf_spm_ids(const vkf_spm *spm, const vkf_vocab *vocab, int32_t unk_id, const char *text, size_t len,
                       int32_t *out_ids, uint32_t capacity, uint32_t *out_count);
/* pieces -> text through the spm's decoder, U+2581 left as a space, ends stripped. */
vkf_status vkf_spm_text(const vkf_spm *spm, const char *const *pieces, size_t n, char *out_text, size_t capacity);
/* pieces -> text as tokenizers' Metaspace decoder joins them (what transformers
 * 5.12's NllbTokenizer and MBart50Tokenizer run over an spm's pieces): U+2581
 * becomes a space, a leading one of the first piece is dropped, nothing else. */
vkf_status vkf_spm_text_metaspace(const char *const *pieces, size_t n, char *out_text, size_t capacity);

/* ------------------------------------------------------------------ the folder's files (folder.c) */

/* Whether dir/name is a regular file; *what (if not NULL): "missing" or "not a
 * regular file" when it is not, NULL when it is. */
bool vkf_tok_file(const char *dir, const char *name, const char **what);
/* dir/name parsed as JSON (any value; flags for jansson), *out NULL with VKF_OK
 * when the file is absent; BAD_MODEL naming the file past max bytes, when it is
 * no regular file or no valid JSON. */
vkf_status vkf_tok_read_json(const char *dir, const char *name, size_t max, size_t flags, struct json_t **out);
/* A list of token strings (owned). */
typedef struct vkf_tok_names {
    char **name;                        /* (n) owned */
    uint32_t n;
} vkf_tok_names;
void vkf_tok_names_free(vkf_tok_names *l);
bool vkf_tok_names_has(const vkf_tok_names *l, const char *name);
/* The extra special tokens a folder of a slow SentencePiece tokenizer declares
 * (M2M100Tokenizer's language tokens: the hub's special_tokens_map.json lists
 * them), as transformers 5.12's from_pretrained resolves them: tc's
 * (tokenizer_config.json, or NULL) extra_special_tokens, else its
 * additional_special_tokens; where tc has neither and no added_tokens_decoder (a
 * save_pretrained config), dir/special_tokens_map.json's extra_special_tokens,
 * else its additional_special_tokens; else none. Items are strings or objects
 * with a "content" string. *out is emptied first; free it with vkf_tok_names_free. */
vkf_status vkf_tok_extra_specials(const char *dir, const struct json_t *tc, vkf_tok_names *out);

/* ------------------------------------------------------------------ byte-level BPE (bytelevel_bpe.c) */

/* GPT-2-style byte-level BPE as Hugging Face transformers 5.12 builds it for BART
 * (BartTokenizer, an alias of RobertaTokenizer) and Whisper (WhisperTokenizer),
 * from a model folder: tokenizer.json when the folder has one (as AutoTokenizer
 * prefers it), else vocab.json + merges.txt with added_tokens.json,
 * special_tokens_map.json and tokenizer_config.json. Runs on the tokenizer.json
 * reader (tokenizer_json.h); what transformers' class puts around the file is
 * applied here: ByteLevel pre-tokenizer (add_prefix_space from
 * tokenizer_config.json) and decoder, the BPE model without unk token, the added
 * and special tokens as transformers resolves them, RoBERTa's <s> text </s> or
 * Whisper's prefix (<|startoftranscript|>, language and task from
 * tokenizer_config.json, <|notimestamps|> unless predict_timestamps) and
 * <|endoftext|>; Whisper's decode strips a <|startofprev|> prompt (with
 * skip_special) and timestamp text, as WhisperTokenizer.decode does.
 * docs/tokenizers.md says what was compared with transformers. Files come from
 * anywhere: every problem is VKF_ERROR_BAD_MODEL with one line naming the file
 * (and line of merges.txt). A loaded vkf_bpe_text is immutable; every function
 * below taking a const one may be called from several threads at once. */
struct vkf_hftok;
typedef enum vkf_bpe_kind {
    VKF_BPE_BART = 0,                   /* RobertaTokenizer: <s> $A </s> */
    VKF_BPE_WHISPER = 1,                /* WhisperTokenizer */
} vkf_bpe_kind;

typedef struct vkf_bpe_text {
    struct vkf_hftok *tok;              /* owned */
    vkf_bpe_kind kind;
    bool from_json;                     /* read from tokenizer.json; else the slow files */
    int32_t *prefix, *suffix;           /* (n_prefix), (n_suffix) owned: what add_special puts around the text */
    uint32_t n_prefix, n_suffix;
    int32_t bos, eos, pad, unk, mask;   /* the named special tokens' ids, -1 where absent */
    /* Whisper's tokens, -1 where the tokenizer lacks them */
    int32_t sot, sot_prev, sot_lm, no_speech, no_timestamps, transcribe, translate;
    int32_t timestamp_begin;            /* <|0.00|>; <|0.02|> etc. follow it (n_timestamps in all) */
    uint32_t n_timestamps;
} vkf_bpe_text;

/* Opens dir's tokenizer as `kind`. *out NULL first, then the tokenizer (free with vkf_bpe_free). */
vkf_status vkf_bpe_open(const char *dir, vkf_bpe_kind kind, vkf_bpe_text **out);
/* NULL is fine. */
void vkf_bpe_free(vkf_bpe_text *t);
/* text (len bytes of UTF-8; ill-formed bytes read as U+FFFD) -> ids, with add_special the
 * prefix and suffix around them. *out_ids malloc'd (NULL when *out_count is 0). */
vkf_status vkf_bpe_encode(const vkf_bpe_text *t, const char *text, size_t len, bool add_special, int32_t **out_ids,
                          uint32_t *out_count);
/* ids -> text as the transformers class's decode(ids, skip_special_tokens): *out_text
 * malloc'd, NUL-terminated, its length in *out_len (may be NULL; a token may hold a NUL). */
vkf_status vkf_bpe_decode(const vkf_bpe_text *t, const int32_t *ids, uint32_t n, bool skip_special, char **out_text,
                          size_t *out_len);
/* A token's id (added tokens first), -1 if none. */
int32_t vkf_bpe_token_id(const vkf_bpe_text *t, const char *token);
/* Highest id + 1, added tokens included (transformers' len(tokenizer)). */
uint32_t vkf_bpe_size(const vkf_bpe_text *t);
/* Whisper's languages in the order of its language tokens (<|en|> = <|startoftranscript|> + 1 + 0,
 * ...): code ("en") and name ("english") of index i < vkf_whisper_language_count(), else NULL. */
uint32_t vkf_whisper_language_count(void);
const char *vkf_whisper_language_code(uint32_t i);
const char *vkf_whisper_language_name(uint32_t i);
/* The index of a language given as a code ("de") or a name, any case ("German", "castilian"
 * and transformers' other aliases), -1 if none. */
int32_t vkf_whisper_language_index(const char *code_or_name);

#ifdef __cplusplus
}
#endif

#endif

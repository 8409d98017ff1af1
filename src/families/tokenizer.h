/* The tokenizers the families call (internal, not public): byte-level BPE for
 * BART and Whisper folders (vkf_bpe_*, at the end; tokenizer_bpe.c), and
 * SentencePiece tokenization (the source.spm / target.spm of Hugging Face Marian
 * models) behind a C interface: a thin C++ shim (src/tokenizer_spm.cc) over the
 * system's libsentencepiece (Debian 12: 0.1.97). Internal, not public: every
 * symbol here is hidden in libvkformer.so.
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vkf_spm vkf_spm;

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

/* ------------------------------------------------------------------ byte-level BPE (tokenizer_bpe.c) */

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

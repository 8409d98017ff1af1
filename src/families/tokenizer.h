/* SentencePiece tokenization (the source.spm / target.spm of Hugging Face Marian
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

#ifdef __cplusplus
}
#endif

#endif

/* Hugging Face tokenizer.json (the `tokenizers` library's serialization, what
 * transformers 5.x save_pretrained writes, often beside only tokenizer_config.json)
 * read and run in C, the way tokenizers 0.23 runs it: added tokens split out
 * first, then normalizer, pre-tokenizer, model (BPE or Unigram), post-processor;
 * and ids back to text through the decoder. Internal, not public, part of the
 * tokenizers layer's interface (tokenizer.h includes it); the families that ship
 * tokenizer.json (NLLB-200, M2M-100, mBART-50, T5, BART, Whisper) build on it,
 * and the stages live in files of their own (pipeline.h). docs/tokenizers.md lists every component supported and how exactness
 * against tokenizers was checked.
 *
 * Files come from anywhere. Anything this reader does not run exactly as
 * tokenizers does (an unknown component, a wrong JSON type, a merge naming an
 * unknown token, a case where tokenizers itself would panic) is refused at load
 * with VKF_ERROR_BAD_MODEL and one line naming the JSON path, e.g.
 *   tokenizer.json: normalizer.normalizers[1].type "Foo" is not supported
 * Sizes are bounded (VKF_HFTOK_MAX_*), nesting is limited, and encoding is linear
 * in the input for every model (a 100 kB line of one character included), with
 * regexes from the file run under Oniguruma's retry limits.
 *
 * Text: UTF-8; ill-formed bytes in an input to vkf_hftok_encode are read as
 * U+FFFD (one per maximal ill-formed subpart, as Python's "replace" and Rust's
 * from_utf8_lossy do), since tokenizers only ever sees valid strings.
 *
 * Thread safety: a loaded vkf_hftok is immutable; every function below that takes
 * a const vkf_hftok * may be called from several threads at once.
 */
#ifndef VKF_TOKENIZER_JSON_H
#define VKF_TOKENIZER_JSON_H

#include "vkformer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Files larger than this are refused (real ones: 2-35 MB). */
#define VKF_HFTOK_MAX_FILE_BYTES (256u << 20)
/* Model vocabulary entries, merges and added tokens. */
#define VKF_HFTOK_MAX_VOCAB (1u << 22)
#define VKF_HFTOK_MAX_MERGES (1u << 23)
#define VKF_HFTOK_MAX_ADDED (1u << 20)
/* Highest token id (vocabulary or added). */
#define VKF_HFTOK_MAX_ID ((1u << 24) - 1)
/* Bytes of one token, added token, pattern or replacement string. */
#define VKF_HFTOK_MAX_TOKEN_BYTES 1024u
/* Nesting of Sequence components. */
#define VKF_HFTOK_MAX_DEPTH 8
/* Components in one Sequence, items in one template, ids of one special token. */
#define VKF_HFTOK_MAX_ITEMS 256u
/* Bytes of one input to vkf_hftok_encode. */
#define VKF_HFTOK_MAX_INPUT_BYTES ((size_t)1 << 30)

typedef struct vkf_hftok vkf_hftok;

/* Reads a tokenizer.json file. *out is set to NULL first and to the tokenizer on
 * success; VKF_ERROR_IO when the file cannot be read, VKF_ERROR_BAD_MODEL with
 * one line naming the JSON path of the problem. */
vkf_status vkf_hftok_load(const char *path, vkf_hftok **out);
/* The same for a file image in memory (len bytes, not NUL-terminated; copied as
 * needed, the caller keeps json); messages name it "tokenizer.json". The fuzzer's
 * entry. */
vkf_status vkf_hftok_load_bytes(const char *json, size_t len, vkf_hftok **out);
/* The same for a tokenizer.json already parsed (a jansson json_t; read, not
 * kept), e.g. one that tokenizer.h's vkf_bpe_open assembled from vocab.json and
 * merges.txt; name stands for the file in messages. */
struct json_t;
vkf_status vkf_hftok_load_value(const char *name, const struct json_t *root, vkf_hftok **out);
/* NULL is fine. */
void vkf_hftok_free(vkf_hftok *t);

/* text (len bytes of UTF-8) -> ids: added/special tokens split out first,
 * normalizer, pre-tokenizer, model; with add_special the post-processor's
 * single-sequence template. *out_ids is malloc'd (the caller frees it; NULL when
 * *out_count is 0). VKF_ERROR_BAD_MODEL where tokenizers fails on this text too
 * (an unknown piece with no unk token to stand for it), VKF_ERROR_TOO_LARGE past
 * VKF_HFTOK_MAX_INPUT_BYTES or a regex's retry limit. */
vkf_status vkf_hftok_encode(const vkf_hftok *t, const char *text, size_t len, bool add_special, int32_t **out_ids,
                            uint32_t *out_count);
/* ids -> UTF-8 text through the decoder (tokens joined by one space when the file
 * has none); ids that are no token are skipped, as tokenizers does; skip_special
 * drops special added tokens. Invalid byte sequences come out as tokenizers
 * writes them (U+FFFD). *out_text is malloc'd and NUL-terminated (the caller frees
 * it). VKF_ERROR_BAD_MODEL where tokenizers panics (a Strip decoder cutting past
 * a token's ends). */
vkf_status vkf_hftok_decode(const vkf_hftok *t, const int32_t *ids, uint32_t n, bool skip_special, char **out_text);
/* The same, with the text's length in *out_len (if not NULL): a token may hold a
 * NUL byte. */
vkf_status vkf_hftok_decode_n(const vkf_hftok *t, const int32_t *ids, uint32_t n, bool skip_special, char **out_text,
                              size_t *out_len);

/* The id of a token (exact content; added tokens first, then the vocabulary, as
 * tokenizers' token_to_id), -1 if none. */
int32_t vkf_hftok_token_id(const vkf_hftok *t, const char *token);
/* Token id as tokenizers' id_to_token gives it (owned by t, NUL-terminated; an
 * added token marked normalized comes out normalized), NULL if none. */
const char *vkf_hftok_token(const vkf_hftok *t, int32_t id);
/* Highest id + 1, added tokens included (0 for NULL). */
uint32_t vkf_hftok_vocab_size(const vkf_hftok *t);
/* Whether skip_special drops id: its token (as vkf_hftok_token) is the content of
 * a special added token. */
bool vkf_hftok_is_special(const vkf_hftok *t, int32_t id);

#endif

/* The families layer (src/families/): each model family is one file behind a
 * const table (vkf_family) that reads a model as it is stored, a vkformer file
 * or a Hugging Face hub folder, into the arch's spec and weights, and turns text
 * into ids and back:
 *   registry.c      the table of families and the probe that picks one
 *   loader.c        the weight loader they share (vkf_ld_*)
 *   hf.c            what Hugging Face folders share: JSON keys, generation_config.json
 *   vkformer_file.c vkformer's own file (docs/file-format.md)
 *   marian.c        Marian (opus-mt)
 *   m2m100.c, mbart.c, bart.c: M2M-100 and NLLB, mBART, BART
 *   t5.c            T5, Flan-T5, mT5, LongT5
 *   whisper.c       Whisper
 *   multilingual.c  the text side fairseq's multilingual families share
 *   languages.c     language lists, the family model's lifetime, generation defaults
 *   safetensors.c   the file container
 * Text goes through the tokenizers layer below (src/tokenizers/tokenizer.h), by
 * its interface alone. Adding a family is one file, one line in registry.c and
 * its tests. */
#ifndef VKF_FAMILY_H
#define VKF_FAMILY_H

#include "arch/arch.h"
#include "audio/audio.h"
#include "families/safetensors.h"
#include "tokenizers/tokenizer.h"

#include <jansson.h>

/* ------------------------------------------------------------------ the loader (loader.c) */

/* Names the loader expects, to find unexpected tensors afterwards. */
typedef struct vkf_name_list {
    char **names;
    uint32_t count, capacity;
} vkf_name_list;

typedef struct vkf_loader {
    vkf_context *ctx;                   /* borrowed; NULL in a dry run */
    vkf_st_file *file;                  /* owned: the weights */
    bool dry_run;                       /* check and convert, but make no device tensors */
    vkf_name_list expected;
    vkf_precision precision;            /* of weight matrices and embeddings: F32, F16, INT8, or AUTO
                                           (the file's F16 kept, the rest F32) */
    const vkf_arch_spec *spec;          /* borrowed: the shapes */
    vkf_arch_weights *w;                /* borrowed: filled */
    float *scratch;                     /* owned host buffer for conversions */
    uint64_t scratch_floats;
    uint16_t *halves;                   /* owned host buffer for F32 -> F16 */
    uint64_t halves_count;
    int8_t *quant;                      /* owned host buffer for int8 quantization */
    uint64_t quant_count;
    vkf_dtype act;                      /* the activations' dtype (tables added to activations take it) */
} vkf_loader;

void vkf_loader_free(vkf_loader *L);
bool vkf_ld_name_add(vkf_name_list *l, const char *name);
void vkf_ld_names_free(vkf_name_list *l);
/* Tensor `name` with shape (rows, cols), or (cols) when rows is 0. */
vkf_status vkf_ld_find_shaped(const vkf_loader *L, const char *name, uint32_t rows, uint32_t cols,
                              const vkf_st_tensor **out);
/* The same, with a float dtype; noted as expected. */
vkf_status vkf_ld_find(vkf_loader *L, const char *name, uint32_t rows, uint32_t cols, const vkf_st_tensor **out);
/* A checked tensor as floats in the loader's scratch buffer. */
vkf_status vkf_ld_floats(vkf_loader *L, const vkf_st_tensor *t, const float **out);
/* Rows [row0, row0 + nrows) of weight `name` (rows, cols): F32 or F16 as the precision asks. */
vkf_status vkf_ld_matrix(vkf_loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0, uint32_t nrows,
                         vkf_tensor **out);
/* The same quantized to int8 with per-row scales. */
vkf_status vkf_ld_matrix_i8(vkf_loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0,
                            uint32_t nrows, vkf_tensor **out, vkf_tensor **out_scale);
/* Entries [begin, begin + count) of vector `name` (n). */
vkf_status vkf_ld_vector(vkf_loader *L, const char *name, uint32_t n, uint32_t begin, uint32_t count, vkf_tensor **out);
/* prefix + wname (rows, cols) and prefix + bname (rows; NULL: no bias), rows [row0, row0 + nrows). */
vkf_status vkf_ld_linear(vkf_loader *L, const char *prefix, const char *wname, const char *bname, uint32_t rows,
                         uint32_t cols, uint32_t row0, uint32_t nrows, vkf_linear *out);
/* prefix.weight and prefix.bias (d). */
vkf_status vkf_ld_norm(vkf_loader *L, const char *prefix, uint32_t d, vkf_norm *out);
/* Weights stacked by rows: wnames[i] (rows_each, cols) and bnames[i] (rows_each;
 * NULL, or bnames NULL: zeros, no bias at all when none has one), i < n, as one
 * linear (n * rows_each, cols), e.g. q, k and v projections. */
vkf_status vkf_ld_stacked(vkf_loader *L, const char *const *wnames, const char *const *bnames, uint32_t n,
                          uint32_t rows_each, uint32_t cols, vkf_linear *out);
/* Embedding `name` (rows, d) split into parts that each fit one binding. */
vkf_status vkf_ld_table(vkf_loader *L, const char *name, uint32_t rows, uint32_t d, vkf_split_table *out);
/* tgt shares src's parts (and int8 scales). */
vkf_status vkf_ld_share_table(const vkf_split_table *src, vkf_split_table *tgt);
/* The generator (tgt_vocab, d) in the target embedding's parts: tied (the parts
 * themselves, with their int8 scales) or from tensor `name`; `bias` (tgt_vocab)
 * host floats or NULL. */
vkf_status vkf_ld_generator(vkf_loader *L, bool tied, const char *name, const float *bias);
/* The spec's position table into *out (NULL for NONE): the file's tensor `name`
 * where the file holds it (required for LEARNED), else the computed sinusoids. */
vkf_status vkf_ld_positions(vkf_loader *L, const char *name, vkf_tensor **out);
/* A Conv1d `prefix`.weight (out, in, kernel) and `prefix`.bias (out) as the
 * linear (out, kernel * in) the arch's convolutions run: each output channel's
 * taps reordered kernel-major, in the load's precision. */
vkf_status vkf_ld_conv1d(vkf_loader *L, const char *prefix, uint32_t out_ch, uint32_t in_ch, uint32_t kernel,
                         vkf_linear *out);
/* A (rows, cols) table `name` in the activations' dtype (L->act), e.g. positions
 * added by a matmul's residual. */
vkf_status vkf_ld_act_table(vkf_loader *L, const char *name, uint32_t rows, uint32_t cols, vkf_tensor **out);
/* Checks that every tensor of the file was expected. */
vkf_status vkf_ld_check_unexpected(const vkf_loader *L, const char *hint);

/* ------------------------------------------------------------------ a family */

/* What WhisperForConditionalGeneration.generate reads of a Whisper folder
 * (generation_config.json, config.json's forced_decoder_ids) and its tokenizer
 * (whisper.c), for transcription (src/transcribe.c). */
#define VKF_WHISPER_MAX_FORCED 8
typedef struct vkf_whisper_gen {
    int32_t sot, eos;                   /* decoder start, end of text */
    int32_t no_timestamps;              /* no_timestamps_token_id; -1: absent (no timestamps possible) */
    int32_t transcribe, translate;      /* task_to_id's; -1 where absent */
    bool has_lang_to_id, has_task_to_id;
    int multilingual;                   /* is_multilingual: 1, 0, or -1 when absent */
    char **lang_tokens;                 /* (n_langs) owned: lang_to_id's keys ("<|en|>") */
    int32_t *lang_ids;                  /* (n_langs) owned */
    uint32_t n_langs;
    int32_t forced[VKF_WHISPER_MAX_FORCED]; /* forced_decoder_ids for positions 1, 2, ...; -1: null */
    uint32_t n_forced;
    int32_t *begin_suppress;            /* (n_begin) owned: begin_suppress_tokens */
    uint32_t n_begin;
    int32_t max_initial;                /* max_initial_timestamp_index; -1: none */
    int64_t max_length, max_new_tokens; /* generation_config's (max_new_tokens 0: none) */
    bool return_timestamps;             /* generation_config's default */
    struct vkf_bpe_text *text;          /* owned: the tokenizer, or NULL where the folder has none */
} vkf_whisper_gen;

/* A model as its family reads it: what the arch needs, the text handling and the
 * generation defaults. */
typedef struct vkf_family_model {
    vkf_arch_spec spec;
    char name[32];                      /* the family as vkf_model_config.family names it */
    vkf_generate_options defaults;      /* what generate() applies by default (generation_config.json) */
    int32_t *banned;                    /* (n_banned) owned: ids no generation may choose (bad_words_ids) */
    uint32_t n_banned;
    bool has_text;                      /* encode/decode work */
    /* Languages, as the tokenizer names them (eng_Latn, en, en_XX), with their token ids */
    char **lang_codes;                  /* (n_langs) owned */
    int32_t *lang_ids;                  /* (n_langs) owned */
    uint32_t n_langs;
    int32_t default_src_lang;           /* index of the source language used when none is given, or -1 */
    bool target_lang_required;          /* generation needs a target language */
    bool target_lang_in_source;         /* the target language is a token of the source (Marian's >>xx<<), else
                                           forced as the first generated token (forced_bos) */
    void *state;                        /* the family's own (tokenizers), freed by its free() */
    vkf_mel_spec mel;                   /* models that read audio (spec.audio_mels > 0): the feature extractor */
    struct vkf_gen_lists *gen_lists;    /* owned, or NULL: the lists `defaults` points into */
    const vkf_whisper_gen *whisper;     /* Whisper folders: generation's settings (in state), else NULL */
} vkf_family_model;

/* generation_config.json's lists (eos_token_id, suppress_tokens, bad_words_ids
 * of several ids), which a family model's defaults borrow. */
typedef struct vkf_gen_lists {
    int32_t end_ids[VKF_MAX_END_IDS];
    int32_t *suppress;                  /* owned */
    int32_t *bad_ids;                   /* owned: every sequence, one after another */
    uint32_t *bad_lengths;              /* owned */
    const int32_t **bad_ptrs;           /* owned: into bad_ids */
    vkf_sequences bad;                  /* over bad_ptrs and bad_lengths */
} vkf_gen_lists;

/* What the registry knows of a path before any family reads it. */
typedef struct vkf_probe {
    const char *path;
    bool is_dir;
    const char *model_type;             /* config.json's "model_type" of a folder, or NULL */
} vkf_probe;

typedef struct vkf_family {
    const char *name;
    /* Whether this family reads the path. */
    bool (*probe)(const vkf_probe *p);
    /* Reads the config, tokenizers and generation defaults into fm and opens the
     * weights into L->file (data: a file image in memory for a dry run, else NULL). */
    vkf_status (*open)(const vkf_probe *p, const void *data, size_t size, vkf_loader *L, vkf_family_model *fm);
    /* Loads every weight into L->w in L's precision. */
    vkf_status (*load)(vkf_loader *L, const vkf_family_model *fm);
    /* text -> source ids (eos and language codes placed as the tokenizer does;
     * lang: a source language code or NULL for the default). */
    vkf_status (*encode)(const vkf_family_model *fm, const char *text, const char *lang, int32_t *out_ids,
                         uint32_t capacity, uint32_t *out_count);
    /* target ids -> text (special tokens skipped, as the tokenizer's decode). */
    vkf_status (*decode)(const vkf_family_model *fm, const int32_t *ids, uint32_t count, char *out_text,
                         size_t capacity);
    void (*free)(void *state);
    /* target text -> target ids without eos, as the target tokenizer makes them
     * (NULL: the family has no target tokenizer). */
    vkf_status (*encode_target)(const vkf_family_model *fm, const char *text, int32_t *out_ids, uint32_t capacity,
                                uint32_t *out_count);
    /* The id of a target vocabulary entry (len bytes at token), or -1 (NULL: none). */
    int32_t (*target_token)(const vkf_family_model *fm, const char *token, size_t len);
} vkf_family;

/* registry.c: the family that reads `path` (a file, or a folder by its
 * config.json's model_type); UNSUPPORTED naming what was found otherwise. */
vkf_status vkf_family_find(const char *path, const vkf_family **out_family, vkf_probe *out_probe, char **out_model_type);
/* The vkformer file family (the fuzzer's dry run starts from it). */
const vkf_family *vkf_family_vkformer(void);
/* The families' tables (one per file). */
extern const vkf_family vkf_family_marian, vkf_family_m2m100, vkf_family_mbart, vkf_family_bart;
extern const vkf_family vkf_family_whisper;
extern const vkf_family vkf_family_t5;  /* T5, Flan-T5, mT5 and LongT5 (t5.c) */
void vkf_family_model_free(const vkf_family *f, vkf_family_model *fm);
/* Index of language `code` in fm's list, or -1. */
int32_t vkf_family_language(const vkf_family_model *fm, const char *code);
/* "eng_Latn, fra_Latn, deu_Latn, ... (202 codes)": a few of fm's codes for a message. */
void vkf_family_language_examples(const vkf_family_model *fm, char *out, size_t capacity);
/* Adds a language (code and token id) to fm's list. */
vkf_status vkf_family_add_language(vkf_family_model *fm, const char *code, int32_t id);

/* ------------------------------------------------------------------ multilingual text (multilingual.c) */

/* fairseq's multilingual tokenizers (NLLB, M2M-100, mBART-50, mBART): an spm with
 * the fairseq offset (vocab empty) or vocab.json, the languages in the family
 * model's list, the source language before or after the text. */
struct vkf_hftok;
typedef struct vkf_multi_text {
    struct vkf_hftok *tok;              /* owned: tokenizer.json, preferred where the folder has one (as
                                           AutoTokenizer does); NULL: the slow files below */
    struct vkf_spm *spm;                /* owned */
    uint32_t n_spm;                     /* pieces of the spm */
    vkf_vocab vocab;                    /* M2M-100's vocab.json; n 0: the fairseq offset */
    bool lang_first;                    /* [lang] text </s>; false: text </s> [lang] */
    int32_t bos_id, unk_id, mask_id;    /* mask_id -1: none */
    bool *lang_text;                    /* (fm's n_langs) owned, or NULL: whether decoding keeps a language's
                                           token as text ("__xx__"): M2M100Tokenizer's slow folders count a
                                           language token special only where their configs declare it so */
} vkf_multi_text;
/* Frees what t holds (not t). */
void vkf_multi_text_clear(vkf_multi_text *t);
vkf_status vkf_multi_text_open_spm(const char *dir, const char *name, vkf_multi_text *t);
/* dir/tokenizer.json into t->tok when the folder has one (false: it has none). */
vkf_status vkf_multi_text_open_json(const char *dir, vkf_multi_text *t, bool *out_found);
/* The family's language codes with their ids in t->tok (codes it lacks are
 * left out), its <mask>, and the special ids; BAD_MODEL when it has none. */
vkf_status vkf_multi_text_json_languages(vkf_family_model *fm, vkf_multi_text *t, const char *const *codes, uint32_t n);
/* text -> ids in source language `lang` (NULL: the model's default). */
vkf_status vkf_multi_text_encode(const vkf_family_model *fm, const vkf_multi_text *t, const char *text,
                                 const char *lang, int32_t *out_ids, uint32_t capacity, uint32_t *out_count);
/* ids -> text, special and language tokens skipped. */
vkf_status vkf_multi_text_decode(const vkf_family_model *fm, const vkf_multi_text *t, const int32_t *ids,
                                 uint32_t count, char *out_text, size_t capacity);

/* ------------------------------------------------------------------ Hugging Face folders (hf.c) */

#define VKF_HF_MAX_JSON (256u << 20)    /* vocab.json of a 250k vocabulary is ~6 MB */

/* dir/name parsed as a JSON object; *out NULL with VKF_OK when `optional` and missing. */
vkf_status vkf_hf_read_json(const char *dir, const char *name, bool optional, json_t **out);
/* Whether dir/name is a regular file; `what` gets "missing" / "not a regular file". */
bool vkf_hf_file(const char *dir, const char *name, const char **what);
/* An integer key in [min, max]; `def` (>= 0) when absent or null, else required. */
vkf_status vkf_hf_int(json_t *o, const char *file, const char *key, int64_t min, int64_t max, int64_t def, int64_t *out);
vkf_status vkf_hf_bool(json_t *o, const char *file, const char *key, bool def, bool *out);
/* A finite number within [min, max]. */
vkf_status vkf_hf_float(json_t *o, const char *file, const char *key, double min, double max, double def, double *out);
/* config.json's activation_function. */
vkf_status vkf_hf_activation(json_t *o, const char *file, vkf_activation *out);
/* generation_config.json (or, in older folders, the same keys of config.json):
 * HF generate's defaults into fm->defaults and fm->banned; the spec's eos,
 * pad and decoder start updated where it says so. Keys that would change the
 * result and are not implemented are refused. */
vkf_status vkf_hf_generation(const char *dir, json_t *config, vkf_family_model *fm);
/* model.safetensors opened into L->file (pytorch_model.bin: a message naming the converter). */
vkf_status vkf_hf_open_weights(const char *dir, vkf_loader *L);
/* The first of `names` the file holds, or NULL. */
const char *vkf_hf_first_present(const vkf_loader *L, const char *const *names, size_t n);
/* An embedding (rows, d_model) stored under any of the tied `names` (NULL
 * entries skipped): the first present is loaded into out, and every other one
 * present must hold the same values (BAD_MODEL naming both otherwise).
 * *out_name (may be NULL) gets the name loaded. */
vkf_status vkf_hf_tied_table(vkf_loader *L, const char *const *names, size_t n, uint32_t rows, vkf_split_table *out,
                             const char **out_name);
/* The layers of a BART-style checkpoint (Marian, M2M-100, NLLB, mBART, BART)
 * under prefix ("model."): encoder.layers.N.{self_attn.{q,k,v,out}_proj,
 * self_attn_layer_norm, fc1, fc2, final_layer_norm}, the decoder's with
 * encoder_attn and encoder_attn_layer_norm (q, k and v stacked), and the stacks'
 * layer_norm and layernorm_embedding where the spec has them. */
vkf_status vkf_hf_load_layers(vkf_loader *L, const char *prefix);
/* The sizes every BART-layout config.json holds (Marian, M2M-100, NLLB, mBART,
 * BART): d_model, encoder/decoder layers, heads and ffn_dim (the encoder's and
 * the decoder's must agree), vocab_size and activation_function. Fills the
 * spec's sizes (src_vocab = tgt_vocab = vocab_size) and *out_vocab; the
 * positions (max_position_embeddings, Whisper's max_target_positions) are the
 * family's. */
vkf_status vkf_hf_bart_sizes(json_t *config, vkf_arch_spec *s, int64_t *out_vocab);
/* Every id inside the target vocabulary, else one line naming the first that is not. */
vkf_status vkf_family_check_target_ids(const vkf_family_model *fm, const int32_t *ids, uint32_t count);
/* A decoded text (len bytes, malloc'd; freed here) into out_text (capacity
 * bytes, NUL-terminated): refused when it does not fit or holds a NUL byte. */
vkf_status vkf_family_text_out(char *text, size_t len, char *out_text, size_t capacity);
/* What M2M-100, mBART and BART configs share: vkf_hf_bart_sizes, then
 * max_position_embeddings (max_len), pad/eos/bos ids, decoder_start_token_id
 * (default start_default, or bos where it is negative or past the vocabulary),
 * scale_embedding (sqrt(d_model)), tie_word_embeddings into *tied, and
 * LayerNorm with eps 1e-5. Norm placement and positions are the family's. */
vkf_status vkf_hf_bart_config(json_t *config, vkf_arch_spec *s, int64_t start_default, bool *tied);
/* The generator with final_logits_bias (1, tgt_vocab) added: the tied embedding,
 * or the tensor lm_head. zeros_if_absent: a file without the bias gets zeros (the
 * buffer's value in transformers; BART), else its absence is an error. */
vkf_status vkf_hf_biased_generator(vkf_loader *L, bool tied, const char *lm_head, bool zeros_if_absent);
/* Every tensor of the file accounted for; a stray one is named with the model's
 * class ("MarianMTModel") and its layer counts. */
vkf_status vkf_hf_check_unexpected(const vkf_loader *L, const char *model_class);
/* The same where every k_proj has no bias (Whisper). */
vkf_status vkf_hf_load_layers_k_unbiased(vkf_loader *L, const char *prefix);

#endif /* VKF_FAMILY_H */

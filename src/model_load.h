/* The weight loader that model.c (the vkformer file layout) and hf_marian.c (a
 * Hugging Face Marian folder) share: tensors found and checked by name and
 * shape, converted, and uploaded in the load's precision. Private to the two. */
#ifndef VKF_MODEL_LOAD_H
#define VKF_MODEL_LOAD_H

#include "model.h"
#include "families/safetensors.h"

/* Names the loader expects, to find unexpected tensors afterwards. */
typedef struct name_list {
    char **names;
    uint32_t count, capacity;
} name_list;

typedef struct loader {
    vkf_model *m;
    vkf_st_file *file;
    bool dry_run;                       /* check and convert, but make no device tensors */
    name_list expected;
    vkf_precision precision;            /* of weight matrices and embeddings */
    float *scratch;                     /* owned host buffer for conversions */
    uint16_t *halves;                   /* owned host buffer for F32 -> F16 */
    uint64_t halves_count;
    int8_t *quant;                      /* owned host buffer for int8 quantization */
    uint64_t quant_count;
    uint64_t scratch_floats;
} loader;


bool vkf_ld_name_add(name_list *l, const char *name);
void vkf_ld_names_free(name_list *l);
/* Tensor `name` with shape (rows, cols), or (cols) when rows is 0. */
vkf_status vkf_ld_find_shaped(const loader *L, const char *name, uint32_t rows, uint32_t cols, const vkf_st_tensor **out);
/* The same, with a float dtype; noted as expected. */
vkf_status vkf_ld_find(loader *L, const char *name, uint32_t rows, uint32_t cols, const vkf_st_tensor **out);
/* A checked tensor as floats in the loader's scratch buffer. */
vkf_status vkf_ld_floats(loader *L, const vkf_st_tensor *t, const float **out);
/* Rows [row0, row0 + nrows) of weight `name` (rows, cols): F32 or F16 as the precision asks. */
vkf_status vkf_ld_matrix(loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0, uint32_t nrows,
                         vkf_tensor **out);
/* The same quantized to int8 with per-row scales. */
vkf_status vkf_ld_matrix_i8(loader *L, const char *name, uint32_t rows, uint32_t cols, uint32_t row0, uint32_t nrows,
                            vkf_tensor **out, vkf_tensor **out_scale);
/* Entries [begin, begin + count) of vector `name` (n). */
vkf_status vkf_ld_vector(loader *L, const char *name, uint32_t n, uint32_t begin, uint32_t count, vkf_tensor **out);
/* prefix + wname (rows, cols) and prefix + bname (rows), rows [row0, row0 + nrows). */
vkf_status vkf_ld_linear(loader *L, const char *prefix, const char *wname, const char *bname, uint32_t rows,
                         uint32_t cols, uint32_t row0, uint32_t nrows, linear *out);
/* prefix.weight and prefix.bias (d). */
vkf_status vkf_ld_norm(loader *L, const char *prefix, uint32_t d, norm *out);
/* Weights stacked by rows: wnames[i] (rows_each, cols) and bnames[i] (rows_each),
 * i < n, as one linear (n * rows_each, cols), e.g. q, k and v projections. */
vkf_status vkf_ld_stacked(loader *L, const char *const *wnames, const char *const *bnames, uint32_t n,
                          uint32_t rows_each, uint32_t cols, linear *out);
/* Embedding `name` (rows, d) split into parts that each fit one binding. */
vkf_status vkf_ld_table(loader *L, const char *name, uint32_t rows, uint32_t d, split_table *out);
/* Checks that every tensor of the file was expected. */
vkf_status vkf_ld_check_unexpected(const loader *L, const char *hint);

/* hf_marian.c: a Hugging Face Marian folder. vkf_hf_open reads config.json,
 * generation_config.json, vocab.json and the SentencePiece models into m (cfg,
 * m->hf) and opens model.safetensors into L->file; vkf_hf_load_weights loads the
 * weights through L. */
vkf_status vkf_hf_open(vkf_model *m, const char *dir, loader *L);
vkf_status vkf_hf_load_weights(loader *L);
void vkf_hf_free(struct vkf_hf *hf);
/* Text through source.spm and vocab.json, eos appended; ids back through
 * vocab.json and target.spm, eos, pad and unk skipped (as MarianTokenizer). */
vkf_status vkf_hf_encode(const vkf_model *m, const char *text, int32_t *out_ids, uint32_t capacity, uint32_t *out_count);
vkf_status vkf_hf_decode(const vkf_model *m, const int32_t *ids, uint32_t count, char *out_text, size_t capacity);
vkf_status vkf_hf_generate_defaults(const vkf_model *m, vkf_generate_options *out);

#endif /* VKF_MODEL_LOAD_H */

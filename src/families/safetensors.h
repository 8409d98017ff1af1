/* The safetensors reader: opens a model file (or parses a buffer), validates
 * every byte of its header against the format, and hands out the tensor table,
 * the raw tensor bytes, the "__metadata__" strings and F32/F16/BF16 values
 * converted to float. Model files come from anywhere, so nothing in them is
 * trusted: every malformation is a VKF_ERROR_BAD_MODEL naming the tensor, key or
 * byte offset, never a crash. Internal, not public.
 *
 * Format (little-endian throughout):
 *   bytes 0..8      N, the header length, u64
 *   bytes 8..8+N    UTF-8 JSON object (writers pad it with spaces):
 *                     "NAME": {"dtype": "F32", "shape": [d0, ...], "data_offsets": [begin, end]}
 *                     "__metadata__": {"KEY": "VALUE", ...}   (optional, strings only)
 *   bytes 8+N..     the data section; begin/end are relative to its start
 * Tensors may not overlap; bytes of the data section that no tensor covers are
 * allowed (and ignored). A tensor with a 0 dimension has begin == end.
 */
#ifndef VKF_SAFETENSORS_H
#define VKF_SAFETENSORS_H

#include "vkformer.h"

#include <stddef.h>
#include <stdint.h>

/* Headers longer than this are refused as absurd: 100 MB, the limit of the
 * reference implementation (the largest real models have a few MB of header). */
#define VKF_ST_MAX_HEADER 100000000ull
#define VKF_ST_MAX_RANK 8

typedef enum vkf_st_dtype {
    VKF_ST_F32 = 0,
    VKF_ST_F16,
    VKF_ST_BF16,
    VKF_ST_I32,
    VKF_ST_I64,
    VKF_ST_F64,
    VKF_ST_I16,
    VKF_ST_I8,
    VKF_ST_U8,
    VKF_ST_U16,
    VKF_ST_U32,
    VKF_ST_U64,
    VKF_ST_BOOL,                        /* one byte per element */
    VKF_ST_F8_E4M3,
    VKF_ST_F8_E5M2,
    VKF_ST_DTYPE_COUNT
} vkf_st_dtype;

/* The dtype's name as in the header ("F32"); "?" for a value out of range. */
const char *vkf_st_dtype_name(vkf_st_dtype dtype);
/* Bytes per element; 0 for a value out of range. */
uint32_t vkf_st_dtype_size(vkf_st_dtype dtype);

typedef struct vkf_st_tensor {
    const char *name;                   /* owned by the file, NUL-terminated UTF-8 */
    vkf_st_dtype dtype;
    uint32_t rank;                      /* 0 (a scalar) .. VKF_ST_MAX_RANK */
    uint64_t shape[VKF_ST_MAX_RANK];    /* (d0, ..., d[rank-1]), row-major; unused entries 0 */
    uint64_t elements;                  /* product of the shape; 1 for a scalar */
    uint64_t offset;                    /* absolute byte offset in the file (8 + N + begin) */
    uint64_t bytes;                     /* end - begin == elements * dtype size */
    uint32_t shard;                     /* the file it lies in: 0, or its index in vkf_st_merge's list */
} vkf_st_tensor;

typedef struct vkf_st_file vkf_st_file;

/* Maps the file read-only (or reads it, if it is not a regular file) and
 * validates it. Messages of validation failures start with the path. The mapping
 * lives until vkf_st_close; another process truncating the file meanwhile is not
 * guarded against. */
vkf_status vkf_st_open(const char *path, vkf_st_file **out_file);
/* The same from a buffer of `size` bytes. Names and metadata are copied, but the
 * data section is BORROWED: `data` must stay valid and unchanged until
 * vkf_st_close, as vkf_st_data and vkf_st_read_f32 read it. */
vkf_status vkf_st_parse(const void *data, size_t size, vkf_st_file **out_file);
/* NULL is a no-op. */
void vkf_st_close(vkf_st_file *file);
/* One table over the shards of a checkpoint (model-00001-of-00003.safetensors,
 * ...): takes ownership of the n opened files (closing them on failure too) and
 * gives a file whose tensors are theirs (t->shard says which), ordered by shard
 * and then by data, and no metadata. A name held by two shards is
 * VKF_ERROR_BAD_MODEL naming it and both shard numbers. */
vkf_status vkf_st_merge(vkf_st_file **shards, uint32_t n, vkf_st_file **out_file);
/* Number of files behind `file`: 1 for an opened or parsed one, n for a merge. */
uint32_t vkf_st_shard_count(const vkf_st_file *file);

/* Tensors, in the order of their data in the file (by begin, then end, then
 * name), whatever their order in the header. 0 / NULL for NULL or out of range. */
uint32_t vkf_st_count(const vkf_st_file *file);
const vkf_st_tensor *vkf_st_at(const vkf_st_file *file, uint32_t index);
/* The tensor named `name` (binary search), or NULL if absent. */
const vkf_st_tensor *vkf_st_find(const vkf_st_file *file, const char *name);
/* The tensor's raw little-endian bytes (t->bytes of them). Not necessarily aligned
 * for its dtype: the format does not promise alignment, so read with memcpy.
 * NULL for NULL arguments or a tensor of another file. */
const void *vkf_st_data(const vkf_st_file *file, const vkf_st_tensor *t);
/* The "__metadata__" value of `key`, or NULL if absent. Owned by the file. */
const char *vkf_st_metadata(const vkf_st_file *file, const char *key);
/* Number of "__metadata__" entries, and entry `index` (sorted by key, bytewise);
 * vkf_st_metadata_at returns false (and sets nothing) when index is out of range. */
uint32_t vkf_st_metadata_count(const vkf_st_file *file);
bool vkf_st_metadata_at(const vkf_st_file *file, uint32_t index, const char **out_key,
                        const char **out_value);

/* Converts an F32, F16 or BF16 tensor to `count` floats (count must equal
 * t->elements). F16 and BF16 convert exactly: subnormals, ±0, ±inf, and NaN
 * (payload kept). Another dtype is VKF_ERROR_BAD_MODEL naming the tensor. */
vkf_status vkf_st_read_f32(const vkf_st_file *file, const vkf_st_tensor *t, float *out,
                           uint64_t count);

#endif /* VKF_SAFETENSORS_H */

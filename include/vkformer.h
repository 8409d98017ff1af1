/* vkformer — Transformer inference with GLSL compute shaders on any Vulkan device.
 *
 * This is the library's only public header. It pulls in no Vulkan header: every
 * handle is opaque and every value is a plain C type.
 *
 * Conventions
 *  - Every call that can fail returns a vkf_status; VKF_OK is zero. On failure
 *    vkf_last_error() returns a message naming the problem (and, for a Vulkan
 *    failure, the VkResult and the call that returned it).
 *  - Outputs come last and are named out_*. On failure *out is set to NULL/0 and
 *    nothing is handed out.
 *  - destroy(NULL) is a no-op.
 *  - The library never exits, aborts or prints. Diagnostics (validation-layer
 *    messages) go to the log callback of vkf_context_options, if one is given.
 *
 * Threads: vkf_last_error() is per thread. A vkf_context and everything made from
 * it (tensors, command lists) must be used by one thread at a time; distinct
 * contexts may be used from distinct threads at once.
 */
#ifndef VKFORMER_H
#define VKFORMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* VKF_API marks the library's exported functions. The library is compiled with
 * hidden visibility by default, so its shared object exports these and nothing
 * else (no internal helper, no symbol of the volk loader built into it). */
#if defined(__GNUC__) || defined(__clang__)
#define VKF_API __attribute__((visibility("default")))
#else
#define VKF_API
#endif

#define VKF_VERSION_MAJOR 0
#define VKF_VERSION_MINOR 1
#define VKF_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, comparable with vkf_version(). */
#define VKF_VERSION_NUMBER (VKF_VERSION_MAJOR * 10000 + VKF_VERSION_MINOR * 100 + VKF_VERSION_PATCH)

/* The version of the library actually loaded, as VKF_VERSION_NUMBER. */
VKF_API uint32_t vkf_version(void);
/* The same as "MAJOR.MINOR.PATCH"; a static string. */
VKF_API const char *vkf_version_string(void);

/* ------------------------------------------------------------------ status */

/* Stable codes: values are never reused or renumbered. */
typedef enum vkf_status {
    VKF_OK = 0,
    VKF_ERROR_INVALID_ARGUMENT = 1,     /* NULL handle, zero or inconsistent size, bad value */
    VKF_ERROR_NO_VULKAN = 2,            /* the Vulkan loader could not be loaded */
    VKF_ERROR_NO_DEVICE = 3,            /* no Vulkan device, or none matching the request */
    VKF_ERROR_UNSUPPORTED = 4,          /* the device lacks a feature the call needs */
    VKF_ERROR_TOO_LARGE = 5,            /* past a device limit (binding range, grid size) */
    VKF_ERROR_OUT_OF_HOST_MEMORY = 6,
    VKF_ERROR_OUT_OF_DEVICE_MEMORY = 7,
    VKF_ERROR_DEVICE_LOST = 8,
    VKF_ERROR_VULKAN = 9,               /* any other failing Vulkan call */
    VKF_ERROR_BAD_MODEL = 10,           /* malformed or inconsistent model file */
    VKF_ERROR_IO = 11,                  /* a file could not be read or written */
    VKF_ERROR_STATE = 12,               /* call not valid in the object's current state */
} vkf_status;

/* A short constant name for a status, e.g. "VKF_ERROR_TOO_LARGE". */
VKF_API const char *vkf_status_string(vkf_status status);
/* The message of this thread's last failed call; "" if none. Valid until the next
 * failing call on this thread. */
VKF_API const char *vkf_last_error(void);

/* A buffer of this many bytes holds vkf_quote's rendering of about 80 bytes of text. */
#define VKF_QUOTE_SIZE 96

/* Renders the len bytes at s (len (size_t)-1: up to s's NUL) as one line of
 * printable text for a message, between double quotes, into buf (cap bytes, NUL
 * included); returns buf. For text that came from a file or a user (a tensor
 * name, a config value, an argument), so that it can neither break the message's
 * line nor drive a terminal:
 *  - `"` and `\` are escaped as \" and \\; \n, \r, \t as those two characters;
 *    every other C0 control and DEL as \xNN (NUL included: s may hold NULs);
 *  - a byte that does not begin well-formed UTF-8 (a stray continuation byte, an
 *    overlong form, a surrogate, a code point past U+10FFFF, a cut sequence)
 *    as \xNN, one escape per byte;
 *  - C1 controls (U+0080..U+009F) and invisible format characters that reorder
 *    or break lines (U+061C, U+200E, U+200F, U+2028..U+202E, U+2066..U+2069,
 *    U+FEFF) as \uXXXX;
 *  - other UTF-8 is copied as it is.
 * Where the rendering does not fit cap, it is cut at a character (never inside
 * an escape) and ends `"...` after the closing quote. s NULL renders as (null).
 * cap below 8 leaves "" (when cap > 0). Never fails, allocates nothing. */
VKF_API const char *vkf_quote(char *buf, size_t cap, const char *s, size_t len);

/* ------------------------------------------------------------------ devices */

typedef enum vkf_device_type {
    VKF_DEVICE_OTHER = 0,
    VKF_DEVICE_INTEGRATED_GPU = 1,
    VKF_DEVICE_DISCRETE_GPU = 2,
    VKF_DEVICE_VIRTUAL_GPU = 3,
    VKF_DEVICE_CPU = 4,
} vkf_device_type;

/* Most cooperative-matrix shapes vkf_device_info lists. */
#define VKF_MAX_COOPMAT_SHAPES 32

/* Component types of cooperative matrices (the values of VkComponentTypeKHR). */
typedef enum vkf_component {
    VKF_COMPONENT_F16 = 0,
    VKF_COMPONENT_F32 = 1,
    VKF_COMPONENT_F64 = 2,
    VKF_COMPONENT_S8 = 3,
    VKF_COMPONENT_S16 = 4,
    VKF_COMPONENT_S32 = 5,
    VKF_COMPONENT_S64 = 6,
    VKF_COMPONENT_U8 = 7,
    VKF_COMPONENT_U16 = 8,
    VKF_COMPONENT_U32 = 9,
    VKF_COMPONENT_U64 = 10,
    VKF_COMPONENT_OTHER = 255,          /* a type this version does not name (bf16, fp8, ...) */
} vkf_component;

/* "f16", "f32", "s8", ...; "other" for VKF_COMPONENT_OTHER and unknown values. */
VKF_API const char *vkf_component_name(vkf_component component);

/* One cooperative-matrix shape the device reports (vkGetPhysicalDevice-
 * CooperativeMatrixPropertiesKHR): an M x K A times a K x N B plus an M x N C. */
typedef struct vkf_coopmat_shape {
    uint32_t m, n, k;
    vkf_component a, b, c, result;
    bool saturating;
    bool subgroup_scope;                /* false: another scope (workgroup, device) */
} vkf_coopmat_shape;

#define VKF_MAX_HEAPS 16

/* What vkformer discovered about one Vulkan device. */
typedef struct vkf_device_info {
    uint32_t index;                     /* position in the loader's enumeration */
    char name[256];
    vkf_device_type type;
    uint32_t vendor_id, device_id;
    uint32_t api_version;               /* VK_MAKE_API_VERSION-encoded */
    uint32_t driver_version;            /* vendor-encoded */
    char driver_name[256];              /* empty where the device does not say */
    char driver_info[256];
    uint32_t subgroup_size;
    bool subgroup_shuffle;              /* compute shaders have subgroupShuffle */
    uint32_t max_shared_memory;         /* bytes per workgroup */
    uint32_t max_workgroup_invocations;
    uint32_t max_workgroup_size[3];
    uint32_t max_workgroup_count[3];
    uint32_t max_push_constants;        /* bytes */
    bool storage_16bit;                 /* VK_KHR_16bit_storage storageBuffer16BitAccess */
    bool float16;                       /* shaderFloat16 */
    bool int8;                          /* shaderInt8 */
    bool cooperative_matrix;            /* VK_KHR_cooperative_matrix present */
    bool timestamps;                    /* compute queue has timestamp bits */
    double timestamp_period_ns;
    uint64_t max_storage_buffer_range;  /* bytes one binding may cover */
    uint64_t max_memory_allocation_size;
    uint32_t min_storage_buffer_offset_alignment;
    uint32_t heap_count;
    struct {
        uint64_t size;                  /* bytes */
        bool device_local;
    } heaps[VKF_MAX_HEAPS];
    bool unified_memory;                /* vkformer writes device memory directly from the host */
    /* Cooperative matrix (tensor cores). The shapes the driver reports for
     * VK_KHR_cooperative_matrix (at most VKF_MAX_COOPMAT_SHAPES of them). */
    uint32_t coopmat_shape_count;
    bool vulkan_memory_model;           /* vulkanMemoryModel with device scope, which coopmat shaders need */
    vkf_coopmat_shape coopmat_shapes[VKF_MAX_COOPMAT_SHAPES];
    /* VK_NV_cooperative_matrix2 with flexible dimensions for f16 x f16 -> f32:
     * any multiple of the granularity up to the largest dimension. */
    bool cooperative_matrix2;
    uint32_t coopmat2_granularity[3];   /* M, N, K */
    uint32_t coopmat2_max_dimension;
    /* From vkf_context_device_info only: which cooperative-matrix kernels the
     * context uses (false in vkf_devices_list, when the device lacks f16 shapes,
     * and when turned off by the context option or VKFORMER_COOPMAT=0). */
    bool coopmat_in_use;
    bool coopmat2_in_use;
    /* VK_NV_cooperative_matrix2 at workgroup scope (matmul_coopmat2_wg): the
     * device's features, and its f16 x f16 -> f32 flexible-dimensions entry of
     * workgroup scope (granularity M, N, K and invocations per workgroup; zeros
     * where it lists none). coopmat2_wg_in_use: from vkf_context_device_info only. */
    bool coopmat2_workgroup_scope;      /* cooperativeMatrixWorkgroupScope */
    bool coopmat2_tensor_addressing;    /* cooperativeMatrixTensorAddressing */
    bool coopmat2_per_element;          /* cooperativeMatrixPerElementOperations */
    uint32_t coopmat2_wg_granularity[3];
    uint32_t coopmat2_wg_invocations;
    bool coopmat2_wg_in_use;
} vkf_device_info;

/* Lists every Vulkan device. Fills at most `capacity` entries of out_infos (which
 * may be NULL when capacity is 0) and sets *out_count to the number of devices.
 * With no Vulkan driver installed at all, the loader cannot make an instance and
 * the call fails with VKF_ERROR_NO_DEVICE (no loader: VKF_ERROR_NO_VULKAN). */
VKF_API vkf_status vkf_devices_list(vkf_device_info *out_infos, uint32_t capacity, uint32_t *out_count);

/* ------------------------------------------------------------------ context */

typedef struct vkf_context vkf_context;

typedef enum vkf_log_level {
    VKF_LOG_INFO = 0,
    VKF_LOG_WARNING = 1,
    VKF_LOG_ERROR = 2,
} vkf_log_level;

typedef void (*vkf_log_fn)(void *user, vkf_log_level level, const char *message);

typedef struct vkf_context_options {
    /* Device to use: a decimal index, or a case-insensitive substring of its name.
     * NULL: the VKFORMER_DEVICE environment variable, else the first discrete GPU,
     * else integrated, else virtual, else CPU. Borrowed for the create call only. */
    const char *device;
    /* 1: enable VK_LAYER_KHRONOS_validation with a messenger that counts errors and
     * warnings; 0: off; -1 (default): on iff VKFORMER_VALIDATE=1. */
    int validation;
    /* true (default): where device memory is host-visible and the device is a CPU,
     * an integrated GPU or has all its memory mappable, write and read tensors
     * directly; false: always go through a staging buffer. */
    bool allow_host_visible;
    /* Size of the device-memory blocks tensors are sub-allocated from; 0: default
     * (64 MiB, or less where the device allows less). */
    uint64_t block_size;
    /* Receives validation messages and other diagnostics; NULL: dropped. */
    vkf_log_fn log;
    void *log_user;
    /* Most bytes of device memory the context may allocate for tensors (blocks,
     * staging excluded); 0: no cap beyond the device's own. An allocation past
     * it fails with VKF_ERROR_OUT_OF_DEVICE_MEMORY giving the bytes needed and
     * available, and the context stays usable. */
    uint64_t max_device_memory;
    /* Directory of the per-device pipeline-cache and tune files. NULL: the
     * VKFORMER_CACHE_DIR environment variable, else $XDG_CACHE_HOME/vkformer, else
     * $HOME/.cache/vkformer. Created when a file is first written. Borrowed for the
     * create call only. */
    const char *cache_dir;
    /* 1: compiled pipelines are kept in a file per device in cache_dir, read at
     * create and written back at destroy when they changed; 0: off; -1 (default):
     * on unless VKFORMER_PIPELINE_CACHE=0. A missing, unreadable, corrupt or
     * foreign file is ignored (with an info message to the log callback). */
    int pipeline_cache;
    /* 1: use the kernel tiles `vkformer tune` stored for this device in cache_dir,
     * when there is such a file; 0: built-in choices; -1 (default): on unless
     * VKFORMER_TUNE=0. A malformed or foreign file is ignored (info message). */
    int tune;
    /* 1: use cooperative-matrix kernels (tensor cores) where the device reports
     * f16 x f16 -> f32 shapes, even on a driver vkformer has not vetted; 0: never;
     * -1 (default): on vetted drivers (NVIDIA, AMD, Intel, Mesa) unless
     * VKFORMER_COOPMAT=0 (VKFORMER_COOPMAT=1 acts as 1; VKFORMER_COOPMAT=everywhere
     * also uses the kernels on CPU drivers wherever a GPU would, for tests). */
    int coopmat;
    /* 1: the device executes nothing (a virtual GPU: Mesa's drm-shim, tools/vgpu.sh):
     * pipelines are built and their statistics are real, but every result read back
     * is meaningless, so callers must not check or report one
     * (vkf_context_compile_only); 0: a real device; -1 (default): 1 iff
     * VKFORMER_COMPILE_ONLY=1. */
    int compile_only;
    /* true: pipelines keep the driver's statistics and internal representations
     * (VK_KHR_pipeline_executable_properties, where the device has it) for
     * vkf_context_pipeline_report; they then bypass the pipeline cache. Default false. */
    bool shader_statistics;
} vkf_context_options;

/* Fills the defaults. Call before setting fields. */
VKF_API void vkf_context_options_init(vkf_context_options *options);

/* Creates a context on one device. options may be NULL for the defaults. */
VKF_API vkf_status vkf_context_create(const vkf_context_options *options, vkf_context **out_context);
/* Waits for the device to be idle and frees everything. Tensors and command lists
 * made from the context must be destroyed first. */
VKF_API void vkf_context_destroy(vkf_context *context);

/* The device the context runs on. */
VKF_API vkf_status vkf_context_device_info(const vkf_context *context, vkf_device_info *out_info);
/* Validation messages counted since the context was created (0 when validation is
 * off). *out_validation_on tells whether the layer is active. Any pointer may be NULL. */
VKF_API vkf_status vkf_context_validation_counts(const vkf_context *context, uint32_t *out_errors,
                                                 uint32_t *out_warnings, bool *out_validation_on);
/* Device memory the context holds: bytes in allocated blocks, and bytes of those
 * handed to live tensors. Either pointer may be NULL. */
VKF_API vkf_status vkf_context_memory_usage(const vkf_context *context, uint64_t *out_allocated,
                                            uint64_t *out_used);

/* The most device memory the context has held in blocks at once, in bytes. */
VKF_API vkf_status vkf_context_peak_memory(const vkf_context *context, uint64_t *out_bytes);

/* ------------------------------------------------------------------ tensors */

typedef enum vkf_dtype {
    VKF_DTYPE_F32 = 0,
    VKF_DTYPE_I32 = 1,
    VKF_DTYPE_F16 = 2,                  /* IEEE half; shaders read it only where the device
                                           has 16-bit storage (storage_16bit) */
    VKF_DTYPE_I8 = 3,                   /* signed 8-bit: quantized matmul weights (B with
                                           b_scale); read as packed 32-bit words, every device */
} vkf_dtype;

#define VKF_MAX_RANK 4

/* A dense, row-major array in device memory. */
typedef struct vkf_tensor vkf_tensor;

/* Creates an uninitialised tensor of the given shape (rank 1..VKF_MAX_RANK, every
 * dimension > 0). A tensor larger than the device's maxStorageBufferRange cannot be
 * bound to a shader and is refused with VKF_ERROR_TOO_LARGE. */
VKF_API vkf_status vkf_tensor_create(vkf_context *context, vkf_dtype dtype, uint32_t rank,
                                     const uint64_t *shape, vkf_tensor **out_tensor);
VKF_API void vkf_tensor_destroy(vkf_tensor *tensor);
/* Size in bytes; 0 for NULL. */
VKF_API uint64_t vkf_tensor_bytes(const vkf_tensor *tensor);
/* Copies `bytes` bytes (must equal vkf_tensor_bytes) from host memory into the
 * tensor. Waits until the copy is done. */
VKF_API vkf_status vkf_tensor_upload(vkf_tensor *tensor, const void *src, uint64_t bytes);
/* Copies the tensor (bytes must equal vkf_tensor_bytes) to host memory. Waits. */
VKF_API vkf_status vkf_tensor_download(vkf_tensor *tensor, void *dst, uint64_t bytes);

/* ------------------------------------------------------------------ command lists */

/* A list of GPU operations recorded once into one command buffer and submitted
 * as often as wanted. Pipeline barriers are inserted only where an operation reads
 * or overwrites what an earlier one in the list wrote (or overwrites what it read).
 * Operations take borrowed tensors: they must outlive the list. */
typedef struct vkf_cmd vkf_cmd;

enum {
    VKF_CMD_TIMESTAMPS = 1u << 0,       /* time every operation on the GPU */
};

VKF_API vkf_status vkf_cmd_create(vkf_context *context, uint32_t flags, vkf_cmd **out_cmd);
VKF_API void vkf_cmd_destroy(vkf_cmd *cmd);
/* Number of operations recorded so far. */
VKF_API uint32_t vkf_cmd_op_count(const vkf_cmd *cmd);
/* Ends recording on the first call, submits the list once and waits for it to
 * finish. No operation can be appended after the first submit. */
VKF_API vkf_status vkf_cmd_submit(vkf_cmd *cmd);
/* GPU milliseconds of each operation in the last submit, in recording order
 * (needs VKF_CMD_TIMESTAMPS and a device with timestamps). Fills at most
 * `capacity` values and sets *out_count to the number of operations. */
VKF_API vkf_status vkf_cmd_timings(const vkf_cmd *cmd, double *out_ms, uint32_t capacity,
                                   uint32_t *out_count);

/* The kind of the index-th operation ("matmul", "softmax", ...); NULL past the end.
 * A static string. */
VKF_API const char *vkf_cmd_op_name(const vkf_cmd *cmd, uint32_t index);
/* GPU milliseconds from the start of the first operation to the end of the last,
 * in the last submit (needs VKF_CMD_TIMESTAMPS). */
VKF_API vkf_status vkf_cmd_gpu_ms(const vkf_cmd *cmd, double *out_ms);

/* A 2-D matrix inside a tensor, possibly one of a batch of matrices.
 * Element (b0, b1, row, col) is at
 *   offset + b0 * batch_stride[0] + b1 * batch_stride[1] + row * row_stride + col
 * (in elements). row_stride 0 means packed (the matrix's column count). */
typedef struct vkf_matrix_view {
    vkf_tensor *tensor;                 /* borrowed; NULL = absent (optional inputs) */
    uint64_t offset;
    uint64_t row_stride;
    uint64_t batch_stride[2];
} vkf_matrix_view;

typedef enum vkf_activation {
    VKF_ACTIVATION_NONE = 0,
    VKF_ACTIVATION_RELU = 1,
    VKF_ACTIVATION_GELU = 2,            /* exact: x/2 * (1 + erf(x / sqrt 2)) */
    VKF_ACTIVATION_SILU = 3,            /* x * sigmoid(x), "swish" */
    VKF_ACTIVATION_GELU_TANH = 4,       /* tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
                                           (transformers' gelu_new; T5 v1.1's gated-gelu) */
} vkf_activation;

/* C = act(alpha * A·Bᵀ + bias) + residual, for every item of a batch of
 * batch[0] × batch[1] products. */
typedef struct vkf_matmul_desc {
    uint32_t m, n, k;
    uint32_t batch[2];                  /* 0 is read as 1 */
    vkf_matrix_view a;                  /* (m, k) */
    vkf_matrix_view b;                  /* (n, k), as nn.Linear.weight; (k, n) if b_is_k_by_n.
                                           F32, F16 on devices with 16-bit storage, or I8
                                           with b_scale (either layout) */
    bool b_is_k_by_n;                   /* true for P·V, where V is (seq, head_dim) */
    vkf_matrix_view c;                  /* (m, n), written */
    vkf_tensor *bias;                   /* (n) or NULL */
    vkf_matrix_view residual;           /* (m, n) or tensor NULL; may not alias c */
    float alpha;
    vkf_activation activation;
    /* (n) F32, required iff B is I8: symmetric int8 weights with one scale per
     * output channel, B[n][k] = b_scale[n] * q[n][k] (b_is_k_by_n: column n of q
     * (k, n)); q from vkf_quantize_int8_rows. The same scales serve every batch
     * item. A, C and the residual stay F32 or F16; the kernels accumulate q·a in
     * fp32 and multiply by b_scale[n] before alpha, bias and activation. */
    vkf_tensor *b_scale;
    /* true: A's rows may overlap (a.row_stride below k), each row a window sliding
     * along one signal: a conv1d over time (rows of `stride` frames, k = kernel x
     * channels) or frames of audio. Only A may; C's rows never overlap. (init false) */
    bool a_rows_overlap;
} vkf_matmul_desc;

/* Row-wise y = softmax(scale * x + mask) over rows of `cols` elements.
 * Masked positions (additive -inf, or past the causal limit) get probability 0; a
 * row with every position masked is written as all zeros. */
typedef struct vkf_softmax_desc {
    uint32_t rows, cols;
    vkf_tensor *x;                      /* (rows, cols) */
    vkf_tensor *y;                      /* (rows, cols); may be x */
    float scale;
    /* Optional additive mask (mask_rows, cols). Row r of x uses mask row
     * (r / mask_row_div) % mask_rows; mask_row_div 0 is read as 1. */
    vkf_tensor *mask;
    uint32_t mask_rows;
    uint32_t mask_row_div;
    /* Causal: in row r, column j is masked iff j > (r % causal_period) + causal_offset.
     * causal_period is the number of query rows of one (batch, head); 0 = no causal mask. */
    uint32_t causal_period;
    uint32_t causal_offset;
    /* The mask rows start at this row of `mask`: row r of x uses mask row
     * mask_row0 + (r / mask_row_div) % mask_rows (init 0). */
    uint32_t mask_row0;
    /* A relative position bias (T5's), added after the scale: row r is query
     * i = r % rel_period of head h = rel_head0 + (r / rel_period) % rel_heads, and
     * column j gets rel_bias[h * (2 rel_radius + 1) + clamp(j - i, -R, R) + R]
     * (R = rel_radius). rel_bias (F32, may not alias y) NULL: none. */
    vkf_tensor *rel_bias;
    uint32_t rel_radius, rel_period, rel_heads, rel_head0;
} vkf_softmax_desc;

/* Row-wise y = LayerNorm(x + residual) * gamma + beta over rows of `cols`, with
 * the biased variance as in PyTorch. Optionally also writes s = x + residual.
 * With rms: RMSNorm (T5's layer norm), y = s / sqrt(mean(s^2) + eps) * gamma + beta,
 * no mean subtracted. */
typedef struct vkf_layernorm_desc {
    uint32_t rows, cols;
    vkf_tensor *x;                      /* (rows, cols) */
    vkf_tensor *residual;               /* (rows, cols) or NULL */
    vkf_tensor *gamma;                  /* (cols) */
    vkf_tensor *beta;                   /* (cols); with rms it may be NULL: no bias */
    float eps;
    vkf_tensor *y;                      /* (rows, cols); may be x or residual */
    vkf_tensor *sum;                    /* (rows, cols) or NULL; may not alias x, residual or y */
    bool rms;                           /* RMSNorm instead of LayerNorm */
} vkf_layernorm_desc;

/* out[t] = table[ids[t]] * scale + pe[t % seq_len + pos_offset], where pe is a
 * sinusoidal table from vkf_positional_encoding_create. An id outside [0, vocab)
 * or a position past the table cannot be reported from the GPU: its row is written
 * as NaN (never read out of bounds); callers that take ids from users check them
 * first. */
typedef struct vkf_embed_desc {
    uint32_t tokens, d, vocab;
    vkf_tensor *ids;                    /* (tokens) I32 */
    vkf_tensor *table;                  /* (vocab, d), F32 (or F16 with 16-bit storage, or I8 with table_scale) */
    vkf_tensor *out;                    /* (tokens, d) */
    float scale;
    vkf_tensor *positions;              /* (max_positions, d) or NULL: no positional term */
    uint32_t seq_len;                   /* 0 is read as tokens */
    uint32_t pos_offset;
    /* (1) I32 or NULL: state[0] is added to every position, so a decode step
     * recorded once serves every position; more than one element (at least
     * tokens / seq_len): state[t / seq_len] to token t's, each sequence its own
     * (a negative one counts as 0). Positions past the table give NaN. */
    vkf_tensor *position_state;
    /* A table split across several tensors (each within one binding): this table
     * holds vocabulary rows table_row0 .. table_row0 + table_rows - 1 (table_rows 0:
     * all rows from table_row0), and only tokens whose id falls there are written;
     * recording one embed per part fills every token. An id outside 0..vocab-1
     * gives NaN from the part with table_row0 0. */
    uint32_t table_row0, table_rows;
    /* (rows of this table) F32 per-row scales iff table is I8 (symmetric int8 rows,
     * as vkf_quantize_int8_rows makes them): row r reads q[r][c] * table_scale[r];
     * NULL for F32 and F16 tables. */
    vkf_tensor *table_scale;
    /* (tokens) I32 or NULL: token t is at position position_ids[t] (+ state[0])
     * rather than t % seq_len + pos_offset; a negative id or one past the table
     * gives NaN. */
    vkf_tensor *position_ids;
    /* true: a token whose id is pad_id reads position row pad_row, whatever its
     * place (fairseq's padding-aware positions, whose pad row is zeros). */
    bool pad_position;
    int32_t pad_id;
    uint32_t pad_row;
} vkf_embed_desc;

/* Makes the (positions, d) F32 table PE(pos, 2i) = sin(pos / 10000^(2i/d)),
 * PE(pos, 2i+1) = cos(pos / 10000^(2i/d)), computed in double on the host and
 * rounded once, so every device adds the same values (GPU sin/cos are only
 * required to be accurate to 2^-11). */
VKF_API vkf_status vkf_positional_encoding_create(vkf_context *context, uint32_t positions, uint32_t d,
                                                  vkf_tensor **out_tensor);

/* Each fills the defaults (alpha 1, scale 1, eps 1e-5, everything else 0/NULL). */
VKF_API void vkf_matmul_desc_init(vkf_matmul_desc *desc);
VKF_API void vkf_softmax_desc_init(vkf_softmax_desc *desc);
VKF_API void vkf_layernorm_desc_init(vkf_layernorm_desc *desc);
VKF_API void vkf_embed_desc_init(vkf_embed_desc *desc);

/* Symmetric per-row int8 quantization of w (rows, cols), row-major: out_scales[r]
 * = max|w[r][:]| / 127 (0 for an all-zero row) and out_q[r][c] = w[r][c] /
 * out_scales[r] rounded to nearest (halves away from zero), in -127..127. For
 * nn.Linear weights (n, k) the rows are output channels: upload out_q as an I8 B
 * and out_scales as b_scale. out_q holds rows * cols, out_scales rows values.
 * Fails (INVALID_ARGUMENT) on NULL pointers, zero sizes or a non-finite weight. */
VKF_API vkf_status vkf_quantize_int8_rows(const float *w, uint64_t rows, uint64_t cols, int8_t *out_q,
                                          float *out_scales);

/* Append one operation. Sizes and views are checked against the tensors; nothing
 * is recorded on failure. */
VKF_API vkf_status vkf_cmd_matmul(vkf_cmd *cmd, const vkf_matmul_desc *desc);
VKF_API vkf_status vkf_cmd_softmax(vkf_cmd *cmd, const vkf_softmax_desc *desc);
VKF_API vkf_status vkf_cmd_layernorm(vkf_cmd *cmd, const vkf_layernorm_desc *desc);
VKF_API vkf_status vkf_cmd_embed(vkf_cmd *cmd, const vkf_embed_desc *desc);

/* ------------------------------------------------------------------ attention */

/* Checks an attention variant name as vkf_model_set_attention and
 * vkf_cmd_attention take it ("dense", "dense-naive", "local:W", "strided:W:S",
 * "bigbird:B:G:R", "tglobal:W:G", "lsh:H:C", "lowrank:K"; NULL is "dense"); cross: as a
 * cross-attention (dense, dense-naive and lowrank only). Fails with
 * VKF_ERROR_INVALID_ARGUMENT naming what is wrong. */
VKF_API vkf_status vkf_attention_check(const char *variant, bool cross);

/* Which kernel runs the fused variants (dense, local, strided, bigbird, tglobal, and
 * lowrank's attention over its projected rows). AUTO: the cooperative-matrix one
 * for F16 inputs on a context with coopmat kernels that is not a CPU driver,
 * where its tiles fit; else the scalar one. COOPMAT forces it (fails where the
 * context has no coopmat kernels or head_dim does not fit; F32 inputs are then
 * rounded to f16 in the kernel); SCALAR forbids it. */
typedef enum vkf_attention_kernel {
    VKF_ATTENTION_KERNEL_AUTO = 0,
    VKF_ATTENTION_KERNEL_SCALAR = 1,
    VKF_ATTENTION_KERNEL_COOPMAT = 2,
} vkf_attention_kernel;

/* Multi-head attention of any variant:
 *   out[b, i, h, :] = sum_j softmax_j(scale * q[b, i, h, :] . k[b, j, h, :] + mask) v[b, j, h, :]
 * where key j is masked for query i iff j >= key_lengths[b] (when given), or
 * causal and j > i + causal_offset, or the variant's pattern leaves it out (see
 * vkf_model_set_attention for each). A query with every key masked gets zeros.
 * q, k and v are (batch, rows, heads * head_dim) views: element (b, r, h, c) is at
 * offset + b * batch_stride[0] + r * row_stride + h * head_dim + c, row_stride 0
 * meaning heads * head_dim and batch_stride[0] 0 meaning rows * row_stride
 * (batch_stride[1] must be 0). A fused QKV projection (batch * n, 3 d) gives
 * q, k, v as offsets 0, d, 2 d with row stride 3 d. */
typedef struct vkf_attention_op_desc {
    uint32_t batch, heads, head_dim;    /* head_dim 1..256 (dense-naive: any) */
    uint32_t lq, lk;                    /* query rows, key rows */
    float scale;                        /* init: 0, read as 1 / sqrt(head_dim) */
    vkf_matrix_view q, k, v;
    vkf_tensor *out;                    /* (batch * lq, heads * head_dim), packed; may not alias an input */
    vkf_dtype dtype;                    /* of q, k, v and out: F32, or F16 (16-bit storage; the fused
                                           variants only); arithmetic is fp32 */
    const char *variant;                /* NULL: "dense". lsh: keys are the normalised queries (shared-QK,
                                           k is not read) and lq == lk; lowrank and tglobal: not causal */
    bool causal;
    uint32_t causal_offset;             /* query i sees keys j <= i + causal_offset */
    const uint32_t *key_lengths;        /* (batch) on the host, each <= lk, copied; NULL: lk keys each */
    uint64_t seed;                      /* bigbird's random blocks, lsh's rotations, lowrank's projection */
    vkf_attention_kernel kernel;
} vkf_attention_op_desc;

/* Zeros everything (dense, F32, scale 1 / sqrt(head_dim), AUTO kernel). */
VKF_API void vkf_attention_op_desc_init(vkf_attention_op_desc *desc);
/* Appends the variant's operations. What they need beyond the given tensors
 * (bigbird's block table, tglobal's global keys: each block's mean key and value,
 * lsh's rotations and scratch, lowrank's projection and
 * projected keys and values, dense-naive's score matrices, the key lengths on the
 * device) the list makes and owns: vkf_cmd_memory counts it and vkf_cmd_destroy
 * frees it. dense-naive materialises the scores of as many heads at a time as one
 * binding holds (VKF_ERROR_TOO_LARGE when not even one head's lq x lk fits).
 * *out_kernel (may be NULL) gets a static name of what runs it: "fused",
 * "fused-coopmat", "naive" or "lsh" (lowrank: the kernel of its attention). */
VKF_API vkf_status vkf_cmd_attention(vkf_cmd *cmd, const vkf_attention_op_desc *desc, const char **out_kernel);

/* Device memory the list's own objects hold, in bytes: what operations such as
 * vkf_cmd_attention made for it (not the tensors passed to them). */
VKF_API vkf_status vkf_cmd_memory(const vkf_cmd *cmd, uint64_t *out_bytes);

/* ------------------------------------------------------------------ tuning */

/* The kernel family a matmul of these sizes and dtypes (A F16 or not, B F16 or
 * not) would run on the context now: "coopmat", "coopmat2", "tiled", "subgroup",
 * "broadcast" or "direct" (a static string; NULL for a NULL context). */
VKF_API const char *vkf_matmul_kernel_family(const vkf_context *context, uint32_t m, uint32_t n, uint32_t k,
                                             uint64_t batch, bool a_f16, bool b_f16);
/* A kernel choice and where it came from, for reports (bench, info). Every
 * string is static. */
typedef struct vkf_kernel_choice {
    const char *kernel;                 /* matmul: the family ("broadcast", "subgroup", "direct", "tiled",
                                           "coopmat", "coopmat2"); attention: "fused"; decode: "rows" or "split" */
    uint32_t tiles[6];                  /* matmul: workgroup, bm, bn, bk, tm, tn; fused attention: workgroup, bq,
                                           bk, td, tq, 0; decode: zeros */
    const char *source;                 /* "table" (the built-in per-driver table), "tune-file", "default" (the
                                           rule for the device's type and limits), "forced" (vkf_tune_force_matmul)
                                           or "environment" (VKFORMER_DECODE_FORM) */
    const char *table_entry;            /* the built-in table's entry for this device and driver, e.g. "lavapipe,
                                           Mesa 26 (LLVM 17+)"; NULL when none matched */
} vkf_kernel_choice;
/* What a matmul of these sizes would run on the context now (the rule of
 * vkf_matmul_kernel_family; I8 weights count as neither F16 flag). */
VKF_API vkf_status vkf_matmul_choice(const vkf_context *context, uint32_t m, uint32_t n, uint32_t k, uint64_t batch,
                                     bool a_f16, bool b_f16, vkf_kernel_choice *out_choice);
/* The tiles the scalar fused attention kernel ("fused") takes for head_dim. */
VKF_API vkf_status vkf_attention_fused_choice(const vkf_context *context, uint32_t head_dim,
                                              vkf_kernel_choice *out_choice);
/* The form of the decode step's attention_decode and beam_partial: "rows" (an
 * invocation per row; CPU drivers) or "split" (a workgroup per row; GPUs). */
VKF_API vkf_status vkf_decode_form_choice(const vkf_context *context, vkf_kernel_choice *out_choice);
/* Makes every matmul on the context use one kernel family ("coopmat",
 * "coopmat2", "tiled", "direct", "subgroup", "broadcast") with its built-in tiles for the
 * device, or "auto": the built-in rule. Fails with VKF_ERROR_UNSUPPORTED where
 * the device or the context lacks it (coopmat off), INVALID_ARGUMENT for another name. */
VKF_API vkf_status vkf_tune_force_matmul(vkf_context *context, const char *family);

/* `vkformer tune`: candidate tiles of the scalar matmul kernel families (on F32
 * matmuls), of the cooperative-matrix kernels (on F16 matmuls, where the context
 * has them) and of the fused attention kernel are timed on the context's device
 * at representative shapes, each checked against a host reference (a wrong result
 * disqualifies it); the winners are written to a JSON file per device (vendor,
 * device id and name, driver version) in the cache directory, which later
 * contexts load (vkf_context_options.tune). */
typedef void (*vkf_tune_progress_fn)(void *user, const char *line);
typedef struct vkf_tune_options {
    bool quick;                         /* a few candidates at small shapes (tests) */
    uint32_t repeat;                    /* timed submits per candidate and shape; 0: 5 (quick: 2) */
    vkf_tune_progress_fn progress;      /* one line per candidate measured; NULL: silent */
    void *progress_user;
    const char *path;                   /* file to write; NULL: the device's file in the cache directory */
} vkf_tune_options;
/* Times the candidates, writes the tune file (a temporary file, then renamed) and
 * applies the winners to the context. out_path (capacity bytes, may be NULL)
 * receives the path written. Fails with VKF_ERROR_IO when the file cannot be written. */
VKF_API vkf_status vkf_tune_run(vkf_context *context, const vkf_tune_options *options, char *out_path,
                                size_t capacity);
/* The path of the context's device's tune file in the cache directory; fails when
 * there is no cache directory ($HOME unset and no VKFORMER_CACHE_DIR). */
VKF_API vkf_status vkf_tune_file_path(const vkf_context *context, char *out_path, size_t capacity);
/* Whether the context's tiles came from a tune file. */
VKF_API bool vkf_tune_from_file(const vkf_context *context);
/* The context's matmul kernel ("matmul_direct", "matmul_tiled", ...; a static
 * string) and its tiles as (workgroup, bm, bn, bk, tm, tn); the fused attention
 * tiles (workgroup, bq, bk, td, tq) of the tuned head_dim, *out_attention_head_dim
 * 0 when none were tuned. */
VKF_API void vkf_tune_current(const vkf_context *context, const char **out_matmul_kernel, uint32_t out_matmul[6],
                              uint32_t *out_attention_head_dim, uint32_t out_attention[5]);

/* ------------------------------------------------------------------ models */

/* An encoder-decoder Transformer loaded from a model file (docs/file-format.md):
 * PyTorch nn.Transformer weights with embeddings and a generator. */
typedef struct vkf_model vkf_model;

typedef enum vkf_model_format {
    VKF_MODEL_VKFORMER = 0,             /* one .safetensors file in vkformer's layout (docs/file-format.md) */
    VKF_MODEL_HUGGING_FACE = 1,         /* a Hugging Face hub folder of any family (see family; docs/models.md) */
    VKF_MODEL_MARIAN = VKF_MODEL_HUGGING_FACE, /* the name of 0.1, when Marian was the only family of folders */
} vkf_model_format;

typedef struct vkf_model_config {
    uint32_t d_model, n_heads;
    uint32_t n_encoder_layers, n_decoder_layers;
    uint32_t d_ff;
    vkf_activation activation;          /* RELU, GELU, SILU or GELU_TANH (of the gated FFN's gate, T5 v1.1) */
    bool norm_first;                    /* pre-LN layers */
    float layer_norm_eps;
    uint32_t src_vocab_size, tgt_vocab_size;
    uint32_t max_len;                   /* longest source or target sequence */
    float embed_scale;
    int32_t pad_id, bos_id, eos_id;     /* bos_id: where decoding starts (Marian: decoder_start_token_id) */
    bool has_vocab;                     /* text in and out: vocabularies, or a folder's SentencePiece models */
    vkf_dtype activations;              /* F32, or F16 as the load's precision decided */
    vkf_model_format format;            /* what was loaded: a vkformer file or a Hugging Face folder */
    char family[32];                    /* the family that read it: "vkformer", "marian", "m2m_100", "nllb",
                                           "mbart", "t5", "mt5", "longt5" (docs/models.md) */
    uint32_t head_dim;                  /* attention width per head (d_model / n_heads, or T5's d_kv) */
    uint32_t n_languages;               /* language codes the tokenizer knows (vkf_model_language) */
    bool target_language_required;      /* generation needs vkf_model_set_target_language */
    /* Models that read audio (Whisper; 0 elsewhere): log-mel features of audio_mels
     * bins over windows of audio_samples samples at sample_rate Hz, audio_frames
     * frames each (vkf_model_audio_features). */
    uint32_t audio_mels, audio_frames, audio_samples, sample_rate;
} vkf_model_config;

/* Reads, validates and uploads a model: a vkformer .safetensors file, or a
 * Hugging Face MarianMTModel folder (config.json, model.safetensors, source.spm,
 * target.spm, vocab.json, generation_config.json; docs/models.md). Embeddings
 * and the generator past the device's maxStorageBufferRange are held in parts.
 * Any inconsistency (missing or
 * unexpected tensor, wrong shape or dtype, bad config key) fails with
 * VKF_ERROR_BAD_MODEL and a message naming the tensor or key. F16 weight
 * matrices and embeddings stay F16 on devices with 16-bit storage (arithmetic is
 * fp32) and are widened to F32 elsewhere; vectors (biases, norms) are F32. */
VKF_API vkf_status vkf_model_load(vkf_context *context, const char *path, vkf_model **out_model);

/* Storage precision (arithmetic and accumulation are fp32 throughout):
 * AUTO is F16 on a GPU (integrated, discrete or virtual) with 16-bit storage when
 * the model's head_dim fits the fused kernels. Elsewhere (CPU drivers, devices
 * without 16-bit storage) it keeps the weights as the file holds them (F16 stays
 * F16 where the device has 16-bit storage, else it is widened) with F32
 * activations. vkf_model_get_config says which in `activations`;
 * VKFORMER_AUTO_PRECISION=f16|f32 in the environment overrides the device rule.
 * F32 widens everything. F16 stores every weight matrix and embedding as F16 (F32
 * and BF16 rounded to nearest even) and every activation (residual stream,
 * projections, attention inputs and outputs, KV cache, logits) as F16, and fails
 * with VKF_ERROR_UNSUPPORTED on a device without 16-bit storage. Biases and norms
 * stay F32. With F16, dense-naive and lsh (no F16 form) and head_dim > 256 are
 * refused.
 * INT8 quantizes every weight matrix (attention projections, cross-attention,
 * FFN, the generator) at load to symmetric int8 with one F32 scale per output
 * channel (vkf_quantize_int8_rows: scale = max|row| / 127, halves rounded away
 * from zero), from F32, F16 or BF16 files. Weight matrices stored I8 in the file
 * (with "<name>_scale", docs/file-format.md) are kept as they are with AUTO and
 * INT8 and dequantized with F32 and F16. Activations are what AUTO would take:
 * F16 on a GPU with 16-bit storage (int8 weights, F16 activations), else F32
 * (VKFORMER_AUTO_PRECISION overrides that as for AUTO);
 * the (float) embeddings are quantized at load too, one F32 scale per row (token;
 * a tied generator reads the same int8 rows and scales); biases and norms F32. Every attention variant runs
 * (attention reads activations, not weights). */
typedef enum vkf_precision {
    VKF_PRECISION_AUTO = 0,
    VKF_PRECISION_F32 = 1,
    VKF_PRECISION_F16 = 2,
    VKF_PRECISION_INT8 = 3,
} vkf_precision;
typedef struct vkf_model_load_options {
    vkf_precision precision;
} vkf_model_load_options;
/* vkf_model_load with options (NULL: defaults). */
VKF_API vkf_status vkf_model_load_with(vkf_context *context, const char *path, const vkf_model_load_options *options,
                                       vkf_model **out_model);
VKF_API void vkf_model_destroy(vkf_model *model);
VKF_API vkf_status vkf_model_get_config(const vkf_model *model, vkf_model_config *out_config);

/* A batch of id sequences of possibly different lengths (each 1..max_len). */
typedef struct vkf_sequences {
    uint32_t count;
    const int32_t *const *ids;          /* count arrays, borrowed */
    const uint32_t *lengths;            /* (count) */
} vkf_sequences;

/* Generator outputs (pre-softmax) for every target position: out_logits is
 * (count, T, tgt_vocab_size) with T the longest target; the rows of positions past a
 * target's length are zero. out_floats must be count * T * tgt_vocab_size. The
 * whole pass (encoder, decoder, final norms, generator) is one command buffer,
 * recorded once per (count, longest source, T) and reused. Sources are masked
 * past their lengths; targets are causal, so padding never reaches a real row. */
VKF_API vkf_status vkf_model_forward(vkf_model *model, const vkf_sequences *src, const vkf_sequences *tgt,
                                     float *out_logits, uint64_t out_floats);

/* Greedy decoding of every source at once: the encoder runs once, cross-attention
 * keys/values are computed once per layer, and each step (a command buffer
 * recorded once, its position read from GPU memory) extends a KV cache. Stops at
 * eos_id or after max_new tokens (1..max_len). out_ids is (src->count, max_new): row
 * i holds out_lengths[i] generated ids, without bos and without the final eos. */
VKF_API vkf_status vkf_model_generate(vkf_model *model, const vkf_sequences *src, uint32_t max_new, int32_t *out_ids,
                                      uint32_t *out_lengths);

/* Attention variants. self_attention applies to the encoder's self-attention and
 * (in its causal form) the decoder's, in the forward pass and in every decode step
 * (NULL: the model's own, which is "dense" for every family but LongT5, whose
 * encoder runs "local:R" or "tglobal:R:G" as its config says and whose decoder is
 * dense):
 *   "dense"          fused kernel, online softmax, no score matrix (the default)
 *   "dense-naive"    scores materialised: batched matmul, softmax, batched matmul
 *   "local:W"        query i sees key j iff |i - j| <= W (decoder: also j <= i)
 *   "strided:W:S"    iff |i - j| <= W or j mod S = S - 1 (decoder: also j <= i)
 *   "bigbird:B:G:R"  blocks of B tokens: a query block sees its own and the two
 *                    neighbouring blocks, the first G blocks (which see and are
 *                    seen by every block) and R random blocks drawn from the seed
 *                    (decoder: also j <= i, the random blocks drawn from earlier ones)
 *   "lsh:H:C"        Reformer: shared-QK (the model's key projection is not used),
 *                    H seeded hash rounds, chunks of C sorted tokens. Decode steps
 *                    attend densely over the KV cache (one new query cannot be
 *                    hashed and sorted against).
 *   "lowrank:K"      Linformer: keys and values projected along the sequence to K
 *                    rows by a fixed seeded projection (random equal groups
 *                    averaged; a permutation when K >= length, which equals dense).
 *                    Encoder only: decoder self-attention is causal and stays dense.
 *   "tglobal:W:G"    LongT5's transient-global: local:W plus one global key per
 *                    block of G tokens (floor(length / G) of them, the last block
 *                    taking the tokens past them), which every query sees. On
 *                    LongT5-tglobal models the global keys are the model's own
 *                    (each block's summed inputs, normed, projected); elsewhere the
 *                    mean of the block's keys and values. Decoder self-attention
 *                    is causal: it keeps local:W.
 * T5's relative position bias (a T5, mT5 or LongT5 model) is added to the scores
 * every variant keeps, except lsh and lowrank, which refuse such models.
 * cross_attention: "dense", "dense-naive" or "lowrank:K". NULL means "dense".
 * Variants other than dense-naive need head_dim <= 256; models whose head_dim
 * passes 256 run "dense" as dense-naive. Where a variant does not apply, the
 * context's log gets an info message saying what runs instead. */
VKF_API vkf_status vkf_model_set_attention(vkf_model *model, const char *self_attention, const char *cross_attention);
/* What runs at each attention site under the current vkf_model_set_attention
 * choice, as variant names vkf_attention_check takes ("dense", "local:128",
 * "dense-naive", ...): where a variant does not apply (see above) the name is
 * what runs instead. kernel: the fused kernel the model's fused attention uses
 * ("fused" or "fused-coopmat"), "naive" for a head_dim past the fused kernels. */
typedef struct vkf_model_attention {
    char encoder[48];                   /* encoder self-attention (forward pass and generation) */
    char decoder[48];                   /* decoder self-attention of the forward pass (causal) */
    char cross[48];                     /* cross-attention of the forward pass */
    char decode_self[48];               /* a generation step's self-attention over the KV cache */
    char decode_cross[48];              /* a generation step's cross-attention */
    char kernel[24];
} vkf_model_attention;
VKF_API vkf_status vkf_model_get_attention(const vkf_model *model, vkf_model_attention *out_attention);
/* The seed of bigbird's random blocks, lsh's rotations and lowrank's projection
 * (default 0). The same seed gives the same results. */
VKF_API vkf_status vkf_model_set_seed(vkf_model *model, uint64_t seed);

/* Profiling: with `on`, command lists the model records from now on carry
 * timestamps (cached ones are dropped and re-recorded). */
VKF_API vkf_status vkf_model_set_profiling(vkf_model *model, bool on);
typedef enum vkf_model_pass {
    VKF_PASS_FORWARD = 0,               /* the last vkf_model_forward */
    VKF_PASS_ENCODE = 1,                /* the encoder run of the last vkf_model_generate */
    VKF_PASS_DECODE_STEP = 2,           /* the last decode step of the last vkf_model_generate */
} vkf_model_pass;
/* The command list of that pass (borrowed, valid until the model records another
 * of its kind): read it with vkf_cmd_timings, vkf_cmd_op_name, vkf_cmd_gpu_ms. */
VKF_API vkf_status vkf_model_last_cmd(const vkf_model *model, vkf_model_pass pass, const vkf_cmd **out_cmd);

/* Text in and out, for models whose config has vocabularies. The source text is
 * split on whitespace (config "src_split": "whitespace", the default) or into
 * characters ("chars"), each piece looked up in src_vocab, and eos_id appended.
 * An unknown piece fails with VKF_ERROR_INVALID_ARGUMENT naming it. */
VKF_API vkf_status vkf_model_encode_text(const vkf_model *model, const char *text, int32_t *out_ids, uint32_t capacity,
                                         uint32_t *out_count);
/* vkf_model_encode_text in a language: source_lang is a code as the tokenizer
 * names it (NLLB "eng_Latn", M2M-100 "en", mBART-50 "en_XX"; NULL: the
 * tokenizer's default, as Hugging Face's), placed as the family's tokenizer
 * places it. target_lang matters only for families whose target language is a
 * token of the source (Marian's ">>fra<<"); others take it in the generation
 * options (vkf_model_set_target_language). An unknown code fails with
 * VKF_ERROR_INVALID_ARGUMENT naming a few valid ones. */
VKF_API vkf_status vkf_model_encode_text_with(const vkf_model *model, const char *text, const char *source_lang,
                                              const char *target_lang, int32_t *out_ids, uint32_t capacity,
                                              uint32_t *out_count);
/* The index-th language code of the model (0..n_languages-1; a string the model
 * owns), or NULL. */
VKF_API const char *vkf_model_language(const vkf_model *model, uint32_t index);
/* Joins tgt_vocab entries with config "tgt_join" (default " "); fails if the text
 * would not fit `capacity` bytes including the terminating NUL. */
VKF_API vkf_status vkf_model_decode_text(const vkf_model *model, const int32_t *ids, uint32_t count, char *out_text,
                                         size_t capacity);

/* ------------------------------------------------------------------ decoding options (issue 14) */

/* Most end ids vkf_generate_options.end_ids may hold. */
#define VKF_MAX_END_IDS 8

/* Streaming (vkf_generate_options.on_tokens): called while a call decodes, with
 * new tokens of source `source` (its index in the call): greedy decoding and
 * sampling call it after every step, once for each source that got a token
 * other than an end token (count 1); beam search with more than one beam, whose
 * hypotheses settle only at the end, once per source when the call ends, with
 * its best hypothesis (count may be 0). ids are target ids after the prefix,
 * valid during the call only. Return true to go on; false stops that source
 * (greedy and sampling): its output ends with the ids passed so far, as if it
 * had reached an end token. The library makes no other call on the model from
 * inside it; the callback may not call the library on that model either. */
typedef bool (*vkf_token_fn)(void *user, uint32_t source, const int32_t *ids, uint32_t count);
/* Progress of vkf_model_generate_batched: called after each batch with the
 * sources decoded so far (`done` of `total`) and the ids returned so far. */
typedef void (*vkf_progress_fn)(void *user, uint32_t done, uint32_t total, uint64_t tokens);

/* How vkf_model_generate_with decodes. vkf_generate_options_init fills the
 * defaults (one beam, no length penalty... see each field); new fields are only
 * appended. */
typedef struct vkf_generate_options {
    uint32_t max_new;           /* decode steps at most, the eos step included (1..max_len; init: max_len) */
    uint32_t min_new;           /* eos cannot be chosen before this many tokens (init 0) */
    uint32_t beams;             /* 1..16; 1 is greedy (init 1) */
    float length_penalty;       /* a finished hypothesis scores sum(log p) / length^length_penalty, length
                                   counting its eos, as Hugging Face's generate (init 1.0) */
    bool early_stopping;        /* true: a source stops once it has `beams` finished hypotheses; false
                                   (init): once the best running beam cannot beat the worst of them */
    uint32_t n_best;            /* hypotheses returned per source, 1..beams (init 1) */
    /* Sampling (with beams 1): each next token drawn on the GPU from the softmax of
     * logits / temperature, cut to the top_k most probable (ties at the k-th kept),
     * then to the most probable ones whose mass reaches top_p, as Hugging Face's
     * warpers. The same seed gives the same ids on the same device and driver;
     * another device may round exp() differently and draw differently where a draw
     * falls near a boundary. */
    bool sample;                /* init false: greedy or beam search */
    float temperature;          /* > 0 (init 1) */
    uint32_t top_k;             /* 0: no cut (init 0) */
    float top_p;                /* (0, 1]; 1: no cut (init 1) */
    uint64_t seed;              /* init 0 */
    /* Hugging Face generation_config semantics (a Marian folder's defaults turn
     * both on): forced_eos makes the last step (step max_new) choose eos, as
     * forced_eos_token_id; renormalize re-normalises the log-probabilities after
     * eos is banned before min_new, as renormalize_logits (init false). */
    bool forced_eos;
    bool renormalize;
    /* forced_bos: the first generated token is forced_bos_id, as Hugging Face's
     * forced_bos_token_id (the target language of NLLB, M2M-100 and mBART-50);
     * it counts as a generated token, and beam search scores it 0 (init false). */
    bool forced_bos;
    int32_t forced_bos_id;
    /* Appended (production decoding): each as transformers 5's generate(), for
     * greedy decoding, sampling and beam search alike, and applied in the decode
     * step on the device (a logits-processor kernel reading each row's tokens so
     * far), in generate()'s order: repetition penalty, n-grams, bad sequences,
     * min_new, forced bos/eos, suppressed ids. */
    /* Decoding continues after these target ids (generate()'s decoder_input_ids =
     * [decoder start] + prefix), which are teacher-forced through the decode step;
     * with beams every beam starts from them. NULL: none. count is 1 (one prefix
     * for every source) or the call's number of sources; a prefix may be empty
     * (length 0) but may not hold an end token. max_new counts the tokens after
     * the prefix, and prefix + max_new must be at most max_len; out_ids hold only
     * the tokens after the prefix. The repetition penalty, n-grams and bad
     * sequences see the decoder start and the prefix, as generate() does. With a
     * non-empty prefix forced_bos does not apply (generate() forces it only right
     * after the start token): put that token first in the prefix. Borrowed for
     * the call. */
    const vkf_sequences *target_prefix;
    /* RepetitionPenaltyLogitsProcessor: the score of every token already in the
     * sequence (decoder start and prefix included) is multiplied by it where it
     * is negative and divided by it otherwise; > 0, 1 is off (init 1). Greedy
     * decoding and sampling (and beams 1, which is greedy) apply it to the
     * logits, beam search to the log-probabilities, as generate() does. */
    float repetition_penalty;
    /* NoRepeatNGramLogitsProcessor: no n-gram of this many tokens occurs twice in
     * a sequence (decoder start and prefix included); 0 is off (init 0). */
    uint32_t no_repeat_ngram;
    /* SuppressTokensLogitsProcessor: these (n_suppress) ids are never generated
     * (an end token among them included). Borrowed for the call; NULL: none. */
    const int32_t *suppress_ids;
    uint32_t n_suppress;
    /* NoBadWordsLogitsProcessor (bad_words_ids): no sequence of this list is
     * generated: its last id is banned wherever the ids before it were just
     * generated (a one-id sequence: always; a one-id sequence that is an end
     * token is ignored, as generate() ignores it). Each 1..max_len ids. Borrowed
     * for the call; NULL: none. */
    const vkf_sequences *bad_sequences;
    /* eos_token_id as a list: a source ends at any of these (n_end_ids, at most
     * VKF_MAX_END_IDS) ids; none: the model's eos_id (init). min_new holds every
     * one of them off; beam search keeps max(2, 1 + n_end_ids) x beams
     * candidates per step, as generate() does (at most 64). The returned ids
     * never include the end token; forced_eos still forces the model's eos_id. */
    const int32_t *end_ids;
    uint32_t n_end_ids;
    /* Streaming: called with each source's new tokens (vkf_token_fn); NULL: none. */
    vkf_token_fn on_tokens;
    void *on_tokens_user;
    /* vkf_model_generate_batched: called after each batch (vkf_progress_fn); NULL: none. */
    vkf_progress_fn on_progress;
    void *on_progress_user;
    /* Not in generate() (Marian's --max-length-factor): a source of n ids (eos
     * included) gets at most ceil(max_new_factor * n) new tokens, and at most
     * max_new; forced_eos then forces eos at that source's own last step. 0 is off
     * (init 0). */
    float max_new_factor;
} vkf_generate_options;

/* Fills the defaults; max_new 0 stands for the model's max_len. */
VKF_API void vkf_generate_options_init(vkf_generate_options *options);
/* Sets the options to generate in target language `code` (a code as the
 * tokenizer names it): its token forced as the first generated one (forced_bos)
 * where the family does that (NLLB, M2M-100, mBART-50). NULL: nothing, unless
 * the model needs a target language (config.target_language_required). Unknown
 * or missing codes fail with VKF_ERROR_INVALID_ARGUMENT listing a few valid ones. */
VKF_API vkf_status vkf_model_set_target_language(const vkf_model *model, const char *code,
                                                 vkf_generate_options *options);
/* The model's own defaults: a Hugging Face folder's generation_config.json
 * (num_beams, max_length or max_new_tokens, min_length, length_penalty,
 * early_stopping, num_return_sequences, forced_eos_token_id, renormalize_logits;
 * bad_words_ids of one token are banned in every generation of the model),
 * vkf_generate_options_init's for a vkformer file. */
VKF_API vkf_status vkf_model_generate_defaults(const vkf_model *model, vkf_generate_options *out_options);

/* Beam search (Hugging Face generate semantics for num_beams, length_penalty,
 * early_stopping and num_return_sequences = n_best) of every source at once:
 * count * beams rows decode as one batch; each step's top 2 * beams (beam, token)
 * pairs of each source are chosen on the GPU, and the beams' KV caches are
 * reordered on the GPU by a gather (the step stays recorded once). beams 1 gives
 * greedy decoding's ids. out_ids is (count, n_best, max_new): hypothesis j of
 * source i, best first, holds out_lengths[i * n_best + j] ids without bos and eos
 * (pad_id after them); out_scores (count, n_best), or NULL, gets each one's
 * length-penalised score. options NULL: the defaults. */
VKF_API vkf_status vkf_model_generate_with(vkf_model *model, const vkf_sequences *src,
                                           const vkf_generate_options *options, int32_t *out_ids,
                                           uint32_t *out_lengths, float *out_scores);

/* What the last vkf_model_generate or vkf_model_generate_with of the model took,
 * measured on the host around the library's own work (wall clock). */
typedef struct vkf_generate_stats {
    double first_token_ms;      /* from the call to the first step's ids on the host: encoder + first step */
    double total_ms;            /* the whole call */
    uint32_t steps;             /* decode steps submitted */
    uint64_t tokens;            /* ids returned over all sources (best hypotheses), eos not counted */
    uint64_t plan_bytes;        /* device memory of the generation plan's tensors: caches, activations */
} vkf_generate_stats;
VKF_API vkf_status vkf_model_generate_stats(const vkf_model *model, vkf_generate_stats *out_stats);

/* ------------------------------------------------------------------ audio (issue 25) */

/* The longest audio vkf_audio_read decodes: 4 hours. */
#define VKF_AUDIO_MAX_SECONDS 14400u

/* Reads a sound file through libsndfile: WAV (every PCM width, float, u-law,
 * A-law, ADPCM, GSM), FLAC, Ogg Vorbis and Opus, MP3, AIFF, and the rest
 * libsndfile reads, with any number of channels, which are averaged to mono. The
 * result is resampled with libsoxr (very high quality) to `rate` Hz (1000..1000000;
 * 0 keeps the file's rate). *out_samples (free it with vkf_audio_free) gets
 * *out_count float32 samples, integer formats scaled to [-1, 1) as libsndfile
 * does; *out_file_rate (may be NULL) the file's own rate. A file that is missing,
 * not a regular file, truncated or malformed, has 0 or more than 1024 channels, a
 * rate outside 1000..1000000 Hz, a declared length past VKF_AUDIO_MAX_SECONDS,
 * no frames, a codec libsndfile does not implement, or a sample that is not
 * finite fails with VKF_ERROR_IO and one line naming the file and the problem. */
VKF_API vkf_status vkf_audio_read(const char *path, uint32_t rate, float **out_samples, uint64_t *out_count,
                                  uint32_t *out_file_rate);
/* Resamples `count` mono samples from in_rate to out_rate Hz (libsoxr, very high
 * quality; the same rate copies). *out_samples: free with vkf_audio_free.
 * Non-finite samples fail with VKF_ERROR_INVALID_ARGUMENT naming the first. */
VKF_API vkf_status vkf_audio_resample(const float *in, uint64_t count, uint32_t in_rate, uint32_t out_rate,
                                      float **out_samples, uint64_t *out_count);
/* Frees what vkf_audio_read and vkf_audio_resample hand out; NULL is a no-op. */
VKF_API void vkf_audio_free(float *samples);

/* A batch of mono float32 PCM clips at the model's sample_rate. */
typedef struct vkf_audio_batch {
    uint32_t count;
    const float *const *samples;        /* count arrays, borrowed */
    const uint64_t *lengths;            /* (count) samples each (0 is allowed: silence) */
} vkf_audio_batch;

/* For models that read audio (config.audio_mels > 0; else VKF_ERROR_STATE): the
 * log-mel features of the first window of `count` samples (padded with silence
 * or cut to audio_samples), as transformers' WhisperFeatureExtractor computes
 * them: out_features (audio_mels, audio_frames), out_floats = their product.
 * Non-finite samples fail with VKF_ERROR_INVALID_ARGUMENT. */
VKF_API vkf_status vkf_model_audio_features(vkf_model *model, const float *samples, uint64_t count,
                                            float *out_features, uint64_t out_floats);
/* The encoder's output for the first window of each clip: out_hidden (count,
 * audio_frames / 2, d_model), after the encoder's final norm. */
VKF_API vkf_status vkf_model_encode_audio(vkf_model *model, const vkf_audio_batch *audio, float *out_hidden,
                                          uint64_t out_floats);
/* Teacher-forced logits, as vkf_model_forward, with the first window of each
 * clip as the source: out_logits (count, T, tgt_vocab_size), T the longest target. */
VKF_API vkf_status vkf_model_forward_audio(vkf_model *model, const vkf_audio_batch *audio, const vkf_sequences *tgt,
                                           float *out_logits, uint64_t out_floats);
/* The same from features: `features` (count, audio_mels, audio_frames), as
 * vkf_model_audio_features (or the extractor) gives them; they must be finite. */
VKF_API vkf_status vkf_model_forward_features(vkf_model *model, const float *features, uint32_t count,
                                              const vkf_sequences *tgt, float *out_logits, uint64_t out_floats);
/* vkf_model_generate_with over many sources at the speed of full batches: the
 * sources are sorted by length (longest first; equal lengths keep their order)
 * and decoded in batches whose padded size, sources x the longest of them, is
 * at most max_batch_tokens source ids (a longer source runs alone; 0: one
 * batch), and the outputs are written in the call's order, laid out as
 * vkf_model_generate_with's. Each source's ids and scores are those it gets
 * decoded alone. on_tokens (source: the index in this call) and on_progress
 * (after each batch) are called as given in options. */
VKF_API vkf_status vkf_model_generate_batched(vkf_model *model, const vkf_sequences *src,
                                              const vkf_generate_options *options, uint32_t max_batch_tokens,
                                              int32_t *out_ids, uint32_t *out_lengths, float *out_scores);

/* Log-probabilities of given translations (CTranslate2's score_batch): target
 * i is teacher-forced after the decoder start, and each of its ids, then
 * eos_id, is scored as log_softmax(logits)[id]; one forward pass of the batch
 * and a log-softmax-and-gather kernel on the device, so that the logits never
 * come back to the host. tgt: ids without the decoder start and without eos
 * (0..max_len - 1 each; empty targets score eos alone). out_logprobs is
 * (count, T + 1), T the longest target: row i holds tgt->lengths[i] + 1 values,
 * the last one eos's, and zeros after them; out_floats must be count * (T + 1).
 * A row's sum is the target's log-probability; CTranslate2 normalises it by the
 * number of ids scored (length + 1). */
VKF_API vkf_status vkf_model_score(vkf_model *model, const vkf_sequences *src, const vkf_sequences *tgt,
                                   float *out_logprobs, uint64_t out_floats);

/* Target-side text to target ids, through the model's target tokenizer
 * (Marian: target.spm and the target vocabulary; a vkformer file: tgt_vocab,
 * split as tgt_join joins), without eos: for target prefixes and scoring. A
 * piece the vocabulary lacks is <unk> where the tokenizer has one, else an
 * error naming it. */
VKF_API vkf_status vkf_model_encode_target_text(const vkf_model *model, const char *text, int32_t *out_ids,
                                                uint32_t capacity, uint32_t *out_count);
/* The id of a target vocabulary entry spelled exactly as the vocabulary spells
 * it (Marian: the piece U+2581 "Haus", "</s>"; a vkformer file: a tgt_vocab word), or
 * VKF_ERROR_INVALID_ARGUMENT naming it. */
VKF_API vkf_status vkf_model_target_token_id(const vkf_model *model, const char *token, int32_t *out_id);
/* ------------------------------------------------------------------ device pools (issue 30) */

/* A pool runs one model on several Vulkan devices at once: one replica of the
 * model per device, each driven by a thread of its own. Batches of sources are
 * queued; a free device takes the next one, and results come back by ticket, so
 * a caller collects them in the order it submitted them.
 *
 * A device that fails while running a batch with a device-level error (device
 * lost, out of device or host memory, any other failing Vulkan call) leaves the
 * pool: its batch goes back to the front of the queue and the other devices
 * finish the work. vkf_pool_device_status says which device left and why. A
 * batch that fails because of what it holds (INVALID_ARGUMENT, TOO_LARGE,
 * UNSUPPORTED: it would fail on every device) fails alone, and its device stays.
 * When no device is left, queued batches fail with the last device's status.
 *
 * Which free device takes a batch: vkf_pool_dispatch (by default a slow device
 * leaves work to faster ones where they would end it sooner).
 *
 * Threads: the pool's functions are called from one thread at a time. The log
 * callback of the context options is called from the pool's threads, several at
 * once. */
typedef struct vkf_pool vkf_pool;

/* Which free device takes the next batch. */
typedef enum vkf_pool_dispatch {
    /* A free device takes the head of the queue only if it would end that batch no
     * later than the other devices would end the whole queue without it (each
     * device's speed measured on its batches, and before its first by its timed
     * warm-up at create). On equal devices every free device takes work; a device
     * much slower than the others takes a batch only while the queue is long
     * enough that it ends in time, so it never holds the last batch while the
     * others wait. */
    VKF_POOL_DISPATCH_BALANCED = 0,
    /* Every free device takes the next batch, however slow; no device takes one
     * before every device has warmed up. */
    VKF_POOL_DISPATCH_ANY_FREE = 1,
} vkf_pool_dispatch;

typedef struct vkf_pool_options {
    /* "all" (or NULL): every GPU the loader lists (discrete, integrated, virtual);
     * where it lists none, every device. Else a comma-separated list of devices,
     * each a decimal index (as vkf_devices_list numbers them) or a substring of a
     * name, as vkf_context_options.device takes it; a device named twice is
     * refused. The pool's slots follow this order. Borrowed for the create call. */
    const char *devices;
    /* Every device's context is made with these (NULL: vkf_context_options_init's
     * defaults; `device` is ignored). The log callback is called from the pool's
     * threads. Borrowed for the create call. */
    const vkf_context_options *context;
    const vkf_model_load_options *load; /* NULL: AUTO precision; borrowed for the create call */
    /* As vkf_model_set_attention and vkf_model_set_seed (NULL: dense; seed 0). */
    const char *self_attention, *cross_attention;
    uint64_t seed;
    vkf_pool_dispatch dispatch;         /* BALANCED */
} vkf_pool_options;

/* Fills the defaults: every device, default context options, AUTO precision,
 * dense attention, seed 0, balanced dispatch (everything NULL or 0). */
VKF_API void vkf_pool_options_init(vkf_pool_options *options);

/* Loads the model (a path as vkf_model_load takes it) on every device of the
 * pool, one thread per device, in parallel. Fails if any device cannot be opened
 * or cannot load the model (the message names the device), with nothing left
 * running. options NULL: the defaults. Once it returns, each device's thread warms
 * its replica up (4 short sources generated twice, or for a Whisper model one
 * second of silence transcribed twice: the first compiles its pipelines, the
 * second is timed for the dispatch rule) before it takes batches;
 * the devices that are ready take them meanwhile. A warm-up that fails takes its
 * device out of the pool, as a failing batch would. */
VKF_API vkf_status vkf_pool_create(const char *path, const vkf_pool_options *options, vkf_pool **out_pool);
/* Waits for the batches the devices are running, drops the queued and
 * uncollected ones, stops the threads and frees every replica and context. */
VKF_API void vkf_pool_destroy(vkf_pool *pool);

/* Number of devices (slots) the pool was made with; 0 for NULL. */
VKF_API uint32_t vkf_pool_device_count(const vkf_pool *pool);

/* One device of the pool, as it stands now. */
typedef struct vkf_pool_device {
    bool active;                        /* false: it left the pool after a device-level failure */
    vkf_status failure;                 /* why it left (VKF_OK while active) */
    char failure_message[512];          /* the failing call's message ("" while active) */
    uint32_t batches;                   /* batches it finished */
    uint64_t sources, tokens;           /* their sources, and the ids it generated */
    double busy_ms;                     /* wall time it spent running batches, the failed one included */
    uint32_t validation_errors, validation_warnings; /* its context's, after its last batch */
    bool ready;                         /* warmed up (vkf_pool_create): it takes batches */
    vkf_device_info info;               /* as vkf_context_device_info gives it (last: it grows) */
} vkf_pool_device;
/* The state of slot `index` (0..vkf_pool_device_count - 1). */
VKF_API vkf_status vkf_pool_device_status(vkf_pool *pool, uint32_t index, vkf_pool_device *out_device);

/* The replica of slot 0, for what does not run on a device: vkf_model_get_config,
 * vkf_model_get_attention, vkf_model_generate_defaults, vkf_model_set_target_language,
 * vkf_model_language, vkf_model_encode_text(_with) and vkf_model_decode_text. These
 * read only the model's configuration and tokenizers, which the pool's threads never
 * change, so they may be called (from the pool's owning thread) while batches run.
 * Borrowed: valid until vkf_pool_destroy. NULL for a NULL pool. */
VKF_API const vkf_model *vkf_pool_model(const vkf_pool *pool);

/* How one batch ran (vkf_pool_collect). */
typedef struct vkf_pool_batch {
    uint32_t device;                    /* the slot that ran it (the last one tried) */
    uint32_t attempts;                  /* devices that took it: 1, more where a device failed under it */
    double queued_ms;                   /* from vkf_pool_submit to the start of its last attempt */
    double run_ms;                      /* its last attempt, host wall time */
    vkf_generate_stats stats;           /* the generation's (vkf_model_generate_stats of that replica) */
} vkf_pool_batch;

/* Queues a batch: the sources are copied (src may be freed on return) and
 * checked as the model would check them (count >= 1, lengths 1..max_len, ids in
 * the source vocabulary). options as for vkf_model_generate_with (copied; NULL:
 * vkf_generate_options_init's); where they ask for plain greedy decoding (as
 * vkf_generate_options_init's, any max_new) the batch runs vkf_model_generate's
 * greedy path, which gives the same ids. *out_ticket identifies it for
 * vkf_pool_collect. Fails with the last device's status when no device is left. */
VKF_API vkf_status vkf_pool_submit(vkf_pool *pool, const vkf_sequences *src, const vkf_generate_options *options,
                                   uint64_t *out_ticket);
/* Waits for the batch of `ticket` and hands out its results, as
 * vkf_model_generate_with lays them out: out_ids (count, n_best, max_new),
 * out_lengths (count, n_best), out_scores (count, n_best) or NULL (NaN on the
 * greedy path and for sampling), with max_new and n_best the options' (max_new 0:
 * the model's max_len). out_batch (or NULL) gets how it ran. Returns the batch's
 * status: a failing batch's message is the failing call's. A ticket is collected
 * once; an unknown or collected one fails with VKF_ERROR_INVALID_ARGUMENT. */
VKF_API vkf_status vkf_pool_collect(vkf_pool *pool, uint64_t ticket, int32_t *out_ids, uint32_t *out_lengths,
                                    float *out_scores, vkf_pool_batch *out_batch);
/* A whole job: src split into batches of batch_size sources (0: 64) in order,
 * submitted at once, collected in order; the outputs as vkf_model_generate_with's
 * for all of src. Returns the first failing batch's status (the others are still
 * collected). */
VKF_API vkf_status vkf_pool_generate(vkf_pool *pool, const vkf_sequences *src, const vkf_generate_options *options,
                                     uint32_t batch_size, int32_t *out_ids, uint32_t *out_lengths, float *out_scores);
/* Validation messages of every device's context, counted after each batch. */
VKF_API vkf_status vkf_pool_validation_counts(vkf_pool *pool, uint32_t *out_errors, uint32_t *out_warnings);

/* ------------------------------------------------------------------ transcription (issue 25) */

/* Progress of vkf_model_transcribe: called before each window is decoded, with
 * the seconds of audio decoded so far (the window's start) and the audio's length. */
typedef void (*vkf_transcribe_progress_fn)(void *user, double done_seconds, double total_seconds);
/* Called after each window is decoded, with the transcript so far: its segments
 * with their texts (`text` is NULL until the end); valid during the call. */
typedef struct vkf_transcript vkf_transcript;
typedef void (*vkf_transcribe_window_fn)(void *user, const vkf_transcript *so_far);

/* How vkf_model_transcribe works; vkf_transcribe_options_init fills the defaults
 * and new fields are only appended. */
typedef struct vkf_transcribe_options {
    /* A language code or name as Whisper's tokenizer knows them ("en", "german",
     * "castilian"); NULL or "auto" (init): the folder's forced_decoder_ids, else
     * detected as generate()'s detect_language does (one decoder step after
     * <|startoftranscript|> on the first window, argmax over lang_to_id's tokens). */
    const char *language;
    /* "transcribe", "translate", or NULL (init): the folder's forced_decoder_ids. */
    const char *task;
    /* 1: timestamps (WhisperTimeStampLogitsProcessor, segments with times); 0:
     * none; -1 (init): generation_config.json's return_timestamps. Audio longer
     * than one window always runs with timestamps, as generate() does. */
    int timestamps;
    /* Beams; 0 (init): generation_config.json's num_beams. 1 is greedy. */
    uint32_t beams;
    vkf_transcribe_progress_fn on_progress; /* NULL (init): none */
    void *on_progress_user;
    vkf_transcribe_window_fn on_window;     /* NULL (init): none */
    void *on_window_user;
} vkf_transcribe_options;
VKF_API void vkf_transcribe_options_init(vkf_transcribe_options *options);

/* One segment: [start, end) in seconds of the audio, ids[first .. first + count)
 * of the transcript (timestamp ids included), and its text (NULL where the
 * folder has no tokenizer). */
typedef struct vkf_segment {
    double start, end;
    uint32_t first, count;
    char *text;
} vkf_segment;

struct vkf_transcript {
    int32_t language_id;                /* the language token used, -1: none */
    char language[16];                  /* its code ("en"), "" when none */
    bool language_detected;             /* the language came from detection */
    int32_t prompt[8];                  /* the decoder prompt (<|startoftranscript|>, language, task, ...) */
    uint32_t n_prompt;
    bool timestamps;                    /* decoded with the timestamp rules */
    uint32_t windows;                   /* decoder runs (windows of audio_samples) */
    double seconds;                     /* the audio's length */
    uint32_t n_ids;
    int32_t *ids;                       /* (n_ids) every segment's ids, one after another */
    uint32_t n_segments;
    vkf_segment *segments;
    char *text;                         /* the segments' texts joined, NULL without tokenizer */
};

/* Whisper models (family "whisper"; else VKF_ERROR_STATE): transcribes or
 * translates `count` mono float32 samples at the model's sample_rate (16000 Hz)
 * as transformers 5.12's WhisperForConditionalGeneration.generate does: audio
 * up to one window (30 s) is padded to it; longer audio gets the whole
 * recording's log-mel features and is decoded window by window, each next
 * window starting at the last timestamp of the one before (long-form
 * generation). The prompt, suppress_tokens, begin_suppress_tokens and the
 * timestamp rules run on the device in the decode step. *out_transcript: free
 * with vkf_transcript_free. An unknown language, a task the folder has no id
 * for, or a non-finite sample fail with VKF_ERROR_INVALID_ARGUMENT. */
VKF_API vkf_status vkf_model_transcribe(vkf_model *model, const float *samples, uint64_t count,
                                        const vkf_transcribe_options *options, vkf_transcript **out_transcript);
VKF_API void vkf_transcript_free(vkf_transcript *transcript);

/* The same transcription one window at a time, so that a caller (vkformer
 * serve) can interleave a long recording's 30-second windows with other work.
 * vkf_transcription_begin does what vkf_model_transcribe does before the first
 * window (the checks, the recording's features, language detection, the
 * prompt; the samples are not needed after it). Each vkf_transcription_next
 * decodes one window and adds its segments, with their texts; *out_done is true
 * once the recording is done (a call after that adds nothing).
 * vkf_transcription_progress: the transcript so far (segments and ids; its
 * `text` stays NULL until finish), owned by the transcription.
 * vkf_transcription_finish (after out_done): the transcript, as
 * vkf_model_transcribe gives it (free it with vkf_transcript_free); the
 * transcription is freed, and on an error too. vkf_model_transcribe is begin,
 * next until done, finish. After an error of next, only free applies. */
typedef struct vkf_transcription vkf_transcription;
VKF_API vkf_status vkf_transcription_begin(vkf_model *model, const float *samples, uint64_t count,
                                           const vkf_transcribe_options *options, vkf_transcription **out);
VKF_API vkf_status vkf_transcription_next(vkf_transcription *transcription, bool *out_done);
VKF_API const vkf_transcript *vkf_transcription_progress(const vkf_transcription *transcription);
VKF_API vkf_status vkf_transcription_finish(vkf_transcription *transcription, vkf_transcript **out_transcript);
VKF_API void vkf_transcription_free(vkf_transcription *transcription);

/* ------------------------------------------------------------------ transcription in a device pool (issue 30) */

/* A pool of a Whisper model (vkf_pool_create on its folder; each device's warm-up
 * transcribes one second of silence twice) transcribes recordings, one per
 * ticket: the samples are copied and each recording runs whole on one device, as
 * vkf_model_transcribe runs it (long-form windows one after another), so that
 * several recordings run on several devices at once. options as for
 * vkf_model_transcribe (copied; NULL: vkf_transcribe_options_init's); on_progress
 * is called from the thread of the device that runs it. A device that fails
 * under a recording leaves the pool and the recording goes back to the front of
 * the queue, as a batch does. The dispatch rule weighs a recording by its windows
 * (vkf_pool_device.sources counts windows). A pool whose model does not read
 * audio refuses it with VKF_ERROR_STATE, as vkf_pool_submit refuses source ids
 * on a Whisper pool. */
VKF_API vkf_status vkf_pool_submit_transcribe(vkf_pool *pool, const float *samples, uint64_t count,
                                              const vkf_transcribe_options *options, uint64_t *out_ticket);
/* Waits for the recording of `ticket` and hands out its transcript (free it with
 * vkf_transcript_free) and, in out_batch (or NULL), how it ran (stats.tokens: the
 * transcript's ids). Returns the recording's status, as vkf_pool_collect does; a
 * ticket of vkf_pool_submit fails with VKF_ERROR_INVALID_ARGUMENT. */
VKF_API vkf_status vkf_pool_collect_transcript(vkf_pool *pool, uint64_t ticket, vkf_transcript **out_transcript,
                                               vkf_pool_batch *out_batch);

/* ------------------------------------------------------------------ serving scheduler (issue 37) */

/* A scheduler runs requests that arrive one at a time on one model, from a
 * thread of its own (src/serve/scheduler.c; `vkformer serve` is its HTTP front
 * end, docs/serving.md). It batches across requests:
 *  - requests wait in a queue; at each decode-step boundary the scheduler admits
 *    waiting greedy requests into free slots of a group: a running batch whose
 *    rows are slots, each with its own position, cross-attention keys/values,
 *    self-attention KV cache and processor row (target prefix, max_new, forced
 *    bos, repetition penalty, no-repeat n-gram size). A
 *    request JOINS a running group whose logits-processor settings it shares
 *    and whose source length class (a power of two from 16) it fits; else it
 *    starts a new group (at most max_groups run). The arrivals of a boundary run
 *    through the encoder in one batched pass per group;
 *  - every round decodes one step of each running group (its live rows in one
 *    recorded decode step, one submit per group), so a request admitted while
 *    others run starts at once and never waits for them to end;
 *  - a request whose row ends (an end id, its max_new, a stop from its
 *    streaming callback, a cancel) is answered at that step and its slot is
 *    free again for admission; plans are kept for reuse by later groups of the
 *    same shape;
 *  - beam searches join groups of their own beams and processor settings (a
 *    slot holds a request's beams; n_best, length penalty, early stopping,
 *    max_new and prefix are per request), beside the greedy groups;
 *  - sampling joins groups of its temperature, top_k and top_p, each row
 *    drawing with its own request's seed as the request alone would;
 *  - requests with min_new or renormalize (plan-wide settings of the step) or
 *    more beams than max_batch run whole, one run at a time, on the
 *    model's own decoder (the waiting ones with the same options but the
 *    target prefix, sampling aside, as one batch of sources); between two of
 *    their steps a round of the groups
 *    runs (greedy requests are admitted and decoded meanwhile), and a cancel ends
 *    one at its next step;
 *  - a transcription is a job of one 30-second window per round;
 *  - beside running groups, arrivals gather for up to two rounds or until
 *    max_batch / 8 of them wait, so that a busy scheduler runs one encoder pass
 *    for several of them.
 * Threads: every call may be made from any thread; `done` and streaming
 * callbacks are called from the scheduler's thread and must not call the
 * scheduler. The model belongs to the scheduler while it exists: other threads
 * may only read its configuration and tokenizers (as vkf_pool_model's). */
typedef struct vkf_scheduler vkf_scheduler;

typedef struct vkf_scheduler_options {
    uint32_t max_batch;                 /* slots: rows of running groups at most (init 32; 1..1024) */
    uint32_t max_groups;                /* groups running at once (init 4; 1..64) */
    uint32_t max_queue;                 /* requests waiting for a slot at most (init 256); past it submit
                                           fails with VKF_ERROR_STATE, "queue full" */
} vkf_scheduler_options;
VKF_API void vkf_scheduler_options_init(vkf_scheduler_options *options);

/* How one request ended, handed to its `done` callback (valid during the call). */
typedef struct vkf_scheduler_result {
    vkf_status status;                  /* VKF_OK, the failing call's status, or VKF_ERROR_STATE when cancelled */
    const char *message;                /* "" on success, else one line */
    /* text requests: n_best hypotheses, each `stride` ids apart, lengths[i] ids
     * each (without end token and prefix), scores (NaN for greedy and sampling) */
    const int32_t *ids;
    const uint32_t *lengths;
    const float *scores;
    uint32_t n_best, stride;
    /* audio requests: the transcript, owned by the callee (free it with
     * vkf_transcript_free), or NULL */
    vkf_transcript *transcript;
    double queued_ms;                   /* from submit to admission */
    double run_ms;                      /* from admission to the answer */
    uint32_t group_rows;                /* rows of the group that decoded it (a whole run: its requests) */
} vkf_scheduler_result;
typedef void (*vkf_scheduler_done_fn)(void *user, const vkf_scheduler_result *result);

/* Counters since create (vkf_scheduler_stats). */
typedef struct vkf_scheduler_stats {
    uint32_t queued;                    /* requests waiting now */
    uint32_t active;                    /* slots answering requests now */
    uint32_t groups;                    /* groups (running batches: one per processor settings and source
                                           length class in use) running now */
    uint64_t admitted, answered, failed, cancelled;
    uint64_t steps;                     /* decode steps submitted (one per group and round) */
    uint64_t encoder_passes;            /* batched encoder passes (one per group and admission) */
    uint64_t tokens;                    /* ids answered */
    uint64_t batch_hist[8];             /* encoder passes by arrivals: 1, 2, 3-4, 5-8, 9-16, 17-32, 33-64,
                                           more (a whole run counts its requests: beam searches that
                                           waited together run as one) */
    uint64_t batch_rows;                /* arrivals of every encoder pass so far (their sum) */
    uint64_t compactions;               /* 0: rows keep their slots (no group is moved into a smaller plan) */
    uint64_t compaction_failures;       /* 0 */
    double busy_ms;                     /* host wall time spent running the model (encoder passes,
                                           steps, whole runs), the device's work included */
    uint64_t joined;                    /* requests admitted into a group that was decoding others */
    uint64_t step_rows;                 /* rows of every decode step so far (their sum) */
    uint32_t max_step_rows;             /* the most rows one decode step decoded */
} vkf_scheduler_stats;

/* Starts the scheduler's thread on `model` (borrowed: it must outlive the
 * scheduler). options NULL: the defaults. */
VKF_API vkf_status vkf_scheduler_create(vkf_model *model, const vkf_scheduler_options *options,
                                        vkf_scheduler **out_scheduler);
/* Cancels every request still queued or running (each gets its `done` call
 * with VKF_ERROR_STATE), stops the thread and frees the scheduler (not the
 * model). Call it after the requests you want answered are answered. */
VKF_API void vkf_scheduler_destroy(vkf_scheduler *scheduler);

/* Queues a text request: `count` source ids (1..max_len, in the source
 * vocabulary; copied) decoded with options (NULL: vkf_model_generate_defaults;
 * copied with every list they point to; on_tokens is called with source 0 and
 * the request's new ids as vkf_model_generate_with calls it; on_progress is
 * ignored; target_prefix holds one prefix). max_new 0 in options: the model's
 * max_len after the prefix. `done` is called exactly once for an accepted
 * request (never for a refused one), with `user`. *out_id (may be NULL) names it
 * for vkf_scheduler_cancel. Fails at once on bad ids or options, and with
 * VKF_ERROR_STATE when the queue is full or the scheduler has failed. */
VKF_API vkf_status vkf_scheduler_submit(vkf_scheduler *scheduler, const int32_t *ids, uint32_t count,
                                        const vkf_generate_options *options, vkf_scheduler_done_fn done, void *user,
                                        uint64_t *out_id);
/* Queues a transcription of `count` samples (copied) as vkf_model_transcribe
 * runs it (options copied; its on_progress is ignored). */
VKF_API vkf_status vkf_scheduler_submit_audio(vkf_scheduler *scheduler, const float *samples, uint64_t count,
                                              const vkf_transcribe_options *options, vkf_scheduler_done_fn done,
                                              void *user, uint64_t *out_id);
/* Cancels a request: its `done` is called (with VKF_ERROR_STATE) at the next
 * step boundary, or at the end of a whole run (beams, sampling, audio) that
 * has started; its slot is freed. An unknown or answered id is ignored. */
VKF_API void vkf_scheduler_cancel(vkf_scheduler *scheduler, uint64_t id);
VKF_API vkf_status vkf_scheduler_get_stats(vkf_scheduler *scheduler, vkf_scheduler_stats *out_stats);

/* ------------------------------------------------------------------ compile-only devices and shader statistics */

/* Whether the context's device executes nothing (vkf_context_options.compile_only):
 * results read back from it are meaningless. false for a NULL context. */
VKF_API bool vkf_context_compile_only(const vkf_context *context);

/* Pipelines the context has built so far, in the order they were built (each op
 * builds the one its device's rules pick on first use). */
VKF_API uint32_t vkf_context_pipeline_count(const vkf_context *context);

#define VKF_MAX_SHADER_STATS 40
/* One statistic of a pipeline as its driver names it (VkPipelineExecutableStatisticKHR). */
typedef struct vkf_shader_stat {
    char name[64];
    char description[160];
    double value;                       /* integers, floats and booleans alike */
} vkf_shader_stat;

/* What the driver says about one built pipeline. Numbers the driver does not give
 * are -1. */
typedef struct vkf_pipeline_report {
    char variant[48];                   /* the shader variant (e.g. "matmul_coopmat_act16_f16b") */
    uint32_t spec[12];                  /* its specialization constants by constant_id */
    uint32_t spec_count;
    bool statistics;                    /* the driver reported statistics (else only variant and spec) */
    char executable[64];                /* the executable's name (compute: one) */
    uint32_t subgroup_size;             /* as compiled; 0: not said */
    uint32_t stat_count;
    vkf_shader_stat stats[VKF_MAX_SHADER_STATS]; /* every statistic, in the driver's order */
    /* The common ones, read from the driver's names (RADV, NVK, lavapipe, NVIDIA): */
    int64_t registers;                  /* vector registers per invocation (RADV VGPRs, NVK/NVIDIA GPRs) */
    int64_t scalar_registers;           /* RADV SGPRs */
    int64_t spills;                     /* registers spilled to memory (RADV spilled VGPRs + SGPRs; NVK spills) */
    int64_t shared_bytes;               /* shared memory (LDS) per workgroup (RADV; NVK does not say) */
    int64_t scratch_bytes;              /* private memory per invocation: spills and dynamically indexed arrays
                                           (RADV scratch, NVK local memory "SLM") */
    int64_t waves;                      /* occupancy: RADV subgroups per SIMD, NVK warps per SM */
    int64_t instructions;               /* instruction count */
    int64_t cycles;                     /* the compiler's static cycle estimate (NVK), or RADV's latency */
    int64_t code_bytes;                 /* binary size */
    /* Matrix instructions in the final code (RADV v_wmma, NVK hmma/imma, counted
     * in the internal representations), -1 where none were captured. */
    int64_t matrix_instructions;
    /* The occupancy floor written beside the kernel for this device's vendor
     * (pipeline.c: AMD subgroups per SIMD, NVIDIA warps per SM); -1: none. */
    int64_t waves_floor;
} vkf_pipeline_report;

/* The report of pipeline `index` (< vkf_context_pipeline_count). Statistics need
 * shader_statistics in the context's options and a driver with
 * VK_KHR_pipeline_executable_properties (vkf_context_shader_statistics). */
VKF_API vkf_status vkf_context_pipeline_report(vkf_context *context, uint32_t index, vkf_pipeline_report *out_report);
/* Whether the context captures statistics: asked for, and the device has the extension. */
VKF_API bool vkf_context_shader_statistics(const vkf_context *context);

/* The kernels a model runs that have no public op (the decode step's attention
 * over its KV cache and over the memory, the cache's append and beam reorder,
 * argmax, sampling, beam search's top-k, the logits processors, scoring's
 * log-probability gather, the step's advance; and the gated FFN's GLU where
 * d_ff > 0), recorded once each at this shape through the ops that generation
 * itself calls, over scratch tensors the list owns. For shader statistics
 * (`vkformer bench shaders`): the list builds the pipelines a real run would
 * build; its results are meaningless, so do not read any. */
typedef struct vkf_step_kernels_desc {
    uint32_t rows;                      /* decode-step rows: sources x beams */
    uint32_t beams;                     /* beams per source; 0 or 1: greedy */
    uint32_t heads, head_dim;
    uint32_t keys;                      /* self-attention: positions in the KV cache */
    uint32_t cross_keys;                /* cross-attention: source positions */
    uint32_t vocab;                     /* logits per row */
    uint32_t d_ff;                      /* gated FFN width (GLU); 0: none */
    vkf_activation glu_activation;
    vkf_dtype dtype;                    /* activations: F32 or F16 (16-bit storage) */
} vkf_step_kernels_desc;
VKF_API vkf_status vkf_cmd_step_kernels(vkf_cmd *cmd, const vkf_step_kernels_desc *desc);
/* Whether precision auto stores weights and activations as F16 on this context's
 * device (GPUs with 16-bit storage), as vkf_model_load decides it. */
VKF_API bool vkf_context_auto_f16(const vkf_context *context);

#ifdef __cplusplus
}
#endif

#endif /* VKFORMER_H */

/* `vkformer tune` and tune files (tune.c; a context loads its file in tuning.c,
 * the runtime): candidate tiles of the scalar matmul
 * kernel families (on F32 matmuls), of the cooperative-matrix kernels (on F16
 * matmuls, against the scalar winner; where the context has coopmat) and of the
 * fused attention kernel are timed on the context's device at representative
 * shapes, each checked against a host reference (a wrong result disqualifies it),
 * and the winners are written to a JSON file per device (vendor, device id and
 * name, driver version) in the cache directory, which later contexts load
 * (vkf_context_options.tune, VKFORMER_TUNE=0 to turn off). The coopmat choice is
 * its own key, "matmul_coopmat", which a context without coopmat ignores.
 * Internal to the library and its tool; no Vulkan types. */
#ifndef VKF_TUNE_H
#define VKF_TUNE_H

#include "vkformer.h"

/* Receives one line per candidate measured (and a few about the run). */
typedef void (*vkf_tune_progress_fn)(void *user, const char *line);

typedef struct vkf_tune_options {
    bool quick;                         /* a few candidates at small shapes (tests) */
    uint32_t repeat;                    /* timed submits per candidate and shape; 0: 5 (quick: 2) */
    vkf_tune_progress_fn progress;      /* NULL: silent */
    void *progress_user;
    const char *path;                   /* file to write; NULL: the device's file in the cache directory */
} vkf_tune_options;

/* Times the candidates, writes the tune file (temp file, then rename) and applies
 * the winners to ctx. out_path (capacity bytes, may be NULL) receives the path
 * written. Fails with VKF_ERROR_IO when the file cannot be written. */
vkf_status vkf_tune_run(vkf_context *ctx, const vkf_tune_options *options, char *out_path, size_t capacity);
/* The path of the context's device's tune file in the cache directory; fails when
 * there is no cache directory ($HOME unset and no VKFORMER_CACHE_DIR). */
vkf_status vkf_tune_file_path(const vkf_context *ctx, char *out_path, size_t capacity);
/* Whether ctx's tiles came from a tune file. */
bool vkf_tune_from_file(const vkf_context *ctx);
/* The context's matmul kernel ("matmul_direct" / "matmul_tiled") and its tiles as
 * (workgroup, bm, bn, bk, tm, tn); attention tiles (workgroup, bq, bk, td, tq) of
 * the tuned head_dim, *out_attention_head_dim 0 when none were tuned. */
void vkf_tune_current(const vkf_context *ctx, const char **out_matmul_kernel, uint32_t out_matmul[6],
                      uint32_t *out_attention_head_dim, uint32_t out_attention[5]);

/* The kernel family a matmul of these sizes and dtypes would run on ctx now (the
 * rule in ops.c): "coopmat", "coopmat2", "tiled", "subgroup" or "direct". */
const char *vkf_matmul_kernel_family(const vkf_context *ctx, uint32_t m, uint32_t n, uint32_t k, uint64_t batch,
                                     bool a_f16, bool b_f16);
/* Makes every matmul on ctx use one kernel family ("coopmat", "coopmat2",
 * "tiled", "direct", "subgroup") with its built-in tiles for the device, or
 * "auto": the built-in rule (bench matmul --kernel). Fails with
 * VKF_ERROR_UNSUPPORTED where the device or the context lacks it (coopmat off). */
vkf_status vkf_tune_force_matmul(vkf_context *ctx, const char *family);

#endif /* VKF_TUNE_H */

/* The device side of the library, as far as the dry run can reach it at link
 * time. vkf_model_check_bytes shares its code with vkf_model_load, so model.c
 * refers to these; a dry run must never call them with a live object (it makes
 * no device objects). Linking these instead of device.c, memory.c, record.c,
 * ops.c and pipeline.c keeps the fuzz target to the parsing code (no shaders,
 * no volk), and any call here that would touch a device is reported as a crash.
 *
 * tools/fuzz.sh links with --gc-sections, so only what the dry run can reach is
 * needed: if model.c starts calling another device function on that path, the
 * link fails naming it; add it here only if the dry run really never calls it. */
#include "vkformer.h"

#include <stdio.h>
#include <stdlib.h>

#define DEVICE_CALL(name)                                                                         \
    do {                                                                                          \
        fprintf(stderr, "fuzz_model: the device-free dry run called %s\n", name);                 \
        abort();                                                                                  \
    } while (0)

vkf_status vkf_tensor_create(vkf_context *context, vkf_dtype dtype, uint32_t rank, const uint64_t *shape,
                             vkf_tensor **out_tensor)
{
    (void)context, (void)dtype, (void)rank, (void)shape, (void)out_tensor;
    DEVICE_CALL("vkf_tensor_create");
}

vkf_status vkf_tensor_upload(vkf_tensor *tensor, const void *src, uint64_t bytes)
{
    (void)tensor, (void)src, (void)bytes;
    DEVICE_CALL("vkf_tensor_upload");
}

vkf_status vkf_positional_encoding_create(vkf_context *context, uint32_t positions, uint32_t d,
                                          vkf_tensor **out_tensor)
{
    (void)context, (void)positions, (void)d, (void)out_tensor;
    DEVICE_CALL("vkf_positional_encoding_create");
}

/* destroy(NULL) is a no-op (vkformer.h): the dry run destroys its empty model. */
void vkf_tensor_destroy(vkf_tensor *tensor)
{
    if (tensor) DEVICE_CALL("vkf_tensor_destroy");
}

void vkf_cmd_destroy(vkf_cmd *cmd)
{
    if (cmd) DEVICE_CALL("vkf_cmd_destroy");
}

struct vkf_lsh_plan;
void vkf_lsh_plan_destroy(struct vkf_lsh_plan *plan);
void vkf_lsh_plan_destroy(struct vkf_lsh_plan *plan)
{
    if (plan) DEVICE_CALL("vkf_lsh_plan_destroy");
}

/* generate.c's plan, freed by vkf_model_destroy; the dry run never makes one. */
struct gen_plan;
void vkf_gen_plan_free(struct gen_plan *p);
void vkf_gen_plan_free(struct gen_plan *p)
{
    if (p) DEVICE_CALL("vkf_gen_plan_free");
}

/* Precision int8's quantization at load (ops.c); the dry run loads with auto. */
vkf_status vkf_quantize_int8_rows(const float *w, uint64_t rows, uint64_t cols, int8_t *out_q, float *out_scales)
{
    (void)w, (void)rows, (void)cols, (void)out_q, (void)out_scales;
    DEVICE_CALL("vkf_quantize_int8_rows");
}

/* hf_marian.c's folder state, freed by vkf_model_destroy; the dry run reads one
 * file, never a Hugging Face folder. */
struct vkf_hf;
void vkf_hf_free(struct vkf_hf *hf);
void vkf_hf_free(struct vkf_hf *hf)
{
    if (hf) DEVICE_CALL("vkf_hf_free");
}

/* The loader's info messages go through a context; the dry run has none (an
 * embedding split in parts is logged only when tensors are made). */
struct vkf_context;
void vkf_log(const struct vkf_context *ctx, vkf_log_level level, const char *fmt, ...);
void vkf_log(const struct vkf_context *ctx, vkf_log_level level, const char *fmt, ...)
{
    (void)ctx, (void)level, (void)fmt;
    DEVICE_CALL("vkf_log");
}

vkf_status vkf_tensor_download(vkf_tensor *tensor, void *dst, uint64_t bytes)
{
    (void)tensor, (void)dst, (void)bytes;
    DEVICE_CALL("vkf_tensor_download");
}

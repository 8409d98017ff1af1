/* The context: made from its options and the environment, it assembles the
 * runtime's services in order (the device and its queue from device.c, the
 * pipeline cache, the tile choices and tune file, memory for tensors) and takes
 * them down in reverse. Above every other runtime file: none calls it. */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vkf_context_options_init(vkf_context_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->validation = -1;
    o->allow_host_visible = true;
    o->pipeline_cache = -1;
    o->tune = -1;
    o->coopmat = -1;
    o->compile_only = -1;
}

/* A -1/0/1 option: -1 reads the environment variable (on unless it is "0"). */
static bool option_on(int option, const char *env_name)
{
    if (option != -1) return option == 1;
    const char *env = getenv(env_name);
    return !(env && strcmp(env, "0") == 0);
}

vkf_status vkf_context_create(const vkf_context_options *options, vkf_context **out_context)
{
    if (!out_context) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_context_create: out_context is NULL");
    *out_context = NULL;
    vkf_context_options defaults;
    vkf_context_options_init(&defaults);
    if (!options) options = &defaults;
    if (options->validation < -1 || options->validation > 1)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_context_create: validation must be -1, 0 or 1, not %d",
                        options->validation);
    if (options->pipeline_cache < -1 || options->pipeline_cache > 1 || options->tune < -1 || options->tune > 1)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_context_create: pipeline_cache and tune must be -1, 0 or 1, "
                        "not %d and %d", options->pipeline_cache, options->tune);

    if (options->coopmat < -1 || options->coopmat > 1)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_context_create: coopmat must be -1, 0 or 1, not %d",
                        options->coopmat);

    if (options->compile_only < -1 || options->compile_only > 1)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_context_create: compile_only must be -1, 0 or 1, not %d",
                        options->compile_only);

    vkf_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory creating a context");
    ctx->coopmat_request = options->coopmat;
    if (ctx->coopmat_request == -1) {
        const char *env = getenv("VKFORMER_COOPMAT");
        if (env && strcmp(env, "0") == 0) ctx->coopmat_request = 0;
        else if (env && strcmp(env, "1") == 0) ctx->coopmat_request = 1;
        else if (env && strcmp(env, "everywhere") == 0) ctx->coopmat_request = 1, ctx->coopmat_everywhere = true;
    }
    if (options->compile_only == -1) {
        const char *env = getenv("VKFORMER_COMPILE_ONLY");
        ctx->compile_only = env && strcmp(env, "1") == 0;
    } else {
        ctx->compile_only = options->compile_only == 1;
    }
    ctx->statistics_requested = options->shader_statistics;
    ctx->log = options->log;
    ctx->log_user = options->log_user;
    ctx->max_device_memory = options->max_device_memory;
    ctx->pipeline_cache_on = option_on(options->pipeline_cache, "VKFORMER_PIPELINE_CACHE");
    ctx->tune_on = option_on(options->tune, "VKFORMER_TUNE");
    vkf_cache_dir_resolve(ctx, options->cache_dir);
    if (options->validation == -1) {
        const char *env = getenv("VKFORMER_VALIDATE");
        ctx->validation = env && strcmp(env, "1") == 0;
    } else {
        ctx->validation = options->validation == 1;
    }

    /* without the kernels in the build, no device turns coopmat on */
    if (!vkf_build_has_coopmat()) ctx->coopmat_request = 0;
    vkf_status st = vkf_device_open(ctx, options);
    if (st == VKF_OK) st = vkf_pipeline_cache_create(ctx);
    if (st == VKF_OK) {
        vkf_tuning_choose(ctx);
        if (ctx->tune_on) vkf_tune_load(ctx);
        uint64_t one = 4;
        st = vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &one, &ctx->dummy);
    }
    if (st != VKF_OK) {
        vkf_context_destroy(ctx); /* destroy functions leave the last error alone */
        return st;
    }
    *out_context = ctx;
    return VKF_OK;
}

void vkf_context_destroy(vkf_context *ctx)
{
    if (!ctx) return;
    if (ctx->device) {
        ctx->vk.vkDeviceWaitIdle(ctx->device);
        vkf_tensor_destroy(ctx->dummy);
        if (ctx->pipeline_count > 0) vkf_pipeline_cache_save(ctx); /* only when it may have changed */
        vkf_pipelines_destroy(ctx);
        vkf_memory_destroy_all(ctx);
        if (ctx->pipeline_cache) ctx->vk.vkDestroyPipelineCache(ctx->device, ctx->pipeline_cache, NULL);
    }
    vkf_device_close(ctx);
    free(ctx);
}

vkf_status vkf_context_device_info(const vkf_context *ctx, vkf_device_info *out_info)
{
    if (!ctx || !out_info)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_context_device_info: %s is NULL", ctx ? "out_info" : "context");
    *out_info = ctx->info;
    return VKF_OK;
}

vkf_status vkf_context_validation_counts(const vkf_context *ctx, uint32_t *out_errors, uint32_t *out_warnings,
                                         bool *out_validation_on)
{
    if (!ctx) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_context_validation_counts: context is NULL");
    if (out_errors) *out_errors = ctx->validation_errors;
    if (out_warnings) *out_warnings = ctx->validation_warnings;
    if (out_validation_on) *out_validation_on = ctx->validation;
    return VKF_OK;
}


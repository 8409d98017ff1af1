/* Compile-only devices and what drivers say about the pipelines they built: the
 * statistics and internal representations of VK_KHR_pipeline_executable_properties
 * (device.c enables it and pipeline.c asks for them when the context's options
 * say shader_statistics), read back per pipeline and mapped onto the few numbers
 * every report wants (registers, spills, shared memory, occupancy, instructions,
 * matrix instructions). Names differ per driver; each is matched here, once. */
#include "runtime/runtime.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool vkf_context_compile_only(const vkf_context *ctx) { return ctx && ctx->compile_only; }

bool vkf_context_shader_statistics(const vkf_context *ctx) { return ctx && ctx->capture_statistics; }

uint32_t vkf_context_pipeline_count(const vkf_context *ctx) { return ctx ? ctx->pipeline_count : 0; }

/* Case-insensitive: does `name` equal one of the |-separated words of `list`? */
static bool name_is(const char *name, const char *list)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, '|');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncasecmp(p, name, n) == 0) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

/* The common numbers from the drivers' names for them. RADV (ACO): "VGPRs",
 * "SGPRs", "Spilled VGPRs", "Spilled SGPRs", "LDS size", "Subgroups per SIMD",
 * "Scratch size", "Instructions", "Latency", "Code size". NVK (NAK): "Number of GPRs",
 * "Spills to memory", "SLM size" (local memory), "Instruction count", "Static cycle
 * count", "Max warps/SM", "Code size" (no shared-memory size).
 * lavapipe and NVIDIA's driver: some of these under their own names. */
static void map_stat(vkf_pipeline_report *r, const char *name, double v)
{
    int64_t i = (int64_t)v;
    if (name_is(name, "VGPRs|GPRs|Number of GPRs|Registers|Register count|Number of registers|Num GPRs")) r->registers = i;
    else if (name_is(name, "SGPRs")) r->scalar_registers = i;
    else if (name_is(name, "Spilled VGPRs|Spilled SGPRs|Spills to memory|Fills from memory|Spills|Spill count|Register spills")) {
        /* NVK reports spills and fills from memory: count the spills only */
        if (name_is(name, "Fills from memory")) return;
        r->spills = (r->spills < 0 ? 0 : r->spills) + i;
    } else if (name_is(name, "LDS size|Shared memory size|Shared memory|Shared size|Shared memory bytes")) r->shared_bytes = i;
    else if (name_is(name, "Scratch size|SLM size|Local memory size|Private memory size")) r->scratch_bytes = i;
    else if (name_is(name, "Subgroups per SIMD|Max warps/SM|Max warps per SM|Occupancy|Max waves per SIMD|Waves per SIMD")) r->waves = i;
    else if (name_is(name, "Instructions|Instruction count|Instruction Count|Number of instructions")) r->instructions = i;
    else if (name_is(name, "Static cycle count|Latency|Cycle count|Cycles")) {
        /* NVK's estimate wins over RADV's latency where both were named */
        if (r->cycles < 0 || name_is(name, "Static cycle count")) r->cycles = i;
    } else if (name_is(name, "Code size|Binary size|Code Size")) r->code_bytes = i;
}

/* Lines of `text` holding a matrix instruction of the final code: RADV's
 * v_wmma_* (RDNA3/4), NAK's hmma / imma (Ampere and later). */
static int64_t count_matrix_lines(const char *text, size_t len)
{
    int64_t count = 0;
    const char *end = text + len;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        size_t n = nl ? (size_t)(nl - line) : (size_t)(end - line);
        char buf[512];
        size_t m = n < sizeof buf - 1 ? n : sizeof buf - 1;
        for (size_t i = 0; i < m; i++) buf[i] = (char)tolower((unsigned char)line[i]);
        buf[m] = 0;
        if (strstr(buf, "v_wmma") || strstr(buf, "v_swmmac") || strstr(buf, "hmma") || strstr(buf, "imma.")) count++;
        line = nl ? nl + 1 : end;
    }
    return count;
}

/* Whether an internal representation is final machine code (the one to count
 * in): RADV's "Assembly"/"Disassembly", NVK's NAK shader after register
 * allocation; where no name says so, the last one is taken. */
static bool final_code(const char *name)
{
    char low[VK_MAX_DESCRIPTION_SIZE];
    size_t i = 0;
    for (; name[i] && i < sizeof low - 1; i++) low[i] = (char)tolower((unsigned char)name[i]);
    low[i] = 0;
    return strstr(low, "assembly") || strstr(low, "disassembly") || strstr(low, "binary") ||
           strstr(low, "after ra") || strstr(low, "final");
}

static vkf_status read_matrix_instructions(vkf_context *ctx, VkPipelineExecutableInfoKHR *ei,
                                           PFN_vkGetPipelineExecutableInternalRepresentationsKHR get_ir, int64_t *out)
{
    *out = -1;
    uint32_t n = 0;
    VkResult r = get_ir(ctx->device, ei, &n, NULL);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkGetPipelineExecutableInternalRepresentationsKHR");
    if (n == 0) return VKF_OK;
    VkPipelineExecutableInternalRepresentationKHR *irs = calloc(n, sizeof *irs);
    if (!irs) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for internal representations");
    for (uint32_t i = 0; i < n; i++) irs[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
    r = get_ir(ctx->device, ei, &n, irs);
    vkf_status st = r == VK_SUCCESS || r == VK_INCOMPLETE
                        ? VKF_OK
                        : vkf_context_vk_fail(ctx, r, "vkGetPipelineExecutableInternalRepresentationsKHR");
    /* the final code: the last one named so, else the last text one */
    int64_t pick = -1;
    for (uint32_t i = 0; st == VKF_OK && i < n; i++)
        if (irs[i].isText && final_code(irs[i].name)) pick = i;
    for (uint32_t i = 0; st == VKF_OK && pick < 0 && i < n; i++)
        if (irs[i].isText) pick = -2 - (int64_t)i; /* remembered as "last text", resolved below */
    if (pick < -1) pick = -2 - pick;
    if (st == VKF_OK && pick >= 0) {
        for (uint32_t i = 0; i < n; i++) irs[i].pData = NULL, irs[i].dataSize = 0;
        r = get_ir(ctx->device, ei, &n, irs); /* sizes */
        size_t size = irs[pick].dataSize;
        char *text = size ? malloc(size) : NULL;
        if (size && !text) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for an internal representation");
        if (st == VKF_OK && text) {
            /* the other entries stay with pData NULL: only their sizes come back */
            for (uint32_t i = 0; i < n; i++) irs[i].dataSize = i == (uint32_t)pick ? size : 0;
            irs[pick].pData = text;
            r = get_ir(ctx->device, ei, &n, irs);
            if (r == VK_SUCCESS || r == VK_INCOMPLETE) *out = count_matrix_lines(text, strnlen(text, irs[pick].dataSize));
            else st = vkf_context_vk_fail(ctx, r, "vkGetPipelineExecutableInternalRepresentationsKHR");
        }
        free(text);
    }
    free(irs);
    return st;
}

vkf_status vkf_context_pipeline_report(vkf_context *ctx, uint32_t index, vkf_pipeline_report *out)
{
    static const char fn[] = "vkf_context_pipeline_report";
    if (!ctx || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, ctx ? "out_report" : "context");
    if (index >= ctx->pipeline_count)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: index %u, but the context has built %u pipelines", fn, index,
                        ctx->pipeline_count);
    const vkf_pipeline *p = ctx->pipelines[index];
    memset(out, 0, sizeof *out);
    snprintf(out->variant, sizeof out->variant, "%s", vkf_variant(p->variant)->name);
    out->spec_count = p->spec_count < 12 ? p->spec_count : 12;
    memcpy(out->spec, p->spec, out->spec_count * sizeof *out->spec);
    out->registers = out->scalar_registers = out->spills = out->shared_bytes = out->scratch_bytes = -1;
    out->waves = out->instructions = out->cycles = out->code_bytes = out->matrix_instructions = -1;
    uint32_t floor = vkf_variant_occupancy_floor(p->variant, ctx->info.vendor_id);
    out->waves_floor = floor ? (int64_t)floor : -1;
    if (!ctx->capture_statistics) return VKF_OK;

    PFN_vkGetPipelineExecutablePropertiesKHR get_props =
        (PFN_vkGetPipelineExecutablePropertiesKHR)vkGetDeviceProcAddr(ctx->device, "vkGetPipelineExecutablePropertiesKHR");
    PFN_vkGetPipelineExecutableStatisticsKHR get_stats =
        (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(ctx->device, "vkGetPipelineExecutableStatisticsKHR");
    PFN_vkGetPipelineExecutableInternalRepresentationsKHR get_ir =
        (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)vkGetDeviceProcAddr(
            ctx->device, "vkGetPipelineExecutableInternalRepresentationsKHR");
    if (!get_props || !get_stats)
        return vkf_fail(VKF_ERROR_VULKAN, "%s: \"%s\" enabled VK_KHR_pipeline_executable_properties but has no entry "
                        "points for it", fn, ctx->info.name);
    VkPipelineInfoKHR pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = p->pipeline};
    uint32_t n = 0;
    VkResult r = get_props(ctx->device, &pi, &n, NULL);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkGetPipelineExecutablePropertiesKHR");
    if (n == 0) return VKF_OK;
    VkPipelineExecutablePropertiesKHR props[4];
    for (uint32_t i = 0; i < 4; i++)
        props[i] = (VkPipelineExecutablePropertiesKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR};
    if (n > 4) n = 4; /* a compute pipeline has one */
    r = get_props(ctx->device, &pi, &n, props);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return vkf_context_vk_fail(ctx, r, "vkGetPipelineExecutablePropertiesKHR");
    snprintf(out->executable, sizeof out->executable, "%.63s", props[0].name);
    out->subgroup_size = props[0].subgroupSize;

    VkPipelineExecutableInfoKHR ei = {.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                      .pipeline = p->pipeline, .executableIndex = 0};
    uint32_t count = 0;
    r = get_stats(ctx->device, &ei, &count, NULL);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkGetPipelineExecutableStatisticsKHR");
    VkPipelineExecutableStatisticKHR *stats = calloc(count ? count : 1, sizeof *stats);
    if (!stats) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for shader statistics");
    for (uint32_t i = 0; i < count; i++) stats[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
    r = get_stats(ctx->device, &ei, &count, stats);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(stats);
        return vkf_context_vk_fail(ctx, r, "vkGetPipelineExecutableStatisticsKHR");
    }
    out->statistics = true;
    for (uint32_t i = 0; i < count; i++) {
        double v = 0;
        switch (stats[i].format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: v = stats[i].value.b32 ? 1 : 0; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: v = (double)stats[i].value.i64; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: v = (double)stats[i].value.u64; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: v = stats[i].value.f64; break;
        default: break;
        }
        if (out->stat_count < VKF_MAX_SHADER_STATS) {
            vkf_shader_stat *s = &out->stats[out->stat_count++];
            snprintf(s->name, sizeof s->name, "%.63s", stats[i].name);
            snprintf(s->description, sizeof s->description, "%.159s", stats[i].description);
            s->value = v;
        }
        map_stat(out, stats[i].name, v);
    }
    free(stats);
    if (get_ir) VKF_TRY(read_matrix_instructions(ctx, &ei, get_ir, &out->matrix_instructions));
    return VKF_OK;
}

/* Command recording. A vkf_cmd is one command buffer recorded once and submitted
 * as often as wanted. Each dispatch declares which tensors it reads and writes;
 * the recorder inserts a pipeline barrier only when a dispatch touches memory that
 * an earlier dispatch since the last barrier wrote (read-after-write,
 * write-after-write) or read (write-after-read). With VKF_CMD_TIMESTAMPS each
 * dispatch is bracketed by timestamp queries. */
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

#define SETS_PER_POOL 64u
#define QUERIES_PER_POOL 512u /* 256 timed operations */

/* A byte range of a block's buffer touched by a dispatch. */
typedef struct vkf_span {
    VkBuffer buffer;
    uint64_t offset, size;
} vkf_span;

/* An object an operation made for the list, destroyed with it. */
typedef struct vkf_cmd_owned {
    void *object;
    void (*destroy)(void *object);
    uint64_t bytes;                     /* device memory it holds */
} vkf_cmd_owned;

typedef struct vkf_span_list {
    vkf_span *items;                    /* owned */
    uint32_t count, capacity;
} vkf_span_list;

struct vkf_cmd {
    vkf_context *ctx;                   /* borrowed */
    uint32_t flags;
    VkCommandBuffer cb;                 /* owned */
    VkFence fence;                      /* owned */
    bool ended;                         /* recording finished (first submit) */
    bool broken;                        /* a recording call failed; cannot submit */
    VkPipeline bound;                   /* last bound pipeline */
    VkDescriptorPool *pools;            /* owned */
    uint32_t pool_count;
    uint32_t sets_left;                 /* in the newest pool */
    VkQueryPool *query_pools;           /* owned */
    uint32_t query_pool_count;
    uint32_t op_count;
    const char **labels;                /* owned array of static strings, (op_count) */
    uint32_t label_capacity;
    double *timings;                    /* owned, (op_count) ms of the last submit */
    double span_ms;                     /* first start to last end, last submit */
    bool timings_valid;
    vkf_span_list reads, writes;        /* since the last barrier */
    vkf_cmd_owned *owned;               /* owned: objects operations made for the list (vkf_cmd_own) */
    uint32_t owned_count, owned_capacity;
};

vkf_context *vkf_cmd_context(vkf_cmd *cmd) { return cmd->ctx; }

bool vkf_cmd_recording(const vkf_cmd *cmd) { return !cmd->ended; }

vkf_status vkf_cmd_create(vkf_context *ctx, uint32_t flags, vkf_cmd **out_cmd)
{
    if (!out_cmd) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_cmd_create: out_cmd is NULL");
    *out_cmd = NULL;
    if (!ctx) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_cmd_create: context is NULL");
    if (ctx->lost) return vkf_fail(VKF_ERROR_DEVICE_LOST, "the device was lost; destroy and recreate the context");
    if (flags & ~(uint32_t)VKF_CMD_TIMESTAMPS)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_cmd_create: unknown flags 0x%x", flags);
    if ((flags & VKF_CMD_TIMESTAMPS) && !ctx->info.timestamps)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "device \"%s\" has no timestamp queries on its compute queue",
                        ctx->info.name);
    vkf_cmd *cmd = calloc(1, sizeof *cmd);
    if (!cmd) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a command list");
    cmd->ctx = ctx;
    cmd->flags = flags;
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = ctx->command_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkResult r = ctx->vk.vkAllocateCommandBuffers(ctx->device, &ai, &cmd->cb);
    const char *call = "vkAllocateCommandBuffers";
    if (r == VK_SUCCESS) {
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = ctx->vk.vkCreateFence(ctx->device, &fi, NULL, &cmd->fence);
        call = "vkCreateFence";
    }
    if (r == VK_SUCCESS) {
        VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        r = ctx->vk.vkBeginCommandBuffer(cmd->cb, &bi);
        call = "vkBeginCommandBuffer";
    }
    if (r != VK_SUCCESS) {
        vkf_cmd_destroy(cmd);
        return vkf_context_vk_fail(ctx, r, call);
    }
    *out_cmd = cmd;
    return VKF_OK;
}

void vkf_cmd_destroy(vkf_cmd *cmd)
{
    if (!cmd) return;
    vkf_context *ctx = cmd->ctx;
    if (cmd->cb) ctx->vk.vkFreeCommandBuffers(ctx->device, ctx->command_pool, 1, &cmd->cb);
    if (cmd->fence) ctx->vk.vkDestroyFence(ctx->device, cmd->fence, NULL);
    for (uint32_t i = 0; i < cmd->pool_count; i++) ctx->vk.vkDestroyDescriptorPool(ctx->device, cmd->pools[i], NULL);
    for (uint32_t i = 0; i < cmd->query_pool_count; i++)
        ctx->vk.vkDestroyQueryPool(ctx->device, cmd->query_pools[i], NULL);
    for (uint32_t i = cmd->owned_count; i-- > 0;) cmd->owned[i].destroy(cmd->owned[i].object);
    free(cmd->owned);
    free(cmd->pools);
    free(cmd->query_pools);
    free(cmd->timings);
    free(cmd->labels);
    free(cmd->reads.items);
    free(cmd->writes.items);
    free(cmd);
}

uint32_t vkf_cmd_op_count(const vkf_cmd *cmd) { return cmd ? cmd->op_count : 0; }

vkf_status vkf_cmd_own(vkf_cmd *cmd, void *object, void (*destroy)(void *), uint64_t bytes)
{
    if (!object) return VKF_OK;
    if (cmd->owned_count == cmd->owned_capacity) {
        uint32_t capacity = cmd->owned_capacity ? 2 * cmd->owned_capacity : 8;
        vkf_cmd_owned *grown = realloc(cmd->owned, capacity * sizeof *grown);
        if (!grown) {
            destroy(object);
            return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a command list's own objects");
        }
        cmd->owned = grown, cmd->owned_capacity = capacity;
    }
    cmd->owned[cmd->owned_count++] = (vkf_cmd_owned){object, destroy, bytes};
    return VKF_OK;
}

vkf_status vkf_cmd_memory(const vkf_cmd *cmd, uint64_t *out_bytes)
{
    if (out_bytes) *out_bytes = 0;
    if (!cmd || !out_bytes) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_cmd_memory: %s is NULL", cmd ? "out_bytes" : "cmd");
    uint64_t total = 0;
    for (uint32_t i = 0; i < cmd->owned_count; i++) total += cmd->owned[i].bytes;
    *out_bytes = total;
    return VKF_OK;
}

static bool overlaps(const vkf_span_list *list, const vkf_span *s)
{
    for (uint32_t i = 0; i < list->count; i++) {
        const vkf_span *o = &list->items[i];
        if (o->buffer == s->buffer && o->offset < s->offset + s->size && s->offset < o->offset + o->size) return true;
    }
    return false;
}

static bool span_push(vkf_span_list *list, const vkf_span *s)
{
    if (list->count == list->capacity) {
        uint32_t cap = list->capacity ? 2 * list->capacity : 16;
        vkf_span *grown = realloc(list->items, cap * sizeof *grown);
        if (!grown) return false;
        list->items = grown;
        list->capacity = cap;
    }
    list->items[list->count++] = *s;
    return true;
}

static vkf_status allocate_set(vkf_cmd *cmd, VkDescriptorSetLayout layout, VkDescriptorSet *out_set)
{
    vkf_context *ctx = cmd->ctx;
    if (cmd->sets_left == 0) {
        VkDescriptorPool *grown = realloc(cmd->pools, (cmd->pool_count + 1) * sizeof *grown);
        if (!grown) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for descriptor pools");
        cmd->pools = grown;
        VkDescriptorPoolSize size = {
            .type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = SETS_PER_POOL * VKF_MAX_BINDINGS,
        };
        VkDescriptorPoolCreateInfo pi = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
            .maxSets = SETS_PER_POOL,
            .poolSizeCount = 1,
            .pPoolSizes = &size,
        };
        VkResult r = ctx->vk.vkCreateDescriptorPool(ctx->device, &pi, NULL, &cmd->pools[cmd->pool_count]);
        if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkCreateDescriptorPool");
        cmd->pool_count++;
        cmd->sets_left = SETS_PER_POOL;
    }
    VkDescriptorSetAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = cmd->pools[cmd->pool_count - 1],
        .descriptorSetCount = 1,
        .pSetLayouts = &layout,
    };
    VkResult r = ctx->vk.vkAllocateDescriptorSets(ctx->device, &ai, out_set);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkAllocateDescriptorSets");
    cmd->sets_left--;
    return VKF_OK;
}

/* Query index of the first timestamp of operation `op`; makes a pool when needed. */
static vkf_status timestamp_slot(vkf_cmd *cmd, uint32_t op, VkQueryPool *out_pool, uint32_t *out_index)
{
    vkf_context *ctx = cmd->ctx;
    uint32_t pool = op * 2 / QUERIES_PER_POOL;
    if (pool == cmd->query_pool_count) {
        VkQueryPool *grown = realloc(cmd->query_pools, (cmd->query_pool_count + 1) * sizeof *grown);
        if (!grown) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for query pools");
        cmd->query_pools = grown;
        VkQueryPoolCreateInfo qi = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = QUERIES_PER_POOL,
        };
        VkResult r = ctx->vk.vkCreateQueryPool(ctx->device, &qi, NULL, &cmd->query_pools[pool]);
        if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkCreateQueryPool");
        cmd->query_pool_count++;
        /* Reset inside the command buffer, before the pool's first use, on every submit. */
        ctx->vk.vkCmdResetQueryPool(cmd->cb, cmd->query_pools[pool], 0, QUERIES_PER_POOL);
    }
    *out_pool = cmd->query_pools[pool];
    *out_index = op * 2 % QUERIES_PER_POOL;
    return VKF_OK;
}

vkf_status vkf_cmd_dispatch(vkf_cmd *cmd, const vkf_pipeline *pipeline, const vkf_binding *bindings,
                            uint32_t binding_count, const void *push, uint32_t push_bytes, const uint32_t groups[3],
                            const char *label)
{
    vkf_context *ctx = cmd->ctx;
    const vkf_variant_desc *desc = vkf_variant(pipeline->variant);
    const vkf_variant_objects *objects = &ctx->variants[pipeline->variant];
    if (cmd->ended)
        return vkf_fail(VKF_ERROR_STATE, "%s: the command list was already submitted; record a new one", label);
    if (binding_count != desc->bindings || binding_count > VKF_MAX_BINDINGS || push_bytes != desc->push_bytes)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %u bindings / %u push bytes given, shader %s takes %u / %u",
                        label, binding_count, push_bytes, desc->name, desc->bindings, desc->push_bytes);

    if (cmd->op_count == cmd->label_capacity) {
        uint32_t cap = cmd->label_capacity ? 2 * cmd->label_capacity : 32;
        const char **grown = realloc(cmd->labels, cap * sizeof *grown);
        if (!grown) {
            cmd->broken = true;
            return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory recording %s", label);
        }
        cmd->labels = grown;
        cmd->label_capacity = cap;
    }
    VkDescriptorSet set;
    vkf_status st = allocate_set(cmd, objects->set_layout, &set);
    if (st != VKF_OK) {
        cmd->broken = true;
        return st;
    }
    VkDescriptorBufferInfo infos[VKF_MAX_BINDINGS];
    VkWriteDescriptorSet writes[VKF_MAX_BINDINGS];
    vkf_span spans[VKF_MAX_BINDINGS];
    bool barrier_needed = false;
    for (uint32_t i = 0; i < binding_count; i++) {
        const vkf_tensor *t = bindings[i].tensor ? bindings[i].tensor : ctx->dummy;
        /* Ranges round up to 4 bytes (inside the tensor's allocation, which is
         * aligned to 16 or more): shaders read I8 and F16 tensors as 32-bit words. */
        infos[i] = (VkDescriptorBufferInfo){.buffer = t->block->buffer, .offset = t->offset,
                                            .range = vkf_align_up(t->bytes, 4)};
        writes[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &infos[i],
        };
        spans[i] = (vkf_span){t->block->buffer, t->offset, t->bytes};
        if (!bindings[i].tensor) continue; /* the dummy is never read or written */
        if (overlaps(&cmd->writes, &spans[i])) barrier_needed = true;                 /* RAW, WAW */
        if ((bindings[i].access & VKF_WRITE) && overlaps(&cmd->reads, &spans[i])) barrier_needed = true; /* WAR */
    }
    ctx->vk.vkUpdateDescriptorSets(ctx->device, binding_count, writes, 0, NULL);

    if (barrier_needed) {
        /* This dispatch depends on one recorded since the last barrier. */
        VkMemoryBarrier mb = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
        };
        ctx->vk.vkCmdPipelineBarrier(cmd->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
        cmd->reads.count = cmd->writes.count = 0;
    }
    for (uint32_t i = 0; i < binding_count; i++) {
        if (!bindings[i].tensor) continue;
        bool ok = true;
        if (bindings[i].access & VKF_READ) ok = span_push(&cmd->reads, &spans[i]);
        if (ok && (bindings[i].access & VKF_WRITE)) ok = span_push(&cmd->writes, &spans[i]);
        if (!ok) {
            cmd->broken = true;
            return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory recording %s", label);
        }
    }

    VkQueryPool qpool = VK_NULL_HANDLE;
    uint32_t qindex = 0;
    if (cmd->flags & VKF_CMD_TIMESTAMPS) {
        st = timestamp_slot(cmd, cmd->op_count, &qpool, &qindex);
        if (st != VKF_OK) {
            cmd->broken = true;
            return st;
        }
        /* Written once earlier commands finished their compute work, so a dispatch
         * waiting at a barrier is not timed as running. */
        ctx->vk.vkCmdWriteTimestamp(cmd->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, qpool, qindex);
    }
    if (cmd->bound != pipeline->pipeline) {
        ctx->vk.vkCmdBindPipeline(cmd->cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->pipeline);
        cmd->bound = pipeline->pipeline;
    }
    ctx->vk.vkCmdBindDescriptorSets(cmd->cb, VK_PIPELINE_BIND_POINT_COMPUTE, objects->layout, 0, 1, &set, 0, NULL);
    if (push_bytes) ctx->vk.vkCmdPushConstants(cmd->cb, objects->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    ctx->vk.vkCmdDispatch(cmd->cb, groups[0], groups[1], groups[2]);
    if (cmd->flags & VKF_CMD_TIMESTAMPS)
        ctx->vk.vkCmdWriteTimestamp(cmd->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qpool, qindex + 1);
    cmd->labels[cmd->op_count] = label;
    cmd->op_count++;
    return VKF_OK;
}

static vkf_status end_recording(vkf_cmd *cmd)
{
    vkf_context *ctx = cmd->ctx;
    /* Results must be visible to the host, to transfers, and to the next
     * submission's shaders (this list again, or another). */
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                         VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    ctx->vk.vkCmdPipelineBarrier(cmd->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                                     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                                 0, 1, &mb, 0, NULL, 0, NULL);
    VkResult r = ctx->vk.vkEndCommandBuffer(cmd->cb);
    if (r != VK_SUCCESS) {
        cmd->broken = true;
        return vkf_context_vk_fail(ctx, r, "vkEndCommandBuffer");
    }
    cmd->ended = true;
    if (cmd->flags & VKF_CMD_TIMESTAMPS) {
        cmd->timings = calloc(cmd->op_count ? cmd->op_count : 1, sizeof *cmd->timings);
        if (!cmd->timings) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for timings");
    }
    return VKF_OK;
}

static vkf_status read_timings(vkf_cmd *cmd)
{
    vkf_context *ctx = cmd->ctx;
    uint64_t first = UINT64_MAX, last = 0;
    for (uint32_t op = 0; op < cmd->op_count; op++) {
        uint64_t ticks[2];
        VkQueryPool pool = cmd->query_pools[op * 2 / QUERIES_PER_POOL];
        VkResult r = ctx->vk.vkGetQueryPoolResults(ctx->device, pool, op * 2 % QUERIES_PER_POOL, 2, sizeof ticks,
                                                   ticks, sizeof ticks[0],
                                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
        if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkGetQueryPoolResults");
        uint64_t delta = ticks[1] >= ticks[0] ? ticks[1] - ticks[0] : 0;
        cmd->timings[op] = (double)delta * ctx->info.timestamp_period_ns * 1e-6;
        if (ticks[0] < first) first = ticks[0];
        if (ticks[1] > last) last = ticks[1];
    }
    cmd->span_ms = cmd->op_count && last > first ? (double)(last - first) * ctx->info.timestamp_period_ns * 1e-6 : 0;
    cmd->timings_valid = true;
    return VKF_OK;
}

vkf_status vkf_cmd_submit(vkf_cmd *cmd)
{
    if (!cmd) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_cmd_submit: command list is NULL");
    vkf_context *ctx = cmd->ctx;
    if (ctx->lost) return vkf_fail(VKF_ERROR_DEVICE_LOST, "the device was lost; destroy and recreate the context");
    if (cmd->broken)
        return vkf_fail(VKF_ERROR_STATE, "vkf_cmd_submit: a recording call on this list failed; record a new one");
    if (!cmd->ended) VKF_TRY(end_recording(cmd));
    cmd->timings_valid = false;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd->cb};
    VkResult r = vkf_injected(ctx, "vkQueueSubmit");
    if (r == VK_SUCCESS) r = ctx->vk.vkQueueSubmit(ctx->queue, 1, &si, cmd->fence);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkQueueSubmit");
    r = ctx->vk.vkWaitForFences(ctx->device, 1, &cmd->fence, VK_TRUE, UINT64_MAX);
    if (r == VK_SUCCESS) r = vkf_injected(ctx, "vkWaitForFences");
    if (r != VK_SUCCESS) {
        /* Unless the device is gone, let the work finish and unsignal the fence so
         * the list can be submitted again. */
        if (r != VK_ERROR_DEVICE_LOST) {
            ctx->vk.vkQueueWaitIdle(ctx->queue);
            ctx->vk.vkResetFences(ctx->device, 1, &cmd->fence);
        }
        return vkf_context_vk_fail(ctx, r, "vkWaitForFences");
    }
    r = ctx->vk.vkResetFences(ctx->device, 1, &cmd->fence);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkResetFences");
    /* A compile-only device (vkf_context_compile_only) executes nothing and writes no
     * timestamp (NVK over drm-shim never makes them available): the times stay 0. */
    if (!(cmd->flags & VKF_CMD_TIMESTAMPS)) return VKF_OK;
    if (!ctx->compile_only) return read_timings(cmd);
    cmd->span_ms = 0, cmd->timings_valid = true;
    return VKF_OK;
}

vkf_status vkf_cmd_timings(const vkf_cmd *cmd, double *out_ms, uint32_t capacity, uint32_t *out_count)
{
    if (!cmd || !out_count)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_cmd_timings: %s is NULL", cmd ? "out_count" : "command list");
    *out_count = 0;
    if (capacity > 0 && !out_ms) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_cmd_timings: out_ms is NULL");
    if (!(cmd->flags & VKF_CMD_TIMESTAMPS))
        return vkf_fail(VKF_ERROR_STATE, "vkf_cmd_timings: the list was created without VKF_CMD_TIMESTAMPS");
    if (!cmd->timings_valid) return vkf_fail(VKF_ERROR_STATE, "vkf_cmd_timings: the list has not been submitted");
    for (uint32_t i = 0; i < cmd->op_count && i < capacity; i++) out_ms[i] = cmd->timings[i];
    *out_count = cmd->op_count;
    return VKF_OK;
}

const char *vkf_cmd_op_name(const vkf_cmd *cmd, uint32_t index)
{
    return cmd && index < cmd->op_count ? cmd->labels[index] : NULL;
}

vkf_status vkf_cmd_gpu_ms(const vkf_cmd *cmd, double *out_ms)
{
    if (!cmd || !out_ms)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_cmd_gpu_ms: %s is NULL", cmd ? "out_ms" : "command list");
    *out_ms = 0;
    if (!(cmd->flags & VKF_CMD_TIMESTAMPS))
        return vkf_fail(VKF_ERROR_STATE, "vkf_cmd_gpu_ms: the list was created without VKF_CMD_TIMESTAMPS");
    if (!cmd->timings_valid) return vkf_fail(VKF_ERROR_STATE, "vkf_cmd_gpu_ms: the list has not been submitted");
    *out_ms = cmd->span_ms;
    return VKF_OK;
}

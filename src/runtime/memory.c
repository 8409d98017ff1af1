/* Device memory: tensors are sub-ranges of large blocks (one vkAllocateMemory and
 * one VkBuffer per block), first-fit with coalescing free lists. Uploads and
 * downloads write the mapped block directly where the device memory is
 * host-visible (CPUs, integrated GPUs), else go through a staging buffer. */
#include "runtime/runtime.h"

#include <stdlib.h>
#include <string.h>

#define STAGING_CHUNK (16ull << 20)
#define VKF_SMALL_STAGING (1ull << 20) /* transfers up to this size go through the context's kept buffer */

uint32_t vkf_dtype_size(vkf_dtype dtype)
{
    switch (dtype) {
    case VKF_DTYPE_F32: return 4;
    case VKF_DTYPE_I32: return 4;
    case VKF_DTYPE_F16: return 2;
    case VKF_DTYPE_I8: return 1;
    }
    return 0;
}

static uint32_t find_type(const vkf_context *ctx, uint32_t type_bits, uint32_t preferred)
{
    if (type_bits & (1u << preferred)) return preferred;
    VkMemoryPropertyFlags want = ctx->memory_properties.memoryTypes[preferred].propertyFlags;
    for (uint32_t i = 0; i < ctx->memory_properties.memoryTypeCount; i++)
        if ((type_bits & (1u << i)) && (ctx->memory_properties.memoryTypes[i].propertyFlags & want) == want) return i;
    return UINT32_MAX;
}

/* A buffer with its own memory; used for blocks and for the staging buffer. */
static vkf_status buffer_create(vkf_context *ctx, uint64_t size, uint32_t preferred_type, bool map,
                                VkBuffer *out_buffer, VkDeviceMemory *out_memory, void **out_mapped)
{
    *out_buffer = VK_NULL_HANDLE;
    *out_memory = VK_NULL_HANDLE;
    *out_mapped = NULL;
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkBuffer buffer;
    VkResult r = ctx->vk.vkCreateBuffer(ctx->device, &bi, NULL, &buffer);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkCreateBuffer");
    VkMemoryRequirements req;
    ctx->vk.vkGetBufferMemoryRequirements(ctx->device, buffer, &req);
    uint32_t type = find_type(ctx, req.memoryTypeBits, preferred_type);
    if (type == UINT32_MAX) {
        ctx->vk.vkDestroyBuffer(ctx->device, buffer, NULL);
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "no memory type fits a storage buffer on \"%s\"", ctx->info.name);
    }
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = type,
    };
    VkDeviceMemory memory;
    r = vkf_injected(ctx, "vkAllocateMemory");
    if (r == VK_SUCCESS) r = ctx->vk.vkAllocateMemory(ctx->device, &ai, NULL, &memory);
    if (r != VK_SUCCESS) {
        ctx->vk.vkDestroyBuffer(ctx->device, buffer, NULL);
        uint64_t heap = ctx->memory_properties.memoryHeaps[ctx->memory_properties.memoryTypes[type].heapIndex].size;
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            return vkf_fail(r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? VKF_ERROR_OUT_OF_DEVICE_MEMORY
                                                               : VKF_ERROR_OUT_OF_HOST_MEMORY,
                            "vkAllocateMemory of %llu bytes failed with %s (vkformer holds %llu bytes of the "
                            "%llu-byte heap)",
                            (unsigned long long)req.size, vkf_vk_result_name(r), (unsigned long long)ctx->allocated,
                            (unsigned long long)heap);
        return vkf_context_vk_fail(ctx, r, "vkAllocateMemory");
    }
    r = ctx->vk.vkBindBufferMemory(ctx->device, buffer, memory, 0);
    void *mapped = NULL;
    if (r == VK_SUCCESS && map) r = ctx->vk.vkMapMemory(ctx->device, memory, 0, VK_WHOLE_SIZE, 0, &mapped);
    if (r != VK_SUCCESS) {
        ctx->vk.vkDestroyBuffer(ctx->device, buffer, NULL);
        ctx->vk.vkFreeMemory(ctx->device, memory, NULL);
        return vkf_context_vk_fail(ctx, r, map ? "vkMapMemory" : "vkBindBufferMemory");
    }
    *out_buffer = buffer;
    *out_memory = memory;
    *out_mapped = mapped;
    return VKF_OK;
}

static void block_free(vkf_context *ctx, vkf_block *b)
{
    ctx->allocated -= b->size;
    if (b->buffer) ctx->vk.vkDestroyBuffer(ctx->device, b->buffer, NULL);
    if (b->memory) ctx->vk.vkFreeMemory(ctx->device, b->memory, NULL); /* unmaps */
    free(b->free);
    free(b);
}

static vkf_status block_create(vkf_context *ctx, uint64_t size, vkf_block **out_block)
{
    *out_block = NULL;
    vkf_block *b = calloc(1, sizeof *b);
    vkf_range *ranges = calloc(4, sizeof *ranges);
    if (!b || !ranges) {
        free(b);
        free(ranges);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a memory block");
    }
    vkf_status st = buffer_create(ctx, size, ctx->device_memory_type, ctx->direct_host_access, &b->buffer,
                                  &b->memory, &b->mapped);
    if (st != VKF_OK) {
        free(b);
        free(ranges);
        return st;
    }
    b->size = size;
    ctx->allocated += size;
    if (ctx->allocated > ctx->peak_allocated) ctx->peak_allocated = ctx->allocated;
    b->free = ranges;
    b->free_capacity = 4;
    b->free_count = 1;
    b->free[0] = (vkf_range){0, size};
    *out_block = b;
    return VKF_OK;
}

/* First fit inside one block; returns false if nothing fits. */
static bool block_take(vkf_block *b, uint64_t size, uint64_t *out_offset)
{
    for (uint32_t i = 0; i < b->free_count; i++) {
        if (b->free[i].size < size) continue;
        *out_offset = b->free[i].offset;
        b->free[i].offset += size;
        b->free[i].size -= size;
        if (b->free[i].size == 0) {
            memmove(&b->free[i], &b->free[i + 1], (b->free_count - i - 1) * sizeof *b->free);
            b->free_count--;
        }
        b->used += size;
        return true;
    }
    return false;
}

/* Returns a range to the free list, merging with its neighbours. */
static vkf_status block_give(vkf_block *b, uint64_t offset, uint64_t size)
{
    uint32_t i = 0;
    while (i < b->free_count && b->free[i].offset < offset) i++;
    bool merge_prev = i > 0 && b->free[i - 1].offset + b->free[i - 1].size == offset;
    bool merge_next = i < b->free_count && offset + size == b->free[i].offset;
    b->used -= size;
    if (merge_prev && merge_next) {
        b->free[i - 1].size += size + b->free[i].size;
        memmove(&b->free[i], &b->free[i + 1], (b->free_count - i - 1) * sizeof *b->free);
        b->free_count--;
    } else if (merge_prev) {
        b->free[i - 1].size += size;
    } else if (merge_next) {
        b->free[i].offset = offset;
        b->free[i].size += size;
    } else {
        if (b->free_count == b->free_capacity) {
            vkf_range *grown = realloc(b->free, 2 * b->free_capacity * sizeof *grown);
            if (!grown) return VKF_ERROR_OUT_OF_HOST_MEMORY; /* the range leaks inside the block */
            b->free = grown;
            b->free_capacity *= 2;
        }
        memmove(&b->free[i + 1], &b->free[i], (b->free_count - i) * sizeof *b->free);
        b->free[i] = (vkf_range){offset, size};
        b->free_count++;
    }
    return VKF_OK;
}

void vkf_memory_destroy_all(vkf_context *ctx)
{
    vkf_block *b = ctx->blocks;
    while (b) {
        vkf_block *next = b->next;
        block_free(ctx, b);
        b = next;
    }
    ctx->blocks = NULL;
}

vkf_status vkf_context_memory_usage(const vkf_context *ctx, uint64_t *out_allocated, uint64_t *out_used)
{
    if (!ctx) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_context_memory_usage: context is NULL");
    uint64_t allocated = 0, used = 0;
    for (const vkf_block *b = ctx->blocks; b; b = b->next) {
        allocated += b->size;
        used += b->used;
    }
    if (out_allocated) *out_allocated = allocated;
    if (out_used) *out_used = used;
    return VKF_OK;
}

vkf_status vkf_context_peak_memory(const vkf_context *ctx, uint64_t *out_bytes)
{
    if (!ctx || !out_bytes)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_context_peak_memory: %s is NULL", ctx ? "out_bytes" : "context");
    *out_bytes = ctx->peak_allocated;
    return VKF_OK;
}

vkf_status vkf_tensor_create(vkf_context *ctx, vkf_dtype dtype, uint32_t rank, const uint64_t *shape,
                             vkf_tensor **out_tensor)
{
    if (!out_tensor) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_tensor_create: out_tensor is NULL");
    *out_tensor = NULL;
    if (!ctx) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_tensor_create: context is NULL");
    if (ctx->lost) return vkf_fail(VKF_ERROR_DEVICE_LOST, "the device was lost; destroy and recreate the context");
    if (vkf_dtype_size(dtype) == 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_tensor_create: unknown dtype %d", (int)dtype);
    if (rank < 1 || rank > VKF_MAX_RANK)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_tensor_create: rank %u is outside 1..%d", rank, VKF_MAX_RANK);
    if (!shape) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_tensor_create: shape is NULL");
    uint64_t elements = 1;
    for (uint32_t i = 0; i < rank; i++) {
        if (shape[i] == 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_tensor_create: dimension %u is 0", i);
        if (shape[i] > (UINT64_MAX / 8) / elements)
            return vkf_fail(VKF_ERROR_TOO_LARGE, "vkf_tensor_create: the shape's element count overflows 64 bits");
        elements *= shape[i];
    }
    uint64_t bytes = elements * vkf_dtype_size(dtype);
    /* Bindings cover whole 32-bit words (I8 and F16 are read as packed words). */
    if (vkf_align_up(bytes, 4) > ctx->info.max_storage_buffer_range)
        return vkf_fail(VKF_ERROR_TOO_LARGE,
                        "tensor of %llu bytes exceeds the device's maxStorageBufferRange of %llu bytes "
                        "(one shader binding on \"%s\"); split it",
                        (unsigned long long)bytes, (unsigned long long)ctx->info.max_storage_buffer_range,
                        ctx->info.name);
    if (ctx->info.max_memory_allocation_size && bytes > ctx->info.max_memory_allocation_size)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "tensor of %llu bytes exceeds the device's maxMemoryAllocationSize of %llu",
                        (unsigned long long)bytes, (unsigned long long)ctx->info.max_memory_allocation_size);

    vkf_tensor *t = calloc(1, sizeof *t);
    if (!t) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a tensor");
    uint64_t size = vkf_align_up(bytes, ctx->alignment);
    vkf_block *block = NULL;
    uint64_t offset = 0;
    for (vkf_block *b = ctx->blocks; b && !block; b = b->next)
        if (block_take(b, size, &offset)) block = b;
    if (!block) {
        uint64_t block_size = size > ctx->block_size ? size : ctx->block_size;
        if (ctx->max_device_memory) {
            uint64_t left = ctx->max_device_memory > ctx->allocated ? ctx->max_device_memory - ctx->allocated : 0;
            if (size > left) {
                uint64_t used = 0;
                for (const vkf_block *b = ctx->blocks; b; b = b->next) used += b->used;
                free(t);
                uint64_t avail = ctx->max_device_memory - used;
                return vkf_fail(VKF_ERROR_OUT_OF_DEVICE_MEMORY,
                                "out of device memory under the %llu-byte cap (--max-device-memory): a tensor needs "
                                "%llu bytes, tensors hold %llu, %llu are available%s",
                                (unsigned long long)ctx->max_device_memory, (unsigned long long)bytes,
                                (unsigned long long)used, (unsigned long long)avail,
                                avail >= bytes ? " but not in one free range" : "");
            }
            if (block_size > left) block_size = left; /* a smaller block rather than none */
        }
        vkf_status st = block_create(ctx, block_size, &block);
        if (st != VKF_OK) {
            free(t);
            return st;
        }
        block->next = ctx->blocks;
        ctx->blocks = block;
        block_take(block, size, &offset);
    }
    t->ctx = ctx;
    t->block = block;
    t->offset = offset;
    t->bytes = bytes;
    t->dtype = dtype;
    t->rank = rank;
    t->elements = elements;
    for (uint32_t i = 0; i < rank; i++) t->shape[i] = shape[i];
    *out_tensor = t;
    return VKF_OK;
}

void vkf_tensor_destroy(vkf_tensor *t)
{
    if (!t) return;
    vkf_context *ctx = t->ctx;
    block_give(t->block, t->offset, vkf_align_up(t->bytes, ctx->alignment));
    /* Keep one empty block of the standard size for reuse; free the others, and
     * every empty block made larger for one big tensor. */
    if (t->block->used == 0) {
        uint32_t empty = 0;
        for (vkf_block *b = ctx->blocks; b; b = b->next) empty += b->used == 0 && b->size == ctx->block_size;
        if (empty > 1 || t->block->size != ctx->block_size) {
            ctx->vk.vkDeviceWaitIdle(ctx->device);
            vkf_block **link = &ctx->blocks;
            while (*link != t->block) link = &(*link)->next;
            *link = t->block->next;
            block_free(ctx, t->block);
        }
    }
    free(t);
}

uint64_t vkf_tensor_bytes(const vkf_tensor *t) { return t ? t->bytes : 0; }

static vkf_status check_transfer(const vkf_tensor *t, const void *host, uint64_t bytes, const char *fn)
{
    if (!t) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: tensor is NULL", fn);
    if (!host) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: host pointer is NULL", fn);
    if (bytes != t->bytes)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %llu bytes given, the tensor holds %llu", fn,
                        (unsigned long long)bytes, (unsigned long long)t->bytes);
    if (t->ctx->lost) return vkf_fail(VKF_ERROR_DEVICE_LOST, "the device was lost; destroy and recreate the context");
    return VKF_OK;
}

/* Copies between the tensor and host memory through a staging buffer, in chunks. */
static vkf_status staged_copy(vkf_tensor *t, void *host, uint64_t bytes, bool upload)
{
    vkf_context *ctx = t->ctx;
    uint64_t chunk = bytes < STAGING_CHUNK ? bytes : STAGING_CHUNK;
    VkBuffer staging;
    VkDeviceMemory memory;
    void *mapped;
    /* small transfers (every decode step has some): the context's kept buffer,
     * so that they allocate no memory; larger ones a buffer of their own */
    bool kept = bytes <= VKF_SMALL_STAGING;
    if (kept && !ctx->small_staging)
        VKF_TRY(buffer_create(ctx, VKF_SMALL_STAGING, ctx->staging_memory_type, /*map=*/true, &ctx->small_staging,
                              &ctx->small_staging_memory, &ctx->small_staging_mapped));
    if (kept) staging = ctx->small_staging, memory = ctx->small_staging_memory, mapped = ctx->small_staging_mapped;
    else VKF_TRY(buffer_create(ctx, chunk, ctx->staging_memory_type, /*map=*/true, &staging, &memory, &mapped));
    vkf_status st = VKF_OK;
    for (uint64_t done = 0; done < bytes && st == VKF_OK; done += chunk) {
        uint64_t n = bytes - done < chunk ? bytes - done : chunk;
        if (upload) memcpy(mapped, (const char *)host + done, n);
        VkCommandBuffer cb;
        st = vkf_oneshot_begin(ctx, &cb);
        if (st != VKF_OK) break;
        /* Earlier shader reads/writes of the tensor before the transfer touches it. */
        VkMemoryBarrier before = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT,
            .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        };
        ctx->vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1,
                                     &before, 0, NULL, 0, NULL);
        VkBufferCopy region = {
            .srcOffset = upload ? 0 : t->offset + done,
            .dstOffset = upload ? t->offset + done : 0,
            .size = n,
        };
        if (upload) ctx->vk.vkCmdCopyBuffer(cb, staging, t->block->buffer, 1, &region);
        else ctx->vk.vkCmdCopyBuffer(cb, t->block->buffer, staging, 1, &region);
        /* The copy before later shaders (upload) or before the host reads (download). */
        VkMemoryBarrier after = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
            .dstAccessMask = upload ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT : VK_ACCESS_HOST_READ_BIT,
        };
        ctx->vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                                     upload ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT : VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                                     &after, 0, NULL, 0, NULL);
        st = vkf_oneshot_end(ctx, cb);
        if (st == VKF_OK && !upload) memcpy((char *)host + done, mapped, n);
    }
    if (!kept) {
        ctx->vk.vkDestroyBuffer(ctx->device, staging, NULL);
        ctx->vk.vkFreeMemory(ctx->device, memory, NULL);
    }
    return st;
}

vkf_status vkf_tensor_upload(vkf_tensor *t, const void *src, uint64_t bytes)
{
    VKF_TRY(check_transfer(t, src, bytes, "vkf_tensor_upload"));
    if (t->block->mapped) {
        memcpy((char *)t->block->mapped + t->offset, src, bytes);
        return VKF_OK;
    }
    return staged_copy(t, (void *)src, bytes, /*upload=*/true);
}

vkf_status vkf_tensor_download(vkf_tensor *t, void *dst, uint64_t bytes)
{
    VKF_TRY(check_transfer(t, dst, bytes, "vkf_tensor_download"));
    if (t->block->mapped) {
        memcpy(dst, (const char *)t->block->mapped + t->offset, bytes);
        return VKF_OK;
    }
    return staged_copy(t, dst, bytes, /*upload=*/false);
}

bool vkf_tensors_overlap(const vkf_tensor *a, const vkf_tensor *b)
{
    return a && b && a->block == b->block && a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

vkf_status vkf_upload_floats(vkf_tensor *t, const float *data, uint64_t count)
{
    if (!t || (t->dtype != VKF_DTYPE_F32 && t->dtype != VKF_DTYPE_F16))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_upload_floats: an F32 or F16 tensor is needed");
    if (t->dtype == VKF_DTYPE_F32) return vkf_tensor_upload(t, data, count * sizeof *data);
    uint16_t *h = malloc(count * sizeof *h);
    if (!h) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory converting to F16");
    for (uint64_t e = 0; e < count; e++) h[e] = vkf_half_from_float(data[e]);
    vkf_status st = vkf_tensor_upload(t, h, count * sizeof *h);
    free(h);
    return st;
}

vkf_status vkf_download_floats(vkf_tensor *t, float *data, uint64_t count)
{
    if (!t || (t->dtype != VKF_DTYPE_F32 && t->dtype != VKF_DTYPE_F16))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_download_floats: an F32 or F16 tensor is needed");
    if (t->dtype == VKF_DTYPE_F32) return vkf_tensor_download(t, data, count * sizeof *data);
    uint16_t *h = malloc(count * sizeof *h);
    if (!h) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory converting from F16");
    vkf_status st = vkf_tensor_download(t, h, count * sizeof *h);
    for (uint64_t e = 0; st == VKF_OK && e < count; e++) data[e] = vkf_float_from_half(h[e]);
    free(h);
    return st;
}

/* The pipeline cache on disk: one file per device (vendor, device, driver version
 * and the driver's pipelineCacheUUID in its name) in the cache directory, read
 * when a context is created and written back when it is destroyed, if compiling
 * pipelines changed it. The file's Vulkan header is checked before the driver
 * sees it; a bad or foreign file is ignored with an info message. Also the
 * directory and atomic file writes that tune files share. */
#include "runtime/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Files larger than this are not caches vkformer wrote (a few hundred pipelines). */
#define VKF_CACHE_MAX_BYTES (256u << 20)

void vkf_cache_dir_resolve(vkf_context *ctx, const char *option)
{
    ctx->cache_dir[0] = '\0';
    const char *env = getenv("VKFORMER_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n = -1;
    if (option && *option) n = snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s", option);
    else if (env && *env) n = snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s", env);
    else if (xdg && *xdg) n = snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s/vkformer", xdg);
    else if (home && *home) n = snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s/.cache/vkformer", home);
    if (n < 0 || (size_t)n >= sizeof ctx->cache_dir) {
        if (n >= 0) vkf_log(ctx, VKF_LOG_INFO, "cache directory name is too long; no pipeline cache or tune file");
        ctx->cache_dir[0] = '\0';
    }
}

bool vkf_cache_file_path(const vkf_context *ctx, const char *prefix, const char *suffix, bool with_uuid, char *out,
                         size_t capacity)
{
    if (!ctx->cache_dir[0]) return false;
    char uuid[2 * VK_UUID_SIZE + 2] = "";
    if (with_uuid) {
        VkPhysicalDeviceProperties props;
        vkGetPhysicalDeviceProperties(ctx->physical, &props);
        uuid[0] = '-';
        for (unsigned i = 0; i < VK_UUID_SIZE; i++) snprintf(uuid + 1 + 2 * i, 3, "%02x", props.pipelineCacheUUID[i]);
    }
    int n = snprintf(out, capacity, "%s/%s-%04x-%04x-%08x%s%s", ctx->cache_dir, prefix, ctx->info.vendor_id,
                     ctx->info.device_id, ctx->info.driver_version, uuid, suffix);
    return n > 0 && (size_t)n < capacity;
}

/* mkdir -p of the directory part of path. */
static bool make_parent_dirs(const char *path, char *error, size_t error_capacity)
{
    char dir[1024];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        snprintf(error, error_capacity, "path too long");
        return false;
    }
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return true;
    *slash = '\0';
    for (char *p = dir + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
                snprintf(error, error_capacity, "cannot create directory %s: %s", dir, strerror(errno));
                return false;
            }
            *p = saved;
            if (saved == '\0') break;
        }
    }
    return true;
}

bool vkf_cache_write_file(const char *path, const void *data, size_t bytes, char *error, size_t error_capacity)
{
    static atomic_uint counter;
    if (!make_parent_dirs(path, error, error_capacity)) return false;
    char tmp[1100];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1)) >=
        (int)sizeof tmp) {
        snprintf(error, error_capacity, "path too long: %s", path);
        return false;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(error, error_capacity, "cannot create %s: %s", tmp, strerror(errno));
        return false;
    }
    const unsigned char *p = data;
    size_t left = bytes;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(error, error_capacity, "cannot write %s: %s", tmp, w < 0 ? strerror(errno) : "no progress");
            close(fd);
            unlink(tmp);
            return false;
        }
        p += w, left -= (size_t)w;
    }
    if (close(fd) != 0) {
        snprintf(error, error_capacity, "cannot write %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return false;
    }
    if (rename(tmp, path) != 0) {
        snprintf(error, error_capacity, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        return false;
    }
    return true;
}

static uint64_t fnv1a(const void *data, size_t bytes)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads the whole file into *out (malloc'ed); NULL with *out_bytes 0 when it does
 * not exist. Other failures are logged. */
static void read_file(const vkf_context *ctx, const char *path, unsigned char **out, size_t *out_bytes)
{
    *out = NULL;
    *out_bytes = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno != ENOENT) vkf_log(ctx, VKF_LOG_INFO, "pipeline cache %s not read: %s", path, strerror(errno));
        return;
    }
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            if (cap > VKF_CACHE_MAX_BYTES) {
                vkf_log(ctx, VKF_LOG_INFO, "pipeline cache %s ignored: larger than %u MiB", path,
                        VKF_CACHE_MAX_BYTES >> 20);
                free(buf);
                fclose(f);
                return;
            }
            unsigned char *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                fclose(f);
                return;
            }
            buf = grown;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) break;
    }
    bool error = ferror(f);
    fclose(f);
    if (error) {
        vkf_log(ctx, VKF_LOG_INFO, "pipeline cache %s not read: I/O error", path);
        free(buf);
        return;
    }
    *out = buf;
    *out_bytes = len;
}

/* Why the data is not a cache of this device (a static string), or NULL. The
 * header is VkPipelineCacheHeaderVersionOne: length, version, vendor, device, UUID. */
static const char *header_problem(const VkPhysicalDeviceProperties *props, const unsigned char *data, size_t bytes)
{
    if (bytes < 16 + VK_UUID_SIZE) return "shorter than a Vulkan pipeline-cache header";
    uint32_t header_size = le32(data), version = le32(data + 4);
    if (header_size < 16 + VK_UUID_SIZE || header_size > bytes) return "header length field is wrong";
    if (version != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) return "unknown header version";
    if (le32(data + 8) != props->vendorID) return "written for another vendor";
    if (le32(data + 12) != props->deviceID) return "written for another device";
    if (memcmp(data + 16, props->pipelineCacheUUID, VK_UUID_SIZE) != 0)
        return "written by another driver build (pipelineCacheUUID differs)";
    return NULL;
}

vkf_status vkf_pipeline_cache_create(vkf_context *ctx)
{
    unsigned char *data = NULL;
    size_t bytes = 0;
    char path[1024];
    if (ctx->pipeline_cache_on && vkf_cache_file_path(ctx, "pipelines", ".bin", /*with_uuid=*/true, path, sizeof path)) {
        read_file(ctx, path, &data, &bytes);
        if (data) {
            VkPhysicalDeviceProperties props;
            vkGetPhysicalDeviceProperties(ctx->physical, &props);
            const char *problem = header_problem(&props, data, bytes);
            if (problem) {
                vkf_log(ctx, VKF_LOG_INFO, "pipeline cache %s ignored: %s", path, problem);
                free(data);
                data = NULL;
                bytes = 0;
            }
        }
    }
    VkPipelineCacheCreateInfo info = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = bytes,
        .pInitialData = data,
    };
    VkResult r = ctx->vk.vkCreatePipelineCache(ctx->device, &info, NULL, &ctx->pipeline_cache);
    if (r != VK_SUCCESS && data) {
        /* Drivers should ignore data they cannot use; one that fails instead gets an empty cache. */
        vkf_log(ctx, VKF_LOG_INFO, "pipeline cache %s ignored: the driver refused it (%s)", path,
                vkf_vk_result_name(r));
        free(data);
        data = NULL;
        bytes = 0;
        info.initialDataSize = 0;
        info.pInitialData = NULL;
        r = ctx->vk.vkCreatePipelineCache(ctx->device, &info, NULL, &ctx->pipeline_cache);
    }
    if (data) {
        ctx->pipeline_cache_loaded_hash = fnv1a(data, bytes);
        ctx->pipeline_cache_loaded_bytes = bytes;
    }
    free(data);
    if (r != VK_SUCCESS) return vkf_context_vk_fail(ctx, r, "vkCreatePipelineCache");
    return VKF_OK;
}

void vkf_pipeline_cache_save(vkf_context *ctx)
{
    char path[1024];
    if (!ctx->pipeline_cache_on || !ctx->pipeline_cache || ctx->lost ||
        !vkf_cache_file_path(ctx, "pipelines", ".bin", /*with_uuid=*/true, path, sizeof path))
        return;
    size_t bytes = 0;
    VkResult r = ctx->vk.vkGetPipelineCacheData(ctx->device, ctx->pipeline_cache, &bytes, NULL);
    if (r != VK_SUCCESS || bytes == 0 || bytes > VKF_CACHE_MAX_BYTES) {
        if (r != VK_SUCCESS) vkf_log(ctx, VKF_LOG_INFO, "pipeline cache not saved: vkGetPipelineCacheData returned %s",
                                     vkf_vk_result_name(r));
        return;
    }
    void *data = malloc(bytes);
    if (!data) return;
    r = ctx->vk.vkGetPipelineCacheData(ctx->device, ctx->pipeline_cache, &bytes, data);
    if (r != VK_SUCCESS) {
        /* VK_INCOMPLETE: the cache grew between the calls (not on this thread); next time. */
        vkf_log(ctx, VKF_LOG_INFO, "pipeline cache not saved: vkGetPipelineCacheData returned %s",
                vkf_vk_result_name(r));
        free(data);
        return;
    }
    /* Mesa 26.2 lavapipe hands back 20 bytes whose header claims 32: a file of
     * that would be refused at the next start anyway. */
    const unsigned char *head = data;
    if (bytes < 16 + VK_UUID_SIZE || le32(head) < 16 + VK_UUID_SIZE || le32(head) > bytes) {
        vkf_log(ctx, VKF_LOG_INFO, "pipeline cache not saved: the driver's data is malformed (%zu bytes, header "
                "length %u)", bytes, bytes >= 4 ? le32(head) : 0);
        free(data);
        return;
    }
    bool changed = bytes != ctx->pipeline_cache_loaded_bytes || fnv1a(data, bytes) != ctx->pipeline_cache_loaded_hash;
    /* SwiftShader 153 hands back its header followed by the initial data verbatim:
     * nothing new, and saving it would grow the file by a header per run. */
    uint32_t header = bytes >= 4 ? le32(data) : 0;
    if (changed && ctx->pipeline_cache_loaded_bytes && header <= bytes &&
        bytes - header == ctx->pipeline_cache_loaded_bytes &&
        fnv1a((const unsigned char *)data + header, bytes - header) == ctx->pipeline_cache_loaded_hash)
        changed = false;
    char error[1300];
    if (changed && !vkf_cache_write_file(path, data, bytes, error, sizeof error))
        vkf_log(ctx, VKF_LOG_INFO, "pipeline cache not saved: %s", error);
    free(data);
}

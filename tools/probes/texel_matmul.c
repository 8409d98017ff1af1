/* Probe (not part of the library or its tests): matmul_subgroup's vec4 path
 * (texel_matmul.comp: 64x128 tiles, 32 rows x 4 columns per lane, subgroups of 8)
 * with A and B read from storage buffers ("ss"), B from a uniform texel buffer
 * ("st") or both ("tt"), timed on whatever driver VK_ICD_FILENAMES names: the
 * measurement behind docs/performance.md's "Where the time goes: the profile".
 * Wall-clock time of a submit and its fence (best of REPEAT after one warm-up); 64
 * sampled outputs against a double-precision host sum. M must be a multiple of 64,
 * N of 128 and K of 4 (the probe does no edge handling).
 *
 *   cd tools/probes
 *   for v in "0 0 ss" "0 1 st" "1 1 tt"; do set -- $v
 *       glslc --target-env=vulkan1.1 -DA_TEX=$1 -DB_TEX=$2 -O texel_matmul.comp -o mm_$3.spv; done
 *   cc -O2 -o /tmp/texel_matmul texel_matmul.c -lvulkan
 *   VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json /tmp/texel_matmul 1024 1024 1024 3 ss st tt ss st
 */
#include <vulkan/vulkan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define CK(x) do { VkResult r_ = (x); if (r_) { fprintf(stderr, "%s: %d\n", #x, r_); exit(1); } } while (0)
static VkDevice dev; static VkPhysicalDevice pd;
static uint32_t memtype(uint32_t bits) {
    VkPhysicalDeviceMemoryProperties mp; vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)) == (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)) return i;
    exit(2);
}
typedef struct { VkBuffer b; VkDeviceMemory m; void *p; VkBufferView v; } buf;
static buf mkbuf(size_t bytes) {
    buf r = {0};
    VkBufferCreateInfo bi = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, 0, 0, bytes,
        VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT, 0, 0, 0};
    CK(vkCreateBuffer(dev, &bi, 0, &r.b));
    VkMemoryRequirements mr; vkGetBufferMemoryRequirements(dev, r.b, &mr);
    VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, 0, mr.size, memtype(mr.memoryTypeBits)};
    CK(vkAllocateMemory(dev, &ai, 0, &r.m)); CK(vkBindBufferMemory(dev, r.b, r.m, 0));
    CK(vkMapMemory(dev, r.m, 0, bytes, 0, &r.p));
    VkBufferViewCreateInfo vi = {VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO, 0, 0, r.b, VK_FORMAT_R32G32B32A32_SFLOAT, 0, bytes};
    CK(vkCreateBufferView(dev, &vi, 0, &r.v));
    return r;
}
static void *readfile(const char *p, size_t *n) { FILE *f = fopen(p, "rb"); if (!f) { fprintf(stderr, "texel_matmul: cannot open %s\n", p); exit(3); } fseek(f, 0, SEEK_END); *n = ftell(f); rewind(f); void *d = malloc(*n); if (!d || fread(d, 1, *n, f) != *n) { fprintf(stderr, "texel_matmul: cannot read %s\n", p); exit(3); } fclose(f); return d; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
    if (argc < 6) { fprintf(stderr, "usage: texel_matmul M N K REPEAT ss|st|tt...\n"); return 2; }
    uint32_t M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]); int reps = atoi(argv[4]);
    if (!M || !N || !K || M % 64 || N % 128 || K % 4 || reps < 1) {
        fprintf(stderr, "texel_matmul: M a multiple of 64, N of 128, K of 4, REPEAT >= 1\n");
        return 2;
    }
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, 0, "p", 0, "p", 0, VK_API_VERSION_1_1};
    VkInstanceCreateInfo ii = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, 0, 0, &app};
    VkInstance inst; CK(vkCreateInstance(&ii, 0, &inst));
    uint32_t n = 1; vkEnumeratePhysicalDevices(inst, &n, &pd);
    float pri = 1; VkDeviceQueueCreateInfo qi = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, 0, 0, 0, 1, &pri};
    VkDeviceCreateInfo di = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, 0, 0, 1, &qi};
    CK(vkCreateDevice(pd, &di, 0, &dev)); VkQueue q; vkGetDeviceQueue(dev, 0, 0, &q);
    buf A = mkbuf((size_t)M * K * 4), B = mkbuf((size_t)N * K * 4), C = mkbuf((size_t)M * N * 4);
    float *a = A.p, *b = B.p;
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)((i * 7919) % 201) / 100.0f - 1.0f;
    for (size_t i = 0; i < (size_t)N * K; i++) b[i] = (float)((i * 104729) % 199) / 100.0f - 1.0f;
    VkDescriptorPoolSize ps[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 16}, {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, 16}};
    VkDescriptorPoolCreateInfo pci = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, 0, 0, 8, 2, ps};
    VkDescriptorPool pool; CK(vkCreateDescriptorPool(dev, &pci, 0, &pool));
    VkCommandPoolCreateInfo cpi = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, 0, 0, 0};
    VkCommandPool cp; CK(vkCreateCommandPool(dev, &cpi, 0, &cp));
    for (int vi = 5; vi < argc; vi++) {
        const char *name = argv[vi]; int atex = name[0] == 't', btex = name[1] == 't';
        char path[64]; snprintf(path, sizeof path, "mm_%s.spv", name);
        size_t sz; void *code = readfile(path, &sz);
        VkShaderModuleCreateInfo smi = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, 0, 0, sz, code};
        VkShaderModule sm; CK(vkCreateShaderModule(dev, &smi, 0, &sm));
        VkDescriptorSetLayoutBinding lb[3] = {
            {0, atex ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT},
            {1, btex ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT},
            {2, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT}};
        VkDescriptorSetLayoutCreateInfo li = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, 0, 0, 3, lb};
        VkDescriptorSetLayout sl; CK(vkCreateDescriptorSetLayout(dev, &li, 0, &sl));
        VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 12};
        VkPipelineLayoutCreateInfo pli = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, 0, 0, 1, &sl, 1, &pr};
        VkPipelineLayout pl; CK(vkCreatePipelineLayout(dev, &pli, 0, &pl));
        VkComputePipelineCreateInfo cpci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, 0, 0,
            {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, 0, 0, VK_SHADER_STAGE_COMPUTE_BIT, sm, "main"}, pl};
        VkPipeline pipe; CK(vkCreateComputePipelines(dev, 0, 1, &cpci, 0, &pipe));
        VkDescriptorSetAllocateInfo dai = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, 0, pool, 1, &sl};
        VkDescriptorSet ds; CK(vkAllocateDescriptorSets(dev, &dai, &ds));
        VkDescriptorBufferInfo bia = {A.b, 0, VK_WHOLE_SIZE}, bib = {B.b, 0, VK_WHOLE_SIZE}, bic = {C.b, 0, VK_WHOLE_SIZE};
        VkWriteDescriptorSet w[3] = {
            {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, 0, ds, 0, 0, 1, lb[0].descriptorType, 0, atex ? 0 : &bia, atex ? &A.v : 0},
            {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, 0, ds, 1, 0, 1, lb[1].descriptorType, 0, btex ? 0 : &bib, btex ? &B.v : 0},
            {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, 0, ds, 2, 0, 1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 0, &bic, 0}};
        vkUpdateDescriptorSets(dev, 3, w, 0, 0);
        VkCommandBufferAllocateInfo cai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, 0, cp, 0, 1};
        VkCommandBuffer cb; CK(vkAllocateCommandBuffers(dev, &cai, &cb));
        VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        CK(vkBeginCommandBuffer(cb, &bi));
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
        vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, 0);
        uint32_t pc[3] = {M, N, K}; vkCmdPushConstants(cb, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 12, pc);
        vkCmdDispatch(cb, (N + 127) / 128, (M + 63) / 64, 1);
        CK(vkEndCommandBuffer(cb));
        VkFenceCreateInfo fi = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO}; VkFence f; CK(vkCreateFence(dev, &fi, 0, &f));
        double best = 1e9;
        for (int r = 0; r <= reps; r++) {
            memset(C.p, 0, (size_t)M * N * 4);
            VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, 0, 0, 0, 0, 1, &cb};
            double t0 = now(); CK(vkQueueSubmit(q, 1, &si, f)); CK(vkWaitForFences(dev, 1, &f, 1, ~0ull)); double t = now() - t0;
            vkResetFences(dev, 1, &f);
            if (r && t < best) best = t;
        }
        double err = 0; float *c = C.p;
        for (int s = 0; s < 64; s++) {
            uint32_t i = (s * 7777u) % M, j = (s * 3331u) % N; double ref = 0;
            for (uint32_t kk = 0; kk < K; kk++) ref += (double)a[(size_t)i * K + kk] * b[(size_t)j * K + kk];
            double e = c[(size_t)i * N + j] - ref; if (e < 0) e = -e; if (e > err) err = e;
        }
        printf("%s %ux%ux%u: %.2f ms, %.1f GFLOP/s, max err %.2g\n", name, M, N, K, best * 1e3, 2.0 * M * N * K / best / 1e9, err);
    }
    return 0;
}

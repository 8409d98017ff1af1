/* vkformer info: every Vulkan device, its limits and features, and the tiles in use. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


static const char *type_name(vkf_device_type t)
{
    switch (t) {
    case VKF_DEVICE_INTEGRATED_GPU: return "integrated-gpu";
    case VKF_DEVICE_DISCRETE_GPU: return "discrete-gpu";
    case VKF_DEVICE_VIRTUAL_GPU: return "virtual-gpu";
    case VKF_DEVICE_CPU: return "cpu";
    default: return "other";
    }
}

static void print_device_json(const vkf_device_info *d, bool is_default)
{
    printf("{\"index\":%u,\"name\":", d->index);
    print_json_string(d->name);
    printf(",\"type\":\"%s\",\"default\":%s,\"vendor_id\":%u,\"device_id\":%u,\"api_version\":\"%u.%u.%u\","
           "\"driver_version\":%u,\"driver_name\":",
           type_name(d->type), is_default ? "true" : "false", d->vendor_id, d->device_id, d->api_version >> 22,
           (d->api_version >> 12) & 0x3ff, d->api_version & 0xfff, d->driver_version);
    print_json_string(d->driver_name);
    printf(",\"driver_info\":");
    print_json_string(d->driver_info);
    printf(",\"subgroup_size\":%u,\"subgroup_shuffle\":%s,\"max_shared_memory\":%u,\"max_workgroup_invocations\":%u,"
           "\"max_workgroup_size\":[%u,%u,%u],\"max_workgroup_count\":[%u,%u,%u],\"max_push_constants\":%u,"
           "\"storage_16bit\":%s,\"float16\":%s,\"int8\":%s,\"cooperative_matrix\":%s,\"timestamps\":%s,"
           "\"timestamp_period_ns\":%g,\"max_storage_buffer_range\":%llu,\"max_memory_allocation_size\":%llu,"
           "\"unified_memory\":%s,\"heaps\":[",
           d->subgroup_size, d->subgroup_shuffle ? "true" : "false", d->max_shared_memory, d->max_workgroup_invocations,
           d->max_workgroup_size[0],
           d->max_workgroup_size[1], d->max_workgroup_size[2], d->max_workgroup_count[0], d->max_workgroup_count[1],
           d->max_workgroup_count[2], d->max_push_constants, d->storage_16bit ? "true" : "false",
           d->float16 ? "true" : "false", d->int8 ? "true" : "false", d->cooperative_matrix ? "true" : "false",
           d->timestamps ? "true" : "false", d->timestamp_period_ns, (unsigned long long)d->max_storage_buffer_range,
           (unsigned long long)d->max_memory_allocation_size, d->unified_memory ? "true" : "false");
    for (uint32_t h = 0; h < d->heap_count; h++)
        printf("%s{\"size\":%llu,\"device_local\":%s}", h ? "," : "", (unsigned long long)d->heaps[h].size,
               d->heaps[h].device_local ? "true" : "false");
    printf("],\"coopmat_shapes\":[");
    for (uint32_t i = 0; i < d->coopmat_shape_count; i++) {
        const vkf_coopmat_shape *c = &d->coopmat_shapes[i];
        printf("%s{\"m\":%u,\"n\":%u,\"k\":%u,\"a\":\"%s\",\"b\":\"%s\",\"c\":\"%s\",\"result\":\"%s\","
               "\"saturating\":%s,\"scope\":\"%s\"}",
               i ? "," : "", c->m, c->n, c->k, vkf_component_name(c->a), vkf_component_name(c->b),
               vkf_component_name(c->c), vkf_component_name(c->result), c->saturating ? "true" : "false",
               c->subgroup_scope ? "subgroup" : "other");
    }
    printf("],\"cooperative_matrix2\":%s,\"coopmat2_granularity\":[%u,%u,%u],\"coopmat2_max_dimension\":%u}",
           d->cooperative_matrix2 ? "true" : "false", d->coopmat2_granularity[0], d->coopmat2_granularity[1],
           d->coopmat2_granularity[2], d->coopmat2_max_dimension);
}

static void print_device_text(const vkf_device_info *d, bool is_default)
{
    printf("device %u: %s%s\n", d->index, d->name, is_default ? "   [default]" : "");
    printf("  type                        %s\n", type_name(d->type));
    printf("  vendor / device id          0x%04x / 0x%04x\n", d->vendor_id, d->device_id);
    printf("  Vulkan                      %u.%u.%u\n", d->api_version >> 22, (d->api_version >> 12) & 0x3ff,
           d->api_version & 0xfff);
    printf("  driver                      %s %s (version 0x%x)\n", d->driver_name, d->driver_info, d->driver_version);
    printf("  subgroup size               %u%s\n", d->subgroup_size, d->subgroup_shuffle ? " (shuffles)" : "");
    printf("  shared memory / workgroup   %u bytes\n", d->max_shared_memory);
    printf("  workgroup invocations       %u (size %u x %u x %u)\n", d->max_workgroup_invocations,
           d->max_workgroup_size[0], d->max_workgroup_size[1], d->max_workgroup_size[2]);
    printf("  workgroup count             %u x %u x %u\n", d->max_workgroup_count[0], d->max_workgroup_count[1],
           d->max_workgroup_count[2]);
    printf("  push constants              %u bytes\n", d->max_push_constants);
    printf("  16-bit storage              %s\n", d->storage_16bit ? "yes" : "no");
    printf("  float16 / int8 arithmetic   %s / %s\n", d->float16 ? "yes" : "no", d->int8 ? "yes" : "no");
    printf("  VK_KHR_cooperative_matrix   %s\n", d->cooperative_matrix ? "yes" : "no");
    for (uint32_t i = 0; i < d->coopmat_shape_count; i++) {
        const vkf_coopmat_shape *c = &d->coopmat_shapes[i];
        printf("    %2ux%2ux%2u  %s x %s + %s -> %s%s%s\n", c->m, c->n, c->k, vkf_component_name(c->a),
               vkf_component_name(c->b), vkf_component_name(c->c), vkf_component_name(c->result),
               c->saturating ? ", saturating" : "", c->subgroup_scope ? "" : ", not subgroup scope");
    }
    if (d->cooperative_matrix2)
        printf("  VK_NV_cooperative_matrix2   yes (f16 x f16 -> f32, granularity %u x %u x %u, up to %u)\n",
               d->coopmat2_granularity[0], d->coopmat2_granularity[1], d->coopmat2_granularity[2],
               d->coopmat2_max_dimension);
    else
        printf("  VK_NV_cooperative_matrix2   no\n");
    printf("  timestamps                  %s (%g ns per tick)\n", d->timestamps ? "yes" : "no", d->timestamp_period_ns);
    printf("  maxStorageBufferRange       %llu bytes\n", (unsigned long long)d->max_storage_buffer_range);
    printf("  maxMemoryAllocationSize     %llu bytes\n", (unsigned long long)d->max_memory_allocation_size);
    printf("  host writes device memory   %s\n", d->unified_memory ? "yes (no staging)" : "no (staging copies)");
    for (uint32_t h = 0; h < d->heap_count; h++)
        printf("  heap %u                      %llu MiB%s\n", h, (unsigned long long)(d->heaps[h].size >> 20),
               d->heaps[h].device_local ? " device-local" : "");
}

/* ,"tuning":{...}: where the default device's kernel tiles came from and what they are. */
static void print_tuning_json(const vkf_context *ctx)
{
    const char *kernel;
    uint32_t mm[6], head_dim, at[5];
    vkf_tune_current(ctx, &kernel, mm, &head_dim, at);
    char path[1024];
    bool has_path = vkf_tune_file_path(ctx, path, sizeof path) == VKF_OK;
    printf(",\"tuning\":{\"source\":\"%s\",\"file\":", vkf_tune_from_file(ctx) ? "file" : "built-in");
    if (has_path) print_json_string(path);
    else printf("null");
    printf(",\"matmul\":{\"kernel\":\"%s\",\"workgroup\":%u,\"bm\":%u,\"bn\":%u,\"bk\":%u,\"tm\":%u,\"tn\":%u}",
           kernel, mm[0], mm[1], mm[2], mm[3], mm[4], mm[5]);
    if (head_dim)
        printf(",\"attention\":{\"head_dim\":%u,\"workgroup\":%u,\"bq\":%u,\"bk\":%u,\"td\":%u,\"tq\":%u,\"lanes\":%d}",
               head_dim, at[0], at[1], at[2], at[3], at[4], attention_lanes(ctx, head_dim));
    else printf(",\"attention\":null");
    printf("}");
}

static int run_info(const options *o)
{
    uint32_t count = 0;
    vkf_status st = vkf_devices_list(NULL, 0, &count);
    if (st != VKF_OK) return fail(st);
    if (count == 0) {
        fprintf(stderr, "vkformer: no Vulkan device found (is a driver installed? VK_ICD_FILENAMES may point to a missing file)\n");
        return EXIT_NO_DEVICE;
    }
    vkf_device_info *infos = xmalloc(count * sizeof *infos);
    st = vkf_devices_list(infos, count, &count);
    if (st != VKF_OK) {
        free(infos);
        return fail(st);
    }
    /* The device a command would run on, chosen as every other command does. */
    vkf_context *ctx;
    st = open_context(o, &ctx);
    if (st != VKF_OK) {
        free(infos);
        return fail(st);
    }
    vkf_device_info chosen;
    vkf_context_device_info(ctx, &chosen);
    if (o->json) {
        jsonl_begin("info");
        printf(",\"default\":%u,\"devices\":[", chosen.index);
        for (uint32_t i = 0; i < count; i++) {
            if (i) putchar(',');
            print_device_json(&infos[i], i == chosen.index);
        }
        printf("]");
        print_tuning_json(ctx);
        printf(",\"coopmat_in_use\":%s,\"coopmat2_in_use\":%s", chosen.coopmat_in_use ? "true" : "false",
               chosen.coopmat2_in_use ? "true" : "false");
        jsonl_end(&chosen); /* "device": the chosen one */
    } else {
        printf("vkformer %s, %u Vulkan device%s\n", vkf_version_string(), count, count == 1 ? "" : "s");
        for (uint32_t i = 0; i < count; i++) print_device_text(&infos[i], i == chosen.index);
        printf("device %u runs cooperative-matrix kernels: %s\n", chosen.index,
               chosen.coopmat2_in_use ? "yes (KHR and NV2)" : chosen.coopmat_in_use ? "yes (KHR)" : "no");
    }
    free(infos);
    return close_context(ctx, 0);
}

int cmd_info(int argc, char **argv)
{
    static const cli_option table[] = {
        {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line: every device, the tiles in use (docs/json.md)", NULL},
        CLI_COMMON_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {"info", "[--json] [--device D]",
                                    "every Vulkan device: limits, features, memory heaps, cooperative-matrix shapes;\n"
                                    "the device that commands run on is marked [default]", table};
    options o = {0};
    int code = cli_parse(&cmd, argc, argv, &o);
    if (code < 0) code = cli_max_args(&o, 0);
    return code >= 0 ? code : run_info(&o);
}

/* vkformer bench matmul: GPU time of C = A·Bᵀ (timestamp queries). */
#include "cli.h"
#include "reference.h" /* the tool's host reference (src/reference), not the library */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* An F16 tensor (rows, cols) from data, which is rounded in place to what the GPU reads. */
static vkf_status tensor_from_f16(vkf_context *ctx, float *data, uint64_t rows, uint64_t cols, vkf_tensor **out)
{
    uint64_t shape[2] = {rows, cols};
    vkf_status st = vkf_tensor_create(ctx, VKF_DTYPE_F16, 2, shape, out);
    if (st != VKF_OK || !data) return st;
    size_t n = (size_t)rows * cols;
    uint16_t *h = xmalloc(n * 2);
    for (size_t e = 0; e < n; e++) data[e] = ref_f16_to_f32(h[e] = ref_f32_to_f16(data[e]));
    st = vkf_tensor_upload(*out, h, n * 2);
    free(h);
    if (st != VKF_OK) {
        vkf_tensor_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* bench matmul --dtype: the storage of A and C, and of B. */
typedef enum bench_dtype { BENCH_F32, BENCH_F16, BENCH_I8W, BENCH_I8W_F16 } bench_dtype;
static const char *const bench_dtype_names[] = {"f32", "f16", "i8w", "i8w-f16"};

/* An I8 tensor (rows, cols) of data quantized per row, and its (rows) F32 scales;
 * data is replaced by the dequantized weights (what the GPU multiplies by). */
static vkf_status tensor_from_i8(vkf_context *ctx, float *data, uint64_t rows, uint64_t cols, vkf_tensor **out,
                                 vkf_tensor **out_scale)
{
    size_t n = (size_t)rows * cols;
    int8_t *q = xmalloc(n);
    float *scale = xmalloc(rows * sizeof *scale);
    uint64_t shape[2] = {rows, cols};
    vkf_status st = vkf_quantize_int8_rows(data, rows, cols, q, scale);
    if (st == VKF_OK) st = vkf_tensor_create(ctx, VKF_DTYPE_I8, 2, shape, out);
    if (st == VKF_OK) st = vkf_tensor_upload(*out, q, n);
    if (st == VKF_OK) st = tensor_from(ctx, scale, rows, 1, out_scale);
    for (size_t e = 0; e < n; e++) data[e] = scale[e / cols] * (float)q[e];
    free(q), free(scale);
    return st;
}

/* Times one m×n×k matmul: a warm-up submit, then `repeat` timed submits; the GPU
 * time of each comes from timestamp queries around the dispatch. Checks 64
 * sampled outputs against dot products on the host (f16: of the f16-rounded
 * inputs, i8w: of the dequantized weights, so only the accumulation and the
 * rounding of C differ). */
static int bench_matmul_one(vkf_context *ctx, const vkf_device_info *info, unsigned long m, unsigned long n,
                            unsigned long k, unsigned long repeat, bench_dtype dtype_id, bool json)
{
    float *a = random_floats((size_t)m * k), *b = random_floats((size_t)n * k), *c = xmalloc((size_t)m * n * 4);
    double *ms = xmalloc(repeat * sizeof *ms);
    vkf_tensor *ta = NULL, *tb = NULL, *tc = NULL, *tscale = NULL;
    vkf_cmd *cmd = NULL;
    vkf_status st = VKF_OK;
    bool f16 = dtype_id == BENCH_F16 || dtype_id == BENCH_I8W_F16; /* A and C F16 */
    bool b_i8 = dtype_id == BENCH_I8W || dtype_id == BENCH_I8W_F16;
    if (f16) {
        if (st == VKF_OK) st = tensor_from_f16(ctx, a, m, k, &ta);
        if (st == VKF_OK && !b_i8) st = tensor_from_f16(ctx, b, n, k, &tb);
        if (st == VKF_OK) st = tensor_from_f16(ctx, NULL, m, n, &tc);
    } else {
        if (st == VKF_OK) st = tensor_from(ctx, a, m, k, &ta);
        if (st == VKF_OK && !b_i8) st = tensor_from(ctx, b, n, k, &tb);
        if (st == VKF_OK) st = tensor_from(ctx, NULL, m, n, &tc);
    }
    if (st == VKF_OK && b_i8) st = tensor_from_i8(ctx, b, n, k, &tb, &tscale);
    if (st == VKF_OK) st = vkf_cmd_create(ctx, VKF_CMD_TIMESTAMPS, &cmd);
    if (st == VKF_OK) {
        vkf_matmul_desc d;
        vkf_matmul_desc_init(&d);
        d.m = (uint32_t)m, d.n = (uint32_t)n, d.k = (uint32_t)k;
        d.a.tensor = ta, d.b.tensor = tb, d.c.tensor = tc, d.b_scale = tscale;
        st = vkf_cmd_matmul(cmd, &d);
    }
    /* the kernel family and tiles vkf_cmd_matmul just chose, by the same rule, and where they came from */
    vkf_kernel_choice choice = {0};
    if (st == VKF_OK)
        st = vkf_matmul_choice(ctx, (uint32_t)m, (uint32_t)n, (uint32_t)k, 1, f16, dtype_id == BENCH_F16, &choice);
    const char *kernel = choice.kernel ? choice.kernel : "?";
    double t0 = now_s();
    if (st == VKF_OK) st = vkf_cmd_submit(cmd); /* warm-up: pipeline compile, caches */
    double warm = now_s() - t0;
    bool progress = warm * (double)repeat > 2.0;
    for (unsigned long r = 0; st == VKF_OK && r < repeat; r++) {
        if (progress) fprintf(stderr, "bench matmul %lux%lux%lu: repeat %lu/%lu\n", m, n, k, r + 1, repeat);
        st = vkf_cmd_submit(cmd);
        /* every dispatch of the matmul (split-K: the partial sums and their reduction) */
        double part[4] = {0};
        uint32_t count = 0;
        if (st == VKF_OK) st = vkf_cmd_timings(cmd, part, 4, &count);
        ms[r] = 0;
        for (uint32_t i = 0; i < count && i < 4; i++) ms[r] += part[i];
    }
    if (st == VKF_OK && f16) {
        uint16_t *h = xmalloc((size_t)m * n * 2);
        st = vkf_tensor_download(tc, h, (uint64_t)m * n * 2);
        for (size_t e = 0; e < (size_t)m * n; e++) c[e] = ref_f16_to_f32(h[e]);
        free(h);
    } else if (st == VKF_OK) {
        st = vkf_tensor_download(tc, c, (uint64_t)m * n * 4);
    }
    int code = 0;
    if (st != VKF_OK) {
        fprintf(stderr, "vkformer: %s\n", vkf_last_error());
        code = exit_code_for(st);
    } else if (vkf_context_compile_only(ctx)) {
        /* a device that executes nothing (tools/vgpu.sh): the pipeline built, and
         * there is neither a time nor a result to report */
        if (json) {
            jsonl_begin("bench matmul");
            printf(",\"bench\":\"matmul\",\"m\":%lu,\"n\":%lu,\"k\":%lu,\"dtype\":\"%s\"", m, n, k,
                   bench_dtype_names[dtype_id]);
            jsonl_choice(&choice, 6);
            printf(",\"ms\":null,\"gflops\":null,\"gbps\":null,\"repeat\":%lu,\"max_rel_err\":null", repeat);
            jsonl_end(info);
        } else {
            printf("matmul %lux%lux%lu %s (%s): built on %s; compile-only device: result not checked, not timed\n", m, n,
                   k, bench_dtype_names[dtype_id], kernel, info->name);
        }
    } else {
        /* coopmat kernels round F32 inputs to f16 (their contract): the host does too */
        bool rounds = strncmp(kernel, "coopmat", 7) == 0 && !f16;
        for (size_t e = 0; rounds && e < (size_t)m * k; e++) a[e] = ref_f16_to_f32(ref_f32_to_f16(a[e]));
        /* (int8 weights stage exactly; their scale multiplies the fp32 sum) */
        for (size_t e = 0; rounds && !b_i8 && e < (size_t)n * k; e++) b[e] = ref_f16_to_f32(ref_f32_to_f16(b[e]));
        double max_err = 0;
        for (int s = 0; s < 64; s++) {
            size_t i = (size_t)((s * 2654435761u) % m), j = (size_t)((s * 40503u + 7) % n);
            double ref = 0;
            for (size_t p = 0; p < k; p++) ref += (double)a[i * k + p] * b[j * k + p];
            double err = fabs(ref - c[i * n + j]) / (1.0 + fabs(ref));
            if (err > max_err || err != err) max_err = err;
        }
        qsort(ms, repeat, sizeof *ms, compare_doubles);
        double median = repeat % 2 ? ms[repeat / 2] : 0.5 * (ms[repeat / 2 - 1] + ms[repeat / 2]);
        double gflops = 2.0 * m * n * k / (median * 1e-3) / 1e9;
        /* Achieved bandwidth: the bytes a matmul must move at least (A and B read
         * once, C written once; int8 weights with their scales) over the time.
         * Decode-step matmuls (few rows) are bound by it, not by FLOPs. */
        double a_bytes = f16 ? 2 : 4, b_bytes = b_i8 ? 1 : dtype_id == BENCH_F16 ? 2 : 4;
        double bytes = a_bytes * m * k + b_bytes * n * k + a_bytes * m * n + (b_i8 ? 4.0 * n : 0);
        double gbps = bytes / (median * 1e-3) / 1e9;
        const char *dtype = bench_dtype_names[dtype_id];
        if (json) {
            jsonl_begin("bench matmul");
            printf(",\"bench\":\"matmul\",\"m\":%lu,\"n\":%lu,\"k\":%lu,\"dtype\":\"%s\"", m, n, k, dtype);
            jsonl_choice(&choice, 6);
            printf(",\"ms\":%.4f,\"gflops\":%.3f,\"gbps\":%.3f,\"repeat\":%lu,\"max_rel_err\":", median, gflops, gbps,
                   repeat);
            jsonl_number(max_err, 3);
            jsonl_end(info);
        } else {
            printf("matmul %lux%lux%lu %s (%s): %.3f ms median of %lu, %.2f GFLOP/s, %.2f GB/s on %s (sampled error "
                   "%.2g)\n", m, n, k, dtype, kernel, median, repeat, gflops, gbps, info->name, max_err);
            printf("  kernel %s, workgroup %u, tiles %ux%u, bk %u, %ux%u per lane/invocation; from %s%s%s\n", kernel,
                   choice.tiles[0], choice.tiles[1], choice.tiles[2], choice.tiles[3], choice.tiles[4], choice.tiles[5],
                   choice.source, choice.table_entry ? ": " : "", choice.table_entry ? choice.table_entry : "");
        }
        /* f32: 1e-3. f16: the inputs are rounded alike on both sides; C's rounding
         * to f16 is 2^-11 relative, accumulation order adds little: 2e-3. */
        double bound = f16 ? 2e-3 : 1e-3; /* coopmat on F32: the inputs' rounding is on both sides */
        if (!(max_err < bound)) {
            fprintf(stderr, "vkformer: matmul result is wrong (sampled relative error %.3g)\n", max_err);
            code = EXIT_WRONG;
        }
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta), vkf_tensor_destroy(tb), vkf_tensor_destroy(tc), vkf_tensor_destroy(tscale);
    free(a), free(b), free(c), free(ms);
    return code;
}

static int run_bench_matmul(const options *o)
{
    unsigned long dims[64][3];
    int cases = 0;
    if (o->sizes) {
        const char *p = o->sizes;
        for (;;) {
            char *end;
            unsigned long s = (*p >= '0' && *p <= '9') ? strtoul(p, &end, 10) : 0;
            if (s == 0 || s > UINT32_MAX || (*end && *end != ',') || (*end == ',' && !end[1]))
                return cli_usage_error(o, "--size takes integers in 1..%u separated by commas, not %s",
                                       UINT32_MAX, quoted(o->sizes));
            if (cases == 64) return cli_usage_error(o, "--size takes at most 64 sizes");
            dims[cases][0] = dims[cases][1] = dims[cases][2] = s;
            cases++;
            if (!*end) break;
            p = end + 1;
        }
    } else {
        if (!cli_given(o, "--m") || !cli_given(o, "--n") || !cli_given(o, "--k"))
            return cli_usage_error(o, "needs --m, --n and --k, or --size");
        dims[0][0] = o->m, dims[0][1] = o->n, dims[0][2] = o->k;
        cases = 1;
    }
    for (int i = 0; i < cases; i++)
        for (int j = 0; j < 3; j++)
            if (dims[i][j] > UINT32_MAX) {
                fprintf(stderr, "vkformer: size %lu is too large\n", dims[i][j]);
                return EXIT_USAGE;
            }
    bench_dtype dtype_id = BENCH_F32;
    if (o->dtype) {
        int found = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(o->dtype, bench_dtype_names[i]) == 0) found = i;
        if (found < 0) {
            return cli_usage_error(o, "--dtype must be f32, f16, i8w or i8w-f16, not %s", quoted(o->dtype));
        }
        dtype_id = (bench_dtype)found;
    }
    bool f16 = dtype_id == BENCH_F16 || dtype_id == BENCH_I8W_F16;
    vkf_context *ctx;
    vkf_status st = open_context(o, &ctx);
    if (st != VKF_OK) return fail(st);
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    if (!info.timestamps) {
        fprintf(stderr, "vkformer: device \"%s\" has no timestamp queries; cannot time on the GPU\n", info.name);
        return close_context(ctx, EXIT_ERROR);
    }
    if (f16 && !info.storage_16bit) {
        fprintf(stderr, "vkformer: device \"%s\" has no 16-bit storage: --dtype %s cannot run\n", info.name,
                bench_dtype_names[dtype_id]);
        return close_context(ctx, EXIT_ERROR);
    }
    if (o->kernel && (st = vkf_tune_force_matmul(ctx, o->kernel)) != VKF_OK) {
        fprintf(stderr, "vkformer: --kernel %s: %s\n", o->kernel, vkf_last_error());
        return close_context(ctx, st == VKF_ERROR_INVALID_ARGUMENT ? EXIT_USAGE : EXIT_ERROR);
    }
    int code = 0;
    for (int i = 0; i < cases && code == 0; i++)
        code = bench_matmul_one(ctx, &info, dims[i][0], dims[i][1], dims[i][2], o->repeat, dtype_id, o->json);
    return close_context(ctx, code);
}


int cmd_bench_matmul(int argc, char **argv)
{
    static const cli_option table[] = {
        {"--m", CLI_COUNT, CLI_OFF(m), 1, CLI_U32, "M", "rows of A and C", NULL},
        {"--n", CLI_COUNT, CLI_OFF(n), 1, CLI_U32, "N", "rows of B, columns of C", NULL},
        {"--k", CLI_COUNT, CLI_OFF(k), 1, CLI_U32, "K", "columns of A and B", NULL},
        {"--size", CLI_STRING, CLI_OFF(sizes), 0, 0, "S[,S...]", "square cases S x S x S, one after another", NULL},
        {"--repeat", CLI_COUNT, CLI_OFF(repeat), 1, 1000000, "R", "timed submits per case, the median reported "
         "(default 10)", NULL},
        {"--dtype", CLI_STRING, CLI_OFF(dtype), 0, 0, "f32|f16|i8w|i8w-f16", "f16: A, B, C as F16; i8w: B int8 "
         "with per-row scales (i8w-f16: A, C F16)", NULL},
        {"--kernel", CLI_STRING, CLI_OFF(kernel), 0, 0, "FAMILY", "auto|coopmat|coopmat2|coopmat2wg|tiled|direct|subgroup|"
         "broadcast (default auto: the library's choice; coopmat2wg: NV2 at workgroup scope, never chosen by auto)", NULL},
        {"--json", CLI_FLAG, CLI_OFF(json), 0, 0, NULL, "one JSON line per case (docs/json.md)", NULL},
        CLI_COMMON_OPTIONS,
        CLI_END,
    };
    static const cli_command cmd = {"bench matmul", "--m M --n N --k K [options]\n--size S[,S...] [options]",
                                    "GPU time of C = A·Bᵀ (timestamp queries around the dispatch, median of --repeat "
                                    "submits\nafter a warm-up); 64 sampled outputs checked against the host (exit 5 "
                                    "when wrong)", table};
    options o = {.repeat = 10};
    int code = cli_parse(&cmd, argc, argv, &o);
    if (code < 0) code = cli_max_args(&o, 0);
    if (code < 0 && o.sizes && (cli_given(&o, "--m") || cli_given(&o, "--n") || cli_given(&o, "--k")))
        code = cli_usage_error(&o, "takes --size or --m, --n and --k, not both");
    return code >= 0 ? code : run_bench_matmul(&o);
}

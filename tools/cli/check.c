/* vkformer check: every GPU op against the C reference. */
#include "cli.h"
#include "reference.h" /* the tool's host reference (src/reference), not the library */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Max |gpu - ref| relative to tolerance: ok iff every element has
 * |gpu - ref| <= atol + rtol * |ref|. */
static bool close_enough(const float *gpu, const float *ref, size_t n, double atol, double rtol, double *out_max_err)
{
    bool ok = true;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)gpu[i] - ref[i]);
        if (!(err <= atol + rtol * fabs(ref[i]))) ok = false;
        if (err > worst || err != err) worst = err;
    }
    *out_max_err = worst;
    return ok;
}

/* A device that executes nothing (tools/vgpu.sh): ops are built and recorded, and
 * their results are not checked. */
static bool compile_only;

static int check_report(const char *what, bool ok, double err, int *failures)
{
    if (compile_only) {
        printf("  %-44s built; compile-only device: result not checked\n", what);
        return true;
    }
    printf("  %-44s max abs error %.3g  %s\n", what, err, ok ? "ok" : "WRONG");
    if (!ok) (*failures)++;
    return ok;
}

static vkf_status check_matmul(vkf_context *ctx, uint32_t m, uint32_t n, uint32_t k, vkf_activation act, int *failures)
{
    float *a = random_floats((size_t)m * k), *b = random_floats((size_t)n * k), *bias = random_floats(n);
    float *gpu = xmalloc((size_t)m * n * 4), *ref = xmalloc((size_t)m * n * 4);
    vkf_tensor *ta = NULL, *tb = NULL, *tbias = NULL, *tc = NULL;
    vkf_cmd *cmd = NULL;
    vkf_status st = VKF_OK;
    if (st == VKF_OK) st = tensor_from(ctx, a, m, k, &ta);
    if (st == VKF_OK) st = tensor_from(ctx, b, n, k, &tb);
    if (st == VKF_OK) st = tensor_from(ctx, bias, 1, n, &tbias);
    if (st == VKF_OK) st = tensor_from(ctx, NULL, m, n, &tc);
    if (st == VKF_OK) st = vkf_cmd_create(ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_matmul_desc d;
        vkf_matmul_desc_init(&d);
        d.m = m, d.n = n, d.k = k;
        d.a.tensor = ta, d.b.tensor = tb, d.c.tensor = tc, d.bias = tbias;
        d.activation = act;
        st = vkf_cmd_matmul(cmd, &d);
    }
    if (st == VKF_OK) st = vkf_cmd_submit(cmd);
    if (st == VKF_OK) st = vkf_tensor_download(tc, gpu, (uint64_t)m * n * 4);
    if (st == VKF_OK) {
        ref_matmul(ref, n, a, k, b, k, false, bias, NULL, 0, m, n, k, 1.0f, (int)act);
        char what[96];
        snprintf(what, sizeof what, "matmul %ux%ux%u + bias%s", m, n, k,
                 act == VKF_ACTIVATION_RELU ? " + relu" : act == VKF_ACTIVATION_GELU ? " + gelu" : act == VKF_ACTIVATION_SILU ? " + silu" : "");
        double err;
        bool ok = close_enough(gpu, ref, (size_t)m * n, 1e-4, 1e-4, &err);
        check_report(what, ok, err, failures);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(ta);
    vkf_tensor_destroy(tb);
    vkf_tensor_destroy(tbias);
    vkf_tensor_destroy(tc);
    free(a), free(b), free(bias), free(gpu), free(ref);
    return st;
}

static vkf_status check_rows(vkf_context *ctx, uint32_t rows, uint32_t cols, int *failures)
{
    size_t n = (size_t)rows * cols;
    float *x = random_floats(n), *r = random_floats(n), *g = random_floats(cols), *be = random_floats(cols);
    float *gpu = xmalloc(n * 4), *ref = xmalloc(n * 4);
    vkf_tensor *tx = NULL, *tr = NULL, *tg = NULL, *tb = NULL, *ty = NULL, *tp = NULL;
    vkf_cmd *cmd = NULL;
    vkf_status st = VKF_OK;
    if (st == VKF_OK) st = tensor_from(ctx, x, rows, cols, &tx);
    if (st == VKF_OK) st = tensor_from(ctx, r, rows, cols, &tr);
    if (st == VKF_OK) st = tensor_from(ctx, g, 1, cols, &tg);
    if (st == VKF_OK) st = tensor_from(ctx, be, 1, cols, &tb);
    if (st == VKF_OK) st = tensor_from(ctx, NULL, rows, cols, &ty);
    if (st == VKF_OK) st = tensor_from(ctx, NULL, rows, cols, &tp);
    if (st == VKF_OK) st = vkf_cmd_create(ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_layernorm_desc ln;
        vkf_layernorm_desc_init(&ln);
        ln.rows = rows, ln.cols = cols, ln.x = tx, ln.residual = tr, ln.gamma = tg, ln.beta = tb, ln.y = ty;
        st = vkf_cmd_layernorm(cmd, &ln);
    }
    if (st == VKF_OK) {
        vkf_softmax_desc sm;
        vkf_softmax_desc_init(&sm);
        sm.rows = rows, sm.cols = cols, sm.x = ty, sm.y = tp, sm.scale = 0.5f, sm.causal_period = rows;
        st = vkf_cmd_softmax(cmd, &sm);
    }
    if (st == VKF_OK) st = vkf_cmd_submit(cmd);
    double err = 0;
    char what[96];
    if (st == VKF_OK) st = vkf_tensor_download(ty, gpu, n * 4);
    float *ln_ref = xmalloc(n * 4);
    if (st == VKF_OK) {
        ref_layernorm(ln_ref, NULL, x, r, g, be, rows, cols, 1e-5f);
        snprintf(what, sizeof what, "layernorm(x + r) %ux%u", rows, cols);
        bool ok = close_enough(gpu, ln_ref, n, 1e-4, 1e-4, &err);
        check_report(what, ok, err, failures);
        st = vkf_tensor_download(tp, gpu, n * 4);
    }
    if (st == VKF_OK) {
        /* The softmax reads the GPU's layernorm output, as it did on the device. */
        float *ln_gpu = xmalloc(n * 4);
        st = vkf_tensor_download(ty, ln_gpu, n * 4);
        if (st == VKF_OK) {
            ref_softmax(ref, ln_gpu, rows, cols, 0.5f, NULL, 0, 0, rows, 0);
            snprintf(what, sizeof what, "causal softmax %ux%u", rows, cols);
            bool ok = close_enough(gpu, ref, n, 1e-6, 1e-4, &err);
        check_report(what, ok, err, failures);
        }
        free(ln_gpu);
    }
    free(ln_ref);
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tx), vkf_tensor_destroy(tr), vkf_tensor_destroy(tg);
    vkf_tensor_destroy(tb), vkf_tensor_destroy(ty), vkf_tensor_destroy(tp);
    free(x), free(r), free(g), free(be), free(gpu), free(ref);
    return st;
}

static vkf_status check_embed(vkf_context *ctx, uint32_t tokens, uint32_t d, uint32_t vocab, int *failures)
{
    float *table = random_floats((size_t)vocab * d);
    int32_t *ids = xmalloc(tokens * sizeof *ids);
    float *gpu = xmalloc((size_t)tokens * d * 4), *ref = xmalloc((size_t)tokens * d * 4);
    vkf_tensor *tt = NULL, *ti = NULL, *to = NULL, *tpe = NULL;
    vkf_cmd *cmd = NULL;
    vkf_status st = VKF_OK;
    for (uint32_t t = 0; st == VKF_OK && t < tokens; t++) ids[t] = (int32_t)((t * 7919u) % vocab);
    uint64_t ntok = tokens;
    if (st == VKF_OK) st = tensor_from(ctx, table, vocab, d, &tt);
    if (st == VKF_OK) st = vkf_tensor_create(ctx, VKF_DTYPE_I32, 1, &ntok, &ti);
    if (st == VKF_OK) st = vkf_tensor_upload(ti, ids, ntok * 4);
    if (st == VKF_OK) st = tensor_from(ctx, NULL, tokens, d, &to);
    if (st == VKF_OK) st = vkf_positional_encoding_create(ctx, tokens, d, &tpe);
    if (st == VKF_OK) st = vkf_cmd_create(ctx, 0, &cmd);
    if (st == VKF_OK) {
        vkf_embed_desc e;
        vkf_embed_desc_init(&e);
        e.tokens = tokens, e.d = d, e.vocab = vocab, e.ids = ti, e.table = tt, e.out = to;
        e.scale = sqrtf((float)d), e.positions = tpe;
        st = vkf_cmd_embed(cmd, &e);
    }
    if (st == VKF_OK) st = vkf_cmd_submit(cmd);
    if (st == VKF_OK) st = vkf_tensor_download(to, gpu, (uint64_t)tokens * d * 4);
    if (st == VKF_OK) {
        ref_embed(ref, ids, table, tokens, d, vocab, sqrtf((float)d), true, tokens, 0);
        char what[96];
        snprintf(what, sizeof what, "embedding + positions %u tokens x %u", tokens, d);
        double err;
        bool ok = close_enough(gpu, ref, (size_t)tokens * d, 1e-4, 1e-4, &err);
        check_report(what, ok, err, failures);
    }
    vkf_cmd_destroy(cmd);
    vkf_tensor_destroy(tt), vkf_tensor_destroy(ti), vkf_tensor_destroy(to), vkf_tensor_destroy(tpe);
    free(table), free(ids), free(gpu), free(ref);
    return st;
}

static int run_check(const options *o)
{
    vkf_context *ctx;
    vkf_status st = open_context(o, &ctx);
    if (st != VKF_OK) return fail(st);
    vkf_device_info info;
    vkf_context_device_info(ctx, &info);
    compile_only = vkf_context_compile_only(ctx);
    printf("checking every op against the C reference on %s%s\n", info.name,
           compile_only ? " (compile-only device: results are not checked)" : "");
    int failures = 0;
    if (st == VKF_OK) st = check_matmul(ctx, 100, 257, 64, VKF_ACTIVATION_NONE, &failures);
    if (st == VKF_OK) st = check_matmul(ctx, 17, 3, 1000, VKF_ACTIVATION_RELU, &failures);
    if (st == VKF_OK) st = check_matmul(ctx, 257, 100, 17, VKF_ACTIVATION_GELU, &failures);
    if (st == VKF_OK) st = check_rows(ctx, 64, 1000, &failures);
    if (st == VKF_OK) st = check_embed(ctx, 100, 64, 1000, &failures);
    if (st != VKF_OK) {
        fprintf(stderr, "vkformer: %s\n", vkf_last_error());
        return close_context(ctx, exit_code_for(st));
    }
    printf("%s\n", compile_only ? "every op built; compile-only device: result not checked"
                   : failures   ? "check FAILED"
                                : "all ops match the reference");
    return close_context(ctx, failures ? EXIT_WRONG : 0);
}


int cmd_check(int argc, char **argv)
{
    static const cli_option table[] = {CLI_COMMON_OPTIONS, CLI_END};
    static const cli_command cmd = {"check", "[--device D]",
                                    "every GPU op (matmul, layernorm, softmax, embedding) against the C reference;\n"
                                    "exit 5 when one is wrong", table};
    options o = {0};
    int code = cli_parse(&cmd, argc, argv, &o);
    if (code < 0) code = cli_max_args(&o, 0);
    return code >= 0 ? code : run_check(&o);
}

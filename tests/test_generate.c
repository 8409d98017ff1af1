/* The generation API of src/generate.c on the demo model: vkf_model_generate_with
 * (beam search, sampling) against vkf_model_generate (greedy), its option checks,
 * and vkf_model_generate_stats. The beam-search results themselves are checked
 * against a PyTorch reference by tests/test_beam.py.
 * usage: test_generate MODEL.safetensors */
#include "harness.h"

#include <math.h>
#include <stdlib.h>

#define MAX_NEW 12
#define COUNT 3

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL.safetensors\n", argv[0]);
        return 2;
    }
    vkf_context *ctx = harness_context();
    vkf_model *m = NULL;
    CHECK_OK(vkf_model_load(ctx, argv[1], &m));
    if (!m) {
        harness_close(ctx);
        return harness_result("generate");
    }
    static const char *const texts[COUNT] = {"three hundred forty two", "seven", "twelve thousand five"};
    int32_t src_ids[COUNT][64];
    uint32_t lens[COUNT];
    const int32_t *ptrs[COUNT];
    for (int i = 0; i < COUNT; i++) {
        CHECK_OK(vkf_model_encode_text(m, texts[i], src_ids[i], 64, &lens[i]));
        ptrs[i] = src_ids[i];
    }
    vkf_sequences src = {COUNT, ptrs, lens};
    int32_t greedy[COUNT * MAX_NEW], got[COUNT * 4 * MAX_NEW];
    uint32_t glen[COUNT], gotlen[COUNT * 4];
    float scores[COUNT * 4];
    CHECK_OK(vkf_model_generate(m, &src, MAX_NEW, greedy, glen));
    vkf_generate_stats stats;
    CHECK_OK(vkf_model_generate_stats(m, &stats));
    uint64_t tokens = 0;
    for (int i = 0; i < COUNT; i++) tokens += glen[i];
    CHECK(stats.tokens == tokens && stats.steps >= 1 && stats.steps <= MAX_NEW && stats.plan_bytes > 0);
    CHECK(stats.first_token_ms > 0 && stats.total_ms >= stats.first_token_ms);

    /* beam 1 and the defaults (NULL options) are greedy */
    vkf_generate_options o;
    vkf_generate_options_init(&o);
    CHECK(o.beams == 1 && o.n_best == 1 && o.length_penalty == 1.0f && !o.sample && o.top_p == 1.0f);
    o.max_new = MAX_NEW;
    CHECK_OK(vkf_model_generate_with(m, &src, &o, got, gotlen, scores));
    CHECK(memcmp(got, greedy, sizeof greedy) == 0 && memcmp(gotlen, glen, sizeof glen) == 0);
    for (int i = 0; i < COUNT; i++) CHECK(scores[i] < 0 && isfinite(scores[i]));

    /* beam 4, 4 best: best first, each no better than the one before; the batch's
     * first source as when decoded alone */
    o.beams = 4, o.n_best = 4;
    CHECK_OK(vkf_model_generate_with(m, &src, &o, got, gotlen, scores));
    for (int i = 0; i < COUNT; i++)
        for (int j = 1; j < 4; j++) CHECK(scores[i * 4 + j] <= scores[i * 4 + j - 1]);
    int32_t alone[4 * MAX_NEW];
    uint32_t alone_len[4];
    float alone_scores[4];
    vkf_sequences one = {1, ptrs, lens};
    CHECK_OK(vkf_model_generate_with(m, &one, &o, alone, alone_len, alone_scores));
    CHECK(memcmp(alone, got, sizeof alone) == 0 && memcmp(alone_len, gotlen, sizeof alone_len) == 0);
    for (int j = 0; j < 4; j++) CHECK(fabsf(alone_scores[j] - scores[j]) < 1e-4f);
    char text[256];
    CHECK_OK(vkf_model_decode_text(m, got, gotlen[0], text, sizeof text));
    CHECK(strcmp(text, "342") == 0);

    /* sampling: top-k 1 is greedy; a seed repeats itself */
    vkf_generate_options s;
    vkf_generate_options_init(&s);
    s.max_new = MAX_NEW, s.sample = true, s.top_k = 1, s.temperature = 3.0f, s.seed = 9;
    CHECK_OK(vkf_model_generate_with(m, &src, &s, got, gotlen, NULL));
    CHECK(memcmp(got, greedy, sizeof greedy) == 0);
    s.top_k = 0, s.top_p = 0.9f, s.temperature = 2.0f;
    int32_t again[COUNT * MAX_NEW];
    uint32_t again_len[COUNT];
    CHECK_OK(vkf_model_generate_with(m, &src, &s, got, gotlen, scores));
    CHECK_OK(vkf_model_generate_with(m, &src, &s, again, again_len, NULL));
    CHECK(memcmp(got, again, sizeof again) == 0 && memcmp(gotlen, again_len, sizeof again_len) == 0);
    CHECK(isnan(scores[0]));

    /* bad values: clear errors, nothing else changes */
    vkf_generate_options b = o;
    b.beams = 0;
    CHECK_STATUS(vkf_model_generate_with(m, &src, &b, got, gotlen, NULL), VKF_ERROR_INVALID_ARGUMENT);
    b = o, b.beams = 17;
    CHECK_STATUS(vkf_model_generate_with(m, &src, &b, got, gotlen, NULL), VKF_ERROR_INVALID_ARGUMENT);
    b = o, b.n_best = 5;
    CHECK_STATUS(vkf_model_generate_with(m, &src, &b, got, gotlen, NULL), VKF_ERROR_INVALID_ARGUMENT);
    b = o, b.max_new = 100000;
    CHECK_STATUS(vkf_model_generate_with(m, &src, &b, got, gotlen, NULL), VKF_ERROR_INVALID_ARGUMENT);
    b = o, b.length_penalty = NAN;
    CHECK_STATUS(vkf_model_generate_with(m, &src, &b, got, gotlen, NULL), VKF_ERROR_INVALID_ARGUMENT);
    b = s, b.top_p = 1.5f;
    CHECK_STATUS(vkf_model_generate_with(m, &src, &b, got, gotlen, NULL), VKF_ERROR_INVALID_ARGUMENT);
    b = s, b.temperature = -1.0f;
    CHECK_STATUS(vkf_model_generate_with(m, &src, &b, got, gotlen, NULL), VKF_ERROR_INVALID_ARGUMENT);
    b = s, b.beams = 2;
    CHECK_STATUS(vkf_model_generate_with(m, &src, &b, got, gotlen, NULL), VKF_ERROR_UNSUPPORTED);
    CHECK_STATUS(vkf_model_generate_with(NULL, &src, &o, got, gotlen, NULL), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_generate_with(m, &src, &o, NULL, gotlen, NULL), VKF_ERROR_INVALID_ARGUMENT);
    CHECK_STATUS(vkf_model_generate_stats(m, NULL), VKF_ERROR_INVALID_ARGUMENT);
    vkf_generate_options_init(NULL);

    vkf_model_destroy(m);
    harness_close(ctx);
    return harness_result("generate");
}

/* The spec's checks, the sinusoidal position tables of every kind the spec
 * names (a family whose positions are learned reads them from its file), and
 * T5's relative position buckets and bias tables. */
#include "arch/arch.h"

#include <math.h>
#include <stdlib.h>

vkf_status vkf_arch_spec_check(const vkf_arch_spec *s)
{
#define BAD(...) return vkf_fail(VKF_ERROR_BAD_MODEL, __VA_ARGS__)
    /* bounds keep every derived size inside 32-bit shader indices and sane memory */
    if (s->d_model < 1 || s->d_model > 65536) BAD("d_model %u is outside 1..65536", s->d_model);
    if (s->heads < 1 || s->heads > 4096) BAD("%u attention heads: outside 1..4096", s->heads);
    if (s->head_dim < 1 || (uint64_t)s->heads * s->head_dim > 65536)
        BAD("head_dim %u x %u heads is outside 1..65536", s->head_dim, s->heads);
    if (s->encoder_layers < 1 || s->encoder_layers > 1024 || s->decoder_layers < 1 || s->decoder_layers > 1024)
        BAD("%u encoder and %u decoder layers: each must be 1..1024", s->encoder_layers, s->decoder_layers);
    if (s->d_ff < 1 || s->d_ff > (1u << 20)) BAD("d_ff %u is outside 1..%u", s->d_ff, 1u << 20);
    if (s->src_vocab < 1 || s->src_vocab > (1u << 24) || s->tgt_vocab < 1 || s->tgt_vocab > (1u << 24))
        BAD("vocabulary sizes %u and %u: each must be 1..%u", s->src_vocab, s->tgt_vocab, 1u << 24);
    if (s->max_len < 1 || s->max_len > (1u << 16)) BAD("max_len %u is outside 1..65536", s->max_len);
    if (!(s->norm_eps > 0 && s->norm_eps < 1)) BAD("the norms' eps %g must be in (0, 1)", (double)s->norm_eps);
    if (!isfinite(s->embed_scale) || !isfinite(s->attention_scale) || !isfinite(s->output_scale))
        BAD("embed, attention and output scales must be finite");
    if (s->pad_id < 0 || (uint32_t)s->pad_id >= s->src_vocab || (uint32_t)s->pad_id >= s->tgt_vocab)
        BAD("pad id %d is outside the vocabularies (%u, %u)", s->pad_id, s->src_vocab, s->tgt_vocab);
    if (s->eos_id < 0 || (uint32_t)s->eos_id >= s->src_vocab || (uint32_t)s->eos_id >= s->tgt_vocab)
        BAD("eos id %d is outside the vocabularies (%u, %u)", s->eos_id, s->src_vocab, s->tgt_vocab);
    if (s->decoder_start_id < 0 || (uint32_t)s->decoder_start_id >= s->tgt_vocab)
        BAD("decoder start id %d is outside the target vocabulary (%u)", s->decoder_start_id, s->tgt_vocab);
    if ((unsigned)s->positions > VKF_POS_NONE) BAD("unknown position kind %d", (int)s->positions);
    if (s->activation != VKF_ACTIVATION_RELU && s->activation != VKF_ACTIVATION_GELU &&
        s->activation != VKF_ACTIVATION_SILU && s->activation != VKF_ACTIVATION_GELU_TANH)
        BAD("unknown activation %d", (int)s->activation);
    if ((unsigned)s->norm > VKF_NORM_RMS) BAD("unknown norm kind %d", (int)s->norm);
    if (s->ffn_glu && (uint64_t)s->d_ff * 2 > (1u << 20)) BAD("a gated d_ff of %u passes %u", s->d_ff, 1u << 19);
    if (s->rel_bias) {
        if (s->rel_buckets < 2 || s->rel_buckets > 4096)
            BAD("relative_attention_num_buckets %u is outside 2..4096", s->rel_buckets);
        if (s->rel_max_distance <= s->rel_buckets / 2 || s->rel_max_distance > (1u << 24))
            BAD("relative_attention_max_distance %u is outside %u..%u (past half the %u buckets)", s->rel_max_distance,
                s->rel_buckets / 2 + 1, 1u << 24, s->rel_buckets);
    }
    const vkf_attention_spec *ea = &s->encoder_attention;
    if (ea->kind != VKF_ATTN_FUSED || (ea->pattern != VKF_ATTENTION_DENSE && ea->pattern != VKF_ATTENTION_LOCAL &&
                                       ea->pattern != VKF_ATTENTION_TGLOBAL))
        BAD("the model's own encoder attention must be dense, local or tglobal");
    if (ea->pattern == VKF_ATTENTION_TGLOBAL && (ea->block < 1 || ea->block > INT32_MAX))
        BAD("a global block of %u tokens is outside 1..2^31 - 1", ea->block);
    if (s->global_norm && ea->pattern != VKF_ATTENTION_TGLOBAL) BAD("global norms without tglobal attention");
#undef BAD
    if (ea->pattern != VKF_ATTENTION_DENSE && s->head_dim > VKF_ATTENTION_MAX_HEAD_DIM)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "the model's local attention needs the fused kernels, which take head_dim "
                        "up to %u (this model: %u)", VKF_ATTENTION_MAX_HEAD_DIM, s->head_dim);
#define BAD(...) return vkf_fail(VKF_ERROR_BAD_MODEL, __VA_ARGS__)
    uint64_t rows = s->position_rows ? s->position_rows
                                     : (uint64_t)s->max_len + s->position_offset +
                                           (s->positions == VKF_POS_SIN_FAIRSEQ ? (uint64_t)s->pad_id + 1 : 0);
    if (s->positions != VKF_POS_NONE && (rows > (1u << 20) || rows * s->d_model > UINT32_MAX))
        BAD("a position table of %llu rows is too large", (unsigned long long)rows);
    if (s->audio_mels) {
        if (s->audio_mels > 1024) BAD("%u mel bins: outside 1..1024", s->audio_mels);
        if (s->audio_frames < 2 || s->audio_frames % 2 || s->audio_frames > (1u << 17))
            BAD("%u audio frames: an even number in 2..%u is needed (conv2 halves them)", s->audio_frames, 1u << 17);
    }
#undef BAD
    if (s->rel_bias) {
        /* the bias tables hold every distance up to the radius, per head */
        uint64_t entries = (uint64_t)s->heads * (2ull * vkf_arch_rel_radius(s) + 1);
        if (entries > (1u << 26))
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "relative_attention_max_distance %u with %u heads needs a bias table "
                            "of %llu entries (at most %u)", s->rel_max_distance, s->heads, (unsigned long long)entries,
                            1u << 26);
    }
    return VKF_OK;
}

uint32_t vkf_arch_rel_bucket(int32_t rel, bool bidirectional, uint32_t num_buckets, uint32_t max_distance)
{
    /* transformers' T5Attention._relative_position_bucket, its float32 steps
     * one by one: log(n / max_exact) / log(max_distance / max_exact) * (buckets -
     * max_exact), truncated, capped at buckets - 1 */
    uint32_t base = 0, nb = num_buckets;
    int64_t n;
    if (bidirectional) {
        nb /= 2;
        if (rel > 0) base = nb;
        n = rel < 0 ? -(int64_t)rel : rel;
    } else {
        n = rel < 0 ? -(int64_t)rel : 0;
    }
    uint32_t max_exact = nb / 2;
    if (n < (int64_t)max_exact) return base + (uint32_t)n;
    if (max_exact == 0) return base + (nb ? nb - 1 : 0);
    float ratio = (float)n / (float)max_exact;
    float scaled = logf(ratio) / (float)log((double)max_distance / (double)max_exact) * (float)(nb - max_exact);
    int64_t large = (int64_t)max_exact + (isfinite(scaled) ? (int64_t)scaled : INT32_MAX);
    if (large > (int64_t)nb - 1) large = (int64_t)nb - 1;
    return base + (uint32_t)large;
}

uint32_t vkf_arch_rel_radius(const vkf_arch_spec *s)
{
    /* the buckets grow with the distance until the last one; past the first
     * distance that reaches it in both directions nothing changes */
    uint32_t nb = s->rel_buckets, md = s->rel_max_distance;
    uint32_t last_bi = vkf_arch_rel_bucket(INT32_MAX, true, nb, md), last_neg = vkf_arch_rel_bucket(INT32_MIN + 1, true, nb, md);
    uint32_t last_causal = vkf_arch_rel_bucket(INT32_MIN + 1, false, nb, md);
    for (uint32_t r = 0; r < s->max_len; r++)
        if (vkf_arch_rel_bucket((int32_t)r, true, nb, md) == last_bi &&
            vkf_arch_rel_bucket(-(int32_t)r, true, nb, md) == last_neg &&
            vkf_arch_rel_bucket(-(int32_t)r, false, nb, md) == last_causal)
            return r;
    return s->max_len;
}

void vkf_arch_rel_table(const vkf_arch_spec *s, const float *weight, bool bidirectional, uint32_t radius, float *out)
{
    uint32_t width = 2 * radius + 1;
    for (uint32_t k = 0; k < width; k++) {
        uint32_t bucket = vkf_arch_rel_bucket((int32_t)k - (int32_t)radius, bidirectional, s->rel_buckets,
                                              s->rel_max_distance);
        for (uint32_t h = 0; h < s->heads; h++) out[(size_t)h * width + k] = weight[(size_t)bucket * s->heads + h];
    }
}

uint32_t vkf_arch_position_rows(const vkf_arch_spec *s)
{
    if (s->position_rows) return s->position_rows;
    return s->max_len + s->position_offset + (s->positions == VKF_POS_SIN_FAIRSEQ ? (uint32_t)s->pad_id + 1 : 0);
}

vkf_status vkf_arch_position_table(const vkf_arch_spec *s, float **out_table, uint32_t *out_rows)
{
    *out_table = NULL;
    uint32_t n = vkf_arch_position_rows(s), d = s->d_model;
    *out_rows = n;
    float *t = calloc((size_t)n * d, sizeof *t);
    if (!t) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for the position table");
    switch (s->positions) {
    case VKF_POS_SIN_INTERLEAVED:
        /* PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)), in double, rounded once */
        /* (the same values as vkf_positional_encoding_create) */
        for (uint32_t c = 0; c < d; c++) {
            double freq = exp((double)(c & ~1u) * -log(10000.0) / (double)d);
            for (uint32_t p = 0; p < n; p++)
                t[(size_t)p * d + c] = (float)((c & 1) ? cos(p * freq) : sin(p * freq));
        }
        break;
    case VKF_POS_SIN_HALF: {
        /* Marian: channel j < ceil(d/2) is sin(p / 10000^(2j/d)), channel ceil(d/2) + j its cos */
        uint32_t half = (d + 1) / 2;
        for (uint32_t p = 0; p < n; p++)
            for (uint32_t c = 0; c < d; c++) {
                uint32_t k = c < half ? c : c - half;
                double angle = (double)p / pow(10000.0, 2.0 * k / (double)d);
                t[(size_t)p * d + c] = (float)(c < half ? sin(angle) : cos(angle));
            }
        break;
    }
    case VKF_POS_SIN_FAIRSEQ: {
        /* fairseq's table as M2M-100 builds it in float32: rate_j = exp(j * -log(10000) / (half - 1)),
         * angle = p * rate_j, sin in [0, half), cos in [half, 2 half), a zero channel when d is odd, and
         * the padding index's row all zero. Each float32 step is one rounding of the exact value. */
        uint32_t half = d / 2;
        float step = half > 1 ? (float)(log(10000.0) / (double)(half - 1)) : 0.0f;
        for (uint32_t j = 0; j < half; j++) {
            float rate = (float)exp((double)((float)j * -step));
            for (uint32_t p = 0; p < n; p++) {
                float angle = (float)p * rate;
                t[(size_t)p * d + j] = (float)sin((double)angle);
                t[(size_t)p * d + half + j] = (float)cos((double)angle);
            }
        }
        for (uint32_t c = 0; c < d; c++) t[(size_t)s->pad_id * d + c] = 0.0f;
        break;
    }
    default:
        free(t);
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "no computed position table for kind %d", (int)s->positions);
    }
    *out_table = t;
    return VKF_OK;
}

bool vkf_auto_precision_f16(const vkf_device_info *info, bool storage_16bit)
{
    /* GPUs move half the bytes with F16 (not yet measured on one). CPU drivers keep
     * F32: on lavapipe F16 measured no faster (base preset over five runs each:
     * forward 220-341 ms F32 against 221-324 ms F16, decode step 24.4-28.2 against
     * 25.9-44.6 ms; docs/performance.md). */
    bool gpu = info->type == VKF_DEVICE_DISCRETE_GPU || info->type == VKF_DEVICE_INTEGRATED_GPU ||
               info->type == VKF_DEVICE_VIRTUAL_GPU;
    return gpu && storage_16bit;
}

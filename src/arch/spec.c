/* The spec's checks, and the sinusoidal position tables of every kind the spec
 * names (a family whose positions are learned reads them from its file). */
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
        s->activation != VKF_ACTIVATION_SILU)
        BAD("unknown activation %d", (int)s->activation);
    uint64_t rows = s->position_rows ? s->position_rows
                                     : (uint64_t)s->max_len + s->position_offset +
                                           (s->positions == VKF_POS_SIN_FAIRSEQ ? (uint64_t)s->pad_id + 1 : 0);
    if (rows > (1u << 20) || rows * s->d_model > UINT32_MAX) BAD("a position table of %llu rows is too large",
                                                                 (unsigned long long)rows);
    if (s->audio_mels) {
        if (s->audio_mels > 1024) BAD("%u mel bins: outside 1..1024", s->audio_mels);
        if (s->audio_frames < 2 || s->audio_frames % 2 || s->audio_frames > (1u << 17))
            BAD("%u audio frames: an even number in 2..%u is needed (conv2 halves them)", s->audio_frames, 1u << 17);
    }
#undef BAD
    if (s->norm == VKF_NORM_RMS)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "RMSNorm (T5's norm) is not implemented yet");
    if (s->ffn_glu) return vkf_fail(VKF_ERROR_UNSUPPORTED, "gated FFNs (T5 v1.1's gated-gelu) are not implemented yet");
    return VKF_OK;
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

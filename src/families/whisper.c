/* Whisper (model_type whisper, WhisperForConditionalGeneration), tiny to
 * large-v3: folders as the hub stores them (preprocessor_config.json beside
 * config.json, generation_config.json and model.safetensors) and as transformers
 * 5.x save_pretrained writes them (processor_config.json, whose
 * "feature_extractor" holds the same settings). The model on the arch's spec:
 *   encoder  the audio stem (conv1 kernel 3 + GELU, conv2 kernel 3 stride 2 +
 *            GELU) over log-mel frames, plus model.encoder.embed_positions (the
 *            sinusoids HF initialises it with, computed here when a file lacks
 *            it), pre-LN layers, a final norm;
 *   decoder  token embedding plus learned positions (row p for position p), pre-LN
 *            layers with cross-attention, a final norm; the generator is the token
 *            embedding (proj_out tied; tie_word_embeddings false reads proj_out);
 *   every k_proj has no bias; GELU (activation_function); no embedding scale
 *   (transformers 5.12 defines embed_scale from scale_embedding but never applies it).
 * The feature extractor (feature_size, sampling_rate, hop_length, chunk_length,
 * n_fft, padding_value) must agree with the model: feature_size = num_mel_bins and
 * chunk_length * sampling_rate / hop_length = 2 * max_source_positions. A stored
 * "mel_filters" (older hub files) is ignored, as the extractor recomputes it. */
#include "families/family.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool probe(const vkf_probe *p)
{
    return p->is_dir && p->model_type && strcmp(p->model_type, "whisper") == 0;
}

static vkf_status parse_config(json_t *c, vkf_arch_spec *s, bool *tied)
{
    static const char F[] = "config.json";
    int64_t v = 0, mels = 0, src = 0, tgt = 0, pad = 0, eos = 0, bos = 0, start = 0;
    VKF_TRY(vkf_hf_bart_sizes(c, s, &v));
    VKF_TRY(vkf_hf_int(c, F, "num_mel_bins", 1, 1024, 80, &mels));
    VKF_TRY(vkf_hf_int(c, F, "max_source_positions", 1, 1 << 16, 1500, &src));
    VKF_TRY(vkf_hf_int(c, F, "max_target_positions", 1, 1 << 16, 448, &tgt));
    /* WhisperConfig's defaults */
    VKF_TRY(vkf_hf_int(c, F, "pad_token_id", 0, v - 1, v > 50256 ? 50256 : -1, &pad));
    VKF_TRY(vkf_hf_int(c, F, "bos_token_id", 0, v - 1, v > 50256 ? 50256 : -1, &bos));
    VKF_TRY(vkf_hf_int(c, F, "eos_token_id", 0, v - 1, v > 50256 ? 50256 : -1, &eos));
    VKF_TRY(vkf_hf_int(c, F, "decoder_start_token_id", 0, v - 1, v > 50257 ? 50257 : -1, &start));
    if (s->d_model % 2 || s->d_model < 4)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: d_model %u: the encoder's sinusoids need an even d_model "
                        "of 4 or more", s->d_model);
    VKF_TRY(vkf_hf_bool(c, F, "tie_word_embeddings", true, tied));
    /* src_vocab: no source tokens, the source is audio */
    s->max_len = (uint32_t)tgt;                 /* the decoder's positions */
    s->pre_norm = true;
    s->encoder_final_norm = s->decoder_final_norm = true;
    s->norm = VKF_NORM_LAYER, s->norm_eps = 1e-5f;
    s->positions = VKF_POS_LEARNED;
    s->position_offset = 0, s->position_rows = (uint32_t)tgt;
    s->embed_scale = 1.0f;
    s->pad_id = (int32_t)pad, s->eos_id = (int32_t)eos, s->decoder_start_id = (int32_t)start;
    s->audio_mels = (uint32_t)mels;
    s->audio_frames = (uint32_t)(2 * src);
    return VKF_OK;
}

/* The feature extractor's settings: preprocessor_config.json, or transformers 5.x's
 * processor_config.json {"feature_extractor": {...}}. */
static vkf_status parse_extractor(const char *dir, const vkf_arch_spec *s, vkf_mel_spec *mel)
{
    json_t *own = NULL, *fe = NULL;
    const char *F = "preprocessor_config.json";
    VKF_TRY(vkf_hf_read_json(dir, F, true, &own));
    if (own) {
        fe = own;
    } else {
        F = "processor_config.json";
        VKF_TRY(vkf_hf_read_json(dir, F, true, &own));
        if (!own)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "preprocessor_config.json (or processor_config.json) is missing: the "
                            "feature extractor's settings are needed to turn audio into features");
        fe = json_object_get(own, "feature_extractor");
        if (!json_is_object(fe)) {
            json_decref(own);
            return vkf_fail(VKF_ERROR_BAD_MODEL, "processor_config.json: \"feature_extractor\" must be an object");
        }
    }
    char file[64];
    snprintf(file, sizeof file, "%s%s", F, fe == own ? "" : " feature_extractor");
    int64_t size = 0, rate = 0, hop = 0, chunk = 0, n_fft = 0;
    double pad = 0, dither = 0;
    vkf_status st = VKF_OK;
    json_t *type = json_object_get(fe, "feature_extractor_type");
    if (type && !(json_is_string(type) && strcmp(json_string_value(type), "WhisperFeatureExtractor") == 0)) {
        char q[VKF_QUOTE_SIZE];
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: feature_extractor_type %s is not WhisperFeatureExtractor", file,
                      json_is_string(type) ? vkf_quote(q, sizeof q, json_string_value(type), (size_t)-1) : "(not a string)");
    }
    if (st == VKF_OK) st = vkf_hf_int(fe, file, "feature_size", 1, 1024, 80, &size);
    if (st == VKF_OK) st = vkf_hf_int(fe, file, "sampling_rate", 1000, 1000000, 16000, &rate);
    if (st == VKF_OK) st = vkf_hf_int(fe, file, "hop_length", 1, 65536, 160, &hop);
    if (st == VKF_OK) st = vkf_hf_int(fe, file, "chunk_length", 1, 3600, 30, &chunk);
    if (st == VKF_OK) st = vkf_hf_int(fe, file, "n_fft", 2, 65536, 400, &n_fft);
    if (st == VKF_OK) st = vkf_hf_float(fe, file, "padding_value", -1e30, 1e30, 0.0, &pad);
    if (st == VKF_OK) st = vkf_hf_float(fe, file, "dither", -1e30, 1e30, 0.0, &dither);
    if (st == VKF_OK && dither != 0.0)
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: dither %g adds random noise to the features; vkformer computes them "
                      "without (dither 0)", file, dither);
    json_decref(own);
    VKF_TRY(st);
    uint64_t samples = (uint64_t)chunk * (uint64_t)rate;
    *mel = (vkf_mel_spec){.sample_rate = (uint32_t)rate, .n_fft = (uint32_t)n_fft, .hop = (uint32_t)hop,
                          .n_mels = (uint32_t)size, .n_samples = (uint32_t)samples,
                          .frames = (uint32_t)(samples / (uint64_t)hop), .f_min = 0.0, .f_max = 8000.0,
                          .padding_value = (float)pad};
    if (hop > n_fft)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: hop_length %lld is longer than n_fft %lld", file, (long long)hop,
                        (long long)n_fft);
    if (samples < (uint64_t)n_fft || samples > 64000000u)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: chunk_length %lld s at %lld Hz is outside n_fft..64000000 samples",
                        file, (long long)chunk, (long long)rate);
    if (8000.0 > (double)(rate / 2))
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: sampling_rate %lld Hz is below the mel filters' 16000 Hz (their "
                        "top is 8000 Hz)", file, (long long)rate);
    if ((uint32_t)size != s->audio_mels)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: feature_size %lld but config.json's num_mel_bins is %u", file,
                        (long long)size, s->audio_mels);
    if (mel->frames != s->audio_frames)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: a %lld s window gives %u frames, but the encoder takes %u "
                        "(2 x max_source_positions)", file, (long long)chunk, mel->frames, s->audio_frames);
    return vkf_mel_spec_check(mel) == VKF_OK
               ? VKF_OK
               : vkf_fail(VKF_ERROR_BAD_MODEL, "%s: the feature extractor's settings are not usable", file);
}

static vkf_status open_folder(const vkf_probe *p, const void *data, size_t size, vkf_loader *L, vkf_family_model *fm)
{
    (void)data, (void)size;
    const char *dir = p->path;
    bool *tied = calloc(1, sizeof *tied);
    if (!tied) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    fm->state = tied;
    json_t *cfg = NULL;
    vkf_status st = vkf_hf_read_json(dir, "config.json", false, &cfg);
    if (st == VKF_OK) st = parse_config(cfg, &fm->spec, tied);
    if (st == VKF_OK) st = vkf_hf_generation(dir, cfg, fm);
    if (st == VKF_OK) st = parse_extractor(dir, &fm->spec, &fm->mel);
    json_decref(cfg);
    VKF_TRY(st);
    snprintf(fm->name, sizeof fm->name, "whisper");
    fm->default_src_lang = -1;
    fm->has_text = false;       /* its byte-level BPE tokenizer is not read yet: ids in and out */
    return vkf_hf_open_weights(dir, L);
}

/* sinusoids(length, channels) of modeling_whisper, in float32 as torch computes it:
 * inv_j = exp(-log(10000) / (half - 1) * j), angle = p * inv_j, [sin | cos]. */
static vkf_status whisper_sinusoids(vkf_loader *L, uint32_t rows, uint32_t d, vkf_tensor **out)
{
    if (L->dry_run) return VKF_OK;
    uint32_t half = d / 2;
    float *t = malloc((size_t)rows * d * sizeof *t);
    if (!t) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for the encoder's positions");
    float inc = (float)(log(10000.0) / (double)(half - 1));
    for (uint32_t j = 0; j < half; j++) {
        float inv = (float)exp((double)(-inc * (float)j));
        for (uint32_t p = 0; p < rows; p++) {
            float angle = (float)p * inv;
            t[(size_t)p * d + j] = (float)sin((double)angle);
            t[(size_t)p * d + half + j] = (float)cos((double)angle);
        }
    }
    vkf_status st = vkf_tensor2(L->ctx, L->act, rows, d, out);
    if (st == VKF_OK) st = vkf_upload_floats(*out, t, (uint64_t)rows * d);
    free(t);
    return st;
}

static vkf_status load(vkf_loader *L, const vkf_family_model *fm)
{
    const bool *tied = fm->state;
    vkf_arch_weights *w = L->w;
    const vkf_arch_spec *c = L->spec;
    uint32_t d = c->d_model, S = c->audio_frames / 2;
    /* the stem and the encoder's positions */
    VKF_TRY(vkf_ld_conv1d(L, "model.encoder.conv1", d, c->audio_mels, 3, &w->conv1));
    VKF_TRY(vkf_ld_conv1d(L, "model.encoder.conv2", d, d, 3, &w->conv2));
    static const char pos[] = "model.encoder.embed_positions.weight";
    if (vkf_st_find(L->file, pos)) VKF_TRY(vkf_ld_act_table(L, pos, S, d, &w->pe));
    else VKF_TRY(whisper_sinusoids(L, S, d, &w->pe));
    /* the decoder's tokens (tied to proj_out) and learned positions */
    static const char *const tied_names[] = {"model.decoder.embed_tokens.weight", "proj_out.weight"};
    VKF_TRY(vkf_hf_tied_table(L, tied_names, *tied ? 2 : 1, c->tgt_vocab, &w->tgt_embed, NULL));
    VKF_TRY(vkf_ld_positions(L, "model.decoder.embed_positions.weight", &w->pe_dec));
    VKF_TRY(vkf_hf_load_layers_k_unbiased(L, "model."));
    VKF_TRY(vkf_ld_generator(L, *tied, "proj_out.weight", NULL));
    char hint[160];
    snprintf(hint, sizeof hint, "config.json says %u encoder and %u decoder layers of a "
             "WhisperForConditionalGeneration", c->encoder_layers, c->decoder_layers);
    return vkf_ld_check_unexpected(L, hint);
}

static vkf_status encode(const vkf_family_model *fm, const char *text, const char *lang, int32_t *out_ids,
                         uint32_t capacity, uint32_t *out_count)
{
    (void)fm, (void)text, (void)lang, (void)out_ids, (void)capacity, (void)out_count;
    return vkf_fail(VKF_ERROR_UNSUPPORTED, "Whisper's tokenizer is not read yet: give target ids");
}

static vkf_status decode(const vkf_family_model *fm, const int32_t *ids, uint32_t count, char *out_text,
                         size_t capacity)
{
    (void)fm, (void)ids, (void)count, (void)out_text, (void)capacity;
    return vkf_fail(VKF_ERROR_UNSUPPORTED, "Whisper's tokenizer is not read yet");
}

const vkf_family vkf_family_whisper = {
    .name = "whisper",
    .probe = probe,
    .open = open_folder,
    .load = load,
    .encode = encode,
    .decode = decode,
    .free = free,
};

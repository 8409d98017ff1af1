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
#include "tokenizers/tokenizer.h"

#include <ctype.h>
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

/* The family's state: tied embeddings, generation's settings and the tokenizer. */
typedef struct whisper_state {
    bool tied;
    vkf_whisper_gen gen;
} whisper_state;

static void whisper_free(void *state)
{
    whisper_state *w = state;
    if (!w) return;
    for (uint32_t i = 0; i < w->gen.n_langs; i++) free(w->gen.lang_tokens[i]);
    free(w->gen.lang_tokens);
    free(w->gen.lang_ids);
    free(w->gen.begin_suppress);
    vkf_bpe_free(w->gen.text);
    free(w);
}

/* An id key of generation_config.json: absent or null leaves *out as it is. */
static vkf_status gen_id(json_t *g, const char *F, const char *key, uint32_t vocab, int32_t *out)
{
    json_t *v = json_object_get(g, key);
    if (!v || json_is_null(v)) return VKF_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (json_int_t)vocab)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" must be an id of the vocabulary (0..%u)", F, key, vocab - 1);
    *out = (int32_t)json_integer_value(v);
    return VKF_OK;
}

/* forced_decoder_ids [[1, id or null], [2, id], ...] from positions 1 on, as generate() takes them. */
static vkf_status parse_forced(json_t *f, const char *F, uint32_t vocab, vkf_whisper_gen *g)
{
    if (!f || json_is_null(f)) return VKF_OK;
    if (!json_is_array(f) || json_array_size(f) > VKF_WHISPER_MAX_FORCED)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"forced_decoder_ids\" must be a list of at most %d [index, id] pairs",
                        F, VKF_WHISPER_MAX_FORCED);
    for (size_t i = 0; i < json_array_size(f); i++) {
        json_t *e = json_array_get(f, i), *k = json_array_get(e, 0), *v = json_array_get(e, 1);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_integer(k) ||
            !(json_is_null(v) || (json_is_integer(v) && json_integer_value(v) >= 0 &&
                                  json_integer_value(v) < (json_int_t)vocab)))
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: forced_decoder_ids entry %zu must be [index, id or null] with an "
                            "id of the vocabulary", F, i);
        /* generate() takes the entries whose indices run 1, 2, ... and refuses any after a gap */
        if (json_integer_value(k) != (json_int_t)i + 1) {
            if (i == 0) return VKF_OK; /* not the prompt pattern: generate() ignores the list */
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: forced_decoder_ids entry %zu has index %lld, not %zu: not "
                            "Whisper's prompt pattern", F, i, (long long)json_integer_value(k), i + 1);
        }
        g->forced[g->n_forced++] = json_is_null(v) ? -1 : (int32_t)json_integer_value(v);
    }
    return VKF_OK;
}

/* What WhisperForConditionalGeneration.generate reads of generation_config.json
 * (config.json's where the folder has none, and config.json's forced_decoder_ids
 * where generation_config.json has none). */
static vkf_status parse_whisper_gen(const char *dir, json_t *cfg, vkf_family_model *fm, vkf_whisper_gen *g)
{
    const uint32_t V = fm->spec.tgt_vocab;
    json_t *own = NULL;
    VKF_TRY(vkf_hf_read_json(dir, "generation_config.json", true, &own));
    json_t *j = own ? own : cfg;
    const char *F = own ? "generation_config.json" : "config.json";
    g->sot = fm->spec.decoder_start_id, g->eos = fm->spec.eos_id;
    g->no_timestamps = g->transcribe = g->translate = g->max_initial = -1;
    g->multilingual = -1;
    /* the timestamp ids follow it; a vocabulary that ends with it has none (transcription
     * then refuses timestamps) */
    vkf_status st = gen_id(j, F, "no_timestamps_token_id", V, &g->no_timestamps);
    json_t *v;
    if (st == VKF_OK && (v = json_object_get(j, "is_multilingual")) && !json_is_null(v)) {
        if (!json_is_boolean(v)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"is_multilingual\" must be true or false", F);
        else g->multilingual = json_is_true(v);
    }
    if (st == VKF_OK && (v = json_object_get(j, "lang_to_id")) && !json_is_null(v)) {
        size_t n = json_is_object(v) ? json_object_size(v) : 0;
        if (!json_is_object(v) || n > 1024) {
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"lang_to_id\" must be an object of at most 1024 tokens", F);
        } else {
            g->has_lang_to_id = true;
            g->lang_tokens = calloc(n ? n : 1, sizeof *g->lang_tokens);
            g->lang_ids = calloc(n ? n : 1, sizeof *g->lang_ids);
            if (!g->lang_tokens || !g->lang_ids) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
            const char *key;
            json_t *id;
            json_object_foreach(v, key, id) {
                if (st != VKF_OK) break;
                if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (json_int_t)V) {
                    char q[VKF_QUOTE_SIZE];
                    st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: lang_to_id %s is not an id of the vocabulary", F,
                                  vkf_quote(q, sizeof q, key, (size_t)-1));
                    break;
                }
                /* "<|code|>": the code is what transcription reports as the language */
                size_t kl = strlen(key), cl = kl >= 4 ? kl - 4 : 0;
                bool good = kl >= 5 && kl <= 44 && !strncmp(key, "<|", 2) && !strcmp(key + kl - 2, "|>");
                for (size_t c = 0; good && c < cl; c++)
                    good = isalnum((unsigned char)key[2 + c]) || key[2 + c] == '_' || key[2 + c] == '-';
                if (!good) {
                    char q[VKF_QUOTE_SIZE];
                    st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: lang_to_id key %s is not a language token \"<|code|>\" "
                                  "(a code of 1 to 40 letters, digits, '_' or '-')", F,
                                  vkf_quote(q, sizeof q, key, (size_t)-1));
                    break;
                }
                if (!(g->lang_tokens[g->n_langs] = strdup(key))) {
                    st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
                    break;
                }
                g->lang_ids[g->n_langs++] = (int32_t)json_integer_value(id);
            }
        }
    }
    if (st == VKF_OK && (v = json_object_get(j, "task_to_id")) && !json_is_null(v)) {
        if (!json_is_object(v)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"task_to_id\" must be an object", F);
        g->has_task_to_id = true;
        if (st == VKF_OK) st = gen_id(v, "generation_config.json task_to_id", "transcribe", V, &g->transcribe);
        if (st == VKF_OK) st = gen_id(v, "generation_config.json task_to_id", "translate", V, &g->translate);
    }
    if (st == VKF_OK) {
        json_t *f = json_object_get(j, "forced_decoder_ids");
        if ((!f || json_is_null(f)) && cfg) f = json_object_get(cfg, "forced_decoder_ids"), F = "config.json";
        st = parse_forced(f, F, V, g);
        F = own ? "generation_config.json" : "config.json";
    }
    if (st == VKF_OK && (v = json_object_get(j, "begin_suppress_tokens")) && !json_is_null(v)) {
        size_t n = json_is_array(v) ? json_array_size(v) : 0;
        if (!json_is_array(v) || n > 65536)
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"begin_suppress_tokens\" must be a list of at most 65536 ids", F);
        if (st == VKF_OK && n && !(g->begin_suppress = malloc(n * sizeof *g->begin_suppress)))
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (size_t i = 0; st == VKF_OK && i < n; i++) {
            json_t *e = json_array_get(v, i);
            if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= (json_int_t)V)
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: begin_suppress_tokens entry %zu is not an id of the vocabulary",
                              F, i);
            else g->begin_suppress[g->n_begin++] = (int32_t)json_integer_value(e);
        }
    }
    int64_t mi = -1;
    if (st == VKF_OK && (v = json_object_get(j, "max_initial_timestamp_index")) && !json_is_null(v))
        st = vkf_hf_int(j, F, "max_initial_timestamp_index", 0, 1 << 20, 0, &mi);
    g->max_initial = (int32_t)mi;
    if (st == VKF_OK) st = vkf_hf_int(j, F, "max_length", 2, INT32_MAX, 20, &g->max_length);
    if (st == VKF_OK) st = vkf_hf_int(j, F, "max_new_tokens", 1, INT32_MAX, 0, &g->max_new_tokens);
    if (st == VKF_OK) st = vkf_hf_bool(j, F, "return_timestamps", false, &g->return_timestamps);
    json_decref(own);
    return st;
}

static vkf_status open_folder(const vkf_probe *p, const void *data, size_t size, vkf_loader *L, vkf_family_model *fm)
{
    (void)data, (void)size;
    const char *dir = p->path;
    whisper_state *w = calloc(1, sizeof *w);
    if (!w) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    fm->state = w;
    json_t *cfg = NULL;
    vkf_status st = vkf_hf_read_json(dir, "config.json", false, &cfg);
    if (st == VKF_OK) st = parse_config(cfg, &fm->spec, &w->tied);
    if (st == VKF_OK) st = vkf_hf_generation(dir, cfg, fm);
    if (st == VKF_OK) st = parse_extractor(dir, &fm->spec, &fm->mel);
    if (st == VKF_OK) st = parse_whisper_gen(dir, cfg, fm, &w->gen);
    json_decref(cfg);
    VKF_TRY(st);
    /* the tokenizer where the folder has one (tokenizer.json, or vocab.json and merges.txt) */
    if (vkf_hf_file(dir, "tokenizer.json", NULL) || vkf_hf_file(dir, "vocab.json", NULL))
        VKF_TRY(vkf_bpe_open(dir, VKF_BPE_WHISPER, &w->gen.text));
    fm->whisper = &w->gen;
    snprintf(fm->name, sizeof fm->name, "whisper");
    fm->default_src_lang = -1;
    fm->has_text = w->gen.text != NULL; /* ids -> text (the source is audio) */
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
    const bool *tied = &((const whisper_state *)fm->state)->tied;
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
    return vkf_fail(VKF_ERROR_UNSUPPORTED, "Whisper reads audio, not source text (vkf_model_transcribe)");
}

static vkf_status decode(const vkf_family_model *fm, const int32_t *ids, uint32_t count, char *out_text,
                         size_t capacity)
{
    const vkf_bpe_text *t = fm->whisper ? fm->whisper->text : NULL;
    if (!t) return vkf_fail(VKF_ERROR_UNSUPPORTED, "this Whisper folder has no tokenizer (tokenizer.json or vocab.json "
                            "and merges.txt): ids only");
    char *text = NULL;
    size_t len = 0;
    VKF_TRY(vkf_bpe_decode(t, ids, count, /*skip_special=*/true, &text, &len));
    vkf_status st = VKF_OK;
    if (len + 1 > capacity)
        st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text of %u ids needs %zu bytes, %zu given", count, len + 1,
                      capacity);
    else memcpy(out_text, text, len + 1);
    free(text);
    return st;
}

const vkf_family vkf_family_whisper = {
    .name = "whisper",
    .probe = probe,
    .open = open_folder,
    .load = load,
    .encode = encode,
    .decode = decode,
    .free = whisper_free,
};

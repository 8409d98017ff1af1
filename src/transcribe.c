/* Transcription with Whisper (vkf_model_transcribe): what transformers 5.12's
 * WhisperForConditionalGeneration.generate does around generate(), for one
 * recording (batch 1), in its order:
 *   features   audio up to one window padded to it (the extractor's default);
 *              longer audio: the whole recording's log-mel (padding "longest",
 *              truncation off), frames = samples / hop, its max - 8 floor over
 *              the whole recording;
 *   prompt     _retrieve_init_tokens: <|startoftranscript|>, forced_decoder_ids
 *              (unless a language or task is given), the language (given, or
 *              detected: detect_language's one decoder step on the first window,
 *              argmax over lang_to_id's tokens), the task, <|notimestamps|>
 *              without timestamps;
 *   windows    _retrieve_segment's seeking: each window (seek .. seek + window,
 *              zero-padded) decoded with the prompt as target prefix; its tokens
 *              split at timestamp pairs into segments (without the timestamp rules
 *              too: a model may emit timestamp ids anyway) and the next window
 *              starts at the last pair's timestamp (after the window where the
 *              sequence ends in a single timestamp or holds no pair);
 *   limits     _set_max_new_tokens_and_length: max_length + the prompt's length
 *              - 1 (at most max_target_positions) counting the prompt.
 * Each window's decoding (greedy or beam search, begin_suppress_tokens,
 * suppress_tokens and the timestamp rules in the decode step's logits
 * processor on the device) is the decode layer's vkf_decode_generate_audio. */
#include "model.h"
#include "tokenizers/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIME_PRECISION 0.02             /* seconds per timestamp token (generate()'s time_precision) */
#define FEATURE_PRECISION 0.01          /* seconds per feature frame (time_precision_features) */
#define INPUT_STRIDE 2                  /* frames per encoder position (conv1 stride x conv2 stride) */
#define MAX_SAMPLES 64000000u           /* the longest recording whose features are computed at once */

void vkf_transcribe_options_init(vkf_transcribe_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->timestamps = -1;
}

void vkf_transcript_free(vkf_transcript *t)
{
    if (!t) return;
    for (uint32_t i = 0; i < t->n_segments; i++) free(t->segments[i].text);
    free(t->segments);
    free(t->ids);
    free(t->text);
    free(t);
}

/* The transcript under construction. */
typedef struct builder {
    vkf_transcript *t;
    uint32_t cap_ids, cap_segments;
} builder;

static vkf_status add_segment(builder *b, double start, double end, const int32_t *ids, uint32_t n)
{
    vkf_transcript *t = b->t;
    if (t->n_ids + n > b->cap_ids) {
        uint32_t cap = (t->n_ids + n) * 2 + 64;
        int32_t *p = realloc(t->ids, (size_t)cap * sizeof *p);
        if (!p) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for the transcript");
        t->ids = p, b->cap_ids = cap;
    }
    if (t->n_segments == b->cap_segments) {
        uint32_t cap = b->cap_segments * 2 + 8;
        vkf_segment *p = realloc(t->segments, (size_t)cap * sizeof *p);
        if (!p) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for the transcript");
        t->segments = p, b->cap_segments = cap;
    }
    if (n) memcpy(t->ids + t->n_ids, ids, (size_t)n * sizeof *ids);
    t->segments[t->n_segments++] = (vkf_segment){start, end, t->n_ids, n, NULL};
    t->n_ids += n;
    return VKF_OK;
}

/* _retrieve_segment: the window's tokens (eos removed) into segments; *out_offset
 * the frames to seek by. */
static vkf_status split_window(builder *b, const int32_t *seq, uint32_t n, int32_t tb, double time_offset,
                               uint32_t num_frames, uint32_t *out_offset)
{
    /* indices i (1..n-1) where tokens i-1 and i are both timestamps */
    uint32_t *cuts = malloc(((size_t)n + 1) * sizeof *cuts), n_cuts = 0;
    if (!cuts) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 1; i < n; i++)
        if (seq[i - 1] >= tb && seq[i] >= tb) cuts[n_cuts++] = i;
    bool single_ending = n >= 2 ? seq[n - 2] < tb && seq[n - 1] >= tb : false;
    vkf_status st = VKF_OK;
    if (n_cuts) {
        if (single_ending) cuts[n_cuts++] = n;
        else cuts[n_cuts - 1] += 1;
        uint32_t last = 0;
        for (uint32_t i = 0; st == VKF_OK && i < n_cuts; i++) {
            bool is_last = i + 1 == n_cuts;
            const int32_t *s = seq + last;
            uint32_t len = cuts[i] - last;
            int32_t start_pos = s[0] - tb;
            int32_t end_pos = s[!is_last || single_ending ? len - 1 : len - 2] - tb;
            st = add_segment(b, time_offset + (double)start_pos * TIME_PRECISION,
                             time_offset + (double)end_pos * TIME_PRECISION, s, len);
            last = cuts[i];
        }
        if (single_ending) *out_offset = num_frames;
        else *out_offset = (uint32_t)(seq[last - 2] - tb) * INPUT_STRIDE;
    } else {
        double last_pos = (double)(int64_t)((double)num_frames * FEATURE_PRECISION / TIME_PRECISION);
        int32_t last_ts = -1;
        for (uint32_t i = 0; i < n; i++)
            if (seq[i] >= tb) last_ts = seq[i];
        if (last_ts >= 0 && last_ts != tb) last_pos = (double)(last_ts - tb);
        st = add_segment(b, time_offset, time_offset + last_pos * TIME_PRECISION, seq, n);
        *out_offset = num_frames;
    }
    free(cuts);
    return st;
}

/* HF's language_to_id: a code or a name (any case, transformers' aliases) whose
 * token "<|xx|>" lang_to_id holds. */
static vkf_status language_id(const vkf_whisper_gen *g, const char *language, int32_t *out_id, char *code, size_t cap)
{
    char q[VKF_QUOTE_SIZE];
    int32_t i = vkf_whisper_language_index(language);
    if (i < 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "unknown language %s: give a code (en, de, ...), a name (english, "
                        "german, ...) or auto", vkf_quote(q, sizeof q, language, (size_t)-1));
    char token[32];
    snprintf(token, sizeof token, "<|%s|>", vkf_whisper_language_code((uint32_t)i));
    for (uint32_t k = 0; k < g->n_langs; k++)
        if (strcmp(g->lang_tokens[k], token) == 0) {
            *out_id = g->lang_ids[k];
            snprintf(code, cap, "%s", vkf_whisper_language_code((uint32_t)i));
            return VKF_OK;
        }
    return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "language %s (%s) is not one of this model's (generation_config.json's "
                    "lang_to_id has %u)", vkf_quote(q, sizeof q, language, (size_t)-1), token, g->n_langs);
}

/* The code of a language token id ("en"), "" when lang_to_id lacks it. */
static void language_code(const vkf_whisper_gen *g, int32_t id, char *code, size_t cap)
{
    code[0] = 0;
    for (uint32_t k = 0; k < g->n_langs; k++) {
        const char *t = g->lang_tokens[k];
        size_t n = strlen(t);
        if (g->lang_ids[k] == id && n > 4 && strncmp(t, "<|", 2) == 0 && strcmp(t + n - 2, "|>") == 0) {
            snprintf(code, cap, "%.*s", (int)(n - 4), t + 2);
            return;
        }
    }
}

/* One window (M, F) of the features (M, total) from frame `seek`: num frames, zeros after. */
static void cut_window(const float *feats, uint32_t M, uint64_t total, uint64_t seek, uint32_t num, uint32_t F,
                       float *out)
{
    for (uint32_t m = 0; m < M; m++) {
        const float *row = feats + (uint64_t)m * total + seek;
        float *dst = out + (uint64_t)m * F;
        memcpy(dst, row, (size_t)num * sizeof *dst);
        memset(dst + num, 0, (size_t)(F - num) * sizeof *dst);
    }
}

/* detect_language: argmax over lang_to_id's ids of the logits after <|startoftranscript|>. */
static vkf_status detect_language(vkf_arch *a, const vkf_whisper_gen *g, const float *window, int32_t *out_id)
{
    if (!g->n_langs) return vkf_fail(VKF_ERROR_BAD_MODEL, "generation_config.json: lang_to_id is empty");
    uint32_t V = a->spec.tgt_vocab;
    float *logits = malloc((size_t)V * sizeof *logits);
    if (!logits) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    const int32_t start[1] = {g->sot};
    const int32_t *ids[1] = {start};
    uint32_t len[1] = {1};
    vkf_sequences tgt = {1, ids, len};
    vkf_status st = vkf_arch_forward_features(a, window, 1, &tgt, logits, V);
    if (st == VKF_OK) {
        /* the lowest id among equal maxima, as torch's argmax over the masked row */
        int32_t best = -1;
        for (uint32_t v = 0; v < V; v++) {
            bool lang = false;
            for (uint32_t k = 0; k < g->n_langs && !lang; k++) lang = g->lang_ids[k] == (int32_t)v;
            if (lang && (best < 0 || logits[v] > logits[best])) best = (int32_t)v;
        }
        *out_id = best;
    }
    free(logits);
    return st;
}

/* A recording under transcription: what vkf_transcription_begin settled (the
 * features, the prompt, the decode options) and how far the windows have gone. */
struct vkf_transcription {
    vkf_arch *a;
    vkf_decoder *d;
    const vkf_whisper_gen *g;
    vkf_transcribe_options o;
    vkf_transcript *t;                  /* under construction; handed out by finish */
    builder b;
    float *feats, *window;              /* (M, total) the recording's features; (M, F) one window */
    uint32_t M, F;
    uint64_t total, seek;
    uint32_t texts;                     /* segments whose text is decoded */
    uint32_t windows_told;              /* windows on_window has been called for */
    int32_t init[VKF_WHISPER_MAX_FORCED + 4];
    uint32_t n_init;
    const int32_t *prefix_ids[1];
    uint32_t prefix_len[1];
    vkf_sequences prefix;
    vkf_generate_options go;
    vkf_audio_rules rules;
    int32_t tb_split;
    int32_t *ids;                       /* (max_new + 1) one window's tokens */
};

void vkf_transcription_free(vkf_transcription *x)
{
    if (!x) return;
    vkf_transcript_free(x->t);
    free(x->ids), free(x->feats), free(x->window);
    free(x);
}

/* vkf_transcription_begin, its errors named after fn (the public call) */
static vkf_status begin(const char *fn, vkf_model *m, const float *samples, uint64_t count,
                        const vkf_transcribe_options *options, vkf_transcription **out)
{
    if (out) *out = NULL;
    if (!m || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, m ? "out" : "model");
    vkf_arch *a;
    vkf_decoder *d;
    const vkf_family_model *fm;
    vkf_model_parts(m, &a, &d, &fm);
    const vkf_whisper_gen *g = fm->whisper;
    if (!g) return vkf_fail(VKF_ERROR_STATE, "%s: not a Whisper model (family %s)", fn, fm->name);
    if (!samples && count) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: samples is NULL", fn);
    for (uint64_t i = 0; i < count; i++)
        if (!isfinite(samples[i]))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: sample %llu is not finite", fn, (unsigned long long)i);
    vkf_transcribe_options o;
    vkf_transcribe_options_init(&o);
    if (options) o = *options;
    const char *language = o.language && strcmp(o.language, "auto") != 0 ? o.language : NULL;
    const char *task = o.task;
    if (task && strcmp(task, "transcribe") != 0 && strcmp(task, "translate") != 0) {
        char q[VKF_QUOTE_SIZE];
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: task %s is neither transcribe nor translate", fn,
                        vkf_quote(q, sizeof q, task, (size_t)-1));
    }
    if (o.timestamps < -1 || o.timestamps > 1)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: timestamps %d is not -1, 0 or 1", fn, o.timestamps);
    /* _set_language_and_task's checks */
    if (g->multilingual == 0 && (language || task))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: this model is English-only (is_multilingual false): no "
                        "language or task can be given", fn);
    if (language && !g->has_lang_to_id)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: generation_config.json has no lang_to_id: this model takes "
                        "no language", fn);
    if (task && !g->has_task_to_id)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: generation_config.json has no task_to_id: this model takes "
                        "no task", fn);
    int32_t task_id = task ? (strcmp(task, "transcribe") == 0 ? g->transcribe : g->translate) : -1;
    if (task && task_id < 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: generation_config.json's task_to_id has no %s", fn, task);
    const vkf_mel_spec *mel = &fm->mel;
    const uint32_t M = mel->n_mels, F = mel->frames, T = a->spec.max_len;
    if (count > MAX_SAMPLES)
        return vkf_fail(VKF_ERROR_TOO_LARGE, "%s: %llu samples (%.0f s) are more than the %u (%.0f s) transcribed at "
                        "once", fn, (unsigned long long)count, (double)count / mel->sample_rate, MAX_SAMPLES,
                        (double)MAX_SAMPLES / mel->sample_rate);
    vkf_transcription *x = calloc(1, sizeof *x);
    vkf_transcript *t = x ? calloc(1, sizeof *t) : NULL;
    if (!t) {
        free(x);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    x->a = a, x->d = d, x->g = g, x->o = o, x->t = t, x->b = (builder){t, 0, 0}, x->M = M, x->F = F;
    t->language_id = -1;
    t->seconds = (double)count / mel->sample_rate;
    /* the features: one padded window, or the whole recording */
    vkf_mel_spec whole = *mel;
    bool shortform = count <= mel->n_samples;
    if (!shortform) whole.n_samples = (uint32_t)count, whole.frames = (uint32_t)(count / mel->hop);
    const uint64_t total = x->total = whole.frames;
    x->feats = malloc((size_t)M * total * sizeof *x->feats), x->window = malloc((size_t)M * F * sizeof *x->window);
    float *feats = x->feats, *window = x->window;
    vkf_status st = feats && window ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for features");
    if (st == VKF_OK) st = vkf_mel_features(&whole, samples, count, feats);
    bool timestamps = o.timestamps < 0 ? g->return_timestamps : o.timestamps == 1;
    if (!shortform) timestamps = true;
    if (st == VKF_OK && timestamps && g->no_timestamps < 0)
        st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: generation_config.json has no no_timestamps_token_id: this model "
                      "gives no timestamps%s", fn, shortform ? "" : " (audio longer than one window needs them)");
    else if (st == VKF_OK && timestamps && (uint32_t)g->no_timestamps + 1 >= a->spec.tgt_vocab)
        st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: no_timestamps_token_id %d is the vocabulary's last id: this model "
                      "has no timestamp tokens%s", fn, g->no_timestamps,
                      shortform ? "" : " (audio longer than one window needs them)");
    t->timestamps = timestamps;
    /* _retrieve_init_tokens */
    int32_t *init = x->init;
    uint32_t n_init = 0;
    init[n_init++] = g->sot;
    if (!language && !task)
        for (uint32_t i = 0; i < g->n_forced; i++) init[n_init++] = g->forced[i];
    bool lang_undefined = n_init <= 1 || init[1] < 0;
    int32_t lang = -1;
    if (st == VKF_OK && language) {
        st = language_id(g, language, &lang, t->language, sizeof t->language);
    } else if (st == VKF_OK && g->has_lang_to_id && lang_undefined) {
        cut_window(feats, M, total, 0, total < F ? (uint32_t)total : F, F, window);
        st = detect_language(a, g, window, &lang);
        t->language_detected = true;
    }
    if (lang >= 0) {
        if (n_init > 1) init[1] = lang;
        else init[n_init++] = lang;
    }
    if (task_id >= 0) {
        init[n_init++] = task_id;
        for (uint32_t i = 0; i < n_init; i++) /* replace_or_add */
            if (init[i] == g->transcribe || init[i] == g->translate) init[i] = task_id;
    } else if (language && g->has_task_to_id) {
        bool has = false;
        for (uint32_t i = 0; i < n_init; i++) has |= init[i] >= 0 && (init[i] == g->transcribe || init[i] == g->translate);
        if (!has && g->transcribe >= 0) init[n_init++] = g->transcribe;
    }
    if (!timestamps && g->no_timestamps >= 0 && init[n_init - 1] != g->no_timestamps) init[n_init++] = g->no_timestamps;
    else if (timestamps && init[n_init - 1] == g->no_timestamps) n_init--;
    uint32_t w = 0;
    for (uint32_t i = 0; i < n_init; i++)
        if (init[i] >= 0) init[w++] = init[i];
    n_init = x->n_init = w;
    for (uint32_t i = 0; i < n_init && i < 8; i++) t->prompt[i] = init[i];
    t->n_prompt = n_init < 8 ? n_init : 8;
    if (n_init > 1 && lang >= 0) t->language_id = lang;
    if (t->language_id >= 0 && !t->language[0]) language_code(g, t->language_id, t->language, sizeof t->language);
    /* _set_max_new_tokens_and_length */
    uint32_t max_new = 0;
    if (st == VKF_OK) {
        if (g->max_new_tokens) {
            if ((uint64_t)g->max_new_tokens + n_init > T)
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: max_new_tokens %lld and a prompt of %u tokens pass "
                              "max_target_positions %u", fn, (long long)g->max_new_tokens, n_init, T);
            max_new = (uint32_t)g->max_new_tokens;
        } else {
            uint64_t initial = n_init - 1 < T / 2 - 1 ? n_init - 1 : T / 2 - 1;
            uint64_t max_length = (uint64_t)g->max_length + initial;
            if (max_length > T) max_length = T;
            if (max_length <= n_init)
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: max_length %lld leaves no new token after a prompt of %u", fn,
                              (long long)g->max_length, n_init);
            else max_new = (uint32_t)(max_length - n_init);
        }
    }
    vkf_generate_options *go = &x->go;
    *go = fm->defaults;
    if (o.beams) go->beams = o.beams;
    go->n_best = 1;
    go->sample = false; /* generate_with_fallback: temperature None is greedy (or beams), whatever do_sample says */
    go->max_new = max_new;
    go->on_tokens = NULL, go->on_progress = NULL;
    x->prefix_ids[0] = x->init + 1, x->prefix_len[0] = n_init - 1;
    x->prefix = (vkf_sequences){1, x->prefix_ids, x->prefix_len};
    go->target_prefix = &x->prefix;
    const int32_t tb = timestamps ? g->no_timestamps + 1 : 0;
    x->tb_split = g->no_timestamps >= 0 ? g->no_timestamps + 1 : (int32_t)a->spec.tgt_vocab + 1;
    x->rules = (vkf_audio_rules){g->begin_suppress, g->n_begin, tb, g->no_timestamps, g->max_initial, g->eos};
    x->ids = malloc(((size_t)max_new + 1) * sizeof *x->ids);
    if (st == VKF_OK && !x->ids) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (st != VKF_OK) {
        vkf_transcription_free(x);
        return st;
    }
    *out = x;
    return VKF_OK;
}

vkf_status vkf_transcription_begin(vkf_model *model, const float *samples, uint64_t count,
                                   const vkf_transcribe_options *options, vkf_transcription **out)
{
    return begin("vkf_transcription_begin", model, samples, count, options, out);
}

vkf_status vkf_transcription_next(vkf_transcription *x, bool *out_done)
{
    static const char fn[] = "vkf_transcription_next";
    if (!x || !out_done)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, x ? "out_done" : "transcription");
    vkf_transcript *t = x->t;
    if (x->seek < x->total) {
        uint32_t num = x->total - x->seek < x->F ? (uint32_t)(x->total - x->seek) : x->F;
        if (x->o.on_progress)
            x->o.on_progress(x->o.on_progress_user, (double)x->seek * FEATURE_PRECISION, t->seconds);
        cut_window(x->feats, x->M, x->total, x->seek, num, x->F, x->window);
        uint32_t n = 0;
        float score;
        VKF_TRY(vkf_decode_generate_audio(x->a, x->d, x->window, 1, &x->go, &x->rules, x->ids, &n, &score));
        t->windows++;
        uint32_t offset = num;
        double time_offset = (double)x->seek * TIME_PRECISION / INPUT_STRIDE;
        /* with or without the timestamp rules, generate() splits at timestamp ids (a
         * model may emit them after <|notimestamps|> too); none past the vocabulary */
        VKF_TRY(split_window(&x->b, x->ids, n, x->tb_split, time_offset, num, &offset));
        x->seek += offset;
    }
    /* the new segments' texts */
    for (; x->g->text && x->texts < t->n_segments; x->texts++) {
        vkf_segment *s = &t->segments[x->texts];
        size_t len = 0;
        VKF_TRY(vkf_bpe_decode(x->g->text, t->ids + s->first, s->count, true, &s->text, &len));
    }
    if (x->o.on_window && t->windows > x->windows_told) {
        x->windows_told = t->windows;
        x->o.on_window(x->o.on_window_user, t);
    }
    *out_done = x->seek >= x->total;
    return VKF_OK;
}

const vkf_transcript *vkf_transcription_progress(const vkf_transcription *x)
{
    return x ? x->t : NULL;
}

vkf_status vkf_transcription_finish(vkf_transcription *x, vkf_transcript **out)
{
    static const char fn[] = "vkf_transcription_finish";
    if (out) *out = NULL;
    vkf_status st = VKF_OK;
    if (!x || !out)
        st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", fn, x ? "out_transcript" : "transcription");
    else if (x->seek < x->total || x->texts < (x->g->text ? x->t->n_segments : 0))
        st = vkf_fail(VKF_ERROR_STATE, "%s: the recording is not done (vkf_transcription_next until out_done)", fn);
    vkf_transcript *t = x ? x->t : NULL;
    /* texts */
    if (st == VKF_OK && x->g->text) {
        size_t total_len = 1, used = 0;
        for (uint32_t i = 0; i < t->n_segments; i++) total_len += strlen(t->segments[i].text);
        if (!(t->text = malloc(total_len))) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (uint32_t i = 0; st == VKF_OK && i < t->n_segments; i++) {
            size_t len = strlen(t->segments[i].text);
            memcpy(t->text + used, t->segments[i].text, len);
            used += len;
        }
        if (st == VKF_OK) t->text[used] = 0;
    }
    if (st != VKF_OK) {
        vkf_transcription_free(x);
        return st;
    }
    x->t = NULL;
    vkf_transcription_free(x);
    *out = t;
    return VKF_OK;
}

vkf_status vkf_model_transcribe(vkf_model *m, const float *samples, uint64_t count,
                                const vkf_transcribe_options *options, vkf_transcript **out)
{
    vkf_transcription *x = NULL;
    VKF_TRY(begin("vkf_model_transcribe", m, samples, count, options, &x));
    bool done = false;
    vkf_status st = VKF_OK;
    while (st == VKF_OK && !done) st = vkf_transcription_next(x, &done);
    if (st != VKF_OK) {
        vkf_transcription_free(x);
        return st;
    }
    return vkf_transcription_finish(x, out);
}

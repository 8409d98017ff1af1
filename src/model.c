/* The public model object (vkformer.h): a model is loaded through the family
 * registry into the arch's spec and weights in the precision the options and the
 * device decide; the forward pass is the arch's, generation the decode layer's,
 * text and languages the family's. This file holds no graph, format or search. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vkf_model {
    vkf_context *ctx;                   /* borrowed */
    vkf_arch arch;                      /* spec, weights, attention choices, forward plans */
    vkf_decoder dec;                    /* generation plan and stats */
    const vkf_family *family;
    vkf_family_model fm;                /* text, languages, generation defaults */
    vkf_model_config cfg;               /* the public view */
    bool precision_auto_f16;            /* act is F16 because AUTO chose it */
};

void vkf_model_destroy(vkf_model *m)
{
    if (!m) return;
    vkf_decoder_reset(&m->dec);
    vkf_arch_drop_plans(&m->arch);
    vkf_arch_weights_free(&m->arch.spec, &m->arch.w);
    vkf_family_model_free(m->family, &m->fm);
    free(m);
}

vkf_status vkf_model_load(vkf_context *ctx, const char *path, vkf_model **out_model)
{
    return vkf_model_load_with(ctx, path, NULL, out_model);
}

/* The public config of a loaded spec. */
static void fill_config(vkf_model *m)
{
    const vkf_arch_spec *s = &m->arch.spec;
    vkf_model_config *c = &m->cfg;
    memset(c, 0, sizeof *c);
    c->d_model = s->d_model, c->n_heads = s->heads;
    c->n_encoder_layers = s->encoder_layers, c->n_decoder_layers = s->decoder_layers;
    c->d_ff = s->d_ff;
    c->activation = s->activation;
    c->norm_first = s->pre_norm;
    c->layer_norm_eps = s->norm_eps;
    c->src_vocab_size = s->src_vocab, c->tgt_vocab_size = s->tgt_vocab;
    c->max_len = s->max_len;
    c->embed_scale = s->embed_scale;
    c->pad_id = s->pad_id, c->bos_id = s->decoder_start_id, c->eos_id = s->eos_id;
    c->has_vocab = m->fm.has_text;
    c->activations = m->arch.act;
    c->format = m->family == vkf_family_vkformer() ? VKF_MODEL_VKFORMER : VKF_MODEL_HUGGING_FACE;
    snprintf(c->family, sizeof c->family, "%s", m->fm.name);
    c->head_dim = s->head_dim;
    c->n_languages = m->fm.n_langs;
    c->target_language_required = m->fm.target_lang_required;
    if (s->audio_mels) {
        c->audio_mels = s->audio_mels, c->audio_frames = s->audio_frames;
        c->audio_samples = m->fm.mel.n_samples, c->sample_rate = m->fm.mel.sample_rate;
    }
}

/* What the precision option and the device make of the activations (arch.act)
 * and the weights' storage (the loader's precision). */
static vkf_status resolve_precision(vkf_model *m, vkf_precision *precision)
{
    vkf_context *ctx = m->ctx;
    uint32_t hd = m->arch.spec.head_dim;
    /* VKFORMER_AUTO_PRECISION=f16|f32 overrides what auto means on this device
     * (tests run the GPU choice on lavapipe with it); f16 still needs 16-bit storage. */
    bool autoish = *precision == VKF_PRECISION_AUTO || *precision == VKF_PRECISION_INT8;
    const char *auto_env = autoish ? getenv("VKFORMER_AUTO_PRECISION") : NULL;
    bool auto_f16 = autoish && (auto_env && strcmp(auto_env, "f16") == 0   ? ctx->storage_16bit
                                : auto_env && strcmp(auto_env, "f32") == 0 ? false
                                                                           : vkf_auto_precision_f16(&ctx->info, ctx->storage_16bit));
    /* int8 keeps its int8 weights and takes the activations auto would: F16 on GPUs
     * with 16-bit storage (as CTranslate2's int8_float16), else F32 */
    bool int8_f16 = false;
    if (auto_f16) {
        if (hd <= VKF_ATTENTION_MAX_HEAD_DIM && *precision == VKF_PRECISION_INT8) {
            int8_f16 = true;
            vkf_log(ctx, VKF_LOG_INFO, "precision int8: int8 weights with F16 activations on \"%s\"%s",
                    ctx->info.name, auto_env ? " (VKFORMER_AUTO_PRECISION)" : ", a GPU with 16-bit storage");
        } else if (hd <= VKF_ATTENTION_MAX_HEAD_DIM) {
            *precision = VKF_PRECISION_F16;
            m->precision_auto_f16 = true;
            vkf_log(ctx, VKF_LOG_INFO, "precision auto: F16 weights and activations on \"%s\"%s (f32 to keep F32)",
                    ctx->info.name, auto_env ? " (VKFORMER_AUTO_PRECISION)" : ", a GPU with 16-bit storage");
        } else {
            vkf_log(ctx, VKF_LOG_INFO, "precision auto: F32 activations, as head_dim %u passes the F16 kernels' %u", hd,
                    VKF_ATTENTION_MAX_HEAD_DIM);
        }
    }
    m->arch.act = *precision == VKF_PRECISION_F16 || int8_f16 ? VKF_DTYPE_F16 : VKF_DTYPE_F32;
    if (m->arch.act == VKF_DTYPE_F16 && m->arch.spec.keep_f32_activations) {
        /* T5: the residual stream and the FFN outputs of real checkpoints pass fp16's range (transformers keeps
         * wo in fp32 and clamps); here every activation stays F32, the weights take the precision */
        m->arch.act = VKF_DTYPE_F32;
        m->precision_auto_f16 = false;
        vkf_log(ctx, VKF_LOG_INFO, "precision %s: %s weights with F32 activations (this model's activations pass "
                "fp16's range)", *precision == VKF_PRECISION_INT8 ? "int8" : "f16",
                *precision == VKF_PRECISION_INT8 ? "int8" : "F16");
    }
    if (m->arch.act == VKF_DTYPE_F16 && hd > VKF_ATTENTION_MAX_HEAD_DIM)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "precision f16: head_dim %u passes the fused kernel's %u, and the unfused "
                        "path has no F16 form; use f32 or auto", hd, VKF_ATTENTION_MAX_HEAD_DIM);
    return VKF_OK;
}

/* Opens, checks and loads a model through family f (data: a file image for a
 * dry run, no device; else NULL and probe->path). */
static vkf_status load_model(vkf_model *m, const vkf_family *f, const vkf_probe *probe, const void *data, size_t size,
                             vkf_precision precision)
{
    vkf_loader L = {.ctx = m->ctx, .dry_run = data != NULL, .spec = &m->arch.spec, .w = &m->arch.w};
    m->family = f;
    vkf_status st = f->open(probe, data, size, &L, &m->fm);
    if (st == VKF_OK) st = vkf_arch_spec_check(&m->fm.spec);
    if (st == VKF_OK) m->arch.spec = m->fm.spec;
    if (st == VKF_OK) m->arch.encoder_attn = m->arch.spec.encoder_attention; /* the model's own until the user names one */
    if (st == VKF_OK && !data) st = resolve_precision(m, &precision);
    L.precision = precision;
    L.act = m->arch.act;
    if (st == VKF_OK) st = vkf_arch_weights_alloc(&m->arch.spec, &m->arch.w);
    if (st == VKF_OK) st = f->load(&L, &m->fm);
    if (st == VKF_OK && !data && m->fm.n_banned)
        st = vkf_arch_ban_ids(m->ctx, &m->arch.spec, &m->arch.w, m->fm.banned, m->fm.n_banned);
    vkf_loader_free(&L);
    return st;
}

vkf_status vkf_model_load_with(vkf_context *ctx, const char *path, const vkf_model_load_options *options,
                               vkf_model **out_model)
{
    if (!out_model) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_load: out_model is NULL");
    *out_model = NULL;
    if (!ctx || !path) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_load: %s is NULL", ctx ? "path" : "context");
    if (ctx->lost) return vkf_fail(VKF_ERROR_DEVICE_LOST, "the device was lost; destroy and recreate the context");
    vkf_precision precision = options ? options->precision : VKF_PRECISION_AUTO;
    if ((unsigned)precision > VKF_PRECISION_INT8)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_load: unknown precision %d", (int)precision);
    if (precision == VKF_PRECISION_F16 && !ctx->storage_16bit)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "precision f16 needs 16-bit storage buffers (storageBuffer16BitAccess), "
                        "which device \"%s\" lacks; use f32 or auto", ctx->info.name);
    vkf_model *m = calloc(1, sizeof *m);
    if (!m) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a model");
    m->ctx = ctx;
    m->arch.ctx = ctx;
    const vkf_family *family = NULL;
    vkf_probe probe = {.path = path};
    char *model_type = NULL;
    vkf_status st = vkf_family_find(path, &family, &probe, &model_type);
    if (st == VKF_OK) st = load_model(m, family, &probe, NULL, 0, precision);
    free(model_type);
    if ((st == VKF_ERROR_BAD_MODEL || st == VKF_ERROR_UNSUPPORTED) && !strstr(vkf_last_error(), path)) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vkf_last_error());
        vkf_fail(st, "%s: %s", path, msg);
    }
    if (st != VKF_OK) {
        vkf_model_destroy(m); /* destroy functions leave the last error alone */
        return st;
    }
    fill_config(m);
    m->dec.banned = m->fm.banned, m->dec.n_banned = m->fm.n_banned;
    *out_model = m;
    return VKF_OK;
}

vkf_status vkf_model_check_bytes(const void *data, size_t size)
{
    vkf_model *m = calloc(1, sizeof *m);
    if (!m) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a model");
    vkf_probe probe = {.path = "(memory)"};
    vkf_status st = load_model(m, vkf_family_vkformer(), &probe, data ? data : "", size, VKF_PRECISION_AUTO);
    /* a dry run made no device objects and no plans */
    vkf_arch_weights_free(&m->arch.spec, &m->arch.w);
    vkf_family_model_free(m->family, &m->fm);
    free(m);
    return st;
}

vkf_status vkf_model_get_config(const vkf_model *m, vkf_model_config *out)
{
    if (!m || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_get_config: %s is NULL", m ? "out_config" : "model");
    *out = m->cfg;
    return VKF_OK;
}

vkf_status vkf_model_generate_defaults(const vkf_model *m, vkf_generate_options *out)
{
    if (!m || !out)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate_defaults: %s is NULL", m ? "out_options" : "model");
    *out = m->fm.defaults;
    return VKF_OK;
}

/* ------------------------------------------------------------------ forward and generation */

vkf_status vkf_model_forward(vkf_model *m, const vkf_sequences *src, const vkf_sequences *tgt, float *out_logits,
                             uint64_t out_floats)
{
    if (!m || !out_logits)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_forward: %s is NULL", m ? "out_logits" : "model");
    return vkf_arch_forward(&m->arch, src, tgt, out_logits, out_floats);
}

vkf_status vkf_model_generate(vkf_model *m, const vkf_sequences *src, uint32_t max_new, int32_t *out_ids,
                              uint32_t *out_lengths)
{
    if (!m || !out_ids || !out_lengths)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate: %s is NULL",
                        !m ? "model" : !out_ids ? "out_ids" : "out_lengths");
    if (m->arch.spec.audio_mels)
        return vkf_fail(VKF_ERROR_STATE, "vkf_model_generate: this model reads audio, not source ids: "
                        "vkf_model_transcribe (vkformer transcribe) generates from audio");
    return vkf_decode_generate(&m->arch, &m->dec, src, max_new, NULL, out_ids, out_lengths, NULL);
}

vkf_status vkf_model_generate_with(vkf_model *m, const vkf_sequences *src, const vkf_generate_options *options,
                                   int32_t *out_ids, uint32_t *out_lengths, float *out_scores)
{
    if (!m || !out_ids || !out_lengths)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate_with: %s is NULL",
                        !m ? "model" : !out_ids ? "out_ids" : "out_lengths");
    if (m->arch.spec.audio_mels)
        return vkf_fail(VKF_ERROR_STATE, "vkf_model_generate_with: this model reads audio, not source ids: "
                        "vkf_model_transcribe (vkformer transcribe) generates from audio");
    vkf_generate_options o;
    vkf_generate_options_init(&o);
    if (options) o = *options;
    return vkf_decode_generate(&m->arch, &m->dec, src, 0, &o, out_ids, out_lengths, out_scores);
}

vkf_status vkf_model_generate_batched(vkf_model *m, const vkf_sequences *src, const vkf_generate_options *options,
                                      uint32_t max_batch_tokens, int32_t *out_ids, uint32_t *out_lengths,
                                      float *out_scores)
{
    if (!m || !out_ids || !out_lengths)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate_batched: %s is NULL",
                        !m ? "model" : !out_ids ? "out_ids" : "out_lengths");
    vkf_generate_options o;
    vkf_generate_options_init(&o);
    if (options) o = *options;
    return vkf_decode_generate_batched(&m->arch, &m->dec, src, &o, max_batch_tokens, out_ids, out_lengths, out_scores);
}

vkf_status vkf_model_score(vkf_model *m, const vkf_sequences *src, const vkf_sequences *tgt, float *out_logprobs,
                           uint64_t out_floats)
{
    if (!m || !out_logprobs)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_score: %s is NULL", m ? "out_logprobs" : "model");
    return vkf_decode_score(&m->arch, src, tgt, out_logprobs, out_floats);
}

vkf_status vkf_model_generate_stats(const vkf_model *m, vkf_generate_stats *out)
{
    if (!m || !out) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_generate_stats: %s is NULL", m ? "out_stats" : "model");
    *out = m->dec.stats;
    return VKF_OK;
}

/* ------------------------------------------------------------------ attention variants */

/* Recorded plans bake the attention choice, seed and profiling in: drop them. */
static void drop_plans(vkf_model *m)
{
    vkf_arch_drop_plans(&m->arch);
    vkf_decoder_reset(&m->dec);
}

vkf_status vkf_model_set_attention(vkf_model *m, const char *self_attention, const char *cross_attention)
{
    if (!m) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_set_attention: model is NULL");
    vkf_attention_spec self, cross;
    VKF_TRY(vkf_attention_parse(self_attention, false, &self));
    VKF_TRY(vkf_attention_parse(cross_attention, true, &cross));
    /* none named: the encoder runs the model's own (LongT5's local or transient-global) */
    vkf_attention_spec encoder = self_attention ? self : m->arch.spec.encoder_attention;
    uint32_t hd = m->arch.spec.head_dim;
    if (m->arch.spec.rel_bias && (self.kind == VKF_ATTN_LSH || self.kind == VKF_ATTN_LOWRANK))
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "\"%s\" cannot add this model's relative position bias (T5's): %s; use "
                        "dense, dense-naive, local, strided, bigbird or tglobal", self_attention,
                        self.kind == VKF_ATTN_LSH ? "lsh's chunks of hash-sorted tokens have no fixed distances"
                                                  : "lowrank's projected keys mix many positions");
    const char *fused_only = (self.kind != VKF_ATTN_FUSED || self.pattern) && self.kind != VKF_ATTN_NAIVE ? self_attention
                             : cross.kind == VKF_ATTN_LOWRANK                                        ? cross_attention
                                                                                                  : NULL;
    if (fused_only && hd > VKF_ATTENTION_MAX_HEAD_DIM)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "\"%s\" needs the fused kernels, which take head_dim up to %u (this model: %u)",
                        fused_only, VKF_ATTENTION_MAX_HEAD_DIM, hd);
    if (m->arch.act == VKF_DTYPE_F16 &&
        (self.kind == VKF_ATTN_NAIVE || self.kind == VKF_ATTN_LSH || cross.kind == VKF_ATTN_NAIVE))
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "\"%s\" has no F16 form (the model's activations are F16%s); use "
                        "dense, local, strided, bigbird or lowrank, or load with f32",
                        self.kind == VKF_ATTN_FUSED || self.kind == VKF_ATTN_LOWRANK ? cross_attention : self_attention,
                        m->precision_auto_f16 ? ": precision auto chose f16 on this device" : "");
    if (memcmp(&self, &m->arch.self_attn, sizeof self) == 0 && memcmp(&cross, &m->arch.cross_attn, sizeof cross) == 0 &&
        memcmp(&encoder, &m->arch.encoder_attn, sizeof encoder) == 0)
        return VKF_OK;
    drop_plans(m);
    m->arch.self_attn = self;
    m->arch.cross_attn = cross;
    m->arch.encoder_attn = encoder;
    if (encoder.kind == VKF_ATTN_FUSED && encoder.pattern == VKF_ATTENTION_TGLOBAL)
        vkf_log(m->ctx, VKF_LOG_INFO, "attention tglobal:%u:%u: the encoder sees a window of %u and one global key per "
                "%u tokens (%s); decoder self-attention is causal and keeps the window", encoder.window, encoder.block,
                encoder.window, encoder.block,
                m->arch.spec.global_norm ? "the model's own, from its global norms" : "the mean of each block's keys "
                "and values");
    /* Where a variant cannot apply, say what runs instead. */
    if (self.kind == VKF_ATTN_LSH)
        vkf_log(m->ctx, VKF_LOG_INFO, "attention %s: encoder and decoder self-attention of the forward pass use LSH; a "
                "generation step has one new query, which LSH cannot hash and sort against, so decode steps attend "
                "densely over the KV cache", self_attention);
    static const char *const lr_names[2] = {"lowrank.self_proj", "lowrank.cross_proj"};
    for (int i = 0; i < 2; i++) {
        const vkf_attention_spec *ch = i == 0 ? &self : &cross;
        if (ch->kind != VKF_ATTN_LOWRANK) continue;
        if (m->arch.w.lr_file[i] && m->arch.w.lr_file_rank[i] == ch->rank)
            vkf_log(m->ctx, VKF_LOG_INFO, "lowrank:%u uses the model file's %s", ch->rank, lr_names[i]);
        else if (m->arch.w.lr_file[i])
            vkf_log(m->ctx, VKF_LOG_INFO, "lowrank:%u: the model file's %s has %u rows, so the seeded projection is "
                    "used", ch->rank, lr_names[i], m->arch.w.lr_file_rank[i]);
    }
    if (self.kind == VKF_ATTN_LOWRANK)
        vkf_log(m->ctx, VKF_LOG_INFO, "attention %s: encoder self-attention is low-rank; decoder self-attention is causal, "
                "which a projection along the sequence cannot respect, so it stays dense", self_attention);
    return VKF_OK;
}

vkf_status vkf_model_get_attention(const vkf_model *m, vkf_model_attention *out)
{
    if (!m || !out)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_get_attention: %s is NULL", m ? "out" : "model");
    memset(out, 0, sizeof *out);
    const vkf_arch *a = &m->arch;
    uint32_t hd = a->spec.head_dim;
    vkf_attention_spec enc = vkf_arch_site(a, VKF_SITE_ENCODER), dec = vkf_arch_site(a, VKF_SITE_DECODER),
                       cross = vkf_arch_site(a, VKF_SITE_CROSS), step = vkf_arch_site(a, VKF_SITE_STEP_SELF),
                       step_cross = vkf_arch_site(a, VKF_SITE_STEP_CROSS);
    vkf_attention_spec_name(&enc, hd, out->encoder, sizeof out->encoder);
    vkf_attention_spec_name(&dec, hd, out->decoder, sizeof out->decoder);
    vkf_attention_spec_name(&cross, hd, out->cross, sizeof out->cross);
    /* a decode step runs the decode kernel at any head_dim */
    vkf_attention_spec_name(&step, 0, out->decode_self, sizeof out->decode_self);
    vkf_attention_spec_name(&step_cross, 0, out->decode_cross, sizeof out->decode_cross);
    if (hd > VKF_ATTENTION_MAX_HEAD_DIM) {
        snprintf(out->kernel, sizeof out->kernel, "naive");
    } else {
        vkf_attention_desc d;
        vkf_attention_desc_init(&d);
        d.batch = 1, d.heads = a->spec.heads, d.head_dim = hd, d.lq = d.lk = a->spec.max_len, d.dtype = a->act;
        snprintf(out->kernel, sizeof out->kernel, "%s", vkf_attention_kernel_name(m->ctx, &d));
    }
    return VKF_OK;
}

vkf_status vkf_model_set_seed(vkf_model *m, uint64_t seed)
{
    if (!m) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_set_seed: model is NULL");
    if (seed != m->arch.seed) drop_plans(m);
    m->arch.seed = seed;
    return VKF_OK;
}

/* ------------------------------------------------------------------ profiling */

vkf_status vkf_model_set_profiling(vkf_model *m, bool on)
{
    if (!m) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_set_profiling: model is NULL");
    if (on && !m->ctx->info.timestamps)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "device \"%s\" has no timestamp queries", m->ctx->info.name);
    uint32_t flags = on ? VKF_CMD_TIMESTAMPS : 0;
    if (flags == m->arch.cmd_flags) return VKF_OK;
    drop_plans(m);
    m->arch.cmd_flags = flags;
    return VKF_OK;
}

vkf_status vkf_model_last_cmd(const vkf_model *m, vkf_model_pass pass, const vkf_cmd **out_cmd)
{
    if (!m || !out_cmd) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_last_cmd: %s is NULL", m ? "out_cmd" : "model");
    *out_cmd = NULL;
    if (pass == VKF_PASS_FORWARD) *out_cmd = m->arch.last_forward;
    else if (pass == VKF_PASS_ENCODE) *out_cmd = m->dec.plan ? m->dec.plan->encode : NULL;
    else if (pass == VKF_PASS_DECODE_STEP) *out_cmd = m->dec.plan ? m->dec.plan->step : NULL;
    else return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_last_cmd: unknown pass %d", (int)pass);
    if (!*out_cmd) return vkf_fail(VKF_ERROR_STATE, "vkf_model_last_cmd: that pass has not run yet");
    return VKF_OK;
}

/* ------------------------------------------------------------------ text and languages */

vkf_status vkf_model_encode_text(const vkf_model *m, const char *text, int32_t *out_ids, uint32_t capacity,
                                 uint32_t *out_count)
{
    return vkf_model_encode_text_with(m, text, NULL, NULL, out_ids, capacity, out_count);
}

/* Index of `code` in the model's languages, or a one-line error listing a few. */
static vkf_status language(const vkf_model *m, const char *code, const char *what, int32_t *out)
{
    char q[VKF_QUOTE_SIZE];
    if (m->fm.n_langs == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the model has no language codes (%s %s given)", what,
                        vkf_quote(q, sizeof q, code, (size_t)-1));
    *out = vkf_family_language(&m->fm, code);
    if (*out >= 0) return VKF_OK;
    char examples[256];
    vkf_family_language_examples(&m->fm, examples, sizeof examples);
    return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "unknown %s %s; the model's codes: %s", what,
                    vkf_quote(q, sizeof q, code, (size_t)-1), examples);
}

vkf_status vkf_model_encode_text_with(const vkf_model *m, const char *text, const char *source_lang,
                                      const char *target_lang, int32_t *out_ids, uint32_t capacity,
                                      uint32_t *out_count)
{
    if (!m || !text || !out_count || (capacity && !out_ids))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_encode_text: a required argument is NULL");
    *out_count = 0;
    if (!m->fm.has_text)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "the model has no vocabularies (src_vocab, tgt_vocab): give ids instead");
    int32_t index = -1;
    if (source_lang) VKF_TRY(language(m, source_lang, "source language", &index));
    const char *lang = source_lang;
    if (target_lang && m->fm.target_lang_in_source) {
        VKF_TRY(language(m, target_lang, "target language", &index));
        lang = target_lang;
    }
    return m->family->encode(&m->fm, text, lang, out_ids, capacity, out_count);
}

vkf_status vkf_model_decode_text(const vkf_model *m, const int32_t *ids, uint32_t count, char *out_text, size_t capacity)
{
    if (!m || (count && !ids) || !out_text || capacity == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_decode_text: a required argument is NULL or empty");
    out_text[0] = '\0';
    if (!m->fm.has_text) return vkf_fail(VKF_ERROR_UNSUPPORTED, "the model has no vocabularies (src_vocab, tgt_vocab)");
    return m->family->decode(&m->fm, ids, count, out_text, capacity);
}

vkf_status vkf_model_encode_target_text(const vkf_model *m, const char *text, int32_t *out_ids, uint32_t capacity,
                                        uint32_t *out_count)
{
    if (!m || !text || !out_count || (capacity && !out_ids))
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_encode_target_text: a required argument is NULL");
    *out_count = 0;
    if (!m->fm.has_text || !m->family->encode_target)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "the model has no target tokenizer (a %s model): give target ids instead",
                        m->fm.name);
    return m->family->encode_target(&m->fm, text, out_ids, capacity, out_count);
}

vkf_status vkf_model_target_token_id(const vkf_model *m, const char *token, int32_t *out_id)
{
    if (!m || !token || !out_id)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_target_token_id: a required argument is NULL");
    *out_id = -1;
    if (!m->fm.has_text || !m->family->target_token)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "the model has no target vocabulary (a %s model): give ids instead",
                        m->fm.name);
    int32_t id = m->family->target_token(&m->fm, token, strlen(token));
    if (id < 0) {
        char q[VKF_QUOTE_SIZE];
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s is not a token of the model's target vocabulary",
                        vkf_quote(q, sizeof q, token, (size_t)-1));
    }
    *out_id = id;
    return VKF_OK;
}

vkf_status vkf_model_set_target_language(const vkf_model *m, const char *code, vkf_generate_options *options)
{
    if (!m || !options) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_set_target_language: %s is NULL",
                                        m ? "options" : "model");
    if (!code) {
        if (m->fm.target_lang_required) {
            char examples[256];
            vkf_family_language_examples(&m->fm, examples, sizeof examples);
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the model needs a target language (%s)", examples);
        }
        return VKF_OK;
    }
    int32_t index = -1;
    VKF_TRY(language(m, code, "target language", &index));
    if (m->fm.target_lang_in_source) return VKF_OK; /* a token of the source: vkf_model_encode_text_with places it */
    options->forced_bos = true;
    options->forced_bos_id = m->fm.lang_ids[index];
    return VKF_OK;
}

const char *vkf_model_language(const vkf_model *m, uint32_t index)
{
    return m && index < m->fm.n_langs ? m->fm.lang_codes[index] : NULL;
}

/* ------------------------------------------------------------------ audio */

static vkf_status audio_model(const vkf_model *m, const char *fn)
{
    if (!m) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: model is NULL", fn);
    if (!m->arch.spec.audio_mels) return vkf_fail(VKF_ERROR_STATE, "%s: this model reads text, not audio", fn);
    return VKF_OK;
}

static vkf_status check_samples(const float *samples, uint64_t count, const char *fn, uint32_t clip)
{
    if (!samples && count) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: clip %u's samples are NULL", fn, clip);
    for (uint64_t i = 0; i < count; i++)
        if (!isfinite(samples[i]))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: clip %u: sample %llu is not finite", fn, clip,
                            (unsigned long long)i);
    return VKF_OK;
}

vkf_status vkf_model_audio_features(vkf_model *m, const float *samples, uint64_t count, float *out_features,
                                    uint64_t out_floats)
{
    static const char fn[] = "vkf_model_audio_features";
    VKF_TRY(audio_model(m, fn));
    if (!out_features) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out_features is NULL", fn);
    uint64_t need = (uint64_t)m->fm.mel.n_mels * m->fm.mel.frames;
    if (out_floats != need)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out_features holds %llu floats, %llu needed", fn,
                        (unsigned long long)out_floats, (unsigned long long)need);
    VKF_TRY(check_samples(samples, count, fn, 0));
    return vkf_mel_features(&m->fm.mel, samples, count, out_features);
}

/* (count, mels, frames) features of a batch of clips; *out malloc'd. */
static vkf_status batch_features(vkf_model *m, const vkf_audio_batch *audio, const char *fn, float **out)
{
    *out = NULL;
    if (!audio || audio->count == 0 || !audio->samples || !audio->lengths)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: no audio given", fn);
    uint64_t per = (uint64_t)m->fm.mel.n_mels * m->fm.mel.frames;
    float *f = malloc(audio->count * per * sizeof *f);
    if (!f) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory for features", fn);
    for (uint32_t i = 0; i < audio->count; i++) {
        vkf_status st = check_samples(audio->samples[i], audio->lengths[i], fn, i);
        if (st == VKF_OK) st = vkf_mel_features(&m->fm.mel, audio->samples[i], audio->lengths[i], f + i * per);
        if (st != VKF_OK) {
            free(f);
            return st;
        }
    }
    *out = f;
    return VKF_OK;
}

vkf_status vkf_model_forward_features(vkf_model *m, const float *features, uint32_t count, const vkf_sequences *tgt,
                                      float *out_logits, uint64_t out_floats)
{
    static const char fn[] = "vkf_model_forward_features";
    VKF_TRY(audio_model(m, fn));
    if (!out_logits) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out_logits is NULL", fn);
    return vkf_arch_forward_features(&m->arch, features, count, tgt, out_logits, out_floats);
}

vkf_status vkf_model_forward_audio(vkf_model *m, const vkf_audio_batch *audio, const vkf_sequences *tgt,
                                   float *out_logits, uint64_t out_floats)
{
    static const char fn[] = "vkf_model_forward_audio";
    VKF_TRY(audio_model(m, fn));
    if (!out_logits) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out_logits is NULL", fn);
    float *f;
    VKF_TRY(batch_features(m, audio, fn, &f));
    vkf_status st = vkf_arch_forward_features(&m->arch, f, audio->count, tgt, out_logits, out_floats);
    free(f);
    return st;
}

vkf_status vkf_model_encode_audio(vkf_model *m, const vkf_audio_batch *audio, float *out_hidden, uint64_t out_floats)
{
    static const char fn[] = "vkf_model_encode_audio";
    VKF_TRY(audio_model(m, fn));
    if (!out_hidden) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out_hidden is NULL", fn);
    float *f;
    VKF_TRY(batch_features(m, audio, fn, &f));
    vkf_status st = vkf_arch_encode_features(&m->arch, f, audio->count, out_hidden, out_floats);
    free(f);
    return st;
}

/* ------------------------------------------------------------------ for transcribe.c */

void vkf_model_parts(vkf_model *m, vkf_arch **out_arch, vkf_decoder **out_dec, const vkf_family_model **out_fm)
{
    *out_arch = &m->arch, *out_dec = &m->dec, *out_fm = &m->fm;
}

/* T5, Flan-T5, mT5 and LongT5 (model_type t5, mt5, longt5;
 * T5ForConditionalGeneration, MT5ForConditionalGeneration,
 * LongT5ForConditionalGeneration): folders as the hub stores them (config.json,
 * generation_config.json, model.safetensors, spiece.model and/or tokenizer.json,
 * tokenizer_config.json) and as transformers 5.x save_pretrained writes them
 * (config.json with scale_decoder_outputs, tokenizer.json and
 * tokenizer_config.json only), read as transformers 5.12 reads them.
 *
 * The model, on the arch's spec: pre-norm layers with T5's RMSNorm (no mean, no
 * bias, layer_norm_epsilon) and final norms on both stacks; no absolute
 * positions but a relative position bias per stack (its first layer's
 * relative_attention_bias, (buckets, heads)), bidirectional buckets in the
 * encoder, causal in the decoder, none in cross-attention; no 1/sqrt(d) score
 * scaling; linear layers without biases; heads of d_kv apart from d_model; the
 * FFN of feed_forward_proj: relu, or gated-gelu (act(x wi_0) * (x wi_1), GELU
 * with the tanh approximation); the decoder's output times d_model^-0.5 where the
 * config says so (scale_decoder_outputs, else tie_word_embeddings for t5 and
 * longt5; never for mt5, as transformers 5.12); the decoder starts from pad.
 * transformers 5.x ties a table to shared.weight only where the file lacks it
 * or holds the same values: lm_head.weight stored beside tie_word_embeddings
 * true (a 5.x save of Flan-T5 or mT5) is the generator. Activations stay F32 at
 * every precision (spec.keep_f32_activations): T5's residual stream and FFN
 * outputs pass fp16's range in real checkpoints.
 *
 * LongT5: its encoder's own attention is local:R (local_radius R: each token sees
 * |i - j| <= R, which is what LongT5's blocks of R + 1 tokens and their locality
 * mask come to) or tglobal:R:G (transient-global: plus one global key per block
 * of global_block_size tokens, RMSNorm(global_input_layer_norm) of the block's
 * summed inputs projected by the layer's k and v, with its own relative bias
 * table global_relative_attention_bias).
 *
 * The tokenizer, as transformers 5.12's T5Tokenizer builds it whatever the
 * folder holds: the Unigram pieces and scores of tokenizer.json (or of
 * spiece.model, with extra_ids <extra_id_N> appended in reverse), the
 * Precompiled charsmap, WhitespaceSplit + Metaspace (prepend always, split),
 * unk id 2, the template "$A </s>", <pad> </s> <unk> and the <extra_id_N> as
 * special added tokens; built as a tokenizer.json in memory and run by
 * tokenizer_json.c. Decoding skips special tokens, and cleans up spaces where
 * tokenizer_config.json asks (clean_up_tokenization_spaces). */
#include "families/family.h"
#include "tokenizers/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum t5_kind { T5_T5, T5_MT5, T5_LONGT5 } t5_kind;

typedef struct t5 {
    t5_kind kind;
    bool tie;                           /* config.json's tie_word_embeddings (longt5: whether tables tie) */
    vkf_hftok *tok;                     /* owned; NULL: the folder has no tokenizer (ids only) */
    bool clean_up;                      /* tokenizer_config.json clean_up_tokenization_spaces */
} t5;

static void t5_free(void *state)
{
    t5 *m = state;
    if (!m) return;
    vkf_hftok_free(m->tok);
    free(m);
}

static bool probe(const vkf_probe *p)
{
    return p->is_dir && p->model_type &&
           (strcmp(p->model_type, "t5") == 0 || strcmp(p->model_type, "mt5") == 0 ||
            strcmp(p->model_type, "longt5") == 0);
}

/* ------------------------------------------------------------------ config.json */

/* An integer key that may also be a list holding one (eos_token_id in 5.x configs). */
static vkf_status one_int(json_t *c, const char *F, const char *key, int64_t max, int64_t def, int64_t *out)
{
    json_t *v = json_object_get(c, key);
    if (v && json_is_array(v)) {
        if (json_array_size(v) != 1)
            return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: \"%s\" must be one id (several are not supported)", F, key);
        json_t *one = json_object();
        if (!one) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        json_object_set(one, key, json_array_get(v, 0));
        vkf_status st = vkf_hf_int(one, F, key, 0, max, def, out);
        json_decref(one);
        return st;
    }
    return vkf_hf_int(c, F, key, 0, max, def, out);
}

/* feed_forward_proj as T5Config reads it: "ACT" or "gated-ACT", "gated-gelu" meaning gelu_new. */
static vkf_status parse_ffn(json_t *c, const char *F, const char *def, vkf_activation *act, bool *gated)
{
    json_t *v = json_object_get(c, "feed_forward_proj");
    if (v && !json_is_null(v) && !json_is_string(v))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"feed_forward_proj\" must be a string", F);
    const char *ffp = v && json_is_string(v) ? json_string_value(v) : def;
    char q[VKF_QUOTE_SIZE];
    const char *dash = strchr(ffp, '-');
    *gated = dash != NULL;
    if (dash && (strncmp(ffp, "gated-", 6) != 0 || strchr(dash + 1, '-')))
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: feed_forward_proj %s is not ACT or gated-ACT", F,
                        vkf_quote(q, sizeof q, ffp, (size_t)-1));
    const char *name = dash ? dash + 1 : ffp;
    if (strcmp(ffp, "gated-gelu") == 0) name = "gelu_new"; /* T5Config's special case */
    if (strcmp(name, "relu") == 0) *act = VKF_ACTIVATION_RELU;
    else if (strcmp(name, "gelu") == 0) *act = VKF_ACTIVATION_GELU;
    else if (strcmp(name, "gelu_new") == 0 || strcmp(name, "gelu_pytorch_tanh") == 0) *act = VKF_ACTIVATION_GELU_TANH;
    else if (strcmp(name, "silu") == 0 || strcmp(name, "swish") == 0) *act = VKF_ACTIVATION_SILU;
    else
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "%s: feed_forward_proj %s is not supported (relu, gelu, gelu_new, "
                        "gelu_pytorch_tanh, silu, each with or without gated-)", F,
                        vkf_quote(q, sizeof q, ffp, (size_t)-1));
    return VKF_OK;
}

static vkf_status parse_config(json_t *c, t5 *m, vkf_arch_spec *s)
{
    static const char F[] = "config.json";
    bool mt5 = m->kind == T5_MT5, longt5 = m->kind == T5_LONGT5;
    int64_t v = 0, d = 0, dkv = 0, dff = 0, nl = 0, ndl = 0, nh = 0, nb = 0, md = 0, pad = 0, eos = 0, start = 0;
    double eps = 1e-6;
    VKF_TRY(vkf_hf_int(c, F, "vocab_size", 1, 1 << 24, mt5 ? 250112 : 32128, &v));
    VKF_TRY(vkf_hf_int(c, F, "d_model", 1, 65536, 512, &d));
    VKF_TRY(vkf_hf_int(c, F, "d_kv", 1, 65536, 64, &dkv));
    VKF_TRY(vkf_hf_int(c, F, "d_ff", 1, 1 << 19, mt5 ? 1024 : 2048, &dff));
    VKF_TRY(vkf_hf_int(c, F, "num_layers", 1, 1024, mt5 ? 8 : 6, &nl));
    VKF_TRY(vkf_hf_int(c, F, "num_decoder_layers", 1, 1024, nl, &ndl));
    VKF_TRY(vkf_hf_int(c, F, "num_heads", 1, 4096, mt5 ? 6 : 8, &nh));
    VKF_TRY(vkf_hf_int(c, F, "relative_attention_num_buckets", 2, 4096, 32, &nb));
    VKF_TRY(vkf_hf_int(c, F, "relative_attention_max_distance", 2, 1 << 24, 128, &md));
    VKF_TRY(vkf_hf_float(c, F, "layer_norm_epsilon", 1e-30, 0.5, 1e-6, &eps));
    VKF_TRY(vkf_hf_int(c, F, "pad_token_id", 0, v - 1, 0, &pad));
    VKF_TRY(one_int(c, F, "eos_token_id", v - 1, 1, &eos));
    /* T5 starts decoding from pad (its _shift_right); hub configs say so with decoder_start_token_id 0 */
    VKF_TRY(vkf_hf_int(c, F, "decoder_start_token_id", 0, v - 1, pad, &start));
    VKF_TRY(parse_ffn(c, F, mt5 ? "gated-gelu" : "relu", &s->activation, &s->ffn_glu));
    VKF_TRY(vkf_hf_bool(c, F, "tie_word_embeddings", true, &m->tie));
    /* the decoder's output times d_model^-0.5: transformers 5.x writes scale_decoder_outputs; older configs
     * meant it by tie_word_embeddings (T5); LongT5 by tie_word_embeddings; mT5 never (5.12) */
    bool scale = longt5 ? m->tie : !mt5 && m->tie;
    if (m->kind == T5_T5) VKF_TRY(vkf_hf_bool(c, F, "scale_decoder_outputs", scale, &scale));
    s->d_model = (uint32_t)d, s->heads = (uint32_t)nh, s->head_dim = (uint32_t)dkv;
    s->encoder_layers = (uint32_t)nl, s->decoder_layers = (uint32_t)ndl, s->d_ff = (uint32_t)dff;
    s->src_vocab = s->tgt_vocab = (uint32_t)v;
    s->max_len = 1u << 16;              /* relative positions: no table bounds the length */
    s->pre_norm = true;
    s->encoder_final_norm = s->decoder_final_norm = true;
    s->norm = VKF_NORM_RMS, s->norm_eps = (float)eps;
    s->positions = VKF_POS_NONE;
    s->embed_scale = 1.0f;
    s->attention_scale = 1.0f;          /* no 1/sqrt(d_kv): T5 folds it into its initialisation */
    s->output_scale = scale ? 1.0f / sqrtf((float)d) : 0.0f;
    s->pad_id = (int32_t)pad, s->eos_id = (int32_t)eos, s->decoder_start_id = (int32_t)start;
    s->rel_bias = true, s->rel_buckets = (uint32_t)nb, s->rel_max_distance = (uint32_t)md;
    s->keep_f32_activations = true;
    if (longt5) {
        int64_t radius = 0, gbs = 0;
        VKF_TRY(vkf_hf_int(c, F, "local_radius", 0, 1 << 16, 127, &radius));
        VKF_TRY(vkf_hf_int(c, F, "global_block_size", 1, 1 << 16, 16, &gbs));
        json_t *t = json_object_get(c, "encoder_attention_type");
        const char *type = t && json_is_string(t) ? json_string_value(t) : t && !json_is_null(t) ? NULL : "local";
        if (!type) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"encoder_attention_type\" must be a string", F);
        s->encoder_attention.kind = VKF_ATTN_FUSED, s->encoder_attention.window = (uint32_t)radius;
        if (strcmp(type, "local") == 0) {
            s->encoder_attention.pattern = VKF_ATTENTION_LOCAL;
        } else if (strcmp(type, "transient-global") == 0) {
            s->encoder_attention.pattern = VKF_ATTENTION_TGLOBAL, s->encoder_attention.block = (uint32_t)gbs;
            s->global_norm = true;
        } else {
            char q[VKF_QUOTE_SIZE];
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: encoder_attention_type %s is neither local nor transient-global",
                            F, vkf_quote(q, sizeof q, type, (size_t)-1));
        }
    }
    return VKF_OK;
}

/* ------------------------------------------------------------------ the tokenizer */

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* bytes as base64 (malloc'ed, NUL-terminated), as tokenizer.json stores a charsmap. */
static char *base64(const unsigned char *p, size_t n)
{
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = b64_chars[v >> 18 & 63], *o++ = b64_chars[v >> 12 & 63];
        *o++ = i + 1 < n ? b64_chars[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? b64_chars[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* An added token {id, content, special} with tokenizers' default flags. */
static json_t *added_token(int64_t id, const char *content)
{
    return json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)id, "content", content, "single_word", 0,
                     "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1);
}

/* The first place of `piece` in vocab [[piece, score]], or -1. */
static int64_t vocab_index(json_t *vocab, const char *piece)
{
    for (size_t i = 0; i < json_array_size(vocab); i++)
        if (strcmp(json_string_value(json_array_get(json_array_get(vocab, i), 0)), piece) == 0) return (int64_t)i;
    return -1;
}

/* added's entry of `content`, else one more: its place in the vocabulary, or the next new id. */
static vkf_status ensure_added(json_t *added, json_t *vocab, const char *content, int64_t *next)
{
    for (size_t i = 0; i < json_array_size(added); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(added, i), "content")), content) == 0) return VKF_OK;
    int64_t id = vocab_index(vocab, content);
    if (id < 0) id = (*next)++;
    json_t *t = added_token(id, content);
    if (!t || json_array_append_new(added, t)) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    return VKF_OK;
}

/* The canonical T5 tokenizer.json (see the top of the file) of vocab [[piece, score]], charsmap (base64, or NULL)
 * and the special added tokens `added` (with <pad> </s> <unk> put in where missing: at their place in the
 * vocabulary, else after it). Takes ownership of vocab and added. */
static vkf_status build_tokenizer(json_t *vocab, const char *charsmap, json_t *added, vkf_hftok **out)
{
    static const char *const specials[3] = {"<pad>", "</s>", "<unk>"};
    int64_t next = (int64_t)json_array_size(vocab);
    for (size_t i = 0; i < json_array_size(added); i++) {
        json_t *id = json_object_get(json_array_get(added, i), "id");
        if (json_is_integer(id) && json_integer_value(id) >= next) next = json_integer_value(id) + 1;
    }
    json_t *root = json_object();
    vkf_status st = root ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (int k = 0; st == VKF_OK && k < 3; k++) st = ensure_added(added, vocab, specials[k], &next);
    int64_t eos = -1;
    for (size_t i = 0; st == VKF_OK && i < json_array_size(added); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(added, i), "content")), "</s>") == 0)
            eos = json_integer_value(json_object_get(json_array_get(added, i), "id"));
    json_t *meta = json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement", "\xe2\x96\x81",
                             "prepend_scheme", "always", "split", 1);
    if (st == VKF_OK && !meta) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (st == VKF_OK &&
        (json_object_set_new(root, "version", json_string("1.0")) || json_object_set_new(root, "truncation", json_null()) ||
         json_object_set_new(root, "padding", json_null()) || json_object_set(root, "added_tokens", added) ||
         json_object_set_new(root, "normalizer", charsmap ? json_pack("{s:s, s:s}", "type", "Precompiled",
                                                                      "precompiled_charsmap", charsmap)
                                                          : json_null()) ||
         json_object_set_new(root, "pre_tokenizer", json_pack("{s:s, s:[{s:s}, O]}", "type", "Sequence",
                                                              "pretokenizers", "type", "WhitespaceSplit", meta)) ||
         json_object_set_new(root, "post_processor",
                             json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:[], s:{s:{s:s, s:[I], s:[s]}}}",
                                       "type", "TemplateProcessing", "single", "Sequence", "id", "A", "type_id", 0,
                                       "SpecialToken", "id", "</s>", "type_id", 0, "pair", "special_tokens", "</s>",
                                       "id", "</s>", "ids", (json_int_t)eos, "tokens", "</s>")) ||
         json_object_set(root, "decoder", meta) ||
         json_object_set_new(root, "model", json_pack("{s:s, s:i, s:O, s:b}", "type", "Unigram", "unk_id", 2, "vocab",
                                                      vocab, "byte_fallback", 0))))
        st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    char *text = st == VKF_OK ? json_dumps(root, JSON_COMPACT) : NULL;
    if (st == VKF_OK && !text) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (st == VKF_OK) st = vkf_hftok_load_bytes(text, strlen(text), out);
    free(text);
    json_decref(meta), json_decref(added), json_decref(root), json_decref(vocab);
    return st;
}

/* tokenizer.json: its Unigram vocabulary, Precompiled charsmap and special added tokens (the rest of its
 * pipeline is T5Tokenizer's, as transformers 5.12 rebuilds it). */
static vkf_status json_parts(const char *dir, json_t **out_vocab, char **out_charsmap, json_t **out_added)
{
    static const char F[] = "tokenizer.json";
    *out_vocab = NULL, *out_charsmap = NULL, *out_added = NULL;
    json_t *j = NULL;
    VKF_TRY(vkf_hf_read_json(dir, F, false, &j));
    json_t *model = json_object_get(j, "model"), *type = model ? json_object_get(model, "type") : NULL;
    json_t *vocab = model ? json_object_get(model, "vocab") : NULL, *file_added = json_object_get(j, "added_tokens");
    json_t *added = json_array();
    vkf_status st = added ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (st == VKF_OK && (!json_is_object(model) || !json_is_string(type) || strcmp(json_string_value(type), "Unigram")))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: model.type must be \"Unigram\" (T5's tokenizer)", F);
    else if (st == VKF_OK &&
             (!json_is_array(vocab) || json_array_size(vocab) < 3 || json_array_size(vocab) > VKF_HFTOK_MAX_VOCAB))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: model.vocab must be a list of 3 to %u [piece, score] pairs", F,
                      VKF_HFTOK_MAX_VOCAB);
    for (size_t i = 0; st == VKF_OK && i < json_array_size(vocab); i++) {
        json_t *e = json_array_get(vocab, i);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
            !json_is_number(json_array_get(e, 1)) || !isfinite(json_number_value(json_array_get(e, 1))))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: model.vocab[%zu] is not a [piece, score] pair", F, i);
    }
    /* its special added tokens (transformers 5.12 keeps what the file marks special) */
    if (st == VKF_OK && file_added && !json_is_null(file_added) &&
        (!json_is_array(file_added) || json_array_size(file_added) > VKF_HFTOK_MAX_ADDED))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: added_tokens must be a list of at most %u", F, VKF_HFTOK_MAX_ADDED);
    for (size_t i = 0; st == VKF_OK && i < json_array_size(file_added); i++) {
        json_t *a = json_array_get(file_added, i), *id = json_object_get(a, "id"), *c = json_object_get(a, "content");
        json_t *sp = json_object_get(a, "special");
        if (!json_is_object(a) || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > VKF_HFTOK_MAX_ID || !json_is_string(c) || (sp && !json_is_boolean(sp)))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: added_tokens[%zu] needs an id in 0..%u, a string content and a "
                          "boolean special", F, i, VKF_HFTOK_MAX_ID);
        else if (json_is_true(sp) && json_array_append_new(added, added_token(json_integer_value(id), json_string_value(c))))
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    /* the Precompiled charsmap: the normalizer, or one in its Sequence */
    json_t *norm = json_object_get(j, "normalizer"), *list = NULL;
    if (json_is_object(norm) && json_is_string(json_object_get(norm, "type")) &&
        strcmp(json_string_value(json_object_get(norm, "type")), "Sequence") == 0)
        list = json_object_get(norm, "normalizers");
    for (size_t i = 0; st == VKF_OK && json_is_object(norm) && i < (list ? json_array_size(list) : 1); i++) {
        json_t *n = list ? json_array_get(list, i) : norm, *t = json_object_get(n, "type");
        if (!json_is_string(t) || strcmp(json_string_value(t), "Precompiled") != 0) continue;
        json_t *cm = json_object_get(n, "precompiled_charsmap");
        if (!json_is_string(cm))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: normalizer's precompiled_charsmap must be a string", F);
        else if (!(*out_charsmap = strdup(json_string_value(cm))))
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        break;
    }
    if (st == VKF_OK) *out_vocab = json_incref(vocab), *out_added = added;
    else json_decref(added);
    json_decref(j);
    return st;
}

/* spiece.model: its pieces and scores (a Unigram model), charsmap, and the special added tokens: its control
 * pieces (<pad>, </s>, <s> where it has one) and the extra ids appended in reverse (<extra_id_N-1> first). */
static vkf_status spm_parts(const char *dir, uint32_t extra_ids, json_t **out_vocab, char **out_charsmap,
                            json_t **out_added)
{
    *out_vocab = NULL, *out_charsmap = NULL, *out_added = NULL;
    vkf_spm *spm = NULL;
    VKF_TRY(vkf_spm_open(dir, "spiece.model", &spm));
    vkf_status st = VKF_OK;
    if (vkf_spm_model_type(spm) != 1)
        st = vkf_fail(VKF_ERROR_UNSUPPORTED, "spiece.model is not a Unigram model (T5's tokenizer is one)");
    json_t *vocab = json_array(), *added = json_array();
    if (!vocab || !added) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    uint32_t n = vkf_spm_size(spm);
    for (uint32_t i = 0; st == VKF_OK && i < n + extra_ids; i++) {
        char extra[32];
        int kind = VKF_SPM_NORMAL;
        const char *piece = i < n ? vkf_spm_piece(spm, i, &kind) : extra;
        if (i >= n) snprintf(extra, sizeof extra, "<extra_id_%u>", extra_ids - 1 - (i - n));
        json_t *e = json_pack("[s, f]", piece, i < n ? (double)vkf_spm_score(spm, i) : 0.0);
        if (!e || json_array_append_new(vocab, e) ||
            ((i >= n || kind == VKF_SPM_CONTROL) && json_array_append_new(added, added_token(i, piece))))
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    size_t cm_len = 0;
    const char *cm = vkf_spm_charsmap(spm, &cm_len);
    if (st == VKF_OK && cm && !(*out_charsmap = base64((const unsigned char *)cm, cm_len)))
        st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    vkf_spm_free(spm);
    if (st == VKF_OK) {
        *out_vocab = vocab, *out_added = added;
    } else {
        json_decref(vocab), json_decref(added);
    }
    return st;
}

/* The folder's tokenizer: tokenizer.json where it has one (as AutoTokenizer prefers it), else spiece.model,
 * else none (m->tok NULL). */
static vkf_status open_tokenizer(const char *dir, t5 *m, const vkf_arch_spec *s)
{
    static const char TC[] = "tokenizer_config.json";
    json_t *tc = NULL;
    VKF_TRY(vkf_hf_read_json(dir, TC, true, &tc));
    /* (its numbers are read as reals: model_max_length 1e30 is written as an integer) */
    double extra = 100;
    vkf_status st = vkf_hf_float(tc, TC, "extra_ids", 0, 65536, 100, &extra);
    if (st == VKF_OK && extra != floor(extra))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"extra_ids\" must be a whole number", TC);
    int64_t extra_ids = (int64_t)extra;
    if (st == VKF_OK) st = vkf_hf_bool(tc, TC, "clean_up_tokenization_spaces", false, &m->clean_up);
    const char *what = NULL;
    bool has_json = vkf_hf_file(dir, "tokenizer.json", &what);
    if (st == VKF_OK && !has_json && strcmp(what, "missing") != 0)
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json is %s", what);
    bool has_spm = st == VKF_OK && !has_json && vkf_hf_file(dir, "spiece.model", &what);
    if (st == VKF_OK && !has_json && !has_spm && strcmp(what, "missing") != 0)
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "spiece.model is %s", what);
    json_t *vocab = NULL, *added = NULL;
    char *charsmap = NULL;
    if (st == VKF_OK && (has_json || has_spm))
        st = has_json ? json_parts(dir, &vocab, &charsmap, &added)
                      : spm_parts(dir, (uint32_t)extra_ids, &vocab, &charsmap, &added);
    if (st == VKF_OK && vocab) {
        st = build_tokenizer(vocab, charsmap, added, &m->tok);
        if (st == VKF_ERROR_BAD_MODEL) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", vkf_last_error());
            st = vkf_fail(st, "%s: %s", has_json ? "tokenizer.json" : "spiece.model", msg);
        }
    }
    if (st == VKF_OK && m->tok) {
        if (vkf_hftok_token_id(m->tok, "</s>") != s->eos_id)
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "the tokenizer's \"</s>\" is id %d, not eos_token_id %d",
                          vkf_hftok_token_id(m->tok, "</s>"), s->eos_id);
        else if (vkf_hftok_vocab_size(m->tok) > s->tgt_vocab)
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "the tokenizer's %u ids pass config.json's vocab_size %u",
                          vkf_hftok_vocab_size(m->tok), s->tgt_vocab);
    }
    json_decref(tc);
    free(charsmap);
    return st;
}

static vkf_status open_folder(const vkf_probe *p, const void *data, size_t size, vkf_loader *L, vkf_family_model *fm)
{
    (void)data, (void)size;
    const char *dir = p->path;
    t5 *m = calloc(1, sizeof *m);
    if (!m) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    fm->state = m;
    m->kind = strcmp(p->model_type, "mt5") == 0 ? T5_MT5 : strcmp(p->model_type, "longt5") == 0 ? T5_LONGT5 : T5_T5;
    snprintf(fm->name, sizeof fm->name, "%s", p->model_type);
    json_t *cfg = NULL;
    vkf_status st = vkf_hf_read_json(dir, "config.json", false, &cfg);
    if (st == VKF_OK) st = parse_config(cfg, m, &fm->spec);
    if (st == VKF_OK) st = vkf_hf_generation(dir, cfg, fm);
    json_decref(cfg);
    VKF_TRY(st);
    VKF_TRY(open_tokenizer(dir, m, &fm->spec));
    fm->has_text = m->tok != NULL;
    return vkf_hf_open_weights(dir, L);
}

/* ------------------------------------------------------------------ weights */

/* A norm's weight (d); T5's norms have no bias. */
static vkf_status ld_rms(vkf_loader *L, const char *name, vkf_norm *out)
{
    return vkf_ld_vector(L, name, L->spec->d_model, 0, L->spec->d_model, &out->g);
}

/* Whether tensors a and b hold the same values (same dtype, same bytes). */
static bool same_values(const vkf_loader *L, const char *a, const char *b)
{
    const vkf_st_tensor *ta = vkf_st_find(L->file, a), *tb = vkf_st_find(L->file, b);
    return ta && tb && ta->dtype == tb->dtype && ta->elements == tb->elements &&
           memcmp(vkf_st_data(L->file, ta), vkf_st_data(L->file, tb), (size_t)ta->elements * vkf_st_dtype_size(ta->dtype)) == 0;
}

/* The relative position bias of a stack: weight `name` (buckets, heads) as a table by distance (and, for
 * LongT5's transient-global encoder, `global` after it) in *out. */
static vkf_status ld_rel_bias(vkf_loader *L, const char *name, const char *global, bool bidirectional, vkf_tensor **out)
{
    const vkf_arch_spec *s = L->spec;
    uint32_t R = L->w->rel_radius, width = 2 * R + 1, tables = global ? 2 : 1;
    uint64_t per = (uint64_t)s->heads * width;
    float *table = malloc(per * tables * sizeof *table), *weight = malloc((size_t)s->rel_buckets * s->heads * sizeof *weight);
    vkf_status st = table && weight ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t k = 0; st == VKF_OK && k < tables; k++) {
        const vkf_st_tensor *t = NULL;
        const float *data = NULL;
        st = vkf_ld_find(L, k ? global : name, s->rel_buckets, s->heads, &t);
        if (st == VKF_OK) st = vkf_ld_floats(L, t, &data);
        if (st == VKF_OK) {
            memcpy(weight, data, (size_t)s->rel_buckets * s->heads * sizeof *weight);
            vkf_arch_rel_table(s, weight, bidirectional, R, table + k * per);
        }
    }
    uint64_t n = per * tables;
    if (st == VKF_OK && !L->dry_run) st = vkf_tensor_create(L->ctx, VKF_DTYPE_F32, 1, &n, out);
    if (st == VKF_OK && !L->dry_run) st = vkf_tensor_upload(*out, table, n * sizeof *table);
    free(table), free(weight);
    return st;
}

/* An attention's projections prefix{q,k,v,o}.weight: q, k, v stacked (or q apart and k, v stacked) and o. */
static vkf_status ld_attention(vkf_loader *L, const char *prefix, vkf_linear *qkv, vkf_linear *q, vkf_linear *kv,
                               vkf_linear *o)
{
    const vkf_arch_spec *s = L->spec;
    uint32_t d = s->d_model, inner = s->heads * s->head_dim;
    char n[4][320];
    static const char *const which[4] = {"q", "k", "v", "o"};
    const char *names[4];
    for (int i = 0; i < 4; i++) snprintf(n[i], sizeof n[i], "%.256s%s.weight", prefix, which[i]), names[i] = n[i];
    if (qkv) {
        VKF_TRY(vkf_ld_stacked(L, names, NULL, 3, inner, d, qkv));
    } else {
        VKF_TRY(vkf_ld_stacked(L, names, NULL, 1, inner, d, q));
        VKF_TRY(vkf_ld_stacked(L, names + 1, NULL, 2, inner, d, kv));
    }
    return vkf_ld_stacked(L, names + 3, NULL, 1, d, inner, o);
}

/* A feed-forward sublayer prefix = "...layer.N.": DenseReluDense.{wi | wi_0, wi_1}, wo, and its norm. */
static vkf_status ld_ffn(vkf_loader *L, const char *prefix, vkf_linear *ff1, vkf_linear *ff2, vkf_norm *norm)
{
    const vkf_arch_spec *s = L->spec;
    uint32_t d = s->d_model, f = s->d_ff;
    char a[320], b[320], o[320], ln[320];
    snprintf(a, sizeof a, "%.256sDenseReluDense.%s.weight", prefix, s->ffn_glu ? "wi_0" : "wi");
    snprintf(b, sizeof b, "%.256sDenseReluDense.wi_1.weight", prefix);
    snprintf(o, sizeof o, "%.256sDenseReluDense.wo.weight", prefix);
    snprintf(ln, sizeof ln, "%.256slayer_norm.weight", prefix);
    const char *wi[2] = {a, b}, *wo[1] = {o};
    VKF_TRY(vkf_ld_stacked(L, wi, NULL, s->ffn_glu ? 2 : 1, f, d, ff1));
    VKF_TRY(vkf_ld_stacked(L, wo, NULL, 1, d, f, ff2));
    return ld_rms(L, ln, norm);
}

/* Whether table `own` is the file's own: present and not equal to `base` (transformers 5.x ties a table only
 * where the file lacks it or holds the same values); a missing one must be tied. Notes it as expected. */
static vkf_status own_table(vkf_loader *L, const char *own, const char *base, bool tied, bool *out)
{
    *out = false;
    const vkf_st_tensor *t = NULL;
    if (vkf_st_find(L->file, own)) {
        VKF_TRY(vkf_ld_find(L, own, L->spec->src_vocab, L->spec->d_model, &t));
        *out = !same_values(L, own, base);
    } else if (!tied) {
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" is missing and tie_word_embeddings is false (transformers "
                        "would leave it random)", own);
    }
    return VKF_OK;
}

static vkf_status load(vkf_loader *L, const vkf_family_model *fm)
{
    const t5 *m = fm->state;
    const vkf_arch_spec *s = L->spec;
    vkf_arch_weights *w = L->w;
    uint32_t V = s->tgt_vocab, d = s->d_model;
    bool tied = m->kind != T5_LONGT5 || m->tie; /* transformers 5.x: T5 and mT5 always tie missing tables */
    /* shared.weight, or (missing) the first table that stands for it, as transformers swaps a missing source */
    static const char *const bases[] = {"shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight",
                                        "lm_head.weight"};
    const char *base = vkf_hf_first_present(L, bases, tied ? 4 : 1);
    if (!base) return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"shared.weight\" is missing");
    const vkf_st_tensor *t = NULL;
    VKF_TRY(vkf_ld_find(L, base, V, d, &t));
    bool src_own, tgt_own, head = vkf_st_find(L->file, "lm_head.weight") != NULL, head_own = false;
    VKF_TRY(own_table(L, "encoder.embed_tokens.weight", base, tied, &src_own));
    VKF_TRY(own_table(L, "decoder.embed_tokens.weight", base, tied, &tgt_own));
    if (!head && !tied)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"lm_head.weight\" is missing and tie_word_embeddings is false");
    if (head) {
        /* the generator is its own unless it holds the decoder table's values */
        VKF_TRY(vkf_ld_find(L, "lm_head.weight", V, d, &t));
        head_own = !same_values(L, "lm_head.weight", tgt_own ? "decoder.embed_tokens.weight" : base);
    }
    /* the encoder's table, the decoder's (the encoder's parts where both are shared.weight's), the generator (the
     * decoder's parts where tied; a missing lm_head ties to shared.weight, not to a decoder table of its own) */
    VKF_TRY(vkf_ld_table(L, src_own ? "encoder.embed_tokens.weight" : base, V, d, &w->src_embed));
    if (!tgt_own && !src_own) VKF_TRY(vkf_ld_share_table(&w->src_embed, &w->tgt_embed));
    else VKF_TRY(vkf_ld_table(L, tgt_own ? "decoder.embed_tokens.weight" : base, V, d, &w->tgt_embed));
    vkf_status st = VKF_OK;
    if (head_own) st = vkf_ld_generator(L, false, "lm_head.weight", NULL);
    else if (!head && tgt_own) st = vkf_ld_generator(L, false, base, NULL);
    else st = vkf_ld_generator(L, true, NULL, NULL);
    VKF_TRY(st);
    /* the relative position biases, by distance */
    bool tglobal = s->global_norm;
    const char *enc_attn = m->kind != T5_LONGT5 ? "SelfAttention"
                           : tglobal              ? "TransientGlobalSelfAttention"
                                                  : "LocalSelfAttention";
    char p[320], g[320];
    w->rel_radius = vkf_arch_rel_radius(s);
    snprintf(p, sizeof p, "encoder.block.0.layer.0.%s.relative_attention_bias.weight", enc_attn);
    snprintf(g, sizeof g, "encoder.block.0.layer.0.%s.global_relative_attention_bias.weight", enc_attn);
    VKF_TRY(ld_rel_bias(L, p, tglobal ? g : NULL, true, &w->rel_bias[0]));
    w->rel_global = tglobal;
    VKF_TRY(ld_rel_bias(L, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", NULL, false,
                        &w->rel_bias[1]));
    /* old checkpoints carry a cross-attention bias transformers ignores */
    const vkf_st_tensor *ignored = NULL;
    if (vkf_st_find(L->file, "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"))
        VKF_TRY(vkf_ld_find(L, "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight", s->rel_buckets,
                            s->heads, &ignored));
    for (uint32_t i = 0; i < s->encoder_layers; i++) {
        vkf_enc_layer *e = &w->enc[i];
        snprintf(p, sizeof p, "encoder.block.%u.layer.0.%s.", i, enc_attn);
        VKF_TRY(ld_attention(L, p, tglobal ? NULL : &e->qkv, &e->q, &e->kv, &e->o));
        if (tglobal) {
            snprintf(g, sizeof g, "encoder.block.%u.layer.0.%s.global_input_layer_norm.weight", i, enc_attn);
            VKF_TRY(ld_rms(L, g, &e->gnorm));
        }
        snprintf(p, sizeof p, "encoder.block.%u.layer.0.layer_norm.weight", i);
        VKF_TRY(ld_rms(L, p, &e->n1));
        snprintf(p, sizeof p, "encoder.block.%u.layer.1.", i);
        VKF_TRY(ld_ffn(L, p, &e->ff1, &e->ff2, &e->n2));
    }
    for (uint32_t i = 0; i < s->decoder_layers; i++) {
        vkf_dec_layer *e = &w->dec[i];
        snprintf(p, sizeof p, "decoder.block.%u.layer.0.SelfAttention.", i);
        VKF_TRY(ld_attention(L, p, &e->qkv, NULL, NULL, &e->o));
        snprintf(p, sizeof p, "decoder.block.%u.layer.0.layer_norm.weight", i);
        VKF_TRY(ld_rms(L, p, &e->n1));
        snprintf(p, sizeof p, "decoder.block.%u.layer.1.EncDecAttention.", i);
        VKF_TRY(ld_attention(L, p, NULL, &e->cq, &e->ckv, &e->co));
        snprintf(p, sizeof p, "decoder.block.%u.layer.1.layer_norm.weight", i);
        VKF_TRY(ld_rms(L, p, &e->n2));
        snprintf(p, sizeof p, "decoder.block.%u.layer.2.", i);
        VKF_TRY(ld_ffn(L, p, &e->ff1, &e->ff2, &e->n3));
    }
    VKF_TRY(ld_rms(L, "encoder.final_layer_norm.weight", &w->enc_norm));
    VKF_TRY(ld_rms(L, "decoder.final_layer_norm.weight", &w->dec_norm));
    char hint[160];
    snprintf(hint, sizeof hint, "config.json says %u encoder and %u decoder layers of a %s", s->encoder_layers,
             s->decoder_layers, m->kind == T5_T5 ? "T5ForConditionalGeneration" : m->kind == T5_MT5
                                                                                  ? "MT5ForConditionalGeneration"
                                                                                  : "LongT5ForConditionalGeneration");
    return vkf_ld_check_unexpected(L, hint);
}

/* ------------------------------------------------------------------ text */

static vkf_status encode(const vkf_family_model *fm, const char *text, const char *lang, int32_t *out_ids,
                         uint32_t capacity, uint32_t *out_count)
{
    (void)lang; /* no languages: vkf_model_encode_text_with refuses one */
    const t5 *m = fm->state;
    int32_t *ids = NULL;
    uint32_t n = 0;
    VKF_TRY(vkf_hftok_encode(m->tok, text, strlen(text), true, &ids, &n)); /* the template appends </s> */
    vkf_status st = n > capacity ? vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity)
                                 : VKF_OK;
    if (st == VKF_OK && n) memcpy(out_ids, ids, (size_t)n * sizeof *ids);
    if (st == VKF_OK) *out_count = n;
    free(ids);
    return st;
}

/* transformers' clean_up_tokenization: " ." -> ".", " ?", " !", " ,", " ' " -> "'", " n't", " 'm", " 's", " 've",
 * " 're", in that order over the whole text. */
static void clean_up(char *text, size_t *len)
{
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
    for (size_t k = 0; k < sizeof from / sizeof from[0]; k++) {
        size_t fl = strlen(from[k]), tl = strlen(to[k]), r = 0, w = 0;
        while (r < *len) {
            if (r + fl <= *len && memcmp(text + r, from[k], fl) == 0) {
                memmove(text + w, to[k], tl);
                w += tl, r += fl;
            } else {
                text[w++] = text[r++];
            }
        }
        *len = w;
        text[w] = '\0';
    }
}

static vkf_status decode(const vkf_family_model *fm, const int32_t *ids, uint32_t count, char *out_text, size_t capacity)
{
    const t5 *m = fm->state;
    VKF_TRY(vkf_family_check_target_ids(fm, ids, count));
    char *text = NULL;
    size_t len = 0;
    VKF_TRY(vkf_hftok_decode_n(m->tok, ids, count, true, &text, &len));
    if (m->clean_up) clean_up(text, &len);
    return vkf_family_text_out(text, len, out_text, capacity);
}

const vkf_family vkf_family_t5 = {
    .name = "t5",
    .probe = probe,
    .open = open_folder,
    .load = load,
    .encode = encode,
    .decode = decode,
    .free = t5_free,
};

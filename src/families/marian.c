/* Hugging Face Marian (opus-mt) model folders, read as the hub stores them:
 * config.json, model.safetensors, source.spm and target.spm, vocab.json (and
 * target_vocab.json where the vocabularies are separate) and
 * generation_config.json. The model follows transformers' MarianMTModel:
 * post-LN layers without final norms, Marian's sinusoidal positions (sin in the
 * first half of the channels, cos in the second), the embedding scale, shared
 * and tied embeddings, final_logits_bias, and the activation the config names.
 * Text goes through SentencePiece (tokenizer.h) and vocab.json, as
 * MarianTokenizer does, a leading ">>xx<<" language code kept as one token. */
#include "families/family.h"
#include "tokenizers/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct marian {
    vkf_spm *src_spm, *tgt_spm;
    vkf_vocab src, tgt;              /* tgt: target_vocab.json, or unused when shared */
    bool separate_vocabs;
    bool shared_embeddings, tied;       /* share_encoder_decoder_embeddings, tie_word_embeddings */
} marian;

static void marian_free(void *state)
{
    marian *mm = state;
    if (!mm) return;
    vkf_spm_free(mm->src_spm);
    vkf_spm_free(mm->tgt_spm);
    vkf_vocab_free(&mm->src);
    vkf_vocab_free(&mm->tgt);
    free(mm);
}

/* ------------------------------------------------------------------ config.json */

static vkf_status parse_config(marian *mm, json_t *c, vkf_arch_spec *s)
{
    static const char F[] = "config.json";
    int64_t v = 0, mp = 0, dv = 0, pad = 0, eos = 0, start = 0;
    VKF_TRY(vkf_hf_bart_sizes(c, s, &v));
    VKF_TRY(vkf_hf_int(c, F, "max_position_embeddings", 1, 1 << 16, -1, &mp));
    s->max_len = (uint32_t)mp;
    VKF_TRY(vkf_hf_int(c, F, "decoder_vocab_size", 1, 1 << 24, v, &dv));
    VKF_TRY(vkf_hf_int(c, F, "pad_token_id", 0, INT32_MAX, -1, &pad));
    VKF_TRY(vkf_hf_int(c, F, "eos_token_id", 0, INT32_MAX, -1, &eos));
    VKF_TRY(vkf_hf_int(c, F, "decoder_start_token_id", 0, INT32_MAX, pad, &start));
    bool scale, before = false, final_norm = false, layernorm_embedding = false;
    VKF_TRY(vkf_hf_bool(c, F, "scale_embedding", false, &scale));
    VKF_TRY(vkf_hf_bool(c, F, "share_encoder_decoder_embeddings", true, &mm->shared_embeddings));
    VKF_TRY(vkf_hf_bool(c, F, "tie_word_embeddings", true, &mm->tied));
    VKF_TRY(vkf_hf_bool(c, F, "normalize_before", false, &before));
    VKF_TRY(vkf_hf_bool(c, F, "add_final_layer_norm", false, &final_norm));
    VKF_TRY(vkf_hf_bool(c, F, "normalize_embedding", false, &layernorm_embedding));
    if (before || final_norm || layernorm_embedding)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: \"%s\" is true; Marian models are post-LN without "
                        "final or embedding norms, and vkformer runs only those",
                        before ? "normalize_before" : final_norm ? "add_final_layer_norm" : "normalize_embedding");
    if (mm->shared_embeddings && dv != v)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: shared embeddings but decoder_vocab_size %lld differs "
                        "from vocab_size %lld", (long long)dv, (long long)v);
    if (pad >= dv || eos >= dv || start >= dv || pad >= v || eos >= v)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: pad_token_id %lld, eos_token_id %lld and "
                        "decoder_start_token_id %lld must be below the vocabulary sizes (%lld, %lld)", (long long)pad,
                        (long long)eos, (long long)start, (long long)v, (long long)dv);
    s->pre_norm = false;
    s->norm = VKF_NORM_LAYER, s->norm_eps = 1e-5f; /* nn.LayerNorm's default, which Marian keeps */
    s->positions = VKF_POS_SIN_HALF;
    s->tgt_vocab = (uint32_t)dv;
    s->embed_scale = scale ? sqrtf((float)s->d_model) : 1.0f;
    s->pad_id = (int32_t)pad, s->eos_id = (int32_t)eos, s->decoder_start_id = (int32_t)start;
    return VKF_OK;
}

/* ------------------------------------------------------------------ open */

static bool probe(const vkf_probe *p)
{
    return p->is_dir && p->model_type && strcmp(p->model_type, "marian") == 0;
}

static vkf_status open_folder(const vkf_probe *p, const void *data, size_t size, vkf_loader *L, vkf_family_model *fm)
{
    (void)data, (void)size;
    const char *dir = p->path;
    marian *mm = calloc(1, sizeof *mm);
    if (!mm) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    fm->state = mm;
    snprintf(fm->name, sizeof fm->name, "marian");
    json_t *cfg = NULL, *vocab = NULL, *tvocab = NULL;
    vkf_status st = vkf_hf_read_json(dir, "config.json", false, &cfg);
    if (st == VKF_OK) st = parse_config(mm, cfg, &fm->spec);
    if (st == VKF_OK) st = vkf_hf_generation(dir, cfg, fm);
    /* separate vocabularies: vocab.json for the source, target_vocab.json for the target */
    if (st == VKF_OK) mm->separate_vocabs = vkf_hf_file(dir, "target_vocab.json", NULL);
    if (st == VKF_OK && !mm->separate_vocabs && fm->spec.src_vocab != fm->spec.tgt_vocab)
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: vocab_size %u and decoder_vocab_size %u differ, but the "
                      "folder has no target_vocab.json", fm->spec.src_vocab, fm->spec.tgt_vocab);
    if (st == VKF_OK) st = vkf_hf_read_json(dir, "vocab.json", false, &vocab);
    if (st == VKF_OK) st = vkf_vocab_json("vocab.json", vocab, fm->spec.src_vocab, &mm->src);
    if (st == VKF_OK) st = vkf_vocab_check_specials("vocab.json", &mm->src, fm->spec.eos_id, fm->spec.pad_id);
    if (st == VKF_OK && mm->separate_vocabs) st = vkf_hf_read_json(dir, "target_vocab.json", false, &tvocab);
    if (st == VKF_OK && mm->separate_vocabs)
        st = vkf_vocab_json("target_vocab.json", tvocab, fm->spec.tgt_vocab, &mm->tgt);
    if (st == VKF_OK && mm->separate_vocabs)
        st = vkf_vocab_check_specials("target_vocab.json", &mm->tgt, fm->spec.eos_id, fm->spec.pad_id);
    if (st == VKF_OK) st = vkf_spm_open(dir, "source.spm", &mm->src_spm);
    if (st == VKF_OK) st = vkf_spm_open(dir, "target.spm", &mm->tgt_spm);
    if (st == VKF_OK) st = vkf_vocab_check_spm(&mm->src, "vocab.json", mm->src_spm, "source.spm");
    if (st == VKF_OK)
        st = mm->separate_vocabs ? vkf_vocab_check_spm(&mm->tgt, "target_vocab.json", mm->tgt_spm, "target.spm")
                                 : vkf_vocab_check_spm(&mm->src, "vocab.json", mm->tgt_spm, "target.spm");
    json_decref(cfg), json_decref(vocab), json_decref(tvocab);
    VKF_TRY(st);
    /* a multilingual target: the vocabulary's >>xx<< codes, given in the source */
    const vkf_vocab *v = &mm->src;
    for (uint32_t i = 0; i < v->n; i++) {
        size_t len = strlen(v->piece[i]);
        if (len > 4 && strncmp(v->piece[i], ">>", 2) == 0 && strcmp(v->piece[i] + len - 2, "<<") == 0) {
            char code[96];
            snprintf(code, sizeof code, "%.*s", (int)(len - 4 < 80 ? len - 4 : 80), v->piece[i] + 2);
            VKF_TRY(vkf_family_add_language(fm, code, (int32_t)i));
        }
    }
    fm->target_lang_in_source = true;
    fm->has_text = true;
    return vkf_hf_open_weights(dir, L);
}

/* ------------------------------------------------------------------ weights */

static vkf_status load(vkf_loader *L, const vkf_family_model *fm)
{
    const marian *mm = fm->state;
    vkf_arch_weights *w = L->w;
    const vkf_arch_spec *c = L->spec;
    uint32_t V = c->tgt_vocab;
    /* Embeddings: transformers ties model.shared, both embed_tokens and lm_head,
     * and a saved file holds any one of the tied names. */
    const char *enc_names[] = {"model.shared.weight", "model.encoder.embed_tokens.weight",
                               mm->shared_embeddings ? "model.decoder.embed_tokens.weight" : NULL,
                               mm->shared_embeddings && mm->tied ? "lm_head.weight" : NULL};
    const char *tgt_name = NULL;
    VKF_TRY(vkf_hf_tied_table(L, enc_names, 4, c->src_vocab, &w->src_embed, &tgt_name));
    if (mm->shared_embeddings) {
        VKF_TRY(vkf_ld_share_table(&w->src_embed, &w->tgt_embed));
    } else {
        const char *dec_names[] = {"model.decoder.embed_tokens.weight", mm->tied ? "lm_head.weight" : NULL};
        VKF_TRY(vkf_hf_tied_table(L, dec_names, 2, V, &w->tgt_embed, &tgt_name));
    }
    VKF_TRY(vkf_ld_positions(L, "model.encoder.embed_positions.weight", &w->pe));
    VKF_TRY(vkf_ld_positions(L, "model.decoder.embed_positions.weight", &w->pe_dec));
    VKF_TRY(vkf_hf_load_layers(L, "model."));
    /* the generator: lm_head (tied: the target embedding's parts) + final_logits_bias */
    VKF_TRY(vkf_hf_biased_generator(L, mm->tied, "lm_head.weight", false));
    return vkf_hf_check_unexpected(L, "MarianMTModel");
}

/* ------------------------------------------------------------------ text */

/* MarianTokenizer: a leading ">>xx<<" language code is one token; the rest goes
 * through source.spm, each piece looked up in vocab.json (unknown: <unk>), eos last. */
static vkf_status encode(const vkf_family_model *fm, const char *text, const char *lang, int32_t *out_ids,
                         uint32_t capacity, uint32_t *out_count)
{
    const marian *mm = fm->state;
    const vkf_vocab *v = &mm->src;
    uint32_t n = 0;
    const char *rest = text;
    if (lang) {
        /* a target language of a multilingual model: its >>code<< token leads the source */
        char code[96];
        snprintf(code, sizeof code, ">>%.80s<<", lang);
        int32_t id = vkf_vocab_id(v, code, strlen(code));
        if (n < capacity) out_ids[n++] = id < 0 ? v->unk_id : id;
    }
    if (strncmp(text, ">>", 2) == 0) {
        const char *end = strstr(text + 2, "<<");
        if (end && n < capacity) {
            int32_t id = vkf_vocab_id(v, text, (size_t)(end + 2 - text));
            out_ids[n++] = id < 0 ? v->unk_id : id;
            rest = end + 2;
        }
    }
    uint32_t pieces = 0;
    if (capacity < n + 1) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity ? capacity - 1 : 0);
    VKF_TRY(vkf_spm_ids(mm->src_spm, v, v->unk_id, rest, strlen(rest), out_ids + n, capacity - n - 1, &pieces));
    n += pieces;
    out_ids[n++] = fm->spec.eos_id;
    *out_count = n;
    return VKF_OK;
}

/* MarianTokenizer's target side (text_target): target.spm, each piece looked up
 * in the target vocabulary (unknown: <unk>); no eos. */
static vkf_status encode_target(const vkf_family_model *fm, const char *text, int32_t *out_ids, uint32_t capacity,
                                uint32_t *out_count)
{
    const marian *mm = fm->state;
    const vkf_vocab *v = mm->separate_vocabs ? &mm->tgt : &mm->src;
    return vkf_spm_ids(mm->tgt_spm, v, v->unk_id, text, strlen(text), out_ids, capacity, out_count);
}

static int32_t target_token(const vkf_family_model *fm, const char *token, size_t len)
{
    const marian *mm = fm->state;
    return vkf_vocab_id(mm->separate_vocabs ? &mm->tgt : &mm->src, token, len);
}

/* MarianTokenizer.decode(skip_special_tokens=True): eos, pad and unk skipped, the
 * rest mapped to their pieces and decoded by the target spm. */
static vkf_status decode(const vkf_family_model *fm, const int32_t *ids, uint32_t count, char *out_text,
                         size_t capacity)
{
    const marian *mm = fm->state;
    const vkf_vocab *v = mm->separate_vocabs ? &mm->tgt : &mm->src;
    const char **pieces = malloc((count ? count : 1) * sizeof *pieces);
    if (!pieces) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    size_t n = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= v->n) {
            free(pieces);
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "id %d is outside the target vocabulary", ids[i]);
        }
        if (ids[i] == fm->spec.eos_id || ids[i] == fm->spec.pad_id || ids[i] == v->unk_id) continue;
        pieces[n++] = v->piece[ids[i]];
    }
    vkf_status st = vkf_spm_text(mm->tgt_spm, pieces, n, out_text, capacity);
    free(pieces);
    return st;
}

const vkf_family vkf_family_marian = {
    .name = "marian",
    .probe = probe,
    .open = open_folder,
    .load = load,
    .encode = encode,
    .decode = decode,
    .free = marian_free,
    .encode_target = encode_target,
    .target_token = target_token,
};

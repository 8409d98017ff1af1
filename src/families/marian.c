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
#include "families/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A vocabulary file: pieces by id, and ids sorted by piece for lookups. */
typedef struct marian_vocab {
    char **piece;                       /* (n) owned */
    uint32_t *order;                    /* (n) owned */
    uint32_t n;
    int32_t unk_id;
} marian_vocab;

typedef struct marian {
    vkf_spm *src_spm, *tgt_spm;
    marian_vocab src, tgt;              /* tgt: target_vocab.json, or unused when shared */
    bool separate_vocabs;
    bool shared_embeddings, tied;       /* share_encoder_decoder_embeddings, tie_word_embeddings */
} marian;

static void vocab_free(marian_vocab *v)
{
    for (uint32_t i = 0; v->piece && i < v->n; i++) free(v->piece[i]);
    free(v->piece);
    free(v->order);
}

static void marian_free(void *state)
{
    marian *mm = state;
    if (!mm) return;
    vkf_spm_free(mm->src_spm);
    vkf_spm_free(mm->tgt_spm);
    vocab_free(&mm->src);
    vocab_free(&mm->tgt);
    free(mm);
}

/* ------------------------------------------------------------------ config.json */

static vkf_status parse_config(marian *mm, json_t *c, vkf_arch_spec *s)
{
    static const char F[] = "config.json";
    int64_t d = 0, el = 0, dl = 0, eh = 1, dh = 1, ef = 0, df = 0, v = 0, dv = 0, mp = 0, pad = 0, eos = 0, start = 0;
    VKF_TRY(vkf_hf_int(c, F, "d_model", 1, 65536, -1, &d));
    VKF_TRY(vkf_hf_int(c, F, "encoder_layers", 1, 1024, -1, &el));
    VKF_TRY(vkf_hf_int(c, F, "decoder_layers", 1, 1024, -1, &dl));
    VKF_TRY(vkf_hf_int(c, F, "encoder_attention_heads", 1, 4096, -1, &eh));
    VKF_TRY(vkf_hf_int(c, F, "decoder_attention_heads", 1, 4096, -1, &dh));
    VKF_TRY(vkf_hf_int(c, F, "encoder_ffn_dim", 1, 1 << 20, -1, &ef));
    VKF_TRY(vkf_hf_int(c, F, "decoder_ffn_dim", 1, 1 << 20, -1, &df));
    VKF_TRY(vkf_hf_int(c, F, "vocab_size", 1, 1 << 24, -1, &v));
    VKF_TRY(vkf_hf_int(c, F, "decoder_vocab_size", 1, 1 << 24, v, &dv));
    VKF_TRY(vkf_hf_int(c, F, "max_position_embeddings", 1, 1 << 16, -1, &mp));
    VKF_TRY(vkf_hf_int(c, F, "pad_token_id", 0, INT32_MAX, -1, &pad));
    VKF_TRY(vkf_hf_int(c, F, "eos_token_id", 0, INT32_MAX, -1, &eos));
    VKF_TRY(vkf_hf_int(c, F, "decoder_start_token_id", 0, INT32_MAX, pad, &start));
    if (eh != dh || ef != df)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: the encoder and decoder differ in heads (%lld, %lld) or "
                        "ffn_dim (%lld, %lld); vkformer runs models where they agree", (long long)eh, (long long)dh,
                        (long long)ef, (long long)df);
    if (d % eh) return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: d_model %lld is not divisible by %lld heads",
                                (long long)d, (long long)eh);
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
    VKF_TRY(vkf_hf_activation(c, F, &s->activation));
    if (pad >= dv || eos >= dv || start >= dv || pad >= v || eos >= v)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "config.json: pad_token_id %lld, eos_token_id %lld and "
                        "decoder_start_token_id %lld must be below the vocabulary sizes (%lld, %lld)", (long long)pad,
                        (long long)eos, (long long)start, (long long)v, (long long)dv);
    s->d_model = (uint32_t)d, s->heads = (uint32_t)eh, s->head_dim = (uint32_t)(d / eh);
    s->encoder_layers = (uint32_t)el, s->decoder_layers = (uint32_t)dl;
    s->d_ff = (uint32_t)ef;
    s->pre_norm = false;
    s->norm = VKF_NORM_LAYER, s->norm_eps = 1e-5f; /* nn.LayerNorm's default, which Marian keeps */
    s->positions = VKF_POS_SIN_HALF;
    s->src_vocab = (uint32_t)v, s->tgt_vocab = (uint32_t)dv;
    s->max_len = (uint32_t)mp;
    s->embed_scale = scale ? sqrtf((float)d) : 1.0f;
    s->pad_id = (int32_t)pad, s->eos_id = (int32_t)eos, s->decoder_start_id = (int32_t)start;
    return VKF_OK;
}

/* ------------------------------------------------------------------ vocab.json */

static const marian_vocab *sort_vocab;

static int by_piece(const void *a, const void *b)
{
    return strcmp(sort_vocab->piece[*(const uint32_t *)a], sort_vocab->piece[*(const uint32_t *)b]);
}

static int32_t piece_id(const marian_vocab *hf, const char *p, size_t len)
{
    uint32_t lo = 0, hi = hf->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const char *q = hf->piece[hf->order[mid]];
        int c = strncmp(q, p, len);
        if (c == 0) c = q[len] ? 1 : 0;
        if (c == 0) return (int32_t)hf->order[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* vocab.json (or target_vocab.json): piece -> id for ids 0..n-1, each once. */
static vkf_status parse_vocab(const char *file, json_t *v, uint32_t n, const vkf_arch_spec *s, marian_vocab *out)
{
    if ((uint32_t)json_object_size(v) != n)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "%s has %zu entries; config.json says the vocabulary has %u", file,
                        json_object_size(v), n);
    out->piece = calloc(n, sizeof *out->piece);
    out->order = malloc(n * sizeof *out->order);
    if (!out->piece || !out->order) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %s", file);
    out->n = n;
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= n)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%.64s\" maps to %s; ids must be integers 0..%u", file, key,
                            json_is_integer(val) ? "an id out of range" : "a non-integer", n - 1);
        uint32_t id = (uint32_t)json_integer_value(val);
        if (out->piece[id]) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: id %u is given twice", file, id);
        if (!(out->piece[id] = strdup(key))) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (uint32_t i = 0; i < n; i++) out->order[i] = i;
    sort_vocab = out;
    qsort(out->order, n, sizeof *out->order, by_piece);
    sort_vocab = NULL;
    const struct { const char *piece; int32_t id; const char *what; } specials[] = {
        {"</s>", s->eos_id, "eos_token_id"}, {"<pad>", s->pad_id, "pad_token_id"}};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        if (piece_id(out, specials[i].piece, strlen(specials[i].piece)) != specials[i].id)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s: \"%s\" is not id %d, the config's %s", file, specials[i].piece,
                            specials[i].id, specials[i].what);
    out->unk_id = piece_id(out, "<unk>", 5);
    if (out->unk_id < 0) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s has no \"<unk>\"", file);
    return VKF_OK;
}

/* Every ordinary piece of an spm must have an id in vocab.json, as in the folders
 * Marian's converter writes (vocab.json is the union of both models' pieces). */
static vkf_status check_spm(const marian_vocab *hf, const char *vname, const vkf_spm *s, const char *name)
{
    for (uint32_t i = 0; i < vkf_spm_size(s); i++) {
        int kind = 0;
        const char *p = vkf_spm_piece(s, i, &kind);
        if (p && kind == VKF_SPM_NORMAL && piece_id(hf, p, strlen(p)) < 0)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "%s disagrees with %s: its piece \"%.64s\" has no id", vname, name, p);
    }
    return VKF_OK;
}

static vkf_status load_spm(const char *dir, const char *name, vkf_spm **out)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const char *what = NULL;
    if (!vkf_hf_file(dir, name, &what)) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s is %s (the SentencePiece model)", name, what);
    *out = vkf_spm_load(path, err, sizeof err);
    if (!*out) return vkf_fail(VKF_ERROR_BAD_MODEL, "%s", err);
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
    if (st == VKF_OK) st = parse_vocab("vocab.json", vocab, fm->spec.src_vocab, &fm->spec, &mm->src);
    if (st == VKF_OK && mm->separate_vocabs) st = vkf_hf_read_json(dir, "target_vocab.json", false, &tvocab);
    if (st == VKF_OK && mm->separate_vocabs)
        st = parse_vocab("target_vocab.json", tvocab, fm->spec.tgt_vocab, &fm->spec, &mm->tgt);
    if (st == VKF_OK) st = load_spm(dir, "source.spm", &mm->src_spm);
    if (st == VKF_OK) st = load_spm(dir, "target.spm", &mm->tgt_spm);
    if (st == VKF_OK) st = check_spm(&mm->src, "vocab.json", mm->src_spm, "source.spm");
    if (st == VKF_OK)
        st = mm->separate_vocabs ? check_spm(&mm->tgt, "target_vocab.json", mm->tgt_spm, "target.spm")
                                 : check_spm(&mm->src, "vocab.json", mm->tgt_spm, "target.spm");
    json_decref(cfg), json_decref(vocab), json_decref(tvocab);
    VKF_TRY(st);
    /* a multilingual target: the vocabulary's >>xx<< codes, given in the source */
    const marian_vocab *v = &mm->src;
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
    const vkf_st_tensor *bt = NULL;
    const float *bias = NULL;
    VKF_TRY(vkf_ld_find(L, "final_logits_bias", 1, V, &bt));
    VKF_TRY(vkf_ld_floats(L, bt, &bias));
    float *b = malloc((size_t)V * sizeof *b);
    if (!b) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memcpy(b, bias, (size_t)V * sizeof *b);
    vkf_status st = vkf_ld_generator(L, mm->tied, "lm_head.weight", b);
    free(b);
    VKF_TRY(st);
    char hint[128];
    snprintf(hint, sizeof hint, "config.json says %u encoder and %u decoder layers of a MarianMTModel",
             c->encoder_layers, c->decoder_layers);
    return vkf_ld_check_unexpected(L, hint);
}

/* ------------------------------------------------------------------ text */

typedef struct encode_state {
    const marian_vocab *hf;
    int32_t *ids;
    uint32_t n, capacity;
} encode_state;

static int add_piece(const char *piece, size_t len, void *user)
{
    encode_state *e = user;
    if (e->n >= e->capacity) return 1;
    int32_t id = piece_id(e->hf, piece, len);
    e->ids[e->n++] = id < 0 ? e->hf->unk_id : id; /* MarianTokenizer: unknown pieces are <unk> */
    return 0;
}

/* MarianTokenizer: a leading ">>xx<<" language code is one token; the rest goes
 * through source.spm, each piece looked up in vocab.json (unknown: <unk>), eos last. */
static vkf_status encode(const vkf_family_model *fm, const char *text, const char *lang, int32_t *out_ids,
                         uint32_t capacity, uint32_t *out_count)
{
    const marian *mm = fm->state;
    encode_state e = {&mm->src, out_ids, 0, capacity};
    char code[96];
    const char *rest = text;
    if (lang) {
        /* a target language of a multilingual model: its >>code<< token leads the source */
        snprintf(code, sizeof code, ">>%.80s<<", lang);
        if (add_piece(code, strlen(code), &e)) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u "
                                                                "tokens", capacity ? capacity - 1 : 0);
    }
    if (strncmp(text, ">>", 2) == 0) {
        const char *end = strstr(text + 2, "<<");
        if (end) {
            if (add_piece(text, (size_t)(end + 2 - text), &e))
                return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity ? capacity - 1 : 0);
            rest = end + 2;
        }
    }
    char err[512];
    int rc = vkf_spm_encode(mm->src_spm, rest, add_piece, &e, err, sizeof err);
    if (rc < 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "tokenizing: %s", err);
    if (rc > 0 || e.n >= capacity)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity ? capacity - 1 : 0);
    out_ids[e.n++] = fm->spec.eos_id;
    *out_count = e.n;
    return VKF_OK;
}

/* MarianTokenizer's target side (text_target): target.spm, each piece looked up
 * in the target vocabulary (unknown: <unk>); no eos. */
static vkf_status encode_target(const vkf_family_model *fm, const char *text, int32_t *out_ids, uint32_t capacity,
                                uint32_t *out_count)
{
    const marian *mm = fm->state;
    encode_state e = {mm->separate_vocabs ? &mm->tgt : &mm->src, out_ids, 0, capacity};
    char err[512];
    int rc = vkf_spm_encode(mm->tgt_spm, text, add_piece, &e, err, sizeof err);
    if (rc < 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "tokenizing: %s", err);
    if (rc > 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity);
    *out_count = e.n;
    return VKF_OK;
}

static int32_t target_token(const vkf_family_model *fm, const char *token, size_t len)
{
    const marian *mm = fm->state;
    return piece_id(mm->separate_vocabs ? &mm->tgt : &mm->src, token, len);
}

static vkf_status decode(const vkf_family_model *fm, const int32_t *ids, uint32_t count, char *out_text,
                         size_t capacity)
{
    const marian *mm = fm->state;
    const marian_vocab *hf = mm->separate_vocabs ? &mm->tgt : &mm->src;
    const char **pieces = malloc((count ? count : 1) * sizeof *pieces);
    if (!pieces) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    size_t n = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= hf->n) {
            free(pieces);
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "id %d is outside the target vocabulary", ids[i]);
        }
        /* skip_special_tokens: eos, pad and unk, as MarianTokenizer.decode */
        if (ids[i] == fm->spec.eos_id || ids[i] == fm->spec.pad_id || ids[i] == hf->unk_id) continue;
        pieces[n++] = hf->piece[ids[i]];
    }
    char *text = NULL, err[512];
    int rc = vkf_spm_decode(mm->tgt_spm, pieces, n, &text, err, sizeof err);
    free(pieces);
    if (rc < 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "detokenizing: %s", err);
    /* as MarianTokenizer.convert_tokens_to_string: any "\u2581" left (pieces the
     * spm does not know come back verbatim) becomes a space, and the ends are
     * stripped of whitespace */
    size_t w = 0;
    for (size_t r = 0; text[r];) {
        if ((unsigned char)text[r] == 0xe2 && (unsigned char)text[r + 1] == 0x96 && (unsigned char)text[r + 2] == 0x81)
            text[w++] = ' ', r += 3;
        else
            text[w++] = text[r++];
    }
    text[w] = '\0';
    size_t start = 0;
    while (text[start] && strchr(" \t\n\r\f\v", text[start])) start++;
    while (w > start && strchr(" \t\n\r\f\v", text[w - 1])) text[--w] = '\0';
    memmove(text, text + start, w - start + 1);
    size_t len = strlen(text);
    vkf_status st = VKF_OK;
    if (len + 1 > capacity) st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text needs more than %zu bytes", capacity);
    else memcpy(out_text, text, len + 1);
    free(text);
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

/* vkformer's own model file (docs/file-format.md): one safetensors file whose
 * __metadata__["vkformer.config"] holds the config, PyTorch nn.Transformer's
 * weights with embeddings and a generator, and optional word lists for text
 * (split on whitespace or into characters, joined with tgt_join). */
#include "families/family.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The config's sizes as the file names them. */
typedef struct config {
    uint32_t d_model, n_heads, n_encoder_layers, n_decoder_layers, d_ff, src_vocab_size, tgt_vocab_size, max_len;
    vkf_activation activation;
    bool norm_first;
} config;

/* Text: the config's word lists. */
typedef struct vkformer_text {
    char **src_vocab, **tgt_vocab;      /* owned, or NULL */
    uint32_t src_vocab_size, tgt_vocab_size;
    bool split_chars;                   /* src_split == "chars" */
    char *tgt_join;                     /* owned */
} vkformer_text;


static vkf_status bad(const char *fmt, const char *key, const char *detail)
{
    return vkf_fail(VKF_ERROR_BAD_MODEL, fmt, key, detail);
}

static vkf_status get_uint(json_t *cfg, const char *key, uint64_t min, uint64_t max, uint32_t *out)
{
    json_t *v = json_object_get(cfg, key);
    if (!v) return bad("vkformer.config: key \"%s\" is missing%s", key, "");
    if (!json_is_integer(v)) return bad("vkformer.config: \"%s\" must be an integer%s", key, "");
    json_int_t x = json_integer_value(v);
    if (x < (json_int_t)min || (uint64_t)x > max) {
        char range[96];
        snprintf(range, sizeof range, " (%lld is outside %llu..%llu)", (long long)x, (unsigned long long)min,
                 (unsigned long long)max);
        return bad("vkformer.config: \"%s\" is out of range%s", key, range);
    }
    *out = (uint32_t)x;
    return VKF_OK;
}

static vkf_status get_number(json_t *cfg, const char *key, double *out)
{
    json_t *v = json_object_get(cfg, key);
    if (!v) return bad("vkformer.config: key \"%s\" is missing%s", key, "");
    if (!json_is_number(v)) return bad("vkformer.config: \"%s\" must be a number%s", key, "");
    *out = json_number_value(v);
    if (!isfinite(*out)) return bad("vkformer.config: \"%s\" is not finite%s", key, "");
    return VKF_OK;
}

static void free_vocab(char **vocab, uint32_t n)
{
    if (!vocab) return;
    for (uint32_t i = 0; i < n; i++) free(vocab[i]);
    free(vocab);
}

static vkf_status get_vocab(json_t *cfg, const char *key, uint32_t size, char ***out)
{
    *out = NULL;
    json_t *v = json_object_get(cfg, key);
    if (!v) return VKF_OK;
    if (!json_is_array(v)) return bad("vkformer.config: \"%s\" must be a list of strings%s", key, "");
    if (json_array_size(v) != size) {
        char detail[96];
        snprintf(detail, sizeof detail, " (%zu entries, the vocabulary size is %u)", json_array_size(v), size);
        return bad("vkformer.config: \"%s\" has the wrong length%s", key, detail);
    }
    char **vocab = calloc(size, sizeof *vocab);
    if (!vocab) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %s", key);
    for (uint32_t i = 0; i < size; i++) {
        json_t *s = json_array_get(v, i);
        if (!json_is_string(s)) {
            free_vocab(vocab, size);
            char detail[64];
            snprintf(detail, sizeof detail, " (entry %u is not a string)", i);
            return bad("vkformer.config: \"%s\" must be a list of strings%s", key, detail);
        }
        vocab[i] = strdup(json_string_value(s));
        if (!vocab[i]) {
            free_vocab(vocab, size);
            return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for %s", key);
        }
    }
    *out = vocab;
    return VKF_OK;
}

/* Parses and checks __metadata__["vkformer.config"]. */
static vkf_status parse_config(vkf_family_model *fm, vkformer_text *tx, const char *text)
{
    if (!text) return vkf_fail(VKF_ERROR_BAD_MODEL, "the file has no __metadata__ key \"vkformer.config\"");
    json_error_t err;
    json_t *cfg = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!cfg) return vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config is not valid JSON: %s (column %d)", err.text, err.column);
    vkf_status st = VKF_OK;
    config c_ = {0}, *c = &c_;
    uint32_t pad = 0, bos = 0, eos = 0;
    double eps = 0, scale = 0;
    if (!json_is_object(cfg)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config must be a JSON object");
    /* Bounds keep every derived size inside 32-bit shader indices and sane memory. */
    if (st == VKF_OK) st = get_uint(cfg, "d_model", 1, 65536, &c->d_model);
    if (st == VKF_OK) st = get_uint(cfg, "n_heads", 1, 4096, &c->n_heads);
    if (st == VKF_OK) st = get_uint(cfg, "n_encoder_layers", 1, 1024, &c->n_encoder_layers);
    if (st == VKF_OK) st = get_uint(cfg, "n_decoder_layers", 1, 1024, &c->n_decoder_layers);
    if (st == VKF_OK) st = get_uint(cfg, "d_ff", 1, 1u << 20, &c->d_ff);
    if (st == VKF_OK) st = get_uint(cfg, "src_vocab_size", 1, 1u << 24, &c->src_vocab_size);
    if (st == VKF_OK) st = get_uint(cfg, "tgt_vocab_size", 1, 1u << 24, &c->tgt_vocab_size);
    if (st == VKF_OK) st = get_uint(cfg, "max_len", 1, 1u << 16, &c->max_len);
    if (st == VKF_OK) st = get_uint(cfg, "pad_id", 0, UINT32_MAX, &pad);
    if (st == VKF_OK) st = get_uint(cfg, "bos_id", 0, UINT32_MAX, &bos);
    if (st == VKF_OK) st = get_uint(cfg, "eos_id", 0, UINT32_MAX, &eos);
    if (st == VKF_OK) st = get_number(cfg, "layer_norm_eps", &eps);
    if (st == VKF_OK) st = get_number(cfg, "embed_scale", &scale);
    if (st == VKF_OK && c->d_model % c->n_heads)
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: d_model %u is not divisible by n_heads %u", c->d_model,
                      c->n_heads);
    if (st == VKF_OK && !(eps > 0 && eps < 1))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: layer_norm_eps %g must be in (0, 1)", eps);
    if (st == VKF_OK && (pad >= c->tgt_vocab_size || bos >= c->tgt_vocab_size || eos >= c->tgt_vocab_size))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: pad_id %u, bos_id %u and eos_id %u must be below tgt_vocab_size %u",
                      pad, bos, eos, c->tgt_vocab_size);
    if (st == VKF_OK && (pad >= c->src_vocab_size || eos >= c->src_vocab_size))
        st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: pad_id %u and eos_id %u must be below src_vocab_size %u",
                      pad, eos, c->src_vocab_size);
    if (st == VKF_OK) {
        json_t *act = json_object_get(cfg, "activation");
        const char *a = json_is_string(act) ? json_string_value(act) : NULL;
        if (!act) st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: key \"activation\" is missing");
        else if (a && strcmp(a, "relu") == 0) c->activation = VKF_ACTIVATION_RELU;
        else if (a && strcmp(a, "gelu") == 0) c->activation = VKF_ACTIVATION_GELU;
        else if (a && strcmp(a, "silu") == 0) c->activation = VKF_ACTIVATION_SILU;
        else st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: \"activation\" must be \"relu\", \"gelu\" or \"silu\"");
    }
    if (st == VKF_OK) {
        json_t *nf = json_object_get(cfg, "norm_first");
        if (!nf) st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: key \"norm_first\" is missing");
        else if (!json_is_boolean(nf)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: \"norm_first\" must be true or false");
        else c->norm_first = json_is_true(nf);
    }
    if (st == VKF_OK) st = get_vocab(cfg, "src_vocab", c->src_vocab_size, &tx->src_vocab);
    tx->src_vocab_size = tx->src_vocab ? c->src_vocab_size : 0; /* what free_vocab frees */
    if (st == VKF_OK) st = get_vocab(cfg, "tgt_vocab", c->tgt_vocab_size, &tx->tgt_vocab);
    tx->tgt_vocab_size = tx->tgt_vocab ? c->tgt_vocab_size : 0;
    if (st == VKF_OK) {
        json_t *split = json_object_get(cfg, "src_split");
        if (split && !(json_is_string(split) && (strcmp(json_string_value(split), "whitespace") == 0 ||
                                                 strcmp(json_string_value(split), "chars") == 0)))
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: \"src_split\" must be \"whitespace\" or \"chars\"");
        else tx->split_chars = split && strcmp(json_string_value(split), "chars") == 0;
    }
    if (st == VKF_OK) {
        json_t *join = json_object_get(cfg, "tgt_join");
        if (join && !json_is_string(join)) st = vkf_fail(VKF_ERROR_BAD_MODEL, "vkformer.config: \"tgt_join\" must be a string");
        else if (!(tx->tgt_join = strdup(join ? json_string_value(join) : " ")))
            st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    if (st == VKF_OK) {
        /* PyTorch's nn.Transformer: pre- or post-LN, final norms on both stacks,
         * interleaved sinusoids, biases everywhere, an untied generator */
        vkf_arch_spec *s = &fm->spec;
        s->d_model = c->d_model, s->heads = c->n_heads, s->head_dim = c->d_model / c->n_heads;
        s->encoder_layers = c->n_encoder_layers, s->decoder_layers = c->n_decoder_layers, s->d_ff = c->d_ff;
        s->src_vocab = c->src_vocab_size, s->tgt_vocab = c->tgt_vocab_size, s->max_len = c->max_len;
        s->pre_norm = c->norm_first;
        s->encoder_final_norm = s->decoder_final_norm = true;
        s->norm = VKF_NORM_LAYER, s->norm_eps = (float)eps;
        s->positions = VKF_POS_SIN_INTERLEAVED;
        s->embed_scale = (float)scale;
        s->activation = c->activation;
        s->pad_id = (int32_t)pad, s->decoder_start_id = (int32_t)bos, s->eos_id = (int32_t)eos;
        fm->has_text = tx->src_vocab && tx->tgt_vocab;
        tx->src_vocab_size = c->src_vocab_size, tx->tgt_vocab_size = c->tgt_vocab_size;
    }
    json_decref(cfg);
    return st;
}

static vkf_status load(vkf_loader *L, const vkf_family_model *fm)
{
    (void)fm;
    vkf_arch_weights *w = L->w;
    const vkf_arch_spec *c = L->spec;
    uint32_t d = c->d_model, f = c->d_ff;
    char p[160];
    VKF_TRY(vkf_ld_table(L, "src_embed.weight", c->src_vocab, d, &w->src_embed));
    VKF_TRY(vkf_ld_table(L, "tgt_embed.weight", c->tgt_vocab, d, &w->tgt_embed));
    for (uint32_t i = 0; i < c->encoder_layers; i++) {
        vkf_enc_layer *e = &w->enc[i];
        snprintf(p, sizeof p, "transformer.encoder.layers.%u.", i);
        VKF_TRY(vkf_ld_linear(L, p, "self_attn.in_proj_weight", "self_attn.in_proj_bias", 3 * d, d, 0, 3 * d, &e->qkv));
        VKF_TRY(vkf_ld_linear(L, p, "self_attn.out_proj.weight", "self_attn.out_proj.bias", d, d, 0, d, &e->o));
        VKF_TRY(vkf_ld_linear(L, p, "linear1.weight", "linear1.bias", f, d, 0, f, &e->ff1));
        VKF_TRY(vkf_ld_linear(L, p, "linear2.weight", "linear2.bias", d, f, 0, d, &e->ff2));
        snprintf(p, sizeof p, "transformer.encoder.layers.%u.norm1", i);
        VKF_TRY(vkf_ld_norm(L, p, d, &e->n1));
        snprintf(p, sizeof p, "transformer.encoder.layers.%u.norm2", i);
        VKF_TRY(vkf_ld_norm(L, p, d, &e->n2));
    }
    VKF_TRY(vkf_ld_norm(L, "transformer.encoder.norm", d, &w->enc_norm));
    for (uint32_t i = 0; i < c->decoder_layers; i++) {
        vkf_dec_layer *e = &w->dec[i];
        snprintf(p, sizeof p, "transformer.decoder.layers.%u.", i);
        VKF_TRY(vkf_ld_linear(L, p, "self_attn.in_proj_weight", "self_attn.in_proj_bias", 3 * d, d, 0, 3 * d, &e->qkv));
        VKF_TRY(vkf_ld_linear(L, p, "self_attn.out_proj.weight", "self_attn.out_proj.bias", d, d, 0, d, &e->o));
        VKF_TRY(vkf_ld_linear(L, p, "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias", 3 * d, d, 0, d, &e->cq));
        VKF_TRY(vkf_ld_linear(L, p, "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias", 3 * d, d, d, 2 * d,
                            &e->ckv));
        VKF_TRY(vkf_ld_linear(L, p, "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias", d, d, 0, d, &e->co));
        VKF_TRY(vkf_ld_linear(L, p, "linear1.weight", "linear1.bias", f, d, 0, f, &e->ff1));
        VKF_TRY(vkf_ld_linear(L, p, "linear2.weight", "linear2.bias", d, f, 0, d, &e->ff2));
        const char *norms[3] = {"norm1", "norm2", "norm3"};
        vkf_norm *dst[3] = {&e->n1, &e->n2, &e->n3};
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "transformer.decoder.layers.%u.%s", i, norms[k]);
            VKF_TRY(vkf_ld_norm(L, p, d, dst[k]));
        }
    }
    VKF_TRY(vkf_ld_norm(L, "transformer.decoder.norm", d, &w->dec_norm));
    /* the generator (generator.weight, generator.bias) in the target embedding's parts */
    const vkf_st_tensor *gb = NULL;
    const float *bias = NULL;
    VKF_TRY(vkf_ld_find(L, "generator.bias", 0, c->tgt_vocab, &gb));
    VKF_TRY(vkf_ld_floats(L, gb, &bias));
    float *b = malloc((size_t)c->tgt_vocab * sizeof *b);
    if (!b) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    memcpy(b, bias, (size_t)c->tgt_vocab * sizeof *b);
    vkf_status st = vkf_ld_generator(L, false, "generator.weight", b);
    free(b);
    VKF_TRY(st);
    /* Optional projections for lowrank:K, kept on the host (each forward masks
     * them to the sources' lengths). */
    static const char *const lr_names[2] = {"lowrank.self_proj", "lowrank.cross_proj"};
    for (int i = 0; i < 2; i++) {
        const vkf_st_tensor *t = vkf_st_find(L->file, lr_names[i]);
        if (!t) continue;
        uint32_t K = t->rank == 2 && t->shape[0] >= 1 && t->shape[0] <= 65536 ? (uint32_t)t->shape[0] : 1;
        const vkf_st_tensor *checked;
        VKF_TRY(vkf_ld_find(L, lr_names[i], K, c->max_len, &checked));
        const float *data = NULL;
        VKF_TRY(vkf_ld_floats(L, checked, &data));
        for (uint64_t e = 0; e < checked->elements; e++)
            if (!isfinite(data[e]))
                return vkf_fail(VKF_ERROR_BAD_MODEL, "tensor \"%s\" holds a value that is not finite", lr_names[i]);
        if (L->dry_run) continue;
        w->lr_file[i] = malloc(checked->elements * sizeof(float));
        if (!w->lr_file[i]) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for \"%s\"", lr_names[i]);
        memcpy(w->lr_file[i], data, checked->elements * sizeof(float));
        w->lr_file_rank[i] = K;
    }
    /* Anything else in the file means it was written for another layout. */
    char hint[96];
    snprintf(hint, sizeof hint, "the config says %u encoder and %u decoder layers", c->encoder_layers,
             c->decoder_layers);
    VKF_TRY(vkf_ld_check_unexpected(L, hint));
    return vkf_ld_positions(L, NULL, &w->pe);
}

static int find_token(char *const *vocab, uint32_t n, const char *s, size_t len)
{
    for (uint32_t i = 0; i < n; i++)
        if (strlen(vocab[i]) == len && memcmp(vocab[i], s, len) == 0) return (int)i;
    return -1;
}

static vkf_status encode(const vkf_family_model *fm, const char *text, const char *lang, int32_t *out_ids,
                         uint32_t capacity, uint32_t *out_count)
{
    const vkformer_text *tx = fm->state;
    if (lang) {
        char q[VKF_QUOTE_SIZE];
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "a vkformer file has no languages (%s given)",
                        vkf_quote(q, sizeof q, lang, (size_t)-1));
    }
    if (!fm->has_text)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "the model has no vocabularies (src_vocab, tgt_vocab): give ids instead");
    uint32_t n = 0;
    const char *s = text;
    while (*s) {
        size_t len;
        if (tx->split_chars) {
            if (isspace((unsigned char)*s)) { s++; continue; }
            len = 1;
            while ((s[len] & 0xc0) == 0x80) len++; /* one UTF-8 character */
        } else {
            while (isspace((unsigned char)*s)) s++;
            if (!*s) break;
            len = 0;
            while (s[len] && !isspace((unsigned char)s[len])) len++;
        }
        int id = find_token(tx->src_vocab, tx->src_vocab_size, s, len);
        if (id < 0) {
            char q[VKF_QUOTE_SIZE];
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s is not in the model's source vocabulary",
                            vkf_quote(q, sizeof q, s, len));
        }
        if (n >= capacity) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity);
        out_ids[n++] = id;
        s += len;
    }
    if (n == 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text is empty");
    if (n >= capacity) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity - 1);
    out_ids[n++] = fm->spec.eos_id;
    *out_count = n;
    return VKF_OK;
}

/* Target text as decode() joins it: characters where tgt_join is empty, else
 * whitespace-separated words, each a tgt_vocab entry; no eos. */
static vkf_status encode_target(const vkf_family_model *fm, const char *text, int32_t *out_ids, uint32_t capacity,
                                uint32_t *out_count)
{
    const vkformer_text *tx = fm->state;
    if (!fm->has_text)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "the model has no vocabularies (src_vocab, tgt_vocab): give ids instead");
    bool chars = tx->tgt_join[0] == '\0';
    uint32_t n = 0;
    for (const char *s = text; *s;) {
        if (isspace((unsigned char)*s)) {
            s++;
            continue;
        }
        size_t len = 0;
        if (chars) {
            len = 1;
            while ((s[len] & 0xc0) == 0x80) len++; /* one UTF-8 character */
        } else {
            while (s[len] && !isspace((unsigned char)s[len])) len++;
        }
        int id = find_token(tx->tgt_vocab, tx->tgt_vocab_size, s, len);
        if (id < 0) {
            char q[VKF_QUOTE_SIZE];
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s is not in the model's target vocabulary",
                            vkf_quote(q, sizeof q, s, len));
        }
        if (n >= capacity) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity);
        out_ids[n++] = id;
        s += len;
    }
    *out_count = n;
    return VKF_OK;
}

static int32_t target_token(const vkf_family_model *fm, const char *token, size_t len)
{
    const vkformer_text *tx = fm->state;
    return fm->has_text ? find_token(tx->tgt_vocab, tx->tgt_vocab_size, token, len) : -1;
}

static vkf_status decode(const vkf_family_model *fm, const int32_t *ids, uint32_t count, char *out_text,
                         size_t capacity)
{
    const vkformer_text *tx = fm->state;
    if (!fm->has_text)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "the model has no vocabularies (src_vocab, tgt_vocab)");
    size_t used = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= tx->tgt_vocab_size)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "id %d is outside the target vocabulary", ids[i]);
        const char *sep = i ? tx->tgt_join : "";
        const char *tok = tx->tgt_vocab[ids[i]];
        size_t need = strlen(sep) + strlen(tok);
        if (used + need + 1 > capacity) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text needs more than %zu bytes", capacity);
        memcpy(out_text + used, sep, strlen(sep));
        memcpy(out_text + used + strlen(sep), tok, strlen(tok));
        used += need;
        out_text[used] = '\0';
    }
    return VKF_OK;
}

static void text_free(void *state)
{
    vkformer_text *tx = state;
    if (!tx) return;
    free_vocab(tx->src_vocab, tx->src_vocab_size);
    free_vocab(tx->tgt_vocab, tx->tgt_vocab_size);
    free(tx->tgt_join);
    free(tx);
}

static bool probe(const vkf_probe *p)
{
    return !p->is_dir;
}

static vkf_status open_file(const vkf_probe *p, const void *data, size_t size, vkf_loader *L, vkf_family_model *fm)
{
    vkformer_text *tx = calloc(1, sizeof *tx);
    if (!tx) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a model");
    fm->state = tx;
    snprintf(fm->name, sizeof fm->name, "vkformer");
    VKF_TRY(data ? vkf_st_parse(data, size, &L->file) : vkf_st_open(p->path, &L->file));
    VKF_TRY(parse_config(fm, tx, vkf_st_metadata(L->file, "vkformer.config")));
    vkf_generate_options_init(&fm->defaults);
    return VKF_OK;
}

static const vkf_family family = {
    .name = "vkformer",
    .probe = probe,
    .open = open_file,
    .load = load,
    .encode = encode,
    .decode = decode,
    .free = text_free,
    .encode_target = encode_target,
    .target_token = target_token,
};

const vkf_family *vkf_family_vkformer(void) { return &family; }

/* BART (model_type bart, BartForConditionalGeneration: facebook/bart-base,
 * bart-large, bart-large-cnn, distilbart and their fine-tunes): folders as the hub
 * stores them (config.json, generation_config.json, model.safetensors, vocab.json
 * + merges.txt and often tokenizer.json) and as transformers 5.x save_pretrained
 * writes them (tokenizer.json + tokenizer_config.json). The model: post-LN layers
 * (x = LN(x + Sublayer(x))) with no final norms, a LayerNorm right after
 * embeddings + positions (layernorm_embedding), learned positions with an offset
 * of 2 rows, GELU (activation_function), the embedding scale the config asks for
 * (scale_embedding, false in every released BART), one shared embedding tied to
 * lm_head (or an untied lm_head.weight), and final_logits_bias (zeros where the
 * file lacks it, as transformers treats it). The text: byte-level BPE
 * (tokenizer.h's vkf_bpe_*, RobertaTokenizer's <s> text </s>). Generation starts
 * from decoder_start_token_id (</s>), and forced_bos_token_id (<s> in bart-large)
 * and forced_eos_token_id come from generation_config.json through hf.c. */
#include "families/family.h"
#include "tokenizers/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bart {
    vkf_bpe_text *text;         /* owned */
    bool tied;                  /* lm_head is the shared embedding */
} bart;

static void bart_free(void *state)
{
    bart *m = state;
    if (!m) return;
    vkf_bpe_free(m->text);
    free(m);
}

static bool probe(const vkf_probe *p)
{
    return p->is_dir && p->model_type && strcmp(p->model_type, "bart") == 0;
}

/* config.json of a BartForConditionalGeneration. */
static vkf_status parse_config(json_t *c, vkf_arch_spec *s, bool *tied)
{
    static const char F[] = "config.json";
    /* BartConfig's decoder start: decoder_start_token_id (default 2, </s>) */
    VKF_TRY(vkf_hf_bart_config(c, s, 2, tied));
    /* keys of mBART-like variants that modeling_bart.py ignores: a config that asks for them is not BART's */
    bool pre = false, final_norm = false;
    VKF_TRY(vkf_hf_bool(c, F, "normalize_before", false, &pre));
    VKF_TRY(vkf_hf_bool(c, F, "add_final_layer_norm", false, &final_norm));
    if (pre || final_norm)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: %s true, but BartForConditionalGeneration is post-LN "
                        "without final norms (transformers ignores the key: the weights were not trained that way)",
                        pre ? "normalize_before" : "add_final_layer_norm");
    s->pre_norm = false;
    s->encoder_final_norm = s->decoder_final_norm = false;
    s->embedding_norm = true;
    s->positions = VKF_POS_LEARNED, s->position_offset = 2;
    return VKF_OK;
}

static vkf_status open_folder(const vkf_probe *p, const void *data, size_t size, vkf_loader *L, vkf_family_model *fm)
{
    (void)data, (void)size;
    const char *dir = p->path;
    bart *m = calloc(1, sizeof *m);
    if (!m) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    fm->state = m;
    snprintf(fm->name, sizeof fm->name, "bart");
    json_t *cfg = NULL;
    vkf_status st = vkf_hf_read_json(dir, "config.json", false, &cfg);
    if (st == VKF_OK) st = parse_config(cfg, &fm->spec, &m->tied);
    if (st == VKF_OK) st = vkf_hf_generation(dir, cfg, fm);
    json_decref(cfg);
    VKF_TRY(st);
    VKF_TRY(vkf_bpe_open(dir, VKF_BPE_BART, &m->text));
    const vkf_arch_spec *s = &fm->spec;
    /* The tokenizer may hold ids past vocab_size: bart-large-cnn's config says 50264
     * and its <mask> is 50264. Text that holds such a token fails in encode; the
     * tokens generation needs must fit. */
    const int32_t need[3] = {m->text->eos, m->text->bos, m->text->pad};
    for (int k = 0; k < 3; k++)
        if (need[k] >= (int32_t)s->tgt_vocab)
            return vkf_fail(VKF_ERROR_BAD_MODEL, "the tokenizer's %s token has id %d, past config.json's vocab_size %u",
                            k == 0 ? "eos" : k == 1 ? "bos" : "pad", need[k], s->tgt_vocab);
    if (m->text->eos != s->eos_id)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "the tokenizer's eos token (id %d) is not config.json's eos_token_id %d",
                        m->text->eos, s->eos_id);
    fm->has_text = true;
    return vkf_hf_open_weights(dir, L);
}

static vkf_status load(vkf_loader *L, const vkf_family_model *fm)
{
    const bart *m = fm->state;
    vkf_arch_weights *w = L->w;
    const vkf_arch_spec *c = L->spec;
    /* one embedding: model.shared, both embed_tokens and (tied) lm_head, under any of the names */
    static const char *const names[] = {"model.shared.weight", "model.encoder.embed_tokens.weight",
                                        "model.decoder.embed_tokens.weight", "lm_head.weight"};
    VKF_TRY(vkf_hf_tied_table(L, names, m->tied ? 4 : 3, c->src_vocab, &w->src_embed, NULL));
    VKF_TRY(vkf_ld_share_table(&w->src_embed, &w->tgt_embed));
    /* learned positions: max_position_embeddings + 2 rows each */
    VKF_TRY(vkf_ld_positions(L, "model.encoder.embed_positions.weight", &w->pe));
    VKF_TRY(vkf_ld_positions(L, "model.decoder.embed_positions.weight", &w->pe_dec));
    VKF_TRY(vkf_hf_load_layers(L, "model."));
    /* the generator plus final_logits_bias (1, V), zeros when the file lacks it */
    VKF_TRY(vkf_hf_biased_generator(L, m->tied, "lm_head.weight", true));
    return vkf_hf_check_unexpected(L, "BartForConditionalGeneration");
}

static vkf_status encode(const vkf_family_model *fm, const char *text, const char *lang, int32_t *out_ids,
                         uint32_t capacity, uint32_t *out_count)
{
    (void)lang; /* no languages: the registry refuses a source language before it gets here */
    const bart *m = fm->state;
    int32_t *ids = NULL;
    uint32_t n = 0;
    VKF_TRY(vkf_bpe_encode(m->text, text, strlen(text), /*add_special=*/true, &ids, &n));
    vkf_status st = VKF_OK;
    for (uint32_t i = 0; i < n && st == VKF_OK; i++)
        if ((uint32_t)ids[i] >= fm->spec.src_vocab) {
            char q[VKF_QUOTE_SIZE];
            const char *tok = vkf_hftok_token(m->text->tok, ids[i]);
            st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text's token %s has id %d, past config.json's vocab_size %u",
                          tok ? vkf_quote(q, sizeof q, tok, (size_t)-1) : "?", ids[i], fm->spec.src_vocab);
        }
    if (st == VKF_OK && n > capacity) st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity);
    else if (st == VKF_OK && n) memcpy(out_ids, ids, (size_t)n * sizeof *ids);
    free(ids);
    VKF_TRY(st);
    *out_count = n;
    return VKF_OK;
}

static vkf_status decode(const vkf_family_model *fm, const int32_t *ids, uint32_t count, char *out_text,
                         size_t capacity)
{
    const bart *m = fm->state;
    VKF_TRY(vkf_family_check_target_ids(fm, ids, count));
    char *text = NULL;
    size_t len = 0;
    VKF_TRY(vkf_bpe_decode(m->text, ids, count, /*skip_special=*/true, &text, &len));
    return vkf_family_text_out(text, len, out_text, capacity);
}

const vkf_family vkf_family_bart = {
    .name = "bart",
    .probe = probe,
    .open = open_folder,
    .load = load,
    .encode = encode,
    .decode = decode,
    .free = bart_free,
};

/* mBART (model_type mbart, MBartForConditionalGeneration), mBART-50 above all:
 * folders as the hub stores them, config.json, generation_config.json,
 * model.safetensors and sentencepiece.bpe.model under fairseq's offset with the
 * language codes after it (en_XX) and <mask> last. The model: learned positions
 * with an offset of 2 rows, a LayerNorm right after embeddings + positions
 * (layernorm_embedding), pre-LN layers with final encoder and decoder norms,
 * GELU, the embedding scale the config asks for, one shared embedding, and
 * final_logits_bias. MBart50Tokenizer puts the source language before the text
 * ([en_XX] text </s>); mBART-25's MBartTokenizer after it (text </s> [en_XX]).
 * Generation starts from decoder_start_token_id (eos in mBART-50's config) with
 * the target language forced as the first token. */
#include "families/family.h"
#include "tokenizers/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mbart50_codes[] = {
    "ar_AR", "cs_CZ", "de_DE", "en_XX", "es_XX", "et_EE", "fi_FI", "fr_XX", "gu_IN", "hi_IN", "it_IT", "ja_XX",
    "kk_KZ", "ko_KR", "lt_LT", "lv_LV", "my_MM", "ne_NP", "nl_XX", "ro_RO", "ru_RU", "si_LK", "tr_TR", "vi_VN",
    "zh_CN", "af_ZA", "az_AZ", "bn_IN", "fa_IR", "he_IL", "hr_HR", "id_ID", "ka_GE", "km_KH", "mk_MK", "ml_IN",
    "mn_MN", "mr_IN", "pl_PL", "ps_AF", "pt_XX", "sv_SE", "sw_KE", "ta_IN", "te_IN", "th_TH", "tl_XX", "uk_UA",
    "ur_PK", "xh_ZA", "gl_ES", "sl_SI",
};
static const char *const mbart25_codes[] = {
    "ar_AR", "cs_CZ", "de_DE", "en_XX", "es_XX", "et_EE", "fi_FI", "fr_XX", "gu_IN", "hi_IN", "it_IT", "ja_XX",
    "kk_KZ", "ko_KR", "lt_LT", "lv_LV", "my_MM", "ne_NP", "nl_XX", "ro_RO", "ru_RU", "si_LK", "tr_TR", "vi_VN",
    "zh_CN",
};

typedef struct mbart {
    vkf_multi_text text;
} mbart;

static void mbart_free(void *state)
{
    mbart *m = state;
    if (!m) return;
    vkf_multi_text_clear(&m->text);
    free(m);
}

static bool probe(const vkf_probe *p)
{
    return p->is_dir && p->model_type && strcmp(p->model_type, "mbart") == 0;
}

static vkf_status parse_config(json_t *c, vkf_arch_spec *s)
{
    bool tied = true;
    /* generate()'s decoder start: decoder_start_token_id, else bos */
    VKF_TRY(vkf_hf_bart_config(c, s, -1, &tied));
    if (!tied)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: tie_word_embeddings false: vkformer runs mBART models "
                        "whose lm_head is the shared embedding");
    s->pre_norm = true;
    s->encoder_final_norm = s->decoder_final_norm = true;
    s->embedding_norm = true;
    s->positions = VKF_POS_LEARNED, s->position_offset = 2;
    return VKF_OK;
}

static vkf_status open_folder(const vkf_probe *p, const void *data, size_t size, vkf_loader *L, vkf_family_model *fm)
{
    (void)data, (void)size;
    const char *dir = p->path;
    mbart *m = calloc(1, sizeof *m);
    if (!m) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    fm->state = m;
    json_t *cfg = NULL, *tc = NULL;
    vkf_status st = vkf_hf_read_json(dir, "config.json", false, &cfg);
    if (st == VKF_OK) st = parse_config(cfg, &fm->spec);
    if (st == VKF_OK) st = vkf_hf_generation(dir, cfg, fm);
    if (st == VKF_OK) st = vkf_hf_read_json(dir, "tokenizer_config.json", true, &tc);
    /* MBart50Tokenizer (the default) or mBART-25's MBartTokenizer */
    json_t *cls = tc ? json_object_get(tc, "tokenizer_class") : NULL;
    bool cc25 = json_is_string(cls) && strncmp(json_string_value(cls), "MBartTokenizer", 14) == 0;
    snprintf(fm->name, sizeof fm->name, "mbart");
    vkf_multi_text *t = &m->text;
    const char *const *codes = cc25 ? mbart25_codes : mbart50_codes;
    uint32_t n = cc25 ? sizeof mbart25_codes / sizeof *mbart25_codes : sizeof mbart50_codes / sizeof *mbart50_codes;
    bool json = false;
    t->lang_first = !cc25;
    if (st == VKF_OK) st = vkf_multi_text_open_json(dir, t, &json);
    if (st == VKF_OK && json) {
        st = vkf_multi_text_json_languages(fm, t, codes, n); /* tokenizer.json: its ids are the truth */
    } else if (st == VKF_OK) {
        st = vkf_multi_text_open_spm(dir, "sentencepiece.bpe.model", t);
        t->bos_id = 0, t->unk_id = 3;
        uint32_t base = t->n_spm + 1;
        for (uint32_t i = 0; st == VKF_OK && i < n; i++) st = vkf_family_add_language(fm, codes[i], (int32_t)(base + i));
        t->mask_id = (int32_t)(base + n);
        if (st == VKF_OK && base + n + 1 > fm->spec.tgt_vocab)
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "the tokenizer's %u ids pass config.json's vocab_size %u", base + n + 1,
                          fm->spec.tgt_vocab);
    }
    if (st == VKF_OK) {
        json_t *src = tc ? json_object_get(tc, "src_lang") : NULL;
        fm->default_src_lang = vkf_family_language(fm, json_is_string(src) ? json_string_value(src) : "en_XX");
        if (fm->default_src_lang < 0)
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer_config.json: src_lang is not one of the model's languages");
    }
    json_decref(cfg), json_decref(tc);
    VKF_TRY(st);
    fm->target_lang_required = true;
    fm->has_text = true;
    return vkf_hf_open_weights(dir, L);
}

static vkf_status load(vkf_loader *L, const vkf_family_model *fm)
{
    (void)fm;
    vkf_arch_weights *w = L->w;
    const vkf_arch_spec *c = L->spec;
    static const char *const names[] = {"model.shared.weight", "model.encoder.embed_tokens.weight",
                                        "model.decoder.embed_tokens.weight", "lm_head.weight"};
    VKF_TRY(vkf_hf_tied_table(L, names, 4, c->src_vocab, &w->src_embed, NULL));
    VKF_TRY(vkf_ld_share_table(&w->src_embed, &w->tgt_embed));
    /* learned positions: max_position_embeddings + 2 rows each */
    VKF_TRY(vkf_ld_positions(L, "model.encoder.embed_positions.weight", &w->pe));
    VKF_TRY(vkf_ld_positions(L, "model.decoder.embed_positions.weight", &w->pe_dec));
    VKF_TRY(vkf_hf_load_layers(L, "model."));
    VKF_TRY(vkf_hf_biased_generator(L, true, NULL, false));
    return vkf_hf_check_unexpected(L, "MBartForConditionalGeneration");
}

static vkf_status encode(const vkf_family_model *fm, const char *text, const char *lang, int32_t *out_ids,
                         uint32_t capacity, uint32_t *out_count)
{
    const mbart *m = fm->state;
    return vkf_multi_text_encode(fm, &m->text, text, lang, out_ids, capacity, out_count);
}

static vkf_status decode(const vkf_family_model *fm, const int32_t *ids, uint32_t count, char *out_text,
                         size_t capacity)
{
    const mbart *m = fm->state;
    return vkf_multi_text_decode(fm, &m->text, ids, count, out_text, capacity);
}

const vkf_family vkf_family_mbart = {
    .name = "mbart",
    .probe = probe,
    .open = open_folder,
    .load = load,
    .encode = encode,
    .decode = decode,
    .free = mbart_free,
};

/* M2M-100 and NLLB-200 (model_type m2m_100, M2M100ForConditionalGeneration)
 * folders as the hub stores them: config.json, generation_config.json,
 * model.safetensors, and the tokenizer: NLLB's sentencepiece.bpe.model under
 * fairseq's offset with 202 language codes (eng_Latn), or M2M-100's vocab.json +
 * sentencepiece.bpe.model with __en__-style codes. The model: pre-LN layers with
 * final encoder and decoder norms, embeddings scaled by sqrt(d_model)
 * (scale_embedding), fairseq's sinusoidal positions counted from padding_idx + 1
 * (padding at the zero row), ReLU, one embedding shared by encoder, decoder and
 * lm_head, no final_logits_bias. The source language leads the text and the
 * target language is forced as the first generated token, as transformers 5.x
 * does (NllbTokenizer legacy_behaviour false, M2M100Tokenizer). */
#include "families/family.h"
#include "tokenizers/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const nllb_codes[] = {
    "ace_Arab", "ace_Latn", "acm_Arab", "acq_Arab", "aeb_Arab", "afr_Latn", "ajp_Arab", "aka_Latn", "amh_Ethi",
    "apc_Arab", "arb_Arab", "ars_Arab", "ary_Arab", "arz_Arab", "asm_Beng", "ast_Latn", "awa_Deva", "ayr_Latn",
    "azb_Arab", "azj_Latn", "bak_Cyrl", "bam_Latn", "ban_Latn", "bel_Cyrl", "bem_Latn", "ben_Beng", "bho_Deva",
    "bjn_Arab", "bjn_Latn", "bod_Tibt", "bos_Latn", "bug_Latn", "bul_Cyrl", "cat_Latn", "ceb_Latn", "ces_Latn",
    "cjk_Latn", "ckb_Arab", "crh_Latn", "cym_Latn", "dan_Latn", "deu_Latn", "dik_Latn", "dyu_Latn", "dzo_Tibt",
    "ell_Grek", "eng_Latn", "epo_Latn", "est_Latn", "eus_Latn", "ewe_Latn", "fao_Latn", "pes_Arab", "fij_Latn",
    "fin_Latn", "fon_Latn", "fra_Latn", "fur_Latn", "fuv_Latn", "gla_Latn", "gle_Latn", "glg_Latn", "grn_Latn",
    "guj_Gujr", "hat_Latn", "hau_Latn", "heb_Hebr", "hin_Deva", "hne_Deva", "hrv_Latn", "hun_Latn", "hye_Armn",
    "ibo_Latn", "ilo_Latn", "ind_Latn", "isl_Latn", "ita_Latn", "jav_Latn", "jpn_Jpan", "kab_Latn", "kac_Latn",
    "kam_Latn", "kan_Knda", "kas_Arab", "kas_Deva", "kat_Geor", "knc_Arab", "knc_Latn", "kaz_Cyrl", "kbp_Latn",
    "kea_Latn", "khm_Khmr", "kik_Latn", "kin_Latn", "kir_Cyrl", "kmb_Latn", "kon_Latn", "kor_Hang", "kmr_Latn",
    "lao_Laoo", "lvs_Latn", "lij_Latn", "lim_Latn", "lin_Latn", "lit_Latn", "lmo_Latn", "ltg_Latn", "ltz_Latn",
    "lua_Latn", "lug_Latn", "luo_Latn", "lus_Latn", "mag_Deva", "mai_Deva", "mal_Mlym", "mar_Deva", "min_Latn",
    "mkd_Cyrl", "plt_Latn", "mlt_Latn", "mni_Beng", "khk_Cyrl", "mos_Latn", "mri_Latn", "zsm_Latn", "mya_Mymr",
    "nld_Latn", "nno_Latn", "nob_Latn", "npi_Deva", "nso_Latn", "nus_Latn", "nya_Latn", "oci_Latn", "gaz_Latn",
    "ory_Orya", "pag_Latn", "pan_Guru", "pap_Latn", "pol_Latn", "por_Latn", "prs_Arab", "pbt_Arab", "quy_Latn",
    "ron_Latn", "run_Latn", "rus_Cyrl", "sag_Latn", "san_Deva", "sat_Beng", "scn_Latn", "shn_Mymr", "sin_Sinh",
    "slk_Latn", "slv_Latn", "smo_Latn", "sna_Latn", "snd_Arab", "som_Latn", "sot_Latn", "spa_Latn", "als_Latn",
    "srd_Latn", "srp_Cyrl", "ssw_Latn", "sun_Latn", "swe_Latn", "swh_Latn", "szl_Latn", "tam_Taml", "tat_Cyrl",
    "tel_Telu", "tgk_Cyrl", "tgl_Latn", "tha_Thai", "tir_Ethi", "taq_Latn", "taq_Tfng", "tpi_Latn", "tsn_Latn",
    "tso_Latn", "tuk_Latn", "tum_Latn", "tur_Latn", "twi_Latn", "tzm_Tfng", "uig_Arab", "ukr_Cyrl", "umb_Latn",
    "urd_Arab", "uzn_Latn", "vec_Latn", "vie_Latn", "war_Latn", "wol_Latn", "xho_Latn", "ydd_Hebr", "yor_Latn",
    "yue_Hant", "zho_Hans", "zho_Hant", "zul_Latn",
};
static const char *const m2m100_codes[] = {
    "af", "am", "ar", "ast", "az", "ba", "be", "bg", "bn", "br", "bs", "ca", "ceb", "cs", "cy", "da", "de", "el",
    "en", "es", "et", "fa", "ff", "fi", "fr", "fy", "ga", "gd", "gl", "gu", "ha", "he", "hi", "hr", "ht", "hu",
    "hy", "id", "ig", "ilo", "is", "it", "ja", "jv", "ka", "kk", "km", "kn", "ko", "lb", "lg", "ln", "lo", "lt",
    "lv", "mg", "mk", "ml", "mn", "mr", "ms", "my", "ne", "nl", "no", "ns", "oc", "or", "pa", "pl", "ps", "pt",
    "ro", "ru", "sd", "si", "sk", "sl", "so", "sq", "sr", "ss", "su", "sv", "sw", "ta", "th", "tl", "tn", "tr",
    "uk", "ur", "uz", "vi", "wo", "xh", "yi", "yo", "zh", "zu",
};
static const char *const wmt21_codes[] = {
    "en", "ha", "is", "ja", "cs", "ru", "zh", "de",
};

typedef struct m2m100 {
    vkf_multi_text text;
    bool nllb;                          /* NLLB's tokenizer; else M2M-100's */
} m2m100;

static void m2m100_free(void *state)
{
    m2m100 *m = state;
    if (!m) return;
    vkf_multi_text_clear(&m->text);
    free(m);
}

static bool probe(const vkf_probe *p)
{
    return p->is_dir && p->model_type && strcmp(p->model_type, "m2m_100") == 0;
}

/* config.json of an M2M100ForConditionalGeneration. */
static vkf_status parse_config(json_t *c, vkf_arch_spec *s)
{
    bool tied = true;
    /* generate()'s decoder start: decoder_start_token_id, else bos */
    VKF_TRY(vkf_hf_bart_config(c, s, -1, &tied));
    if (!tied)
        return vkf_fail(VKF_ERROR_UNSUPPORTED, "config.json: tie_word_embeddings false: vkformer runs M2M-100 models "
                        "whose lm_head is the shared embedding");
    s->pre_norm = true;
    s->encoder_final_norm = s->decoder_final_norm = true;
    s->positions = VKF_POS_SIN_FAIRSEQ;
    return VKF_OK;
}

/* A string from tokenizer_config.json, or def. */
static const char *config_string(json_t *tc, const char *key, const char *def)
{
    json_t *v = tc ? json_object_get(tc, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : def;
}

/* M2M100Tokenizer's slow folders (sentencepiece.bpe.model, vocab.json): a
 * language token is special, and decode(skip_special_tokens=True) drops it, only
 * where the folder's configs list it among the extra special tokens, as the hub's
 * special_tokens_map.json does; the others decode as text ("__de__"), as
 * transformers 5.12 decodes them. */
static vkf_status m2m100_languages_as_text(const char *dir, const json_t *tc, const vkf_family_model *fm,
                                          vkf_multi_text *t)
{
    vkf_tok_names specials;
    VKF_TRY(vkf_tok_extra_specials(dir, tc, &specials));
    vkf_status st = VKF_OK;
    if (!(t->lang_text = calloc(fm->n_langs ? fm->n_langs : 1, sizeof *t->lang_text)))
        st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; st == VKF_OK && i < fm->n_langs; i++) {
        char token[48];
        snprintf(token, sizeof token, "__%.40s__", fm->lang_codes[i]);
        t->lang_text[i] = !vkf_tok_names_has(&specials, token);
    }
    vkf_tok_names_free(&specials);
    return st;
}

static vkf_status open_folder(const vkf_probe *p, const void *data, size_t size, vkf_loader *L, vkf_family_model *fm)
{
    (void)data, (void)size;
    const char *dir = p->path;
    m2m100 *m = calloc(1, sizeof *m);
    if (!m) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    fm->state = m;
    json_t *cfg = NULL, *tc = NULL, *vocab = NULL;
    vkf_status st = vkf_hf_read_json(dir, "config.json", false, &cfg);
    if (st == VKF_OK) st = parse_config(cfg, &fm->spec);
    if (st == VKF_OK) st = vkf_hf_generation(dir, cfg, fm);
    if (st == VKF_OK) st = vkf_hf_read_json(dir, "tokenizer_config.json", true, &tc);
    /* NLLB: sentencepiece.bpe.model alone (or tokenizer_class NllbTokenizer); M2M-100: with vocab.json */
    const char *cls = config_string(tc, "tokenizer_class", "");
    m->nllb = strncmp(cls, "Nllb", 4) == 0 || (!*cls && !vkf_tok_file(dir, "vocab.json", NULL));
    snprintf(fm->name, sizeof fm->name, "%s", m->nllb ? "nllb" : "m2m_100");
    vkf_multi_text *t = &m->text;
    const vkf_arch_spec *s = &fm->spec;
    bool json = false;
    if (st == VKF_OK) st = vkf_multi_text_open_json(dir, t, &json);
    if (st == VKF_OK) t->lang_first = !(m->nllb && tc && json_is_true(json_object_get(tc, "legacy_behaviour")));
    const char *const *codes = m->nllb ? nllb_codes : m2m100_codes;
    uint32_t n = m->nllb ? sizeof nllb_codes / sizeof *nllb_codes : sizeof m2m100_codes / sizeof *m2m100_codes;
    if (!m->nllb && strcmp(config_string(tc, "language_codes", "m2m100"), "wmt21") == 0)
        codes = wmt21_codes, n = sizeof wmt21_codes / sizeof *wmt21_codes;
    if (st == VKF_OK && json) {
        /* tokenizer.json: its ids are the truth (languages as its added tokens) */
        st = vkf_multi_text_json_languages(fm, t, codes, n);
    } else if (st == VKF_OK) {
        st = vkf_multi_text_open_spm(dir, "sentencepiece.bpe.model", t);
        if (st == VKF_OK && !m->nllb) {
            st = vkf_hf_read_json(dir, "vocab.json", false, &vocab);
            if (st == VKF_OK) st = vkf_vocab_json("vocab.json", vocab, 0, &t->vocab);
            if (st == VKF_OK) st = vkf_vocab_check_specials("vocab.json", &t->vocab, s->eos_id, s->pad_id);
        }
        if (st == VKF_OK) {
            t->bos_id = 0, t->unk_id = m->nllb ? 3 : t->vocab.unk_id, t->mask_id = -1;
            /* languages after the vocabulary, in the tokenizer's order; NLLB's <mask> after them, as
             * fairseq and the hub's tokenizer.json place them */
            uint32_t base = m->nllb ? t->n_spm + 1 : t->vocab.n;
            for (uint32_t i = 0; st == VKF_OK && i < n; i++)
                st = vkf_family_add_language(fm, codes[i], (int32_t)(base + i));
            if (m->nllb) t->mask_id = (int32_t)(base + n);
            uint32_t top = base + n + (m->nllb ? 1 : 0);
            if (st == VKF_OK && top > s->tgt_vocab)
                st = vkf_fail(VKF_ERROR_BAD_MODEL, "the tokenizer's %u ids pass config.json's vocab_size %u", top,
                              s->tgt_vocab);
            if (st == VKF_OK && !m->nllb) st = m2m100_languages_as_text(dir, tc, fm, t);
        }
    }
    if (st == VKF_OK) {
        /* the source language when none is given: src_lang, else English, as the tokenizers */
        char code[48];
        snprintf(code, sizeof code, "%s", config_string(tc, "src_lang", m->nllb ? "eng_Latn" : "en"));
        size_t len = strlen(code);
        if (!m->nllb && len > 4 && strncmp(code, "__", 2) == 0 && strcmp(code + len - 2, "__") == 0) /* "__en__" */
            memmove(code, code + 2, len - 4), code[len - 4] = '\0';
        const char *src = code;
        fm->default_src_lang = vkf_family_language(fm, src);
        if (fm->default_src_lang < 0) {
            char q[VKF_QUOTE_SIZE];
            st = vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer_config.json: src_lang %s is not one of the model's languages",
                          vkf_quote(q, sizeof q, src, (size_t)-1));
        }
    }
    json_decref(cfg), json_decref(tc), json_decref(vocab);
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
    /* one embedding: model.shared, both embed_tokens and lm_head, under any of the names */
    static const char *const names[] = {"model.shared.weight", "model.encoder.embed_tokens.weight",
                                        "model.decoder.embed_tokens.weight", "lm_head.weight"};
    VKF_TRY(vkf_hf_tied_table(L, names, 4, c->src_vocab, &w->src_embed, NULL));
    VKF_TRY(vkf_ld_share_table(&w->src_embed, &w->tgt_embed));
    /* fairseq's sinusoids are computed, never stored (a non-persistent buffer) */
    VKF_TRY(vkf_ld_positions(L, NULL, &w->pe));
    VKF_TRY(vkf_hf_load_layers(L, "model."));
    VKF_TRY(vkf_ld_generator(L, true, NULL, NULL));
    return vkf_hf_check_unexpected(L, "M2M100ForConditionalGeneration");
}

static vkf_status encode(const vkf_family_model *fm, const char *text, const char *lang, int32_t *out_ids,
                         uint32_t capacity, uint32_t *out_count)
{
    const m2m100 *m = fm->state;
    return vkf_multi_text_encode(fm, &m->text, text, lang, out_ids, capacity, out_count);
}

static vkf_status decode(const vkf_family_model *fm, const int32_t *ids, uint32_t count, char *out_text,
                         size_t capacity)
{
    const m2m100 *m = fm->state;
    return vkf_multi_text_decode(fm, &m->text, ids, count, out_text, capacity);
}

const vkf_family vkf_family_m2m100 = {
    .name = "m2m_100",
    .probe = probe,
    .open = open_folder,
    .load = load,
    .encode = encode,
    .decode = decode,
    .free = m2m100_free,
};

/* The text side of fairseq's multilingual translation models (NLLB-200,
 * M2M-100, mBART-50, mBART): a SentencePiece model whose ids are either shifted by
 * fairseq's offset (spm id + 1 behind <s> <pad> </s> <unk>: NLLB, mBART) or
 * looked up in vocab.json (M2M-100), language tokens after the vocabulary, and
 * the source language placed before the text ([lang] text </s>) or after it
 * (text </s> [lang]: mBART-25, NLLB's legacy_behaviour), as the Hugging Face
 * tokenizers place them. Decoding skips every special token, and every language
 * token but those an M2M-100 folder's configs leave unspecial. */
#include "families/family.h"
#include "tokenizers/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vkf_multi_text_clear(vkf_multi_text *t)
{
    if (!t) return;
    vkf_hftok_free(t->tok);
    vkf_spm_free(t->spm);
    vkf_vocab_free(&t->vocab);
    free(t->lang_text);
    t->tok = NULL, t->spm = NULL, t->lang_text = NULL;
}

vkf_status vkf_multi_text_open_json(const char *dir, vkf_multi_text *t, bool *out_found)
{
    const char *what = NULL;
    *out_found = vkf_tok_file(dir, "tokenizer.json", &what);
    if (!*out_found) {
        if (strcmp(what, "missing") != 0) return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json is %s", what);
        return VKF_OK;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    return vkf_hftok_load(path, &t->tok);
}

vkf_status vkf_multi_text_json_languages(vkf_family_model *fm, vkf_multi_text *t, const char *const *codes, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        int32_t id = vkf_hftok_token_id(t->tok, codes[i]);
        if (id >= 0) VKF_TRY(vkf_family_add_language(fm, codes[i], id));
    }
    if (fm->n_langs == 0)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json holds none of the model's language codes (%s, ...)", codes[0]);
    t->bos_id = vkf_hftok_token_id(t->tok, "<s>");
    t->unk_id = vkf_hftok_token_id(t->tok, "<unk>");
    t->mask_id = vkf_hftok_token_id(t->tok, "<mask>");
    if (vkf_hftok_token_id(t->tok, "</s>") != fm->spec.eos_id)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json: \"</s>\" is not eos_token_id %d", fm->spec.eos_id);
    if (vkf_hftok_vocab_size(t->tok) > fm->spec.tgt_vocab)
        return vkf_fail(VKF_ERROR_BAD_MODEL, "tokenizer.json's %u ids pass config.json's vocab_size %u",
                        vkf_hftok_vocab_size(t->tok), fm->spec.tgt_vocab);
    return VKF_OK;
}

vkf_status vkf_multi_text_open_spm(const char *dir, const char *name, vkf_multi_text *t)
{
    VKF_TRY(vkf_spm_open(dir, name, &t->spm));
    t->n_spm = vkf_spm_size(t->spm);
    return VKF_OK;
}

/* Whether id is one the tokenizer marks special: <s> <pad> </s> <unk>, <mask>. */
static bool special(const vkf_family_model *fm, const vkf_multi_text *t, int32_t id)
{
    return id == t->bos_id || id == fm->spec.pad_id || id == fm->spec.eos_id || id == t->unk_id || id == t->mask_id;
}

/* The language index of id, or -1. */
static int32_t language_of(const vkf_family_model *fm, int32_t id)
{
    for (uint32_t i = 0; i < fm->n_langs; i++)
        if (fm->lang_ids[i] == id) return (int32_t)i;
    return -1;
}

vkf_status vkf_multi_text_encode(const vkf_family_model *fm, const vkf_multi_text *t, const char *text,
                                 const char *lang, int32_t *out_ids, uint32_t capacity, uint32_t *out_count)
{
    int32_t code = -1;
    if (fm->n_langs) {
        int32_t i = lang ? vkf_family_language(fm, lang) : fm->default_src_lang;
        if (i < 0) {
            char q[VKF_QUOTE_SIZE];
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "unknown source language %s",
                            lang ? vkf_quote(q, sizeof q, lang, (size_t)-1) : "(none)");
        }
        code = fm->lang_ids[i];
    }
    if (capacity < 3) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity);
    uint32_t n = 0, pieces = 0;
    if (code >= 0 && t->lang_first) out_ids[n++] = code;
    if (t->tok) {
        /* the text's tokens without the template; the language and eos placed here */
        int32_t *ids = NULL;
        VKF_TRY(vkf_hftok_encode(t->tok, text, strlen(text), false, &ids, &pieces));
        vkf_status st = pieces > capacity - n - 2
                            ? vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "the text has more than %u tokens", capacity - 2)
                            : VKF_OK;
        if (st == VKF_OK && pieces) memcpy(out_ids + n, ids, (size_t)pieces * sizeof *ids);
        free(ids);
        VKF_TRY(st);
    } else {
        VKF_TRY(vkf_spm_ids(t->spm, t->vocab.n ? &t->vocab : NULL, t->unk_id, text, strlen(text), out_ids + n,
                            capacity - n - 2, &pieces));
    }
    n += pieces;
    out_ids[n++] = fm->spec.eos_id;
    if (code >= 0 && !t->lang_first) out_ids[n++] = code;
    *out_count = n;
    return VKF_OK;
}

vkf_status vkf_multi_text_decode(const vkf_family_model *fm, const vkf_multi_text *t, const int32_t *ids,
                                 uint32_t count, char *out_text, size_t capacity)
{
    if (t->tok) {
        VKF_TRY(vkf_family_check_target_ids(fm, ids, count));
        char *text = NULL;
        size_t len = 0;
        VKF_TRY(vkf_hftok_decode_n(t->tok, ids, count, true, &text, &len));
        return vkf_family_text_out(text, len, out_text, capacity);
    }
    const char **pieces = malloc((count ? count : 1) * sizeof *pieces);
    char (*langs)[40] = malloc((count ? count : 1) * sizeof *langs); /* "__xx__" of kept language tokens */
    if (!pieces || !langs) {
        free(pieces), free(langs);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    size_t n = 0;
    vkf_status st = VKF_OK;
    for (uint32_t i = 0; st == VKF_OK && i < count; i++) {
        int32_t id = ids[i];
        if (id < 0 || (uint32_t)id >= fm->spec.tgt_vocab) {
            st = vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "id %d is outside the target vocabulary", id);
            break;
        }
        if (special(fm, t, id)) continue; /* skip_special_tokens */
        int32_t lang = language_of(fm, id);
        if (lang >= 0) {
            if (t->lang_text && t->lang_text[lang]) {
                snprintf(langs[i], sizeof langs[i], "__%.32s__", fm->lang_codes[lang]);
                pieces[n++] = langs[i];
            }
            continue;
        }
        const char *p = NULL;
        if (t->vocab.n) p = (uint32_t)id < t->vocab.n ? t->vocab.piece[id] : NULL;
        else if (id >= 4 && (uint32_t)id - 1 < t->n_spm) p = vkf_spm_piece(t->spm, (uint32_t)id - 1, NULL);
        /* ids past the tokenizer (a model's padding rows, "madeupword"s) decode to nothing */
        if (p) pieces[n++] = p;
    }
    /* M2M100Tokenizer decodes through sentencepiece; NLLB's and mBART-50's classes through Metaspace */
    if (st == VKF_OK && t->vocab.n) st = vkf_spm_text(t->spm, pieces, n, out_text, capacity);
    else if (st == VKF_OK) st = vkf_spm_text_metaspace(pieces, n, out_text, capacity);
    free(pieces), free(langs);
    return st;
}

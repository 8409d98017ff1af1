/* What every family's model shares beyond its own state: the language codes a
 * tokenizer knows, with their token ids, the family model's lifetime, and the
 * library's generation defaults (vkf_generate_options_init), which each
 * family's defaults start from and the decoder, a layer above, reads. */
#include "families/family.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vkf_generate_options_init(vkf_generate_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->beams = 1;
    o->length_penalty = 1.0f;
    o->n_best = 1;
    o->temperature = 1.0f;
    o->top_p = 1.0f;
    o->repetition_penalty = 1.0f;
}

void vkf_family_model_free(const vkf_family *f, vkf_family_model *fm)
{
    if (f && f->free) f->free(fm->state);
    free(fm->banned);
    for (uint32_t i = 0; i < fm->n_langs; i++) free(fm->lang_codes[i]);
    free(fm->lang_codes);
    free(fm->lang_ids);
    if (fm->gen_lists) {
        free(fm->gen_lists->suppress);
        free(fm->gen_lists->bad_ids);
        free(fm->gen_lists->bad_lengths);
        free(fm->gen_lists->bad_ptrs);
        free(fm->gen_lists);
    }
    memset(fm, 0, sizeof *fm);
}

int32_t vkf_family_language(const vkf_family_model *fm, const char *code)
{
    for (uint32_t i = 0; code && i < fm->n_langs; i++)
        if (strcmp(fm->lang_codes[i], code) == 0) return (int32_t)i;
    return -1;
}

void vkf_family_language_examples(const vkf_family_model *fm, char *out, size_t capacity)
{
    out[0] = '\0';
    size_t used = 0;
    for (uint32_t i = 0; i < fm->n_langs && i < 6 && used < capacity; i++)
        used += (size_t)snprintf(out + used, capacity - used, "%s%s", i ? ", " : "", fm->lang_codes[i]);
    if (fm->n_langs > 6 && used < capacity) snprintf(out + used, capacity - used, ", ... (%u codes)", fm->n_langs);
}

vkf_status vkf_family_add_language(vkf_family_model *fm, const char *code, int32_t id)
{
    if (fm->n_langs % 64 == 0) {
        char **codes = realloc(fm->lang_codes, (fm->n_langs + 64) * sizeof *codes);
        if (codes) fm->lang_codes = codes;
        int32_t *ids = realloc(fm->lang_ids, (fm->n_langs + 64) * sizeof *ids);
        if (ids) fm->lang_ids = ids;
        if (!codes || !ids) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for languages");
    }
    if (!(fm->lang_codes[fm->n_langs] = strdup(code))) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    fm->lang_ids[fm->n_langs++] = id;
    return VKF_OK;
}

/* What the models of tokenizer.json share (tokenizers/src/models): the token
 * table by id, the byte-fallback ids <0x00>..<0xFF>, id lists under
 * construction and the lookup of a token in the model's vocabulary. The models
 * themselves: model_bpe.c and model_unigram.c. */
#include "tokenizers/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ids of the byte tokens "<0x00>".."<0xFF>" (byte_fallback), -1 where missing. */
void tj_find_byte_ids(const smap *vocab, int32_t out[256])
{
    for (unsigned b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        out[b] = tj_smap_get(vocab, name, 6);
    }
}

void tj_model_free(model *m)
{
    for (size_t i = 0; i < m->n_ids; i++) free(m->tok[i]);
    free(m->tok);
    free(m->tok_len);
    free(m->b.vocab.slots);
    free(m->b.merges.slots);
    free(m->b.unk), free(m->b.prefix), free(m->b.suffix);
    free(m->u.score);
    free(m->u.ids.slots);
    tj_trie_free(&m->u.pieces);
    memset(m, 0, sizeof *m);
}

vkf_status tj_model_alloc_ids(model *m, size_t n)
{
    m->tok = calloc(n ? n : 1, sizeof *m->tok);
    m->tok_len = calloc(n ? n : 1, sizeof *m->tok_len);
    if (!m->tok || !m->tok_len) return OOM();
    m->n_ids = n;
    return VKF_OK;
}

bool tj_ids_add(ids *o, int32_t id)
{
    if (!tj_grow((void **)&o->v, &o->cap, o->n + 1, sizeof *o->v)) return false;
    o->v[o->n++] = id;
    return true;
}

int32_t tj_model_token_id(const model *m, const char *s, size_t n)
{
    return tj_smap_get(m->kind == M_BPE ? &m->b.vocab : &m->u.ids, s, n);
}

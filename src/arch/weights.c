/* The weights' lifetime, the generation-only bias that bans ids, and the
 * attention each site runs under the model's choice. */
#include "arch/arch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

vkf_status vkf_arch_weights_alloc(const vkf_arch_spec *spec, vkf_arch_weights *w)
{
    w->enc = calloc(spec->encoder_layers, sizeof *w->enc);
    w->dec = calloc(spec->decoder_layers, sizeof *w->dec);
    if (!w->enc || !w->dec) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for layers");
    return VKF_OK;
}

static void linear_free(vkf_linear *l)
{
    if (!l->w_borrowed) vkf_tensor_destroy(l->w), vkf_tensor_destroy(l->scale);
    vkf_tensor_destroy(l->b);
    vkf_tensor_destroy(l->b_gen);
}

static void table_free(vkf_split_table *t)
{
    for (uint32_t i = 0; t->part && !t->borrowed && i < t->parts; i++) vkf_tensor_destroy(t->part[i]);
    for (uint32_t i = 0; t->scale && !t->borrowed && i < t->parts; i++) vkf_tensor_destroy(t->scale[i]);
    free(t->part);
    free(t->scale);
}

static void norm_free(vkf_norm *n)
{
    vkf_tensor_destroy(n->g);
    vkf_tensor_destroy(n->b);
}

void vkf_arch_weights_free(const vkf_arch_spec *spec, vkf_arch_weights *w)
{
    for (uint32_t i = 0; w->enc && i < spec->encoder_layers; i++) {
        vkf_enc_layer *e = &w->enc[i];
        linear_free(&e->qkv), linear_free(&e->o), linear_free(&e->ff1), linear_free(&e->ff2);
        norm_free(&e->n1), norm_free(&e->n2);
        linear_free(&e->q), linear_free(&e->kv), norm_free(&e->gnorm);
    }
    for (uint32_t i = 0; w->dec && i < spec->decoder_layers; i++) {
        vkf_dec_layer *e = &w->dec[i];
        linear_free(&e->qkv), linear_free(&e->o), linear_free(&e->cq), linear_free(&e->ckv), linear_free(&e->co);
        linear_free(&e->ff1), linear_free(&e->ff2);
        norm_free(&e->n1), norm_free(&e->n2), norm_free(&e->n3);
    }
    free(w->enc);
    free(w->dec);
    norm_free(&w->enc_norm), norm_free(&w->dec_norm);
    norm_free(&w->enc_embed_norm), norm_free(&w->dec_embed_norm);
    for (uint32_t i = 0; w->gen && i < w->gen_parts; i++) linear_free(&w->gen[i]);
    free(w->gen);
    table_free(&w->src_embed);
    table_free(&w->tgt_embed);
    vkf_tensor_destroy(w->pe);
    vkf_tensor_destroy(w->pe_dec);
    linear_free(&w->conv1), linear_free(&w->conv2);
    free(w->lr_file[0]);
    free(w->lr_file[1]);
    vkf_tensor_destroy(w->rel_bias[0]);
    vkf_tensor_destroy(w->rel_bias[1]);
    memset(w, 0, sizeof *w);
}

vkf_status vkf_arch_ban_ids(vkf_context *ctx, const vkf_arch_spec *spec, vkf_arch_weights *w, const int32_t *ids,
                            uint32_t count)
{
    for (uint32_t k = 0; k < count; k++)
        if (ids[k] < 0 || (uint32_t)ids[k] >= spec->tgt_vocab)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "banned id %d is outside the target vocabulary", ids[k]);
    uint32_t r0 = 0;
    for (uint32_t i = 0; i < w->gen_parts; r0 += w->gen[i].out, i++) {
        vkf_linear *g = &w->gen[i];
        uint32_t n = g->out;
        bool any = false;
        for (uint32_t k = 0; k < count; k++) any |= (uint32_t)ids[k] >= r0 && (uint32_t)ids[k] < r0 + n;
        if (!any) continue;
        /* the part's bias (or zeros), -inf at the banned ids: HF's ban followed by renormalisation */
        float *bb = calloc(n, sizeof *bb);
        if (!bb) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        vkf_status st = g->b ? vkf_tensor_download(g->b, bb, (uint64_t)n * sizeof *bb) : VKF_OK;
        for (uint32_t k = 0; k < count; k++)
            if ((uint32_t)ids[k] >= r0 && (uint32_t)ids[k] < r0 + n) bb[ids[k] - r0] = -INFINITY;
        vkf_tensor_destroy(g->b_gen);
        g->b_gen = NULL;
        uint64_t shape = n;
        if (st == VKF_OK) st = vkf_tensor_create(ctx, VKF_DTYPE_F32, 1, &shape, &g->b_gen);
        if (st == VKF_OK) st = vkf_tensor_upload(g->b_gen, bb, (uint64_t)n * sizeof *bb);
        free(bb);
        VKF_TRY(st);
    }
    return VKF_OK;
}

vkf_attention_spec vkf_arch_site(const vkf_arch *a, vkf_attention_site site)
{
    /* the encoder runs the user's variant, or the model's own when none was named */
    if (site == VKF_SITE_ENCODER) return a->encoder_attn;
    return vkf_attention_for_site(&a->self_attn, &a->cross_attn, site);
}

/* The graph, recorded from the spec: linear layers, norms, embeddings with their
 * positions, the encoder, ONE decoder layer (a whole target in the forward pass,
 * one token per row in a decode step: the same sublayers in the same order, only
 * the attention inputs differ) and the decoder's output (final norm, generator).
 * Every step below is one recorded dispatch; buffers carry their shapes. */
#include "arch/arch.h"

#include <math.h>

vkf_status vkf_tensor2(vkf_context *ctx, vkf_dtype dtype, uint64_t rows, uint64_t cols, vkf_tensor **out)
{
    uint64_t shape[2] = {rows, cols};
    return vkf_tensor_create(ctx, dtype, 2, shape, out);
}

/* The matmul of in (rows, l.in) · l.wᵀ (+ l.b): C and the epilogue left to the caller. */
static vkf_matmul_desc linear_desc(const vkf_tensor *in, uint32_t rows, const vkf_linear *l)
{
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = rows, d.n = l->out, d.k = l->in;
    d.a.tensor = (vkf_tensor *)in;
    d.b.tensor = l->w;
    d.b_scale = l->scale;
    d.bias = l->b;
    return d;
}

vkf_status vkf_rec_linear(vkf_cmd *cmd, const vkf_tensor *in, uint32_t rows, const vkf_linear *l, vkf_tensor *out,
                          vkf_activation act, const vkf_tensor *residual)
{
    vkf_matmul_desc d = linear_desc(in, rows, l);
    d.c.tensor = out;
    d.residual.tensor = (vkf_tensor *)residual;
    d.activation = act;
    return vkf_cmd_matmul(cmd, &d);
}

vkf_status vkf_rec_norm(vkf_cmd *cmd, const vkf_arch *a, const vkf_tensor *x, const vkf_tensor *residual,
                        uint32_t rows, const vkf_norm *n, vkf_tensor *y)
{
    vkf_layernorm_desc d;
    vkf_layernorm_desc_init(&d);
    d.rows = rows, d.cols = a->spec.d_model;
    d.x = (vkf_tensor *)x, d.residual = (vkf_tensor *)residual, d.gamma = n->g, d.beta = n->b, d.y = y;
    d.eps = a->spec.norm_eps;
    d.rms = a->spec.norm == VKF_NORM_RMS;
    return vkf_cmd_layernorm(cmd, &d);
}

/* out (rows, d) = FFN(in) + residual: ff2(act(ff1(in))), or gated (T5 v1.1)
 * ff2(act(in W0ᵀ) * (in W1ᵀ)) with ff1 = [W0; W1] and hidden (rows, 2 d_ff). */
static vkf_status rec_ffn(vkf_cmd *cmd, const vkf_arch *a, const vkf_linear *ff1, const vkf_linear *ff2,
                          const vkf_tensor *in, uint32_t rows, vkf_tensor *hidden, vkf_tensor *out,
                          const vkf_tensor *residual)
{
    const vkf_arch_spec *s = &a->spec;
    if (!s->ffn_glu) {
        VKF_TRY(vkf_rec_linear(cmd, in, rows, ff1, hidden, s->activation, NULL));
        return vkf_rec_linear(cmd, hidden, rows, ff2, out, VKF_ACTIVATION_NONE, residual);
    }
    /* hidden = [in W0ᵀ, in W1ᵀ]; hidden[:, :d_ff] = act(in W0ᵀ) * in W1ᵀ; out = hidden[:, :d_ff] W2ᵀ */
    VKF_TRY(vkf_rec_linear(cmd, in, rows, ff1, hidden, VKF_ACTIVATION_NONE, NULL));
    VKF_TRY(vkf_op_glu(cmd, hidden, rows, s->d_ff, s->activation));
    vkf_matmul_desc d = linear_desc(hidden, rows, ff2);
    d.a.row_stride = 2ull * s->d_ff;
    d.c.tensor = out;
    d.residual.tensor = (vkf_tensor *)residual;
    return vkf_cmd_matmul(cmd, &d);
}

vkf_status vkf_rec_embed(vkf_cmd *cmd, const vkf_arch *a, bool decoder, const vkf_tensor *ids, uint32_t tokens,
                         const vkf_embed_at *at, vkf_tensor *scratch, vkf_tensor *out)
{
    const vkf_arch_spec *s = &a->spec;
    const vkf_split_table *table = decoder ? &a->w.tgt_embed : &a->w.src_embed;
    vkf_tensor *dst = s->embedding_norm ? scratch : out;
    vkf_embed_desc e;
    vkf_embed_desc_init(&e);
    e.tokens = tokens, e.d = s->d_model, e.vocab = table->rows;
    e.ids = (vkf_tensor *)ids, e.out = dst, e.scale = s->embed_scale;
    if (s->positions != VKF_POS_NONE) {
        e.positions = decoder && a->w.pe_dec ? a->w.pe_dec : a->w.pe;
        e.seq_len = at->seq_len;
        e.position_state = (vkf_tensor *)at->state;
        e.position_ids = (vkf_tensor *)at->position_ids;
        if (s->positions == VKF_POS_LEARNED) e.pos_offset = s->position_offset;
        if (s->positions == VKF_POS_SIN_FAIRSEQ) {
            /* position p at row p + pad + 1 (the host's position ids hold the rows), padding at row pad */
            e.pos_offset = at->position_ids ? 0 : (uint32_t)s->pad_id + 1;
            e.pad_position = true, e.pad_id = s->pad_id, e.pad_row = (uint32_t)s->pad_id;
        }
    }
    for (uint32_t i = 0; i < table->parts; i++) {
        e.table = table->part[i];
        e.table_scale = table->scale ? table->scale[i] : NULL;
        e.table_row0 = i * table->rows_per_part;
        e.table_rows = table->parts > 1 ? (i + 1 < table->parts ? table->rows_per_part : table->rows - e.table_row0) : 0;
        VKF_TRY(vkf_cmd_embed(cmd, &e));
    }
    /* layernorm_embedding */
    if (s->embedding_norm)
        VKF_TRY(vkf_rec_norm(cmd, a, dst, NULL, tokens, decoder ? &a->w.dec_embed_norm : &a->w.enc_embed_norm, out));
    return VKF_OK;
}

vkf_status vkf_rec_generator(vkf_cmd *cmd, const vkf_arch *a, const vkf_tensor *in, uint32_t rows, bool generation,
                             vkf_tensor *logits)
{
    uint32_t col = 0;
    for (uint32_t i = 0; i < a->w.gen_parts; i++) {
        const vkf_linear *l = &a->w.gen[i];
        vkf_matmul_desc d = linear_desc(in, rows, l);
        d.c = (vkf_matrix_view){logits, col, a->spec.tgt_vocab, {0, 0}};
        if (a->spec.output_scale != 0.0f) d.alpha = a->spec.output_scale;
        if (generation && l->b_gen) d.bias = l->b_gen;
        VKF_TRY(vkf_cmd_matmul(cmd, &d));
        col += l->out;
    }
    return VKF_OK;
}

/* ------------------------------------------------------------------ attention of the forward pass */

static float attention_scale(const vkf_arch *a)
{
    return a->spec.attention_scale != 0.0f ? a->spec.attention_scale : 1.0f / sqrtf((float)a->spec.head_dim);
}

/* A (B, rows, inner) view of `cols` columns from col of a projection output with row stride `stride`. */
static vkf_attention_view heads_view(const vkf_tensor *t, uint64_t col, uint64_t stride, uint32_t rows)
{
    return (vkf_attention_view){t, col, stride, (uint64_t)rows * stride};
}

/* out (B*Lq, inner) = attention at `site` of the plan's buffers through the variant switch */
static vkf_status rec_attention(vkf_cmd *cmd, const vkf_arch *a, vkf_fwd_plan *p, vkf_attention_site site, uint32_t Lq,
                                uint32_t Lk, vkf_attention_view q, vkf_attention_view k, vkf_attention_view v, bool causal,
                                vkf_tensor *out)
{
    bool keyed = site != VKF_SITE_DECODER;      /* encoder and cross keys are the sources, masked past their lengths */
    int lr = site == VKF_SITE_CROSS;            /* which lowrank projection */
    bool self = site != VKF_SITE_CROSS;         /* T5's relative position bias: self-attention only */
    vkf_attention_call c = {
        .spec = vkf_arch_site(a, site), .batch = p->batch, .heads = a->spec.heads, .head_dim = a->spec.head_dim,
        .lq = Lq, .lk = Lk, .scale = attention_scale(a), .q = q, .k = k, .v = v, .out = out, .dtype = a->act,
        .causal = causal, .key_lengths = keyed ? p->src_lengths : NULL, .key_mask = keyed ? p->src_mask : NULL,
        .seed = a->seed, .scores = p->scores, .lsh = p->lsh,
        .lowrank_proj = p->lr_proj[lr], .lowrank_rows = p->lr_lengths[lr], .lowrank_kv = p->lr_kv,
        .bias_table = self ? a->w.rel_bias[site == VKF_SITE_DECODER] : NULL,
        .rel_bias = a->spec.rel_bias && self, .rel_radius = a->w.rel_radius,
        .global_bias = site == VKF_SITE_ENCODER && a->w.rel_global, .global_radius = a->w.rel_radius,
    };
    if (c.spec.kind == VKF_ATTN_FUSED && c.spec.pattern == VKF_ATTENTION_TGLOBAL) {
        /* the global keys: LongT5's own, recorded by the encoder layer, or the block means made here */
        c.global_max = p->g_max;
        if (a->spec.global_norm) c.global_kv = p->g_kv;
        else c.global_scratch = p->g_kv;
    }
    if (c.spec.kind == VKF_ATTN_FUSED && c.spec.pattern == VKF_ATTENTION_BIGBIRD) {
        vkf_tensor **table = &p->bb_table[site == VKF_SITE_DECODER];
        if (!*table) VKF_TRY(vkf_attention_call_table(a->ctx, &c, table));
        c.bigbird_table = *table;
    }
    return vkf_attention_record(cmd, &c);
}

/* ------------------------------------------------------------------ encoder */

/* One Conv1d (kernel 3, padding 1) over each item's time-major rows as one
 * matmul: output row t reads input rows stride t - 1 .. stride t + 1, which in the
 * zero-padded input (rows 0 and F + 1 zero) are the 3 * ch consecutive values
 * from row stride t: a view whose rows overlap. */
static vkf_status rec_conv(vkf_cmd *cmd, const vkf_tensor *in, uint32_t batch, uint64_t in_rows, uint32_t ch,
                           uint32_t stride, const vkf_linear *l, uint32_t out_rows, vkf_matrix_view out,
                           const vkf_tensor *residual)
{
    vkf_matmul_desc d;
    vkf_matmul_desc_init(&d);
    d.m = out_rows, d.n = l->out, d.k = 3 * ch, d.batch[0] = batch;
    d.a = (vkf_matrix_view){(vkf_tensor *)in, 0, (uint64_t)stride * ch, {in_rows * ch, 0}};
    d.a_rows_overlap = true;
    d.b.tensor = l->w, d.b_scale = l->scale, d.bias = l->b;
    d.c = out;
    d.activation = VKF_ACTIVATION_GELU;
    /* the positions: one (out_rows, d) table for every item */
    if (residual) d.residual = (vkf_matrix_view){(vkf_tensor *)residual, 0, l->out, {0, 0}};
    return vkf_cmd_matmul(cmd, &d);
}

/* x (B*S, d) = GELU(conv2(GELU(conv1(mel)))) + PE: Whisper's stem. */
static vkf_status rec_audio_stem(vkf_cmd *cmd, const vkf_arch *a, vkf_fwd_plan *p, vkf_tensor *x)
{
    const vkf_arch_spec *s = &a->spec;
    uint32_t B = p->batch, F = s->audio_frames, S = p->src_len, d = s->d_model;
    uint64_t item = (uint64_t)(F + 2) * d;
    /* conv rows 1..F of each item = GELU(conv1(mel)) */
    VKF_TRY(rec_conv(cmd, p->mel, B, F + 2, s->audio_mels, 1, &a->w.conv1, F,
                     (vkf_matrix_view){p->conv, d, d, {item, 0}}, NULL));
    /* x = GELU(conv2(conv)) + PE, stride 2 */
    return rec_conv(cmd, p->conv, B, F + 2, d, 2, &a->w.conv2, S, (vkf_matrix_view){x, 0, d, {(uint64_t)S * d, 0}},
                    a->w.pe);
}

/* qkv (rows, 3 inner) = in · [Wq; Wk; Wv]ᵀ of encoder layer e: one stacked linear,
 * or (LongT5 transient-global) q and the stacked k, v apart. */
static vkf_status rec_enc_qkv(vkf_cmd *cmd, const vkf_arch *a, const vkf_enc_layer *e, const vkf_tensor *in,
                              uint32_t rows, vkf_tensor *qkv)
{
    if (!a->spec.global_norm) return vkf_rec_linear(cmd, in, rows, &e->qkv, qkv, VKF_ACTIVATION_NONE, NULL);
    uint64_t inner = (uint64_t)a->spec.heads * a->spec.head_dim;
    vkf_matmul_desc d = linear_desc(in, rows, &e->q);
    d.c = (vkf_matrix_view){qkv, 0, 3 * inner, {0, 0}};
    VKF_TRY(vkf_cmd_matmul(cmd, &d));
    d = linear_desc(in, rows, &e->kv);
    d.c = (vkf_matrix_view){qkv, inner, 3 * inner, {0, 0}};
    return vkf_cmd_matmul(cmd, &d);
}

/* LongT5 transient-global: layer e's global keys and values p->g_kv (B*g_max, 2
 * inner) = RMSNorm_gnorm(block sums of its attention input x (B*S, d)) · [Wk; Wv]ᵀ. */
static vkf_status rec_global_keys(vkf_cmd *cmd, const vkf_arch *a, const vkf_enc_layer *e, vkf_fwd_plan *p,
                                  const vkf_tensor *x)
{
    vkf_attention_spec enc = vkf_arch_site(a, VKF_SITE_ENCODER);
    if (!a->spec.global_norm || enc.kind != VKF_ATTN_FUSED || enc.pattern != VKF_ATTENTION_TGLOBAL || !p->g_max)
        return VKF_OK;
    uint32_t d = a->spec.d_model, G = p->g_max, rows = p->batch * G;
    vkf_block_sum_desc sum = {
        .batch = p->batch, .lk = p->src_len, .cols = d, .block = enc.block, .gmax = G, .x = x,
        .lengths = p->src_lengths, .out = p->g_sum,
    };
    VKF_TRY(vkf_op_block_sum(cmd, &sum));
    VKF_TRY(vkf_rec_norm(cmd, a, p->g_sum, NULL, rows, &e->gnorm, p->g_norm));
    return vkf_rec_linear(cmd, p->g_norm, rows, &e->kv, p->g_kv, VKF_ACTIVATION_NONE, NULL);
}

vkf_status vkf_rec_encoder(vkf_cmd *cmd, const vkf_arch *a, vkf_fwd_plan *p)
{
    const vkf_arch_spec *s = &a->spec;
    uint32_t B = p->batch, S = p->src_len, rows = B * S;
    uint64_t inner = (uint64_t)s->heads * s->head_dim;
    vkf_tensor *x = p->a, *alt = p->b;
    if (s->audio_mels) {
        VKF_TRY(rec_audio_stem(cmd, a, p, x));
    } else {
        /* x = EmbedNorm(src_embed(ids) * scale + PE) */
        vkf_embed_at at = {.position_ids = p->src_pos, .seq_len = S};
        VKF_TRY(vkf_rec_embed(cmd, a, false, p->src_ids, rows, &at, p->n, x));
    }
    vkf_attention_view q = heads_view(p->qkv, 0, 3 * inner, S), k = heads_view(p->qkv, inner, 3 * inner, S),
                       v = heads_view(p->qkv, 2 * inner, 3 * inner, S);
    for (uint32_t i = 0; i < s->encoder_layers; i++) {
        const vkf_enc_layer *e = &a->w.enc[i];
        /* without a final norm the last layer writes the memory */
        bool last = i + 1 == s->encoder_layers && !s->encoder_final_norm;
        if (!s->pre_norm) {
            /* x = N1(x + SelfAttn(x)); x = N2(x + FFN(x)) */
            VKF_TRY(rec_enc_qkv(cmd, a, e, x, rows, p->qkv));
            VKF_TRY(rec_global_keys(cmd, a, e, p, x));
            VKF_TRY(rec_attention(cmd, a, p, VKF_SITE_ENCODER, S, S, q, k, v, false, p->attn));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, rows, &e->o, p->tmp, VKF_ACTIVATION_NONE, NULL));
            VKF_TRY(vkf_rec_norm(cmd, a, x, p->tmp, rows, &e->n1, x));
            VKF_TRY(rec_ffn(cmd, a, &e->ff1, &e->ff2, x, rows, p->hidden, p->tmp, NULL));
            VKF_TRY(vkf_rec_norm(cmd, a, x, p->tmp, rows, &e->n2, last ? p->memory : x));
        } else {
            /* alt = x + SelfAttn(N1(x)); x = alt + FFN(N2(alt)) */
            VKF_TRY(vkf_rec_norm(cmd, a, x, NULL, rows, &e->n1, p->n));
            VKF_TRY(rec_enc_qkv(cmd, a, e, p->n, rows, p->qkv));
            VKF_TRY(rec_global_keys(cmd, a, e, p, p->n));
            VKF_TRY(rec_attention(cmd, a, p, VKF_SITE_ENCODER, S, S, q, k, v, false, p->attn));
            VKF_TRY(vkf_rec_linear(cmd, p->attn, rows, &e->o, alt, VKF_ACTIVATION_NONE, x));
            VKF_TRY(vkf_rec_norm(cmd, a, alt, NULL, rows, &e->n2, p->n));
            VKF_TRY(rec_ffn(cmd, a, &e->ff1, &e->ff2, p->n, rows, p->hidden, last ? p->memory : x, alt));
        }
    }
    /* memory = FinalNorm(x) */
    if (!s->encoder_final_norm) return VKF_OK;
    return vkf_rec_norm(cmd, a, x, NULL, rows, &a->w.enc_norm, p->memory);
}

/* ------------------------------------------------------------------ the decoder layer */

/* io->attn = causal self-attention of the layer's queries io->qkv over the
 * target so far: the whole target (full pass), or the KV cache with this step's
 * keys and values appended (decode step). */
static vkf_status rec_self_attention(vkf_cmd *cmd, const vkf_arch *a, uint32_t i, const vkf_dec_io *io)
{
    const vkf_arch_spec *s = &a->spec;
    uint64_t inner = (uint64_t)s->heads * s->head_dim;
    if (io->full) {
        vkf_fwd_plan *p = io->full;
        uint32_t T = p->tgt_len;
        return rec_attention(cmd, a, p, VKF_SITE_DECODER, T, T, heads_view(io->qkv, 0, 3 * inner, T),
                             heads_view(io->qkv, inner, 3 * inner, T), heads_view(io->qkv, 2 * inner, 3 * inner, T),
                             true, io->attn);
    }
    uint32_t B = io->rows, steps = io->step.steps;
    VKF_TRY(vkf_op_kv_append(cmd, io->qkv, io->step.state, io->step.cache_k[i], io->step.cache_v[i], B, (uint32_t)inner,
                             steps));
    /* keys and values of positions 0..state */
    vkf_attention_decode_desc self = {
        .batch = B, .heads = s->heads, .head_dim = s->head_dim, .max_keys = steps, .scale = attention_scale(a),
        .q = io->qkv, .q_offset = 0, .q_batch = 3 * inner,
        .k = io->step.cache_k[i], .k_offset = 0, .k_row = inner, .k_batch = (uint64_t)steps * inner,
        .v = io->step.cache_v[i], .v_offset = 0, .v_row = inner, .v_batch = (uint64_t)steps * inner,
        .lengths = io->step.state, .length_from_state = true, .scratch = io->step.scratch, .out = io->attn,
        .row_index = io->step.row_index,
        .rel_bias = s->rel_bias ? a->w.rel_bias[1] : NULL, .rel_radius = a->w.rel_radius,
    };
    vkf_attention_spec sc = vkf_arch_site(a, VKF_SITE_STEP_SELF);
    if (sc.kind == VKF_ATTN_FUSED) {
        self.pattern = sc.pattern, self.window = sc.window, self.stride = sc.stride;
        self.bigbird = (vkf_bigbird){sc.block, sc.globals, sc.random, true, a->seed};
        self.random_blocks = io->step.bigbird_random;
    }
    return vkf_op_attention_decode(cmd, &self);
}

/* io->attn = cross-attention of the layer's queries io->q over each source's
 * memory, masked past its length. */
static vkf_status rec_cross_attention(vkf_cmd *cmd, const vkf_arch *a, uint32_t i, const vkf_dec_io *io)
{
    const vkf_arch_spec *s = &a->spec;
    uint64_t inner = (uint64_t)s->heads * s->head_dim;
    if (io->full) {
        vkf_fwd_plan *p = io->full;
        uint32_t T = p->tgt_len, S = p->src_len;
        return rec_attention(cmd, a, p, VKF_SITE_CROSS, T, S, heads_view(io->q, 0, inner, T),
                             heads_view(p->kv, 0, 2 * inner, S), heads_view(p->kv, inner, 2 * inner, S), false,
                             io->attn);
    }
    uint32_t keys = io->step.cross_keys;
    vkf_attention_decode_desc cross = {
        .batch = io->rows, .heads = s->heads, .head_dim = s->head_dim, .max_keys = keys, .scale = attention_scale(a),
        .q = io->q, .q_offset = 0, .q_batch = inner,
        .k = io->step.cross_kv[i], .k_offset = 0, .k_row = 2 * inner, .k_batch = (uint64_t)keys * 2 * inner,
        .v = io->step.cross_kv[i], .v_offset = inner, .v_row = 2 * inner, .v_batch = (uint64_t)keys * 2 * inner,
        .lengths = io->step.cross_lengths, .length_from_state = false, .scratch = io->step.scratch, .out = io->attn,
        .kv_div = io->step.kv_div,
    };
    return vkf_op_attention_decode(cmd, &cross);
}

vkf_status vkf_rec_decoder_layer(vkf_cmd *cmd, const vkf_arch *a, uint32_t i, vkf_dec_io *io)
{
    const vkf_arch_spec *s = &a->spec;
    const vkf_dec_layer *e = &a->w.dec[i];
    uint32_t rows = io->rows;
    vkf_tensor *x = io->x, *alt = io->alt;
    /* a whole target: the layer's cross-attention keys and values of the memory (a
     * decode step reads them from its plan, computed once per generation) */
    if (io->full)
        VKF_TRY(vkf_rec_linear(cmd, io->full->memory, io->full->batch * io->full->src_len, &e->ckv, io->full->kv,
                               VKF_ACTIVATION_NONE, NULL));
    if (!s->pre_norm) {
        /* x = N1(x + CausalSelfAttn(x)); x = N2(x + CrossAttn(x, memory)); x = N3(x + FFN(x)) */
        VKF_TRY(vkf_rec_linear(cmd, x, rows, &e->qkv, io->qkv, VKF_ACTIVATION_NONE, NULL));
        VKF_TRY(rec_self_attention(cmd, a, i, io));
        VKF_TRY(vkf_rec_linear(cmd, io->attn, rows, &e->o, io->tmp, VKF_ACTIVATION_NONE, NULL));
        VKF_TRY(vkf_rec_norm(cmd, a, x, io->tmp, rows, &e->n1, x));
        VKF_TRY(vkf_rec_linear(cmd, x, rows, &e->cq, io->q, VKF_ACTIVATION_NONE, NULL));
        VKF_TRY(rec_cross_attention(cmd, a, i, io));
        VKF_TRY(vkf_rec_linear(cmd, io->attn, rows, &e->co, io->tmp, VKF_ACTIVATION_NONE, NULL));
        VKF_TRY(vkf_rec_norm(cmd, a, x, io->tmp, rows, &e->n2, x));
        VKF_TRY(rec_ffn(cmd, a, &e->ff1, &e->ff2, x, rows, io->hidden, io->tmp, NULL));
        return vkf_rec_norm(cmd, a, x, io->tmp, rows, &e->n3, x);
    }
    /* alt = x + CausalSelfAttn(N1(x)); x = alt + CrossAttn(N2(alt)); alt = x + FFN(N3(x)); then swap */
    VKF_TRY(vkf_rec_norm(cmd, a, x, NULL, rows, &e->n1, io->n));
    VKF_TRY(vkf_rec_linear(cmd, io->n, rows, &e->qkv, io->qkv, VKF_ACTIVATION_NONE, NULL));
    VKF_TRY(rec_self_attention(cmd, a, i, io));
    VKF_TRY(vkf_rec_linear(cmd, io->attn, rows, &e->o, alt, VKF_ACTIVATION_NONE, x));
    VKF_TRY(vkf_rec_norm(cmd, a, alt, NULL, rows, &e->n2, io->n));
    VKF_TRY(vkf_rec_linear(cmd, io->n, rows, &e->cq, io->q, VKF_ACTIVATION_NONE, NULL));
    VKF_TRY(rec_cross_attention(cmd, a, i, io));
    VKF_TRY(vkf_rec_linear(cmd, io->attn, rows, &e->co, x, VKF_ACTIVATION_NONE, alt));
    VKF_TRY(vkf_rec_norm(cmd, a, x, NULL, rows, &e->n3, io->n));
    VKF_TRY(rec_ffn(cmd, a, &e->ff1, &e->ff2, io->n, rows, io->hidden, alt, x));
    io->x = alt, io->alt = x;
    return VKF_OK;
}

vkf_status vkf_rec_decoder_output(vkf_cmd *cmd, const vkf_arch *a, const vkf_tensor *x, vkf_tensor *n, uint32_t rows,
                                  bool generation, vkf_tensor *logits)
{
    /* logits = generator(FinalNorm(x)) */
    if (!a->spec.decoder_final_norm) return vkf_rec_generator(cmd, a, x, rows, generation, logits);
    VKF_TRY(vkf_rec_norm(cmd, a, x, NULL, rows, &a->w.dec_norm, n));
    return vkf_rec_generator(cmd, a, n, rows, generation, logits);
}

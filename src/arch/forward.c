/* The forward pass: plans (the activations of one (batch, source, target)
 * shape with the pass recorded into one command buffer, kept for reuse), the
 * checks and uploads of its inputs, and vkf_arch_forward, which runs a call in
 * chunks where one batch would pass the device's limits. */
#include "arch/arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vkf_fwd_plan_free(vkf_fwd_plan *p)
{
    if (!p) return;
    vkf_cmd_destroy(p->cmd);
    vkf_tensor *ts[] = {p->src_ids,     p->tgt_ids,     p->src_pos,     p->tgt_pos,     p->src_mask,
                        p->src_lengths, p->a,           p->b,           p->n,           p->memory,
                        p->qkv,         p->q,           p->kv,          p->attn,        p->tmp,
                        p->hidden,      p->scores,      p->logits,      p->bb_table[0], p->bb_table[1],
                        p->lr_proj[0],  p->lr_proj[1],  p->lr_lengths[0], p->lr_lengths[1], p->lr_kv,
                        p->mel,         p->conv,        p->g_kv,        p->g_sum,       p->g_norm};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) vkf_tensor_destroy(ts[i]);
    vkf_lsh_plan_destroy(p->lsh);
    free(p);
}

vkf_status vkf_fwd_plan_alloc(vkf_arch *a, uint32_t B, uint32_t S, uint32_t T, vkf_fwd_plan **out)
{
    vkf_context *ctx = a->ctx;
    const vkf_arch_spec *s = &a->spec;
    vkf_fwd_plan *p = calloc(1, sizeof *p);
    if (!p) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a forward plan");
    p->batch = B, p->src_len = S, p->tgt_len = T;
    uint64_t L = S > T ? S : T, rows = (uint64_t)B * L, d = s->d_model, inner = (uint64_t)s->heads * s->head_dim;
    uint64_t score_rows = (uint64_t)B * s->heads * L;
    bool fairseq = s->positions == VKF_POS_SIN_FAIRSEQ;
    vkf_status st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, S, &p->src_ids);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, T, &p->tgt_ids);
    if (st == VKF_OK && fairseq) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, S, &p->src_pos);
    if (st == VKF_OK && fairseq) st = vkf_tensor2(ctx, VKF_DTYPE_I32, B, T, &p->tgt_pos);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_F32, B, S, &p->src_mask);
    if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, B, &p->src_lengths);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, rows, d, &p->a);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, rows, d, &p->b);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, rows, d, &p->n);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, (uint64_t)B * S, d, &p->memory);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, rows, 3 * inner, &p->qkv);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, (uint64_t)B * T, inner, &p->q);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, (uint64_t)B * S, 2 * inner, &p->kv);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, rows, inner, &p->attn);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, rows, d, &p->tmp);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, rows, vkf_arch_hidden_cols(s), &p->hidden);
    if (st == VKF_OK && (vkf_attention_materialises(&a->self_attn, s->head_dim) ||
                         vkf_attention_materialises(&a->cross_attn, s->head_dim)))
        st = vkf_tensor2(ctx, VKF_DTYPE_F32, score_rows, L, &p->scores);
    if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, (uint64_t)B * T, s->tgt_vocab, &p->logits);
    if (st == VKF_OK && a->self_attn.kind == VKF_ATTN_LSH) {
        vkf_lsh_desc shape = {.batch = B, .heads = s->heads, .head_dim = s->head_dim,
                              .rounds = a->self_attn.rounds, .chunk = a->self_attn.chunk};
        st = vkf_lsh_plan_create(ctx, &shape, (uint32_t)L, a->seed, &p->lsh);
    }
    uint32_t lr_rows = 0;
    for (int i = 0; i < 2 && st == VKF_OK; i++) {
        const vkf_attention_spec *ch = i == 0 ? &a->self_attn : &a->cross_attn;
        if (ch->kind != VKF_ATTN_LOWRANK) continue;
        st = vkf_tensor2(ctx, a->act, (uint64_t)B * ch->rank, S, &p->lr_proj[i]);
        if (st == VKF_OK) st = vkf_tensor2(ctx, VKF_DTYPE_I32, 1, B, &p->lr_lengths[i]);
        if (ch->rank > lr_rows) lr_rows = ch->rank;
    }
    if (st == VKF_OK && lr_rows) st = vkf_tensor2(ctx, a->act, (uint64_t)B * lr_rows, 2 * inner, &p->lr_kv);
    if (st == VKF_OK && s->audio_mels) {
        /* the stem's time-major inputs with a zero row before and after each item: conv
         * rows are written between them, and the zeros are uploaded once */
        uint64_t rows2 = (uint64_t)B * (s->audio_frames + 2);
        st = vkf_tensor2(ctx, a->act, rows2, s->audio_mels, &p->mel);
        if (st == VKF_OK) st = vkf_tensor2(ctx, a->act, rows2, d, &p->conv);
        float *zeros = st == VKF_OK ? calloc(rows2 * d, sizeof *zeros) : NULL;
        if (st == VKF_OK && !zeros) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for a forward plan");
        if (st == VKF_OK) st = vkf_upload_floats(p->conv, zeros, rows2 * d);
        free(zeros);
    }
    /* transient-global in the encoder: S / G global keys per source (LongT5's made from block sums, normed) */
    vkf_attention_spec enc = vkf_arch_site(a, VKF_SITE_ENCODER);
    if (enc.kind == VKF_ATTN_FUSED && enc.pattern == VKF_ATTENTION_TGLOBAL) p->g_max = vkf_tglobal_rows(S, enc.block);
    if (st == VKF_OK && p->g_max) st = vkf_tensor2(ctx, a->act, (uint64_t)B * p->g_max, 2 * inner, &p->g_kv);
    if (st == VKF_OK && p->g_max && s->global_norm) st = vkf_tensor2(ctx, a->act, (uint64_t)B * p->g_max, d, &p->g_sum);
    if (st == VKF_OK && p->g_max && s->global_norm) st = vkf_tensor2(ctx, a->act, (uint64_t)B * p->g_max, d, &p->g_norm);
    if (st != VKF_OK) {
        vkf_fwd_plan_free(p);
        return st;
    }
    *out = p;
    return VKF_OK;
}

uint64_t vkf_arch_hidden_cols(const vkf_arch_spec *s)
{
    return s->ffn_glu ? 2ull * s->d_ff : s->d_ff;
}

void vkf_arch_drop_plans(vkf_arch *a)
{
    for (int i = 0; i < VKF_MAX_FORWARD_PLANS; i++) {
        vkf_fwd_plan_free(a->plans[i]);
        a->plans[i] = NULL;
    }
    a->last_forward = NULL;
}

/* Decoder over a whole target (teacher forcing): tgt ids, memory -> logits. */
static vkf_status rec_decoder(vkf_cmd *cmd, const vkf_arch *a, vkf_fwd_plan *p)
{
    uint32_t rows = p->batch * p->tgt_len;
    vkf_dec_io io = {.rows = rows, .x = p->a, .alt = p->b, .n = p->n, .qkv = p->qkv, .q = p->q, .attn = p->attn,
                     .tmp = p->tmp, .hidden = p->hidden, .full = p};
    /* y = EmbedNorm(tgt_embed(ids) * scale + PE) */
    vkf_embed_at at = {.position_ids = p->tgt_pos, .seq_len = p->tgt_len};
    VKF_TRY(vkf_rec_embed(cmd, a, true, p->tgt_ids, rows, &at, p->n, io.x));
    for (uint32_t i = 0; i < a->spec.decoder_layers; i++) VKF_TRY(vkf_rec_decoder_layer(cmd, a, i, &io));
    return vkf_rec_decoder_output(cmd, a, io.x, p->n, rows, false, p->logits);
}

/* The plan of this shape, recorded on first use (the encoder alone when
 * encode_only); most recently used kept last. */
static vkf_status forward_plan(vkf_arch *a, uint32_t B, uint32_t S, uint32_t T, bool encode_only, vkf_fwd_plan **out)
{
    for (int i = 0; i < VKF_MAX_FORWARD_PLANS; i++) {
        vkf_fwd_plan *p = a->plans[i];
        if (p && p->batch == B && p->src_len == S && p->tgt_len == T && p->encode_only == encode_only) {
            memmove(&a->plans[i], &a->plans[i + 1], (VKF_MAX_FORWARD_PLANS - 1 - i) * sizeof *a->plans);
            a->plans[VKF_MAX_FORWARD_PLANS - 1] = p;
            *out = p;
            return VKF_OK;
        }
    }
    vkf_fwd_plan *p;
    VKF_TRY(vkf_fwd_plan_alloc(a, B, S, T, &p));
    p->encode_only = encode_only;
    vkf_status st = vkf_cmd_create(a->ctx, a->cmd_flags, &p->cmd);
    if (st == VKF_OK) st = vkf_rec_encoder(p->cmd, a, p);
    if (st == VKF_OK && !encode_only) st = rec_decoder(p->cmd, a, p);
    if (st != VKF_OK) {
        vkf_fwd_plan_free(p);
        return st;
    }
    if (a->plans[0] && a->last_forward == a->plans[0]->cmd) a->last_forward = NULL;
    vkf_fwd_plan_free(a->plans[0]);
    memmove(&a->plans[0], &a->plans[1], (VKF_MAX_FORWARD_PLANS - 1) * sizeof *a->plans);
    a->plans[VKF_MAX_FORWARD_PLANS - 1] = p;
    *out = p;
    return VKF_OK;
}

vkf_status vkf_check_sequences(const vkf_arch *a, const vkf_sequences *s, uint32_t vocab, const char *what,
                               uint32_t *out_max)
{
    *out_max = 0;
    if (!s || !s->ids || !s->lengths || s->count == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: no sequences given", what);
    for (uint32_t i = 0; i < s->count; i++) {
        uint32_t n = s->lengths[i];
        if (n == 0) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s sequence %u is empty", what, i);
        if (n > a->spec.max_len)
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s sequence %u has %u tokens; the model's max_len is %u", what,
                            i, n, a->spec.max_len);
        if (!s->ids[i]) return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s sequence %u is NULL", what, i);
        for (uint32_t j = 0; j < n; j++)
            if (s->ids[i][j] < 0 || (uint32_t)s->ids[i][j] >= vocab)
                return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s sequence %u: id %d at position %u is outside 0..%u",
                                what, i, s->ids[i][j], j, vocab - 1);
        if (n > *out_max) *out_max = n;
    }
    return VKF_OK;
}

vkf_status vkf_upload_ids(const vkf_arch *a, const vkf_sequences *s, uint32_t len, vkf_tensor *ids, vkf_tensor *mask,
                          vkf_tensor *lengths, vkf_tensor *positions)
{
    size_t n = (size_t)s->count * len;
    int32_t pad = a->spec.pad_id;
    int32_t *h = malloc(n * sizeof *h), *pos = positions ? malloc(n * sizeof *pos) : NULL;
    float *k = malloc(n * sizeof *k);
    if (!h || !k || (positions && !pos)) {
        free(h), free(k), free(pos);
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for ids");
    }
    for (uint32_t i = 0; i < s->count; i++) {
        int32_t seen = 0; /* tokens other than padding so far: fairseq's positions count only them */
        for (uint32_t j = 0; j < len; j++) {
            bool real = j < s->lengths[i];
            int32_t id = real ? s->ids[i][j] : pad;
            h[(size_t)i * len + j] = id;
            k[(size_t)i * len + j] = real ? 0.0f : -INFINITY;
            if (pos) pos[(size_t)i * len + j] = id == pad ? pad : pad + ++seen;
        }
    }
    vkf_status st = vkf_tensor_upload(ids, h, n * sizeof *h);
    if (st == VKF_OK && mask) st = vkf_tensor_upload(mask, k, n * sizeof *k);
    if (st == VKF_OK && positions) st = vkf_tensor_upload(positions, pos, n * sizeof *pos);
    if (st == VKF_OK && lengths) {
        for (uint32_t i = 0; i < s->count; i++) h[i] = (int32_t)s->lengths[i];
        st = vkf_tensor_upload(lengths, h, (uint64_t)s->count * sizeof *h);
    }
    free(h), free(k), free(pos);
    return st;
}

vkf_status vkf_upload_lowrank(const vkf_arch *a, vkf_fwd_plan *p, const vkf_sequences *src)
{
    for (int i = 0; i < 2; i++) {
        if (!p->lr_proj[i]) continue;
        uint32_t K = (i == 0 ? a->self_attn : a->cross_attn).rank, S = p->src_len, B = p->batch;
        float *E = malloc((size_t)B * K * S * sizeof *E);
        int32_t *rows = malloc((size_t)B * sizeof *rows);
        vkf_status st = E && rows ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for the lowrank projection");
        if (st == VKF_OK && a->w.lr_file[i] && a->w.lr_file_rank[i] == K) {
            /* the file's projection, its columns past each source's length zeroed;
             * trailing rows left all zero hold no key and are masked (so the
             * identity with K = max_len is dense attention at every length) */
            for (uint32_t b = 0; b < B; b++) {
                rows[b] = 0;
                for (uint32_t r = 0; r < K; r++)
                    for (uint32_t j = 0; j < S; j++) {
                        float e = j < src->lengths[b] ? a->w.lr_file[i][(size_t)r * a->spec.max_len + j] : 0.0f;
                        E[((size_t)b * K + r) * S + j] = e;
                        if (e != 0.0f) rows[b] = (int32_t)r + 1;
                    }
            }
        } else if (st == VKF_OK) {
            st = vkf_lowrank_projection(a->seed, K, S, src->lengths, B, E, rows);
        }
        if (st == VKF_OK) st = vkf_upload_floats(p->lr_proj[i], E, (uint64_t)B * K * S);
        if (st == VKF_OK) st = vkf_tensor_upload(p->lr_lengths[i], rows, (uint64_t)B * sizeof *rows);
        free(E), free(rows);
        VKF_TRY(st);
    }
    return VKF_OK;
}

vkf_status vkf_arch_forward_device(vkf_arch *a, const vkf_sequences *src, const vkf_sequences *tgt, uint32_t S,
                                   uint32_t T, vkf_fwd_plan **out_plan)
{
    vkf_fwd_plan *p;
    VKF_TRY(forward_plan(a, src->count, S, T, false, &p));
    VKF_TRY(vkf_upload_ids(a, src, S, p->src_ids, p->src_mask, p->src_lengths, p->src_pos));
    VKF_TRY(vkf_upload_ids(a, tgt, T, p->tgt_ids, NULL, NULL, p->tgt_pos));
    VKF_TRY(vkf_upload_lowrank(a, p, src));
    VKF_TRY(vkf_cmd_submit(p->cmd));
    a->last_forward = p->cmd;
    *out_plan = p;
    return VKF_OK;
}

/* One batch's logits into out (count, t_out, V), t_out >= the batch's longest target. */
static vkf_status forward_batch(vkf_arch *a, const vkf_sequences *src, const vkf_sequences *tgt, uint32_t S, uint32_t T,
                                float *out, uint32_t t_out)
{
    uint32_t B = src->count, V = a->spec.tgt_vocab;
    vkf_fwd_plan *p;
    VKF_TRY(vkf_arch_forward_device(a, src, tgt, S, T, &p));
    uint64_t need = (uint64_t)B * T * V;
    float *dst = out;
    if (T != t_out && !(dst = malloc(need * sizeof *dst)))
        return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for logits");
    vkf_status st = vkf_download_floats(p->logits, dst, need);
    if (dst != out) {
        for (uint32_t i = B; st == VKF_OK && i-- > 0;)
            memcpy(out + (uint64_t)i * t_out * V, dst + (uint64_t)i * T * V, (uint64_t)T * V * sizeof *out);
        free(dst);
    }
    for (uint32_t i = 0; st == VKF_OK && i < B; i++) /* rows past each target are padding */
        memset(out + ((uint64_t)i * t_out + tgt->lengths[i]) * V, 0,
               (uint64_t)(t_out - tgt->lengths[i]) * V * sizeof(float));
    return st;
}

vkf_status vkf_run_chunked(vkf_context *ctx, vkf_chunking *c, uint32_t total, const uint32_t len[2], const char *what,
                           vkf_chunk_fn fn, void *user)
{
    bool known = c->cap && len[0] >= c->len[0] && len[1] >= c->len[1];
    uint32_t size = known && c->cap < total ? c->cap : total, chunks = 0, largest = 0;
    for (uint32_t first = 0; first < total;) {
        uint32_t left = total - first, pieces = (left + size - 1) / size, n = (left + pieces - 1) / pieces;
        vkf_status st = fn(user, first, n);
        if (st == VKF_ERROR_TOO_LARGE) {
            if (n == 1) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", vkf_last_error());
                return vkf_fail(st, "%s (%s even one sequence at a time)", msg, what);
            }
            size = n / 2;
            c->cap = size, c->len[0] = len[0], c->len[1] = len[1];
            continue;
        }
        VKF_TRY(st);
        first += n, chunks++;
        if (n > largest) largest = n;
    }
    if (chunks > 1)
        vkf_log(ctx, VKF_LOG_INFO, "%s %u sequences ran as %u batches of at most %u: one batch would need a tensor "
                "past the device's limits", what, total, chunks, largest);
    return VKF_OK;
}

typedef struct forward_call {
    vkf_arch *a;
    const vkf_sequences *src, *tgt;
    float *out;
    uint32_t t_out;
} forward_call;

/* The sequences [first, first + count) of a forward call, as one batch with its own longest lengths. */
static vkf_status forward_chunk(void *user, uint32_t first, uint32_t count)
{
    const forward_call *f = user;
    vkf_sequences s = {count, f->src->ids + first, f->src->lengths + first};
    vkf_sequences t = {count, f->tgt->ids + first, f->tgt->lengths + first};
    uint32_t S = 0, T = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (s.lengths[i] > S) S = s.lengths[i];
        if (t.lengths[i] > T) T = t.lengths[i];
    }
    return forward_batch(f->a, &s, &t, S, T, f->out + (uint64_t)first * f->t_out * f->a->spec.tgt_vocab, f->t_out);
}

vkf_status vkf_arch_forward(vkf_arch *a, const vkf_sequences *src, const vkf_sequences *tgt, float *out_logits,
                            uint64_t out_floats)
{
    if (a->spec.audio_mels)
        return vkf_fail(VKF_ERROR_STATE, "vkf_model_forward: this model reads audio, not source ids; use "
                        "vkf_model_forward_audio or vkf_model_forward_features");
    uint32_t S, T;
    VKF_TRY(vkf_check_sequences(a, src, a->spec.src_vocab, "source", &S));
    VKF_TRY(vkf_check_sequences(a, tgt, a->spec.tgt_vocab, "target", &T));
    if (src->count != tgt->count)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_forward: %u sources but %u targets", src->count, tgt->count);
    uint32_t B = src->count, V = a->spec.tgt_vocab;
    uint64_t need = (uint64_t)B * T * V;
    if (out_floats != need)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "vkf_model_forward: out_logits holds %llu floats, %llu needed",
                        (unsigned long long)out_floats, (unsigned long long)need);
    forward_call f = {a, src, tgt, out_logits, T};
    return vkf_run_chunked(a->ctx, &a->fwd_chunks, B, (const uint32_t[2]){S, T}, "the forward pass of", forward_chunk,
                           &f);
}

/* ------------------------------------------------------------------ audio sources */

/* The plan's stem inputs from features (B, mels, F): time-major with zero rows
 * around each item; every source is S keys long. */
vkf_status vkf_upload_features(const vkf_arch *a, vkf_fwd_plan *p, const float *features)
{
    uint32_t B = p->batch, M = a->spec.audio_mels, F = a->spec.audio_frames, S = p->src_len;
    uint64_t item = (uint64_t)(F + 2) * M;
    float *h = calloc((size_t)B * item, sizeof *h), *mask = calloc((size_t)B * S, sizeof *mask);
    int32_t *len = malloc((size_t)B * sizeof *len);
    vkf_status st = h && mask && len ? VKF_OK : vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for features");
    for (uint32_t b = 0; st == VKF_OK && b < B; b++) {
        len[b] = (int32_t)S;
        for (uint32_t m = 0; m < M; m++)
            for (uint32_t t = 0; t < F; t++) h[b * item + (uint64_t)(t + 1) * M + m] = features[((uint64_t)b * M + m) * F + t];
    }
    if (st == VKF_OK) st = vkf_upload_floats(p->mel, h, (uint64_t)B * item);
    if (st == VKF_OK) st = vkf_tensor_upload(p->src_mask, mask, (uint64_t)B * S * sizeof *mask);
    if (st == VKF_OK) st = vkf_tensor_upload(p->src_lengths, len, (uint64_t)B * sizeof *len);
    if (st == VKF_OK && (p->lr_proj[0] || p->lr_proj[1])) {
        uint32_t *lens = malloc((size_t)B * sizeof *lens);
        if (!lens) st = vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (uint32_t b = 0; st == VKF_OK && b < B; b++) lens[b] = S;
        vkf_sequences src = {B, NULL, lens};
        if (st == VKF_OK) st = vkf_upload_lowrank(a, p, &src);
        free(lens);
    }
    free(h), free(mask), free(len);
    return st;
}

vkf_status vkf_check_features(const vkf_arch *a, const float *features, uint32_t count, const char *fn)
{
    if (!a->spec.audio_mels)
        return vkf_fail(VKF_ERROR_STATE, "%s: this model reads source ids, not audio", fn);
    if (!features || count == 0)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %s", fn, !features ? "features is NULL" : "count is 0");
    uint64_t n = (uint64_t)count * a->spec.audio_mels * a->spec.audio_frames;
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(features[i]))
            return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: feature %llu (window %llu, bin %llu, frame %llu) is not "
                            "finite", fn, (unsigned long long)i, (unsigned long long)(i / ((uint64_t)a->spec.audio_mels * a->spec.audio_frames)),
                            (unsigned long long)(i / a->spec.audio_frames % a->spec.audio_mels),
                            (unsigned long long)(i % a->spec.audio_frames));
    return VKF_OK;
}

typedef struct features_call {
    vkf_arch *a;
    const float *features;              /* (count, M, F) */
    const vkf_sequences *tgt;
    float *out;
    uint32_t t_out;
    bool encode_only;
} features_call;

static vkf_status features_chunk(void *user, uint32_t first, uint32_t count)
{
    const features_call *f = user;
    vkf_arch *a = f->a;
    const vkf_arch_spec *s = &a->spec;
    uint32_t S = s->audio_frames / 2, V = s->tgt_vocab, T = 1;
    const float *feat = f->features + (uint64_t)first * s->audio_mels * s->audio_frames;
    vkf_fwd_plan *p;
    if (f->encode_only) {
        VKF_TRY(forward_plan(a, count, S, 1, true, &p));
        VKF_TRY(vkf_upload_features(a, p, feat));
        VKF_TRY(vkf_cmd_submit(p->cmd));
        return vkf_download_floats(p->memory, f->out + (uint64_t)first * S * s->d_model, (uint64_t)count * S * s->d_model);
    }
    vkf_sequences t = {count, f->tgt->ids + first, f->tgt->lengths + first};
    for (uint32_t i = 0; i < count; i++)
        if (t.lengths[i] > T) T = t.lengths[i];
    VKF_TRY(forward_plan(a, count, S, T, false, &p));
    VKF_TRY(vkf_upload_features(a, p, feat));
    VKF_TRY(vkf_upload_ids(a, &t, T, p->tgt_ids, NULL, NULL, p->tgt_pos));
    VKF_TRY(vkf_cmd_submit(p->cmd));
    a->last_forward = p->cmd;
    float *out = f->out + (uint64_t)first * f->t_out * V;
    uint64_t need = (uint64_t)count * T * V;
    float *dst = T == f->t_out ? out : malloc(need * sizeof *dst);
    if (!dst) return vkf_fail(VKF_ERROR_OUT_OF_HOST_MEMORY, "out of host memory for logits");
    vkf_status st = vkf_download_floats(p->logits, dst, need);
    if (dst != out) {
        for (uint32_t i = count; st == VKF_OK && i-- > 0;)
            memcpy(out + (uint64_t)i * f->t_out * V, dst + (uint64_t)i * T * V, (uint64_t)T * V * sizeof *out);
        free(dst);
    }
    for (uint32_t i = 0; st == VKF_OK && i < count; i++) /* rows past each target are padding */
        memset(out + ((uint64_t)i * f->t_out + t.lengths[i]) * V, 0, (uint64_t)(f->t_out - t.lengths[i]) * V * sizeof(float));
    return st;
}

vkf_status vkf_arch_forward_features(vkf_arch *a, const float *features, uint32_t count, const vkf_sequences *tgt,
                                     float *out_logits, uint64_t out_floats)
{
    static const char fn[] = "vkf_model_forward_features";
    VKF_TRY(vkf_check_features(a, features, count, fn));
    uint32_t T;
    VKF_TRY(vkf_check_sequences(a, tgt, a->spec.tgt_vocab, "target", &T));
    if (tgt->count != count)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: %u windows of audio but %u targets", fn, count, tgt->count);
    uint64_t need = (uint64_t)count * T * a->spec.tgt_vocab;
    if (out_floats != need)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out_logits holds %llu floats, %llu needed", fn,
                        (unsigned long long)out_floats, (unsigned long long)need);
    features_call f = {a, features, tgt, out_logits, T, false};
    return vkf_run_chunked(a->ctx, &a->fwd_chunks, count, (const uint32_t[2]){a->spec.audio_frames / 2, T},
                           "the forward pass of", features_chunk, &f);
}

vkf_status vkf_arch_encode_features(vkf_arch *a, const float *features, uint32_t count, float *out_hidden,
                                    uint64_t out_floats)
{
    static const char fn[] = "vkf_model_encode_audio";
    VKF_TRY(vkf_check_features(a, features, count, fn));
    uint64_t need = (uint64_t)count * (a->spec.audio_frames / 2) * a->spec.d_model;
    if (out_floats != need)
        return vkf_fail(VKF_ERROR_INVALID_ARGUMENT, "%s: out_hidden holds %llu floats, %llu needed", fn,
                        (unsigned long long)out_floats, (unsigned long long)need);
    features_call f = {a, features, NULL, out_hidden, 0, true};
    return vkf_run_chunked(a->ctx, &a->fwd_chunks, count, (const uint32_t[2]){a->spec.audio_frames / 2, 1},
                           "the encoder of", features_chunk, &f);
}

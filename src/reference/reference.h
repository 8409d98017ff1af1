/* Plain-C reference of every kernel: slow, simple, accumulating in double. The
 * tests' oracle. Shapes are given in the comments; matrices are row-major with the
 * given row strides (in elements). */
#ifndef VKF_REFERENCE_H
#define VKF_REFERENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* C (m, n) = act(alpha * A (m, k) · Bᵀ + bias (n)) + R (m, n), where B is (n, k), or
 * (k, n) if b_kn. bias and r may be NULL. act: 0 none, 1 ReLU, 2 exact GELU, 3 SiLU, 4 tanh GELU. */
void ref_matmul(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb, bool b_kn,
                const float *bias, const float *r, size_t ldr, size_t m, size_t n, size_t k, float alpha, int act);

/* w = scale[channel] * q, rounded to float, for an int8 weight matrix of rows x cols
 * (row stride ld) whose output channel is the row (b_kn false: (n, k)) or the
 * column (b_kn true: (k, n)); w is packed the same way (row stride ld). */
void ref_dequantize_int8(float *w, const int8_t *q, size_t ld, const float *scale, size_t rows, size_t cols, bool b_kn);

/* ref_matmul with int8 weights: B = b_scale[n] * q (q (n, k), or (k, n) if b_kn,
 * row stride ldq) dequantized to float by ref_dequantize_int8, then ref_matmul. */
void ref_matmul_i8(float *c, size_t ldc, const float *a, size_t lda, const int8_t *q, size_t ldq, bool b_kn,
                   const float *b_scale, const float *bias, const float *r, size_t ldr, size_t m, size_t n, size_t k,
                   float alpha, int act);

/* y (rows, cols) = softmax(scale * x + mask[(row / mask_row_div) % mask_rows]) with
 * columns j > row % causal_period + causal_offset masked when causal_period > 0;
 * an all-masked row is zeros. mask may be NULL. */
void ref_softmax(float *y, const float *x, size_t rows, size_t cols, float scale, const float *mask, size_t mask_rows,
                 size_t mask_row_div, size_t causal_period, size_t causal_offset);

/* y (rows, cols) = (x + r) / sqrt(mean((x + r)^2) + eps) * gamma (+ beta): RMSNorm (T5). */
void ref_rmsnorm(float *y, const float *x, const float *r, const float *gamma, const float *beta, size_t rows,
                 size_t cols, float eps);

/* h (rows, 2n): h[r, c] = act(h[r, c]) * h[r, n + c] for c < n (the gated FFN), act as ref_matmul's. */
void ref_glu(float *h, size_t rows, size_t n, int act);

/* out (batch, gmax, cols): row g < n_b = min(len_b / block, gmax) of sequence b is the sum (mean) of x's rows
 * [g block, (g + 1) block) of b, the last also taking [n_b block, len_b); other rows 0. x[b * x_batch + t * x_row
 * + c]; len_b = lengths[b] clamped to [0, lk] (lengths NULL: lk). */
void ref_block_sum(float *out, const float *x, size_t x_row, size_t x_batch, const int32_t *lengths, size_t batch,
                   size_t lk, size_t cols, size_t block, size_t gmax, bool mean);

/* y (rows, cols) = LayerNorm(x + r) * gamma + beta; sum = x + r if not NULL; r may be NULL. */
void ref_layernorm(float *y, float *sum, const float *x, const float *r, const float *gamma, const float *beta,
                   size_t rows, size_t cols, float eps);

/* out (tokens, d) = table[ids[t]] (vocab, d) * scale + PE(t % seq_len + pos_offset);
 * rows of out-of-range ids are NaN. */
void ref_embed(float *out, const int32_t *ids, const float *table, size_t tokens, size_t d, size_t vocab, float scale,
               bool positional, size_t seq_len, size_t pos_offset);

/* Which keys a query may see in ref_attention. */
typedef struct ref_attention_mask {
    const int32_t *lengths;             /* (batch): keys j >= lengths[b] masked; NULL: none */
    bool causal;                        /* keys j > i + causal_offset masked */
    size_t causal_offset;
    int pattern;                        /* 0 dense; 1 local: |i-j| <= window; 2 strided: that or j % stride == stride-1;
                                           4 tglobal: |i-j| <= window, and the global keys below */
    size_t window, stride;
    const unsigned char *allowed;       /* pattern 3: explicit (lq, lk) matrix, nonzero = allowed */
    size_t allowed_cols;                /* its row length (lk) */
    /* T5's relative position bias: score(i, j) += rel_bias[h (2 R + 1) + clamp(j - i, -R, R) + R], R =
     * rel_radius; NULL: none */
    const float *rel_bias;
    size_t rel_radius;
    /* pattern 4: sequence b has n = min(len_b / global_block, global_max) global keys g, seen by every query, key
     * global_k[b global_max global_row + g global_row + h head_dim + c] (likewise global_v), each with
     * global_bias[h (2 Rg + 1) + clamp(g - min(i / global_block, n - 1), -Rg, Rg) + Rg] when global_bias */
    size_t global_block, global_max, global_row;
    const float *global_k, *global_v;
    const float *global_bias;
    size_t global_radius;
} ref_attention_mask;

/* Whether query i of sequence b may see key j, evaluated literally. */
bool ref_attention_allowed(const ref_attention_mask *mask, size_t b, size_t i, size_t j);

/* out (batch * lq, heads * head_dim) = Σ_j softmax_j(scale · q·k_j over allowed j) v_j per (b, i, h);
 * q[b * q_batch + i * q_row + h * head_dim + c] (lq rows), likewise k and v (lk rows).
 * A query with no allowed key is zeros. */
void ref_attention(float *out, const float *q, size_t q_row, size_t q_batch, const float *k, size_t k_row,
                   size_t k_batch, const float *v, size_t v_row, size_t v_batch, size_t batch, size_t heads,
                   size_t head_dim, size_t lq, size_t lk, float scale, const ref_attention_mask *mask);

/* IEEE half <-> float, round to nearest even; exact for every half. */
uint16_t ref_f32_to_f16(float x);
float ref_f16_to_f32(uint16_t h);

#endif

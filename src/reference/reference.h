/* Plain-C reference of every kernel: slow, simple, accumulating in double. The
 * tests' oracle. Shapes are given in the comments; matrices are row-major with the
 * given row strides (in elements). */
#ifndef VKF_REFERENCE_H
#define VKF_REFERENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* C (m, n) = act(alpha * A (m, k) · Bᵀ + bias (n)) + R (m, n), where B is (n, k), or
 * (k, n) if b_kn. bias and r may be NULL. act: 0 none, 1 ReLU, 2 exact GELU. */
void ref_matmul(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb, bool b_kn,
                const float *bias, const float *r, size_t ldr, size_t m, size_t n, size_t k, float alpha, int act);

/* y (rows, cols) = softmax(scale * x + mask[(row / mask_row_div) % mask_rows]) with
 * columns j > row % causal_period + causal_offset masked when causal_period > 0;
 * an all-masked row is zeros. mask may be NULL. */
void ref_softmax(float *y, const float *x, size_t rows, size_t cols, float scale, const float *mask, size_t mask_rows,
                 size_t mask_row_div, size_t causal_period, size_t causal_offset);

/* y (rows, cols) = LayerNorm(x + r) * gamma + beta; sum = x + r if not NULL; r may be NULL. */
void ref_layernorm(float *y, float *sum, const float *x, const float *r, const float *gamma, const float *beta,
                   size_t rows, size_t cols, float eps);

/* out (tokens, d) = table[ids[t]] (vocab, d) * scale + PE(t % seq_len + pos_offset);
 * rows of out-of-range ids are NaN. */
void ref_embed(float *out, const int32_t *ids, const float *table, size_t tokens, size_t d, size_t vocab, float scale,
               bool positional, size_t seq_len, size_t pos_offset);

/* IEEE half <-> float, round to nearest even; exact for every half. */
uint16_t ref_f32_to_f16(float x);
float ref_f16_to_f32(uint16_t h);

#endif

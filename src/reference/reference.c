/* The plain-C reference kernels; see reference.h. */
#include "reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double activate(double x, int act)
{
    if (act == 1) return x > 0 ? x : 0;
    if (act == 2) return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    if (act == 3) return x / (1.0 + exp(-x));
    if (act == 4) return 0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
    return x;
}

void ref_matmul(float *c, size_t ldc, const float *a, size_t lda, const float *b, size_t ldb, bool b_kn,
                const float *bias, const float *r, size_t ldr, size_t m, size_t n, size_t k, float alpha, int act)
{
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double acc = 0;
            for (size_t p = 0; p < k; p++) acc += (double)a[i * lda + p] * (b_kn ? b[p * ldb + j] : b[j * ldb + p]);
            double v = alpha * acc;
            if (bias) v += bias[j];
            v = activate(v, act);
            if (r) v += r[i * ldr + j];
            c[i * ldc + j] = (float)v;
        }
}

void ref_dequantize_int8(float *w, const int8_t *q, size_t ld, const float *scale, size_t rows, size_t cols, bool b_kn)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) w[i * ld + j] = scale[b_kn ? j : i] * (float)q[i * ld + j];
}

void ref_matmul_i8(float *c, size_t ldc, const float *a, size_t lda, const int8_t *q, size_t ldq, bool b_kn,
                   const float *b_scale, const float *bias, const float *r, size_t ldr, size_t m, size_t n, size_t k,
                   float alpha, int act)
{
    size_t rows = b_kn ? k : n, cols = b_kn ? n : k;
    float *w = malloc(((rows - 1) * ldq + cols) * sizeof *w);
    if (!w) abort(); /* the tests' oracle: no way to go on */
    ref_dequantize_int8(w, q, ldq, b_scale, rows, cols, b_kn);
    ref_matmul(c, ldc, a, lda, w, ldq, b_kn, bias, r, ldr, m, n, k, alpha, act);
    free(w);
}

void ref_softmax(float *y, const float *x, size_t rows, size_t cols, float scale, const float *mask, size_t mask_rows,
                 size_t mask_row_div, size_t causal_period, size_t causal_offset)
{
    if (mask_row_div == 0) mask_row_div = 1;
    for (size_t i = 0; i < rows; i++) {
        size_t limit = cols;
        if (causal_period && i % causal_period + causal_offset + 1 < cols) limit = i % causal_period + causal_offset + 1;
        const float *mrow = mask ? mask + ((i / mask_row_div) % mask_rows) * cols : NULL;
        double mx = -INFINITY;
        for (size_t j = 0; j < limit; j++) {
            double v = (double)scale * x[i * cols + j] + (mrow ? mrow[j] : 0);
            if (v > mx) mx = v;
        }
        double s = 0;
        for (size_t j = 0; j < limit && mx != -INFINITY; j++)
            s += exp((double)scale * x[i * cols + j] + (mrow ? mrow[j] : 0) - mx);
        for (size_t j = 0; j < cols; j++) {
            double p = 0;
            if (j < limit && mx != -INFINITY) p = exp((double)scale * x[i * cols + j] + (mrow ? mrow[j] : 0) - mx) / s;
            y[i * cols + j] = (float)p;
        }
    }
}

void ref_layernorm(float *y, float *sum, const float *x, const float *r, const float *gamma, const float *beta,
                   size_t rows, size_t cols, float eps)
{
    for (size_t i = 0; i < rows; i++) {
        /* The residual sum is rounded to float first, as PyTorch's separate add does. */
        const float *xi = x + i * cols;
        double mean = 0, var = 0;
        for (size_t j = 0; j < cols; j++) mean += (float)(xi[j] + (r ? r[i * cols + j] : 0.0f));
        mean /= (double)cols;
        for (size_t j = 0; j < cols; j++) {
            double d = (float)(xi[j] + (r ? r[i * cols + j] : 0.0f)) - mean;
            var += d * d;
        }
        var /= (double)cols;
        double rstd = 1.0 / sqrt(var + eps);
        for (size_t j = 0; j < cols; j++) {
            float s = xi[j] + (r ? r[i * cols + j] : 0.0f);
            if (sum) sum[i * cols + j] = s;
            y[i * cols + j] = (float)(((double)s - mean) * rstd * gamma[j] + beta[j]);
        }
    }
}

void ref_embed(float *out, const int32_t *ids, const float *table, size_t tokens, size_t d, size_t vocab, float scale,
               bool positional, size_t seq_len, size_t pos_offset)
{
    if (seq_len == 0) seq_len = tokens;
    for (size_t t = 0; t < tokens; t++) {
        bool valid = ids[t] >= 0 && (size_t)ids[t] < vocab;
        double pos = (double)(t % seq_len + pos_offset);
        for (size_t c = 0; c < d; c++) {
            if (!valid) {
                out[t * d + c] = NAN;
                continue;
            }
            double v = (double)table[(size_t)ids[t] * d + c] * scale;
            if (positional) {
                double freq = exp((double)(c & ~(size_t)1) * -log(10000.0) / (double)d);
                v += (c & 1) ? cos(pos * freq) : sin(pos * freq);
            }
            out[t * d + c] = (float)v;
        }
    }
}

void ref_rmsnorm(float *y, const float *x, const float *r, const float *gamma, const float *beta, size_t rows,
                 size_t cols, float eps)
{
    for (size_t i = 0; i < rows; i++) {
        double sq = 0;
        for (size_t j = 0; j < cols; j++) {
            double v = (double)x[i * cols + j] + (r ? r[i * cols + j] : 0.0);
            sq += v * v;
        }
        double rstd = 1.0 / sqrt(sq / (double)cols + eps);
        for (size_t j = 0; j < cols; j++) {
            double v = (double)x[i * cols + j] + (r ? r[i * cols + j] : 0.0);
            y[i * cols + j] = (float)(v * rstd * gamma[j] + (beta ? beta[j] : 0.0));
        }
    }
}

void ref_glu(float *h, size_t rows, size_t n, int act)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t c = 0; c < n; c++)
            h[i * 2 * n + c] = (float)(activate(h[i * 2 * n + c], act) * (double)h[i * 2 * n + n + c]);
}

void ref_block_sum(float *out, const float *x, size_t x_row, size_t x_batch, const int32_t *lengths, size_t batch,
                   size_t lk, size_t cols, size_t block, size_t gmax, bool mean)
{
    for (size_t b = 0; b < batch; b++) {
        size_t len = lengths ? (lengths[b] < 0 ? 0 : (size_t)lengths[b]) : lk;
        if (len > lk) len = lk;
        size_t n = len / block < gmax ? len / block : gmax;
        for (size_t g = 0; g < gmax; g++)
            for (size_t c = 0; c < cols; c++) {
                double acc = 0;
                size_t t0 = g * block, t1 = g + 1 == n ? len : t0 + block;
                if (g < n) {
                    for (size_t t = t0; t < t1; t++) acc += x[b * x_batch + t * x_row + c];
                    if (mean) acc /= (double)(t1 - t0);
                }
                out[(b * gmax + g) * cols + c] = (float)acc;
            }
    }
}

bool ref_attention_allowed(const ref_attention_mask *mask, size_t b, size_t i, size_t j)
{
    if (mask->lengths && (mask->lengths[b] < 0 || j >= (size_t)mask->lengths[b])) return false;
    if (mask->causal && j > i + mask->causal_offset) return false;
    size_t dist = i > j ? i - j : j - i;
    if (mask->pattern == 1 || mask->pattern == 4) return dist <= mask->window;
    if (mask->pattern == 2) return dist <= mask->window || j % mask->stride == mask->stride - 1;
    if (mask->pattern == 3) return mask->allowed[i * mask->allowed_cols + j] != 0;
    return true;
}

void ref_attention(float *out, const float *q, size_t q_row, size_t q_batch, const float *k, size_t k_row,
                   size_t k_batch, const float *v, size_t v_row, size_t v_batch, size_t batch, size_t heads,
                   size_t head_dim, size_t lq, size_t lk, float scale, const ref_attention_mask *mask)
{
    size_t extra = mask->pattern == 4 ? mask->global_max : 0; /* global keys after the lk */
    double *s = malloc((lk + extra + 1) * sizeof *s), *o = malloc(head_dim * sizeof *o);
    size_t dm = heads * head_dim;
    if (!s || !o) { /* out of host memory: NaN everywhere fails any comparison */
        for (size_t e = 0; e < batch * lq * dm; e++) out[e] = NAN;
        free(s);
        free(o);
        return;
    }
    for (size_t b = 0; b < batch; b++)
        for (size_t h = 0; h < heads; h++)
            for (size_t i = 0; i < lq; i++) {
                const float *qi = q + b * q_batch + i * q_row + h * head_dim;
                double mx = -INFINITY;
                /* the sequence's global keys (pattern 4) */
                size_t len = mask->lengths ? (mask->lengths[b] < 0 ? 0 : (size_t)mask->lengths[b]) : lk;
                if (len > lk) len = lk;
                size_t n_glob = extra ? len / mask->global_block : 0;
                if (n_glob > extra) n_glob = extra;
                for (size_t j = 0; j < lk + n_glob; j++) {
                    s[j] = -INFINITY;
                    bool global = j >= lk;
                    if (!global && !ref_attention_allowed(mask, b, i, j)) continue;
                    const float *kj = global ? mask->global_k + (b * extra + (j - lk)) * mask->global_row + h * head_dim
                                             : k + b * k_batch + j * k_row + h * head_dim;
                    double dot = 0;
                    for (size_t c = 0; c < head_dim; c++) dot += (double)qi[c] * kj[c];
                    s[j] = (double)scale * dot;
                    if (!global && mask->rel_bias) {
                        long R = (long)mask->rel_radius, rel = (long)j - (long)i;
                        rel = rel < -R ? -R : rel > R ? R : rel;
                        s[j] += mask->rel_bias[h * (2 * R + 1) + (size_t)(rel + R)];
                    }
                    if (global && mask->global_bias) {
                        long R = (long)mask->global_radius, blk = (long)(i / mask->global_block);
                        if (blk > (long)n_glob - 1) blk = (long)n_glob - 1;
                        long rel = (long)(j - lk) - blk;
                        rel = rel < -R ? -R : rel > R ? R : rel;
                        s[j] += mask->global_bias[h * (2 * R + 1) + (size_t)(rel + R)];
                    }
                    if (s[j] > mx) mx = s[j];
                }
                double sum = 0;
                for (size_t c = 0; c < head_dim; c++) o[c] = 0;
                for (size_t j = 0; j < lk + n_glob && mx != -INFINITY; j++) {
                    if (s[j] == -INFINITY) continue;
                    double p = exp(s[j] - mx);
                    sum += p;
                    const float *vj = j >= lk ? mask->global_v + (b * extra + (j - lk)) * mask->global_row + h * head_dim
                                              : v + b * v_batch + j * v_row + h * head_dim;
                    for (size_t c = 0; c < head_dim; c++) o[c] += p * vj[c];
                }
                float *oi = out + (b * lq + i) * dm + h * head_dim;
                for (size_t c = 0; c < head_dim; c++) oi[c] = sum > 0 ? (float)(o[c] / sum) : 0.0f;
            }
    free(s);
    free(o);
}

uint16_t ref_f32_to_f16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xffu, man = u & 0x7fffffu;
    if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0)); /* inf, NaN */
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u);                         /* overflow: inf */
    if (e <= 0) {                                                            /* subnormal or zero */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift, rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13), rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++;        /* may carry into inf: right */
    return (uint16_t)(sign | half);
}

float ref_f16_to_f32(uint16_t h)
{
    uint32_t sign = (h & 0x8000u) ? 1u : 0u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    double v;
    if (exp == 0) v = ldexp((double)man, -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexp((double)(man | 0x400u), (int)exp - 25);
    return (float)(sign ? -v : v);
}

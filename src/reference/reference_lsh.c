/* Plain-C reference of LSH attention; see reference_lsh.h. */
#include "reference_lsh.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SELF_LOGIT (-1e5)

static size_t length_of(const ref_lsh_shape *s, size_t b)
{
    if (!s->lengths) return s->n;
    int32_t len = s->lengths[b];
    return len < 0 ? 0 : (size_t)len > s->n ? s->n : (size_t)len;
}

static const float *q_row(const ref_lsh_shape *s, size_t b, size_t h, size_t j)
{
    return s->q + b * s->q_batch + j * s->q_row + h * s->head_dim;
}

static const float *v_row(const ref_lsh_shape *s, size_t b, size_t h, size_t j)
{
    return s->v + b * s->v_batch + j * s->v_row + h * s->head_dim;
}

/* k_j = q_j / |q_j| in double (zero for a zero query). */
static void key_of(double *k, const ref_lsh_shape *s, size_t b, size_t h, size_t j)
{
    const float *q = q_row(s, b, h, j);
    double sum = 0;
    for (size_t c = 0; c < s->head_dim; c++) sum += (double)q[c] * q[c];
    double inv = sum > 0 ? 1.0 / sqrt(sum) : 0.0;
    for (size_t c = 0; c < s->head_dim; c++) k[c] = q[c] * inv;
}

void ref_lsh_hash(int32_t *buckets, double *margin, const ref_lsh_shape *s, const float *rot, size_t rot_cols)
{
    size_t nb = s->buckets, half = nb / 2, hd = s->head_dim;
    double *k = malloc(hd * sizeof *k), *proj = malloc((nb + 1) * sizeof *proj);
    for (size_t b = 0; b < s->batch; b++)
        for (size_t h = 0; h < s->heads; h++)
            for (size_t r = 0; r < s->rounds; r++)
                for (size_t j = 0; j < s->n; j++) {
                    size_t at = ((b * s->heads + h) * s->rounds + r) * s->n + j;
                    if (j >= length_of(s, b)) {
                        buckets[at] = (int32_t)nb;
                        if (margin) margin[at] = 0;
                        continue;
                    }
                    if (nb == 1) {
                        buckets[at] = 0;
                        if (margin) margin[at] = INFINITY;
                        continue;
                    }
                    key_of(k, s, b, h, j);
                    for (size_t c = 0; c < half; c++) {
                        double p = 0;
                        for (size_t d = 0; d < hd; d++) p += k[d] * rot[(r * hd + d) * rot_cols + c];
                        proj[c] = p, proj[half + c] = -p;
                    }
                    size_t best = 0;
                    for (size_t c = 1; c < nb; c++)
                        if (proj[c] > proj[best]) best = c;
                    double second = -INFINITY;
                    for (size_t c = 0; c < nb; c++)
                        if (c != best && proj[c] > second) second = proj[c];
                    buckets[at] = (int32_t)best;
                    if (margin) margin[at] = proj[best] - second;
                }
    free(k), free(proj);
}

void ref_lsh_sort(int32_t *sorted, const int32_t *buckets, size_t slabs, size_t n)
{
    for (size_t sl = 0; sl < slabs; sl++) {
        const int32_t *bk = buckets + sl * n;
        int32_t *out = sorted + sl * n;
        /* Insertion sort: stable, and obviously so. */
        for (size_t x = 0; x < n; x++) {
            size_t y = x;
            while (y > 0 && bk[out[y - 1]] > bk[x]) {
                out[y] = out[y - 1];
                y--;
            }
            out[y] = (int32_t)x;
        }
    }
}

/* Attention of query i over the keys keys[0..count) (original positions),
 * accumulated into o (head_dim) with its lse (natural log); -inf and zeros when
 * no key is allowed. */
static double attend_one(double *o, const ref_lsh_shape *s, size_t b, size_t h, size_t i, const size_t *keys,
                         size_t count, double *k, double *logit)
{
    size_t hd = s->head_dim, len = length_of(s, b);
    const float *q = q_row(s, b, h, i);
    double mx = -INFINITY;
    for (size_t x = 0; x < count; x++) {
        size_t j = keys[x];
        logit[x] = -INFINITY;
        if (j >= len || (s->causal && j > i)) continue;
        if (j == i) logit[x] = SELF_LOGIT;
        else {
            key_of(k, s, b, h, j);
            double dot = 0;
            for (size_t c = 0; c < hd; c++) dot += (double)q[c] * k[c];
            logit[x] = (double)s->scale * dot;
        }
        if (logit[x] > mx) mx = logit[x];
    }
    for (size_t c = 0; c < hd; c++) o[c] = 0;
    if (mx == -INFINITY) return -INFINITY;
    double sum = 0;
    for (size_t x = 0; x < count; x++) {
        if (logit[x] == -INFINITY) continue;
        double p = exp(logit[x] - mx);
        sum += p;
        const float *v = v_row(s, b, h, keys[x]);
        for (size_t c = 0; c < hd; c++) o[c] += p * v[c];
    }
    for (size_t c = 0; c < hd; c++) o[c] /= sum;
    return mx + log(sum);
}

void ref_lsh_attend(float *out, const ref_lsh_shape *s, const int32_t *sorted)
{
    size_t n = s->n, hd = s->head_dim, H = s->rounds, C = s->chunk, dm = s->heads * hd;
    double *o = malloc(H * n * hd * sizeof *o), *lse = malloc(H * n * sizeof *lse);
    double *k = malloc(hd * sizeof *k), *logit = malloc(2 * C * sizeof *logit);
    size_t *keys = malloc(2 * C * sizeof *keys);
    for (size_t b = 0; b < s->batch; b++)
        for (size_t h = 0; h < s->heads; h++) {
            for (size_t r = 0; r < H; r++) {
                const int32_t *order = sorted + ((b * s->heads + h) * H + r) * n;
                for (size_t x = 0; x < n; x++) {
                    size_t c = x / C, first = c > 0 ? (c - 1) * C : 0, end = (c + 1) * C < n ? (c + 1) * C : n;
                    size_t count = 0;
                    for (size_t y = first; y < end; y++) keys[count++] = (size_t)order[y];
                    size_t i = (size_t)order[x];
                    lse[r * n + i] = attend_one(o + (r * n + i) * hd, s, b, h, i, keys, count, k, logit);
                }
            }
            for (size_t i = 0; i < n; i++) {
                double mx = -INFINITY;
                for (size_t r = 0; r < H; r++) mx = lse[r * n + i] > mx ? lse[r * n + i] : mx;
                float *dst = out + (b * n + i) * dm + h * hd;
                for (size_t c = 0; c < hd; c++) {
                    double acc = 0, sum = 0;
                    if (mx != -INFINITY)
                        for (size_t r = 0; r < H; r++) {
                            double w = lse[r * n + i] == -INFINITY ? 0 : exp(lse[r * n + i] - mx);
                            sum += w, acc += w * o[(r * n + i) * hd + c];
                        }
                    dst[c] = mx == -INFINITY ? 0.0f : (float)(acc / sum);
                }
            }
        }
    free(o), free(lse), free(k), free(logit), free(keys);
}

void ref_lsh_attention(float *out, const ref_lsh_shape *s, const float *rot, size_t rot_cols)
{
    size_t slabs = s->batch * s->heads * s->rounds;
    int32_t *buckets = malloc(slabs * s->n * sizeof *buckets), *sorted = malloc(slabs * s->n * sizeof *sorted);
    ref_lsh_hash(buckets, NULL, s, rot, rot_cols);
    ref_lsh_sort(sorted, buckets, slabs, s->n);
    ref_lsh_attend(out, s, sorted);
    free(buckets), free(sorted);
}

void ref_shared_qk_attention(float *out, const ref_lsh_shape *s)
{
    size_t n = s->n, hd = s->head_dim, dm = s->heads * hd;
    double *o = malloc(hd * sizeof *o), *k = malloc(hd * sizeof *k), *logit = malloc(n * sizeof *logit);
    size_t *keys = malloc(n * sizeof *keys);
    for (size_t j = 0; j < n; j++) keys[j] = j;
    for (size_t b = 0; b < s->batch; b++)
        for (size_t h = 0; h < s->heads; h++)
            for (size_t i = 0; i < n; i++) {
                attend_one(o, s, b, h, i, keys, n, k, logit);
                for (size_t c = 0; c < hd; c++) out[(b * n + i) * dm + h * hd + c] = (float)o[c];
            }
    free(o), free(k), free(logit), free(keys);
}

/* Plain-C reference of LSH attention (Reformer), the oracle of tests/test_lsh.c;
 * see src/attention_lsh.h for the algorithm. Slow and literal, in double.
 * q and v are (batch, n, heads * head_dim) views: element (b, j, h, c) of q is
 * q[b * q_batch + j * q_row + h * head_dim + c]. Per-slab arrays are (batch, heads,
 * rounds, n): slab s = (b * heads + h) * rounds + r. */
#ifndef VKF_REFERENCE_LSH_H
#define VKF_REFERENCE_LSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ref_lsh_shape {
    size_t batch, heads, head_dim, n;
    size_t rounds, chunk, buckets;      /* buckets nb, resolved (1 or even >= 2) */
    float scale;
    const int32_t *lengths;             /* (batch): tokens j >= lengths[b] are padding; NULL: none */
    bool causal;
    const float *q;                     /* keys are the normalised queries */
    size_t q_row, q_batch;
    const float *v;
    size_t v_row, v_batch;
} ref_lsh_shape;

/* buckets (slabs, n) = argmax concat(k R_r, −k R_r) (ties: lowest index; nb for
 * padding, 0 when nb == 1), R_r the first nb / 2 columns of rot (rounds, head_dim,
 * rot_cols). margin (slabs, n), if not NULL: the gap between the largest and
 * second largest of the nb normalised projections (0 for padding or nb <= 2 ties). */
void ref_lsh_hash(int32_t *buckets, double *margin, const ref_lsh_shape *s, const float *rot, size_t rot_cols);

/* sorted (slabs, n) = positions stably sorted by bucket, per slab. */
void ref_lsh_sort(int32_t *sorted, const int32_t *buckets, size_t slabs, size_t n);

/* out (batch * n, heads * head_dim): stages 3 and 4 (chunked attention per round,
 * log-sum-exp combine) from a given sorted order (slabs, n). */
void ref_lsh_attend(float *out, const ref_lsh_shape *s, const int32_t *sorted);

/* out: the whole algorithm from the rotations. */
void ref_lsh_attention(float *out, const ref_lsh_shape *s, const float *rot, size_t rot_cols);

/* out: dense shared-QK attention (every allowed key; the self logit −1e5; keys j
 * >= lengths[b] and, causal, j > i masked; zeros for a query with no key). */
void ref_shared_qk_attention(float *out, const ref_lsh_shape *s);

#endif

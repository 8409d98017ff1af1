/* LSH attention as in Reformer (Kitaev et al., 2020): shared-QK self-attention
 * where each query sees only the keys that hash near it.
 *
 * Per batch element b and head h, with keys k_j = q_j / |q_j| (shared QK) and
 * logits scale · q_i · k_j:
 *  1. hash: in each of `rounds` rounds r, token j goes to bucket
 *     argmax concat(k_j R_r, −k_j R_r) of nb buckets, R_r a Gaussian (head_dim,
 *     nb / 2) rotation made on the host from a seed; padding tokens (j >= len[b])
 *     go to bucket nb;
 *  2. sort: the positions stably sorted by bucket (on the GPU);
 *  3. attend: the sorted order cut into chunks of `chunk`; a query in chunk c
 *     attends to the keys of chunks c − 1 and c, minus padding keys and (causal)
 *     later positions; its own key has logit −1e5, so it sees itself only when it
 *     has no other key. Gives o_r(i) and lse_r(i) per round;
 *  4. combine: out(i) = Σ_r exp(lse_r(i) − LSE(i)) o_r(i), LSE = logsumexp_r lse_r(i).
 *     A query with no key in any round gets zeros.
 * The C-sized chunks never produce a score matrix in memory; everything the plan
 * holds is linear in n. */
#ifndef VKF_ATTENTION_LSH_H
#define VKF_ATTENTION_LSH_H

#include "attention/attention.h"

typedef struct vkf_lsh_desc {
    uint32_t batch, heads, head_dim, n; /* head_dim 1..VKF_ATTENTION_MAX_HEAD_DIM; n tokens (queries = keys) */
    uint32_t rounds, chunk, buckets;    /* rounds H >= 1, chunk C >= 1; buckets 0: derived from n and chunk,
                                         * else 1 or an even number >= 2 */
    float scale;                        /* usually 1 / sqrt(head_dim) */
    vkf_attention_view q, v;            /* (batch, n, heads * head_dim) each; keys are the normalised queries */
    const vkf_tensor *key_lengths;      /* (batch) I32, borrowed, or NULL: all n; clamped to [0, n] */
    bool causal;                        /* key j allowed for query i only if j <= i */
    vkf_tensor *out;                    /* (batch * n, heads * head_dim) F32 packed, borrowed; may not alias inputs */
} vkf_lsh_desc;

typedef struct vkf_lsh_plan vkf_lsh_plan;

/* Buckets nb for n tokens: `buckets` if not 0, else max(2, 2 * ceil(n / (2 * chunk))). */
uint32_t vkf_lsh_bucket_count(uint32_t n, uint32_t chunk, uint32_t buckets);

/* Scratch and rotations for every n <= max_n with the batch, heads, head_dim,
 * rounds, chunk and buckets of `shape` (its other fields are ignored); makes the
 * rotations (rounds, head_dim, nb(max_n) / 2) from `seed` and uploads them (a
 * smaller n uses the first nb(n) / 2 columns). Fails with VKF_ERROR_UNSUPPORTED
 * where the device's shared memory cannot hold the sort's nb + 1 counters. */
vkf_status vkf_lsh_plan_create(vkf_context *ctx, const vkf_lsh_desc *shape, uint32_t max_n, uint64_t seed,
                               vkf_lsh_plan **out_plan);
/* NULL is a no-op. Wait for the plan's submissions to finish first. */
void vkf_lsh_plan_destroy(vkf_lsh_plan *plan);
/* Device bytes the plan holds (rotations and scratch). */
uint64_t vkf_lsh_plan_bytes(const vkf_lsh_plan *plan);

/* Records hash, sort, attend and combine into cmd (labels "lsh_hash", "lsh_sort",
 * "lsh_attend", "lsh_combine"). desc must match the plan's shape with n <= max_n.
 * The plan's scratch is reused by every call: the plan must outlive the cmd's
 * submissions, and two recorded calls on one plan run one after the other. */
vkf_status vkf_op_attention_lsh(vkf_cmd *cmd, vkf_lsh_plan *plan, const vkf_lsh_desc *desc);

/* For tests, after a submitted vkf_op_attention_lsh with n tokens: the first
 * batch * heads * rounds * n elements of buckets and sorted, as (batch, heads,
 * rounds, n) I32: buckets[s * n + j] is the bucket of token j in slab
 * s = (b * heads + h) * rounds + r (nb for padding), sorted[s * n + x] the x-th
 * position in the stable order by bucket. rotations: the host copy of the
 * uploaded rotations, (rounds, head_dim, rotation_cols), or NULL when nb == 1.
 * All borrowed from the plan. */
vkf_tensor *vkf_lsh_plan_buckets(const vkf_lsh_plan *plan);
vkf_tensor *vkf_lsh_plan_sorted(const vkf_lsh_plan *plan);
const float *vkf_lsh_plan_rotations(const vkf_lsh_plan *plan);
uint32_t vkf_lsh_plan_rotation_cols(const vkf_lsh_plan *plan);

/* Tests and tuning: replaces the plan's workgroup sizes (sort: invocations;
 * attend: invocations, keys per tile, query rows per invocation; any positive
 * values, powers of two or not), checked against the device's workgroup and
 * shared-memory limits (VKF_ERROR_UNSUPPORTED) before they are taken. */
vkf_status vkf_lsh_plan_set_tiles(vkf_lsh_plan *plan, uint32_t sort_wg, uint32_t attend_wg, uint32_t attend_bk,
                                  uint32_t attend_tq);

#endif /* VKF_ATTENTION_LSH_H */

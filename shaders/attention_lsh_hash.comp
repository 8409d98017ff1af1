#version 450
// LSH attention (Reformer), stage 1 of 4: the bucket of every token in every hash
// round, and the inverse length of every query (the keys are the normalised queries).
//   k_j = q_j / |q_j|  (0 for a zero query)
//   bucket_r(j) = argmax over concat(k_j R_r, −k_j R_r)   (nb values; ties: lowest index)
// R_r is (head_dim, nb / 2), the first nb / 2 columns of the round's rotation
// (Gaussian, made on the host), stored in blocks of COLS columns: rot4 is
// (rounds, ceil(rot_cols / COLS), head_dim, COLS / 4) vec4s, zero past rot_cols,
// so one step over head_dim loads a block's COLS values as COLS / 4 vec4s. nb == 1:
// every token is in bucket 0. Padding tokens (j >= len[b]) get bucket nb, so that
// the sort puts them last. The argmax is taken on q_j R_r: dividing by |q_j| > 0
// does not move it, and a zero query gives all zeros either way (bucket 0).
//
// One invocation per (b, h, r, j), j fastest. It walks the columns of R_r in
// blocks of COLS, so q_j is read nb / (2·COLS) times rather than nb / 2 (lavapipe,
// 8 heads of 64, n 4096, 32 columns: 8 scalar loads of R per step: 290 ms; two
// vec4 loads: see attention_lsh.c).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

const uint COLS = 8u;                   // projections accumulated at once

// Mirrored by vkf_push_lsh_hash in push_lsh.h.
layout(push_constant) uniform Push {
    uint heads, head_dim, n, rounds;
    uint half_buckets;                  // nb / 2 columns of R used; 0 when nb == 1
    uint rot_cols;                      // columns of the rotation tensor (before padding to COLS)
    uint buckets;                       // nb
    uint q_offset, q_row, q_batch;
    uint flags;                         // bit 0: key lengths given
    uint total;                         // batch * heads * rounds * n
} pc;

const uint FLAG_LENGTHS = 1u;

layout(set = 0, binding = 0) readonly buffer BufQ { float q[]; };          // (batch, n, heads * head_dim) view
layout(set = 0, binding = 1) readonly buffer BufRot { vec4 rot4[]; };     // (rounds, blocks, head_dim, COLS / 4)
layout(set = 0, binding = 2) readonly buffer BufLen { int lengths[]; };    // (batch) I32, or the dummy
layout(set = 0, binding = 3) writeonly buffer BufBucket { uint bucket[]; };    // (batch, heads, rounds, n)
layout(set = 0, binding = 4) writeonly buffer BufNorm { float inv_norm[]; };   // (batch, heads, n)

void main()
{
    const uint e = linear_workgroup() * WG + gl_LocalInvocationID.x;
    if (e >= pc.total) return;
    const uint j = e % pc.n, slab = e / pc.n;      // slab = (b * heads + h) * rounds + r
    const uint r = slab % pc.rounds, bh = slab / pc.rounds;
    const uint b = bh / pc.heads, h = bh % pc.heads;
    const uint qbase = pc.q_offset + b * pc.q_batch + j * pc.q_row + h * pc.head_dim;

    if (r == 0u) {
        float sum = 0.0;
        for (uint d = 0u; d < pc.head_dim; d++) sum += q[qbase + d] * q[qbase + d];
        inv_norm[bh * pc.n + j] = sum > 0.0 ? inversesqrt(sum) : 0.0;
    }

    uint len = pc.n;
    if ((pc.flags & FLAG_LENGTHS) != 0u) len = uint(clamp(lengths[b], 0, int(pc.n)));
    if (j >= len) {
        bucket[e] = pc.buckets;
        return;
    }
    // Largest and smallest projection, first index of each (strict comparisons).
    float hi = uintBitsToFloat(0xff800000u), lo = uintBitsToFloat(0x7f800000u);
    uint hi_at = 0u, lo_at = 0u;
    const uint blocks = (pc.rot_cols + COLS - 1u) / COLS;
    for (uint c0 = 0u; c0 < pc.half_buckets; c0 += COLS) {
        vec4 acc[COLS / 4u];
        [[unroll]] for (uint u = 0u; u < COLS / 4u; u++) acc[u] = vec4(0.0);
        uint at = ((r * blocks + c0 / COLS) * pc.head_dim) * (COLS / 4u);
        for (uint d = 0u; d < pc.head_dim; d++, at += COLS / 4u) {
            float qd = q[qbase + d];
            [[unroll]] for (uint u = 0u; u < COLS / 4u; u++) acc[u] += qd * rot4[at + u];
        }
        // Columns past half_buckets (the padding, or those of a larger n) are skipped.
        [[unroll]] for (uint u = 0u; u < COLS; u++) {
            float p = acc[u / 4u][u % 4u];
            if (c0 + u >= pc.half_buckets) break;
            if (p > hi) hi = p, hi_at = c0 + u;
            if (p < lo) lo = p, lo_at = c0 + u;
        }
    }
    // concat(p, −p): the positive half comes first, so it wins a tie.
    bucket[e] = pc.half_buckets == 0u ? 0u : hi >= -lo ? hi_at : pc.half_buckets + lo_at;
}

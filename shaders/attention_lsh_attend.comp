#version 450
// LSH attention (Reformer), stage 3 of 4: attention within chunks of the sorted
// order, one hash round at a time. Per (b, h, r), the sorted order is cut into
// chunks of CHUNK consecutive entries; a query in chunk c attends to the keys in
// chunks c − 1 and c (chunk 0: itself only; no wrap-around):
//   logit(i, j) = scale · q_i · k_j       k_j = q_j / |q_j| (shared QK)
//               = −1e5                    when j == i (a token sees itself only
//                                         when it has no other key)
//   masked: j >= len[b] (padding keys); causal and j > i (original positions)
//   o_r(i) = Σ_j softmax_j(logit) v_j,    lse_r(i) = log Σ_j exp(logit(i, j))
// o_r is written at the query's original position, lse_r in log2 units (−inf and
// o_r = 0 when the query has no key), for the combine stage.
//
// One workgroup per (b, h, r, chunk, block of BQ = WG·TQ queries of the chunk):
// invocation t owns the query rows t, t + WG, ... (TQ of them), their q (pre-scaled
// by scale · log2 e) and accumulators in registers, as the rows form of
// attention_fused.comp does, so each K/V value loaded from shared memory feeds TQ
// rows (CPU drivers load shared memory lane by lane; GPUs use TQ 1). The
// workgroup walks its (at most 2·CHUNK) keys in tiles of BK rows of normalised K
// and of V in shared memory with an online softmax; no score matrix reaches
// memory. Two barriers per tile.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;     // invocations
layout(constant_id = 1) const uint BK = 32;     // keys per shared-memory tile
layout(constant_id = 2) const uint D4 = 16;     // vec4s per row: ceil(head_dim / 4)
layout(constant_id = 3) const uint TQ = 1;      // query rows per invocation

const uint BQ = WG * TQ;                        // queries per workgroup

// Mirrored by vkf_push_lsh_attend in push_lsh.h.
layout(push_constant) uniform Push {
    uint heads, head_dim, n, rounds;
    uint chunk;                         // min(C, n)
    uint chunks;                        // ceil(n / chunk)
    uint q_blocks;                      // ceil(chunk / (WG * TQ))
    float scale;                        // softmax scale × log2(e)
    uint q_offset, q_row, q_batch;
    uint v_offset, v_row, v_batch;
    uint flags;                         // bit 0: key lengths given; bit 1: causal
    uint lse_offset;                    // start of the lse part of rounds_buf
    uint groups;                        // workgroups with work
} pc;

const uint FLAG_LENGTHS = 1u;
const uint FLAG_CAUSAL = 2u;

layout(set = 0, binding = 0) readonly buffer BufQ { float q[]; };          // (batch, n, heads * head_dim) view
layout(set = 0, binding = 1) readonly buffer BufV { float v[]; };
layout(set = 0, binding = 2) readonly buffer BufLen { int lengths[]; };    // (batch) I32, or the dummy
layout(set = 0, binding = 3) readonly buffer BufSorted { uint sorted[]; }; // (batch, heads, rounds, n)
layout(set = 0, binding = 4) readonly buffer BufNorm { float inv_norm[]; };    // (batch, heads, n)
// Round outputs (batch, heads, rounds, n, head_dim), then lse (batch, heads, rounds, n).
layout(set = 0, binding = 5) writeonly buffer BufRounds { float rounds_buf[]; };

shared vec4 k_tile[BK * D4];            // (BK, D4) normalised keys, zero past head_dim and the list
shared vec4 v_tile[BK * D4];
shared uint key_pos[BK];                // original position of each slot's key, or NO_KEY
shared float p_tile[BK * BQ];           // (BK, BQ) scores, each query row its own column

#define NEG_INF uintBitsToFloat(0xff800000u)
const uint NO_KEY = 0xffffffffu;
const float SELF_LOGIT = -1e5 * 1.4426950408889634;    // −1e5 in log2 units

void main()
{
    const uint wg = linear_workgroup();
    if (wg >= pc.groups) return;        // padding of the 2-D grid: whole workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint qblock = wg % pc.q_blocks;
    uint rest = wg / pc.q_blocks;
    const uint c = rest % pc.chunks;
    const uint slab = rest / pc.chunks;             // (b * heads + h) * rounds + r
    const uint bh = slab / pc.rounds;
    const uint b = bh / pc.heads, h = bh % pc.heads;
    const uint sbase = slab * pc.n;

    uint len = pc.n;
    if ((pc.flags & FLAG_LENGTHS) != 0u) len = uint(clamp(lengths[b], 0, int(pc.n)));
    const bool causal = (pc.flags & FLAG_CAUSAL) != 0u;

    // The keys: sorted entries [xa, xb), chunks c − 1 and c.
    const uint xa = c > 0u ? (c - 1u) * pc.chunk : 0u;
    const uint xb = min((c + 1u) * pc.chunk, pc.n);   // (c + 1) · chunk <= 2n < 2^32 (host check)

    const uint qbase = pc.q_offset + b * pc.q_batch + h * pc.head_dim;
    const uint vbase = pc.v_offset + b * pc.v_batch + h * pc.head_dim;
    const uint nbase = bh * pc.n;

    // This invocation's queries: sorted entries x of chunk c (none past the chunk or n).
    uint query[TQ];                     // original positions, NO_KEY where none
    vec4 q_reg[TQ * D4], acc[TQ * D4];
    float m[TQ], l[TQ];                 // running max (log2 units) and sum per row
    [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
        const uint in_chunk = qblock * BQ + tid + WG * qq;
        const uint x = c * pc.chunk + in_chunk;
        const bool has_query = in_chunk < pc.chunk && x < pc.n;
        const uint i = has_query ? sorted[sbase + x] : NO_KEY;
        query[qq] = i;
        m[qq] = NEG_INF;
        l[qq] = 0.0;
        [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
            vec4 val = vec4(0.0);
            if (has_query)
                for (uint u = 0u; u < 4u; u++)
                    if (c4 * 4u + u < pc.head_dim) val[u] = q[qbase + i * pc.q_row + c4 * 4u + u];
            q_reg[qq * D4 + c4] = val * pc.scale;
            acc[qq * D4 + c4] = vec4(0.0);
        }
    }

    for (uint x0 = xa; x0 < xb; x0 += BK) {    // uniform: the range depends on the workgroup only
        barrier();                      // the previous tile's readers are done
        for (uint e = tid; e < BK * D4; e += WG) {
            uint slot = e / D4, c4 = e % D4, xk = x0 + slot;
            vec4 kv = vec4(0.0), vv = vec4(0.0);
            uint j = NO_KEY;
            if (xk < xb) {
                uint jj = sorted[sbase + xk];
                if (jj < len) {         // padding tokens are never keys
                    j = jj;
                    float inv = inv_norm[nbase + j];
                    uint kb = qbase + j * pc.q_row + c4 * 4u, vb = vbase + j * pc.v_row + c4 * 4u;
                    for (uint u = 0u; u < 4u; u++)
                        if (c4 * 4u + u < pc.head_dim) {
                            kv[u] = q[kb + u] * inv;
                            vv[u] = v[vb + u];
                        }
                }
            }
            k_tile[e] = kv;
            v_tile[e] = vv;
            if (c4 == 0u) key_pos[slot] = j;
        }
        barrier();                      // the tile is loaded
        // Scores, masked, into this invocation's columns of p_tile (no barrier).
        float tile_max[TQ];
        [[unroll]] for (uint qq = 0u; qq < TQ; qq++) tile_max[qq] = NEG_INF;
        [[dont_unroll]] for (uint slot = 0u; slot < BK; slot++) {
            float s[TQ];
            [[unroll]] for (uint qq = 0u; qq < TQ; qq++) s[qq] = 0.0;
            [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
                vec4 kv = k_tile[slot * D4 + c4];
                [[unroll]] for (uint qq = 0u; qq < TQ; qq++) s[qq] += dot(q_reg[qq * D4 + c4], kv);
            }
            const uint j = key_pos[slot];
            [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
                const uint i = query[qq];
                bool ok = j != NO_KEY && (!causal || j <= i);
                float sm = !ok ? NEG_INF : j == i ? SELF_LOGIT : s[qq];
                p_tile[slot * BQ + tid + WG * qq] = sm;
                tile_max[qq] = max(tile_max[qq], sm);
            }
        }
        // Online softmax: rescale what was accumulated to the new max.
        [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
            float m_new = max(m[qq], tile_max[qq]);
            float alpha = m[qq] == NEG_INF ? 0.0 : exp2(m[qq] - m_new);   // m finite: m_new finite
            m[qq] = m_new;
            l[qq] *= alpha;
            [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) acc[qq * D4 + c4] *= alpha;
        }
        // acc += P · V over the tile.
        [[dont_unroll]] for (uint slot = 0u; slot < BK; slot++) {
            float p[TQ];
            [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
                float sm = p_tile[slot * BQ + tid + WG * qq];
                p[qq] = sm == NEG_INF ? 0.0 : exp2(sm - m[qq]);
                l[qq] += p[qq];
            }
            [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
                vec4 vv = v_tile[slot * D4 + c4];
                [[unroll]] for (uint qq = 0u; qq < TQ; qq++) acc[qq * D4 + c4] += p[qq] * vv;
            }
        }
    }
    [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
        const uint i = query[qq];
        if (i == NO_KEY) continue;
        const float inv = l[qq] > 0.0 ? 1.0 / l[qq] : 0.0;    // no key at all: zeros
        const uint obase = (sbase + i) * pc.head_dim;
        [[unroll]] for (uint c4 = 0u; c4 < D4; c4++)
            for (uint u = 0u; u < 4u; u++)
                if (c4 * 4u + u < pc.head_dim) rounds_buf[obase + c4 * 4u + u] = acc[qq * D4 + c4][u] * inv;
        rounds_buf[pc.lse_offset + sbase + i] = l[qq] > 0.0 ? m[qq] + log2(l[qq]) : NEG_INF;
    }
}

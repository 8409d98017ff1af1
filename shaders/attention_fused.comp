#version 450
// Fused attention for many queries at once (the forward pass), in the manner of
// FlashAttention:
//   out[b, i, h, :] = Σ_j softmax_j(scale · q[b, i, h, :]·k[b, j, h, :] + bias(h, i, j) + mask(b, i, j)) v[b, j, h, :]
// mask(b, i, j), the relative position bias and transient-global's global keys:
// see attention_pattern.glsl.
// A query with every key masked gets zeros.
//
// One workgroup per (batch·head, block of BQ queries). It walks its keys in tiles of
// BK rows of K and V held in shared memory, keeping for each query a running max m,
// a running sum l and an accumulator of head_dim values; when the max grows, l and
// the accumulator are rescaled by exp(m_old − m_new) (online softmax). The Lq × Lk
// scores never reach memory. Work is in log2 units: q is pre-scaled by
// scale · log2(e) and exp2 is used throughout.
//
// The keys a workgroup visits: a list (attention_pattern.glsl); key blocks the
// pattern or the causal mask exclude for every query of the block are never loaded.
// Within a tile the mask is evaluated exactly per (i, j).
//
// Two forms, by TD (invocations per query row):
//  - TD == 1, "rows" (CPU drivers): each invocation owns TQ whole query rows,
//    i0 + r + WG·qq, with their q and accumulators in registers, so each K/V value
//    loaded from shared memory feeds TQ rows. No exchange between invocations:
//    two barriers per tile (the tile's load). CPU drivers run the invocations of a
//    workgroup as SIMD lanes, pay for every barrier, and load shared memory lane by
//    lane, so fewer barriers and more reuse per load is what counts there.
//  - TD > 1, "split" (GPUs): TD invocations share one row (TQ == 1); invocation
//    (r, t) scores the tile's keys t, t + TD, ... and owns the output vec4s
//    t, t + TD, ...; row maxima and probabilities go through shared memory: four
//    barriers per tile, few registers per invocation.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;     // invocations, = BQ * TD / TQ
layout(constant_id = 1) const uint BQ = 64;     // queries per workgroup
layout(constant_id = 2) const uint BK = 32;     // keys per tile
layout(constant_id = 3) const uint TD = 1;      // invocations per query row
layout(constant_id = 4) const uint TQ = 1;      // query rows per invocation (TD == 1 only)
layout(constant_id = 5) const uint D4 = 16;     // vec4s per row of a tile: ceil(head_dim / 4)

const uint ACC4 = (D4 + TD - 1u) / TD;          // split form: output vec4s per invocation
const uint SPT = (BK + TD - 1u) / TD;           // split form: scores per invocation per tile
const uint SPLIT_ROWS = TD > 1u ? BQ : 1u;      // q goes through shared memory in the split form only
const uint ROW_REGS = TD > 1u ? 1u : TQ * D4;   // rows form: q and accumulators of TQ rows

#ifdef IO_F16
// Q, K, V and out stored as F16 (16-bit storage); scores, softmax and the
// accumulators stay fp32.
#extension GL_EXT_shader_16bit_storage : require
#define IO_T float16_t
#else
#define IO_T float
#endif
layout(set = 0, binding = 0) readonly buffer BufQ { IO_T q[]; };
layout(set = 0, binding = 1) readonly buffer BufK { IO_T k[]; };
layout(set = 0, binding = 2) readonly buffer BufV { IO_T v[]; };
layout(set = 0, binding = 3) readonly buffer BufLen { int lengths[]; };   // (batch) I32, or the dummy
#ifdef SPLIT_K
layout(set = 0, binding = 4) writeonly buffer BufOut { float outv[]; };   // split-K partials (attention_io.glsl)
#else
layout(set = 0, binding = 4) writeonly buffer BufOut { IO_T outv[]; };   // (batch * lq, heads * head_dim)
#endif
layout(set = 0, binding = 5) readonly buffer BufTable { int table[]; };   // BIGBIRD's table, or the dummy
layout(set = 0, binding = 6) readonly buffer BufBias { float rel_bias[]; };   // relative position bias, or the dummy
layout(set = 0, binding = 7) readonly buffer BufGlobal { IO_T gkv[]; };   // TGLOBAL's global keys and values, or the dummy

shared vec4 k_tile[BK * D4];            // (BK, D4): keys of the tile, zero past head_dim and the list
shared vec4 v_tile[BK * D4];
shared uint key_slot[BK];               // the key of each slot, see allowed()
shared uint slot_bits[BK];              // BIGBIRD: bit t set iff query block qa + t may see the slot's key
shared float p_tile[BQ * BK];           // scores, then probabilities: (BQ, BK) split; (BK, BQ) rows
shared vec4 q_tile[SPLIT_ROWS * D4];    // split form: (BQ, D4) pre-scaled queries
shared float row_part[SPLIT_ROWS * TD]; // split form: per-invocation partial max, then partial sum

#include "attention_pattern.glsl"
#include "attention_io.glsl"

// k_tile, v_tile, key_slot = list entries x0 .. x0 + BK - 1. Between barriers.
void load_tile(uint x0)
{
    for (uint e = gl_LocalInvocationID.x; e < BK * D4; e += WG) {
        uint slot = e / D4, c4 = e % D4, x = x0 + slot;
        vec4 kv = vec4(0.0), vv = vec4(0.0);
        uint word = NO_KEY, bits = 0u;
        uint j = x < n_keys ? key_of(x) : NO_KEY;
        if (is_global(j)) {     // TGLOBAL: a global key from gkv, inside the sequence's n_glob
            if ((j & NO_KEY) < n_glob) {
                word = j;
                uint gb = global_at(j & NO_KEY, c4 * 4u), inner = pc.heads * pc.head_dim;
                for (uint c = 0u; c < 4u; c++)
                    if (c4 * 4u + c < pc.head_dim) {
                        kv[c] = float(gkv[gb + c]);
                        vv[c] = float(gkv[gb + inner + c]);
                    }
            }
        } else if (j < len) {  // loads only inside the sequence, whatever a table says
            word = slot_word_of(j);
            if (c4 == 0u) bits = slot_bits_of(j);
            uint kb = kbase + j * pc.k_row + c4 * 4u, vb = vbase + j * pc.v_row + c4 * 4u;
            for (uint c = 0u; c < 4u; c++)
                if (c4 * 4u + c < pc.head_dim) {
                    kv[c] = float(k[kb + c]);
                    vv[c] = float(v[vb + c]);
                }
        }
        k_tile[e] = kv;
        v_tile[e] = vv;
        if (c4 == 0u) {
            key_slot[slot] = word;
            slot_bits[slot] = bits;
        }
    }
}

void rows_form()
{
    const uint r = gl_LocalInvocationID.x;
    vec4 q_reg[ROW_REGS], acc[ROW_REGS];    // (TQ, D4)
    float m[TQ], l[TQ];                     // running max (log2 units) and sum per row
    [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
        m[qq] = NEG_INF;
        l[qq] = 0.0;
        [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
            q_reg[qq * D4 + c4] = load_q(i0 + r + WG * qq, c4);
            acc[qq * D4 + c4] = vec4(0.0);
        }
    }
    for (uint x0 = 0u; x0 < n_keys; x0 += BK) {    // uniform: n_keys depends on the workgroup only
        barrier();                              // the previous tile's readers are done
        load_tile(x0);
        barrier();                              // the tile is loaded
        // Scores, masked, into this invocation's own entries of p_tile (no barrier).
        float tile_max[TQ];
        [[unroll]] for (uint qq = 0u; qq < TQ; qq++) tile_max[qq] = NEG_INF;
        [[dont_unroll]] for (uint slot = 0u; slot < BK; slot++) {
            float s[TQ];
            [[unroll]] for (uint qq = 0u; qq < TQ; qq++) s[qq] = 0.0;
            [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
                vec4 kv = k_tile[slot * D4 + c4];
                [[unroll]] for (uint qq = 0u; qq < TQ; qq++) s[qq] += dot(q_reg[qq * D4 + c4], kv);
            }
            uint word = key_slot[slot], bits = slot_bits[slot];
            [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
                uint i = i0 + r + WG * qq;
                float sm = allowed(i, word, bits, len) ? s[qq] + score_bias(i, word) : NEG_INF;
                p_tile[slot * BQ + r + WG * qq] = sm;
                tile_max[qq] = max(tile_max[qq], sm);
            }
        }
        // Online softmax: rescale what was accumulated to the new max.
        [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
            float m_new = max(m[qq], tile_max[qq]);
            float alpha = m[qq] == NEG_INF ? 0.0 : exp2(m[qq] - m_new);  // m finite: m_new finite
            m[qq] = m_new;
            l[qq] *= alpha;
            [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) acc[qq * D4 + c4] *= alpha;
        }
        // acc += P · V over the tile.
        [[dont_unroll]] for (uint slot = 0u; slot < BK; slot++) {
            float p[TQ];
            [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
                float s = p_tile[slot * BQ + r + WG * qq];
                p[qq] = s == NEG_INF ? 0.0 : exp2(s - m[qq]);
                l[qq] += p[qq];
            }
            [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) {
                vec4 vv = v_tile[slot * D4 + c4];
                [[unroll]] for (uint qq = 0u; qq < TQ; qq++) acc[qq * D4 + c4] += p[qq] * vv;
            }
        }
    }
    [[unroll]] for (uint qq = 0u; qq < TQ; qq++) {
        uint i = i0 + r + WG * qq;
        if (i >= pc.lq) continue;
        float inv = out_scale(l[qq]);                   // a fully masked row: zeros
        store_stats(i, m[qq], l[qq]);
        [[unroll]] for (uint c4 = 0u; c4 < D4; c4++) store_out(i, c4, acc[qq * D4 + c4] * inv);
    }
}

void split_form()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint r = tid / TD, t = tid % TD;
    const uint i = i0 + r;                  // past lq: computes nothing, takes part in the barriers
    for (uint e = tid; e < BQ * D4; e += WG) q_tile[e] = load_q(i0 + e / D4, e % D4);
    // (the barrier after the first tile's load makes q_tile visible)
    float m = NEG_INF;                      // running max of the row, log2 units
    float l = 0.0;                          // this invocation's part of the row's running sum
    vec4 acc[ACC4];                         // output vec4s t, t + TD, ...
    for (uint a = 0u; a < ACC4; a++) acc[a] = vec4(0.0);

    for (uint x0 = 0u; x0 < n_keys; x0 += BK) {    // uniform: n_keys depends on the workgroup only
        barrier();                          // the previous tile's readers are done
        load_tile(x0);
        barrier();                          // the tile is loaded
        // Scores of keys t, t + TD, ...: computed for every slot (the tile is zero
        // where masked), then masked, so the loop has no branches.
        float s_reg[SPT];
        float part_max = NEG_INF;
        for (uint u = 0u; u < SPT; u++) {
            uint slot = min(t + u * TD, BK - 1u);   // past BK (TD not dividing it): masked below
            float s = 0.0;
            for (uint c4 = 0u; c4 < D4; c4++) s += dot(q_tile[r * D4 + c4], k_tile[slot * D4 + c4]);
            s_reg[u] = t + u * TD < BK && allowed(i, key_slot[slot], slot_bits[slot], len)
                           ? s + score_bias(i, key_slot[slot]) : NEG_INF;
            part_max = max(part_max, s_reg[u]);
        }
        row_part[tid] = part_max;
        barrier();                          // every partial max of the row is written
        float tile_max = NEG_INF;
        for (uint u = 0u; u < TD; u++) tile_max = max(tile_max, row_part[r * TD + u]);
        // Online softmax: rescale what was accumulated to the new max.
        float m_new = max(m, tile_max);
        float alpha = m == NEG_INF ? 0.0 : exp2(m - m_new);   // m finite: m_new finite
        m = m_new;
        l *= alpha;
        for (uint a = 0u; a < ACC4; a++) acc[a] *= alpha;
        for (uint u = 0u; u < SPT; u++) {
            float p = s_reg[u] == NEG_INF ? 0.0 : exp2(s_reg[u] - m);
            l += p;
            uint slot = t + u * TD;
            if (slot < BK) p_tile[r * BK + slot] = p;
        }
        barrier();                          // every probability of the row is written
        // acc += P · V over the tile.
        for (uint slot = 0u; slot < BK; slot++) {
            float p = p_tile[r * BK + slot];
            for (uint a = 0u; a < ACC4; a++) {
                uint c4 = t + a * TD;
                if (c4 < D4) acc[a] += p * v_tile[slot * D4 + c4];
            }
        }
    }
    // The row's sum from its TD parts, then out = acc / l (zeros: fully masked row).
    row_part[tid] = l;                      // row_part was last read before the last tile's final barrier
    barrier();
    l = 0.0;
    for (uint u = 0u; u < TD; u++) l += row_part[r * TD + u];
    if (i >= pc.lq) return;
    const float inv = out_scale(l);
    if (t == 0u) store_stats(i, m, l);
    for (uint a = 0u; a < ACC4; a++) {
        uint c4 = t + a * TD;
        if (c4 < D4) store_out(i, c4, acc[a] * inv);
    }
}

void main()
{
    const uint wg = linear_workgroup();
    if (wg >= pc.q_blocks * pc.batch * pc.heads) return;   // padding of the 2-D grid: whole workgroup
    setup_workgroup(wg);
    if (TD == 1u) rows_form();
    else split_form();
}

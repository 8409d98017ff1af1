#version 450
// Fused attention for many queries at once (the forward pass), in the manner of
// FlashAttention:
//   out[b, i, h, :] = Σ_j softmax_j(scale · q[b, i, h, :]·k[b, j, h, :] + mask(b, i, j)) v[b, j, h, :]
// mask(b, i, j) is 0 where key j is allowed for query i and -inf elsewhere:
//   j < len[b]                      (key lengths, when given)
//   j ≤ i + causal_offset           (causal)
//   |i − j| ≤ W                     (pattern LOCAL:W)
//   |i − j| ≤ W or j mod S = S − 1  (pattern STRIDED:W:S)
//   block i/B sees block j/B         (pattern BIGBIRD:B:G:R: neighbours, G global
//                                     blocks, R random blocks from the table)
// A query with every key masked gets zeros.
//
// One workgroup per (batch·head, block of BQ queries). It walks its keys in tiles of
// BK rows of K and V held in shared memory, keeping for each query a running max m,
// a running sum l and an accumulator of head_dim values; when the max grows, l and
// the accumulator are rescaled by exp(m_old − m_new) (online softmax). The Lq × Lk
// scores never reach memory. Work is in log2 units: q is pre-scaled by
// scale · log2(e) and exp2 is used throughout.
//
// The keys a workgroup visits are a list: first the contiguous range any query of
// the block can be allowed (every key; [i0 − W, i1 + W] for the patterns; cut at the
// causal limit of the block's last query and at the key length), then, for STRIDED,
// the stride keys S−1, 2S−1, ... outside that range, gathered into the same tiles.
// Key blocks the pattern or the causal mask exclude for every query of the block
// are never loaded. For BIGBIRD the host lists each workgroup's key blocks in the
// table (every block any query of the workgroup may see, once, in order); the
// tile load works out, per key, a bit for each query block of the workgroup
// (at most 32) saying whether that block may see it.
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

// Mirrored by vkf_push_attention_fused in push.h. Element (b, r, h, c) of Q is
// q[q_offset + b * q_batch + r * q_row + h * head_dim + c]; likewise K, V. out is
// (batch * lq, heads * head_dim) packed.
layout(push_constant) uniform Push {
    uint batch, heads, head_dim;
    uint lq, lk;
    float scale;                    // softmax scale × log2(e)
    uint q_offset, q_row, q_batch;
    uint k_offset, k_row, k_batch;
    uint v_offset, v_row, v_batch;
    uint flags;                     // bit 0: key lengths given; bit 1: causal
    uint causal_offset;             // at most lk (the host clamps it)
    uint pattern;                   // 0 dense, 1 local, 2 strided
    uint window, stride;            // W (at most max(lq, lk)), S (>= 1)
    uint q_blocks;                  // ceil(lq / BQ)
    uint bb_block, bb_globals, bb_random;   // BIGBIRD: B, G, R
    uint bb_offsets, bb_lists;      // table: random blocks (ceil(lq / B), R) at 0, then each
                                    // workgroup's first list entry at bb_offsets + w, lists at bb_lists
    uint table_len;                 // elements in the table (>= 1); every read is clamped to it
} pc;

const uint FLAG_LENGTHS = 1u;
const uint FLAG_CAUSAL = 2u;
const uint PATTERN_DENSE = 0u;
const uint PATTERN_STRIDED = 2u;
const uint PATTERN_BIGBIRD = 3u;

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
layout(set = 0, binding = 4) writeonly buffer BufOut { IO_T outv[]; };   // (batch * lq, heads * head_dim)
layout(set = 0, binding = 5) readonly buffer BufTable { int table[]; };   // BIGBIRD's table, or the dummy

shared vec4 k_tile[BK * D4];            // (BK, D4): keys of the tile, zero past head_dim and the list
shared vec4 v_tile[BK * D4];
shared uint key_slot[BK];               // the key of each slot, see allowed()
shared uint slot_bits[BK];              // BIGBIRD: bit t set iff query block qa + t may see the slot's key
shared float p_tile[BQ * BK];           // scores, then probabilities: (BQ, BK) split; (BK, BQ) rows
shared vec4 q_tile[SPLIT_ROWS * D4];    // split form: (BQ, D4) pre-scaled queries
shared float row_part[SPLIT_ROWS * TD]; // split form: per-invocation partial max, then partial sum

#define NEG_INF uintBitsToFloat(0xff800000u)

// A slot of the key tile: bits 0-30 the key j, bit 31 set iff j mod S = S - 1
// (worked out once per tile, not per query). Past the key list: NO_KEY, which
// every key length excludes (lk < 2^31).
const uint NO_KEY = 0x7fffffffu;
const uint STRIDE_KEY = 0x80000000u;

// The workgroup's (b, h, query block) and its key list: [ja, jb), then the stride
// keys s·S + S − 1 for s in [0, s_lo) ∪ [s_hi, jend / S); BIGBIRD: the blocks of
// table entries list0 .. list0 + n_keys / B - 1. qa: BIGBIRD block of query i0.
uint b, h, i0, len, ja, n1, s_lo, s_hi, n_keys, list0, qa, span;
uint qbase, kbase, vbase, obase0;

// The exact mask: may query i (< lq or not) see the key of this slot? No branches.
bool allowed(uint i, uint slot_word, uint bits, uint len)
{
    uint j = slot_word & NO_KEY;
    uint dist = i > j ? i - j : j - i;
    uint t = pc.pattern == PATTERN_BIGBIRD ? min(i / pc.bb_block - qa, 31u) : 0u;
    bool in_pattern = pc.pattern == PATTERN_DENSE ||
                      (pc.pattern == PATTERN_BIGBIRD ? ((bits >> t) & 1u) != 0u
                                                     : dist <= pc.window ||
                                                       (pc.pattern == PATTERN_STRIDED && (slot_word & STRIDE_KEY) != 0u));
    bool before_limit = (pc.flags & FLAG_CAUSAL) == 0u || j <= i + pc.causal_offset;
    return i < pc.lq && j < len && before_limit && in_pattern;
}

int table_at(uint index)
{
    return table[min(index, pc.table_len - 1u)];
}

// BIGBIRD: may query block qb see key block kb?
bool block_allowed(uint qb, uint kb)
{
    if (qb < pc.bb_globals || kb < pc.bb_globals || (qb > kb ? qb - kb : kb - qb) <= 1u) return true;
    for (uint t = 0u; t < pc.bb_random; t++)
        if (table_at(qb * pc.bb_random + t) == int(kb)) return true;
    return false;
}

// The key of list entry x < n_keys (for BIGBIRD possibly past the keys: masked).
uint key_of(uint x)
{
    if (pc.pattern == PATTERN_BIGBIRD) return uint(table_at(list0 + x / pc.bb_block)) * pc.bb_block + x % pc.bb_block;
    if (x < n1) return ja + x;
    uint y = x - n1;
    return (y < s_lo ? y : s_hi + (y - s_lo)) * pc.stride + pc.stride - 1u;
}

// k_tile, v_tile, key_slot = list entries x0 .. x0 + BK - 1. Between barriers.
void load_tile(uint x0)
{
    for (uint e = gl_LocalInvocationID.x; e < BK * D4; e += WG) {
        uint slot = e / D4, c4 = e % D4, x = x0 + slot;
        vec4 kv = vec4(0.0), vv = vec4(0.0);
        uint word = NO_KEY, bits = 0u;
        uint j = x < n_keys ? key_of(x) : NO_KEY;
        if (j < len) {  // loads only inside the sequence, whatever a table says
            word = j | (pc.pattern == PATTERN_STRIDED && j % pc.stride == pc.stride - 1u ? STRIDE_KEY : 0u);
            if (pc.pattern == PATTERN_BIGBIRD && c4 == 0u)
                for (uint t = 0u; t < span; t++)
                    bits |= block_allowed(qa + t, j / pc.bb_block) ? 1u << t : 0u;
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

// Row i of q, pre-scaled, zero-padded: vec4 c4.
vec4 load_q(uint i, uint c4)
{
    vec4 val = vec4(0.0);
    if (i < pc.lq)
        for (uint c = 0u; c < 4u; c++)
            if (c4 * 4u + c < pc.head_dim) val[c] = float(q[qbase + i * pc.q_row + c4 * 4u + c]);
    return val * pc.scale;
}

// out[i, c4 vec4] = o, clipped to head_dim.
void store_out(uint i, uint c4, vec4 o)
{
    uint base = obase0 + i * (pc.heads * pc.head_dim) + c4 * 4u;
    for (uint c = 0u; c < 4u; c++)
        if (c4 * 4u + c < pc.head_dim) outv[base + c] = IO_T(o[c]);
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
                float sm = allowed(i0 + r + WG * qq, word, bits, len) ? s[qq] : NEG_INF;
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
        float inv = l[qq] > 0.0 ? 1.0 / l[qq] : 0.0;    // a fully masked row: zeros
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
            s_reg[u] = t + u * TD < BK && allowed(i, key_slot[slot], slot_bits[slot], len) ? s : NEG_INF;
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
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    for (uint a = 0u; a < ACC4; a++) {
        uint c4 = t + a * TD;
        if (c4 < D4) store_out(i, c4, acc[a] * inv);
    }
}

void main()
{
    const uint wg = linear_workgroup();
    if (wg >= pc.q_blocks * pc.batch * pc.heads) return;   // padding of the 2-D grid: whole workgroup
    const uint qblock = wg % pc.q_blocks, bh = wg / pc.q_blocks;
    b = bh / pc.heads;
    h = bh % pc.heads;
    i0 = qblock * BQ;
    const uint i_last = min(i0 + BQ, pc.lq) - 1u;

    len = pc.lk;
    if ((pc.flags & FLAG_LENGTHS) != 0u) len = uint(clamp(lengths[b], 0, int(pc.lk)));
    uint jend = len;
    if ((pc.flags & FLAG_CAUSAL) != 0u) jend = min(jend, i_last + pc.causal_offset + 1u);
    ja = 0u;
    uint jb = jend;
    if (pc.pattern != PATTERN_DENSE) {
        ja = min(i0 > pc.window ? i0 - pc.window : 0u, jend);
        jb = max(min(jend, i_last + pc.window + 1u), ja);
    }
    n1 = jb - ja;
    s_lo = 0u;
    s_hi = 0u;
    uint n2 = 0u;
    if (pc.pattern == PATTERN_STRIDED) {
        s_lo = ja / pc.stride;              // stride keys below ja
        s_hi = jb / pc.stride;              // first stride key at or past jb
        n2 = s_lo + (jend / pc.stride - s_hi);
    }
    n_keys = n1 + n2;
    if (pc.pattern == PATTERN_BIGBIRD) {
        qa = i0 / pc.bb_block;
        span = min(i_last / pc.bb_block - qa + 1u, 32u);
        list0 = uint(table_at(pc.bb_offsets + qblock));
        uint list1 = uint(table_at(pc.bb_offsets + qblock + 1u));
        n_keys = list1 > list0 && list1 - list0 <= (pc.lk + pc.bb_block - 1u) / pc.bb_block ? (list1 - list0) * pc.bb_block : 0u;
        list0 += pc.bb_lists;
    }

    qbase = pc.q_offset + b * pc.q_batch + h * pc.head_dim;
    kbase = pc.k_offset + b * pc.k_batch + h * pc.head_dim;
    vbase = pc.v_offset + b * pc.v_batch + h * pc.head_dim;
    obase0 = b * pc.lq * (pc.heads * pc.head_dim) + h * pc.head_dim;

    if (TD == 1u) rows_form();
    else split_form();
}

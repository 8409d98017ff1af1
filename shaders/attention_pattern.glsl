// The masks and key lists of the fused attention kernels (attention_fused.comp,
// attention_flash.comp): the push constants, the exact mask allowed(),
// BigBird's table, the list of keys a workgroup of BQ queries visits, the
// relative position bias (T5) and transient-global's global keys (LongT5).
// The including shader defines BQ and BK (constants) and declares the buffers
// `lengths` (binding 3), `table` (binding 5), `rel_bias` (binding 6) and `gkv`
// (binding 7) before including this file.
//
// mask(b, i, j) is 0 where key j is allowed for query i and -inf elsewhere:
//   j < len[b]                      (key lengths, when given)
//   j ≤ i + causal_offset           (causal)
//   |i − j| ≤ W                     (pattern LOCAL:W)
//   |i − j| ≤ W or j mod S = S − 1  (pattern STRIDED:W:S)
//   block i/B sees block j/B         (pattern BIGBIRD:B:G:R: neighbours, G global
//                                     blocks, R random blocks from the table)
//   |i − j| ≤ W                     (pattern TGLOBAL:W:G, LongT5's transient-global:
//                                     the local window, plus global keys)
// TGLOBAL adds n_glob = min(len / G, global_max) global keys after the sequence's
// (gkv rows, one summary of each block of G tokens, made by the caller): every
// query i < lq sees every one of them.
//
// Relative position bias (flag 4, T5): the score of query i and key j gets
// rel_bias[h][clamp(j − i, −R, R) + R] added (R = rel_radius; the host's table
// holds the bias of each relative distance, past R constant), and a global key g
// (flag 8) rel_bias[global table][h][clamp(g − blk(i), −Rg, Rg) + Rg], blk(i) =
// min(i / G, n_glob − 1), the global table following the local one (or at 0).
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
    uint rel_radius;                // R of the local bias table (flag 4)
    uint global_block;              // TGLOBAL: G, tokens per global block (>= 1)
    uint global_max;                // TGLOBAL: rows of gkv per sequence
    uint global_radius;             // Rg of the global bias table (flag 8)
} pc;

const uint FLAG_LENGTHS = 1u;
const uint FLAG_CAUSAL = 2u;
const uint FLAG_REL_BIAS = 4u;
const uint FLAG_GLOBAL_BIAS = 8u;
const uint PATTERN_DENSE = 0u;
const uint PATTERN_STRIDED = 2u;
const uint PATTERN_BIGBIRD = 3u;
const uint PATTERN_TGLOBAL = 4u;
const float LOG2E = 1.4426950408889634;

#define NEG_INF uintBitsToFloat(0xff800000u)

// A slot of the key tile: bits 0-30 the key j, bit 31 set iff j mod S = S - 1
// (STRIDED; worked out once per tile, not per query), or, for TGLOBAL, iff the
// slot holds global key g (bits 0-30). Past the key list: NO_KEY, which every key
// length excludes (lk < 2^31).
const uint NO_KEY = 0x7fffffffu;
const uint STRIDE_KEY = 0x80000000u;
const uint GLOBAL_KEY = 0x80000000u;

// The workgroup's (b, h, query block) and its key list: [ja, jb), then the stride
// keys s·S + S − 1 for s in [0, s_lo) ∪ [s_hi, jend / S); BIGBIRD: the blocks of
// table entries list0 .. list0 + n_keys / B - 1. qa: BIGBIRD block of query i0.
uint b, h, i0, len, ja, n1, s_lo, s_hi, n_keys, list0, qa, span;
uint qbase, kbase, vbase, obase0;
uint n_glob, gbase;                     // TGLOBAL: global keys of the sequence; gkv's first element of (b, h)
#ifdef SPLIT_K
// Split-K (flash decoding, -DSPLIT_K): workgroup z of gl_NumWorkGroups.z visits
// list entries x_base .. x_base + n_keys - 1 only, a run of whole BK tiles.
uint x_base;
#else
const uint x_base = 0u;
#endif

// Whether a slot word names a global key (TGLOBAL).
bool is_global(uint slot_word)
{
    return pc.pattern == PATTERN_TGLOBAL && slot_word != NO_KEY && (slot_word & GLOBAL_KEY) != 0u;
}

// The exact mask: may query i (< lq or not) see the key of this slot? No branches.
bool allowed(uint i, uint slot_word, uint bits, uint len)
{
    if (is_global(slot_word)) return i < pc.lq && (slot_word & NO_KEY) < n_glob;
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

// The bias of query i's score with the slot's key, in log2 units (0 without one).
float score_bias(uint i, uint slot_word)
{
    bool global = is_global(slot_word);
    if ((pc.flags & (global ? FLAG_GLOBAL_BIAS : FLAG_REL_BIAS)) == 0u) return 0.0;
    int rel, radius;
    uint base;
    if (global) {
        radius = int(pc.global_radius);
        int blk = min(int(i / pc.global_block), int(n_glob) - 1);
        rel = int(slot_word & NO_KEY) - blk;
        base = ((pc.flags & FLAG_REL_BIAS) != 0u ? pc.heads * (2u * pc.rel_radius + 1u) : 0u) +
               h * (2u * pc.global_radius + 1u);
    } else {
        radius = int(pc.rel_radius);
        rel = int(slot_word & NO_KEY) - int(i);
        base = h * (2u * pc.rel_radius + 1u);
    }
    return rel_bias[base + uint(clamp(rel, -radius, radius) + radius)] * LOG2E;
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

// The key of list entry x < n_keys (for BIGBIRD possibly past the keys: masked;
// for TGLOBAL past the window: GLOBAL_KEY | g).
uint key_of(uint x_in)
{
    const uint x = x_in + x_base;
    if (pc.pattern == PATTERN_BIGBIRD) return uint(table_at(list0 + x / pc.bb_block)) * pc.bb_block + x % pc.bb_block;
    if (x < n1) return ja + x;
    if (pc.pattern == PATTERN_TGLOBAL) return GLOBAL_KEY | (x - n1);
    uint y = x - n1;
    return (y < s_lo ? y : s_hi + (y - s_lo)) * pc.stride + pc.stride - 1u;
}

// The slot word of key j < len (see NO_KEY) and, for BIGBIRD, its bits.
uint slot_word_of(uint j)
{
    return j | (pc.pattern == PATTERN_STRIDED && j % pc.stride == pc.stride - 1u ? STRIDE_KEY : 0u);
}
uint slot_bits_of(uint j)
{
    uint bits = 0u;
    if (pc.pattern == PATTERN_BIGBIRD)
        for (uint t = 0u; t < span; t++)
            bits |= block_allowed(qa + t, j / pc.bb_block) ? 1u << t : 0u;
    return bits;
}

// Sets the globals above for workgroup wg (< q_blocks · batch · heads).
void setup_workgroup(uint wg)
{
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
    n_glob = 0u;
    if (pc.pattern == PATTERN_TGLOBAL) {
        n_glob = min(len / pc.global_block, pc.global_max);
        n_keys = n1 + n_glob;
    }
    if (pc.pattern == PATTERN_BIGBIRD) {
        qa = i0 / pc.bb_block;
        span = min(i_last / pc.bb_block - qa + 1u, 32u);
        list0 = uint(table_at(pc.bb_offsets + qblock));
        uint list1 = uint(table_at(pc.bb_offsets + qblock + 1u));
        n_keys = list1 > list0 && list1 - list0 <= (pc.lk + pc.bb_block - 1u) / pc.bb_block ? (list1 - list0) * pc.bb_block : 0u;
        list0 += pc.bb_lists;
    }

#ifdef SPLIT_K
    // this split's run of the list: whole tiles, the last split's possibly empty
    const uint per_split = (n_keys + gl_NumWorkGroups.z - 1u) / gl_NumWorkGroups.z;
    const uint chunk = (per_split + BK - 1u) / BK * BK;
    x_base = min(gl_WorkGroupID.z * chunk, n_keys);
    n_keys = min(n_keys - x_base, chunk);
#endif

    qbase = pc.q_offset + b * pc.q_batch + h * pc.head_dim;
    kbase = pc.k_offset + b * pc.k_batch + h * pc.head_dim;
    vbase = pc.v_offset + b * pc.v_batch + h * pc.head_dim;
    obase0 = b * pc.lq * (pc.heads * pc.head_dim) + h * pc.head_dim;
    gbase = b * pc.global_max * 2u * (pc.heads * pc.head_dim) + h * pc.head_dim;
}

// Element c of global key g's key (value: + heads * head_dim) in gkv, (batch,
// global_max, 2 heads * head_dim) rows of [keys values].
uint global_at(uint g, uint c)
{
    return gbase + g * 2u * (pc.heads * pc.head_dim) + c;
}

#version 450
// Attention for one query row per (sequence, head), as in a decode step:
//   out[b, h] = softmax(scale * q[b, h] · K[b, h, j]ᵀ + bias(h, j - i), j < n_b) · V[b, h, j]
// where n_b = state[0] + 1 (self-attention over the KV cache, the current
// position read from GPU memory; length_from_state 1), n_b = state[b] + 1 (each
// row its own position: length_from_state 2, per-row positions; a negative one, a
// free slot, attends to no key and writes zeros) or n_b = lengths[b]
// (cross-attention over the encoder memory of each source). bias: T5's relative
// position bias (rel_bias 1), rel_table[h][clamp(j - i, -R, R) + R] with i the
// query's position (state[0], or state[b] per row).
// Three forms, chosen by specialization:
//  - split (ROWS 0, CHUNK 0, GPUs with few keys): one workgroup per (b, h), its
//    invocations sharing the keys; the scores go to a scratch row so keys of any
//    count fit;
//  - split-K (ROWS 0, CHUNK > 0, GPUs; flash decoding): SPLITS workgroups per
//    (b, h), workgroup s taking keys [s·CHUNK, (s+1)·CHUNK) ∩ [0, n): scores in
//    shared memory, then its partial (m, l, o[head_dim]): the chunk's max score, the
//    sum of exp(score − m) and the unnormalised output, into the scratch row of (b, h)
//    at s·(head_dim + 2) (the host makes SPLITS·(head_dim + 2) <= max_keys);
//    attention_decode_reduce.comp combines them. A chunk past n writes m = −inf,
//    l = 0, so the key count may change between submissions (state);
//  - rows (ROWS 1, CPU drivers): one invocation per (b, h), WG of them per
//    workgroup, each with its query and accumulator in registers (HD = head_dim
//    elements) and an online softmax over the keys: no barrier, no scratch, and
//    WG times fewer workgroups, which is what a CPU driver pays for. Its head_dim
//    loops are unrolled: llvmpipe (Mesa 22.3) cuts short every loop of an
//    invocation after 65535 iterations in all, so only the key loop may count,
//    and the host bounds the keys (VKF_DECODE_ROWS_MAX_ITERATIONS in ops.c).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "act.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint ROWS = 0;    // 1: the rows form
layout(constant_id = 2) const uint HD = 1;      // rows and split-K forms: head_dim
layout(constant_id = 3) const uint CHUNK = 0;   // split-K form: keys per workgroup (0: another form)
layout(constant_id = 4) const uint SPLITS = 1;  // split-K form: workgroups per (b, h)
#include "reduce.glsl"

// Mirrored by vkf_push_attention_decode in push.h. Element (b, j, h, c) of K is
// k[k_offset + b * k_batch + j * k_row + h * head_dim + c]; likewise q (j = 0), v, out.
layout(push_constant) uniform Push {
    uint heads, head_dim;
    uint length_from_state;         // 1: n = state[0] + 1; 2: n = state[b] + 1; 0: n = lengths[b]
    float scale;
    uint q_offset, q_batch;
    uint k_offset, k_row, k_batch;
    uint v_offset, v_row, v_batch;
    uint out_batch;                 // out row of b starts at b * out_batch
    uint max_keys;                  // scratch row length
    uint pattern;                   // 0 dense, 1 local:W, 2 strided:W:S, 3 bigbird:B:G:R (query row = the position)
    uint window, stride;
    uint bb_block, bb_globals, bb_random;   // bigbird's B, G, R
    uint random_len;                // elements of the random-block table (>= 1); reads are clamped to it
    uint kv_div;                    // K and V of row b: those of b / kv_div (beams sharing a source's keys)
    uint rows;                      // batch * heads (the rows form's bound)
    uint indexed;                   // 1: key j of row b lives in row row_index[b * max_keys + j] (beam search)
    uint rel_bias;                  // 1: add rel_table's bias (self-attention, length_from_state)
    uint rel_radius;                // R
} pc;

layout(set = 0, binding = 0) readonly buffer BufQ { ACT_T q[]; };
layout(set = 0, binding = 1) readonly buffer BufK { ACT_T k[]; };
layout(set = 0, binding = 2) readonly buffer BufV { ACT_T v[]; };
layout(set = 0, binding = 3) readonly buffer BufLen { int lengths[]; };   // (batch / kv_div), state (1) or (batch)
layout(set = 0, binding = 4) buffer BufScratch { float scores[]; };       // (batch * heads, max_keys)
layout(set = 0, binding = 5) writeonly buffer BufOut { ACT_T outv[]; };
layout(set = 0, binding = 6) readonly buffer BufRandom { int random_blocks[]; };  // (query blocks, R) or the dummy
layout(set = 0, binding = 7) readonly buffer BufRowIndex { int row_index[]; };    // (batch, max_keys) or the dummy
layout(set = 0, binding = 8) readonly buffer BufBias { float rel_table[]; };      // (heads, 2 R + 1) or the dummy

// The relative position bias of query position i and key j for head h (0 without one).
float score_bias(uint h, uint i, uint j)
{
    if (pc.rel_bias == 0u) return 0.0;
    int R = int(pc.rel_radius);
    return rel_table[h * (2u * pc.rel_radius + 1u) + uint(clamp(int(j) - int(i), -R, R) + R)];
}

// The first element of key (and value) j of row b for head h: its row is b's own
// (b / kv_div), or with `indexed` the row that holds b's position j (beam search:
// a beam's history lives in the rows its ancestors had; clamped to the batch).
uint kv_row(uint b, uint j)
{
    if (pc.indexed == 0u) return b / pc.kv_div;
    return uint(clamp(row_index[b * pc.max_keys + j], 0, int(pc.rows / pc.heads) - 1));
}

#define NEG_INF uintBitsToFloat(0xff800000u)

// Row b's key count: its position + 1 (self-attention: one position for every row,
// or each row its own), or its source's length; clamped to 0..max_keys.
uint key_count(uint b)
{
    int n = pc.length_from_state == 0u ? lengths[b / pc.kv_div]
                                       : lengths[pc.length_from_state == 2u ? b : 0u] + 1;
    return uint(clamp(n, 0, int(pc.max_keys)));
}

// Row b's query position (self-attention: the patterns and the bias).
uint query_position(uint b)
{
    return uint(max(lengths[pc.length_from_state == 2u ? b : 0u], 0));
}

// bigbird: may the query in block qb see key block kb?
bool block_allowed(uint qb, uint kb)
{
    if (qb < pc.bb_globals || kb < pc.bb_globals || (qb > kb ? qb - kb : kb - qb) <= 1u) return true;
    for (uint t = 0u; t < pc.bb_random; t++)
        if (random_blocks[min(qb * pc.bb_random + t, pc.random_len - 1u)] == int(kb)) return true;
    return false;
}

// Whether query row i may see key j under the pattern.
bool key_allowed(uint i, uint j)
{
    bool near = (i > j ? i - j : j - i) <= pc.window;
    return !((pc.pattern == 1u && !near) || (pc.pattern == 2u && !near && j % pc.stride != pc.stride - 1u) ||
             (pc.pattern == 3u && !block_allowed(i / pc.bb_block, j / pc.bb_block)));
}

void rows_main()
{
    const uint bh = linear_workgroup() * WG + gl_LocalInvocationID.x;
    if (bh >= pc.rows) return;
    const uint b = bh / pc.heads, h = bh % pc.heads;
    const uint n = key_count(b);
    const uint qb = pc.q_offset + b * pc.q_batch + h * HD;
    const uint kb = pc.k_offset + h * HD, vb = pc.v_offset + h * HD;
    const uint i = query_position(b);
    float qv[HD], acc[HD];
    [[unroll]] for (uint c = 0u; c < HD; c++) qv[c] = float(q[qb + c]), acc[c] = 0.0;
    float m = NEG_INF, l = 0.0;
    for (uint j = 0u; j < n; j++) {
        if (pc.pattern != 0u && !key_allowed(i, j)) continue;
        const uint row = kv_row(b, j);
        const uint kr = kb + row * pc.k_batch + j * pc.k_row, vr = vb + row * pc.v_batch + j * pc.v_row;
        float s = 0.0;
        [[unroll]] for (uint c = 0u; c < HD; c++) s += qv[c] * float(k[kr + c]);
        s = s * pc.scale + score_bias(h, i, j);
        const float mn = max(m, s), corr = exp(m - mn), p = exp(s - mn);
        l = l * corr + p;
        [[unroll]] for (uint c = 0u; c < HD; c++) acc[c] = acc[c] * corr + p * float(v[vr + c]);
        m = mn;
    }
    const float inv = l > 0.0 ? 1.0 / l : 0.0;
    const uint ob = b * pc.out_batch + h * HD;
    [[unroll]] for (uint c = 0u; c < HD; c++) outv[ob + c] = ACT_T(acc[c] * inv);
}

shared float chunk_p[CHUNK > 0u ? CHUNK : 1u];     // split-K: the chunk's scores, then exp(score − m)
shared float chunk_q[CHUNK > 0u ? HD : 1u];        // split-K: the query
shared float chunk_o[CHUNK > 0u ? WG : 1u];        // split-K: per-group sums of the output

void split_k_main()
{
    const uint w = linear_workgroup();
    const uint bh = w / SPLITS, s = w % SPLITS;
    if (bh >= pc.rows) return;          // padding of the 2-D grid: whole workgroup
    const uint b = bh / pc.heads, h = bh % pc.heads, tid = gl_LocalInvocationID.x;
    const uint n = key_count(b);
    const uint j0 = s * CHUNK, j1 = min(n, j0 + CHUNK);     // j0 >= j1: an empty chunk
    const uint qb = pc.q_offset + b * pc.q_batch + h * HD;
    const uint kb = pc.k_offset + h * HD, vb = pc.v_offset + h * HD;
    const uint i = query_position(b);           // the query's row for the patterns and the bias
    for (uint c = tid; c < HD; c += WG) chunk_q[c] = float(q[qb + c]);
    barrier();

    float m = NEG_INF;
    for (uint j = j0 + tid; j < j1; j += WG) {
        float sc = NEG_INF;
        if (pc.pattern == 0u || key_allowed(i, j)) {
            const uint kr = kb + kv_row(b, j) * pc.k_batch + j * pc.k_row;
            float dot = 0.0;
            for (uint c = 0u; c < HD; c++) dot += chunk_q[c] * float(k[kr + c]);
            sc = dot * pc.scale + score_bias(h, i, j);
        }
        chunk_p[j - j0] = sc;
        m = max(m, sc);
    }
    m = workgroup_max(m);               // (its barriers publish chunk_p)
    float sum = 0.0;
    for (uint j = j0 + tid; j < j1; j += WG) {
        float p = m == NEG_INF ? 0.0 : exp(chunk_p[j - j0] - m);
        chunk_p[j - j0] = p;
        sum += p;
    }
    sum = workgroup_sum(sum);

    // o[c] = Σ_j p_j v[j, c]: `groups` invocations per column, each over every
    // groups-th key, summed through shared memory.
    const uint groups = WG >= HD ? WG / HD : 1u;
    const uint part = bh * pc.max_keys + s * (HD + 2u);
    const uint c = tid % HD, g = tid / HD;
    float acc = 0.0;
    if (WG >= HD && g < groups)
        for (uint j = j0 + g; j < j1; j += groups)
            acc += chunk_p[j - j0] * float(v[vb + kv_row(b, j) * pc.v_batch + j * pc.v_row + c]);
    if (WG >= HD) {
        if (g < groups) chunk_o[g * HD + c] = acc;
        barrier();
        if (tid < HD) {
            float o = 0.0;
            for (uint t = 0u; t < groups; t++) o += chunk_o[t * HD + tid];
            scores[part + 2u + tid] = o;
        }
    } else {
        for (uint cc = tid; cc < HD; cc += WG) {   // HD > WG: each invocation its columns, every key
            float o = 0.0;
            for (uint j = j0; j < j1; j++)
                o += chunk_p[j - j0] * float(v[vb + kv_row(b, j) * pc.v_batch + j * pc.v_row + cc]);
            scores[part + 2u + cc] = o;
        }
    }
    if (tid == 0u) {
        scores[part] = m;
        scores[part + 1u] = sum;
    }
}

void main()
{
    if (ROWS != 0u) {
        rows_main();
        return;
    }
    if (CHUNK != 0u) {
        split_k_main();
        return;
    }
    const uint bh = linear_workgroup();
    if (bh >= pc.rows) return;          // padding of the 2-D grid: whole workgroup
    const uint b = bh / pc.heads, h = bh % pc.heads;
    const uint tid = gl_LocalInvocationID.x;
    const uint n = key_count(b);
    const uint qb = pc.q_offset + b * pc.q_batch + h * pc.head_dim;
    const uint kb = pc.k_offset + h * pc.head_dim, vb = pc.v_offset + h * pc.head_dim;
    const uint sb = bh * pc.max_keys;

    // The query's row for the sparse patterns: the decode position (self-attention).
    const uint i = query_position(b);
    float m = NEG_INF;
    for (uint j = tid; j < n; j += WG) {
        float s = 0.0;
        const uint kr = kb + kv_row(b, j) * pc.k_batch + j * pc.k_row;
        for (uint c = 0; c < pc.head_dim; c++) s += float(q[qb + c]) * float(k[kr + c]);
        s = s * pc.scale + score_bias(h, i, j);
        if (pc.pattern != 0u && !key_allowed(i, j)) s = NEG_INF;
        scores[sb + j] = s;
        m = max(m, s);
    }
    m = workgroup_max(m);
    float sum = 0.0;
    for (uint j = tid; j < n; j += WG) {
        float p = exp(scores[sb + j] - m);
        scores[sb + j] = p;
        sum += p;
    }
    memoryBarrierBuffer();      // the scores written above, visible to the whole workgroup
    sum = workgroup_sum(sum);   // (its barrier completes the exchange)
    const float inv = sum > 0.0 ? 1.0 / sum : 0.0;
    const uint ob = b * pc.out_batch + h * pc.head_dim;
    for (uint c = tid; c < pc.head_dim; c += WG) {
        float acc = 0.0;
        for (uint j = 0; j < n; j++) acc += scores[sb + j] * float(v[vb + kv_row(b, j) * pc.v_batch + j * pc.v_row + c]);
        outv[ob + c] = ACT_T(acc * inv);
    }
}

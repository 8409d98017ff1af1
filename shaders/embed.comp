#version 450
// Token embedding with positions:
//   out[t, c] = table[ids[t], c] * scale + pe[pos, c],  pos = t % seq_len + pos_offset (+ state)
// With pos_from_state 1 the position offset also adds state[0], the decode step's
// position kept in GPU memory, so one recorded step serves every position; with 2
// each sequence its own, state[t / seq_len] (per-row positions: rows of one step at
// different positions; a negative one counts as 0). With position
// ids (binding 6) token t is at pos = position_ids[t] (+ state[0]) instead; with
// pad_position a token whose id is pad_id reads row pad_row (fairseq's positions:
// padding sits at the padding index's zero row).
// pe is the sinusoidal table made on the host (vkf_positional_encoding_create).
// One invocation per output element. An id outside [0, vocab), or a position past
// the table, writes NaN and never reads out of bounds. A table split in parts holds
// rows row0 .. row0 + rows - 1; each part writes only its tokens.
// -DTABLE_I8: the table is int8 (packed four to a 32-bit word, in element order, as
// matmul_b_i8.glsl reads them, so devices without 8-bit storage run it too) with one
// F32 scale per row of this part (binding 5): table[r, c] = q[r, c] * row_scale[r].
#extension GL_GOOGLE_include_directive : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

// Mirrored by vkf_push_embed in push.h.
layout(push_constant) uniform Push {
    uint tokens, d, vocab;
    uint positions;         // rows of pe; 0: no positional term
    float scale;
    uint seq_len, pos_offset;
    uint pos_from_state;    // 1: add state[0] to every position; 2: state[t / seq_len] to token t's
    uint row0, rows;        // vocabulary rows of this table (a part of a split embedding)
    uint has_position_ids;  // 1: binding 6 holds each token's position
    uint pad_position;      // 1: a pad_id token is at row pad_row
    int pad_id;
    uint pad_row;
} pc;

layout(set = 0, binding = 0) readonly buffer BufIds { int ids[]; };         // (tokens)
#ifdef TABLE_F16
#extension GL_EXT_shader_16bit_storage : require
layout(set = 0, binding = 1) readonly buffer BufTable { float16_t table[]; }; // (vocab, d) F16
#elif defined(TABLE_I8)
layout(set = 0, binding = 1) readonly buffer BufTable { uint table_words[]; }; // (vocab, d) I8, 4 per word
layout(set = 0, binding = 5) readonly buffer BufRowScale { float row_scale[]; }; // (rows) F32
#else
layout(set = 0, binding = 1) readonly buffer BufTable { float table[]; };   // (vocab, d)
#endif
layout(set = 0, binding = 2) readonly buffer BufPe { float pe[]; };         // (positions, d)
layout(set = 0, binding = 3) writeonly buffer BufOut { ACT_T outv[]; };     // (tokens, d)
layout(set = 0, binding = 4) readonly buffer BufState { int state[]; };     // (1) or (tokens / seq_len): positions
layout(set = 0, binding = 6) readonly buffer BufPosIds { int position_ids[]; }; // (tokens), with has_position_ids

void main()
{
    const uint e = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
    if (e >= pc.tokens * pc.d) return;
    const uint t = e / pc.d, c = e % pc.d;
    const int id = ids[t];
    uint pos = t % pc.seq_len + pc.pos_offset;
    if (pc.has_position_ids != 0u) {
        const int p = position_ids[t];
        pos = p < 0 ? 0xffffffffu : uint(p);     // negative: past the table, NaN
    }
    if (pc.pos_from_state != 0u && pos != 0xffffffffu)
        pos += uint(max(state[pc.pos_from_state == 2u ? t / pc.seq_len : 0u], 0));
    if (pc.pad_position != 0u && id == pc.pad_id) pos = pc.pad_row;
    if (id < 0 || uint(id) >= pc.vocab || (pc.positions != 0u && pos >= pc.positions)) {
        if (pc.row0 == 0u) outv[e] = ACT_T(uintBitsToFloat(0x7fc00000u));
        return;
    }
    if (uint(id) < pc.row0 || uint(id) - pc.row0 >= pc.rows) return;   // another part's row
    const uint r = uint(id) - pc.row0;
#ifdef TABLE_I8
    const uint i = r * pc.d + c;
    float v = float(bitfieldExtract(int(table_words[i >> 2]), int(i & 3u) * 8, 8)) * row_scale[r] * pc.scale;
#else
    float v = float(table[r * pc.d + c]) * pc.scale;
#endif
    if (pc.positions != 0u) v += pe[pos * pc.d + c];
    outv[e] = ACT_T(v);
}

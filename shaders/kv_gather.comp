#version 450
// Beam search's KV-cache reorder (and the cross-attention expand of each source to
// its beams): dst[r, w] = src[parent[r], w] for the first n 32-bit words of every
// row, n = state[0] * words_per_position (the cache positions written so far) or
// fixed_words. Raw words: the same kernel serves F32 and F16 rows of even length,
// and I32 tables. With set_self (beam search's row-index table, one word per
// position) word n of row r becomes r: the position the step writes, in the
// row's own cache. Grid: x over a row's words, y over rows.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

// Mirrored by vkf_push_kv_gather in push.h.
layout(push_constant) uniform Push {
    uint rows, src_rows;
    uint row_words, src_row_words;  // row strides of dst and src, in words
    uint fixed_words;               // words per row to copy when use_state is 0
    uint words_per_position;        // words per cache position when use_state is 1
    uint use_state;
    uint set_self;                  // 1: dst[r, n] = r (n < row_words)
} pc;

layout(set = 0, binding = 0) readonly buffer BufSrc { uint src[]; };        // (src_rows, src_row_words)
layout(set = 0, binding = 1) readonly buffer BufParent { int parent[]; };   // (rows): source row of each row
layout(set = 0, binding = 2) readonly buffer BufState { int state[]; };     // (1): positions written so far
layout(set = 0, binding = 3) writeonly buffer BufDst { uint dst[]; };       // (rows, row_words)

void main()
{
    const uint r = gl_WorkGroupID.y;
    const uint w = gl_GlobalInvocationID.x;
    if (r >= pc.rows) return;
    uint n = pc.use_state != 0u ? uint(max(state[0], 0)) * pc.words_per_position : pc.fixed_words;
    n = min(n, min(pc.row_words, pc.src_row_words));
    if (pc.set_self != 0u && w == n && n < pc.row_words) {
        dst[r * pc.row_words + w] = r;
        return;
    }
    if (w >= n) return;
    const int p = parent[r];
    if (p < 0 || uint(p) >= pc.src_rows) return;
    dst[r * pc.row_words + w] = src[uint(p) * pc.src_row_words + w];
}

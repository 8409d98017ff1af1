#version 450
// Beam search's table of cache rows (src/generate.c): row r continues row
// parent[r], so its cache positions 0..t-1 are where its parent's were, and
// position t, which row r writes this step, is in row r itself:
//   dst[r, j] = src[parent[r], j] for j < t, dst[r, t] = r, with t = state[0], or
// state[r] with state_stride 1 (per-row positions: a slot plan's rows; a free
// row, at -1, is left as it is).
// Grid: x over positions, y over rows.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

// Mirrored by vkf_push_kv_gather in push.h.
layout(push_constant) uniform Push {
    uint rows;                      // rows of src, dst and parent
    uint steps;                     // positions per row
    uint state_stride;              // 0: state[0] for every row; 1: state[r]
} pc;

layout(set = 0, binding = 0) readonly buffer BufSrc { int src[]; };         // (rows, steps)
layout(set = 0, binding = 1) readonly buffer BufParent { int parent[]; };   // (rows): the row each row continues
layout(set = 0, binding = 2) readonly buffer BufState { int state[]; };     // (1) or (rows): the step's position t
layout(set = 0, binding = 3) writeonly buffer BufDst { int dst[]; };        // (rows, steps)

void main()
{
    const uint r = gl_WorkGroupID.y;
    const uint j = gl_GlobalInvocationID.x;
    if (r >= pc.rows) return;
    const int pos = state[r * pc.state_stride];
    const uint t = uint(max(pos, 0));
    if (j >= pc.steps || j > t || pos < 0) return;
    if (j == t) {
        dst[r * pc.steps + j] = int(r);
        return;
    }
    const int p = parent[r];
    if (p < 0 || uint(p) >= pc.rows) return;
    dst[r * pc.steps + j] = src[uint(p) * pc.steps + j];
}

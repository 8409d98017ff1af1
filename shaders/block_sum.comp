#version 450
// The global tokens of transient-global attention (LongT5): for each sequence b of
// length len_b (lengths[b] when given, else lk) and each global block g < n_b =
// min(len_b / G, gmax),
//   out[b, g, c] = scale_g * Σ_t x[b, t, c]
// over the tokens t of block g: [g G, (g + 1) G), the last block (g = n_b - 1) also
// taking the tokens from n_b G up to len_b (LongT5's orphan tokens join the last
// whole block). scale_g is 1 (sum, LongT5's aggregates) or 1 / count (mean: the
// block means of keys and values that tglobal uses on models without LongT5's
// global norms). Rows g >= n_b are zero. One invocation per (b, g, c).
#extension GL_GOOGLE_include_directive : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

// Mirrored by vkf_push_block_sum in push.h. Element (b, t, c) of x is
// x[x_offset + b * x_batch + t * x_row + c]; of out, out[o_offset + b * o_batch + g * o_row + c].
layout(push_constant) uniform Push {
    uint batch, gmax, cols;
    uint block;                         // G >= 1
    uint lk;                            // tokens per sequence without lengths
    uint has_lengths;
    uint mean;                          // 1: the mean instead of the sum
    uint x_offset, x_row, x_batch;
    uint o_offset, o_row, o_batch;
} pc;

layout(set = 0, binding = 0) readonly buffer BufX { ACT_T x[]; };
layout(set = 0, binding = 1) readonly buffer BufLen { int lengths[]; };   // (batch) I32, or the dummy
layout(set = 0, binding = 2) writeonly buffer BufOut { ACT_T outv[]; };

void main()
{
    const uint e = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
    if (e >= pc.batch * pc.gmax * pc.cols) return;
    const uint c = e % pc.cols, g = (e / pc.cols) % pc.gmax, b = e / (pc.cols * pc.gmax);
    uint len = pc.lk;
    if (pc.has_lengths != 0u) len = uint(clamp(lengths[b], 0, int(pc.lk)));
    const uint n = min(len / pc.block, pc.gmax);
    float acc = 0.0;
    if (g < n) {
        const uint t0 = g * pc.block, t1 = g + 1u == n ? len : t0 + pc.block;
        const uint base = pc.x_offset + b * pc.x_batch + c;
        for (uint t = t0; t < t1; t++) acc += float(x[base + t * pc.x_row]);
        if (pc.mean != 0u) acc /= float(t1 - t0);
    }
    outv[pc.o_offset + b * pc.o_batch + g * pc.o_row + c] = ACT_T(acc);
}

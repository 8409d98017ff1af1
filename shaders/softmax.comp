#version 450
// Row softmax: y[r, j] = exp(v - max) / sum, v = scale * x[r, j] + mask[mrow, j]
// (+ T5's relative position bias of head h, query i: rel[h][clamp(j - i, -R, R) + R]),
// with columns past the causal limit (and -inf mask entries) given probability 0.
// One workgroup per row; rows of any length (each invocation strides the row).
// A row with every column masked is written as zeros.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
#include "reduce.glsl"

// Mirrored by vkf_push_softmax in ops.c.
layout(push_constant) uniform Push {
    uint rows, cols;
    uint has_mask;
    float scale;
    uint mask_rows, mask_row_div;
    uint causal_period, causal_offset;  // period 0: no causal mask
    uint mask_row0;
    uint rel_bias;                      // 1: add the bias of binding 3
    uint rel_radius, rel_period, rel_heads, rel_head0;  // R; row r: query r % period, head head0 + (r / period) % heads
} pc;

layout(set = 0, binding = 0) readonly buffer BufX { float x[]; };       // (rows, cols)
layout(set = 0, binding = 1) readonly buffer BufMask { float mask[]; }; // (mask_row0 + mask_rows, cols)
layout(set = 0, binding = 2) buffer BufY { float y[]; };                // (rows, cols)
layout(set = 0, binding = 3) readonly buffer BufBias { float rel[]; };  // (heads, 2 R + 1) or the dummy

#define NEG_INF uintBitsToFloat(0xff800000u)

uint bias_base, bias_i;                 // this row's head table and query

// The input of column j: scaled, masked, biased.
float value(uint base, uint mbase, uint j)
{
    float v = pc.scale * x[base + j];
    if (pc.has_mask != 0u) v += mask[mbase + j];
    if (pc.rel_bias != 0u) {
        int R = int(pc.rel_radius);
        v += rel[bias_base + uint(clamp(int(j) - int(bias_i), -R, R) + R)];
    }
    return v;
}

void main()
{
    const uint row = linear_workgroup();
    if (row >= pc.rows) return;                 // uniform across the workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint base = row * pc.cols;
    const uint mbase = pc.has_mask != 0u ? (pc.mask_row0 + (row / pc.mask_row_div) % pc.mask_rows) * pc.cols : 0u;
    uint limit = pc.cols;
    if (pc.causal_period != 0u) limit = min(pc.cols, row % pc.causal_period + pc.causal_offset + 1u);
    if (pc.rel_bias != 0u) {
        bias_i = row % pc.rel_period;
        bias_base = (pc.rel_head0 + (row / pc.rel_period) % pc.rel_heads) * (2u * pc.rel_radius + 1u);
    }

    float m = NEG_INF;
    for (uint j = tid; j < limit; j += WG) m = max(m, value(base, mbase, j));
    m = workgroup_max(m);

    if (m == NEG_INF) {                         // every column masked
        for (uint j = tid; j < pc.cols; j += WG) y[base + j] = 0.0;
        return;
    }
    float s = 0.0;
    for (uint j = tid; j < limit; j += WG) s += exp(value(base, mbase, j) - m);
    s = workgroup_sum(s);
    const float inv = 1.0 / s;
    for (uint j = tid; j < pc.cols; j += WG) {
        float p = 0.0;
        if (j < limit) p = exp(value(base, mbase, j) - m) * inv;
        y[base + j] = p;
    }
}

#version 450
// The gated FFN's product (T5 v1.1, Flan-T5, mT5): h (rows, 2n) holds x·W0ᵀ in
// columns [0, n) and x·W1ᵀ in [n, 2n); in place,
//   h[r, c] = act(h[r, c]) * h[r, n + c]   for c < n,
// and the first half then feeds the output projection (row stride 2n). One
// invocation per (r, c), which reads and writes only its own two elements.
#extension GL_GOOGLE_include_directive : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

// Mirrored by vkf_push_glu in push.h.
layout(push_constant) uniform Push {
    uint rows, n;
    uint act;                           // a vkf_activation
} pc;

layout(set = 0, binding = 0) buffer BufH { ACT_T h[]; };    // (rows, 2n)

void main()
{
    const uint e = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
    if (e >= pc.rows * pc.n) return;
    const uint r = e / pc.n, c = e % pc.n, base = r * 2u * pc.n;
    const float gate = activate(float(h[base + c]), pc.act);
    h[base + c] = ACT_T(gate * float(h[base + pc.n + c]));
}

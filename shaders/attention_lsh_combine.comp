#version 450
// LSH attention (Reformer), stage 4 of 4: the rounds combined by their log-sum-exp.
//   out(i) = Σ_r exp(lse_r(i) − LSE(i)) o_r(i),  LSE(i) = logsumexp_r lse_r(i)
// lse is in log2 units (as the attend stage writes it), so exp2 throughout. A
// query with no key in any round (every lse −inf) gets zeros.
//
// One invocation per (b, i, h), walking the head's head_dim outputs: the row's
// weights are worked out once per element with no integer division per element
// (CPU drivers scalarise those).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

// Mirrored by vkf_push_lsh_combine in push_lsh.h.
layout(push_constant) uniform Push {
    uint heads, head_dim, n, rounds;
    uint lse_offset;
    uint total;                         // batch * n * heads invocations
} pc;

// Round outputs (batch, heads, rounds, n, head_dim), then lse (batch, heads, rounds, n).
layout(set = 0, binding = 0) readonly buffer BufRounds { float rounds_buf[]; };
layout(set = 0, binding = 1) writeonly buffer BufOut { float outv[]; };    // (batch * n, heads * head_dim)

#define NEG_INF uintBitsToFloat(0xff800000u)

void main()
{
    const uint e = linear_workgroup() * WG + gl_LocalInvocationID.x;   // (b * n + i) * heads + h
    if (e >= pc.total) return;
    const uint row = e / pc.heads, h = e % pc.heads;
    const uint b = row / pc.n, i = row % pc.n;
    const uint slab0 = (b * pc.heads + h) * pc.rounds;
    const uint obase = e * pc.head_dim;                 // out is (batch * n, heads * head_dim) packed

    float m = NEG_INF;
    for (uint r = 0u; r < pc.rounds; r++) m = max(m, rounds_buf[pc.lse_offset + (slab0 + r) * pc.n + i]);
    if (m == NEG_INF) {
        for (uint c = 0u; c < pc.head_dim; c++) outv[obase + c] = 0.0;
        return;
    }
    float sum = 0.0;
    for (uint r = 0u; r < pc.rounds; r++) {
        float lse = rounds_buf[pc.lse_offset + (slab0 + r) * pc.n + i];
        sum += lse == NEG_INF ? 0.0 : exp2(lse - m);
    }
    const float inv = 1.0 / sum;        // sum >= 1: the round at the max has weight 1
    for (uint c = 0u; c < pc.head_dim; c++) {
        float acc = 0.0;
        for (uint r = 0u; r < pc.rounds; r++) {
            float lse = rounds_buf[pc.lse_offset + (slab0 + r) * pc.n + i];
            float w = lse == NEG_INF ? 0.0 : exp2(lse - m);
            acc += w * rounds_buf[((slab0 + r) * pc.n + i) * pc.head_dim + c];
        }
        outv[obase + c] = acc * inv;
    }
}

#version 450
// The second half of attention_decode.comp's split-K form (flash decoding): for each
// (b, h), the SPLITS partials (m_s, l_s, o_s[head_dim]) in its scratch row, at
// s·(head_dim + 2), combined:
//   M = max_s m_s,  L = Σ_s l_s·exp(m_s − M),  out[b, h, c] = Σ_s o_s[c]·exp(m_s − M) / L
// (zeros where every key was masked: L = 0). One workgroup per (b, h).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "act.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint SPLITS = 2;  // partials per (b, h)

// The push constants of attention_decode.comp (vkf_push_attention_decode); this
// kernel reads heads, head_dim, out_batch, max_keys and rows.
layout(push_constant) uniform Push {
    uint heads, head_dim;
    uint length_from_state;
    float scale;
    uint q_offset, q_batch;
    uint k_offset, k_row, k_batch;
    uint v_offset, v_row, v_batch;
    uint out_batch;                 // out row of b starts at b * out_batch
    uint max_keys;                  // scratch row length
    uint pattern;
    uint window, stride;
    uint bb_block, bb_globals, bb_random;
    uint random_len;
    uint kv_div;
    uint rows;                      // batch * heads
    uint indexed;
    uint rel_bias;
    uint rel_radius;
} pc;

layout(set = 0, binding = 0) readonly buffer BufScratch { float part[]; };   // (batch * heads, max_keys)
layout(set = 0, binding = 1) writeonly buffer BufOut { ACT_T outv[]; };      // (batch, heads * head_dim)

#define NEG_INF uintBitsToFloat(0xff800000u)

void main()
{
    const uint bh = linear_workgroup();
    if (bh >= pc.rows) return;
    const uint b = bh / pc.heads, h = bh % pc.heads, stride = pc.head_dim + 2u;
    const uint row = bh * pc.max_keys;
    float M = NEG_INF;
    for (uint s = 0u; s < SPLITS; s++) M = max(M, part[row + s * stride]);
    float L = 0.0;
    for (uint s = 0u; s < SPLITS; s++) {
        float m = part[row + s * stride];
        if (m != NEG_INF) L += part[row + s * stride + 1u] * exp(m - M);
    }
    const float inv = L > 0.0 ? 1.0 / L : 0.0;
    const uint ob = b * pc.out_batch + h * pc.head_dim;
    for (uint c = gl_LocalInvocationID.x; c < pc.head_dim; c += WG) {
        float o = 0.0;
        for (uint s = 0u; s < SPLITS; s++) {
            float m = part[row + s * stride];
            if (m != NEG_INF) o += part[row + s * stride + 2u + c] * exp(m - M);
        }
        outv[ob + c] = ACT_T(o * inv);
    }
}

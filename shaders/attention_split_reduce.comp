#version 450
// The second pass of fused attention's split-K form (flash decoding; attention.c):
// the partials that attention_flash.comp or attention_fused.comp (-DSPLIT_K) wrote
// for each of SPLITS runs of a workgroup's keys, combined per query row:
//   M = max_s m_s,  L = Σ_s l_s · 2^(m_s − M),  out[b, i, h, c] = Σ_s o_s[c] · 2^(m_s − M) / L
// (m in log2 units; zeros where every key was masked: L = 0). Partials: O
// (splits, rows, dp) unnormalised, then at ml (splits, rows, 2) [m, l]; a row is
// (b · heads + h) · lq + i. One invocation per output element, linear over
// (row, c) with c < head_dim.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

#ifdef IO_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define IO_T float16_t
#else
#define IO_T float
#endif

// Mirrored by vkf_push_attention_split_reduce in push.h.
layout(push_constant) uniform Push {
    uint rows;                      // batch * heads * lq
    uint lq, heads, head_dim;
    uint dp;                        // floats per partial row of O (>= head_dim)
    uint splits;
    uint ml;                        // first element of the [m, l] pairs: splits * rows * dp
} pc;

layout(set = 0, binding = 0) readonly buffer BufPart { float part[]; };
layout(set = 0, binding = 1) writeonly buffer BufOut { IO_T outv[]; };   // (batch * lq, heads * head_dim)

#define NEG_INF uintBitsToFloat(0xff800000u)

void main()
{
    const uint e = linear_workgroup() * WG + gl_LocalInvocationID.x;
    if (e >= pc.rows * pc.head_dim) return;
    const uint row = e / pc.head_dim, c = e % pc.head_dim;
    float M = NEG_INF;
    for (uint s = 0u; s < pc.splits; s++) M = max(M, part[pc.ml + (s * pc.rows + row) * 2u]);
    float L = 0.0, o = 0.0;
    if (M != NEG_INF)
        for (uint s = 0u; s < pc.splits; s++) {
            const uint at = s * pc.rows + row;
            const float m = part[pc.ml + at * 2u];
            const float w = m == NEG_INF ? 0.0 : exp2(m - M);
            L += part[pc.ml + at * 2u + 1u] * w;
            o += part[at * pc.dp + c] * w;
        }
    const uint bh = row / pc.lq, i = row % pc.lq, b = bh / pc.heads, h = bh % pc.heads;
    outv[((b * pc.lq + i) * pc.heads + h) * pc.head_dim + c] = IO_T(L > 0.0 ? o / L : 0.0);
}

#version 450
// Row LayerNorm with an optional fused residual add:
//   s = x + r;  y = (s - mean(s)) / sqrt(var(s) + eps) * gamma + beta
// with the biased variance (as PyTorch), or RMSNorm (flag 4, T5's T5LayerNorm):
//   y = s / sqrt(mean(s^2) + eps) * gamma (+ beta)
// beta is left out with flag 8. Optionally writes s. One workgroup per row, rows
// of any length; the variance is a second pass over the row.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "act.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;
#include "reduce.glsl"

// Mirrored by vkf_push_layernorm in ops.c.
layout(push_constant) uniform Push {
    uint rows, cols;
    uint flags;             // bit 0 residual, bit 1 write the sum, bit 2 RMSNorm (no mean), bit 3 no beta
    float eps;
} pc;

layout(set = 0, binding = 0) readonly buffer BufX { ACT_T x[]; };       // (rows, cols)
layout(set = 0, binding = 1) readonly buffer BufR { ACT_T r[]; };       // (rows, cols)
layout(set = 0, binding = 2) readonly buffer BufG { float gamma[]; };   // (cols)
layout(set = 0, binding = 3) readonly buffer BufB { float beta[]; };    // (cols)
layout(set = 0, binding = 4) writeonly buffer BufY { ACT_T y[]; };      // (rows, cols)
layout(set = 0, binding = 5) writeonly buffer BufS { ACT_T s_out[]; };  // (rows, cols)

float load(uint i)
{
    float v = float(x[i]);
    if ((pc.flags & 1u) != 0u) v += float(r[i]);
    return v;
}

void main()
{
    const uint row = linear_workgroup();
    if (row >= pc.rows) return;
    const uint tid = gl_LocalInvocationID.x;
    const uint base = row * pc.cols;
    const float n = float(pc.cols);

    const bool rms = (pc.flags & 4u) != 0u;
    float sum = 0.0;
    if (!rms)
        for (uint j = tid; j < pc.cols; j += WG) sum += load(base + j);
    const float mean = rms ? 0.0 : workgroup_sum(sum) / n;     // uniform: rms is a push constant

    float sq = 0.0;
    for (uint j = tid; j < pc.cols; j += WG) {
        float d = load(base + j) - mean;
        sq += d * d;
    }
    const float rstd = inversesqrt(workgroup_sum(sq) / n + pc.eps);

    for (uint j = tid; j < pc.cols; j += WG) {
        float v = load(base + j);
        if ((pc.flags & 2u) != 0u) s_out[base + j] = ACT_T(v);
        float b = (pc.flags & 8u) != 0u ? 0.0 : beta[j];
        y[base + j] = ACT_T((v - mean) * rstd * gamma[j] + b);
    }
}

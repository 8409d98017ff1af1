#version 450
// Scoring: the log-probability of one given id per row of logits, one
// workgroup per row: out[r] = log_softmax(logits[r])[labels[r]] =
// (x - max) - log(sum(exp(x - max))); a row whose label is negative (padding)
// gets 0. Only these (rows) values leave the device, never the logits.
#extension GL_GOOGLE_include_directive : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

// Mirrored by vkf_push_logprob_gather in push.h.
layout(push_constant) uniform Push {
    uint rows, vocab;
} pc;

layout(set = 0, binding = 0) readonly buffer BufLogits { ACT_T logits[]; };    // (rows, vocab)
layout(set = 0, binding = 1) readonly buffer BufLabels { int labels[]; };       // (rows)
layout(set = 0, binding = 2) writeonly buffer BufOut { float out_lp[]; };       // (rows)

#include "reduce.glsl"

void main()
{
    const uint row = linear_workgroup();
    if (row >= pc.rows) return;
    const uint tid = gl_LocalInvocationID.x, base = row * pc.vocab;
    const int label = labels[row];
    if (label < 0 || uint(label) >= pc.vocab) {
        if (tid == 0u) out_lp[row] = 0.0;
        return;
    }
    const float NEG_INF = uintBitsToFloat(0xff800000u);
    float m = NEG_INF;
    for (uint v = tid; v < pc.vocab; v += WG) m = max(m, float(logits[base + v]));
    m = workgroup_max(m);
    float sum = 0.0;
    if (m != NEG_INF)
        for (uint v = tid; v < pc.vocab; v += WG) sum += exp(float(logits[base + v]) - m);
    sum = workgroup_sum(sum);
    if (tid == 0u) out_lp[row] = (float(logits[base + uint(label)]) - m) - log(sum);
}

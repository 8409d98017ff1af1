#version 450
// Greedy choice of each sequence's next token: ids[b] = argmax_j logits[b, j]
// (the lowest j among equal maxima, as torch.argmax), also stored as
// tokens[b, pos], pos = state[0], or state[b] with state_stride 1 (per-row positions;
// negative: no token stored). One workgroup per row.
#extension GL_GOOGLE_include_directive : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

// Mirrored by vkf_push_argmax in push.h.
layout(push_constant) uniform Push {
    uint rows, cols;
    uint token_capacity;    // columns of tokens
    uint state_stride;      // 0: state[0] for every row; 1: state[row]
} pc;

layout(set = 0, binding = 0) readonly buffer BufLogits { ACT_T logits[]; };  // (rows, cols)
layout(set = 0, binding = 1) readonly buffer BufState { int state[]; };      // (1) or (rows): positions
layout(set = 0, binding = 2) writeonly buffer BufIds { int ids[]; };         // (rows)
layout(set = 0, binding = 3) writeonly buffer BufTokens { int tokens[]; };   // (rows, token_capacity)

shared float best_value[WG];
shared uint best_index[WG];

void main()
{
    const uint row = linear_workgroup();
    if (row >= pc.rows) return;
    const uint tid = gl_LocalInvocationID.x;
    float bv = uintBitsToFloat(0xff800000u);
    uint bi = 0xffffffffu;
    for (uint j = tid; j < pc.cols; j += WG) {
        float x = float(logits[row * pc.cols + j]);
        if (x > bv || (bi == 0xffffffffu && !isnan(x))) { bv = x; bi = j; }
    }
    best_value[tid] = bv;
    best_index[tid] = bi;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) {
            float ov = best_value[tid + s];
            uint oi = best_index[tid + s];
            bool take = oi != 0xffffffffu &&
                        (best_index[tid] == 0xffffffffu || ov > best_value[tid] || (ov == best_value[tid] && oi < best_index[tid]));
            if (take) { best_value[tid] = ov; best_index[tid] = oi; }
        }
        barrier();
    }
    if (tid == 0u) {
        int id = best_index[0] == 0xffffffffu ? 0 : int(best_index[0]);
        ids[row] = id;
        int pos = state[row * pc.state_stride];
        if (pos >= 0 && uint(pos) < pc.token_capacity) tokens[row * pc.token_capacity + uint(pos)] = id;
    }
}

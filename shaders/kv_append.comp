#version 450
// Appends the new token's keys and values to the KV cache at the position held in
// GPU memory: cache_k[b, pos, c] = qkv[b, d + c], cache_v[b, pos, c] = qkv[b, 2d + c]
// with pos = state[0] for every row, or state[b] (state_stride 1: per-row positions;
// a row at a negative position, a free slot, writes nothing). qkv (batch, 3d) as the
// fused in-projection writes it; caches (batch, capacity, d). One invocation per (b, c).
#extension GL_GOOGLE_include_directive : require
#include "act.glsl"
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 256;

// Mirrored by vkf_push_kv_append in push.h.
layout(push_constant) uniform Push {
    uint batch, d, capacity;
    uint state_stride;      // 0: state[0] for every row; 1: state[b]
} pc;

layout(set = 0, binding = 0) readonly buffer BufQkv { ACT_T qkv[]; };     // (batch, 3d)
layout(set = 0, binding = 1) readonly buffer BufState { int state[]; };   // (1) or (batch): positions
layout(set = 0, binding = 2) writeonly buffer BufK { ACT_T cache_k[]; };  // (batch, capacity, d)
layout(set = 0, binding = 3) writeonly buffer BufV { ACT_T cache_v[]; };  // (batch, capacity, d)

void main()
{
    const uint e = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * WG;
    if (e >= pc.batch * pc.d) return;
    const uint b = e / pc.d, c = e % pc.d;
    const int pos = state[b * pc.state_stride];
    if (pos < 0 || uint(pos) >= pc.capacity) return;   // a free slot (the host keeps others inside)
    const uint dst = (b * pc.capacity + uint(pos)) * pc.d + c;
    cache_k[dst] = qkv[b * 3u * pc.d + pc.d + c];
    cache_v[dst] = qkv[b * 3u * pc.d + 2u * pc.d + c];
}

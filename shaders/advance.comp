#version 450
// Moves the decode positions in GPU memory one step on: state[i] += 1 for each of
// the `count` positions (one for the whole step, or one per row), a negative one
// (a free slot) left as it is. The last dispatch of a decode step, so the same
// recorded step serves the next position.
layout(local_size_x = 64) in;

// Mirrored by vkf_push_advance in push.h.
layout(push_constant) uniform Push {
    uint count;
} pc;

layout(set = 0, binding = 0) buffer BufState { int state[]; };  // (count)

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i < pc.count && state[i] >= 0) state[i] += 1;
}

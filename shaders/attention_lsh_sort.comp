#version 450
// LSH attention (Reformer), stage 2 of 4: per (b, h, r), the token positions
// stably sorted by bucket (ties by position):
//   sorted[x] = the x-th token j in the order (bucket(j), j)
// A counting sort in one workgroup per (b, h, r): a histogram of the nb + 1 keys
// (nb: padding) in shared memory, an exclusive scan of it (the start of every
// bucket), then a scatter in tiles of WG tokens in position order. Within a tile
// each token counts the tokens before it with the same bucket, which keeps the
// sort stable without atomics on the scatter; the first token of each bucket in
// the tile then advances the bucket's start by the tile's count. BINS (nb + 1 of
// the plan) is the histogram's size; the host checks it fits shared memory.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint BINS = 3;    // at least nb + 1

// Mirrored by vkf_push_lsh_sort in push_lsh.h.
layout(push_constant) uniform Push {
    uint n;
    uint buckets;                       // nb; keys 0..nb
    uint slabs;                         // batch * heads * rounds
} pc;

layout(set = 0, binding = 0) readonly buffer BufBucket { uint bucket[]; };   // (slabs, n)
layout(set = 0, binding = 1) writeonly buffer BufSorted { uint sorted[]; };  // (slabs, n)

shared uint start[BINS];                // counts, then where the next token of each bucket goes
shared uint tile_key[WG];

const uint NONE = 0xffffffffu;

void main()
{
    const uint slab = linear_workgroup();
    if (slab >= pc.slabs) return;       // padding of the 2-D grid: whole workgroup
    const uint tid = gl_LocalInvocationID.x;
    const uint base = slab * pc.n;
    const uint keys = pc.buckets + 1u;

    for (uint k = tid; k < keys; k += WG) start[k] = 0u;
    barrier();
    for (uint j = tid; j < pc.n; j += WG) atomicAdd(start[min(bucket[base + j], pc.buckets)], 1u);
    barrier();
    if (tid == 0u) {
        uint sum = 0u;
        for (uint k = 0u; k < keys; k++) {
            uint count = start[k];
            start[k] = sum;
            sum += count;
        }
    }
    barrier();
    for (uint t0 = 0u; t0 < pc.n; t0 += WG) {  // uniform: every invocation runs every tile
        const uint j = t0 + tid;
        const uint key = j < pc.n ? min(bucket[base + j], pc.buckets) : NONE;
        tile_key[tid] = key;
        barrier();                      // the tile's keys are written
        uint before = 0u, same = 0u;
        // unrolled: lavapipe 22.3 ends an invocation's loops once they have run 65535
        // iterations together, which a rolled-up count of WG per tile reached past
        // about 63,000 tokens (docs/reliability.md); now one per tile
        [[unroll]] for (uint u = 0u; u < WG; u++)
            if (key != NONE && tile_key[u] == key) {
                same++;
                if (u < tid) before++;
            }
        const uint at = key != NONE ? start[key] + before : 0u;
        barrier();                      // every read of start and tile_key is done
        if (key != NONE) {
            sorted[base + at] = j;
            if (before == 0u) start[key] += same;
        }
        barrier();                      // the starts are advanced before the next tile
    }
}

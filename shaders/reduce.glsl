// Workgroup-wide reductions through shared memory. Needs WG (the workgroup size,
// a power of two) declared before inclusion. Every invocation must call them.
shared float reduce_scratch[WG];

float workgroup_max(float v)
{
    uint tid = gl_LocalInvocationID.x;
    reduce_scratch[tid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) reduce_scratch[tid] = max(reduce_scratch[tid], reduce_scratch[tid + s]);
        barrier();
    }
    float r = reduce_scratch[0];
    barrier();                  // scratch is reused by the next call
    return r;
}

float workgroup_sum(float v)
{
    uint tid = gl_LocalInvocationID.x;
    reduce_scratch[tid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) reduce_scratch[tid] += reduce_scratch[tid + s];
        barrier();
    }
    float r = reduce_scratch[0];
    barrier();
    return r;
}

#version 450
// Split-K, second pass: C = act(alpha * sum_s P[s] + bias) + R, where P holds the
// fp32 partial sums matmul_coopmat.comp (-DSPLIT_K) wrote for each K range:
// (splits, batch items, m, n), splits = ceil(k / k_split). One invocation per
// element of C, consecutive invocations along a row of C; the same push constants
// (and epilogue) as the matmul kernels. No atomics: the result does not depend on
// the order in which workgroups ran.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "matmul_push.glsl"
#include "act.glsl"

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer BufPart { float part[]; };   // (splits, items, m, n)
layout(set = 0, binding = 2) readonly buffer BufBias { float bias[]; };
layout(set = 0, binding = 3) readonly buffer BufR { ACT_T res[]; };
layout(set = 0, binding = 4) writeonly buffer BufC { ACT_T c[]; };
#ifdef B_I8
layout(set = 0, binding = 5) readonly buffer BufScale { float b_scale[]; };   // (n): int8 weights' scales
#endif

#include "matmul_epilogue.glsl"

void main()
{
    const uint items = pc.batch_inner * (gl_NumWorkGroups.z);   // z carries b0, the grid's x/y the elements
    const uint mn = pc.m * pc.n;
    const uint idx = linear_workgroup() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;   // within batch item z
    const uint z = gl_WorkGroupID.z;
    if (idx >= mn * pc.batch_inner) return;
    const uint b1 = idx / mn, e = idx % mn;
    const uint item = z * pc.batch_inner + b1;
    const uint splits = (pc.k + pc.k_split - 1u) / pc.k_split;
    float sum = 0.0;
    for (uint s = 0; s < splits; s++) sum += part[(s * items + item) * mn + e];
    store_output(z, b1, e / pc.n, e % pc.n, sum);
}

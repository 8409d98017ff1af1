#version 450
// Decode-step matmul (m <= ROWS, a handful of rows): C = act(alpha * A·Bᵀ + bias) + R
// with the matmul contract and push constants, for B (n, k) with FLAG_VEC4 (k and
// every row start a multiple of 4). Memory bound: every element of B is read once,
// so the kernel is shaped for bandwidth, not FLOPs:
// - a workgroup takes COLS columns of C (rows of B); WORKGROUP / COLS invocations
//   split each row of B along K, consecutive invocations reading consecutive 16
//   bytes (vec4 of fp32; f16 and int8 weights read 8 and 4 bytes), so a subgroup
//   reads whole cache lines;
// - every invocation keeps one partial sum per row of A (A's few rows stay in
//   cache: every workgroup reads them);
// - n / COLS workgroups: thousands for a model's projections, enough to keep every
//   compute unit's memory requests in flight.
// The partial sums meet in shared memory; the first ROWS x COLS invocations add
// them up and store through store_output (bias, activation, int8 scales, residual).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "matmul_push.glsl"
#include "act.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP = 128;
layout(constant_id = 1) const uint ROWS = 8;    // rows of C at most (vkf_matmul_tiles.bm)
layout(constant_id = 2) const uint COLS = 4;    // columns of C per workgroup (bn); divides WORKGROUP
const uint LANES = WORKGROUP / COLS;            // invocations per column

layout(set = 0, binding = 0) readonly buffer BufA4 { ACT_T4 a4[]; };
#include "matmul_b.glsl"
layout(set = 0, binding = 2) readonly buffer BufBias { float bias[]; };
layout(set = 0, binding = 3) readonly buffer BufR { ACT_T res[]; };
layout(set = 0, binding = 4) writeonly buffer BufC { ACT_T c[]; };

#include "matmul_epilogue.glsl"

shared float partial[ROWS * WORKGROUP];         // (ROWS, WORKGROUP)

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint column = tid / LANES, lane = tid % LANES;
    const uint col0 = linear_workgroup() * COLS;
    const uint n = col0 + column;
    const uint z = gl_WorkGroupID.z;
    const uint b0 = z / pc.batch_inner, b1 = z % pc.batch_inner;
    const uint a_base = pc.a_offset + b0 * pc.a_batch0 + b1 * pc.a_batch1;
    float acc[ROWS];
    [[unroll]] for (uint r = 0; r < ROWS; r++) acc[r] = 0.0;
    if (n < pc.n) {
        const uint b_row = pc.b_offset + b0 * pc.b_batch0 + b1 * pc.b_batch1 + n * pc.b_row;
        for (uint k = lane * 4; k < pc.k; k += LANES * 4) {
            vec4 w = B_AT4(b_row + k);
            [[unroll]] for (uint r = 0; r < ROWS; r++)
                if (r < pc.m) acc[r] += dot(vec4(a4[(a_base + r * pc.a_row + k) >> 2]), w);
        }
    }
    [[unroll]] for (uint r = 0; r < ROWS; r++) partial[r * WORKGROUP + tid] = acc[r];
    barrier();
    if (tid < ROWS * COLS) {
        const uint r = tid / COLS, cc = tid % COLS;
        if (r < pc.m && col0 + cc < pc.n) {
            float sum = 0.0;
            for (uint l = 0; l < LANES; l++) sum += partial[r * WORKGROUP + cc * LANES + l];
            store_output(b0, b1, r, col0 + cc, sum);
        }
    }
}

#version 450
// C = act(alpha * A·Bᵀ + bias) + R with register blocking and no shared memory:
// each invocation computes a TM × TN block of C reading A and B straight from the
// storage buffers (vec4 loads along K when the host says the views allow it).
// Faster than shared-memory tiles on CPU Vulkan drivers, where every barrier is
// paid for (see DESIGN.md). Any m, n, k: rows/columns past the edge are clamped
// on load and skipped on store.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "matmul_push.glsl"
#include "act.glsl"

layout(local_size_x_id = 0) in;                 // = (BM / TM) * (BN / TN)
layout(constant_id = 1) const uint BM = 32;
layout(constant_id = 2) const uint BN = 32;
layout(constant_id = 3) const uint BK = 1;      // unused here; kept for one spec layout
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

layout(set = 0, binding = 0) readonly buffer BufA { ACT_T a[]; };
layout(set = 0, binding = 0) readonly buffer BufA4 { ACT_T4 a4[]; };
#include "matmul_b.glsl"
layout(set = 0, binding = 2) readonly buffer BufBias { float bias[]; };
layout(set = 0, binding = 3) readonly buffer BufR { ACT_T res[]; };
layout(set = 0, binding = 4) writeonly buffer BufC { ACT_T c[]; };

#include "matmul_epilogue.glsl"

void main()
{
    const uint tid = gl_LocalInvocationID.x;
    const uint tx = tid % (BN / TN);
    const uint ty = tid / (BN / TN);
    const uint z = gl_WorkGroupID.z;
    const uint b0 = z / pc.batch_inner, b1 = z % pc.batch_inner;
    const uint row0 = gl_WorkGroupID.y * BM + ty * TM;
    const uint col0 = gl_WorkGroupID.x * BN + tx * TN;
    if (row0 >= pc.m || col0 >= pc.n) return;   // no barriers here: early exit is fine
    const uint a_base = pc.a_offset + b0 * pc.a_batch0 + b1 * pc.a_batch1;
    const uint b_base = pc.b_offset + b0 * pc.b_batch0 + b1 * pc.b_batch1;

    uint a_rows[TM], b_cols[TN];                // start of each row (A) / column (B)
    for (uint i = 0; i < TM; i++) a_rows[i] = a_base + min(row0 + i, pc.m - 1u) * pc.a_row;
    float acc[TM * TN];
    for (uint i = 0; i < TM * TN; i++) acc[i] = 0.0;

    if ((pc.flags & FLAG_B_KN) != 0u) {
        // B (k, n): column j of Bᵀ is strided by b_row.
        for (uint j = 0; j < TN; j++) b_cols[j] = b_base + min(col0 + j, pc.n - 1u);
        for (uint kk = 0; kk < pc.k; kk++) {
            float ra[TM], rb[TN];
            for (uint i = 0; i < TM; i++) ra[i] = float(a[a_rows[i] + kk]);
            for (uint j = 0; j < TN; j++) rb[j] = B_AT(b_cols[j] + kk * pc.b_row);
            for (uint i = 0; i < TM; i++)
                for (uint j = 0; j < TN; j++) acc[i * TN + j] += ra[i] * rb[j];
        }
    } else {
        for (uint j = 0; j < TN; j++) b_cols[j] = b_base + min(col0 + j, pc.n - 1u) * pc.b_row;
        uint k_vec = 0;
        if ((pc.flags & FLAG_VEC4) != 0u) {
            // Every row start is a multiple of 4 elements (checked on the host).
            k_vec = pc.k & ~3u;
            for (uint kk = 0; kk < k_vec; kk += 4u) {
                vec4 ra[TM], rb[TN];
                for (uint i = 0; i < TM; i++) ra[i] = vec4(a4[(a_rows[i] + kk) >> 2]);
                for (uint j = 0; j < TN; j++) rb[j] = B_AT4(b_cols[j] + kk);
                for (uint i = 0; i < TM; i++)
                    for (uint j = 0; j < TN; j++) acc[i * TN + j] += dot(ra[i], rb[j]);
            }
        }
        for (uint kk = k_vec; kk < pc.k; kk++) {
            float ra[TM], rb[TN];
            for (uint i = 0; i < TM; i++) ra[i] = float(a[a_rows[i] + kk]);
            for (uint j = 0; j < TN; j++) rb[j] = B_AT(b_cols[j] + kk);
            for (uint i = 0; i < TM; i++)
                for (uint j = 0; j < TN; j++) acc[i * TN + j] += ra[i] * rb[j];
        }
    }

    for (uint i = 0; i < TM; i++) {
        uint row = row0 + i;
        if (row >= pc.m) break;
        for (uint j = 0; j < TN; j++) {
            uint col = col0 + j;
            if (col < pc.n) store_output(b0, b1, row, col, acc[i * TN + j]);
        }
    }
}

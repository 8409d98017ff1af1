#version 450
// C = act(alpha * A·Bᵀ + bias) + R for CPU Vulkan drivers whose compiler knows
// which values are the same in every lane of a subgroup (Mesa 23+ lavapipe: NIR's
// divergence analysis). There a storage-buffer load at a subgroup-uniform address
// is one scalar load, broadcast to the lanes, and a load at a per-lane address a
// hardware gather. A subgroup of SG lanes computes TM rows × SG·TN columns: every
// lane works on the same TM rows of A, read at uniform addresses (no shuffles,
// no gathers), and on its own TN columns of C, whose rows of B it gathers as vec4
// along K. A loaded value of A feeds TN products in every lane, a gathered vec4 of
// B 4·TM. Mesa 22.3 treats every address computed in a loop as per-lane, so there
// this kernel loads A lane by lane and matmul_subgroup.comp is the faster one.
// Any m, n, k: rows/columns past the edge are clamped on load and skipped on store.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "matmul_push.glsl"
#include "act.glsl"

layout(local_size_x_id = 0) in;                 // = (BM / TM) * (BN / (SG * TN)) * SG
layout(constant_id = 1) const uint BM = 32;
layout(constant_id = 2) const uint BN = 32;
layout(constant_id = 3) const uint SG = 8;      // the device's subgroup size (the tiles' "bk")
layout(constant_id = 4) const uint TM = 8;      // rows of a subgroup (any count)
layout(constant_id = 5) const uint TN = 2;      // columns of a lane

layout(set = 0, binding = 0) readonly buffer BufA { ACT_T a[]; };
layout(set = 0, binding = 0) readonly buffer BufA4 { ACT_T4 a4[]; };
#include "matmul_b.glsl"
layout(set = 0, binding = 2) readonly buffer BufBias { float bias[]; };
layout(set = 0, binding = 3) readonly buffer BufR { ACT_T res[]; };
layout(set = 0, binding = 4) writeonly buffer BufC { ACT_T c[]; };

#include "matmul_epilogue.glsl"

void main()
{
    const uint lane = gl_SubgroupInvocationID;
    const uint sg = gl_SubgroupID;              // uniform in the subgroup, as is all that derives from it
    const uint sx = sg % (BN / (SG * TN)), sy = sg / (BN / (SG * TN));
    const uint z = gl_WorkGroupID.z;
    const uint b0 = z / pc.batch_inner, b1 = z % pc.batch_inner;
    const uint row0 = gl_WorkGroupID.y * BM + sy * TM;
    const uint col0 = gl_WorkGroupID.x * BN + sx * SG * TN;
    const uint a_base = pc.a_offset + b0 * pc.a_batch0 + b1 * pc.a_batch1;
    const uint b_base = pc.b_offset + b0 * pc.b_batch0 + b1 * pc.b_batch1;

    uint a_rows[TM], b_cols[TN];                // the subgroup's rows of A (uniform), this lane's columns of C
    [[unroll]] for (uint i = 0; i < TM; i++) a_rows[i] = a_base + min(row0 + i, pc.m - 1u) * pc.a_row;
    float acc[TM * TN];
    [[unroll]] for (uint i = 0; i < TM * TN; i++) acc[i] = 0.0;

    if ((pc.flags & FLAG_VEC4) != 0u) {
        [[unroll]] for (uint j = 0; j < TN; j++) b_cols[j] = b_base + min(col0 + lane + SG * j, pc.n - 1u) * pc.b_row;
        for (uint kk = 0; kk < pc.k; kk += 4u) {
            vec4 rb[TN];
            [[unroll]] for (uint j = 0; j < TN; j++) rb[j] = B_AT4(b_cols[j] + kk);
            [[unroll]] for (uint i = 0; i < TM; i++) {
                vec4 ra = vec4(a4[(a_rows[i] + kk) >> 2]);
                [[unroll]] for (uint q = 0; q < 4; q++)
                    [[unroll]] for (uint j = 0; j < TN; j++) acc[i * TN + j] += ra[q] * rb[j][q];
            }
        }
    } else {
        // Scalar loads: B (n, k) with unaligned rows, or B (k, n).
        bool kn = (pc.flags & FLAG_B_KN) != 0u;
        uint b_step = kn ? pc.b_row : 1u;
        [[unroll]] for (uint j = 0; j < TN; j++) {
            uint col = min(col0 + lane + SG * j, pc.n - 1u);
            b_cols[j] = b_base + (kn ? col : col * pc.b_row);
        }
        for (uint kk = 0; kk < pc.k; kk++) {
            float rb[TN];
            [[unroll]] for (uint j = 0; j < TN; j++) rb[j] = B_AT(b_cols[j] + kk * b_step);
            [[unroll]] for (uint i = 0; i < TM; i++) {
                float ra = float(a[a_rows[i] + kk]);
                [[unroll]] for (uint j = 0; j < TN; j++) acc[i * TN + j] += ra * rb[j];
            }
        }
    }

    [[unroll]] for (uint i = 0; i < TM; i++) {
        uint row = row0 + i;
        if (row >= pc.m) break;
        [[unroll]] for (uint j = 0; j < TN; j++) {
            uint col = col0 + lane + SG * j;
            if (col < pc.n) store_output(b0, b1, row, col, acc[i * TN + j]);
        }
    }
}

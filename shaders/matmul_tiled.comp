#version 450
// C = act(alpha * A·Bᵀ + bias) + R with shared-memory tiles and register blocking.
// A (m, k), B (n, k) or (k, n), C and R (m, n), per batch item (z of the grid).
// One workgroup computes a BM × BN tile of C; each invocation a TM × TN block of it,
// stepping through K in slices of BK held in shared memory. Any m, n, k: loads
// past the edge read 0, stores past the edge are skipped.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "matmul_push.glsl"
#include "act.glsl"

layout(local_size_x_id = 0) in;                 // = (BM / TM) * (BN / TN)
layout(constant_id = 1) const uint BM = 64;
layout(constant_id = 2) const uint BN = 64;
layout(constant_id = 3) const uint BK = 16;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;

layout(set = 0, binding = 0) readonly buffer BufA { ACT_T a[]; };
#if defined(B_I8)
#include "matmul_b_i8.glsl"
#elif defined(B_F16)
// F16 weights (16-bit storage), widened on load; accumulation stays fp32.
#extension GL_EXT_shader_16bit_storage : require
layout(set = 0, binding = 1) readonly buffer BufB { float16_t b[]; };
#define B_AT(i) float(b[i])
#else
layout(set = 0, binding = 1) readonly buffer BufB { float b[]; };
#define B_AT(i) float(b[i])
#endif
layout(set = 0, binding = 2) readonly buffer BufBias { float bias[]; };
layout(set = 0, binding = 3) readonly buffer BufR { ACT_T res[]; };
layout(set = 0, binding = 4) writeonly buffer BufC { ACT_T c[]; };

#include "matmul_epilogue.glsl"

shared float tile_a[BK * BM];   // (BK, BM): tile_a[kk * BM + m]
shared float tile_b[BK * BN];   // (BK, BN): tile_b[kk * BN + n]

void main()
{
    const uint threads = (BM / TM) * (BN / TN);
    const uint tid = gl_LocalInvocationID.x;
    const uint tx = tid % (BN / TN);            // column block of this invocation
    const uint ty = tid / (BN / TN);            // row block
    const uint z = gl_WorkGroupID.z;
    const uint b0 = z / pc.batch_inner, b1 = z % pc.batch_inner;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint a_base = pc.a_offset + b0 * pc.a_batch0 + b1 * pc.a_batch1;
    const uint b_base = pc.b_offset + b0 * pc.b_batch0 + b1 * pc.b_batch1;
    const bool b_kn = (pc.flags & FLAG_B_KN) != 0u;

    float acc[TM * TN];
    for (uint i = 0; i < TM * TN; i++) acc[i] = 0.0;

    for (uint k0 = 0; k0 < pc.k; k0 += BK) {
        // Stage A: consecutive invocations read consecutive k of one row.
        for (uint i = tid; i < BM * BK; i += threads) {
            uint m = i / BK, kk = i % BK;
            uint gm = row0 + m, gk = k0 + kk;
            tile_a[kk * BM + m] = (gm < pc.m && gk < pc.k) ? float(a[a_base + gm * pc.a_row + gk]) : 0.0;
        }
        // Stage B along its contiguous axis.
        for (uint i = tid; i < BN * BK; i += threads) {
            uint n, kk;
            if (b_kn) { n = i % BN; kk = i / BN; }
            else { n = i / BK; kk = i % BK; }
            uint gn = col0 + n, gk = k0 + kk;
            float v = 0.0;
            // each branch converts on its own: a select of two halves would be F16 arithmetic
            if (gn < pc.n && gk < pc.k) v = b_kn ? B_AT(b_base + gk * pc.b_row + gn) : B_AT(b_base + gn * pc.b_row + gk);
            tile_b[kk * BN + n] = v;
        }
        barrier();
        for (uint kk = 0; kk < BK; kk++) {
            float ra[TM], rb[TN];
            for (uint i = 0; i < TM; i++) ra[i] = tile_a[kk * BM + ty * TM + i];
            for (uint j = 0; j < TN; j++) rb[j] = tile_b[kk * BN + tx * TN + j];
            for (uint i = 0; i < TM; i++)
                for (uint j = 0; j < TN; j++) acc[i * TN + j] += ra[i] * rb[j];
        }
        barrier();
    }

    for (uint i = 0; i < TM; i++) {
        uint row = row0 + ty * TM + i;
        if (row >= pc.m) break;
        for (uint j = 0; j < TN; j++) {
            uint col = col0 + tx * TN + j;
            if (col < pc.n) store_output(b0, b1, row, col, acc[i * TN + j]);
        }
    }
}

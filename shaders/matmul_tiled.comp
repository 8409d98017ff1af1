#version 450
// C = act(alpha * A·Bᵀ + bias) + R with shared-memory tiles and register blocking.
// A (m, k), B (n, k) or (k, n), C and R (m, n), per batch item (z of the grid).
// One workgroup computes a BM × BN tile of C; each invocation a TM × TN block of it,
// stepping through K in slices of BK held in shared memory. Any m, n, k: loads
// past the edge read 0, stores past the edge are skipped.
//
// The GPU form (the tiles AMD and Intel GPUs get by default, docs/performance.md):
//  - an invocation's outputs are spread over the tile in groups of 4 rows and 4
//    columns (or single ones where TM / TN is not a multiple of 4), so that the
//    invocations of a subgroup read consecutive shared words (no bank conflicts)
//    and each group is one 16-byte shared load;
//  - shared rows (one K step of the tile) are padded by 4 floats;
//  - where the host says the views allow it (FLAG_VEC4: A and B (n, k) rows start on
//    4 elements, k a multiple of 4) and BK is a multiple of 4, A and B are read
//    with 16-byte loads, and the next K slice is read into registers while the
//    current one is multiplied (register double buffering). Otherwise scalar loads.
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
layout(set = 0, binding = 0) readonly buffer BufA4 { ACT_T4 a4[]; };
#include "matmul_b.glsl"
layout(set = 0, binding = 2) readonly buffer BufBias { float bias[]; };
layout(set = 0, binding = 3) readonly buffer BufR { ACT_T res[]; };
layout(set = 0, binding = 4) writeonly buffer BufC { ACT_T c[]; };

#include "matmul_epilogue.glsl"

// Shared rows padded by 4 floats; the host's size check (tuning.c) counts them.
const uint SA = BM + 4;
const uint SB = BN + 4;
shared float tile_a[BK * SA];   // (BK, BM): tile_a[kk * SA + m]
shared float tile_b[BK * SB];   // (BK, BN): tile_b[kk * SB + n]

// Outputs of an invocation: groups of RG rows (CG columns), RG = 4 where TM is a
// multiple of 4, else 1; group g of row block ty starts at ty * RG + g * (BM / (TM / RG)).
const uint RG = TM % 4 == 0 ? 4 : 1;
const uint CG = TN % 4 == 0 ? 4 : 1;
const uint RSTEP = BM / (TM / RG);
const uint CSTEP = BN / (TN / CG);

const uint THREADS = (BM / TM) * (BN / TN);
// 16-byte staging (BK a multiple of 4): vec4s of A and B per invocation and slice.
// BQ: K quads per slice (1 where BK < 4: the 16-byte path is not taken then).
const uint BQ = BK >= 4 ? BK / 4 : 1;
const uint VA = (BM * BQ + THREADS - 1) / THREADS;
const uint VB = (BN * BQ + THREADS - 1) / THREADS;

uint row_of(uint ty, uint i) { return ty * RG + (i / RG) * RSTEP + i % RG; }
uint col_of(uint tx, uint j) { return tx * CG + (j / CG) * CSTEP + j % CG; }

// acc += the BK-slice in shared memory, for the outputs of (ty, tx). A macro, not a
// function: an array parameter sized by spec constants lost its writes (lavapipe).
#define MULTIPLY_SLICE()                                                                \
    for (uint kk = 0; kk < BK; kk++) {                                                  \
        float ra[TM], rb[TN];                                                           \
        for (uint i = 0; i < TM; i++) ra[i] = tile_a[kk * SA + row_of(ty, i)];         \
        for (uint j = 0; j < TN; j++) rb[j] = tile_b[kk * SB + col_of(tx, j)];         \
        for (uint i = 0; i < TM; i++)                                                   \
            for (uint j = 0; j < TN; j++) acc[i * TN + j] += ra[i] * rb[j];            \
    }

void main()
{
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
    // two short loops, not one of TM * TN: compilers unroll these (an index left
    // dynamic puts the whole array in scratch memory)
    for (uint i = 0; i < TM; i++)
        for (uint j = 0; j < TN; j++) acc[i * TN + j] = 0.0;

    if (BK % 4 == 0 && (pc.flags & FLAG_VEC4) != 0u && !b_kn) {
        // 16-byte loads: element e of the slice is row e / BQ, K quad e % BQ.
        // k is a multiple of 4, so a quad is either all inside K or all past it.
        vec4 next_a[VA], next_b[VB];
        for (uint k0 = 0; k0 < pc.k; k0 += BK) {
            if (k0 == 0) {
                for (uint v = 0; v < VA; v++) {
                    uint e = tid + v * THREADS, m = e / BQ, gm = row0 + m, gk = (e % BQ) * 4;
                    next_a[v] = e < BM * BQ && gm < pc.m && gk < pc.k ? vec4(a4[(a_base + gm * pc.a_row + gk) >> 2]) : vec4(0.0);
                }
                for (uint v = 0; v < VB; v++) {
                    uint e = tid + v * THREADS, n = e / BQ, gn = col0 + n, gk = (e % BQ) * 4;
                    next_b[v] = vec4(0.0);
                    if (e < BN * BQ && gn < pc.n && gk < pc.k) next_b[v] = B_AT4(b_base + gn * pc.b_row + gk);
                }
            }
            for (uint v = 0; v < VA; v++) {
                uint e = tid + v * THREADS, m = e / BQ, q = (e % BQ) * 4;
                if (e < BM * BQ)
                    for (uint c = 0; c < 4; c++) tile_a[(q + c) * SA + m] = next_a[v][c];
            }
            for (uint v = 0; v < VB; v++) {
                uint e = tid + v * THREADS, n = e / BQ, q = (e % BQ) * 4;
                if (e < BN * BQ)
                    for (uint c = 0; c < 4; c++) tile_b[(q + c) * SB + n] = next_b[v][c];
            }
            barrier();
            // the next slice into registers while this one is multiplied
            uint k1 = k0 + BK;
            if (k1 < pc.k) {
                for (uint v = 0; v < VA; v++) {
                    uint e = tid + v * THREADS, m = e / BQ, gm = row0 + m, gk = k1 + (e % BQ) * 4;
                    next_a[v] = e < BM * BQ && gm < pc.m && gk < pc.k ? vec4(a4[(a_base + gm * pc.a_row + gk) >> 2]) : vec4(0.0);
                }
                for (uint v = 0; v < VB; v++) {
                    uint e = tid + v * THREADS, n = e / BQ, gn = col0 + n, gk = k1 + (e % BQ) * 4;
                    next_b[v] = vec4(0.0);
                    if (e < BN * BQ && gn < pc.n && gk < pc.k) next_b[v] = B_AT4(b_base + gn * pc.b_row + gk);
                }
            }
            MULTIPLY_SLICE();
            barrier();
        }
    } else {
        for (uint k0 = 0; k0 < pc.k; k0 += BK) {
            // Stage A: consecutive invocations read consecutive k of one row.
            for (uint i = tid; i < BM * BK; i += THREADS) {
                uint m = i / BK, kk = i % BK;
                uint gm = row0 + m, gk = k0 + kk;
                tile_a[kk * SA + m] = (gm < pc.m && gk < pc.k) ? float(a[a_base + gm * pc.a_row + gk]) : 0.0;
            }
            // Stage B along its contiguous axis.
            for (uint i = tid; i < BN * BK; i += THREADS) {
                uint n, kk;
                if (b_kn) { n = i % BN; kk = i / BN; }
                else { n = i / BK; kk = i % BK; }
                uint gn = col0 + n, gk = k0 + kk;
                float v = 0.0;
                // each branch converts on its own: a select of two halves would be F16 arithmetic
                if (gn < pc.n && gk < pc.k) v = b_kn ? B_AT(b_base + gk * pc.b_row + gn) : B_AT(b_base + gn * pc.b_row + gk);
                tile_b[kk * SB + n] = v;
            }
            barrier();
            MULTIPLY_SLICE();
            barrier();
        }
    }

    // The epilogue takes row 0 of acc, then shifts the rows up (and the same along a
    // row): every index into acc stays constant once the short loops are unrolled,
    // where an index of the (not unrolled) store loop would put acc in scratch
    // memory (NVK) or behind select chains (RADV).
    for (uint i = 0; i < TM; i++) {
        float r[TN];
        for (uint j = 0; j < TN; j++) r[j] = acc[j];
        for (uint q = 0; q + 1 < TM; q++)
            for (uint j = 0; j < TN; j++) acc[q * TN + j] = acc[(q + 1) * TN + j];
        uint row = row0 + row_of(ty, i);
        for (uint j = 0; j < TN; j++) {
            float v = r[0];
            for (uint q = 0; q + 1 < TN; q++) r[q] = r[q + 1];
            uint col = col0 + col_of(tx, j);
            if (row < pc.m && col < pc.n) store_output(b0, b1, row, col, v);
        }
    }
}

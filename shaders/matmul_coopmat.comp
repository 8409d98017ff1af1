#version 450
// C = act(alpha * A·Bᵀ + bias) + R on cooperative matrices (tensor cores): fp16
// fragments, fp32 accumulators. A (m, k), B (n, k) or (k, n) (FLAG_B_KN), C and R
// (m, n), per batch item (z of the grid), the same contract and push constants as
// matmul_tiled.comp. Any m, n, k: staging reads 0 past the edges, the epilogue
// stores only in-range elements.
//
// Built twice: KHR (GL_KHR_cooperative_matrix; FM x FN x FK must be a shape the
// device reports for f16 x f16 -> f32 at subgroup scope) and, with -DNV2,
// GL_NV_cooperative_matrix2, whose flexible dimensions allow any FM, FN, FK that
// are multiples of the device's granularity (up to its maximum dimension); the
// host makes each subgroup tile one fragment there (FM = TM, FN = TN, FK = BK).
// The NV2 build is SPIR-V 1.6 (--target-env=vulkan1.3); flexible dimensions need
// no SPIR-V capability, only the device feature, which the context enables.
//
// One workgroup computes a BM x BN tile of C with (BM / TM) x (BN / TN) subgroup
// tiles; each subgroup tile is TM x TN = (TM / FM) x (TN / FN) accumulator
// fragments. K advances BK at a time: the workgroup converts A and B to fp16 in
// shared memory (the buffers hold float or float16_t), then each subgroup runs
// BK / FK steps of fragment multiply-adds. At the end each subgroup stores its
// accumulators one row of fragments (FM x TN) at a time to its own fp32 scratch in
// shared memory, and its lanes apply store_output (bias, activation, residual) to
// the in-range elements: no workgroup-wide C tile, so shared memory stays small
// and tiles can grow, and the epilogue's code is repeated SM times, not SM x SN
// (compile time). Shared memory:
// 2 * (BM + BN) * (BK + 8) + 4 * (BM / TM) * (BN / TN) * FM * (TN + 4) bytes
// (src/ops.c checks it against the device).
//
// Subgroups: a subgroup tile is worked by subgroup gl_SubgroupID; where the
// driver runs fewer subgroups than tiles (a bigger subgroup than WORKGROUP was
// sized for), the workgroup makes more passes over K, so the result never depends
// on the subgroup size, only the speed does.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifdef NV2
#extension GL_NV_cooperative_matrix2 : require
#endif
#include "common.glsl"
#include "matmul_push.glsl"
#include "act.glsl"

// Specialization constants (ids match vkf_matmul_tiles plus the fragment shape):
layout(local_size_x_id = 0) in;                 // WORKGROUP: invocations = subgroup tiles x subgroup size
layout(constant_id = 1) const uint BM = 32;     // rows of C per workgroup (a multiple of TM)
layout(constant_id = 2) const uint BN = 32;     // columns of C per workgroup (a multiple of TN)
layout(constant_id = 3) const uint BK = 32;     // K per shared-memory stage (a multiple of FK and of 8)
layout(constant_id = 4) const uint TM = 16;     // rows per subgroup tile (a multiple of FM)
layout(constant_id = 5) const uint TN = 16;     // columns per subgroup tile (a multiple of FN)
layout(constant_id = 6) const uint FM = 8;      // fragment rows: A is FM x FK, the accumulator FM x FN
layout(constant_id = 7) const uint FN = 8;      // fragment columns: B is FK x FN
layout(constant_id = 8) const uint FK = 8;      // fragment depth

const uint WG_M = BM / TM, WG_N = BN / TN;      // subgroup tiles per workgroup: rows, columns
const uint SM = TM / FM, SN = TN / FN;          // fragments per subgroup tile: rows, columns
// Row strides of the shared tiles, padded by 16 bytes (fragment loads and stores
// want 16-byte aligned rows; the padding also spreads rows over banks).
const uint LDA = BK + 8;                        // tile_a (BM, LDA), f16
const uint LDB = BK + 8;                        // tile_b (BN, LDB), f16: B's rows, loaded as column-major (FK, FN)
const uint LDS = TN + 4;                        // scratch (subgroup tiles, FM, LDS), f32

// The vec4 views serve FLAG_VEC4 (k and every row start a multiple of 4, B (n, k)).
layout(set = 0, binding = 0) readonly buffer BufA { ACT_T a[]; };
layout(set = 0, binding = 0) readonly buffer BufA4 { ACT_T4 a4[]; };
#if defined(B_I8)
#include "matmul_b_i8.glsl"
#elif defined(B_F16)
#extension GL_EXT_shader_16bit_storage : require
layout(set = 0, binding = 1) readonly buffer BufB { float16_t b[]; };
layout(set = 0, binding = 1) readonly buffer BufB4 { f16vec4 b4[]; };
#define B_AT(i) float(b[i])
#define B_AT4(i) vec4(b4[(i) >> 2])
#else
layout(set = 0, binding = 1) readonly buffer BufB { float b[]; };
layout(set = 0, binding = 1) readonly buffer BufB4 { vec4 b4[]; };
#define B_AT(i) float(b[i])
#define B_AT4(i) vec4(b4[(i) >> 2])
#endif
layout(set = 0, binding = 2) readonly buffer BufBias { float bias[]; };
layout(set = 0, binding = 3) readonly buffer BufR { ACT_T res[]; };
layout(set = 0, binding = 4) writeonly buffer BufC { ACT_T c[]; };

#include "matmul_epilogue.glsl"

shared float16_t tile_a[BM * LDA];
shared float16_t tile_b[BN * LDB];
shared float scratch[WG_M * WG_N * FM * LDS];   // one row of fragments per subgroup tile

void main()
{
    const uint threads = gl_WorkGroupSize.x;
    const uint tid = gl_LocalInvocationID.x;
    const uint z = gl_WorkGroupID.z;
    const uint b0 = z / pc.batch_inner, b1 = z % pc.batch_inner;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint a_base = pc.a_offset + b0 * pc.a_batch0 + b1 * pc.a_batch1;
    const uint b_base = pc.b_offset + b0 * pc.b_batch0 + b1 * pc.b_batch1;
    const bool b_kn = (pc.flags & FLAG_B_KN) != 0u;
    const bool vec4_loads = (pc.flags & FLAG_VEC4) != 0u;
    const uint tiles = WG_M * WG_N;
    const uint subgroups = gl_NumSubgroups;

    for (uint pass = 0; pass * subgroups < tiles; pass++) {
        const uint tile = pass * subgroups + gl_SubgroupID;   // this subgroup's tile (none when >= tiles)
        const uint tr = (tile / WG_N) * TM, tc = (tile % WG_N) * TN;   // its origin in the workgroup tile
        coopmat<float, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator> acc[SM * SN];
        for (uint i = 0; i < SM * SN; i++) acc[i] = coopmat<float, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator>(0.0);

        for (uint k0 = 0; k0 < pc.k; k0 += BK) {
            if (vec4_loads) {
                // Four k at a time (k0 + kk is a multiple of 4, so gk < k covers gk + 3).
                for (uint i = tid; i < BM * BK / 4; i += threads) {
                    uint m = i / (BK / 4), kk = i % (BK / 4) * 4;
                    uint gm = row0 + m, gk = k0 + kk;
                    f16vec4 v = f16vec4(0.0);
                    if (gm < pc.m && gk < pc.k) v = f16vec4(a4[(a_base + gm * pc.a_row + gk) >> 2]);
                    uint o = m * LDA + kk;
                    tile_a[o] = v.x, tile_a[o + 1] = v.y, tile_a[o + 2] = v.z, tile_a[o + 3] = v.w;
                }
                for (uint i = tid; i < BN * BK / 4; i += threads) {
                    uint n = i / (BK / 4), kk = i % (BK / 4) * 4;
                    uint gn = col0 + n, gk = k0 + kk;
                    f16vec4 v = f16vec4(0.0);
                    if (gn < pc.n && gk < pc.k) v = f16vec4(B_AT4(b_base + gn * pc.b_row + gk));
                    uint o = n * LDB + kk;
                    tile_b[o] = v.x, tile_b[o + 1] = v.y, tile_b[o + 2] = v.z, tile_b[o + 3] = v.w;
                }
            } else {
                // Stage A (BM, BK) one element at a time: consecutive invocations
                // read consecutive k of one row.
                for (uint i = tid; i < BM * BK; i += threads) {
                    uint m = i / BK, kk = i % BK;
                    uint gm = row0 + m, gk = k0 + kk;
                    float16_t v = float16_t(0.0);
                    if (gm < pc.m && gk < pc.k) v = float16_t(a[a_base + gm * pc.a_row + gk]);
                    tile_a[m * LDA + kk] = v;
                }
                // Stage B (BN, BK) along its contiguous axis.
                for (uint i = tid; i < BN * BK; i += threads) {
                    uint n, kk;
                    if (b_kn) { n = i % BN; kk = i / BN; }
                    else { n = i / BK; kk = i % BK; }
                    uint gn = col0 + n, gk = k0 + kk;
                    float16_t v = float16_t(0.0);
                    if (gn < pc.n && gk < pc.k)
                        v = float16_t(b_kn ? B_AT(b_base + gk * pc.b_row + gn) : B_AT(b_base + gn * pc.b_row + gk));
                    tile_b[n * LDB + kk] = v;
                }
            }
            barrier();
            if (tile < tiles) {
                for (uint kk = 0; kk < BK; kk += FK) {
                    coopmat<float16_t, gl_ScopeSubgroup, FM, FK, gl_MatrixUseA> fa[SM];
                    coopmat<float16_t, gl_ScopeSubgroup, FK, FN, gl_MatrixUseB> fb[SN];
                    for (uint i = 0; i < SM; i++)
                        coopMatLoad(fa[i], tile_a, (tr + i * FM) * LDA + kk, LDA, gl_CooperativeMatrixLayoutRowMajor);
                    for (uint j = 0; j < SN; j++)
                        coopMatLoad(fb[j], tile_b, (tc + j * FN) * LDB + kk, LDB, gl_CooperativeMatrixLayoutColumnMajor);
                    for (uint i = 0; i < SM; i++)
                        for (uint j = 0; j < SN; j++) acc[i * SN + j] = coopMatMulAdd(fa[i], fb[j], acc[i * SN + j]);
                }
            }
            barrier();
        }
        if (tile < tiles) {
            // Epilogue: a row of fragments at a time through this subgroup's scratch
            // (a subgroup with a tile has gl_SubgroupID < tiles: slots never clash).
            const uint base = gl_SubgroupID * FM * LDS;
            for (uint i = 0; i < SM; i++) {
                for (uint j = 0; j < SN; j++)
                    coopMatStore(acc[i * SN + j], scratch, base + j * FN, LDS, gl_CooperativeMatrixLayoutRowMajor);
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                for (uint e = gl_SubgroupInvocationID; e < FM * TN; e += gl_SubgroupSize) {
                    uint row = row0 + tr + i * FM + e / TN, col = col0 + tc + e % TN;
                    if (row < pc.m && col < pc.n) store_output(b0, b1, row, col, scratch[base + (e / TN) * LDS + e % TN]);
                }
                subgroupBarrier();                  // read before the next row overwrites it
            }
        }
    }
}

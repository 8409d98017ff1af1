#version 450
// C = act(alpha * A·Bᵀ + bias) + R on cooperative matrices (tensor cores): fp16
// fragments, fp32 accumulators. A (m, k), B (n, k) or (k, n) (FLAG_B_KN), C and R
// (m, n), per batch item, the same contract and push constants as
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
// With -DSPLIT_K the kernel writes fp32 partial sums of one K range instead of C
// (split-K; matmul_splitk.comp adds them and applies the epilogue).
//
// The form of the fast GPU GEMMs (ggml-vulkan's mul_mm, NVIDIA's coopmat sample):
// - One workgroup computes a BM x BN tile of C with (BM / TM) x (BN / TN)
//   subgroups ("warp tiles"); each holds TM x TN = (TM / FM) x (TN / FN) (at most 16)
//   accumulator fragments in registers for the whole K loop.
// - K advances BK at a time through one shared stage of A (BM, BK) and B (BN, BK)
//   in fp16, rows padded by 16 bytes (fragment loads want 16-byte aligned rows;
//   the padding spreads rows over banks). Each invocation moves 4 consecutive k
//   as one f16vec4: from global memory with one 16-byte vec4 load (FLAG_VEC4) or
//   four scalar ones (B (k, n), unaligned views, edges).
// - Double buffering in registers: the next K slice is loaded from global memory
//   into registers while the subgroups multiply the current one out of shared
//   memory, then stored to shared memory after a barrier; global latency hides
//   behind the matrix instructions.
// - Epilogue per fragment: where the fragment lies inside C and C's rows are
//   16-byte aligned (FLAG_C_ALIGNED), alpha, the bias (loaded as a matrix of
//   stride 0), the activation (element-wise), the int8 scales and the residual
//   are applied on the accumulator and it is stored straight to C with
//   coopMatStore; elsewhere (the edges) it goes through this subgroup's
//   fragment of fp32 scratch in shared memory, and its lanes store the in-range
//   elements with store_output.
// Shared memory: 2 * (BM + BN) * (BK + 8) + 4 * (BM / TM) * (BN / TN) * FM * (FN + 4)
// bytes (tuning.c checks it against the device).
//
// Loops over fragments and staging slots are unrolled ([[unroll]]), so that the
// accumulator array is indexed by constants and can live in registers (RADV keeps
// it there; NVK 26.2 still puts it in local memory, and crashed compiling the
// form with 16 separate accumulator variables).
//
// Subgroups: a subgroup tile is worked by subgroup gl_SubgroupID; where the
// driver runs fewer subgroups than tiles (a bigger subgroup than WORKGROUP was
// sized for), the workgroup makes more passes over K, so the result never depends
// on the subgroup size, only the speed does.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#ifdef NV2
#extension GL_NV_cooperative_matrix2 : require
#endif
#include "common.glsl"
#include "matmul_push.glsl"
#include "act.glsl"

// Specialization constants (ids match vkf_matmul_tiles plus the fragment shape):
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP = 64;  // invocations = subgroup tiles x subgroup size
layout(constant_id = 1) const uint BM = 32;     // rows of C per workgroup (a multiple of TM)
layout(constant_id = 2) const uint BN = 32;     // columns of C per workgroup (a multiple of TN)
layout(constant_id = 3) const uint BK = 32;     // K per shared-memory stage (a multiple of FK and of 8)
layout(constant_id = 4) const uint TM = 16;     // rows per subgroup tile (a multiple of FM)
layout(constant_id = 5) const uint TN = 16;     // columns per subgroup tile (a multiple of FN)
layout(constant_id = 6) const uint FM = 8;      // fragment rows: A is FM x FK, the accumulator FM x FN
layout(constant_id = 7) const uint FN = 8;      // fragment columns: B is FK x FN
layout(constant_id = 8) const uint FK = 8;      // fragment depth (a multiple of 4)

const uint WG_M = BM / TM, WG_N = BN / TN;      // subgroup tiles per workgroup: rows, columns
const uint SM = TM / FM, SN = TN / FN;          // fragments per subgroup tile: rows, columns
const uint BK4 = BK / 4;                        // f16vec4 per row of a K slice
const uint LD4 = BK4 + 2;                       // row stride of the shared stages in f16vec4 (+16 bytes)
const uint LDF = FN + 4;                        // row stride of a scratch fragment in floats
const uint A_SLOTS = BM * BK4, B_SLOTS = BN * BK4;  // f16vec4 per stage of A, of B
const uint A_LOADS = (A_SLOTS + WORKGROUP - 1) / WORKGROUP;  // per invocation
const uint B_LOADS = (B_SLOTS + WORKGROUP - 1) / WORKGROUP;

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
#ifdef SPLIT_K
// (splits, batch items, m, n) fp32 partial sums, split s of item z at (s * items + z) * m * n
layout(set = 0, binding = 4) writeonly buffer BufPart { float c[]; };
#else
layout(set = 0, binding = 4) writeonly buffer BufC { ACT_T c[]; };
#include "matmul_epilogue.glsl"
#endif

shared f16vec4 tile_a[BM * LD4];                // (BM, LD4): rows of A, 4 k per element
shared f16vec4 tile_b[BN * LD4];                // (BN, LD4): rows of Bᵀ, read as column-major (FK, FN)
shared float scratch[WG_M * WG_N * FM * LDF];   // one fragment per subgroup tile (edges)

// The next K slice, in flight from global memory while the current one multiplies.
f16vec4 next_a[A_LOADS];
f16vec4 next_b[B_LOADS];

#define ACC coopmat<float, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator>

// Loads the K slice [k0, k0 + BK) of A's rows row0.. and B's rows col0.. into
// next_a, next_b; zeros past m, n and kend.
void load_slice(uint k0, uint kend, uint row0, uint col0, uint a_base, uint b_base)
{
    const uint tid = gl_LocalInvocationID.x;
    const bool vec4_loads = (pc.flags & FLAG_VEC4) != 0u, b_kn = (pc.flags & FLAG_B_KN) != 0u;
    [[unroll]] for (uint r = 0; r < A_LOADS; r++) {
        uint i = tid + r * WORKGROUP;
        uint gm = row0 + i / BK4, gk = k0 + i % BK4 * 4;
        f16vec4 v = f16vec4(0.0);
        if (i < A_SLOTS && gm < pc.m) {
            uint at = a_base + gm * pc.a_row + gk;
            if (vec4_loads) {
                if (gk < kend) v = f16vec4(a4[at >> 2]);     // kend and gk are multiples of 4 here
            } else {
                [[unroll]] for (uint e = 0; e < 4; e++)
                    if (gk + e < kend) v[e] = float16_t(a[at + e]);
            }
        }
        next_a[r] = v;
    }
    [[unroll]] for (uint r = 0; r < B_LOADS; r++) {
        uint i = tid + r * WORKGROUP;
        // B (k, n): consecutive invocations take consecutive columns (coalesced).
        uint n = b_kn ? i % BN : i / BK4, kq = b_kn ? i / BN : i % BK4;
        uint gn = col0 + n, gk = k0 + kq * 4;
        f16vec4 v = f16vec4(0.0);
        if (i < B_SLOTS && gn < pc.n) {
            if (b_kn) {
                [[unroll]] for (uint e = 0; e < 4; e++)
                    if (gk + e < kend) v[e] = float16_t(B_AT(b_base + (gk + e) * pc.b_row + gn));
            } else {
                uint at = b_base + gn * pc.b_row + gk;
                if (vec4_loads) {
                    if (gk < kend) v = f16vec4(B_AT4(at));
                } else {
                    [[unroll]] for (uint e = 0; e < 4; e++)
                        if (gk + e < kend) v[e] = float16_t(B_AT(at + e));
                }
            }
        }
        next_b[r] = v;
    }
}

// Writes next_a, next_b to the shared stage.
void store_slice()
{
    const uint tid = gl_LocalInvocationID.x;
    const bool b_kn = (pc.flags & FLAG_B_KN) != 0u;
    [[unroll]] for (uint r = 0; r < A_LOADS; r++) {
        uint i = tid + r * WORKGROUP;
        if (i < A_SLOTS) tile_a[i / BK4 * LD4 + i % BK4] = next_a[r];
    }
    [[unroll]] for (uint r = 0; r < B_LOADS; r++) {
        uint i = tid + r * WORKGROUP;
        uint n = b_kn ? i % BN : i / BK4, kq = b_kn ? i / BN : i % BK4;
        if (i < B_SLOTS) tile_b[n * LD4 + kq] = next_b[r];
    }
}

#ifndef SPLIT_K
// act(alpha * scale * acc + bias) + R on the fragment at (row, col), stored to C.
// The fragment lies inside C, whose rows are 16-byte aligned (FLAG_C_ALIGNED).
void store_fragment(ACC v, uint b0, uint b1, uint row, uint col)
{
#ifdef B_I8
    ACC s;
    coopMatLoad(s, b_scale, col, 0, gl_CooperativeMatrixLayoutRowMajor);   // stride 0: every row the same
    v = v * s;
#endif
    v = v * pc.alpha;
    if ((pc.flags & FLAG_BIAS) != 0u) {
        ACC bm;
        coopMatLoad(bm, bias, col, 0, gl_CooperativeMatrixLayoutRowMajor);
        v = v + bm;
    }
    const uint act = (pc.flags >> 4) & 7u;
    if (act != 0u)
        [[unroll]] for (int e = 0; e < v.length(); e++) v[e] = activate(v[e], act);
    if ((pc.flags & FLAG_RESIDUAL) != 0u) {
        coopmat<ACT_T, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator> rm;
        coopMatLoad(rm, res, pc.r_offset + b0 * pc.r_batch0 + b1 * pc.r_batch1 + row * pc.r_row + col, pc.r_row,
                    gl_CooperativeMatrixLayoutRowMajor);
        v = v + ACC(rm);
    }
    coopmat<ACT_T, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator> o = coopmat<ACT_T, gl_ScopeSubgroup, FM, FN, gl_MatrixUseAccumulator>(v);
    coopMatStore(o, c, pc.c_offset + b0 * pc.c_batch0 + b1 * pc.c_batch1 + row * pc.c_row + col, pc.c_row,
                 gl_CooperativeMatrixLayoutRowMajor);
}
#endif

// Stores fragment acc, whose origin is (row, col) of C (or of the partial sums):
// directly where it lies inside C (all of the workgroup's tile: wg_inside),
// else through this subgroup's scratch fragment with bounds checks. At the edges
// every subgroup passes the same subgroup barriers for each fragment, direct or
// not (lavapipe loses stores when the subgroups of one workgroup pass different
// numbers of them).
void store_acc(ACC acc, uint row, uint col, uint item, uint split, uint splits, uint b0, uint b1, bool wg_inside)
{
    const uint slot = gl_SubgroupID * FM * LDF;
    const bool direct = wg_inside || ((pc.flags & FLAG_C_ALIGNED) != 0u && row + FM <= pc.m && col + FN <= pc.n);
#ifdef SPLIT_K
    const uint part = (split * (gl_NumWorkGroups.z / splits) + item) * pc.m * pc.n;
#endif
    if (!wg_inside) {
        if (!direct) coopMatStore(acc, scratch, slot, LDF, gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
    }
    if (direct) {
#ifdef SPLIT_K
        coopMatStore(acc, c, part + row * pc.n + col, pc.n, gl_CooperativeMatrixLayoutRowMajor);
#else
        store_fragment(acc, b0, b1, row, col);
#endif
    } else {
        for (uint e = gl_SubgroupInvocationID; e < FM * FN; e += gl_SubgroupSize) {
            uint r = row + e / FN, cc = col + e % FN;
            if (r < pc.m && cc < pc.n) {
                float v = scratch[slot + (e / FN) * LDF + e % FN];
#ifdef SPLIT_K
                c[part + r * pc.n + cc] = v;
#else
                store_output(b0, b1, r, cc, v);
#endif
            }
        }
    }
    if (!wg_inside) subgroupBarrier();          // read before the next fragment overwrites it
}

void main()
{
    const uint z = gl_WorkGroupID.z;
#ifdef SPLIT_K
    // z = batch item * splits + split; each split sums K in [kbeg, kend).
    const uint splits = (pc.k + pc.k_split - 1u) / pc.k_split;
    const uint item = z / splits, split = z % splits;
    const uint kbeg = split * pc.k_split, kend = min(pc.k, kbeg + pc.k_split);
#else
    const uint item = z, kbeg = 0u, kend = pc.k, split = 0u, splits = 1u;
#endif
    const uint b0 = item / pc.batch_inner, b1 = item % pc.batch_inner;
    const uint row0 = gl_WorkGroupID.y * BM;
    const uint col0 = gl_WorkGroupID.x * BN;
    const uint a_base = pc.a_offset + b0 * pc.a_batch0 + b1 * pc.a_batch1;
    const uint b_base = pc.b_offset + b0 * pc.b_batch0 + b1 * pc.b_batch1;
    const uint tiles = WG_M * WG_N;
    const uint subgroups = gl_NumSubgroups;
    const bool aligned = (pc.flags & FLAG_C_ALIGNED) != 0u;

    for (uint pass = 0; pass * subgroups < tiles; pass++) {
        const uint tile = pass * subgroups + gl_SubgroupID;   // this subgroup's tile (none when >= tiles)
        const uint tr = (tile / WG_N) * TM, tc = (tile % WG_N) * TN;   // its origin in the workgroup tile
        ACC acc[SM * SN];
        [[unroll]] for (uint i = 0; i < SM * SN; i++) acc[i] = ACC(0.0);

        load_slice(kbeg, kend, row0, col0, a_base, b_base);
        for (uint k0 = kbeg; k0 < kend; k0 += BK) {
            store_slice();
            barrier();
            if (k0 + BK < kend) load_slice(k0 + BK, kend, row0, col0, a_base, b_base);  // in flight during the MMAs
            if (tile < tiles) {
                [[unroll]] for (uint kk = 0; kk < BK4; kk += FK / 4) {
                    coopmat<float16_t, gl_ScopeSubgroup, FM, FK, gl_MatrixUseA> fa[SM];
                    coopmat<float16_t, gl_ScopeSubgroup, FK, FN, gl_MatrixUseB> fb[SN];
                    [[unroll]] for (uint i = 0; i < SM; i++)
                        coopMatLoad(fa[i], tile_a, (tr + i * FM) * LD4 + kk, LD4, gl_CooperativeMatrixLayoutRowMajor);
                    [[unroll]] for (uint j = 0; j < SN; j++)
                        coopMatLoad(fb[j], tile_b, (tc + j * FN) * LD4 + kk, LD4, gl_CooperativeMatrixLayoutColumnMajor);
[[unroll]] for (uint i = 0; i < SM; i++)
                        [[unroll]] for (uint j = 0; j < SN; j++) acc[i * SN + j] = coopMatMulAdd(fa[i], fb[j], acc[i * SN + j]);
                }
            }
            barrier();
        }
        if (tile >= tiles) continue;
        // Epilogue, fragment by fragment (a subgroup with a tile has gl_SubgroupID <
        // tiles: scratch slots never clash).
const bool wg_inside = aligned && row0 + BM <= pc.m && col0 + BN <= pc.n;
        [[unroll]] for (uint i = 0; i < SM; i++)
            [[unroll]] for (uint j = 0; j < SN; j++)
                store_acc(acc[i * SN + j], row0 + tr + i * FM, col0 + tc + j * FN, item, split, splits, b0, b1, wg_inside);
    }
}
